/*
 * Seatbelt profile generation: byte-for-byte golden files, escaping of
 * hostile paths, the proxy port, and refusals. The goldens under
 * tests/golden/ were written by hand-checking the SBPL; a mismatch writes
 * the new text next to the test binary (NAME.sb.actual) for review.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "profile.h"
#include "sbpl.h"
#include "verr.h"

#define PORT 41234

static const char *
source_dir(void)
{
	const char *s = getenv("VRUN_SOURCE_DIR");

	return s != NULL ? s : "../..";
}

/* macOS-like environment: no XDG_RUNTIME_DIR, launchd's ssh agent socket. */
static void
mac_env(void)
{
	setenv("HOME", "/Users/alice", 1);
	setenv("SSH_AUTH_SOCK", "/private/tmp/com.apple.launchd.AbC123/Listeners", 1);
	unsetenv("XDG_RUNTIME_DIR");
	unsetenv("XDG_CONFIG_HOME");
	unsetenv("GNUPGHOME");
	unsetenv("DBUS_SESSION_BUS_ADDRESS");
}

static struct profile *
parse(const char *name, const char *text)
{
	struct profile *p = NULL;
	char err[512];

	if (profile_parse(text, strlen(text), name, &p, err, sizeof(err)) != 0)
		fail_msg("profile: %s", err);
	return p;
}

static char *
read_all(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	if (f == NULL)
		return NULL;
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	assert_true(n >= 0);
	rewind(f);
	assert_non_null(buf = malloc((size_t)n + 1));
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	*len = (size_t)n;
	return buf;
}

/*
 * Minimal SBPL reader: parentheses balance outside string literals, string
 * literals close, escapes are only \" and \\, and no control bytes occur
 * inside strings. Comments run to the end of the line.
 */
static void
well_formed(const char *s, size_t n)
{
	long depth = 0;

	for (size_t i = 0; i < n; i++) {
		if (s[i] == ';') {
			while (i < n && s[i] != '\n')
				i++;
		} else if (s[i] == '(') {
			depth++;
		} else if (s[i] == ')') {
			assert_true(--depth >= 0);
		} else if (s[i] == '"') {
			for (i++; i < n && s[i] != '"'; i++) {
				assert_true((unsigned char)s[i] >= 0x20);
				if (s[i] == '\\') {
					i++;
					assert_true(i < n && (s[i] == '"' || s[i] == '\\'));
				}
			}
			assert_true(i < n);
		}
	}
	assert_int_equal(depth, 0);
	/* A deny without a filter would deny everything. */
	assert_null(strstr(s, "(deny file-read* file-write*)"));
	assert_null(strstr(s, "(deny network-outbound)"));
	assert_null(strstr(s, "(deny file-write-unlink)"));
}

static void
golden(const char *name, const struct profile *p, int port, const char *const *extra,
       const char *const *allow)
{
	char path[4096], *text = NULL, *want;
	size_t len = 0, wlen = 0;
	int r;

	if ((r = sbpl_generate_session(p, port, extra, allow, &text, &len)) != 0)
		fail_msg("%s: sbpl_generate: %d", name, r);
	assert_int_equal(strlen(text), len);
	well_formed(text, len);
	snprintf(path, sizeof(path), "%s/tests/golden/%s.sb", source_dir(), name);
	want = read_all(path, &wlen);
	if (want == NULL || wlen != len || memcmp(want, text, len) != 0) {
		char actual[256];
		FILE *f;
		size_t line = 1;

		snprintf(actual, sizeof(actual), "%s.sb.actual", name);
		if ((f = fopen(actual, "wb")) != NULL) {
			fwrite(text, 1, len, f);
			fclose(f);
		}
		for (size_t i = 0; want != NULL && i < len && i < wlen && want[i] == text[i]; i++)
			line += text[i] == '\n';
		fail_msg("%s differs from %s from line %zu (new text in %s)", name, path, line,
		         actual);
	}
	free(want);
	free(text);
}

