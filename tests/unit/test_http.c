/* Strict HTTP/1.1 framing: request and response heads, chunked bodies. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "http.h"

static struct http_request req;
static struct http_response resp;

static int
slice_is(const char *p, size_t n, const char *want)
{
	return p != NULL && strlen(want) == n && memcmp(p, want, n) == 0;
}

#define assert_slice(p, n, want)                                                                   \
	do {                                                                                       \
		if (!slice_is(p, n, want))                                                         \
			fail_msg("%s: got '%.*s', want '%s'", #p, (int)(n), (p) ? (p) : "", want); \
	} while (0)

/* s must parse as exactly one complete request head. */
static void
req_ok(const char *s)
{
	int r = http_parse_request(s, strlen(s), NULL, &req);

	if (r != (int)strlen(s))
		fail_msg("refused good request (%d %d %s): '%s'", r, req.err_status,
		         req.err_reason ? req.err_reason : "", s);
}

static void
req_bad_len(const char *s, size_t len, const struct http_limits *lim, int status)
{
	int r = http_parse_request(s, len, lim, &req);

	if (r != HTTP_ERROR || req.err_status != status)
		fail_msg("'%.*s': got %d/%d, want error %d", (int)(len > 200 ? 200 : len), s, r,
		         req.err_status, status);
	assert_non_null(req.err_reason);
}

#define REQ_BAD(s, status)   req_bad_len(s, strlen(s), NULL, status)
#define REQ_BAD_N(s, status) req_bad_len(s, sizeof(s) - 1, NULL, status)

static void
resp_ok(const char *s, int head, int connect)
{
	int r = http_parse_response(s, strlen(s), NULL, head, connect, &resp);

	if (r != (int)strlen(s))
		fail_msg("refused good response (%d %s): '%s'", r,
		         resp.err_reason ? resp.err_reason : "", s);
}

static void
resp_bad_len(const char *s, size_t len, int head, int connect)
{
	int r = http_parse_response(s, len, NULL, head, connect, &resp);

	if (r != HTTP_ERROR || resp.err_status != 502)
		fail_msg("'%.*s': got %d, want error 502", (int)len, s, r);
	assert_non_null(resp.err_reason);
}

#define RESP_BAD(s)                    resp_bad_len(s, strlen(s), 0, 0)
#define RESP_BAD_N(s)                  resp_bad_len(s, sizeof(s) - 1, 0, 0)
#define RESP_BAD_FOR(s, head, connect) resp_bad_len(s, strlen(s), head, connect)

/* A request with extra header lines after Host. */
static char *
with_headers(const char *version, const char *fields)
{
	static char buf[4096];

	snprintf(buf, sizeof(buf), "POST /x HTTP/%s\r\nHost: example.com\r\n%s\r\n", version,
	         fields);
	return buf;
}

static void
test_target_forms(void **state)
{
	(void)state;
	req_ok("GET /path?q=1&r=%20 HTTP/1.1\r\nHost: example.com\r\n\r\n");
	assert_slice(req.method, req.method_len, "GET");
	assert_slice(req.target, req.target_len, "/path?q=1&r=%20");
	assert_int_equal(req.target_form, HTTP_TARGET_ORIGIN);
	assert_slice(req.path, req.path_len, "/path?q=1&r=%20");
	assert_null(req.authority);
	assert_null(req.scheme);
	assert_int_equal(req.minor_version, 1);
	assert_int_equal(req.body, HTTP_BODY_NONE);
	assert_int_equal(req.num_headers, 1);
	assert_slice(req.headers[0].name, req.headers[0].name_len, "Host");
	assert_slice(req.headers[0].value, req.headers[0].value_len, "example.com");
	assert_int_equal(req.host_index, 0);
	assert_slice(req.host, req.host_len, "example.com");

	req_ok("GET http://Example.com:8080/a/b?c HTTP/1.1\r\nHost: example.com:8080\r\n\r\n");
	assert_int_equal(req.target_form, HTTP_TARGET_ABSOLUTE);
	assert_slice(req.scheme, req.scheme_len, "http");
	assert_slice(req.authority, req.authority_len, "Example.com:8080");
	assert_slice(req.path, req.path_len, "/a/b?c");

	req_ok("GET HTTPS://[::1]:8443 HTTP/1.1\r\nHost: [::1]:8443\r\n\r\n");
	assert_int_equal(req.target_form, HTTP_TARGET_ABSOLUTE);
	assert_slice(req.scheme, req.scheme_len, "HTTPS");
	assert_slice(req.authority, req.authority_len, "[::1]:8443");
	assert_int_equal(req.path_len, 0);

	req_ok("GET http://a.example?x=1 HTTP/1.1\r\nHost: a.example\r\n\r\n");
	assert_slice(req.authority, req.authority_len, "a.example");
	assert_slice(req.path, req.path_len, "?x=1");

	req_ok("CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\n\r\n");
	assert_int_equal(req.target_form, HTTP_TARGET_AUTHORITY);
	assert_slice(req.authority, req.authority_len, "api.example.com:443");
	assert_null(req.path);
	assert_int_equal(req.body, HTTP_BODY_NONE);

	req_ok("CONNECT [2001:db8::1]:8443 HTTP/1.1\r\nHost: [2001:db8::1]:8443\r\n"
	       "Content-Length: 0\r\n\r\n");
	assert_int_equal(req.target_form, HTTP_TARGET_AUTHORITY);
	assert_slice(req.authority, req.authority_len, "[2001:db8::1]:8443");

	req_ok("OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n");
	assert_int_equal(req.target_form, HTTP_TARGET_ASTERISK);
	req_ok("OPTIONS /x HTTP/1.1\r\nHost: a\r\n\r\n");
	assert_int_equal(req.target_form, HTTP_TARGET_ORIGIN);

	/* HTTP/1.0 needs no Host. */
	req_ok("GET / HTTP/1.0\r\n\r\n");
	assert_int_equal(req.minor_version, 0);
	assert_int_equal(req.host_index, -1);
	assert_null(req.host);
	assert_int_equal(req.num_headers, 0);

	/* Methods are tokens, not a fixed list; case is kept. */
	req_ok("M-SEARCH!~ /x HTTP/1.1\r\nHost: a\r\n\r\n");
	assert_slice(req.method, req.method_len, "M-SEARCH!~");
	/* Visible characters pass undecoded. */
	req_ok("GET /a|b{c}\"d\\e%zz HTTP/1.1\r\nHost: a\r\n\r\n");
	assert_slice(req.path, req.path_len, "/a|b{c}\"d\\e%zz");
}

