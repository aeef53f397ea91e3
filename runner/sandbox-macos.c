/*
 * sandbox-macos: the command runs under a Seatbelt profile compiled from
 * the hide list (runner/sbpl.c) and applied with sandbox_init() in the
 * forked child, just before exec; the sandbox is inherited by everything
 * the command starts and cannot be lifted.
 *
 * macOS has no network namespaces, so the session listener is an ordinary
 * socket on the host's 127.0.0.1 that any local process can reach. Two
 * things make up for that:
 *
 *   - the profile lets the command connect to nothing but localhost:PORT
 *     (Seatbelt can only say "localhost", which includes ::1, so vrun also
 *     binds [::1]:PORT: no other service of the host can sit there);
 *   - a per-session proxy credential, 128 random bits, goes into the
 *     proxy URL's userinfo (http://vrun:TOKEN@127.0.0.1:PORT), which
 *     clients send as "Proxy-Authorization: Basic"; vproxy must refuse
 *     requests on this listener without it, so that other local processes
 *     cannot ride the session. sandbox_proxy_auth() gives it to vrun for
 *     the OPEN message.
 *
 * There is no pid namespace either: the profile confines signals to the
 * sandbox, and sandbox_free kills the command's process group.
 *
 * Compiled only on Apple platforms; CI syntax-checks it with stub headers
 * (tests/stubs/macos, ctest macos_syntax).
 */
#ifdef __APPLE__
/* The build defines _POSIX_C_SOURCE, which hides NSIG and the BSD interfaces. */
#define _DARWIN_C_SOURCE

#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <libproc.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/event.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "profile.h"
#include "sbpl.h"
#include "verr.h"

/*
 * From the SDK's <sandbox.h>, which our include/sandbox.h shadows. With
 * flags 0 the profile is SBPL source. Deprecated since 10.8, yet it is what
 * sandbox-exec and the system's own daemons still use.
 */
int sandbox_init(const char *profile, uint64_t flags, char **errorbuf);
void sandbox_free_error(char *errorbuf);

#define TOKEN_BYTES   16
#define PROXY_USER    "vrun"
#define BIND_ATTEMPTS 32
#define REPORT_TEXT   240

struct sandbox {
	char **argv;
	char **hide;
	size_t nhide;
	size_t hidden; /* of hide, the paths that exist */
	int tty_fd;
	int port;
	int v6_fd;     /* [::1]:port, bound and never listening; -1 without IPv6 */
	int kq;        /* SIGCHLD and the command's exit, for sandbox_wait */
	pid_t cmd_pid; /* also its process group; 0 until it runs */
	int exited;
	unsigned char ignored[NSIG]; /* dispositions at sandbox_start: kept for the command */
	sigset_t mask;               /* signal mask at sandbox_start */
	char token[2 * TOKEN_BYTES + 1];
};

/* What the child tells vrun when it cannot exec; EOF on the pipe means it did. */
struct report {
	int32_t code; /* VERR_SANDBOX, or 0 for an exec failure */
	int32_t err;  /* errno */
	char text[REPORT_TEXT];
};

