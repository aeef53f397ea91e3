/*
 * libFuzzer target: response scrubbing. The input's first bytes make a key
 * set (1..4 keys, secrets of 1..40 bytes, placeholders fixed per index);
 * the rest is a body in which byte 0x01 followed by a selector byte stands
 * for one key's secret in one spelling (raw, percent-encoded, \u-escaped,
 * or base64 after 0..2 bytes, where one more byte picks the alphabet and
 * how '+' and '/' are written: plain, "\/", "\u002B", "%2F", ...), so the
 * fuzzer reaches matches easily. Properties checked, beyond the
 * sanitizers' own:
 *   - the body fed in random splits, and byte by byte, gives exactly the
 *     one-shot output and the same counts, and never holds back more than
 *     scrub_set_maxlen() bytes;
 *   - a secret with no byte from [A-Za-z0-9_] (nothing a replacement is
 *     made of, so no replacement can help form it) never appears raw in
 *     the output;
 *   - no base64 core of a secret (the characters made of its bits only,
 *     at any of the three alignments) is left in the output read as base64
 *     text (escapes of '+' and '/' undone, either alphabet), unless the
 *     core holds an 'A' (what a replaced core becomes) or the place is
 *     next to SCRUB_B64_CORE_MIN 'A's or inside a placeholder: a masked
 *     edge character sits next to the 'A's of its core, so only there can
 *     output that was not input help form a core. Anywhere else the core
 *     was input that the scrubber passed over.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "inject.h"
#include "scrub.h"
#include "secbuf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                                                   \
	do {                                                                                       \
		if (!(x))                                                                          \
			abort();                                                                   \
	} while (0)

#define NKEYS_MAX 4

struct buf {
	uint8_t *p;
	size_t len, cap;
};

static void
put(struct buf *b, const void *p, size_t n)
{
	if (b->len + n > b->cap) {
		size_t cap = (b->len + n) * 2 + 64;

		b->p = realloc(b->p, cap);
		CHECK(b->p != NULL);
		b->cap = cap;
	}
	if (n > 0)
		memcpy(b->p + b->len, p, n);
	b->len += n;
}

static int
collect(void *arg, const void *p, size_t len)
{
	CHECK(len > 0);
	put(arg, p, len);
	return 0;
}

static uint64_t
rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static int
alnum_(uint8_t c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '_';
}

/* '+' or '/' of base64 text as escape style esc writes it (n: which one, for mixes). */
static const char *
b64_esc(uint8_t c, unsigned esc, size_t n)
{
	static const char *const plus[] = {"+", "+", "\\u002B", "\\u002b", "%2B", "%2b"};
	static const char *const slash[] = {"/", "\\/", "/", "\\u002F", "%2F", "%2f"};
	static const char *const uslash[] = {"\\u002f", "\\/"};

	if (esc == 6) /* a mix, as no encoder writes, but the scrubber reads */
		esc = (unsigned)(n * 7 % 6);
	if (c == '/' && esc == 3 && n % 3 == 0)
		return uslash[n & 1];
	return c == '+' ? plus[esc] : slash[esc];
}

/* Secret s in spelling sel (and opt, for base64) into b. */
static void
spell(struct buf *b, const uint8_t *s, size_t n, uint8_t sel, uint8_t opt)
{
	static const char hex[] = "0123456789ABCDEF", hexl[] = "0123456789abcdef";
	char t[8];

	switch (sel % 5) {
	case 0:
		put(b, s, n);
		break;
	case 1:
	case 2:
		for (size_t i = 0; i < n; i++) {
			const char *h = sel % 5 == 1 ? hex : hexl;

			if (alnum_(s[i]) && s[i] != '_') {
				put(b, &s[i], 1);
				continue;
			}
			t[0] = '%';
			t[1] = h[s[i] >> 4];
			t[2] = h[s[i] & 15];
			put(b, t, 3);
		}
		break;
	case 3:
		for (size_t i = 0; i < n; i++) {
			memcpy(t, "\\u00", 4);
			t[4] = hexl[s[i] >> 4];
			t[5] = hexl[s[i] & 15];
			put(b, t, 6);
		}
		break;
	default: {
		uint8_t raw[2 + 40 + 2];
		char enc[sizeof(raw) * 4 / 3 + 8];
		size_t k = opt % 3, m = 0;
		unsigned esc = (opt >> 2) % 7;
		int v = opt & 0x80 ? sodium_base64_VARIANT_URLSAFE : sodium_base64_VARIANT_ORIGINAL;

		for (size_t i = 0; i < k; i++)
			raw[m++] = (uint8_t)(sel + i);
		memcpy(raw + m, s, n);
		m += n;
		raw[m++] = sel;
		sodium_bin2base64(enc, sizeof(enc), raw, m, v);
		for (size_t i = 0; enc[i] != '\0'; i++) {
			const char *e = enc[i] == '+' || enc[i] == '/'
			                        ? b64_esc((uint8_t)enc[i], esc, i)
			                        : &enc[i];

			put(b, e, e == &enc[i] ? 1 : strlen(e));
		}
	}
	}
}

