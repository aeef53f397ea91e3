/* Secret injection into request heads: every mode, every refusal, exact output. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <openssl/evp.h>
#include <sodium.h>

#include "hostspec.h"
#include "inject.h"
#include "secbuf.h"
#include "vault.h"
#include "verr.h"

/* ---- test keys ---- */

struct tkey {
	struct inject_key k;
	struct hostspec hosts[4];
	char ph[INJECT_PLACEHOLDER_SIZE];
	char arg[VAULT_INJECT_ARG_MAX + 1];
	struct secbuf *secret;
};

/* A random secret of len bytes drawn from [lo, hi], never CR, LF, NUL or DEL. */
static struct secbuf *
rand_secret(size_t len, unsigned lo, unsigned hi)
{
	struct secbuf *s;

	assert_int_equal(secbuf_new(len, &s), 0);
	while (s->len < len) {
		unsigned char c = (unsigned char)(lo + randombytes_uniform(hi - lo + 1));

		if (c == '\r' || c == '\n' || c == '\0' || c == 0x7f)
			continue;
		s->data[s->len++] = c;
	}
	return s;
}

/* Printable, as most API keys are, but with every punctuation byte possible. */
static struct secbuf *
printable_secret(void)
{
	return rand_secret(24 + randombytes_uniform(40), 0x21, 0x7e);
}

static struct secbuf *
fixed_secret(const char *s)
{
	struct secbuf *b;

	assert_int_equal(secbuf_dup(s, strlen(s), &b), 0);
	return b;
}

/*
 * hosts: comma-separated bindings; spec: an --inject argument. The key
 * takes ownership of secret.
 */
static void
tkey_init(struct tkey *t, const char *hosts, const char *spec, struct secbuf *secret)
{
	const char *p = hosts;
	uint8_t mode;

	memset(t, 0, sizeof(*t));
	while (*p != '\0') {
		const char *end = strchr(p, ',');
		size_t n = end != NULL ? (size_t)(end - p) : strlen(p);

		assert_true(t->k.nhosts < 4);
		assert_int_equal(
		        hostspec_parse(p, n, HOSTSPEC_ALLOW_WILDCARD, &t->hosts[t->k.nhosts++]), 0);
		p += n;
		if (*p == ',')
			p++;
	}
	assert_int_equal(vault_parse_inject(spec, &mode, t->arg, sizeof(t->arg)), 0);
	assert_int_equal(inject_make_placeholder(t->ph, sizeof(t->ph)), 0);
	t->secret = secret;
	t->k.name = "test-key";
	t->k.secret = secret;
	t->k.placeholder = t->ph;
	t->k.hosts = t->hosts;
	t->k.mode = mode;
	t->k.arg = t->arg;
}

static void
tkey_free(struct tkey *t)
{
	secbuf_free(t->secret);
	t->secret = NULL;
}

/* ---- requests ---- */

#define MAXH 128

struct req {
	const char *method;
	const char *target;
	struct http_header h[MAXH];
	size_t n;
	uint8_t drop[MAXH];
	int use_drop;
	struct http_header extra[8];
	size_t nextra;
	char store[16][512]; /* for header lines made with placeholders */
	size_t nstore;
};

static void
parse_line(const char *line, struct http_header *h)
{
	const char *colon = strchr(line, ':');
	const char *v;

	assert_non_null(colon);
	h->name = line;
	h->name_len = (size_t)(colon - line);
	for (v = colon + 1; *v == ' '; v++)
		;
	h->value = v;
	h->value_len = strlen(v);
}

static void
req_init(struct req *r, const char *method, const char *target)
{
	memset(r, 0, sizeof(*r));
	r->method = method;
	r->target = target;
}

/* Add "Name: value" (the string must outlive the request). */
static void
hdr(struct req *r, const char *line)
{
	assert_true(r->n < MAXH);
	parse_line(line, &r->h[r->n++]);
}

/* Add a header formatted now; %s arguments only, kept in the request. */
static void
hdrf(struct req *r, const char *fmt, ...)
{
	va_list ap;
	char *s;

	assert_true(r->nstore < 16);
	s = r->store[r->nstore++];
	va_start(ap, fmt);
	assert_true(vsnprintf(s, sizeof(r->store[0]), fmt, ap) < (int)sizeof(r->store[0]));
	va_end(ap);
	hdr(r, s);
}

static void
extra(struct req *r, const char *line)
{
	parse_line(line, &r->extra[r->nextra++]);
}

static int
run_keys(struct req *r, const char *dest, int tls, const struct inject_key *keys, size_t nkeys,
         struct secbuf **out, uint8_t *result)
{
	struct inject_request ir = {
	        .method = r->method,
	        .method_len = strlen(r->method),
	        .target = r->target,
	        .target_len = strlen(r->target),
	        .headers = r->h,
	        .nheaders = r->n,
	        .drop = r->use_drop ? r->drop : NULL,
	        .extra = r->extra,
	        .nextra = r->nextra,
	};
	struct hostspec h;
	struct inject_dest d = {&h, tls};

	assert_int_equal(hostspec_parse(dest, strlen(dest), 0, &h), 0);
	return inject_apply(&ir, &d, keys, nkeys, out, result);
}

static int
run1(struct req *r, const char *dest, int tls, struct tkey *t, struct secbuf **out, uint8_t *result)
{
	return run_keys(r, dest, tls, &t->k, 1, out, result);
}

/* ---- expected heads ---- */

struct sb {
	char *p;
	size_t len, cap;
};

static void
sb_add(struct sb *b, const void *p, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		b->cap = (b->len + n + 1) * 2;
		b->p = realloc(b->p, b->cap);
		assert_non_null(b->p);
	}
	memcpy(b->p + b->len, p, n);
	b->len += n;
	b->p[b->len] = '\0';
}

/* Independent of the code under test: written for RFC 3986 directly. */
static void
sb_pct(struct sb *b, const struct secbuf *s)
{
	for (size_t i = 0; i < s->len; i++) {
		unsigned char c = s->data[i];
		char tmp[4];

		if (strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~",
		           c) &&
		    c != '\0') {
			sb_add(b, &c, 1);
		} else {
			snprintf(tmp, sizeof(tmp), "%%%02X", c);
			sb_add(b, tmp, 3);
		}
	}
}

/* base64 by OpenSSL, not by libsodium as in the code under test. */
static void
sb_b64(struct sb *b, const char *pre, const struct secbuf *s, const char *post)
{
	struct sb raw = {0};
	unsigned char *enc;
	int n;

	sb_add(&raw, pre, strlen(pre));
	if (s != NULL)
		sb_add(&raw, s->data, s->len);
	sb_add(&raw, post, strlen(post));
	enc = malloc(raw.len * 2 + 8);
	assert_non_null(enc);
	n = EVP_EncodeBlock(enc, (const unsigned char *)raw.p, (int)raw.len);
	sb_add(b, enc, (size_t)n);
	free(enc);
	free(raw.p);
}

/*
 * Expected head from a template: %s C string, %S secret raw, %P secret
 * percent-encoded, %B base64 of (char *pre, secret or NULL, char *post).
 */
