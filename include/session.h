/*
 * session: one `vrun` invocation as vproxy sees it. It holds copies of the
 * session's keys (secrets in sodium memory), a fresh placeholder per key,
 * the session CA and the CA bundle file for the child, and the listener
 * vrun passed in: every connection accepted on it belongs to this session.
 */
#ifndef VRUN_SESSION_H
#define VRUN_SESSION_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "conn.h"
#include "hostspec.h"
#include "resolve.h"
#include "vault.h"

#define SESSION_MAX_ALLOW 64
#define SESSION_KEYS_MAX  16 /* keys per session (the control protocol's CTL_MAX_KEYS) */
#define SESSION_ID_LEN    16 /* hex characters */

struct event_base;
struct session;

struct session_params {
	const struct vault_entry *const *keys; /* resolved entries, copied in */
	size_t nkeys;
	const struct hostspec *allow; /* --allow-host: tunnelled opaquely */
	size_t nallow;
	const char *command; /* for status and audit */
	const char *cwd;     /* for audit; may be NULL */
	const char *profile; /* for audit; may be NULL */
	pid_t pid;
	uid_t uid;     /* the peer's, from SO_PEERCRED */
	int listen_fd; /* ownership moves in on success */
	const char *runtime_dir;
	const struct resolve_map *resolve;
	const struct conn_timeouts *timeouts; /* borrowed; NULL: the defaults */
	struct audit *audit;                  /* session start/end and every request */
	/*
	 * When set, every connection must open with Proxy-Authorization:
	 * Basic base64("vrun:" token), checked in constant time (macOS, where
	 * the loopback listener is not private to the sandbox). NULL on Linux.
	 */
	const char *proxy_token;
};

/*
 * Start a session: copy the keys, make placeholders, the CA and its
 * bundle, and start accepting on the listener. VERR_LISTENER when the
 * descriptor is not a listening TCP socket.
 */
int session_open(struct event_base *base, const struct session_params *p, struct session **out);

const char *session_id(const struct session *s);
const char *session_ca_path(const struct session *s);
const char *session_command(const struct session *s);
size_t session_nkeys(const struct session *s);
const char *session_key_name(const struct session *s, size_t i);
const char *session_key_env(const struct session *s, size_t i);
const char *session_placeholder(const struct session *s, size_t i);
uint64_t session_requests(const struct session *s);

/* The command's exit status, reported by vrun when it closes the session. */
void session_set_exit(struct session *s, int64_t status);

/* ---- for the connections of the session (conn.c) ---- */

struct sessca;
struct inject_key;
struct evdns_base;
typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_st SSL;
typedef struct ssl_session_st SSL_SESSION;

struct event_base *session_base(const struct session *s);
struct sessca *session_ca(const struct session *s);
const struct inject_key *session_inject_keys(const struct session *s, size_t *n);
const struct resolve_map *session_resolve(const struct session *s);
const struct conn_timeouts *session_timeouts(const struct session *s);

/* The scrubbing patterns of the session's secrets (scrub.h). */
struct scrub_set;
const struct scrub_set *session_scrub(const struct session *s);

/* 1 when a key of the session is bound to the concrete target, else 0. */
int session_bound(const struct session *s, const struct hostspec *target);

/* 1 when target was given with --allow-host (opaque tunnel), else 0. */
int session_tunnel_allowed(const struct session *s, const struct hostspec *target);

/*
 * 1 when two keys of the session bound to target trust different upstream
 * CAs (their --ca bundles differ, or one has none: the system roots), with
 * their names in *a and *b. Each key's secret may only go to a server
 * verified the way its own entry says, so such a destination is refused.
 */
int session_trust_conflict(const struct session *s, const struct hostspec *target, const char **a,
                           const char **b);

/*
 * The upstream TLS context for a bound target: the CA bundle of the keys
 * bound to it (vault add --ca; they agree, see session_trust_conflict), or
 * the system roots.
 * A new reference (SSL_CTX_free), or NULL.
 */
SSL_CTX *session_upstream_ctx(struct session *s, const struct hostspec *target,
                              int (*new_session)(SSL *ssl, SSL_SESSION *sess));

/*
 * TLS session resumption upstream, per vproxy session and destination:
 * the last resumable session a verified upstream of target handed out (a
 * new reference, or NULL), and keeping a new one (the reference passes to
 * the session, which frees it when it has no slot for target).
 */
SSL_SESSION *session_upstream_ticket(struct session *s, const struct hostspec *target);
void session_keep_ticket(struct session *s, const struct hostspec *target, SSL_SESSION *sess);

/* The DNS resolver for names without a --resolve entry (made on first use). */
struct evdns_base *session_dns(struct session *s);

/*
 * 1 when the session needs no proxy credential or value (len bytes of a
 * Proxy-Authorization field) carries the right one, else 0.
 */
int session_proxy_auth_ok(const struct session *s, const char *value, size_t len);

/*
 * Write the audit record of one request and add it to the session's
 * totals. Returns 0, or the audit error: the caller must then refuse (503)
 * or cut the response, never deliver it as complete.
 */
struct audit_request;
int session_audit_request(struct session *s, const struct audit_request *r);

/*
 * 0 when a request's record can be expected to be written (audit_ready);
 * otherwise nothing may be forwarded for it: the caller refuses with 503.
 */
int session_audit_ready(struct session *s);

/* Stop accepting, close every connection, delete the bundle, wipe keys. */
void session_close(struct session *s);

#endif
