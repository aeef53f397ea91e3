/*
 * vrun: run a command in a sandbox whose only reachable endpoint is the
 * session's vproxy listener, with placeholders where the keys would be.
 * vrun never holds a secret: it sees placeholders only.
 *
 * Exit status: the command's; 128+N when it was killed by signal N; 125
 * when vrun itself fails (usage, no vproxy, unknown key, no sandbox); 126
 * when the command cannot be executed; 127 when it is not found.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#ifdef __linux__
#include "check.h"
#endif
#include "cliopt.h"
#include "ctlproto.h"
#include "daemon.h"
#include "paths.h"
#include "profile.h"
#include "sandbox.h"
#include "verr.h"

#ifndef VRUN_VERSION
#define VRUN_VERSION "0.0.0"
#endif
#ifndef VRUN_PROFILE_INSTALL_DIR
#define VRUN_PROFILE_INSTALL_DIR "/usr/local/share/vrun/profiles"
#endif
/* The profiles relative to the directory of the vrun binary (bin -> share). */
#ifndef VRUN_PROFILE_REL_DIR
#define VRUN_PROFILE_REL_DIR "../share/vrun/profiles"
#endif

#define EXIT_VRUN     125
#define EXIT_NOEXEC   126
#define EXIT_NOTFOUND 127
#define MAX_ALLOW     64
#define ARGS_AUDIT    16384 /* bytes of the command line sent for the audit */
#define ERR_MAX       1024

static const char usage_text[] =
        "usage: vrun --key NAME [--key NAME]... [--allow-host HOST[:PORT]]...\n"
        "            [--profile NAME|FILE] [-v] [--] CMD [ARG]...\n"
        "       vrun --check [--key NAME] [--profile NAME|FILE] [-v]\n"
        "\n"
        "Run CMD in a sandbox whose only reachable endpoint is vproxy: the command\n"
        "sees a placeholder in the key's variable, vproxy swaps the real key in on\n"
        "requests to the key's bound hosts.\n"
        "\n"
        "  -k, --key NAME         a vault key for the command (exact name or unique\n"
        "                         prefix); repeatable, at least one\n"
        "  --allow-host HOST[:PORT]\n"
        "                         also let the command reach HOST (port 443 by\n"
        "                         default), tunnelled without injection; repeatable\n"
        "  --profile NAME|FILE    what to hide from the command (default: agent)\n"
        "  --check                instead of a command, run the containment self-test\n"
        "                         in a real sandbox: one ok/FAIL line per probe;\n"
        "                         exit 0 when all pass, 1 otherwise. Uses a session\n"
        "                         for --key NAME, else for the first key vproxy has\n"
        "  -v, --verbose          say which session and protections are in force\n"
        "  -h, --help, help       this help\n"
        "  --version              the version\n"
        "\n"
        "Environment: VAULT_HOME, XDG_RUNTIME_DIR (where vproxy is), VRUN_PROFILE_DIR\n"
        "(where profiles are), NO_COLOR. More in vrun(1) and vrun-profile(5).\n"
        "\n"
        "Exit status: the command's; 128+N if it was killed by signal N; 125 if vrun\n"
        "failed (vproxy not running, unknown key, no sandbox); 126 if the command\n"
        "cannot be executed; 127 if it is not found.\n";

/* Signals vrun passes on to the command (to its process group). */
static const int forwarded[] = {SIGINT,   SIGTERM, SIGHUP,  SIGQUIT,
                                SIGWINCH, SIGTSTP, SIGUSR1, SIGUSR2};
static volatile sig_atomic_t pending[NSIG];

static void
on_signal(int sig)
{
	if (sig > 0 && sig < NSIG)
		pending[sig] = 1;
}

__attribute__((format(printf, 1, 2))) static void
warnx_(const char *fmt, ...)
{
	va_list ap;

	fputs("vrun: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static int
usage_error(const char *what)
{
	warnx_("%s", what);
	fputs("Try `vrun --help`.\n", stderr);
	return EXIT_VRUN;
}

/* Descriptors 0-2 must exist, or the socketpair could land on one. */
static int
ensure_stdio(void)
{
	for (int fd = 0; fd < 3; fd++) {
		if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF)
			continue;
		int n = open("/dev/null", O_RDWR);

		if (n < 0)
			return -1;
		if (n != fd) {
			close(n);
			return -1;
		}
	}
	return 0;
}

/* ---- what to hide ---- */

struct hides {
	char **v;
	size_t n, cap;
};

static int
hides_add(struct hides *h, const char *path)
{
	char **nv;

	if (path == NULL || path[0] != '/')
		return 0;
	for (size_t i = 0; i < h->n; i++)
		if (strcmp(h->v[i], path) == 0)
			return 0;
	if (h->n == h->cap) {
		size_t ncap = h->cap ? 2 * h->cap : 32;

		if ((nv = realloc(h->v, ncap * sizeof(*nv))) == NULL)
			return VERR_NOMEM;
		h->v = nv;
		h->cap = ncap;
	}
	if ((h->v[h->n] = strdup(path)) == NULL)
		return VERR_NOMEM;
	h->n++;
	return 0;
}

static void
hides_clear(struct hides *h)
{
	for (size_t i = 0; i < h->n; i++)
		free(h->v[i]);
	free(h->v);
	memset(h, 0, sizeof(*h));
}

/* A passphrase file named in the environment, if it is a plain file (not <(...)). */
static int
hide_passphrase_file(struct hides *h, const char *var)
{
	const char *v = getenv(var);
	struct stat st;

	if (v == NULL || v[0] != '/' || strncmp(v, "/dev/", 5) == 0 || strncmp(v, "/proc/", 6) == 0)
		return 0;
	if (stat(v, &st) != 0 || !S_ISREG(st.st_mode))
		return 0;
	return hides_add(h, v);
}

/* base + rest, when it fits a path. */
static int
hides_add_joined(struct hides *h, const char *base, const char *rest)
{
	char buf[8192];

	if ((size_t)snprintf(buf, sizeof(buf), "%s%s", base, rest) >= sizeof(buf))
		return VERR_TOO_LARGE;
	return hides_add(h, buf);
}

/*
 * Always hidden, whatever the profile: the vault, this installation's
 * runtime directory (control socket), every installation's control
 * sockets under $XDG_RUNTIME_DIR/vrun (another vproxy would open sessions
 * for its own keys), and the passphrase files. Then the profile's list.
 *
 * On Linux, what lives in $XDG_RUNTIME_DIR is also hidden in
 * /run/user/UID, the user's runtime directory that systemd-logind makes:
 * gpg-agent, systemd --user and D-Bus put their sockets there whatever
 * XDG_RUNTIME_DIR says, and the variable may be unset or point elsewhere.
 */
static int
collect_hides(const struct paths *p, const struct profile *prof, struct hides *h)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	int r;

	if ((r = hides_add(h, p->home)) != 0 || (r = hides_add(h, p->runtime)) != 0)
		return r;
	if (xdg != NULL && xdg[0] == '/' && (r = hides_add_joined(h, xdg, "/vrun")) != 0)
		return r;
	if ((r = hide_passphrase_file(h, "VAULT_PASSPHRASE_FILE")) != 0 ||
	    (r = hide_passphrase_file(h, "VAULT_NEW_PASSPHRASE_FILE")) != 0)
		return r;
	for (size_t i = 0; i < prof->nhide; i++)
		if ((r = hides_add(h, prof->hide[i])) != 0)
			return r;
#ifdef __linux__
	{
		char run[64];

		snprintf(run, sizeof(run), "/run/user/%lu", (unsigned long)getuid());
		if ((r = hides_add_joined(h, run, "/vrun")) != 0)
			return r;
		for (size_t i = 0; i < prof->nruntime_hide; i++)
			if ((r = hides_add_joined(h, run, prof->runtime_hide[i])) != 0)
				return r;
	}
#endif
	return 0;
}