static char *
expect(size_t *len, const char *fmt, ...)
{
	struct sb b = {0};
	va_list ap;

	sb_add(&b, "", 0);
	va_start(ap, fmt);
	for (const char *p = fmt; *p != '\0'; p++) {
		if (*p != '%') {
			sb_add(&b, p, 1);
			continue;
		}
		switch (*++p) {
		case 's': {
			const char *s = va_arg(ap, const char *);

			sb_add(&b, s, strlen(s));
			break;
		}
		case 'S': {
			const struct secbuf *s = va_arg(ap, const struct secbuf *);

			sb_add(&b, s->data, s->len);
			break;
		}
		case 'P':
			sb_pct(&b, va_arg(ap, const struct secbuf *));
			break;
		case 'B': {
			const char *pre = va_arg(ap, const char *);
			const struct secbuf *s = va_arg(ap, const struct secbuf *);

			sb_b64(&b, pre, s, va_arg(ap, const char *));
			break;
		}
		case '%':
			sb_add(&b, "%", 1);
			break;
		default:
			fail_msg("bad template directive %%%c", *p);
		}
	}
	va_end(ap);
	*len = b.len;
	return b.p;
}

static void
print_escaped(const char *what, const unsigned char *p, size_t n)
{
	fprintf(stderr, "%s (%zu bytes): ", what, n);
	for (size_t i = 0; i < n; i++) {
		if (p[i] == '\r')
			fputs("\\r", stderr);
		else if (p[i] == '\n')
			fputs("\\n\n  ", stderr);
		else if (p[i] < 0x20 || p[i] >= 0x7f)
			fprintf(stderr, "\\x%02x", p[i]);
		else
			fputc(p[i], stderr);
	}
	fputc('\n', stderr);
}

/* The whole head must be exactly what we expect; frees both. */
static void
check_head(struct secbuf *out, char *want, size_t wantlen)
{
	assert_non_null(out);
	if (out->len != wantlen || memcmp(out->data, want, wantlen) != 0) {
		print_escaped("got ", out->data, out->len);
		print_escaped("want", (const unsigned char *)want, wantlen);
		fail_msg("request head differs");
	}
	/* Sized exactly: nothing beyond the head in the buffer. */
	assert_int_equal(out->cap, out->len);
	free(want);
	secbuf_free(out);
}

#define CHECK(out, ...)                                                                            \
	do {                                                                                       \
		size_t wl_;                                                                        \
		char *w_ = expect(&wl_, __VA_ARGS__);                                              \
		check_head(out, w_, wl_);                                                          \
	} while (0)

/* ---- placeholders ---- */

static void
test_make_placeholder(void **state)
{
	char a[INJECT_PLACEHOLDER_SIZE], b[INJECT_PLACEHOLDER_SIZE], small[39];

	(void)state;
	assert_int_equal(inject_make_placeholder(a, sizeof(a)), 0);
	assert_int_equal(inject_make_placeholder(b, sizeof(b)), 0);
	assert_int_equal(strlen(a), INJECT_PLACEHOLDER_SIZE - 1);
	assert_memory_equal(a, "vrunph_", 7);
	for (size_t i = 7; i < strlen(a); i++)
		assert_non_null(strchr("0123456789abcdef", a[i]));
	assert_string_not_equal(a, b);
	memset(small, 'x', sizeof(small));
	assert_int_equal(inject_make_placeholder(small, sizeof(small)), VERR_TOO_LARGE);
	assert_int_equal(small[0], '\0');
}

/* ---- set modes ---- */

static void
test_bearer(void **state)
{
	struct tkey t;
	struct req r;
	struct secbuf *out;
	uint8_t res[1] = {9};

	(void)state;
	tkey_init(&t, "api.example.com", "bearer", printable_secret());
	req_init(&r, "GET", "/v1/items?x=1");
	hdr(&r, "Host: api.example.com");
	hdr(&r, "Accept: */*");
	assert_int_equal(run1(&r, "api.example.com:443", 1, &t, &out, res), 0);
	assert_int_equal(res[0], INJECT_DONE);
	CHECK(out,
	      "GET /v1/items?x=1 HTTP/1.1\r\nHost: api.example.com\r\nAccept: */*\r\n"
	      "Authorization: Bearer %S\r\n\r\n",
	      t.secret);
	tkey_free(&t);
}

static void
test_bearer_replaces_authorization(void **state)
{
	struct tkey t;
	struct req r;
	struct secbuf *out;

	(void)state;
	tkey_init(&t, "api.example.com", "bearer", printable_secret());
	req_init(&r, "POST", "/v1");
	hdr(&r, "Host: api.example.com");
	hdrf(&r, "Authorization: Bearer %s", t.ph);
	hdr(&r, "Content-Length: 0");
	hdr(&r, "authorization: Basic dXNlcjpwdw==");
	hdr(&r, "AUTHORIZATION: token abc");
	assert_int_equal(run1(&r, "api.example.com:443", 1, &t, &out, NULL), 0);
	/* Every client Authorization gone; ours where the first one was. */
	CHECK(out,
	      "POST /v1 HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: Bearer %S\r\n"
	      "Content-Length: 0\r\n\r\n",
	      t.secret);
	tkey_free(&t);
}

static void
test_basic_mode(void **state)
{
	struct tkey t;
	struct req r;
	struct secbuf *out;

	(void)state;
	/* A known vector first: base64("alice:s3cr3t"). */
	tkey_init(&t, "api.example.com", "basic:alice", fixed_secret("s3cr3t"));
	req_init(&r, "GET", "/");
	hdr(&r, "Authorization: Basic Zm9vOmJhcg==");
	hdr(&r, "Host: api.example.com");
	assert_int_equal(run1(&r, "api.example.com:443", 1, &t, &out, NULL), 0);
	CHECK(out, "GET / HTTP/1.1\r\nAuthorization: Basic YWxpY2U6czNjcjN0\r\n"
	           "Host: api.example.com\r\n\r\n");
	tkey_free(&t);

	/* Any bytes but CR, LF, NUL are fine: they travel base64-encoded. */
	tkey_init(&t, "api.example.com", "basic:bob",
	          rand_secret(1 + randombytes_uniform(80), 1, 255));
	req_init(&r, "GET", "/");
	hdr(&r, "Host: api.example.com");
	assert_int_equal(run1(&r, "api.example.com:443", 1, &t, &out, NULL), 0);
	CHECK(out, "GET / HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: Basic %B\r\n\r\n",
	      "bob:", t.secret, "");
	tkey_free(&t);
}

static void
test_header_mode(void **state)
{
	struct tkey t;
	struct req r;
	struct secbuf *out;

	(void)state;
	tkey_init(&t, "api.example.com", "header:X-Api-Key", printable_secret());
	req_init(&r, "GET", "/");
	hdr(&r, "Host: api.example.com");
	hdr(&r, "x-api-key: old");
	hdr(&r, "Authorization: Bearer keep-me");
	hdr(&r, "X-API-KEY: older");
	hdr(&r, "X-Api-Key-2: not-the-same");
	assert_int_equal(run1(&r, "api.example.com:443", 1, &t, &out, NULL), 0);
	CHECK(out,
	      "GET / HTTP/1.1\r\nHost: api.example.com\r\nX-Api-Key: %S\r\n"
	      "Authorization: Bearer keep-me\r\nX-Api-Key-2: not-the-same\r\n\r\n",
	      t.secret);
	tkey_free(&t);
}

