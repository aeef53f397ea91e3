#include "secbuf.h"

#include <errno.h>
#include <stdint.h>
#include <sodium.h>
#include <string.h>
#include <sys/resource.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "verr.h"

int
secbuf_process_setup(void)
{
	struct rlimit rl = {0, 0};

	if (sodium_init() < 0)
		return VERR_CRYPTO;
	if (setrlimit(RLIMIT_CORE, &rl) != 0)
		return VERR_SYSTEM;
#ifdef __linux__
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
		return VERR_SYSTEM;
#endif
	return VERR_OK;
}

/*
 * The pool (see secbuf_pool_enable). Buffers are allocated in size classes
 * so that one freed by one request fits the next: powers of two up to a
 * page, whole pages above.
 */
#define POOL_SLOTS 64
static struct secbuf *pool[POOL_SLOTS];
static size_t pool_n, pool_bytes, pool_max;

static size_t
size_class(size_t cap)
{
	size_t c = 64;

	if (cap > 4096)
		return cap > SIZE_MAX - 4095 ? cap : (cap + 4095) & ~(size_t)4095;
	while (c < cap)
		c <<= 1;
	return c;
}

/* The smallest pooled buffer with room for cap, not more than twice too big. */
static struct secbuf *
pool_take(size_t cap)
{
	size_t best = POOL_SLOTS;
	struct secbuf *b;

	for (size_t i = 0; i < pool_n; i++)
		if (pool[i]->room >= cap && pool[i]->room <= 2 * size_class(cap) &&
		    (best == POOL_SLOTS || pool[i]->room < pool[best]->room))
			best = i;
	if (best == POOL_SLOTS)
		return NULL;
	b = pool[best];
	pool[best] = pool[--pool_n];
	pool[pool_n] = NULL;
	pool_bytes -= b->room;
	return b;
}

int
secbuf_new(size_t cap, struct secbuf **out)
{
	struct secbuf *b;
	size_t room;

	*out = NULL;
	if (cap == 0)
		cap = 1;
	if (sodium_init() < 0)
		return VERR_CRYPTO;
	if (pool_max > 0 && (b = pool_take(cap)) != NULL) {
		b->cap = cap; /* wiped when it was pooled */
		*out = b;
		return VERR_OK;
	}
	room = pool_max > 0 ? size_class(cap) : cap;
	/* The header lives in sodium memory too: it points at the secret. */
	if ((b = sodium_malloc(sizeof(*b))) == NULL)
		return VERR_NOMEM;
	if ((b->data = sodium_malloc(room)) == NULL) {
		sodium_free(b);
		return VERR_NOMEM;
	}
	sodium_memzero(b->data, room);
	b->len = 0;
	b->cap = cap;
	b->room = room;
	b->writable = 1;
	*out = b;
	return VERR_OK;
}

int
secbuf_dup(const void *p, size_t len, struct secbuf **out)
{
	int r;

	if ((r = secbuf_new(len, out)) != 0)
		return r;
	if (len > 0)
		memcpy((*out)->data, p, len);
	(*out)->len = len;
	return VERR_OK;
}

int
secbuf_append(struct secbuf *b, const void *p, size_t len)
{
	if (len > b->cap - b->len)
		return VERR_TOO_LARGE;
	if (len > 0)
		memcpy(b->data + b->len, p, len);
	b->len += len;
	return VERR_OK;
}

void
secbuf_clear(struct secbuf *b)
{
	sodium_memzero(b->data, b->cap);
	b->len = 0;
}

int
secbuf_equal(const struct secbuf *a, const struct secbuf *b)
{
	if (a->len != b->len)
		return 0;
	if (a->len == 0)
		return 1;
	return sodium_memcmp(a->data, b->data, a->len) == 0;
}

int
secbuf_readonly(struct secbuf *b)
{
	b->writable = 0;
	return sodium_mprotect_readonly(b->data) == 0 ? VERR_OK : VERR_SYSTEM;
}

int
secbuf_noaccess(struct secbuf *b)
{
	b->writable = 0;
	return sodium_mprotect_noaccess(b->data) == 0 ? VERR_OK : VERR_SYSTEM;
}

int
secbuf_readwrite(struct secbuf *b)
{
	if (sodium_mprotect_readwrite(b->data) != 0)
		return VERR_SYSTEM;
	b->writable = 1;
	return VERR_OK;
}

static void
release(struct secbuf *b)
{
	/* sodium_free wipes, but it needs write access to do so. */
	sodium_mprotect_readwrite(b->data);
	sodium_free(b->data); /* wipes before unmapping */
	sodium_free(b);
}

void
secbuf_free(struct secbuf *b)
{
	int saved = errno;

	if (b == NULL)
		return;
	/* Read-write already (the common case): no system call to find out. */
	if (pool_max > 0 && pool_n < POOL_SLOTS && b->room <= pool_max - pool_bytes &&
	    (b->writable || secbuf_readwrite(b) == 0)) {
		sodium_memzero(b->data, b->room);
		b->len = 0;
		pool[pool_n++] = b;
		pool_bytes += b->room;
	} else {
		release(b);
	}
	errno = saved;
}

void
secbuf_pool_enable(size_t max_bytes)
{
	pool_max = max_bytes;
	while (pool_n > 0 && (max_bytes == 0 || pool_bytes > max_bytes)) {
		struct secbuf *b = pool[--pool_n];

		pool[pool_n] = NULL;
		pool_bytes -= b->room;
		release(b);
	}
}

void
secbuf_pool_stats(size_t *buffers, size_t *bytes)
{
	if (buffers != NULL)
		*buffers = pool_n;
	if (bytes != NULL)
		*bytes = pool_bytes;
}
