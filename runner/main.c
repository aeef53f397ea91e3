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

#define EXIT_VRUN     125
#define EXIT_NOEXEC   126
#define EXIT_NOTFOUND 127
#define MAX_ALLOW     64
#define ARGS_AUDIT    16384 /* bytes of the command line sent for the audit */
#define ERR_MAX       1024

static const char usage_text[] =
        "usage: vrun --key NAME [--key NAME]... [--allow-host HOST[:PORT]]...\n"
        "            [--profile NAME|FILE] [-v] [--] CMD [ARG]...\n"
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
        "  -v, --verbose          say which session and protections are in force\n"
        "  -h, --help             this help\n"
        "  --version              the version\n"
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

/*
 * Always hidden, whatever the profile: the vault, this installation's
 * runtime directory (control socket), every installation's control
 * sockets under $XDG_RUNTIME_DIR/vrun (another vproxy would open sessions
 * for its own keys), and the passphrase files. Then the profile's list.
 */
static int
collect_hides(const struct paths *p, const struct profile *prof, struct hides *h)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	int r;

	if ((r = hides_add(h, p->home)) != 0 || (r = hides_add(h, p->runtime)) != 0)
		return r;
	if (xdg != NULL && xdg[0] == '/') {
		char buf[4096];

		if ((size_t)snprintf(buf, sizeof(buf), "%s/vrun", xdg) < sizeof(buf) &&
		    (r = hides_add(h, buf)) != 0)
			return r;
	}
	if ((r = hide_passphrase_file(h, "VAULT_PASSPHRASE_FILE")) != 0 ||
	    (r = hide_passphrase_file(h, "VAULT_NEW_PASSPHRASE_FILE")) != 0)
		return r;
	for (size_t i = 0; i < prof->nhide; i++)
		if ((r = hides_add(h, prof->hide[i])) != 0)
			return r;
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
          const struct profile *prof, char *const *argv, int listen_fd)
{
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

/* ---- running ---- */

/* Interactive terminal handling applies when vrun is the foreground job. */
static int
foreground_tty(void)
{
	for (int fd = 0; fd < 3; fd++)
		if (isatty(fd) && tcgetpgrp(fd) == getpgrp())
			return fd;
	return -1;
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
 * the terminal if vrun is now the foreground job -- also when it started
 * in the background. *tty tracks the terminal vrun has handed over.
 */
static void
mirror_stop(struct sandbox *sb, int *tty)
{
	pid_t pgid = sandbox_pgid(sb);

	if (*tty >= 0 && tcgetpgrp(*tty) == pgid)
		give_terminal(*tty, getpgrp());
	kill(getpid(), SIGSTOP);
	if ((*tty = foreground_tty()) >= 0)
		give_terminal(*tty, pgid);
	sandbox_signal(sb, SIGCONT);
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

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
	        {"key", required_argument, NULL, 'k'},
	        {"allow-host", required_argument, NULL, 'a'},
	        {"profile", required_argument, NULL, 'p'},
	        {"verbose", no_argument, NULL, 'v'},
	        {"help", no_argument, NULL, 'h'},
	        {"version", no_argument, NULL, 'V'},
	        {NULL, 0, NULL, 0},
	};
	static struct ctl_writer in;
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
	int c, verbose = 0, r, ctl = -1, listen_fd = -1, fd, status = EXIT_VRUN, tty;
	int event, st;

	memset(&p, 0, sizeof(p));
	if (ensure_stdio() != 0)
		return EXIT_VRUN;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+k:vh", opts, NULL)) != -1) {
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
		case 'h':
			fputs(usage_text, stdout);
			return fflush(stdout) == 0 && !ferror(stdout) ? 0 : EXIT_VRUN;
		case 'V':
			printf("vrun %s\n", VRUN_VERSION);
			return fflush(stdout) == 0 && !ferror(stdout) ? 0 : EXIT_VRUN;
		default:
			snprintf(err, sizeof(err), "unknown or incomplete option '%s'",
			         argv[optind - 1]);
			return usage_error(err);
		}
	}
	if (nkeys == 0)
		return usage_error("no key: give at least one --key NAME");
	if (optind >= argc)
		return usage_error("no command to run");

	if ((r = paths_resolve(&p)) != 0) {
		warnx_("%s", verr_strerror(r));
		goto out;
	}
	r = profile_load(profile_name, profile_search_dir(VRUN_PROFILE_INSTALL_DIR), &prof, err,
	                 sizeof(err));
	if (r != 0) {
		warnx_("profile: %s", err[0] ? err : verr_strerror(r));
		if (r == VERR_PROFILE_NOT_FOUND && strchr(profile_name, '/') == NULL &&
		    getenv(PROFILE_DIR_ENV) == NULL)
			warnx_("(not installed? set %s to the directory holding the profiles)",
			       PROFILE_DIR_ENV);
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
	tty = foreground_tty();
	memset(&cfg, 0, sizeof(cfg));
	cfg.argv = argv + optind;
	cfg.hide = (const char *const *)hides.v;
	cfg.nhide = hides.n;
	cfg.tty_fd = tty;
	if ((r = sandbox_start(&cfg, &sb, &listen_fd, err, sizeof(err))) != 0) {
		warnx_("cannot set up the sandbox: %s", err[0] ? err : verr_strerror(r));
		if (r == VERR_NO_USERNS)
			warnx_("%s", verr_strerror(r));
		goto out;
	}
	if (getsockname(listen_fd, (struct sockaddr *)&la, &lalen) != 0 ||
	    la.sin_family != AF_INET) {
		warnx_("session listener: %s", strerror(errno));
		goto out;
	}

	/* 3. The session: vproxy takes the listener and answers with placeholders. */
	r = send_open(ctl, keys, nkeys, allow, nallow, prof, argv + optind, listen_fd);
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
		warnx_("session %s, proxy http://127.0.0.1:%u, %zu paths hidden (profile %s)",
		       session, ntohs(la.sin_port), hides.n, prof->name);
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