/* ---- query mode ---- */

static void
test_query_replace(void **state)
{
	struct tkey t;
	struct req r;
	struct secbuf *out;
	uint8_t res[1];

	(void)state;
	tkey_init(&t, "api.example.com", "query:api_key", fixed_secret("a b&c=d%e+f/g?h#i"));
	req_init(&r, "GET", "/s?api_key=old&q=1&api_key2=x&xapi_key=y&api_key&api_key=&z");
	hdr(&r, "Host: api.example.com");
	assert_int_equal(run1(&r, "api.example.com:443", 1, &t, &out, res), 0);
	assert_int_equal(res[0], INJECT_DONE);
	CHECK(out,
	      "GET /s?api_key=a%%20b%%26c%%3Dd%%25e%%2Bf%%2Fg%%3Fh%%23i&q=1&api_key2=x&xapi_key=y"
	      "&api_key=a%%20b%%26c%%3Dd%%25e%%2Bf%%2Fg%%3Fh%%23i"
	      "&api_key=a%%20b%%26c%%3Dd%%25e%%2Bf%%2Fg%%3Fh%%23i&z HTTP/1.1\r\n"
	      "Host: api.example.com\r\n\r\n");
	tkey_free(&t);

	/* Random bytes, and a name that is only a prefix is left alone. */
	tkey_init(&t, "api.example.com", "query:key", rand_secret(40, 1, 255));
	req_init(&r, "GET", "/s?keys=1&key=PLACE&key=x&k=2");
	assert_int_equal(run1(&r, "api.example.com:443", 1, &t, &out, NULL), 0);
	CHECK(out, "GET /s?keys=1&key=%P&key=%P&k=2 HTTP/1.1\r\n\r\n", t.secret, t.secret);
	tkey_free(&t);
}

static void
test_query_append(void **state)
{
	static const struct {
		const char *in, *want;
	} cases[] = {
	        {"/v1/x", "/v1/x?api_key=%P"},
	        {"/v1/x?a=1", "/v1/x?a=1&api_key=%P"},
	        {"/v1/x?", "/v1/x?api_key=%P"},
	        {"/v1/x?a=1&", "/v1/x?a=1&api_key=%P"},
	        {"/v1/x?api_key2=z", "/v1/x?api_key2=z&api_key=%P"},
	        {"/v1/x#frag", "/v1/x?api_key=%P#frag"},
	        {"/v1/x?a=1#f?api_key=q", "/v1/x?a=1&api_key=%P#f?api_key=q"},
	        {"https://api.example.com/v1?a=1", "https://api.example.com/v1?a=1&api_key=%P"},
	        {"https://api.example.com/v1?api_key=o", "https://api.example.com/v1?api_key=%P"},
	        {"HTTP://api.example.com", "HTTP://api.example.com?api_key=%P"},
	};
	struct tkey t;
	struct req r;
	struct secbuf *out;
	char tmpl[256];

	(void)state;
	tkey_init(&t, "api.example.com", "query:api_key", printable_secret());
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		req_init(&r, "GET", cases[i].in);
		assert_int_equal(run1(&r, "api.example.com:443", 1, &t, &out, NULL), 0);
		snprintf(tmpl, sizeof(tmpl), "GET %s HTTP/1.1\r\n\r\n", cases[i].want);
		CHECK(out, tmpl, t.secret);
	}
	/* Asterisk-form has no query to put it in: the key is not used. */
	{
		uint8_t res[1] = {9};

		req_init(&r, "OPTIONS", "*");
		assert_int_equal(run1(&r, "api.example.com:443", 1, &t, &out, res), 0);
		assert_int_equal(res[0], INJECT_NONE);
		CHECK(out, "OPTIONS * HTTP/1.1\r\n\r\n");
	}
	tkey_free(&t);
}

/* ---- placeholder mode ---- */

static void
test_placeholder_target(void **state)
{
	struct tkey t;
	struct req r;
	struct secbuf *out;
	char target[256];
	uint8_t res[1];

	(void)state;
	tkey_init(&t, "api.example.com", "placeholder", fixed_secret("a b&c%d+e/f~g_h.i-j"));
	snprintf(target, sizeof(target), "/v1/%s/x?token=%s&n=%s", t.ph, t.ph, t.ph);
	req_init(&r, "GET", target);
	assert_int_equal(run1(&r, "api.example.com:443", 1, &t, &out, res), 0);
	assert_int_equal(res[0], INJECT_DONE);
	CHECK(out,
	      "GET "
	      "/v1/a%%20b%%26c%%25d%%2Be%%2Ff~g_h.i-j/x?token=a%%20b%%26c%%25d%%2Be%%2Ff~g_h.i-j"
	      "&n=a%%20b%%26c%%25d%%2Be%%2Ff~g_h.i-j HTTP/1.1\r\n\r\n");
	tkey_free(&t);

	/* Every byte value a secret may hold, in an absolute-form target. */
	tkey_init(&t, "api.example.com", "placeholder", rand_secret(200, 1, 255));
	snprintf(target, sizeof(target), "https://api.example.com/a?k=%s", t.ph);
	req_init(&r, "GET", target);
	assert_int_equal(run1(&r, "api.example.com:443", 1, &t, &out, NULL), 0);
	CHECK(out, "GET https://api.example.com/a?k=%P HTTP/1.1\r\n\r\n", t.secret);
	tkey_free(&t);
}

/* Routing and framing fields keep the placeholder: a secret there could reroute or reframe. */
static void
test_placeholder_not_in_framing_fields(void **state)
{
	struct tkey t;
	struct req r;
	struct secbuf *out;

	(void)state;
	tkey_init(&t, "api.example.com", "placeholder", fixed_secret("s3cret value"));
	req_init(&r, "GET", "/");
	hdrf(&r, "Host: api.example.com%s", t.ph);
	hdrf(&r, "Connection: %s", t.ph);
	hdrf(&r, "Upgrade: %s", t.ph);
	hdrf(&r, "Expect: %s", t.ph);
	hdrf(&r, "X-Token: %s", t.ph);
	assert_int_equal(run1(&r, "api.example.com:443", 1, &t, &out, NULL), 0);
	CHECK(out,
	      "GET / HTTP/1.1\r\nHost: api.example.com%s\r\nConnection: %s\r\nUpgrade: %s\r\n"
	      "Expect: %s\r\nX-Token: s3cret value\r\n\r\n",
	      t.ph, t.ph, t.ph, t.ph);
	tkey_free(&t);
}

