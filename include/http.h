/*
 * http: strict, bounded, zero-copy HTTP/1.1 framing for proxied traffic.
 *
 * The head parsers have picohttpparser's shape: they take the bytes read so
 * far and return the length of the head (request or status line, header
 * fields and the empty line) once it is complete, HTTP_INCOMPLETE while more
 * bytes are needed, or HTTP_ERROR with the status to answer and a static
 * reason in err_status/err_reason. They keep no state between calls: call
 * again with the longer buffer. Each call rescans what it is given, so a
 * peer sending one byte per read costs O(max_head^2) (about 0.4 s of CPU
 * for 32 KiB). A head can only complete at a LF, so a caller that calls
 * again only once the new bytes hold a LF or the buffer has grown past
 * max_head loses nothing but an earlier error, and bounds the work to about
 * max_headers rescans. Every slice they return points into the caller's
 * buffer, which must outlive its use; nothing is allocated, nothing is
 * decoded (no percent-decoding, no case folding).
 *
 * A credential proxy sits between two parsers that must agree on where each
 * message ends; wherever RFC 9110/9112 lets a recipient be lenient, this
 * module refuses instead, because each leniency is a way for the two sides
 * to disagree (request smuggling, header injection):
 *   - lines end in CRLF only: a bare LF or a bare CR anywhere is an error;
 *   - no obs-fold, no whitespace between a field name and its colon, no
 *     whitespace or empty line before the request line, no NUL or other
 *     control byte except HTAB in a field value;
 *   - exactly one SP between the parts of the request line, and a version of
 *     exactly "HTTP/1.1" or "HTTP/1.0";
 *   - the request-target form matches the method (CONNECT exactly when
 *     authority-form, "*" only for OPTIONS), absolute-form is http or https
 *     without userinfo, and one Host (required in HTTP/1.1) names a plausible
 *     authority, so a host check cannot be steered by "user@host" tricks;
 *   - Content-Length is 1*DIGIT without leading zeros, at most 2^63-1, in a
 *     single field; Transfer-Encoding is the single coding "chunked" in a
 *     single field, never together with Content-Length and never in an
 *     HTTP/1.0 message;
 *   - a Connection header may not list Content-Length, Transfer-Encoding or
 *     Host, since a proxy drops the fields Connection lists and would strip
 *     the message's own framing or routing;
 *   - CONNECT and the responses that carry no body (1xx, 204, 2xx to
 *     CONNECT) may carry no Transfer-Encoding and no Content-Length other
 *     than 0: bytes after such a head are tunnel data or the next message,
 *     never a body, and a peer that thinks otherwise is out of step.
 * The only leniency kept is where nothing can be misread: a status line
 * without reason phrase (with or without the SP before it), empty elements
 * in a Connection list, and HTAB as well as SP as optional whitespace.
 */
#ifndef VRUN_HTTP_H
#define VRUN_HTTP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* One header field; both slices point into the caller's buffer. */
struct http_header {
	const char *name;
	size_t name_len;
	const char *value; /* without leading/trailing whitespace */
	size_t value_len;
};

/* Parser results other than a byte count. */
#define HTTP_ERROR      (-1)
#define HTTP_INCOMPLETE (-2)

#define HTTP_DEFAULT_MAX_HEAD    (32 * 1024)
#define HTTP_DEFAULT_MAX_HEADERS 100
#define HTTP_DEFAULT_MAX_TARGET  (8 * 1024)
/* Room for header fields in the result structs; max_headers is capped here. */
#define HTTP_HEADERS_MAX 128
/* A chunk-size line, extensions and CRLF included, may not be longer than this. */
#define HTTP_CHUNK_LINE_MAX 1024

/*
 * Bounds on what a peer may make us examine. A field left 0 takes its
 * default; pass NULL for all defaults. max_head counts every byte of the
 * head including the final CRLF (and bounds a chunked trailer section);
 * max_headers is capped at HTTP_HEADERS_MAX and max_head at INT_MAX.
 */
struct http_limits {
	size_t max_head;    /* default 32 KiB; exceeded: 431 */
	size_t max_headers; /* default 100; exceeded: 431 */
	size_t max_target;  /* request-target bytes, default 8 KiB; exceeded: 414 */
};

enum http_body {
	HTTP_BODY_NONE = 0,    /* no body: the next byte starts the next message */
	HTTP_BODY_LENGTH = 1,  /* content_length bytes (possibly 0) */
	HTTP_BODY_CHUNKED = 2, /* chunked coding: feed it to http_chunked_feed() */
	HTTP_BODY_CLOSE = 3,   /* response only: everything until the peer closes */
	HTTP_BODY_TUNNEL = 4,  /* response only (101, 2xx to CONNECT): no longer HTTP */
};

enum http_target_form {
	HTTP_TARGET_ORIGIN = 1,    /* "/path?query" */
	HTTP_TARGET_ABSOLUTE = 2,  /* "http://authority/path?query" (http or https) */
	HTTP_TARGET_AUTHORITY = 3, /* "host:port", CONNECT only */
	HTTP_TARGET_ASTERISK = 4,  /* "*", OPTIONS only */
};

