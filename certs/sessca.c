/* Deprecated OpenSSL calls must not even be declared here. */
#define OPENSSL_API_COMPAT 30000
#define OPENSSL_NO_DEPRECATED

#include "sessca.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "verr.h"

/* Leaves outlive neither the CA nor a day, even if the CA is made longer. */
#define LEAF_LIFETIME (24L * 60 * 60)
/* ub-common-name (RFC 5280): a longer CN is invalid, so the SAN stands alone. */
#define CN_MAX 64
/* A system roots file is some hundred KiB; refuse anything absurd. */
#define ROOTS_MAX (16L * 1024 * 1024)

struct leafent {
	char host[HOSTSPEC_NAME_MAX + 1];
	uint8_t kind;
	uint64_t used; /* LRU clock */
	X509 *cert;
};

struct sessca {
	EVP_PKEY *key; /* CA key: only ever in memory */
	X509 *cert;
	EVP_PKEY *leafkey; /* one key for all leaves of the session */
	char *pem;
	size_t pemlen;
	unsigned char skid[EVP_MAX_MD_SIZE];
	unsigned int skidlen;
	time_t not_after;
	struct hostspec *hosts;
	size_t nhosts;
	struct leafent *cache;
	size_t ncache;
	size_t capcache;
	uint64_t clock;
};

/* The system roots, read once and re-read only when the file changes. */
static struct {
	pthread_mutex_t lock;
	char *path;
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
	char *bytes;
	size_t len;
} roots = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int
valid_spec(const struct hostspec *h, int allow_wildcard)
{
	unsigned char addr[16];

	if (memchr(h->host, '\0', sizeof(h->host)) == NULL || h->host[0] == '\0')
		return 0;
	switch (h->kind) {
	case HOSTSPEC_NAME:
		return !h->wildcard || allow_wildcard;
	case HOSTSPEC_IPV4:
		return !h->wildcard && inet_pton(AF_INET, h->host, addr) == 1;
	case HOSTSPEC_IPV6:
		return !h->wildcard && inet_pton(AF_INET6, h->host, addr) == 1;
	}
	return 0;
}

/* 16 random bytes, top bit clear (positive) and next bit set (always 16 octets, never 0). */
static int
set_random_serial(X509 *x)
{
	unsigned char b[16];
	BIGNUM *bn = NULL;
	int r = VERR_CRYPTO;

	if (RAND_bytes(b, sizeof(b)) != 1)
		goto out;
	b[0] = (unsigned char)((b[0] & 0x7f) | 0x40);
	if ((bn = BN_bin2bn(b, sizeof(b), NULL)) == NULL)
		goto out;
	if (BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) == NULL)
		goto out;
	r = VERR_OK;
out:
	BN_free(bn);
	return r;
}

static int
set_validity(X509 *x, time_t from, time_t to)
{
	if (ASN1_TIME_set(X509_getm_notBefore(x), from) == NULL ||
	    ASN1_TIME_set(X509_getm_notAfter(x), to) == NULL)
		return VERR_CRYPTO;
	return VERR_OK;
}

static int
add_cn(X509_NAME *n, const char *cn)
{
	if (X509_NAME_add_entry_by_NID(n, NID_commonName, MBSTRING_UTF8, (const unsigned char *)cn,
	                               -1, -1, 0) != 1)
		return VERR_CRYPTO;
	return VERR_OK;
}

static int
add_key_usage(X509 *x, int bits)
{
	ASN1_BIT_STRING *ku = ASN1_BIT_STRING_new();
	int r = VERR_CRYPTO;

	if (ku == NULL)
		goto out;
	for (int bit = 0; bit < 9; bit++)
		if ((bits & (1 << bit)) && ASN1_BIT_STRING_set_bit(ku, bit, 1) != 1)
			goto out;
	if (X509_add1_ext_i2d(x, NID_key_usage, ku, 1, X509V3_ADD_REPLACE) != 1)
		goto out;
	r = VERR_OK;
out:
	ASN1_BIT_STRING_free(ku);
	return r;
}

/* Key usage bit numbers (RFC 5280 4.2.1.3). */
enum { KU_BIT_DIGSIG = 0, KU_BIT_CERTSIGN = 5, KU_BIT_CRLSIGN = 6 };

