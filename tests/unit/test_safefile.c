/* Private files: refusal of symlinks, loose modes, foreign owners; atomic replace. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "safefile.h"
#include "verr.h"

static char dir[64];

static int
setup(void **state)
{
	(void)state;
	strcpy(dir, "/tmp/vrun-safefile-XXXXXX");
	return mkdtemp(dir) == NULL ? -1 : 0;
}

static int
teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static void
path(char *buf, const char *name)
{
	snprintf(buf, 256, "%s/%s", dir, name);
}

static void
test_dir_checks(void **state)
{
	char p[256];

	(void)state;
	path(p, "a/b/c");
	assert_int_equal(safefile_dir(p, 0), VERR_SYSTEM);
	assert_int_equal(errno, ENOENT);
	assert_int_equal(safefile_dir(p, 1), 0);
	assert_int_equal(safefile_dir(p, 0), 0);
	assert_int_equal(chmod(p, 0750), 0);
	assert_int_equal(safefile_dir(p, 0), VERR_INSECURE_PATH);
	assert_int_equal(chmod(p, 0700), 0);
	path(p, "link");
	assert_int_equal(symlink("a/b/c", p), 0);
	assert_int_equal(safefile_dir(p, 0), VERR_INSECURE_PATH);
}

static void
assert_mode(const char *p, mode_t want)
{
	struct stat st;

	assert_int_equal(lstat(p, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_mode & 07777, want);
}

/* New directories are 0700 whatever the umask; existing ones keep their mode. */
static void
test_dir_mode_umask(void **state)
{
	static const mode_t masks[] = {0277, 0777, 0};
	char p[256];
	mode_t old;

	(void)state;
	path(p, "kept");
	assert_int_equal(mkdir(p, 0755), 0);
	assert_int_equal(chmod(p, 0755), 0);
	for (size_t i = 0; i < sizeof(masks) / sizeof(masks[0]); i++) {
		char name[64];

		snprintf(name, sizeof(name), "kept/m%zu/x/y", i);
		path(p, name);
		old = umask(masks[i]);
		assert_int_equal(safefile_dir(p, 1), 0);
		umask(old);
		assert_mode(p, 0700);
		snprintf(name, sizeof(name), "kept/m%zu/x", i);
		path(p, name);
		assert_mode(p, 0700);
		snprintf(name, sizeof(name), "kept/m%zu", i);
		path(p, name);
		assert_mode(p, 0700);
	}
	path(p, "kept");
	assert_mode(p, 0755);
}

/* A component that is a file says so, rather than "File exists". */
static void
test_dir_not_a_dir(void **state)
{
	char p[256], f[256];
	int fd;

	(void)state;
	path(f, "plain");
	assert_true((fd = open(f, O_CREAT | O_WRONLY, 0600)) >= 0);
	close(fd);
	path(p, "plain/sub");
	errno = 0;
	assert_int_equal(safefile_dir(p, 1), VERR_SYSTEM);
	assert_int_equal(errno, ENOTDIR);
	path(p, "plain/sub/deeper");
	errno = 0;
	assert_int_equal(safefile_dir(p, 1), VERR_SYSTEM);
	assert_int_equal(errno, ENOTDIR);
	errno = 0;
	assert_int_equal(safefile_dir(f, 1), VERR_SYSTEM);
	assert_int_equal(errno, ENOTDIR);
	errno = 0;
	assert_int_equal(safefile_dir(f, 0), VERR_SYSTEM);
	assert_int_equal(errno, ENOTDIR);
	/* A symlink as the last component stays an insecure path, created or not. */
	path(p, "dlink");
	assert_int_equal(symlink(dir, p), 0);
	assert_int_equal(safefile_dir(p, 1), VERR_INSECURE_PATH);
	assert_int_equal(safefile_dir(p, 0), VERR_INSECURE_PATH);
	path(p, "plainlink");
	assert_int_equal(symlink(f, p), 0);
	assert_int_equal(safefile_dir(p, 1), VERR_INSECURE_PATH);
}

static void
test_replace_and_read(void **state)
{
	char p[256];
	unsigned char *buf;
	size_t len;
	struct stat st;

	(void)state;
	path(p, "f");
	assert_int_equal(safefile_replace(p, "one", 3), 0);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_int_equal(safefile_replace(p, "second", 6), 0);
	assert_int_equal(safefile_read(p, 100, &buf, &len), 0);
	assert_int_equal(len, 6);
	assert_memory_equal(buf, "second", 6);
	free(buf);
	assert_int_equal(safefile_read(p, 5, &buf, &len), VERR_TOO_LARGE);
	assert_null(buf);
	assert_int_equal(chmod(p, 0640), 0);
	assert_int_equal(safefile_read(p, 100, &buf, &len), VERR_INSECURE_PATH);
	assert_int_equal(chmod(p, 0604), 0);
	assert_int_equal(safefile_read(p, 100, &buf, &len), VERR_INSECURE_PATH);
	assert_int_equal(chmod(p, 0600), 0);
	if (geteuid() == 0) {
		assert_int_equal(chown(p, 65534, 65534), 0);
		assert_int_equal(safefile_read(p, 100, &buf, &len), VERR_INSECURE_PATH);
		assert_int_equal(chown(p, 0, 0), 0);
	}
	{
		char l[256];

		path(l, "flink");
		assert_int_equal(symlink(p, l), 0);
		assert_int_equal(safefile_read(l, 100, &buf, &len), VERR_INSECURE_PATH);
	}
	path(p, "missing");
	assert_int_equal(safefile_read(p, 100, &buf, &len), VERR_SYSTEM);
	assert_int_equal(errno, ENOENT);
}

static void
test_remove_temps(void **state)
{
	char p[256], t[300], other[300];
	int fd;

	(void)state;
	path(p, "db");
	snprintf(t, sizeof(t), "%s.tmp.AbC123", p);
	snprintf(other, sizeof(other), "%s.tmp.keepme-not-ours", p);
	assert_true((fd = open(t, O_CREAT | O_WRONLY, 0600)) >= 0);
	close(fd);
	assert_true((fd = open(other, O_CREAT | O_WRONLY, 0600)) >= 0);
	close(fd);
	assert_int_equal(safefile_remove_temps(p), 0);
	assert_int_equal(access(t, F_OK), -1);
	assert_int_equal(access(other, F_OK), 0);
}

static void
test_lock_excludes(void **state)
{
	char p[256];
	int fd, pipefd[2], status;
	pid_t pid;
	char c;

	(void)state;
	path(p, "lock");
	assert_int_equal(safefile_lock(p, &fd), 0);
	assert_int_equal(pipe(pipefd), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int cfd;

		/* The inherited descriptor shares our lock; drop it. */
		close(fd);
		close(pipefd[0]);
		if (safefile_lock(p, &cfd) != 0)
			_exit(2);
		(void)!write(pipefd[1], "L", 1);
		_exit(0);
	}
	close(pipefd[1]);
	/* The child must still be waiting for our lock. */
	usleep(200 * 1000);
	assert_int_equal(waitpid(pid, &status, WNOHANG), 0);
	safefile_unlock(fd);
	assert_int_equal(read(pipefd[0], &c, 1), 1);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(pipefd[0]);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_dir_checks),    cmocka_unit_test(test_dir_mode_umask),
	        cmocka_unit_test(test_dir_not_a_dir), cmocka_unit_test(test_replace_and_read),
	        cmocka_unit_test(test_remove_temps),  cmocka_unit_test(test_lock_excludes),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
