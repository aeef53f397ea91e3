/*
 * hostspec: parse, canonicalise, format and match HOST[:PORT] bindings.
 *
 * Canonical form: DNS names lower-cased without a trailing dot, LDH labels
 * of 1-63 bytes, at most 253 bytes in all, and a last label that is not
 * numeric (so "1.2.3" or "0x7f.1" can never be mistaken for an address);
 * IPv4 as four decimal octets without leading zeros; IPv6 in brackets in
 * RFC 5952 form. Ports are decimal 1-65535 without leading zeros. A
 * wildcard is only a leading "*." over at least two labels and matches
 * strict subdomains, never the bare domain.
 */
#ifndef VRUN_HOSTSPEC_H
#define VRUN_HOSTSPEC_H

#include <stddef.h>
#include <stdint.h>

#define HOSTSPEC_NAME_MAX     253
#define HOSTSPEC_DEFAULT_PORT 443

enum hostspec_kind { HOSTSPEC_NAME = 1, HOSTSPEC_IPV4 = 2, HOSTSPEC_IPV6 = 3 };

struct hostspec {
	char host[HOSTSPEC_NAME_MAX + 1]; /* canonical; for wildcards the suffix */
	uint16_t port;
	uint8_t kind;     /* enum hostspec_kind */
	uint8_t wildcard; /* 1: matches strict subdomains of host */
};

enum {
	HOSTSPEC_ALLOW_WILDCARD = 1 << 0, /* accept a leading "*." */
	HOSTSPEC_REQUIRE_PORT = 1 << 1,   /* no default port (CONNECT authority) */
};

/*
 * Parse len bytes at s (no NUL needed) as HOST[:PORT]. Returns 0 or
 * VERR_HOST, VERR_HOST_PORT, VERR_HOST_WILDCARD. *out is cleared first.
 */
int hostspec_parse(const char *s, size_t len, int flags, struct hostspec *out);

/* "host:port", "*.suffix:port" or "[v6]:port" into buf; VERR_TOO_LARGE if short. */
int hostspec_format(const struct hostspec *h, char *buf, size_t size);

/* Host part only ("*.suffix" or "[v6]" included). */
int hostspec_format_host(const struct hostspec *h, char *buf, size_t size);

/* 1 when the concrete (non-wildcard) target is allowed by rule, else 0. */
int hostspec_match(const struct hostspec *rule, const struct hostspec *target);

#endif