static int
add_basic_constraints(X509 *x, int ca)
{
	BASIC_CONSTRAINTS *bc = BASIC_CONSTRAINTS_new();
	int r = VERR_CRYPTO;

	if (bc == NULL)
		goto out;
	bc->ca = ca ? 0xff : 0;
	if (ca) {
		/* pathlen 0: the session CA can never delegate to another CA. */
		if ((bc->pathlen = ASN1_INTEGER_new()) == NULL ||
		    ASN1_INTEGER_set(bc->pathlen, 0) != 1)
			goto out;
	}
	if (X509_add1_ext_i2d(x, NID_basic_constraints, bc, 1, X509V3_ADD_REPLACE) != 1)
		goto out;
	r = VERR_OK;
out:
	BASIC_CONSTRAINTS_free(bc);
	return r;
}

/* A GENERAL_NAME of type GEN_DNS or GEN_IPADD holding len bytes. */
static GENERAL_NAME *
general_name(int type, const void *data, size_t len)
{
	GENERAL_NAME *gn = GENERAL_NAME_new();
	ASN1_STRING *s = type == GEN_DNS ? ASN1_IA5STRING_new() : ASN1_OCTET_STRING_new();

	if (gn == NULL || s == NULL || ASN1_STRING_set(s, data, (int)len) != 1) {
		GENERAL_NAME_free(gn);
		ASN1_STRING_free(s);
		return NULL;
	}
	GENERAL_NAME_set0_value(gn, type, s);
	return gn;
}

/* Append a subtree to *sk (created on demand), skipping exact duplicates. */
static int
add_subtree(STACK_OF(GENERAL_SUBTREE) * *sk, int type, const void *data, size_t len)
{
	GENERAL_SUBTREE *sub = NULL;
	GENERAL_NAME *gn = NULL;
	int r = VERR_CRYPTO;

	if ((gn = general_name(type, data, len)) == NULL)
		goto out;
	if (*sk == NULL && (*sk = sk_GENERAL_SUBTREE_new_null()) == NULL)
		goto out;
	for (int i = 0; i < sk_GENERAL_SUBTREE_num(*sk); i++) {
		if (GENERAL_NAME_cmp(sk_GENERAL_SUBTREE_value(*sk, i)->base, gn) == 0) {
			r = VERR_OK;
			goto out;
		}
	}
	if ((sub = GENERAL_SUBTREE_new()) == NULL)
		goto out;
	GENERAL_NAME_free(sub->base);
	sub->base = gn;
	gn = NULL;
	if (sk_GENERAL_SUBTREE_push(*sk, sub) <= 0)
		goto out;
	sub = NULL;
	r = VERR_OK;
out:
	GENERAL_SUBTREE_free(sub);
	GENERAL_NAME_free(gn);
	return r;
}

/*
 * RFC 5280 applies a constraint only to name forms it lists: a CA that
 * permitted only dNSNames would still be good for any IP address, and one
 * with no subtrees at all for anything. So every form a TLS client checks
 * (dNSName, iPAddress, and the CN that OpenSSL treats as a dNSName when no
 * DNS SAN is present) is either permitted exactly the session's bindings
 * or excluded entirely: an empty dNSName base matches every name (OpenSSL
 * nc_dns "empty matches everything", likewise Go and GnuTLS) and
 * 0.0.0.0/0 and ::/0 every address. With no bindings this leaves no name
 * at all that verifies.
 */
