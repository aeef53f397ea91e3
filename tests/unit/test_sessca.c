/*
 * Per-session CA: certificate profile, leaves that verify only for bound
 * hosts, name constraints that OpenSSL really enforces, the leaf cache,
 * session isolation and the CA bundle file. Every key is made at run time.
 */
#define OPENSSL_API_COMPAT 30000
#define OPENSSL_NO_DEPRECATED

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "hostspec.h"
#include "sessca.h"
#include "testutil.h"
#include "verr.h"

static char dir[64];

static int
setup(void **state)
{
	(void)state;
	strcpy(dir, "/tmp/vrun-sessca-XXXXXX");
	return mkdtemp(dir) == NULL ? -1 : 0;
}

static int
teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static struct hostspec
spec(const char *s)
{
	struct hostspec h;

	if (hostspec_parse(s, strlen(s), HOSTSPEC_ALLOW_WILDCARD, &h) != 0)
		fail_msg("cannot parse '%s'", s);
	return h;
}

/* A session CA for the comma-free list of host specs (NULL-terminated). */
static struct sessca *
new_ca(const char *const *hosts)
{
	struct hostspec h[16];
	struct sessca *ca = NULL;
	size_t n = 0;

	while (hosts != NULL && hosts[n] != NULL) {
		assert_true(n < 16);
		h[n] = spec(hosts[n]);
		n++;
	}
	assert_int_equal(sessca_new(n > 0 ? h : NULL, n, &ca), 0);
	assert_non_null(ca);
	return ca;
}

static const char *const mixed[] = {
        "api.example.com",
        "api.example.com:8443",
        "*.example.org",
        "other.test",
        "10.1.2.3:8443",
        "[2001:db8::1]",
        NULL,
};

/*
 * Verify leaf for host (a name or an address) against a store holding only
 * root, as a TLS client does, in X509 strict mode. X509_V_OK or the error.
 */
static int
verify(X509 *root, X509 *leaf, const char *host)
{
	X509_STORE *store = X509_STORE_new();
	X509_STORE_CTX *ctx = X509_STORE_CTX_new();
	X509_VERIFY_PARAM *param;
	unsigned char addr[16];
	int ok, err;

	assert_non_null(store);
	assert_non_null(ctx);
	assert_int_equal(X509_STORE_add_cert(store, root), 1);
	assert_int_equal(X509_STORE_CTX_init(ctx, store, leaf, NULL), 1);
	assert_int_equal(X509_STORE_CTX_set_purpose(ctx, X509_PURPOSE_SSL_SERVER), 1);
	param = X509_STORE_CTX_get0_param(ctx);
	assert_int_equal(X509_VERIFY_PARAM_set_flags(param, X509_V_FLAG_X509_STRICT), 1);
	if (inet_pton(AF_INET, host, addr) == 1 || inet_pton(AF_INET6, host, addr) == 1)
		assert_int_equal(X509_VERIFY_PARAM_set1_ip_asc(param, host), 1);
	else
		assert_int_equal(X509_VERIFY_PARAM_set1_host(param, host, 0), 1);
	ok = X509_verify_cert(ctx);
	err = X509_STORE_CTX_get_error(ctx);
	X509_STORE_CTX_free(ctx);
	X509_STORE_free(store);
	if (ok == 1)
		assert_int_equal(err, X509_V_OK);
	else
		assert_int_not_equal(err, X509_V_OK);
	return err;
}

static void
expect_verify(X509 *root, X509 *leaf, const char *host, int want)
{
	int err = verify(root, leaf, host);

	if (err != want)
		fail_msg("%s: verify gave %d (%s), want %d (%s)", host, err,
		         X509_verify_cert_error_string(err), want,
		         X509_verify_cert_error_string(want));
}

/* The leaf the session mints for s; must succeed. New reference. */
static X509 *
leaf(struct sessca *ca, const char *s)
{
	struct hostspec h = spec(s);
	X509 *x = NULL;
	EVP_PKEY *k = NULL;
	int r = sessca_leaf(ca, &h, &x, &k);

	if (r != 0)
		fail_msg("sessca_leaf(%s): %s", s, verr_strerror(r));
	assert_non_null(x);
	assert_non_null(k);
	/* The key is the one certified. */
	assert_int_equal(X509_check_private_key(x, k), 1);
	EVP_PKEY_free(k);
	return x;
}

static X509 *
unchecked(struct sessca *ca, const char *s)
{
	struct hostspec h = spec(s);
	X509 *x = NULL;

	assert_int_equal(sessca_mint_unchecked(ca, &h, &x), 0);
	assert_non_null(x);
	return x;
}

static int
ext_critical(X509 *x, int nid)
{
	int i = X509_get_ext_by_NID(x, nid, -1);

	assert_true(i >= 0);
	/* Each extension exactly once. */
	assert_int_equal(X509_get_ext_by_NID(x, nid, i), -1);
	return X509_EXTENSION_get_critical(X509_get_ext(x, i));
}