struct http_request {
	const char *method; /* token, case-sensitive: compare exactly */
	size_t method_len;
	/*
	 * The request-target as sent: visible ASCII only, no '#'. Other
	 * characters RFC 3986 would have escaped pass, undecoded: they move
	 * no message boundary, and clients do send them.
	 */
	const char *target;
	size_t target_len;
	int target_form; /* enum http_target_form */
	/* Absolute-form only: the scheme ("http" or "https", any case). */
	const char *scheme;
	size_t scheme_len;
	/*
	 * Absolute- and authority-form: "host[:port]" (port required in
	 * authority-form). Only plausible (no userinfo, no whitespace, no
	 * percent-escape); canonicalise with hostspec_parse(). When both this
	 * and Host are present, comparing them is the caller's business.
	 */
	const char *authority;
	size_t authority_len;
	/*
	 * Origin- and absolute-form: path and query as sent. Starts with '/'
	 * in origin-form; in absolute-form it may also start with '?' or be
	 * empty, which both mean the path "/".
	 */
	const char *path;
	size_t path_len;
	int minor_version; /* 0 or 1 */
	struct http_header headers[HTTP_HEADERS_MAX];
	size_t num_headers;
	int body;                /* enum http_body: NONE, LENGTH or CHUNKED */
	uint64_t content_length; /* for HTTP_BODY_LENGTH */
	int keep_alive;          /* 1.1: unless "close"; 1.0: only with "keep-alive" */
	int expect_continue;     /* "Expect: 100-continue" present */
	int upgrade;             /* an Upgrade field present */
	int host_index;          /* index of the Host field in headers, or -1 */
	const char *host;        /* its value (NULL when absent) */
	size_t host_len;
	int err_status; /* on HTTP_ERROR: 400, 414, 431 or 505 */
	const char *err_reason;
};

struct http_response {
	int minor_version; /* 0 or 1 */
	int status;        /* 100..599 */
	const char *reason;
	size_t reason_len;
	struct http_header headers[HTTP_HEADERS_MAX];
	size_t num_headers;
	int body; /* enum http_body */
	uint64_t content_length;
	int keep_alive; /* as for requests; never with HTTP_BODY_CLOSE or _TUNNEL */
	int err_status; /* on HTTP_ERROR: always 502, the answer for our client */
	const char *err_reason;
};

/*
 * Parse the request head at the start of buf. Returns the head length
 * (> 0; the body or the next pipelined request starts there), HTTP_INCOMPLETE
 * when buf holds a valid prefix of a head, or HTTP_ERROR with
 * out->err_status and out->err_reason set. A buffer longer than max_head
 * without a complete head is an error at once (431), however little of it
 * has been seen to end. *out is cleared first; limits may be NULL.
 */
int http_parse_request(const char *buf, size_t len, const struct http_limits *limits,
                       struct http_request *out);

/*
 * Parse a response head; the request it answers decides its framing
 * (RFC 9112 6.3): a response to HEAD, a 1xx, 204 or 304 has no body; a 101
 * or a 2xx to CONNECT turns the connection into a tunnel; otherwise chunked,
 * Content-Length, or until close. Return convention as
 * http_parse_request(), every error being 502. A 1xx other than 101 is
 * interim: parse the next response head after it.
 */
int http_parse_response(const char *buf, size_t len, const struct http_limits *limits,
                        int request_was_head, int request_was_connect, struct http_response *out);

/*
 * 1 when a Connection field among headers lists name (ASCII case-
 * insensitive), i.e. a proxy must drop the field called name; else 0. Only
 * meaningful on headers a parser above accepted.
 */
int http_connection_lists(const struct http_header *headers, size_t num_headers, const char *name,
                          size_t name_len);

/*
 * Index of the first field at or after from whose name is name (NUL-
 * terminated, ASCII case-insensitive), or -1.
 */
int http_header_find(const struct http_header *headers, size_t num_headers, const char *name,
                     size_t from);

/*
 * Streaming validator for a chunked body, fed arbitrary splits of it (one
 * byte at a time works). Extensions are accepted only as strict
 * ";name[=token|quoted-string]" with no whitespace anywhere in the size
 * line, which is bounded by HTTP_CHUNK_LINE_MAX; sizes are 1 to 16 hex
 * digits and below 2^63 (an upstream reading them into a signed 64-bit
 * length must not see a negative one). Trailer fields obey the header field rules and limits, and
 * may not be Content-Length, Transfer-Encoding or Host; they are validated and passed over, never
 * reported as payload, so a caller that keeps only the payload drops them (trailers says whether
 * there were any). Every error is 400.
 *
 * Fields other than err_status, err_reason and trailers are private.
 */
struct http_chunked {
	uint64_t remaining; /* data bytes left in the current chunk */
	size_t line_len;    /* bytes of the current size line */
	size_t trailer_len; /* bytes of the trailer section so far */
	size_t max_trailer_len;
	size_t max_trailers;
	size_t trailers; /* trailer fields seen (public, read-only) */
	int state;
	unsigned digits;
	size_t name_len;
	char name[20]; /* trailer field name, lower-cased, when short */
	int err_status;
	const char *err_reason;
};

/* Start decoding a new body; limits may be NULL. */
void http_chunked_init(struct http_chunked *c, const struct http_limits *limits);

/*
 * Consume bytes of buf (at most len). Returns how many were consumed, or
 * HTTP_ERROR (and again on every later call) with c->err_status and
 * c->err_reason set. *data and *data_len (cleared on entry) give the payload
 * bytes among those consumed: they are always the last *data_len of them, so
 * a caller passes buf[0, n) through unchanged, or keeps only the payload.
 * One call stops after one run of payload: call again with the rest until
 * all is consumed or http_chunked_done(). Once done it consumes nothing: the
 * bytes left belong to the next message. Returns 0 only when len is 0 or
 * the body is done.
 */
ssize_t http_chunked_feed(struct http_chunked *c, const char *buf, size_t len, const char **data,
                          size_t *data_len);

/* 1 once the last chunk, the trailer section and its final CRLF were consumed. */
int http_chunked_done(const struct http_chunked *c);

/* 1 once a whole chunk-size line (with its CRLF) has been read, else 0. */
int http_chunked_sized(const struct http_chunked *c);

#endif
