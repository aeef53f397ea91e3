/*
 * vload: the HTTPS load generator of bench/run (libevent + OpenSSL).
 *
 * One event loop, one thread, non-blocking sockets with OpenSSL driven
 * directly on them (no bufferevents), so the client costs as little CPU as
 * possible on a machine it shares with the proxy and the upstream under test.
 *
 *   keep-alive:      -c connections, each sends its next request as soon as
 *                    the previous response is complete (no pipelining)
 *   new connection:  --new: TCP connect + CONNECT (with -x) + TLS handshake +
 *                    one request with "Connection: close", per request
 *   idle:            --idle N: open N connections (CONNECT + TLS, plus one
 *                    request with --idle-req), print "ready", hold them until
 *                    stdin closes (bench/run reads the proxy's RSS meanwhile)
 *
 * Latency: from the request's first byte (keep-alive) or from connect()
 * (--new) to the response's last byte, in a log-linear histogram (1/64
 * octave, about 1.1 % resolution). Only requests completing inside the
 * measured window count; bytes count as they arrive inside it. The result
 * is one JSON line on stdout. No DNS: the URL host is either numeric, or
 * reached through -x, or mapped with --connect.
 *
 * Exit status: 0 done (errors are reported in the JSON), 1 failure, 2 usage.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <event2/event.h>
#include <event2/event_struct.h>
#include <getopt.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define EXIT_USAGE 2

#define HIST_SUB     64 /* sub-buckets per power of two */
#define HIST_BUCKETS (2 * HIST_SUB + 58 * HIST_SUB)
#define HEAD_MAX     16384
#define READ_CHUNK   (256 * 1024)

enum cstate {
	S_FREE = 0,
	S_CONNECTING,
	S_PROXY_WRITE,
	S_PROXY_READ,
	S_HANDSHAKE,
	S_WRITE,
	S_READ,
	S_HELD,
};

enum phase {
	P_HEAD = 0,
	P_LEN,
	P_CHUNK_SIZE,
	P_CHUNK_DATA,
	P_CHUNK_CRLF,
	P_TRAILER,
	P_CLOSE,
	P_DONE,
};

struct load;

struct conn {
	struct load *L;
	int fd;
	SSL *ssl;
	struct event ev;
	int ev_set;
	enum cstate st;
	uint64_t t_conn, t_req;
	size_t off;
	char head[HEAD_MAX];
	size_t hlen;
	enum phase ph;
	uint64_t left;
	int status;
	int close_after;
	int head_req; /* a HEAD request: no body whatever the head says */
	int trailer_empty;
};

struct load {
	struct event_base *base;
	SSL_CTX *ctx;
	struct sockaddr_storage addr; /* where TCP goes: the proxy, or the server */
	socklen_t addrlen;
	const char *host; /* URL host: SNI, Host, CONNECT authority */
	int port;
	char *req;
	size_t reqlen;
	char *connect_req;
	size_t connect_reqlen;
	int use_proxy;
	int verify;
	int newconn;
	int nconns;
	int nslots;
	/* idle mode */
	int idle;
	int idle_req;
	int held, dropped, opened_idle, opening, idle_failed, ready;
	struct event stdin_ev;
	/* window */
	uint64_t t0, w_start, w_end;
	uint64_t max_requests;
	int stopping;
	/* results */
	uint64_t requests, errors, non2xx, bytes, connects, all_requests;
	uint64_t hist[HIST_BUCKETS];
	uint64_t lat_max;
	const char *first_error;
	struct conn *conns;
	char *rbuf;
};

static void conn_cb(evutil_socket_t fd, short what, void *arg);
static void conn_open(struct conn *c);
static void do_read(struct conn *c);
static void start_request(struct conn *c);

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- latency histogram ---- */

static size_t
hist_index(uint64_t v)
{
	int msb;

	if (v < 2 * HIST_SUB)
		return (size_t)v;
	msb = 63 - __builtin_clzll(v);
	/* v >> (msb - 6) is in [64, 127]: 64 linear steps per octave. */
	return (size_t)(2 * HIST_SUB + (msb - 7) * HIST_SUB + (int)((v >> (msb - 6)) - HIST_SUB));
}

