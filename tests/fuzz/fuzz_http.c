/*
 * libFuzzer target: strict HTTP/1.1 framing. The input is parsed as a
 * request head and as a response head (with default and with small limits,
 * for each kind of request a response may answer), and whatever follows an
 * accepted chunked head, as well as the raw input, goes through the chunked
 * decoder. Properties checked, beyond the sanitizers' own:
 *   - an accepted head is CRLF-framed, every slice lies inside it, and the
 *     framing it reports agrees with its fields (one Host on 1.1, a body
 *     kind only with exactly the one field that sets it);
 *   - every proper prefix of an accepted head is incomplete, and the head
 *     alone parses to the identical result;
 *   - the chunked decoder gives the same verdict, length and payload however
 *     its input is split, and agrees with a simple non-streaming reference.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                                                   \
	do {                                                                                       \
		if (!(x))                                                                          \
			abort();                                                                   \
	} while (0)

static struct http_request rq, rq2;
static struct http_response rs, rs2;

static uint64_t
rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static int
is_tchar(unsigned char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static int
is_field_char(unsigned char c)
{
	return c == '\t' || (c >= 0x20 && c != 0x7f);
}

static int
hexval(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static int
eq_ci(const char *s, size_t n, const char *lit)
{
	if (strlen(lit) != n)
		return 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char a = (unsigned char)s[i], b = (unsigned char)lit[i];

		if (a >= 'A' && a <= 'Z')
			a = (unsigned char)(a - 'A' + 'a');
		if (a != b)
			return 0;
	}
	return 1;
}

static void
check_slice(const char *buf, size_t n, const char *p, size_t len)
{
	if (p == NULL) {
		CHECK(len == 0);
		return;
	}
	CHECK(p >= buf && len <= n && (size_t)(p - buf) <= n - len);
}

static size_t
count(const struct http_header *h, size_t n, const char *name)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++)
		k += eq_ci(h[i].name, h[i].name_len, name);
	return k;
}

/* What holds for any accepted head of n bytes. */
static void
check_head(const char *buf, int n, const struct http_limits *lim, const struct http_header *h,
           size_t num, int body)
{
	size_t len = (size_t)n,
	       max_head = lim && lim->max_head ? lim->max_head : HTTP_DEFAULT_MAX_HEAD;
	size_t max_headers = lim && lim->max_headers ? lim->max_headers : HTTP_DEFAULT_MAX_HEADERS;

	CHECK(len >= 4 && len <= max_head && memcmp(buf + len - 4, "\r\n\r\n", 4) == 0);
	for (size_t i = 0; i < len; i++) {
		CHECK(buf[i] != '\0');
		if (buf[i] == '\r')
			CHECK(i + 1 < len && buf[i + 1] == '\n');
		if (buf[i] == '\n')
			CHECK(i > 0 && buf[i - 1] == '\r');
	}
	CHECK(num <= max_headers && num <= HTTP_HEADERS_MAX);
	for (size_t i = 0; i < num; i++) {
		check_slice(buf, len, h[i].name, h[i].name_len);
		check_slice(buf, len, h[i].value, h[i].value_len);
		CHECK(h[i].name_len > 0);
		for (size_t k = 0; k < h[i].name_len; k++)
			CHECK(is_tchar((unsigned char)h[i].name[k]));
		for (size_t k = 0; k < h[i].value_len; k++)
			CHECK(is_field_char((unsigned char)h[i].value[k]));
		if (h[i].value_len > 0) {
			CHECK(h[i].value[0] != ' ' && h[i].value[0] != '\t');
			CHECK(h[i].value[h[i].value_len - 1] != ' ' &&
			      h[i].value[h[i].value_len - 1] != '\t');
		}
	}
	/* The framing fields are never ambiguous. */
	CHECK(count(h, num, "content-length") <= 1);
	CHECK(count(h, num, "transfer-encoding") <= 1);
	CHECK(!(count(h, num, "content-length") && count(h, num, "transfer-encoding")));
	if (body == HTTP_BODY_CHUNKED) {
		int i = http_header_find(h, num, "transfer-encoding", 0);

		CHECK(i >= 0 && eq_ci(h[i].value, h[i].value_len, "chunked"));
	}
	if (body == HTTP_BODY_LENGTH)
		CHECK(count(h, num, "content-length") == 1);
	CHECK(!http_connection_lists(h, num, "content-length", 14));
	CHECK(!http_connection_lists(h, num, "transfer-encoding", 17));
	CHECK(!http_connection_lists(h, num, "host", 4));
}

