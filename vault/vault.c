#include "vault.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "safefile.h"
#include "vaultfmt.h"
#include "verr.h"

struct vault {
	char *db;
	int lockfd; /* >= 0 when opened for writing */
	struct vaultfmt_header hdr;
	struct secbuf *key;
	struct vaultfmt_contents c;
	struct stat seen; /* the file vault_refresh last loaded */
	int have_seen;
};

/* ---- KDF ---- */

int
vault_kdf_named(const char *name, struct vault_kdf *out)
{
	memset(out, 0, sizeof(*out));
	if (name == NULL || strcmp(name, "moderate") == 0) {
		out->opslimit = crypto_pwhash_OPSLIMIT_MODERATE;
		out->memlimit = crypto_pwhash_MEMLIMIT_MODERATE;
	} else if (strcmp(name, "interactive") == 0) {
		out->opslimit = crypto_pwhash_OPSLIMIT_INTERACTIVE;
		out->memlimit = crypto_pwhash_MEMLIMIT_INTERACTIVE;
	} else if (strcmp(name, "sensitive") == 0) {
		out->opslimit = crypto_pwhash_OPSLIMIT_SENSITIVE;
		out->memlimit = crypto_pwhash_MEMLIMIT_SENSITIVE;
	} else
		return VERR_INVALID;
	return VERR_OK;
}

int
vault_kdf_check(const struct vault_kdf *kdf)
{
	/* Never weaker than "interactive", never costlier than "sensitive". */
	if (kdf->opslimit < crypto_pwhash_OPSLIMIT_INTERACTIVE ||
	    kdf->opslimit > crypto_pwhash_OPSLIMIT_SENSITIVE ||
	    kdf->memlimit < crypto_pwhash_MEMLIMIT_INTERACTIVE ||
	    kdf->memlimit > crypto_pwhash_MEMLIMIT_SENSITIVE)
		return VERR_VAULT_KDF;
	return VERR_OK;
}

/* ---- field checks ---- */

static int
is_alpha(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static int
is_alnum(char c)
{
	return is_alpha(c) || (c >= '0' && c <= '9');
}

int
vault_check_name(const char *name)
{
	size_t n = strlen(name);

	if (n == 0 || n > VAULT_NAME_MAX || !is_alpha(name[0]))
		return VERR_KEY_NAME;
	for (size_t i = 1; i < n; i++)
		if (!is_alnum(name[i]) && name[i] != '.' && name[i] != '_' && name[i] != '-')
			return VERR_KEY_NAME;
	return VERR_OK;
}

int
vault_check_secret(const struct secbuf *s)
{
	if (s == NULL || s->len == 0)
		return VERR_SECRET_EMPTY;
	if (s->len > VAULT_SECRET_MAX)
		return VERR_TOO_LARGE;
	/* These would let the secret split a header line or a C string. */
	if (memchr(s->data, '\r', s->len) != NULL || memchr(s->data, '\n', s->len) != NULL ||
	    memchr(s->data, '\0', s->len) != NULL)
		return VERR_SECRET_BYTES;
	return VERR_OK;
}

/* Variables vrun sets for the child or that steer loading and execution. */
static const char *const reserved_env[] = {
        "HTTPS_PROXY",
        "HTTP_PROXY",
        "ALL_PROXY",
        "NO_PROXY",
        "NODE_USE_ENV_PROXY",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "CURL_CA_BUNDLE",
        "REQUESTS_CA_BUNDLE",
        "NODE_EXTRA_CA_CERTS",
        "GIT_SSL_CAINFO",
        "GIT_SSL_CAPATH",
        "PATH",
        "HOME",
        "SHELL",
        "IFS",
        "ENV",
        "BASH_ENV",
        "TMPDIR",
        NULL,
};
static const char *const reserved_prefix[] = {"LD_", "DYLD_", "VAULT_", "VRUN_", NULL};

int
vault_check_env(const char *env)
{
	size_t n = strlen(env);

	if (n == 0 || n > VAULT_ENV_MAX || !(is_alpha(env[0]) || env[0] == '_'))
		return VERR_ENV_NAME;
	for (size_t i = 1; i < n; i++)
		if (!is_alnum(env[i]) && env[i] != '_')
			return VERR_ENV_NAME;
	for (size_t i = 0; reserved_env[i] != NULL; i++)
		if (strcasecmp(env, reserved_env[i]) == 0)
			return VERR_ENV_RESERVED;
	for (size_t i = 0; reserved_prefix[i] != NULL; i++)
		if (strncasecmp(env, reserved_prefix[i], strlen(reserved_prefix[i])) == 0)
			return VERR_ENV_RESERVED;
	return VERR_OK;
}

int
vault_default_env(const char *name, char *buf, size_t size)
{
	size_t n = strlen(name);

	if (size == 0)
		return VERR_INVALID;
	buf[0] = '\0';
	if (n + 1 > size)
		return VERR_TOO_LARGE;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];

		if (c >= 'a' && c <= 'z')
			c = (char)(c - 'a' + 'A');
		else if (!is_alnum(c))
			c = '_';
		buf[i] = c;
	}
	buf[n] = '\0';
	return vault_check_env(buf);
}