static void
test_placeholder_headers(void **state)
{
	struct tkey t;
	struct req r;
	struct secbuf *out;
	char pre[INJECT_PLACEHOLDER_SIZE], suf[INJECT_PLACEHOLDER_SIZE];

	(void)state;
	/* SP, HTAB and obs-text are field-value bytes: they go in raw. */
	tkey_init(&t, "api.example.com", "placeholder", rand_secret(48, 0x20, 0xff));
	t.secret->data[3] = '\t';
	/* Truncated placeholders: first and last 38 of its 39 bytes. */
	memcpy(pre, t.ph, strlen(t.ph) - 1);
	pre[strlen(t.ph) - 1] = '\0';
	strcpy(suf, t.ph + 1);
	req_init(&r, "GET", "/");
	hdr(&r, "Host: api.example.com");
	hdrf(&r, "X-Token: %s", t.ph);
	hdrf(&r, "Cookie: a=%s; b=%s;c=%s", t.ph, t.ph, t.ph);
	hdrf(&r, "X-Partial: %s %s", pre, suf);
	hdrf(&r, "X-Glued: x%sy%s%s", t.ph, t.ph, t.ph);
	assert_int_equal(run1(&r, "api.example.com:443", 1, &t, &out, NULL), 0);
	CHECK(out,
	      "GET / HTTP/1.1\r\nHost: api.example.com\r\nX-Token: %S\r\n"
	      "Cookie: a=%S; b=%S;c=%S\r\nX-Partial: %s %s\r\nX-Glued: x%Sy%S%S\r\n"
	      "\r\n",
	      t.secret, t.secret, t.secret, t.secret, pre, suf, t.secret, t.secret, t.secret);

	/* Only partial matches: the key is reported as not used. */
	{
		uint8_t res[1] = {9};

		req_init(&r, "GET", "/");
		hdrf(&r, "X-Partial: %s%s", pre, suf);
		assert_int_equal(run1(&r, "api.example.com:443", 1, &t, &out, res), 0);
		assert_int_equal(res[0], INJECT_NONE);
		CHECK(out, "GET / HTTP/1.1\r\nX-Partial: %s%s\r\n\r\n", pre, suf);
	}
	tkey_free(&t);
}

static void
test_placeholder_basic(void **state)
{
	struct tkey t;
	struct req r;
	struct secbuf *out;
	char as_user[128], as_pass[128], twice[128];
	char raw[128];
	uint8_t res[1];

	(void)state;
	tkey_init(&t, "api.example.com", "placeholder", rand_secret(30, 1, 255));
	/* What the client sends: base64 of "PH:x", "user:PH" and "PH:PH". */
	snprintf(raw, sizeof(raw), "%s:x", t.ph);
	EVP_EncodeBlock((unsigned char *)as_user, (const unsigned char *)raw, (int)strlen(raw));
	snprintf(raw, sizeof(raw), "user:%s", t.ph);
	EVP_EncodeBlock((unsigned char *)as_pass, (const unsigned char *)raw, (int)strlen(raw));
	snprintf(raw, sizeof(raw), "%s:%s", t.ph, t.ph);
	EVP_EncodeBlock((unsigned char *)twice, (const unsigned char *)raw, (int)strlen(raw));

	req_init(&r, "GET", "/");
	hdrf(&r, "Authorization: Basic %s", as_user);
	assert_int_equal(run1(&r, "api.example.com:443", 1, &t, &out, res), 0);
	assert_int_equal(res[0], INJECT_DONE);
	CHECK(out, "GET / HTTP/1.1\r\nAuthorization: Basic %B\r\n\r\n", "", t.secret, ":x");

	/* Lower-case scheme and extra spaces are kept as sent. */
	req_init(&r, "GET", "/");
	hdrf(&r, "authorization: basic   %s", as_pass);
	assert_int_equal(run1(&r, "api.example.com:443", 1, &t, &out, NULL), 0);
	CHECK(out, "GET / HTTP/1.1\r\nauthorization: basic   %B\r\n\r\n", "user:", t.secret, "");

	req_init(&r, "GET", "/");
	hdrf(&r, "AUTHORIZATION: BASIC %s", twice);
	assert_int_equal(run1(&r, "api.example.com:443", 1, &t, &out, NULL), 0);
	{
		/* base64(S ":" S): build the middle by hand. */
		struct secbuf *both;

		assert_int_equal(secbuf_new(t.secret->len * 2 + 1, &both), 0);
		assert_int_equal(secbuf_append(both, t.secret->data, t.secret->len), 0);
		assert_int_equal(secbuf_append(both, ":", 1), 0);
		assert_int_equal(secbuf_append(both, t.secret->data, t.secret->len), 0);
		CHECK(out, "GET / HTTP/1.1\r\nAUTHORIZATION: BASIC %B\r\n\r\n", "", both, "");
		secbuf_free(both);
	}

	/*
	 * Left alone: not base64, missing padding, non-zero trailing bits
	 * ("QR==" is not canonical for "A"), URL-safe alphabet, no credentials
	 * at all, another scheme, and valid base64 without the placeholder.
	 */
	{
		static const char *const alone[] = {
		        "Basic !!!notbase64",
		        "Basic dXNlcjpwdw",
		        "Basic QR==",
		        "Basic dXNlcjpw-_==",
		        "Basic",
		        "Basic ",
		        "Bearer dXNlcjpwdw==",
		        "Basic dXNlcjpwdw==",
		};

		for (size_t i = 0; i < sizeof(alone) / sizeof(alone[0]); i++) {
			req_init(&r, "GET", "/");
			hdrf(&r, "Authorization: %s", alone[i]);
			res[0] = 9;
			assert_int_equal(run1(&r, "api.example.com:443", 1, &t, &out, res), 0);
			assert_int_equal(res[0], INJECT_NONE);
			/* parse_line drops the space after an empty value. */
			CHECK(out, "GET / HTTP/1.1\r\nAuthorization:%s%s\r\n\r\n",
			      r.h[0].value_len > 0 ? " " : "", r.h[0].value);
		}
	}
	/* Not base64 but holding the placeholder itself: swapped like anywhere else. */
	req_init(&r, "GET", "/");
	hdrf(&r, "Authorization: Basic %s", t.ph);
	secbuf_free(t.secret);
	t.secret = printable_secret();
	t.k.secret = t.secret;
	assert_int_equal(run1(&r, "api.example.com:443", 1, &t, &out, NULL), 0);
	CHECK(out, "GET / HTTP/1.1\r\nAuthorization: Basic %S\r\n\r\n", t.secret);

	tkey_free(&t);
}

/* ---- where a key must not go ---- */

/* The request as sent, for requests that must pass untouched. */
static void
check_untouched(struct secbuf *out, const struct req *r)
{
	struct sb b = {0};

	sb_add(&b, r->method, strlen(r->method));
	sb_add(&b, " ", 1);
	sb_add(&b, r->target, strlen(r->target));
	sb_add(&b, " HTTP/1.1\r\n", 11);
	for (size_t i = 0; i < r->n; i++) {
		sb_add(&b, r->h[i].name, r->h[i].name_len);
		sb_add(&b, ": ", 2);
		sb_add(&b, r->h[i].value, r->h[i].value_len);
		sb_add(&b, "\r\n", 2);
	}
	sb_add(&b, "\r\n", 2);
	check_head(out, b.p, b.len);
}

