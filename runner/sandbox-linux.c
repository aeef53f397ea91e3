/*
 * sandbox-linux: the command runs in new user, pid, network, mount and IPC
 * namespaces (a user namespace even for root, so it never holds a
 * capability of the initial namespaces), without capabilities, with
 * no_new_privs, a seccomp filter and, where the kernel has Landlock ABI 6,
 * signal and abstract-socket scoping.
 *
 * Three processes:
 *
 *   vrun            outside; talks to vproxy; forwards signals; waits.
 *   init (pid 1)    made by clone() with the new namespaces. Maps the uid
 *                   and gid, brings lo up, masks the hidden paths, mounts a
 *                   /proc of its own pid namespace, binds the session
 *                   listener on 127.0.0.1 and sends it to vrun (with the
 *                   number of paths masked), builds the seccomp filter,
 *                   then waits for "go". It keeps its capabilities (in
 *                   the new user namespace only), so it is not dumpable
 *                   and runs no foreign code. It forks the command and
 *                   reaps; when the command exits it reports
 *                   the status and exits, which kills whatever the command
 *                   left behind (the pid namespace dies with its init).
 *   command (pid 2) drops everything, then execs.
 *
 * They talk over one SOCK_SEQPACKET socketpair. vrun's end has SO_PASSCRED,
 * so the kernel tells it the command's pid in vrun's own pid namespace.
 *
 * Why a pid namespace: without one the command sees every process of the
 * user in /proc and, with the same uid, may read their environment and,
 * without Yama, write their memory through /proc/PID/mem -- vrun's and the
 * user's shells' included, which is a way out. With its own /proc it sees
 * only the sandbox, and it cannot signal anything outside (no pid names it).
 */
#define _GNU_SOURCE
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <seccomp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "verr.h"

/* Landlock, defined here because Debian 12's headers predate ABI 6. */
#ifndef __NR_landlock_create_ruleset
#define __NR_landlock_create_ruleset 444
#endif
#ifndef __NR_landlock_restrict_self
#define __NR_landlock_restrict_self 446
#endif
#define LL_CREATE_RULESET_VERSION     (1U << 0)
#define LL_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#define LL_SCOPE_SIGNAL               (1ULL << 1)
#define LL_ABI_SCOPED                 6

struct ll_ruleset_attr {
	uint64_t handled_access_fs;
	uint64_t handled_access_net;
	uint64_t scoped;
};

/* clone()'s flags argument: the second one on s390 and CRIS. */
#if defined(__s390__) || defined(__CRIS__)
#define CLONE_FLAGS_ARG 1
#else
#define CLONE_FLAGS_ARG 0
#endif

#define NS_FLAGS (CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWIPC)

/* Messages on the socketpair: a head, then type-specific bytes. */
enum msg_type {
	MSG_LISTENER = 'L', /* init -> vrun: the listener (SCM_RIGHTS); a = paths masked */
	MSG_ERROR = 'E',    /* init/command -> vrun: a = VERR_*, b = errno, text */
	MSG_GO = 'G',       /* vrun -> init: CA path, env entries; bundle fd */
	MSG_PID = 'P',      /* command -> vrun: its pid arrives as SCM_CREDENTIALS */
	MSG_RUNNING = 'R',  /* init -> vrun: exec succeeded */
	MSG_EXECFAIL = 'X', /* command -> vrun: b = errno of execvp */
	MSG_STOPPED = 'S',  /* init -> vrun: a = stop signal */
	MSG_EXITED = 'W',   /* init -> vrun: a = wait status */
};

struct msg_head {
	uint32_t type;
	int32_t a, b;
};

#define MSG_MAX    (64 * 1024)
#define ERR_TEXT   512
#define BUNDLE_MAX (16 * 1024 * 1024) /* bytes of CA bundle copied into the sandbox */

struct sandbox {
	pid_t init_pid; /* in vrun's pid namespace */
	pid_t cmd_pid;  /* also the command's process group; 0 until known */
	int sock;
	int landlock_abi;
	int exited;    /* MSG_EXITED seen */
	size_t hidden; /* paths masked (they existed) */
};

/* ---- messages ---- */

