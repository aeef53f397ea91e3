/*
 * inject: put a session's secrets into one proxied HTTP/1.1 request head.
 *
 * Input is a request head already parsed strictly (method, request-target
 * and header slices into the client's buffer), the destination it is going
 * to and the session's keys. Output is a fresh request head, built in a
 * secbuf because it holds the secret (so do the base64 and percent-encoded
 * forms of it: every byte derived from a secret is written only into
 * sodium memory).
 *
 * A key is used only when one of its bindings matches the destination
 * (hostspec_match) and the upstream is TLS or the key has allow_http
 * (security invariant 3). Every other key leaves the request untouched:
 * its placeholder then reaches the upstream as is, which is harmless
 * because a placeholder is not a secret.
 *
 * Modes (enum vault_inject):
 *  - placeholder: every occurrence of the placeholder in the request-target
 *    and in every header value becomes the secret; percent-encoded in the
 *    target (all but RFC 3986 unreserved bytes), raw in header values (a
 *    secret with a control byte other than HTAB, or DEL, is refused there
 *    with VERR_INJECT_SECRET_BYTES). In "Authorization: Basic" the
 *    credentials are base64-decoded (strictly), the placeholder is swapped
 *    inside "user:password" and the result re-encoded; credentials that do
 *    not decode, or do not hold a placeholder, are treated like any other
 *    value. Matching is plain substring matching: a truncated placeholder
 *    is never replaced, a whole one is, whatever surrounds it. Inserted
 *    secret bytes are never searched again.
 *  - bearer, basic:USER, header:NAME: the header is set by the proxy
 *    ("Authorization: Bearer S", "Authorization: Basic base64(USER:S)",
 *    "NAME: S"); every client header of that name (any case) is removed.
 *    The set header takes the place of the first one removed, or follows
 *    the client's headers when it sent none.
 *  - query:PARAM: in the target's query, the value of every PARAM
 *    parameter (exact, case-sensitive name) becomes the percent-encoded
 *    secret; without one, "PARAM=S" is appended with '?' or '&' as needed.
 *    Applies to origin-form and absolute-form targets only; a fragment is
 *    left where it is.
 * Two applicable keys that would set the same header (case-insensitive) or
 * the same query parameter are refused with VERR_INJECT_CONFLICT: failing
 * closed beats guessing which secret the host wanted.
 *
 * The output is "METHOD SP target SP HTTP/1.1 CRLF", the client's headers
 * in their order (minus those the caller drops, with the changes above),
 * the headers set by keys, the caller's extra headers verbatim, and CRLF.
 */
#ifndef VRUN_INJECT_H
#define VRUN_INJECT_H

#include <stddef.h>
#include <stdint.h>

#include "hostspec.h"
#include "http.h"
#include "secbuf.h"
#include "vault.h"

/* Largest request head sent upstream; bigger ones are VERR_TOO_LARGE. */
#define INJECT_HEAD_MAX (64 * 1024)

/* Placeholders: [A-Za-z0-9_], this many bytes (NUL not counted). */
#define INJECT_PLACEHOLDER_MIN 16
#define INJECT_PLACEHOLDER_MAX 64
/* What inject_make_placeholder writes: "vrunph_" + 32 hex digits + NUL. */
#define INJECT_PLACEHOLDER_SIZE 40

/* Keys per call, as in a vault. */
#define INJECT_KEYS_MAX VAULT_ENTRIES_MAX

/* One session key; everything borrowed, nothing copied or freed. */
struct inject_key {
	const char *name;             /* for the caller's audit record; not used here */
	const struct secbuf *secret;  /* 1..VAULT_SECRET_MAX bytes, no CR, LF or NUL */
	const char *placeholder;      /* NUL-terminated, see INJECT_PLACEHOLDER_* */
	const struct hostspec *hosts; /* bindings */
	size_t nhosts;
	uint8_t mode;       /* enum vault_inject */
	const char *arg;    /* inject_arg: "" (or NULL) for placeholder and bearer */
	uint8_t allow_http; /* 1: may also go over plain HTTP */
};

/* One parsed request head; every slice points into the caller's buffer. */
struct inject_request {
	const char *method;
	size_t method_len;
	const char *target; /* request-target as received */
	size_t target_len;
	const struct http_header *headers;
	size_t nheaders;
	const uint8_t *drop; /* NULL, or nheaders flags: nonzero leaves that header out */
	const struct http_header *extra; /* appended verbatim, never searched */
	size_t nextra;
};

/* Where the request goes. */
struct inject_dest {
	const struct hostspec *host; /* concrete (not a wildcard), canonical */
	int tls;                     /* 1 when the upstream connection is TLS */
};

/* Per-key outcome, for the audit record. */
enum inject_result {
	INJECT_NONE = 0,     /* not bound here, or nothing to replace */
	INJECT_DONE = 1,     /* the secret is in the output head */
	INJECT_NEED_TLS = 2, /* bound here, withheld: plain HTTP without allow_http */
};

/*
 * Build the upstream request head for req going to dest, injecting keys.
 * On success *out is a new secbuf holding exactly the head (free it with
 * secbuf_free) and, when result is not NULL, result[i] is the enum
 * inject_result of keys[i]. *out and result[0..nkeys) are cleared on entry
 * and stay cleared on error.
 *
 * Returns 0, or VERR_INVALID (malformed key, placeholder, method, target or
 * header bytes: the caller's parser or configuration is wrong),
 * VERR_SECRET_EMPTY/VERR_SECRET_BYTES/VERR_TOO_LARGE (bad secret),
 * VERR_TOO_MANY (more than INJECT_KEYS_MAX keys), VERR_INJECT_CONFLICT,
 * VERR_INJECT_SECRET_BYTES, VERR_TOO_LARGE (head over INJECT_HEAD_MAX),
 * VERR_NOMEM, VERR_CRYPTO.
 */
int inject_apply(const struct inject_request *req, const struct inject_dest *dest,
                 const struct inject_key *keys, size_t nkeys, struct secbuf **out, uint8_t *result);

/*
 * A fresh random placeholder, "vrunph_" + 32 lower-case hex digits, into
 * buf (size >= INJECT_PLACEHOLDER_SIZE). 0, VERR_TOO_LARGE or VERR_CRYPTO;
 * buf is an empty string on error.
 */
int inject_make_placeholder(char *buf, size_t size);

/*
 * Is p a well-formed placeholder ([A-Za-z0-9_], INJECT_PLACEHOLDER_MIN to
 * _MAX bytes; also what makes it safe in a head, a URL and JSON)? 0 with
 * *len set, or VERR_INVALID.
 */
int inject_placeholder_check(const char *p, size_t *len);

/*
 * 1 when the len bytes at p contain k's placeholder, else 0. For the audit
 * reason "placeholder seen but not injected": run it over the raw head of
 * a request whose result was not INJECT_DONE. It does not look inside
 * base64.
 */
int inject_placeholder_seen(const struct inject_key *k, const void *p, size_t len);

/* Fill *k from a vault entry and the session's placeholder for it (borrowed). */
void inject_key_from_entry(const struct vault_entry *e, const char *placeholder,
                           struct inject_key *k);

#endif