static int
add_name_constraints(X509 *x, const struct hostspec *hosts, size_t nhosts)
{
	static const unsigned char any4[8], any6[32];
	NAME_CONSTRAINTS *nc = NAME_CONSTRAINTS_new();
	int ndns = 0, nip = 0, r = VERR_CRYPTO;

	if (nc == NULL)
		goto out;
	for (size_t i = 0; i < nhosts; i++) {
		const struct hostspec *h = &hosts[i];
		unsigned char ip[32];

		if (h->kind == HOSTSPEC_NAME) {
			/*
			 * For *.example.com the base is example.com: a dNSName
			 * constraint covers the name and every subdomain, and
			 * RFC 5280 has no subdomains-only form (".example.com"
			 * is not portable). So the bare domain is also
			 * permitted here; the proxy's binding check, which
			 * refuses to mint it, is the precise gate.
			 */
			r = add_subtree(&nc->permittedSubtrees, GEN_DNS, h->host, strlen(h->host));
			ndns++;
		} else {
			/* One address: a full-length mask (/32, /128). */
			size_t alen = h->kind == HOSTSPEC_IPV4 ? 4 : 16;

			r = VERR_INVALID;
			if (inet_pton(alen == 4 ? AF_INET : AF_INET6, h->host, ip) != 1)
				goto out;
			memset(ip + alen, 0xff, alen);
			r = add_subtree(&nc->permittedSubtrees, GEN_IPADD, ip, 2 * alen);
			nip++;
		}
		if (r != VERR_OK)
			goto out;
	}
	if (ndns == 0 && (r = add_subtree(&nc->excludedSubtrees, GEN_DNS, "", 0)) != VERR_OK)
		goto out;
	if (nip == 0) {
		if ((r = add_subtree(&nc->excludedSubtrees, GEN_IPADD, any4, sizeof(any4))) != 0 ||
		    (r = add_subtree(&nc->excludedSubtrees, GEN_IPADD, any6, sizeof(any6))) != 0)
			goto out;
	}
	r = VERR_CRYPTO;
	/* Critical: a client that cannot enforce the constraints must reject the CA. */
	if (X509_add1_ext_i2d(x, NID_name_constraints, nc, 1, X509V3_ADD_REPLACE) != 1)
		goto out;
	r = VERR_OK;
out:
	NAME_CONSTRAINTS_free(nc);
	return r;
}

/* RFC 5280 4.2.1.2 method 1: SHA-1 of the subjectPublicKey bits (an identifier, not a MAC). */
static int
add_skid(struct sessca *ca)
{
	ASN1_BIT_STRING *pub = X509_get0_pubkey_bitstr(ca->cert);
	ASN1_OCTET_STRING *id = NULL;
	int r = VERR_CRYPTO;

	if (pub == NULL || EVP_Digest(ASN1_STRING_get0_data(pub), (size_t)ASN1_STRING_length(pub),
	                              ca->skid, &ca->skidlen, EVP_sha1(), NULL) != 1)
		goto out;
	if ((id = ASN1_OCTET_STRING_new()) == NULL ||
	    ASN1_OCTET_STRING_set(id, ca->skid, (int)ca->skidlen) != 1)
		goto out;
	if (X509_add1_ext_i2d(ca->cert, NID_subject_key_identifier, id, 0, X509V3_ADD_REPLACE) != 1)
		goto out;
	r = VERR_OK;
out:
	ASN1_OCTET_STRING_free(id);
	return r;
}

static int
add_akid(X509 *x, const struct sessca *ca)
{
	AUTHORITY_KEYID *akid = AUTHORITY_KEYID_new();
	int r = VERR_CRYPTO;

	if (akid == NULL || (akid->keyid = ASN1_OCTET_STRING_new()) == NULL ||
	    ASN1_OCTET_STRING_set(akid->keyid, ca->skid, (int)ca->skidlen) != 1)
		goto out;
	if (X509_add1_ext_i2d(x, NID_authority_key_identifier, akid, 0, X509V3_ADD_REPLACE) != 1)
		goto out;
	r = VERR_OK;
out:
	AUTHORITY_KEYID_free(akid);
	return r;
}

static int
add_eku_server(X509 *x)
{
	EXTENDED_KEY_USAGE *eku = sk_ASN1_OBJECT_new_null();
	ASN1_OBJECT *obj = OBJ_nid2obj(NID_server_auth);
	int r = VERR_CRYPTO;

	if (eku == NULL || obj == NULL || sk_ASN1_OBJECT_push(eku, obj) <= 0)
		goto out;
	if (X509_add1_ext_i2d(x, NID_ext_key_usage, eku, 0, X509V3_ADD_REPLACE) != 1)
		goto out;
	r = VERR_OK;
out:
	sk_ASN1_OBJECT_free(eku); /* obj is OpenSSL's static table entry */
	return r;
}

static int
add_san(X509 *x, const struct hostspec *h, int critical)
{
	GENERAL_NAMES *gens = sk_GENERAL_NAME_new_null();
	GENERAL_NAME *gn = NULL;
	unsigned char ip[16];
	int r = VERR_CRYPTO;

	if (gens == NULL)
		goto out;
	if (h->kind == HOSTSPEC_NAME) {
		gn = general_name(GEN_DNS, h->host, strlen(h->host));
	} else {
		size_t alen = h->kind == HOSTSPEC_IPV4 ? 4 : 16;

		if (inet_pton(alen == 4 ? AF_INET : AF_INET6, h->host, ip) != 1) {
			r = VERR_INVALID;
			goto out;
		}
		gn = general_name(GEN_IPADD, ip, alen);
	}
	if (gn == NULL || sk_GENERAL_NAME_push(gens, gn) <= 0)
		goto out;
	gn = NULL;
	if (X509_add1_ext_i2d(x, NID_subject_alt_name, gens, critical, X509V3_ADD_REPLACE) != 1)
		goto out;
	r = VERR_OK;
out:
	GENERAL_NAME_free(gn);
	GENERAL_NAMES_free(gens);
	return r;
}

