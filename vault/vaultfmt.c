#include "vaultfmt.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "verr.h"

#define PT_MAGIC "VPT1"

static void
put_u16(unsigned char *p, uint16_t v)
{
	p[0] = (unsigned char)(v >> 8);
	p[1] = (unsigned char)v;
}

static void
put_u64(unsigned char *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (unsigned char)v;
}

static uint16_t
get_u16(const unsigned char *p)
{
	return (uint16_t)((p[0] << 8) | p[1]);
}

static uint64_t
get_u64(const unsigned char *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = (v << 8) | p[i];
	return v;
}

void
vaultfmt_header_pack(const struct vaultfmt_header *h, unsigned char out[VAULTFMT_HEADER_LEN])
{
	memcpy(out, VAULTFMT_MAGIC, 8);
	put_u16(out + 8, h->version);
	put_u16(out + 10, h->kdf_alg);
	put_u64(out + 12, h->kdf.opslimit);
	put_u64(out + 20, h->kdf.memlimit);
	memcpy(out + 28, h->salt, VAULTFMT_SALT_LEN);
	memcpy(out + 44, h->nonce, VAULTFMT_NONCE_LEN);
}

int
vaultfmt_header_parse(const unsigned char *buf, size_t len, struct vaultfmt_header *h)
{
	memset(h, 0, sizeof(*h));
	if (len < VAULTFMT_HEADER_LEN + VAULTFMT_TAG_LEN || len > VAULTFMT_FILE_MAX ||
	    memcmp(buf, VAULTFMT_MAGIC, 8) != 0)
		return VERR_VAULT_FORMAT;
	h->version = get_u16(buf + 8);
	h->kdf_alg = get_u16(buf + 10);
	if (h->version != VAULTFMT_VERSION || h->kdf_alg != VAULTFMT_KDF_ARGON2ID13)
		return VERR_VAULT_FORMAT;
	h->kdf.opslimit = get_u64(buf + 12);
	h->kdf.memlimit = get_u64(buf + 20);
	memcpy(h->salt, buf + 28, VAULTFMT_SALT_LEN);
	memcpy(h->nonce, buf + 44, VAULTFMT_NONCE_LEN);
	/* Bounded before any hashing: a file must not make us burn RAM/CPU. */
	return vault_kdf_check(&h->kdf);
}

int
vaultfmt_derive_key(const struct secbuf *pass, const struct vaultfmt_header *h, struct secbuf **key)
{
	struct secbuf *k = NULL;
	int r;

	*key = NULL;
	if ((r = vault_kdf_check(&h->kdf)) != 0)
		return r;
	if ((r = secbuf_new(VAULTFMT_KEY_LEN, &k)) != 0)
		return r;
	if (crypto_pwhash(k->data, VAULTFMT_KEY_LEN, (const char *)pass->data, pass->len, h->salt,
	                  h->kdf.opslimit, (size_t)h->kdf.memlimit,
	                  crypto_pwhash_ALG_ARGON2ID13) != 0) {
		secbuf_free(k);
		return VERR_NOMEM; /* libsodium fails here only when it cannot allocate */
	}
	k->len = VAULTFMT_KEY_LEN;
	*key = k;
	return VERR_OK;
}

/* Output cursor: a NULL base only measures. */
struct wcur {
	unsigned char *p;
	size_t off;
};

static void
w_raw(struct wcur *w, const void *src, size_t n)
{
	if (w->p != NULL && n > 0)
		memcpy(w->p + w->off, src, n);
	w->off += n;
}

static void
w_u8(struct wcur *w, uint8_t v)
{
	w_raw(w, &v, 1);
}

static void
w_u32(struct wcur *w, uint32_t v)
{
	unsigned char b[4] = {(unsigned char)(v >> 24), (unsigned char)(v >> 16),
	                      (unsigned char)(v >> 8), (unsigned char)v};

	w_raw(w, b, 4);
}

