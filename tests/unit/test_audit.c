/*
 * The audit log: record format and byte rule, chain continuation across
 * reopen, crashes and rotation, detection of every kind of tampering with
 * the right file and line, failing closed on write errors, query redaction,
 * no secret in any record, and the reader used by `vault audit`.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <sodium.h>

#include "audit.h"
#include "verr.h"

static char dir[64], home[96], logp[128];
static struct secbuf *key1, *key2;

static int
setup(void **state)
{
	unsigned char k[32];

	(void)state;
	if (sodium_init() < 0)
		return -1;
	strcpy(dir, "/tmp/vrun-audit-XXXXXX");
	if (mkdtemp(dir) == NULL)
		return -1;
	snprintf(home, sizeof(home), "%s/home", dir);
	snprintf(logp, sizeof(logp), "%s/audit.log", home);
	if (mkdir(home, 0700) != 0)
		return -1;
	randombytes_buf(k, sizeof(k));
	if (secbuf_dup(k, sizeof(k), &key1) != 0)
		return -1;
	randombytes_buf(k, sizeof(k));
	return secbuf_dup(k, sizeof(k), &key2) == 0 ? 0 : -1;
}

static int
teardown(void **state)
{
	char cmd[128];

	(void)state;
	secbuf_free(key1);
	secbuf_free(key2);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

/* Each test starts without any log file. */
static int
clean(void **state)
{
	char cmd[160];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -f '%s'/audit.log*", home);
	return system(cmd) == 0 ? 0 : -1;
}

/* path.i, in one of a few static buffers so two can be used in one call. */
static char *
numbered(unsigned i)
{
	static char buf[4][160];
	static unsigned n;

	n = (n + 1) % 4;
	snprintf(buf[n], sizeof(buf[n]), "%s.%u", logp, i);
	return buf[n];
}

static char *
slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	rewind(f);
	buf = malloc((size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	*len = (size_t)n;
	return buf;
}

/* Replace the contents, keeping the file (mode 0600). */
static void
spit(const char *path, const char *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_TRUNC);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	close(fd);
}

/* Start and length (without "\n") of line n (1-based) of buf. */
static void
span(const char *buf, size_t len, int n, size_t *s, size_t *l)
{
	size_t i = 0;

	for (int k = 1; k < n; k++) {
		const char *nl = memchr(buf + i, '\n', len - i);

		assert_non_null(nl);
		i = (size_t)(nl - buf) + 1;
	}
	*s = i;
	{
		const char *nl = memchr(buf + i, '\n', len - i);

		*l = nl != NULL ? (size_t)(nl - (buf + i)) : len - i;
	}
}

static void
request(struct audit *a, const char *session, const char *method, const char *target, int denied)
{
	struct audit_request q = {0};

	q.key = denied ? NULL : "deploy-key";
	q.method = method;
	q.host = "api.example.com";
	q.port = 443;
	q.target = target;
	q.target_len = strlen(target);
	q.status = denied ? 403 : 200;
	q.bytes_up = 120;
	q.bytes_down = 3400;
	q.duration_ms = 42;
	q.denied = denied;
	q.reason = denied ? "host not bound" : "key bound to host";
	q.injected = !denied;
	assert_int_equal(audit_log_request(a, session, &q), 0);
}

static void
session_start(struct audit *a, const char *session)
{
	static const char *const keys[] = {"deploy-key", "gh"};
	static const char *const allow[] = {"pypi.org"};
	struct audit_session_start s = {.pid = 4242,
	                                .uid = 1000,
	                                .command = "./deploy.sh --prod",
	                                .cwd = "/home/u/app",
	                                .keys = keys,
	                                .nkeys = 2,
	                                .profile = "default",
	                                .allow_hosts = allow,
	                                .nallow_hosts = 1};

	assert_int_equal(audit_log_session_start(a, session, &s), 0);
}

static void
session_end(struct audit *a, const char *session)
{
	struct audit_session_end e = {.exited = 1,
	                              .exit_status = 0,
	                              .requests = 4,
	                              .denied = 1,
	                              .bytes_up = 480,
	                              .bytes_down = 13600,
	                              .duration_ms = 900};

	assert_int_equal(audit_log_session_end(a, session, &e), 0);
}

/* Six records: start, GET, POST, denied CONNECT, GET, end. */
static void
write_six(const struct secbuf *key)
{
	struct audit *a;

	assert_int_equal(audit_open(logp, key, &a), 0);
	session_start(a, "s1");
	request(a, "s1", "GET", "/v1/items?page=2", 0);
	request(a, "s1", "POST", "/v1/items", 0);
	request(a, "s1", "CONNECT", "evil.example.com:443", 1);
	request(a, "s1", "GET", "/v1/items/7", 0);
	session_end(a, "s1");
	assert_int_equal(audit_last_seq(a), 6);
	audit_close(a);
}

static void
expect_bad(const char *file, uint64_t line, int bad)
{
	struct audit_verify_result res;
	int r = audit_verify(logp, key1, &res);

	if (r != VERR_AUDIT_TAMPERED || res.bad != bad || strcmp(res.file, file) != 0 ||
	    res.line != line)
		print_error("verify: r=%d bad=%d (%s) at %s:%llu [%s], expected %d at %s:%llu\n", r,
		            res.bad, audit_bad_str(res.bad), res.file, (unsigned long long)res.line,
		            res.detail, bad, file, (unsigned long long)line);
	assert_int_equal(r, VERR_AUDIT_TAMPERED);
	assert_int_equal(res.bad, bad);
	assert_string_equal(res.file, file);
	assert_int_equal(res.line, line);
}

