#include "inject.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "verr.h"

#define NONE ((size_t)-1)

static const char authorization[] = "Authorization";

/* Per-key state for one inject_apply call. */
struct kstate {
	uint8_t apply;  /* bound here, and TLS or allow_http */
	uint8_t result; /* enum inject_result */
	uint8_t hdr_ok; /* the secret may stand raw in a header value */
	uint8_t placed; /* query key: its parameter has been written in this pass */
	size_t phlen;
	size_t first;           /* set key: index of the first client header it replaces */
	const char *set_name;   /* set key: header name, else NULL */
	size_t set_name_len;    /* also the parameter length for query keys */
	const char *set_prefix; /* set key: value = prefix + body */
	const struct secbuf *set_body;
	struct secbuf *owned; /* body built here (basic), freed at the end */
};

struct ctx {
	const struct inject_request *req;
	const struct inject_key *keys;
	size_t nkeys;
	struct kstate *ks;
	size_t nph;    /* applicable placeholder keys */
	size_t nquery; /* applicable query keys */
};

/*
 * The output is built twice by the same code: once with b == NULL to
 * measure, then into a secbuf of exactly that size. Every length is checked
 * against INJECT_HEAD_MAX before it is added, so nothing can overflow, and
 * the second pass cannot write past the buffer even if the passes differed.
 */
struct emit {
	struct secbuf *b;
	size_t len;
	int err;
};

static int
room(struct emit *e, size_t n)
{
	if (e->err != 0)
		return 0;
	if (n > INJECT_HEAD_MAX - e->len || (e->b != NULL && n > e->b->cap - e->len)) {
		e->err = VERR_TOO_LARGE;
		return 0;
	}
	return 1;
}

static void
put(struct emit *e, const void *p, size_t n)
{
	if (n == 0 || !room(e, n))
		return;
	if (e->b != NULL) {
		memcpy(e->b->data + e->len, p, n);
		e->b->len = e->len + n;
	}
	e->len += n;
}

static void
put_str(struct emit *e, const char *s)
{
	put(e, s, strlen(s));
}

static int
is_unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '.' || c == '_' || c == '~';
}

/*
 * Percent-encode straight into the output: even one encoded byte of the
 * secret must not sit in an ordinary stack buffer.
 */
static void
put_pct(struct emit *e, const struct secbuf *s)
{
	static const char hex[] = "0123456789ABCDEF";

	for (size_t i = 0; i < s->len; i++) {
		unsigned char c = s->data[i];
		size_t n = is_unreserved(c) ? 1 : 3;

		if (!room(e, n))
			return;
		if (e->b != NULL) {
			unsigned char *w = e->b->data + e->len;

			if (n == 1) {
				w[0] = c;
			} else {
				w[0] = '%';
				w[1] = (unsigned char)hex[c >> 4];
				w[2] = (unsigned char)hex[c & 15];
			}
			e->b->len = e->len + n;
		}
		e->len += n;
	}
}

static int
ieq(const char *a, size_t alen, const char *b, size_t blen)
{
	if (alen != blen)
		return 0;
	for (size_t i = 0; i < alen; i++) {
		unsigned char x = (unsigned char)a[i], y = (unsigned char)b[i];

		if (x >= 'A' && x <= 'Z')
			x = (unsigned char)(x - 'A' + 'a');
		if (y >= 'A' && y <= 'Z')
			y = (unsigned char)(y - 'A' + 'a');
		if (x != y)
			return 0;
	}
	return 1;
}

