#define _GNU_SOURCE
#include "conn.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/util.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#include "audit.h"
#include "hostspec.h"
#include "http.h"
#include "inject.h"
#include "resolve.h"
#include "secbuf.h"
#include "scrub.h"
#include "sessca.h"
#include "session.h"
#include "tlsctx.h"
#include "verr.h"

/* Backpressure: stop reading a side while the other's output exceeds HIGH. */
#define WM_HIGH (256 * 1024)
#define WM_LOW  (64 * 1024)

/*
 * Response bytes staged up to this size are joined before TLS sees them:
 * the TLS layer writes one record per buffer piece, and a small response
 * (head, chunk, terminator) should be one record, not three.
 */
#define STAGE_JOIN (16 * 1024)

/*
 * The slowest a request body may arrive, or a client may read its
 * response: this many bytes per exchange timeout. A trickle that moves a
 * byte now and then resets every idle timeout; this rule does not reset.
 */
#define PACE_MIN 1024

enum conn_state {
	C_FIRST_HEAD = 1, /* reading CONNECT or an absolute-form request */
	C_UP_CONNECTING,  /* resolving and connecting upstream */
	C_TUNNEL,         /* --allow-host: bytes copied both ways, unseen */
	C_TLS_ACCEPT,     /* client TLS handshake with the minted leaf */
	C_REQ_HEAD,       /* waiting for the next request head */
	C_EXCHANGE,       /* request head sent: bodies stream both ways */
	C_CLOSING,        /* last bytes to the client, then close */
};

struct conn {
	struct session *s;
	struct conn_list *list;
	struct conn *prev, *next;
	enum conn_state state;
	struct bufferevent *cli; /* client: plain socket, or TLS filter over it */
	struct bufferevent *up;  /* upstream: TLS or plain */
	struct evdns_getaddrinfo_request *dns;
	struct event *linger;   /* polls the socket below TLS while closing */
	struct event *deadline; /* a request head must be complete by then */
	struct event *pace;     /* checks the client keeps up while relaying */
	uint64_t pace_up;       /* body bytes received at the last check */
	uint64_t pace_down;     /* response bytes delivered at the last check */
	int pace_stuck;         /* response bytes were waiting at the last check */
	struct hostspec target; /* canonical destination */
	int tunnel;             /* opaque (--allow-host) */
	int plain;              /* plain-HTTP absolute-form request */
	int up_ready;           /* upstream connected (and TLS verified) */
	struct http_limits limits;
	size_t head_scanned; /* bytes of an incomplete head already parsed */
	/* The request being relayed. */
	struct secbuf *head; /* upstream request head: holds the secret */
	int req_is_head;
	int req_body;
	uint64_t req_left;
	struct http_chunked req_chunk;
	int req_done;
	int client_keep_alive;
	/* Its response. */
	int resp_started;
	int resp_status;
	int up_keep_alive;
	int resp_body;
	uint64_t resp_left;
	struct http_chunked resp_chunk;
	struct scrub_stream *scrub; /* response bodies' scrubber, reused per connection */
	uint64_t scrub_base;        /* its count when the current body started */
	struct evbuffer *scratch;   /* scrubbed output on its way to the client */
	struct evbuffer *stage;     /* response bytes for the client, sent in one piece */
	int chunked_out;            /* re-chunking the body for the client */
	int client_minor;           /* HTTP/1.x of the current request */
	/* Accounting of the current request, for status and the audit record. */
	uint64_t bytes_up, bytes_down, scrubbed;
	int injected;
	int in_request; /* a request is under way and owes its record */
	int audited;    /* ... and has it */
	struct timespec t_start;
	char a_method[24];
	char *a_target;        /* request-target as received (query values redacted later) */
	const char *a_key;     /* key injected, or bound and withheld */
	const char *a_why;     /* reason for an allowed request */
	const char *close_why; /* reason conn_close records, when not the default */
	int close_denied;      /* ... and whether it was a refusal */
};

static void conn_close(struct conn *c);
static void start_tls(struct conn *c);
static void parse_request(struct conn *c);
static void response_done(struct conn *c);
static int finish_body(struct conn *c);
static void client_read(struct bufferevent *bev, void *arg);
static void upstream_read(struct bufferevent *bev, void *arg);
static void pump(struct conn *c);

/* ---- state and errors ---- */

/* Never buffer more unparsed input than the largest head we would accept. */
static void
bound_input(struct conn *c, struct bufferevent *bev)
{
	bufferevent_setwatermark(bev, EV_READ, 0, c->limits.max_head + 1);
}

/*
 * Reading and writing both time out: a peer that stops reading holds
 * output that cannot drain. Below a TLS filter the socket's own output
 * must drain too.
 */
static void
set_timeouts(struct bufferevent *bev, int sec)
{
	struct timeval tv = {sec, 0};
	struct bufferevent *under;

	if (bev == NULL)
		return;
	bufferevent_set_timeouts(bev, &tv, &tv);
	if ((under = bufferevent_get_underlying(bev)) != NULL)
		bufferevent_set_timeouts(under, NULL, &tv);
}

static void arm_pace(struct conn *c);

static void
arm_deadline(struct conn *c)
{
	struct timeval tv = {session_timeouts(c->s)->head, 0};

	if (c->deadline != NULL && !evtimer_pending(c->deadline, NULL))
		evtimer_add(c->deadline, &tv);
}

int
conn_timeout_set(struct conn_timeouts *t, const char *spec)
{
	static const struct {
		const char *name;
		size_t off;
	} names[] = {{"head", offsetof(struct conn_timeouts, head)},
	             {"idle", offsetof(struct conn_timeouts, idle)},
	             {"connect", offsetof(struct conn_timeouts, connect)},
	             {"handshake", offsetof(struct conn_timeouts, handshake)},
	             {"exchange", offsetof(struct conn_timeouts, exchange)}};
	const char *eq = strchr(spec, '=');
	char *end;
	long v;

	if (eq == NULL || eq[1] < '0' || eq[1] > '9')
		return VERR_INVALID;
	errno = 0;
	v = strtol(eq + 1, &end, 10);
	if (errno != 0 || *end != '\0' || v < 1 || v > CONN_TIMEOUT_MAX)
		return VERR_INVALID;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strlen(names[i].name) == (size_t)(eq - spec) &&
		    strncmp(names[i].name, spec, (size_t)(eq - spec)) == 0) {
			*(int *)(void *)((char *)t + names[i].off) = (int)v;
			return VERR_OK;
		}
	return VERR_INVALID;
}

/* The one place the state changes, with the timeout that goes with it. */
static void
set_state(struct conn *c, enum conn_state st)
{
	const struct conn_timeouts *t = session_timeouts(c->s);

	c->state = st;
	/*
	 * The first head has its deadline from the accept; later heads from
	 * their first byte (parse_request). Resetting on every byte would let
	 * a client that trickles a head hold the connection for ever.
	 */
	if (st == C_FIRST_HEAD)
		arm_deadline(c);
	else if (c->deadline != NULL)
		evtimer_del(c->deadline);
	if (st == C_EXCHANGE)
		arm_pace(c);
	else if (c->pace != NULL)
		evtimer_del(c->pace);
	switch (st) {
	case C_FIRST_HEAD:
	case C_REQ_HEAD:
		set_timeouts(c->cli, st == C_REQ_HEAD && c->up_ready ? t->idle : t->head);
		break;
	case C_UP_CONNECTING:
		set_timeouts(c->cli, t->connect);
		set_timeouts(c->up, t->connect);
		break;
	case C_TLS_ACCEPT:
		set_timeouts(c->cli, t->handshake);
		break;
	case C_TUNNEL:
	case C_EXCHANGE:
		set_timeouts(c->cli, t->exchange);
		set_timeouts(c->up, t->exchange);
		break;
	case C_CLOSING:
		set_timeouts(c->cli, t->handshake);
		break;
	}
}

/* ---- audit: one record per request, written before the answer is complete ---- */

