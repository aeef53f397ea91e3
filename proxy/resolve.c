#include "resolve.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "verr.h"

int
resolve_add(struct resolve_map *m, const char *spec)
{
	struct resolve_entry *e;
	const char *hostend, *portend, *a;
	char addr[INET6_ADDRSTRLEN + 3];
	size_t alen;
	int r;

	if (m->n == RESOLVE_MAX)
		return VERR_TOO_MANY;
	e = &m->e[m->n];
	memset(e, 0, sizeof(*e));
	/* HOST is a name, an IPv4 literal or [IPv6]; then :PORT:ADDR. */
	if (spec[0] == '[') {
		if ((hostend = strchr(spec, ']')) == NULL)
			return VERR_HOST;
		hostend++;
	} else {
		hostend = spec + strcspn(spec, ":");
	}
	if (*hostend != ':' || (portend = strchr(hostend + 1, ':')) == NULL)
		return VERR_HOST;
	if ((r = hostspec_parse(spec, (size_t)(portend - spec), HOSTSPEC_REQUIRE_PORT,
	                        &e->target)) != 0)
		return r;
	a = portend + 1;
	alen = strlen(a);
	if (alen == 0 || alen >= sizeof(addr))
		return VERR_HOST;
	memcpy(addr, a, alen + 1);
	if (addr[0] == '[' && addr[alen - 1] == ']') {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&e->addr;

		addr[alen - 1] = '\0';
		if (inet_pton(AF_INET6, addr + 1, &s6->sin6_addr) != 1)
			return VERR_HOST;
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(e->target.port);
		e->addrlen = sizeof(*s6);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&e->addr;
		struct hostspec check;

		/* Only the strict dotted quad: no 0x, octal or short forms. */
		if (hostspec_parse(addr, alen, 0, &check) != 0 || check.kind != HOSTSPEC_IPV4 ||
		    inet_pton(AF_INET, addr, &s4->sin_addr) != 1)
			return VERR_HOST;
		s4->sin_family = AF_INET;
		s4->sin_port = htons(e->target.port);
		e->addrlen = sizeof(*s4);
	}
	m->n++;
	return VERR_OK;
}

const struct resolve_entry *
resolve_find(const struct resolve_map *m, const struct hostspec *h)
{
	for (size_t i = 0; i < m->n; i++)
		if (m->e[i].target.port == h->port && m->e[i].target.kind == h->kind &&
		    strcmp(m->e[i].target.host, h->host) == 0)
			return &m->e[i];
	return NULL;
}
