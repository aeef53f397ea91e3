/*
 * daemon: vproxy's event loop and control plane. It owns the unlocked
 * vault, the control socket, and the set of live sessions; each session
 * (session.h) owns its listener and connections.
 */
#ifndef VRUN_DAEMON_H
#define VRUN_DAEMON_H

#include <stddef.h>

#include "conn.h"
#include "paths.h"
#include "resolve.h"
#include "vault.h"

#define DAEMON_SOCKET_NAME "control.sock"
#define DAEMON_LOCK_NAME   "vproxy.lock"

struct audit;

struct daemon_opts {
	const struct paths *paths;
	struct resolve_map *resolve;          /* --resolve overrides; borrowed */
	const struct conn_timeouts *timeouts; /* --timeout; borrowed */
	struct audit *audit;                  /* the open audit log; borrowed */
};

/*
 * Take the runtime lock and bind the control socket, before any fork, so
 * `vproxy start` can report "already running" or a bind error itself.
 * *lockfd and *ctlfd receive the descriptors. VERR_DAEMON_RUNNING when
 * another vproxy holds the lock.
 */
int daemon_prepare(const struct paths *p, int *lockfd, int *ctlfd);

/*
 * Serve until `vproxy stop` or SIGTERM/SIGINT. Takes ownership of the
 * vault handle and both descriptors. When ready_fd >= 0, one byte is
 * written to it once the loop is about to run, then it is closed.
 * Returns 0 after a clean shutdown, else a VERR_* code.
 */
int daemon_run(struct vault *v, const struct daemon_opts *o, int lockfd, int ctlfd, int ready_fd);

#endif