static int
send_msg(int sock, uint32_t type, int32_t a, int32_t b, const void *data, size_t len, int pass_fd)
{
	union {
		struct cmsghdr h;
		unsigned char b[CMSG_SPACE(sizeof(int))];
	} cbuf;
	struct msg_head head = {type, a, b};
	struct iovec iov[2] = {{&head, sizeof(head)}, {(void *)data, len}};
	struct msghdr mh;
	ssize_t n;

	memset(&mh, 0, sizeof(mh));
	mh.msg_iov = iov;
	mh.msg_iovlen = len > 0 ? 2 : 1;
	if (pass_fd >= 0) {
		struct cmsghdr *c;

		memset(&cbuf, 0, sizeof(cbuf));
		mh.msg_control = cbuf.b;
		mh.msg_controllen = sizeof(cbuf.b);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
	}
	do
		n = sendmsg(sock, &mh, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return VERR_SYSTEM;
	return (size_t)n == sizeof(head) + len ? VERR_OK : VERR_SANDBOX;
}

/*
 * Receive one message into buf (size >= sizeof(struct msg_head)). *len is
 * the number of bytes after the head; a descriptor that came with it goes
 * to *fd (else -1; extras are closed), the sender's pid to *pid when the
 * socket has SO_PASSCRED (else 0). VERR_CTL_EOF at end of stream,
 * VERR_SANDBOX for a malformed message, VERR_SYSTEM (EINTR included).
 */
static int
recv_msg(int sock, void *buf, size_t size, struct msg_head *head, size_t *len, int *fd, pid_t *pid)
{
	union {
		struct cmsghdr h;
		unsigned char b[CMSG_SPACE(4 * sizeof(int)) + CMSG_SPACE(sizeof(struct ucred))];
	} cbuf;
	struct iovec iov = {buf, size};
	struct msghdr mh;
	ssize_t n;

	*len = 0;
	*fd = -1;
	if (pid != NULL)
		*pid = 0;
	memset(&mh, 0, sizeof(mh));
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = cbuf.b;
	mh.msg_controllen = sizeof(cbuf.b);
	n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
	if (n < 0)
		return VERR_SYSTEM;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c != NULL; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET)
			continue;
		if (c->cmsg_type == SCM_RIGHTS) {
			size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);

			for (size_t i = 0; i < k; i++) {
				int f;

				memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
				if (*fd < 0)
					*fd = f;
				else
					close(f);
			}
		} else if (c->cmsg_type == SCM_CREDENTIALS && pid != NULL &&
		           c->cmsg_len >= CMSG_LEN(sizeof(struct ucred))) {
			struct ucred uc;

			memcpy(&uc, CMSG_DATA(c), sizeof(uc));
			*pid = uc.pid;
		}
	}
	if (n == 0)
		return VERR_CTL_EOF;
	if ((size_t)n < sizeof(*head) || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)))
		goto bad;
	memcpy(head, buf, sizeof(*head));
	*len = (size_t)n - sizeof(*head);
	memmove(buf, (char *)buf + sizeof(*head), *len);
	return VERR_OK;
bad:
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
	return VERR_SANDBOX;
}

static void
set_err(char *err, size_t errsize, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL || errsize == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errsize, fmt, ap);
	va_end(ap);
}

/* An MSG_ERROR payload into err, printable ASCII only. */
static void
copy_text(char *err, size_t errsize, const char *text, size_t len)
{
	size_t o = 0;

	if (err == NULL || errsize == 0)
		return;
	for (size_t i = 0; i < len && o + 1 < errsize; i++)
		err[o++] = (text[i] >= 0x20 && text[i] < 0x7f) ? text[i] : '?';
	err[o] = '\0';
}

/* ---- inside the sandbox: helpers for init and the command ---- */

/*
 * In the command before exec: the pipe whose end-of-file tells init that
 * the exec happened. A failure writes a byte to it first.
 */
static int failed_fd = -1;

/*
 * Report a failure to vrun and exit. Used only in the sandbox's processes,
 * which have nobody else to tell: vrun prints it and exits 125.
 */
__attribute__((noreturn, format(printf, 3, 4))) static void
die(int sock, int code, const char *fmt, ...)
{
	char text[ERR_TEXT];
	int saved = errno, n;
	va_list ap;

	va_start(ap, fmt);
	n = vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	if (n >= 0 && (size_t)n < sizeof(text))
		snprintf(text + n, sizeof(text) - (size_t)n, ": %s", strerror(saved));
	send_msg(sock, MSG_ERROR, code, saved, text, strnlen(text, sizeof(text)), -1);
	if (failed_fd >= 0)
		(void)!write(failed_fd, "x", 1);
	_exit(125);
}

static int
write_file(const char *path, const char *text)
{
	size_t len = strlen(text);
	ssize_t n;
	int fd = open(path, O_WRONLY | O_CLOEXEC), saved;

	if (fd < 0)
		return -1;
	n = write(fd, text, len);
	saved = errno;
	if (close(fd) != 0 && n >= 0)
		return -1;
	errno = saved;
	return n == (ssize_t)len ? 0 : -1;
}

/* Close every descriptor above 2 except keep_a and keep_b (or -1). */
static int
close_other_fds(int keep_a, int keep_b)
{
	int keep[2] = {keep_a < keep_b ? keep_a : keep_b, keep_a < keep_b ? keep_b : keep_a};
	unsigned int from = 3;

	for (int i = 0; i < 2; i++) {
		if (keep[i] < (int)from)
			continue;
		if ((unsigned int)keep[i] > from &&
		    close_range(from, (unsigned int)keep[i] - 1, 0) != 0)
			return -1;
		from = (unsigned int)keep[i] + 1;
	}
	return close_range(from, ~0U, 0);
}

/* MS_* flags of the mount holding path, so a remount keeps its locked ones. */
static int
mount_flags(const char *path, unsigned long *flags)
{
	static const struct {
		unsigned long st, ms;
	} map[] = {
	        {ST_RDONLY, MS_RDONLY},
	        {ST_NOSUID, MS_NOSUID},
	        {ST_NODEV, MS_NODEV},
	        {ST_NOEXEC, MS_NOEXEC},
	        {ST_SYNCHRONOUS, MS_SYNCHRONOUS},
	        {ST_MANDLOCK, MS_MANDLOCK},
	        {ST_NOATIME, MS_NOATIME},
	        {ST_NODIRATIME, MS_NODIRATIME},
	        {ST_RELATIME, MS_RELATIME},
	};
	struct statvfs sv;

	*flags = 0;
	if (statvfs(path, &sv) != 0)
		return -1;
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (sv.f_flag & map[i].st)
			*flags |= map[i].ms;
	return 0;
}

/* Make the bind mount at path read-only, nosuid and noexec. */
static int
remount_ro(const char *path)
{
	unsigned long f;

	if (mount_flags(path, &f) != 0)
		return -1;
	f |= MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC;
	return mount(NULL, path, NULL, f, NULL);
}

/* ---- init: namespaces and mounts ---- */

