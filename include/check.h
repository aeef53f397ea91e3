/*
 * check: `vrun --check`, the containment self-test a person can trust
 * before relying on vrun.
 *
 * vrun builds a real sandbox the way a launch does (same profile, same
 * masks, a real vproxy session when vproxy runs) and starts itself inside
 * it with CHECK_PROBE_ARG as its first argument. check_probe_main() then
 * tries, from the inside, what the sandbox exists to stop: reaching the
 * host's loopback and abstract sockets, routing beyond lo, holding
 * capabilities, making a user namespace, reading masked paths, signalling
 * outside the Landlock domain; and what must work: the proxy listener and
 * a TLS handshake through vproxy verified by the session's CA bundle. Each
 * probe prints one line; the exit status is the number of failures.
 *
 * The probes decide from what they observe, never from what vrun was told
 * to do: run outside a sandbox, every containment probe fails (tested).
 *
 * Unlike library modules, this one prints: its output is its purpose.
 */
#ifndef VRUN_CHECK_H
#define VRUN_CHECK_H

/* argv[1] of vrun when it runs as the probe inside the sandbox. */
#define CHECK_PROBE_ARG "--internal-check-probe"
/*
 * Set to 1 in the probe's environment when it has a vproxy session (then
 * HTTPS_PROXY and SSL_CERT_FILE name its listener and CA bundle).
 */
#define CHECK_SESSION_ENV "VRUN_CHECK_SESSION"

enum check_result {
	CHECK_FAIL = 0,
	CHECK_OK = 1,
	CHECK_NOTE = 2, /* not a failure: something is unavailable by design, said so */
};

struct check_report {
	int color;       /* a terminal without NO_COLOR */
	int verbose;     /* -v: detail lines */
	unsigned failed; /* CHECK_FAIL lines so far */
};

/* Colour decided from stdout and NO_COLOR. */
void check_report_init(struct check_report *rep, int verbose);

/* One line: "ok   NAME: detail", "FAIL NAME: detail" or "note NAME: detail". */
void check_line(struct check_report *rep, enum check_result res, const char *name, const char *fmt,
                ...) __attribute__((format(printf, 4, 5)));

/* A detail line under the previous one, printed with -v only. */
void check_detail(struct check_report *rep, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));

/*
 * The probe, inside the sandbox: argv[1] is CHECK_PROBE_ARG, then what
 * vrun measured outside (see check.c). Returns the number of failed
 * probes, at most 100; the caller exits with it at once (_exit: nothing
 * may run at exit inside the sandbox).
 */
int check_probe_main(int argc, char **argv);

#endif
