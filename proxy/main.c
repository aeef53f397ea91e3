/*
 * vproxy: the background daemon that alone holds the real keys.
 * Exit status: 0 success; 1 failure; 2 usage error; 3 not running (status).
 *
 * Files besides the control socket: a pid file in the runtime directory
 * (written while the daemon holds its lock) and, when it runs in the
 * background, a log file $VAULT_HOME/vproxy.log (0600) for operational
 * messages only: start, stop, failures. Never a key, a placeholder or the
 * passphrase: nothing that reaches the log comes from the vault's contents
 * except the number of keys.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "audit.h"
#include "cliopt.h"
#include "ctlproto.h"
#include "daemon.h"
#include "passphrase.h"
#include "paths.h"
#include "resolve.h"
#include "secbuf.h"
#include "vault.h"
#include "verr.h"

#ifndef VRUN_VERSION
#define VRUN_VERSION "0.0.0"
#endif

#define EXIT_USAGE       2
#define EXIT_NOT_RUNNING 3

#define PID_NAME    "vproxy.pid"
#define LOG_NAME    "vproxy.log"
#define LOG_ROTATE  (1024 * 1024) /* bytes: past this at start, keep one old log */
#define PATH_BUFMAX 4096

static const char usage_text[] =
        "usage: vproxy start [--foreground] [--resolve HOST:PORT:ADDR]...\n"
        "                    [--timeout NAME=SECONDS]... [-v]\n"
        "       vproxy stop\n"
        "       vproxy status [--json | --keys] [-v]\n"
        "       vproxy help [COMMAND] | --help | --version\n"
        "\n"
        "The proxy that holds the real keys: it unlocks the vault once, then serves\n"
        "`vrun` sessions until stopped.\n"
        "\n"
        "commands:\n"
        "  start        ask for the vault passphrase (or read VAULT_PASSPHRASE_FILE),\n"
        "               unlock the vault and run in the background; returns when ready\n"
        "  stop         stop the running proxy; returns once it has cleaned up\n"
        "  status       pid, uptime, loaded keys (names only) and live sessions;\n"
        "               exit 0 running, 3 not running\n"
        "\n"
        "start options:\n"
        "  --foreground stay in the foreground and log to stderr (for systemd and\n"
        "               debugging); tells systemd when ready (Type=notify)\n"
        "  --resolve HOST:PORT:ADDR\n"
        "               connect to ADDR (IPv4 or [IPv6]) for HOST:PORT instead of\n"
        "               asking DNS, like curl's --resolve; repeatable\n"
        "  --timeout NAME=SECONDS\n"
        "               change a connection timeout: head (30: to send a request\n"
        "               head), idle (60: between requests), connect (10), handshake\n"
        "               (10), exchange (120: nothing moves while relaying); repeatable\n"
        "  -v, --verbose  also print where the socket, pid file and log are\n"
        "\n"
        "status options:\n"
        "  --json       everything as one JSON object\n"
        "  --keys       only the loaded key names, one per line (for completion)\n"
        "  -v, --verbose  also print the file paths\n"
        "\n"
        "files:\n"
        "  $XDG_RUNTIME_DIR/vrun/ (else $VAULT_HOME/run/): control.sock, vproxy.pid\n"
        "  $VAULT_HOME/vproxy.log: log of the background daemon (start, stop, errors)\n"
        "\n"
        "environment: VAULT_HOME, VAULT_PASSPHRASE_FILE, XDG_RUNTIME_DIR (see vproxy(1))\n"
        "exit status: 0 success, 1 failure, 2 usage error, 3 not running (status)\n";

