/*
 * resolve: vproxy's own name resolution for upstream connections, with
 * curl-style --resolve HOST:PORT:ADDR overrides that win over DNS. The
 * proxy connects to exactly the address it resolved here: there is no
 * second lookup that could be steered elsewhere.
 */
#ifndef VRUN_RESOLVE_H
#define VRUN_RESOLVE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "hostspec.h"

#define RESOLVE_MAX 64

struct resolve_entry {
	struct hostspec target; /* canonical host and port */
	struct sockaddr_storage addr;
	socklen_t addrlen;
};

struct resolve_map {
	size_t n;
	struct resolve_entry e[RESOLVE_MAX];
};

/*
 * Parse "HOST:PORT:ADDR" (ADDR an IPv4 literal or [IPv6]) and add it.
 * VERR_HOST / VERR_HOST_PORT / VERR_TOO_MANY.
 */
int resolve_add(struct resolve_map *m, const char *spec);

/* The override for host:port, or NULL. */
const struct resolve_entry *resolve_find(const struct resolve_map *m, const struct hostspec *h);

#endif