/* A subtree list rendered as "DNS:a,IP:0a010203/ffffffff,..." for comparison. */
static void
render(STACK_OF(GENERAL_SUBTREE) * sk, char *buf, size_t size)
{
	size_t n = 0;

	buf[0] = '\0';
	for (int i = 0; i < sk_GENERAL_SUBTREE_num(sk); i++) {
		GENERAL_SUBTREE *sub = sk_GENERAL_SUBTREE_value(sk, i);
		const ASN1_STRING *s;
		const unsigned char *d;
		int len;

		assert_null(sub->minimum);
		assert_null(sub->maximum);
		n += (size_t)snprintf(buf + n, size - n, "%s", i > 0 ? "," : "");
		if (sub->base->type == GEN_DNS) {
			s = sub->base->d.dNSName;
			n += (size_t)snprintf(buf + n, size - n, "DNS:%.*s", ASN1_STRING_length(s),
			                      (const char *)ASN1_STRING_get0_data(s));
			continue;
		}
		assert_int_equal(sub->base->type, GEN_IPADD);
		s = sub->base->d.iPAddress;
		d = ASN1_STRING_get0_data(s);
		len = ASN1_STRING_length(s);
		assert_true(len == 8 || len == 32);
		n += (size_t)snprintf(buf + n, size - n, "IP:");
		for (int j = 0; j < len; j++)
			n += (size_t)snprintf(buf + n, size - n, "%s%02x", j == len / 2 ? "/" : "",
			                      d[j]);
		assert_true(n < size);
	}
}

static void
check_constraints(struct sessca *ca, const char *permitted, const char *excluded)
{
	X509 *x = sessca_cert(ca);
	NAME_CONSTRAINTS *nc;
	char buf[1024];
	int crit = -1;

	assert_int_equal(ext_critical(x, NID_name_constraints), 1);
	nc = X509_get_ext_d2i(x, NID_name_constraints, &crit, NULL);
	assert_non_null(nc);
	assert_int_equal(crit, 1);
	render(nc->permittedSubtrees, buf, sizeof(buf));
	assert_string_equal(buf, permitted);
	render(nc->excludedSubtrees, buf, sizeof(buf));
	assert_string_equal(buf, excluded);
	NAME_CONSTRAINTS_free(nc);
}

#define ALL_IPS                                                                                    \
	"IP:00000000/00000000,IP:00000000000000000000000000000000/"                                \
	"00000000000000000000000000000000"

static void
test_ca_profile(void **state)
{
	struct sessca *ca;
	X509 *x;
	BASIC_CONSTRAINTS *bc;
	const ASN1_OCTET_STRING *skid;
	BIGNUM *serial;
	char cn[128];
	int crit = -1, day, sec;
	time_t now = time(NULL);

	(void)state;
	ca = new_ca(mixed);
	x = sessca_cert(ca);
	assert_non_null(x);
	assert_int_equal(X509_get_version(x), X509_VERSION_3);

	/* Self-issued and self-signed by the key it certifies. */
	assert_int_equal(X509_NAME_cmp(X509_get_subject_name(x), X509_get_issuer_name(x)), 0);
	assert_int_equal(X509_verify(x, X509_get0_pubkey(x)), 1);
	assert_int_equal(EVP_PKEY_get_base_id(X509_get0_pubkey(x)), EVP_PKEY_EC);
	assert_int_equal(EVP_PKEY_get_bits(X509_get0_pubkey(x)), 256);
	assert_true(X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_commonName, cn,
	                                      sizeof(cn)) > 0);
	assert_int_equal(strncmp(cn, "vrun session CA ", 16), 0);
	assert_int_equal(strlen(cn), 16 + 8);

	/* Serial: positive, 128 bits at most, not a counter. */
	serial = ASN1_INTEGER_to_BN(X509_get0_serialNumber(x), NULL);
	assert_non_null(serial);
	assert_false(BN_is_negative(serial));
	assert_true(BN_num_bits(serial) > 64 && BN_num_bits(serial) <= 128);
	BN_free(serial);

	/* Backdated five minutes, valid for a day. */
	assert_int_equal(ASN1_TIME_diff(&day, &sec, X509_get0_notBefore(x), X509_get0_notAfter(x)),
	                 1);
	assert_int_equal(day * 86400 + sec, SESSCA_LIFETIME_DEFAULT + SESSCA_BACKDATE);
	assert_true(X509_cmp_time(X509_get0_notBefore(x), &now) < 0);

	assert_int_equal(ext_critical(x, NID_basic_constraints), 1);
	bc = X509_get_ext_d2i(x, NID_basic_constraints, &crit, NULL);
	assert_non_null(bc);
	assert_true(bc->ca);
	assert_non_null(bc->pathlen);
	assert_int_equal(ASN1_INTEGER_get(bc->pathlen), 0);
	BASIC_CONSTRAINTS_free(bc);

	assert_int_equal(ext_critical(x, NID_key_usage), 1);
	assert_int_equal(X509_get_key_usage(x), KU_KEY_CERT_SIGN | KU_CRL_SIGN);
	assert_int_equal(X509_get_extension_flags(x) & EXFLAG_XKUSAGE, 0);

	assert_int_equal(ext_critical(x, NID_subject_key_identifier), 0);
	skid = X509_get0_subject_key_id(x);
	assert_non_null(skid);
	assert_int_equal(ASN1_STRING_length(skid), 20);

	/* Ports collapse (api.example.com twice); the wildcard becomes its suffix. */
	check_constraints(ca,
	                  "DNS:api.example.com,DNS:example.org,DNS:other.test,"
	                  "IP:0a010203/ffffffff,"
	                  "IP:20010db8000000000000000000000001/ffffffffffffffffffffffffffffffff",
	                  "");
	assert_int_equal(X509_check_ca(x), 1);
	sessca_free(ca);
}

