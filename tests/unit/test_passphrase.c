/* Passphrase files: first line only, private mode, bounds. The terminal line editor. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <termios.h>
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

/* A terminal with the usual keys: DEL erases, ^U kills, ^D is end of file. */
static struct termios
keys(tcflag_t iflag)
{
	struct termios t;

	memset(&t, 0, sizeof(t));
	t.c_iflag = iflag;
	for (size_t i = 0; i < NCCS; i++)
		t.c_cc[i] = _POSIX_VDISABLE;
	t.c_cc[VERASE] = 0x7f;
	t.c_cc[VKILL] = 0x15;
	t.c_cc[VEOF] = 0x04;
	return t;
}

/* Feed the len bytes of in; the result of the last one. */
static int
feed(struct secbuf *b, const struct termios *t, const char *in, size_t len)
{
	int r = PASSPHRASE_MORE;

	for (size_t i = 0; i < len; i++)
		r = passphrase_edit(b, (unsigned char)in[i], t);
	return r;
}

#define FEED(b, t, s) feed((b), (t), (s), sizeof(s) - 1)

static void
assert_line(const struct secbuf *b, const char *want, size_t len)
{
	assert_int_equal(b->len, len);
	assert_memory_equal(b->data, want, len);
}

static void
test_edit_plain(void **state)
{
	struct termios t = keys(0);
	struct secbuf *b;

	(void)state;
	assert_int_equal(secbuf_new(64, &b), 0);
	assert_int_equal(FEED(b, &t, "s3cr\tt \x01\x1b"), PASSPHRASE_MORE);
	assert_line(b, "s3cr\tt \x01\x1b", 9);
	/* The line end is not stored, whichever it is. */
	assert_int_equal(passphrase_edit(b, '\n', &t), PASSPHRASE_LINE);
	assert_int_equal(passphrase_edit(b, '\r', &t), PASSPHRASE_LINE);
	assert_line(b, "s3cr\tt \x01\x1b", 9);
	/* High bytes and NUL are stored as they are (a secret's NUL is refused later). */
	assert_int_equal(passphrase_edit(b, 0xff, &t), PASSPHRASE_MORE);
	assert_int_equal(passphrase_edit(b, 0x00, &t), PASSPHRASE_MORE);
	assert_line(b, "s3cr\tt \x01\x1b\xff\x00", 11);
	secbuf_free(b);
}

static void
test_edit_erase_kill(void **state)
{
	struct termios t = keys(0);
	struct secbuf *b;

	(void)state;
	assert_int_equal(secbuf_new(64, &b), 0);
	/* DEL, BS and the terminal's own erase key each remove one byte. */
	assert_int_equal(FEED(b, &t, "abcX\x7f"), PASSPHRASE_MORE);
	assert_line(b, "abc", 3);
	/* The erased byte is wiped, not just left past the end. */
	assert_int_equal(b->data[3], 0);
	assert_int_equal(FEED(b, &t,
	                      "Y\x08"
	                      "d"),
	                 PASSPHRASE_MORE);
	assert_line(b, "abcd", 4);
	t.c_cc[VERASE] = '#';
	assert_int_equal(FEED(b, &t, "e#\x7f"), PASSPHRASE_MORE);
	assert_line(b, "abc", 3);
	t.c_cc[VERASE] = 0x7f;
	/* Erasing past the start is harmless. */
	assert_int_equal(FEED(b, &t, "\x7f\x7f\x7f\x7f\x7fok"), PASSPHRASE_MORE);
	assert_line(b, "ok", 2);
	/* Kill: the whole line, wiped. */
	assert_int_equal(FEED(b, &t, "more\x15"), PASSPHRASE_MORE);
	assert_int_equal(b->len, 0);
	for (size_t i = 0; i < 6; i++)
		assert_int_equal(b->data[i], 0);
	assert_int_equal(FEED(b, &t,
	                      "right\x15"
	                      "again"),
	                 PASSPHRASE_MORE);
	assert_line(b, "again", 5);
	/* A kill key moved elsewhere: ^U is then an ordinary byte. */
	t.c_cc[VKILL] = 0x18;
	assert_int_equal(FEED(b, &t, "\x15\x18z"), PASSPHRASE_MORE);
	assert_line(b, "z", 1);
	assert_int_equal(FEED(b, &t, "\x15"), PASSPHRASE_MORE);
	assert_line(b, "z\x15", 2);
	/* A disabled key matches nothing, not even the NUL that stands for it. */
	t.c_cc[VKILL] = _POSIX_VDISABLE;
	t.c_cc[VEOF] = _POSIX_VDISABLE;
	assert_int_equal(FEED(b, &t, "\x18"), PASSPHRASE_MORE);
	assert_int_equal(passphrase_edit(b, 0, &t), PASSPHRASE_MORE);
	assert_line(b, "z\x15\x18\x00", 4);
	secbuf_free(b);
}