static int
sign(X509 *x, EVP_PKEY *key)
{
	return X509_sign(x, key, EVP_sha256()) > 0 ? VERR_OK : VERR_CRYPTO;
}

static int
make_pem(struct sessca *ca)
{
	BIO *bio = BIO_new(BIO_s_mem());
	char *data;
	long len;
	int r = VERR_CRYPTO;

	if (bio == NULL || PEM_write_bio_X509(bio, ca->cert) != 1)
		goto out;
	if ((len = BIO_get_mem_data(bio, &data)) <= 0)
		goto out;
	r = VERR_NOMEM;
	if ((ca->pem = malloc((size_t)len + 1)) == NULL)
		goto out;
	memcpy(ca->pem, data, (size_t)len);
	ca->pem[len] = '\0';
	ca->pemlen = (size_t)len;
	r = VERR_OK;
out:
	BIO_free(bio);
	return r;
}

static int
make_ca(struct sessca *ca, long lifetime)
{
	unsigned char id[4];
	char cn[64];
	time_t now = time(NULL);
	X509_NAME *name;
	int r = VERR_CRYPTO;

	if ((ca->key = EVP_EC_gen("P-256")) == NULL || (ca->leafkey = EVP_EC_gen("P-256")) == NULL)
		goto out;
	if ((ca->cert = X509_new()) == NULL || X509_set_version(ca->cert, X509_VERSION_3) != 1)
		goto out;
	if ((r = set_random_serial(ca->cert)) != 0)
		goto out;
	r = VERR_CRYPTO;
	/* A random id in the name, so sessions are told apart in client errors. */
	if (RAND_bytes(id, sizeof(id)) != 1)
		goto out;
	snprintf(cn, sizeof(cn), "vrun session CA %02x%02x%02x%02x", id[0], id[1], id[2], id[3]);
	name = X509_get_subject_name(ca->cert);
	if ((r = add_cn(name, cn)) != 0)
		goto out;
	r = VERR_CRYPTO;
	if (X509_set_issuer_name(ca->cert, name) != 1 || X509_set_pubkey(ca->cert, ca->key) != 1)
		goto out;
	/* Backdated a little so that a client whose clock lags still accepts it. */
	ca->not_after = now + lifetime;
	if ((r = set_validity(ca->cert, now - SESSCA_BACKDATE, ca->not_after)) != 0 ||
	    (r = add_basic_constraints(ca->cert, 1)) != 0 ||
	    (r = add_key_usage(ca->cert, (1 << KU_BIT_CERTSIGN) | (1 << KU_BIT_CRLSIGN))) != 0 ||
	    (r = add_skid(ca)) != 0 ||
	    (r = add_name_constraints(ca->cert, ca->hosts, ca->nhosts)) != 0 ||
	    (r = sign(ca->cert, ca->key)) != 0)
		goto out;
	r = make_pem(ca);
out:
	return r;
}

int
sessca_new_lifetime(const struct hostspec *hosts, size_t nhosts, long lifetime, struct sessca **out)
{
	struct sessca *ca = NULL;
	int r = VERR_INVALID;

	if (out != NULL)
		*out = NULL;
	if (out == NULL || (hosts == NULL && nhosts > 0) || lifetime < 1 ||
	    lifetime > SESSCA_LIFETIME_MAX)
		goto out;
	r = VERR_TOO_MANY;
	if (nhosts > SESSCA_HOSTS_MAX)
		goto out;
	r = VERR_INVALID;
	for (size_t i = 0; i < nhosts; i++)
		if (!valid_spec(&hosts[i], 1))
			goto out;
	r = VERR_NOMEM;
	if ((ca = calloc(1, sizeof(*ca))) == NULL)
		goto out;
	if (nhosts > 0) {
		if ((ca->hosts = calloc(nhosts, sizeof(*ca->hosts))) == NULL)
			goto out;
		memcpy(ca->hosts, hosts, nhosts * sizeof(*hosts));
		ca->nhosts = nhosts;
	}
	if ((r = make_ca(ca, lifetime)) != 0)
		goto out;
	*out = ca;
	ca = NULL;
out:
	sessca_free(ca);
	return r;
}