static void
test_ca_constraints_per_form(void **state)
{
	static const char *const dns[] = {"a.example", "*.b.example", NULL};
	static const char *const v4[] = {"192.0.2.1", NULL};
	static const char *const v6[] = {"[::1]", NULL};
	struct sessca *ca;

	(void)state;
	/* No address bound: every address is excluded, or the CA could certify any. */
	ca = new_ca(dns);
	check_constraints(ca, "DNS:a.example,DNS:b.example", ALL_IPS);
	sessca_free(ca);

	/* No name bound: the empty dNSName base excludes every name. */
	ca = new_ca(v4);
	check_constraints(ca, "IP:c0000201/ffffffff", "DNS:");
	sessca_free(ca);
	ca = new_ca(v6);
	check_constraints(
	        ca, "IP:00000000000000000000000000000001/ffffffffffffffffffffffffffffffff", "DNS:");
	sessca_free(ca);

	/* Nothing bound: nothing permitted, everything excluded. */
	ca = new_ca(NULL);
	check_constraints(ca, "", "DNS:," ALL_IPS);
	sessca_free(ca);
}

static void
check_leaf_profile(struct sessca *ca, X509 *x, const char *host, int want_cn)
{
	X509 *root = sessca_cert(ca);
	GENERAL_NAMES *san;
	GENERAL_NAME *gn;
	BASIC_CONSTRAINTS *bc;
	char cn[256];
	unsigned char addr[16];
	int crit = -1, day, sec;

	assert_int_equal(X509_get_version(x), X509_VERSION_3);
	assert_int_equal(X509_NAME_cmp(X509_get_issuer_name(x), X509_get_subject_name(root)), 0);
	assert_int_equal(X509_verify(x, X509_get0_pubkey(root)), 1);

	san = X509_get_ext_d2i(x, NID_subject_alt_name, &crit, NULL);
	assert_non_null(san);
	assert_int_equal(sk_GENERAL_NAME_num(san), 1);
	gn = sk_GENERAL_NAME_value(san, 0);
	if (inet_pton(AF_INET, host, addr) == 1 || inet_pton(AF_INET6, host, addr) == 1) {
		int alen = strchr(host, ':') != NULL ? 16 : 4;

		assert_int_equal(gn->type, GEN_IPADD);
		assert_int_equal(ASN1_STRING_length(gn->d.iPAddress), alen);
		assert_memory_equal(ASN1_STRING_get0_data(gn->d.iPAddress), addr, alen);
	} else {
		assert_int_equal(gn->type, GEN_DNS);
		assert_int_equal(ASN1_STRING_length(gn->d.dNSName), strlen(host));
		assert_memory_equal(ASN1_STRING_get0_data(gn->d.dNSName), host, strlen(host));
	}
	GENERAL_NAMES_free(san);

	if (want_cn) {
		assert_int_equal(X509_NAME_entry_count(X509_get_subject_name(x)), 1);
		assert_true(X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_commonName, cn,
		                                      sizeof(cn)) > 0);
		assert_string_equal(cn, host);
		assert_int_equal(crit, 0);
	} else {
		/* An empty subject requires a critical SAN (RFC 5280 4.2.1.6). */
		assert_int_equal(X509_NAME_entry_count(X509_get_subject_name(x)), 0);
		assert_int_equal(crit, 1);
	}

	bc = X509_get_ext_d2i(x, NID_basic_constraints, &crit, NULL);
	assert_non_null(bc);
	assert_false(bc->ca);
	assert_int_equal(crit, 1);
	BASIC_CONSTRAINTS_free(bc);
	assert_int_equal(X509_check_ca(x), 0);
	assert_int_equal(ext_critical(x, NID_key_usage), 1);
	assert_int_equal(X509_get_key_usage(x), KU_DIGITAL_SIGNATURE);
	assert_int_equal(X509_get_extended_key_usage(x), XKU_SSL_SERVER);
	assert_int_equal(ASN1_OCTET_STRING_cmp(X509_get0_authority_key_id(x),
	                                       X509_get0_subject_key_id(root)),
	                 0);
	assert_int_equal(
	        ASN1_INTEGER_cmp(X509_get0_serialNumber(x), X509_get0_serialNumber(root)) != 0, 1);
	/* Never longer than the CA; a day at most. */
	assert_true(ASN1_TIME_compare(X509_get0_notAfter(x), X509_get0_notAfter(root)) <= 0);
	assert_int_equal(ASN1_TIME_diff(&day, &sec, X509_get0_notBefore(x), X509_get0_notAfter(x)),
	                 1);
	assert_true(day * 86400 + sec <= 86400 + SESSCA_BACKDATE);
}

