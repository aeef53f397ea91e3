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
	        cmocka_unit_test(test_append_bounds),
	        cmocka_unit_test(test_equal),
	        cmocka_unit_test(test_noaccess_faults),
	        cmocka_unit_test(test_process_setup),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