static void
req_begin(struct conn *c, const char *method, size_t mlen, const char *target, size_t tlen)
{
	free(c->a_target);
	c->a_target = strndup(target, tlen);
	snprintf(c->a_method, sizeof(c->a_method), "%.*s", (int)mlen, method);
	c->a_key = NULL;
	c->a_why = NULL;
	c->injected = 0;
	c->scrubbed = 0;
	c->bytes_up = c->bytes_down = 0;
	c->audited = 0;
	c->in_request = 1;
	clock_gettime(CLOCK_MONOTONIC, &c->t_start);
}

/* Write this request's record (once). Non-zero: it could not be written. */
static int
req_audit(struct conn *c, int status, int denied, const char *reason)
{
	struct audit_request r;
	struct timespec now;
	char host[HOSTSPEC_NAME_MAX + 8] = "";

	if (!c->in_request || c->audited)
		return 0;
	c->audited = 1;
	if (c->target.port != 0)
		hostspec_format_host(&c->target, host, sizeof(host));
	clock_gettime(CLOCK_MONOTONIC, &now);
	memset(&r, 0, sizeof(r));
	r.key = c->a_key;
	r.method = c->a_method[0] != '\0' ? c->a_method : "-";
	r.host = host;
	r.port = c->target.port;
	r.target = c->a_target != NULL ? c->a_target : "";
	r.target_len = c->a_target != NULL ? strlen(c->a_target) : 0;
	r.status = status;
	r.bytes_up = c->bytes_up;
	r.bytes_down = c->bytes_down;
	r.duration_ms = (uint64_t)((now.tv_sec - c->t_start.tv_sec) * 1000 +
	                           (now.tv_nsec - c->t_start.tv_nsec) / 1000000);
	r.denied = denied;
	r.reason = reason;
	r.injected = c->injected;
	r.scrubbed = (unsigned)c->scrubbed;
	return session_audit_request(c->s, &r);
}

static void linger_check(evutil_socket_t fd, short what, void *arg);

/* While closing: a timeout or error ends it, the last bytes undelivered. */
static void
closing_event(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	(void)what;
	conn_close(arg);
}

/*
 * Close once the last bytes are on the wire. With TLS, the filter's own
 * output drains into the socket bufferevent below it, which must drain too.
 */
static void
finish_after_flush(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;
	struct bufferevent *under = bufferevent_get_underlying(bev);
	struct timeval tv = {0, 10 * 1000};

	if (evbuffer_get_length(bufferevent_get_output(bev)) != 0)
		return;
	if (under != NULL && evbuffer_get_length(bufferevent_get_output(under)) != 0) {
		if (c->linger == NULL &&
		    (c->linger = evtimer_new(session_base(c->s), linger_check, c)) == NULL) {
			conn_close(c);
			return;
		}
		evtimer_add(c->linger, &tv);
		return;
	}
	conn_close(c);
}

static void
linger_check(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;

	(void)fd;
	(void)what;
	finish_after_flush(c->cli, c);
}

/* Hand what the response staged to the client's side, joined when small. */
static void
send_staged(struct conn *c)
{
	struct evbuffer *out;
	size_t n = evbuffer_get_length(c->stage);

	if (n == 0 || c->cli == NULL)
		return;
	out = bufferevent_get_output(c->cli);
	if (n <= STAGE_JOIN)
		(void)evbuffer_pullup(c->stage, -1); /* on failure: more records, same bytes */
	evbuffer_add_buffer(out, c->stage);
	if (evbuffer_get_length(out) >= WM_HIGH && c->up != NULL) {
		bufferevent_disable(c->up, EV_READ);
		bufferevent_setwatermark(c->cli, EV_WRITE, WM_LOW, 0);
	}
}

/*
 * Answer with an error of vproxy's own and close once it is sent. denied:
 * the record's decision (a refusal by policy, rather than a failure upstream).
 */
static void
answer(struct conn *c, int status, const char *text, const char *why, const char *extra, int denied)
{
	struct evbuffer *out;

	send_staged(c); /* a relayed 1xx head comes first */
	if (!c->in_request)
		req_begin(c, "", 0, "", 0);
	/* A refusal is recorded before it is sent; without a record, 503. */
	if (req_audit(c, status, denied, why) != 0 && status != 503) {
		status = 503;
		text = "Service Unavailable";
		why = "the audit log cannot be written";
		extra = "";
	}
	if (c->cli == NULL || c->resp_started) {
		conn_close(c);
		return;
	}
	out = bufferevent_get_output(c->cli);
	evbuffer_add_printf(out,
	                    "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
	                    "%sConnection: close\r\n\r\nvrun: %s\n",
	                    status, text, strlen(why) + 6, extra, why);
	if (c->up != NULL) {
		bufferevent_free(c->up);
		c->up = NULL;
	}
	bufferevent_disable(c->cli, EV_READ);
	bufferevent_setcb(c->cli, NULL, finish_after_flush, closing_event, c);
	bufferevent_setwatermark(c->cli, EV_WRITE, 0, 0);
	set_state(c, C_CLOSING);
	bufferevent_enable(c->cli, EV_WRITE);
}

static void
respond(struct conn *c, int status, const char *text, const char *why, const char *extra)
{
	answer(c, status, text, why, extra, status != 502 && status != 504);
}

/* Answer the client with a short text error and close once it is sent. */
static void
respond_error(struct conn *c, int status, const char *text, const char *why)
{
	respond(c, status, text, why, "");
}

/* 502 for what vproxy refuses to pass on (as opposed to an upstream that failed). */
static void
refuse_upstream(struct conn *c, const char *why)
{
	answer(c, 502, "Bad Gateway", why, "", 1);
}

/* Refuse (503) when the request's record could not follow: nothing goes out. */
static int
audit_unready(struct conn *c)
{
	if (session_audit_ready(c->s) == 0)
		return 0;
	respond_error(c, 503, "Service Unavailable", "the audit log cannot be written");
	return 1;
}

/* Response bytes still on their way to the client, inside vproxy. */
static uint64_t
undelivered(struct conn *c)
{
	struct bufferevent *under = bufferevent_get_underlying(c->cli);
	uint64_t n =
	        evbuffer_get_length(bufferevent_get_output(c->cli)) + evbuffer_get_length(c->stage);

	if (under != NULL)
		n += evbuffer_get_length(bufferevent_get_output(under));
	return n;
}

static uint64_t
delivered(struct conn *c)
{
	uint64_t pending = undelivered(c);

	return c->bytes_down > pending ? c->bytes_down - pending : 0;
}

static void
arm_pace(struct conn *c)
{
	struct timeval tv = {session_timeouts(c->s)->exchange, 0};

	if (c->pace == NULL || c->cli == NULL)
		return;
	c->pace_up = c->bytes_up;
	c->pace_down = delivered(c);
	c->pace_stuck = 0;
	evtimer_add(c->pace, &tv);
}

/*
 * Every exchange timeout while relaying: a request body still owed must
 * have grown by PACE_MIN bytes (unless the upstream is the one not
 * reading), and a response waiting in vproxy at this check and the one
 * before must have moved as much (bytes of a slow event stream caught in
 * passing are not a slow reader).
 */
static void
pace_check(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;
	struct timeval tv = {session_timeouts(c->s)->exchange, 0};
	uint64_t down;
	int stuck;

	(void)fd;
	(void)what;
	if (c->state != C_EXCHANGE || c->cli == NULL)
		return;
	if (!c->req_done && c->bytes_up - c->pace_up < PACE_MIN &&
	    (c->up == NULL || evbuffer_get_length(bufferevent_get_output(c->up)) < WM_LOW)) {
		if (!c->resp_started)
			respond_error(c, 408, "Request Timeout",
			              "request body arriving too slowly");
		else
			conn_close(c);
		return;
	}
	down = delivered(c);
	stuck = undelivered(c) > 0;
	if (stuck && c->pace_stuck && down - c->pace_down < PACE_MIN) {
		c->close_why = "client reading the response too slowly";
		conn_close(c);
		return;
	}
	c->pace_up = c->bytes_up;
	c->pace_down = down;
	c->pace_stuck = stuck;
	evtimer_add(c->pace, &tv);
}