static void
check_request(const char *buf, size_t size, const struct http_limits *lim)
{
	int n = http_parse_request(buf, size, lim, &rq);
	size_t len, max_target = lim && lim->max_target ? lim->max_target : HTTP_DEFAULT_MAX_TARGET;
	uint64_t seed = size;

	if (n == HTTP_ERROR) {
		CHECK(rq.err_reason != NULL);
		CHECK(rq.err_status == 400 || rq.err_status == 414 || rq.err_status == 431 ||
		      rq.err_status == 505);
		return;
	}
	if (n == HTTP_INCOMPLETE)
		return;
	CHECK(n > 0 && (size_t)n <= size);
	len = (size_t)n;
	check_head(buf, n, lim, rq.headers, rq.num_headers, rq.body);
	check_slice(buf, len, rq.method, rq.method_len);
	check_slice(buf, len, rq.target, rq.target_len);
	check_slice(buf, len, rq.scheme, rq.scheme_len);
	check_slice(buf, len, rq.authority, rq.authority_len);
	check_slice(buf, len, rq.path, rq.path_len);
	check_slice(buf, len, rq.host, rq.host_len);
	CHECK(rq.method_len > 0 && rq.target_len > 0 && rq.target_len <= max_target);
	CHECK(rq.minor_version == 0 || rq.minor_version == 1);
	CHECK(rq.target_form >= HTTP_TARGET_ORIGIN && rq.target_form <= HTTP_TARGET_ASTERISK);
	CHECK((rq.target_form == HTTP_TARGET_AUTHORITY) ==
	      (rq.method_len == 7 && memcmp(rq.method, "CONNECT", 7) == 0));
	CHECK(rq.body == HTTP_BODY_NONE || rq.body == HTTP_BODY_LENGTH ||
	      rq.body == HTTP_BODY_CHUNKED);
	CHECK(rq.content_length <= (uint64_t)INT64_MAX);
	CHECK(rq.body == HTTP_BODY_LENGTH || rq.content_length == 0);
	CHECK(rq.body != HTTP_BODY_NONE ||
	      (count(rq.headers, rq.num_headers, "content-length") == 0 &&
	       count(rq.headers, rq.num_headers, "transfer-encoding") == 0));
	CHECK(rq.body != HTTP_BODY_CHUNKED || rq.minor_version == 1);
	CHECK(count(rq.headers, rq.num_headers, "host") == (rq.host_index >= 0 ? 1u : 0u));
	CHECK(rq.minor_version == 0 || rq.host_index >= 0);
	if (rq.host_index >= 0) {
		CHECK(rq.host == rq.headers[rq.host_index].value);
		for (size_t i = 0; i < rq.host_len; i++)
			CHECK(rq.host[i] != '@' && rq.host[i] != '/' && rq.host[i] != ' ');
	}
	/* A prefix is never accepted nor refused: only incomplete. */
	for (size_t k = 0; k < len; k++) {
		if (len > 256 && k != len - 1 && rnd(&seed) % 16 != 0)
			continue;
		CHECK(http_parse_request(buf, k, lim, &rq2) == HTTP_INCOMPLETE);
	}
	CHECK(http_parse_request(buf, len, lim, &rq2) == n);
	CHECK(memcmp(&rq, &rq2, sizeof(rq)) == 0);
}

static void
check_response(const char *buf, size_t size, const struct http_limits *lim, int head, int connect)
{
	int n = http_parse_response(buf, size, lim, head, connect, &rs);
	size_t len;
	uint64_t seed = size;

	if (n == HTTP_ERROR) {
		CHECK(rs.err_status == 502 && rs.err_reason != NULL);
		return;
	}
	if (n == HTTP_INCOMPLETE)
		return;
	CHECK(n > 0 && (size_t)n <= size);
	len = (size_t)n;
	check_head(buf, n, lim, rs.headers, rs.num_headers, rs.body);
	check_slice(buf, len, rs.reason, rs.reason_len);
	CHECK(rs.status >= 100 && rs.status <= 599);
	CHECK(rs.minor_version == 0 || rs.minor_version == 1);
	CHECK(rs.body >= HTTP_BODY_NONE && rs.body <= HTTP_BODY_TUNNEL);
	if (head || rs.status < 200 || rs.status == 204 || rs.status == 304 ||
	    (connect && rs.status < 300))
		CHECK(rs.body == HTTP_BODY_NONE || rs.body == HTTP_BODY_TUNNEL);
	if (rs.body == HTTP_BODY_CLOSE || rs.body == HTTP_BODY_TUNNEL)
		CHECK(!rs.keep_alive);
	CHECK(rs.body != HTTP_BODY_CHUNKED || rs.minor_version == 1);
	for (size_t k = 0; k < len; k++) {
		if (len > 256 && k != len - 1 && rnd(&seed) % 16 != 0)
			continue;
		CHECK(http_parse_response(buf, k, lim, head, connect, &rs2) == HTTP_INCOMPLETE);
	}
	CHECK(http_parse_response(buf, len, lim, head, connect, &rs2) == n);
	CHECK(memcmp(&rs, &rs2, sizeof(rs)) == 0);
}