/*
 * out read as base64 text into t: "\/", "\u002b", "\u002f", "%2b", "%2f"
 * (either case) as '+' or '/', and '-' '_' as '+' '/'. f[i] is 1 where
 * t[i] comes from a byte of a placeholder (ph, nkeys of them) in out.
 */
static void
read_b64(const struct buf *out, const char ph[][INJECT_PLACEHOLDER_SIZE], size_t nkeys,
         struct buf *t, struct buf *f)
{
	size_t plen = INJECT_PLACEHOLDER_SIZE - 1;
	uint8_t *inph = calloc(out->len + 1, 1);

	CHECK(inph != NULL);
	for (size_t k = 0; k < nkeys; k++)
		for (size_t i = 0; i + plen <= out->len; i++)
			if (memcmp(out->p + i, ph[k], plen) == 0)
				memset(inph + i, 1, plen);
	t->len = f->len = 0;
	for (size_t i = 0; i < out->len;) {
		const uint8_t *p = out->p + i;
		size_t left = out->len - i, w = 1;
		uint8_t c = p[0], fl = 0;

		if (left >= 2 && p[0] == '\\' && p[1] == '/') {
			c = '/';
			w = 2;
		} else if (left >= 6 && memcmp(p, "\\u002", 5) == 0 &&
		           ((p[5] | 0x20) == 'b' || (p[5] | 0x20) == 'f')) {
			c = (p[5] | 0x20) == 'b' ? '+' : '/';
			w = 6;
		} else if (left >= 3 && p[0] == '%' && p[1] == '2' &&
		           ((p[2] | 0x20) == 'b' || (p[2] | 0x20) == 'f')) {
			c = (p[2] | 0x20) == 'b' ? '+' : '/';
			w = 3;
		} else if (c == '-' || c == '_') {
			c = c == '-' ? '+' : '/';
		}
		for (size_t j = 0; j < w; j++)
			fl |= inph[i + j];
		put(t, &c, 1);
		put(f, &fl, 1);
		i += w;
	}
	free(inph);
}

/*
 * Whether the SCRUB_B64_CORE_MIN characters of t before at (dir -1) or from
 * at on (dir 1) are all 'A': where a replaced core is.
 */
static int
a_run(const struct buf *t, size_t at, int dir)
{
	size_t from;

	if ((dir < 0 && at < SCRUB_B64_CORE_MIN) || (dir > 0 && t->len - at < SCRUB_B64_CORE_MIN))
		return 0;
	from = dir < 0 ? at - SCRUB_B64_CORE_MIN : at;
	for (size_t j = 0; j < SCRUB_B64_CORE_MIN; j++)
		if (t->p[from + j] != 'A')
			return 0;
	return 1;
}

/* The base64 core of s at alignment k (standard alphabet) into core; its length. */
static size_t
core_of(const uint8_t *s, size_t n, size_t k, char *core)
{
	uint8_t raw[2 + 40 + 2] = {0};
	char enc[sizeof(raw) * 4 / 3 + 8];
	size_t a = (8 * k + 5) / 6, e = 8 * (k + n) / 6;

	memcpy(raw + k, s, n);
	sodium_bin2base64(enc, sizeof(enc), raw, k + n + 2, sodium_base64_VARIANT_ORIGINAL);
	memcpy(core, enc + a, e - a);
	return e - a;
}

/* Feed body in random pieces (max_piece 1: byte by byte). */
static void
streamed(const struct scrub_set *set, const struct buf *body, uint64_t seed, size_t max_piece,
         struct buf *out, uint64_t *total)
{
	struct scrub_stream *st;
	size_t off = 0;