static void
head_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;

	(void)fd;
	(void)what;
	if (c->state != C_FIRST_HEAD && c->state != C_REQ_HEAD)
		return;
	/* As the read timeout does: a silent connection is closed, not answered. */
	if (evbuffer_get_length(bufferevent_get_input(c->cli)) == 0)
		conn_close(c);
	else
		respond_error(c, 408, "Request Timeout", "request head not received in time");
}

/* The listener is not private (macOS): the session's credential is required. */
static void
respond_auth_required(struct conn *c)
{
	respond(c, 407, "Proxy Authentication Required", "proxy credential missing or wrong",
	        "Proxy-Authenticate: Basic realm=\"vrun\"\r\n");
}

static const char *
status_text(int status)
{
	switch (status) {
	case 400:
		return "Bad Request";
	case 403:
		return "Forbidden";
	case 408:
		return "Request Timeout";
	case 414:
		return "URI Too Long";
	case 431:
		return "Request Header Fields Too Large";
	case 501:
		return "Not Implemented";
	case 502:
		return "Bad Gateway";
	case 504:
		return "Gateway Timeout";
	case 505:
		return "HTTP Version Not Supported";
	}
	return "Error";
}

/* ---- the one close path ---- */

static void
conn_close(struct conn *c)
{
	/* The one close path: a request under way gets its record here. */
	if (c->in_request && !c->audited)
		(void)req_audit(c, c->resp_status, c->close_denied,
		                c->close_why != NULL
		                        ? c->close_why
		                        : "connection closed before the response completed");
	free(c->a_target);
	if (c->dns != NULL)
		evdns_getaddrinfo_cancel(c->dns); /* its callback sees the cancel, not us */
	if (c->linger != NULL)
		event_free(c->linger);
	if (c->deadline != NULL)
		event_free(c->deadline);
	if (c->pace != NULL)
		event_free(c->pace);
	if (c->up != NULL)
		bufferevent_free(c->up);
	if (c->cli != NULL)
		bufferevent_free(c->cli);
	secbuf_free(c->head);
	scrub_stream_free(c->scrub); /* may hold the start of a secret: wiped */
	if (c->scratch != NULL)
		evbuffer_free(c->scratch);
	if (c->stage != NULL)
		evbuffer_free(c->stage);
	if (c->prev != NULL)
		c->prev->next = c->next;
	else
		c->list->first = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	c->list->n--;
	free(c);
}

void
conn_close_all(struct conn_list *list)
{
	while (list->first != NULL)
		conn_close(list->first);
}

/* ---- backpressure ---- */

/* Move n bytes from src's input to dst's output, pausing src when dst is full. */
static void
move(struct conn *c, struct bufferevent *src, struct bufferevent *dst, size_t n)
{
	struct evbuffer *out = bufferevent_get_output(dst);

	n = (size_t)evbuffer_remove_buffer(bufferevent_get_input(src), out, n);
	if (dst == c->up)
		c->bytes_up += n;
	else
		c->bytes_down += n;
	if (evbuffer_get_length(out) >= WM_HIGH) {
		bufferevent_disable(src, EV_READ);
		bufferevent_setwatermark(dst, EV_WRITE, WM_LOW, 0);
	}
}

static void
drained(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;
	struct bufferevent *other = bev == c->cli ? c->up : c->cli;

	/* Below the low watermark again: let the other side talk, if it may. */
	bufferevent_setwatermark(bev, EV_WRITE, 0, 0);
	if (other != NULL &&
	    (c->state == C_TUNNEL || (c->state == C_EXCHANGE && (other == c->up || !c->req_done))))
		bufferevent_enable(other, EV_READ);
	if (c->state == C_EXCHANGE || c->state == C_TUNNEL)
		pump(c);
}

/* ---- upstream connection ---- */

static void upstream_event(struct bufferevent *bev, short what, void *arg);

/*
 * Small writes (a chunk terminator, a short head) must not wait for the
 * peer's delayed ACK: proxied HTTP is request/response, not bulk.
 */
static void
no_delay(evutil_socket_t fd)
{
	int one = 1;

	if (fd >= 0)
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/*
 * A resumable session from a verified upstream: a copy is kept for the
 * next connection of this vproxy session to the same destination, so it
 * skips the certificate exchange. Only a verified handshake produces one.
 * A copy, because OpenSSL marks the connection's own session object
 * unresumable when the connection is freed without a shutdown, which is
 * how vproxy drops upstream connections.
 */
static int
upstream_ticket(SSL *ssl, SSL_SESSION *sess)
{
	struct conn *c = SSL_get_app_data(ssl);
	SSL_SESSION *copy;

	if (c != NULL && SSL_SESSION_is_resumable(sess) &&
	    SSL_get_verify_result(ssl) == X509_V_OK && (copy = SSL_SESSION_dup(sess)) != NULL)
		session_keep_ticket(c->s, &c->target, copy);
	return 0; /* the original stays OpenSSL's */
}

static int
start_upstream_socket(struct conn *c, const struct sockaddr *sa, socklen_t salen)
{
	struct bufferevent *bev;
	SSL_CTX *ctx;
	SSL_SESSION *ticket;
	SSL *ssl;

	if (c->tunnel || c->plain) {
		bev = bufferevent_socket_new(session_base(c->s), -1,
		                             BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
	} else {
		if ((ctx = session_upstream_ctx(c->s, &c->target, upstream_ticket)) == NULL)
			return VERR_CRYPTO;
		ssl = SSL_new(ctx);
		SSL_CTX_free(ctx);
		if (ssl == NULL)
			return VERR_CRYPTO;
		SSL_set_app_data(ssl, c);
		/* Verify the name we were asked for, and send it as SNI (not for IPs). */
		if (c->target.kind == HOSTSPEC_NAME) {
			if (SSL_set_tlsext_host_name(ssl, c->target.host) != 1 ||
			    SSL_set1_host(ssl, c->target.host) != 1) {
				SSL_free(ssl);
				return VERR_CRYPTO;
			}
			SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
		} else if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), c->target.host) !=
		           1) {
			SSL_free(ssl);
			return VERR_CRYPTO;
		}
		bev = bufferevent_openssl_socket_new(
		        session_base(c->s), -1, ssl, BUFFEREVENT_SSL_CONNECTING,
		        BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
		if (bev == NULL)
			SSL_free(ssl);
		else
			/* Many servers close without close_notify; framing still tells truncation.
			 */
			bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
	}
	if (bev == NULL)
		return VERR_NOMEM;
	c->up = bev;
	bufferevent_setcb(bev, upstream_read, drained, upstream_event, c);
	bound_input(c, bev);
	set_timeouts(bev, session_timeouts(c->s)->connect);
	/* The address vproxy resolved itself: no second lookup anywhere. */
	if (bufferevent_socket_connect(bev, sa, (int)salen) != 0)
		return VERR_SYSTEM;
	/* After the connect: it clears the SSL. The handshake has not begun. */
	if ((ssl = bufferevent_openssl_get_ssl(bev)) != NULL &&
	    (ticket = session_upstream_ticket(c->s, &c->target)) != NULL) {
		(void)SSL_set_session(ssl, ticket); /* on failure: a full handshake */
		SSL_SESSION_free(ticket);
	}
	no_delay(bufferevent_getfd(bev));
	return VERR_OK;
}

static void
dns_done(int err, struct evutil_addrinfo *res, void *arg)
{
	struct conn *c = arg;
	int r = VERR_SYSTEM;

	if (err == EVUTIL_EAI_CANCEL)
		return; /* conn_close cancelled us; c is gone */
	c->dns = NULL;
	if (err == 0 && res != NULL) {
		((struct sockaddr_in *)res->ai_addr)->sin_port = htons(c->target.port);
		r = start_upstream_socket(c, res->ai_addr, (socklen_t)res->ai_addrlen);
	}
	if (res != NULL)
		evutil_freeaddrinfo(res);
	if (r != 0)
		respond_error(c, 502, "Bad Gateway",
		              err != 0 ? "cannot resolve the upstream host"
		                       : "cannot connect upstream");
}