struct outcome {
	int error;
	int done;
	size_t consumed;
	char *payload;
	size_t payload_len;
};

/* Feed buf in pieces: mode 0 whole, 1 byte by byte, 2 random sizes. */
static void
feed(const char *buf, size_t len, const struct http_limits *lim, int mode, uint64_t seed,
     struct outcome *o)
{
	struct http_chunked c;
	size_t off = 0;

	o->error = o->done = 0;
	o->consumed = o->payload_len = 0;
	http_chunked_init(&c, lim);
	while (off < len && !http_chunked_done(&c)) {
		size_t piece = len - off;

		if (mode == 1)
			piece = 1;
		else if (mode == 2 && rnd(&seed) % 4 != 0)
			piece = 1 + (size_t)(rnd(&seed) % 24);
		if (piece > len - off)
			piece = len - off;
		while (piece > 0 && !http_chunked_done(&c)) {
			const char *data;
			size_t data_len;
			ssize_t r = http_chunked_feed(&c, buf + off, piece, &data, &data_len);

			if (r < 0) {
				CHECK(r == HTTP_ERROR && c.err_status == 400 &&
				      c.err_reason != NULL);
				CHECK(http_chunked_feed(&c, buf, len, &data, &data_len) ==
				      HTTP_ERROR);
				o->error = 1;
				return;
			}
			CHECK((size_t)r <= piece);
			CHECK(r > 0 || http_chunked_done(&c));
			CHECK(data_len <= (size_t)r);
			if (data_len > 0) {
				CHECK(data + data_len == buf + off + r);
				memcpy(o->payload + o->payload_len, data, data_len);
				o->payload_len += data_len;
			} else {
				CHECK(data == NULL);
			}
			off += (size_t)r;
			piece -= (size_t)r;
		}
	}
	o->done = http_chunked_done(&c);
	o->consumed = off;
}

/*
 * Non-streaming reference of the same grammar: consumed length, -1 for an
 * error, -2 for a valid prefix. Records the longest size line seen (CRLF
 * included) and the trailer section's size and field count, which the real
 * decoder bounds.
 */
static long
reference(const char *b, size_t len, char *payload, size_t *plen, size_t *max_line, size_t *tr_len,
          size_t *tr_count)
{
	size_t pos = 0, start, t;

	*plen = *max_line = *tr_len = *tr_count = 0;
#define NEED()                                                                                     \
	do {                                                                                       \
		if (pos >= len) {                                                                  \
			if (pos - start > *max_line)                                               \
				*max_line = pos - start;                                           \
			return -2;                                                                 \
		}                                                                                  \
	} while (0)
	for (;;) {
		uint64_t size = 0;
		size_t digits = 0;

		start = pos;
		while (pos < len && hexval((unsigned char)b[pos]) >= 0) {
			if (++digits > 16)
				return -1;
			size = size << 4 | (uint64_t)hexval((unsigned char)b[pos++]);
			if (size > (uint64_t)INT64_MAX)
				return -1;
		}
		NEED();
		if (digits == 0)
			return -1;
		while (b[pos] == ';') {
			pos++;
			NEED();
			if (!is_tchar((unsigned char)b[pos]))
				return -1;
			while (pos < len && is_tchar((unsigned char)b[pos]))
				pos++;
			NEED();
			if (b[pos] == '=') {
				pos++;
				NEED();
				if (b[pos] == '"') {
					pos++;
					for (;;) {
						NEED();
						if (b[pos] == '"')
							break;
						if (b[pos] == '\\') {
							pos++;
							NEED();
						}
						if (!is_field_char((unsigned char)b[pos]))
							return -1;
						pos++;
					}
					pos++;
				} else {
					if (!is_tchar((unsigned char)b[pos]))
						return -1;
					while (pos < len && is_tchar((unsigned char)b[pos]))
						pos++;
				}
				NEED();
			}
		}
		if (b[pos] != '\r')
			return -1;
		pos++;
		NEED();
		if (b[pos] != '\n')
			return -1;
		pos++;
		if (pos - start > *max_line)
			*max_line = pos - start;
		if (size == 0)
			break;
		if (size > len - pos) {
			memcpy(payload + *plen, b + pos, len - pos);
			*plen += len - pos;
			return -2;
		}
		memcpy(payload + *plen, b + pos, (size_t)size);
		*plen += (size_t)size;
		pos += (size_t)size;
		start = pos; /* the data's CRLF is not part of a size line */
		NEED();
		if (b[pos] != '\r')
			return -1;
		pos++;
		NEED();
		if (b[pos] != '\n')
			return -1;
		pos++;
	}
#undef NEED
	t = pos;
#define NEED()                                                                                     \
	do {                                                                                       \
		if (pos >= len) {                                                                  \
			*tr_len = pos - t;                                                         \
			return -2;                                                                 \
		}                                                                                  \
	} while (0)
	for (;;) {
		size_t name;

		NEED();
		if (b[pos] == '\r') {
			pos++;
			NEED();
			if (b[pos] != '\n')
				return -1;
			*tr_len = pos + 1 - t;
			return (long)(pos + 1);
		}
		++*tr_count;
		name = pos;
		while (pos < len && is_tchar((unsigned char)b[pos]))
			pos++;
		NEED();
		if (pos == name || b[pos] != ':')
			return -1;
		if (eq_ci(b + name, pos - name, "content-length") ||
		    eq_ci(b + name, pos - name, "transfer-encoding") ||
		    eq_ci(b + name, pos - name, "host"))
			return -1;
		pos++;
		while (pos < len && is_field_char((unsigned char)b[pos]))
			pos++;
		NEED();
		if (b[pos] != '\r')
			return -1;
		pos++;
		NEED();
		if (b[pos] != '\n')
			return -1;
		pos++;
		*tr_len = pos - t;
	}
#undef NEED
}

