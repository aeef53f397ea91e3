/*
 * libFuzzer target: HOST[:PORT] parsing. Whatever is accepted must format
 * to a canonical string that parses back to the identical binding, and a
 * concrete host must match a rule made from itself.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hostspec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct hostspec h, g;
	char buf[HOSTSPEC_NAME_MAX + 16];
	int flags = size > 0 && (data[0] & 1) ? HOSTSPEC_ALLOW_WILDCARD : 0;

	if (size == 0)
		return 0;
	data++;
	size--;
	if (hostspec_parse((const char *)data, size, flags, &h) != 0)
		return 0;
	if (hostspec_format(&h, buf, sizeof(buf)) != 0)
		abort();
	if (hostspec_parse(buf, strlen(buf), flags, &g) != 0 || memcmp(&g, &h, sizeof(h)) != 0)
		abort();
	if (!h.wildcard && !hostspec_match(&h, &g))
		abort();
	return 0;
}