static int
is_tchar(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* RFC 9110 field-value bytes: VCHAR, obs-text, SP and HTAB. */
static int
is_field_byte(unsigned char c)
{
	return c == '\t' || (c >= 0x20 && c != 0x7f);
}

static int
check_token(const char *p, size_t n)
{
	if (p == NULL || n == 0)
		return VERR_INVALID;
	for (size_t i = 0; i < n; i++)
		if (!is_tchar((unsigned char)p[i]))
			return VERR_INVALID;
	return VERR_OK;
}

/*
 * What we are handed was parsed strictly already; these checks only make
 * sure no slice can split a line of the head we write, whatever the caller.
 */
static int
check_header(const struct http_header *h)
{
	if (check_token(h->name, h->name_len) != 0 || (h->value == NULL && h->value_len > 0))
		return VERR_INVALID;
	for (size_t i = 0; i < h->value_len; i++)
		if (!is_field_byte((unsigned char)h->value[i]))
			return VERR_INVALID;
	return VERR_OK;
}

static int
check_request(const struct inject_request *r)
{
	int e;

	if (check_token(r->method, r->method_len) != 0 || r->target == NULL || r->target_len == 0 ||
	    (r->nheaders > 0 && r->headers == NULL) || (r->nextra > 0 && r->extra == NULL))
		return VERR_INVALID;
	for (size_t i = 0; i < r->target_len; i++) {
		unsigned char c = (unsigned char)r->target[i];

		if (c <= 0x20 || c == 0x7f)
			return VERR_INVALID;
	}
	for (size_t i = 0; i < r->nheaders; i++)
		if ((e = check_header(&r->headers[i])) != 0)
			return e;
	for (size_t i = 0; i < r->nextra; i++)
		if ((e = check_header(&r->extra[i])) != 0)
			return e;
	return VERR_OK;
}

/* The same rules as the vault, so a hand-made key cannot slip past them. */
static int
check_key(const struct inject_key *k, size_t *phlen)
{
	char spec[VAULT_INJECT_ARG_MAX + 16], arg[VAULT_INJECT_ARG_MAX + 1];
	const char *a = k->arg != NULL ? k->arg : "";
	uint8_t mode;
	int r;

	if ((r = vault_check_secret(k->secret)) != 0)
		return r;
	if ((r = inject_placeholder_check(k->placeholder, phlen)) != 0)
		return r;
	if ((k->nhosts > 0 && k->hosts == NULL) || k->allow_http > 1)
		return VERR_INVALID;
	if (strnlen(a, VAULT_INJECT_ARG_MAX + 1) > VAULT_INJECT_ARG_MAX ||
	    vault_format_inject(k->mode, a, spec, sizeof(spec)) != 0 ||
	    vault_parse_inject(spec, &mode, arg, sizeof(arg)) != 0 || mode != k->mode)
		return VERR_INVALID;
	return VERR_OK;
}

static int
bound(const struct inject_key *k, const struct hostspec *dest)
{
	for (size_t i = 0; i < k->nhosts; i++)
		if (hostspec_match(&k->hosts[i], dest))
			return 1;
	return 0;
}

static int
header_safe(const struct secbuf *s)
{
	for (size_t i = 0; i < s->len; i++)
		if (!is_field_byte(s->data[i]))
			return 0;
	return 1;
}

/* base64(user ":" secret), built only in sodium memory. */
static int
basic_body(const char *user, const struct secbuf *secret, struct secbuf **out)
{
	struct secbuf *creds = NULL, *b64 = NULL;
	size_t ulen = strlen(user), enclen;
	int r;

	*out = NULL;
	/* Both bounded by the vault limits: no overflow below. */
	if (ulen > VAULT_INJECT_ARG_MAX || secret->len > VAULT_SECRET_MAX)
		return VERR_TOO_LARGE;
	if ((r = secbuf_new(ulen + 1 + secret->len, &creds)) != 0 ||
	    (r = secbuf_append(creds, user, ulen)) != 0 ||
	    (r = secbuf_append(creds, ":", 1)) != 0 ||
	    (r = secbuf_append(creds, secret->data, secret->len)) != 0)
		goto out;
	enclen = sodium_base64_encoded_len(creds->len, sodium_base64_VARIANT_ORIGINAL);
	if ((r = secbuf_new(enclen, &b64)) != 0)
		goto out;
	sodium_bin2base64((char *)b64->data, enclen, creds->data, creds->len,
	                  sodium_base64_VARIANT_ORIGINAL);
	b64->len = enclen - 1; /* without the NUL */
	*out = b64;
	b64 = NULL;
	r = VERR_OK;
out:
	secbuf_free(creds);
	secbuf_free(b64);
	return r;
}

/* Longest applicable placeholder at p, as a key index, or NONE. */
static size_t
match(const struct ctx *c, const unsigned char *p, size_t n)
{
	size_t best = NONE;

	for (size_t k = 0; k < c->nkeys; k++) {
		const struct kstate *s = &c->ks[k];

		if (!s->apply || c->keys[k].mode != VAULT_INJECT_PLACEHOLDER || s->phlen > n ||
		    p[0] != (unsigned char)c->keys[k].placeholder[0])
			continue;
		if (memcmp(p, c->keys[k].placeholder, s->phlen) == 0 &&
		    (best == NONE || s->phlen > c->ks[best].phlen))
			best = k;
	}
	return best;
}

enum sink { TO_TARGET, TO_HEADER, TO_CREDS };

/* Both passes mark alike; results reach the caller only after a complete build. */
static void
mark(struct ctx *c, size_t k)
{
	c->ks[k].result = INJECT_DONE;
}

/*
 * Copy n bytes at p with every applicable placeholder swapped for its
 * secret, encoded for where it goes. Returns how many were swapped.
 * Scanning resumes after each inserted placeholder in the input, so the
 * secret's own bytes are never searched.
 */
static size_t
subst(struct emit *e, struct ctx *c, const void *vp, size_t n, enum sink how)
{
	const unsigned char *p = vp;
	size_t i = 0, start = 0, count = 0, k;

	if (c->nph == 0) {
		put(e, p, n);
		return 0;
	}
	while (i < n && e->err == 0) {
		const struct secbuf *s;

		if ((k = match(c, p + i, n - i)) == NONE) {
			i++;
			continue;
		}
		s = c->keys[k].secret;
		put(e, p + start, i - start);
		if (how == TO_TARGET) {
			put_pct(e, s);
		} else if (how == TO_HEADER && !c->ks[k].hdr_ok) {
			/* A raw control byte would be refused or misread upstream. */
			e->err = VERR_INJECT_SECRET_BYTES;
			return count;
		} else {
			put(e, s->data, s->len);
		}
		mark(c, k);
		count++;
		i += c->ks[k].phlen;
		start = i;
	}
	put(e, p + start, n - start);
	return count;
}

/*
 * "Basic" credentials that decode strictly: swap inside "user:password"
 * and re-encode. Returns 1 when it wrote the value, 0 when the caller
 * should treat the value like any other; errors go to e->err.
 */
static int
put_basic(struct emit *e, struct ctx *c, const char *v, size_t n)
{
	struct secbuf *bin = NULL, *creds = NULL, *b64 = NULL;
	struct emit t = {0};
	size_t i, tok, binlen = 0, enclen, found;
	int done = 0, r;

	if (n < 7 || !ieq(v, 5, "basic", 5) || v[5] != ' ')
		return 0;
	for (i = 5; i < n && v[i] == ' '; i++)
		;
	if (i == n)
		return 0;
	tok = n - i;
	if (tok > INJECT_HEAD_MAX) {
		e->err = VERR_TOO_LARGE;
		return 1;
	}
	/* The client's own credentials may be in there: sodium memory too. */
	if ((r = secbuf_new(tok, &bin)) != 0)
		goto fail;
	if (sodium_base642bin(bin->data, bin->cap, v + i, tok, NULL, &binlen, NULL,
	                      sodium_base64_VARIANT_ORIGINAL) != 0)
		goto out;
	bin->len = binlen;
	found = subst(&t, c, bin->data, bin->len, TO_CREDS);
	if ((r = t.err) != 0)
		goto fail;
	if (found == 0)
		goto out;
	/* t.len <= INJECT_HEAD_MAX, so the encoded length cannot overflow. */
	enclen = sodium_base64_encoded_len(t.len, sodium_base64_VARIANT_ORIGINAL);
	put(e, v, i); /* the scheme and spaces as the client sent them */
	if (e->b == NULL) {
		/* Measuring: only the length matters. */
		if (room(e, enclen - 1))
			e->len += enclen - 1;
		done = 1;
		goto out;
	}
	if ((r = secbuf_new(t.len, &creds)) != 0)
		goto fail;
	t = (struct emit){.b = creds};
	subst(&t, c, bin->data, bin->len, TO_CREDS);
	if (t.err != 0) {
		r = t.err;
		goto fail;
	}
	if ((r = secbuf_new(enclen, &b64)) != 0)
		goto fail;
	sodium_bin2base64((char *)b64->data, enclen, creds->data, creds->len,
	                  sodium_base64_VARIANT_ORIGINAL);
	put(e, b64->data, enclen - 1);
	done = 1;
	goto out;
fail:
	e->err = r;
	done = 1;
out:
	secbuf_free(bin);
	secbuf_free(creds);
	secbuf_free(b64);
	return done;
}

/* Index of the applicable set key for this header name, or NONE. */
static size_t
set_key_for(const struct ctx *c, const char *name, size_t len)
{
	for (size_t k = 0; k < c->nkeys; k++)
		if (c->ks[k].apply && c->ks[k].set_name != NULL &&
		    ieq(name, len, c->ks[k].set_name, c->ks[k].set_name_len))
			return k;
	return NONE;
}

/* Applicable query key for this parameter name, or NONE. */
static size_t
query_key_for(const struct ctx *c, const char *name, size_t len)
{
	for (size_t k = 0; k < c->nkeys; k++)
		if (c->ks[k].apply && c->keys[k].mode == VAULT_INJECT_QUERY &&
		    c->ks[k].set_name_len == len && memcmp(c->keys[k].arg, name, len) == 0)
			return k;
	return NONE;
}

static void
put_param(struct emit *e, struct ctx *c, size_t k)
{
	put(e, c->keys[k].arg, c->ks[k].set_name_len);
	put(e, "=", 1);
	put_pct(e, c->keys[k].secret);
	c->ks[k].placed = 1;
	mark(c, k);
}

/* Origin-form or absolute-form: the forms that can carry a query. */
static int
has_query_form(const char *t, size_t n)
{
	return t[0] == '/' || (n > 7 && ieq(t, 7, "http://", 7)) ||
	       (n > 8 && ieq(t, 8, "https://", 8));
}

static void
put_target(struct emit *e, struct ctx *c)
{
	const char *t = c->req->target;
	size_t n = c->req->target_len, frag, q, s, added = 0;

	for (size_t k = 0; k < c->nkeys; k++)
		c->ks[k].placed = 0;
	if (c->nquery == 0 || !has_query_form(t, n)) {
		subst(e, c, t, n, TO_TARGET);
		return;
	}
	/* A '?' after a '#' belongs to the fragment, not to a query. */
	for (frag = 0; frag < n && t[frag] != '#'; frag++)
		;
	for (q = 0; q < frag && t[q] != '?'; q++)
		;
	subst(e, c, t, q, TO_TARGET);
	if (q < frag) {
		put(e, "?", 1);
		for (s = q + 1;;) {
			size_t end, eq, k;

			for (end = s; end < frag && t[end] != '&'; end++)
				;
			for (eq = s; eq < end && t[eq] != '='; eq++)
				;
			if (eq > s && (k = query_key_for(c, t + s, eq - s)) != NONE)
				put_param(e, c, k);
			else
				subst(e, c, t + s, end - s, TO_TARGET);
			if (end == frag)
				break;
			put(e, "&", 1);
			s = end + 1;
		}
	}
	for (size_t k = 0; k < c->nkeys; k++) {
		if (!c->ks[k].apply || c->keys[k].mode != VAULT_INJECT_QUERY || c->ks[k].placed)
			continue;
		if (q == frag && added == 0)
			put(e, "?", 1);
		else if (added > 0 || (frag > q + 1 && t[frag - 1] != '&'))
			put(e, "&", 1);
		put_param(e, c, k);
		added++;
	}
	subst(e, c, t + frag, n - frag, TO_TARGET);
}

static void
put_set(struct emit *e, struct ctx *c, size_t k)
{
	const struct kstate *s = &c->ks[k];

	put(e, s->set_name, s->set_name_len);
	put(e, ": ", 2);
	put_str(e, s->set_prefix);
	put(e, s->set_body->data, s->set_body->len);
	put(e, "\r\n", 2);
	mark(c, k);
}

static void
put_field(struct emit *e, const struct http_header *h)
{
	put(e, h->name, h->name_len);
	put(e, ":", 1);
	if (h->value_len > 0) {
		put(e, " ", 1);
		put(e, h->value, h->value_len);
	}
	put(e, "\r\n", 2);
}

static int
framing_field(const struct http_header *h)
{
	static const char *const names[] = {"host",       "content-length", "transfer-encoding",
	                                    "connection", "upgrade",        "te",
	                                    "trailer",    "expect",         NULL};

	for (size_t i = 0; names[i] != NULL; i++)
		if (ieq(h->name, h->name_len, names[i], strlen(names[i])))
			return 1;
	return 0;
}

static void
build(struct emit *e, struct ctx *c)
{
	const struct inject_request *r = c->req;

	put(e, r->method, r->method_len);
	put(e, " ", 1);
	put_target(e, c);
	put_str(e, " HTTP/1.1\r\n");
	for (size_t i = 0; i < r->nheaders && e->err == 0; i++) {
		const struct http_header *h = &r->headers[i];
		size_t k = set_key_for(c, h->name, h->name_len);

		if (k != NONE) {
			if (c->ks[k].first == i)
				put_set(e, c, k);
			continue;
		}
		if (r->drop != NULL && r->drop[i])
			continue;
		put(e, h->name, h->name_len);
		put(e, ":", 1);
		if (h->value_len > 0 && framing_field(h)) {
			/* Routing and framing fields are never rewritten: a secret there
			 * could change where the request goes or how it is read. */
			put(e, " ", 1);
			put(e, h->value, h->value_len);
		} else if (h->value_len > 0) {
			put(e, " ", 1);
			if (c->nph == 0 ||
			    !ieq(h->name, h->name_len, authorization, sizeof(authorization) - 1) ||
			    !put_basic(e, c, h->value, h->value_len))
				subst(e, c, h->value, h->value_len, TO_HEADER);
		}
		put(e, "\r\n", 2);
	}
	for (size_t k = 0; k < c->nkeys; k++)
		if (c->ks[k].apply && c->ks[k].set_name != NULL && c->ks[k].first == r->nheaders)
			put_set(e, c, k);
	for (size_t i = 0; i < r->nextra; i++)
		put_field(e, &r->extra[i]);
	put(e, "\r\n", 2);
}

/* Decide which keys apply and prepare what they set; conflicts fail closed. */
static int
prepare(struct ctx *c, const struct inject_dest *dest)
{
	const struct inject_request *req = c->req;
	int r;

	for (size_t k = 0; k < c->nkeys; k++) {
		const struct inject_key *key = &c->keys[k];
		struct kstate *s = &c->ks[k];

		if ((r = check_key(key, &s->phlen)) != 0)
			return r;
		if (!bound(key, dest->host))
			continue;
		if (!dest->tls && !key->allow_http) {
			s->result = INJECT_NEED_TLS;
			continue;
		}
		s->apply = 1;
		s->hdr_ok = (uint8_t)header_safe(key->secret);
		switch (key->mode) {
		case VAULT_INJECT_PLACEHOLDER:
			for (size_t j = 0; j < k; j++)
				if (c->ks[j].apply && c->keys[j].mode == VAULT_INJECT_PLACEHOLDER &&
				    strcmp(c->keys[j].placeholder, key->placeholder) == 0)
					return VERR_INVALID; /* which secret would it be? */
			c->nph++;
			break;
		case VAULT_INJECT_QUERY:
			s->set_name_len = strlen(key->arg);
			if (query_key_for(c, key->arg, s->set_name_len) != k)
				return VERR_INJECT_CONFLICT;
			c->nquery++;
			break;
		case VAULT_INJECT_BEARER:
		case VAULT_INJECT_HEADER:
			if (!s->hdr_ok)
				return VERR_INJECT_SECRET_BYTES;
			s->set_body = key->secret;
			if (key->mode == VAULT_INJECT_BEARER) {
				s->set_name = authorization;
				s->set_prefix = "Bearer ";
			} else {
				s->set_name = key->arg;
				s->set_prefix = "";
			}
			break;
		case VAULT_INJECT_BASIC:
			if ((r = basic_body(key->arg, key->secret, &s->owned)) != 0)
				return r;
			s->set_name = authorization;
			s->set_prefix = "Basic ";
			s->set_body = s->owned;
			break;
		}
		if (s->set_name == NULL)
			continue;
		s->set_name_len = strlen(s->set_name);
		/* The earliest applicable key of a name answers set_key_for. */
		if (set_key_for(c, s->set_name, s->set_name_len) != k)
			return VERR_INJECT_CONFLICT;
		for (size_t i = 0; i < req->nextra; i++)
			if (ieq(req->extra[i].name, req->extra[i].name_len, s->set_name,
			        s->set_name_len))
				return VERR_INJECT_CONFLICT;
		for (s->first = 0; s->first < req->nheaders; s->first++)
			if (ieq(req->headers[s->first].name, req->headers[s->first].name_len,
			        s->set_name, s->set_name_len))
				break;
	}
	return VERR_OK;
}

int
inject_apply(const struct inject_request *req, const struct inject_dest *dest,
             const struct inject_key *keys, size_t nkeys, struct secbuf **out, uint8_t *result)
{
	struct ctx c = {0};
	struct emit e = {0};
	struct secbuf *b = NULL;
	int r;

	if (out != NULL)
		*out = NULL;
	if (result != NULL && nkeys > 0)
		memset(result, 0, nkeys);
	if (out == NULL || req == NULL || dest == NULL || dest->host == NULL ||
	    (nkeys > 0 && keys == NULL))
		return VERR_INVALID;
	if (nkeys > INJECT_KEYS_MAX)
		return VERR_TOO_MANY;
	if ((r = check_request(req)) != 0)
		return r;
	c.req = req;
	c.keys = keys;
	c.nkeys = nkeys;
	if (nkeys > 0 && (c.ks = calloc(nkeys, sizeof(*c.ks))) == NULL)
		return VERR_NOMEM;
	if ((r = prepare(&c, dest)) != 0)
		goto out;

	build(&e, &c);
	if ((r = e.err) != 0)
		goto out;
	if ((r = secbuf_new(e.len, &b)) != 0)
		goto out;
	e = (struct emit){.b = b};
	build(&e, &c);
	if ((r = e.err) != 0)
		goto out;
	if (e.len != b->cap) {
		r = VERR_INVALID; /* the passes disagreed: a bug here, never send it */
		goto out;
	}
	if (result != NULL)
		for (size_t k = 0; k < nkeys; k++)
			result[k] = c.ks[k].result;
	*out = b;
	b = NULL;
	r = VERR_OK;
out:
	for (size_t k = 0; k < nkeys && c.ks != NULL; k++)
		secbuf_free(c.ks[k].owned);
	free(c.ks);
	secbuf_free(b);
	return r;
}

int
inject_placeholder_check(const char *p, size_t *len)
{
	size_t n;

	*len = 0;
	if (p == NULL)
		return VERR_INVALID;
	n = strnlen(p, INJECT_PLACEHOLDER_MAX + 1);
	if (n < INJECT_PLACEHOLDER_MIN || n > INJECT_PLACEHOLDER_MAX)
		return VERR_INVALID;
	for (size_t i = 0; i < n; i++) {
		char c = p[i];

		/* Also what makes a placeholder safe in a head, a URL and JSON. */
		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		      c == '_'))
			return VERR_INVALID;
	}
	*len = n;
	return VERR_OK;
}

