/*
 * libFuzzer target: parse a request head, then inject two keys into it
 * (one placeholder key, one set-header key) bound to the destination. The
 * output head must parse again as one request with the same framing, and
 * the placeholder must be gone from it.
 */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hostspec.h"
#include "http.h"
#include "inject.h"
#include "secbuf.h"
#include "verr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Fields inject never rewrites (routing and framing). */
static int
framing(const struct http_header *h)
{
	static const char *const names[] = {"host",       "content-length", "transfer-encoding",
	                                    "connection", "upgrade",        "te",
	                                    "trailer",    "expect",         NULL};

	for (size_t i = 0; names[i] != NULL; i++)
		if (h->name_len == strlen(names[i]) &&
		    strncasecmp(h->name, names[i], h->name_len) == 0)
			return 1;
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct http_request rq, again;
	static struct secbuf *s1, *s2;
	static struct hostspec host;
	static const char ph1[] = "vrunph_0123456789abcdef0123456789abcdef";
	static const char ph2[] = "vrunph_fedcba9876543210fedcba9876543210";
	struct inject_key keys[2];
	struct inject_request ir;
	struct inject_dest dest = {&host, 1};
	struct secbuf *out = NULL;
	uint8_t results[2];
	int n;

	if (s1 == NULL) {
		if (secbuf_dup("s3cr3t value&=%", 15, &s1) != 0 ||
		    secbuf_dup("tok-abc.def", 11, &s2) != 0 ||
		    hostspec_parse("api.test", 8, 0, &host) != 0)
			abort();
	}
	n = http_parse_request((const char *)data, size, NULL, &rq);
	/*
	 * What vproxy hands to inject: origin-form targets (it rewrites absolute
	 * form to origin form) of requests that carry a Host (the output is 1.1).
	 */
	if (n <= 0 || rq.host == NULL || rq.target_form != HTTP_TARGET_ORIGIN)
		return 0;
	/* Room under the parser's limits for the field the second key adds. */
	if (rq.num_headers + 2 > HTTP_DEFAULT_MAX_HEADERS ||
	    (size_t)n + 4096 > HTTP_DEFAULT_MAX_HEAD)
		return 0;
	memset(keys, 0, sizeof(keys));
	keys[0].name = "a";
	keys[0].secret = s1;
	keys[0].placeholder = ph1;
	keys[0].hosts = &host;
	keys[0].nhosts = 1;
	keys[0].mode = VAULT_INJECT_PLACEHOLDER;
	keys[0].arg = "";
	keys[1] = keys[0];
	keys[1].name = "b";
	keys[1].secret = s2;
	keys[1].placeholder = ph2;
	keys[1].mode = VAULT_INJECT_HEADER;
	keys[1].arg = "X-Api-Key";
	memset(&ir, 0, sizeof(ir));
	ir.method = rq.method;
	ir.method_len = rq.method_len;
	ir.target = rq.target;
	ir.target_len = rq.target_len;
	ir.headers = rq.headers;
	ir.nheaders = rq.num_headers;
	if (inject_apply(&ir, &dest, keys, 2, &out, results) != 0)
		return 0;
	/* Swapped in the target and in every field value (names and method are not values). */
	if (results[0] == INJECT_DONE &&
	    http_parse_request((const char *)out->data, out->len, NULL, &again) > 0) {
		if (memmem(again.target, again.target_len, ph1, sizeof(ph1) - 1) != NULL)
			abort();
		for (size_t i = 0; i < again.num_headers; i++)
			if (!framing(&again.headers[i]) &&
			    memmem(again.headers[i].value, again.headers[i].value_len, ph1,
			           sizeof(ph1) - 1) != NULL)
				abort();
	}
	if (http_parse_request((const char *)out->data, out->len, NULL, &again) != (int)out->len ||
	    again.body != rq.body || again.content_length != rq.content_length)
		abort();
	secbuf_free(out);
	return 0;
}
