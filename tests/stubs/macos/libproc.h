/* Stub of the macOS SDK's <libproc.h>: only what sandbox-macos.c uses. */
#ifndef VRUN_STUB_LIBPROC_H
#define VRUN_STUB_LIBPROC_H

#include <stdint.h>
#include <sys/types.h>

#define PROC_PIDLISTFDS 1

struct proc_fdinfo {
	int32_t proc_fd;
	uint32_t proc_fdtype;
};

#define PROC_PIDLISTFD_SIZE (sizeof(struct proc_fdinfo))

int proc_pidinfo(int pid, int flavor, uint64_t arg, void *buffer, int buffersize);

#endif