/* The middle of bucket i, in ns. */
static double
hist_value(size_t i)
{
	size_t oct, sub;
	int shift;

	if (i < 2 * HIST_SUB)
		return (double)i;
	oct = (i - 2 * HIST_SUB) / HIST_SUB;
	sub = (i - 2 * HIST_SUB) % HIST_SUB;
	shift = (int)oct + 1;
	return ((double)(HIST_SUB + sub) + 0.5) * (double)(1ull << shift);
}

static double
hist_pct(const struct load *L, double p)
{
	uint64_t total = 0, want, acc = 0;

	for (size_t i = 0; i < HIST_BUCKETS; i++)
		total += L->hist[i];
	if (total == 0)
		return 0;
	want = (uint64_t)ceil(p * (double)total);
	if (want == 0)
		want = 1;
	for (size_t i = 0; i < HIST_BUCKETS; i++) {
		acc += L->hist[i];
		if (acc >= want)
			return hist_value(i);
	}
	return (double)L->lat_max;
}

/* ---- connection plumbing ---- */

static void
wait_for(struct conn *c, short what)
{
	if (c->ev_set && event_pending(&c->ev, EV_READ | EV_WRITE, NULL))
		event_del(&c->ev);
	event_assign(&c->ev, c->L->base, c->fd, what, conn_cb, c);
	c->ev_set = 1;
	event_add(&c->ev, NULL);
}

static void
conn_drop(struct conn *c)
{
	if (c->ev_set) {
		event_del(&c->ev);
		c->ev_set = 0;
	}
	if (c->ssl != NULL) {
		/* Send close_notify as a real client would; never wait for the reply. */
		if (c->st != S_HANDSHAKE && SSL_is_init_finished(c->ssl))
			(void)SSL_shutdown(c->ssl);
		SSL_free(c->ssl);
		c->ssl = NULL;
	}
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->st = S_FREE;
}

static int
in_window(const struct load *L, uint64_t t)
{
	return t >= L->w_start && t < L->w_end;
}

static void
check_ready(struct load *L)
{
	if (!L->ready && L->held + L->idle_failed == L->idle) {
		L->ready = 1;
		printf("ready %d\n", L->held);
		fflush(stdout);
	}
}

/* Idle mode: one slot per connection, at most -c of them being set up at once. */
static void
next_idle(struct load *L)
{
	while (L->opening < L->nconns && L->opened_idle < L->idle && !L->stopping) {
		L->opening++;
		conn_open(&L->conns[L->opened_idle++]);
	}
}

static void
fail_conn(struct conn *c, const char *why)
{
	struct load *L = c->L;

	if (L->first_error == NULL)
		L->first_error = why;
	if (L->idle || in_window(L, now_ns()) || L->max_requests != 0)
		L->errors++;
	conn_drop(c);
	if (L->idle) {
		L->opening--;
		L->idle_failed++;
		check_ready(L);
		next_idle(L);
		return;
	}
	/* Nothing works at all: stop rather than spin. */
	if (L->errors > 1000 && L->all_requests == 0)
		L->stopping = 1;
	if (L->stopping) {
		event_base_loopbreak(L->base);
		return;
	}
	conn_open(c);
}

static void
conn_open(struct conn *c)
{
	struct load *L = c->L;
	int one = 1;

	c->fd = socket(L->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->fd < 0) {
		L->first_error = "socket() failed (too many open files?)";
		L->errors++;
		L->stopping = 1;
		event_base_loopbreak(L->base);
		return;
	}
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->t_conn = now_ns();
	L->connects++;
	c->st = S_CONNECTING;
	if (connect(c->fd, (struct sockaddr *)&L->addr, L->addrlen) != 0 && errno != EINPROGRESS) {
		fail_conn(c, "connect() failed");
		return;
	}
	wait_for(c, EV_WRITE);
}