/* ---- vproxy ---- */

static int
peer_uid(int s, uid_t *uid)
{
#ifdef SO_PEERCRED
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
		return -1;
	*uid = cred.uid;
	return 0;
#else
	gid_t gid;

	return getpeereid(s, uid, &gid);
#endif
}

static int
connect_vproxy(const struct paths *p, int *out)
{
	struct sockaddr_un sun;
	uid_t peer;
	int s;

	*out = -1;
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if ((size_t)snprintf(sun.sun_path, sizeof(sun.sun_path), "%s/%s", p->runtime,
	                     DAEMON_SOCKET_NAME) >= sizeof(sun.sun_path))
		return VERR_TOO_LARGE;
	if ((s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return VERR_SYSTEM;
	if (connect(s, (struct sockaddr *)&sun, sizeof(sun)) != 0) {
		int e = errno;

		close(s);
		errno = e;
		return (e == ENOENT || e == ECONNREFUSED || e == ENOTDIR) ? VERR_DAEMON_DOWN
		                                                          : VERR_SYSTEM;
	}
	/* Only our own vproxy gets our listener (and our command's traffic). */
	if (peer_uid(s, &peer) != 0 || peer != geteuid()) {
		close(s);
		errno = EPERM;
		return VERR_SYSTEM;
	}
	*out = s;
	return 0;
}

static int
send_open(int ctl, const char *const *keys, size_t nkeys, const char *const *allow, size_t nallow,
          const struct profile *prof, char *const *argv, int listen_fd, const struct sandbox *sb)
{
	char auth[256];

	static struct ctl_writer w;
	char cwd[4096];
	size_t total = 0;

	ctl_begin(&w, CTL_OPEN);
	for (size_t i = 0; i < nkeys; i++)
		ctl_add_str(&w, CTL_T_KEY, keys[i]);
	for (size_t i = 0; i < nallow; i++)
		ctl_add_str(&w, CTL_T_ALLOW_HOST, allow[i]);
	for (size_t i = 0; i < prof->nallow; i++)
		ctl_add_str(&w, CTL_T_ALLOW_HOST, prof->allow_hosts[i]);
	for (size_t i = 0; argv[i] != NULL; i++) {
		total += strlen(argv[i]) + 1;
		if (total > ARGS_AUDIT) {
			ctl_add_str(&w, CTL_T_ARG, "...");
			break;
		}
		ctl_add_str(&w, CTL_T_ARG, argv[i]);
	}
	if (getcwd(cwd, sizeof(cwd)) != NULL)
		ctl_add_str(&w, CTL_T_CWD, cwd);
	ctl_add_u64(&w, CTL_T_PID, (uint64_t)getpid());
	ctl_add_str(&w, CTL_T_PROFILE, prof->name);
	/* Where the listener is not private (macOS), vproxy must ask for a credential. */
	auth[0] = '\0';
	if (sb != NULL && sandbox_proxy_auth(sb, auth, sizeof(auth)) != 0)
		return VERR_TOO_LARGE;
	if (strncmp(auth, "vrun:", 5) == 0)
		ctl_add_str(&w, CTL_T_PROXY_AUTH, auth + 5);
	if (ctl_finish(&w) != 0)
		return VERR_TOO_LARGE;
	return ctl_send(ctl, &w, listen_fd);
}

/* ---- the command's environment ---- */

struct envlist {
	char **v;
	size_t n;
};

static int
env_add(struct envlist *e, const char *name, const char *value)
{
	char **nv = realloc(e->v, (e->n + 1) * sizeof(*nv));
	size_t len;

	if (nv == NULL)
		return VERR_NOMEM;
	e->v = nv;
	len = strlen(name) + (value ? strlen(value) + 1 : 0) + 1;
	if ((e->v[e->n] = malloc(len)) == NULL)
		return VERR_NOMEM;
	if (value != NULL)
		snprintf(e->v[e->n], len, "%s=%s", name, value);
	else
		snprintf(e->v[e->n], len, "%s", name);
	e->n++;
	return 0;
}

static void
env_clear(struct envlist *e)
{
	for (size_t i = 0; i < e->n; i++)
		free(e->v[i]);
	free(e->v);
	memset(e, 0, sizeof(*e));
}

static int
env_name_ok(const char *s)
{
	if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_'))
		return 0;
	for (; *s; s++)
		if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') ||
		      (*s >= '0' && *s <= '9') || *s == '_'))
			return 0;
	return 1;
}

/*
 * Proxy and CA variables for the usual clients, one placeholder variable
 * per key, and no passphrase file names (they are hidden anyway).
 */