static void
test_not_bound(void **state)
{
	static const char *const specs[] = {"placeholder", "bearer", "basic:u", "header:X-Key",
	                                    "query:key"};
	static const char *const elsewhere[] = {
	        "evil.example.com:443", /* another host */
	        "api.example.com:8443", /* the bound host, another port */
	        "example.net:443",      /* a wildcard's bare domain */
	        "api.example.com.evil.com:443",
	        "127.0.0.1:443",
	};
	struct tkey t;
	struct req r;
	struct secbuf *out;
	char target[128];

	(void)state;
	for (size_t m = 0; m < sizeof(specs) / sizeof(specs[0]); m++) {
		tkey_init(&t, "api.example.com,*.example.net", specs[m], printable_secret());
		snprintf(target, sizeof(target), "/x?key=%s", t.ph);
		for (size_t d = 0; d < sizeof(elsewhere) / sizeof(elsewhere[0]); d++) {
			uint8_t res[1] = {9};

			req_init(&r, "GET", target);
			hdrf(&r, "Authorization: Bearer %s", t.ph);
			hdrf(&r, "X-Key: %s", t.ph);
			assert_int_equal(run1(&r, elsewhere[d], 1, &t, &out, res), 0);
			assert_int_equal(res[0], INJECT_NONE);
			check_untouched(out, &r);
		}
		/* The wildcard does match a subdomain. */
		{
			uint8_t res[1] = {9};

			req_init(&r, "GET", target);
			assert_int_equal(run1(&r, "a.b.example.net:443", 1, &t, &out, res), 0);
			assert_int_equal(res[0], INJECT_DONE);
			secbuf_free(out);
		}
		tkey_free(&t);
	}
}

static void
test_plain_http(void **state)
{
	struct tkey t;
	struct req r;
	struct secbuf *out;
	char target[128];
	uint8_t res[1];

	(void)state;
	tkey_init(&t, "api.example.com:80", "placeholder", printable_secret());
	snprintf(target, sizeof(target), "http://api.example.com/x?k=%s", t.ph);
	req_init(&r, "GET", target);
	hdrf(&r, "X-Key: %s", t.ph);
	assert_int_equal(run1(&r, "api.example.com:80", 0, &t, &out, res), 0);
	assert_int_equal(res[0], INJECT_NEED_TLS);
	check_untouched(out, &r);

	/* The set modes are withheld the same way. */
	tkey_free(&t);
	tkey_init(&t, "api.example.com:80", "bearer", printable_secret());
	req_init(&r, "GET", "/");
	assert_int_equal(run1(&r, "api.example.com:80", 0, &t, &out, res), 0);
	assert_int_equal(res[0], INJECT_NEED_TLS);
	check_untouched(out, &r);

	t.k.allow_http = 1;
	assert_int_equal(run1(&r, "api.example.com:80", 0, &t, &out, res), 0);
	assert_int_equal(res[0], INJECT_DONE);
	CHECK(out, "GET / HTTP/1.1\r\nAuthorization: Bearer %S\r\n\r\n", t.secret);
	tkey_free(&t);

	tkey_init(&t, "api.example.com:80", "placeholder", printable_secret());
	t.k.allow_http = 1;
	snprintf(target, sizeof(target), "http://api.example.com/x?k=%s", t.ph);
	req_init(&r, "GET", target);
	hdrf(&r, "X-Key: %s", t.ph);
	assert_int_equal(run1(&r, "api.example.com:80", 0, &t, &out, res), 0);
	assert_int_equal(res[0], INJECT_DONE);
	CHECK(out, "GET http://api.example.com/x?k=%P HTTP/1.1\r\nX-Key: %S\r\n\r\n", t.secret,
	      t.secret);
	tkey_free(&t);
}

/* ---- several keys ---- */

static void
test_two_keys(void **state)
{
	struct tkey a, b, c, other;
	struct inject_key keys[4];
	struct req r;
	struct secbuf *out;
	char target[160];
	uint8_t res[4];

	(void)state;
	tkey_init(&a, "api.example.com", "placeholder", printable_secret());
	tkey_init(&b, "api.example.com", "placeholder", printable_secret());
	tkey_init(&c, "*.example.com", "header:X-Api-Key", printable_secret());
	tkey_init(&other, "other.example.org", "bearer", printable_secret());
	keys[0] = a.k;
	keys[1] = other.k;
	keys[2] = b.k;
	keys[3] = c.k;
	snprintf(target, sizeof(target), "/x?a=%s&b=%s", a.ph, b.ph);
	req_init(&r, "GET", target);
	hdrf(&r, "X-Both: %s,%s", b.ph, a.ph);
	hdrf(&r, "X-Other: %s", other.ph);
	assert_int_equal(run_keys(&r, "api.example.com:443", 1, keys, 4, &out, res), 0);
	assert_int_equal(res[0], INJECT_DONE);
	assert_int_equal(res[1], INJECT_NONE);
	assert_int_equal(res[2], INJECT_DONE);
	assert_int_equal(res[3], INJECT_DONE);
	CHECK(out,
	      "GET /x?a=%P&b=%P HTTP/1.1\r\nX-Both: %S,%S\r\nX-Other: %s\r\nX-Api-Key: %S\r\n\r\n",
	      a.secret, b.secret, b.secret, a.secret, other.ph, c.secret);

	/* A secret that happens to hold another key's placeholder is not searched. */
	secbuf_free(a.secret);
	a.secret = fixed_secret(b.ph);
	keys[0].secret = a.secret;
	req_init(&r, "GET", "/");
	hdrf(&r, "X-A: %s", a.ph);
	assert_int_equal(run_keys(&r, "api.example.com:443", 1, keys, 4, &out, res), 0);
	assert_int_equal(res[2], INJECT_NONE);
	CHECK(out, "GET / HTTP/1.1\r\nX-A: %s\r\nX-Api-Key: %S\r\n\r\n", b.ph, c.secret);

	tkey_free(&a);
	tkey_free(&b);
	tkey_free(&c);
	tkey_free(&other);
}

/* Hand-made placeholders, one a prefix of the other: the longer one wins. */
static void
test_longest_placeholder(void **state)
{
	struct tkey a, b;
	struct inject_key keys[2];
	struct req r;
	struct secbuf *out;

	(void)state;
	tkey_init(&a, "api.example.com", "placeholder", printable_secret());
	tkey_init(&b, "api.example.com", "placeholder", printable_secret());
	strcpy(a.ph, "ph_short_0123456789");
	strcpy(b.ph, "ph_short_0123456789_longer");
	keys[0] = a.k;
	keys[1] = b.k;
	req_init(&r, "GET", "/ph_short_0123456789_longer/ph_short_0123456789_");
	hdr(&r, "X: ph_short_0123456789_longerph_short_0123456789");
	assert_int_equal(run_keys(&r, "api.example.com:443", 1, keys, 2, &out, NULL), 0);
	CHECK(out, "GET /%P/%P_ HTTP/1.1\r\nX: %S%S\r\n\r\n", b.secret, a.secret, b.secret,
	      a.secret);
	/* Same the other way round. */
	keys[0] = b.k;
	keys[1] = a.k;
	assert_int_equal(run_keys(&r, "api.example.com:443", 1, keys, 2, &out, NULL), 0);
	CHECK(out, "GET /%P/%P_ HTTP/1.1\r\nX: %S%S\r\n\r\n", b.secret, a.secret, b.secret,
	      a.secret);
	tkey_free(&a);
	tkey_free(&b);
}

