/*
 * sessca: the per-session certificate authority.
 *
 * Each session gets its own EC P-256 CA, made in memory when the session
 * opens and freed with it: there is no long-lived interception CA to steal
 * or install. Its private key lives only in an EVP_PKEY inside this
 * process (never PEM, never disk) and OpenSSL cleanses it when freed. The
 * CA certificate carries a critical nameConstraints extension that permits
 * only the session's bound hosts, so even a leaf minted by mistake for
 * another host fails verification in the child (defence in depth: the
 * proxy's own binding check stays the precise gate).
 *
 * Leaves are minted on demand for concrete bound hosts, share one P-256
 * key per session, and are cached per host (at most SESSCA_CACHE_MAX,
 * least recently used evicted first).
 *
 * Not thread-safe: one struct sessca belongs to one thread at a time. The
 * process-wide cache of the system roots used by sessca_write_bundle() is
 * locked internally.
 *
 * Functions returning int give 0 or a negative VERR_* code; on VERR_CRYPTO
 * the OpenSSL error queue holds the cause. Output parameters are cleared on
 * entry.
 */
#ifndef VRUN_SESSCA_H
#define VRUN_SESSCA_H

#include <stddef.h>

#include <openssl/types.h>

#include "hostspec.h"

#define SESSCA_LIFETIME_DEFAULT (24L * 60 * 60)      /* seconds */
#define SESSCA_LIFETIME_MAX     (30L * 24 * 60 * 60) /* seconds */
#define SESSCA_BACKDATE         (5L * 60)            /* notBefore = now - this */
#define SESSCA_HOSTS_MAX        1024
#define SESSCA_CACHE_MAX        256

struct sessca;

/*
 * Make a session CA for the nhosts bindings at hosts (NULL when nhosts is
 * 0), valid from now - SESSCA_BACKDATE to now + SESSCA_LIFETIME_DEFAULT.
 * Ports do not matter to certificates: bindings differing only by port
 * give one constraint. With no bindings the CA permits no name and no
 * address at all. VERR_INVALID for a malformed hostspec, VERR_TOO_MANY
 * above SESSCA_HOSTS_MAX, VERR_NOMEM, VERR_CRYPTO. *out cleared first.
 */
int sessca_new(const struct hostspec *hosts, size_t nhosts, struct sessca **out);

/* Same with a lifetime of 1..SESSCA_LIFETIME_MAX seconds (else VERR_INVALID). */
int sessca_new_lifetime(const struct hostspec *hosts, size_t nhosts, long lifetime,
                        struct sessca **out);

/*
 * The leaf certificate and private key for the concrete (non-wildcard)
 * target host, minted on first use and cached; target's port is ignored.
 * Both are new references: the caller releases them with X509_free() and
 * EVP_PKEY_free() (SSL_use_certificate/SSL_use_PrivateKey take their own),
 * so they stay valid after eviction from the cache or sessca_free(). key
 * may be NULL when only the certificate is wanted.
 * VERR_CERT_UNBOUND when target matches no binding of the session,
 * VERR_CERT_EXPIRED once the CA has expired, VERR_INVALID for a wildcard
 * or malformed target, VERR_NOMEM, VERR_CRYPTO.
 */
int sessca_leaf(struct sessca *ca, const struct hostspec *target, X509 **cert, EVP_PKEY **key);

/* The CA certificate, borrowed: valid until sessca_free(). */
X509 *sessca_cert(const struct sessca *ca);

/* The CA certificate in PEM: a malloc'd, NUL-terminated copy; *len without the NUL. */
int sessca_pem(const struct sessca *ca, char **pem, size_t *len);

/* Leaves currently cached (at most SESSCA_CACHE_MAX). */
size_t sessca_cache_count(const struct sessca *ca);

/*
 * Write the CA bundle for the sandboxed child into dir (the caller's
 * private 0700 runtime directory) as dir/ca-<32 hex>.pem, mode 0644: the
 * trusted system roots (contents of roots_file; NULL means OpenSSL's
 * X509_get_default_cert_file()) followed by the session CA. A roots file
 * that does not exist gives a bundle with the session CA alone. The file
 * is created exclusively (O_EXCL, O_NOFOLLOW) and removed again on any
 * error. *path_out receives the malloc'd path. VERR_SYSTEM (errno set),
 * VERR_TOO_LARGE for an oversized roots file or path, VERR_INVALID,
 * VERR_NOMEM.
 */
int sessca_write_bundle(const struct sessca *ca, const char *dir, const char *roots_file,
                        char **path_out);

/* Unlink a bundle written by sessca_write_bundle(); VERR_SYSTEM with errno on failure. */
int sessca_remove_bundle(const char *path);

/* Free the session: CA key, leaf key and cached leaves. NULL is fine. */
void sessca_free(struct sessca *ca);

/*
 * For tests only: skips the binding check. Signs a leaf for any concrete
 * target with the session CA, uncached, so tests can prove that the
 * nameConstraints extension makes verifiers reject what the proxy must
 * never mint. Never call this from the proxy. *cert is a new reference.
 */
int sessca_mint_unchecked(struct sessca *ca, const struct hostspec *target, X509 **cert);

#endif