	out->len = 0;
	CHECK(scrub_stream_new(set, &st) == 0);
	while (off < body->len) {
		size_t n = 1 + (size_t)(rnd(&seed) % max_piece);

		if (n > body->len - off)
			n = body->len - off;
		CHECK(scrub_stream_feed(st, body->p + off, n, collect, out) == 0);
		CHECK(scrub_stream_held(st) <= scrub_set_maxlen(set));
		off += n;
	}
	CHECK(scrub_stream_finish(st, collect, out) == 0);
	*total = scrub_stream_total(st);
	scrub_stream_free(st);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int ready;
	struct inject_key keys[NKEYS_MAX];
	struct secbuf *secrets[NKEYS_MAX] = {NULL};
	char ph[NKEYS_MAX][INJECT_PLACEHOLDER_SIZE];
	struct scrub_set *set = NULL;
	struct buf body = {0}, one = {0}, two = {0}, txt = {0}, flags = {0};
	uint64_t counts[NKEYS_MAX], sum = 0, total, seed = 0x9e3779b97f4a7c15u;
	size_t nkeys, off = 1;

	if (!ready) {
		CHECK(sodium_init() >= 0);
		ready = 1;
	}
	if (size < 3)
		return 0;
	nkeys = 1 + (data[0] & 3);
	memset(keys, 0, sizeof(keys));
	for (size_t k = 0; k < nkeys; k++) {
		size_t n;

		if (off >= size)
			goto out;
		n = 1 + data[off++] % 40;
		if (n > size - off)
			n = size - off;
		if (n == 0)
			goto out;
		CHECK(secbuf_new(n, &secrets[k]) == 0);
		for (size_t i = 0; i < n; i++) {
			uint8_t c = data[off + i];

			/* The vault refuses these. */
			secrets[k]->data[i] = c == 0 || c == '\r' || c == '\n' ? (uint8_t)'.' : c;
		}
		secrets[k]->len = n;
		off += n;
		memcpy(ph[k], "vrunph_00000000000000000000000000000000", INJECT_PLACEHOLDER_SIZE);
		ph[k][INJECT_PLACEHOLDER_SIZE - 2] = (char)('0' + k);
		keys[k].name = "k";
		keys[k].secret = secrets[k];
		keys[k].placeholder = ph[k];
	}
	CHECK(scrub_set_new(keys, nkeys, &set) == 0);
	for (size_t i = 0; i < size; i++)
		seed = (seed ^ data[i]) * 0x100000001b3u;
	seed |= 1;
	while (off < size) {
		if (data[off] == 0x01 && off + 1 < size) {
			uint8_t sel = data[off + 1], opt = 0;
			const struct secbuf *s = secrets[sel / 5 % nkeys];

			off += 2;
			if (sel % 5 == 4 && off < size)
				opt = data[off++];
			spell(&body, s->data, s->len, sel, opt);
			continue;
		}
		put(&body, &data[off++], 1);
	}

	CHECK(scrub_buffer(set, body.p, body.len, collect, &one, counts) == 0);
	for (size_t k = 0; k < nkeys; k++)
		sum += counts[k];
	streamed(set, &body, seed, 1 + seed % 700, &two, &total);
	CHECK(two.len == one.len && (one.len == 0 || memcmp(two.p, one.p, one.len) == 0));
	CHECK(total == sum);
	if (body.len <= 2048) {
		streamed(set, &body, seed, 1, &two, &total);
		CHECK(two.len == one.len && (one.len == 0 || memcmp(two.p, one.p, one.len) == 0));
		CHECK(total == sum);
	}
	for (size_t k = 0; k < nkeys; k++) {
		const struct secbuf *s = secrets[k];
		int clean = 1;

		for (size_t i = 0; i < s->len; i++)
			clean &= !alnum_(s->data[i]);
		if (!clean || s->len > one.len)
			continue;
		for (size_t i = 0; i + s->len <= one.len; i++)
			CHECK(memcmp(one.p + i, s->data, s->len) != 0);
	}
	read_b64(&one, ph, nkeys, &txt, &flags);
	for (size_t k = 0; k < nkeys; k++) {
		for (size_t a = 0; a < 3; a++) {
			char core[60];
			size_t c = core_of(secrets[k]->data, secrets[k]->len, a, core);

			if (c < SCRUB_B64_CORE_MIN || memchr(core, 'A', c) != NULL || c > txt.len)
				continue;
			for (size_t i = 0; i + c <= txt.len; i++) {
				if (memcmp(txt.p + i, core, c) != 0 ||
				    memchr(flags.p + i, 1, c) != NULL)
					continue;
				if (a_run(&txt, i, -1) || a_run(&txt, i + c, 1))
					continue;
				abort(); /* a core the scrubber passed over */
			}
		}
	}
out:
	scrub_set_free(set);
	for (size_t k = 0; k < NKEYS_MAX; k++)
		secbuf_free(secrets[k]);
	free(body.p);
	free(one.p);
	free(two.p);
	free(txt.p);
	free(flags.p);
	return 0;
}
