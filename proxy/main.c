/*
 * vproxy: the background daemon that alone holds the real keys.
 * Exit status: 0 success; 1 failure; 2 usage error; 3 not running (status).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "audit.h"
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

static const char usage_text[] =
        "usage: vproxy start [--foreground] [--resolve HOST:PORT:ADDR]...\n"
        "       vproxy stop\n"
        "       vproxy status\n"
        "\n"
        "The proxy that holds the real keys: it unlocks the vault once, then serves\n"
        "`vrun` sessions until stopped.\n"
        "\n"
        "  start        ask for the vault passphrase (or read VAULT_PASSPHRASE_FILE),\n"
        "               unlock the vault and run in the background; returns when ready\n"
        "  --foreground stay in the foreground (for service managers and debugging)\n"
        "  --resolve HOST:PORT:ADDR\n"
        "               connect to ADDR (IPv4 or [IPv6]) for HOST:PORT instead of\n"
        "               asking DNS, like curl's --resolve; repeatable\n"
        "  stop         stop the running proxy\n"
        "  status       show the running proxy: exit 0 running, 3 not running\n"
        "\n"
        "Files: the control socket lives in $XDG_RUNTIME_DIR/vrun/ (or $VAULT_HOME/run/).\n";

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
		return (errno == ENOENT || errno == ECONNREFUSED) ? VERR_DAEMON_DOWN : VERR_SYSTEM;
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

static int
cmd_status(const struct paths *p)
{
	static struct ctl_writer buf;
	static struct ctl_msg m;
	const struct ctl_field *f;
	uint64_t pid = 0, up = 0;
	char line[2048];
	size_t nsess = 0;
	int r;

	if ((r = transact(p, CTL_STATUS, &buf, &m, NULL)) != 0) {
		if (r == VERR_DAEMON_DOWN) {
			fprintf(stderr, "vproxy: not running (start it with `vproxy start`)\n");
			return EXIT_NOT_RUNNING;
		}
		return fail(r, "status");
	}
	if (m.type != CTL_STATUS_REPLY || ctl_get_u64(&m, CTL_T_PID, &pid) != 0 ||
	    ctl_get_u64(&m, CTL_T_UPTIME, &up) != 0)
		return fail(VERR_CTL, "status");
	printf("vproxy running: pid %llu, up %llus\n", (unsigned long long)pid,
	       (unsigned long long)up);
	printf("keys:");
	for (size_t i = 0; (f = ctl_nth(&m, CTL_T_KEYINFO, i)) != NULL; i++)
		if (ctl_field_str(f, line, sizeof(line)) == 0)
			printf(" %s", line);
	printf("\n");
	while (ctl_nth(&m, CTL_T_SESSINFO, nsess) != NULL)
		nsess++;
	printf("sessions: %zu\n", nsess);
	for (size_t i = 0; i < nsess; i++) {
		char *id, *req, *cmd;

		if (ctl_field_str(ctl_nth(&m, CTL_T_SESSINFO, i), line, sizeof(line)) != 0)
			continue;
		id = strtok(line, "\t");
		req = strtok(NULL, "\t");
		cmd = strtok(NULL, "");
		printf("  %s  %s requests  %s\n", id ? id : "?", req ? req : "0", cmd ? cmd : "");
	}
	if (fflush(stdout) != 0)
		return fail(VERR_SYSTEM, "stdout");
	return EXIT_SUCCESS;
}

static int
cmd_stop(const struct paths *p)
{
	static struct ctl_writer buf;
	static struct ctl_msg m;
	int r, fd, passed;
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
	(void)passed;
	return m.type == CTL_OK ? EXIT_SUCCESS : fail(VERR_CTL, "stop");
}

static int
cmd_start(const struct paths *p, int foreground, struct resolve_map *rm)
{
	struct daemon_opts o = {p, rm, NULL};
	struct secbuf *pass = NULL;
	struct vault *v = NULL;
	int r, lockfd = -1, ctlfd = -1, ready[2] = {-1, -1}, fd;
	pid_t pid;
	char c;

	/* A running proxy makes start a no-op, reported, before any prompt. */
	if (connect_daemon(p, &fd) == 0) {
		close(fd);
		fprintf(stderr, "vproxy: already running (see `vproxy status`)\n");
		return EXIT_SUCCESS;
	}
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
	if (foreground) {
		fprintf(stderr, "vproxy: ready\n");
		r = daemon_run(v, &o, lockfd, ctlfd, -1);
		audit_close(o.audit);
		return r == 0 ? EXIT_SUCCESS : fail(r, "event loop");
	}
	if (pipe2(ready, O_CLOEXEC) != 0 || (pid = fork()) < 0) {
		vault_close(v);
		return fail(VERR_SYSTEM, "fork");
	}
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);

		close(ready[0]);
		if (setsid() < 0 || null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 ||
		    dup2(null, 2) < 0)
			_exit(EXIT_FAILURE);
		if (chdir("/") != 0)
			_exit(EXIT_FAILURE);
		_exit(daemon_run(v, &o, lockfd, ctlfd, ready[1]) == 0 ? EXIT_SUCCESS
		                                                      : EXIT_FAILURE);
	}
	close(ready[1]);
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
		fprintf(stderr, "vproxy: the daemon failed to start\n");
		return EXIT_FAILURE;
	}
	fprintf(stderr, "vproxy: started (pid %ld)\n", (long)pid);
	return EXIT_SUCCESS;
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {{"foreground", no_argument, NULL, 'f'},
	                                     {"resolve", required_argument, NULL, 'r'},
	                                     {"help", no_argument, NULL, 'h'},
	                                     {"version", no_argument, NULL, 'V'},
	                                     {NULL, 0, NULL, 0}};
	static struct resolve_map rm;
	struct paths p;
	const char *cmd;
	int c, r, foreground = 0, ret;

	if ((r = secbuf_process_setup()) != 0)
		return fail(r, "cannot protect process memory");
	if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		fputs(usage_text, stdout);
		return fflush(stdout) == 0 ? EXIT_SUCCESS : fail(VERR_SYSTEM, "stdout");
	}
	if (argc >= 2 && strcmp(argv[1], "--version") == 0) {
		printf("vproxy %s\n", VRUN_VERSION);
		return fflush(stdout) == 0 ? EXIT_SUCCESS : fail(VERR_SYSTEM, "stdout");
	}
	if (argc < 2) {
		fputs(usage_text, stderr);
		return EXIT_USAGE;
	}
	cmd = argv[1];
	optind = 2;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
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
		case 'h':
			fputs(usage_text, stdout);
			return fflush(stdout) == 0 ? EXIT_SUCCESS : fail(VERR_SYSTEM, "stdout");
		default:
			usage_error("bad option");
			return EXIT_USAGE;
		}
	}
	if (optind != argc) {
		usage_error("unexpected argument '%s'", argv[optind]);
		return EXIT_USAGE;
	}
	if (strcmp(cmd, "start") != 0 && (foreground || rm.n > 0)) {
		usage_error("--foreground and --resolve go with start");
		return EXIT_USAGE;
	}
	if ((r = paths_resolve(&p)) != 0)
		return fail(r, "VAULT_HOME");
	if (strcmp(cmd, "start") == 0)
		ret = cmd_start(&p, foreground, &rm);
	else if (strcmp(cmd, "stop") == 0)
		ret = cmd_stop(&p);
	else if (strcmp(cmd, "status") == 0)
		ret = cmd_status(&p);
	else {
		usage_error("unknown command '%s'", cmd);
		ret = EXIT_USAGE;
	}
	paths_clear(&p);
	return ret;
}
