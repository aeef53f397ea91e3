#include "secbuf.h"

#include <errno.h>
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

int
secbuf_new(size_t cap, struct secbuf **out)
{
	struct secbuf *b;

	*out = NULL;
	if (cap == 0)
		cap = 1;
	if (sodium_init() < 0)
		return VERR_CRYPTO;
	/* The header lives in sodium memory too: it points at the secret. */
	if ((b = sodium_malloc(sizeof(*b))) == NULL)
		return VERR_NOMEM;
	if ((b->data = sodium_malloc(cap)) == NULL) {
		sodium_free(b);
		return VERR_NOMEM;
	}
	sodium_memzero(b->data, cap);
	b->len = 0;
	b->cap = cap;
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
	return sodium_mprotect_readonly(b->data) == 0 ? VERR_OK : VERR_SYSTEM;
}

int
secbuf_noaccess(struct secbuf *b)
{
	return sodium_mprotect_noaccess(b->data) == 0 ? VERR_OK : VERR_SYSTEM;
}

int
secbuf_readwrite(struct secbuf *b)
{
	return sodium_mprotect_readwrite(b->data) == 0 ? VERR_OK : VERR_SYSTEM;
}

void
secbuf_free(struct secbuf *b)
{
	int saved = errno;

	if (b == NULL)
		return;
	/* sodium_free wipes, but it needs write access to do so. */
	sodium_mprotect_readwrite(b->data);
	sodium_free(b->data); /* wipes before unmapping */
	sodium_free(b);
	errno = saved;
}