static void
expect_intact(uint64_t records, unsigned files)
{
	struct audit_verify_result res;
	int r = audit_verify(logp, key1, &res);

	if (r != 0)
		print_error("verify: r=%d bad=%d (%s) at %s:%llu [%s]\n", r, res.bad,
		            audit_bad_str(res.bad), res.file, (unsigned long long)res.line,
		            res.detail);
	assert_int_equal(r, 0);
	assert_int_equal(res.records, records);
	assert_int_equal(res.files, files);
}

/* ---- format ---- */

static void
test_format_and_byte_rule(void **state)
{
	char *buf, prev[65], want[65];
	size_t len, s, l;
	unsigned char mac[32], h[32];
	json_t *j;

	(void)state;
	write_six(key1);
	buf = slurp(logp, &len);
	assert_true(len > 0 && buf[len - 1] == '\n');
	span(buf, len, 1, &s, &l);
	assert_memory_equal(buf, "{\"v\":1,\"seq\":1,\"time\":\"", 23);
	/* time: YYYY-MM-DDTHH:MM:SS.mmmZ */
	assert_int_equal(buf[23 + 4], '-');
	assert_int_equal(buf[23 + 10], 'T');
	assert_int_equal(buf[23 + 19], '.');
	{
		static const char rest[] =
		        "Z\",\"type\":\"session_start\",\"session\":\"s1\","
		        "\"pid\":4242,\"uid\":1000,\"command\":\"./deploy.sh --prod\","
		        "\"cwd\":\"/home/u/app\",";

		assert_memory_equal(buf + 23 + 23, rest, sizeof(rest) - 1);
	}
	assert_non_null(strstr(buf, "\"keys\":[\"deploy-key\",\"gh\"],\"profile\":\"default\","
	                            "\"allow_hosts\":[\"pypi.org\"],\"prev\":\"0000000000"));
	assert_non_null(strstr(buf,
	                       "\"type\":\"request\",\"session\":\"s1\",\"key\":\"deploy-key\","
	                       "\"method\":\"GET\",\"host\":\"api.example.com\",\"port\":443,"
	                       "\"path\":\"/v1/items?page=\",\"status\":200,\"bytes_up\":120,"
	                       "\"bytes_down\":3400,\"duration_ms\":42,\"decision\":\"allowed\","
	                       "\"reason\":\"key bound to host\",\"injected\":true,"
	                       "\"scrubbed\":0,\"prev\":\""));
	assert_non_null(strstr(buf, "\"key\":null,\"method\":\"CONNECT\""));
	assert_non_null(strstr(buf, "\"type\":\"session_end\",\"session\":\"s1\",\"exit\":0,"
	                            "\"requests\":4,\"denied\":1,\"bytes_up\":480,"
	                            "\"bytes_down\":13600,\"duration_ms\":900,\"prev\":\""));
	/* Every line by hand: hmac over the line minus its hmac member plus "}", prev chain. */
	memset(prev, '0', 64);
	prev[64] = '\0';
	for (int n = 1; n <= 6; n++) {
		char *m;
		const char *line;

		span(buf, len, n, &s, &l);
		line = buf + s;
		j = json_loadb(line, l, 0, NULL);
		assert_non_null(j);
		assert_int_equal(json_integer_value(json_object_get(j, "seq")), n);
		assert_string_equal(json_string_value(json_object_get(j, "prev")), prev);
		json_decref(j);
		assert_memory_equal(line + l - 75, ",\"hmac\":\"", 9);
		assert_memory_equal(line + l - 2, "\"}", 2);
		m = malloc(l - 74);
		memcpy(m, line, l - 75);
		m[l - 75] = '}';
		assert_memory_equal(m + l - 75 - 73, "\"prev\":\"", 8);
		crypto_auth_hmacsha256(mac, (unsigned char *)m, l - 74, key1->data);
		sodium_bin2hex(want, sizeof(want), mac, sizeof(mac));
		assert_memory_equal(line + l - 66, want, 64);
		free(m);
		crypto_hash_sha256(h, (const unsigned char *)line, l);
		sodium_bin2hex(prev, sizeof(prev), h, sizeof(h));
	}
	free(buf);
	expect_intact(6, 1);
}

