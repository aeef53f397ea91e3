/*
 * tlsctx: vproxy's OpenSSL contexts. The client-facing context terminates
 * the sandboxed command's TLS with leaves from the session CA; upstream
 * contexts verify the real server against the system roots, or against a
 * key's own CA bundle (vault add --ca) when the destination's keys have one.
 */
#ifndef VRUN_TLSCTX_H
#define VRUN_TLSCTX_H

#include <openssl/ssl.h>
#include <stddef.h>

/*
 * The process-wide context for connections from the child: TLS >= 1.2,
 * ALPN limited to http/1.1 and http/1.0 (a client that offers only h2
 * fails the handshake), sni_cb checking the server name. Certificates are
 * set per connection. Made on the first call; NULL on failure.
 */
SSL_CTX *tlsctx_client_side(int (*sni_cb)(SSL *ssl, int *alert, void *arg));

/*
 * A context for connections to upstream servers trusting the system roots
 * when pems is empty, else exactly the certificates in the n PEM bundles.
 * Verification is mandatory (SSL_VERIFY_PEER), TLS >= 1.2, ALPN
 * http/1.1. The system-roots context is shared (one reference is added
 * for the caller); release with SSL_CTX_free. NULL on failure.
 * new_session, when given, receives each session the server lets us resume
 * (the SSL_CTX_sess_set_new_cb contract: 1 when it keeps the reference);
 * OpenSSL keeps none itself.
 */
SSL_CTX *tlsctx_upstream(const unsigned char *const *pems, const size_t *lens, size_t n,
                         int (*new_session)(SSL *ssl, SSL_SESSION *sess));

#endif
