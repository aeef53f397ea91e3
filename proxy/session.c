#define _GNU_SOURCE
#include "session.h"

#include <errno.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <netinet/in.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "audit.h"
#include "conn.h"
#include "inject.h"
#include "scrub.h"
#include "sessca.h"
#include "tlsctx.h"
#include "verr.h"

#define SESSION_CONNS_MAX 256

#define CTX_CACHE 8

struct ctx_cache {
	struct hostspec host;
	SSL_CTX *ctx;
	SSL_SESSION *ticket; /* to resume the next connection to host */
};

struct session {
	char id[SESSION_ID_LEN + 1];
	char *command;
	char *cwd;
	char *profile;
	pid_t pid;
	uid_t uid;
	int64_t exit_status;
	int has_exit;
	struct event_base *base;
	struct evconnlistener *listener;
	struct event *retry_ev;
	struct vault_entry **keys; /* deep copies: secrets in sodium memory */
	char (*placeholders)[INJECT_PLACEHOLDER_SIZE];
	struct inject_key *ikeys;
	size_t nkeys;
	struct hostspec allow[SESSION_MAX_ALLOW];
	size_t nallow;
	struct sessca *ca;
	struct scrub_set *scrub;
	struct ctx_cache ctxs[CTX_CACHE];
	size_t ctx_next;
	char *bundle;
	const struct resolve_map *resolve;
	struct conn_timeouts timeouts;
	struct conn_list conns;
	struct evdns_base *dns;
	struct audit *audit;
	struct secbuf *proxy_auth; /* expected Proxy-Authorization value, or NULL */
	int started;               /* the session_start record is written */
	struct timespec t0;
	uint64_t requests, denied, bytes_up, bytes_down;
};

static int
copy_entry(const struct vault_entry *e, struct vault_entry **out)
{
	struct vault_entry *c;
	int r;

	*out = NULL;
	if ((r = vault_entry_new(&c)) != 0)
		return r;
	memcpy(c->name, e->name, sizeof(c->name));
	memcpy(c->hosts, e->hosts, sizeof(c->hosts));
	c->nhosts = e->nhosts;
	c->inject = e->inject;
	memcpy(c->inject_arg, e->inject_arg, sizeof(c->inject_arg));
	memcpy(c->env, e->env, sizeof(c->env));
	c->allow_http = e->allow_http;
	c->created = e->created;
	c->changed = e->changed;
	if ((r = secbuf_dup(e->secret->data, e->secret->len, &c->secret)) != 0)
		goto fail;
	if (e->ca_len > 0) {
		if ((c->ca = malloc(e->ca_len)) == NULL) {
			r = VERR_NOMEM;
			goto fail;
		}
		memcpy(c->ca, e->ca, e->ca_len);
		c->ca_len = e->ca_len;
	}
	*out = c;
	return VERR_OK;
fail:
	vault_entry_free(c);
	return r;
}

/* Only a listening TCP socket bound to loopback may become a session listener. */
static int
check_listener(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int v = 0;
	socklen_t vl = sizeof(v);

	if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &vl) != 0 || v != 1)
		return VERR_LISTENER;
	vl = sizeof(v);
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &vl) != 0 || v != SOCK_STREAM)
		return VERR_LISTENER;
	if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
		return VERR_LISTENER;
	if (ss.ss_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)&ss;

		if ((ntohl(s4->sin_addr.s_addr) >> 24) != 127)
			return VERR_LISTENER;
	} else if (ss.ss_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)&ss;

		if (!IN6_IS_ADDR_LOOPBACK(&s6->sin6_addr))
			return VERR_LISTENER;
	} else {
		return VERR_LISTENER;
	}
	return VERR_OK;
}

