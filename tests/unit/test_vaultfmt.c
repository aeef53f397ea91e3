/*
 * The vault file format: header bounds, plaintext encode/decode with strict
 * validation, and authenticated encryption that no single-byte change survives.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <sodium.h>

#include "testutil.h"
#include "vaultfmt.h"
#include "verr.h"

static struct vault_entry *
entry(const char *name, const char *secret, const char *host, const char *inject, const char *env)
{
	struct vault_entry *e;

	assert_int_equal(vault_entry_new(&e), 0);
	strcpy(e->name, name);
	assert_int_equal(secbuf_dup(secret, strlen(secret), &e->secret), 0);
	assert_int_equal(hostspec_parse(host, strlen(host), HOSTSPEC_ALLOW_WILDCARD, &e->hosts[0]),
	                 0);
	e->nhosts = 1;
	assert_int_equal(
	        vault_parse_inject(inject, &e->inject, e->inject_arg, sizeof(e->inject_arg)), 0);
	strcpy(e->env, env);
	e->created = 1700000000;
	e->changed = 1700000001;
	return e;
}

static void
make_contents(struct vaultfmt_contents *c)
{
	size_t calen = 0;

	memset(c, 0, sizeof(*c));
	c->created = 1690000000;
	assert_int_equal(secbuf_new(VAULT_AUDIT_KEY_LEN, &c->audit_key), 0);
	randombytes_buf(c->audit_key->data, VAULT_AUDIT_KEY_LEN);
	c->audit_key->len = VAULT_AUDIT_KEY_LEN;
	c->entries = calloc(3, sizeof(*c->entries));
	c->entries[0] =
	        entry("deploy-key", "sk_live_abcdef", "api.example.com", "bearer", "DEPLOY_KEY");
	c->entries[1] = entry("gh", "ghp_123", "*.github.com:8443", "basic:x-access-token", "GH");
	assert_int_equal(hostspec_parse("[::1]:9000", 10, 0, &c->entries[1]->hosts[1]), 0);
	c->entries[1]->nhosts = 2;
	c->entries[1]->allow_http = 1;
	c->entries[2] = entry("q", "qqq", "127.0.0.1:8080", "query:api_key", "Q_TOKEN");
	c->entries[2]->ca = (unsigned char *)testutil_ca_pem(&calen);
	assert_non_null(c->entries[2]->ca);
	c->entries[2]->ca_len = calen;
	c->nentries = 3;
}

static void
test_roundtrip(void **state)
{
	struct vaultfmt_contents c, d;
	struct secbuf *a, *b;

	(void)state;
	make_contents(&c);
	assert_int_equal(vaultfmt_encode(&c, &a), 0);
	assert_int_equal(vaultfmt_decode(a->data, a->len, &d), 0);
	assert_int_equal(d.nentries, 3);
	assert_int_equal(d.created, c.created);
	assert_true(secbuf_equal(d.audit_key, c.audit_key));
	for (size_t i = 0; i < 3; i++) {
		assert_string_equal(d.entries[i]->name, c.entries[i]->name);
		assert_true(secbuf_equal(d.entries[i]->secret, c.entries[i]->secret));
		assert_int_equal(d.entries[i]->nhosts, c.entries[i]->nhosts);
		for (size_t j = 0; j < c.entries[i]->nhosts; j++)
			assert_memory_equal(&d.entries[i]->hosts[j], &c.entries[i]->hosts[j],
			                    sizeof(struct hostspec));
		assert_int_equal(d.entries[i]->inject, c.entries[i]->inject);
		assert_string_equal(d.entries[i]->inject_arg, c.entries[i]->inject_arg);
		assert_string_equal(d.entries[i]->env, c.entries[i]->env);
		assert_int_equal(d.entries[i]->allow_http, c.entries[i]->allow_http);
		assert_int_equal(d.entries[i]->ca_len, c.entries[i]->ca_len);
		assert_int_equal(d.entries[i]->created, c.entries[i]->created);
		assert_int_equal(d.entries[i]->changed, c.entries[i]->changed);
	}
	/* Re-encoding the decoded contents gives the same bytes. */
	assert_int_equal(vaultfmt_encode(&d, &b), 0);
	assert_int_equal(a->len, b->len);
	assert_memory_equal(a->data, b->data, a->len);
	secbuf_free(a);
	secbuf_free(b);
	vaultfmt_contents_clear(&c);
	vaultfmt_contents_clear(&d);
	assert_null(c.entries);
}

static void
test_truncated_and_extended(void **state)
{
	struct vaultfmt_contents c, d;
	struct secbuf *a;
	unsigned char *big;

	(void)state;
	make_contents(&c);
	assert_int_equal(vaultfmt_encode(&c, &a), 0);
	for (size_t n = 0; n < a->len; n++) {
		d.nentries = 99;
		assert_int_equal(vaultfmt_decode(a->data, n, &d), VERR_VAULT_CORRUPT);
		assert_int_equal(d.nentries, 0);
		assert_null(d.entries);
	}
	big = malloc(a->len + 1);
	memcpy(big, a->data, a->len);
	big[a->len] = 0;
	assert_int_equal(vaultfmt_decode(big, a->len + 1, &d), VERR_VAULT_CORRUPT);
	free(big);
	secbuf_free(a);
	vaultfmt_contents_clear(&c);
}

