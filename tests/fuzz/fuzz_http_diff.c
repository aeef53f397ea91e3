/*
 * libFuzzer target: differential check of the request head parser against
 * an independent implementation, libhttp-parser 2.9 (as packaged by Debian),
 * fed the same bytes. A proxy is safe only if whatever sits behind it frames
 * each forwarded request as we do, so for every head http_parse_request()
 * accepts, beyond the sanitizers' own checks:
 *   - the oracle accepts it too and ends the head at the same byte, with the
 *     same method, request-target, version, header fields (names and values,
 *     in order) and body framing (none, Content-Length N or chunked);
 *   - a request without body ends at the head for the oracle too, and a
 *     Content-Length body ends at the same byte with the same bytes;
 *   - a chunked body, fed to http_chunked_feed() and to the oracle, decodes
 *     to the same bytes, and where our decoder finishes the body the oracle
 *     finishes the message (and neither finishes or fails early otherwise);
 *   - the request re-serialised in canonical form (single SPs, "name: value")
 *     parses again to the identical request.
 * Heads and bodies we refuse are not compared: refusing what the oracle
 * takes is the point of being strict. The oracle's known departures from
 * RFC 9110/9112 (methods outside its list, trailing OWS kept in values, and
 * a few refusals) are excused one by one below, each only for the exact
 * bytes that cause it.
 */
#include <ctype.h>
#include <http_parser.h>
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

/* Fields the oracle may report beyond the most we accept: only counted. */
#define ORACLE_FIELDS (HTTP_HEADERS_MAX + 1)

struct span {
	size_t off, len; /* into oracle.text */
};

/* What the oracle reported, its callbacks' pieces joined. */
struct oracle {
	http_parser p;
	size_t pos; /* offset of the byte being fed */
	char *text; /* request-target and header field bytes, as reported */
	size_t text_len, text_cap;
	char *body; /* decoded body bytes */
	size_t body_len, body_cap;
	struct span url, name[ORACLE_FIELDS], value[ORACLE_FIELDS];
	size_t num_fields;
	int in_value;
	int head_done, msg_done, failed;
	size_t head_end, msg_end, err_pos;
	enum http_errno err;
	/* The parser's view when the head ended. */
	unsigned method, major, minor, flags, upgrade;
	uint64_t content_length;
};

static struct http_request rq, rq2;

static void
append(struct oracle *o, struct span *s, const char *at, size_t len)
{
	/* Pieces of one item arrive back to back, nothing in between. */
	CHECK(s->off + s->len == o->text_len);
	CHECK(len <= o->text_cap - o->text_len);
	memcpy(o->text + o->text_len, at, len);
	o->text_len += len;
	s->len += len;
}

static int
on_url(http_parser *p, const char *at, size_t len)
{
	struct oracle *o = p->data;

	if (!o->head_done)
		append(o, &o->url, at, len);
	return 0;
}

static int
on_header_field(http_parser *p, const char *at, size_t len)
{
	struct oracle *o = p->data;
	size_t i;

	/* Trailer fields: http_chunked_feed() validates those itself. */
	if (o->head_done)
		return 0;
	if (o->num_fields == 0 || o->in_value) {
		o->num_fields++;
		o->in_value = 0;
		if (o->num_fields <= ORACLE_FIELDS) {
			i = o->num_fields - 1;
			o->name[i].off = o->text_len;
			o->name[i].len = 0;
			o->value[i].off = o->value[i].len = 0;
		}
	}
	if (o->num_fields <= ORACLE_FIELDS)
		append(o, &o->name[o->num_fields - 1], at, len);
	return 0;
}

static int
on_header_value(http_parser *p, const char *at, size_t len)
{
	struct oracle *o = p->data;
	size_t i;

	if (o->head_done)
		return 0;
	CHECK(o->num_fields > 0);
	i = o->num_fields - 1;
	if (!o->in_value) {
		o->in_value = 1;
		if (i < ORACLE_FIELDS) {
			o->value[i].off = o->text_len;
			o->value[i].len = 0;
		}
	}
	if (i < ORACLE_FIELDS)
		append(o, &o->value[i], at, len);
	return 0;
}

static int
on_headers_complete(http_parser *p)
{
	struct oracle *o = p->data;

	o->head_done = 1;
	o->head_end = o->pos + 1;
	o->method = p->method;
	o->major = p->http_major;
	o->minor = p->http_minor;
	o->flags = p->flags;
	o->upgrade = p->upgrade;
	o->content_length = p->content_length;
	return 0;
}