static void
test_leaf_verifies(void **state)
{
	static const char *const hosts[] = {"api.example.com", "a.example.org", "x.y.example.org",
	                                    "other.test"};
	char longname[128];
	struct sessca *ca;
	X509 *x;

	(void)state;
	ca = new_ca(mixed);
	/* No server certificate itself: it cannot sign data, only certificates. */
	expect_verify(sessca_cert(ca), sessca_cert(ca), "other.test", X509_V_ERR_INVALID_PURPOSE);

	for (size_t i = 0; i < sizeof(hosts) / sizeof(hosts[0]); i++) {
		x = leaf(ca, hosts[i]);
		check_leaf_profile(ca, x, hosts[i], 1);
		expect_verify(sessca_cert(ca), x, hosts[i], X509_V_OK);
		X509_free(x);
	}

	/* Addresses: no CN, which OpenSSL would check against the dNSName constraints. */
	x = leaf(ca, "10.1.2.3");
	check_leaf_profile(ca, x, "10.1.2.3", 0);
	expect_verify(sessca_cert(ca), x, "10.1.2.3", X509_V_OK);
	expect_verify(sessca_cert(ca), x, "10.1.2.4", X509_V_ERR_IP_ADDRESS_MISMATCH);
	X509_free(x);
	x = leaf(ca, "[2001:db8::1]");
	check_leaf_profile(ca, x, "2001:db8::1", 0);
	expect_verify(sessca_cert(ca), x, "2001:db8::1", X509_V_OK);
	X509_free(x);

	/* The leaf is for its host only. */
	x = leaf(ca, "api.example.com");
	expect_verify(sessca_cert(ca), x, "other.test", X509_V_ERR_HOSTNAME_MISMATCH);
	X509_free(x);

	/* Above ub-common-name (64): the SAN alone names the host. */
	snprintf(longname, sizeof(longname), "%s.example.org",
	         "a123456789b123456789c123456789d123456789e123456789f123456789");
	assert_true(strlen(longname) > 64);
	x = leaf(ca, longname);
	check_leaf_profile(ca, x, longname, 0);
	expect_verify(sessca_cert(ca), x, longname, X509_V_OK);
	X509_free(x);
	sessca_free(ca);
}

static void
refused(struct sessca *ca, const char *s, int want)
{
	struct hostspec h = spec(s);
	X509 *x = (X509 *)&h;
	EVP_PKEY *k = (EVP_PKEY *)&h;
	int r = sessca_leaf(ca, &h, &x, &k);

	if (r != want)
		fail_msg("sessca_leaf(%s) gave %d, want %d", s, r, want);
	assert_null(x);
	assert_null(k);
}

static void
test_leaf_refuses_unbound(void **state)
{
	struct sessca *ca, *none;
	X509 *x;

	(void)state;
	ca = new_ca(mixed);
	refused(ca, "evil.test", VERR_CERT_UNBOUND);
	refused(ca, "example.org", VERR_CERT_UNBOUND); /* only *.example.org is bound */
	refused(ca, "api.example.com.evil.test", VERR_CERT_UNBOUND);
	refused(ca, "example.com", VERR_CERT_UNBOUND);
	refused(ca, "xapi.example.com", VERR_CERT_UNBOUND);
	refused(ca, "a.api.example.com", VERR_CERT_UNBOUND);
	refused(ca, "10.1.2.4", VERR_CERT_UNBOUND);
	refused(ca, "[2001:db8::2]", VERR_CERT_UNBOUND);
	refused(ca, "[::ffff:10.1.2.3]", VERR_CERT_UNBOUND);
	refused(ca, "*.example.org", VERR_INVALID);
	refused(ca, "*.a.example.org", VERR_INVALID);
	assert_int_equal(sessca_cache_count(ca), 0);

	/* The port is no part of a certificate: any bound port admits the host. */
	x = leaf(ca, "api.example.com:9999");
	X509_free(x);
	x = leaf(ca, "10.1.2.3:443");
	X509_free(x);

	/* Nothing bound: nothing minted. */
	none = new_ca(NULL);
	refused(none, "api.example.com", VERR_CERT_UNBOUND);
	refused(none, "10.1.2.3", VERR_CERT_UNBOUND);
	refused(none, "[::1]", VERR_CERT_UNBOUND);
	sessca_free(none);
	sessca_free(ca);
}