static void
test_file_mode_and_refusals(void **state)
{
	struct audit *a = (struct audit *)1;
	struct audit_reader *r = (struct audit_reader *)1;
	struct stat st;
	char other[160];

	(void)state;
	assert_int_equal(audit_open(logp, key1, &a), 0);
	audit_close(a);
	assert_int_equal(stat(logp, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	/* Loose mode. */
	chmod(logp, 0644);
	assert_int_equal(audit_open(logp, key1, &a), VERR_INSECURE_PATH);
	assert_null(a);
	assert_int_equal(audit_reader_open(logp, 0, &r), VERR_INSECURE_PATH);
	assert_null(r);
	chmod(logp, 0600);
	/* Symlink. */
	snprintf(other, sizeof(other), "%s/elsewhere", home);
	assert_int_equal(rename(logp, other), 0);
	assert_int_equal(symlink(other, logp), 0);
	assert_int_equal(audit_open(logp, key1, &a), VERR_INSECURE_PATH);
	assert_int_equal(audit_reader_open(logp, 0, &r), VERR_INSECURE_PATH);
	unlink(logp);
	unlink(other);
	/* Loose directory. */
	chmod(home, 0755);
	assert_int_equal(audit_open(logp, key1, &a), VERR_INSECURE_PATH);
	chmod(home, 0700);
	/* Wrong key size. */
	{
		struct secbuf *short_key;

		assert_int_equal(secbuf_dup("0123456789", 10, &short_key), 0);
		assert_int_equal(audit_open(logp, short_key, &a), VERR_INVALID);
		secbuf_free(short_key);
	}
}

static void
test_bad_arguments(void **state)
{
	struct audit *a;
	json_t *f = json_pack("{s:i}", "seq", 9), *g = json_pack("{s:s}", "x", "y");

	(void)state;
	assert_int_equal(audit_open(logp, key1, &a), 0);
	assert_int_equal(audit_append(a, "request", "s", f), VERR_INVALID); /* reserved name */
	json_object_clear(f);
	json_object_set_new(f, "hmac", json_string("x"));
	assert_int_equal(audit_append(a, "request", "s", f), VERR_INVALID);
	assert_int_equal(audit_append(a, "other", "s", g), VERR_INVALID);
	assert_int_equal(audit_append(a, "request", "", g), VERR_INVALID);
	assert_int_equal(audit_append(a, "request", "s\xff", g), VERR_INVALID);
	assert_int_equal(audit_last_seq(a), 0);
	assert_int_equal(audit_append(a, "request", "s", g), 0);
	assert_int_equal(audit_append(a, "session_end", "s", NULL), 0);
	assert_int_equal(audit_last_seq(a), 2);
	audit_close(a);
	json_decref(f);
	json_decref(g);
	expect_intact(2, 1);
}

/* Untrusted strings: bad UTF-8, controls, NUL-free but huge. */
static void
test_untrusted_strings(void **state)
{
	struct audit *a;
	char *big = malloc(5000), *buf;
	size_t len;
	json_t *j;
	struct audit_session_start s = {.command = NULL, .cwd = "/tmp"};

	(void)state;
	memset(big, 'a', 4999);
	big[4999] = '\0';
	assert_int_equal(audit_open(logp, key1, &a), 0);
	s.command = "rm\x01\xff\xfe -rf \xe2\x82\xac \n\x1b[31m";
	assert_int_equal(audit_log_session_start(a, "s1", &s), 0);
	s.command = big;
	assert_int_equal(audit_log_session_start(a, "s2", &s), 0);
	request(a, "s2", "GET", "/\xc3(bad?tok=\xff\xfe", 0);
	{
		struct audit_request q = {
		        .method = "GET", .target = "/a\0b?k=\0v", .target_len = 9};

		assert_int_equal(audit_log_request(a, "s2", &q), 0);
	}
	audit_close(a);
	buf = slurp(logp, &len);
	assert_non_null(strstr(buf, "\"command\":\"rm\\u0001?? -rf \xe2\x82\xac \\n\\u001B[31m\""));
	assert_non_null(strstr(buf, "\"path\":\"/?(bad?tok=\""));
	assert_non_null(strstr(buf, "\"path\":\"/a?b?k=\",\"status\":null"));
	assert_non_null(strstr(buf, "\"profile\":null"));
	/* Three lines exactly: no control byte split a record. */
	assert_int_equal(buf[len - 1], '\n');
	{
		int n = 0;

		for (size_t i = 0; i < len; i++)
			n += buf[i] == '\n';
		assert_int_equal(n, 4);
	}
	{
		size_t s0, l0;

		span(buf, len, 2, &s0, &l0);
		j = json_loadb(buf + s0, l0, 0, NULL);
		assert_non_null(j);
		assert_int_equal(strlen(json_string_value(json_object_get(j, "command"))),
		                 AUDIT_FIELD_MAX + 3);
		json_decref(j);
	}
	free(buf);
	free(big);
	expect_intact(4, 1);
}

/*
 * The request record is written as text, not through jansson: for every
 * kind of field it must be the bytes the jansson-built record would be,
 * chain and HMAC included.
 */
static void
test_request_text_is_jansson(void **state)
{
	static const char *const strs[] = {
	        NULL,
	        "",
	        "plain",
	        "quote\" backslash\\ slash/",
	        "\b\f\n\r\t \x01\x1f\x7f end",
	        "\xe2\x82\xac \xf0\x9f\x94\x91 \xc3\xa9",
	        "bad \xff\xfe \xc3( \xed\xa0\x80",
	};
	char *big = malloc(AUDIT_FIELD_MAX + 100), *text_log, *json_log, jpath[160];
	struct audit *a, *b;
	size_t alen, blen, n = 0;

	(void)state;
	assert_non_null(big);
	memset(big, 'x', AUDIT_FIELD_MAX + 99);
	memcpy(big + AUDIT_FIELD_MAX - 2, "\xe2\x82\xac\"\n", 5);
	big[AUDIT_FIELD_MAX + 99] = '\0';
	snprintf(jpath, sizeof(jpath), "%s/json.log", home);
	assert_int_equal(audit_open(logp, key1, &a), 0);
	assert_int_equal(audit_open(jpath, key1, &b), 0);
	audit_test_set_time(a, 1700000000123);
	audit_test_set_time(b, 1700000000123);
	for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]) + 1; i++) {
		const char *str = i < sizeof(strs) / sizeof(strs[0]) ? strs[i] : big;
		struct audit_request q = {
		        .key = str,
		        .method = i % 2 ? "GET" : str,
		        .host = i % 3 ? "api.example.com" : str,
		        .port = (unsigned)(i * 1000),
		        .target = str,
		        .target_len = str != NULL ? strlen(str) : 0,
		        .status = i % 4 ? (int)(100 + i) : 0,
		        .bytes_up = i % 2 ? UINT64_MAX : i,
		        .bytes_down = (uint64_t)INT64_MAX + i % 2,
		        .duration_ms = i,
		        .denied = (int)(i % 2),
		        .reason = str,
		        .injected = (int)(i % 3 == 1),
		        .scrubbed = i % 2 ? UINT32_MAX : (unsigned)i,
		};

		assert_int_equal(audit_log_request(a, "s-1", &q), 0);
		assert_int_equal(audit_test_log_request_json(b, "s-1", &q), 0);
		n++;
	}
	/* Query values are redacted alike; a target with NULs and a query. */
	{
		struct audit_request q = {
		        .method = "POST", .target = "/p?a=1&tok&b=\"x\"\0y", .target_len = 19};

		assert_int_equal(audit_log_request(a, "s-1", &q), 0);
		assert_int_equal(audit_test_log_request_json(b, "s-1", &q), 0);
		n++;
	}
	/* The session must be UTF-8 either way. */
	{
		struct audit_request q = {.method = "GET"};

		assert_int_equal(audit_log_request(a, "s\xff", &q), VERR_INVALID);
		assert_int_equal(audit_test_log_request_json(b, "s\xff", &q), VERR_INVALID);
	}
	audit_close(a);
	audit_close(b);
	text_log = slurp(logp, &alen);
	json_log = slurp(jpath, &blen);
	assert_true(alen > 0);
	assert_int_equal(alen, blen);
	assert_memory_equal(text_log, json_log, alen);
	free(text_log);
	free(json_log);
	free(big);
	unlink(jpath);
	expect_intact((int)n, 1);
}