/* RFC 9110 tchar. */
static int
is_tchar(char c)
{
	return is_alnum(c) || (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* Headers that frame or route the message: never set from a vault entry. */
static const char *const forbidden_headers[] = {
        "host",    "content-length",   "transfer-encoding",   "connection", "upgrade", "te",
        "trailer", "proxy-connection", "proxy-authorization", "keep-alive", "expect",  NULL,
};

static int
check_inject_arg(uint8_t mode, const char *arg)
{
	size_t n = strlen(arg);

	switch (mode) {
	case VAULT_INJECT_PLACEHOLDER:
	case VAULT_INJECT_BEARER:
		return n == 0 ? VERR_OK : VERR_INJECT;
	case VAULT_INJECT_BASIC:
		if (n == 0 || n > VAULT_INJECT_ARG_MAX)
			return VERR_INJECT;
		for (size_t i = 0; i < n; i++)
			if (arg[i] < 0x21 || arg[i] > 0x7e || arg[i] == ':')
				return VERR_INJECT;
		return VERR_OK;
	case VAULT_INJECT_HEADER:
		if (n == 0 || n > 64)
			return VERR_INJECT;
		for (size_t i = 0; i < n; i++)
			if (!is_tchar(arg[i]))
				return VERR_INJECT;
		for (size_t i = 0; forbidden_headers[i] != NULL; i++)
			if (strcasecmp(arg, forbidden_headers[i]) == 0)
				return VERR_INJECT;
		return VERR_OK;
	case VAULT_INJECT_QUERY:
		if (n == 0 || n > 64)
			return VERR_INJECT;
		for (size_t i = 0; i < n; i++)
			if (!is_alnum(arg[i]) && strchr("-._~", arg[i]) == NULL)
				return VERR_INJECT;
		return VERR_OK;
	}
	return VERR_INJECT;
}

int
vault_parse_inject(const char *spec, uint8_t *mode, char *arg, size_t argsize)
{
	static const struct {
		const char *word;
		uint8_t mode;
		int has_arg;
	} modes[] = {
	        {"placeholder", VAULT_INJECT_PLACEHOLDER, 0},
	        {"bearer", VAULT_INJECT_BEARER, 0},
	        {"basic", VAULT_INJECT_BASIC, 1},
	        {"header", VAULT_INJECT_HEADER, 1},
	        {"query", VAULT_INJECT_QUERY, 1},
	};
	const char *colon = strchr(spec, ':');
	size_t wlen = colon != NULL ? (size_t)(colon - spec) : strlen(spec);
	int r;

	*mode = 0;
	if (argsize == 0)
		return VERR_INVALID;
	arg[0] = '\0';
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		if (strlen(modes[i].word) != wlen || strncmp(spec, modes[i].word, wlen) != 0)
			continue;
		if ((colon != NULL) != modes[i].has_arg)
			return VERR_INJECT;
		if (colon != NULL) {
			if (strlen(colon + 1) >= argsize)
				return VERR_INJECT;
			strcpy(arg, colon + 1);
		}
		if ((r = check_inject_arg(modes[i].mode, arg)) != 0) {
			arg[0] = '\0';
			return r;
		}
		*mode = modes[i].mode;
		return VERR_OK;
	}
	return VERR_INJECT;
}

int
vault_format_inject(uint8_t mode, const char *arg, char *buf, size_t size)
{
	static const char *const words[] = {NULL,    "placeholder", "bearer",
	                                    "basic", "header",      "query"};
	int n;

	if (mode < VAULT_INJECT_PLACEHOLDER || mode > VAULT_INJECT_QUERY)
		return VERR_INVALID;
	if (arg[0] != '\0')
		n = snprintf(buf, size, "%s:%s", words[mode], arg);
	else
		n = snprintf(buf, size, "%s", words[mode]);
	return (n < 0 || (size_t)n >= size) ? VERR_TOO_LARGE : VERR_OK;
}

int
vault_check_ca(const unsigned char *pem, size_t len)
{
	BIO *bio = NULL;
	char *name = NULL, *header = NULL;
	unsigned char *der = NULL;
	const unsigned char *p;
	long derlen;
	X509 *x;
	int count = 0, r = VERR_CA_BUNDLE;

	if (len == 0 || len > VAULT_CA_MAX || len > INT32_MAX)
		return len > VAULT_CA_MAX ? VERR_TOO_LARGE : VERR_CA_BUNDLE;
	if ((bio = BIO_new_mem_buf(pem, (int)len)) == NULL)
		return VERR_NOMEM;
	/* Every PEM block must be a certificate: a private key has no business here. */
	while (PEM_read_bio(bio, &name, &header, &der, &derlen) == 1) {
		int ok = strcmp(name, "CERTIFICATE") == 0;

		if (ok) {
			p = der;
			x = d2i_X509(NULL, &p, derlen);
			ok = x != NULL && p == der + derlen;
			X509_free(x);
		}
		OPENSSL_free(name);
		OPENSSL_free(header);
		OPENSSL_free(der);
		name = header = NULL;
		der = NULL;
		if (!ok)
			goto out;
		count++;
	}
	if (count > 0)
		r = VERR_OK;
out:
	ERR_clear_error();
	BIO_free(bio);
	return r;
}

int
vault_check_entry(const struct vault_entry *e)
{
	int r;

	if ((r = vault_check_name(e->name)) != 0 || (r = vault_check_secret(e->secret)) != 0 ||
	    (r = vault_check_env(e->env)) != 0 ||
	    (r = check_inject_arg(e->inject, e->inject_arg)) != 0)
		return r;
	if (e->nhosts == 0 || e->nhosts > VAULT_HOSTS_MAX)
		return VERR_TOO_MANY;
	for (size_t i = 0; i < e->nhosts; i++)
		if (e->hosts[i].port == 0 || e->hosts[i].host[0] == '\0')
			return VERR_HOST;
	if (e->allow_http > 1)
		return VERR_INVALID;
	if (e->ca_len > 0 && (r = vault_check_ca(e->ca, e->ca_len)) != 0)
		return r;
	return VERR_OK;
}

/* ---- entries ---- */

int
vault_entry_new(struct vault_entry **out)
{
	if ((*out = calloc(1, sizeof(**out))) == NULL)
		return VERR_NOMEM;
	(*out)->inject = VAULT_INJECT_PLACEHOLDER;
	return VERR_OK;
}

void
vault_entry_free(struct vault_entry *e)
{
	if (e == NULL)
		return;
	secbuf_free(e->secret);
	free(e->ca);
	free(e);
}

/* ---- lifecycle ---- */

static int
new_handle(const struct paths *p, struct vault **out)
{
	struct vault *v;

	*out = NULL;
	if ((v = calloc(1, sizeof(*v))) == NULL)
		return VERR_NOMEM;
	v->lockfd = -1;
	if ((v->db = strdup(p->db)) == NULL) {
		free(v);
		return VERR_NOMEM;
	}
	*out = v;
	return VERR_OK;
}

static int
take_lock(const struct paths *p, struct vault *v)
{
	int r;

	if ((r = safefile_dir(p->home, 0)) != 0) {
		if (r == VERR_SYSTEM && errno == ENOENT)
			r = VERR_VAULT_MISSING;
		return r;
	}
	if ((r = safefile_lock(p->lock, &v->lockfd)) != 0)
		return r;
	/* Leftovers of an interrupted save are never the live vault. */
	return safefile_remove_temps(p->db);
}

int
vault_create(const struct paths *p, const struct secbuf *pass, const struct vault_kdf *kdf,
             struct vault **out)
{
	struct vault *v = NULL;
	struct stat st;
	int r;

	*out = NULL;
	if (pass == NULL || pass->len == 0)
		return VERR_PASSPHRASE_EMPTY;
	if ((r = vault_kdf_check(kdf)) != 0)
		return r;
	if ((r = new_handle(p, &v)) != 0)
		return r;
	if ((r = safefile_dir(p->home, 1)) != 0 || (r = take_lock(p, v)) != 0)
		goto out;
	if (lstat(p->db, &st) == 0) {
		r = VERR_VAULT_EXISTS;
		goto out;
	}
	if (errno != ENOENT) {
		r = VERR_SYSTEM;
		goto out;
	}
	v->hdr.version = VAULTFMT_VERSION;
	v->hdr.kdf_alg = VAULTFMT_KDF_ARGON2ID13;
	v->hdr.kdf = *kdf;
	randombytes_buf(v->hdr.salt, sizeof(v->hdr.salt));
	if ((r = vaultfmt_derive_key(pass, &v->hdr, &v->key)) != 0)
		goto out;
	if ((r = secbuf_new(VAULT_AUDIT_KEY_LEN, &v->c.audit_key)) != 0)
		goto out;
	randombytes_buf(v->c.audit_key->data, VAULT_AUDIT_KEY_LEN);
	v->c.audit_key->len = VAULT_AUDIT_KEY_LEN;
	v->c.created = (int64_t)time(NULL);
	if ((r = vault_save(v)) != 0)
		goto out;
	*out = v;
	v = NULL;
out:
	vault_close(v);
	return r;
}

int
vault_open(const struct paths *p, const struct secbuf *pass, int mode, struct vault **out)
{
	struct vault *v = NULL;
	struct secbuf *pt = NULL;
	unsigned char *file = NULL;
	size_t flen = 0;
	int r;

	*out = NULL;
	if ((r = new_handle(p, &v)) != 0)
		return r;
	if (mode == VAULT_WRITE) {
		if ((r = take_lock(p, v)) != 0)
			goto out;
	} else if ((r = safefile_dir(p->home, 0)) != 0) {
		if (r == VERR_SYSTEM && errno == ENOENT)
			r = VERR_VAULT_MISSING;
		goto out;
	}
	if ((r = safefile_read(p->db, VAULTFMT_FILE_MAX, &file, &flen)) != 0) {
		if (r == VERR_SYSTEM && errno == ENOENT)
			r = VERR_VAULT_MISSING;
		else if (r == VERR_TOO_LARGE)
			r = VERR_VAULT_FORMAT;
		goto out;
	}
	if ((r = vaultfmt_open(file, flen, pass, &v->hdr, &v->key, &pt)) != 0)
		goto out;
	if ((r = vaultfmt_decode(pt->data, pt->len, &v->c)) != 0)
		goto out;
	*out = v;
	v = NULL;
out:
	free(file);
	secbuf_free(pt);
	vault_close(v);
	return r;
}

static int
same_file(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
	       a->st_mode == b->st_mode && a->st_uid == b->st_uid &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
	       a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

int
vault_refresh(struct vault *v)
{
	struct vaultfmt_header h;
	struct vaultfmt_contents c;
	struct secbuf *pt = NULL;
	unsigned char *file = NULL;
	size_t flen = 0;
	struct stat st;
	int r, have_st;

	/*
	 * Every change is a rename of a new file, and chmod or chown moves
	 * ctime: the same inode with the same times is what was loaded.
	 */
	have_st = lstat(v->db, &st) == 0;
	if (have_st && v->have_seen && same_file(&st, &v->seen))
		return VERR_OK;
	if ((r = safefile_read(v->db, VAULTFMT_FILE_MAX, &file, &flen)) != 0) {
		if (r == VERR_SYSTEM && errno == ENOENT)
			r = VERR_VAULT_MISSING;
		else if (r == VERR_TOO_LARGE)
			r = VERR_VAULT_FORMAT;
		goto out;
	}
	if ((r = vaultfmt_header_parse(file, flen, &h)) != 0)
		goto out;
	/* Same salt and cost, or our derived key cannot be the right one. */
	if (sodium_memcmp(h.salt, v->hdr.salt, sizeof(h.salt)) != 0 ||
	    h.kdf.opslimit != v->hdr.kdf.opslimit || h.kdf.memlimit != v->hdr.kdf.memlimit) {
		r = VERR_VAULT_REKEYED;
		goto out;
	}
	if ((r = vaultfmt_decrypt(file, flen, &h, v->key, &pt)) != 0 ||
	    (r = vaultfmt_decode(pt->data, pt->len, &c)) != 0)
		goto out;
	vaultfmt_contents_clear(&v->c);
	v->c = c;
	v->hdr = h;
	/* Only a file that did not change while it was read counts as seen. */
	v->have_seen = 0;
	if (have_st && lstat(v->db, &v->seen) == 0 && same_file(&st, &v->seen))
		v->have_seen = 1;
	r = VERR_OK;
out:
	free(file);
	secbuf_free(pt);
	return r;
}

int
vault_save(struct vault *v)
{
	struct secbuf *pt = NULL;
	unsigned char *file = NULL;
	size_t flen = 0;
	int r;

	if (v->lockfd < 0)
		return VERR_VAULT_READONLY;
	/* A fresh random nonce per save: 192 bits make reuse negligible. */
	randombytes_buf(v->hdr.nonce, sizeof(v->hdr.nonce));
	if ((r = vaultfmt_encode(&v->c, &pt)) != 0 ||
	    (r = vaultfmt_seal(&v->hdr, v->key, pt, &file, &flen)) != 0 ||
	    (r = safefile_replace(v->db, file, flen)) != 0)
		goto out;
	r = VERR_OK;
out:
	free(file);
	secbuf_free(pt);
	return r;
}

int
vault_rekey(struct vault *v, const struct secbuf *pass, const struct vault_kdf *kdf)
{
	struct vaultfmt_header old = v->hdr;
	struct secbuf *oldkey = v->key, *key = NULL;
	int r;

	if (v->lockfd < 0)
		return VERR_VAULT_READONLY;
	if (pass == NULL || pass->len == 0)
		return VERR_PASSPHRASE_EMPTY;
	if ((r = vault_kdf_check(kdf)) != 0)
		return r;
	v->hdr.kdf = *kdf;
	randombytes_buf(v->hdr.salt, sizeof(v->hdr.salt));
	if ((r = vaultfmt_derive_key(pass, &v->hdr, &key)) != 0)
		goto fail;
	v->key = key;
	if ((r = vault_save(v)) != 0)
		goto fail;
	secbuf_free(oldkey);
	return VERR_OK;
fail:
	/* The file still holds the old vault: keep the handle consistent with it. */
	v->hdr = old;
	v->key = oldkey;
	secbuf_free(key);
	return r;
}

size_t
vault_count(const struct vault *v)
{
	return v->c.nentries;
}

const struct vault_entry *
vault_entry_at(const struct vault *v, size_t i)
{
	return i < v->c.nentries ? v->c.entries[i] : NULL;
}

int
vault_find(const struct vault *v, const char *name, const struct vault_entry **out)
{
	*out = NULL;
	for (size_t i = 0; i < v->c.nentries; i++)
		if (strcmp(v->c.entries[i]->name, name) == 0) {
			*out = v->c.entries[i];
			return VERR_OK;
		}
	return VERR_KEY_UNKNOWN;
}

int
vault_resolve(const struct vault *v, const char *name, const struct vault_entry **out, int *exact)
{
	const struct vault_entry *hit = NULL;
	size_t n = strlen(name);

	*out = NULL;
	*exact = 0;
	if (vault_find(v, name, out) == 0) {
		*exact = 1;
		return VERR_OK;
	}
	if (n == 0)
		return VERR_KEY_UNKNOWN;
	for (size_t i = 0; i < v->c.nentries; i++) {
		if (strncmp(v->c.entries[i]->name, name, n) != 0)
			continue;
		if (hit != NULL)
			return VERR_KEY_AMBIGUOUS;
		hit = v->c.entries[i];
	}
	if (hit == NULL)
		return VERR_KEY_UNKNOWN;
	*out = hit;
	return VERR_OK;
}

int
vault_add(struct vault *v, struct vault_entry **e)
{
	struct vault_entry **grown;
	int r;

	if (v->lockfd < 0)
		return VERR_VAULT_READONLY;
	if ((r = vault_check_entry(*e)) != 0)
		return r;
	for (size_t i = 0; i < v->c.nentries; i++) {
		if (strcmp(v->c.entries[i]->name, (*e)->name) == 0)
			return VERR_KEY_EXISTS;
		if (strcmp(v->c.entries[i]->env, (*e)->env) == 0)
			return VERR_ENV_TAKEN;
	}
	if (v->c.nentries >= VAULT_ENTRIES_MAX)
		return VERR_TOO_MANY;
	grown = realloc(v->c.entries, (v->c.nentries + 1) * sizeof(*grown));
	if (grown == NULL)
		return VERR_NOMEM;
	v->c.entries = grown;
	(*e)->created = (*e)->changed = (int64_t)time(NULL);
	v->c.entries[v->c.nentries++] = *e;
	*e = NULL;
	return VERR_OK;
}

int
vault_remove(struct vault *v, const char *name)
{
	if (v->lockfd < 0)
		return VERR_VAULT_READONLY;
	for (size_t i = 0; i < v->c.nentries; i++) {
		if (strcmp(v->c.entries[i]->name, name) != 0)
			continue;
		vault_entry_free(v->c.entries[i]);
		memmove(&v->c.entries[i], &v->c.entries[i + 1],
		        (v->c.nentries - i - 1) * sizeof(v->c.entries[0]));
		v->c.nentries--;
		return VERR_OK;
	}
	return VERR_KEY_UNKNOWN;
}

const struct secbuf *
vault_audit_key(const struct vault *v)
{
	return v->c.audit_key;
}

int64_t
vault_created(const struct vault *v)
{
	return v->c.created;
}

const struct vault_kdf *
vault_kdf(const struct vault *v)
{
	return &v->hdr.kdf;
}

void
vault_close(struct vault *v)
{
	int saved = errno;

	if (v == NULL)
		return;
	vaultfmt_contents_clear(&v->c);
	secbuf_free(v->key);
	safefile_unlock(v->lockfd);
	free(v->db);
	sodium_memzero(v, sizeof(*v));
	free(v);
	errno = saved;
}