static const char start_usage[] =
        "usage: vproxy start [--foreground] [--resolve HOST:PORT:ADDR]...\n"
        "                    [--timeout NAME=SECONDS]... [-v]\n"
        "\n"
        "Unlock the vault (passphrase from the terminal or the first line of\n"
        "$VAULT_PASSPHRASE_FILE) and serve vrun sessions. Returns once the proxy is\n"
        "ready; a second start reports the running one.\n"
        "\n"
        "  --foreground     stay in the foreground, log to stderr, no log file;\n"
        "                   sends READY=1 to $NOTIFY_SOCKET (systemd Type=notify)\n"
        "  --resolve HOST:PORT:ADDR\n"
        "                   connect to ADDR for HOST:PORT instead of asking DNS;\n"
        "                   repeatable\n"
        "  --timeout NAME=SECONDS\n"
        "                   seconds (1-86400) a connection may take for:\n"
        "                   head       a whole request head, from its first byte (30)\n"
        "                   idle       the next request on a kept-alive one (60)\n"
        "                   connect    resolving and connecting upstream, TLS\n"
        "                              included (10)\n"
        "                   handshake  the client's TLS handshake, and the last\n"
        "                              bytes of a closing connection (10)\n"
        "                   exchange   while relaying, with no byte moving in\n"
        "                              either direction (120)\n"
        "                   repeatable\n"
        "  -v, --verbose    print where the socket, pid file and log are\n"
        "  -h, --help       this help\n";

static const char stop_usage[] =
        "usage: vproxy stop\n"
        "\n"
        "Stop the running proxy: live sessions end, their commands lose the\n"
        "network. Returns once it has cleaned up; exit 0 also when it was\n"
        "not running.\n";

static const char status_usage[] =
        "usage: vproxy status [--json | --keys] [-v]\n"
        "\n"
        "Show the running proxy: pid, uptime, the loaded keys (names only, never\n"
        "secrets) and the live sessions with their command and request counts.\n"
        "Needs no passphrase. Exit 0 running, 3 not running.\n"
        "\n"
        "  --json           one JSON object: pid, uptime, keys, sessions, paths\n"
        "  --keys           key names only, one per line\n"
        "  -v, --verbose    also print the control socket, pid file and log paths\n"
        "  -h, --help       this help\n";

/* Messages of the running daemon: timestamped when they go to the log file. */
static int log_stamped;

static int
fail(int r, const char *what)
{
	int saved = errno;

	if (r == VERR_SYSTEM)
		fprintf(stderr, "vproxy: %s: %s\n", what, strerror(saved));
	else
		fprintf(stderr, "vproxy: %s: %s\n", what, verr_strerror(r));
	return EXIT_FAILURE;
}

static void usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void
usage_error(const char *fmt, ...)
{
	va_list ap;

	fputs("vproxy: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\nTry `vproxy --help`.\n", stderr);
}

static int
print_text(const char *text)
{
	fputs(text, stdout);
	return fflush(stdout) == 0 && !ferror(stdout) ? EXIT_SUCCESS : fail(VERR_SYSTEM, "stdout");
}

static void log_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* One line on stderr, which is the log file in the background. */
static void
log_msg(const char *fmt, ...)
{
	char stamp[40] = "";
	struct timespec ts;
	struct tm tm;
	va_list ap;

	if (log_stamped && clock_gettime(CLOCK_REALTIME, &ts) == 0 &&
	    gmtime_r(&ts.tv_sec, &tm) != NULL)
		strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ ", &tm);
	fprintf(stderr, "%svproxy[%ld]: ", stamp, (long)getpid());
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fflush(stderr);
}

static int
file_path(char *buf, const char *dir, const char *name)
{
	if ((size_t)snprintf(buf, PATH_BUFMAX, "%s/%s", dir, name) >= PATH_BUFMAX)
		return VERR_TOO_LARGE;
	return VERR_OK;
}

/*
 * The log file, opened for appending before the fork so a problem is
 * reported on the terminal. It must be a private regular file; past
 * LOG_ROTATE bytes the old one becomes vproxy.log.1.
 */
static int
log_open(const struct paths *p, int *out)
{
	char path[PATH_BUFMAX], old[PATH_BUFMAX + 2];
	struct stat st;
	int fd, r;

	*out = -1;
	if ((r = file_path(path, p->home, LOG_NAME)) != 0)
		return r;
	if (lstat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > LOG_ROTATE) {
		snprintf(old, sizeof(old), "%s.1", path);
		if (rename(path, old) != 0)
			return VERR_SYSTEM;
	}
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600);
	if (fd < 0)
		return errno == ELOOP ? VERR_INSECURE_PATH : VERR_SYSTEM;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 077) != 0) {
		close(fd);
		return VERR_INSECURE_PATH;
	}
	*out = fd;
	return VERR_OK;
}

