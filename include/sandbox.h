/*
 * sandbox: run one command so that the only network endpoint it can reach
 * is the session's proxy listener, with the profile's paths hidden and
 * without any way to regain privileges. One interface, one file per
 * platform: sandbox-linux.c (user, pid, network, mount and IPC
 * namespaces, seccomp, Landlock), sandbox-macos.c (Seatbelt).
 *
 * The life of a sandbox, driven by vrun's main():
 *
 *   sandbox_start  build the sandbox around a command that does not run
 *                  yet, and return the listening socket through which the
 *                  command will reach the proxy (127.0.0.1 as the command
 *                  sees it). vrun hands that listener to vproxy.
 *   sandbox_exec   once vproxy opened the session: start the command with
 *                  the session's environment; the CA bundle stays readable.
 *   sandbox_wait   wait until the command stops or exits; a caught signal
 *                  interrupts it so the caller can forward it with
 *                  sandbox_signal.
 *   sandbox_free   kill whatever is left, release everything.
 *
 * Fail closed: any step that cannot be done makes sandbox_start or
 * sandbox_exec fail and the command never starts. Functions return 0 or a
 * negative VERR_* code; for VERR_SANDBOX and VERR_NO_USERNS, err holds
 * what failed (e.g. "mount /proc: Operation not permitted"), for
 * VERR_CMD_NOT_FOUND/VERR_CMD_NOT_EXEC the command and the reason. Nothing
 * here prints or exits.
 */
#ifndef VRUN_SANDBOX_H
#define VRUN_SANDBOX_H

#include <signal.h>
#include <stddef.h>
#include <sys/types.h>

struct sandbox;

struct sandbox_config {
	char *const *argv;       /* the command; argv[0] is looked up in PATH */
	const char *const *hide; /* absolute paths to mask; missing ones are skipped */
	size_t nhide;
	/*
	 * The command always gets a process group of its own. tty_fd is the
	 * controlling terminal (one of 0-2) when the command is to take it over
	 * as a shell's foreground job does, else -1. The caller decides when
	 * that is safe (runner/main.c): taking the terminal from processes that
	 * still use it stops them.
	 */
	int tty_fd;
};

enum sandbox_event {
	SANDBOX_EXITED = 1,  /* status: wait status of the command (WIFEXITED...) */
	SANDBOX_STOPPED = 2, /* status: the signal that stopped it */
};

/*
 * Build the sandbox for cfg (copied as needed; cfg may be freed after the
 * call) and return the listener in *listen_fd (close-on-exec; the caller
 * owns it). No code of the command runs before sandbox_exec. Call it
 * before changing signal dispositions: the command inherits the ones in
 * effect here.
 */
int sandbox_start(const struct sandbox_config *cfg, struct sandbox **out, int *listen_fd, char *err,
                  size_t errsize);

/*
 * Start the command. env holds "NAME=VALUE" entries to set and "NAME"
 * entries to remove, on top of the inherited environment. ca_path is the
 * session's CA bundle, which must stay readable inside the sandbox even
 * where it lies in a hidden directory. Returns once the command runs
 * (0), or VERR_CMD_NOT_FOUND / VERR_CMD_NOT_EXEC / VERR_SANDBOX.
 */
int sandbox_exec(struct sandbox *sb, const char *const *env, size_t nenv, const char *ca_path,
                 char *err, size_t errsize);

/*
 * Wait for the next event of the running command: *event is a
 * sandbox_event, *status as described there. mask is the signal mask to
 * wait with (the caller keeps the signals it forwards blocked otherwise and
 * unblocks them here); VERR_SYSTEM with errno EINTR when a signal handler
 * ran. VERR_SANDBOX if the sandbox vanished without a status.
 */
int sandbox_wait(struct sandbox *sb, const sigset_t *mask, int *event, int *status, char *err,
                 size_t errsize);

/* Send sig to the command's process group. 0 or VERR_SYSTEM. */
int sandbox_signal(struct sandbox *sb, int sig);

/* The command's process group as vrun sees it (for tcsetpgrp), or -1. */
pid_t sandbox_pgid(const struct sandbox *sb);

/*
 * How many of cfg->hide the sandbox masks: the paths that exist (missing
 * ones are skipped). Known once sandbox_start returned.
 */
size_t sandbox_hidden(const struct sandbox *sb);

/*
 * Advice for the person after sandbox_start or sandbox_exec failed with
 * code and err: one sentence on what to do about the step that failed
 * (e.g. the container options that allow it), or NULL when there is none
 * beyond err. Static text.
 */
const char *sandbox_hint(int code, const char *err);

/*
 * One line naming the protections in force, for `vrun -v` (e.g. which
 * Landlock ABI the kernel offers).
 */
void sandbox_describe(const struct sandbox *sb, char *buf, size_t size);

/*
 * The proxy credential the command presents, as the userinfo "vrun:TOKEN",
 * for vrun to hand to vproxy with the session; "" when the listener is
 * private to the sandbox (Linux: its own network namespace). 0, or
 * VERR_TOO_LARGE when buf is short.
 */
int sandbox_proxy_auth(const struct sandbox *sb, char *buf, size_t size);

/* Kill anything still running in the sandbox and free it; NULL is ignored. */
void sandbox_free(struct sandbox *sb);

#endif
