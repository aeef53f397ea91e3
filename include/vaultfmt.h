/*
 * vaultfmt: the bytes of vault.db, kept apart from file handling so the
 * decoders can be unit-tested and fuzzed on their own.
 *
 * File = header || XChaCha20-Poly1305(key, nonce, plaintext, ad = header)
 *
 * header (68 bytes, big-endian integers):
 *   magic "VRUNVLT\n" | u16 version (1) | u16 kdf (1 = Argon2id v1.3)
 *   | u64 opslimit | u64 memlimit | salt[16] | nonce[24]
 *
 * key = Argon2id(passphrase, salt, opslimit, memlimit), 32 bytes.
 * The whole header is associated data: changing the version, the KDF
 * parameters, the salt or the nonce makes decryption fail.
 *
 * plaintext (v1): "VPT1" | u64 created | bytes audit_key | u32 n | n entries
 * entry: str name | bytes secret | u32 nhosts | nhosts str "host:port"
 *        | u8 inject | str inject_arg | str env | u8 allow_http | bytes ca
 *        | u64 created | u64 changed
 * str/bytes = u32 length | bytes. Every field is re-validated on decode;
 * trailing bytes are an error.
 */
#ifndef VRUN_VAULTFMT_H
#define VRUN_VAULTFMT_H

#include <stddef.h>
#include <stdint.h>

#include "secbuf.h"
#include "vault.h"

#define VAULTFMT_MAGIC          "VRUNVLT\n"
#define VAULTFMT_VERSION        1
#define VAULTFMT_KDF_ARGON2ID13 1
#define VAULTFMT_SALT_LEN       16
#define VAULTFMT_NONCE_LEN      24
#define VAULTFMT_HEADER_LEN     68
#define VAULTFMT_TAG_LEN        16
#define VAULTFMT_KEY_LEN        32
#define VAULTFMT_PLAINTEXT_MAX  (64u * 1024 * 1024)
#define VAULTFMT_FILE_MAX       (VAULTFMT_HEADER_LEN + VAULTFMT_PLAINTEXT_MAX + VAULTFMT_TAG_LEN)

struct vaultfmt_header {
	uint16_t version;
	uint16_t kdf_alg;
	struct vault_kdf kdf;
	unsigned char salt[VAULTFMT_SALT_LEN];
	unsigned char nonce[VAULTFMT_NONCE_LEN];
};

/* Everything inside the ciphertext. */
struct vaultfmt_contents {
	int64_t created;
	struct secbuf *audit_key;
	struct vault_entry **entries;
	size_t nentries;
};

void vaultfmt_header_pack(const struct vaultfmt_header *h, unsigned char out[VAULTFMT_HEADER_LEN]);

/* VERR_VAULT_FORMAT (magic, version, algorithm, length) or VERR_VAULT_KDF. */
int vaultfmt_header_parse(const unsigned char *buf, size_t len, struct vaultfmt_header *h);

/* Argon2id into a new 32-byte secbuf; parameters are checked first. */
int vaultfmt_derive_key(const struct secbuf *pass, const struct vaultfmt_header *h,
                        struct secbuf **key);

/* Serialize contents; VERR_TOO_LARGE beyond VAULTFMT_PLAINTEXT_MAX. */
int vaultfmt_encode(const struct vaultfmt_contents *c, struct secbuf **out);

/* Parse and validate; VERR_VAULT_CORRUPT on anything malformed. */
int vaultfmt_decode(const unsigned char *buf, size_t len, struct vaultfmt_contents *c);

/* Encrypt plaintext under key into a malloc'd file image (header + ciphertext). */
int vaultfmt_seal(const struct vaultfmt_header *h, const struct secbuf *key,
                  const struct secbuf *plaintext, unsigned char **file, size_t *filelen);

/*
 * Parse the header of a file image, derive the key from pass and decrypt.
 * *key receives the derived key so the caller can save without hashing
 * again. VERR_VAULT_FORMAT, VERR_VAULT_KDF, VERR_VAULT_DECRYPT.
 */
int vaultfmt_open(const unsigned char *file, size_t filelen, const struct secbuf *pass,
                  struct vaultfmt_header *h, struct secbuf **key, struct secbuf **plaintext);

/*
 * Decrypt a file image whose header was parsed into *h with an already
 * derived key (a daemon re-reading the vault without the passphrase).
 * VERR_VAULT_DECRYPT when the key does not open it.
 */
int vaultfmt_decrypt(const unsigned char *file, size_t filelen, const struct vaultfmt_header *h,
                     const struct secbuf *key, struct secbuf **plaintext);

/* Free entries and the audit key; zero *c. */
void vaultfmt_contents_clear(struct vaultfmt_contents *c);

#endif