static void
write_maps(int sock, uid_t uid, gid_t gid)
{
	char line[64];

	/* Required before an unprivileged gid_map; nobody inside needs setgroups(). */
	if (write_file("/proc/self/setgroups", "deny") != 0)
		die(sock, VERR_NO_USERNS, "write /proc/self/setgroups");
	snprintf(line, sizeof(line), "%lu %lu 1", (unsigned long)uid, (unsigned long)uid);
	if (write_file("/proc/self/uid_map", line) != 0)
		die(sock, VERR_NO_USERNS, "write /proc/self/uid_map");
	snprintf(line, sizeof(line), "%lu %lu 1", (unsigned long)gid, (unsigned long)gid);
	if (write_file("/proc/self/gid_map", line) != 0)
		die(sock, VERR_NO_USERNS, "write /proc/self/gid_map");
}

/* lo starts down in a new network namespace; ioctl costs no helper process. */
static void
loopback_up(int sock)
{
	struct ifreq ifr;
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (s < 0)
		die(sock, VERR_SANDBOX, "socket");
	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, "lo", 3);
	if (ioctl(s, SIOCGIFFLAGS, &ifr) != 0)
		die(sock, VERR_SANDBOX, "get the flags of lo");
	ifr.ifr_flags |= IFF_UP;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) != 0)
		die(sock, errno == EPERM ? VERR_NO_USERNS : VERR_SANDBOX, "bring lo up");
	close(s);
}

static void
send_listener(int sock, size_t hidden)
{
	struct sockaddr_in a;
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (l < 0)
		die(sock, VERR_SANDBOX, "socket");
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	/* Any free port: a fixed one could clash with a server the command runs. */
	if (bind(l, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(l, SOMAXCONN) != 0)
		die(sock, VERR_SANDBOX, "bind the session listener on 127.0.0.1");
	if (send_msg(sock, MSG_LISTENER, (int32_t)hidden, 0, NULL, 0, l) != 0)
		die(sock, VERR_SANDBOX, "send the session listener");
	close(l);
}

/*
 * Hide one path: an empty read-only tmpfs over a directory, /dev/null
 * (read-only) over anything else. Missing paths are skipped, and so are
 * ones we cannot even look at (the command, with less power, could not
 * either). mount() follows symlinks, so a link hides its target. 1 when
 * the path was masked, 0 when skipped.
 */
static int
mask_path(int sock, const char *path)
{
	struct stat st;

	if (path[0] != '/') {
		errno = EINVAL;
		die(sock, VERR_SANDBOX, "hide %s: not an absolute path", path);
	}
	if (stat(path, &st) != 0) {
		if (errno == ENOENT || errno == ENOTDIR || errno == EACCES || errno == ELOOP ||
		    errno == ENAMETOOLONG)
			return 0;
		die(sock, VERR_SANDBOX, "hide %s", path);
	}
	if (S_ISDIR(st.st_mode)) {
		if (mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY,
		          "mode=0755,size=4k") != 0)
			die(sock, VERR_SANDBOX, "hide %s (tmpfs)", path);
		return 1;
	}
	if (mount("/dev/null", path, NULL, MS_BIND, NULL) != 0 || remount_ro(path) != 0)
		die(sock, VERR_SANDBOX, "hide %s (/dev/null)", path);
	return 1;
}

/* The masks, /dev/shm and /proc; returns how many paths were masked. */
static size_t
setup_mounts(int sock, const struct sandbox_config *cfg)
{
	struct stat st;
	size_t hidden = 0;

	/* Nothing we mount may propagate back to the host. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
		die(sock, VERR_SANDBOX, "make the mount namespace private");
	for (size_t i = 0; i < cfg->nhide; i++)
		hidden += (size_t)mask_path(sock, cfg->hide[i]);
	/* POSIX shared memory of the host's processes is not the command's business. */
	if (stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) &&
	    mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") != 0)
		die(sock, VERR_SANDBOX, "mount /dev/shm");
	/* A /proc that shows only the sandbox's pid namespace. */
	if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0)
		die(sock, VERR_SANDBOX, "mount /proc");
	return hidden;
}

/*
 * Make the file open at fd readable at path although a mask may cover it
 * (the session's CA bundle lives in the hidden runtime directory): a small
 * tmpfs over the deepest directory that is still visible -- an empty mask
 * -- holding the path down to a read-only copy of that single file. A bind
 * mount cannot be used: the descriptor was opened in vrun's mount
 * namespace. The bundle holds certificates only, nothing secret.
 */