static int
build_env(const struct ctl_msg *m, unsigned port, const char *ca, struct envlist *e, char *err,
          size_t errsize)
{
	static const char *const proxy_vars[] = {"HTTPS_PROXY", "https_proxy", "HTTP_PROXY",
	                                         "http_proxy",  "ALL_PROXY",   "all_proxy"};
	/* The bundle holds the system roots too, so overriding a set variable loses nothing. */
	static const char *const ca_vars[] = {
	        "SSL_CERT_FILE",       "CURL_CA_BUNDLE",    "REQUESTS_CA_BUNDLE",
	        "NODE_EXTRA_CA_CERTS", "GIT_SSL_CAINFO",    "DENO_CERT",
	        "CARGO_HTTP_CAINFO",   "PIP_CERT",          "AWS_CA_BUNDLE",
	        "NIX_SSL_CERT_FILE",   "HTTPLIB2_CA_CERTS", "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH"};
	const struct ctl_field *f;
	char proxy[64], line[1024];
	int r;

	/* Placeholders first: where a name repeats, vrun's own variable wins. */
	for (size_t i = 0; (f = ctl_nth(m, CTL_T_KEYINFO, i)) != NULL; i++) {
		char *env, *ph;

		if (ctl_field_str(f, line, sizeof(line)) != 0 ||
		    (env = strchr(line, '\t')) == NULL || (ph = strchr(env + 1, '\t')) == NULL) {
			snprintf(err, errsize, "malformed key information from vproxy");
			return VERR_CTL;
		}
		*env++ = '\0';
		*ph++ = '\0';
		if (!env_name_ok(env)) {
			snprintf(err, errsize, "key '%.64s': unusable variable name from vproxy",
			         line);
			return VERR_CTL;
		}
		if ((r = env_add(e, env, ph)) != 0)
			return r;
	}
	snprintf(proxy, sizeof(proxy), "http://127.0.0.1:%u", port);
	for (size_t i = 0; i < sizeof(proxy_vars) / sizeof(proxy_vars[0]); i++)
		if ((r = env_add(e, proxy_vars[i], proxy)) != 0)
			return r;
	if ((r = env_add(e, "NO_PROXY", "")) != 0 || (r = env_add(e, "no_proxy", "")) != 0 ||
	    (r = env_add(e, "NODE_USE_ENV_PROXY", "1")) != 0)
		return r;
	for (size_t i = 0; i < sizeof(ca_vars) / sizeof(ca_vars[0]); i++)
		if ((r = env_add(e, ca_vars[i], ca)) != 0)
			return r;
	if ((r = env_add(e, "VAULT_PASSPHRASE_FILE", NULL)) != 0 ||
	    (r = env_add(e, "VAULT_NEW_PASSPHRASE_FILE", NULL)) != 0)
		return r;
	return 0;
}

/* ---- the terminal ---- */

/* State, parent and process group of pid, from /proc/PID/stat. 0 or -1. */
static int
proc_stat(pid_t pid, char *state, pid_t *ppid, pid_t *pgrp)
{
	char path[64], buf[1024], *p;
	long pp, pg;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	/* The command name may hold anything, ')' too: the fields follow the last ')'. */
	if ((p = strrchr(buf, ')')) == NULL || sscanf(p + 1, " %c %ld %ld", state, &pp, &pg) != 3)
		return -1;
	*ppid = (pid_t)pp;
	*pgrp = (pid_t)pg;
	return 0;
}

/*
 * Whether vrun's process group holds nobody who could be using the
 * terminal: 1 when every other live member is an ancestor of vrun (a shell
 * or script waiting for it) or vrun's child (the sandbox's init), 0 when
 * another process shares it (the other commands of a pipeline, jobs of
 * make -j), -1 when /proc cannot tell.
 */
static int
group_is_ours(void)
{
	pid_t anc[64], self = getpid(), pgrp = getpgrp(), pid, ppid, pg;
	size_t nanc = 0;
	struct dirent *d;
	char state;
	int ours = 1;
	DIR *dir;

	for (pid = getppid(); pid > 0 && nanc < sizeof(anc) / sizeof(anc[0]); pid = ppid) {
		anc[nanc++] = pid;
		if (pid == 1 || proc_stat(pid, &state, &ppid, &pg) != 0)
			break;
	}
	if ((dir = opendir("/proc")) == NULL)
		return -1;
	while (ours && (d = readdir(dir)) != NULL) {
		char *end;
		long v = strtol(d->d_name, &end, 10);
		size_t i;

		if (*end != '\0' || v <= 0 || (pid = (pid_t)v) == self)
			continue;
		if (proc_stat(pid, &state, &ppid, &pg) != 0 || pg != pgrp || state == 'Z' ||
		    ppid == self)
			continue;
		for (i = 0; i < nanc && anc[i] != pid; i++)
			;
		if (i == nanc)
			ours = 0;
	}
	closedir(dir);
	return ours;
}

/* Standard input is /dev/null (or was closed: ensure_stdio put /dev/null there). */
static int
stdin_is_null(void)
{
	struct stat in, null;

	return fstat(0, &in) == 0 && stat("/dev/null", &null) == 0 && S_ISCHR(in.st_mode) &&
	       in.st_rdev == null.st_rdev;
}

/*
 * The terminal to give the command, or -1. The command always runs in a
 * process group of its own (so that it can signal nothing outside the
 * sandbox, not even with kill(0)); like a shell's foreground job it gets
 * the terminal, but only where nobody else can be using it meanwhile:
 * taking the terminal away stops a process that then reads it (SIGTTIN).
 *
 *  - vrun's group is the terminal's foreground group;
 *  - neither stdin nor stdout is a pipe: in `vrun ... | less` less keeps
 *    the terminal;
 *  - vrun leads its group (a job of an interactive shell), or every other
 *    member of the group is an ancestor of vrun (a script waiting for it,
 *    not a job of make -j) and its standard input is not /dev/null: a shell
 *    without job control gives a command started with '&' /dev/null as
 *    stdin, and goes on, and may read the terminal itself.
 *
 * Where /proc cannot tell (macOS), only the leader of its group gets it.
 */
static int
terminal_to_give(void)
{
	struct stat st;
	int tty = -1;

	for (int fd = 0; fd < 3 && tty < 0; fd++)
		if (isatty(fd) && tcgetpgrp(fd) == getpgrp())
			tty = fd;
	if (tty < 0)
		return -1;
	/*
	 * A pipe on stdin or stdout: a pipeline, whose other commands share the
	 * job (and may not have joined the group yet, so /proc cannot be asked).
	 */
	for (int fd = 0; fd < 2; fd++)
		if (fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode))
			return -1;
	if (getpgrp() == getpid())
		return tty; /* a job of its own */
	return group_is_ours() == 1 && !stdin_is_null() ? tty : -1;
}