/* A query key and a placeholder key on one target, fragment included. */
static void
test_query_and_placeholder(void **state)
{
	struct tkey q, p;
	struct inject_key keys[2];
	struct req r;
	struct secbuf *out;
	char target[200];
	uint8_t res[2];

	(void)state;
	tkey_init(&q, "api.example.com", "query:api_key", printable_secret());
	tkey_init(&p, "api.example.com", "placeholder", printable_secret());
	keys[0] = q.k;
	keys[1] = p.k;
	snprintf(target, sizeof(target), "/%s?api_key=%s&b=%s#f%s", p.ph, p.ph, p.ph, p.ph);
	req_init(&r, "GET", target);
	assert_int_equal(run_keys(&r, "api.example.com:443", 1, keys, 2, &out, res), 0);
	assert_int_equal(res[0], INJECT_DONE);
	assert_int_equal(res[1], INJECT_DONE);
	/* api_key's value is the query key's, whatever the client put there. */
	CHECK(out, "GET /%P?api_key=%P&b=%P#f%P HTTP/1.1\r\n\r\n", p.secret, q.secret, p.secret,
	      p.secret);
	tkey_free(&q);
	tkey_free(&p);
}

static void
expect_conflict(const char *spec1, const char *spec2, int want)
{
	struct tkey a, b;
	struct inject_key keys[2];
	struct req r;
	struct secbuf *out = (struct secbuf *)1;
	uint8_t res[2] = {9, 9};

	tkey_init(&a, "api.example.com", spec1, printable_secret());
	tkey_init(&b, "api.example.com", spec2, printable_secret());
	keys[0] = a.k;
	keys[1] = b.k;
	req_init(&r, "GET", "/");
	hdr(&r, "Host: api.example.com");
	if (run_keys(&r, "api.example.com:443", 1, keys, 2, &out, res) != want)
		fail_msg("%s + %s: not %d", spec1, spec2, want);
	if (want != 0) {
		assert_null(out);
		assert_int_equal(res[0], INJECT_NONE);
		assert_int_equal(res[1], INJECT_NONE);
	}
	secbuf_free(out);

	/* Not both bound here: no conflict. */
	b.hosts[0].port = 8443;
	out = NULL;
	assert_int_equal(run_keys(&r, "api.example.com:443", 1, keys, 2, &out, res), 0);
	secbuf_free(out);
	tkey_free(&a);
	tkey_free(&b);
}

static void
test_conflict(void **state)
{
	(void)state;
	expect_conflict("bearer", "bearer", VERR_INJECT_CONFLICT);
	expect_conflict("bearer", "basic:u", VERR_INJECT_CONFLICT);
	expect_conflict("basic:u", "header:authorization", VERR_INJECT_CONFLICT);
	expect_conflict("header:X-Key", "header:x-key", VERR_INJECT_CONFLICT);
	expect_conflict("query:key", "query:key", VERR_INJECT_CONFLICT);
	/* These can live together. */
	expect_conflict("header:X-Key", "header:X-Key2", 0);
	expect_conflict("query:key", "query:Key", 0);
	expect_conflict("query:key", "header:key", 0);
	expect_conflict("bearer", "placeholder", 0);
	expect_conflict("placeholder", "placeholder", 0);
}

static void
test_conflict_with_extra(void **state)
{
	struct tkey t;
	struct req r;
	struct secbuf *out;

	(void)state;
	tkey_init(&t, "api.example.com", "header:X-Key", printable_secret());
	req_init(&r, "GET", "/");
	extra(&r, "x-key: from the proxy");
	assert_int_equal(run1(&r, "api.example.com:443", 1, &t, &out, NULL), VERR_INJECT_CONFLICT);
	assert_null(out);
	tkey_free(&t);
}

/* ---- refusals ---- */

static void
test_secret_bytes(void **state)
{
	struct tkey t;
	struct req r;
	struct secbuf *out;
	char target[128];
	uint8_t res[1] = {9};

	(void)state;
	/* A secret with a control byte cannot stand raw in a header. */
	tkey_init(&t, "api.example.com", "bearer",
	          fixed_secret("ab\x01"
	                       "cd"));
	req_init(&r, "GET", "/");
	assert_int_equal(run1(&r, "api.example.com:443", 1, &t, &out, res),
	                 VERR_INJECT_SECRET_BYTES);
	assert_null(out);
	assert_int_equal(res[0], INJECT_NONE);
	tkey_free(&t);

	tkey_init(&t, "api.example.com", "header:X-Key", fixed_secret("abcd\x7f"));
	assert_int_equal(run1(&r, "api.example.com:443", 1, &t, &out, NULL),
	                 VERR_INJECT_SECRET_BYTES);
	assert_null(out);
	/* ...but not where it never goes: another host. */
	assert_int_equal(run1(&r, "other.example.com:443", 1, &t, &out, NULL), 0);
	secbuf_free(out);
	tkey_free(&t);

	/* Base64 or percent-encoding carries it fine. */
	tkey_init(&t, "api.example.com", "basic:u",
	          fixed_secret("a\x1b"
	                       "b"));
	assert_int_equal(run1(&r, "api.example.com:443", 1, &t, &out, NULL), 0);
	CHECK(out, "GET / HTTP/1.1\r\nAuthorization: Basic dTphG2I=\r\n\r\n");
	tkey_free(&t);

	tkey_init(&t, "api.example.com", "placeholder",
	          fixed_secret("a\x1b"
	                       "b\t"));
	snprintf(target, sizeof(target), "/?k=%s", t.ph);
	req_init(&r, "GET", target);
	assert_int_equal(run1(&r, "api.example.com:443", 1, &t, &out, NULL), 0);
	CHECK(out, "GET /?k=a%%1Bb%%09 HTTP/1.1\r\n\r\n");
	/* In a header value: refused. */
	hdrf(&r, "X-Key: %s", t.ph);
	assert_int_equal(run1(&r, "api.example.com:443", 1, &t, &out, NULL),
	                 VERR_INJECT_SECRET_BYTES);
	assert_null(out);
	tkey_free(&t);
}

