#define _GNU_SOURCE
#include "safefile.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "verr.h"

#define TEMP_SUFFIX ".tmp."

static int
private_stat(const struct stat *st, mode_t type)
{
	if ((st->st_mode & S_IFMT) != type || st->st_uid != geteuid() ||
	    (st->st_mode & (S_IRWXG | S_IRWXO)) != 0)
		return VERR_INSECURE_PATH;
	return VERR_OK;
}

/*
 * Make one directory of a path, or accept the one there. A new directory
 * is set to exactly 0700: mkdir's mode passes through the umask, and with
 * 0277 it would be dr-x------, in which the next component cannot be made.
 * (chmod follows a symlink, but only someone able to write the parent could
 * have swapped one in, and then nothing beneath it is private anyway.) An
 * existing directory is left as it is: it may be $HOME. The last component
 * is judged by safefile_dir, which must see a symlink as one.
 */
static int
make_dir(const char *path, int last)
{
	struct stat st;

	if (mkdir(path, 0700) == 0)
		return chmod(path, 0700) == 0 ? VERR_OK : VERR_SYSTEM;
	if (errno != EEXIST)
		return VERR_SYSTEM;
	if (last)
		return VERR_OK;
	if (stat(path, &st) != 0)
		return VERR_SYSTEM;
	if (!S_ISDIR(st.st_mode)) {
		errno = ENOTDIR; /* not EEXIST's "File exists" */
		return VERR_SYSTEM;
	}
	return VERR_OK;
}

static int
mkdir_parents(char *path)
{
	int r;

	for (char *p = path + 1; *p != '\0'; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		r = make_dir(path, 0);
		*p = '/';
		if (r != 0)
			return r;
	}
	return make_dir(path, 1);
}

int
safefile_dir(const char *dir, int create)
{
	struct stat st;
	char *copy;
	int r;

	if (create) {
		if ((copy = strdup(dir)) == NULL)
			return VERR_NOMEM;
		r = mkdir_parents(copy);
		free(copy);
		if (r != 0)
			return r;
	}
	if (lstat(dir, &st) != 0)
		return VERR_SYSTEM;
	if (!S_ISDIR(st.st_mode) && !S_ISLNK(st.st_mode)) {
		errno = ENOTDIR;
		return VERR_SYSTEM;
	}
	return private_stat(&st, S_IFDIR);
}

int
safefile_read(const char *path, size_t max, unsigned char **buf, size_t *len)
{
	struct stat st;
	unsigned char *b = NULL;
	size_t got = 0;
	ssize_t n;
	int fd, r, saved;

	*buf = NULL;
	*len = 0;
	/* O_NONBLOCK: a FIFO planted in place of the file must not hang us. */
	if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)) < 0)
		return errno == ELOOP ? VERR_INSECURE_PATH : VERR_SYSTEM;
	if (fstat(fd, &st) != 0) {
		r = VERR_SYSTEM;
		goto out;
	}
	if ((r = private_stat(&st, S_IFREG)) != 0)
		goto out;
	if ((size_t)st.st_size > max) {
		r = VERR_TOO_LARGE;
		goto out;
	}
	/* One spare byte so a file that grew while we read is noticed. */
	if ((b = malloc((size_t)st.st_size + 1)) == NULL) {
		r = VERR_NOMEM;
		goto out;
	}
	for (;;) {
		n = read(fd, b + got, (size_t)st.st_size + 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = VERR_SYSTEM;
			goto out;
		}
		if (n == 0)
			break;
		got += (size_t)n;
		if (got > (size_t)st.st_size) {
			r = VERR_TOO_LARGE;
			goto out;
		}
	}
	*buf = b;
	*len = got;
	b = NULL;
	r = VERR_OK;
out:
	saved = errno;
	free(b);
	close(fd);
	errno = saved;
	return r;
}

static int
write_all(int fd, const void *data, size_t len)
{
	const unsigned char *p = data;
	ssize_t n;

	while (len > 0) {
		n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return VERR_SYSTEM;
		p += n;
		len -= (size_t)n;
	}
	return VERR_OK;
}