/* Resolve (overrides first) and connect; the head goes out once connected. */
static void
connect_upstream(struct conn *c)
{
	const struct resolve_entry *re = resolve_find(session_resolve(c->s), &c->target);
	struct evutil_addrinfo hints;
	struct sockaddr_storage ss;
	struct evdns_getaddrinfo_request *req;
	struct evdns_base *dns;
	int r;

	set_state(c, C_UP_CONNECTING);
	if (re != NULL) {
		r = start_upstream_socket(c, (const struct sockaddr *)&re->addr, re->addrlen);
	} else if (c->target.kind != HOSTSPEC_NAME) {
		memset(&ss, 0, sizeof(ss));
		if (c->target.kind == HOSTSPEC_IPV4) {
			struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

			s4->sin_family = AF_INET;
			s4->sin_port = htons(c->target.port);
			evutil_inet_pton(AF_INET, c->target.host, &s4->sin_addr);
			r = start_upstream_socket(c, (struct sockaddr *)s4, sizeof(*s4));
		} else {
			struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

			s6->sin6_family = AF_INET6;
			s6->sin6_port = htons(c->target.port);
			evutil_inet_pton(AF_INET6, c->target.host, &s6->sin6_addr);
			r = start_upstream_socket(c, (struct sockaddr *)s6, sizeof(*s6));
		}
	} else {
		if ((dns = session_dns(c->s)) == NULL) {
			respond_error(c, 502, "Bad Gateway", "no DNS resolver");
			return;
		}
		memset(&hints, 0, sizeof(hints));
		hints.ai_family = AF_INET; /* first address only; IPv6 upstreams via --resolve */
		hints.ai_socktype = SOCK_STREAM;
		hints.ai_flags = EVUTIL_AI_ADDRCONFIG;
		/* An immediate answer runs dns_done (which may close c) before this returns. */
		req = evdns_getaddrinfo(dns, c->target.host, NULL, &hints, dns_done, c);
		if (req != NULL)
			c->dns = req;
		return;
	}
	if (r != 0)
		respond_error(c, 502, "Bad Gateway", "cannot connect upstream");
}

static void
head_released(const void *data, size_t len, void *arg)
{
	(void)data;
	(void)len;
	secbuf_free(arg); /* wipes the secret */
}

/* -1: not sent, and the client answered (c stays valid until the answer is out). */
static int
send_head(struct conn *c)
{
	struct secbuf *h = c->head;

	c->head = NULL;
	/*
	 * By reference, so the only plaintext copy of the secret stays in
	 * sodium memory and is wiped as soon as the bytes have been written.
	 */
	if (evbuffer_add_reference(bufferevent_get_output(c->up), h->data, h->len, head_released,
	                           h) != 0) {
		secbuf_free(h);
		respond_error(c, 503, "Service Unavailable", "out of memory");
		return -1;
	}
	return 0;
}

/*
 * A chunked body's first size line, checked on a copy of the decoder before
 * the head goes out, so that a malformed one is refused (400) with nothing
 * sent upstream. 1: well-formed; 0: not all here yet; -1: refused (the
 * client answered; c stays valid until the answer is out).
 */
static int
first_chunk_checked(struct conn *c)
{
	struct http_chunked probe = c->req_chunk;
	struct evbuffer *in = bufferevent_get_input(c->cli);
	size_t len = evbuffer_get_length(in), off = 0, dlen;
	const char *buf, *data;
	ssize_t n;

	if (len > HTTP_CHUNK_LINE_MAX + 2)
		len = HTTP_CHUNK_LINE_MAX + 2; /* enough for the line and its CRLF */
	if (len == 0)
		return 0;
	if ((buf = (const char *)evbuffer_pullup(in, (ssize_t)len)) == NULL) {
		respond_error(c, 503, "Service Unavailable", "out of memory");
		return -1;
	}
	while (off < len && !http_chunked_sized(&probe)) {
		if ((n = http_chunked_feed(&probe, buf + off, len - off, &data, &dlen)) < 0) {
			respond_error(c, 400, "Bad Request", probe.err_reason);
			return -1;
		}
		if (n == 0)
			break;
		off += (size_t)n;
	}
	return http_chunked_sized(&probe);
}

/*
 * Send the injected head once nothing known about the request is wrong: for
 * a chunked body, once its first size line is in and well-formed (later
 * ones are checked as they are relayed: a bad one cuts the request short,
 * and the upstream never sees it complete). 1: sent (or already); 0: waiting
 * for the client; -1: refused (answered).
 */
static int
release_head(struct conn *c)
{
	int r;

	if (c->head == NULL)
		return 1;
	if (c->req_body == HTTP_BODY_CHUNKED && (r = first_chunk_checked(c)) <= 0) {
		if (r == 0)
			bufferevent_enable(c->cli, EV_READ);
		return r;
	}
	return send_head(c) == 0 ? 1 : -1;
}

static void
upstream_event(struct bufferevent *bev, short what, void *arg)
{
	struct conn *c = arg;
	unsigned long e;

	if (c->state == C_CLOSING) {
		/* Tunnel half-close: the client is gone and so is the upstream now. */
		if (c->cli == NULL) {
			conn_close(c);
			return;
		}
		/* The answer is out and the client is being let go: nothing more to say. */
		bufferevent_free(c->up);
		c->up = NULL;
		return;
	}
	/*
	 * OpenSSL 3 reports a close without close_notify as an error. Many
	 * servers close that way; for a body framed by the close it is its end
	 * (bodies framed otherwise still see a truncation as one).
	 */
	e = (what & BEV_EVENT_ERROR) ? bufferevent_get_openssl_error(bev) : 0;
	if (e != 0 && ERR_GET_REASON(e) == SSL_R_UNEXPECTED_EOF_WHILE_READING)
		what |= BEV_EVENT_EOF;
	if (what & BEV_EVENT_CONNECTED) {
		c->up_ready = 1;
		if (c->tunnel) {
			if (req_audit(c, 200, 0, "opaque tunnel (--allow-host)") != 0) {
				respond_error(c, 503, "Service Unavailable",
				              "the audit log cannot be written");
				return;
			}
			evbuffer_add_printf(bufferevent_get_output(c->cli),
			                    "HTTP/1.1 200 Connection Established\r\n\r\n");
			set_state(c, C_TUNNEL);
			bufferevent_enable(c->cli, EV_READ);
			bufferevent_enable(c->up, EV_READ | EV_WRITE);
			pump(c);
			return;
		}
		/* Verified TLS (or allowed plain HTTP): only now may the head go out. */
		set_state(c, C_EXCHANGE);
		bufferevent_enable(c->up, EV_READ | EV_WRITE);
		if (release_head(c) < 0)
			return;
		pump(c);
		return;
	}
	if (what & BEV_EVENT_TIMEOUT) {
		respond_error(c, 504, "Gateway Timeout", "upstream timed out");
		return;
	}
	if ((what & BEV_EVENT_EOF) && c->state == C_EXCHANGE && c->resp_started &&
	    c->resp_body == HTTP_BODY_CLOSE) {
		/* Close-delimited body: scrub the rest, end the framing, drop upstream. */
		pump(c);
		if (c->state != C_EXCHANGE || finish_body(c) != 0) {
			if (c->state == C_EXCHANGE)
				conn_close(c);
			return;
		}
		bufferevent_free(c->up);
		c->up = NULL;
		c->up_ready = 0;
		c->up_keep_alive = 0;
		response_done(c);
		return;
	}
	if (c->state == C_TUNNEL && (what & BEV_EVENT_EOF)) {
		bufferevent_free(c->up);
		c->up = NULL;
		set_state(c, C_CLOSING);
		bufferevent_setcb(c->cli, NULL, finish_after_flush, closing_event, c);
		finish_after_flush(c->cli, c);
		return;
	}
	if (!c->up_ready) {
		if (e != 0 && ERR_GET_REASON(e) == SSL_R_CERTIFICATE_VERIFY_FAILED)
			refuse_upstream(c, "upstream certificate verification failed");
		else
			respond_error(c, 502, "Bad Gateway", "cannot connect upstream");
		return;
	}
	if (c->state == C_REQ_HEAD) {
		/* The upstream closed an idle kept-alive connection: reconnect later. */
		bufferevent_free(c->up);
		c->up = NULL;
		c->up_ready = 0;
		return;
	}
	respond_error(c, 502, "Bad Gateway", "upstream closed the connection");
}