static void
keep_file(int sock, const char *path, int fd)
{
	struct stat want, st;
	char dir[4096], opts[64], chunk[16384];
	size_t n = strlen(path), base;
	ssize_t got;
	int f;

	if (fstat(fd, &want) != 0 || !S_ISREG(want.st_mode))
		die(sock, VERR_SANDBOX, "CA bundle %s", path);
	if (stat(path, &st) == 0 && st.st_dev == want.st_dev && st.st_ino == want.st_ino)
		return;
	if (path[0] != '/' || n >= sizeof(dir) || strstr(path, "/../") != NULL ||
	    want.st_size > BUNDLE_MAX) {
		errno = EINVAL;
		die(sock, VERR_SANDBOX, "CA bundle %s", path);
	}
	memcpy(dir, path, n + 1);
	for (;;) {
		char *slash = strrchr(dir, '/');

		*slash = '\0';
		if (dir[0] == '\0') {
			errno = ENOENT;
			die(sock, VERR_SANDBOX, "CA bundle %s: no visible parent directory", path);
		}
		if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode))
			break;
	}
	base = strlen(dir);
	snprintf(opts, sizeof(opts), "mode=0755,size=%lld", (long long)want.st_size + 65536);
	if (mount("tmpfs", dir, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, opts) != 0)
		die(sock, VERR_SANDBOX, "mount a tmpfs on %s", dir);
	memcpy(dir, path, n + 1);
	for (size_t i = base + 1; i < n; i++) {
		if (dir[i] != '/')
			continue;
		dir[i] = '\0';
		/* Explicit modes: the umask belongs to the command. */
		if ((mkdir(dir, 0755) != 0 && errno != EEXIST) || chmod(dir, 0755) != 0)
			die(sock, VERR_SANDBOX, "mkdir %s", dir);
		dir[i] = '/';
	}
	if ((f = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644)) < 0)
		die(sock, VERR_SANDBOX, "create %s", path);
	if (fchmod(f, 0644) != 0)
		die(sock, VERR_SANDBOX, "chmod %s", path);
	/* sendfile: one system call for the whole bundle; read/write where it cannot. */
	while ((got = sendfile(f, fd, NULL, BUNDLE_MAX)) > 0)
		;
	if (got < 0 && (errno == EINVAL || errno == ENOSYS))
		while ((got = read(fd, chunk, sizeof(chunk))) != 0) {
			if (got < 0 && errno == EINTR)
				continue;
			if (got < 0 || write(f, chunk, (size_t)got) != got)
				break;
		}
	if (got < 0)
		die(sock, VERR_SANDBOX, "copy the CA bundle to %s", path);
	if (close(f) != 0)
		die(sock, VERR_SANDBOX, "copy the CA bundle to %s", path);
	dir[base] = '\0';
	if (mount(NULL, dir, NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
	          NULL) != 0)
		die(sock, VERR_SANDBOX, "remount %s read-only", dir);
}

/* ---- the seccomp filter ---- */

/*
 * Denied with EPERM. Unknown to this libseccomp or kernel is an error (fail
 * closed), except for names this architecture never had (e.g. umount on
 * x86_64), which libseccomp resolves to a pseudo number and skips.
 */
static const char *const deny_eperm[] = {
        /* Kernel keyrings are shared by the user's processes and may hold secrets. */
        "keyctl", "add_key", "request_key",
        /* Mounts and namespaces: the command must not undo the masks or leave. */
        "mount", "umount", "umount2", "pivot_root", "move_mount", "open_tree", "fsopen", "fsconfig",
        "fsmount", "fspick", "mount_setattr", "setns", "chroot",
        /* Debugging other processes, and kernel interfaces with a record of escapes. */
        "ptrace", "process_vm_readv", "process_vm_writev", "bpf", "perf_event_open", "userfaultfd",
        "io_uring_setup", "io_uring_enter", "io_uring_register", "syslog", "kexec_load",
        "kexec_file_load", "init_module", "finit_module", "delete_module", "open_by_handle_at",
        "lookup_dcookie", "acct", "swapon", "swapoff", "reboot"};

static int
deny(scmp_filter_ctx ctx, uint32_t action, const char *name, unsigned int argc,
     const struct scmp_arg_cmp *args)
{
	int nr = seccomp_syscall_resolve_name(name);

	if (nr == __NR_SCMP_ERROR)
		return -1;
	return seccomp_rule_add_array(ctx, action, nr, argc, args) == 0 ? 0 : -1;
}

static scmp_filter_ctx
build_filter(int sock)
{
	const struct scmp_arg_cmp newuser_a0 =
	        SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER);
	const struct scmp_arg_cmp newuser_clone =
	        SCMP_CMP(CLONE_FLAGS_ARG, SCMP_CMP_MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER);
	/*
	 * ioctl's request is an int to the tty layer: compare the low 32 bits
	 * only, or TIOCSTI with junk in the upper half would pass.
	 */
	const struct scmp_arg_cmp tiocsti = SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffU, TIOCSTI);
	const struct scmp_arg_cmp tioclinux = SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffU, TIOCLINUX);
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	const char *what = NULL;

	if (ctx == NULL) {
		errno = ENOMEM;
		die(sock, VERR_SANDBOX, "seccomp_init");
	}
	for (size_t i = 0; i < sizeof(deny_eperm) / sizeof(deny_eperm[0]) && what == NULL; i++)
		if (deny(ctx, SCMP_ACT_ERRNO(EPERM), deny_eperm[i], 0, NULL) != 0)
			what = deny_eperm[i];
	/* No new user namespace, where the command would be root again. */
	if (what == NULL && deny(ctx, SCMP_ACT_ERRNO(EPERM), "unshare", 1, &newuser_a0) != 0)
		what = "unshare";
	if (what == NULL && deny(ctx, SCMP_ACT_ERRNO(EPERM), "clone", 1, &newuser_clone) != 0)
		what = "clone";
	/*
	 * clone3 passes its flags in memory, out of seccomp's reach: ENOSYS
	 * makes libc fall back to clone, whose flags are checked above.
	 */
	if (what == NULL && deny(ctx, SCMP_ACT_ERRNO(ENOSYS), "clone3", 0, NULL) != 0)
		what = "clone3";
	/* Typing into the terminal's input queue would run commands outside. */
	if (what == NULL && deny(ctx, SCMP_ACT_ERRNO(EPERM), "ioctl", 1, &tiocsti) != 0)
		what = "ioctl(TIOCSTI)";
	if (what == NULL && deny(ctx, SCMP_ACT_ERRNO(EPERM), "ioctl", 1, &tioclinux) != 0)
		what = "ioctl(TIOCLINUX)";
	if (what != NULL) {
		errno = EINVAL;
		die(sock, VERR_SANDBOX, "seccomp rule for %s", what);
	}
	return ctx;
}