static int
on_body(http_parser *p, const char *at, size_t len)
{
	struct oracle *o = p->data;

	CHECK(len <= o->body_cap - o->body_len);
	memcpy(o->body + o->body_len, at, len);
	o->body_len += len;
	return 0;
}

static int
on_message_complete(http_parser *p)
{
	struct oracle *o = p->data;

	o->msg_done = 1;
	o->msg_end = o->pos + 1;
	return 0;
}

static const http_parser_settings oracle_settings = {
        .on_url = on_url,
        .on_header_field = on_header_field,
        .on_header_value = on_header_value,
        .on_headers_complete = on_headers_complete,
        .on_body = on_body,
        .on_message_complete = on_message_complete,
};

/*
 * Feed buf one byte per call, so that each callback knows the offset of the
 * byte that triggered it, until the first message is complete, the oracle
 * fails, or the input ends.
 */
static void
oracle_run(struct oracle *o, const char *buf, size_t size)
{
	memset(o, 0, sizeof(*o));
	o->text_cap = o->body_cap = size;
	o->text = malloc(size + 1);
	o->body = malloc(size + 1);
	CHECK(o->text != NULL && o->body != NULL);
	http_parser_init(&o->p, HTTP_REQUEST);
	o->p.data = o;
	for (o->pos = 0; o->pos < size && !o->msg_done; o->pos++) {
		size_t r = http_parser_execute(&o->p, &oracle_settings, buf + o->pos, 1);

		if (HTTP_PARSER_ERRNO(&o->p) != HPE_OK) {
			o->failed = 1;
			o->err = HTTP_PARSER_ERRNO(&o->p);
			o->err_pos = o->pos;
			return;
		}
		CHECK(r == 1);
	}
}

static void
oracle_free(struct oracle *o)
{
	free(o->text);
	free(o->body);
}

static int
same(const char *a, size_t alen, const char *b, size_t blen)
{
	return alen == blen && (alen == 0 || memcmp(a, b, alen) == 0);
}

/* The oracle knows a fixed list of methods and refuses every other token. */
static int
oracle_knows_method(const char *m, size_t len)
{
	for (unsigned i = 0; strcmp(http_method_str((enum http_method)i), "<unknown>") != 0; i++)
		if (same(m, len, http_method_str((enum http_method)i),
		         strlen(http_method_str((enum http_method)i))))
			return 1;
	return 0;
}

/*
 * The optional whitespace after a field's value, which our parser leaves out
 * of the value: from its end to the CR that ends the line.
 */
static const char *
trailing_ows(const struct http_header *h, size_t *len)
{
	const char *p = h->value + h->value_len;

	*len = 0;
	while (p[*len] != '\r')
		(*len)++;
	return p;
}

static int
has_htab(const char *p, size_t len)
{
	return memchr(p, '\t', len) != NULL;
}

/*
 * Known departures of the oracle from RFC 9110/9112 on heads we accept.
 * Where it refuses, it frames nothing, so nothing can be smuggled past it;
 * each case is excused only for the bytes that trigger it, and any other
 * refusal of a head we accept stays a finding.
 *
 * HTAB in the optional whitespace after a framing field's value (RFC 9110
 * 5.6.3: OWS is SP or HTAB, and not part of the value): http_parser 2.9
 * skips only SP there, and refuses "Content-Length: 5<HTAB>" at the HTAB.
 */
static int
excused_cl_htab(const char *buf, int n, const struct oracle *o)
{
	const char *ows;
	size_t ows_len, at;
	int i;

	if (o->err != HPE_INVALID_CONTENT_LENGTH || rq.body != HTTP_BODY_LENGTH ||
	    o->err_pos >= (size_t)n)
		return 0;
	i = http_header_find(rq.headers, rq.num_headers, "content-length", 0);
	CHECK(i >= 0);
	ows = trailing_ows(&rq.headers[i], &ows_len);
	at = (size_t)(ows - buf);
	/* Failed exactly at the first HTAB after the digits. */
	return at <= o->err_pos && o->err_pos < at + ows_len && buf[o->err_pos] == '\t' &&
	       !has_htab(ows, o->err_pos - at);
}