int
sessca_new(const struct hostspec *hosts, size_t nhosts, struct sessca **out)
{
	return sessca_new_lifetime(hosts, nhosts, SESSCA_LIFETIME_DEFAULT, out);
}

static int
mint(struct sessca *ca, const struct hostspec *h, X509 **out)
{
	time_t now = time(NULL), until;
	X509 *x = NULL;
	int subject, r = VERR_CERT_EXPIRED;

	*out = NULL;
	if (now >= ca->not_after)
		goto out;
	until = now + LEAF_LIFETIME < ca->not_after ? now + LEAF_LIFETIME : ca->not_after;
	r = VERR_CRYPTO;
	if ((x = X509_new()) == NULL || X509_set_version(x, X509_VERSION_3) != 1)
		goto out;
	if ((r = set_random_serial(x)) != 0)
		goto out;
	/*
	 * CN only for DNS names that fit: OpenSSL checks a CN that looks like
	 * a host name against the dNSName constraints when no DNS SAN exists,
	 * so an address in the CN of an IP leaf would be refused by them.
	 * Without a subject the SAN must be critical (RFC 5280 4.2.1.6).
	 */
	subject = h->kind == HOSTSPEC_NAME && strlen(h->host) <= CN_MAX;
	if (subject && (r = add_cn(X509_get_subject_name(x), h->host)) != 0)
		goto out;
	r = VERR_CRYPTO;
	if (X509_set_issuer_name(x, X509_get_subject_name(ca->cert)) != 1 ||
	    X509_set_pubkey(x, ca->leafkey) != 1)
		goto out;
	if ((r = set_validity(x, now - SESSCA_BACKDATE, until)) != 0 ||
	    (r = add_basic_constraints(x, 0)) != 0 ||
	    (r = add_key_usage(x, 1 << KU_BIT_DIGSIG)) != 0 || (r = add_eku_server(x)) != 0 ||
	    (r = add_san(x, h, !subject)) != 0 || (r = add_akid(x, ca)) != 0 ||
	    (r = sign(x, ca->key)) != 0)
		goto out;
	*out = x;
	x = NULL;
out:
	X509_free(x);
	return r;
}

static int
bound(const struct sessca *ca, const struct hostspec *target)
{
	struct hostspec t = *target;

	/* Certificates carry no port: a binding on any port admits the host. */
	for (size_t i = 0; i < ca->nhosts; i++) {
		t.port = ca->hosts[i].port;
		if (hostspec_match(&ca->hosts[i], &t))
			return 1;
	}
	return 0;
}

static struct leafent *
cache_find(struct sessca *ca, const struct hostspec *h)
{
	for (size_t i = 0; i < ca->ncache; i++)
		if (ca->cache[i].kind == h->kind && strcmp(ca->cache[i].host, h->host) == 0)
			return &ca->cache[i];
	return NULL;
}

/* A free slot, growing the array up to SESSCA_CACHE_MAX, then the least recently used. */
static struct leafent *
cache_slot(struct sessca *ca)
{
	struct leafent *e;

	if (ca->ncache == ca->capcache && ca->capcache < SESSCA_CACHE_MAX) {
		size_t cap = ca->capcache == 0 ? 8 : 2 * ca->capcache;

		if (cap > SESSCA_CACHE_MAX)
			cap = SESSCA_CACHE_MAX;
		if ((e = realloc(ca->cache, cap * sizeof(*e))) == NULL)
			return NULL;
		ca->cache = e;
		ca->capcache = cap;
	}
	if (ca->ncache < ca->capcache)
		return &ca->cache[ca->ncache++];
	e = &ca->cache[0];
	for (size_t i = 1; i < ca->ncache; i++)
		if (ca->cache[i].used < e->used)
			e = &ca->cache[i];
	/* Callers hold their own references: evicting frees only ours. */
	X509_free(e->cert);
	e->cert = NULL;
	return e;
}