static void
start_tls(struct conn *c)
{
	struct load *L = c->L;

	if ((c->ssl = SSL_new(L->ctx)) == NULL || SSL_set_fd(c->ssl, c->fd) != 1 ||
	    SSL_set_tlsext_host_name(c->ssl, L->host) != 1 ||
	    (L->verify && SSL_set1_host(c->ssl, L->host) != 1)) {
		fail_conn(c, "cannot set up TLS");
		return;
	}
	SSL_set_connect_state(c->ssl);
	c->st = S_HANDSHAKE;
	conn_cb(c->fd, EV_WRITE, c);
}

/* Returns 1 when the operation must wait (event armed), 0 to fail the conn. */
static int
ssl_wait(struct conn *c, int r)
{
	switch (SSL_get_error(c->ssl, r)) {
	case SSL_ERROR_WANT_READ:
		wait_for(c, EV_READ);
		return 1;
	case SSL_ERROR_WANT_WRITE:
		wait_for(c, EV_WRITE);
		return 1;
	default:
		return 0;
	}
}

static void
established(struct conn *c)
{
	struct load *L = c->L;

	c->st = S_HELD;
	L->opening--;
	L->held++;
	wait_for(c, EV_READ); /* only to notice the proxy dropping it */
	check_ready(L);
	next_idle(L);
}

static void
start_request(struct conn *c)
{
	c->st = S_WRITE;
	c->off = 0;
	c->t_req = now_ns();
	c->hlen = 0;
	c->ph = P_HEAD;
	c->status = 0;
	c->close_after = c->L->newconn;
	c->head_req = 0;
	conn_cb(c->fd, EV_WRITE, c);
}

static void
response_done(struct conn *c)
{
	struct load *L = c->L;
	uint64_t t = now_ns();
	uint64_t lat = t - (L->newconn ? c->t_conn : c->t_req);

	L->all_requests++;
	if (in_window(L, t) || L->max_requests != 0) {
		L->requests++;
		if (c->status < 200 || c->status > 299)
			L->non2xx++;
		L->hist[hist_index(lat)]++;
		if (lat > L->lat_max)
			L->lat_max = lat;
	}
	if (L->max_requests != 0 && L->all_requests >= L->max_requests) {
		L->stopping = 1;
		L->w_end = t;
		event_base_loopbreak(L->base);
		return;
	}
	if (L->idle) {
		established(c);
		return;
	}
	if (c->close_after) {
		conn_drop(c);
		if (!L->stopping)
			conn_open(c);
		return;
	}
	start_request(c);
}

/* ---- response parsing ---- */

/* Parse the complete head in c->head (hlen bytes, ends with CRLFCRLF). */
static int
parse_head(struct conn *c)
{
	char *p = c->head, *end = c->head + c->hlen, *eol;
	int chunked = 0, have_len = 0;
	uint64_t clen = 0;

	if (c->hlen < 12 || strncmp(p, "HTTP/1.", 7) != 0)
		return -1;
	c->status = atoi(p + 9);
	if (p[7] == '0')
		c->close_after = 1;
	while ((eol = memchr(p, '\n', (size_t)(end - p))) != NULL) {
		char *line = p, *colon, *v;
		size_t n = (size_t)(eol - line);

		p = eol + 1;
		if (n > 0 && line[n - 1] == '\r')
			n--;
		if (n == 0)
			break;
		if ((colon = memchr(line, ':', n)) == NULL)
			continue;
		v = colon + 1;
		while (v < line + n && (*v == ' ' || *v == '\t'))
			v++;
		if ((size_t)(colon - line) == 14 && strncasecmp(line, "content-length", 14) == 0) {
			clen = strtoull(v, NULL, 10);
			have_len = 1;
		} else if ((size_t)(colon - line) == 17 &&
		           strncasecmp(line, "transfer-encoding", 17) == 0) {
			chunked = strncasecmp(v, "chunked", 7) == 0;
		} else if ((size_t)(colon - line) == 10 &&
		           strncasecmp(line, "connection", 10) == 0) {
			if (strncasecmp(v, "close", 5) == 0)
				c->close_after = 1;
		}
	}
	if (c->status == 204 || c->status == 304 || c->head_req)
		c->ph = P_DONE;
	else if (chunked)
		c->ph = P_CHUNK_SIZE;
	else if (have_len)
		c->ph = clen == 0 ? P_DONE : P_LEN;
	else {
		c->ph = P_CLOSE;
		c->close_after = 1;
	}
	c->left = clen;
	c->hlen = 0;
	return 0;
}