static void
check_chunked(const char *buf, size_t len, const struct http_limits *lim, uint64_t seed)
{
	struct outcome o[3];
	char *ref_payload = malloc(len + 1);
	size_t plen, max_line, tr_len, tr_count;
	size_t max_head = lim && lim->max_head ? lim->max_head : HTTP_DEFAULT_MAX_HEAD;
	size_t max_headers = lim && lim->max_headers ? lim->max_headers : HTTP_DEFAULT_MAX_HEADERS;
	long ref;

	CHECK(ref_payload != NULL);
	for (int m = 0; m < 3; m++) {
		o[m].payload = malloc(len + 1);
		CHECK(o[m].payload != NULL);
		feed(buf, len, lim, m, seed, &o[m]);
	}
	for (int m = 1; m < 3; m++) {
		CHECK(o[m].error == o[0].error);
		if (o[0].error)
			continue;
		CHECK(o[m].done == o[0].done && o[m].consumed == o[0].consumed);
		CHECK(o[m].payload_len == o[0].payload_len);
		CHECK(memcmp(o[m].payload, o[0].payload, o[0].payload_len) == 0);
	}
	ref = reference(buf, len, ref_payload, &plen, &max_line, &tr_len, &tr_count);
	if (max_line > HTTP_CHUNK_LINE_MAX || tr_len > max_head || tr_count > max_headers ||
	    ref == -1) {
		CHECK(o[0].error);
	} else {
		CHECK(!o[0].error);
		CHECK(o[0].payload_len == plen && memcmp(o[0].payload, ref_payload, plen) == 0);
		if (ref == -2) {
			CHECK(!o[0].done && o[0].consumed == len);
		} else {
			CHECK(o[0].done && o[0].consumed == (size_t)ref);
		}
	}
	for (int m = 0; m < 3; m++)
		free(o[m].payload);
	free(ref_payload);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data;
	uint64_t seed = 0x9e3779b97f4a7c15u;
	struct http_limits small;
	const struct http_limits *lims[2];
	int n;

	for (size_t i = 0; i < size; i++)
		seed = (seed ^ data[i]) * 0x100000001b3u;
	seed |= 1;
	small.max_head = 16 + (size_t)(seed % 256);
	small.max_headers = 1 + (size_t)(seed >> 8) % 8;
	small.max_target = 1 + (size_t)(seed >> 16) % 64;
	lims[0] = NULL;
	lims[1] = &small;

	for (int l = 0; l < 2; l++) {
		check_request(buf, size, lims[l]);
		n = http_parse_request(buf, size, lims[l], &rq);
		if (n > 0 && rq.body == HTTP_BODY_CHUNKED)
			check_chunked(buf + n, size - (size_t)n, lims[l], seed);
		for (int f = 0; f < 4; f++) {
			check_response(buf, size, lims[l], f & 1, f >> 1);
			n = http_parse_response(buf, size, lims[l], f & 1, f >> 1, &rs);
			if (n > 0 && rs.body == HTTP_BODY_CHUNKED)
				check_chunked(buf + n, size - (size_t)n, lims[l], seed);
		}
	}
	check_chunked(buf, size, NULL, seed);
	check_chunked(buf, size, &small, seed);
	return 0;
}
