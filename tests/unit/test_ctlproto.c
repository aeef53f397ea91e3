/* Control protocol: round trips with descriptor passing, and malformed input refused. */
#include <dirent.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "ctlproto.h"
#include "verr.h"

static struct ctl_writer w, rbuf;
static struct ctl_msg msg;

static void
test_roundtrip_with_fd(void **state)
{
	int sv[2], fd, p[2];
	char s[64];
	uint64_t pid;
	struct stat a, b;

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(pipe(p), 0);
	ctl_begin(&w, CTL_OPEN);
	ctl_add_str(&w, CTL_T_KEY, "deploy");
	ctl_add_str(&w, CTL_T_KEY, "gh");
	ctl_add_str(&w, CTL_T_ARG, "./deploy.sh");
	ctl_add_u64(&w, CTL_T_PID, 4242);
	assert_int_equal(ctl_finish(&w), 0);
	assert_int_equal(ctl_send(sv[0], &w, p[0]), 0);
	assert_int_equal(ctl_recv(sv[1], &rbuf, &msg, &fd), 0);
	assert_int_equal(msg.type, CTL_OPEN);
	assert_int_equal(msg.nfields, 4);
	assert_int_equal(ctl_field_str(ctl_nth(&msg, CTL_T_KEY, 1), s, sizeof(s)), 0);
	assert_string_equal(s, "gh");
	assert_null(ctl_nth(&msg, CTL_T_KEY, 2));
	assert_int_equal(ctl_get_u64(&msg, CTL_T_PID, &pid), 0);
	assert_int_equal(pid, 4242);
	assert_int_equal(ctl_get_str(&msg, CTL_T_CWD, s, sizeof(s)), VERR_CTL);
	/* The descriptor that arrived is the pipe we sent, and close-on-exec. */
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &a), 0);
	assert_int_equal(fstat(p[0], &b), 0);
	assert_int_equal(a.st_ino, b.st_ino);
	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	close(fd);
	close(p[0]);
	close(p[1]);
	close(sv[0]);
	assert_int_equal(ctl_recv(sv[1], &rbuf, &msg, &fd), VERR_CTL_EOF);
	close(sv[1]);
}

static void
expect_refused(const unsigned char *buf, size_t len)
{
	assert_int_equal(ctl_parse(buf, len, &msg), VERR_CTL);
}

static void
test_malformed(void **state)
{
	unsigned char b[64];
	char s[4];

	(void)state;
	ctl_begin(&w, CTL_ERROR);
	ctl_add_i64(&w, CTL_T_CODE, -21);
	ctl_add_str(&w, CTL_T_MESSAGE, "no");
	assert_int_equal(ctl_finish(&w), 0);
	assert_int_equal(ctl_parse(w.buf, w.len, &msg), 0);
	/* Every truncation and one byte more. */
	for (size_t n = 0; n < w.len; n++)
		expect_refused(w.buf, n);
	memcpy(b, w.buf, w.len);
	b[w.len] = 0;
	expect_refused(b, w.len + 1);
	/* Wrong version, unknown type, oversized payload. */
	memcpy(b, w.buf, w.len);
	b[1] = 2;
	expect_refused(b, w.len);
	memcpy(b, w.buf, w.len);
	b[3] = 99;
	expect_refused(b, w.len);
	memcpy(b, w.buf, w.len);
	b[4] = 0x7f;
	expect_refused(b, w.len);
	/* A tag that does not belong to the type. */
	ctl_begin(&w, CTL_STOP);
	ctl_add_str(&w, CTL_T_KEY, "x");
	assert_int_equal(ctl_finish(&w), 0);
	expect_refused(w.buf, w.len);
	/* Field length running past the end. */
	ctl_begin(&w, CTL_CLOSE);
	ctl_add_i64(&w, CTL_T_EXIT, 0);
	assert_int_equal(ctl_finish(&w), 0);
	w.buf[CTL_HEADER_LEN + 5] = 9;
	expect_refused(w.buf, w.len);
	/* Wrong-size integers and NUL inside text. */
	ctl_begin(&w, CTL_ERROR);
	ctl_add(&w, CTL_T_CODE, "1234", 4);
	ctl_add(&w, CTL_T_MESSAGE, "a\0b", 3);
	assert_int_equal(ctl_finish(&w), 0);
	assert_int_equal(ctl_parse(w.buf, w.len, &msg), 0);
	{
		int64_t v;

		assert_int_equal(ctl_get_i64(&msg, CTL_T_CODE, &v), VERR_CTL);
	}
	assert_int_equal(ctl_get_str(&msg, CTL_T_MESSAGE, s, sizeof(s)), VERR_CTL);
}

static void
test_limits(void **state)
{
	static unsigned char big[CTL_MAX_PAYLOAD];

	(void)state;
	ctl_begin(&w, CTL_OPEN);
	ctl_add(&w, CTL_T_ARG, big, sizeof(big));
	assert_int_equal(ctl_finish(&w), VERR_TOO_LARGE);
	/* Too many fields: CTL_MAX_FIELDS + 1 empty ones. */
	ctl_begin(&w, CTL_OPEN);
	for (int i = 0; i <= CTL_MAX_FIELDS; i++)
		ctl_add(&w, CTL_T_ARG, "", 0);
	assert_int_equal(ctl_finish(&w), 0);
	expect_refused(w.buf, w.len);
}

static int
count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	assert_non_null(d);
	while (readdir(d) != NULL)
		n++;
	closedir(d);
	return n;
}

static void
test_extra_fds_closed(void **state)
{
	int sv[2], p[2], fd, before;
	union {
		struct cmsghdr h;
		unsigned char b[CMSG_SPACE(2 * sizeof(int))];
	} cbuf;
	struct msghdr mh;
	struct iovec iov;
	struct cmsghdr *c;
	int fds[2];

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(pipe(p), 0);
	ctl_begin(&w, CTL_STATUS);
	assert_int_equal(ctl_finish(&w), 0);
	memset(&mh, 0, sizeof(mh));
	memset(&cbuf, 0, sizeof(cbuf));
	iov.iov_base = w.buf;
	iov.iov_len = w.len;
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = cbuf.b;
	mh.msg_controllen = sizeof(cbuf.b);
	c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(2 * sizeof(int));
	fds[0] = p[0];
	fds[1] = p[1];
	memcpy(CMSG_DATA(c), fds, sizeof(fds));
	assert_int_equal(sendmsg(sv[0], &mh, 0), (ssize_t)w.len);
	before = count_fds();
	assert_int_equal(ctl_recv(sv[1], &rbuf, &msg, &fd), 0);
	assert_true(fd >= 0);
	/* Two arrived, one is kept: a peer cannot make us leak descriptors. */
	assert_int_equal(count_fds(), before + 1);
	close(fd);
	close(p[0]);
	close(p[1]);
	close(sv[0]);
	close(sv[1]);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_roundtrip_with_fd),
	        cmocka_unit_test(test_malformed),
	        cmocka_unit_test(test_limits),
	        cmocka_unit_test(test_extra_fds_closed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