static void
test_target_rejections(void **state)
{
	(void)state;
	REQ_BAD("CONNECT / HTTP/1.1\r\nHost: a\r\n\r\n", 400);
	REQ_BAD("CONNECT http://a:443/ HTTP/1.1\r\nHost: a\r\n\r\n", 400);
	REQ_BAD("CONNECT a.example HTTP/1.1\r\nHost: a.example\r\n\r\n", 400);
	REQ_BAD("CONNECT a.example: HTTP/1.1\r\nHost: a.example\r\n\r\n", 400);
	REQ_BAD("CONNECT a.example:123456 HTTP/1.1\r\nHost: a.example\r\n\r\n", 400);
	REQ_BAD("CONNECT user@a.example:443 HTTP/1.1\r\nHost: a.example\r\n\r\n", 400);
	REQ_BAD("CONNECT * HTTP/1.1\r\nHost: a\r\n\r\n", 400);
	REQ_BAD("connect a.example:443 HTTP/1.1\r\nHost: a.example:443\r\n\r\n", 400);
	REQ_BAD("GET a.example:443 HTTP/1.1\r\nHost: a.example\r\n\r\n", 400);
	REQ_BAD("POST [::1]:443 HTTP/1.1\r\nHost: a.example\r\n\r\n", 400);
	REQ_BAD("GET * HTTP/1.1\r\nHost: a\r\n\r\n", 400);
	REQ_BAD("GET ** HTTP/1.1\r\nHost: a\r\n\r\n", 400);
	REQ_BAD("GET a/b HTTP/1.1\r\nHost: a\r\n\r\n", 400);
	REQ_BAD("GET ftp://a/b HTTP/1.1\r\nHost: a\r\n\r\n", 400);
	REQ_BAD("GET http://user:pw@a/b HTTP/1.1\r\nHost: a\r\n\r\n", 400);
	REQ_BAD("GET http:///b HTTP/1.1\r\nHost: a\r\n\r\n", 400);
	REQ_BAD("GET http://a%2eb/ HTTP/1.1\r\nHost: a\r\n\r\n", 400);
	REQ_BAD("GET http://a\\b/ HTTP/1.1\r\nHost: a\r\n\r\n", 400);
	REQ_BAD("GET http:/a/ HTTP/1.1\r\nHost: a\r\n\r\n", 400);
	REQ_BAD("GET /a#frag HTTP/1.1\r\nHost: a\r\n\r\n", 400);
	/* Bytes a lenient server might cut or reinterpret. */
	REQ_BAD_N("GET /a\0b HTTP/1.1\r\nHost: a\r\n\r\n", 400);
	REQ_BAD_N("GET /a\rb HTTP/1.1\r\nHost: a\r\n\r\n", 400);
	REQ_BAD_N("GET /a\nb HTTP/1.1\r\nHost: a\r\n\r\n", 400);
	REQ_BAD_N("GET /a\tb HTTP/1.1\r\nHost: a\r\n\r\n", 400);
	REQ_BAD_N("GET /a\x7f HTTP/1.1\r\nHost: a\r\n\r\n", 400);
	REQ_BAD_N("GET /\xc3\xa9 HTTP/1.1\r\nHost: a\r\n\r\n", 400);
}

