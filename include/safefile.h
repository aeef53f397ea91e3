/*
 * safefile: private files and directories, and crash-safe replacement.
 *
 * "Private" means: not a symlink, owned by the effective uid, and no
 * permission bits for group or others. Anything else is refused with
 * VERR_INSECURE_PATH, because another user able to write, swap or read the
 * file could rebind keys or read ciphertext and audit trails.
 */
#ifndef VRUN_SAFEFILE_H
#define VRUN_SAFEFILE_H

#include <stddef.h>

/*
 * Check that dir is a private directory. With create, missing components
 * are made first with mode 0700 exactly, whatever the umask. A missing dir
 * without create gives VERR_SYSTEM with errno ENOENT; a component that is
 * not a directory, VERR_SYSTEM with errno ENOTDIR.
 */
int safefile_dir(const char *dir, int create);

/*
 * Read a whole private regular file of at most max bytes into a malloc'd
 * buffer (*buf, *len cleared first). VERR_SYSTEM/ENOENT when missing,
 * VERR_TOO_LARGE beyond max, VERR_INSECURE_PATH when not private.
 */
int safefile_read(const char *path, size_t max, unsigned char **buf, size_t *len);

/*
 * Replace path with data so that a crash at any moment leaves either the
 * old or the new contents: temp file in the same directory, fsync, rename,
 * fsync of the directory. Mode 0600. Caller holds the lock.
 */
int safefile_replace(const char *path, const void *data, size_t len);

/*
 * Remove leftovers of replacements interrupted by a crash (path.tmp.*).
 * Caller holds the lock. Missing leftovers are not an error.
 */
int safefile_remove_temps(const char *path);

/* Open (creating 0600) the lock file and take an exclusive flock, waiting. */
int safefile_lock(const char *lockpath, int *fd);

/* Release a lock taken with safefile_lock; -1 is ignored. */
void safefile_unlock(int fd);

#endif