/* Give the terminal to pgrp, as a shell does for a foreground job. */
static void
give_terminal(int tty, pid_t pgrp)
{
	sigset_t ttou, old;

	if (tty < 0 || pgrp <= 0)
		return;
	sigemptyset(&ttou);
	sigaddset(&ttou, SIGTTOU);
	sigprocmask(SIG_BLOCK, &ttou, &old);
	(void)tcsetpgrp(tty, pgrp);
	sigprocmask(SIG_SETMASK, &old, NULL);
}

/*
 * The command stopped (Ctrl-Z, SIGTTIN, SIGSTOP): stop vrun too, so the
 * shell sees its job stopped, and take the terminal back meanwhile. When
 * vrun is continued (fg, bg, SIGCONT) continue the command, and give it
 * the terminal if that is safe now (terminal_to_give) -- also when it
 * started in the background. *tty tracks the terminal vrun has handed over.
 */
static void
mirror_stop(struct sandbox *sb, int *tty)
{
	pid_t pgid = sandbox_pgid(sb);

	if (*tty >= 0 && tcgetpgrp(*tty) == pgid)
		give_terminal(*tty, getpgrp());
	kill(getpid(), SIGSTOP);
	if ((*tty = terminal_to_give()) >= 0)
		give_terminal(*tty, pgid);
	sandbox_signal(sb, SIGCONT);
}

/* ---- running ---- */

/* After a sandbox failure: what to do about the step that failed, or where to look. */
static void
sandbox_advice(int code, const char *err)
{
	const char *hint = sandbox_hint(code, err);

	if (hint != NULL)
		warnx_("%s", hint);
	else if (code == VERR_SANDBOX)
		warnx_("`vrun --check` shows which protection this system cannot give");
}

static int
exit_code(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return EXIT_VRUN;
}

/* Catch (and block) the forwarded signals, unless they were ignored at start. */
static void
catch_signals(sigset_t *blocked, sigset_t *waitmask)
{
	struct sigaction sa, old;

	sigprocmask(SIG_BLOCK, NULL, waitmask);
	sigemptyset(blocked);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++) {
		if (sigaction(forwarded[i], NULL, &old) != 0 || old.sa_handler == SIG_IGN)
			continue;
		sigaddset(blocked, forwarded[i]);
		sigdelset(waitmask, forwarded[i]);
	}
	sigprocmask(SIG_BLOCK, blocked, NULL);
	for (int sig = 1; sig < NSIG; sig++)
		if (sigismember(blocked, sig) == 1)
			sigaction(sig, &sa, NULL);
}

static void
close_session(int ctl, int status)
{
	static struct ctl_writer w;
	struct ctl_msg m;
	int fd;

	ctl_begin(&w, CTL_CLOSE);
	ctl_add_i64(&w, CTL_T_EXIT, status);
	if (ctl_finish(&w) == 0 && ctl_send(ctl, &w, -1) == 0 && ctl_recv(ctl, &w, &m, &fd) == 0 &&
	    fd >= 0)
		close(fd);
}

/*
 * The profile directory when VRUN_PROFILE_DIR is unset: next to the binary
 * (an installation moved elsewhere, or unpacked with dpkg -x, still finds
 * its profiles), else the directory configured at build time.
 */
static const char *
default_profile_dir(char *buf, size_t size)
{
	char exe[4096], joined[4200], *slash;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	struct stat st;

	if (n <= 0)
		return VRUN_PROFILE_INSTALL_DIR;
	exe[n] = '\0';
	if ((slash = strrchr(exe, '/')) == NULL)
		return VRUN_PROFILE_INSTALL_DIR;
	*slash = '\0';
	if ((size_t)snprintf(joined, sizeof(joined), "%s/%s", exe, VRUN_PROFILE_REL_DIR) >=
	            sizeof(joined) ||
	    stat(joined, &st) != 0 || !S_ISDIR(st.st_mode) || size < 4096 ||
	    realpath(joined, buf) == NULL)
		return VRUN_PROFILE_INSTALL_DIR;
	return buf;
}

/* Load a profile; *from (when not NULL) gets the file it came from. */
static int
load_profile(const char *name, struct profile **prof, char *err, size_t errsize, char *from,
             size_t fromsize)
{
	char dir[4096];
	const char *search = profile_search_dir(default_profile_dir(dir, sizeof(dir)));
	int r;

	if (from != NULL)
		snprintf(from, fromsize, "%s%s%s", strchr(name, '/') != NULL ? "" : search,
		         strchr(name, '/') != NULL ? "" : "/", name);
	r = profile_load(name, search, prof, err, errsize);
	if (r != 0 && err[0] == '\0')
		snprintf(err, errsize, "%s", verr_strerror(r));
	if (r == VERR_PROFILE_NOT_FOUND && strchr(name, '/') == NULL &&
	    getenv(PROFILE_DIR_ENV) == NULL) {
		size_t len = strlen(err);

		snprintf(err + len, errsize - len,
		         " (not installed? set %s to the directory holding the profiles)",
		         PROFILE_DIR_ENV);
	}
	return r;
}

#ifdef __linux__
/* ---- vrun --check ---- */

/*
 * What the probe inside must not reach: listeners on the host's loopback
 * (IPv4 and, where the host has it, IPv6) and an abstract unix socket.
 * After the probe, vrun looks whether anything arrived: the outside view
 * does not rely on the probe's word.
 */
struct bait {
	int fd[3];
	int port4, port6;
	char abstract[64];
};

static int
bait_tcp(int family, int *port)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int s = socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	*port = 0;
	if (s < 0)
		return -1;
	memset(&ss, 0, sizeof(ss));
	if (family == AF_INET) {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;

		a->sin_family = AF_INET;
		a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		len = sizeof(*a);
	} else {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;

		a->sin6_family = AF_INET6;
		a->sin6_addr = in6addr_loopback;
		len = sizeof(*a);
	}
	if (bind(s, (struct sockaddr *)&ss, len) != 0 || listen(s, 8) != 0 ||
	    getsockname(s, (struct sockaddr *)&ss, &len) != 0) {
		close(s);
		return -1;
	}
	*port = ntohs(family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
	                                : ((struct sockaddr_in6 *)&ss)->sin6_port);
	return s;
}