/* ---- the command: drop everything, exec ---- */

static int
landlock_abi(void)
{
	long abi = syscall(__NR_landlock_create_ruleset, NULL, 0, LL_CREATE_RULESET_VERSION);

	return abi < 0 ? 0 : (int)abi;
}

static void
drop_privileges(int sock, scmp_filter_ctx filter)
{
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
	int cap;

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		die(sock, VERR_SANDBOX, "prctl(PR_SET_NO_NEW_PRIVS)");
	/*
	 * Mapped root (uid 0 -> 0) would get every capability back at exec:
	 * NOROOT stops that, the empty bounding set makes it moot twice over.
	 */
	if (prctl(PR_SET_SECUREBITS,
	          SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_KEEP_CAPS_LOCKED |
	                  SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED,
	          0, 0, 0) != 0)
		die(sock, VERR_SANDBOX, "prctl(PR_SET_SECUREBITS)");
	for (cap = 0; cap < 64; cap++) {
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0)
			continue;
		/* EINVAL: past the kernel's last capability (every kernel has over 32). */
		if (errno == EINVAL && cap > 32)
			break;
		die(sock, VERR_SANDBOX, "drop capability %d from the bounding set", cap);
	}
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0)
		die(sock, VERR_SANDBOX, "clear the ambient capabilities");
	memset(d, 0, sizeof(d));
	if (syscall(SYS_capset, &h, d) != 0)
		die(sock, VERR_SANDBOX, "capset");
	/*
	 * Landlock scoping: no signal to, and no abstract unix socket of,
	 * anything outside the sandbox. Defence in depth (the pid and network
	 * namespaces already hide both), so only used where the kernel has it;
	 * where it has it, it must work.
	 */
	if (landlock_abi() >= LL_ABI_SCOPED) {
		struct ll_ruleset_attr attr = {0, 0,
		                               LL_SCOPE_SIGNAL | LL_SCOPE_ABSTRACT_UNIX_SOCKET};
		long fd = syscall(__NR_landlock_create_ruleset, &attr, sizeof(attr), 0);

		if (fd < 0)
			die(sock, VERR_SANDBOX, "landlock_create_ruleset");
		if (syscall(__NR_landlock_restrict_self, (int)fd, 0) != 0)
			die(sock, VERR_SANDBOX, "landlock_restrict_self");
		close((int)fd);
	}
	if (seccomp_load(filter) != 0) {
		errno = EINVAL;
		die(sock, VERR_SANDBOX, "load the seccomp filter");
	}
}

__attribute__((noreturn)) static void
command_main(int sock, int ready_w, const struct sandbox_config *cfg, scmp_filter_ctx filter)
{
	sigset_t ttou, old;
	int e;

	failed_fd = ready_w;
	/* vrun's death kills init, whose death kills us; and init is pid 1. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0 || getppid() != 1)
		_exit(125);
	/* Its own process group, and the terminal when vrun had it, as a shell would. */
	if (setpgid(0, 0) != 0)
		die(sock, VERR_SANDBOX, "setpgid");
	if (cfg->tty_fd >= 0) {
		sigemptyset(&ttou);
		sigaddset(&ttou, SIGTTOU);
		sigprocmask(SIG_BLOCK, &ttou, &old);
		/* Best effort: vrun may have been moved to the background meanwhile. */
		(void)tcsetpgrp(cfg->tty_fd, getpid());
		sigprocmask(SIG_SETMASK, &old, NULL);
	}
	if (send_msg(sock, MSG_PID, 0, 0, NULL, 0, -1) != 0)
		die(sock, VERR_SANDBOX, "report the command's pid");
	if (close_other_fds(sock, ready_w) != 0)
		die(sock, VERR_SANDBOX, "close inherited descriptors");
	drop_privileges(sock, filter);
	execvp(cfg->argv[0], cfg->argv);
	e = errno;
	send_msg(sock, MSG_EXECFAIL, 0, e, NULL, 0, -1);
	(void)!write(ready_w, "x", 1);
	_exit(e == ENOENT ? 127 : 126);
}

/* Apply the environment changes of a MSG_GO: "NAME=VALUE" sets, "NAME" removes. */
static void
apply_env(int sock, const char *p, const char *end)
{
	while (p < end) {
		size_t n = strnlen(p, (size_t)(end - p));
		const char *eq = memchr(p, '=', n);
		int r;

		if (n == (size_t)(end - p) || n == 0 || eq == p) {
			errno = EINVAL;
			die(sock, VERR_SANDBOX, "malformed environment entry");
		}
		if (eq != NULL) {
			char *name = strndup(p, (size_t)(eq - p));

			r = name == NULL ? -1 : setenv(name, eq + 1, 1);
			free(name);
		} else {
			r = unsetenv(p);
		}
		if (r != 0)
			die(sock, VERR_SANDBOX, "set the environment");
		p += n + 1;
	}
}