static void
test_constraints_enforced(void **state)
{
	static const char *const dns[] = {"api.example.com", "*.example.org", NULL};
	static const char *const ips[] = {"10.1.2.3", "[2001:db8::1]", NULL};
	static const char *const any[] = {"evil.test",     "api.example.com.evil.test",
	                                  "example.com",   "10.9.9.9",
	                                  "[2001:db8::2]", "localhost.localdomain"};
	struct sessca *ca;
	X509 *x;

	(void)state;
	/* Mixed bindings: names and addresses outside the permitted subtrees. */
	ca = new_ca(mixed);
	x = unchecked(ca, "evil.test");
	expect_verify(sessca_cert(ca), x, "evil.test", X509_V_ERR_PERMITTED_VIOLATION);
	X509_free(x);
	x = unchecked(ca, "api.example.com.evil.test");
	expect_verify(sessca_cert(ca), x, "api.example.com.evil.test",
	              X509_V_ERR_PERMITTED_VIOLATION);
	X509_free(x);
	x = unchecked(ca, "10.1.2.4");
	expect_verify(sessca_cert(ca), x, "10.1.2.4", X509_V_ERR_PERMITTED_VIOLATION);
	X509_free(x);
	x = unchecked(ca, "[2001:db8::2]");
	expect_verify(sessca_cert(ca), x, "2001:db8::2", X509_V_ERR_PERMITTED_VIOLATION);
	X509_free(x);
	/*
	 * The known imprecision: the constraint for *.example.org is the
	 * dNSName example.org, which also admits the bare domain. Only the
	 * binding check (sessca_leaf refuses it above) keeps it out.
	 */
	x = unchecked(ca, "example.org");
	expect_verify(sessca_cert(ca), x, "example.org", X509_V_OK);
	X509_free(x);
	sessca_free(ca);

	/* Names only: every address is excluded. */
	ca = new_ca(dns);
	x = unchecked(ca, "10.1.2.3");
	expect_verify(sessca_cert(ca), x, "10.1.2.3", X509_V_ERR_EXCLUDED_VIOLATION);
	X509_free(x);
	x = unchecked(ca, "[::1]");
	expect_verify(sessca_cert(ca), x, "::1", X509_V_ERR_EXCLUDED_VIOLATION);
	X509_free(x);
	x = unchecked(ca, "evil.test");
	expect_verify(sessca_cert(ca), x, "evil.test", X509_V_ERR_PERMITTED_VIOLATION);
	X509_free(x);
	sessca_free(ca);

	/* Addresses only: every name is excluded. */
	ca = new_ca(ips);
	x = unchecked(ca, "api.example.com");
	expect_verify(sessca_cert(ca), x, "api.example.com", X509_V_ERR_EXCLUDED_VIOLATION);
	X509_free(x);
	x = leaf(ca, "10.1.2.3");
	expect_verify(sessca_cert(ca), x, "10.1.2.3", X509_V_OK);
	X509_free(x);
	sessca_free(ca);

	/* No bindings: every leaf is rejected, whatever it names. */
	ca = new_ca(NULL);
	for (size_t i = 0; i < sizeof(any) / sizeof(any[0]); i++) {
		const char *h = any[i];
		char bare[64];

		x = unchecked(ca, h);
		if (h[0] == '[') {
			snprintf(bare, sizeof(bare), "%.*s", (int)strlen(h) - 2, h + 1);
			h = bare;
		}
		expect_verify(sessca_cert(ca), x, h, X509_V_ERR_EXCLUDED_VIOLATION);
		X509_free(x);
	}
	sessca_free(ca);
}

static void
test_cache(void **state)
{
	static const char *const wild[] = {"*.example.com", NULL};
	struct sessca *ca;
	X509 *a, *a2, *b, *first, *keep, *x;
	EVP_PKEY *ka = NULL, *kb = NULL;
	struct hostspec h;
	char name[64];

	(void)state;
	ca = new_ca(mixed);
	a = leaf(ca, "api.example.com");
	a2 = leaf(ca, "api.example.com:8443");
	assert_ptr_equal(a, a2);
	assert_int_equal(sessca_cache_count(ca), 1);
	b = leaf(ca, "a.example.org");
	assert_ptr_not_equal(a, b);
	assert_int_not_equal(ASN1_INTEGER_cmp(X509_get0_serialNumber(a), X509_get0_serialNumber(b)),
	                     0);
	assert_int_equal(sessca_cache_count(ca), 2);
	/* One leaf key for the whole session. */
	h = spec("api.example.com");
	assert_int_equal(sessca_leaf(ca, &h, &x, &ka), 0);
	X509_free(x);
	h = spec("a.example.org");
	assert_int_equal(sessca_leaf(ca, &h, &x, NULL), 0);
	X509_free(x);
	assert_int_equal(sessca_leaf(ca, &h, &x, &kb), 0);
	X509_free(x);
	assert_int_equal(EVP_PKEY_eq(ka, kb), 1);
	EVP_PKEY_free(ka);
	EVP_PKEY_free(kb);
	X509_free(a);
	X509_free(a2);
	X509_free(b);
	/* Unchecked mints bypass the cache. */
	x = unchecked(ca, "api.example.com");
	assert_int_equal(sessca_cache_count(ca), 2);
	X509_free(x);
	sessca_free(ca);

	/* Bounded: the least recently used leaf goes first. */
	ca = new_ca(wild);
	first = leaf(ca, "h0.example.com");
	keep = leaf(ca, "h1.example.com");
	for (int i = 2; i < SESSCA_CACHE_MAX; i++) {
		snprintf(name, sizeof(name), "h%d.example.com", i);
		X509_free(leaf(ca, name));
	}
	assert_int_equal(sessca_cache_count(ca), SESSCA_CACHE_MAX);
	x = leaf(ca, "h1.example.com"); /* h1 is now recent; h0 the oldest */
	assert_ptr_equal(x, keep);
	X509_free(x);
	X509_free(leaf(ca, "overflow.example.com"));
	assert_int_equal(sessca_cache_count(ca), SESSCA_CACHE_MAX);
	x = leaf(ca, "h1.example.com");
	assert_ptr_equal(x, keep);
	X509_free(x);
	x = leaf(ca, "h0.example.com");
	assert_ptr_not_equal(x, first);
	/* The caller's reference to the evicted leaf is still good. */
	assert_int_not_equal(
	        ASN1_INTEGER_cmp(X509_get0_serialNumber(x), X509_get0_serialNumber(first)), 0);
	expect_verify(sessca_cert(ca), first, "h0.example.com", X509_V_OK);
	assert_int_equal(sessca_cache_count(ca), SESSCA_CACHE_MAX);
	X509_free(x);
	X509_free(first);
	sessca_free(ca);
	/* And after the session: references outlive it. */
	assert_non_null(X509_get_subject_name(keep));
	X509_free(keep);
}