static void
w_u64(struct wcur *w, uint64_t v)
{
	unsigned char b[8];

	put_u64(b, v);
	w_raw(w, b, 8);
}

static void
w_bytes(struct wcur *w, const void *p, size_t n)
{
	w_u32(w, (uint32_t)n);
	w_raw(w, p, n);
}

static void
w_str(struct wcur *w, const char *s)
{
	w_bytes(w, s, strlen(s));
}

static void
write_contents(struct wcur *w, const struct vaultfmt_contents *c)
{
	char host[HOSTSPEC_NAME_MAX + 16];

	w_raw(w, PT_MAGIC, 4);
	w_u64(w, (uint64_t)c->created);
	w_bytes(w, c->audit_key->data, c->audit_key->len);
	w_u32(w, (uint32_t)c->nentries);
	for (size_t i = 0; i < c->nentries; i++) {
		const struct vault_entry *e = c->entries[i];

		w_str(w, e->name);
		w_bytes(w, e->secret->data, e->secret->len);
		w_u32(w, (uint32_t)e->nhosts);
		for (size_t j = 0; j < e->nhosts; j++) {
			/* Checked by vault_check_entry before we get here. */
			if (hostspec_format(&e->hosts[j], host, sizeof(host)) != 0)
				host[0] = '\0';
			w_str(w, host);
		}
		w_u8(w, e->inject);
		w_str(w, e->inject_arg);
		w_str(w, e->env);
		w_u8(w, e->allow_http);
		w_bytes(w, e->ca, e->ca_len);
		w_u64(w, (uint64_t)e->created);
		w_u64(w, (uint64_t)e->changed);
	}
}

int
vaultfmt_encode(const struct vaultfmt_contents *c, struct secbuf **out)
{
	struct wcur w = {NULL, 0};
	struct secbuf *b = NULL;
	int r;

	*out = NULL;
	if (c->audit_key == NULL || c->audit_key->len != VAULT_AUDIT_KEY_LEN ||
	    c->nentries > VAULT_ENTRIES_MAX)
		return VERR_INVALID;
	for (size_t i = 0; i < c->nentries; i++)
		if ((r = vault_check_entry(c->entries[i])) != 0)
			return r;
	write_contents(&w, c);
	if (w.off > VAULTFMT_PLAINTEXT_MAX)
		return VERR_TOO_LARGE;
	if ((r = secbuf_new(w.off, &b)) != 0)
		return r;
	w.p = b->data;
	w.off = 0;
	write_contents(&w, c);
	b->len = w.off;
	*out = b;
	return VERR_OK;
}

/* Input cursor; any overrun latches bad. */
struct rcur {
	const unsigned char *p;
	size_t len, off;
	int bad;
};

static const unsigned char *
r_raw(struct rcur *r, size_t n)
{
	const unsigned char *p;

	if (r->bad || n > r->len - r->off) {
		r->bad = 1;
		return NULL;
	}
	p = r->p + r->off;
	r->off += n;
	return p;
}

static uint8_t
r_u8(struct rcur *r)
{
	const unsigned char *p = r_raw(r, 1);

	return p != NULL ? p[0] : 0;
}