static void set_err(char *err, size_t errsize, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

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

static void
strv_free(char **v)
{
	if (v == NULL)
		return;
	for (size_t i = 0; v[i] != NULL; i++)
		free(v[i]);
	free(v);
}

/* A NULL-terminated copy of n strings (n == SIZE_MAX: up to v's NULL). */
static char **
strv_dup(const char *const *v, size_t n)
{
	char **out;

	if (n == SIZE_MAX)
		for (n = 0; v[n] != NULL; n++)
			;
	if ((out = calloc(n + 1, sizeof(*out))) == NULL)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if ((out[i] = strdup(v[i])) == NULL) {
			strv_free(out);
			return NULL;
		}
	return out;
}

/* macOS has neither SOCK_CLOEXEC nor pipe2; vrun has no other thread to race. */
static int
cloexec(int fd)
{
	int fl = fcntl(fd, F_GETFD);

	return fl < 0 ? -1 : fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
}

/*
 * Listen on 127.0.0.1 on a free port and hold [::1] on the same port, so
 * that Seatbelt's "localhost:PORT" names this listener only. A port whose
 * IPv6 twin is taken is given up and another one tried.
 */
static int
make_listener(struct sandbox *sb, int *out, char *err, size_t errsize)
{
	for (int attempt = 0; attempt < BIND_ATTEMPTS; attempt++) {
		struct sockaddr_in a4;
		struct sockaddr_in6 a6;
		socklen_t len = sizeof(a4);
		int fd4, fd6, one = 1, e;

		if ((fd4 = socket(AF_INET, SOCK_STREAM, 0)) < 0) {
			set_err(err, errsize, "socket: %s", strerror(errno));
			return VERR_SANDBOX;
		}
		memset(&a4, 0, sizeof(a4));
		a4.sin_family = AF_INET;
		a4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		if (cloexec(fd4) != 0 || bind(fd4, (struct sockaddr *)&a4, sizeof(a4)) != 0 ||
		    getsockname(fd4, (struct sockaddr *)&a4, &len) != 0 || listen(fd4, 128) != 0) {
			set_err(err, errsize, "listen on 127.0.0.1: %s", strerror(errno));
			close(fd4);
			return VERR_SANDBOX;
		}
		if ((fd6 = socket(AF_INET6, SOCK_STREAM, 0)) < 0) {
			if (errno == EAFNOSUPPORT || errno == EPROTONOSUPPORT) {
				sb->v6_fd = -1;
				sb->port = ntohs(a4.sin_port);
				*out = fd4;
				return 0;
			}
			set_err(err, errsize, "socket(AF_INET6): %s", strerror(errno));
			close(fd4);
			return VERR_SANDBOX;
		}
		memset(&a6, 0, sizeof(a6));
		a6.sin6_family = AF_INET6;
		a6.sin6_addr = in6addr_loopback;
		a6.sin6_port = a4.sin_port;
		if (cloexec(fd6) == 0 &&
		    setsockopt(fd6, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) == 0 &&
		    bind(fd6, (struct sockaddr *)&a6, sizeof(a6)) == 0) {
			sb->v6_fd = fd6;
			sb->port = ntohs(a4.sin_port);
			*out = fd4;
			return 0;
		}
		e = errno;
		close(fd6);
		if (e == EADDRNOTAVAIL) {
			/* No ::1 on this host: "localhost" cannot reach IPv6 either. */
			sb->v6_fd = -1;
			sb->port = ntohs(a4.sin_port);
			*out = fd4;
			return 0;
		}
		close(fd4);
		if (e != EADDRINUSE) {
			set_err(err, errsize, "bind [::1]: %s", strerror(e));
			return VERR_SANDBOX;
		}
	}
	set_err(err, errsize, "no loopback port free on both 127.0.0.1 and [::1]");
	return VERR_SANDBOX;
}

int
sandbox_start(const struct sandbox_config *cfg, struct sandbox **out, int *listen_fd, char *err,
              size_t errsize)
{
	struct sandbox *sb;
	struct sigaction sa;
	unsigned char raw[TOKEN_BYTES];
	struct kevent ev;
	int r;

	*out = NULL;
	*listen_fd = -1;
	set_err(err, errsize, "%s", "");
	if (cfg->argv == NULL || cfg->argv[0] == NULL || cfg->tty_fd > 2 ||
	    (cfg->nhide > 0 && cfg->hide == NULL))
		return VERR_INVALID;
	if (sodium_init() < 0) {
		set_err(err, errsize, "libsodium cannot initialise");
		return VERR_CRYPTO;
	}
	if ((sb = calloc(1, sizeof(*sb))) == NULL)
		return VERR_NOMEM;
	sb->v6_fd = sb->kq = -1;
	sb->tty_fd = cfg->tty_fd;
	if ((sb->argv = strv_dup((const char *const *)cfg->argv, SIZE_MAX)) == NULL ||
	    (sb->hide = strv_dup(cfg->hide, cfg->nhide)) == NULL) {
		r = VERR_NOMEM;
		goto fail;
	}
	sb->nhide = cfg->nhide;
	/* Seatbelt denies every listed path; the ones that exist are what it hides. */
	for (size_t i = 0; i < sb->nhide; i++) {
		struct stat st;

		if (stat(sb->hide[i], &st) == 0)
			sb->hidden++;
	}
	/* The command inherits what is in effect now, as on Linux, where it forks here. */
	if (sigprocmask(SIG_SETMASK, NULL, &sb->mask) != 0) {
		set_err(err, errsize, "sigprocmask: %s", strerror(errno));
		r = VERR_SANDBOX;
		goto fail;
	}
	for (int sig = 1; sig < NSIG; sig++)
		if (sigaction(sig, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN)
			sb->ignored[sig] = 1;
	/*
	 * SIGCHLD is recorded by the kqueue whatever its disposition or mask, so
	 * sandbox_wait never misses a stop or an exit. Registered before the
	 * fork, so even an immediate exit is seen.
	 */
	if ((sb->kq = kqueue()) < 0 || cloexec(sb->kq) != 0 || sb->kq >= FD_SETSIZE) {
		set_err(err, errsize, "kqueue: %s", strerror(errno != 0 ? errno : EMFILE));
		r = VERR_SANDBOX;
		goto fail;
	}
	EV_SET(&ev, SIGCHLD, EVFILT_SIGNAL, EV_ADD, 0, 0, NULL);
	if (kevent(sb->kq, &ev, 1, NULL, 0, NULL) != 0) {
		set_err(err, errsize, "kevent(SIGCHLD): %s", strerror(errno));
		r = VERR_SANDBOX;
		goto fail;
	}
	randombytes_buf(raw, sizeof(raw));
	sodium_bin2hex(sb->token, sizeof(sb->token), raw, sizeof(raw));
	sodium_memzero(raw, sizeof(raw));
	if ((r = make_listener(sb, listen_fd, err, errsize)) != 0)
		goto fail;
	*out = sb;
	return VERR_OK;
fail:
	sandbox_free(sb);
	return r;
}

int
sandbox_proxy_auth(const struct sandbox *sb, char *buf, size_t size)
{
	int n = snprintf(buf, size, "%s:%s", PROXY_USER, sb->token);

	return n < 0 || (size_t)n >= size ? VERR_TOO_LARGE : VERR_OK;
}

/* ---- the Seatbelt profile ---- */

static int
list_add(char ***v, size_t *n, const char *s)
{
	char **nv = realloc(*v, (*n + 2) * sizeof(*nv));

	if (nv == NULL)
		return VERR_NOMEM;
	*v = nv;
	if ((nv[*n] = strdup(s)) == NULL)
		return VERR_NOMEM;
	nv[++*n] = NULL;
	return 0;
}

/*
 * The profile for this session. Seatbelt matches resolved paths, so every
 * hidden path that exists here is also denied under its realpath (a
 * symlinked ~/.docker, a home on another volume); missing ones keep only
 * their literal spelling, which is what a later creation would use.
 */
static int
build_profile(const struct sandbox *sb, const char *ca_path, char **text, size_t *len, char *err,
              size_t errsize)
{
	struct profile p;
	char **extra = NULL, **allow = NULL, *real;
	size_t nextra = 0, nallow = 0;
	int r = 0;

	memset(&p, 0, sizeof(p));
	snprintf(p.name, sizeof(p.name), "vrun session");
	p.hide = sb->hide;
	p.nhide = sb->nhide;
	p.network = PROFILE_NET_PROXY_ONLY;
	for (size_t i = 0; i < sb->nhide && r == 0; i++) {
		if ((real = realpath(sb->hide[i], NULL)) == NULL)
			continue;
		if (strcmp(real, sb->hide[i]) != 0)
			r = list_add(&extra, &nextra, real);
		free(real);
	}
	if (r == 0)
		r = list_add(&allow, &nallow, ca_path);
	if (r == 0 && (real = realpath(ca_path, NULL)) != NULL) {
		if (strcmp(real, ca_path) != 0)
			r = list_add(&allow, &nallow, real);
		free(real);
	}
	if (r == 0)
		r = sbpl_generate_session(&p, sb->port, (const char *const *)extra,
		                          (const char *const *)allow, text, len);
	if (r == VERR_SBPL_STRING)
		set_err(err, errsize, "a hidden path cannot be written into the Seatbelt profile");
	strv_free(extra);
	strv_free(allow);
	return r;
}

/* ---- the child, between fork and exec ---- */

__attribute__((noreturn)) static void
child_fail(int fd, int32_t code, const char *what)
{
	struct report rep;

	memset(&rep, 0, sizeof(rep));
	rep.code = code;
	rep.err = errno;
	snprintf(rep.text, sizeof(rep.text), "%s", what);
	(void)!write(fd, &rep, sizeof(rep));
	_exit(code == 0 ? (rep.err == ENOENT ? 127 : 126) : 125);
}

/*
 * "http://127.0.0.1:PORT" as vrun sets it for the proxy variables becomes
 * "http://vrun:TOKEN@127.0.0.1:PORT". NULL when entry is not such a value.
 */
static char *
with_credential(const struct sandbox *sb, const char *entry)
{
	static const char *const vars[] = {"HTTPS_PROXY", "https_proxy", "HTTP_PROXY",
	                                   "http_proxy",  "ALL_PROXY",   "all_proxy"};
	const char *eq = strchr(entry, '='), *auth, *slash, *at;
	size_t len;
	char *out;

	if (eq == NULL)
		return NULL;
	for (size_t i = 0;; i++) {
		if (i == sizeof(vars) / sizeof(vars[0]))
			return NULL;
		if (strlen(vars[i]) == (size_t)(eq - entry) &&
		    memcmp(vars[i], entry, (size_t)(eq - entry)) == 0)
			break;
	}
	if (strncmp(eq + 1, "http://", 7) != 0)
		return NULL;
	auth = eq + 1 + 7;
	slash = strchr(auth, '/');
	at = strchr(auth, '@');
	if (at != NULL && (slash == NULL || at < slash))
		return NULL;
	len = strlen(entry) + sizeof(PROXY_USER) + strlen(sb->token) + 2;
	if ((out = malloc(len)) == NULL)
		return NULL;
	snprintf(out, len, "%.*s%s:%s@%s", (int)(auth - entry), entry, PROXY_USER, sb->token, auth);
	return out;
}

static void
apply_env(const struct sandbox *sb, int fd, const char *const *env, size_t nenv)
{
	for (size_t i = 0; i < nenv; i++) {
		char *cred = with_credential(sb, env[i]);
		const char *entry = cred != NULL ? cred : env[i];
		const char *eq = strchr(entry, '=');
		int r;

		if (eq == entry || entry[0] == '\0') {
			errno = EINVAL;
			child_fail(fd, VERR_SANDBOX, "malformed environment entry");
		}
		if (eq != NULL) {
			char *name = strndup(entry, (size_t)(eq - entry));

			r = name == NULL ? -1 : setenv(name, eq + 1, 1);
			free(name);
		} else {
			r = unsetenv(entry);
		}
		free(cred);
		if (r != 0)
			child_fail(fd, VERR_SANDBOX, "set the environment");
	}
}

/* Close every descriptor above 2 but keep: the kernel lists them, no guessing a maximum. */
static int
close_other_fds(int keep)
{
	struct proc_fdinfo *fds;
	int size, n;

	if ((size = proc_pidinfo(getpid(), PROC_PIDLISTFDS, 0, NULL, 0)) <= 0)
		return -1;
	/* Room for a few more: none can appear, the process is single-threaded now. */
	size += 16 * (int)PROC_PIDLISTFD_SIZE;
	if ((fds = malloc((size_t)size)) == NULL)
		return -1;
	if ((n = proc_pidinfo(getpid(), PROC_PIDLISTFDS, 0, fds, size)) <= 0) {
		free(fds);
		return -1;
	}
	for (int i = 0; i < n / (int)PROC_PIDLISTFD_SIZE; i++)
		if (fds[i].proc_fd > 2 && fds[i].proc_fd != keep)
			close(fds[i].proc_fd);
	free(fds);
	return 0;
}

__attribute__((noreturn)) static void
child_main(const struct sandbox *sb, int fd, const char *text, const char *const *env, size_t nenv)
{
	struct sigaction sa;
	sigset_t ttou, old;
	char *sberr = NULL;

	/* Its own process group, and the terminal when vrun had it, as a shell would. */
	if (setpgid(0, 0) != 0)
		child_fail(fd, VERR_SANDBOX, "setpgid");
	if (sb->tty_fd >= 0) {
		sigemptyset(&ttou);
		sigaddset(&ttou, SIGTTOU);
		sigprocmask(SIG_BLOCK, &ttou, &old);
		/* Best effort: vrun may have been moved to the background meanwhile. */
		(void)tcsetpgrp(sb->tty_fd, getpid());
		sigprocmask(SIG_SETMASK, &old, NULL);
	}
	apply_env(sb, fd, env, nenv);
	if (close_other_fds(fd) != 0)
		child_fail(fd, VERR_SANDBOX, "close inherited descriptors");
	if (sandbox_init(text, 0, &sberr) != 0) {
		char what[REPORT_TEXT];

		snprintf(what, sizeof(what), "sandbox_init: %s",
		         sberr != NULL ? sberr : "profile refused");
		if (sberr != NULL)
			sandbox_free_error(sberr);
		errno = EPERM;
		child_fail(fd, VERR_SANDBOX, what);
	}
	/* The dispositions and mask of sandbox_start: ignored stays ignored, the rest default. */
	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	for (int sig = 1; sig < NSIG; sig++) {
		if (sig == SIGKILL || sig == SIGSTOP)
			continue;
		sa.sa_handler = sb->ignored[sig] ? SIG_IGN : SIG_DFL;
		(void)sigaction(sig, &sa, NULL);
	}
	sigprocmask(SIG_SETMASK, &sb->mask, NULL);
	execvp(sb->argv[0], sb->argv);
	child_fail(fd, 0, sb->argv[0]);
}

int
sandbox_exec(struct sandbox *sb, const char *const *env, size_t nenv, const char *ca_path,
             char *err, size_t errsize)
{
	struct report rep;
	struct kevent ev;
	char *text = NULL;
	size_t len = 0, got = 0;
	int p[2] = {-1, -1}, r, st;
	pid_t pid;
	ssize_t n;

	set_err(err, errsize, "%s", "");
	if (sb->cmd_pid != 0 || ca_path == NULL || (nenv > 0 && env == NULL))
		return VERR_INVALID;
	if ((r = build_profile(sb, ca_path, &text, &len, err, errsize)) != 0)
		return r == VERR_SBPL_STRING ? VERR_SANDBOX : r;
	if (pipe(p) != 0 || cloexec(p[0]) != 0 || cloexec(p[1]) != 0) {
		set_err(err, errsize, "pipe: %s", strerror(errno));
		r = VERR_SANDBOX;
		goto out;
	}
	if ((pid = fork()) < 0) {
		set_err(err, errsize, "fork: %s", strerror(errno));
		r = VERR_SANDBOX;
		goto out;
	}
	if (pid == 0) {
		close(p[0]);
		child_main(sb, p[1], text, env, nenv);
	}
	close(p[1]);
	p[1] = -1;
	/* Both sides set the group, so signals reach it whoever runs first. */
	(void)setpgid(pid, pid);
	while (got < sizeof(rep)) {
		n = read(p[0], (char *)&rep + got, sizeof(rep) - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	if (got == 0) {
		sb->cmd_pid = pid;
		/* Best effort: SIGCHLD on the kqueue already covers an exit. */
		EV_SET(&ev, (uintptr_t)pid, EVFILT_PROC, EV_ADD, NOTE_EXIT, 0, NULL);
		(void)kevent(sb->kq, &ev, 1, NULL, 0, NULL);
		r = VERR_OK;
		goto out;
	}
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (got != sizeof(rep)) {
		set_err(err, errsize, "the sandbox failed during setup");
		r = VERR_SANDBOX;
	} else if (rep.code == 0) {
		rep.text[sizeof(rep.text) - 1] = '\0';
		set_err(err, errsize, "%s: %s", rep.text, strerror(rep.err));
		r = rep.err == ENOENT ? VERR_CMD_NOT_FOUND : VERR_CMD_NOT_EXEC;
	} else {
		rep.text[sizeof(rep.text) - 1] = '\0';
		set_err(err, errsize, "%s: %s", rep.text, strerror(rep.err));
		r = VERR_SANDBOX;
	}
out:
	if (p[0] >= 0)
		close(p[0]);
	if (p[1] >= 0)
		close(p[1]);
	free(text);
	return r;
}

int
sandbox_wait(struct sandbox *sb, const sigset_t *mask, int *event, int *status, char *err,
             size_t errsize)
{
	struct kevent evs[8];
	struct timespec zero = {0, 0};
	fd_set rd;
	pid_t w;
	int st;

	*event = *status = 0;
	if (sb->cmd_pid <= 0 || sb->exited) {
		set_err(err, errsize, "no command is running");
		return VERR_SANDBOX;
	}
	for (;;) {
		w = waitpid(sb->cmd_pid, &st, WNOHANG | WUNTRACED);
		if (w == sb->cmd_pid) {
			if (WIFSTOPPED(st)) {
				*event = SANDBOX_STOPPED;
				*status = WSTOPSIG(st);
			} else {
				sb->exited = 1;
				*event = SANDBOX_EXITED;
				*status = st;
			}
			return VERR_OK;
		}
		if (w < 0 && errno != EINTR) {
			set_err(err, errsize, "waitpid: %s", strerror(errno));
			return VERR_SANDBOX;
		}
		/*
		 * Anything that happened since waitpid is pending on the kqueue, so
		 * this cannot sleep through it; pselect swaps the mask atomically.
		 */
		FD_ZERO(&rd);
		FD_SET(sb->kq, &rd);
		if (pselect(sb->kq + 1, &rd, NULL, NULL, NULL, mask) < 0)
			return VERR_SYSTEM; /* EINTR: a signal for the caller to forward */
		(void)kevent(sb->kq, NULL, 0, evs, (int)(sizeof(evs) / sizeof(evs[0])), &zero);
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

const char *
sandbox_hint(int code, const char *err)
{
	if (code != VERR_SANDBOX || err == NULL)
		return NULL;
	/* Seatbelt profiles do not nest: an App Sandbox or sandbox-exec around vrun refuses it. */
	if (strncmp(err, "sandbox_init", 12) == 0)
		return "Seatbelt refused the profile: vrun cannot run inside another sandbox (an "
		       "App Sandbox, sandbox-exec); start it from an unsandboxed terminal";
	return NULL;
}

void
sandbox_describe(const struct sandbox *sb, char *buf, size_t size)
{
	snprintf(buf, size,
	         "Seatbelt (sandbox_init): network only to localhost:%d with a per-session "
	         "proxy credential%s; %zu paths hidden; signals confined to the sandbox; no "
	         "pid or mount namespaces on macOS",
	         sb->port, sb->v6_fd >= 0 ? " ([::1] held)" : "", sb->hidden);
}

void
sandbox_free(struct sandbox *sb)
{
	int st;

	if (sb == NULL)
		return;
	if (sb->cmd_pid > 0 && !sb->exited) {
		kill(-sb->cmd_pid, SIGKILL);
		while (waitpid(sb->cmd_pid, &st, 0) < 0 && errno == EINTR)
			;
	}
	if (sb->v6_fd >= 0)
		close(sb->v6_fd);
	if (sb->kq >= 0)
		close(sb->kq);
	strv_free(sb->argv);
	strv_free(sb->hide);
	sodium_memzero(sb->token, sizeof(sb->token));
	free(sb);
}

#endif /* __APPLE__ */