static int
bait_open(struct bait *b)
{
	struct sockaddr_un un;
	unsigned int rnd = 0;
	size_t n;
	int fd;

	b->fd[0] = bait_tcp(AF_INET, &b->port4);
	b->fd[1] = bait_tcp(AF_INET6, &b->port6); /* none without IPv6 */
	b->fd[2] = -1;
	if ((fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC)) >= 0) {
		if (read(fd, &rnd, sizeof(rnd)) != (ssize_t)sizeof(rnd))
			rnd = 0;
		close(fd);
	}
	snprintf(b->abstract, sizeof(b->abstract), "vrun-check-%ld-%08x", (long)getpid(), rnd);
	memset(&un, 0, sizeof(un));
	un.sun_family = AF_UNIX;
	n = strlen(b->abstract);
	memcpy(un.sun_path + 1, b->abstract, n);
	if ((b->fd[2] = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) < 0 ||
	    bind(b->fd[2], (struct sockaddr *)&un,
	         (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)) != 0 ||
	    listen(b->fd[2], 8) != 0)
		return -1;
	return b->fd[0] >= 0 ? 0 : -1;
}

/* Connections that reached a bait; closes the baits. */
static int
bait_close(struct bait *b, char *what, size_t size)
{
	static const char *const names[] = {"127.0.0.1", "[::1]", "abstract socket"};
	int hits = 0, c;

	what[0] = '\0';
	for (int i = 0; i < 3; i++) {
		if (b->fd[i] < 0)
			continue;
		while ((c = accept4(b->fd[i], NULL, NULL, SOCK_CLOEXEC)) >= 0) {
			close(c);
			hits++;
			snprintf(what + strlen(what), size - strlen(what), "%s%s",
			         hits > 1 ? ", " : "", names[i]);
		}
		close(b->fd[i]);
		b->fd[i] = -1;
	}
	return hits;
}

/* argv for the probe: strings owned here. */
struct arglist {
	char **v;
	size_t n, cap;
};

static int arg_add(struct arglist *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int
arg_add(struct arglist *a, const char *fmt, ...)
{
	va_list ap;
	char **nv;

	if (a->n + 2 > a->cap) {
		size_t ncap = a->cap ? 2 * a->cap : 32;

		if ((nv = realloc(a->v, ncap * sizeof(*nv))) == NULL)
			return VERR_NOMEM;
		a->v = nv;
		a->cap = ncap;
	}
	va_start(ap, fmt);
	if (vasprintf(&a->v[a->n], fmt, ap) < 0) {
		va_end(ap);
		return VERR_NOMEM;
	}
	va_end(ap);
	a->v[++a->n] = NULL;
	return 0;
}

static void
arg_clear(struct arglist *a)
{
	for (size_t i = 0; i < a->n; i++)
		free(a->v[i]);
	free(a->v);
	memset(a, 0, sizeof(*a));
}

static int
build_probe_argv(struct arglist *a, const struct bait *b, const struct hides *h, int verbose)
{
	static const char *const ns[] = {"user", "pid", "net", "mnt", "ipc"};
	char exe[4096], ids[512] = "", path[64];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	struct stat st;
	int r;

	if (n <= 0)
		return VERR_SYSTEM;
	exe[n] = '\0';
	for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
		snprintf(path, sizeof(path), "/proc/self/ns/%s", ns[i]);
		if (stat(path, &st) != 0)
			return VERR_SYSTEM;
		snprintf(ids + strlen(ids), sizeof(ids) - strlen(ids), "%s%s:%llu", i ? "," : "",
		         ns[i], (unsigned long long)st.st_ino);
	}
	if ((r = arg_add(a, "%s", exe)) != 0 || (r = arg_add(a, "%s", CHECK_PROBE_ARG)) != 0 ||
	    (r = arg_add(a, "--ns=%s", ids)) != 0 || (r = arg_add(a, "--tcp4=%d", b->port4)) != 0 ||
	    (r = arg_add(a, "--abstract=%s", b->abstract)) != 0)
		return r;
	if (b->fd[1] >= 0 && (r = arg_add(a, "--tcp6=%d", b->port6)) != 0)
		return r;
	/* What the sandbox masks: the hidden paths that exist (it skips the rest). */
	for (size_t i = 0; i < h->n; i++)
		if (stat(h->v[i], &st) == 0 && (r = arg_add(a, "--hidden=%s", h->v[i])) != 0)
			return r;
	if (verbose && (r = arg_add(a, "--verbose")) != 0)
		return r;
	return 0;
}

/*
 * vproxy's pid and the key for the check's session: the one given, else
 * the first key vproxy has (names only; no passphrase needed). 0, or -1
 * with a FAIL line printed.
 */
static int
check_vproxy(struct check_report *rep, int ctl, const char *key, char *chosen, size_t size)
{
	static struct ctl_writer w;
	static struct ctl_msg m;
	uint64_t pid = 0;
	size_t nkeys = 0;
	int fd = -1, r;

	ctl_begin(&w, CTL_STATUS);
	if ((r = ctl_finish(&w)) != 0 || (r = ctl_send(ctl, &w, -1)) != 0 ||
	    (r = ctl_recv(ctl, &w, &m, &fd)) != 0 || m.type != CTL_STATUS_REPLY ||
	    ctl_get_u64(&m, CTL_T_PID, &pid) != 0) {
		if (fd >= 0)
			close(fd);
		check_line(rep, CHECK_FAIL, "vproxy", "no status: %s",
		           r == VERR_SYSTEM ? strerror(errno) : verr_strerror(r ? r : VERR_CTL));
		return -1;
	}
	while (ctl_nth(&m, CTL_T_KEYINFO, nkeys) != NULL)
		nkeys++;
	if (key != NULL)
		snprintf(chosen, size, "%s", key);
	else if (nkeys == 0 || ctl_field_str(ctl_nth(&m, CTL_T_KEYINFO, 0), chosen, size) != 0) {
		check_line(
		        rep, CHECK_FAIL, "vproxy",
		        "running (pid %llu), but the vault has no key to open a session with: add "
		        "one with `vault add NAME --host HOST` (no restart needed)",
		        (unsigned long long)pid);
		return -1;
	}
	check_line(rep, CHECK_OK, "vproxy", "running (pid %llu, %zu key%s)",
	           (unsigned long long)pid, nkeys, nkeys == 1 ? "" : "s");
	return 0;
}