__attribute__((noreturn)) static void
init_main(int sock, const struct sandbox_config *cfg, uid_t uid, gid_t gid)
{
	struct msg_head head;
	scmp_filter_ctx filter;
	char *buf, *ca, *end, cwd[4096];
	size_t len;
	ssize_t n;
	int r, bundle, ready[2], status;
	pid_t cmd, pid;
	char c;

	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0)
		die(sock, VERR_SANDBOX, "prctl(PR_SET_PDEATHSIG)");
	/* vrun may already be gone (no getppid() check across pid namespaces): recv sees EOF. */
	if (close_other_fds(sock, -1) != 0)
		die(sock, VERR_SANDBOX, "close inherited descriptors");
	write_maps(sock, uid, gid);
	/*
	 * init keeps full capabilities in the new user namespace: the command
	 * (same uid) must not reach its memory through /proc/1/mem.
	 */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
		die(sock, VERR_SANDBOX, "prctl(PR_SET_DUMPABLE)");
	/*
	 * The inherited working directory is the directory itself, not its
	 * name: started inside a hidden directory, the command would still
	 * see it. Its name is looked up again once every mount is in place.
	 */
	if (getcwd(cwd, sizeof(cwd)) == NULL)
		die(sock, VERR_SANDBOX, "cannot tell the working directory");
	loopback_up(sock);
	/*
	 * The mounts before the listener: a sandbox that cannot be built fails
	 * before vrun asks vproxy for a session, and vrun learns how many
	 * paths are masked. The filter is built while vrun talks to vproxy.
	 */
	send_listener(sock, setup_mounts(sock, cfg));
	filter = build_filter(sock);
	if ((buf = malloc(MSG_MAX)) == NULL)
		die(sock, VERR_SANDBOX, "malloc");
	r = recv_msg(sock, buf, MSG_MAX, &head, &len, &bundle, NULL);
	if (r == VERR_CTL_EOF)
		_exit(125); /* vrun gave up (session refused): nothing to say */
	if (r != 0 || head.type != MSG_GO || bundle < 0 || len == 0 || buf[len - 1] != '\0') {
		errno = EPROTO;
		die(sock, VERR_SANDBOX, "waiting for the session");
	}
	ca = buf;
	end = buf + len;
	keep_file(sock, ca, bundle);
	close(bundle);
	apply_env(sock, ca + strlen(ca) + 1, end);
	if (chdir(cwd) != 0)
		die(sock, VERR_SANDBOX, "the working directory %s is hidden in the sandbox", cwd);
	if (pipe2(ready, O_CLOEXEC) != 0)
		die(sock, VERR_SANDBOX, "pipe");
	if ((cmd = fork()) < 0)
		die(sock, VERR_SANDBOX, "fork");
	if (cmd == 0) {
		close(ready[0]);
		command_main(sock, ready[1], cfg, filter);
	}
	close(ready[1]);
	seccomp_release(filter);
	/* EOF: the exec closed the pipe. A byte: it failed and said why. */
	while ((n = read(ready[0], &c, 1)) < 0 && errno == EINTR)
		;
	if (n == 0)
		send_msg(sock, MSG_RUNNING, 0, 0, NULL, 0, -1);
	close(ready[0]);
	/* Reap everything (orphans come to pid 1); report the command's stops and end. */
	for (;;) {
		pid = waitpid(-1, &status, WUNTRACED | __WALL);
		if (pid < 0 && errno == EINTR)
			continue;
		if (pid < 0)
			_exit(125);
		if (pid != cmd)
			continue;
		if (WIFSTOPPED(status)) {
			send_msg(sock, MSG_STOPPED, WSTOPSIG(status), 0, NULL, 0, -1);
			continue;
		}
		send_msg(sock, MSG_EXITED, status, 0, NULL, 0, -1);
		_exit(0);
	}
}

/* ---- vrun's side ---- */

/* fork() into new namespaces: glibc's clone() wants a separate stack. */
static pid_t
clone_ns(unsigned long flags)
{
#if defined(__s390__) || defined(__CRIS__)
	return (pid_t)syscall(SYS_clone, 0, flags | SIGCHLD, NULL, NULL, 0);
#else
	return (pid_t)syscall(SYS_clone, flags | SIGCHLD, 0, NULL, NULL, 0);
#endif
}

/* An error message from the sandbox, else a generic one for what happened. */
static int
sandbox_error(int r, const struct msg_head *head, const char *text, size_t len, char *err,
              size_t errsize)
{
	if (r == 0 && head->type == MSG_ERROR) {
		copy_text(err, errsize, text, len);
		return head->a == VERR_NO_USERNS ? VERR_NO_USERNS : VERR_SANDBOX;
	}
	if (r == VERR_SYSTEM)
		set_err(err, errsize, "talking to the sandbox: %s", strerror(errno));
	else if (r == VERR_CTL_EOF)
		set_err(err, errsize, "the sandbox exited during setup");
	else
		set_err(err, errsize, "unexpected message from the sandbox");
	return VERR_SANDBOX;
}