static void
test_golden_agent(void **state)
{
	static const char *const extra[] = {
	        "/Users/alice/.local/share/vrun",
	        "/Users/alice/.local/share/vrun/run",
	        NULL,
	};
	static const char *const allow[] = {
	        "/Users/alice/.local/share/vrun/run/ca-3f2a.pem",
	        NULL,
	};
	struct profile *p = NULL;
	char dir[4096], err[512];

	(void)state;
	mac_env();
	snprintf(dir, sizeof(dir), "%s/profiles", source_dir());
	if (profile_load("agent", dir, &p, err, sizeof(err)) != 0)
		fail_msg("agent: %s", err);
	golden("agent", p, PORT, extra, allow);
	profile_free(p);
}

static void
test_golden_minimal(void **state)
{
	struct profile *p;

	(void)state;
	p = parse("empty", "");
	golden("minimal", p, 1, NULL, NULL);
	profile_free(p);
}

static void
test_golden_hostile(void **state)
{
	static const char *const extra[] = {"/var/tmp/vault\\dir/", NULL};
	struct profile *p;

	(void)state;
	mac_env();
	/* Quotes, backslashes, parentheses, ';' and '#' must stay inside their strings. */
	p = parse("hostile",
	          "hide \"/Users/alice/a \\\"quoted\\\" (dir)\"\n"
	          "hide \"/Users/alice/back\\\\slash\\\\\"\n"
	          "hide \"/x\\\")) (allow default) (deny\"\n"
	          "hide /tmp/semi;colon#hash\n"
	          "hide /etc\n"
	          "hide \"/Users/alice/Library/Application Support/j\xc3\xa9r\xc3\xb4me\"\n");
	golden("hostile", p, 65535, extra, NULL);
	profile_free(p);
}

static void
test_port(void **state)
{
	struct profile *p = parse("t", "");
	char *out = (char *)1;
	size_t len = 7;
	const char *a;

	(void)state;
	assert_int_equal(sbpl_generate(p, 65535, NULL, &out, &len), 0);
	assert_non_null(
	        a = strstr(out, "(allow network-outbound (remote ip \"localhost:65535\"))\n"));
	/* The only network allowance, after the blanket deny. */
	assert_null(strstr(a + 1, "(allow network"));
	assert_true(strstr(out, "(deny network*)\n") < a);
	assert_null(strstr(out, "(allow network*"));
	free(out);

	for (int bad = -1; bad <= 0; bad++) {
		out = (char *)1;
		len = 7;
		assert_int_equal(sbpl_generate(p, bad, NULL, &out, &len), VERR_INVALID);
		assert_null(out);
		assert_int_equal(len, 0);
	}
	assert_int_equal(sbpl_generate(p, 65536, NULL, &out, &len), VERR_INVALID);
	assert_int_equal(sbpl_generate(NULL, 80, NULL, &out, &len), VERR_INVALID);
	assert_int_equal(sbpl_generate(p, 80, NULL, NULL, &len), VERR_INVALID);
	assert_int_equal(sbpl_generate(p, 80, NULL, &out, NULL), VERR_INVALID);
	p->network = 0;
	assert_int_equal(sbpl_generate(p, 80, NULL, &out, &len), VERR_INVALID);
	profile_free(p);
}

static void
refused(struct profile *p, const char *const *extra)
{
	char *out = (char *)1;
	size_t len = 7;

	assert_int_equal(sbpl_generate(p, 80, extra, &out, &len), VERR_SBPL_STRING);
	assert_null(out);
	assert_int_equal(len, 0);
}

