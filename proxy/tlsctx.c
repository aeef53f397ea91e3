#include "tlsctx.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <string.h>

static const unsigned char alpn_http11[] = "\x08http/1.1";
/* What the client side accepts, in our order of preference. */
static const unsigned char alpn_http1x[] = "\x08http/1.1\x08http/1.0";

static int
select_alpn(SSL *ssl, const unsigned char **out, unsigned char *outlen, const unsigned char *in,
            unsigned int inlen, void *arg)
{
	(void)ssl;
	(void)arg;
	/* We speak HTTP/1.x only; offering nothing else we understand (h2 alone) is fatal. */
	if (SSL_select_next_proto((unsigned char **)out, outlen, alpn_http1x,
	                          sizeof(alpn_http1x) - 1, in, inlen) != OPENSSL_NPN_NEGOTIATED)
		return SSL_TLSEXT_ERR_ALERT_FATAL;
	return SSL_TLSEXT_ERR_OK;
}

SSL_CTX *
tlsctx_client_side(int (*sni_cb)(SSL *ssl, int *alert, void *arg))
{
	static SSL_CTX *ctx;

	if (ctx != NULL)
		return ctx;
	if ((ctx = SSL_CTX_new(TLS_server_method())) == NULL)
		return NULL;
	if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1) {
		SSL_CTX_free(ctx);
		ctx = NULL;
		return NULL;
	}
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION |
	                                 SSL_OP_CIPHER_SERVER_PREFERENCE);
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_num_tickets(ctx, 0);
	SSL_CTX_set_alpn_select_cb(ctx, select_alpn, NULL);
	SSL_CTX_set_tlsext_servername_callback(ctx, sni_cb);
	return ctx;
}

static SSL_CTX *
new_upstream(void)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());

	if (ctx == NULL)
		return NULL;
	if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1 ||
	    SSL_CTX_set_alpn_protos(ctx, alpn_http11, sizeof(alpn_http11) - 1) != 0) {
		SSL_CTX_free(ctx);
		return NULL;
	}
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	return ctx;
}

/* Add every certificate of a PEM bundle to store; 0 when none was usable. */
static int
add_pem(X509_STORE *store, const unsigned char *pem, size_t len)
{
	BIO *bio = BIO_new_mem_buf(pem, (int)len);
	X509 *x;
	int added = 0;

	if (bio == NULL)
		return 0;
	while ((x = PEM_read_bio_X509(bio, NULL, NULL, NULL)) != NULL) {
		if (X509_STORE_add_cert(store, x) == 1)
			added++;
		X509_free(x);
	}
	ERR_clear_error();
	BIO_free(bio);
	return added;
}

static void
set_tickets(SSL_CTX *ctx, int (*new_session)(SSL *ssl, SSL_SESSION *sess))
{
	if (new_session == NULL)
		return;
	SSL_CTX_set_session_cache_mode(ctx,
	                               SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
	SSL_CTX_sess_set_new_cb(ctx, new_session);
}

SSL_CTX *
tlsctx_upstream(const unsigned char *const *pems, const size_t *lens, size_t n,
                int (*new_session)(SSL *ssl, SSL_SESSION *sess))
{
	static SSL_CTX *system;
	SSL_CTX *ctx;

	if (n == 0) {
		if (system == NULL) {
			if ((system = new_upstream()) == NULL)
				return NULL;
			if (SSL_CTX_set_default_verify_paths(system) != 1) {
				SSL_CTX_free(system);
				system = NULL;
				return NULL;
			}
		}
		set_tickets(system, new_session);
		SSL_CTX_up_ref(system);
		return system;
	}
	if ((ctx = new_upstream()) == NULL)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (add_pem(SSL_CTX_get_cert_store(ctx), pems[i], lens[i]) == 0) {
			SSL_CTX_free(ctx);
			return NULL;
		}
	set_tickets(ctx, new_session);
	return ctx;
}