/* ---- continuing the chain ---- */

static void
test_reopen_continues(void **state)
{
	struct audit *a;
	char *buf, h[65];
	size_t len, s, l;
	unsigned char d[32];
	json_t *j;

	(void)state;
	write_six(key1);
	assert_int_equal(audit_open(logp, key1, &a), 0);
	assert_int_equal(audit_last_seq(a), 6);
	audit_set_sync(a, 1);
	session_start(a, "s2");
	audit_close(a);
	buf = slurp(logp, &len);
	span(buf, len, 6, &s, &l);
	crypto_hash_sha256(d, (unsigned char *)buf + s, l);
	sodium_bin2hex(h, sizeof(h), d, sizeof(d));
	span(buf, len, 7, &s, &l);
	j = json_loadb(buf + s, l, 0, NULL);
	assert_int_equal(json_integer_value(json_object_get(j, "seq")), 7);
	assert_string_equal(json_string_value(json_object_get(j, "prev")), h);
	json_decref(j);
	free(buf);
	expect_intact(7, 1);
}

/* A crash mid-write leaves a cut line: reported; the writer carries on. */
static void
test_crash_tail(void **state)
{
	struct audit *a;
	static const char partial[] = "{\"v\":1,\"seq\":7,\"time\":\"2026-";
	char *buf;
	size_t len, s, l;
	int fd;

	(void)state;
	write_six(key1);
	fd = open(logp, O_WRONLY | O_APPEND);
	assert_int_equal(write(fd, partial, sizeof(partial) - 1), (ssize_t)sizeof(partial) - 1);
	close(fd);
	expect_bad("audit.log", 7, AUDIT_BAD_UNTERMINATED);
	assert_int_equal(audit_open(logp, key1, &a), 0);
	assert_int_equal(audit_last_seq(a), 6);
	request(a, "s1", "GET", "/after-crash", 0);
	audit_close(a);
	buf = slurp(logp, &len);
	span(buf, len, 7, &s, &l);
	assert_int_equal(l, sizeof(partial) - 1);
	span(buf, len, 8, &s, &l);
	assert_memory_equal(buf + s, "{\"v\":1,\"seq\":7,", 15);
	free(buf);
	/* Still reported: a crash is worth knowing about. */
	expect_bad("audit.log", 7, AUDIT_BAD_FORMAT);

	/* The very first write cut short: the chain starts at seq 1 on line 2. */
	clean(NULL);
	fd = open(logp, O_WRONLY | O_CREAT, 0600);
	assert_int_equal(write(fd, partial, 10), 10);
	close(fd);
	assert_int_equal(audit_open(logp, key1, &a), 0);
	assert_int_equal(audit_last_seq(a), 0);
	session_start(a, "s1");
	audit_close(a);
	buf = slurp(logp, &len);
	span(buf, len, 2, &s, &l);
	assert_memory_equal(buf + s, "{\"v\":1,\"seq\":1,", 15);
	free(buf);
	expect_bad("audit.log", 1, AUDIT_BAD_FORMAT);

	/* A log that ends in a long run of garbage is not guessed at. */
	clean(NULL);
	{
		char *junk = malloc(3 * AUDIT_LINE_MAX);

		memset(junk, 'x', 3 * AUDIT_LINE_MAX);
		fd = open(logp, O_WRONLY | O_CREAT, 0600);
		assert_int_equal(write(fd, junk, 3 * AUDIT_LINE_MAX), 3 * AUDIT_LINE_MAX);
		close(fd);
		free(junk);
	}
	assert_int_equal(audit_open(logp, key1, &a), VERR_AUDIT_DAMAGED);
	expect_bad("audit.log", 1, AUDIT_BAD_TOO_LONG);
}

/* ---- tampering ---- */

enum op {
	EDIT,
	EDIT_PREV,
	DELETE,
	DELETE_FIRST,
	DELETE_LAST_KEEP,
	SWAP,
	DUP,
	DUP_LAST,
	CUT,
	NO_NEWLINE,
	OTHER_HMAC,
	NO_HMAC,
	BLANK,
	NOT_JSON,
};