int
sessca_leaf(struct sessca *ca, const struct hostspec *target, X509 **cert, EVP_PKEY **key)
{
	struct leafent *e;
	X509 *x = NULL;
	int r = VERR_INVALID;

	if (cert != NULL)
		*cert = NULL;
	if (key != NULL)
		*key = NULL;
	if (ca == NULL || target == NULL || cert == NULL || !valid_spec(target, 0))
		goto out;
	r = VERR_CERT_UNBOUND;
	if (!bound(ca, target))
		goto out;
	if ((e = cache_find(ca, target)) == NULL) {
		if ((r = mint(ca, target, &x)) != 0)
			goto out;
		r = VERR_NOMEM;
		if ((e = cache_slot(ca)) == NULL)
			goto out;
		memcpy(e->host, target->host, sizeof(e->host));
		e->kind = target->kind;
		e->cert = x;
		x = NULL;
	} else if (time(NULL) >= ca->not_after) {
		r = VERR_CERT_EXPIRED;
		goto out;
	}
	e->used = ++ca->clock;
	r = VERR_CRYPTO;
	if (X509_up_ref(e->cert) != 1)
		goto out;
	if (key != NULL && EVP_PKEY_up_ref(ca->leafkey) != 1) {
		X509_free(e->cert);
		goto out;
	}
	*cert = e->cert;
	if (key != NULL)
		*key = ca->leafkey;
	r = VERR_OK;
out:
	X509_free(x);
	return r;
}

int
sessca_mint_unchecked(struct sessca *ca, const struct hostspec *target, X509 **cert)
{
	if (cert != NULL)
		*cert = NULL;
	if (ca == NULL || target == NULL || cert == NULL || !valid_spec(target, 0))
		return VERR_INVALID;
	return mint(ca, target, cert);
}

X509 *
sessca_cert(const struct sessca *ca)
{
	return ca != NULL ? ca->cert : NULL;
}

int
sessca_pem(const struct sessca *ca, char **pem, size_t *len)
{
	if (pem != NULL)
		*pem = NULL;
	if (len != NULL)
		*len = 0;
	if (ca == NULL || pem == NULL || len == NULL)
		return VERR_INVALID;
	if ((*pem = malloc(ca->pemlen + 1)) == NULL)
		return VERR_NOMEM;
	memcpy(*pem, ca->pem, ca->pemlen + 1);
	*len = ca->pemlen;
	return VERR_OK;
}

size_t
sessca_cache_count(const struct sessca *ca)
{
	return ca != NULL ? ca->ncache : 0;
}

/* Up to len bytes into buf; *got is short only if the file shrank under us. */
static int
read_all(int fd, char *buf, size_t len, size_t *got)
{
	*got = 0;
	while (*got < len) {
		ssize_t n = read(fd, buf + *got, len - *got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return VERR_SYSTEM;
		if (n == 0)
			break;
		*got += (size_t)n;
	}
	return VERR_OK;
}

/*
 * Make roots.bytes hold path's contents (empty when the file does not
 * exist). Called with roots.lock held. A stat() per session keeps the
 * cache right when ca-certificates is updated under a running vproxy.
 */
static int
roots_load(const char *path)
{
	struct stat st;
	char *bytes = NULL, *copy = NULL;
	size_t got;
	int fd = -1, r = VERR_SYSTEM;

	if (stat(path, &st) != 0) {
		if (errno != ENOENT && errno != ENOTDIR)
			goto out;
		/* No system roots (a minimal container): the session CA alone. */
		free(roots.path);
		free(roots.bytes);
		roots.path = NULL;
		roots.bytes = NULL;
		roots.len = 0;
		r = VERR_OK;
		goto out;
	}
	if (roots.path != NULL && strcmp(roots.path, path) == 0 && roots.dev == st.st_dev &&
	    roots.ino == st.st_ino && roots.size == st.st_size &&
	    roots.mtime.tv_sec == st.st_mtim.tv_sec && roots.mtime.tv_nsec == st.st_mtim.tv_nsec) {
		r = VERR_OK;
		goto out;
	}
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY)) < 0)
		goto out;
	if (fstat(fd, &st) != 0)
		goto out;
	if (!S_ISREG(st.st_mode)) {
		errno = EINVAL;
		goto out;
	}
	r = VERR_TOO_LARGE;
	if (st.st_size > ROOTS_MAX)
		goto out;
	r = VERR_NOMEM;
	if ((bytes = malloc((size_t)st.st_size + 1)) == NULL || (copy = strdup(path)) == NULL)
		goto out;
	if ((r = read_all(fd, bytes, (size_t)st.st_size, &got)) != 0)
		goto out;
	free(roots.path);
	free(roots.bytes);
	roots.path = copy;
	roots.bytes = bytes;
	roots.len = got;
	roots.dev = st.st_dev;
	roots.ino = st.st_ino;
	roots.size = st.st_size;
	roots.mtime = st.st_mtim;
	copy = NULL;
	bytes = NULL;
	r = VERR_OK;
