#include "hostspec.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "verr.h"

static int
is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static int
is_hex(char c)
{
	return is_digit(c) || (c >= 'a' && c <= 'f');
}

static int
parse_port(const char *s, size_t len, uint16_t *port)
{
	unsigned long v = 0;

	if (len == 0 || len > 5 || s[0] == '0')
		return VERR_HOST_PORT;
	for (size_t i = 0; i < len; i++) {
		if (!is_digit(s[i]))
			return VERR_HOST_PORT;
		v = v * 10 + (unsigned long)(s[i] - '0');
	}
	if (v < 1 || v > 65535)
		return VERR_HOST_PORT;
	*port = (uint16_t)v;
	return VERR_OK;
}

/* Strict dotted quad: exactly four decimal octets, no leading zeros. */
static int
parse_ipv4(const char *s, size_t len)
{
	size_t i = 0;

	for (int part = 0; part < 4; part++) {
		size_t start = i;
		unsigned v = 0;

		if (part > 0) {
			if (i >= len || s[i] != '.')
				return 0;
			start = ++i;
		}
		while (i < len && is_digit(s[i]) && i - start < 4)
			v = v * 10 + (unsigned)(s[i++] - '0');
		if (i == start || i - start > 3 || v > 255 || (s[start] == '0' && i - start > 1))
			return 0;
	}
	return i == len;
}

/* Last label all digits, or 0x-hex: an address in some parser's eyes. */
static int
numeric_last_label(const char *s, size_t len)
{
	size_t start = len;
	int digits = 1;

	while (start > 0 && s[start - 1] != '.')
		start--;
	if (start == len)
		return 0;
	for (size_t i = start; i < len; i++)
		if (!is_digit(s[i]))
			digits = 0;
	if (digits)
		return 1;
	if (len - start >= 2 && s[start] == '0' && s[start + 1] == 'x') {
		for (size_t i = start + 2; i < len; i++)
			if (!is_hex(s[i]))
				return 0;
		return 1;
	}
	return 0;
}

/* Lower-case LDH labels into out (already sized); count them. */
static int
parse_name(const char *s, size_t len, char *out, int *labels)
{
	size_t label = 0;

	*labels = 0;
	if (len == 0 || len > HOSTSPEC_NAME_MAX)
		return VERR_HOST;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];

		if (c >= 'A' && c <= 'Z')
			c = (char)(c - 'A' + 'a');
		if (c == '.') {
			if (label == 0 || out[i - 1] == '-')
				return VERR_HOST;
			label = 0;
			out[i] = c;
			continue;
		}
		if (!((c >= 'a' && c <= 'z') || is_digit(c) || c == '-'))
			return VERR_HOST;
		if (c == '-' && label == 0)
			return VERR_HOST;
		if (++label > 63)
			return VERR_HOST;
		if (label == 1)
			(*labels)++;
		out[i] = c;
	}
	if (label == 0 || out[len - 1] == '-')
		return VERR_HOST;
	out[len] = '\0';
	return VERR_OK;
}

int
hostspec_parse(const char *s, size_t len, int flags, struct hostspec *out)
{
	const char *host, *colon = NULL;
	size_t hlen;
	int r, labels;

	memset(out, 0, sizeof(*out));
	if (len == 0)
		return VERR_HOST;
	if (s[0] == '[') {
		const char *end = memchr(s, ']', len);
		char tmp[INET6_ADDRSTRLEN + 1];
		struct in6_addr a;

		if (end == NULL || (size_t)(end - s - 1) >= sizeof(tmp) || end == s + 1)
			return VERR_HOST;
		memcpy(tmp, s + 1, (size_t)(end - s - 1));
		tmp[end - s - 1] = '\0';
		if (inet_pton(AF_INET6, tmp, &a) != 1)
			return VERR_HOST;
		if (inet_ntop(AF_INET6, &a, out->host, sizeof(out->host)) == NULL)
			return VERR_HOST;
		out->kind = HOSTSPEC_IPV6;
		if (end + 1 == s + len)
			colon = NULL;
		else if (end[1] == ':')
			colon = end + 1;
		else
			return VERR_HOST;
	} else {
		colon = memchr(s, ':', len);
		if (colon != NULL && memchr(colon + 1, ':', len - (size_t)(colon - s) - 1) != NULL)
			return VERR_HOST; /* bare IPv6 or junk: brackets are required */
		host = s;
		hlen = colon != NULL ? (size_t)(colon - s) : len;
		if (hlen >= 2 && host[0] == '*' && host[1] == '.') {
			if (!(flags & HOSTSPEC_ALLOW_WILDCARD))
				return VERR_HOST_WILDCARD;
			out->wildcard = 1;
			host += 2;
			hlen -= 2;
		}
		if (memchr(host, '*', hlen) != NULL)
			return VERR_HOST_WILDCARD;
		/* One trailing dot names the same absolute host. */
		if (hlen > 1 && host[hlen - 1] == '.')
			hlen--;
		if (parse_ipv4(host, hlen)) {
			if (out->wildcard)
				return VERR_HOST_WILDCARD;
			memcpy(out->host, host, hlen);
			out->host[hlen] = '\0';
			out->kind = HOSTSPEC_IPV4;
		} else {
			if ((r = parse_name(host, hlen, out->host, &labels)) != 0)
				return r;
			if (numeric_last_label(out->host, hlen))
				return VERR_HOST;
			if (out->wildcard && labels < 2)
				return VERR_HOST_WILDCARD;
			out->kind = HOSTSPEC_NAME;
		}
	}
	if (colon != NULL)
		return parse_port(colon + 1, len - (size_t)(colon - s) - 1, &out->port);
	if (flags & HOSTSPEC_REQUIRE_PORT)
		return VERR_HOST_PORT;
	out->port = HOSTSPEC_DEFAULT_PORT;
	return VERR_OK;
}

int
hostspec_format_host(const struct hostspec *h, char *buf, size_t size)
{
	int n;

	if (h->kind == HOSTSPEC_IPV6)
		n = snprintf(buf, size, "[%s]", h->host);
	else
		n = snprintf(buf, size, "%s%s", h->wildcard ? "*." : "", h->host);
	return (n < 0 || (size_t)n >= size) ? VERR_TOO_LARGE : VERR_OK;
}

int
hostspec_format(const struct hostspec *h, char *buf, size_t size)
{
	int r;
	size_t n;

	if ((r = hostspec_format_host(h, buf, size)) != 0)
		return r;
	n = strlen(buf);
	if (snprintf(buf + n, size - n, ":%u", (unsigned)h->port) >= (int)(size - n))
		return VERR_TOO_LARGE;
	return VERR_OK;
}

int
hostspec_match(const struct hostspec *rule, const struct hostspec *target)
{
	size_t rl, tl;

	if (target->wildcard || rule->port != target->port || rule->kind != target->kind)
		return 0;
	if (!rule->wildcard)
		return strcmp(rule->host, target->host) == 0;
	rl = strlen(rule->host);
	tl = strlen(target->host);
	return tl > rl + 1 && target->host[tl - rl - 1] == '.' &&
	       strcmp(target->host + tl - rl, rule->host) == 0;
}
