#include "http.h"

#include <limits.h>
#include <stdint.h>
#include <string.h>

/* Where a head parse stands; errors carry the status to answer. */
struct parse {
	const char *buf;
	size_t len;    /* bytes we may look at: min(len, max_head) */
	int truncated; /* len was cut to max_head */
	int status;
	const char *reason;
};

static int
is_digit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

static int
is_alpha(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static int
hex_value(unsigned char c)
{
	if (is_digit(c))
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* RFC 9110 5.6.2 tchar. */
static int
is_tchar(unsigned char c)
{
	return is_digit(c) || is_alpha(c) || (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* field-vchar / SP / HTAB: VCHAR and obs-text; no NUL, CR, LF or other CTL. */
static int
is_field_char(unsigned char c)
{
	return c == '\t' || (c >= 0x20 && c != 0x7f);
}

static int
is_ows(unsigned char c)
{
	return c == ' ' || c == '\t';
}

static unsigned char
lower(unsigned char c)
{
	return c >= 'A' && c <= 'Z' ? (unsigned char)(c - 'A' + 'a') : c;
}

/* ASCII case-insensitive comparison of s[0, n) with the NUL-terminated lit. */
static int
eq_ci(const char *s, size_t n, const char *lit)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (lit[i] == '\0' || lower((unsigned char)s[i]) != lower((unsigned char)lit[i]))
			return 0;
	return lit[i] == '\0';
}

static int
eq(const char *s, size_t n, const char *lit)
{
	return strlen(lit) == n && memcmp(s, lit, n) == 0;
}

static int
fail(struct parse *p, int status, const char *reason)
{
	p->status = status;
	p->reason = reason;
	return HTTP_ERROR;
}

/*
 * Ran out of bytes: more may complete the head, unless we already hold more
 * than max_head, in which case waiting would let a peer make us buffer
 * without bound.
 */
static int
more(struct parse *p)
{
	if (p->truncated)
		return fail(p, 431, "header section too large");
	return HTTP_INCOMPLETE;
}

static void
limits_resolve(const struct http_limits *in, struct http_limits *out)
{
	out->max_head = HTTP_DEFAULT_MAX_HEAD;
	out->max_headers = HTTP_DEFAULT_MAX_HEADERS;
	out->max_target = HTTP_DEFAULT_MAX_TARGET;
	if (in != NULL) {
		if (in->max_head != 0)
			out->max_head = in->max_head;
		if (in->max_headers != 0)
			out->max_headers = in->max_headers;
		if (in->max_target != 0)
			out->max_target = in->max_target;
	}
	if (out->max_head > INT_MAX)
		out->max_head = INT_MAX;
	if (out->max_headers > HTTP_HEADERS_MAX)
		out->max_headers = HTTP_HEADERS_MAX;
}

static void
parse_init(struct parse *p, const char *buf, size_t len, const struct http_limits *lim)
{
	p->buf = buf;
	p->len = len;
	p->truncated = 0;
	p->status = 0;
	p->reason = NULL;
	if (len > lim->max_head) {
		p->len = lim->max_head;
		p->truncated = 1;
	}
}

/* Expect CRLF at *pos; a lone CR or LF is where parsers disagree. */
static int
crlf(struct parse *p, size_t *pos)
{
	if (*pos >= p->len)
		return more(p);
	if (p->buf[*pos] == '\n')
		return fail(p, 400, "bare LF line ending");
	if (p->buf[*pos] != '\r')
		return fail(p, 400, "malformed line ending");
	if (*pos + 1 >= p->len)
		return more(p);
	if (p->buf[*pos + 1] != '\n')
		return fail(p, 400, "bare CR");
	*pos += 2;
	return 0;
}

/*
 * "HTTP/" DIGIT "." DIGIT at *pos. Well-formed but other than 1.0 and 1.1 is
 * *minor = -1 so the caller can answer 505 once the line is complete.
 */
static int
version(struct parse *p, size_t *pos, int *minor)
{
	static const char pat[] = "HTTP/#.#";

	for (size_t i = 0; i < sizeof(pat) - 1; i++) {
		unsigned char c;

		if (*pos + i >= p->len)
			return more(p);
		c = (unsigned char)p->buf[*pos + i];
		if (pat[i] == '#' ? !is_digit(c) : c != (unsigned char)pat[i])
			return fail(p, 400, "malformed HTTP version");
	}
	if (p->buf[*pos + 5] == '1' && (p->buf[*pos + 7] == '0' || p->buf[*pos + 7] == '1'))
		*minor = p->buf[*pos + 7] - '0';
	else
		*minor = -1;
	*pos += sizeof(pat) - 1;
	return 0;
}

/* Header fields up to and including the empty line. */
static int
fields(struct parse *p, size_t *pos, size_t max_headers, struct http_header *headers, size_t *num)
{
	const char *b = p->buf;
	size_t i = *pos;

	for (;;) {
		size_t name, name_end, value, value_end;
		int r;

		if (i >= p->len)
			return more(p);
		if (b[i] == '\r' || b[i] == '\n') {
			if ((r = crlf(p, &i)) != 0)
				return r;
			*pos = i;
			return 0;
		}
		/* obs-fold, or whitespace before the first field (RFC 9112 2.2). */
		if (is_ows((unsigned char)b[i]))
			return fail(p, 400, "whitespace at start of header line");
		if (*num >= max_headers)
			return fail(p, 431, "too many header fields");
		name = i;
		while (i < p->len && is_tchar((unsigned char)b[i]))
			i++;
		if (i >= p->len)
			return more(p);
		name_end = i;
		if (b[i] != ':') {
			if (is_ows((unsigned char)b[i]))
				return fail(p, 400, "whitespace before colon");
			return fail(p, 400, "invalid byte in header name");
		}
		if (name_end == name)
			return fail(p, 400, "empty header name");
		i++;
		while (i < p->len && is_ows((unsigned char)b[i]))
			i++;
		value = value_end = i;
		for (;;) {
			unsigned char c;

			if (i >= p->len)
				return more(p);
			c = (unsigned char)b[i];
			if (c == '\r' || c == '\n')
				break;
			if (!is_field_char(c))
				return fail(p, 400,
				            c == '\0' ? "NUL in header value"
				                      : "control byte in header value");
			i++;
			if (!is_ows(c))
				value_end = i;
		}
		if ((r = crlf(p, &i)) != 0)
			return r;
		headers[*num].name = b + name;
		headers[*num].name_len = name_end - name;
		headers[*num].value = b + value;
		headers[*num].value_len = value_end - value;
		(*num)++;
	}
}

/*
 * host[:port] as a peer may name it: a DNS-ish name or IPv4 (letters,
 * digits, '-', '.', '_') or a bracketed IPv6 literal, then an optional
 * non-empty port of up to five digits. No userinfo, percent-escape,
 * whitespace or path: anything a resolver or a TLS stack might read
 * differently. hostspec_parse() does the exact canonical check.
 */
static int
plausible_authority(const char *s, size_t n, int require_port)
{
	size_t i = 0, port;

	if (n == 0)
		return 0;
	if (s[0] == '[') {
		i = 1;
		while (i < n && (hex_value((unsigned char)s[i]) >= 0 || s[i] == ':' || s[i] == '.'))
			i++;
		if (i == 1 || i >= n || s[i] != ']')
			return 0;
		i++;
	} else {
		while (i < n && (is_alpha((unsigned char)s[i]) || is_digit((unsigned char)s[i]) ||
		                 s[i] == '-' || s[i] == '.' || s[i] == '_'))
			i++;
		if (i == 0)
			return 0;
	}
	if (i == n)
		return !require_port;
	if (s[i] != ':')
		return 0;
	port = ++i;
	while (i < n && is_digit((unsigned char)s[i]))
		i++;
	return i == n && i > port && i - port <= 5;
}

/*
 * Content-Length: 1*DIGIT, no sign, list or hex, and no leading zero (some
 * parsers read those as octal); at most 2^63-1 so it fits an off_t.
 */
static int
content_length(const char *s, size_t n, uint64_t *out)
{
	uint64_t v = 0;

	if (n == 0 || (s[0] == '0' && n > 1))
		return -1;
	for (size_t i = 0; i < n; i++) {
		unsigned d;

		if (!is_digit((unsigned char)s[i]))
			return -1;
		d = (unsigned)(s[i] - '0');
		if (v > ((uint64_t)INT64_MAX - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}

/*
 * Next element of a comma-separated token list (RFC 9110 5.6.1), empty
 * elements skipped. Returns 1 with the token, 0 at the end, -1 when the list
 * is malformed.
 */
static int
list_next(const char *v, size_t n, size_t *pos, const char **tok, size_t *tok_len)
{
	size_t i = *pos, start;

	for (;;) {
		while (i < n && is_ows((unsigned char)v[i]))
			i++;
		if (i == n) {
			*pos = i;
			return 0;
		}
		if (v[i] != ',')
			break;
		i++;
	}
	start = i;
	while (i < n && is_tchar((unsigned char)v[i]))
		i++;
	if (i == start)
		return -1;
	*tok = v + start;
	*tok_len = i - start;
	while (i < n && is_ows((unsigned char)v[i]))
		i++;
	if (i < n && v[i] != ',')
		return -1;
	*pos = i < n ? i + 1 : i;
	return 1;
}

/* What the header fields say about framing and the connection. */
struct framing {
	int cl_count, te_count, host_count, conn_close, conn_keep_alive, expect_continue, upgrade;
	size_t cl_index, te_index, host_index;
};

static int
scan_fields(struct parse *p, const struct http_header *h, size_t n, struct framing *f)
{
	memset(f, 0, sizeof(*f));
	for (size_t i = 0; i < n; i++) {
		const char *name = h[i].name;
		size_t len = h[i].name_len;

		if (eq_ci(name, len, "content-length")) {
			f->cl_count++;
			f->cl_index = i;
		} else if (eq_ci(name, len, "transfer-encoding")) {
			f->te_count++;
			f->te_index = i;
		} else if (eq_ci(name, len, "host")) {
			f->host_count++;
			f->host_index = i;
		} else if (eq_ci(name, len, "expect")) {
			if (eq_ci(h[i].value, h[i].value_len, "100-continue"))
				f->expect_continue = 1;
		} else if (eq_ci(name, len, "upgrade")) {
			f->upgrade = 1;
		} else if (eq_ci(name, len, "connection")) {
			size_t pos = 0, tl;
			const char *t;
			int r;

			while ((r = list_next(h[i].value, h[i].value_len, &pos, &t, &tl)) == 1) {
				if (eq_ci(t, tl, "close"))
					f->conn_close = 1;
				else if (eq_ci(t, tl, "keep-alive"))
					f->conn_keep_alive = 1;
				else if (eq_ci(t, tl, "content-length") ||
				         eq_ci(t, tl, "transfer-encoding") || eq_ci(t, tl, "host"))
					return fail(p, 400, "Connection lists a framing header");
			}
			if (r < 0)
				return fail(p, 400, "malformed Connection header");
		}
	}
	if (f->cl_count > 1)
		return fail(p, 400, "duplicate Content-Length");
	if (f->te_count > 1)
		return fail(p, 400, "duplicate Transfer-Encoding");
	if (f->cl_count && f->te_count)
		return fail(p, 400, "both Content-Length and Transfer-Encoding");
	return 0;
}

/* Only a lone "chunked" is supported; tell an unknown coding from garbage. */
static int
check_te(struct parse *p, const struct http_header *te)
{
	const char *v = te->value;
	size_t n = te->value_len;
	int tchars = 0;

	if (eq_ci(v, n, "chunked"))
		return 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)v[i];

		if (is_tchar(c))
			tchars = 1;
		else if (c != ',' && c != ';' && c != '=' && !is_ows(c))
			return fail(p, 400, "malformed Transfer-Encoding");
	}
	if (!tchars)
		return fail(p, 400, "malformed Transfer-Encoding");
	return fail(p, 400, "Transfer-Encoding other than a final chunked");
}

static int
keep_alive(int minor, const struct framing *f)
{
	if (f->conn_close)
		return 0;
	return minor == 1 || f->conn_keep_alive;
}

static int
request_line(struct parse *p, size_t *pos, const struct http_limits *lim, struct http_request *r)
{
	const char *b = p->buf;
	size_t i = 0, start;
	int res, minor;

	while (i < p->len && is_tchar((unsigned char)b[i]))
		i++;
	if (i >= p->len)
		return more(p);
	if (i == 0)
		return fail(p, 400,
		            b[0] == '\r' || b[0] == '\n' ? "empty line before request line"
		                                         : "invalid method");
	if (b[i] != ' ')
		return fail(p, 400, "invalid method");
	r->method = b;
	r->method_len = i;
	start = ++i;
	/* Visible ASCII only: no CTL, NUL, SP or high byte to reinterpret. */
	while (i < p->len && b[i] >= 0x21 && b[i] <= 0x7e) {
		if (++i - start > lim->max_target)
			return fail(p, 414, "request-target too long");
	}
	if (i >= p->len)
		return more(p);
	if (i == start)
		return fail(p, 400, "missing request-target");
	if (b[i] != ' ')
		return fail(p, 400, "invalid byte in request-target");
	r->target = b + start;
	r->target_len = i - start;
	i++;
	if ((res = version(p, &i, &minor)) != 0)
		return res;
	if (i < p->len && b[i] != '\r' && b[i] != '\n')
		return fail(p, 400, "malformed HTTP version");
	if ((res = crlf(p, &i)) != 0)
		return res;
	if (minor < 0)
		return fail(p, 505, "HTTP version not supported");
	r->minor_version = minor;
	*pos = i;
	return 0;
}

static int
target_form(struct parse *p, struct http_request *r)
{
	const char *t = r->target;
	size_t n = r->target_len, i, auth;

	/* Never sent by a client; servers disagree on where the path ends. */
	if (memchr(t, '#', n) != NULL)
		return fail(p, 400, "fragment in request-target");
	if (eq(r->method, r->method_len, "CONNECT")) {
		if (!plausible_authority(t, n, 1))
			return fail(p, 400, "CONNECT needs host:port");
		r->target_form = HTTP_TARGET_AUTHORITY;
		r->authority = t;
		r->authority_len = n;
		return 0;
	}
	if (n == 1 && t[0] == '*') {
		if (!eq(r->method, r->method_len, "OPTIONS"))
			return fail(p, 400, "asterisk-form without OPTIONS");
		r->target_form = HTTP_TARGET_ASTERISK;
		return 0;
	}
	if (t[0] == '/') {
		r->target_form = HTTP_TARGET_ORIGIN;
		r->path = t;
		r->path_len = n;
		return 0;
	}
	for (i = 0; i < n && (is_alpha((unsigned char)t[i]) || is_digit((unsigned char)t[i]) ||
	                      t[i] == '+' || t[i] == '-' || t[i] == '.');
	     i++)
		;
	if (i + 3 > n || memcmp(t + i, "://", 3) != 0) {
		if (plausible_authority(t, n, 1))
			return fail(p, 400, "authority-form without CONNECT");
		return fail(p, 400, "malformed request-target");
	}
	if (!eq_ci(t, i, "http") && !eq_ci(t, i, "https"))
		return fail(p, 400, "unsupported URI scheme");
	r->scheme = t;
	r->scheme_len = i;
	auth = i + 3;
	for (i = auth; i < n && t[i] != '/' && t[i] != '?'; i++)
		;
	if (!plausible_authority(t + auth, i - auth, 0))
		return fail(p, 400, "malformed authority in request-target");
	r->target_form = HTTP_TARGET_ABSOLUTE;
	r->authority = t + auth;
	r->authority_len = i - auth;
	r->path = t + i;
	r->path_len = n - i;
	return 0;
}

static int
request_framing(struct parse *p, struct http_request *r)
{
	struct framing f;
	int res, connect = eq(r->method, r->method_len, "CONNECT");

	if ((res = scan_fields(p, r->headers, r->num_headers, &f)) != 0)
		return res;
	if (f.host_count > 1)
		return fail(p, 400, "duplicate Host");
	if (f.host_count == 0 && r->minor_version == 1)
		return fail(p, 400, "missing Host");
	r->host_index = -1;
	if (f.host_count == 1) {
		const struct http_header *h = &r->headers[f.host_index];

		if (!plausible_authority(h->value, h->value_len, 0))
			return fail(p, 400, "malformed Host");
		r->host_index = (int)f.host_index;
		r->host = h->value;
		r->host_len = h->value_len;
	}
	if (f.te_count) {
		/* RFC 9112 6.1: an HTTP/1.0 peer cannot mean chunked. */
		if (r->minor_version == 0)
			return fail(p, 400, "Transfer-Encoding in HTTP/1.0");
		if (connect)
			return fail(p, 400, "CONNECT with a body");
		if ((res = check_te(p, &r->headers[f.te_index])) != 0)
			return res;
		r->body = HTTP_BODY_CHUNKED;
	} else if (f.cl_count) {
		const struct http_header *h = &r->headers[f.cl_index];

		if (content_length(h->value, h->value_len, &r->content_length) != 0)
			return fail(p, 400, "malformed Content-Length");
		/* After CONNECT the bytes are tunnel data, never a body. */
		if (connect && r->content_length != 0)
			return fail(p, 400, "CONNECT with a body");
		r->body = HTTP_BODY_LENGTH;
	}
	r->keep_alive = keep_alive(r->minor_version, &f);
	r->expect_continue = f.expect_continue;
	r->upgrade = f.upgrade;
	return 0;
}

int
http_parse_request(const char *buf, size_t len, const struct http_limits *limits,
                   struct http_request *out)
{
	struct http_limits lim;
	struct parse p;
	size_t pos = 0;
	int r;

	memset(out, 0, sizeof(*out));
	out->host_index = -1;
	limits_resolve(limits, &lim);
	parse_init(&p, buf, len, &lim);
	if ((r = request_line(&p, &pos, &lim, out)) != 0 ||
	    (r = fields(&p, &pos, lim.max_headers, out->headers, &out->num_headers)) != 0 ||
	    (r = target_form(&p, out)) != 0 || (r = request_framing(&p, out)) != 0) {
		if (r == HTTP_ERROR) {
			out->err_status = p.status;
			out->err_reason = p.reason;
		}
		return r;
	}
	return (int)pos;
}

static int
status_line(struct parse *p, size_t *pos, struct http_response *r)
{
	const char *b = p->buf;
	size_t i = 0, reason;
	int res, minor, code = 0;

	if ((res = version(p, &i, &minor)) != 0)
		return res;
	if (i >= p->len)
		return more(p);
	if (b[i] != ' ')
		return fail(p, 400, "malformed status line");
	i++;
	for (int k = 0; k < 3; k++, i++) {
		if (i >= p->len)
			return more(p);
		if (!is_digit((unsigned char)b[i]))
			return fail(p, 400, "malformed status code");
		code = code * 10 + (b[i] - '0');
	}
	if (i >= p->len)
		return more(p);
	reason = i;
	if (b[i] == ' ') {
		reason = ++i;
		while (i < p->len && is_field_char((unsigned char)b[i]))
			i++;
	}
	if (i >= p->len)
		return more(p);
	if (b[i] != '\r' && b[i] != '\n')
		return fail(p, 400, b[i] == '\0' ? "NUL in status line" : "malformed status line");
	r->reason = b + reason;
	r->reason_len = i - reason;
	if ((res = crlf(p, &i)) != 0)
		return res;
	if (minor < 0)
		return fail(p, 505, "HTTP version not supported");
	if (code < 100 || code > 599)
		return fail(p, 400, "status code out of range");
	r->minor_version = minor;
	r->status = code;
	*pos = i;
	return 0;
}

/*
 * A head that carries no body despite what its fields might say: framing
 * fields there mean the peer's idea of the message differs from ours,
 * except the harmless "Content-Length: 0".
 */
static int
no_framing(struct parse *p, const struct http_response *r, const struct framing *f)
{
	uint64_t cl;

	if (f->te_count)
		return fail(p, 400, "Transfer-Encoding in a response without body");
	if (f->cl_count) {
		const struct http_header *h = &r->headers[f->cl_index];

		if (content_length(h->value, h->value_len, &cl) != 0 || cl != 0)
			return fail(p, 400, "Content-Length in a response without body");
	}
	return 0;
}

static int
response_framing(struct parse *p, int head, int connect, struct http_response *r)
{
	struct framing f;
	int res, s = r->status;

	if ((res = scan_fields(p, r->headers, r->num_headers, &f)) != 0)
		return res;
	if (f.te_count && r->minor_version == 0)
		return fail(p, 400, "Transfer-Encoding in HTTP/1.0");
	if (f.cl_count) {
		const struct http_header *h = &r->headers[f.cl_index];

		if (content_length(h->value, h->value_len, &r->content_length) != 0)
			return fail(p, 400, "malformed Content-Length");
	}
	if ((s >= 100 && s < 200) || s == 204 || (connect && s >= 200 && s < 300)) {
		if ((res = no_framing(p, r, &f)) != 0)
			return res;
		r->content_length = 0;
		r->body = s == 101 || (connect && s >= 200 && s < 300) ? HTTP_BODY_TUNNEL
		                                                       : HTTP_BODY_NONE;
	} else if (head || s == 304) {
		/* The fields describe the representation, not this message. */
		r->content_length = 0;
		r->body = HTTP_BODY_NONE;
	} else if (f.te_count) {
		if ((res = check_te(p, &r->headers[f.te_index])) != 0)
			return res;
		r->body = HTTP_BODY_CHUNKED;
	} else if (f.cl_count) {
		r->body = HTTP_BODY_LENGTH;
	} else {
		r->body = HTTP_BODY_CLOSE;
	}
	r->keep_alive = r->body != HTTP_BODY_CLOSE && r->body != HTTP_BODY_TUNNEL &&
	                keep_alive(r->minor_version, &f);
	return 0;
}

int
http_parse_response(const char *buf, size_t len, const struct http_limits *limits,
                    int request_was_head, int request_was_connect, struct http_response *out)
{
	struct http_limits lim;
	struct parse p;
	size_t pos = 0;
	int r;

	memset(out, 0, sizeof(*out));
	limits_resolve(limits, &lim);
	parse_init(&p, buf, len, &lim);
	if ((r = status_line(&p, &pos, out)) != 0 ||
	    (r = fields(&p, &pos, lim.max_headers, out->headers, &out->num_headers)) != 0 ||
	    (r = response_framing(&p, request_was_head, request_was_connect, out)) != 0) {
		if (r == HTTP_ERROR) {
			/* Whatever the upstream did wrong, our client gets a 502. */
			out->err_status = 502;
			out->err_reason = p.reason;
		}
		return r;
	}
	return (int)pos;
}

int
http_connection_lists(const struct http_header *headers, size_t num_headers, const char *name,
                      size_t name_len)
{
	for (size_t i = 0; i < num_headers; i++) {
		size_t pos = 0, tl;
		const char *t;

		if (!eq_ci(headers[i].name, headers[i].name_len, "connection"))
			continue;
		while (list_next(headers[i].value, headers[i].value_len, &pos, &t, &tl) == 1) {
			size_t k = 0;

			while (k < tl && k < name_len &&
			       lower((unsigned char)t[k]) == lower((unsigned char)name[k]))
				k++;
			if (k == tl && k == name_len)
				return 1;
		}
	}
	return 0;
}

int
http_header_find(const struct http_header *headers, size_t num_headers, const char *name,
                 size_t from)
{
	for (size_t i = from; i < num_headers && i <= INT_MAX; i++)
		if (eq_ci(headers[i].name, headers[i].name_len, name))
			return (int)i;
	return -1;
}

/* Chunked decoder states. */
enum {
	CH_SIZE,           /* chunk-size digits */
	CH_EXT_NAME_FIRST, /* after ';' */
	CH_EXT_NAME,
	CH_EXT_VALUE_FIRST, /* after '=' */
	CH_EXT_TOKEN,
	CH_EXT_QUOTED,
	CH_EXT_QPAIR,      /* after '\' inside quotes */
	CH_EXT_QUOTED_END, /* after the closing quote */
	CH_SIZE_LF,
	CH_DATA,
	CH_DATA_CR,
	CH_DATA_LF,
	CH_TRAILER_START,
	CH_TRAILER_NAME,
	CH_TRAILER_VALUE,
	CH_TRAILER_LF,
	CH_FINAL_LF,
	CH_DONE,
	CH_ERROR,
};

void
http_chunked_init(struct http_chunked *c, const struct http_limits *limits)
{
	struct http_limits lim;

	limits_resolve(limits, &lim);
	memset(c, 0, sizeof(*c));
	c->state = CH_SIZE;
	c->max_trailer_len = lim.max_head;
	c->max_trailers = lim.max_headers;
}

static int
chunk_fail(struct http_chunked *c, const char *reason)
{
	c->state = CH_ERROR;
	c->err_status = 400;
	c->err_reason = reason;
	return HTTP_ERROR;
}

/* The size line ends: CR here, LF next. */
static int
size_line_end(struct http_chunked *c, unsigned char ch)
{
	if (ch == '\r') {
		c->state = CH_SIZE_LF;
		return 0;
	}
	if (ch == ';') {
		c->state = CH_EXT_NAME_FIRST;
		return 0;
	}
	if (ch == '\n')
		return chunk_fail(c, "bare LF in chunk size line");
	return chunk_fail(c, "malformed chunk extension");
}

/* Trailer names that would change framing or routing if merged as headers. */
static int
forbidden_trailer(const struct http_chunked *c)
{
	return eq(c->name, c->name_len, "content-length") ||
	       eq(c->name, c->name_len, "transfer-encoding") || eq(c->name, c->name_len, "host");
}

/* One framing byte (never in CH_DATA). */
static int
chunk_step(struct http_chunked *c, unsigned char ch)
{
	int d;

	if (c->state <= CH_SIZE_LF) {
		if (++c->line_len > HTTP_CHUNK_LINE_MAX)
			return chunk_fail(c, "chunk size line too long");
	} else if (c->state >= CH_TRAILER_START && c->state <= CH_FINAL_LF) {
		if (++c->trailer_len > c->max_trailer_len)
			return chunk_fail(c, "trailer section too large");
	}
	switch (c->state) {
	case CH_SIZE:
		if ((d = hex_value(ch)) >= 0) {
			if (++c->digits > 16)
				return chunk_fail(c, "chunk size too long");
			c->remaining = c->remaining << 4 | (uint64_t)d;
			/* Like Content-Length: what a signed 64-bit length holds. */
			if (c->remaining > (uint64_t)INT64_MAX)
				return chunk_fail(c, "chunk size too large");
			return 0;
		}
		if (c->digits == 0)
			return chunk_fail(c, "malformed chunk size");
		if (ch == '\r' || ch == ';' || ch == '\n')
			return size_line_end(c, ch);
		return chunk_fail(c, "malformed chunk size");
	case CH_EXT_NAME_FIRST:
		if (!is_tchar(ch))
			return chunk_fail(c, "malformed chunk extension");
		c->state = CH_EXT_NAME;
		return 0;
	case CH_EXT_NAME:
		if (is_tchar(ch))
			return 0;
		if (ch == '=') {
			c->state = CH_EXT_VALUE_FIRST;
			return 0;
		}
		return size_line_end(c, ch);
	case CH_EXT_VALUE_FIRST:
		if (ch == '"')
			c->state = CH_EXT_QUOTED;
		else if (is_tchar(ch))
			c->state = CH_EXT_TOKEN;
		else
			return chunk_fail(c, "malformed chunk extension");
		return 0;
	case CH_EXT_TOKEN:
		if (is_tchar(ch))
			return 0;
		return size_line_end(c, ch);
	case CH_EXT_QUOTED:
		if (ch == '"')
			c->state = CH_EXT_QUOTED_END;
		else if (ch == '\\')
			c->state = CH_EXT_QPAIR;
		else if (!is_field_char(ch))
			return chunk_fail(c, "malformed chunk extension");
		return 0;
	case CH_EXT_QPAIR:
		if (!is_field_char(ch))
			return chunk_fail(c, "malformed chunk extension");
		c->state = CH_EXT_QUOTED;
		return 0;
	case CH_EXT_QUOTED_END:
		return size_line_end(c, ch);
	case CH_SIZE_LF:
		if (ch != '\n')
			return chunk_fail(c, "bare CR in chunk size line");
		c->line_len = 0;
		c->digits = 0;
		c->state = c->remaining == 0 ? CH_TRAILER_START : CH_DATA;
		return 0;
	case CH_DATA_CR:
		if (ch != '\r')
			return chunk_fail(c, "missing CRLF after chunk data");
		c->state = CH_DATA_LF;
		return 0;
	case CH_DATA_LF:
		if (ch != '\n')
			return chunk_fail(c, "missing CRLF after chunk data");
		c->state = CH_SIZE;
		return 0;
	case CH_TRAILER_START:
		if (ch == '\r') {
			c->state = CH_FINAL_LF;
			return 0;
		}
		if (ch == '\n')
			return chunk_fail(c, "bare LF in trailer section");
		if (is_ows(ch))
			return chunk_fail(c, "whitespace at start of trailer line");
		if (ch == ':')
			return chunk_fail(c, "empty trailer name");
		if (!is_tchar(ch))
			return chunk_fail(c, "invalid byte in trailer name");
		if (++c->trailers > c->max_trailers)
			return chunk_fail(c, "too many trailer fields");
		c->name_len = 0;
		c->state = CH_TRAILER_NAME;
		/* fall through */
	case CH_TRAILER_NAME:
		if (is_tchar(ch)) {
			if (c->name_len < sizeof(c->name))
				c->name[c->name_len] = (char)lower(ch);
			c->name_len++;
			return 0;
		}
		if (ch == ':') {
			if (forbidden_trailer(c))
				return chunk_fail(c, "framing field in trailer section");
			c->state = CH_TRAILER_VALUE;
			return 0;
		}
		if (is_ows(ch))
			return chunk_fail(c, "whitespace before colon in trailer");
		return chunk_fail(c, "invalid byte in trailer name");
	case CH_TRAILER_VALUE:
		if (ch == '\r') {
			c->state = CH_TRAILER_LF;
			return 0;
		}
		if (ch == '\n')
			return chunk_fail(c, "bare LF in trailer section");
		if (!is_field_char(ch))
			return chunk_fail(c, "control byte in trailer value");
		return 0;
	case CH_TRAILER_LF:
		if (ch != '\n')
			return chunk_fail(c, "bare CR in trailer section");
		c->state = CH_TRAILER_START;
		return 0;
	case CH_FINAL_LF:
		if (ch != '\n')
			return chunk_fail(c, "bare CR in trailer section");
		c->state = CH_DONE;
		return 0;
	default:
		return chunk_fail(c, "chunked decoder misused");
	}
}

ssize_t
http_chunked_feed(struct http_chunked *c, const char *buf, size_t len, const char **data,
                  size_t *data_len)
{
	size_t i = 0;

	*data = NULL;
	*data_len = 0;
	if (c->state == CH_ERROR)
		return HTTP_ERROR;
	if (len > SSIZE_MAX)
		len = SSIZE_MAX;
	while (i < len && c->state != CH_DONE) {
		if (c->state == CH_DATA) {
			size_t n = len - i;

			if (n > c->remaining)
				n = (size_t)c->remaining;
			*data = buf + i;
			*data_len = n;
			c->remaining -= n;
			if (c->remaining == 0)
				c->state = CH_DATA_CR;
			return (ssize_t)(i + n);
		}
		if (chunk_step(c, (unsigned char)buf[i]) != 0)
			return HTTP_ERROR;
		i++;
	}
	return (ssize_t)i;
}

int
http_chunked_done(const struct http_chunked *c)
{
	return c->state == CH_DONE;
}

int
http_chunked_sized(const struct http_chunked *c)
{
	return c->state >= CH_DATA && c->state != CH_ERROR;
}
