/* Passphrase files: first line only, private mode, bounds. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "passphrase.h"
#include "verr.h"

static char file[64];

static void
write_file(const void *data, size_t len, mode_t mode)
{
	int fd;

	strcpy(file, "/tmp/vrun-pp-XXXXXX");
	fd = mkstemp(file);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	assert_int_equal(fchmod(fd, mode), 0);
	close(fd);
}

static void
expect(const void *data, size_t len, mode_t mode, int want, const char *pass)
{
	struct secbuf *b = (struct secbuf *)1;

	write_file(data, len, mode);
	assert_int_equal(passphrase_file(file, &b), want);
	if (want == 0) {
		assert_int_equal(b->len, strlen(pass));
		assert_memory_equal(b->data, pass, b->len);
		secbuf_free(b);
	} else {
		assert_null(b);
	}
	unlink(file);
}

static void
test_first_line(void **state)
{
	(void)state;
	expect("hunter2\nsecond\n", 15, 0600, 0, "hunter2");
	expect("no newline", 10, 0600, 0, "no newline");
	expect("crlf\r\n", 6, 0400, 0, "crlf");
	expect(" spaces kept \n", 14, 0600, 0, " spaces kept ");
}

static void
test_refusals(void **state)
{
	char big[PASSPHRASE_MAX + 2];
	struct secbuf *b;

	(void)state;
	expect("\nafter-empty-line\n", 18, 0600, VERR_PASSPHRASE_EMPTY, NULL);
	expect("", 0, 0600, VERR_PASSPHRASE_EMPTY, NULL);
	expect("pw\n", 3, 0644, VERR_PASSPHRASE_FILE, NULL);
	expect("pw\n", 3, 0660, VERR_PASSPHRASE_FILE, NULL);
	memset(big, 'a', sizeof(big));
	expect(big, sizeof(big), 0600, VERR_TOO_LARGE, NULL);
	assert_int_equal(passphrase_file("/nonexistent/vrun-pp", &b), VERR_PASSPHRASE_FILE);
	assert_int_equal(passphrase_file("/tmp", &b), VERR_PASSPHRASE_FILE);
}

static void
test_env_and_pipe(void **state)
{
	struct secbuf *b;
	int p[2];
	char name[64];

	(void)state;
	/* A pipe, as bash's <(...) gives, has no mode to check. */
	assert_int_equal(pipe(p), 0);
	assert_int_equal(write(p[1], "piped\n", 6), 6);
	close(p[1]);
	snprintf(name, sizeof(name), "/dev/fd/%d", p[0]);
	setenv("VRUN_TEST_PP", name, 1);
	assert_int_equal(passphrase_get("VRUN_TEST_PP", "", 1, &b), 0);
	assert_int_equal(b->len, 5);
	assert_memory_equal(b->data, "piped", 5);
	secbuf_free(b);
	close(p[0]);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_first_line),
	        cmocka_unit_test(test_refusals),
	        cmocka_unit_test(test_env_and_pipe),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
