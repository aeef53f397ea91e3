/*
 * http: strict, bounded, zero-copy HTTP/1.1 framing for proxied traffic.
 * (Being written: only the shared header type is fixed so far.)
 */
#ifndef VRUN_HTTP_H
#define VRUN_HTTP_H

#include <stddef.h>

/* One header field; both slices point into the caller's buffer. */
struct http_header {
	const char *name;
	size_t name_len;
	const char *value; /* without leading/trailing whitespace */
	size_t value_len;
};

#endif