out:
	if (fd >= 0)
		close(fd);
	free(bytes);
	free(copy);
	return r;
}

static int
write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return VERR_SYSTEM;
		buf += n;
		len -= (size_t)n;
	}
	return VERR_OK;
}

int
sessca_write_bundle(const struct sessca *ca, const char *dir, const char *roots_file,
                    char **path_out)
{
	unsigned char rnd[16];
	char name[sizeof("ca-.pem") + 2 * sizeof(rnd)], *path = NULL;
	size_t plen;
	int fd = -1, locked = 0, created = 0, saved, r = VERR_INVALID;

	if (path_out != NULL)
		*path_out = NULL;
	if (ca == NULL || dir == NULL || dir[0] == '\0' || path_out == NULL)
		goto out;
	if (roots_file == NULL)
		roots_file = X509_get_default_cert_file();
	r = VERR_CRYPTO;
	if (RAND_bytes(rnd, sizeof(rnd)) != 1)
		goto out;
	memcpy(name, "ca-", 3);
	for (size_t i = 0; i < sizeof(rnd); i++)
		snprintf(name + 3 + 2 * i, 3, "%02x", rnd[i]);
	memcpy(name + 3 + 2 * sizeof(rnd), ".pem", sizeof(".pem"));
	r = VERR_TOO_LARGE;
	plen = strlen(dir) + 1 + strlen(name) + 1;
	if (plen > PATH_MAX)
		goto out;
	r = VERR_NOMEM;
	if ((path = malloc(plen)) == NULL)
		goto out;
	memcpy(path, dir, strlen(dir));
	path[strlen(dir)] = '/';
	memcpy(path + strlen(dir) + 1, name, strlen(name) + 1);

	if (pthread_mutex_lock(&roots.lock) != 0) {
		r = VERR_SYSTEM;
		goto out;
	}
	locked = 1;
	if ((r = roots_load(roots_file)) != 0)
		goto out;
	/*
	 * A fresh name, never an existing file or a planted symlink. 0644:
	 * the bundle holds only public certificates, and its integrity comes
	 * from the private 0700 directory and from no one else being able to
	 * write it; readable by all so a child whose user namespace maps
	 * another uid can still load it.
	 */
	r = VERR_SYSTEM;
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0644);
	if (fd < 0)
		goto out;
	created = 1;
	/* Exactly 0644 whatever the umask, so the child's view does not vary. */
	if (fchmod(fd, 0644) != 0)
		goto out;
	if ((r = write_all(fd, roots.bytes, roots.len)) != 0)
		goto out;
	if (roots.len > 0 && roots.bytes[roots.len - 1] != '\n' &&
	    (r = write_all(fd, "\n", 1)) != 0)
		goto out;
	if ((r = write_all(fd, ca->pem, ca->pemlen)) != 0)
		goto out;
	r = VERR_SYSTEM;
	if (close(fd) != 0) {
		fd = -1;
		goto out;
	}
	fd = -1;
	*path_out = path;
	path = NULL;
	r = VERR_OK;
out:
	saved = errno;
	if (locked)
		pthread_mutex_unlock(&roots.lock);
	if (fd >= 0)
		close(fd);
	/* Never leave a partial bundle behind: the child would trust half a list. */
	if (created && r != VERR_OK)
		unlink(path);
	free(path);
	errno = saved;
	return r;
}

int
sessca_remove_bundle(const char *path)
{
	if (path == NULL)
		return VERR_INVALID;
	return unlink(path) == 0 ? VERR_OK : VERR_SYSTEM;
}

void
sessca_free(struct sessca *ca)
{
	if (ca == NULL)
		return;
	for (size_t i = 0; i < ca->ncache; i++)
		X509_free(ca->cache[i].cert);
	free(ca->cache);
	X509_free(ca->cert);
	/* EVP_PKEY_free cleanses the private scalar (BN_clear_free). */
	EVP_PKEY_free(ca->key);
	EVP_PKEY_free(ca->leafkey);
	free(ca->pem);
	free(ca->hosts);
	free(ca);
}