static void
tamper(enum op op)
{
	char *buf, *out;
	size_t len, s2, l2, s3, l3, s4, l4, s6, l6, o = 0;

	buf = slurp(logp, &len);
	out = malloc(2 * len + 8);
	span(buf, len, 2, &s2, &l2);
	span(buf, len, 3, &s3, &l3);
	span(buf, len, 4, &s4, &l4);
	span(buf, len, 6, &s6, &l6);
#define PUT(p, n) (memcpy(out + o, (p), (n)), o += (n))
	switch (op) {
	case EDIT: /* line 3: POST -> PUTS, same length */
	{
		char *m = memmem(buf + s3, l3, "\"POST\"", 6);

		assert_non_null(m);
		memcpy(m, "\"PUTS\"", 6);
		PUT(buf, len);
		break;
	}
	case EDIT_PREV: /* line 3's prev: one hex digit changed */
	{
		char *m = memmem(buf + s3, l3, "\"prev\":\"", 8);

		m[8] = m[8] == '0' ? '1' : '0';
		PUT(buf, len);
		break;
	}
	case DELETE: /* line 3 */
		PUT(buf, s3);
		PUT(buf + s4, len - s4);
		break;
	case DELETE_FIRST:
		PUT(buf + s2, len - s2);
		break;
	case DELETE_LAST_KEEP: /* not detectable: see audit.h; kept as documentation */
		PUT(buf, s6);
		break;
	case SWAP: /* lines 2 and 3 */
		PUT(buf, s2);
		PUT(buf + s3, l3 + 1);
		PUT(buf + s2, l2 + 1);
		PUT(buf + s4, len - s4);
		break;
	case DUP: /* a copy of line 2 after it */
		PUT(buf, s3);
		PUT(buf + s2, l2 + 1);
		PUT(buf + s3, len - s3);
		break;
	case DUP_LAST:
		PUT(buf, len);
		PUT(buf + s6, l6 + 1);
		break;
	case CUT: /* the last line loses its end */
		PUT(buf, len - 10);
		break;
	case NO_NEWLINE:
		PUT(buf, len - 1);
		break;
	case OTHER_HMAC: /* line 3 carries line 4's hmac */
		PUT(buf, s3 + l3 - 66);
		PUT(buf + s4 + l4 - 66, 66);
		PUT(buf + s4 - 1, len - (s4 - 1));
		break;
	case NO_HMAC: /* line 3 without its hmac member: still valid JSON */
		PUT(buf, s3 + l3 - 75);
		PUT("}", 1);
		PUT(buf + s4 - 1, len - (s4 - 1));
		break;
	case BLANK: /* an empty line before line 3 */
		PUT(buf, s3);
		PUT("\n", 1);
		PUT(buf + s3, len - s3);
		break;
	case NOT_JSON:
		PUT(buf, s3);
		PUT("hello\n", 6);
		PUT(buf + s3, len - s3);
		break;
	}
#undef PUT
	spit(logp, out, o);
	free(out);
	free(buf);
}

static void
test_tamper_each_kind(void **state)
{
	static const struct {
		enum op op;
		uint64_t line;
		int bad;
	} cases[] = {
	        {EDIT, 3, AUDIT_BAD_HMAC},
	        {EDIT_PREV, 3, AUDIT_BAD_HMAC},
	        {DELETE, 3, AUDIT_BAD_SEQ_GAP},
	        {DELETE_FIRST, 1, AUDIT_BAD_START},
	        {SWAP, 2, AUDIT_BAD_SEQ_GAP},
	        {DUP, 3, AUDIT_BAD_SEQ_BACK},
	        {DUP_LAST, 7, AUDIT_BAD_SEQ_BACK},
	        {CUT, 6, AUDIT_BAD_UNTERMINATED},
	        {NO_NEWLINE, 6, AUDIT_BAD_UNTERMINATED},
	        {OTHER_HMAC, 3, AUDIT_BAD_HMAC},
	        {NO_HMAC, 3, AUDIT_BAD_NO_HMAC},
	        {BLANK, 3, AUDIT_BAD_FORMAT},
	        {NOT_JSON, 3, AUDIT_BAD_FORMAT},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		clean(NULL);
		write_six(key1);
		expect_intact(6, 1);
		tamper(cases[i].op);
		expect_bad("audit.log", cases[i].line, cases[i].bad);
	}
	/* Whole records cut off the end leave a shorter chain: documented limit. */
	clean(NULL);
	write_six(key1);
	tamper(DELETE_LAST_KEEP);
	expect_intact(5, 1);
}

/* A record made with another key (a forgery without the vault's key). */
static void
test_other_key(void **state)
{
	struct audit *a;
	struct audit_verify_result res;

	(void)state;
	write_six(key1);
	assert_int_equal(audit_open(logp, key2, &a), 0);
	assert_int_equal(audit_last_seq(a), 6);
	request(a, "s1", "GET", "/forged", 0);
	audit_close(a);
	expect_bad("audit.log", 7, AUDIT_BAD_HMAC);
	/* And a whole log under another key fails at its first line. */
	assert_int_equal(audit_verify(logp, key2, &res), VERR_AUDIT_TAMPERED);
	assert_int_equal(res.line, 1);
	assert_int_equal(res.bad, AUDIT_BAD_HMAC);
}

/* ---- rotation ---- */

static void
write_rotating(unsigned n, uint64_t limit)
{
	struct audit *a;

	assert_int_equal(audit_open(logp, key1, &a), 0);
	audit_set_rotate(a, limit);
	for (unsigned i = 0; i < n; i++)
		request(a, "s1", "GET", "/rotating", 0);
	audit_close(a);
}