/* A field name that only begins with "Transfer-Encoding", e.g. "Transfer-Encodings". */
static int
te_prefixed(const struct http_header *h)
{
	static const char te[] = "transfer-encoding";

	if (h->name_len <= sizeof(te) - 1)
		return 0;
	for (size_t k = 0; k < sizeof(te) - 1; k++) {
		char c = h->name[k];

		if (c >= 'A' && c <= 'Z')
			c = (char)(c - 'A' + 'a');
		if (c != te[k])
			return 0;
	}
	return 1;
}

static int
has_te_prefixed(size_t from)
{
	for (size_t i = from; i < rq.num_headers; i++)
		if (te_prefixed(&rq.headers[i]))
			return 1;
	return 0;
}

/*
 * Two ways http_parser 2.9 misses the chunked coding of a request we read
 * as chunked, and takes it for transfer-coded with some other coding:
 *   - it skips only SP, not HTAB, after the coding (RFC 9110 5.6.3: OWS is
 *     SP or HTAB, and not part of the value), so "chunked<HTAB>" is to it
 *     an unknown coding;
 *   - it recognises Transfer-Encoding by name prefix, so a later field such
 *     as "Transfer-Encodingx" (an unrelated field: RFC 9110 5.1, names
 *     match exactly) clears the chunked flag the real one set.
 * It then refuses the request at the head's last byte, unless the request
 * asks for an upgrade (Upgrade and "Connection: upgrade"): then it ends the
 * message at the head and leaves the connection to the new protocol, the
 * bytes after the head being no HTTP to it at all.
 */
static int
oracle_misses_chunked(void)
{
	const char *ows;
	size_t ows_len;
	int te;

	if (rq.body != HTTP_BODY_CHUNKED)
		return 0;
	te = http_header_find(rq.headers, rq.num_headers, "transfer-encoding", 0);
	CHECK(te >= 0);
	ows = trailing_ows(&rq.headers[te], &ows_len);
	return has_htab(ows, ows_len) || has_te_prefixed((size_t)te + 1);
}

/*
 * The prefix match also makes "Transfer-Encodingx" alone mark the request
 * as transfer-coded: it refuses such a request at the head's last byte,
 * with a Content-Length as "both Content-Length and Transfer-Encoding"
 * (before the head is complete), without as "chunked is not the final
 * coding" (after).
 */
static int
excused_te_prefix(int n, const struct oracle *o)
{
	if (o->err_pos != (size_t)n - 1 || !has_te_prefixed(0))
		return 0;
	if (o->err == HPE_UNEXPECTED_CONTENT_LENGTH)
		return rq.body == HTTP_BODY_LENGTH && !o->head_done;
	if (o->err == HPE_INVALID_TRANSFER_ENCODING)
		return rq.body == HTTP_BODY_NONE && o->head_done;
	return 0;
}

static int
excused_head(const char *buf, int n, const struct oracle *o)
{
	if (!o->failed || o->err_pos >= (size_t)n)
		return 0;
	if (o->err == HPE_INVALID_TRANSFER_ENCODING && o->head_done &&
	    o->err_pos == (size_t)n - 1 && oracle_misses_chunked())
		return 1;
	return excused_cl_htab(buf, n, o) || excused_te_prefix(n, o);
}

static int
is_f(char c)
{
	return c == 'f' || c == 'F';
}

/*
 * http_parser 2.9 guards its chunk size against overflow with a cheap,
 * conservative test (size > (ULLONG_MAX - 16) / 16 before the next digit),
 * so it refuses the sixteen-digit sizes 0xfffffffffffffff0 and up, at their
 * last digit; RFC 9112 7.1 sets no limit and our decoder takes any sixteen
 * hex digits. A chunk of nearly 2^64 bytes never ends, so no later message
 * boundary can differ. Excused only when the oracle failed right there: at
 * the sixteenth digit of a chunk-size line that starts with fifteen 'f's.
 */
static int
excused_chunk_size(const char *buf, size_t body_start, const struct oracle *o)
{
	size_t e = o->err_pos;

	if (!o->failed || o->err != HPE_INVALID_CONTENT_LENGTH || e < body_start + 15)
		return 0;
	if (!isxdigit((unsigned char)buf[e]))
		return 0;
	for (size_t k = 1; k < 16; k++)
		if (!is_f(buf[e - k]))
			return 0;
	return e - 15 == body_start || buf[e - 16] == '\n';
}

struct decoded {
	int error, done;
	size_t consumed;
	char *payload;
	size_t payload_len;
};