/* ---- request heads ---- */

static int
is_named(const struct http_header *h, const char *name)
{
	return h->name_len == strlen(name) && strncasecmp(h->name, name, h->name_len) == 0;
}

/* Hop-by-hop fields never cross the proxy (RFC 9110 7.6.1). */
static int
hop_by_hop(const struct http_request *rq, const struct http_header *h)
{
	static const char *const names[] = {
	        "connection", "proxy-connection", "keep-alive",          "te",
	        "trailer",    "upgrade",          "proxy-authorization", NULL};

	for (size_t i = 0; names[i] != NULL; i++)
		if (h->name_len == strlen(names[i]) &&
		    strncasecmp(h->name, names[i], h->name_len) == 0)
			return 1;
	return http_connection_lists(rq->headers, rq->num_headers, h->name, h->name_len);
}

/* Host (and an absolute-form authority) must name exactly the destination. */
static int
host_matches(const struct conn *c, const char *v, size_t n)
{
	struct hostspec h;

	if (hostspec_parse(v, n, 0, &h) != 0)
		return 0;
	if (memchr(v, ':', n) == NULL || (v[0] == '[' && v[n - 1] == ']'))
		h.port = c->plain ? 80 : 443; /* no port: the scheme's default */
	return h.kind == c->target.kind && h.port == c->target.port &&
	       strcmp(h.host, c->target.host) == 0;
}

static void
begin_request(struct conn *c, const struct http_request *rq, size_t consumed)
{
	struct inject_request ir;
	struct inject_dest dest = {&c->target, !c->plain};
	struct evbuffer *in = bufferevent_get_input(c->cli);
	uint8_t drop[HTTP_HEADERS_MAX];
	uint8_t results[INJECT_KEYS_MAX];
	const struct inject_key *keys;
	size_t nkeys;
	int r;

	static const struct http_header identity = {"Accept-Encoding", 15, "identity", 8};

	memset(drop, 0, sizeof(drop));
	for (size_t i = 0; i < rq->num_headers; i++)
		drop[i] = (uint8_t)(hop_by_hop(rq, &rq->headers[i]) ||
		                    is_named(&rq->headers[i], "accept-encoding"));
	memset(&ir, 0, sizeof(ir));
	ir.method = rq->method;
	ir.method_len = rq->method_len;
	/* Upstream gets origin-form: the absolute URI was for us. */
	ir.target = rq->target_form == HTTP_TARGET_ABSOLUTE ? rq->path : rq->target;
	ir.target_len = rq->target_form == HTTP_TARGET_ABSOLUTE ? rq->path_len : rq->target_len;
	if (ir.target_len == 0 || ir.target[0] == '?') {
		respond_error(c, 400, "Bad Request", "absolute-form target without a path");
		return;
	}
	ir.headers = rq->headers;
	ir.nheaders = rq->num_headers;
	ir.drop = drop;
	/* Compressed bodies cannot be scanned for an echoed secret: ask for none. */
	ir.extra = &identity;
	ir.nextra = 1;
	keys = session_inject_keys(c->s, &nkeys);
	if (c->tunnel)
		nkeys = 0;
	req_begin(c, rq->method, rq->method_len, rq->target, rq->target_len);
	if (audit_unready(c))
		return;
	r = inject_apply(&ir, &dest, keys, nkeys, &c->head, nkeys > 0 ? results : NULL);
	for (size_t i = 0; r == 0 && i < nkeys; i++) {
		if (results[i] == INJECT_DONE && !c->injected) {
			c->injected = 1;
			c->a_key = keys[i].name;
		} else if (results[i] == INJECT_NEED_TLS && c->a_key == NULL) {
			c->a_key = keys[i].name;
			c->a_why = "key withheld: plain HTTP without --allow-http";
		}
	}
	/* rq points into the input buffer: read what is needed before draining it. */
	c->req_is_head = rq->method_len == 4 && memcmp(rq->method, "HEAD", 4) == 0;
	evbuffer_drain(in, consumed);
	if (r != 0) {
		respond_error(c, r == VERR_INJECT_CONFLICT ? 502 : 400, status_text(400),
		              verr_strerror(r));
		return;
	}
	c->req_body = rq->body;
	c->req_left = rq->content_length;
	c->req_done = rq->body == HTTP_BODY_NONE ||
	              (rq->body == HTTP_BODY_LENGTH && rq->content_length == 0);
	if (rq->body == HTTP_BODY_CHUNKED)
		http_chunked_init(&c->req_chunk, &c->limits);
	c->client_keep_alive = rq->keep_alive && !c->plain;
	c->client_minor = rq->minor_version;
	c->resp_started = 0;
	c->resp_body = HTTP_BODY_NONE;
	bufferevent_disable(c->cli, EV_READ);
	if (c->up == NULL || !c->up_ready) {
		c->up_ready = 0;
		connect_upstream(c);
		return;
	}
	set_state(c, C_EXCHANGE);
	if (release_head(c) < 0)
		return;
	pump(c);
}