static int
fsync_parent(const char *path)
{
	char *copy;
	int fd, r = VERR_OK;

	if ((copy = strdup(path)) == NULL)
		return VERR_NOMEM;
	fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	free(copy);
	if (fd < 0)
		return VERR_SYSTEM;
	if (fsync(fd) != 0)
		r = VERR_SYSTEM;
	close(fd);
	return r;
}

int
safefile_replace(const char *path, const void *data, size_t len)
{
	char *tmp = NULL;
	int fd = -1, r, saved;
	size_t n = strlen(path) + sizeof(TEMP_SUFFIX "XXXXXX");

	if ((tmp = malloc(n)) == NULL)
		return VERR_NOMEM;
	snprintf(tmp, n, "%s" TEMP_SUFFIX "XXXXXX", path);
	if ((fd = mkostemp(tmp, O_CLOEXEC)) < 0) {
		r = VERR_SYSTEM;
		free(tmp);
		return r;
	}
	if (fchmod(fd, 0600) != 0 || (r = write_all(fd, data, len)) != 0 || fsync(fd) != 0) {
		r = VERR_SYSTEM;
		goto out;
	}
	if (close(fd) != 0) {
		fd = -1;
		r = VERR_SYSTEM;
		goto out;
	}
	fd = -1;
	if (rename(tmp, path) != 0) {
		r = VERR_SYSTEM;
		goto out;
	}
	free(tmp);
	tmp = NULL;
	/* Without this the rename itself may not survive a power cut. */
	r = fsync_parent(path);
out:
	saved = errno;
	if (fd >= 0)
		close(fd);
	if (tmp != NULL) {
		unlink(tmp);
		free(tmp);
	}
	errno = saved;
	return r;
}

int
safefile_remove_temps(const char *path)
{
	char *dcopy = NULL, *bcopy = NULL, *prefix = NULL;
	const char *base;
	DIR *d = NULL;
	struct dirent *de;
	size_t plen;
	int dfd, r = VERR_OK;

	if ((dcopy = strdup(path)) == NULL || (bcopy = strdup(path)) == NULL) {
		r = VERR_NOMEM;
		goto out;
	}
	base = basename(bcopy);
	plen = strlen(base) + sizeof(TEMP_SUFFIX);
	if ((prefix = malloc(plen)) == NULL) {
		r = VERR_NOMEM;
		goto out;
	}
	snprintf(prefix, plen, "%s" TEMP_SUFFIX, base);
	plen = strlen(prefix);
	if ((d = opendir(dirname(dcopy))) == NULL) {
		r = VERR_SYSTEM;
		goto out;
	}
	dfd = dirfd(d);
	while ((de = readdir(d)) != NULL) {
		if (strncmp(de->d_name, prefix, plen) == 0 && strlen(de->d_name) == plen + 6)
			if (unlinkat(dfd, de->d_name, 0) != 0 && errno != ENOENT)
				r = VERR_SYSTEM;
	}
out:
	if (d != NULL)
		closedir(d);
	free(prefix);
	free(bcopy);
	free(dcopy);
	return r;
}

int
safefile_lock(const char *lockpath, int *fd)
{
	struct stat st;
	int f, r, saved;

	*fd = -1;
	f = open(lockpath, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK, 0600);
	if (f < 0)
		return errno == ELOOP ? VERR_INSECURE_PATH : VERR_SYSTEM;
	if (fstat(f, &st) != 0) {
		r = VERR_SYSTEM;
		goto fail;
	}
	if ((r = private_stat(&st, S_IFREG)) != 0)
		goto fail;
	while (flock(f, LOCK_EX) != 0) {
		if (errno != EINTR) {
			r = VERR_SYSTEM;
			goto fail;
		}
	}
	*fd = f;
	return VERR_OK;
fail:
	saved = errno;
	close(f);
	errno = saved;
	return r;
}

void
safefile_unlock(int fd)
{
	if (fd >= 0)
		close(fd); /* closing drops the flock */
}