/* Consume n response bytes; 1 when the response is complete, -1 on error. */
static int
feed(struct conn *c, const char *p, size_t n)
{
	struct load *L = c->L;
	uint64_t t = now_ns();
	int counting = in_window(L, t) || L->max_requests != 0;

	while (n > 0) {
		switch (c->ph) {
		case P_HEAD: {
			size_t k;

			for (k = 0; k < n; k++) {
				if (c->hlen >= HEAD_MAX)
					return -1;
				c->head[c->hlen++] = p[k];
				if (c->hlen >= 4 &&
				    memcmp(c->head + c->hlen - 4, "\r\n\r\n", 4) == 0) {
					k++;
					break;
				}
			}
			p += k;
			n -= k;
			if (c->hlen >= 4 && memcmp(c->head + c->hlen - 4, "\r\n\r\n", 4) == 0) {
				if (parse_head(c) != 0)
					return -1;
				if (c->ph == P_DONE)
					return n == 0 ? 1 : -1;
			}
			break;
		}
		case P_LEN: {
			size_t k = n < c->left ? n : (size_t)c->left;

			c->left -= k;
			p += k;
			n -= k;
			if (counting)
				L->bytes += k;
			if (c->left == 0)
				return n == 0 ? 1 : -1;
			break;
		}
		case P_CHUNK_SIZE:
			/* Size line (extensions ignored) up to LF, kept in head[]. */
			while (n > 0) {
				char ch = *p++;

				n--;
				if (c->hlen >= 64)
					return -1;
				c->head[c->hlen++] = ch;
				if (ch == '\n') {
					char *e;

					c->head[c->hlen] = '\0';
					c->left = strtoull(c->head, &e, 16);
					if (e == c->head)
						return -1;
					c->hlen = 0;
					c->ph = c->left == 0 ? P_TRAILER : P_CHUNK_DATA;
					c->trailer_empty = 1;
					break;
				}
			}
			break;
		case P_CHUNK_DATA: {
			size_t k = n < c->left ? n : (size_t)c->left;

			c->left -= k;
			p += k;
			n -= k;
			if (counting)
				L->bytes += k;
			if (c->left == 0) {
				c->ph = P_CHUNK_CRLF;
				c->left = 2;
			}
			break;
		}
		case P_CHUNK_CRLF:
			while (n > 0 && c->left > 0) {
				if (*p != (c->left == 2 ? '\r' : '\n'))
					return -1;
				p++;
				n--;
				c->left--;
			}
			if (c->left == 0)
				c->ph = P_CHUNK_SIZE;
			break;
		case P_TRAILER:
			/* Lines until an empty one. */
			while (n > 0) {
				char ch = *p++;

				n--;
				if (ch == '\n') {
					if (c->trailer_empty)
						return n == 0 ? 1 : -1;
					c->trailer_empty = 1;
				} else if (ch != '\r') {
					c->trailer_empty = 0;
				}
			}
			break;
		case P_CLOSE:
			if (counting)
				L->bytes += n;
			n = 0;
			break;
		case P_DONE:
			return -1;
		}
	}
	return 0;
}