static void
test_refused(void **state)
{
	struct profile *p = parse("t", "hide /ok");
	char *good = p->hide[0];
	static const char *const relative[] = {"/ok", "vault", NULL};
	static const char *const dotdot[] = {"/a/../b", NULL};
	static const char *const dot[] = {"/a/./b", NULL};
	static const char *const root[] = {"//", NULL};
	static const char *const empty[] = {"", NULL};
	static const char *const newline[] = {"/a\nb", NULL};
	static const char *const del[] = {"/a\x7f", NULL};
	static const char *const badutf8[] = {"/a\xc0\xaf", NULL};
	char evil[] = "/x\")\n(allow file-read* (subpath \"/";

	(void)state;
	refused(p, relative);
	refused(p, dotdot);
	refused(p, dot);
	refused(p, root);
	refused(p, empty);
	refused(p, newline);
	refused(p, del);
	refused(p, badutf8);
	{
		char *out = (char *)1;
		size_t len = 7;

		assert_int_equal(sbpl_generate_session(p, 80, NULL, newline, &out, &len),
		                 VERR_SBPL_STRING);
		assert_int_equal(sbpl_generate_session(p, 80, NULL, relative, &out, &len),
		                 VERR_SBPL_STRING);
		assert_null(out);
	}
	/* A hide path that bypassed the parser is checked again here. */
	p->hide[0] = evil;
	refused(p, NULL);
	p->hide[0] = good;
	profile_free(p);
}

static void
test_quote(void **state)
{
	char buf[16];

	(void)state;
	assert_int_equal(sbpl_quote("/a\"b\\c", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "\"/a\\\"b\\\\c\"");
	assert_int_equal(sbpl_quote("(x) ;y", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "\"(x) ;y\"");
	/* Exact fit, and one byte short. */
	assert_int_equal(sbpl_quote("abc", buf, 6), 0);
	assert_string_equal(buf, "\"abc\"");
	assert_int_equal(sbpl_quote("abc", buf, 5), VERR_TOO_LARGE);
	assert_int_equal(sbpl_quote("a\"", buf, 5), VERR_TOO_LARGE);
	assert_int_equal(sbpl_quote("a\"", buf, 6), 0);
	assert_string_equal(buf, "\"a\\\"\"");
	assert_int_equal(sbpl_quote("", buf, 3), 0);
	assert_string_equal(buf, "\"\"");
	assert_int_equal(sbpl_quote("a\tb", buf, sizeof(buf)), VERR_SBPL_STRING);
	assert_int_equal(sbpl_quote("\xff", buf, sizeof(buf)), VERR_SBPL_STRING);
}

static void
test_paths_in_output(void **state)
{
	static const char *const extra[] = {"/vault//home/", "/tmp", "/private/tmp", NULL};
	struct profile *p = parse("t", "hide /var/run/docker.sock\nhide /Users/a/.ssh");
	char *out = NULL;
	size_t len = 0;

	(void)state;
	assert_int_equal(sbpl_generate(p, 80, extra, &out, &len), 0);
	well_formed(out, len);
	/* /var and /tmp are symlinks into /private: both spellings are denied. */
	assert_non_null(strstr(out, "(subpath \"/var/run/docker.sock\")"));
	assert_non_null(strstr(out, "(subpath \"/private/var/run/docker.sock\")"));
	assert_non_null(strstr(out, "(path-literal \"/private/var/run/docker.sock\")"));
	/* Extras are tidied and deduplicated. */
	assert_non_null(strstr(out, "(subpath \"/vault/home\")"));
	assert_null(strstr(out, "/vault//home"));
	{
		const char *first = strstr(out, "\n    (subpath \"/private/tmp\")");

		assert_non_null(first);
		assert_null(strstr(first + 1, "\n    (subpath \"/private/tmp\")"));
	}
	/* Parents cannot be renamed; "/" is never named. */
	assert_non_null(strstr(out, "(literal \"/Users/a\")"));
	assert_non_null(strstr(out, "(literal \"/Users\")"));
	assert_non_null(strstr(out, "(literal \"/private/var/run\")"));
	assert_null(strstr(out, "(literal \"/\")"));
	free(out);
	profile_free(p);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_golden_agent),    cmocka_unit_test(test_golden_minimal),
	        cmocka_unit_test(test_golden_hostile),  cmocka_unit_test(test_port),
	        cmocka_unit_test(test_refused),         cmocka_unit_test(test_quote),
	        cmocka_unit_test(test_paths_in_output),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