/* Written while the daemon holds its lock, so it never names another vproxy. */
static int
pidfile_write(const struct paths *p)
{
	char path[PATH_BUFMAX], line[32];
	int fd, n, r;

	if ((r = file_path(path, p->runtime, PID_NAME)) != 0)
		return r;
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600);
	if (fd < 0)
		return errno == ELOOP ? VERR_INSECURE_PATH : VERR_SYSTEM;
	n = snprintf(line, sizeof(line), "%ld\n", (long)getpid());
	r = write(fd, line, (size_t)n) == n ? VERR_OK : VERR_SYSTEM;
	if (close(fd) != 0)
		r = VERR_SYSTEM;
	return r;
}

static void
pidfile_remove(const struct paths *p)
{
	char path[PATH_BUFMAX];

	char buf[32];
	ssize_t n;
	int fd;

	if (file_path(path, p->runtime, PID_NAME) != 0 ||
	    (fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	/* Only our own: another vproxy may have started since (runtime dir removed). */
	if (n > 0) {
		buf[n] = '\0';
		if (strtol(buf, NULL, 10) == (long)getpid())
			unlink(path);
	}
}

/*
 * systemd's readiness protocol (Type=notify), without libsystemd: one
 * datagram to $NOTIFY_SOCKET. Best effort: without it systemd times out
 * and says so.
 */
static void
notify_systemd(const char *state)
{
	const char *s = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sun;
	size_t len;
	int fd;

	if (s == NULL || (s[0] != '/' && s[0] != '@') || (len = strlen(s)) >= sizeof(sun.sun_path))
		return;
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	memcpy(sun.sun_path, s, len);
	if (s[0] == '@')
		sun.sun_path[0] = '\0'; /* abstract namespace */
	if ((fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0)
		return;
	(void)sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sun,
	             (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len));
	close(fd);
}

/*
 * --foreground: the daemon's ready byte (written once its signal handlers
 * are in place and the loop is about to run) turns into "ready" on stderr
 * and READY=1 for systemd. A thread, because the event loop owns the main
 * one; it reads one byte and ends.
 */
static void *
announce_ready(void *arg)
{
	int fd = *(int *)arg;
	ssize_t n;
	char c;

	while ((n = read(fd, &c, 1)) < 0 && errno == EINTR)
		;
	close(fd);
	if (n == 1) {
		fprintf(stderr, "vproxy: ready\n");
		notify_systemd("READY=1");
	}
	return NULL;
}

/*
 * Descriptors 0-2 must be open before any other is made: the daemon's
 * log and /dev/null are moved onto them, and must not already be them.
 */
static int
ensure_stdio(void)
{
	for (int fd = 0; fd < 3; fd++) {
		int n;

		if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF)
			continue;
		if ((n = open("/dev/null", O_RDWR)) != fd) {
			if (n >= 0)
				close(n);
			return -1;
		}
	}
	return 0;
}

/* Connect to the running daemon; VERR_DAEMON_DOWN when nobody answers. */
static int
connect_daemon(const struct paths *p, int *fd)
{
	struct sockaddr_un sun;
	int s;

	*fd = -1;
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if ((size_t)snprintf(sun.sun_path, sizeof(sun.sun_path), "%s/%s", p->runtime,
	                     DAEMON_SOCKET_NAME) >= sizeof(sun.sun_path))
		return VERR_TOO_LARGE;
	if ((s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return VERR_SYSTEM;
	if (connect(s, (struct sockaddr *)&sun, sizeof(sun)) != 0) {
		close(s);
		return (errno == ENOENT || errno == ECONNREFUSED || errno == ENOTDIR)
		               ? VERR_DAEMON_DOWN
		               : VERR_SYSTEM;
	}
	*fd = s;
	return VERR_OK;
}

/* One request, one reply. */
static int
transact(const struct paths *p, uint16_t type, struct ctl_writer *buf, struct ctl_msg *m, int *sock)
{
	int r, fd, passed;

	if ((r = connect_daemon(p, &fd)) != 0)
		return r;
	ctl_begin(buf, type);
	if ((r = ctl_finish(buf)) != 0 || (r = ctl_send(fd, buf, -1)) != 0 ||
	    (r = ctl_recv(fd, buf, m, &passed)) != 0) {
		close(fd);
		return r == VERR_CTL_EOF ? VERR_DAEMON_DOWN : r;
	}
	if (passed >= 0)
		close(passed);
	if (sock != NULL)
		*sock = fd;
	else
		close(fd);
	return VERR_OK;
}

/* 42s, 5m 12s, 3h 05m, 2d 04h */
static void
format_duration(uint64_t s, char *buf, size_t size)
{
	if (s < 60)
		snprintf(buf, size, "%llus", (unsigned long long)s);
	else if (s < 3600)
		snprintf(buf, size, "%llum %02llus", (unsigned long long)(s / 60),
		         (unsigned long long)(s % 60));
	else if (s < 86400)
		snprintf(buf, size, "%lluh %02llum", (unsigned long long)(s / 3600),
		         (unsigned long long)(s % 3600 / 60));
	else
		snprintf(buf, size, "%llud %02lluh", (unsigned long long)(s / 86400),
		         (unsigned long long)(s % 86400 / 3600));
}

/* Untrusted text (a command line comes from the sandboxed side): no terminal controls. */
static void
put_clean(const char *s)
{
	for (const unsigned char *c = (const unsigned char *)s; *c != '\0'; c++)
		putchar(*c < 0x20 || *c == 0x7f ? '?' : *c);
}

struct sessinfo {
	char *id, *requests, *command;
};

/* "id\trequests\tcommand" (CTL_T_SESSINFO) split in place. */
static void
split_sessinfo(char *line, struct sessinfo *si)
{
	char *tab;

	si->id = line;
	si->requests = si->command = (char *)"";
	if ((tab = strchr(line, '\t')) == NULL)
		return;
	*tab = '\0';
	si->requests = tab + 1;
	if ((tab = strchr(si->requests, '\t')) == NULL)
		return;
	*tab = '\0';
	si->command = tab + 1;
}

static int
status_json(const struct ctl_msg *m, uint64_t pid, uint64_t up, const char *sock, const char *pidf,
            const char *logf)
{
	json_t *o = json_object(), *keys = json_array(), *sess = json_array();
	const struct ctl_field *f;
	char line[2048];
	int r;

	if (o == NULL || keys == NULL || sess == NULL) {
		json_decref(o);
		json_decref(keys);
		json_decref(sess);
		return fail(VERR_NOMEM, "status");
	}
	for (size_t i = 0; (f = ctl_nth(m, CTL_T_KEYINFO, i)) != NULL; i++)
		if (ctl_field_str(f, line, sizeof(line)) == 0)
			json_array_append_new(keys, json_string(line));
	for (size_t i = 0; (f = ctl_nth(m, CTL_T_SESSINFO, i)) != NULL; i++) {
		struct sessinfo si;

		if (ctl_field_str(f, line, sizeof(line)) != 0)
			continue;
		split_sessinfo(line, &si);
		json_array_append_new(sess, json_pack("{s:s, s:I, s:s}", "id", si.id, "requests",
		                                      (json_int_t)strtoll(si.requests, NULL, 10),
		                                      "command", si.command));
	}
	json_object_set_new(o, "pid", json_integer((json_int_t)pid));
	json_object_set_new(o, "uptime", json_integer((json_int_t)up));
	json_object_set_new(o, "control_socket", json_string(sock));
	json_object_set_new(o, "pid_file", json_string(pidf));
	json_object_set_new(o, "log", json_string(logf));
	json_object_set_new(o, "keys", keys);
	json_object_set_new(o, "sessions", sess);
	r = json_dumpf(o, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(o);
	if (r != 0 || fputc('\n', stdout) == EOF || fflush(stdout) != 0)
		return fail(VERR_SYSTEM, "stdout");
	return EXIT_SUCCESS;
}

enum status_mode { STATUS_TEXT, STATUS_JSON, STATUS_KEYS };

static int
cmd_status(const struct paths *p, enum status_mode mode, int verbose)
{
	static struct ctl_writer buf;
	static struct ctl_msg m;
	const struct ctl_field *f;
	uint64_t pid = 0, up = 0;
	char line[2048], dur[32], sock[PATH_BUFMAX], pidf[PATH_BUFMAX], logf[PATH_BUFMAX];
	size_t nkeys = 0, nsess = 0;
	int r;

	if ((r = transact(p, CTL_STATUS, &buf, &m, NULL)) != 0) {
		if (r == VERR_DAEMON_DOWN) {
			if (mode != STATUS_KEYS)
				fprintf(stderr,
				        "vproxy: not running (start it with `vproxy start`)\n");
			return EXIT_NOT_RUNNING;
		}
		return fail(r, "status");
	}
	if (m.type != CTL_STATUS_REPLY || ctl_get_u64(&m, CTL_T_PID, &pid) != 0 ||
	    ctl_get_u64(&m, CTL_T_UPTIME, &up) != 0)
		return fail(VERR_CTL, "status");
	if (file_path(sock, p->runtime, DAEMON_SOCKET_NAME) != 0 ||
	    file_path(pidf, p->runtime, PID_NAME) != 0 || file_path(logf, p->home, LOG_NAME) != 0)
		return fail(VERR_TOO_LARGE, "status");
	if (mode == STATUS_JSON)
		return status_json(&m, pid, up, sock, pidf, logf);
	while (ctl_nth(&m, CTL_T_KEYINFO, nkeys) != NULL)
		nkeys++;
	while (ctl_nth(&m, CTL_T_SESSINFO, nsess) != NULL)
		nsess++;
	if (mode == STATUS_KEYS) {
		for (size_t i = 0; (f = ctl_nth(&m, CTL_T_KEYINFO, i)) != NULL; i++)
			if (ctl_field_str(f, line, sizeof(line)) == 0)
				printf("%s\n", line);
		return fflush(stdout) == 0 ? EXIT_SUCCESS : fail(VERR_SYSTEM, "stdout");
	}
	format_duration(up, dur, sizeof(dur));
	printf("vproxy running: pid %llu, up %s\n", (unsigned long long)pid, dur);
	if (verbose) {
		printf("control socket: %s\n", sock);
		printf("pid file: %s\n", pidf);
		printf("log: %s (background daemon only)\n", logf);
		printf("vault: %s\n", p->db);
	}
	printf("keys:");
	for (size_t i = 0; (f = ctl_nth(&m, CTL_T_KEYINFO, i)) != NULL; i++)
		if (ctl_field_str(f, line, sizeof(line)) == 0)
			printf("%s %s", i > 0 ? "," : "", line);
	if (nkeys == 0)
		printf(" none (add one with `vault add NAME --host HOST`)");
	printf("\n");
	printf("sessions: %zu\n", nsess);
	if (nsess > 0)
		printf("  %-16s %8s  %s\n", "SESSION", "REQUESTS", "COMMAND");
	for (size_t i = 0; i < nsess; i++) {
		struct sessinfo si;

		if (ctl_field_str(ctl_nth(&m, CTL_T_SESSINFO, i), line, sizeof(line)) != 0)
			continue;
		split_sessinfo(line, &si);
		printf("  %-16s %8s  ", si.id, si.requests[0] ? si.requests : "0");
		put_clean(si.command);
		putchar('\n');
	}
	if (fflush(stdout) != 0 || ferror(stdout))
		return fail(VERR_SYSTEM, "stdout");
	return EXIT_SUCCESS;
}

/*
 * After the control socket closed, the daemon still removes its pid file
 * and releases its lock: wait for the lock (at most 10 s) so that when stop
 * returns, vproxy is gone and a start may follow at once.
 */
static void
wait_unlocked(const struct paths *p)
{
	char path[PATH_BUFMAX];
	int fd;

	if (file_path(path, p->runtime, DAEMON_LOCK_NAME) != 0 ||
	    (fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY)) < 0)
		return;
	for (int i = 0; i < 1000 && flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK; i++)
		nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
	close(fd);
}

static int
cmd_stop(const struct paths *p)
{
	static struct ctl_writer buf;
	static struct ctl_msg m;
	int r, fd;
	char c;

	if ((r = transact(p, CTL_STOP, &buf, &m, &fd)) != 0) {
		if (r == VERR_DAEMON_DOWN) {
			fprintf(stderr, "vproxy: not running\n");
			return EXIT_SUCCESS;
		}
		return fail(r, "stop");
	}
	/* Wait for the daemon to close its end: then it has cleaned up. */
	while (recv(fd, &c, 1, 0) > 0)
		;
	close(fd);
	wait_unlocked(p);
	return m.type == CTL_OK ? EXIT_SUCCESS : fail(VERR_CTL, "stop");
}

/*
 * Serve until stopped, then remove the pid file. The lock is held through
 * a duplicate descriptor until the pid file is gone, so a vproxy started
 * meanwhile never has its pid file removed by this one.
 */
static int
serve(struct vault *v, struct daemon_opts *o, int lockfd, int ctlfd, int ready_fd)
{
	const struct paths *p = o->paths;
	size_t nkeys = vault_count(v);
	int r, hold = dup(lockfd);

	if (hold < 0 || pidfile_write(p) != 0) {
		log_msg("cannot write the pid file in %s: %s", p->runtime, strerror(errno));
		if (hold >= 0)
			close(hold);
		close(lockfd);
		close(ctlfd);
		if (ready_fd >= 0)
			close(ready_fd);
		vault_close(v);
		return VERR_SYSTEM;
	}
	log_msg("started: %zu key%s, control socket %s/%s", nkeys, nkeys == 1 ? "" : "s",
	        p->runtime, DAEMON_SOCKET_NAME);
	r = daemon_run(v, o, lockfd, ctlfd, ready_fd);
	if (r == 0)
		log_msg("stopped");
	else if (r == VERR_DAEMON_ORPHANED)
		log_msg("stopped: %s", verr_strerror(r));
	else
		log_msg("stopped: the event loop failed: %s",
		        r == VERR_SYSTEM ? strerror(errno) : verr_strerror(r));
	pidfile_remove(p);
	close(hold);
	return r;
}

static int
cmd_start(const struct paths *p, int foreground, int verbose, struct resolve_map *rm,
          const struct conn_timeouts *to)
{
	struct daemon_opts o = {p, rm, to, NULL};
	struct secbuf *pass = NULL;
	struct vault *v = NULL;
	int r, lockfd = -1, ctlfd = -1, logfd = -1, ready[2] = {-1, -1}, fd;
	char logpath[PATH_BUFMAX];
	pid_t pid;
	char c;

	/* A running proxy makes start a no-op, reported, before any prompt. */
	if (connect_daemon(p, &fd) == 0) {
		close(fd);
		fprintf(stderr, "vproxy: already running (see `vproxy status`)\n");
		return EXIT_SUCCESS;
	}
	if (file_path(logpath, p->home, LOG_NAME) != 0)
		return fail(VERR_TOO_LARGE, "log");
	if ((r = passphrase_get("VAULT_PASSPHRASE_FILE", "Vault passphrase: ", 0, &pass)) != 0)
		return fail(r, "passphrase");
	r = vault_open(p, pass, VAULT_READ, &v);
	secbuf_free(pass);
	if (r != 0)
		return fail(r, r == VERR_SYSTEM || r == VERR_INSECURE_PATH ? p->db : "vault");
	/* No audit log, no service: every request must leave a record. */
	if ((r = audit_open(p->audit, vault_audit_key(v), &o.audit)) != 0) {
		vault_close(v);
		return fail(r, p->audit);
	}
	if ((r = daemon_prepare(p, &lockfd, &ctlfd)) != 0) {
		audit_close(o.audit);
		vault_close(v);
		if (r == VERR_DAEMON_RUNNING) {
			fprintf(stderr, "vproxy: already running (see `vproxy status`)\n");
			return EXIT_SUCCESS;
		}
		return fail(r, p->runtime);
	}
	if (verbose) {
		fprintf(stderr, "vproxy: control socket %s/%s\n", p->runtime, DAEMON_SOCKET_NAME);
		fprintf(stderr, "vproxy: pid file %s/%s\n", p->runtime, PID_NAME);
		if (!foreground)
			fprintf(stderr, "vproxy: log %s\n", logpath);
	}
	if (foreground) {
		static int ready_rd;
		pthread_t t;

		if (pipe2(ready, O_CLOEXEC) != 0) {
			fail(VERR_SYSTEM, "pipe");
			goto fail_early;
		}
		ready_rd = ready[0];
		if (pthread_create(&t, NULL, announce_ready, &ready_rd) != 0) {
			fail(VERR_SYSTEM, "thread");
			goto fail_early;
		}
		pthread_detach(t);
		r = serve(v, &o, lockfd, ctlfd, ready[1]);
		notify_systemd("STOPPING=1");
		audit_close(o.audit);
		return r == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
	}
	if ((r = log_open(p, &logfd)) != 0) {
		fail(r, logpath);
		goto fail_early;
	}
	if (pipe2(ready, O_CLOEXEC) != 0 || (pid = fork()) < 0) {
		fail(VERR_SYSTEM, "fork");
		goto fail_early;
	}
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);

		close(ready[0]);
		if (setsid() < 0 || null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 ||
		    dup2(logfd, 2) < 0)
			_exit(EXIT_FAILURE);
		close(null);
		close(logfd);
		if (chdir("/") != 0)
			_exit(EXIT_FAILURE);
		log_stamped = 1;
		_exit(serve(v, &o, lockfd, ctlfd, ready[1]) == 0 ? EXIT_SUCCESS : EXIT_FAILURE);
	}
	close(ready[1]);
	close(logfd);
	audit_close(o.audit);
	vault_close(v);
	close(lockfd);
	close(ctlfd);
	/* The daemon writes one byte once it serves; EOF first means it died. */
	while ((r = (int)read(ready[0], &c, 1)) < 0 && errno == EINTR)
		;
	close(ready[0]);
	if (r != 1) {
		waitpid(pid, NULL, WNOHANG);
		fprintf(stderr, "vproxy: the daemon failed to start; see %s\n", logpath);
		return EXIT_FAILURE;
	}
	fprintf(stderr, "vproxy: started (pid %ld)\n", (long)pid);
	return EXIT_SUCCESS;
fail_early:
	if (logfd >= 0)
		close(logfd);
	if (ready[0] >= 0) {
		close(ready[0]);
		close(ready[1]);
	}
	audit_close(o.audit);
	vault_close(v);
	close(lockfd);
	close(ctlfd);
	return EXIT_FAILURE;
}

static const char *
command_usage(const char *cmd)
{
	if (strcmp(cmd, "start") == 0)
		return start_usage;
	if (strcmp(cmd, "stop") == 0)
		return stop_usage;
	if (strcmp(cmd, "status") == 0)
		return status_usage;
	return NULL;
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {{"foreground", no_argument, NULL, 'f'},
	                                     {"resolve", required_argument, NULL, 'r'},
	                                     {"timeout", required_argument, NULL, 't'},
	                                     {"json", no_argument, NULL, 'j'},
	                                     {"keys", no_argument, NULL, 'k'},
	                                     {"verbose", no_argument, NULL, 'v'},
	                                     {"help", no_argument, NULL, 'h'},
	                                     {NULL, 0, NULL, 0}};
	static struct resolve_map rm;
	struct conn_timeouts to = CONN_TIMEOUTS_DEFAULT;
	enum status_mode mode = STATUS_TEXT;
	struct cliopt_abbrev ab;
	struct paths p;
	const char *cmd, *help;
	int c, r, foreground = 0, verbose = 0, ret, timeouts = 0;

	if ((r = secbuf_process_setup()) != 0)
		return fail(r, "cannot protect process memory");
	if (ensure_stdio() != 0)
		return EXIT_FAILURE;
	if (argc < 2) {
		fputs(usage_text, stderr);
		return EXIT_USAGE;
	}
	cmd = argv[1];
	if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0)
		return print_text(usage_text);
	if (strcmp(cmd, "--version") == 0) {
		printf("vproxy %s\n", VRUN_VERSION);
		return print_text("");
	}
	if (strcmp(cmd, "help") == 0) {
		if (argc == 2)
			return print_text(usage_text);
		if (argc == 3 && (help = command_usage(argv[2])) != NULL)
			return print_text(help);
		usage_error("help: no command '%s' (commands: start, stop, status)",
		            argc > 2 ? argv[2] : "");
		return EXIT_USAGE;
	}
	if ((help = command_usage(cmd)) == NULL) {
		usage_error(cmd[0] == '-' ? "'%s': expected a command first: start, stop or status"
		                          : "unknown command '%s' (commands: start, stop, status)",
		            cmd);
		return EXIT_USAGE;
	}
	opterr = 0;
	optind = 2;
	while ((c = cliopt_getopt(argc, argv, ":hv", opts, &ab)) != -1) {
		switch (c) {
		case 'f':
			foreground = 1;
			break;
		case 'r':
			if ((r = resolve_add(&rm, optarg)) != 0) {
				usage_error("--resolve '%s': %s", optarg, verr_strerror(r));
				return EXIT_USAGE;
			}
			break;
		case 't':
			if (conn_timeout_set(&to, optarg) != 0) {
				usage_error(
				        "--timeout '%s': expected NAME=SECONDS, NAME one of head, "
				        "idle, connect, handshake, exchange, SECONDS 1-%d",
				        optarg, CONN_TIMEOUT_MAX);
				return EXIT_USAGE;
			}
			timeouts = 1;
			break;
		case 'j':
		case 'k':
			if (mode != STATUS_TEXT && mode != (c == 'j' ? STATUS_JSON : STATUS_KEYS)) {
				usage_error("status: --json and --keys do not go together");
				return EXIT_USAGE;
			}
			mode = c == 'j' ? STATUS_JSON : STATUS_KEYS;
			break;
		case 'v':
			verbose = 1;
			break;
		case 'h':
			return print_text(help);
		case ':':
			usage_error("%s: option '%s' needs a value", cmd, argv[optind - 1]);
			return EXIT_USAGE;
		default:
			if (ab.typed != NULL)
				usage_error("%s: option '%.*s' is abbreviated: write '--%s'", cmd,
				            (int)strcspn(ab.typed, "="), ab.typed, ab.full);
			else
				usage_error("%s: unknown option '%s'", cmd, argv[optind - 1]);
			return EXIT_USAGE;
		}
	}
	if (optind != argc) {
		usage_error("%s: unexpected argument '%s'", cmd, argv[optind]);
		return EXIT_USAGE;
	}
	if (strcmp(cmd, "start") != 0 && (foreground || rm.n > 0 || timeouts)) {
		usage_error("--foreground, --resolve and --timeout go with start");
		return EXIT_USAGE;
	}
	if (strcmp(cmd, "status") != 0 && mode != STATUS_TEXT) {
		usage_error("--json and --keys go with status");
		return EXIT_USAGE;
	}
	if (strcmp(cmd, "stop") == 0 && verbose) {
		usage_error("stop: unknown option '-v'");
		return EXIT_USAGE;
	}
	if ((r = paths_resolve(&p)) != 0)
		return fail(r, "VAULT_HOME");
	if (strcmp(cmd, "start") == 0)
		ret = cmd_start(&p, foreground, verbose, &rm, &to);
	else if (strcmp(cmd, "stop") == 0)
		ret = cmd_stop(&p);
	else
		ret = cmd_status(&p, mode, verbose);
	paths_clear(&p);
	return ret;
}