static void
do_read(struct conn *c)
{
	struct load *L = c->L;

	for (;;) {
		int n = SSL_read(c->ssl, L->rbuf, READ_CHUNK);
		int r;

		if (n > 0) {
			if ((r = feed(c, L->rbuf, (size_t)n)) < 0) {
				fail_conn(c, "malformed response");
				return;
			}
			if (r == 1) {
				response_done(c);
				return;
			}
			continue;
		}
		r = SSL_get_error(c->ssl, n);
		if (r == SSL_ERROR_WANT_READ) {
			wait_for(c, EV_READ);
			return;
		}
		if (c->ph == P_CLOSE && (r == SSL_ERROR_ZERO_RETURN || r == SSL_ERROR_SYSCALL)) {
			c->close_after = 1;
			response_done(c);
			return;
		}
		ERR_clear_error();
		fail_conn(c, c->ph == P_HEAD && c->hlen == 0 ? "connection closed before a response"
		                                             : "connection cut mid-response");
		return;
	}
}

static void
conn_cb(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;
	struct load *L = c->L;
	int r, err;
	socklen_t elen = sizeof(err);
	ssize_t n;

	(void)what;
	switch (c->st) {
	case S_FREE:
		return;
	case S_CONNECTING:
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0 || err != 0) {
			fail_conn(c, "connect failed");
			return;
		}
		if (!L->use_proxy) {
			start_tls(c);
			return;
		}
		c->st = S_PROXY_WRITE;
		c->off = 0;
		/* fall through */
	case S_PROXY_WRITE:
		n = write(fd, L->connect_req + c->off, L->connect_reqlen - c->off);
		if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			wait_for(c, EV_WRITE);
			return;
		}
		if (n <= 0) {
			fail_conn(c, "cannot send CONNECT");
			return;
		}
		c->off += (size_t)n;
		if (c->off < L->connect_reqlen) {
			wait_for(c, EV_WRITE);
			return;
		}
		c->st = S_PROXY_READ;
		c->hlen = 0;
		wait_for(c, EV_READ);
		return;
	case S_PROXY_READ:
		/* The TLS server never speaks first: everything here is the proxy's reply. */
		n = read(fd, c->head + c->hlen, HEAD_MAX - 1 - c->hlen);
		if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			wait_for(c, EV_READ);
			return;
		}
		if (n <= 0) {
			fail_conn(c, "proxy closed after CONNECT");
			return;
		}
		c->hlen += (size_t)n;
		c->head[c->hlen] = '\0';
		if (strstr(c->head, "\r\n\r\n") == NULL) {
			if (c->hlen >= HEAD_MAX - 1)
				fail_conn(c, "proxy reply too long");
			else
				wait_for(c, EV_READ);
			return;
		}
		if (strncmp(c->head, "HTTP/1.1 200", 12) != 0 &&
		    strncmp(c->head, "HTTP/1.0 200", 12) != 0) {
			fail_conn(c, "proxy refused CONNECT");
			return;
		}
		c->hlen = 0;
		start_tls(c);
		return;
	case S_HANDSHAKE:
		if ((r = SSL_do_handshake(c->ssl)) == 1) {
			if (L->idle && !L->idle_req)
				established(c);
			else
				start_request(c);
			return;
		}
		if (!ssl_wait(c, r)) {
			if (L->first_error == NULL)
				L->first_error = SSL_get_verify_result(c->ssl) != X509_V_OK
				                         ? "certificate verification failed"
				                         : "TLS handshake failed";
			ERR_clear_error();
			fail_conn(c, "TLS handshake failed");
		}
		return;
	case S_WRITE:
		r = SSL_write(c->ssl, L->req + c->off, (int)(L->reqlen - c->off));
		if (r <= 0) {
			if (!ssl_wait(c, r)) {
				ERR_clear_error();
				fail_conn(c, "cannot send the request");
			}
			return;
		}
		c->off += (size_t)r;
		if (c->off < L->reqlen) {
			wait_for(c, EV_WRITE);
			return;
		}
		c->st = S_READ;
		do_read(c);
		return;
	case S_READ:
		do_read(c);
		return;
	case S_HELD: {
		char b[256];

		/* Anything arriving on a held connection is the proxy giving up on it. */
		n = c->ssl != NULL ? SSL_read(c->ssl, b, sizeof(b)) : 0;
		if (n <= 0 && c->ssl != NULL &&
		    SSL_get_error(c->ssl, (int)n) == SSL_ERROR_WANT_READ) {
			wait_for(c, EV_READ);
			return;
		}
		ERR_clear_error();
		L->dropped++;
		L->held--;
		conn_drop(c);
		return;
	}
	}
}