static void
test_rotation(void **state)
{
	struct audit_verify_result res;
	struct stat st;
	struct audit *a;
	char *buf;
	size_t len;

	(void)state;
	/* About two records per file; reopened in between, as vproxy restarts do. */
	write_rotating(3, 1000);
	write_rotating(4, 1000);
	assert_int_equal(stat(numbered(1), &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_int_equal(stat(numbered(3), &st), 0);
	assert_int_equal(stat(numbered(4), &st), -1);
	expect_intact(7, 4);
	buf = slurp(numbered(3), &len);
	assert_memory_equal(buf, "{\"v\":1,\"seq\":1,", 15);
	free(buf);
	buf = slurp(logp, &len);
	assert_memory_equal(buf, "{\"v\":1,\"seq\":7,", 15);
	free(buf);

	/* Tampering inside a rotated file is found there. */
	buf = slurp(numbered(2), &len);
	buf[40] ^= 1;
	spit(numbered(2), buf, len);
	expect_bad("audit.log.2", 1, AUDIT_BAD_HMAC);
	buf[40] ^= 1;
	spit(numbered(2), buf, len);
	free(buf);
	expect_intact(7, 4);

	/* A rotated file removed from the middle breaks the chain at the next file. */
	assert_int_equal(rename(numbered(2), numbered(12)), 0);
	expect_bad("audit.log.1", 1, AUDIT_BAD_SEQ_GAP);
	assert_int_equal(rename(numbered(12), numbered(2)), 0);

	/* The oldest removed while fewer than AUDIT_KEEP exist: not rotation's doing. */
	assert_int_equal(rename(numbered(3), numbered(3 + 10)), 0);
	expect_bad("audit.log.2", 1, AUDIT_BAD_START);
	/* ... nor with an empty file planted to pose as rotation's leftovers. */
	{
		int fd = open(numbered(AUDIT_KEEP), O_WRONLY | O_CREAT | O_EXCL, 0600);

		assert_true(fd >= 0);
		close(fd);
		expect_bad("audit.log.2", 1, AUDIT_BAD_START);
		unlink(numbered(AUDIT_KEEP));
	}
	assert_int_equal(rename(numbered(3 + 10), numbered(3)), 0);
	expect_intact(7, 4);

	/* A crash between rename and create: an empty audit.log continues from .1. */
	assert_int_equal(rename(numbered(3), numbered(4)), 0);
	assert_int_equal(rename(numbered(2), numbered(3)), 0);
	assert_int_equal(rename(numbered(1), numbered(2)), 0);
	assert_int_equal(rename(logp, numbered(1)), 0);
	assert_int_equal(audit_open(logp, key1, &a), 0);
	assert_int_equal(audit_last_seq(a), 7);
	request(a, "s1", "GET", "/after", 0);
	audit_close(a);
	expect_intact(8, 5);
	assert_int_equal(audit_verify(logp, key1, &res), 0);
	assert_int_equal(res.first_seq, 1);
	assert_false(res.start_unchecked);
}

/* Past AUDIT_KEEP files the oldest go; the rest still verifies, with a note. */
static void
test_rotation_drops_oldest(void **state)
{
	struct audit_verify_result res;
	struct stat st;

	(void)state;
	write_rotating(AUDIT_KEEP + 6, 1); /* one record per file */
	assert_int_equal(stat(numbered(AUDIT_KEEP), &st), 0);
	assert_int_equal(stat(numbered(AUDIT_KEEP + 1), &st), -1);
	assert_int_equal(audit_verify(logp, key1, &res), 0);
	assert_int_equal(res.records, AUDIT_KEEP + 1);
	assert_int_equal(res.files, AUDIT_KEEP + 1);
	assert_int_equal(res.first_seq, 6);
	assert_int_equal(res.last_seq, AUDIT_KEEP + 6);
	assert_true(res.start_unchecked);
	/* Tampering is still found in any kept file. */
	{
		char *buf;
		size_t len;

		buf = slurp(numbered(5), &len);
		memcpy(memmem(buf, len, "\"GET\"", 5), "\"PUT\"", 5);
		spit(numbered(5), buf, len);
		free(buf);
	}
	expect_bad("audit.log.5", 1, AUDIT_BAD_HMAC);
}

/* ---- failing closed ---- */

static void
test_write_failures(void **state)
{
	struct audit *a;
	struct rlimit old, lim;
	struct stat st;
	struct sigaction sa = {.sa_handler = SIG_IGN}, oldsa;
	int fd;
	off_t size;

	(void)state;
	write_six(key1);
	assert_int_equal(audit_open(logp, key1, &a), 0);

	/* The descriptor is gone (closed behind the writer's back, here: read-only). */
	fd = open(logp, O_RDONLY);
	assert_true(fd >= 0);
	audit_test_set_fd(a, fd);
	errno = 0;
	assert_int_equal(audit_append(a, "session_end", "s1", NULL), VERR_SYSTEM);
	assert_int_equal(errno, EBADF);
	assert_int_equal(audit_last_seq(a), 6);
	errno = 0;
	assert_int_equal(audit_ready(a), VERR_SYSTEM);
	assert_int_equal(errno, EBADF);
	audit_close(a);

	/* The file may not grow (as with a full disk): a short write, then none. */
	assert_int_equal(audit_open(logp, key1, &a), 0);
	assert_int_equal(stat(logp, &st), 0);
	size = st.st_size;
	assert_int_equal(sigaction(SIGXFSZ, &sa, &oldsa), 0);
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
	lim = old;
	lim.rlim_cur = (rlim_t)size + 20;
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
	errno = 0;
	assert_int_equal(audit_append(a, "session_end", "s1", NULL), VERR_SYSTEM);
	assert_int_equal(errno, ENOSPC);
	assert_int_equal(stat(logp, &st), 0);
	assert_int_equal(st.st_size, size); /* the fragment was taken back */
	lim.rlim_cur = (rlim_t)size;
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
	errno = 0;
	assert_int_equal(audit_append(a, "session_end", "s1", NULL), VERR_SYSTEM);
	assert_int_equal(errno, EFBIG);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
	assert_int_equal(sigaction(SIGXFSZ, &oldsa, NULL), 0);
	assert_int_equal(audit_last_seq(a), 6);
	/* Until a record is written again, the log is not ready: vproxy forwards nothing. */
	errno = 0;
	assert_int_equal(audit_ready(a), VERR_SYSTEM);
	assert_int_equal(errno, EFBIG);
	/* Space again: the chain goes on as if nothing happened. */
	assert_int_equal(audit_append(a, "session_end", "s1", NULL), 0);
	assert_int_equal(audit_last_seq(a), 7);
	assert_int_equal(audit_ready(a), 0);
	audit_close(a);
	expect_intact(7, 1);

	/* A record too long for a line. */
	assert_int_equal(audit_open(logp, key1, &a), 0);
	{
		char *big = malloc(AUDIT_LINE_MAX + 1);
		json_t *f;

		memset(big, 'a', AUDIT_LINE_MAX);
		big[AUDIT_LINE_MAX] = '\0';
		f = json_pack("{s:s}", "note", big);
		assert_int_equal(audit_append(a, "request", "s1", f), VERR_TOO_LARGE);
		json_decref(f);
		free(big);
	}
	audit_close(a);
	expect_intact(7, 1);
}

/*
 * audit_ready keeps space allocated past the end of the file, so that a
 * record due later does not meet a full disk; the space is given back at
 * close, and the file's size never includes it.
 */
static void
test_ready_reserves(void **state)
{
	struct audit *a;
	struct stat st;
	off_t size;

	(void)state;
	write_six(key1);
	assert_int_equal(audit_open(logp, key1, &a), 0);
	assert_int_equal(stat(logp, &st), 0);
	size = st.st_size;
	assert_int_equal(audit_ready(a), 0);
	assert_int_equal(stat(logp, &st), 0);
	assert_int_equal(st.st_size, size);
	/* tmpfs and the usual disk file systems reserve; others are not asked to. */
	if ((off_t)st.st_blocks * 512 >= size + 64 * 1024) {
		assert_int_equal(audit_append(a, "session_end", "s1", NULL), 0);
		assert_int_equal(audit_ready(a), 0);
		audit_close(a);
		assert_int_equal(stat(logp, &st), 0);
		assert_true((off_t)st.st_blocks * 512 < st.st_size + 64 * 1024);
	} else {
		print_message("no reservation on this file system (st_blocks %lld)\n",
		              (long long)st.st_blocks);
		audit_close(a);
	}
	expect_intact(7, 1);
	/* Not past the rotation limit: a file near it reserves nothing. */
	assert_int_equal(audit_open(logp, key1, &a), 0);
	audit_set_rotate(a, (uint64_t)size + 4096);
	assert_int_equal(audit_ready(a), 0);
	assert_int_equal(stat(logp, &st), 0);
	assert_true((off_t)st.st_blocks * 512 < st.st_size + 64 * 1024);
	audit_close(a);
	assert_int_equal(audit_ready(NULL), VERR_INVALID);
}

/* ---- redaction and secrets ---- */

static void
test_redact_path(void **state)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
	        {"/p?a=1&b=2", "/p?a=&b="},
	        {"/p", "/p"},
	        {"/", "/"},
	        {"", ""},
	        {"/p?", "/p?"},
	        {"/p?a=", "/p?a="},
	        {"/p?a=1=2&b", "/p?a=&"},
	        {"/p?token", "/p?"},
	        {"/p?tok&a=1", "/p?&a="},
	        {"/p?a=1&&b=2", "/p?a=&&b="},
	        {"/p?access_token=sk-123#frag", "/p?access_token="},
	        {"/a=b/c?x=1", "/a=b/c?x="},
	        {"/p?a=1?b=2&c=3", "/p?a=&c="},
	        {"http://h.example/p?k=v", "http://h.example/p?k="},
	        {"api.example.com:443", "api.example.com:443"},
	};
	char out[64];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(
		        audit_redact_path(cases[i].in, strlen(cases[i].in), out, sizeof(out)), 0);
		assert_string_equal(out, cases[i].out);
	}
	/* Length-bounded, not NUL-bounded. */
	assert_int_equal(audit_redact_path("/p?a=1&b=2", 5, out, sizeof(out)), 0);
	assert_string_equal(out, "/p?a=");
	/* Too small: cut, still redacted, still terminated. */
	assert_int_equal(audit_redact_path("/path?a=secret", 14, out, 7), VERR_TOO_LARGE);
	assert_string_equal(out, "/path?");
	assert_int_equal(audit_redact_path("/p?a=secret", 11, out, 1), VERR_TOO_LARGE);
	assert_string_equal(out, "");
	assert_int_equal(audit_redact_path("/p", 2, out, 0), VERR_INVALID);
}