static void
test_edit_eof(void **state)
{
	struct termios t = keys(0);
	struct secbuf *b;

	(void)state;
	assert_int_equal(secbuf_new(64, &b), 0);
	assert_int_equal(passphrase_edit(b, 0x04, &t), PASSPHRASE_EOF);
	assert_int_equal(b->len, 0);
	/* On a non-empty line end of file does nothing: the person must press Enter. */
	assert_int_equal(FEED(b, &t, "ab\x04"), PASSPHRASE_MORE);
	assert_line(b, "ab", 2);
	/* Empty again after erasing: end of file again. */
	assert_int_equal(FEED(b, &t, "\x15\x04"), PASSPHRASE_EOF);
	secbuf_free(b);
}

static void
test_edit_utf8(void **state)
{
	struct termios raw = keys(0), utf8 = keys(IUTF8);
	struct secbuf *b;

	(void)state;
	assert_int_equal(secbuf_new(64, &b), 0);
	/* "p\u00e4\u20ac\U0001F511": 1, 2, 3 and 4 bytes; one erase each with IUTF8. */
	assert_int_equal(FEED(b, &utf8, "p\xc3\xa4\xe2\x82\xac\xf0\x9f\x94\x91"), PASSPHRASE_MORE);
	assert_int_equal(b->len, 10);
	assert_int_equal(FEED(b, &utf8, "\x7f"), PASSPHRASE_MORE);
	assert_line(b, "p\xc3\xa4\xe2\x82\xac", 6);
	assert_int_equal(FEED(b, &utf8, "\x7f"), PASSPHRASE_MORE);
	assert_line(b, "p\xc3\xa4", 3);
	assert_int_equal(FEED(b, &utf8, "\x7f"), PASSPHRASE_MORE);
	assert_line(b, "p", 1);
	assert_int_equal(b->data[1], 0);
	assert_int_equal(b->data[2], 0);
	/* Stray continuation bytes at the start do not run off the front. */
	secbuf_clear(b);
	assert_int_equal(FEED(b, &utf8, "\x80\x80\x7f"), PASSPHRASE_MORE);
	assert_int_equal(b->len, 0);
	/* Without IUTF8 the terminal is not UTF-8: one byte per erase. */
	assert_int_equal(FEED(b, &raw, "p\xc3\xa4\x7f"), PASSPHRASE_MORE);
	assert_line(b, "p\xc3", 2);
	secbuf_free(b);
}

static void
test_edit_full(void **state)
{
	struct termios t = keys(0);
	struct secbuf *b;

	(void)state;
	assert_int_equal(secbuf_new(4, &b), 0);
	assert_int_equal(FEED(b, &t, "abcd"), PASSPHRASE_MORE);
	assert_int_equal(passphrase_edit(b, 'e', &t), VERR_TOO_LARGE);
	assert_line(b, "abcd", 4);
	/* Full, the line can still end and be edited. */
	assert_int_equal(passphrase_edit(b, '\n', &t), PASSPHRASE_LINE);
	assert_int_equal(FEED(b, &t, "\x7fz"), PASSPHRASE_MORE);
	assert_line(b, "abcz", 4);
	assert_int_equal(passphrase_edit(b, 0x04, &t), PASSPHRASE_MORE);
	secbuf_free(b);
}

static void
test_edit_word_erase(void **state)
{
	struct termios t = keys(0);
	struct secbuf *b;

	(void)state;
	assert_int_equal(secbuf_new(64, &b), 0);
	t.c_cc[VWERASE] = 0x17;
	/* Without IEXTEN (a terminal without the extensions) Ctrl-W is a byte. */
	assert_int_equal(FEED(b, &t, "ab\x17"), PASSPHRASE_MORE);
	assert_line(b, "ab\x17", 3);
	assert_int_equal(FEED(b, &t, "\x15"), PASSPHRASE_MORE); /* the kill key */
	/* With it, the blanks before the cursor and then a word go, wiped. */
	t.c_lflag = IEXTEN;
	assert_int_equal(FEED(b, &t, "one two \t\x17"), PASSPHRASE_MORE);
	assert_line(b, "one ", 4);
	assert_int_equal(b->data[4], 0);
	assert_int_equal(FEED(b, &t, "\x17\x17x"), PASSPHRASE_MORE);
	assert_line(b, "x", 1);
	secbuf_free(b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_first_line),      cmocka_unit_test(test_refusals),
	        cmocka_unit_test(test_env_and_pipe),    cmocka_unit_test(test_edit_plain),
	        cmocka_unit_test(test_edit_erase_kill), cmocka_unit_test(test_edit_eof),
	        cmocka_unit_test(test_edit_utf8),       cmocka_unit_test(test_edit_full),
	        cmocka_unit_test(test_edit_word_erase),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