/* Any one-byte change either fails cleanly or still yields valid entries. */
static void
test_mutations_decode_safely(void **state)
{
	struct vaultfmt_contents c, d;
	struct secbuf *a;

	(void)state;
	make_contents(&c);
	assert_int_equal(vaultfmt_encode(&c, &a), 0);
	for (size_t i = 0; i < a->len; i++) {
		static const unsigned char deltas[] = {0x01, 0x80, 0xff};

		for (size_t k = 0; k < sizeof(deltas); k++) {
			int r;

			a->data[i] ^= deltas[k];
			r = vaultfmt_decode(a->data, a->len, &d);
			if (r == 0) {
				for (size_t j = 0; j < d.nentries; j++)
					assert_int_equal(vault_check_entry(d.entries[j]), 0);
				vaultfmt_contents_clear(&d);
			} else {
				assert_true(r == VERR_VAULT_CORRUPT || r == VERR_NOMEM);
			}
			a->data[i] ^= deltas[k];
		}
	}
	secbuf_free(a);
	vaultfmt_contents_clear(&c);
}

static void
replace_once(struct secbuf *b, const char *from, const char *to)
{
	size_t n = strlen(from);

	assert_int_equal(n, strlen(to));
	for (size_t i = 0; i + n <= b->len; i++)
		if (memcmp(b->data + i, from, n) == 0) {
			memcpy(b->data + i, to, n);
			return;
		}
	fail_msg("'%s' not found", from);
}

static void
test_invalid_fields_refused(void **state)
{
	static const char *const swaps[][2] = {
	        {"api.example.com:443", "API.example.com:443"}, /* non-canonical host */
	        {"api.example.com:443", "api.example.com:000"}, /* bad port */
	        {"DEPLOY_KEY", "PATH_KEY\0\0"},                 /* NUL inside a string */
	        {"DEPLOY_KEY", "LD_PRELOAD"},                   /* reserved variable */
	        {"deploy-key", "9eploy-key"},                   /* bad name */
	        {"sk_live_abcdef", "sk_live\nabcdef"},          /* LF in secret */
	        {"x-access-token", "x-access:token"},           /* ':' in basic user */
	        {"api_key", "api key"},                         /* bad query name */
	};
	struct vaultfmt_contents c, d;
	struct secbuf *a;

	(void)state;
	make_contents(&c);
	for (size_t i = 0; i < sizeof(swaps) / sizeof(swaps[0]); i++) {
		assert_int_equal(vaultfmt_encode(&c, &a), 0);
		assert_int_equal(vaultfmt_decode(a->data, a->len, &d), 0);
		vaultfmt_contents_clear(&d);
		if (strcmp(swaps[i][0], "DEPLOY_KEY") == 0 && swaps[i][1][8] == '\0')
			memcpy(memmem(a->data, a->len, "DEPLOY_KEY", 10), "PATH_KEY\0\0", 10);
		else
			replace_once(a, swaps[i][0], swaps[i][1]);
		if (vaultfmt_decode(a->data, a->len, &d) != VERR_VAULT_CORRUPT)
			fail_msg("swap %zu accepted", i);
		secbuf_free(a);
	}
	/* Duplicate names or variables cannot come from vault_add: refuse them. */
	strcpy(c.entries[1]->name, "deploy-key");
	assert_int_equal(vaultfmt_encode(&c, &a), 0);
	assert_int_equal(vaultfmt_decode(a->data, a->len, &d), VERR_VAULT_CORRUPT);
	secbuf_free(a);
	strcpy(c.entries[1]->name, "gh");
	strcpy(c.entries[1]->env, "DEPLOY_KEY");
	assert_int_equal(vaultfmt_encode(&c, &a), 0);
	assert_int_equal(vaultfmt_decode(a->data, a->len, &d), VERR_VAULT_CORRUPT);
	secbuf_free(a);
	vaultfmt_contents_clear(&c);
}

static void
header(struct vaultfmt_header *h)
{
	memset(h, 0, sizeof(*h));
	h->version = VAULTFMT_VERSION;
	h->kdf_alg = VAULTFMT_KDF_ARGON2ID13;
	h->kdf.opslimit = crypto_pwhash_OPSLIMIT_INTERACTIVE;
	h->kdf.memlimit = crypto_pwhash_MEMLIMIT_INTERACTIVE;
	randombytes_buf(h->salt, sizeof(h->salt));
	randombytes_buf(h->nonce, sizeof(h->nonce));
}