int
sandbox_start(const struct sandbox_config *cfg, struct sandbox **out, int *listen_fd, char *err,
              size_t errsize)
{
	struct sandbox *sb;
	struct msg_head head;
	char text[ERR_TEXT];
	uid_t uid = geteuid();
	gid_t gid = getegid();
	size_t len;
	int sv[2], one = 1, r, fd;

	*out = NULL;
	*listen_fd = -1;
	set_err(err, errsize, "%s", "");
	if (cfg->argv == NULL || cfg->argv[0] == NULL || cfg->tty_fd > 2)
		return VERR_INVALID;
	if ((sb = calloc(1, sizeof(*sb))) == NULL)
		return VERR_NOMEM;
	sb->sock = -1;
	sb->landlock_abi = landlock_abi();
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
		set_err(err, errsize, "socketpair: %s", strerror(errno));
		free(sb);
		return VERR_SANDBOX;
	}
	sb->sock = sv[0];
	if (setsockopt(sb->sock, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)) != 0) {
		set_err(err, errsize, "SO_PASSCRED: %s", strerror(errno));
		r = VERR_SANDBOX;
		close(sv[1]);
		goto fail;
	}
	sb->init_pid = clone_ns(NS_FLAGS);
	if (sb->init_pid == 0) {
		close(sv[0]);
		init_main(sv[1], cfg, uid, gid);
	}
	close(sv[1]);
	if (sb->init_pid < 0) {
		r = (errno == EPERM || errno == ENOSPC || errno == EUSERS || errno == EACCES ||
		     errno == EINVAL)
		            ? VERR_NO_USERNS
		            : VERR_SANDBOX;
		set_err(err, errsize, "cannot create user, pid, network and mount namespaces: %s",
		        strerror(errno));
		sb->init_pid = 0;
		goto fail;
	}
	do
		r = recv_msg(sb->sock, text, sizeof(text), &head, &len, &fd, NULL);
	while (r == VERR_SYSTEM && errno == EINTR);
	if (r != 0 || head.type != MSG_LISTENER || fd < 0) {
		if (fd >= 0)
			close(fd);
		r = sandbox_error(r, &head, text, len, err, errsize);
		goto fail;
	}
	sb->hidden = head.a > 0 ? (size_t)head.a : 0;
	*listen_fd = fd;
	*out = sb;
	return VERR_OK;
fail:
	sandbox_free(sb);
	return r;
}

