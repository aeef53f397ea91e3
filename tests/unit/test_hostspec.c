/* HOST[:PORT] parsing, canonical form and matching. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "hostspec.h"
#include "verr.h"

static void
good(const char *in, int flags, const char *canon)
{
	struct hostspec h;
	char buf[300];

	if (hostspec_parse(in, strlen(in), flags, &h) != 0)
		fail_msg("refused good host '%s'", in);
	assert_int_equal(hostspec_format(&h, buf, sizeof(buf)), 0);
	if (strcmp(buf, canon) != 0)
		fail_msg("'%s' -> '%s', want '%s'", in, buf, canon);
	/* The canonical form is a fixed point. */
	assert_int_equal(hostspec_parse(buf, strlen(buf), flags, &h), 0);
	assert_int_equal(hostspec_format(&h, buf, sizeof(buf)), 0);
	assert_string_equal(buf, canon);
}

static void
bad(const char *in, size_t len, int flags, int want)
{
	struct hostspec h;
	int r = hostspec_parse(in, len, flags, &h);

	if (r != want)
		fail_msg("'%.*s': got %d, want %d", (int)len, in, r, want);
}

#define BAD(s, want) bad(s, strlen(s), HOSTSPEC_ALLOW_WILDCARD, want)

static void
test_good(void **state)
{
	(void)state;
	good("api.example.com", 0, "api.example.com:443");
	good("API.Example.COM", 0, "api.example.com:443");
	good("api.example.com.", 0, "api.example.com:443");
	good("api.example.com:8443", 0, "api.example.com:8443");
	good("localhost:1", 0, "localhost:1");
	good("x-1.y2.z:65535", 0, "x-1.y2.z:65535");
	good("127.0.0.1:8443", 0, "127.0.0.1:8443");
	good("0.0.0.0", 0, "0.0.0.0:443");
	good("[::1]", 0, "[::1]:443");
	good("[0:0:0:0:0:0:0:1]:80", 0, "[::1]:80");
	good("[2001:DB8::1]:8443", 0, "[2001:db8::1]:8443");
	good("*.example.com", HOSTSPEC_ALLOW_WILDCARD, "*.example.com:443");
	good("*.Example.co.uk:444", HOSTSPEC_ALLOW_WILDCARD, "*.example.co.uk:444");
	good("1a.example", 0, "1a.example:443");
	good("example.com1", 0, "example.com1:443");
}