static void
test_sessions_isolated(void **state)
{
	struct sessca *a, *b;
	X509 *la, *lb;
	char cna[128], cnb[128];

	(void)state;
	a = new_ca(mixed);
	b = new_ca(mixed);
	assert_int_not_equal(
	        EVP_PKEY_eq(X509_get0_pubkey(sessca_cert(a)), X509_get0_pubkey(sessca_cert(b))), 1);
	assert_int_not_equal(ASN1_INTEGER_cmp(X509_get0_serialNumber(sessca_cert(a)),
	                                      X509_get0_serialNumber(sessca_cert(b))),
	                     0);
	assert_true(X509_NAME_get_text_by_NID(X509_get_subject_name(sessca_cert(a)), NID_commonName,
	                                      cna, sizeof(cna)) > 0);
	assert_true(X509_NAME_get_text_by_NID(X509_get_subject_name(sessca_cert(b)), NID_commonName,
	                                      cnb, sizeof(cnb)) > 0);
	assert_string_not_equal(cna, cnb);

	la = leaf(a, "api.example.com");
	lb = leaf(b, "api.example.com");
	assert_int_not_equal(EVP_PKEY_eq(X509_get0_pubkey(la), X509_get0_pubkey(lb)), 1);
	expect_verify(sessca_cert(a), la, "api.example.com", X509_V_OK);
	expect_verify(sessca_cert(b), lb, "api.example.com", X509_V_OK);
	assert_int_not_equal(verify(sessca_cert(b), la, "api.example.com"), X509_V_OK);
	assert_int_not_equal(verify(sessca_cert(a), lb, "api.example.com"), X509_V_OK);
	X509_free(la);
	X509_free(lb);
	sessca_free(a);
	sessca_free(b);
}

static void
test_pem(void **state)
{
	struct sessca *ca;
	char *pem = (char *)state;
	size_t len = 1;
	BIO *bio;
	X509 *x;

	ca = new_ca(mixed);
	assert_int_equal(sessca_pem(NULL, &pem, &len), VERR_INVALID);
	assert_null(pem);
	assert_int_equal(len, 0);
	assert_int_equal(sessca_pem(ca, &pem, &len), 0);
	assert_int_equal(strlen(pem), len);
	assert_int_equal(strncmp(pem, "-----BEGIN CERTIFICATE-----\n", 28), 0);
	/* Public certificate only: no key material ever leaves in PEM. */
	assert_null(strstr(pem, "PRIVATE"));
	bio = BIO_new_mem_buf(pem, (int)len);
	assert_non_null(bio);
	x = PEM_read_bio_X509(bio, NULL, NULL, NULL);
	assert_non_null(x);
	assert_int_equal(X509_cmp(x, sessca_cert(ca)), 0);
	X509_free(x);
	BIO_free(bio);
	free(pem);
	sessca_free(ca);
}

static void
test_arguments(void **state)
{
	struct hostspec h[2];
	struct hostspec *many;
	struct sessca *ca = (struct sessca *)state;
	X509 *x = NULL;

	h[0] = spec("api.example.com");
	h[1] = h[0];
	assert_int_equal(sessca_new(NULL, 1, &ca), VERR_INVALID);
	assert_null(ca);
	assert_int_equal(sessca_new_lifetime(h, 1, 0, &ca), VERR_INVALID);
	assert_int_equal(sessca_new_lifetime(h, 1, SESSCA_LIFETIME_MAX + 1, &ca), VERR_INVALID);
	h[1].kind = 0;
	assert_int_equal(sessca_new(h, 2, &ca), VERR_INVALID);
	h[1] = spec("10.0.0.1");
	h[1].wildcard = 1;
	assert_int_equal(sessca_new(h, 2, &ca), VERR_INVALID);
	h[1] = spec("10.0.0.1");
	memset(h[1].host, 'a', sizeof(h[1].host)); /* no terminator */
	assert_int_equal(sessca_new(h, 2, &ca), VERR_INVALID);
	h[1] = spec("10.0.0.1");
	strcpy(h[1].host, "10.0.0.256");
	assert_int_equal(sessca_new(h, 2, &ca), VERR_INVALID);
	assert_null(ca);

	many = calloc(SESSCA_HOSTS_MAX + 1, sizeof(*many));
	assert_non_null(many);
	for (size_t i = 0; i <= SESSCA_HOSTS_MAX; i++)
		many[i] = h[0];
	assert_int_equal(sessca_new(many, SESSCA_HOSTS_MAX + 1, &ca), VERR_TOO_MANY);
	assert_int_equal(sessca_new(many, SESSCA_HOSTS_MAX, &ca), 0);
	check_constraints(ca, "DNS:api.example.com", ALL_IPS);
	sessca_free(ca);
	free(many);

	assert_int_equal(sessca_new(h, 1, &ca), 0);
	assert_int_equal(sessca_leaf(ca, NULL, &x, NULL), VERR_INVALID);
	assert_int_equal(sessca_leaf(ca, &h[0], NULL, NULL), VERR_INVALID);
	assert_int_equal(sessca_mint_unchecked(ca, NULL, &x), VERR_INVALID);
	assert_null(x);
	sessca_free(ca);
	sessca_free(NULL);
	assert_null(sessca_cert(NULL));
}