int
sandbox_exec(struct sandbox *sb, const char *const *env, size_t nenv, const char *ca_path,
             char *err, size_t errsize)
{
	struct msg_head head;
	char *buf = NULL, text[ERR_TEXT];
	size_t len = strlen(ca_path) + 1, off;
	int r, fd = -1, bundle = -1, exec_errno = 0, saved_code = 0;
	pid_t pid;

	set_err(err, errsize, "%s", "");
	for (size_t i = 0; i < nenv; i++)
		len += strlen(env[i]) + 1;
	if (len > MSG_MAX - sizeof(head)) {
		set_err(err, errsize, "the environment for the command is too large");
		return VERR_TOO_LARGE;
	}
	if ((buf = malloc(len)) == NULL)
		return VERR_NOMEM;
	off = 0;
	memcpy(buf, ca_path, strlen(ca_path) + 1);
	off += strlen(ca_path) + 1;
	for (size_t i = 0; i < nenv; i++) {
		memcpy(buf + off, env[i], strlen(env[i]) + 1);
		off += strlen(env[i]) + 1;
	}
	bundle = open(ca_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
	if (bundle < 0) {
		set_err(err, errsize, "open the CA bundle %s: %s", ca_path, strerror(errno));
		r = VERR_SANDBOX;
		goto out;
	}
	if ((r = send_msg(sb->sock, MSG_GO, 0, 0, buf, len, bundle)) != 0) {
		/* The sandbox gave up already: its reason waits in the socket. */
		int e = errno;

		r = recv_msg(sb->sock, text, sizeof(text), &head, &len, &fd, NULL);
		if (fd >= 0)
			close(fd);
		if (r != 0 || head.type != MSG_ERROR) {
			set_err(err, errsize, "start the command: %s", strerror(e));
			r = VERR_SANDBOX;
		} else {
			r = sandbox_error(r, &head, text, len, err, errsize);
		}
		goto out;
	}
	for (;;) {
		r = recv_msg(sb->sock, text, sizeof(text), &head, &len, &fd, &pid);
		if (r == VERR_SYSTEM && errno == EINTR)
			continue;
		if (fd >= 0)
			close(fd);
		if (r != 0)
			break;
		if (head.type == MSG_PID && pid > 0) {
			sb->cmd_pid = pid;
		} else if (head.type == MSG_RUNNING) {
			if (sb->cmd_pid > 0 && exec_errno == 0 && saved_code == 0) {
				r = VERR_OK;
				goto out;
			}
		} else if (head.type == MSG_EXECFAIL) {
			exec_errno = head.b;
		} else if (head.type == MSG_ERROR && saved_code == 0) {
			saved_code = head.a == VERR_NO_USERNS ? VERR_NO_USERNS : VERR_SANDBOX;
			copy_text(err, errsize, text, len);
		} else if (head.type == MSG_EXITED) {
			sb->exited = 1;
			break;
		} else if (head.type != MSG_ERROR) {
			r = VERR_SANDBOX;
			break;
		}
	}
	if (exec_errno != 0) {
		set_err(err, errsize, "%s", strerror(exec_errno));
		r = exec_errno == ENOENT ? VERR_CMD_NOT_FOUND : VERR_CMD_NOT_EXEC;
	} else if (saved_code != 0) {
		r = saved_code;
	} else {
		r = sandbox_error(r, &head, text, len, err, errsize);
	}
out:
	if (bundle >= 0)
		close(bundle);
	free(buf);
	return r;
}

int
sandbox_wait(struct sandbox *sb, const sigset_t *mask, int *event, int *status, char *err,
             size_t errsize)
{
	struct pollfd p = {sb->sock, POLLIN, 0};
	struct msg_head head;
	char text[ERR_TEXT];
	size_t len;
	int r, fd;

	*event = *status = 0;
	for (;;) {
		if (ppoll(&p, 1, NULL, mask) < 0)
			return VERR_SYSTEM; /* EINTR: a signal for the caller to forward */
		r = recv_msg(sb->sock, text, sizeof(text), &head, &len, &fd, NULL);
		if (fd >= 0)
			close(fd);
		if (r == VERR_SYSTEM && errno == EINTR)
			continue;
		if (r != 0)
			return sandbox_error(r, &head, text, len, err, errsize);
		if (head.type == MSG_STOPPED) {
			*event = SANDBOX_STOPPED;
			*status = head.a;
			return VERR_OK;
		}
		if (head.type == MSG_EXITED) {
			sb->exited = 1;
			*event = SANDBOX_EXITED;
			*status = head.a;
			return VERR_OK;
		}
		if (head.type == MSG_ERROR)
			return sandbox_error(r, &head, text, len, err, errsize);
	}
}

int
sandbox_signal(struct sandbox *sb, int sig)
{
	if (sb->cmd_pid <= 0 || sb->exited)
		return VERR_OK;
	if (kill(-sb->cmd_pid, sig) != 0 && errno != ESRCH)
		return VERR_SYSTEM;
	return VERR_OK;
}

pid_t
sandbox_pgid(const struct sandbox *sb)
{
	return sb->cmd_pid > 0 ? sb->cmd_pid : -1;
}

size_t
sandbox_hidden(const struct sandbox *sb)
{
	return sb->hidden;
}

/*
 * Advice by the step that failed: the start of the err text, which names
 * the step (die() and set_err() above). Containers are the usual cause:
 * their runtimes cover parts of /proc, deny mounts (AppArmor) or new
 * namespaces (seccomp) by default.
 */
const char *
sandbox_hint(int code, const char *err)
{
	static const char mounts[] =
	        "mounts inside the sandbox were refused: inside a container, an AppArmor or "
	        "SELinux policy may forbid them (Docker: `--security-opt apparmor=unconfined`); "
	        "or run vrun outside the container";
	static const char privileges[] =
	        "the sandbox could not drop its privileges: inside a container, its seccomp "
	        "policy may block prctl or capset; run vrun outside the container";
	static const struct {
		const char *step, *hint;
	} hints[] = {
	        /* EPERM (not ENOSPC, the sysctl limit): what container runtimes' seccomp gives. */
	        {"cannot create user, pid, network and mount namespaces: Operation not permitted",
	         "inside a container (Docker, Podman), its seccomp policy usually forbids new "
	         "namespaces: start it with `--security-opt seccomp=unconfined` (or a policy "
	         "allowing clone and unshare with namespace flags), or run vrun outside the "
	         "container"},
	        {"mount /proc",
	         "parts of this system's /proc are covered by other mounts, as in a container "
	         "(Docker, Podman), and the kernel then refuses the sandbox a /proc of its own: "
	         "start the container with `--security-opt systempaths=unconfined` (Docker) or "
	         "`--security-opt unmask=ALL` (Podman), or run vrun outside the container"},
	        {"make the mount namespace private", mounts},
	        {"mount /dev/shm", mounts},
	        {"hide ",
	         "a path the profile hides cannot be covered: check that it is a file, directory "
	         "or socket on a local file system, or remove its `hide` line (vrun-profile(5)); "
	         "`vrun --check -v` lists every hidden path"},
	        {"seccomp", "the seccomp filter could not be built: libseccomp may be older than "
	                    "the kernel; upgrade the libseccomp package"},
	        {"load the seccomp filter",
	         "the kernel refused the seccomp filter: it may lack seccomp filters "
	         "(CONFIG_SECCOMP_FILTER), or a container's own policy forbids them; run vrun "
	         "outside the container"},
	        {"landlock_",
	         "the kernel offers Landlock ABI 6 or later but refused it: inside a container, "
	         "its "
	         "seccomp policy may block the landlock system calls; allow them, or run vrun "
	         "outside the container"},
	        {"prctl(", privileges},
	        {"drop capability", privileges},
	        {"clear the ambient capabilities", privileges},
	        {"capset", privileges},
	        {"the working directory ",
	         "cd to a directory the profile does not hide, then run vrun again"},
	        {"cannot tell the working directory",
	         "the working directory is gone or unreadable: cd to an existing directory"},
	};

	if (err == NULL || (code != VERR_SANDBOX && code != VERR_NO_USERNS))
		return NULL;
	for (size_t i = 0; i < sizeof(hints) / sizeof(hints[0]); i++)
		if (strncmp(err, hints[i].step, strlen(hints[i].step)) == 0)
			return hints[i].hint;
	return NULL;
}

void
sandbox_describe(const struct sandbox *sb, char *buf, size_t size)
{
	if (sb->landlock_abi >= LL_ABI_SCOPED)
		snprintf(buf, size,
		         "user, pid, network, mount and IPC namespaces; no capabilities; "
		         "no_new_privs; seccomp; Landlock ABI %d: signals and abstract unix "
		         "sockets scoped",
		         sb->landlock_abi);
	else
		snprintf(buf, size,
		         "user, pid, network, mount and IPC namespaces; no capabilities; "
		         "no_new_privs; seccomp; Landlock scoping unavailable (ABI %d, needs 6)",
		         sb->landlock_abi);
}

void
sandbox_free(struct sandbox *sb)
{
	int st;

	if (sb == NULL)
		return;
	if (sb->init_pid > 0) {
		/* init dies with everything in its pid namespace. */
		kill(sb->init_pid, SIGKILL);
		while (waitpid(sb->init_pid, &st, 0) < 0 && errno == EINTR)
			;
	}
	if (sb->sock >= 0)
		close(sb->sock);
	free(sb);
}

int
sandbox_proxy_auth(const struct sandbox *sb, char *buf, size_t size)
{
	(void)sb;
	/* The listener lives in the sandbox's own network namespace: no credential. */
	if (size == 0)
		return VERR_TOO_LARGE;
	buf[0] = '\0';
	return VERR_OK;
}