static void
decode_chunked(const char *buf, size_t len, struct decoded *d)
{
	struct http_chunked c;
	size_t off = 0;

	d->error = d->done = 0;
	d->consumed = d->payload_len = 0;
	d->payload = malloc(len + 1);
	CHECK(d->payload != NULL);
	http_chunked_init(&c, NULL);
	while (off < len && !http_chunked_done(&c)) {
		const char *data;
		size_t data_len;
		ssize_t r = http_chunked_feed(&c, buf + off, len - off, &data, &data_len);

		if (r < 0) {
			d->error = 1;
			return;
		}
		if (data_len > 0) {
			memcpy(d->payload + d->payload_len, data, data_len);
			d->payload_len += data_len;
		}
		off += (size_t)r;
	}
	d->done = http_chunked_done(&c);
	d->consumed = off;
}

/* The head agrees field by field; value excepted, the oracle keeps trailing OWS. */
static void
compare_head(int n, const struct oracle *o)
{
	const char *m = http_method_str((enum http_method)o->method);

	CHECK(o->head_done && o->head_end == (size_t)n);
	CHECK(same(rq.method, rq.method_len, m, strlen(m)));
	CHECK(same(rq.target, rq.target_len, o->text + o->url.off, o->url.len));
	CHECK(o->major == 1 && o->minor == (unsigned)rq.minor_version);
	CHECK(o->num_fields == rq.num_headers);
	for (size_t i = 0; i < rq.num_headers; i++) {
		const struct http_header *h = &rq.headers[i];
		const char *v = o->text + o->value[i].off;

		CHECK(same(h->name, h->name_len, o->text + o->name[i].off, o->name[i].len));
		/*
		 * http_parser 2.9 reports what follows the leading OWS up to
		 * the CR, trailing OWS included; RFC 9110 5.5 excludes it.
		 */
		CHECK(o->value[i].len >= h->value_len &&
		      same(h->value, h->value_len, v, h->value_len));
		for (size_t k = h->value_len; k < o->value[i].len; k++)
			CHECK(v[k] == ' ' || v[k] == '\t');
	}
	switch (rq.body) {
	case HTTP_BODY_NONE:
		CHECK(!(o->flags & (F_CHUNKED | F_CONTENTLENGTH)));
		CHECK(o->content_length == UINT64_MAX);
		break;
	case HTTP_BODY_LENGTH:
		CHECK((o->flags & (F_CHUNKED | F_CONTENTLENGTH)) == F_CONTENTLENGTH);
		CHECK(o->content_length == rq.content_length);
		break;
	case HTTP_BODY_CHUNKED:
		if (oracle_misses_chunked()) {
			/* Not refused, so taken as an upgrade: see oracle_misses_chunked(). */
			CHECK(!(o->flags & (F_CHUNKED | F_CONTENTLENGTH)) && o->upgrade);
			CHECK(!o->failed && o->msg_done && o->msg_end == (size_t)n);
		} else {
			CHECK((o->flags & (F_CHUNKED | F_CONTENTLENGTH)) == F_CHUNKED);
		}
		break;
	default:
		CHECK(0);
	}
}

/* Where the message ends, and what its body is, given the rest of the input. */
static void
compare_body(const char *buf, size_t size, int n, const struct oracle *o)
{
	size_t start = (size_t)n, avail = size - start;
	struct decoded d;

	switch (rq.body) {
	case HTTP_BODY_NONE:
		CHECK(!o->failed && o->msg_done && o->msg_end == start && o->body_len == 0);
		break;
	case HTTP_BODY_LENGTH:
		if (rq.content_length <= avail) {
			CHECK(!o->failed && o->msg_done);
			CHECK(o->msg_end == start + rq.content_length);
			CHECK(same(buf + start, (size_t)rq.content_length, o->body, o->body_len));
		} else {
			CHECK(!o->failed && !o->msg_done);
			CHECK(same(buf + start, avail, o->body, o->body_len));
		}
		break;
	case HTTP_BODY_CHUNKED:
		if (oracle_misses_chunked())
			break; /* no body to compare: checked in compare_head() */
		decode_chunked(buf + start, avail, &d);
		if (!d.error && !excused_chunk_size(buf, start, o)) {
			CHECK(!o->failed);
			if (d.done)
				CHECK(o->msg_done && o->msg_end == start + d.consumed);
			else
				CHECK(!o->msg_done && d.consumed == avail);
			CHECK(same(d.payload, d.payload_len, o->body, o->body_len));
		}
		free(d.payload);
		break;
	default:
		CHECK(0);
	}
}