static void
test_header_bounds(void **state)
{
	static const struct {
		uint64_t ops, mem;
		int want;
	} cases[] = {
	        {2, 64u << 20, 0},
	        {4, 1u << 30, 0},
	        {0, 64u << 20, VERR_VAULT_KDF},
	        {1, 64u << 20, VERR_VAULT_KDF},
	        {5, 64u << 20, VERR_VAULT_KDF},
	        {UINT64_MAX, 64u << 20, VERR_VAULT_KDF},
	        {2, 0, VERR_VAULT_KDF},
	        {2, 8192, VERR_VAULT_KDF},
	        {2, (1u << 30) + 1, VERR_VAULT_KDF},
	        {2, UINT64_MAX, VERR_VAULT_KDF},
	};
	struct vaultfmt_header h, g;
	unsigned char buf[VAULTFMT_HEADER_LEN + VAULTFMT_TAG_LEN] = {0};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		header(&h);
		h.kdf.opslimit = cases[i].ops;
		h.kdf.memlimit = cases[i].mem;
		vaultfmt_header_pack(&h, buf);
		assert_int_equal(vaultfmt_header_parse(buf, sizeof(buf), &g), cases[i].want);
		if (cases[i].want == 0)
			assert_memory_equal(&g, &h, sizeof(h));
	}
	header(&h);
	vaultfmt_header_pack(&h, buf);
	assert_int_equal(vaultfmt_header_parse(buf, sizeof(buf) - 1, &g), VERR_VAULT_FORMAT);
	buf[0] ^= 1;
	assert_int_equal(vaultfmt_header_parse(buf, sizeof(buf), &g), VERR_VAULT_FORMAT);
	buf[0] ^= 1;
	h.version = 2;
	vaultfmt_header_pack(&h, buf);
	assert_int_equal(vaultfmt_header_parse(buf, sizeof(buf), &g), VERR_VAULT_FORMAT);
	h.version = 1;
	h.kdf_alg = 2;
	vaultfmt_header_pack(&h, buf);
	assert_int_equal(vaultfmt_header_parse(buf, sizeof(buf), &g), VERR_VAULT_FORMAT);
}

static void
test_seal_open_tamper(void **state)
{
	struct vaultfmt_contents c;
	struct vaultfmt_header h, g;
	struct secbuf *pass, *wrong, *key, *pt, *k2, *pt2;
	unsigned char *file;
	size_t flen;

	(void)state;
	make_contents(&c);
	header(&h);
	assert_int_equal(secbuf_dup("correct horse", 13, &pass), 0);
	assert_int_equal(secbuf_dup("correct horsf", 13, &wrong), 0);
	assert_int_equal(vaultfmt_derive_key(pass, &h, &key), 0);
	assert_int_equal(vaultfmt_encode(&c, &pt), 0);
	assert_int_equal(vaultfmt_seal(&h, key, pt, &file, &flen), 0);
	assert_int_equal(flen, VAULTFMT_HEADER_LEN + pt->len + VAULTFMT_TAG_LEN);
	/* The plaintext secret is not in the file. */
	assert_null(memmem(file, flen, "sk_live_abcdef", 14));

	assert_int_equal(vaultfmt_open(file, flen, pass, &g, &k2, &pt2), 0);
	assert_int_equal(pt2->len, pt->len);
	assert_memory_equal(pt2->data, pt->data, pt->len);
	assert_true(secbuf_equal(k2, key));
	secbuf_free(k2);
	secbuf_free(pt2);
	assert_int_equal(vaultfmt_open(file, flen, wrong, &g, &k2, &pt2), VERR_VAULT_DECRYPT);
	assert_null(k2);
	assert_null(pt2);

	/* Every header byte and every tag byte; ciphertext sampled (CLI test does all). */
	for (size_t i = 0; i < flen; i++) {
		int r;

		if (i >= VAULTFMT_HEADER_LEN && i < flen - VAULTFMT_TAG_LEN && i % 61 != 0)
			continue;
		file[i] ^= 0x01;
		r = vaultfmt_open(file, flen, pass, &g, &k2, &pt2);
		if (r != VERR_VAULT_FORMAT && r != VERR_VAULT_KDF && r != VERR_VAULT_DECRYPT)
			fail_msg("flip at %zu gave %d", i, r);
		file[i] ^= 0x01;
	}
	assert_int_equal(vaultfmt_open(file, flen - 1, pass, &g, &k2, &pt2), VERR_VAULT_DECRYPT);
	free(file);
	secbuf_free(pass);
	secbuf_free(wrong);
	secbuf_free(key);
	secbuf_free(pt);
	vaultfmt_contents_clear(&c);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_roundtrip),
	        cmocka_unit_test(test_truncated_and_extended),
	        cmocka_unit_test(test_mutations_decode_safely),
	        cmocka_unit_test(test_invalid_fields_refused),
	        cmocka_unit_test(test_header_bounds),
	        cmocka_unit_test(test_seal_open_tamper),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