/* A session for the check, audited as "vrun --check". *ca and *env filled. */
static int
check_session(struct check_report *rep, int ctl, const char *key, const struct profile *prof,
              int listen_fd, char *ca, size_t casize, struct envlist *env)
{
	static char *const audit_argv[] = {(char *)"vrun", (char *)"--check", NULL};
	static struct ctl_writer in;
	static struct ctl_msg msg;
	struct sockaddr_in la;
	socklen_t lalen = sizeof(la);
	const char *keys[1] = {key};
	char session[128], line[1024], err[ERR_MAX];
	int r, fd = -1;

	if (getsockname(listen_fd, (struct sockaddr *)&la, &lalen) != 0 ||
	    la.sin_family != AF_INET) {
		check_line(rep, CHECK_FAIL, "session", "the sandbox's listener: %s",
		           strerror(errno));
		return -1;
	}
	r = send_open(ctl, keys, 1, NULL, 0, prof, audit_argv, listen_fd, NULL);
	if (r == 0)
		r = ctl_recv(ctl, &in, &msg, &fd);
	if (fd >= 0)
		close(fd);
	if (r != 0) {
		check_line(rep, CHECK_FAIL, "session", "vproxy: %s",
		           r == VERR_SYSTEM ? strerror(errno) : verr_strerror(r));
		return -1;
	}
	if (msg.type == CTL_ERROR) {
		if (ctl_get_str(&msg, CTL_T_MESSAGE, line, sizeof(line)) != 0)
			snprintf(line, sizeof(line), "vproxy refused the session");
		check_line(rep, CHECK_FAIL, "session", "%s", line);
		return -1;
	}
	if (msg.type != CTL_OPENED ||
	    ctl_get_str(&msg, CTL_T_SESSION, session, sizeof(session)) != 0 ||
	    ctl_get_str(&msg, CTL_T_CA_PATH, ca, casize) != 0 || ca[0] != '/') {
		check_line(rep, CHECK_FAIL, "session", "vproxy: %s", verr_strerror(VERR_CTL));
		return -1;
	}
	if ((r = build_env(&msg, ntohs(la.sin_port), ca, env, err, sizeof(err))) != 0) {
		check_line(rep, CHECK_FAIL, "session", "%s",
		           r == VERR_CTL ? err : verr_strerror(r));
		return -1;
	}
	check_line(rep, CHECK_OK, "session",
	           "%s with key '%s', audited as `vrun --check` (no request is sent upstream)",
	           session, key);
	return 0;
}

/*
 * vrun --check: build the sandbox a launch would build and run the probes
 * in it. Any step that would stop a launch is a FAIL line here too, and the
 * probes run as far as they can so the person sees everything at once.
 */
