/*
 * vault: the encrypted key store.
 *
 * One file, vault.db, under VAULT_HOME (see paths.h). Format and crypto are
 * in vaultfmt.h; this module owns the lifecycle: create, open (optionally
 * for writing, under an exclusive lock held until vault_close), edit in
 * memory, save atomically. Entries hold everything that decides where a
 * secret may go, so all of it is inside the authenticated ciphertext.
 *
 * All functions return 0 or a negative VERR_* code and clear their output
 * parameters on entry.
 */
#ifndef VRUN_VAULT_H
#define VRUN_VAULT_H

#include <stddef.h>
#include <stdint.h>

#include "hostspec.h"
#include "paths.h"
#include "secbuf.h"

#define VAULT_NAME_MAX       64
#define VAULT_ENV_MAX        64
#define VAULT_INJECT_ARG_MAX 255
#define VAULT_HOSTS_MAX      32
#define VAULT_ENTRIES_MAX    512
#define VAULT_SECRET_MAX     16384
#define VAULT_CA_MAX         (256 * 1024)
#define VAULT_AUDIT_KEY_LEN  32

enum vault_inject {
	VAULT_INJECT_PLACEHOLDER = 1, /* swap the placeholder in request line and headers */
	VAULT_INJECT_BEARER = 2,      /* Authorization: Bearer <secret> */
	VAULT_INJECT_BASIC = 3,       /* Authorization: Basic base64(arg:secret) */
	VAULT_INJECT_HEADER = 4,      /* <arg>: <secret> */
	VAULT_INJECT_QUERY = 5,       /* ?<arg>=<secret> */
};

struct vault_entry {
	char name[VAULT_NAME_MAX + 1];
	struct secbuf *secret;
	struct hostspec hosts[VAULT_HOSTS_MAX];
	size_t nhosts;
	uint8_t inject; /* enum vault_inject */
	char inject_arg[VAULT_INJECT_ARG_MAX + 1];
	char env[VAULT_ENV_MAX + 1];
	uint8_t allow_http;
	unsigned char *ca; /* PEM bundle contents (not secret), malloc'd, or NULL */
	size_t ca_len;
	int64_t created; /* unix seconds */
	int64_t changed;
};

/* Argon2id cost. */
struct vault_kdf {
	uint64_t opslimit;
	uint64_t memlimit;
};

enum { VAULT_READ = 0, VAULT_WRITE = 1 };

struct vault;

/* Named cost profiles: "interactive", "moderate" (default), "sensitive". */
int vault_kdf_named(const char *name, struct vault_kdf *out);

/* Is kdf within the bounds accepted from a file? 0 or VERR_VAULT_KDF. */
int vault_kdf_check(const struct vault_kdf *kdf);

/*
 * Create a new, empty vault with a fresh audit key and leave it open for
 * writing. VERR_VAULT_EXISTS when one is there already.
 */
int vault_create(const struct paths *p, const struct secbuf *pass, const struct vault_kdf *kdf,
                 struct vault **out);

/*
 * Open and decrypt. With VAULT_WRITE the exclusive lock is taken first and
 * kept until vault_close, so read-modify-write cycles are serialized.
 * VERR_VAULT_MISSING, VERR_VAULT_FORMAT, VERR_VAULT_KDF, VERR_VAULT_DECRYPT,
 * VERR_VAULT_CORRUPT, VERR_INSECURE_PATH, ...
 */
int vault_open(const struct paths *p, const struct secbuf *pass, int mode, struct vault **out);

/*
 * Re-read vault.db with the key derived at open, so a long-running daemon
 * sees keys added or removed since, without asking for the passphrase
 * again. On any error the handle keeps its previous contents.
 * VERR_VAULT_REKEYED when the passphrase (salt or cost) was changed.
 */
int vault_refresh(struct vault *v);

/* Encrypt with a fresh nonce and replace vault.db atomically. */
int vault_save(struct vault *v);

/* New passphrase (fresh salt, given cost), then save. */
int vault_rekey(struct vault *v, const struct secbuf *pass, const struct vault_kdf *kdf);

size_t vault_count(const struct vault *v);
const struct vault_entry *vault_entry_at(const struct vault *v, size_t i);

/* Exact name; VERR_KEY_UNKNOWN. */
int vault_find(const struct vault *v, const char *name, const struct vault_entry **out);

/*
 * Exact name, else the one key that name is a prefix of. *exact tells
 * which. VERR_KEY_UNKNOWN or VERR_KEY_AMBIGUOUS.
 */
int vault_resolve(const struct vault *v, const char *name, const struct vault_entry **out,
                  int *exact);

/*
 * Add *e (ownership moves in on success; *e set to NULL). Validates the
 * entry and refuses a taken name or placeholder variable. Sets the times.
 * Not saved until vault_save.
 */
int vault_add(struct vault *v, struct vault_entry **e);

int vault_remove(struct vault *v, const char *name);

const struct secbuf *vault_audit_key(const struct vault *v);
int64_t vault_created(const struct vault *v);
const struct vault_kdf *vault_kdf(const struct vault *v);

/* Wipe everything and drop the lock; NULL is fine. */
void vault_close(struct vault *v);

/* Entries. */
int vault_entry_new(struct vault_entry **out);
void vault_entry_free(struct vault_entry *e);

/* Field checks shared by the CLI, the file decoder and the proxy. */
int vault_check_name(const char *name);
int vault_check_secret(const struct secbuf *s);
int vault_check_env(const char *env);
int vault_default_env(const char *name, char *buf, size_t size);
int vault_parse_inject(const char *spec, uint8_t *mode, char *arg, size_t argsize);
int vault_format_inject(uint8_t mode, const char *arg, char *buf, size_t size);
int vault_check_ca(const unsigned char *pem, size_t len);
/* Whole entry: all of the above plus host count. */
int vault_check_entry(const struct vault_entry *e);

#endif