static uint32_t
r_u32(struct rcur *r)
{
	const unsigned char *p = r_raw(r, 4);

	if (p == NULL)
		return 0;
	return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static uint64_t
r_u64(struct rcur *r)
{
	const unsigned char *p = r_raw(r, 8);

	return p != NULL ? get_u64(p) : 0;
}

/* Length-prefixed field of at most max bytes. */
static const unsigned char *
r_bytes(struct rcur *r, size_t max, size_t *n)
{
	uint32_t l = r_u32(r);

	*n = 0;
	if (r->bad || l > max) {
		r->bad = 1;
		return NULL;
	}
	*n = l;
	return r_raw(r, l);
}

/* Text field into a fixed buffer; NUL bytes inside are malformed. */
static void
r_str(struct rcur *r, char *dst, size_t size)
{
	size_t n;
	const unsigned char *p = r_bytes(r, size - 1, &n);

	dst[0] = '\0';
	if (p == NULL)
		return;
	if (memchr(p, '\0', n) != NULL) {
		r->bad = 1;
		return;
	}
	memcpy(dst, p, n);
	dst[n] = '\0';
}

static int
decode_entry(struct rcur *rc, struct vault_entry **out)
{
	struct vault_entry *e = NULL;
	const unsigned char *p;
	char host[HOSTSPEC_NAME_MAX + 16], again[sizeof(host)];
	size_t n;
	uint32_t nhosts;
	int r;

	*out = NULL;
	if ((r = vault_entry_new(&e)) != 0)
		return r;
	r = VERR_VAULT_CORRUPT;
	r_str(rc, e->name, sizeof(e->name));
	if ((p = r_bytes(rc, VAULT_SECRET_MAX, &n)) == NULL)
		goto out;
	if (secbuf_dup(p, n, &e->secret) != 0) {
		r = VERR_NOMEM;
		goto out;
	}
	nhosts = r_u32(rc);
	if (rc->bad || nhosts > VAULT_HOSTS_MAX)
		goto out;
	for (uint32_t i = 0; i < nhosts; i++) {
		r_str(rc, host, sizeof(host));
		if (rc->bad)
			goto out;
		/* Only the canonical spelling is valid: re-format must match. */
		if (hostspec_parse(host, strlen(host), HOSTSPEC_ALLOW_WILDCARD, &e->hosts[i]) !=
		            0 ||
		    hostspec_format(&e->hosts[i], again, sizeof(again)) != 0 ||
		    strcmp(host, again) != 0)
			goto out;
		e->nhosts++;
	}
	e->inject = r_u8(rc);
	r_str(rc, e->inject_arg, sizeof(e->inject_arg));
	r_str(rc, e->env, sizeof(e->env));
	e->allow_http = r_u8(rc);
	if ((p = r_bytes(rc, VAULT_CA_MAX, &n)) == NULL)
		goto out;
	if (n > 0) {
		if ((e->ca = malloc(n)) == NULL) {
			r = VERR_NOMEM;
			goto out;
		}
		memcpy(e->ca, p, n);
		e->ca_len = n;
	}
	e->created = (int64_t)r_u64(rc);
	e->changed = (int64_t)r_u64(rc);
	if (rc->bad || e->allow_http > 1 || vault_check_entry(e) != 0)
		goto out;
	*out = e;
	e = NULL;
	r = VERR_OK;
out:
	vault_entry_free(e);
	return r;
}

int
vaultfmt_decode(const unsigned char *buf, size_t len, struct vaultfmt_contents *c)
{
	struct rcur rc = {buf, len, 0, 0};
	const unsigned char *p;
	size_t n;
	uint32_t count;
	int r;

	memset(c, 0, sizeof(*c));
	r = VERR_VAULT_CORRUPT;
	if ((p = r_raw(&rc, 4)) == NULL || memcmp(p, PT_MAGIC, 4) != 0)
		goto out;
	c->created = (int64_t)r_u64(&rc);
	if ((p = r_bytes(&rc, VAULT_AUDIT_KEY_LEN, &n)) == NULL || n != VAULT_AUDIT_KEY_LEN)
		goto out;
	if (secbuf_dup(p, n, &c->audit_key) != 0) {
		r = VERR_NOMEM;
		goto out;
	}
	count = r_u32(&rc);
	if (rc.bad || count > VAULT_ENTRIES_MAX)
		goto out;
	if (count > 0 && (c->entries = calloc(count, sizeof(*c->entries))) == NULL) {
		r = VERR_NOMEM;
		goto out;
	}
	for (uint32_t i = 0; i < count; i++) {
		if ((r = decode_entry(&rc, &c->entries[i])) != 0)
			goto out;
		c->nentries++;
		/* Names and placeholder variables are unique, as vault_add keeps them. */
		for (size_t j = 0; j < i; j++)
			if (strcmp(c->entries[j]->name, c->entries[i]->name) == 0 ||
			    strcmp(c->entries[j]->env, c->entries[i]->env) == 0) {
				r = VERR_VAULT_CORRUPT;
				goto out;
			}
	}
	r = (rc.bad || rc.off != rc.len) ? VERR_VAULT_CORRUPT : VERR_OK;
out:
	if (r != 0)
		vaultfmt_contents_clear(c);
	return r;
}

int
vaultfmt_seal(const struct vaultfmt_header *h, const struct secbuf *key,
              const struct secbuf *plaintext, unsigned char **file, size_t *filelen)
{
	unsigned char *f;
	unsigned long long clen;
	size_t n = VAULTFMT_HEADER_LEN + plaintext->len + VAULTFMT_TAG_LEN;

	*file = NULL;
	*filelen = 0;
	if (key->len != VAULTFMT_KEY_LEN || plaintext->len > VAULTFMT_PLAINTEXT_MAX)
		return VERR_INVALID;
	if ((f = malloc(n)) == NULL)
		return VERR_NOMEM;
	vaultfmt_header_pack(h, f);
	if (crypto_aead_xchacha20poly1305_ietf_encrypt(
	            f + VAULTFMT_HEADER_LEN, &clen, plaintext->data, plaintext->len, f,
	            VAULTFMT_HEADER_LEN, NULL, h->nonce, key->data) != 0 ||
	    clen != plaintext->len + VAULTFMT_TAG_LEN) {
		free(f);
		return VERR_CRYPTO;
	}
	*file = f;
	*filelen = n;
	return VERR_OK;
}

int
vaultfmt_decrypt(const unsigned char *file, size_t filelen, const struct vaultfmt_header *h,
                 const struct secbuf *key, struct secbuf **plaintext)
{
	struct secbuf *pt = NULL;
	unsigned long long mlen;
	size_t clen;
	int r;

	*plaintext = NULL;
	if (filelen < VAULTFMT_HEADER_LEN + VAULTFMT_TAG_LEN || key->len != VAULTFMT_KEY_LEN)
		return VERR_VAULT_FORMAT;
	clen = filelen - VAULTFMT_HEADER_LEN;
	if ((r = secbuf_new(clen - VAULTFMT_TAG_LEN, &pt)) != 0)
		return r;
	if (crypto_aead_xchacha20poly1305_ietf_decrypt(
	            pt->data, &mlen, NULL, file + VAULTFMT_HEADER_LEN, clen, file,
	            VAULTFMT_HEADER_LEN, h->nonce, key->data) != 0) {
		secbuf_free(pt);
		return VERR_VAULT_DECRYPT;
	}
	pt->len = (size_t)mlen;
	*plaintext = pt;
	return VERR_OK;
}

int
vaultfmt_open(const unsigned char *file, size_t filelen, const struct secbuf *pass,
              struct vaultfmt_header *h, struct secbuf **key, struct secbuf **plaintext)
{
	struct secbuf *k = NULL;
	int r;

	*key = NULL;
	*plaintext = NULL;
	if ((r = vaultfmt_header_parse(file, filelen, h)) != 0)
		return r;
	if ((r = vaultfmt_derive_key(pass, h, &k)) != 0)
		return r;
	if ((r = vaultfmt_decrypt(file, filelen, h, k, plaintext)) != 0) {
		secbuf_free(k);
		return r;
	}
	*key = k;
	return VERR_OK;
}

void
vaultfmt_contents_clear(struct vaultfmt_contents *c)
{
	for (size_t i = 0; i < c->nentries; i++)
		vault_entry_free(c->entries[i]);
	free(c->entries);
	secbuf_free(c->audit_key);
	memset(c, 0, sizeof(*c));
}