static int
run_check(const char *key, const char *profile_name, int verbose)
{
	struct check_report rep;
	struct paths p;
	struct profile *prof = NULL;
	struct hides hides = {0};
	struct envlist env = {0};
	struct arglist pargv = {0};
	struct bait bait = {{-1, -1, -1}, 0, 0, ""};
	struct sandbox_config cfg;
	struct sandbox *sb = NULL;
	char err[ERR_MAX], ca[4096] = "", chosen[256], what[128], from[4200];
	int r, ctl = -1, listen_fd = -1, session = 0, event, st, status = -1, tmpca = -1;
	sigset_t mask;

	memset(&p, 0, sizeof(p));
	check_report_init(&rep, verbose);
	err[0] = '\0';
	if ((r = paths_resolve(&p)) != 0) {
		check_line(&rep, CHECK_FAIL, "paths", "%s", verr_strerror(r));
		goto out;
	}
	if ((r = load_profile(profile_name, &prof, err, sizeof(err), from, sizeof(from))) != 0) {
		check_line(&rep, CHECK_FAIL, "profile", "%s", err);
		goto out;
	}
	if ((r = collect_hides(&p, prof, &hides)) != 0) {
		check_line(&rep, CHECK_FAIL, "profile", "%s", verr_strerror(r));
		goto out;
	}
	check_line(&rep, CHECK_OK, "profile", "%s (%s, %zu paths to hide)", prof->name, from,
	           prof->nhide);
	/* The check is about this machine, not the working directory (it may be hidden). */
	if (chdir("/") != 0) {
		check_line(&rep, CHECK_FAIL, "setup", "chdir /: %s", strerror(errno));
		goto out;
	}

	/* vproxy: without it a launch fails; the sandbox probes still run. */
	if ((r = connect_vproxy(&p, &ctl)) != 0) {
		check_line(&rep, CHECK_FAIL, "vproxy", "%s",
		           r == VERR_DAEMON_DOWN ? verr_strerror(r) : strerror(errno));
	} else if (check_vproxy(&rep, ctl, key, chosen, sizeof(chosen)) == 0) {
		session = 1;
	}

	if (bait_open(&bait) != 0) {
		check_line(&rep, CHECK_FAIL, "setup", "cannot listen on the host's loopback: %s",
		           strerror(errno));
		goto out;
	}
	if ((r = build_probe_argv(&pargv, &bait, &hides, verbose)) != 0) {
		check_line(&rep, CHECK_FAIL, "setup", "cannot find vrun's own binary: %s",
		           strerror(errno));
		goto out;
	}

	memset(&cfg, 0, sizeof(cfg));
	cfg.argv = pargv.v;
	cfg.hide = (const char *const *)hides.v;
	cfg.nhide = hides.n;
	cfg.tty_fd = -1;
	if ((r = sandbox_start(&cfg, &sb, &listen_fd, err, sizeof(err))) != 0) {
		const char *hint = sandbox_hint(r, err);

		if (r == VERR_NO_USERNS)
			check_line(&rep, CHECK_FAIL, "namespaces", "%s; %s%s%s",
			           err[0] ? err : "unavailable", verr_strerror(r), hint ? "; " : "",
			           hint ? hint : "");
		else
			check_line(&rep, CHECK_FAIL, "sandbox", "%s%s%s",
			           err[0] ? err : verr_strerror(r), hint ? "; " : "",
			           hint ? hint : "");
		goto out;
	}
	check_line(&rep, CHECK_OK, "sandbox",
	           "set up as for a launch (%zu path%s masked); the probes run inside it",
	           sandbox_hidden(sb), sandbox_hidden(sb) == 1 ? "" : "s");

	if (session && check_session(&rep, ctl, chosen, prof, listen_fd, ca, sizeof(ca), &env) != 0)
		session = 0;
	close(listen_fd);
	listen_fd = -1;
	if (!session) {
		/* Any readable file does for the bundle the sandbox insists on keeping. */
		const char *tmp = getenv("TMPDIR");

		env_clear(&env);
		snprintf(ca, sizeof(ca), "%s/vrun-check.XXXXXX",
		         tmp != NULL && tmp[0] == '/' ? tmp : "/tmp");
		if ((tmpca = mkstemp(ca)) < 0 ||
		    env_add(&env, "VAULT_PASSPHRASE_FILE", NULL) != 0 ||
		    env_add(&env, "VAULT_NEW_PASSPHRASE_FILE", NULL) != 0) {
			check_line(&rep, CHECK_FAIL, "setup", "temporary file: %s",
			           strerror(errno));
			goto out;
		}
	}
	/* The probe's argv was fixed when the sandbox was built; this comes with "go". */
	if (env_add(&env, CHECK_SESSION_ENV, session ? "1" : NULL) != 0) {
		check_line(&rep, CHECK_FAIL, "setup", "%s", verr_strerror(VERR_NOMEM));
		goto end;
	}

	fflush(stdout);
	r = sandbox_exec(sb, (const char *const *)env.v, env.n, ca, err, sizeof(err));
	if (r != 0) {
		check_line(&rep, CHECK_FAIL, "probe", "cannot start vrun inside the sandbox: %s",
		           err[0] ? err : verr_strerror(r));
		goto end;
	}
	sigprocmask(SIG_BLOCK, NULL, &mask);
	for (;;) {
		r = sandbox_wait(sb, &mask, &event, &st, err, sizeof(err));
		if (r == VERR_SYSTEM && errno == EINTR)
			continue;
		if (r != 0) {
			check_line(&rep, CHECK_FAIL, "probe", "the sandbox failed: %s",
			           err[0] ? err : verr_strerror(r));
			break;
		}
		if (event == SANDBOX_STOPPED) {
			sandbox_signal(sb, SIGCONT);
			continue;
		}
		status = st;
		break;
	}
	if (status >= 0 && WIFEXITED(status))
		rep.failed += (unsigned)WEXITSTATUS(status);
	else if (status >= 0)
		check_line(&rep, CHECK_FAIL, "probe", "killed by signal %d",
		           WIFSIGNALED(status) ? WTERMSIG(status) : 0);
	if (bait_close(&bait, what, sizeof(what)) > 0)
		check_line(&rep, CHECK_FAIL, "host loopback",
		           "seen from outside: a connection from the sandbox reached the host's %s",
		           what);
	else
		check_line(&rep, CHECK_OK, "host loopback",
		           "seen from outside: nothing from the sandbox arrived");
end:
	if (session)
		close_session(ctl, status >= 0 && WIFEXITED(status) ? WEXITSTATUS(status) : 125);
out:
	bait_close(&bait, what, sizeof(what));
	if (listen_fd >= 0)
		close(listen_fd);
	sandbox_free(sb);
	if (tmpca >= 0) {
		close(tmpca);
		unlink(ca);
	}
	if (ctl >= 0)
		close(ctl);
	arg_clear(&pargv);
	env_clear(&env);
	hides_clear(&hides);
	profile_free(prof);
	paths_clear(&p);
	if (rep.failed == 0)
		printf("vrun --check: all checks passed: commands run here are contained as "
		       "documented\n");
	else
		printf("vrun --check: %u check%s FAILED: vrun would refuse to start commands here, "
		       "or would not contain them as documented; fix what the FAIL lines say\n",
		       rep.failed, rep.failed == 1 ? "" : "s");
	if (fflush(stdout) != 0 || ferror(stdout))
		return 1;
	return rep.failed == 0 ? 0 : 1;
}
#endif

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
	        {"key", required_argument, NULL, 'k'},
	        {"allow-host", required_argument, NULL, 'a'},
	        {"profile", required_argument, NULL, 'p'},
	        {"verbose", no_argument, NULL, 'v'},
	        {"check", no_argument, NULL, 'C'},
	        {"help", no_argument, NULL, 'h'},
	        {"version", no_argument, NULL, 'V'},
	        {NULL, 0, NULL, 0},
	};
	static struct ctl_writer in;
	struct cliopt_abbrev ab;
	static struct ctl_msg msg;
	const char *keys[CTL_MAX_KEYS + 1], *allow[MAX_ALLOW], *profile_name = PROFILE_DEFAULT;
	size_t nkeys = 0, nallow = 0;
	struct paths p;
	struct profile *prof = NULL;
	struct hides hides = {0};
	struct envlist env = {0};
	struct sandbox_config cfg;
	struct sandbox *sb = NULL;
	struct sockaddr_in la;
	socklen_t lalen = sizeof(la);
	sigset_t blocked, waitmask;
	char err[ERR_MAX], ca[4096], session[128], line[1024];
	const struct ctl_field *f;
	int c, verbose = 0, check = 0, r, ctl = -1, listen_fd = -1, fd, status = EXIT_VRUN, tty;
	int event, st;

	memset(&p, 0, sizeof(p));
	if (ensure_stdio() != 0)
		return EXIT_VRUN;
#ifdef __linux__
	/* Inside the sandbox of `vrun --check`: nothing may run at exit there. */
	if (argc >= 2 && strcmp(argv[1], CHECK_PROBE_ARG) == 0)
		_exit(check_probe_main(argc, argv));