/* b is a slice of base_b, a of base_a: same place, same bytes, or both NULL. */
static int
same_sub(const char *base_a, const char *a, size_t alen, const char *base_b, const char *b,
         size_t blen)
{
	if (a == NULL || b == NULL)
		return a == NULL && b == NULL && alen == 0 && blen == 0;
	return a - base_a == b - base_b && same(a, alen, b, blen);
}

static void
round_trip(int n)
{
	char *out = malloc((size_t)n + rq.num_headers + 1), *p = out;
	int n2;

	CHECK(out != NULL);
	memcpy(p, rq.method, rq.method_len);
	p += rq.method_len;
	*p++ = ' ';
	memcpy(p, rq.target, rq.target_len);
	p += rq.target_len;
	memcpy(p, " HTTP/1.", 8);
	p += 8;
	*p++ = (char)('0' + rq.minor_version);
	*p++ = '\r';
	*p++ = '\n';
	for (size_t i = 0; i < rq.num_headers; i++) {
		memcpy(p, rq.headers[i].name, rq.headers[i].name_len);
		p += rq.headers[i].name_len;
		*p++ = ':';
		*p++ = ' ';
		memcpy(p, rq.headers[i].value, rq.headers[i].value_len);
		p += rq.headers[i].value_len;
		*p++ = '\r';
		*p++ = '\n';
	}
	*p++ = '\r';
	*p++ = '\n';
	CHECK((size_t)(p - out) <= (size_t)n + rq.num_headers);

	n2 = http_parse_request(out, (size_t)(p - out), NULL, &rq2);
	CHECK(n2 > 0 && n2 == p - out);
	CHECK(same(rq.method, rq.method_len, rq2.method, rq2.method_len));
	CHECK(same(rq.target, rq.target_len, rq2.target, rq2.target_len));
	CHECK(rq.target_form == rq2.target_form);
	CHECK(same_sub(rq.target, rq.scheme, rq.scheme_len, rq2.target, rq2.scheme,
	               rq2.scheme_len));
	CHECK(same_sub(rq.target, rq.authority, rq.authority_len, rq2.target, rq2.authority,
	               rq2.authority_len));
	CHECK(same_sub(rq.target, rq.path, rq.path_len, rq2.target, rq2.path, rq2.path_len));
	CHECK(rq.minor_version == rq2.minor_version);
	CHECK(rq.num_headers == rq2.num_headers);
	for (size_t i = 0; i < rq.num_headers; i++) {
		CHECK(same(rq.headers[i].name, rq.headers[i].name_len, rq2.headers[i].name,
		           rq2.headers[i].name_len));
		CHECK(same(rq.headers[i].value, rq.headers[i].value_len, rq2.headers[i].value,
		           rq2.headers[i].value_len));
	}
	CHECK(rq.body == rq2.body && rq.content_length == rq2.content_length);
	CHECK(rq.keep_alive == rq2.keep_alive && rq.expect_continue == rq2.expect_continue);
	CHECK(rq.upgrade == rq2.upgrade && rq.host_index == rq2.host_index);
	if (rq.host_index >= 0) {
		CHECK(rq.host == rq.headers[rq.host_index].value);
		CHECK(rq2.host == rq2.headers[rq2.host_index].value);
	}
	CHECK(same_sub(rq.host, rq.host, rq.host_len, rq2.host, rq2.host, rq2.host_len));
	CHECK(rq2.err_status == 0 && rq2.err_reason == NULL);
	free(out);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data;
	struct oracle *o;
	int n = http_parse_request(buf, size, NULL, &rq);

	if (n <= 0)
		return 0;
	round_trip(n);
	/*
	 * The oracle refuses every method outside its fixed list (RFC 9110
	 * 9.1 lets any token be a method): nothing to compare then.
	 */
	if (!oracle_knows_method(rq.method, rq.method_len))
		return 0;
	o = malloc(sizeof(*o));
	CHECK(o != NULL);
	oracle_run(o, buf, size);
	if (!excused_head(buf, n, o)) {
		CHECK(!o->failed || o->err_pos >= (size_t)n);
		compare_head(n, o);
		compare_body(buf, size, n, o);
	}
	oracle_free(o);
	free(o);
	return 0;
}