static void
test_request_line_rejections(void **state)
{
	(void)state;
	REQ_BAD("GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505);
	REQ_BAD("GET / HTTP/1.2\r\nHost: a\r\n\r\n", 505);
	REQ_BAD("GET / HTTP/0.9\r\nHost: a\r\n\r\n", 505);
	REQ_BAD("GET / HTTP/1.10\r\nHost: a\r\n\r\n", 400);
	REQ_BAD("GET / http/1.1\r\nHost: a\r\n\r\n", 400);
	REQ_BAD("GET / HTTP/1.1 \r\nHost: a\r\n\r\n", 400);
	REQ_BAD("GET / HTTP/1\r\nHost: a\r\n\r\n", 400);
	REQ_BAD("GET / HTTP/2\r\nHost: a\r\n\r\n", 400);
	REQ_BAD("GET / HTTP/1.1x\r\nHost: a\r\n\r\n", 400);
	REQ_BAD("GET / HTTP /1.1\r\nHost: a\r\n\r\n", 400);
	REQ_BAD("GET /\r\nHost: a\r\n\r\n", 400);
	REQ_BAD("GET  / HTTP/1.1\r\nHost: a\r\n\r\n", 400);
	REQ_BAD("GET /  HTTP/1.1\r\nHost: a\r\n\r\n", 400);
	REQ_BAD("GET\t/ HTTP/1.1\r\nHost: a\r\n\r\n", 400);
	REQ_BAD(" GET / HTTP/1.1\r\nHost: a\r\n\r\n", 400);
	REQ_BAD("\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", 400);
	REQ_BAD("G@T / HTTP/1.1\r\nHost: a\r\n\r\n", 400);
	REQ_BAD("GE(T / HTTP/1.1\r\nHost: a\r\n\r\n", 400);
	REQ_BAD("G\xc3\x89T / HTTP/1.1\r\nHost: a\r\n\r\n", 400);
	REQ_BAD_N("G\0T / HTTP/1.1\r\nHost: a\r\n\r\n", 400);
	/* Strict line endings: bare LF and bare CR both refused. */
	REQ_BAD("GET / HTTP/1.1\nHost: a\n\n", 400);
	REQ_BAD("GET / HTTP/1.1\r\nHost: a\n\r\n", 400);
	REQ_BAD("GET / HTTP/1.1\r\nHost: a\r\n\n", 400);
	REQ_BAD("GET / HTTP/1.1\rHost: a\r\n\r\n", 400);
	REQ_BAD("GET / HTTP/1.1\r\nHost: a\r\r\n\r\n", 400);
	REQ_BAD("GET / HTTP/1.1\r\nHost: a\r\n\r\r", 400);
	/* The error is seen before the head is complete. */
	REQ_BAD("GET / HTTP/1.1\n", 400);
	REQ_BAD("GET / HTTP/3\r", 400);
	REQ_BAD("GET /\x01", 400);
	REQ_BAD("PO\x01", 400);
}

static void
test_field_rejections(void **state)
{
	(void)state;
	/* obs-fold and whitespace before the first field. */
	REQ_BAD(with_headers("1.1", "X-A: a\r\n b\r\n"), 400);
	REQ_BAD(with_headers("1.1", "X-A: a\r\n\tb\r\n"), 400);
	REQ_BAD("GET / HTTP/1.1\r\n Host: a\r\n\r\n", 400);
	REQ_BAD("GET / HTTP/1.1\r\n\tHost: a\r\n\r\n", 400);
	/* Whitespace before the colon; empty or bad names. */
	REQ_BAD(with_headers("1.1", "X-A : a\r\n"), 400);
	REQ_BAD(with_headers("1.1", "X-A\t: a\r\n"), 400);
	REQ_BAD(with_headers("1.1", ": a\r\n"), 400);
	REQ_BAD(with_headers("1.1", "X A: a\r\n"), 400);
	REQ_BAD(with_headers("1.1", "X(A): a\r\n"), 400);
	REQ_BAD(with_headers("1.1", "X-\xc3\xa9: a\r\n"), 400);
	REQ_BAD(with_headers("1.1", "no colon\r\n"), 400);
	REQ_BAD(with_headers("1.1", "nocolon\r\n"), 400);
	/* NUL, bare CR, bare LF, other controls in names and values. */
	REQ_BAD_N("GET / HTTP/1.1\r\nHo\0st: a\r\n\r\n", 400);
	REQ_BAD_N("GET / HTTP/1.1\r\nHost: a\0b\r\n\r\n", 400);
	REQ_BAD_N("GET / HTTP/1.1\r\nHost: a\r\nX: a\0\r\n\r\n", 400);
	REQ_BAD_N("GET / HTTP/1.1\r\nHost: a\r\nX: a\rb\r\n\r\n", 400);
	REQ_BAD_N("GET / HTTP/1.1\r\nHost: a\r\nX: a\nb: c\r\n\r\n", 400);
	REQ_BAD_N("GET / HTTP/1.1\r\nHost: a\r\nX\r: a\r\n\r\n", 400);
	REQ_BAD_N("GET / HTTP/1.1\r\nHost: a\r\nX\n: a\r\n\r\n", 400);
	REQ_BAD_N("GET / HTTP/1.1\r\nHost: a\r\nX: \x01\r\n\r\n", 400);
	REQ_BAD_N("GET / HTTP/1.1\r\nHost: a\r\nX: \x7f\r\n\r\n", 400);
	REQ_BAD_N("GET / HTTP/1.1\r\nHost: a\r\nX: a\x0b\r\n\r\n", 400);

	/* Values: OWS trimmed both sides, inner whitespace and obs-text kept. */
	req_ok("GET / HTTP/1.1\r\nHost: a\r\nX-A:  \t v \t w\t \r\nX-B:\r\nX-C: \xc3\xa9\r\n\r\n");
	assert_int_equal(req.num_headers, 4);
	assert_slice(req.headers[1].value, req.headers[1].value_len, "v \t w");
	assert_int_equal(req.headers[2].value_len, 0);
	assert_slice(req.headers[3].value, req.headers[3].value_len, "\xc3\xa9");
}

static void
test_host(void **state)
{
	(void)state;
	REQ_BAD("GET / HTTP/1.1\r\n\r\n", 400);
	REQ_BAD("GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", 400);
	REQ_BAD("GET / HTTP/1.1\r\nHost: a\r\nhOST: b\r\n\r\n", 400);
	REQ_BAD("GET / HTTP/1.0\r\nHost: a\r\nHost: a\r\n\r\n", 400);
	REQ_BAD("GET / HTTP/1.1\r\nHost: user@a.example\r\n\r\n", 400);
	REQ_BAD("GET / HTTP/1.1\r\nHost: a.example@b.example\r\n\r\n", 400);
	REQ_BAD("GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 400);
	REQ_BAD("GET / HTTP/1.1\r\nHost: a\tb\r\n\r\n", 400);
	REQ_BAD("GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", 400);
	REQ_BAD("GET / HTTP/1.1\r\nHost: a.example/\r\n\r\n", 400);
	REQ_BAD("GET / HTTP/1.1\r\nHost: \r\n\r\n", 400);
	REQ_BAD("GET / HTTP/1.1\r\nHost:\r\n\r\n", 400);
	REQ_BAD("GET / HTTP/1.1\r\nHost: a:\r\n\r\n", 400);
	REQ_BAD("GET / HTTP/1.1\r\nHost: a:b\r\n\r\n", 400);
	REQ_BAD("GET / HTTP/1.1\r\nHost: a:443:1\r\n\r\n", 400);
	REQ_BAD("GET / HTTP/1.1\r\nHost: [::1\r\n\r\n", 400);
	REQ_BAD("GET / HTTP/1.1\r\nHost: a,b\r\n\r\n", 400);
	REQ_BAD("GET / HTTP/1.1\r\nHost: a%2eb\r\n\r\n", 400);
	REQ_BAD("GET / HTTP/1.1\r\nHost: \xc3\xa9.example\r\n\r\n", 400);

	req_ok("GET / HTTP/1.1\r\nX: y\r\nhost:  Api.Example.com:8443 \r\n\r\n");
	assert_int_equal(req.host_index, 1);
	assert_slice(req.host, req.host_len, "Api.Example.com:8443");
	req_ok("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
	req_ok("GET / HTTP/1.1\r\nHost: [::1]\r\n\r\n");
}

static void
test_content_length(void **state)
{
	static const char *bad[] = {
	        "-1",
	        "+1",
	        "0x10",
	        "1 2",
	        "1,1",
	        "5, 5",
	        "5,",
	        "",
	        "00",
	        "01",
	        "1.0",
	        "1e3",
	        "\"1\"",
	        "9223372036854775808",
	        "18446744073709551616",
	        "99999999999999999999999",
	        "\xd9\xa1",
	};

	(void)state;
	req_ok(with_headers("1.1", "Content-Length: 0\r\n"));
	assert_int_equal(req.body, HTTP_BODY_LENGTH);
	assert_int_equal(req.content_length, 0);
	req_ok(with_headers("1.1", "content-length:\t42 \r\n"));
	assert_int_equal(req.body, HTTP_BODY_LENGTH);
	assert_int_equal(req.content_length, 42);
	req_ok(with_headers("1.0", "Content-Length: 9223372036854775807\r\n"));
	assert_true(req.content_length == INT64_MAX);

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char f[128];

		snprintf(f, sizeof(f), "Content-Length: %s\r\n", bad[i]);
		REQ_BAD(with_headers("1.1", f), 400);
	}
	/* Two fields, even when they agree. */
	REQ_BAD(with_headers("1.1", "Content-Length: 5\r\nContent-Length: 5\r\n"), 400);
	REQ_BAD(with_headers("1.1", "Content-Length: 5\r\nContent-Length: 6\r\n"), 400);
	REQ_BAD(with_headers("1.1", "Content-Length: 5\r\nX: y\r\ncontent-LENGTH: 5\r\n"), 400);
}

static void
test_transfer_encoding(void **state)
{
	(void)state;
	req_ok(with_headers("1.1", "Transfer-Encoding: chunked\r\n"));
	assert_int_equal(req.body, HTTP_BODY_CHUNKED);
	req_ok(with_headers("1.1", "transfer-encoding:  CHUNKED\t\r\n"));
	assert_int_equal(req.body, HTTP_BODY_CHUNKED);

	REQ_BAD(with_headers("1.1", "Transfer-Encoding: gzip\r\n"), 400);
	REQ_BAD(with_headers("1.1", "Transfer-Encoding: identity\r\n"), 400);
	REQ_BAD(with_headers("1.1", "Transfer-Encoding: gzip, chunked\r\n"), 400);
	REQ_BAD(with_headers("1.1", "Transfer-Encoding: chunked, chunked\r\n"), 400);
	REQ_BAD(with_headers("1.1", "Transfer-Encoding: chunked;q=1\r\n"), 400);
	REQ_BAD(with_headers("1.1", "Transfer-Encoding: chunked,\r\n"), 400);
	REQ_BAD(with_headers("1.1", "Transfer-Encoding: \"chunked\"\r\n"), 400);
	REQ_BAD(with_headers("1.1", "Transfer-Encoding: chunked/1\r\n"), 400);
	REQ_BAD(with_headers("1.1", "Transfer-Encoding:\r\n"), 400);
	REQ_BAD(with_headers("1.1", "Transfer-Encoding: ,\r\n"), 400);
	REQ_BAD(with_headers("1.1", "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n"),
	        400);
	REQ_BAD(with_headers("1.1", "Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n"),
	        400);
	REQ_BAD(with_headers("1.0", "Transfer-Encoding: chunked\r\n"), 400);
	REQ_BAD(with_headers("1.1", "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n"), 400);
	REQ_BAD(with_headers("1.1", "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n"), 400);
	REQ_BAD(with_headers("1.1", "Transfer-Encoding: gzip\r\nContent-Length: 5\r\n"), 400);
	/* CONNECT carries no body: what follows is the tunnel. */
	REQ_BAD("CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\nContent-Length: 5\r\n\r\n", 400);
	REQ_BAD("CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\nTransfer-Encoding: chunked\r\n\r\n", 400);
}

static void
test_smuggling(void **state)
{
	(void)state;
	/* CL.TE and TE.CL. */
	REQ_BAD("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 13\r\nTransfer-Encoding: "
	        "chunked\r\n\r\n0\r\n\r\nSMUGGLED",
	        400);
	REQ_BAD("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: "
	        "3\r\n\r\n8\r\nSMUGGLED\r\n0\r\n\r\n",
	        400);
	/* TE.TE obfuscations. */
	REQ_BAD(with_headers("1.1", "Transfer-Encoding : chunked\r\n"), 400);
	REQ_BAD(with_headers("1.1", "Transfer-Encoding: xchunked\r\n"), 400);
	REQ_BAD(with_headers("1.1", "Transfer-Encoding: chunked\r\nTransfer-Encoding: x\r\n"), 400);
	REQ_BAD(with_headers("1.1", "Transfer-Encoding: x\r\nTransfer-Encoding: chunked\r\n"), 400);
	REQ_BAD(with_headers("1.1", "Transfer-Encoding:\x0b"
	                            "chunked\r\n"),
	        400);
	REQ_BAD(with_headers("1.1", "Transfer-Encoding: chunked\x0c\r\n"), 400);
	REQ_BAD(with_headers("1.1", "X: x\nTransfer-Encoding: chunked\r\n"), 400);
	REQ_BAD(with_headers("1.1", "X: x\r\n Transfer-Encoding: chunked\r\n"), 400);
	REQ_BAD(with_headers("1.1", "Transfer-Encoding\n: chunked\r\n"), 400);
	REQ_BAD(with_headers("1.1", "Transfer-Encoding: \"chunked\"\r\n"), 400);
	REQ_BAD(with_headers("1.1", "Transfer-Encoding: chunk\r\n"), 400);
	REQ_BAD(with_headers("1.1", "Transfer-Encoding: identity, chunked\r\n"), 400);
	REQ_BAD(with_headers("1.1", "Content-Length: 4\r\nContent-Length : 5\r\n"), 400);
	REQ_BAD(with_headers("1.1", "Content-Length: 4\r\nContent-Length: 4, 5\r\n"), 400);
	/* Hiding the framing from a proxy that drops Connection-listed fields. */
	REQ_BAD(with_headers("1.1", "Content-Length: 4\r\nConnection: content-length\r\n"), 400);
	REQ_BAD(with_headers("1.1", "Connection: close, Transfer-Encoding\r\n"), 400);
	REQ_BAD(with_headers("1.1", "Connection: Host\r\n"), 400);
	/* HTAB is optional whitespace: unambiguously chunked. */
	req_ok(with_headers("1.1", "Transfer-Encoding:\tchunked\r\n"));
	assert_int_equal(req.body, HTTP_BODY_CHUNKED);
	/* Not a framing field at all, so no body: unambiguous too. */
	req_ok(with_headers("1.1", "Transfer_Encoding: chunked\r\n"));
	assert_int_equal(req.body, HTTP_BODY_NONE);
	req_ok(with_headers("1.1", "Content-Length-X: 5\r\n"));
	assert_int_equal(req.body, HTTP_BODY_NONE);
}

static void
test_keep_alive(void **state)
{
	(void)state;
	req_ok("GET / HTTP/1.1\r\nHost: a\r\n\r\n");
	assert_int_equal(req.keep_alive, 1);
	req_ok("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
	assert_int_equal(req.keep_alive, 0);
	req_ok("GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive\r\nConnection: CLOSE\r\n\r\n");
	assert_int_equal(req.keep_alive, 0);
	req_ok("GET / HTTP/1.1\r\nHost: a\r\nConnection: , foo ,, bar\t,\r\n\r\n");
	assert_int_equal(req.keep_alive, 1);
	req_ok("GET / HTTP/1.0\r\n\r\n");
	assert_int_equal(req.keep_alive, 0);
	req_ok("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n");
	assert_int_equal(req.keep_alive, 1);
	req_ok("GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n");
	assert_int_equal(req.keep_alive, 0);
	REQ_BAD("GET / HTTP/1.1\r\nHost: a\r\nConnection: a b\r\n\r\n", 400);
	REQ_BAD("GET / HTTP/1.1\r\nHost: a\r\nConnection: a;b\r\n\r\n", 400);
	REQ_BAD("GET / HTTP/1.1\r\nHost: a\r\nConnection: \"close\"\r\n\r\n", 400);
}

static void
test_expect_upgrade_connection(void **state)
{
	struct http_header *h;

	(void)state;
	req_ok(with_headers("1.1", "Content-Length: 3\r\nExpect: 100-Continue\r\n"));
	assert_int_equal(req.expect_continue, 1);
	req_ok(with_headers("1.1", "Expect: something-else\r\n"));
	assert_int_equal(req.expect_continue, 0);
	req_ok(with_headers("1.1", ""));
	assert_int_equal(req.expect_continue, 0);
	assert_int_equal(req.upgrade, 0);

	req_ok("GET /ws HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\n"
	       "Connection: keep-alive, Upgrade\r\nConnection: X-Foo\r\nX-Foo: 1\r\n\r\n");
	assert_int_equal(req.upgrade, 1);
	assert_int_equal(req.keep_alive, 1);
	h = req.headers;
	assert_int_equal(http_connection_lists(h, req.num_headers, "upgrade", 7), 1);
	assert_int_equal(http_connection_lists(h, req.num_headers, "UPGRADE", 7), 1);
	assert_int_equal(http_connection_lists(h, req.num_headers, "x-foo", 5), 1);
	assert_int_equal(http_connection_lists(h, req.num_headers, "x-fo", 4), 0);
	assert_int_equal(http_connection_lists(h, req.num_headers, "x-foo2", 6), 0);
	assert_int_equal(http_connection_lists(h, req.num_headers, "keep-alive", 10), 1);
	assert_int_equal(http_connection_lists(h, req.num_headers, "host", 4), 0);
	/* Caller's names are slices: no NUL needed. */
	assert_int_equal(http_connection_lists(h, req.num_headers, h[1].name, h[1].name_len), 1);
	assert_int_equal(http_connection_lists(h, req.num_headers, h[4].name, h[4].name_len), 1);
	assert_int_equal(http_connection_lists(h, 0, "upgrade", 7), 0);

	assert_int_equal(http_header_find(h, req.num_headers, "connection", 0), 2);
	assert_int_equal(http_header_find(h, req.num_headers, "CONNECTION", 3), 3);
	assert_int_equal(http_header_find(h, req.num_headers, "connection", 4), -1);
	assert_int_equal(http_header_find(h, req.num_headers, "connectio", 0), -1);
	assert_int_equal(http_header_find(h, req.num_headers, "host", 0), 0);
}

static void
test_pipelined(void **state)
{
	static const char two[] = "POST /a HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello"
	                          "GET /b HTTP/1.1\r\nHost: b\r\n\r\n"
	                          "GET /c HTTP/1.1\r\nHost: c\r\n\r\nGET /d";
	size_t len = sizeof(two) - 1, off = 0;
	int r;

	(void)state;
	r = http_parse_request(two, len, NULL, &req);
	assert_int_equal(r, strlen("POST /a HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n"));
	assert_int_equal(req.body, HTTP_BODY_LENGTH);
	assert_int_equal(req.content_length, 5);
	off = (size_t)r + req.content_length;
	r = http_parse_request(two + off, len - off, NULL, &req);
	assert_int_equal(r, strlen("GET /b HTTP/1.1\r\nHost: b\r\n\r\n"));
	assert_slice(req.path, req.path_len, "/b");
	assert_slice(req.host, req.host_len, "b");
	off += (size_t)r;
	r = http_parse_request(two + off, len - off, NULL, &req);
	assert_int_equal(r, strlen("GET /c HTTP/1.1\r\nHost: c\r\n\r\n"));
	assert_slice(req.path, req.path_len, "/c");
	off += (size_t)r;
	assert_int_equal(http_parse_request(two + off, len - off, NULL, &req), HTTP_INCOMPLETE);
}

/* Every prefix is incomplete; the whole gives the same head length and fields. */
static void
incremental_request(const char *s, size_t head)
{
	size_t len = strlen(s);
	struct http_request *full = malloc(sizeof(*full));

	assert_non_null(full);
	assert_int_equal(http_parse_request(s, len, NULL, full), (int)head);
	for (size_t k = 0; k < head; k++) {
		int r = http_parse_request(s, k, NULL, &req);

		if (r != HTTP_INCOMPLETE)
			fail_msg("prefix %zu of '%s': %d (%s)", k, s, r,
			         req.err_reason ? req.err_reason : "");
	}
	for (size_t k = head; k <= len; k++) {
		assert_int_equal(http_parse_request(s, k, NULL, &req), (int)head);
		assert_memory_equal(&req, full, sizeof(req));
	}
	free(full);
}

static void
incremental_response(const char *s, size_t head, int was_head, int connect)
{
	size_t len = strlen(s);
	struct http_response *full = malloc(sizeof(*full));

	assert_non_null(full);
	assert_int_equal(http_parse_response(s, len, NULL, was_head, connect, full), (int)head);
	for (size_t k = 0; k < head; k++)
		assert_int_equal(http_parse_response(s, k, NULL, was_head, connect, &resp),
		                 HTTP_INCOMPLETE);
	for (size_t k = head; k <= len; k++) {
		assert_int_equal(http_parse_response(s, k, NULL, was_head, connect, &resp),
		                 (int)head);
		assert_memory_equal(&resp, full, sizeof(resp));
	}
	free(full);
}

static void
test_incremental(void **state)
{
	static const char *heads[] = {
	        "GET / HTTP/1.1\r\nHost: a\r\n\r\n",
	        "GET / HTTP/1.0\r\n\r\n",
	        "POST http://a.example:80/x?y HTTP/1.1\r\nHost: a.example:80\r\nX-Empty:\r\n"
	        "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
	        "CONNECT a.example:443 HTTP/1.1\r\nHost: a.example:443\r\n\r\n",
	        "OPTIONS * HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: "
	        "12\r\n\r\n",
	};
	char buf[512];

	(void)state;
	for (size_t i = 0; i < sizeof(heads) / sizeof(heads[0]); i++) {
		incremental_request(heads[i], strlen(heads[i]));
		snprintf(buf, sizeof(buf), "%s0\r\n\r\nGET / HTTP/1.1\r\n", heads[i]);
		incremental_request(buf, strlen(heads[i]));
	}
	incremental_response("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
	                     strlen("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"), 0, 0);
	incremental_response("HTTP/1.1 204\r\n\r\n", 16, 0, 0);
	incremental_response("HTTP/1.0 200 \r\n\r\nbody", 17, 0, 0);
	incremental_response("HTTP/1.1 200 Connection established\r\n\r\n\x16\x03\x01", 39, 0, 1);
}

static void
test_limits(void **state)
{
	static const char small[] = "GET /abc HTTP/1.1\r\nHost: a\r\nX-A: 1\r\nX-B: 2\r\n\r\n";
	struct http_limits lim = {0};
	size_t big = 1024 * 1024;
	char *buf = malloc(big + 64);
	size_t n;

	(void)state;
	assert_non_null(buf);
	/* max_head: a head of exactly the limit passes, one byte more does not. */
	lim.max_head = sizeof(small) - 1;
	assert_int_equal(http_parse_request(small, sizeof(small) - 1, &lim, &req),
	                 (int)sizeof(small) - 1);
	lim.max_head = sizeof(small) - 2;
	req_bad_len(small, sizeof(small) - 1, &lim, 431);
	/* ... and a prefix within the limit is merely incomplete. */
	assert_int_equal(http_parse_request(small, sizeof(small) - 2, &lim, &req), HTTP_INCOMPLETE);

	/* max_headers. */
	lim = (struct http_limits){.max_headers = 3};
	assert_int_equal(http_parse_request(small, sizeof(small) - 1, &lim, &req),
	                 (int)sizeof(small) - 1);
	lim.max_headers = 2;
	req_bad_len(small, sizeof(small) - 1, &lim, 431);
	n = (size_t)snprintf(buf, big, "GET / HTTP/1.1\r\nHost: a\r\n");
	for (int i = 1; i < HTTP_DEFAULT_MAX_HEADERS; i++)
		n += (size_t)snprintf(buf + n, big - n, "X-%d: %d\r\n", i, i);
	memcpy(buf + n, "\r\n", 3);
	assert_int_equal(http_parse_request(buf, n + 2, NULL, &req), (int)n + 2);
	assert_int_equal(req.num_headers, HTTP_DEFAULT_MAX_HEADERS);
	memcpy(buf + n, "X: y\r\n\r\n", 9);
	req_bad_len(buf, n + 8, NULL, 431);
	/* Detected as soon as the extra field starts. */
	req_bad_len(buf, n + 1, NULL, 431);
	/* The cap on the array wins over a larger limit. */
	lim = (struct http_limits){.max_headers = 100000};
	n = (size_t)snprintf(buf, big, "GET / HTTP/1.1\r\nHost: a\r\n");
	for (int i = 1; i < HTTP_HEADERS_MAX + 1; i++)
		n += (size_t)snprintf(buf + n, big - n, "X-%d: %d\r\n", i, i);
	memcpy(buf + n, "\r\n", 3);
	req_bad_len(buf, n + 2, &lim, 431);

	/* max_target: 414, early too. */
	lim = (struct http_limits){.max_target = 4};
	assert_int_equal(http_parse_request(small, sizeof(small) - 1, &lim, &req),
	                 (int)sizeof(small) - 1);
	lim.max_target = 3;
	req_bad_len(small, sizeof(small) - 1, &lim, 414);
	req_bad_len(small, 9, &lim, 414);
	memcpy(buf, "GET /", 5);
	memset(buf + 5, 'a', HTTP_DEFAULT_MAX_TARGET);
	req_bad_len(buf, 5 + HTTP_DEFAULT_MAX_TARGET, NULL, 414);
	assert_int_equal(http_parse_request(buf, 4 + HTTP_DEFAULT_MAX_TARGET, NULL, &req),
	                 HTTP_INCOMPLETE);

	/* A 1 MB header line with no end in sight: refused, not buffered. */
	n = (size_t)snprintf(buf, big, "GET / HTTP/1.1\r\nHost: a\r\nX-Big: ");
	memset(buf + n, 'a', big - n);
	req_bad_len(buf, big, NULL, 431);
	req_bad_len(buf, HTTP_DEFAULT_MAX_HEAD + 1, NULL, 431);
	assert_int_equal(http_parse_request(buf, HTTP_DEFAULT_MAX_HEAD, NULL, &req),
	                 HTTP_INCOMPLETE);
	/* Same for a response. */
	n = (size_t)snprintf(buf, big, "HTTP/1.1 200 OK\r\nX-Big: ");
	memset(buf + n, 'a', big - n);
	resp_bad_len(buf, big, 0, 0);
	assert_int_equal(http_parse_response(buf, HTTP_DEFAULT_MAX_HEAD, NULL, 0, 0, &resp),
	                 HTTP_INCOMPLETE);
	free(buf);
}

static void
test_response(void **state)
{
	(void)state;
	resp_ok("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", 0, 0);
	assert_int_equal(resp.status, 200);
	assert_int_equal(resp.minor_version, 1);
	assert_slice(resp.reason, resp.reason_len, "OK");
	assert_int_equal(resp.body, HTTP_BODY_LENGTH);
	assert_int_equal(resp.content_length, 5);
	assert_int_equal(resp.keep_alive, 1);
	assert_int_equal(resp.num_headers, 1);

	resp_ok("HTTP/1.1 404 Not  Found, really\t\r\nTransfer-Encoding: Chunked\r\n\r\n", 0, 0);
	assert_int_equal(resp.status, 404);
	assert_slice(resp.reason, resp.reason_len, "Not  Found, really\t");
	assert_int_equal(resp.body, HTTP_BODY_CHUNKED);
	assert_int_equal(resp.keep_alive, 1);

	/* Reason may be empty, with or without its SP. */
	resp_ok("HTTP/1.1 200 \r\n\r\n", 0, 0);
	assert_int_equal(resp.reason_len, 0);
	assert_int_equal(resp.body, HTTP_BODY_CLOSE);
	assert_int_equal(resp.keep_alive, 0);
	resp_ok("HTTP/1.1 200\r\nConnection: keep-alive\r\n\r\n", 0, 0);
	assert_int_equal(resp.reason_len, 0);
	assert_int_equal(resp.body, HTTP_BODY_CLOSE);
	assert_int_equal(resp.keep_alive, 0);

	resp_ok("HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n", 0, 0);
	assert_int_equal(resp.minor_version, 0);
	assert_int_equal(resp.keep_alive, 0);
	resp_ok("HTTP/1.0 200 OK\r\nContent-Length: 1\r\nConnection: keep-alive\r\n\r\n", 0, 0);
	assert_int_equal(resp.keep_alive, 1);
	resp_ok("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nConnection: close\r\n\r\n", 0, 0);
	assert_int_equal(resp.keep_alive, 0);
	resp_ok("HTTP/1.1 599 x\r\nContent-Length: 0\r\n\r\n", 0, 0);
	assert_int_equal(resp.status, 599);
	resp_ok("HTTP/1.1 200 \xc3\xa9\r\nContent-Length: 0\r\n\r\n", 0, 0);
}

static void
test_response_no_body(void **state)
{
	(void)state;
	/* HEAD and 304: the fields describe the representation. */
	resp_ok("HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n", 1, 0);
	assert_int_equal(resp.body, HTTP_BODY_NONE);
	assert_int_equal(resp.keep_alive, 1);
	resp_ok("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", 1, 0);
	assert_int_equal(resp.body, HTTP_BODY_NONE);
	resp_ok("HTTP/1.1 200 OK\r\n\r\n", 1, 0);
	assert_int_equal(resp.body, HTTP_BODY_NONE);
	assert_int_equal(resp.keep_alive, 1);
	resp_ok("HTTP/1.1 304 Not Modified\r\nContent-Length: 1234\r\n\r\n", 0, 0);
	assert_int_equal(resp.body, HTTP_BODY_NONE);
	resp_ok("HTTP/1.1 204 No Content\r\n\r\n", 0, 0);
	assert_int_equal(resp.body, HTTP_BODY_NONE);
	assert_int_equal(resp.keep_alive, 1);
	resp_ok("HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n", 0, 0);
	assert_int_equal(resp.body, HTTP_BODY_NONE);
	resp_ok("HTTP/1.1 100 Continue\r\n\r\n", 0, 0);
	assert_int_equal(resp.body, HTTP_BODY_NONE);
	resp_ok("HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n", 1, 0);
	assert_int_equal(resp.body, HTTP_BODY_NONE);
	resp_ok("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n", 0, 0);
	assert_int_equal(resp.body, HTTP_BODY_TUNNEL);
	assert_int_equal(resp.keep_alive, 0);
	resp_ok("HTTP/1.1 200 Connection established\r\n\r\n", 0, 1);
	assert_int_equal(resp.body, HTTP_BODY_TUNNEL);
	resp_ok("HTTP/1.1 407 Proxy Auth\r\nContent-Length: 5\r\n\r\n", 0, 1);
	assert_int_equal(resp.body, HTTP_BODY_LENGTH);

	/* A body-less head must not claim one. */
	RESP_BAD("HTTP/1.1 204 x\r\nContent-Length: 5\r\n\r\n");
	RESP_BAD("HTTP/1.1 204 x\r\nTransfer-Encoding: chunked\r\n\r\n");
	RESP_BAD("HTTP/1.1 100 x\r\nContent-Length: 1\r\n\r\n");
	RESP_BAD("HTTP/1.1 101 x\r\nTransfer-Encoding: chunked\r\n\r\n");
	RESP_BAD_FOR("HTTP/1.1 200 x\r\nContent-Length: 5\r\n\r\n", 0, 1);
	RESP_BAD_FOR("HTTP/1.1 200 x\r\nTransfer-Encoding: chunked\r\n\r\n", 0, 1);
	/* Still parsed strictly even where the body is absent. */
	RESP_BAD_FOR("HTTP/1.1 200 x\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n", 1, 0);
	RESP_BAD("HTTP/1.1 304 x\r\nContent-Length: -5\r\n\r\n");
	RESP_BAD_FOR("HTTP/1.1 200 x\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", 1,
	             0);
}

static void
test_response_rejections(void **state)
{
	(void)state;
	RESP_BAD("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n");
	RESP_BAD("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n");
	RESP_BAD("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n");
	RESP_BAD("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n");
	RESP_BAD("HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\n\r\n");
	RESP_BAD("HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\n");
	RESP_BAD("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n");
	RESP_BAD("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n");
	RESP_BAD("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: "
	         "chunked\r\n\r\n");
	RESP_BAD("HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
	RESP_BAD("HTTP/1.1 200 OK\r\nConnection: content-length\r\nContent-Length: 1\r\n\r\n");
	RESP_BAD("HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\n");
	RESP_BAD("HTTP/1.1 200 OK\r\nX : a\r\n\r\n");
	RESP_BAD("HTTP/1.1 200 OK\nContent-Length: 0\n\n");
	RESP_BAD("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\n");
	/* Status lines. */
	RESP_BAD("HTTP/1.1 20 OK\r\n\r\n");
	RESP_BAD("HTTP/1.1 2000 OK\r\n\r\n");
	RESP_BAD("HTTP/1.1 20x OK\r\n\r\n");
	RESP_BAD("HTTP/1.1  200 OK\r\n\r\n");
	RESP_BAD("HTTP/1.1 099 x\r\n\r\n");
	RESP_BAD("HTTP/1.1 600 x\r\n\r\n");
	RESP_BAD("HTTP/1.1 000 x\r\n\r\n");
	RESP_BAD("HTTP/2 200 OK\r\n\r\n");
	RESP_BAD("HTTP/2.0 200 OK\r\n\r\n");
	RESP_BAD("HTTP/1.2 200 OK\r\n\r\n");
	RESP_BAD("HTTP/1.10 200 OK\r\n\r\n");
	RESP_BAD("http/1.1 200 OK\r\n\r\n");
	RESP_BAD("HTTP/1.1\t200 OK\r\n\r\n");
	RESP_BAD("HTTP/1.1 200\tOK\r\n\r\n");
	RESP_BAD("HTTP/1.1\r\n\r\n");
	RESP_BAD("ICY 200 OK\r\n\r\n");
	RESP_BAD("\r\nHTTP/1.1 200 OK\r\n\r\n");
	RESP_BAD_N("HTTP/1.1 200 O\0K\r\n\r\n");
	RESP_BAD_N("HTTP/1.1 200 O\rK\r\n\r\n");
	RESP_BAD_N("HTTP/1.1 200 O\x01K\r\n\r\n");
}

/* Chunked decoding with a feed size of step bytes (0: all at once). */
struct decoded {
	int error;
	size_t consumed;
	int done;
	char payload[4096];
	size_t payload_len;
	size_t trailers;
};

static void
decode(const char *in, size_t len, size_t step, const struct http_limits *lim, struct decoded *d)
{
	struct http_chunked c;
	size_t off = 0;

	memset(d, 0, sizeof(*d));
	http_chunked_init(&c, lim);
	while (off < len && !http_chunked_done(&c)) {
		size_t n = step == 0 || step > len - off ? len - off : step;

		while (n > 0 && !http_chunked_done(&c)) {
			const char *data;
			size_t data_len;
			ssize_t r = http_chunked_feed(&c, in + off, n, &data, &data_len);

			if (r < 0) {
				assert_int_equal(r, HTTP_ERROR);
				assert_int_equal(c.err_status, 400);
				assert_non_null(c.err_reason);
				/* The error sticks. */
				assert_int_equal(
				        http_chunked_feed(&c, "0\r\n\r\n", 5, &data, &data_len),
				        HTTP_ERROR);
				d->error = 1;
				return;
			}
			assert_true((size_t)r <= n);
			if (r == 0)
				assert_true(http_chunked_done(&c));
			if (data_len > 0) {
				/* The payload is the tail of what was consumed. */
				assert_ptr_equal(data + data_len, in + off + r);
				assert_true(d->payload_len + data_len <= sizeof(d->payload));
				memcpy(d->payload + d->payload_len, data, data_len);
				d->payload_len += data_len;
			} else {
				assert_null(data);
			}
			off += (size_t)r;
			n -= (size_t)r;
		}
	}
	d->consumed = off;
	d->done = http_chunked_done(&c);
	d->trailers = c.trailers;
}

/* in decodes to payload, consuming all but rest bytes, for every split. */
static void
chunked_ok(const char *in, size_t len, const char *payload, size_t plen, size_t rest)
{
	struct decoded whole, split;

	decode(in, len, 0, NULL, &whole);
	if (whole.error || !whole.done)
		fail_msg("refused good chunked body '%.*s'", (int)len, in);
	assert_int_equal(whole.consumed, len - rest);
	assert_int_equal(whole.payload_len, plen);
	assert_memory_equal(whole.payload, payload, plen);
	for (size_t step = 1; step <= len; step++) {
		decode(in, len, step, NULL, &split);
		assert_false(split.error);
		assert_true(split.done);
		assert_int_equal(split.consumed, whole.consumed);
		assert_int_equal(split.payload_len, plen);
		assert_memory_equal(split.payload, payload, plen);
		assert_int_equal(split.trailers, whole.trailers);
	}
}

#define CHUNKED_OK(in, payload, rest) chunked_ok(in, sizeof(in) - 1, payload, strlen(payload), rest)

/* Refused whatever the split. */
static void
chunked_bad_lim(const char *in, size_t len, const struct http_limits *lim)
{
	struct decoded d;

	for (size_t step = 0; step <= len; step++) {
		decode(in, len, step, lim, &d);
		if (!d.error)
			fail_msg("accepted bad chunked body '%.*s' (step %zu)", (int)len, in, step);
	}
}

#define CHUNKED_BAD(in) chunked_bad_lim(in, sizeof(in) - 1, NULL)

static void
test_chunked_good(void **state)
{
	char line[] = "7fffffffffffffff\r\nabc";
	struct http_chunked c;
	const char *data;
	size_t data_len;
	struct decoded d;

	(void)state;
	CHUNKED_OK("5\r\nhello\r\n0\r\n\r\n", "hello", 0);
	CHUNKED_OK("0\r\n\r\n", "", 0);
	CHUNKED_OK("5\r\nhello\r\n6\r\n world\r\n0\r\n\r\nGET / HTTP/1.1\r\n", "hello world", 16);
	CHUNKED_OK("A\r\n0123456789\r\na\r\nabcdefghij\r\n0\r\n\r\n", "0123456789abcdefghij", 0);
	CHUNKED_OK("0005\r\nhello\r\n0000\r\n\r\n", "hello", 0);
	CHUNKED_OK("0000000000000001\r\nx\r\n0\r\n\r\n", "x", 0);
	CHUNKED_OK("1;a\r\nx\r\n1;a=b;c=\"q \\\" ;\\\\\"\r\ny\r\n0;last=1\r\n\r\n", "xy", 0);
	CHUNKED_OK("1;a=\"\"\r\nx\r\n0\r\n\r\n", "x", 0);
	chunked_ok("3\r\n\r\n\0\r\n0\r\n\r\n", 13, "\r\n\0", 3, 0);
	CHUNKED_OK("2\r\nab\r\n0\r\nX-Checksum: abc\r\nX-Other:\r\n\r\n", "ab", 0);
	decode("2\r\nab\r\n0\r\nX-Checksum: abc\r\nX-Other:\r\n\r\n",
	       strlen("2\r\nab\r\n0\r\nX-Checksum: abc\r\nX-Other:\r\n\r\n"), 1, NULL, &d);
	assert_int_equal(d.trailers, 2);

	/* The largest size (2^63 - 1) parses; data then flows until the peer stops. */
	http_chunked_init(&c, NULL);
	assert_int_equal(http_chunked_feed(&c, line, 21, &data, &data_len), 21);
	assert_ptr_equal(data, line + 18);
	assert_int_equal(data_len, 3);
	assert_int_equal(http_chunked_feed(&c, "abc", 3, &data, &data_len), 3);
	assert_int_equal(data_len, 3);
	assert_false(http_chunked_done(&c));
	/* Framing and payload in one call, then framing alone. */
	http_chunked_init(&c, NULL);
	assert_int_equal(http_chunked_feed(&c, "2\r\nab\r\n0\r\n\r\n", 12, &data, &data_len), 5);
	assert_int_equal(data_len, 2);
	assert_int_equal(http_chunked_feed(&c, "\r\n0\r\n\r\n", 7, &data, &data_len), 7);
	assert_null(data);
	assert_int_equal(data_len, 0);
	assert_true(http_chunked_done(&c));

	/* Done consumes nothing more. */
	http_chunked_init(&c, NULL);
	assert_int_equal(http_chunked_feed(&c, "0\r\n\r\nXYZ", 8, &data, &data_len), 5);
	assert_true(http_chunked_done(&c));
	assert_int_equal(http_chunked_feed(&c, "XYZ", 3, &data, &data_len), 0);
	assert_int_equal(http_chunked_feed(&c, "", 0, &data, &data_len), 0);
}

static void
test_chunked_bad(void **state)
{
	char line[HTTP_CHUNK_LINE_MAX + 64];
	struct http_limits lim = {0};

	(void)state;
	CHUNKED_BAD("-1\r\nx\r\n0\r\n\r\n");
	CHUNKED_BAD("+1\r\nx\r\n0\r\n\r\n");
	CHUNKED_BAD("0x1\r\nx\r\n0\r\n\r\n");
	CHUNKED_BAD("0x10\r\n");
	CHUNKED_BAD(" 1\r\nx\r\n0\r\n\r\n");
	CHUNKED_BAD("1 \r\nx\r\n0\r\n\r\n");
	CHUNKED_BAD("1\t\r\nx\r\n0\r\n\r\n");
	CHUNKED_BAD("1 ;a\r\nx\r\n0\r\n\r\n");
	CHUNKED_BAD("g\r\n");
	CHUNKED_BAD("00000000000000001\r\nx\r\n0\r\n\r\n");
	CHUNKED_BAD("10000000000000000\r\n");
	CHUNKED_BAD("ffffffffffffffff0\r\n");
	/* 2^63 and above: negative to an upstream reading a signed 64-bit size. */
	CHUNKED_BAD("8000000000000000\r\n");
	CHUNKED_BAD("ffffffffffffffff\r\n");
	CHUNKED_BAD("\r\n");
	CHUNKED_BAD("\r\n0\r\n\r\n");
	CHUNKED_BAD(";a\r\n");
	/* CRLF after the size and after the data, and nothing else. */
	CHUNKED_BAD("1\r\nab\r\n0\r\n\r\n");
	CHUNKED_BAD("1\r\na0\r\n\r\n");
	CHUNKED_BAD("1\r\na\r0\r\n\r\n");
	CHUNKED_BAD("1\r\na\n0\r\n\r\n");
	CHUNKED_BAD("1\na\r\n0\r\n\r\n");
	CHUNKED_BAD("1\rxa\r\n0\r\n\r\n");
	CHUNKED_BAD("0\n\r\n");
	CHUNKED_BAD("0\r\n\n");
	CHUNKED_BAD("0\r\n\rx");
	CHUNKED_BAD("2\r\nab\r\n\r\n0\r\n\r\n");
	/* Extensions. */
	CHUNKED_BAD("1;\r\nx\r\n0\r\n\r\n");
	CHUNKED_BAD("1; a\r\nx\r\n0\r\n\r\n");
	CHUNKED_BAD("1;a \r\nx\r\n0\r\n\r\n");
	CHUNKED_BAD("1;a=\r\nx\r\n0\r\n\r\n");
	CHUNKED_BAD("1;a= b\r\nx\r\n0\r\n\r\n");
	CHUNKED_BAD("1;a=b c\r\nx\r\n0\r\n\r\n");
	CHUNKED_BAD("1;a=\"x\r\nx\r\n0\r\n\r\n");
	CHUNKED_BAD("1;a=\"x\"y\r\nx\r\n0\r\n\r\n");
	CHUNKED_BAD("1;a=\"x\\\r\n\"\r\nx\r\n0\r\n\r\n");
	CHUNKED_BAD("1;a=\"\0\"\r\nx\r\n0\r\n\r\n");
	CHUNKED_BAD("1;a\n\r\nx\r\n0\r\n\r\n");
	CHUNKED_BAD("1;a=b\nx\r\n0\r\n\r\n");
	CHUNKED_BAD("1;a=(\r\nx\r\n0\r\n\r\n");
	memset(line, 0, sizeof(line));
	memcpy(line, "1;a=", 4);
	memset(line + 4, 'b', HTTP_CHUNK_LINE_MAX - 6);
	memcpy(line + HTTP_CHUNK_LINE_MAX - 2, "\r\nx\r\n0\r\n\r\n", 10);
	{
		struct decoded d;

		/* A line of exactly HTTP_CHUNK_LINE_MAX bytes, CRLF included. */
		decode(line, strlen(line), 7, NULL, &d);
		assert_false(d.error);
		assert_true(d.done);
		memmove(line + 1, line, strlen(line) + 1);
		line[0] = '0';
		chunked_bad_lim(line, strlen(line), NULL);
	}
	/* Trailers: header field rules, and no framing fields. */
	CHUNKED_BAD("0\r\nX : y\r\n\r\n");
	CHUNKED_BAD("0\r\nX: y\r\n z\r\n\r\n");
	CHUNKED_BAD("0\r\n X: y\r\n\r\n");
	CHUNKED_BAD("0\r\n: y\r\n\r\n");
	CHUNKED_BAD("0\r\nX y\r\n\r\n");
	CHUNKED_BAD("0\r\nX: a\0b\r\n\r\n");
	CHUNKED_BAD("0\r\nX: a\rb\r\n\r\n");
	CHUNKED_BAD("0\r\nX: a\nb\r\n\r\n");
	CHUNKED_BAD("0\r\nX: a\n\r\n");
	CHUNKED_BAD("0\r\nX: a\r\n\n");
	CHUNKED_BAD("0\r\nContent-Length: 5\r\n\r\n");
	CHUNKED_BAD("0\r\ntransfer-ENCODING: chunked\r\n\r\n");
	CHUNKED_BAD("0\r\nHost: evil\r\n\r\n");
	CHUNKED_BAD("0\r\nX-\xc3\xa9: 1\r\n\r\n");
	/* Trailer section bounded by max_head and max_headers. */
	lim.max_head = 20;
	chunked_bad_lim("0\r\nX-Long: 0123456789\r\n\r\n", 25, &lim);
	lim.max_head = 0;
	lim.max_headers = 1;
	chunked_bad_lim("0\r\nA: 1\r\nB: 2\r\n\r\n", 17, &lim);
	{
		struct decoded d;

		lim.max_head = 22;
		decode("0\r\nX-Long: 0123456789\r\n\r\n", 25, 1, &lim, &d);
		assert_false(d.error);
		assert_true(d.done);
		lim.max_head = 21;
		decode("0\r\nX-Long: 0123456789\r\n\r\n", 25, 1, &lim, &d);
		assert_true(d.error);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_target_forms),
	        cmocka_unit_test(test_target_rejections),
	        cmocka_unit_test(test_request_line_rejections),
	        cmocka_unit_test(test_field_rejections),
	        cmocka_unit_test(test_host),
	        cmocka_unit_test(test_content_length),
	        cmocka_unit_test(test_transfer_encoding),
	        cmocka_unit_test(test_smuggling),
	        cmocka_unit_test(test_keep_alive),
	        cmocka_unit_test(test_expect_upgrade_connection),
	        cmocka_unit_test(test_pipelined),
	        cmocka_unit_test(test_incremental),
	        cmocka_unit_test(test_limits),
	        cmocka_unit_test(test_response),
	        cmocka_unit_test(test_response_no_body),
	        cmocka_unit_test(test_response_rejections),
	        cmocka_unit_test(test_chunked_good),
	        cmocka_unit_test(test_chunked_bad),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
