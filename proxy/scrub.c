#include "scrub.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "secbuf.h"
#include "vault.h"
#include "verr.h"

/*
 * The longest spelling of one secret byte in the decoded form is "\u00XX";
 * every other spelling (or a multi-byte code point) costs less per byte.
 * Stream decisions rely on this bound: a match at a position never reads
 * more than reach bytes from it.
 */
#define DEC_PER_BYTE 6
/*
 * The longest spelling of one base64 character ("\u002B"). A core of c
 * characters and its trailing edge read at most SPELL_MAX * (c + 1) bytes,
 * and a stream keeps SPELL_MAX - 1 more, for the spelling of the character
 * before a core, which a match starting next may have to mask.
 */
#define SPELL_MAX 6
/* Patterns per key: raw, decoded, three base64 cores. */
#define PATS_PER_KEY 5
/* First-byte bucket entries per key: raw 1, decoded 2, base64 2 x 3. */
#define LIT_PER_KEY 9
/* Base64 patterns per key that may begin with an escaped '+' or '/'. */
#define ESC_PER_KEY 3
#define NO_EDGE     0xff
#define NONE        ((size_t)-1)
/* Input taken per scan on top of what is held back: one TLS record. */
#define CHUNK (16 * 1024)

enum kind { K_RAW, K_DEC, K_B64 };

struct pat {
	uint32_t off; /* pattern bytes at set->mem->data + off */
	uint32_t len; /* secret length (raw, decoded) or core length (base64) */
	uint16_t key;
	uint8_t kind;
	uint8_t head; /* base64: bits of the char before the core that are not S's */
	uint8_t tail; /* base64: likewise for the char after it; NO_EDGE: none */
};

/*
 * Everything here but nkeys, npat, reach and maxlen is derived from
 * secrets (even the bucket tables say which bytes start them), so the
 * whole struct and its arrays sit in one sodium_malloc'd block.
 */
struct scrub_set {
	size_t nkeys;
	size_t npat;
	size_t reach;       /* the most input one match reads from where it starts */
	size_t maxlen;      /* reach + SPELL_MAX - 1: what a stream holds back */
	struct secbuf *mem; /* copies of the secrets, base64 core values */
	struct pat *pat;
	uint16_t *lit; /* pattern indices by first input byte */
	uint16_t *dec; /* decoded patterns by their first secret byte */
	uint16_t *esc; /* base64 patterns beginning with '+' (value 62), then '/' */
	uint8_t *phlen;
	char *ph; /* nkeys placeholders, INJECT_PLACEHOLDER_MAX + 1 bytes each */
	uint32_t lit_off[257];
	uint32_t dec_off[257];
	uint32_t esc_off[3];
	uint8_t pairs[65536 / 8]; /* (b0, b1) pairs that may begin a match */
	uint8_t first[256 / 8];   /* b0 that may begin one (for the last byte) */
	uint8_t b64[256];         /* base64 value + 1 of a byte in either alphabet, or 0 */
};

struct scrub_stream {
	const struct scrub_set *set;
	struct secbuf *self; /* the guarded block this struct lives in */
	struct secbuf *w;    /* input; w->data[start..len) not passed on yet */
	size_t start;
	size_t len;
	size_t pos;    /* bytes from start scanned and not sent: 0..SPELL_MAX */
	uint8_t rkeep; /* struct scan's rkeep for the spelling at start, or NO_EDGE */
	int broken;
	uint64_t total;
	uint64_t *counts; /* nkeys, in the same block */
};

