/* Secret buffers: bounds, comparison, wiping and page protection. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "secbuf.h"
#include "verr.h"

static void
test_append_bounds(void **state)
{
	struct secbuf *b = (struct secbuf *)1;

	(void)state;
	assert_int_equal(secbuf_new(4, &b), 0);
	assert_int_equal(secbuf_append(b, "ab", 2), 0);
	assert_int_equal(secbuf_append(b, "cd", 2), 0);
	assert_int_equal(secbuf_append(b, "e", 1), VERR_TOO_LARGE);
	assert_int_equal(b->len, 4);
	assert_memory_equal(b->data, "abcd", 4);
	secbuf_clear(b);
	assert_int_equal(b->len, 0);
	for (size_t i = 0; i < b->cap; i++)
		assert_int_equal(b->data[i], 0);
	secbuf_free(b);
	secbuf_free(NULL);
}

static void
test_equal(void **state)
{
	struct secbuf *a, *b, *c, *d;

	(void)state;
	assert_int_equal(secbuf_dup("secret", 6, &a), 0);
	assert_int_equal(secbuf_dup("secret", 6, &b), 0);
	assert_int_equal(secbuf_dup("secreT", 6, &c), 0);
	assert_int_equal(secbuf_dup("secret!", 7, &d), 0);
	assert_true(secbuf_equal(a, b));
	assert_false(secbuf_equal(a, c));
	assert_false(secbuf_equal(a, d));
	secbuf_free(a);
	secbuf_free(b);
	secbuf_free(c);
	secbuf_free(d);
}

/* Pooled buffers come back wiped, read-write, bounded by the size asked. */
static void
test_pool_reuse_wipes(void **state)
{
	struct secbuf *a, *b;
	unsigned char *data;
	size_t n, bytes;

	(void)state;
	secbuf_pool_enable(1 << 20);
	assert_int_equal(secbuf_new(100, &a), 0);
	assert_true(a->room >= 100);
	memset(a->data, 'S', a->room);
	a->len = 100;
	data = a->data;
	assert_int_equal(secbuf_noaccess(a), 0);
	secbuf_free(a);
	secbuf_pool_stats(&n, &bytes);
	assert_int_equal(n, 1);
	assert_true(bytes >= 100);

	assert_int_equal(secbuf_new(90, &b), 0);
	assert_ptr_equal(b->data, data); /* the same region, reused */
	assert_int_equal(b->len, 0);
	assert_int_equal(b->cap, 90);
	for (size_t i = 0; i < b->room; i++)
		assert_int_equal(b->data[i], 0);
	b->data[0] = 1; /* writable again */
	/* The capacity is what was asked for, not what the region has. */
	assert_int_equal(secbuf_append(b, data, 91), VERR_TOO_LARGE);
	secbuf_pool_stats(&n, NULL);
	assert_int_equal(n, 0);
	secbuf_free(b);
	secbuf_pool_enable(0);
	secbuf_pool_stats(&n, &bytes);
	assert_int_equal(n, 0);
	assert_int_equal(bytes, 0);
}

/* A small request never takes a big buffer; the pool never outgrows its cap. */
static void
test_pool_bounds(void **state)
{
	struct secbuf *big, *small, *bufs[80];
	unsigned char *bigdata;
	size_t n, bytes;

	(void)state;
	secbuf_pool_enable(64 * 1024);
	assert_int_equal(secbuf_new(40000, &big), 0);
	bigdata = big->data;
	secbuf_free(big);
	assert_int_equal(secbuf_new(10, &small), 0);
	assert_ptr_not_equal(small->data, bigdata);
	assert_true(small->room < 4096);
	secbuf_free(small);

	for (size_t i = 0; i < 80; i++)
		assert_int_equal(secbuf_new(4000, &bufs[i]), 0);
	for (size_t i = 0; i < 80; i++)
		secbuf_free(bufs[i]);
	secbuf_pool_stats(&n, &bytes);
	assert_true(bytes <= 64 * 1024);
	assert_true(n <= 64);
	/* Lowering the cap releases what no longer fits. */
	secbuf_pool_enable(8192);
	secbuf_pool_stats(&n, &bytes);
	assert_true(bytes <= 8192);
	secbuf_pool_enable(0);
	/* Off: freed buffers are unmapped, not kept. */
	assert_int_equal(secbuf_new(10, &small), 0);
	secbuf_free(small);
	secbuf_pool_stats(&n, &bytes);
	assert_int_equal(n, 0);
	assert_int_equal(bytes, 0);
}

static void
test_noaccess_faults(void **state)
{
	struct secbuf *b;
	pid_t pid;
	int status;

	(void)state;
	assert_int_equal(secbuf_dup("xyz", 3, &b), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct rlimit rl = {0, 0};

		setrlimit(RLIMIT_CORE, &rl);
		/* Sanitizers catch SIGSEGV and exit(1); we want the plain fault. */
		signal(SIGSEGV, SIG_DFL);
		signal(SIGBUS, SIG_DFL);
		secbuf_noaccess(b);
		/* Must fault: a stray read of a parked secret is a crash, not a leak. */
		_exit(((volatile unsigned char *)b->data)[0] == 'x' ? 0 : 1);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));
	assert_int_equal(secbuf_readwrite(b), 0);
	assert_memory_equal(b->data, "xyz", 3);
	secbuf_free(b);
}

static void
test_process_setup(void **state)
{
	struct rlimit rl;

	(void)state;
	assert_int_equal(secbuf_process_setup(), 0);
	assert_int_equal(getrlimit(RLIMIT_CORE, &rl), 0);
	assert_int_equal(rl.rlim_cur, 0);
	assert_int_equal(prctl(PR_GET_DUMPABLE, 0, 0, 0, 0), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_append_bounds),    cmocka_unit_test(test_equal),
	        cmocka_unit_test(test_pool_reuse_wipes), cmocka_unit_test(test_pool_bounds),
	        cmocka_unit_test(test_noaccess_faults),  cmocka_unit_test(test_process_setup),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