static void
test_drop_and_extra(void **state)
{
	struct tkey t;
	struct req r;
	struct secbuf *out;

	(void)state;
	tkey_init(&t, "api.example.com", "bearer", printable_secret());
	req_init(&r, "GET", "/");
	hdr(&r, "Host: api.example.com");
	hdr(&r, "Connection: close");
	hdr(&r, "Accept-Encoding: gzip");
	hdr(&r, "Proxy-Authorization: Basic eDp5");
	hdr(&r, "X-Empty:");
	hdr(&r, "User-Agent: t");
	r.use_drop = 1;
	r.drop[1] = r.drop[2] = r.drop[3] = 1;
	extra(&r, "Connection: keep-alive");
	extra(&r, "Accept-Encoding: identity");
	assert_int_equal(run1(&r, "api.example.com:443", 1, &t, &out, NULL), 0);
	CHECK(out,
	      "GET / HTTP/1.1\r\nHost: api.example.com\r\nX-Empty:\r\nUser-Agent: t\r\n"
	      "Authorization: Bearer %S\r\nConnection: keep-alive\r\n"
	      "Accept-Encoding: identity\r\n\r\n",
	      t.secret);

	tkey_free(&t);

	/* Extra headers are verbatim: a placeholder there stays one. */
	tkey_init(&t, "api.example.com", "placeholder", printable_secret());
	req_init(&r, "GET", "/");
	hdrf(&r, "X-Extra: %s", t.ph);
	r.extra[0] = r.h[0];
	r.nextra = 1;
	r.n = 0;
	assert_int_equal(run1(&r, "api.example.com:443", 1, &t, &out, NULL), 0);
	CHECK(out, "GET / HTTP/1.1\r\nX-Extra: %s\r\n\r\n", t.ph);
	tkey_free(&t);
}

static void
test_invalid(void **state)
{
	struct tkey t;
	struct req r;
	struct secbuf *out;
	struct http_header bad;
	uint8_t res[1] = {9};

	(void)state;
	tkey_init(&t, "api.example.com", "placeholder", printable_secret());

	/* Bytes that would split the head we write. */
	req_init(&r, "GET", "/a b");
	assert_int_equal(run1(&r, "api.example.com:443", 1, &t, &out, res), VERR_INVALID);
	assert_null(out);
	req_init(&r, "GET", "/a\r\nX: y");
	assert_int_equal(run1(&r, "api.example.com:443", 1, &t, &out, res), VERR_INVALID);
	req_init(&r, "G T", "/");
	assert_int_equal(run1(&r, "api.example.com:443", 1, &t, &out, res), VERR_INVALID);
	req_init(&r, "GET", "");
	assert_int_equal(run1(&r, "api.example.com:443", 1, &t, &out, res), VERR_INVALID);
	req_init(&r, "GET", "/");
	hdr(&r, "X-A: a\rb");
	assert_int_equal(run1(&r, "api.example.com:443", 1, &t, &out, res), VERR_INVALID);
	req_init(&r, "GET", "/");
	bad = (struct http_header){"X-B", 3, "a\0b", 3};
	r.h[r.n++] = bad;
	assert_int_equal(run1(&r, "api.example.com:443", 1, &t, &out, res), VERR_INVALID);
	req_init(&r, "GET", "/");
	bad = (struct http_header){"X B", 3, "v", 1};
	r.h[r.n++] = bad;
	assert_int_equal(run1(&r, "api.example.com:443", 1, &t, &out, res), VERR_INVALID);
	req_init(&r, "GET", "/");
	extra(&r, "Via: x\ny");
	assert_int_equal(run1(&r, "api.example.com:443", 1, &t, &out, res), VERR_INVALID);
	assert_int_equal(res[0], INJECT_NONE);

	/* Malformed keys. */
	req_init(&r, "GET", "/");
	t.k.placeholder = "short_1";
	assert_int_equal(run1(&r, "api.example.com:443", 1, &t, &out, res), VERR_INVALID);
	t.k.placeholder = "vrunph_0123456789-abcdef";
	assert_int_equal(run1(&r, "api.example.com:443", 1, &t, &out, res), VERR_INVALID);
	t.k.placeholder = t.ph;
	t.k.mode = 0;
	assert_int_equal(run1(&r, "api.example.com:443", 1, &t, &out, res), VERR_INVALID);
	t.k.mode = VAULT_INJECT_HEADER;
	t.k.arg = "Host";
	assert_int_equal(run1(&r, "api.example.com:443", 1, &t, &out, res), VERR_INVALID);
	t.k.arg = "X Y";
	assert_int_equal(run1(&r, "api.example.com:443", 1, &t, &out, res), VERR_INVALID);
	t.k.mode = VAULT_INJECT_QUERY;
	t.k.arg = "a&b";
	assert_int_equal(run1(&r, "api.example.com:443", 1, &t, &out, res), VERR_INVALID);
	t.k.mode = VAULT_INJECT_BASIC;
	t.k.arg = "us:er";
	assert_int_equal(run1(&r, "api.example.com:443", 1, &t, &out, res), VERR_INVALID);
	t.k.mode = VAULT_INJECT_PLACEHOLDER;
	t.k.arg = "";
	secbuf_free(t.secret);
	t.secret = fixed_secret("a\nb");
	t.k.secret = t.secret;
	assert_int_equal(run1(&r, "api.example.com:443", 1, &t, &out, res), VERR_SECRET_BYTES);
	assert_null(out);

	/* Two keys sharing a placeholder: which secret would it be? */
	{
		struct tkey u;
		struct inject_key keys[2];

		secbuf_free(t.secret);
		t.secret = printable_secret();
		t.k.secret = t.secret;
		tkey_init(&u, "api.example.com", "placeholder", printable_secret());
		u.k.placeholder = t.ph;
		keys[0] = t.k;
		keys[1] = u.k;
		assert_int_equal(run_keys(&r, "api.example.com:443", 1, keys, 2, &out, NULL),
		                 VERR_INVALID);
		tkey_free(&u);
	}
	tkey_free(&t);
}

static void
test_oversize(void **state)
{
	struct tkey t;
	struct req r;
	struct secbuf *out;
	static char big[INJECT_HEAD_MAX];
	char line[600];

	(void)state;
	tkey_init(&t, "api.example.com", "placeholder", rand_secret(VAULT_SECRET_MAX, 0x21, 0x7e));

	/* A target too long for the bound. */
	memset(big, 'a', sizeof(big) - 1);
	big[0] = '/';
	big[sizeof(big) - 1] = '\0';
	req_init(&r, "GET", big);
	assert_int_equal(run1(&r, "api.example.com:443", 1, &t, &out, NULL), VERR_TOO_LARGE);
	assert_null(out);
	big[INJECT_HEAD_MAX - 40] = '\0';
	assert_int_equal(run1(&r, "api.example.com:443", 1, &t, &out, NULL), 0);
	secbuf_free(out);

	/* Small input, large output: four 16 KiB secrets and the rest. */
	snprintf(line, sizeof(line), "X-K: %s%s%s%s", t.ph, t.ph, t.ph, t.ph);
	req_init(&r, "GET", "/");
	hdr(&r, line);
	assert_int_equal(run1(&r, "api.example.com:443", 1, &t, &out, NULL), VERR_TOO_LARGE);
	assert_null(out);
	/* Three fit. */
	snprintf(line, sizeof(line), "X-K: %s%s%s", t.ph, t.ph, t.ph);
	req_init(&r, "GET", "/");
	hdr(&r, line);
	assert_int_equal(run1(&r, "api.example.com:443", 1, &t, &out, NULL), 0);
	CHECK(out, "GET / HTTP/1.1\r\nX-K: %S%S%S\r\n\r\n", t.secret, t.secret, t.secret);

	/* The exact bound: INJECT_HEAD_MAX bytes pass, one more does not. */
	{
		/* "GET " + target + " HTTP/1.1\r\n" + "\r\n" */
		size_t tl = INJECT_HEAD_MAX - 4 - 11 - 2;

		memset(big, 'b', sizeof(big) - 1);
		big[0] = '/';
		big[tl] = '\0';
		req_init(&r, "GET", big);
		assert_int_equal(run1(&r, "api.example.com:443", 1, &t, &out, NULL), 0);
		assert_int_equal(out->len, INJECT_HEAD_MAX);
		secbuf_free(out);
		big[tl] = 'b';
		big[tl + 1] = '\0';
		assert_int_equal(run1(&r, "api.example.com:443", 1, &t, &out, NULL),
		                 VERR_TOO_LARGE);
		assert_null(out);
	}

	/* Inside Basic credentials too. */
	{
		char raw[300], b64[400];

		snprintf(raw, sizeof(raw), "%s:%s%s%s%s", t.ph, t.ph, t.ph, t.ph, t.ph);
		EVP_EncodeBlock((unsigned char *)b64, (const unsigned char *)raw, (int)strlen(raw));
		req_init(&r, "GET", "/");
		hdrf(&r, "Authorization: Basic %s", b64);
		assert_int_equal(run1(&r, "api.example.com:443", 1, &t, &out, NULL),
		                 VERR_TOO_LARGE);
		assert_null(out);
	}

	/* Many headers. */
	req_init(&r, "GET", "/");
	memset(big, 'v', 1000);
	big[1000] = '\0';
	for (size_t i = 0; i < MAXH; i++)
		r.h[r.n++] = (struct http_header){"X-V", 3, big, 1000};
	assert_int_equal(run1(&r, "api.example.com:443", 1, &t, &out, NULL), VERR_TOO_LARGE);
	assert_null(out);
	tkey_free(&t);
}