#endif
	/* As `vault help` and `vproxy help`; vrun has no subcommands. */
	if (argc >= 2 && strcmp(argv[1], "help") == 0) {
		if (argc > 2)
			return usage_error(
			        "`vrun help` takes no argument (vrun has no subcommands)");
		fputs(usage_text, stdout);
		return fflush(stdout) == 0 && !ferror(stdout) ? 0 : EXIT_VRUN;
	}
	opterr = 0;
	while ((c = cliopt_getopt(argc, argv, "+k:vh", opts, &ab)) != -1) {
		switch (c) {
		case 'k':
			if (nkeys == CTL_MAX_KEYS)
				return usage_error("too many --key (at most 16)");
			keys[nkeys++] = optarg;
			break;
		case 'a':
			if (nallow == MAX_ALLOW)
				return usage_error("too many --allow-host (at most 64)");
			allow[nallow++] = optarg;
			break;
		case 'p':
			profile_name = optarg;
			break;
		case 'v':
			verbose = 1;
			break;
		case 'C':
			check = 1;
			break;
		case 'h':
			fputs(usage_text, stdout);
			return fflush(stdout) == 0 && !ferror(stdout) ? 0 : EXIT_VRUN;
		case 'V':
			printf("vrun %s\n", VRUN_VERSION);
			return fflush(stdout) == 0 && !ferror(stdout) ? 0 : EXIT_VRUN;
		default:
			if (ab.typed != NULL)
				snprintf(err, sizeof(err),
				         "option '%.*s' is abbreviated: write '--%s'",
				         (int)strcspn(ab.typed, "="), ab.typed, ab.full);
			else
				snprintf(err, sizeof(err), "unknown or incomplete option '%s'",
				         argv[optind - 1]);
			return usage_error(err);
		}
	}
	if (check) {
		if (optind < argc)
			return usage_error("--check runs no command: remove what follows it");
		if (nkeys > 1 || nallow > 0)
			return usage_error("--check takes at most one --key and no --allow-host");
#ifdef __linux__
		return run_check(nkeys ? keys[0] : NULL, profile_name, verbose);
#else
		return usage_error("--check is not available on this platform yet");
#endif
	}
	if (nkeys == 0)
		return usage_error("no key: give at least one --key NAME (or --check)");
	if (optind >= argc)
		return usage_error("no command to run");

	if ((r = paths_resolve(&p)) != 0) {
		warnx_("%s", verr_strerror(r));
		goto out;
	}
	if ((r = load_profile(profile_name, &prof, err, sizeof(err), NULL, 0)) != 0) {
		warnx_("profile: %s", err);
		goto out;
	}
	if ((r = collect_hides(&p, prof, &hides)) != 0) {
		warnx_("%s", verr_strerror(r));
		goto out;
	}

	/* 1. vproxy first: nothing starts when there is no session to be had. */
	if ((r = connect_vproxy(&p, &ctl)) != 0) {
		if (r == VERR_DAEMON_DOWN)
			warnx_("%s", verr_strerror(r));
		else if (r == VERR_SYSTEM)
			warnx_("cannot connect to vproxy in %s: %s", p.runtime, strerror(errno));
		else
			warnx_("cannot connect to vproxy in %s: %s", p.runtime, verr_strerror(r));
		goto out;
	}

	/* 2. The sandbox, up to the point where it waits for "go". */
	tty = terminal_to_give();
	memset(&cfg, 0, sizeof(cfg));
	cfg.argv = argv + optind;
	cfg.hide = (const char *const *)hides.v;
	cfg.nhide = hides.n;
	cfg.tty_fd = tty;
	if ((r = sandbox_start(&cfg, &sb, &listen_fd, err, sizeof(err))) != 0) {
		warnx_("cannot set up the sandbox: %s", err[0] ? err : verr_strerror(r));
		if (r == VERR_NO_USERNS)
			warnx_("%s", verr_strerror(r));
		sandbox_advice(r, err);
		goto out;
	}
	if (getsockname(listen_fd, (struct sockaddr *)&la, &lalen) != 0 ||
	    la.sin_family != AF_INET) {
		warnx_("session listener: %s", strerror(errno));
		goto out;
	}

	/* 3. The session: vproxy takes the listener and answers with placeholders. */
	r = send_open(ctl, keys, nkeys, allow, nallow, prof, argv + optind, listen_fd, sb);
	close(listen_fd);
	listen_fd = -1;
	if (r == 0)
		r = ctl_recv(ctl, &in, &msg, &fd);
	if (r == 0 && fd >= 0)
		close(fd);
	if (r != 0) {
		warnx_("vproxy: %s", r == VERR_SYSTEM ? strerror(errno) : verr_strerror(r));
		goto out;
	}
	if (msg.type == CTL_ERROR) {
		if (ctl_get_str(&msg, CTL_T_MESSAGE, line, sizeof(line)) != 0)
			snprintf(line, sizeof(line), "vproxy refused the session");
		warnx_("%s", line);
		goto out;
	}
	if (msg.type != CTL_OPENED ||
	    ctl_get_str(&msg, CTL_T_SESSION, session, sizeof(session)) != 0 ||
	    ctl_get_str(&msg, CTL_T_CA_PATH, ca, sizeof(ca)) != 0 || ca[0] != '/') {
		warnx_("vproxy: %s", verr_strerror(VERR_CTL));
		goto out;
	}
	for (size_t i = 0; (f = ctl_nth(&msg, CTL_T_RESOLVED, i)) != NULL; i++) {
		char *tab;

		if (ctl_field_str(f, line, sizeof(line)) == 0 &&
		    (tab = strchr(line, '\t')) != NULL) {
			*tab = '\0';
			warnx_("key '%s' is '%s'", line, tab + 1);
		}
	}
	if ((r = build_env(&msg, ntohs(la.sin_port), ca, &env, err, sizeof(err))) != 0) {
		warnx_("%s", r == VERR_CTL ? err : verr_strerror(r));
		goto end_session;
	}
	if (verbose) {
		char what[512];

		sandbox_describe(sb, what, sizeof(what));
		warnx_("session %s, proxy http://127.0.0.1:%u, %zu path%s hidden (profile %s)",
		       session, ntohs(la.sin_port), sandbox_hidden(sb),
		       sandbox_hidden(sb) == 1 ? "" : "s", prof->name);
		warnx_("sandbox: %s", what);
	}

	/* 4. Go. From here on the command's exit status is ours. */
	catch_signals(&blocked, &waitmask);
	r = sandbox_exec(sb, (const char *const *)env.v, env.n, ca, err, sizeof(err));
	if (r == VERR_CMD_NOT_FOUND || r == VERR_CMD_NOT_EXEC) {
		warnx_("%s: %s (%s)", argv[optind], verr_strerror(r), err);
		status = r == VERR_CMD_NOT_FOUND ? EXIT_NOTFOUND : EXIT_NOEXEC;
		goto end_session;
	}
	if (r != 0) {
		warnx_("cannot start the command: %s", err[0] ? err : verr_strerror(r));
		sandbox_advice(r, err);
		goto end_session;
	}
	for (;;) {
		r = sandbox_wait(sb, &waitmask, &event, &st, err, sizeof(err));
		if (r == VERR_SYSTEM && errno == EINTR) {
			for (size_t i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++) {
				if (!pending[forwarded[i]])
					continue;
				pending[forwarded[i]] = 0;
				sandbox_signal(sb, forwarded[i]);
			}
			continue;
		}
		if (r != 0) {
			warnx_("the sandbox failed: %s", err[0] ? err : verr_strerror(r));
			break;
		}
		if (event == SANDBOX_STOPPED) {
			mirror_stop(sb, &tty);
			continue;
		}
		status = exit_code(st);
		break;
	}
	if (tty >= 0 && tcgetpgrp(tty) == sandbox_pgid(sb))
		give_terminal(tty, getpgrp());
end_session:
	close_session(ctl, status);
out:
	if (listen_fd >= 0)
		close(listen_fd);
	sandbox_free(sb);
	if (ctl >= 0)
		close(ctl);
	env_clear(&env);
	hides_clear(&hides);
	profile_free(prof);
	paths_clear(&p);
	return status;
}