static void
parse_request(struct conn *c)
{
	struct evbuffer *in = bufferevent_get_input(c->cli);
	size_t len = evbuffer_get_length(in);
	struct http_request *rq;
	const char *buf;
	int n;

	if (len == 0)
		return;
	if (c->state == C_REQ_HEAD)
		arm_deadline(c); /* from its first byte */
	/*
	 * A head can only complete with a new LF: re-parsing on every byte of a
	 * slow sender would cost quadratic CPU.
	 */
	if (c->head_scanned > 0 && len > c->head_scanned && len <= c->limits.max_head) {
		struct evbuffer_ptr from;

		if (evbuffer_ptr_set(in, &from, c->head_scanned, EVBUFFER_PTR_SET) == 0 &&
		    evbuffer_search(in, "\n", 1, &from).pos < 0) {
			c->head_scanned = len;
			return;
		}
	}
	if (len > c->limits.max_head + 1)
		len = c->limits.max_head + 1;
	if ((buf = (const char *)evbuffer_pullup(in, (ssize_t)len)) == NULL ||
	    (rq = malloc(sizeof(*rq))) == NULL) {
		conn_close(c);
		return;
	}
	n = http_parse_request(buf, len, &c->limits, rq);
	if (n == HTTP_INCOMPLETE) {
		c->head_scanned = len;
		free(rq);
		return;
	}
	c->head_scanned = 0;
	if (n == HTTP_ERROR) {
		respond_error(c, rq->err_status, status_text(rq->err_status), rq->err_reason);
		free(rq);
		return;
	}
	if (c->state == C_FIRST_HEAD) {
		int pa = http_header_find(rq->headers, rq->num_headers, "proxy-authorization", 0);
		int pa2 = pa >= 0 ? http_header_find(rq->headers, rq->num_headers,
		                                     "proxy-authorization", (size_t)pa + 1)
		                  : -1;

		if (pa2 >= 0 || !session_proxy_auth_ok(c->s, pa >= 0 ? rq->headers[pa].value : NULL,
		                                       pa >= 0 ? rq->headers[pa].value_len : 0)) {
			free(rq);
			respond_auth_required(c);
			return;
		}
		int r;

		if (rq->target_form == HTTP_TARGET_AUTHORITY) {
			r = hostspec_parse(rq->authority, rq->authority_len, HOSTSPEC_REQUIRE_PORT,
			                   &c->target);
		} else if (rq->target_form == HTTP_TARGET_ABSOLUTE && rq->scheme_len == 4 &&
		           strncasecmp(rq->scheme, "http", 4) == 0) {
			c->plain = 1;
			r = hostspec_parse(rq->authority, rq->authority_len, 0, &c->target);
			if (r == 0 && memchr(rq->authority, ':', rq->authority_len) == NULL)
				c->target.port = 80;
		} else {
			respond_error(c, 400, "Bad Request",
			              "expected CONNECT host:port or an http:// absolute URI");
			free(rq);
			return;
		}
		if (r != 0) {
			respond_error(c, 400, "Bad Request", verr_strerror(r));
			free(rq);
			return;
		}
		req_begin(c, rq->method, rq->method_len, rq->target, rq->target_len);
		/* Decided on the name alone: nothing unbound is ever resolved. */
		if (session_tunnel_allowed(c->s, &c->target) && !c->plain) {
			c->tunnel = 1;
		} else if (!session_bound(c->s, &c->target) &&
		           !session_tunnel_allowed(c->s, &c->target)) {
			char what[HOSTSPEC_NAME_MAX + 64], hp[HOSTSPEC_NAME_MAX + 16];

			hostspec_format(&c->target, hp, sizeof(hp));
			snprintf(what, sizeof(what), "%s is not bound to a key of this session",
			         hp);
			respond_error(c, 403, "Forbidden", what);
			free(rq);
			return;
		}
		if (!c->tunnel && !c->plain) {
			const char *ka, *kb;

			if (session_trust_conflict(c->s, &c->target, &ka, &kb)) {
				char what[2 * VAULT_NAME_MAX + 160];

				snprintf(what, sizeof(what),
				         "keys %s and %s are both bound to this host but trust "
				         "different CAs (vault add --ca); use them in separate "
				         "sessions",
				         ka, kb);
				respond_error(c, 403, "Forbidden", what);
				free(rq);
				return;
			}
		}
		if (!c->plain) {
			evbuffer_drain(in, (size_t)n);
			free(rq);
			if (audit_unready(c))
				return;
			if (!c->tunnel)
				c->in_request = 0; /* each request inside gets its own record */
			if (c->tunnel) {
				bufferevent_disable(c->cli, EV_READ);
				connect_upstream(c);
				return;
			}
			start_tls(c);
			return;
		}
	}
	/* Inside the intercepted connection, or a plain absolute-form request. */
	if (!c->plain && rq->target_form != HTTP_TARGET_ORIGIN &&
	    !(rq->target_form == HTTP_TARGET_ABSOLUTE &&
	      host_matches(c, rq->authority, rq->authority_len))) {
		respond_error(c, 400, "Bad Request", "request target does not match the tunnel");
	} else if (c->plain && rq->target_form == HTTP_TARGET_ABSOLUTE &&
	           !host_matches(c, rq->authority, rq->authority_len)) {
		respond_error(c, 400, "Bad Request", "request target changed host");
	} else if (rq->host == NULL || !host_matches(c, rq->host, rq->host_len)) {
		respond_error(c, 400, "Bad Request", "Host does not match the CONNECT authority");
	} else {
		begin_request(c, rq, (size_t)n);
	}
	free(rq);
}

/* ---- client TLS ---- */

static int
check_sni(SSL *ssl, int *alert, void *arg)
{
	struct conn *c = SSL_get_app_data(ssl);
	const char *sni = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
	struct hostspec h;

	(void)alert;
	(void)arg;
	if (c == NULL)
		return SSL_TLSEXT_ERR_ALERT_FATAL;
	/* No SNI is how a client speaks to an IP address; for a name it must be given. */
	if (sni == NULL && c->target.kind != HOSTSPEC_NAME)
		return SSL_TLSEXT_ERR_OK;
	/* The name in the handshake must be the one the tunnel was opened for. */
	if (sni == NULL || hostspec_parse(sni, strlen(sni), 0, &h) != 0 ||
	    h.kind != c->target.kind || strcmp(h.host, c->target.host) != 0) {
		c->close_why = sni == NULL ? "TLS handshake without the tunnel's name (SNI)"
		                           : "TLS name (SNI) differs from the CONNECT authority";
		c->close_denied = 1;
		return SSL_TLSEXT_ERR_ALERT_FATAL;
	}
	return SSL_TLSEXT_ERR_OK;
}

static void client_event(struct bufferevent *bev, short what, void *arg);