static void
test_placeholder_seen(void **state)
{
	struct tkey t;
	char buf[200];

	(void)state;
	tkey_init(&t, "api.example.com", "bearer", printable_secret());
	snprintf(buf, sizeof(buf), "GET /?k=%s HTTP/1.1\r\n\r\n", t.ph);
	assert_int_equal(inject_placeholder_seen(&t.k, buf, strlen(buf)), 1);
	assert_int_equal(inject_placeholder_seen(&t.k, t.ph, strlen(t.ph)), 1);
	assert_int_equal(inject_placeholder_seen(&t.k, t.ph, strlen(t.ph) - 1), 0);
	assert_int_equal(inject_placeholder_seen(&t.k, t.ph + 1, strlen(t.ph) - 1), 0);
	assert_int_equal(inject_placeholder_seen(&t.k, "", 0), 0);
	tkey_free(&t);
}

static void
test_from_entry(void **state)
{
	struct vault_entry *e;
	struct inject_key k;
	char ph[INJECT_PLACEHOLDER_SIZE];

	(void)state;
	assert_int_equal(vault_entry_new(&e), 0);
	strcpy(e->name, "deploy-key");
	e->secret = fixed_secret("s3cr3t");
	assert_int_equal(hostspec_parse("api.example.com", 15, 0, &e->hosts[0]), 0);
	e->nhosts = 1;
	assert_int_equal(
	        vault_parse_inject("basic:alice", &e->inject, e->inject_arg, sizeof(e->inject_arg)),
	        0);
	assert_int_equal(inject_make_placeholder(ph, sizeof(ph)), 0);
	inject_key_from_entry(e, ph, &k);
	assert_string_equal(k.name, "deploy-key");
	assert_ptr_equal(k.secret, e->secret);
	assert_ptr_equal(k.placeholder, ph);
	assert_ptr_equal(k.hosts, e->hosts);
	assert_int_equal(k.nhosts, 1);
	assert_int_equal(k.mode, VAULT_INJECT_BASIC);
	assert_string_equal(k.arg, "alice");
	assert_int_equal(k.allow_http, 0);
	vault_entry_free(e);
}

static void
test_bad_args(void **state)
{
	struct tkey t;
	struct req r;
	struct secbuf *out = (struct secbuf *)1;
	struct hostspec h;
	struct inject_request ir = {"GET", 3, "/", 1, NULL, 0, NULL, NULL, 0};
	struct inject_dest d = {&h, 1};
	uint8_t res[1] = {9};

	(void)state;
	tkey_init(&t, "api.example.com", "placeholder", printable_secret());
	assert_int_equal(hostspec_parse("*.example.com", 13, HOSTSPEC_ALLOW_WILDCARD, &h), 0);
	/* A wildcard is not a destination: nothing matches it. */
	assert_int_equal(inject_apply(&ir, &d, &t.k, 1, &out, res), 0);
	assert_int_equal(res[0], INJECT_NONE);
	CHECK(out, "GET / HTTP/1.1\r\n\r\n");
	assert_int_equal(inject_apply(NULL, &d, &t.k, 1, &out, res), VERR_INVALID);
	assert_null(out);
	d.host = NULL;
	assert_int_equal(inject_apply(&ir, &d, &t.k, 1, &out, res), VERR_INVALID);
	d.host = &h;
	assert_int_equal(inject_apply(&ir, &d, NULL, 1, &out, res), VERR_INVALID);
	assert_int_equal(inject_apply(&ir, &d, &t.k, INJECT_KEYS_MAX + 1, &out, NULL),
	                 VERR_TOO_MANY);
	/* No keys at all is fine: the request is rewritten as is. */
	req_init(&r, "DELETE", "/x");
	hdr(&r, "A: b");
	assert_int_equal(run_keys(&r, "api.example.com:443", 1, NULL, 0, &out, NULL), 0);
	CHECK(out, "DELETE /x HTTP/1.1\r\nA: b\r\n\r\n");
	tkey_free(&t);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_make_placeholder),
	        cmocka_unit_test(test_placeholder_not_in_framing_fields),
	        cmocka_unit_test(test_bearer),
	        cmocka_unit_test(test_bearer_replaces_authorization),
	        cmocka_unit_test(test_basic_mode),
	        cmocka_unit_test(test_header_mode),
	        cmocka_unit_test(test_query_replace),
	        cmocka_unit_test(test_query_append),
	        cmocka_unit_test(test_placeholder_target),
	        cmocka_unit_test(test_placeholder_headers),
	        cmocka_unit_test(test_placeholder_basic),
	        cmocka_unit_test(test_not_bound),
	        cmocka_unit_test(test_plain_http),
	        cmocka_unit_test(test_two_keys),
	        cmocka_unit_test(test_longest_placeholder),
	        cmocka_unit_test(test_query_and_placeholder),
	        cmocka_unit_test(test_conflict),
	        cmocka_unit_test(test_conflict_with_extra),
	        cmocka_unit_test(test_secret_bytes),
	        cmocka_unit_test(test_drop_and_extra),
	        cmocka_unit_test(test_invalid),
	        cmocka_unit_test(test_oversize),
	        cmocka_unit_test(test_placeholder_seen),
	        cmocka_unit_test(test_from_entry),
	        cmocka_unit_test(test_bad_args),
	};

	if (sodium_init() < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