static void
on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int salen, void *arg)
{
	struct session *s = arg;

	(void)l;
	(void)sa;
	(void)salen;
	if (s->conns.n >= SESSION_CONNS_MAX) {
		/* Over the cap: a short answer, then close; no state is kept. */
		static const char busy[] = "HTTP/1.1 503 Service Unavailable\r\n"
		                           "Content-Length: 0\r\nConnection: close\r\n\r\n";

		(void)!send(fd, busy, sizeof(busy) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
		close(fd);
		return;
	}
	conn_start(s, &s->conns, fd);
}

static void
retry_accept(evutil_socket_t fd, short what, void *arg)
{
	struct session *s = arg;

	(void)fd;
	(void)what;
	evconnlistener_enable(s->listener);
}

static void
on_accept_error(struct evconnlistener *l, void *arg)
{
	struct session *s = arg;
	struct timeval tv = {0, 100 * 1000};

	/* EMFILE and friends: back off instead of spinning on a readable socket. */
	evconnlistener_disable(l);
	evtimer_add(s->retry_ev, &tv);
}

/* The whole expected field value, "Basic " + base64("vrun:" token). */
static int
make_proxy_auth(struct session *s, const char *token)
{
	size_t tlen = strlen(token), raw = 5 + tlen, b64;
	struct secbuf *cred = NULL;
	int r;

	if (tlen < 16 || tlen > 128)
		return VERR_INVALID;
	b64 = sodium_base64_encoded_len(raw, sodium_base64_VARIANT_ORIGINAL);
	if ((r = secbuf_new(raw, &cred)) != 0 || (r = secbuf_new(6 + b64, &s->proxy_auth)) != 0)
		goto out;
	memcpy(cred->data, "vrun:", 5);
	memcpy(cred->data + 5, token, tlen);
	memcpy(s->proxy_auth->data, "Basic ", 6);
	sodium_bin2base64((char *)s->proxy_auth->data + 6, b64, cred->data, raw,
	                  sodium_base64_VARIANT_ORIGINAL);
	s->proxy_auth->len = 6 + b64 - 1; /* without the NUL */
out:
	secbuf_free(cred);
	return r;
}

int
session_proxy_auth_ok(const struct session *s, const char *value, size_t len)
{
	if (s->proxy_auth == NULL)
		return 1;
	if (value == NULL || len != s->proxy_auth->len)
		return 0;
	return sodium_memcmp(value, s->proxy_auth->data, len) == 0;
}

static int
audit_start(struct session *s)
{
	const char *names[SESSION_KEYS_MAX];
	char allow[SESSION_MAX_ALLOW][HOSTSPEC_NAME_MAX + 16];
	const char *allowp[SESSION_MAX_ALLOW];
	struct audit_session_start st;
	int r;

	if (s->audit == NULL)
		return VERR_OK;
	memset(&st, 0, sizeof(st));
	for (size_t i = 0; i < s->nkeys; i++)
		names[i] = s->keys[i]->name;
	for (size_t i = 0; i < s->nallow; i++) {
		hostspec_format(&s->allow[i], allow[i], sizeof(allow[i]));
		allowp[i] = allow[i];
	}
	st.pid = s->pid;
	st.uid = s->uid;
	st.command = s->command;
	st.cwd = s->cwd;
	st.keys = names;
	st.nkeys = s->nkeys;
	st.profile = s->profile[0] != '\0' ? s->profile : NULL;
	st.allow_hosts = allowp;
	st.nallow_hosts = s->nallow;
	if ((r = audit_log_session_start(s->audit, s->id, &st)) == 0)
		s->started = 1;
	return r;
}

static void
audit_end(struct session *s)
{
	struct audit_session_end e;
	struct timespec now;

	if (s->audit == NULL || !s->started)
		return;
	clock_gettime(CLOCK_MONOTONIC, &now);
	memset(&e, 0, sizeof(e));
	e.exited = s->has_exit;
	e.exit_status = (int)s->exit_status;
	e.requests = s->requests;
	e.denied = s->denied;
	e.bytes_up = s->bytes_up;
	e.bytes_down = s->bytes_down;
	e.duration_ms = (uint64_t)((now.tv_sec - s->t0.tv_sec) * 1000 +
	                           (now.tv_nsec - s->t0.tv_nsec) / 1000000);
	/* Nothing to refuse any more; a failure shows as a missing end in the log. */
	(void)audit_log_session_end(s->audit, s->id, &e);
}

int
session_audit_request(struct session *s, const struct audit_request *r)
{
	/* Counted as recorded: the end record's totals match the request records. */
	s->requests++;
	s->denied += r->denied ? 1 : 0;
	s->bytes_up += r->bytes_up;
	s->bytes_down += r->bytes_down;
	if (s->audit == NULL)
		return VERR_OK;
	return audit_log_request(s->audit, s->id, r);
}

int
session_audit_ready(struct session *s)
{
	return s->audit == NULL ? VERR_OK : audit_ready(s->audit);
}

int
session_open(struct event_base *base, const struct session_params *p, struct session **out)
{
	struct session *s;
	struct hostspec *hosts = NULL;
	size_t nhosts = 0;
	unsigned char idb[SESSION_ID_LEN / 2];
	int r;

	*out = NULL;
	if (p->nkeys == 0 || p->nkeys > SESSION_KEYS_MAX || p->nallow > SESSION_MAX_ALLOW)
		return VERR_INVALID;
	if ((r = check_listener(p->listen_fd)) != 0)
		return r;
	if ((s = calloc(1, sizeof(*s))) == NULL)
		return VERR_NOMEM;
	s->base = base;
	s->pid = p->pid;
	s->uid = p->uid;
	s->audit = p->audit;
	clock_gettime(CLOCK_MONOTONIC, &s->t0);
	s->resolve = p->resolve;
	if (p->timeouts != NULL)
		s->timeouts = *p->timeouts;
	else
		s->timeouts = (struct conn_timeouts)CONN_TIMEOUTS_DEFAULT;
	randombytes_buf(idb, sizeof(idb));
	sodium_bin2hex(s->id, sizeof(s->id), idb, sizeof(idb));
	r = VERR_NOMEM;
	if ((s->command = strdup(p->command != NULL ? p->command : "")) == NULL ||
	    (s->cwd = strdup(p->cwd != NULL ? p->cwd : "")) == NULL ||
	    (s->profile = strdup(p->profile != NULL ? p->profile : "")) == NULL ||
	    (s->keys = calloc(p->nkeys, sizeof(*s->keys))) == NULL ||
	    (s->placeholders = calloc(p->nkeys, sizeof(*s->placeholders))) == NULL ||
	    (s->ikeys = calloc(p->nkeys, sizeof(*s->ikeys))) == NULL)
		goto fail;
	for (size_t i = 0; i < p->nkeys; i++) {
		if ((r = copy_entry(p->keys[i], &s->keys[i])) != 0 ||
		    (r = inject_make_placeholder(s->placeholders[i], sizeof(s->placeholders[i]))) !=
		            0)
			goto fail;
		s->nkeys++;
		inject_key_from_entry(s->keys[i], s->placeholders[i], &s->ikeys[i]);
		nhosts += s->keys[i]->nhosts;
	}
	/* Every secret of the session is scrubbed from every response. */
	if ((r = scrub_set_new(s->ikeys, s->nkeys, &s->scrub)) != 0)
		goto fail;
	memcpy(s->allow, p->allow, p->nallow * sizeof(*p->allow));
	s->nallow = p->nallow;
	/* The CA may vouch only for hosts a key of this session is bound to. */
	if ((hosts = calloc(nhosts, sizeof(*hosts))) == NULL) {
		r = VERR_NOMEM;
		goto fail;
	}
	nhosts = 0;
	for (size_t i = 0; i < s->nkeys; i++)
		for (size_t j = 0; j < s->keys[i]->nhosts; j++)
			hosts[nhosts++] = s->keys[i]->hosts[j];
	if ((r = sessca_new(hosts, nhosts, &s->ca)) != 0 ||
	    (r = sessca_write_bundle(s->ca, p->runtime_dir, NULL, &s->bundle)) != 0)
		goto fail;
	if (p->proxy_token != NULL && (r = make_proxy_auth(s, p->proxy_token)) != 0)
		goto fail;
	/* Fail closed: a session whose start cannot be recorded does not start. */
	if ((r = audit_start(s)) != 0)
		goto fail;
	if ((s->retry_ev = evtimer_new(base, retry_accept, s)) == NULL) {
		r = VERR_NOMEM;
		goto fail;
	}
	if (evutil_make_socket_nonblocking(p->listen_fd) != 0 ||
	    evutil_make_socket_closeonexec(p->listen_fd) != 0) {
		r = VERR_SYSTEM;
		goto fail;
	}
	/* Backlog 0: vrun's child already called listen(). */
	s->listener = evconnlistener_new(
	        base, on_accept, s, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 0, p->listen_fd);
	if (s->listener == NULL) {
		r = VERR_SYSTEM;
		goto fail;
	}
	evconnlistener_set_error_cb(s->listener, on_accept_error);
	free(hosts);
	*out = s;
	return VERR_OK;
fail:
	free(hosts);
	session_close(s); /* does not close listen_fd: it stays the caller's */
	return r;
}

const char *
session_id(const struct session *s)
{
	return s->id;
}

const char *
session_ca_path(const struct session *s)
{
	return s->bundle;
}

const char *
session_command(const struct session *s)
{
	return s->command;
}

size_t
session_nkeys(const struct session *s)
{
	return s->nkeys;
}

const char *
session_key_name(const struct session *s, size_t i)
{
	return s->keys[i]->name;
}

const char *
session_key_env(const struct session *s, size_t i)
{
	return s->keys[i]->env;
}

const char *
session_placeholder(const struct session *s, size_t i)
{
	return s->placeholders[i];
}

uint64_t
session_requests(const struct session *s)
{
	return s->requests;
}

struct event_base *
session_base(const struct session *s)
{
	return s->base;
}

struct sessca *
session_ca(const struct session *s)
{
	return s->ca;
}

const struct inject_key *
session_inject_keys(const struct session *s, size_t *n)
{
	*n = s->nkeys;
	return s->ikeys;
}

const struct scrub_set *
session_scrub(const struct session *s)
{
	return s->scrub;
}

const struct conn_timeouts *
session_timeouts(const struct session *s)
{
	return &s->timeouts;
}

const struct resolve_map *
session_resolve(const struct session *s)
{
	return s->resolve;
}

int
session_bound(const struct session *s, const struct hostspec *target)
{
	for (size_t i = 0; i < s->nkeys; i++)
		for (size_t j = 0; j < s->keys[i]->nhosts; j++)
			if (hostspec_match(&s->keys[i]->hosts[j], target))
				return 1;
	return 0;
}

int
session_tunnel_allowed(const struct session *s, const struct hostspec *target)
{
	for (size_t i = 0; i < s->nallow; i++)
		if (hostspec_match(&s->allow[i], target))
			return 1;
	return 0;
}

/* Whether e is bound to target. */
static int
entry_binds(const struct vault_entry *e, const struct hostspec *target)
{
	for (size_t j = 0; j < e->nhosts; j++)
		if (hostspec_match(&e->hosts[j], target))
			return 1;
	return 0;
}

int
session_trust_conflict(const struct session *s, const struct hostspec *target, const char **a,
                       const char **b)
{
	const struct vault_entry *first = NULL;

	for (size_t i = 0; i < s->nkeys; i++) {
		const struct vault_entry *e = s->keys[i];

		if (!entry_binds(e, target))
			continue;
		if (first == NULL) {
			first = e;
		} else if (e->ca_len != first->ca_len ||
		           (e->ca_len > 0 && memcmp(e->ca, first->ca, e->ca_len) != 0)) {
			*a = first->name;
			*b = e->name;
			return 1;
		}
	}
	return 0;
}

static SSL_CTX *
make_upstream_ctx(const struct session *s, const struct hostspec *target,
                  int (*new_session)(SSL *ssl, SSL_SESSION *sess))
{
	const unsigned char *pems[SESSION_KEYS_MAX];
	size_t lens[SESSION_KEYS_MAX], n = 0;

	for (size_t i = 0; i < s->nkeys && n < SESSION_KEYS_MAX; i++) {
		const struct vault_entry *e = s->keys[i];

		/* All agree (session_trust_conflict): the first one's will do. */
		if (e->ca_len > 0 && entry_binds(e, target)) {
			pems[n] = e->ca;
			lens[n++] = e->ca_len;
			break;
		}
	}
	return tlsctx_upstream(pems, lens, n, new_session);
}

/*
 * Contexts are cached per destination for the session's lifetime: the
 * trust store (system roots or the keys' CAs) is the same for every
 * connection to it, and building it costs a PEM parse each time.
 */
static struct ctx_cache *
ctx_slot(struct session *s, const struct hostspec *target)
{
	for (size_t i = 0; i < CTX_CACHE; i++) {
		struct ctx_cache *slot = &s->ctxs[i];

		if (slot->ctx != NULL && slot->host.port == target->port &&
		    slot->host.kind == target->kind && strcmp(slot->host.host, target->host) == 0)
			return slot;
	}
	return NULL;
}

SSL_CTX *
session_upstream_ctx(struct session *s, const struct hostspec *target,
                     int (*new_session)(SSL *ssl, SSL_SESSION *sess))
{
	struct ctx_cache *slot;
	SSL_CTX *ctx;

	if ((slot = ctx_slot(s, target)) != NULL) {
		SSL_CTX_up_ref(slot->ctx);
		return slot->ctx;
	}
	if ((ctx = make_upstream_ctx(s, target, new_session)) == NULL)
		return NULL;
	slot = &s->ctxs[s->ctx_next++ % CTX_CACHE];
	SSL_CTX_free(slot->ctx);
	SSL_SESSION_free(slot->ticket);
	slot->host = *target;
	slot->ctx = ctx;
	slot->ticket = NULL;
	SSL_CTX_up_ref(ctx);
	return ctx;
}

SSL_SESSION *
session_upstream_ticket(struct session *s, const struct hostspec *target)
{
	struct ctx_cache *slot = ctx_slot(s, target);

	if (slot == NULL || slot->ticket == NULL)
		return NULL;
	SSL_SESSION_up_ref(slot->ticket);
	return slot->ticket;
}

void
session_keep_ticket(struct session *s, const struct hostspec *target, SSL_SESSION *sess)
{
	struct ctx_cache *slot = ctx_slot(s, target);

	if (slot == NULL) {
		SSL_SESSION_free(sess);
		return;
	}
	SSL_SESSION_free(slot->ticket);
	slot->ticket = sess;
}

struct evdns_base *
session_dns(struct session *s)
{
	if (s->dns == NULL)
		s->dns = evdns_base_new(s->base, EVDNS_BASE_INITIALIZE_NAMESERVERS);
	return s->dns;
}

void
session_set_exit(struct session *s, int64_t status)
{
	s->exit_status = status;
	s->has_exit = 1;
}

void
session_close(struct session *s)
{
	if (s == NULL)
		return;
	if (s->listener != NULL)
		evconnlistener_free(s->listener);
	if (s->retry_ev != NULL)
		event_free(s->retry_ev);
	conn_close_all(&s->conns); /* their records first, then the session's end */
	audit_end(s);
	if (s->bundle != NULL) {
		sessca_remove_bundle(s->bundle);
		free(s->bundle);
	}
	if (s->dns != NULL)
		evdns_base_free(s->dns, 1);
	sessca_free(s->ca);
	scrub_set_free(s->scrub);
	secbuf_free(s->proxy_auth);
	for (size_t i = 0; i < CTX_CACHE; i++) {
		SSL_CTX_free(s->ctxs[i].ctx);
		SSL_SESSION_free(s->ctxs[i].ticket);
	}
	for (size_t i = 0; i < s->nkeys; i++)
		vault_entry_free(s->keys[i]);
	free(s->keys);
	free(s->placeholders);
	free(s->ikeys);
	free(s->command);
	free(s->cwd);
	free(s->profile);
	free(s);
}