int
inject_make_placeholder(char *buf, size_t size)
{
	static const char prefix[] = "vrunph_";
	unsigned char rnd[16];

	if (size > 0)
		buf[0] = '\0';
	if (size < INJECT_PLACEHOLDER_SIZE)
		return VERR_TOO_LARGE;
	if (sodium_init() < 0)
		return VERR_CRYPTO;
	randombytes_buf(rnd, sizeof(rnd));
	memcpy(buf, prefix, sizeof(prefix) - 1);
	sodium_bin2hex(buf + sizeof(prefix) - 1, size - (sizeof(prefix) - 1), rnd, sizeof(rnd));
	return VERR_OK;
}

int
inject_placeholder_seen(const struct inject_key *k, const void *vp, size_t len)
{
	const unsigned char *p = vp;
	size_t n;

	if (k == NULL || p == NULL || inject_placeholder_check(k->placeholder, &n) != 0)
		return 0;
	for (size_t i = 0; i + n <= len; i++)
		if (p[i] == (unsigned char)k->placeholder[0] &&
		    memcmp(p + i, k->placeholder, n) == 0)
			return 1;
	return 0;
}

void
inject_key_from_entry(const struct vault_entry *e, const char *placeholder, struct inject_key *k)
{
	memset(k, 0, sizeof(*k));
	k->name = e->name;
	k->secret = e->secret;
	k->placeholder = placeholder;
	k->hosts = e->hosts;
	k->nhosts = e->nhosts;
	k->mode = e->inject;
	k->arg = e->inject_arg;
	k->allow_http = e->allow_http;
}