static const char b64_std[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static const char b64_url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
static const char hexu[] = "0123456789ABCDEF";
static const char hexl[] = "0123456789abcdef";

static size_t
round16(size_t n)
{
	return (n + 15) & ~(size_t)15;
}

static int
hexv(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c |= 0x20;
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* The byte a JSON two-character escape "\e" stands for, or -1. */
static int
json_short(unsigned char e)
{
	switch (e) {
	case '"':
		return '"';
	case '\\':
		return '\\';
	case '/':
		return '/';
	case 'b':
		return 8;
	case 'f':
		return 12;
	case 'n':
		return 10;
	case 'r':
		return 13;
	case 't':
		return 9;
	}
	return -1;
}

/* Four hex digits at p, or -1. */
static long
hex4(const uint8_t *p)
{
	long v = 0;

	for (int i = 0; i < 4; i++) {
		int h = hexv(p[i]);

		if (h < 0)
			return -1;
		v = v << 4 | h;
	}
	return v;
}

static size_t
utf8(unsigned long cp, uint8_t u[4])
{
	if (cp < 0x80) {
		u[0] = (uint8_t)cp;
		return 1;
	}
	if (cp < 0x800) {
		u[0] = (uint8_t)(0xc0 | cp >> 6);
		u[1] = (uint8_t)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		u[0] = (uint8_t)(0xe0 | cp >> 12);
		u[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3f));
		u[2] = (uint8_t)(0x80 | (cp & 0x3f));
		return 3;
	}
	u[0] = (uint8_t)(0xf0 | cp >> 18);
	u[1] = (uint8_t)(0x80 | (cp >> 12 & 0x3f));
	u[2] = (uint8_t)(0x80 | (cp >> 6 & 0x3f));
	u[3] = (uint8_t)(0x80 | (cp & 0x3f));
	return 4;
}

/*
 * A "\uXXXX" escape (two for a surrogate pair) at p standing for the next
 * secret bytes s[0..rem): the input length, with *used set to the secret
 * bytes covered; 0 when it does not. Reads at most 6 bytes per secret byte
 * covered, 6 when it fails: the pair's second half is only read when 4
 * secret bytes remain for it.
 */
static size_t
json_u(const uint8_t *s, size_t rem, const uint8_t *p, size_t avail, size_t *used)
{
	long cp, lo;
	size_t in = 6, n;
	uint8_t u[4];

	if (avail < 6 || (cp = hex4(p + 2)) < 0)
		return 0;
	if (cp >= 0xd800 && cp <= 0xdbff) {
		if (rem < 4 || avail < 12 || p[6] != '\\' || p[7] != 'u' ||
		    (lo = hex4(p + 8)) < 0xdc00 || lo > 0xdfff)
			return 0;
		cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
		in = 12;
	} else if (cp >= 0xdc00 && cp <= 0xdfff) {
		return 0;
	}
	if (cp <= 0xff && s[0] == cp) {
		*used = 1;
		return in;
	}
	if (cp < 0x80)
		return 0;
	n = utf8((unsigned long)cp, u);
	if (n > rem || memcmp(u, s, n) != 0)
		return 0;
	*used = n;
	return in;
}

/* Input length of the decoded form of s[0..L) at p, or 0. */
static size_t
try_dec(const uint8_t *s, size_t L, const uint8_t *p, size_t avail)
{
	size_t i = 0, j = 0, used, n;

	while (i < L) {
		uint8_t c;

		if (j >= avail)
			return 0;
		c = p[j];
		/*
		 * An escape is taken when it gives the expected byte; else the
		 * introducer may still be that byte itself. Deciding locally
		 * keeps the scan linear; see scrub.h for the one mix it misses.
		 */
		if (c == '%' && avail - j >= 3) {
			int h = hexv(p[j + 1]), l = hexv(p[j + 2]);

			if (h >= 0 && l >= 0 && (h << 4 | l) == s[i]) {
				i++;
				j += 3;
				continue;
			}
		} else if (c == '\\' && avail - j >= 2) {
			int v = json_short(p[j + 1]);

			if (v >= 0 && v == s[i]) {
				i++;
				j += 2;
				continue;
			}
			if (p[j + 1] == 'u' &&
			    (n = json_u(s + i, L - i, p + j, avail - j, &used)) > 0) {
				i += used;
				j += n;
				continue;
			}
		}
		if (c == s[i] || (c == '+' && s[i] == ' ')) {
			i++;
			j++;
			continue;
		}
		return 0;
	}
	return j;
}

/*
 * An escape standing for a base64 character at p: its value + 1, with its
 * length in *w; 0 when there is none. Only '+' and '/' are written so by
 * encoders: "\/" (PHP's json_encode by default, others as an option),
 * "\u002B" (.NET's System.Text.Json by default) or "\u002f", and "%2B",
 * "%2F" (base64 in a URL or a form body); hex in either case. Reads at most
 * SPELL_MAX bytes.
 */
static unsigned
b64_escape(const uint8_t *p, size_t avail, size_t *w)
{
	const uint8_t *h;

	if (p[0] == '\\' && avail >= 2 && p[1] == '/') {
		*w = 2;
		return 64;
	}
	if (p[0] == '\\' && avail >= 6 && p[1] == 'u' && p[2] == '0' && p[3] == '0') {
		h = p + 4;
		*w = 6;
	} else if (p[0] == '%' && avail >= 3) {
		h = p + 1;
		*w = 3;
	} else {
		return 0;
	}
	if (h[0] != '2')
		return 0;
	switch (h[1] | 0x20) {
	case 'b':
		return 63;
	case 'f':
		return 64;
	}
	return 0;
}

/* The base64 character spelled at p (avail > 0) as value + 1, or 0; its length in *w. */
static unsigned
b64_spell(const struct scrub_set *set, const uint8_t *p, size_t avail, size_t *w)
{
	unsigned v = set->b64[p[0]];

	if (v != 0) {
		*w = 1;
		return v;
	}
	return b64_escape(p, avail, w);
}

/* Input length of n base64 characters spelled at p that were matched. */
static size_t
b64_span(const struct scrub_set *set, const uint8_t *p, size_t avail, size_t n)
{
	size_t j = 0, w = 0;

	while (n-- > 0) {
		b64_spell(set, p + j, avail - j, &w);
		j += w;
	}
	return j;
}

static size_t
try_b64(const struct scrub_set *set, const struct pat *pt, const uint8_t *p, size_t avail)
{
	const uint8_t *core = set->mem->data + pt->off;
	size_t j = 0, w;

	for (size_t k = 0; k < pt->len; k++) {
		unsigned v;

		if (j >= avail)
			return 0;
		if ((v = set->b64[p[j]]) != 0)
			w = 1;
		else if (core[k] < 62 || (v = b64_escape(p + j, avail - j, &w)) == 0)
			return 0;
		if (v != core[k] + 1u)
			return 0;
		j += w;
	}
	/* The partial char after the core carries secret bits: take it along. */
	if (pt->tail != NO_EDGE && j < avail && b64_spell(set, p + j, avail - j, &w) != 0)
		return j + w;
	return j;
}

static size_t
try_pat(const struct scrub_set *set, size_t pi, const uint8_t *p, size_t avail)
{
	const struct pat *pt = &set->pat[pi];
	const uint8_t *s = set->mem->data + pt->off;

	switch (pt->kind) {
	case K_RAW:
		return avail >= pt->len && memcmp(p, s, pt->len) == 0 ? pt->len : 0;
	case K_DEC:
		return try_dec(s, pt->len, p, avail);
	default:
		return try_b64(set, pt, p, avail);
	}
}

static void
consider(const struct scrub_set *set, size_t pi, const uint8_t *p, size_t avail, size_t *best,
         size_t *blen)
{
	size_t m = try_pat(set, pi, p, avail);

	/* Longest wins; on a tie the earlier pattern, i.e. the earlier key. */
	if (m > *blen || (m > 0 && m == *blen && pi < *best)) {
		*best = pi;
		*blen = m;
	}
}

static void
consider_dec(const struct scrub_set *set, unsigned v, const uint8_t *p, size_t avail, size_t *best,
             size_t *blen)
{
	for (uint32_t k = set->dec_off[v]; k < set->dec_off[v + 1]; k++)
		consider(set, set->dec[k], p, avail, best, blen);
}

/* An escape at p stands for '/' (slash) or '+': base64 patterns starting with it. */
static void
consider_esc(const struct scrub_set *set, int slash, const uint8_t *p, size_t avail, size_t *best,
             size_t *blen)
{
	for (uint32_t k = set->esc_off[slash]; k < set->esc_off[slash + 1]; k++)
		consider(set, set->esc[k], p, avail, best, blen);
}

/*
 * The longest match at p (avail bytes: at least reach, or all that is
 * left of the input), as a pattern index with its length, or NONE.
 */
static size_t
match_at(const struct scrub_set *set, const uint8_t *p, size_t avail, size_t *mlen)
{
	size_t best = NONE, blen = 0;
	unsigned b = p[0];

	for (uint32_t k = set->lit_off[b]; k < set->lit_off[b + 1]; k++)
		consider(set, set->lit[k], p, avail, &best, &blen);
	/* Escapes: look the decoded byte up once instead of trying every key. */
	if (b == '%' && avail >= 3) {
		int h = hexv(p[1]), l = hexv(p[2]);

		if (h >= 0 && l >= 0)
			consider_dec(set, (unsigned)(h << 4 | l), p, avail, &best, &blen);
		/* "%2B", "%2F": base64 too (see b64_escape). */
		if (h == 2 && (l == 0xb || l == 0xf))
			consider_esc(set, l == 0xf, p, avail, &best, &blen);
	} else if (b == '\\' && avail >= 2) {
		int v = json_short(p[1]);
		long cp;

		if (v >= 0) {
			consider_dec(set, (unsigned)v, p, avail, &best, &blen);
			if (v == '/')
				consider_esc(set, 1, p, avail, &best, &blen);
		} else if (p[1] == 'u' && avail >= 6 && (cp = hex4(p + 2)) >= 0) {
			uint8_t u[4];

			if (cp <= 0xff)
				consider_dec(set, (unsigned)cp, p, avail, &best, &blen);
			if (cp == '+' || cp == '/')
				consider_esc(set, cp == '/', p, avail, &best, &blen);
			if (cp >= 0xd800 && cp <= 0xdbff)
				cp = 0x10000 + ((cp - 0xd800) << 10); /* lead byte only */
			if (cp >= 0x80) {
				utf8((unsigned long)cp, u);
				consider_dec(set, u[0], p, avail, &best, &blen);
			}
		}
	}
	*mlen = blen;
	return best;
}

/* ---- building a set ---- */

/*
 * Bytes the spelling of base64 value v can begin with: the character in
 * the standard and the URL-safe alphabet (the same byte twice below 62),
 * then for '+' and '/' the escapes' '\\' and '%' (see b64_escape).
 */
static size_t
b64_starts(uint8_t v, uint8_t b[4])
{
	b[0] = (uint8_t)b64_std[v];
	b[1] = (uint8_t)b64_url[v];
	if (v < 62)
		return 2;
	b[2] = '\\';
	b[3] = '%';
	return 4;
}

static void
pair_set(struct scrub_set *set, unsigned b0, unsigned b1)
{
	unsigned x = b0 | b1 << 8;

	set->pairs[x >> 3] |= (uint8_t)(1u << (x & 7));
	set->first[b0 >> 3] |= (uint8_t)(1u << (b0 & 7));
}

static void
pair_any(struct scrub_set *set, unsigned b0)
{
	for (unsigned b1 = 0; b1 < 256; b1++)
		pair_set(set, b0, b1);
}

/* Every byte that can start the spelling of secret byte c in the decoded form. */
static void
pair_unit_starts(struct scrub_set *set, unsigned b0, uint8_t c)
{
	pair_set(set, b0, c);
	pair_set(set, b0, '%');
	pair_set(set, b0, '\\');
	if (c == ' ')
		pair_set(set, b0, '+');
}

/*
 * Mark every pair of bytes a match of pattern pi can begin with. A missing
 * pair would be a missed secret, so this errs wide.
 */
static void
pairs_for(struct scrub_set *set, const struct pat *pt)
{
	const uint8_t *s = set->mem->data + pt->off;
	int e;

	if (pt->kind == K_B64) {
		uint8_t b0[4], b1[4];
		size_t n0 = b64_starts(s[0], b0), n1 = b64_starts(s[1], b1);

		/* b0[0..1]: the character itself; then the escapes' first bytes. */
		for (size_t x = 0; x < 2; x++)
			for (size_t y = 0; y < n1; y++)
				pair_set(set, b0[x], b1[y]);
		if (n0 > 2) {
			pair_set(set, '\\', 'u');
			pair_set(set, '%', '2');
			if (s[0] == 63)
				pair_set(set, '\\', '/');
		}
		return;
	}
	if (pt->len == 1) {
		pair_any(set, s[0]);
		if (pt->kind == K_DEC && s[0] == ' ')
			pair_any(set, '+');
	} else if (pt->kind == K_RAW) {
		pair_set(set, s[0], s[1]);
	} else {
		pair_unit_starts(set, s[0], s[1]);
		if (s[0] == ' ')
			pair_unit_starts(set, '+', s[1]);
	}
	if (pt->kind != K_DEC)
		return;
	pair_set(set, '%', (uint8_t)hexu[s[0] >> 4]);
	pair_set(set, '%', (uint8_t)hexl[s[0] >> 4]);
	if ((e = s[0]) == '"' || e == '\\' || e == '/')
		pair_set(set, '\\', (uint8_t)e);
	else if (e == 8 || e == 12 || e == 9)
		pair_set(set, '\\', e == 8 ? 'b' : e == 12 ? 'f' : 't');
	pair_set(set, '\\', 'u');
}

/*
 * Bytes a match of pt can begin with that select it by bucket (at most 2).
 * A base64 pattern beginning with an escape is found by what the escape
 * stands for instead (set->esc), as a decoded one is (set->dec).
 */
static size_t
lit_bytes(const struct scrub_set *set, const struct pat *pt, uint8_t b[2])
{
	const uint8_t *s = set->mem->data + pt->off;

	b[0] = s[0];
	if (pt->kind == K_RAW)
		return 1;
	if (pt->kind == K_DEC)
		return s[0] == ' ' ? (b[1] = '+', 2) : 1;
	b[0] = (uint8_t)b64_std[s[0]];
	b[1] = (uint8_t)b64_url[s[0]];
	return b[0] == b[1] ? 1 : 2;
}

/* Counting sort of the patterns into their first-byte buckets. */
static void
buckets(struct scrub_set *set)
{
	uint32_t fill[256];
	uint8_t b[2];
	size_t n;

	memset(set->lit_off, 0, sizeof(set->lit_off));
	memset(set->dec_off, 0, sizeof(set->dec_off));
	memset(set->esc_off, 0, sizeof(set->esc_off));
	for (size_t i = 0; i < set->npat; i++) {
		const struct pat *pt = &set->pat[i];

		n = lit_bytes(set, pt, b);
		for (size_t k = 0; k < n; k++)
			set->lit_off[b[k] + 1]++;
		if (pt->kind == K_DEC)
			set->dec_off[set->mem->data[pt->off] + 1]++;
		if (pt->kind == K_B64 && set->mem->data[pt->off] >= 62)
			set->esc_off[set->mem->data[pt->off] - 61]++;
	}
	set->esc_off[2] += set->esc_off[1];
	for (int v = 0; v < 256; v++) {
		set->lit_off[v + 1] += set->lit_off[v];
		set->dec_off[v + 1] += set->dec_off[v];
	}
	memcpy(fill, set->lit_off, sizeof(fill));
	for (size_t i = 0; i < set->npat; i++) {
		n = lit_bytes(set, &set->pat[i], b);
		for (size_t k = 0; k < n; k++)
			set->lit[fill[b[k]]++] = (uint16_t)i;
	}
	memcpy(fill, set->dec_off, sizeof(fill));
	for (size_t i = 0; i < set->npat; i++)
		if (set->pat[i].kind == K_DEC)
			set->dec[fill[set->mem->data[set->pat[i].off]]++] = (uint16_t)i;
	fill[0] = set->esc_off[0];
	fill[1] = set->esc_off[1];
	for (size_t i = 0; i < set->npat; i++)
		if (set->pat[i].kind == K_B64 && set->mem->data[set->pat[i].off] >= 62)
			set->esc[fill[set->mem->data[set->pat[i].off] - 62]++] = (uint16_t)i;
	sodium_memzero(fill, sizeof(fill));
}

/*
 * The base64 core of s for alignment k (k bytes before it, modulo 3): the
 * values of the characters made of secret bits only, written at
 * set->mem; z is scratch of at least k + L + 2 bytes. Returns the core's
 * length (0 when shorter than SCRUB_B64_CORE_MIN, nothing written) and the
 * keep-masks of its edge characters.
 */
static size_t
b64_core(struct scrub_set *set, struct secbuf *z, const uint8_t *s, size_t L, unsigned k,
         uint8_t *head, uint8_t *tail)
{
	size_t a = (8 * k + 5) / 6, e = 8 * (k + L) / 6, sb = 8 * (k + L) - 6 * e;
	uint8_t *out = set->mem->data + set->mem->len;

	if (e - a < SCRUB_B64_CORE_MIN || e - a > set->mem->cap - set->mem->len)
		return 0;
	secbuf_clear(z);
	memcpy(z->data + k, s, L);
	for (size_t j = a; j < e; j++) {
		size_t q = 6 * j / 8, o = 6 * j % 8;
		unsigned w = (unsigned)z->data[q] << 8 | z->data[q + 1];

		out[j - a] = (uint8_t)(w >> (10 - o) & 0x3f);
	}
	secbuf_clear(z);
	/* k = 1: the char before holds 2 bits of the neighbour and 4 of S; k = 2: 4 and 2. */
	*head = k == 0 ? NO_EDGE : k == 1 ? 0x30 : 0x3c;
	/* sb secret bits on top of the char after, the neighbour's below. */
	*tail = sb == 0 ? NO_EDGE : (uint8_t)((1u << (6 - sb)) - 1);
	set->mem->len += e - a;
	return e - a;
}

static void
add_pat(struct scrub_set *set, uint8_t kind, size_t key, size_t off, size_t len, uint8_t head,
        uint8_t tail)
{
	struct pat *pt = &set->pat[set->npat++];

	pt->off = (uint32_t)off;
	pt->len = (uint32_t)len;
	pt->key = (uint16_t)key;
	pt->kind = kind;
	pt->head = head;
	pt->tail = tail;
	/*
	 * What a match may read depends on the secret's length only, never on
	 * its bytes: the amount a stream holds back must not tell the child
	 * anything more (see scrub.h).
	 */
	if (kind == K_B64 && SPELL_MAX * ((size_t)len + (tail != NO_EDGE)) > set->reach)
		set->reach = SPELL_MAX * ((size_t)len + (tail != NO_EDGE));
	else if (kind != K_B64 && DEC_PER_BYTE * len > set->reach)
		set->reach = DEC_PER_BYTE * len;
}

static int
add_key(struct scrub_set *set, struct secbuf *z, size_t key, const struct inject_key *k)
{
	const struct secbuf *s = k->secret;
	size_t off = set->mem->len, phlen;
	uint8_t head, tail;
	int r;

	if ((r = vault_check_secret(s)) != 0)
		return r;
	if ((r = inject_placeholder_check(k->placeholder, &phlen)) != 0)
		return r;
	memcpy(set->ph + key * (INJECT_PLACEHOLDER_MAX + 1), k->placeholder, phlen + 1);
	set->phlen[key] = (uint8_t)phlen;
	if ((r = secbuf_append(set->mem, s->data, s->len)) != 0)
		return r;
	/*
	 * The decoded form reads the raw spelling too, except where a '%' or
	 * '\' in S would be taken for an escape: only then is raw its own
	 * pattern.
	 */
	if (memchr(s->data, '%', s->len) != NULL || memchr(s->data, '\\', s->len) != NULL)
		add_pat(set, K_RAW, key, off, s->len, NO_EDGE, NO_EDGE);
	add_pat(set, K_DEC, key, off, s->len, NO_EDGE, NO_EDGE);
	for (unsigned a = 0; a < 3; a++) {
		size_t coff = set->mem->len,
		       clen = b64_core(set, z, s->data, s->len, a, &head, &tail);

		if (clen > 0)
			add_pat(set, K_B64, key, coff, clen, head, tail);
	}
	return VERR_OK;
}

int
scrub_set_new(const struct inject_key *keys, size_t nkeys, struct scrub_set **out)
{
	struct scrub_set *set = NULL;
	struct secbuf *z = NULL;
	size_t memcap = 1, size, o;
	uint8_t *base;
	int r;

	if (out == NULL)
		return VERR_INVALID;
	*out = NULL;
	if (keys == NULL && nkeys > 0)
		return VERR_INVALID;
	if (nkeys > INJECT_KEYS_MAX)
		return VERR_TOO_MANY;
	for (size_t i = 0; i < nkeys; i++) {
		if ((r = vault_check_secret(keys[i].secret)) != 0)
			return r;
		/* A secret, then three cores of at most 4 (L + 2) / 3 values each. */
		memcap += keys[i].secret->len * 5 + 12;
	}
	if (sodium_init() < 0)
		return VERR_CRYPTO;
	/* One block: the struct, then its arrays, each start kept aligned. */
	size = round16(sizeof(*set));
	size += round16(PATS_PER_KEY * nkeys * sizeof(struct pat));
	size += round16(LIT_PER_KEY * nkeys * sizeof(uint16_t));
	size += round16(nkeys * sizeof(uint16_t));
	size += round16(ESC_PER_KEY * nkeys * sizeof(uint16_t));
	size += round16(nkeys);
	size += round16(nkeys * (INJECT_PLACEHOLDER_MAX + 1));
	if ((base = sodium_malloc(size)) == NULL)
		return VERR_NOMEM;
	sodium_memzero(base, size);
	set = (struct scrub_set *)(void *)base;
	o = round16(sizeof(*set));
	set->pat = (struct pat *)(void *)(base + o);
	o += round16(PATS_PER_KEY * nkeys * sizeof(struct pat));
	set->lit = (uint16_t *)(void *)(base + o);
	o += round16(LIT_PER_KEY * nkeys * sizeof(uint16_t));
	set->dec = (uint16_t *)(void *)(base + o);
	o += round16(nkeys * sizeof(uint16_t));
	set->esc = (uint16_t *)(void *)(base + o);
	o += round16(ESC_PER_KEY * nkeys * sizeof(uint16_t));
	set->phlen = base + o;
	o += round16(nkeys);
	set->ph = (char *)(base + o);
	set->nkeys = nkeys;
	for (int c = 0; c < 64; c++) {
		set->b64[(uint8_t)b64_std[c]] = (uint8_t)(c + 1);
		set->b64[(uint8_t)b64_url[c]] = (uint8_t)(c + 1);
	}
	if ((r = secbuf_new(memcap, &set->mem)) != 0 ||
	    (r = secbuf_new(VAULT_SECRET_MAX + 4, &z)) != 0)
		goto out;
	for (size_t i = 0; i < nkeys; i++)
		if ((r = add_key(set, z, i, &keys[i])) != 0)
			goto out;
	for (size_t i = 0; i < set->npat; i++)
		pairs_for(set, &set->pat[i]);
	buckets(set);
	if (set->reach > 0)
		set->maxlen = set->reach + SPELL_MAX - 1;
	*out = set;
	set = NULL;
	r = VERR_OK;
out:
	secbuf_free(z);
	scrub_set_free(set);
	return r;
}

void
scrub_set_free(struct scrub_set *set)
{
	if (set == NULL)
		return;
	secbuf_free(set->mem);
	sodium_free(set); /* wipes the tables and placeholders */
}

size_t
scrub_set_maxlen(const struct scrub_set *set)
{
	return set != NULL ? set->maxlen : 0;
}

size_t
scrub_set_nkeys(const struct scrub_set *set)
{
	return set != NULL ? set->nkeys : 0;
}

/* ---- scanning ---- */

struct scan {
	const struct scrub_set *set;
	const uint8_t *buf;
	size_t n; /* bytes at buf: the end of the input, or at least reach past limit */
	size_t r; /* first byte not yet passed on */
	/*
	 * NO_EDGE, or the base64 character spelled at buf[r] is the trailing
	 * edge of a base64 match, to be sent with only these bits kept. It is
	 * held rather than sent at once because a second match may start
	 * right after it, and then its kept bits are that match's secret bits:
	 * both masks apply.
	 */
	uint8_t rkeep;
	uint64_t *counts;
	uint64_t total;
	scrub_out_fn out;
	void *arg;
};

static int
emit(struct scan *sc, const void *p, size_t len)
{
	return len == 0 ? 0 : sc->out(sc->arg, p, len);
}

/*
 * Pass on the base64 character spelled at buf[at] with only the bits in
 * keep, as one character (an escape too: masked values stay below 62, the
 * same character in both alphabets and never escaped). Returns the
 * spelling's length through *w.
 */
static int
emit_masked(struct scan *sc, size_t at, uint8_t keep, size_t *w)
{
	unsigned v = b64_spell(sc->set, sc->buf + at, sc->n - at, w);
	char e = b64_std[(v - 1) & keep];

	return emit(sc, &e, 1);
}

/*
 * Pass on buf[r..end) unchanged but for a held edge; r becomes end, or
 * the end of the held edge's spelling when that is further.
 */
static int
flush_run(struct scan *sc, size_t end)
{
	size_t w;
	int r;

	if (sc->r < end && sc->rkeep != NO_EDGE) {
		if ((r = emit_masked(sc, sc->r, sc->rkeep, &w)) != 0)
			return r;
		sc->r += w;
		sc->rkeep = NO_EDGE;
	}
	if (sc->r >= end)
		return VERR_OK;
	r = emit(sc, sc->buf + sc->r, end - sc->r);
	sc->r = end;
	return r;
}

/*
 * Where the spelling of the base64 character just before position i
 * starts, when it is all unsent input; NONE when there is none. An escape
 * is preferred to its last byte read alone ("%2B" is a '+', not a 'B'), as
 * the matcher reads it. No escape has '\\' or '%' after its first byte, so
 * this cannot start inside a held edge's spelling.
 */
static size_t
head_at(const struct scan *sc, size_t i)
{
	static const uint8_t widths[] = {SPELL_MAX, 3, 2, 1};
	size_t w;

	for (size_t k = 0; k < sizeof(widths); k++) {
		size_t hw = widths[k];

		if (i - sc->r >= hw && b64_spell(sc->set, sc->buf + i - hw, hw, &w) != 0 && w == hw)
			return i - hw;
	}
	return NONE;
}

/* Pass on the pattern pi's replacement for the m bytes at i. */
static int
replace(struct scan *sc, size_t pi, size_t i, size_t m)
{
	static const char fill[] =
	        "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
	const struct scrub_set *set = sc->set;
	const struct pat *pt = &set->pat[pi];
	size_t hs, cin, w;
	uint8_t keep;
	int r;

	if (pt->kind != K_B64) {
		if ((r = flush_run(sc, i)) != 0)
			return r;
		sc->r = i + m;
		return emit(sc, set->ph + (size_t)pt->key * (INJECT_PLACEHOLDER_MAX + 1),
		            set->phlen[pt->key]);
	}
	/* The char before the core, if unsent input and base64, keeps only the neighbour's bits. */
	if (pt->head != NO_EDGE && (hs = head_at(sc, i)) != NONE) {
		keep = pt->head;
		if (sc->r == hs && sc->rkeep != NO_EDGE)
			keep &= sc->rkeep;
		if ((r = flush_run(sc, hs)) != 0)
			return r;
		if ((r = emit_masked(sc, hs, keep, &w)) != 0)
			return r;
		sc->rkeep = NO_EDGE;
	} else if ((r = flush_run(sc, i)) != 0) {
		return r;
	}
	for (size_t left = pt->len; left > 0;) {
		size_t k = left < sizeof(fill) - 1 ? left : sizeof(fill) - 1;

		if ((r = emit(sc, fill, k)) != 0)
			return r;
		left -= k;
	}
	/* The core's input is longer than pt->len where it holds escapes. */
	cin = b64_span(set, sc->buf + i, sc->n - i, pt->len);
	sc->r = i + cin;
	if (m > cin)
		sc->rkeep = pt->tail; /* the trailing edge, held: see struct scan */
	return VERR_OK;
}

static int
pair_hit(const struct scrub_set *set, const uint8_t *p)
{
	unsigned x = p[0] | (unsigned)p[1] << 8;

	return set->pairs[x >> 3] >> (x & 7) & 1;
}

/*
 * Decide positions from..limit-1 (each has at least reach bytes after it,
 * or is near the true end): pass on their output, replacements included,
 * except for unmatched bytes from sc->r on. *next: the first position not
 * decided, >= limit (a match may reach past limit).
 */
static int
scan_run(struct scan *sc, size_t from, size_t limit, size_t *next)
{
	const struct scrub_set *set = sc->set;
	const uint8_t *buf = sc->buf;
	size_t i = from, m, pi;
	int r;

	while (i < limit) {
		size_t stop = limit < sc->n - 1 ? limit : sc->n - 1;

		while (i < stop && !pair_hit(set, buf + i))
			i++;
		if (i >= limit)
			break;
		/* i == stop < limit: the input's last byte, with no pair to test. */
		if (i == stop && !(set->first[buf[i] >> 3] >> (buf[i] & 7) & 1)) {
			i++;
			continue;
		}
		if ((pi = match_at(set, buf + i, sc->n - i, &m)) == NONE) {
			i++;
			continue;
		}
		if ((r = replace(sc, pi, i, m)) != 0)
			return r;
		if (sc->counts != NULL)
			sc->counts[set->pat[pi].key]++;
		sc->total++;
		i += m;
	}
	*next = i;
	return VERR_OK;
}

int
scrub_buffer(const struct scrub_set *set, const void *in, size_t len, scrub_out_fn out, void *arg,
             uint64_t *counts)
{
	struct scan sc;
	size_t next;
	int r;

	if (set == NULL || out == NULL || (in == NULL && len > 0))
		return VERR_INVALID;
	if (counts != NULL)
		memset(counts, 0, set->nkeys * sizeof(*counts));
	if (len == 0)
		return VERR_OK;
	if (set->npat == 0)
		return out(arg, in, len);
	memset(&sc, 0, sizeof(sc));
	sc.set = set;
	sc.buf = in;
	sc.n = len;
	sc.out = out;
	sc.arg = arg;
	sc.counts = counts;
	sc.rkeep = NO_EDGE;
	if ((r = scan_run(&sc, 0, len, &next)) != 0)
		return r;
	return flush_run(&sc, len);
}

struct dup {
	char *p;
	size_t len, cap;
};

static int
dup_out(void *arg, const void *p, size_t len)
{
	struct dup *d = arg;

	if (len >= d->cap - d->len) {
		size_t cap = d->cap * 2 > d->len + len + 1 ? d->cap * 2 : d->len + len + 1;
		char *np = realloc(d->p, cap);

		if (np == NULL)
			return VERR_NOMEM;
		d->p = np;
		d->cap = cap;
	}
	memcpy(d->p + d->len, p, len);
	d->len += len;
	return VERR_OK;
}

int
scrub_buffer_dup(const struct scrub_set *set, const void *in, size_t len, char **out,
                 size_t *outlen, uint64_t *counts)
{
	struct dup d = {NULL, 0, 0};
	int r;

	if (out != NULL)
		*out = NULL;
	if (outlen != NULL)
		*outlen = 0;
	if (out == NULL || outlen == NULL)
		return VERR_INVALID;
	d.cap = len + 64;
	if ((d.p = malloc(d.cap)) == NULL)
		return VERR_NOMEM;
	if ((r = scrub_buffer(set, in, len, dup_out, &d, counts)) != 0) {
		free(d.p);
		return r;
	}
	d.p[d.len] = '\0';
	*out = d.p;
	*outlen = d.len;
	return VERR_OK;
}

/* ---- streams ---- */

int
scrub_stream_new(const struct scrub_set *set, struct scrub_stream **out)
{
	struct scrub_stream *st;
	struct secbuf *self;
	size_t size, cap;
	int r;

	if (out == NULL)
		return VERR_INVALID;
	*out = NULL;
	if (set == NULL)
		return VERR_INVALID;
	size = round16(sizeof(*st)) + round16(set->nkeys * sizeof(uint64_t));
	/* A secbuf (zeroed, and reused from the pool where there is one). */
	if ((r = secbuf_new(size, &self)) != 0)
		return r;
	st = (struct scrub_stream *)(void *)self->data;
	st->self = self;
	st->set = set;
	st->rkeep = NO_EDGE;
	st->counts = (uint64_t *)(void *)((uint8_t *)st + round16(sizeof(*st)));
	/* Room for what is held back plus at least one chunk of new input. */
	cap = set->maxlen + (set->maxlen > CHUNK ? set->maxlen : CHUNK);
	if (set->npat > 0 && (r = secbuf_new(cap, &st->w)) != 0) {
		secbuf_free(self);
		return r;
	}
	*out = st;
	return VERR_OK;
}

void
scrub_stream_free(struct scrub_stream *st)
{
	if (st == NULL)
		return;
	secbuf_free(st->w);
	secbuf_free(st->self); /* wipes the struct too */
}

static void
stream_break(struct scrub_stream *st)
{
	st->broken = 1;
	if (st->w != NULL)
		secbuf_clear(st->w);
	st->start = st->len = st->pos = 0;
	st->rkeep = NO_EDGE;
}

/*
 * Scan what the buffer holds. Not final: decide every position that has
 * reach bytes after it, then keep the rest plus the SPELL_MAX - 1 bytes
 * before it that are still unsent (a base64 match starting next may need
 * to mask the character spelled there). The amount kept is thus fixed (see
 * scrub.h for why). Final: decide and send all.
 */
static int
advance(struct scrub_stream *st, int final, scrub_out_fn out, void *arg)
{
	const struct scrub_set *set = st->set;
	uint8_t *w = st->w->data + st->start;
	size_t n = st->len - st->start, limit, next = st->pos, keep;
	struct scan sc;
	int r;

	if (final)
		limit = n;
	else
		limit = n >= set->reach ? n - set->reach + 1 : 0;
	if (limit <= st->pos && !final)
		return VERR_OK;
	memset(&sc, 0, sizeof(sc));
	sc.set = set;
	sc.buf = w;
	sc.n = n;
	sc.out = out;
	sc.arg = arg;
	sc.counts = st->counts;
	sc.rkeep = st->rkeep;
	if (n > 0 && (r = scan_run(&sc, st->pos, limit, &next)) != 0)
		return r;
	st->total += sc.total;
	if (final) {
		r = flush_run(&sc, n);
		secbuf_clear(st->w);
		st->start = st->len = st->pos = 0;
		st->rkeep = NO_EDGE;
		return r;
	}
	keep = next > SPELL_MAX ? next - SPELL_MAX : 0;
	if (keep < sc.r)
		keep = sc.r;
	if ((r = flush_run(&sc, keep)) != 0)
		return r;
	/*
	 * A held edge that ends before next is sent whole (no match can take
	 * it as its head any more), possibly past keep.
	 */
	keep = sc.r;
	st->start += keep;
	st->pos = next - keep;
	st->rkeep = sc.rkeep;
	return VERR_OK;
}

/*
 * Move what is held to the front, only when the buffer is full: moving it
 * on every feed would cost maxlen bytes per call, which an upstream
 * sending one-byte records could turn into a lot of work.
 */
static void
compact(struct scrub_stream *st)
{
	size_t live = st->len - st->start;

	memmove(st->w->data, st->w->data + st->start, live);
	/* What was passed over may be a matched secret: leave no copy behind. */
	sodium_memzero(st->w->data + live, st->len - live);
	st->start = 0;
	st->len = live;
}

int
scrub_stream_feed(struct scrub_stream *st, const void *in, size_t len, scrub_out_fn out, void *arg)
{
	const uint8_t *p = in;
	int r;

	if (st == NULL || out == NULL || (in == NULL && len > 0) || st->broken)
		return VERR_INVALID;
	if (len == 0)
		return VERR_OK;
	if (st->set->npat == 0) {
		if ((r = out(arg, in, len)) != 0)
			stream_break(st);
		return r;
	}
	while (len > 0) {
		size_t k;

		if (st->len == st->w->cap)
			compact(st);
		k = st->w->cap - st->len;
		if (k > len)
			k = len;
		memcpy(st->w->data + st->len, p, k);
		st->len += k;
		st->w->len = st->len;
		p += k;
		len -= k;
		if ((r = advance(st, 0, out, arg)) != 0) {
			stream_break(st);
			return r;
		}
	}
	return VERR_OK;
}

int
scrub_stream_finish(struct scrub_stream *st, scrub_out_fn out, void *arg)
{
	int r;

	if (st == NULL || out == NULL || st->broken)
		return VERR_INVALID;
	if (st->set->npat == 0)
		return VERR_OK;
	if (st->len == st->start) {
		/* Nothing held, but what was passed over may still be in there. */
		secbuf_clear(st->w);
		st->start = st->len = st->pos = 0;
		st->rkeep = NO_EDGE;
		return VERR_OK;
	}
	if ((r = advance(st, 1, out, arg)) != 0)
		stream_break(st);
	return r;
}

size_t
scrub_stream_held(const struct scrub_stream *st)
{
	return st != NULL ? st->len - st->start : 0;
}

uint64_t
scrub_stream_count(const struct scrub_stream *st, size_t key)
{
	return st != NULL && key < st->set->nkeys ? st->counts[key] : 0;
}

uint64_t
scrub_stream_total(const struct scrub_stream *st)
{
	return st != NULL ? st->total : 0;
}
