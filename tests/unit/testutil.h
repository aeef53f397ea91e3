/* Helpers shared by the unit tests (header-only, test code only). */
#ifndef VRUN_TESTUTIL_H
#define VRUN_TESTUTIL_H

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <stdlib.h>
#include <string.h>

/* A self-signed P-256 CA certificate in PEM, made now; malloc'd. */
static inline char *
testutil_ca_pem(size_t *len)
{
	EVP_PKEY *key = EVP_EC_gen("P-256");
	X509 *x = X509_new();
	X509_NAME *n;
	BIO *bio = BIO_new(BIO_s_mem());
	char *data, *out = NULL;
	long l;

	if (key == NULL || x == NULL || bio == NULL)
		goto done;
	X509_set_version(x, 2);
	ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
	X509_gmtime_adj(X509_getm_notBefore(x), 0);
	X509_gmtime_adj(X509_getm_notAfter(x), 3600);
	X509_set_pubkey(x, key);
	n = X509_get_subject_name(x);
	X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)"vrun test CA", -1,
	                           -1, 0);
	X509_set_issuer_name(x, n);
	if (X509_sign(x, key, EVP_sha256()) == 0 || PEM_write_bio_X509(bio, x) != 1)
		goto done;
	l = BIO_get_mem_data(bio, &data);
	if ((out = malloc((size_t)l + 1)) == NULL)
		goto done;
	memcpy(out, data, (size_t)l);
	out[l] = '\0';
	*len = (size_t)l;
done:
	BIO_free(bio);
	X509_free(x);
	EVP_PKEY_free(key);
	return out;
}

#endif