static void
test_no_secret_in_records(void **state)
{
	static const char secret[] = "sk-live-5ecr3tV4lue";
	char target[128], keyhex[65], *buf;
	struct audit *a;
	size_t len;

	(void)state;
	assert_int_equal(audit_open(logp, key1, &a), 0);
	session_start(a, "s1");
	/* query:PARAM injection puts the secret into the query: logged without it. */
	snprintf(target, sizeof(target), "/v1/charges?api_key=%s&limit=10", secret);
	request(a, "s1", "GET", target, 0);
	snprintf(target, sizeof(target), "/v1/charges?%s", secret);
	request(a, "s1", "GET", target, 0);
	snprintf(target, sizeof(target), "/v1/x?a=1&key=%s", secret);
	request(a, "s1", "POST", target, 1);
	session_end(a, "s1");
	audit_close(a);
	buf = slurp(logp, &len);
	assert_null(memmem(buf, len, secret, strlen(secret)));
	assert_null(memmem(buf, len, "5ecr3t", 6));
	sodium_bin2hex(keyhex, sizeof(keyhex), key1->data, key1->len);
	assert_null(memmem(buf, len, keyhex, 64));
	assert_null(memmem(buf, len, keyhex, 16));
	assert_non_null(strstr(buf, "\"path\":\"/v1/charges?api_key=&limit=\""));
	free(buf);
	expect_intact(5, 1);
}

/* ---- reading ---- */