static void
test_lifetime(void **state)
{
	struct hostspec h = spec("api.example.com");
	struct sessca *ca;
	X509 *x;
	int day, sec;

	(void)state;
	/* A short CA: leaves end with it, never after it. */
	assert_int_equal(sessca_new_lifetime(&h, 1, 600, &ca), 0);
	assert_int_equal(ASN1_TIME_diff(&day, &sec, X509_get0_notBefore(sessca_cert(ca)),
	                                X509_get0_notAfter(sessca_cert(ca))),
	                 1);
	assert_int_equal(day * 86400 + sec, 600 + SESSCA_BACKDATE);
	x = leaf(ca, "api.example.com");
	assert_int_equal(
	        ASN1_TIME_compare(X509_get0_notAfter(x), X509_get0_notAfter(sessca_cert(ca))), 0);
	X509_free(x);
	sessca_free(ca);

	/* An expired CA mints nothing and hands out nothing from its cache. */
	assert_int_equal(sessca_new_lifetime(&h, 1, 1, &ca), 0);
	x = leaf(ca, "api.example.com");
	X509_free(x);
	for (int i = 0; X509_cmp_current_time(X509_get0_notAfter(sessca_cert(ca))) > 0; i++) {
		struct timespec ts = {0, 50 * 1000 * 1000};

		assert_true(i < 100);
		nanosleep(&ts, NULL);
	}
	refused(ca, "api.example.com", VERR_CERT_EXPIRED);
	sessca_free(ca);
}

static char *
slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	assert_true(n >= 0);
	rewind(f);
	buf = malloc((size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	*len = (size_t)n;
	return buf;
}

static void
spit(const char *path, const char *data, size_t len)
{
	FILE *f = fopen(path, "wb");

	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
}

static int
count_certs(const char *path)
{
	BIO *bio = BIO_new_file(path, "r");
	X509 *x;
	int n = 0;

	assert_non_null(bio);
	while ((x = PEM_read_bio_X509(bio, NULL, NULL, NULL)) != NULL) {
		n++;
		X509_free(x);
	}
	ERR_clear_error();
	BIO_free(bio);
	return n;
}

static int
dir_entries(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d)) != NULL)
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			n++;
	closedir(d);
	return n;
}