/* ---- setup ---- */

static void
stop_cb(evutil_socket_t fd, short what, void *arg)
{
	struct load *L = arg;

	(void)fd;
	(void)what;
	L->stopping = 1;
	event_base_loopbreak(L->base);
}

static void
stdin_cb(evutil_socket_t fd, short what, void *arg)
{
	struct load *L = arg;
	char b[64];

	(void)what;
	if (read(fd, b, sizeof(b)) > 0)
		return;
	L->stopping = 1;
	event_base_loopbreak(L->base);
}

static int
parse_hostport(const char *s, char *host, size_t hsize, int *port)
{
	const char *colon = strrchr(s, ':');
	size_t hl;
	char *e;
	long p;

	if (colon == NULL)
		return -1;
	hl = (size_t)(colon - s);
	if (s[0] == '[' && hl >= 2 && s[hl - 1] == ']') {
		s++;
		hl -= 2;
	}
	if (hl == 0 || hl >= hsize)
		return -1;
	memcpy(host, s, hl);
	host[hl] = '\0';
	p = strtol(colon + 1, &e, 10);
	if (*e != '\0' || p <= 0 || p > 65535)
		return -1;
	*port = (int)p;
	return 0;
}

/* A numeric address only: the benchmark never asks DNS. */
static int
numeric_addr(const char *host, int port, struct sockaddr_storage *ss, socklen_t *len)
{
	struct addrinfo hints, *res = NULL;
	char ps[8];

	memset(&hints, 0, sizeof(hints));
	hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
	hints.ai_socktype = SOCK_STREAM;
	snprintf(ps, sizeof(ps), "%d", port);
	if (getaddrinfo(host, ps, &hints, &res) != 0 || res == NULL)
		return -1;
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	*len = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

static const char usage_text[] =
        "usage: vload [options] https://HOST:PORT/PATH\n"
        "  -c N             connections (32)\n"
        "  -z SECONDS       measured window (10)\n"
        "  -w SECONDS       warm-up before the window, not counted (1)\n"
        "  -n N             stop after N responses instead (window: until then)\n"
        "  --new            a new connection per request (keep-alive off)\n"
        "  -x HOST:PORT     HTTP proxy: CONNECT through it\n"
        "  --connect A:P    without -x: connect to address A:P for the URL's host\n"
        "  --cacert FILE    verify the server certificate and name against FILE\n"
        "  -H 'Name: v'     extra request header (repeatable)\n"
        "  --idle N         open N connections (at most -c at once), print \"ready N\",\n"
        "                   hold them until stdin closes\n"
        "  --idle-req       with --idle: one request on each before holding it\n";

int
main(int argc, char **argv)
{
	static struct load L;
	static const struct option longopts[] = {{"new", no_argument, NULL, 'N'},
	                                         {"connect", required_argument, NULL, 'C'},
	                                         {"cacert", required_argument, NULL, 'A'},
	                                         {"idle", required_argument, NULL, 'I'},
	                                         {"idle-req", no_argument, NULL, 'R'},
	                                         {"help", no_argument, NULL, 'h'},
	                                         {NULL, 0, NULL, 0}};
	const char *proxy = NULL, *connect_to = NULL, *cacert = NULL;
	char hostbuf[256], phost[256], path[2048], extra[4096] = "";
	double duration = 10, warmup = 1;
	struct event *stop_ev = NULL;
	const char *url, *p, *slash;
	int opt, pport;
	size_t el = 0;
	double window;

	L.nconns = 32;
	while ((opt = getopt_long(argc, argv, "c:z:w:n:x:H:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'c':
			L.nconns = atoi(optarg);
			break;
		case 'z':
			duration = atof(optarg);
			break;
		case 'w':
			warmup = atof(optarg);
			break;
		case 'n':
			L.max_requests = strtoull(optarg, NULL, 10);
			break;
		case 'N':
			L.newconn = 1;
			break;
		case 'x':
			proxy = optarg;
			break;
		case 'C':
			connect_to = optarg;
			break;
		case 'A':
			cacert = optarg;
			break;
		case 'H': {
			int k = snprintf(extra + el, sizeof(extra) - el, "%s\r\n", optarg);

			if (k < 0 || (size_t)k >= sizeof(extra) - el) {
				fputs("vload: too many headers\n", stderr);
				return EXIT_USAGE;
			}
			el += (size_t)k;
			break;
		}
		case 'I':
			L.idle = atoi(optarg);
			break;
		case 'R':
			L.idle_req = 1;
			break;
		case 'h':
			fputs(usage_text, stdout);
			return 0;
		default:
			fputs(usage_text, stderr);
			return EXIT_USAGE;
		}
	}
	if (optind != argc - 1 || L.nconns <= 0 || duration <= 0 || warmup < 0 || L.idle < 0) {
		fputs(usage_text, stderr);
		return EXIT_USAGE;
	}
	url = argv[optind];
	if (strncmp(url, "https://", 8) != 0) {
		fputs("vload: only https:// URLs\n", stderr);
		return EXIT_USAGE;
	}
	p = url + 8;
	slash = strchr(p, '/');
	if (slash == NULL || (size_t)(slash - p) >= sizeof(hostbuf) ||
	    strlen(slash) >= sizeof(path)) {
		fputs("vload: URL must be https://HOST:PORT/PATH\n", stderr);
		return EXIT_USAGE;
	}
	memcpy(hostbuf, p, (size_t)(slash - p));
	hostbuf[slash - p] = '\0';
	strcpy(path, slash);
	{
		static char h[256];

		if (parse_hostport(hostbuf, h, sizeof(h), &L.port) != 0) {
			fputs("vload: URL needs an explicit port\n", stderr);
			return EXIT_USAGE;
		}
		L.host = h;
	}
	if (proxy != NULL) {
		if (parse_hostport(proxy, phost, sizeof(phost), &pport) != 0 ||
		    numeric_addr(phost, pport, &L.addr, &L.addrlen) != 0) {
			fputs("vload: -x needs a numeric ADDR:PORT\n", stderr);
			return EXIT_USAGE;
		}
		L.use_proxy = 1;
	} else if (connect_to != NULL) {
		if (parse_hostport(connect_to, phost, sizeof(phost), &pport) != 0 ||
		    numeric_addr(phost, pport, &L.addr, &L.addrlen) != 0) {
			fputs("vload: --connect needs a numeric ADDR:PORT\n", stderr);
			return EXIT_USAGE;
		}
	} else if (numeric_addr(L.host, L.port, &L.addr, &L.addrlen) != 0) {
		fputs("vload: a host name needs -x or --connect (no DNS)\n", stderr);
		return EXIT_USAGE;
	}
	if (asprintf(&L.req,
	             "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: vload\r\nAccept: */*\r\n%s%s\r\n",
	             path, hostbuf, extra, L.newconn ? "Connection: close\r\n" : "") < 0 ||
	    asprintf(&L.connect_req, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", hostbuf, hostbuf) <
	            0)
		return 1;
	L.reqlen = strlen(L.req);
	L.connect_reqlen = strlen(L.connect_req);

	signal(SIGPIPE, SIG_IGN);
	if ((L.ctx = SSL_CTX_new(TLS_client_method())) == NULL ||
	    SSL_CTX_set_min_proto_version(L.ctx, TLS1_2_VERSION) != 1 ||
	    SSL_CTX_set_alpn_protos(L.ctx, (const unsigned char *)"\x08http/1.1", 9) != 0) {
		fputs("vload: cannot set up OpenSSL\n", stderr);
		return 1;
	}
	/* Every handshake is a full one, as for a fresh process: no resumption. */
	SSL_CTX_set_session_cache_mode(L.ctx, SSL_SESS_CACHE_OFF);
	if (cacert != NULL) {
		if (SSL_CTX_load_verify_locations(L.ctx, cacert, NULL) != 1) {
			fprintf(stderr, "vload: cannot load %s\n", cacert);
			return 1;
		}
		SSL_CTX_set_verify(L.ctx, SSL_VERIFY_PEER, NULL);
		L.verify = 1;
	}
	L.nslots = L.idle ? L.idle : L.nconns;
	if ((L.base = event_base_new()) == NULL || (L.rbuf = malloc(READ_CHUNK)) == NULL ||
	    (L.conns = calloc((size_t)L.nslots, sizeof(*L.conns))) == NULL)
		return 1;
	for (int i = 0; i < L.nslots; i++) {
		L.conns[i].L = &L;
		L.conns[i].fd = -1;
	}

	L.t0 = now_ns();
	if (L.idle) {
		L.w_start = 0;
		L.w_end = UINT64_MAX;
		event_assign(&L.stdin_ev, L.base, 0, EV_READ | EV_PERSIST, stdin_cb, &L);
		event_add(&L.stdin_ev, NULL);
		next_idle(&L);
	} else {
		struct timeval tv;
		double total = L.max_requests != 0 ? 0 : warmup + duration;

		L.w_start = L.max_requests != 0 ? L.t0 : L.t0 + (uint64_t)(warmup * 1e9);
		L.w_end = L.max_requests != 0 ? UINT64_MAX : L.w_start + (uint64_t)(duration * 1e9);
		if (total > 0) {
			tv.tv_sec = (time_t)total;
			tv.tv_usec = (suseconds_t)((total - (double)tv.tv_sec) * 1e6);
			stop_ev = evtimer_new(L.base, stop_cb, &L);
			evtimer_add(stop_ev, &tv);
		}
		for (int i = 0; i < L.nconns; i++)
			conn_open(&L.conns[i]);
	}
	event_base_dispatch(L.base);

	if (L.idle)
		window = (double)(now_ns() - L.t0) / 1e9;
	else if (L.max_requests != 0)
		window = (double)((L.w_end == UINT64_MAX ? now_ns() : L.w_end) - L.t0) / 1e9;
	else
		window = duration;
	printf("{\"mode\":\"%s\",\"conns\":%d,\"window_s\":%.3f,\"requests\":%llu,"
	       "\"all_requests\":%llu,"
	       "\"errors\":%llu,\"non2xx\":%llu,\"connects\":%llu,\"rate\":%.1f,"
	       "\"bytes\":%llu,\"mib_s\":%.2f,\"p50_ms\":%.4f,\"p90_ms\":%.4f,\"p99_ms\":%.4f,"
	       "\"max_ms\":%.4f,\"held\":%d,\"dropped\":%d,\"first_error\":\"%s\"}\n",
	       L.idle      ? "idle"
	       : L.newconn ? "new"
	                   : "keepalive",
	       L.nconns, window, (unsigned long long)L.requests, (unsigned long long)L.all_requests,
	       (unsigned long long)L.errors, (unsigned long long)L.non2xx,
	       (unsigned long long)L.connects, (double)L.requests / window,
	       (unsigned long long)L.bytes, (double)L.bytes / window / 1048576.0,
	       hist_pct(&L, 0.50) / 1e6, hist_pct(&L, 0.90) / 1e6, hist_pct(&L, 0.99) / 1e6,
	       (double)L.lat_max / 1e6, L.held, L.dropped,
	       L.first_error != NULL ? L.first_error : "");
	for (int i = 0; i < L.nslots; i++)
		if (L.conns[i].st != S_FREE)
			conn_drop(&L.conns[i]);
	if (stop_ev != NULL)
		event_free(stop_ev);
	if (L.idle)
		event_del(&L.stdin_ev);
	event_base_free(L.base);
	SSL_CTX_free(L.ctx);
	free(L.conns);
	free(L.rbuf);
	free(L.req);
	free(L.connect_req);
	return 0;
}