static void
test_bad(void **state)
{
	char longlabel[80], longname[300];

	(void)state;
	BAD("", VERR_HOST);
	BAD(":443", VERR_HOST);
	BAD(".", VERR_HOST);
	BAD("a..b", VERR_HOST);
	BAD(".a.b", VERR_HOST);
	BAD("a.b..", VERR_HOST);
	BAD("-a.b", VERR_HOST);
	BAD("a-.b", VERR_HOST);
	BAD("a_b.c", VERR_HOST);
	BAD("a b.c", VERR_HOST);
	BAD("a.b/c", VERR_HOST);
	BAD("user@a.b", VERR_HOST);
	BAD("a.b:", VERR_HOST_PORT);
	BAD("a.b:0", VERR_HOST_PORT);
	BAD("a.b:00443", VERR_HOST_PORT);
	BAD("a.b:0443", VERR_HOST_PORT);
	BAD("a.b:65536", VERR_HOST_PORT);
	BAD("a.b:99999", VERR_HOST_PORT);
	BAD("a.b:123456", VERR_HOST_PORT);
	BAD("a.b:+443", VERR_HOST_PORT);
	BAD("a.b:44 3", VERR_HOST_PORT);
	BAD("a.b:443:1", VERR_HOST);
	BAD("::1", VERR_HOST);
	BAD("[::1", VERR_HOST);
	BAD("[]", VERR_HOST);
	BAD("[::1]x", VERR_HOST);
	BAD("[::1]:", VERR_HOST_PORT);
	BAD("[fe80::1%eth0]", VERR_HOST);
	BAD("[127.0.0.1]", VERR_HOST);
	/* Numeric forms other parsers read as addresses. */
	BAD("1.2.3", VERR_HOST);
	BAD("127.1", VERR_HOST);
	BAD("2130706433", VERR_HOST);
	BAD("0x7f.1", VERR_HOST);
	BAD("0x7f000001", VERR_HOST);
	BAD("a.0x1f", VERR_HOST);
	BAD("127.000.0.1", VERR_HOST);
	BAD("127.0.0.01", VERR_HOST);
	BAD("256.0.0.1", VERR_HOST);
	BAD("1.2.3.4.5", VERR_HOST);
	/* Wildcards. */
	BAD("*", VERR_HOST_WILDCARD);
	BAD("*.com", VERR_HOST_WILDCARD);
	BAD("*.*.example.com", VERR_HOST_WILDCARD);
	BAD("a.*.example.com", VERR_HOST_WILDCARD);
	BAD("*a.example.com", VERR_HOST_WILDCARD);
	BAD("*.1.2.3.4", VERR_HOST_WILDCARD);
	bad("*.example.com", 13, 0, VERR_HOST_WILDCARD);
	/* Embedded NUL. */
	bad("a.b\0c.d", 7, 0, VERR_HOST);
	bad("a.b:44\0003", 7, 0, VERR_HOST_PORT);
	/* Lengths. */
	memset(longlabel, 'a', 64);
	strcpy(longlabel + 64, ".com");
	BAD(longlabel, VERR_HOST);
	strcpy(longlabel + 63, ".com"); /* 63 bytes: the longest label */
	good(longlabel, 0,
	     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.com:443");
	for (int i = 0; i < 127; i++)
		memcpy(longname + 2 * i, "a.", 2);
	strcpy(longname + 254, "b");
	BAD(longname, VERR_HOST); /* 255 bytes */
	longname[252] = '\0';     /* 252 bytes, ends in "a." -> trailing dot stripped */
	assert_int_equal(strlen(longname), 252);
	{
		struct hostspec h;

		assert_int_equal(hostspec_parse(longname, 252, 0, &h), 0);
	}
	/* A CONNECT authority has no default port. */
	bad("a.b", 3, HOSTSPEC_REQUIRE_PORT, VERR_HOST_PORT);
}

static int
matches(const char *rule, const char *target)
{
	struct hostspec r, t;

	assert_int_equal(hostspec_parse(rule, strlen(rule), HOSTSPEC_ALLOW_WILDCARD, &r), 0);
	assert_int_equal(hostspec_parse(target, strlen(target), 0, &t), 0);
	return hostspec_match(&r, &t);
}

static void
test_match(void **state)
{
	(void)state;
	assert_true(matches("api.example.com", "API.EXAMPLE.COM:443"));
	assert_true(matches("api.example.com", "api.example.com."));
	assert_false(matches("api.example.com", "api.example.com:444"));
	assert_false(matches("api.example.com", "api.example.com.evil"));
	assert_false(matches("api.example.com", "xapi.example.com"));
	assert_false(matches("api.example.com", "example.com"));
	assert_true(matches("*.example.com", "a.example.com"));
	assert_true(matches("*.example.com", "a.b.example.com"));
	assert_false(matches("*.example.com", "example.com"));
	assert_false(matches("*.example.com", "aexample.com"));
	assert_false(matches("*.example.com", "a.example.com.evil"));
	assert_false(matches("*.example.com", "a.example.com:80"));
	assert_true(matches("127.0.0.1:8443", "127.0.0.1:8443"));
	assert_false(matches("127.0.0.1:8443", "[::ffff:127.0.0.1]:8443"));
	assert_true(matches("[::1]:8443", "[0::1]:8443"));
	assert_false(matches("[::1]:8443", "127.0.0.1:8443"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_good),
	        cmocka_unit_test(test_bad),
	        cmocka_unit_test(test_match),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