/* path is dir/ca-<32 lower hex>.pem, mode 0644, holding want (wantlen bytes). */
static void
check_bundle(const char *path, const char *want, size_t wantlen)
{
	const char *base;
	struct stat st;
	char *got;
	size_t len;

	assert_int_equal(strncmp(path, dir, strlen(dir)), 0);
	assert_int_equal(path[strlen(dir)], '/');
	base = path + strlen(dir) + 1;
	assert_int_equal(strlen(base), 3 + 32 + 4);
	assert_int_equal(strncmp(base, "ca-", 3), 0);
	assert_string_equal(base + 35, ".pem");
	for (int i = 3; i < 35; i++)
		assert_non_null(strchr("0123456789abcdef", base[i]));
	assert_int_equal(lstat(path, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0644);
	assert_int_equal(st.st_uid, getuid());
	got = slurp(path, &len);
	assert_int_equal(len, wantlen);
	assert_memory_equal(got, want, wantlen);
	free(got);
}

static void
test_bundle(void **state)
{
	struct sessca *ca;
	char roots[128], missing[128], *pem, *ext, *want, *p1 = NULL, *p2 = NULL,
	                                                  *p3 = (char *)state;
	char *ext2, *want2;
	size_t pemlen, extlen, ext2len, wantlen;
	mode_t old;

	ca = new_ca(mixed);
	assert_int_equal(sessca_pem(ca, &pem, &pemlen), 0);
	/* Some other CA as "system roots", without a final newline. */
	ext = testutil_ca_pem(&extlen);
	assert_non_null(ext);
	extlen--;
	snprintf(roots, sizeof(roots), "%s/roots.crt", dir);
	spit(roots, ext, extlen);

	/* Roots, a newline to separate, then the session CA; 0644 whatever the umask. */
	old = umask(077);
	assert_int_equal(sessca_write_bundle(ca, dir, roots, &p1), 0);
	umask(old);
	assert_non_null(p1);
	wantlen = extlen + 1 + pemlen;
	want = malloc(wantlen);
	assert_non_null(want);
	memcpy(want, ext, extlen);
	want[extlen] = '\n';
	memcpy(want + extlen + 1, pem, pemlen);
	check_bundle(p1, want, wantlen);
	assert_int_equal(count_certs(p1), 2);

	/* A unique name per call. */
	assert_int_equal(sessca_write_bundle(ca, dir, roots, &p2), 0);
	assert_string_not_equal(p1, p2);
	check_bundle(p2, want, wantlen);

	/* A changed roots file is picked up, not served stale from the cache. */
	ext2 = testutil_ca_pem(&ext2len);
	assert_non_null(ext2);
	spit(roots, ext2, ext2len);
	assert_int_equal(sessca_remove_bundle(p2), 0);
	free(p2);
	assert_int_equal(sessca_write_bundle(ca, dir, roots, &p2), 0);
	want2 = malloc(ext2len + pemlen);
	assert_non_null(want2);
	memcpy(want2, ext2, ext2len);
	memcpy(want2 + ext2len, pem, pemlen);
	check_bundle(p2, want2, ext2len + pemlen);
	assert_int_equal(count_certs(p2), 2);
	free(want2);
	free(ext2);

	/* Removal, and a second removal reports the missing file. */
	assert_int_equal(sessca_remove_bundle(p1), 0);
	assert_int_equal(access(p1, F_OK), -1);
	assert_int_equal(errno, ENOENT);
	assert_int_equal(sessca_remove_bundle(p1), VERR_SYSTEM);
	assert_int_equal(errno, ENOENT);
	assert_int_equal(sessca_remove_bundle(p2), 0);
	assert_int_equal(sessca_remove_bundle(NULL), VERR_INVALID);
	free(p1);
	free(p2);
	p1 = p2 = NULL;

	/* No roots file: the session CA alone. */
	snprintf(missing, sizeof(missing), "%s/no-such-roots.crt", dir);
	assert_int_equal(sessca_write_bundle(ca, dir, missing, &p1), 0);
	check_bundle(p1, pem, pemlen);
	assert_int_equal(count_certs(p1), 1);
	assert_int_equal(sessca_remove_bundle(p1), 0);
	free(p1);
	p1 = NULL;

	/* Default roots: OpenSSL's file when it exists, followed by the CA. */
	assert_int_equal(sessca_write_bundle(ca, dir, NULL, &p1), 0);
	if (access(X509_get_default_cert_file(), R_OK) == 0) {
		char *sys = slurp(X509_get_default_cert_file(), &extlen);
		char *got = slurp(p1, &wantlen);

		assert_true(wantlen >= extlen + pemlen);
		assert_memory_equal(got, sys, extlen);
		assert_memory_equal(got + wantlen - pemlen, pem, pemlen);
		free(sys);
		free(got);
	} else {
		check_bundle(p1, pem, pemlen);
	}
	assert_int_equal(sessca_remove_bundle(p1), 0);
	free(p1);
	p1 = NULL;

	/* Failures leave nothing behind and clear the output. */
	assert_int_equal(unlink(roots), 0);
	assert_int_equal(dir_entries(), 0);
	assert_int_equal(sessca_write_bundle(ca, dir, dir, &p3), VERR_SYSTEM); /* roots a dir */
	assert_null(p3);
	assert_int_equal(dir_entries(), 0);
	assert_int_equal(sessca_write_bundle(ca, missing, NULL, &p1), VERR_SYSTEM);
	assert_int_equal(errno, ENOENT);
	assert_int_equal(sessca_write_bundle(ca, NULL, NULL, &p1), VERR_INVALID);
	assert_int_equal(sessca_write_bundle(NULL, dir, NULL, &p1), VERR_INVALID);
	assert_int_equal(sessca_write_bundle(ca, "", NULL, &p1), VERR_INVALID);
	assert_null(p1);
	assert_int_equal(dir_entries(), 0);

	free(want);
	free(ext);
	free(pem);
	sessca_free(ca);
}

static double
elapsed_us(const struct timespec *a, const struct timespec *b)
{
	return (double)(b->tv_sec - a->tv_sec) * 1e6 + (double)(b->tv_nsec - a->tv_nsec) / 1e3;
}

/* Rough cost of opening a session, for the log only: timing belongs in bench/. */
static void
test_cost(void **state)
{
	enum { N = 200 };
	struct timespec t0, t1, t2, t3;
	struct sessca *ca;
	char *p;
	double newus = 0, bundleus = 0, leafus = 0;
	X509 *x;

	(void)state;
	/* Warm the roots cache as a running vproxy would have. */
	ca = new_ca(mixed);
	assert_int_equal(sessca_write_bundle(ca, dir, NULL, &p), 0);
	assert_int_equal(sessca_remove_bundle(p), 0);
	free(p);
	sessca_free(ca);

	for (int i = 0; i < N; i++) {
		clock_gettime(CLOCK_MONOTONIC, &t0);
		ca = new_ca(mixed);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		assert_int_equal(sessca_write_bundle(ca, dir, NULL, &p), 0);
		clock_gettime(CLOCK_MONOTONIC, &t2);
		x = leaf(ca, "api.example.com");
		clock_gettime(CLOCK_MONOTONIC, &t3);
		newus += elapsed_us(&t0, &t1);
		bundleus += elapsed_us(&t1, &t2);
		leafus += elapsed_us(&t2, &t3);
		X509_free(x);
		assert_int_equal(sessca_remove_bundle(p), 0);
		free(p);
		sessca_free(ca);
	}
	print_message("sessca_new %.0f us, write_bundle %.0f us, first leaf %.0f us (mean of %d)\n",
	              newus / N, bundleus / N, leafus / N, N);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_ca_profile),
	        cmocka_unit_test(test_ca_constraints_per_form),
	        cmocka_unit_test(test_leaf_verifies),
	        cmocka_unit_test(test_leaf_refuses_unbound),
	        cmocka_unit_test(test_constraints_enforced),
	        cmocka_unit_test(test_cache),
	        cmocka_unit_test(test_sessions_isolated),
	        cmocka_unit_test(test_pem),
	        cmocka_unit_test(test_arguments),
	        cmocka_unit_test(test_lifetime),
	        cmocka_unit_test(test_bundle),
	        cmocka_unit_test(test_cost),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
