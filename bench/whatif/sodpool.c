/*
 * What-if experiment, never for production: preloaded into vproxy by
 * `bench/run --vproxy-env LD_PRELOAD=.../libwhatif_sodpool.so`, it keeps
 * sodium_malloc regions for reuse instead of unmapping them, to measure
 * what vproxy would gain from allocating its guarded buffers once per
 * connection (or from a pool) rather than per request. Freed regions are
 * still wiped; they stay mapped, locked and guarded. Single-threaded only.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sodium.h>
#include <stddef.h>

#define POOL_MAX 8192

struct ent {
	void *p;
	size_t size;
	int used;
};

static struct ent pool[POOL_MAX];
static int npool;

void *
sodium_malloc(size_t size)
{
	static void *(*real)(size_t);
	void *p;

	if (real == NULL)
		*(void **)&real = dlsym(RTLD_NEXT, "sodium_malloc");
	for (int i = 0; i < npool; i++)
		if (!pool[i].used && pool[i].size == size) {
			pool[i].used = 1;
			return pool[i].p;
		}
	p = real(size);
	if (p != NULL && npool < POOL_MAX) {
		pool[npool].p = p;
		pool[npool].size = size;
		pool[npool].used = 1;
		npool++;
	}
	return p;
}

void
sodium_free(void *p)
{
	static void (*real)(void *);

	if (real == NULL)
		*(void **)&real = dlsym(RTLD_NEXT, "sodium_free");
	if (p == NULL)
		return;
	for (int i = 0; i < npool; i++)
		if (pool[i].p == p) {
			sodium_mprotect_readwrite(p);
			sodium_memzero(p, pool[i].size);
			pool[i].used = 0;
			return;
		}
	real(p);
}