static void
start_tls(struct conn *c)
{
	SSL_CTX *ctx = tlsctx_client_side(check_sni);
	struct bufferevent *tls;
	X509 *cert = NULL;
	EVP_PKEY *key = NULL;
	SSL *ssl = NULL;
	int r;

	if (ctx == NULL) {
		respond_error(c, 502, "Bad Gateway", "TLS unavailable");
		return;
	}
	if ((r = sessca_leaf(session_ca(c->s), &c->target, &cert, &key)) != 0 ||
	    (ssl = SSL_new(ctx)) == NULL || SSL_use_certificate(ssl, cert) != 1 ||
	    SSL_use_PrivateKey(ssl, key) != 1) {
		X509_free(cert);
		EVP_PKEY_free(key);
		SSL_free(ssl);
		respond_error(c, 502, "Bad Gateway", "cannot mint a certificate");
		return;
	}
	X509_free(cert);
	EVP_PKEY_free(key);
	SSL_set_app_data(ssl, c);
	evbuffer_add_printf(bufferevent_get_output(c->cli),
	                    "HTTP/1.1 200 Connection Established\r\n\r\n");
	tls = bufferevent_openssl_filter_new(session_base(c->s), c->cli, ssl,
	                                     BUFFEREVENT_SSL_ACCEPTING,
	                                     BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
	if (tls == NULL) {
		SSL_free(ssl);
		conn_close(c);
		return;
	}
	/*
	 * Without a limit below it, the filter would move every byte it is
	 * given into the socket's output: a client that stops reading would
	 * have vproxy buffer the whole response. Capped, the bytes wait above,
	 * where the watermarks stop reading upstream.
	 */
	bufferevent_setwatermark(c->cli, EV_WRITE, 0, WM_LOW);
	c->cli = tls;
	bufferevent_setcb(tls, client_read, drained, client_event, c);
	bound_input(c, tls);
	set_state(c, C_TLS_ACCEPT);
	bufferevent_enable(tls, EV_READ | EV_WRITE);
}

/* ---- bodies ---- */

/* Relay a chunked body from src to dst; 1 when done, 0 for more, -1 on error. */
static int
relay_chunked(struct conn *c, struct http_chunked *ch, struct bufferevent *src,
              struct bufferevent *dst)
{
	struct evbuffer *in = bufferevent_get_input(src);

	(void)c;
	while (evbuffer_get_length(in) > 0 && !http_chunked_done(ch)) {
		struct evbuffer_iovec v;
		const char *data;
		size_t dlen;
		ssize_t n;

		if (evbuffer_peek(in, -1, NULL, &v, 1) < 1)
			break;
		n = http_chunked_feed(ch, v.iov_base, v.iov_len, &data, &dlen);
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		move(c, src, dst, (size_t)n);
	}
	return http_chunked_done(ch) ? 1 : 0;
}

static void
response_done(struct conn *c)
{
	send_staged(c);
	c->in_request = 0;
	if (!c->req_done || !c->client_keep_alive) {
		/* Answered before the body was sent, or the client said close. */
		if (c->up != NULL) {
			bufferevent_free(c->up);
			c->up = NULL;
			c->up_ready = 0;
		}
		set_state(c, C_CLOSING);
		bufferevent_setcb(c->cli, NULL, finish_after_flush, closing_event, c);
		bufferevent_disable(c->cli, EV_READ);
		finish_after_flush(c->cli, c);
		return;
	}
	if (!c->up_keep_alive && c->up != NULL) {
		bufferevent_free(c->up);
		c->up = NULL;
		c->up_ready = 0;
	}
	set_state(c, C_REQ_HEAD);
	bufferevent_enable(c->cli, EV_READ);
	parse_request(c); /* a pipelined request may already be here */
}

/* Any Content-Encoding but identity. */
static int
compressed(const struct http_response *rs)
{
	for (size_t i = 0; i < rs->num_headers; i++) {
		const struct http_header *h = &rs->headers[i];

		if (is_named(h, "content-encoding") &&
		    !(h->value_len == 8 && strncasecmp(h->value, "identity", 8) == 0))
			return 1;
	}
	return 0;
}

/* ---- responses: every byte for the child passes the scrubber ---- */

static int
scrub_emit(void *arg, const void *p, size_t len)
{
	struct conn *c = arg;

	return evbuffer_add(c->scratch, p, len) == 0 ? 0 : VERR_NOMEM;
}

/* Stage what the scrubber released, as one chunk when re-chunking. */
static void
flush_scrubbed(struct conn *c)
{
	size_t n = evbuffer_get_length(c->scratch);

	if (n == 0)
		return;
	if (c->chunked_out)
		evbuffer_add_printf(c->stage, "%zx\r\n", n);
	evbuffer_add_buffer(c->stage, c->scratch);
	if (c->chunked_out)
		evbuffer_add(c->stage, "\r\n", 2);
	c->bytes_down += n;
}

/* Scrub n payload bytes at the front of the upstream input, then drop them. */
static int
scrub_input(struct conn *c, size_t n)
{
	struct evbuffer *in = bufferevent_get_input(c->up);

	while (n > 0) {
		struct evbuffer_iovec v;
		size_t k;

		if (evbuffer_peek(in, (ssize_t)n, NULL, &v, 1) < 1)
			return -1;
		k = v.iov_len < n ? v.iov_len : n;
		if (scrub_stream_feed(c->scrub, v.iov_base, k, scrub_emit, c) != 0)
			return -1;
		evbuffer_drain(in, k);
		n -= k;
	}
	flush_scrubbed(c);
	return 0;
}

/* Chunked from upstream: strip the framing, scrub the payload. 1 done, 0 more, -1 bad. */
static int
scrub_chunked(struct conn *c)
{
	struct evbuffer *in = bufferevent_get_input(c->up);

	while (evbuffer_get_length(in) > 0 && !http_chunked_done(&c->resp_chunk)) {
		struct evbuffer_iovec v;
		const char *data;
		size_t dlen;
		ssize_t n;

		if (evbuffer_peek(in, -1, NULL, &v, 1) < 1)
			break;
		n = http_chunked_feed(&c->resp_chunk, v.iov_base, v.iov_len, &data, &dlen);
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		if (dlen > 0 && scrub_stream_feed(c->scrub, data, dlen, scrub_emit, c) != 0)
			return -1;
		evbuffer_drain(in, (size_t)n);
	}
	flush_scrubbed(c);
	return http_chunked_done(&c->resp_chunk) ? 1 : 0;
}

static const char *
allowed_reason(const struct conn *c)
{
	if (c->a_why != NULL)
		return c->a_why;
	return c->injected ? "key injected" : "no key for this request";
}

/* The body is complete: release the scrubber's tail and end the framing. */
static int
finish_body(struct conn *c)
{
	if (scrub_stream_finish(c->scrub, scrub_emit, c) != 0)
		return -1;
	flush_scrubbed(c);
	/* The stream stays for the next response on this connection: no remap per body. */
	c->scrubbed += scrub_stream_total(c->scrub) - c->scrub_base;
	/* No record, no clean end: the client sees a cut response, not a whole one. */
	if (req_audit(c, c->resp_status, 0, allowed_reason(c)) != 0)
		return -1;
	if (c->chunked_out)
		evbuffer_add(c->stage, "0\r\n\r\n", 5);
	send_staged(c);
	return 0;
}

/* Fields the proxy re-frames or that are hop-by-hop: never copied to the client. */
static int
response_drops(const struct http_response *rs, const struct http_header *h)
{
	static const char *const names[] = {
	        "content-length",   "transfer-encoding", "connection", "keep-alive",
	        "proxy-connection", "trailer",           NULL};

	for (size_t i = 0; names[i] != NULL; i++)
		if (is_named(h, names[i]))
			return 1;
	return http_connection_lists(rs->headers, rs->num_headers, h->name, h->name_len);
}

/*
 * Forward a response head to the client, scrubbed. A body is re-framed as
 * chunked (or close-delimited for an HTTP/1.0 client): replacing a secret
 * by its placeholder changes lengths, so the upstream's framing cannot be
 * kept.
 */
static int
forward_head(struct conn *c, const struct http_response *rs, const char *raw, size_t rawlen,
             int body)
{
	struct evbuffer *h = NULL;
	char *clean = NULL;
	size_t cleanlen = 0;
	const char *src = raw;
	size_t srclen = rawlen;
	uint64_t counts[SESSION_KEYS_MAX];
	int r = -1;

	if (body) {
		if ((h = evbuffer_new()) == NULL)
			return -1;
		evbuffer_add_printf(h, "HTTP/1.1 %d %.*s\r\n", rs->status, (int)rs->reason_len,
		                    rs->reason);
		for (size_t i = 0; i < rs->num_headers; i++) {
			const struct http_header *f = &rs->headers[i];

			if (response_drops(rs, f))
				continue;
			evbuffer_add(h, f->name, f->name_len);
			evbuffer_add(h, ": ", 2);
			evbuffer_add(h, f->value, f->value_len);
			evbuffer_add(h, "\r\n", 2);
		}
		c->chunked_out = c->client_minor >= 1;
		/* HTTP/1.0 has no chunks: the body ends with the connection. */
		if (!c->chunked_out)
			c->client_keep_alive = 0;
		if (c->chunked_out)
			evbuffer_add_printf(h, "Transfer-Encoding: chunked\r\n");
		if (!c->client_keep_alive)
			evbuffer_add_printf(h, "Connection: close\r\n");
		evbuffer_add(h, "\r\n", 2);
		srclen = evbuffer_get_length(h);
		if ((src = (const char *)evbuffer_pullup(h, -1)) == NULL)
			goto out;
	}
	if (scrub_buffer_dup(session_scrub(c->s), src, srclen, &clean, &cleanlen, counts) != 0)
		goto out;
	for (size_t i = 0; i < scrub_set_nkeys(session_scrub(c->s)); i++)
		c->scrubbed += counts[i];
	if (evbuffer_add(c->stage, clean, cleanlen) != 0)
		goto out;
	c->bytes_down += cleanlen;
	r = 0;
out:
	free(clean);
	if (h != NULL)
		evbuffer_free(h);
	return r;
}

static void
pump_response(struct conn *c)
{
	struct evbuffer *in;
	struct http_response *rs;

	while (c->up != NULL && c->state == C_EXCHANGE) {
		in = bufferevent_get_input(c->up);
		if (!c->resp_started) {
			size_t len = evbuffer_get_length(in);
			const char *buf;
			int n, body;

			if (len == 0) {
				send_staged(c);
				return;
			}
			if (len > c->limits.max_head + 1)
				len = c->limits.max_head + 1;
			if ((buf = (const char *)evbuffer_pullup(in, (ssize_t)len)) == NULL ||
			    (rs = malloc(sizeof(*rs))) == NULL) {
				conn_close(c);
				return;
			}
			n = http_parse_response(buf, len, &c->limits, c->req_is_head, 0, rs);
			if (n == HTTP_INCOMPLETE) {
				free(rs);
				send_staged(c);
				return;
			}
			if (n == HTTP_ERROR || rs->status == 101) {
				free(rs);
				respond_error(c, 502, "Bad Gateway", "malformed upstream response");
				return;
			}
			if (compressed(rs)) {
				/* We asked for identity; an unscannable body never passes. */
				free(rs);
				refuse_upstream(c, "the upstream sent a compressed response, which "
				                   "cannot be checked for the secret");
				return;
			}
			body = rs->body != HTTP_BODY_NONE &&
			       !(rs->body == HTTP_BODY_LENGTH && rs->content_length == 0);
			if (rs->status >= 200) {
				c->resp_started = 1;
				c->resp_status = rs->status;
				c->resp_body = body ? rs->body : HTTP_BODY_NONE;
				c->resp_left = rs->content_length;
				c->up_keep_alive = rs->keep_alive;
				if (rs->body == HTTP_BODY_CHUNKED)
					http_chunked_init(&c->resp_chunk, &c->limits);
				if (body && c->scrub == NULL &&
				    scrub_stream_new(session_scrub(c->s), &c->scrub) != 0) {
					free(rs);
					conn_close(c);
					return;
				}
				if (body)
					c->scrub_base = scrub_stream_total(c->scrub);
			}
			if (c->resp_started && !body &&
			    req_audit(c, c->resp_status, 0, allowed_reason(c)) != 0) {
				free(rs);
				c->resp_started = 0;
				respond_error(c, 503, "Service Unavailable",
				              "the audit log cannot be written");
				return;
			}
			/* 1xx heads are relayed (scrubbed); the final answer follows. */
			if (forward_head(c, rs, buf, (size_t)n, rs->status >= 200 && body) != 0) {
				free(rs);
				conn_close(c);
				return;
			}
			free(rs);
			evbuffer_drain(in, (size_t)n);
			if (!c->resp_started)
				continue;
		}
		switch (c->resp_body) {
		case HTTP_BODY_NONE:
			response_done(c);
			return;
		case HTTP_BODY_LENGTH: {
			size_t n = evbuffer_get_length(in);

			if (n > c->resp_left)
				n = (size_t)c->resp_left;
			if (scrub_input(c, n) != 0) {
				conn_close(c);
				return;
			}
			c->resp_left -= n;
			if (c->resp_left == 0) {
				if (finish_body(c) != 0) {
					conn_close(c);
					return;
				}
				response_done(c);
				return;
			}
			send_staged(c);
			return;
		}
		case HTTP_BODY_CHUNKED: {
			int r = scrub_chunked(c);

			if (r < 0) {
				conn_close(c); /* mid-body: nothing sane left to say */
				return;
			}
			if (r == 1) {
				if (finish_body(c) != 0) {
					conn_close(c);
					return;
				}
				response_done(c);
				return;
			}
			send_staged(c);
			return;
		}
		default: /* close-delimited: all of it until EOF */
			if (scrub_input(c, evbuffer_get_length(in)) != 0)
				conn_close(c);
			else
				send_staged(c);
			return;
		}
	}
}

static void
pump_request(struct conn *c)
{
	struct evbuffer *in = bufferevent_get_input(c->cli);

	if (c->req_done || c->up == NULL || release_head(c) <= 0)
		return;
	if (c->req_body == HTTP_BODY_LENGTH) {
		size_t n = evbuffer_get_length(in);

		if (n > c->req_left)
			n = (size_t)c->req_left;
		move(c, c->cli, c->up, n);
		c->req_left -= n;
		c->req_done = c->req_left == 0;
	} else if (c->req_body == HTTP_BODY_CHUNKED) {
		int r = relay_chunked(c, &c->req_chunk, c->cli, c->up);

		if (r < 0) {
			respond_error(c, 400, "Bad Request", c->req_chunk.err_reason);
			return;
		}
		c->req_done = r == 1;
	}
	if (c->req_done)
		bufferevent_disable(c->cli, EV_READ); /* the next request waits its turn */
	else if (evbuffer_get_length(bufferevent_get_output(c->up)) < WM_HIGH)
		bufferevent_enable(c->cli, EV_READ);
}

static void
pump(struct conn *c)
{
	if (c->state == C_TUNNEL) {
		if (c->up == NULL)
			return;
		move(c, c->cli, c->up, evbuffer_get_length(bufferevent_get_input(c->cli)));
		move(c, c->up, c->cli, evbuffer_get_length(bufferevent_get_input(c->up)));
		return;
	}
	if (c->state != C_EXCHANGE)
		return;
	pump_request(c);
	if (c->state == C_EXCHANGE)
		pump_response(c);
}

/* ---- callbacks ---- */

static void
client_read(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;

	(void)bev;
	switch (c->state) {
	case C_FIRST_HEAD:
	case C_REQ_HEAD:
		parse_request(c);
		break;
	case C_EXCHANGE:
	case C_TUNNEL:
		pump(c);
		break;
	default:
		break;
	}
}

static void
upstream_read(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;

	(void)bev;
	pump(c);
}

/* Tunnel half-close: the upstream has what the client sent; now close. */
static void
upstream_flushed(struct bufferevent *bev, void *arg)
{
	if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
		conn_close(arg);
}

static void
client_event(struct bufferevent *bev, short what, void *arg)
{
	struct conn *c = arg;

	(void)bev;
	if ((what & BEV_EVENT_CONNECTED) && c->state == C_TLS_ACCEPT) {
		set_state(c, C_REQ_HEAD);
		parse_request(c);
		return;
	}
	if ((what & BEV_EVENT_TIMEOUT) && (c->state == C_FIRST_HEAD || c->state == C_REQ_HEAD) &&
	    evbuffer_get_length(bufferevent_get_input(c->cli)) > 0) {
		respond_error(c, 408, "Request Timeout", "request head not received in time");
		return;
	}
	if ((what & BEV_EVENT_EOF) && c->state == C_TUNNEL && c->up != NULL) {
		/* The client is done sending: deliver what it sent, then close. */
		pump(c);
		bufferevent_free(c->cli);
		c->cli = NULL;
		set_state(c, C_CLOSING);
		bufferevent_disable(c->up, EV_READ);
		bufferevent_setcb(c->up, NULL, upstream_flushed, upstream_event, c);
		upstream_flushed(c->up, c);
		return;
	}
	if (c->state == C_TLS_ACCEPT) {
		/*
		 * The handshake did not complete: refused by vproxy (a name that is
		 * not the tunnel's), or given up by the client (often: it does not
		 * trust the session CA). Either way, on the record.
		 */
		req_begin(c, "-", 1, "", 0);
		if (c->close_why == NULL) /* check_sni gives its own */
			c->close_why = (what & BEV_EVENT_TIMEOUT)
			                       ? "TLS handshake with the client timed out"
			                       : "TLS handshake with the client failed";
		conn_close(c);
		return;
	}
	/* EOF, error or timeout from the client: nothing more to do for it. */
	if (what & BEV_EVENT_TIMEOUT)
		c->close_why = (what & BEV_EVENT_WRITING) ? "client stopped reading the response"
		                                          : "client stopped sending the request";
	conn_close(c);
}

void
conn_start(struct session *s, struct conn_list *list, int fd)
{
	struct conn *c = calloc(1, sizeof(*c));

	if (c == NULL) {
		evutil_closesocket(fd);
		return;
	}
	c->s = s;
	c->list = list;
	c->limits.max_head = HTTP_DEFAULT_MAX_HEAD;
	c->limits.max_headers = HTTP_DEFAULT_MAX_HEADERS;
	c->limits.max_target = HTTP_DEFAULT_MAX_TARGET;
	c->next = list->first;
	if (list->first != NULL)
		list->first->prev = c;
	list->first = c;
	list->n++;
	no_delay(fd);
	c->cli = bufferevent_socket_new(session_base(s), fd,
	                                BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
	if (c->cli == NULL)
		evutil_closesocket(fd);
	if (c->cli == NULL || (c->scratch = evbuffer_new()) == NULL ||
	    (c->stage = evbuffer_new()) == NULL ||
	    (c->deadline = evtimer_new(session_base(s), head_deadline, c)) == NULL ||
	    (c->pace = evtimer_new(session_base(s), pace_check, c)) == NULL) {
		conn_close(c);
		return;
	}
	bufferevent_setcb(c->cli, client_read, drained, client_event, c);
	bound_input(c, c->cli);
	set_state(c, C_FIRST_HEAD);
	bufferevent_enable(c->cli, EV_READ | EV_WRITE);
}
