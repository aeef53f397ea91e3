/*
 * secbuf: the only home of secret bytes (keys, passphrases, decrypted vault
 * contents). The bytes live in sodium_malloc'd pages: guarded, locked out
 * of swap where the system allows, and wiped when freed. Never copy them
 * into ordinary heap, stack buffers or stdio.
 */
#ifndef VRUN_SECBUF_H
#define VRUN_SECBUF_H

#include <stddef.h>

struct secbuf {
	unsigned char *data; /* sodium_malloc'd, cap bytes */
	size_t len;          /* bytes in use */
	size_t cap;
	size_t room;  /* private: bytes data really has (>= cap), for reuse */
	int writable; /* private: 0 after secbuf_readonly or secbuf_noaccess */
};

/*
 * Call first in every program that will hold a secret: initialises
 * libsodium, sets RLIMIT_CORE to 0 and makes the process non-dumpable, so
 * no core file or same-uid ptrace can expose the secret. 0 or VERR_*.
 */
int secbuf_process_setup(void);

/* Allocate an empty buffer able to hold cap (>= 1) bytes. *out cleared first. */
int secbuf_new(size_t cap, struct secbuf **out);

/* Allocate a buffer holding a copy of the len bytes at p. */
int secbuf_dup(const void *p, size_t len, struct secbuf **out);

/* Append len bytes; VERR_TOO_LARGE when they do not fit in cap. */
int secbuf_append(struct secbuf *b, const void *p, size_t len);

/* Wipe the contents and set len to 0. */
void secbuf_clear(struct secbuf *b);

/* Constant-time comparison: 1 when equal (length and bytes), else 0. */
int secbuf_equal(const struct secbuf *a, const struct secbuf *b);

/* Page protection while the buffer sits unused: read-only, or none. */
int secbuf_readonly(struct secbuf *b);
int secbuf_noaccess(struct secbuf *b);
int secbuf_readwrite(struct secbuf *b);

/* Wipe and release; NULL is fine. */
void secbuf_free(struct secbuf *b);

/*
 * Reuse instead of unmapping. Mapping, guarding, locking and unmapping a
 * region costs about a dozen system calls; vproxy needs a few short-lived
 * buffers per request. With a pool of up to max_bytes, secbuf_free wipes a
 * buffer (all of it, whatever its state) and keeps it, still guarded and
 * locked; secbuf_new hands out the smallest kept one that fits (wiped,
 * read-write, len 0, cap as asked). 0 turns the pool off and frees what it
 * holds. The pool is process-wide and not thread-safe: only for
 * single-threaded programs.
 */
void secbuf_pool_enable(size_t max_bytes);

/* What the pool holds now: buffers and bytes (for tests and status). */
void secbuf_pool_stats(size_t *buffers, size_t *bytes);

#endif