static void
test_reader_follow(void **state)
{
	struct audit *a;
	struct audit_reader *r;
	struct audit_line ln;
	uint64_t want = 1;
	int got;

	(void)state;
	/* No log yet: follow waits for it. */
	assert_int_equal(audit_reader_open(logp, 1, &r), 0);
	assert_int_equal(audit_reader_next(r, &ln), 0);
	assert_int_equal(audit_reader_files(r), 0);
	assert_int_equal(audit_open(logp, key1, &a), 0);
	for (int round = 0; round < 4; round++) {
		/* From round 2 on every record rotates the file. */
		if (round == 2)
			audit_set_rotate(a, 1);
		request(a, "s1", "GET", "/one", 0);
		request(a, "s1", "GET", "/two", 0);
		while ((got = audit_reader_next(r, &ln)) == 1) {
			json_t *j = json_loadb(ln.data, ln.len, 0, NULL);

			assert_int_equal(ln.flags, 0);
			assert_int_equal(strncmp(ln.file, "audit.log", 9), 0);
			assert_int_equal(json_integer_value(json_object_get(j, "seq")), want);
			json_decref(j);
			want++;
		}
		assert_int_equal(got, 0);
		assert_int_equal(want, 2 * (round + 1) + 1);
	}
	/* Half a line waits for its end. */
	{
		int fd = open(logp, O_WRONLY | O_APPEND);

		assert_int_equal(write(fd, "{\"half\":", 8), 8);
		assert_int_equal(audit_reader_next(r, &ln), 0);
		assert_int_equal(write(fd, "1}\n", 3), 3);
		close(fd);
		assert_int_equal(audit_reader_next(r, &ln), 1);
		assert_string_equal(ln.data, "{\"half\":1}");
	}
	audit_reader_close(r);
	audit_close(a);

	/* Without follow: oldest file first, line numbers per file. */
	assert_int_equal(audit_reader_open(logp, 0, &r), 0);
	assert_int_equal(audit_reader_next(r, &ln), 1);
	assert_string_equal(ln.file, "audit.log.4");
	assert_int_equal(ln.lineno, 1);
	assert_int_equal(audit_reader_next(r, &ln), 1);
	assert_string_equal(ln.file, "audit.log.4");
	assert_int_equal(ln.lineno, 2);
	assert_int_equal(audit_reader_files(r), 5);
	audit_reader_close(r);
}

static void
test_parse_time(void **state)
{
	static const struct {
		const char *s;
		int64_t ms;
	} good[] = {
	        {"1970-01-01T00:00:00Z", 0},
	        {"1970-01-01T00:00:01.5Z", 1500},
	        {"2026-11-29T10:00:00.123Z", 1795946400123LL},
	        {"2026-11-29t10:00:00.123456z", 1795946400123LL},
	        {"2026-11-29 11:00:00+01:00", 1795946400000LL},
	        {"2026-11-29T09:30:00-00:30", 1795946400000LL},
	        {"2024-02-29T00:00:00Z", 1709164800000LL},
	};
	static const char *const bad[] = {
	        "",
	        "2026-11-29",
	        "2026-11-29T10:00:00",
	        "2026-13-01T00:00:00Z",
	        "2025-02-29T00:00:00Z",
	        "2026-11-29T24:00:00Z",
	        "2026-11-29T10:00:00.Z",
	        "2026-11-29T10:00:00Zjunk",
	        "26-11-29T10:00:00Z",
	        "2026-11-29T10:00:00+1:00",
	};
	int64_t ms;

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		assert_int_equal(audit_parse_time(good[i].s, &ms), 0);
		assert_int_equal(ms, good[i].ms);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(audit_parse_time(bad[i], &ms), VERR_INVALID);
}

static void
test_fixed_time_and_empty_log(void **state)
{
	struct audit *a;
	struct audit_verify_result res;
	char *buf;
	size_t len;

	(void)state;
	/* Missing and empty logs are intact, with nothing in them. */
	assert_int_equal(audit_verify(logp, key1, &res), 0);
	assert_int_equal(res.records, 0);
	assert_int_equal(res.files, 0);
	assert_int_equal(audit_open(logp, key1, &a), 0);
	assert_int_equal(audit_verify(logp, key1, &res), 0);
	assert_int_equal(res.files, 1);
	audit_test_set_time(a, 1795946400123LL);
	session_end(a, "s1");
	audit_close(a);
	buf = slurp(logp, &len);
	assert_non_null(strstr(buf, "\"time\":\"2026-11-29T10:00:00.123Z\""));
	free(buf);
	expect_intact(1, 1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup(test_format_and_byte_rule, clean),
	        cmocka_unit_test_setup(test_file_mode_and_refusals, clean),
	        cmocka_unit_test_setup(test_bad_arguments, clean),
	        cmocka_unit_test_setup(test_request_text_is_jansson, clean),
	        cmocka_unit_test_setup(test_untrusted_strings, clean),
	        cmocka_unit_test_setup(test_reopen_continues, clean),
	        cmocka_unit_test_setup(test_crash_tail, clean),
	        cmocka_unit_test_setup(test_tamper_each_kind, clean),
	        cmocka_unit_test_setup(test_other_key, clean),
	        cmocka_unit_test_setup(test_rotation, clean),
	        cmocka_unit_test_setup(test_rotation_drops_oldest, clean),
	        cmocka_unit_test_setup(test_write_failures, clean),
	        cmocka_unit_test_setup(test_ready_reserves, clean),
	        cmocka_unit_test_setup(test_redact_path, clean),
	        cmocka_unit_test_setup(test_no_secret_in_records, clean),
	        cmocka_unit_test_setup(test_reader_follow, clean),
	        cmocka_unit_test_setup(test_parse_time, clean),
	        cmocka_unit_test_setup(test_fixed_time_and_empty_log, clean),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
