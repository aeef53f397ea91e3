/* --resolve HOST:PORT:ADDR parsing and lookup. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "resolve.h"
#include "verr.h"

static void
test_good(void **state)
{
	static struct resolve_map m;
	struct hostspec h;
	const struct resolve_entry *e;
	char buf[INET6_ADDRSTRLEN];

	(void)state;
	assert_int_equal(resolve_add(&m, "API.Test:8443:127.0.0.2"), 0);
	assert_int_equal(resolve_add(&m, "v6.test:443:[::1]"), 0);
	assert_int_equal(resolve_add(&m, "[::1]:9000:127.0.0.1"), 0);
	assert_int_equal(hostspec_parse("api.test:8443", 13, 0, &h), 0);
	assert_non_null(e = resolve_find(&m, &h));
	assert_int_equal(e->addr.ss_family, AF_INET);
	inet_ntop(AF_INET, &((const struct sockaddr_in *)&e->addr)->sin_addr, buf, sizeof(buf));
	assert_string_equal(buf, "127.0.0.2");
	assert_int_equal(ntohs(((const struct sockaddr_in *)&e->addr)->sin_port), 8443);
	assert_int_equal(hostspec_parse("v6.test", 7, 0, &h), 0);
	assert_non_null(e = resolve_find(&m, &h));
	assert_int_equal(e->addr.ss_family, AF_INET6);
	assert_int_equal(hostspec_parse("[::1]:9000", 10, 0, &h), 0);
	assert_non_null(resolve_find(&m, &h));
	/* Another port of the same name is not covered. */
	assert_int_equal(hostspec_parse("api.test:443", 12, 0, &h), 0);
	assert_null(resolve_find(&m, &h));
}

static void
test_bad(void **state)
{
	static const char *const bad[] = {
	        "api.test:443",           /* no address */
	        "api.test:127.0.0.1",     /* no port */
	        "api.test::127.0.0.1",    /* empty port */
	        "api.test:0:127.0.0.1",   /* port 0 */
	        "api.test:443:",          /* empty address */
	        "api.test:443:0x7f.1",    /* not a strict dotted quad */
	        "api.test:443:127.1",     /* short form */
	        "api.test:443:localhost", /* a name, not an address */
	        "api.test:443:::1",       /* IPv6 without brackets */
	        "api.test:443:[::1",      /* unclosed bracket */
	        "*.test:443:127.0.0.1",   /* wildcards are for bindings only */
	        "a_b.test:443:127.0.0.1", "[::1:443:127.0.0.1",
	};
	static struct resolve_map m;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (resolve_add(&m, bad[i]) == 0)
			fail_msg("accepted '%s'", bad[i]);
	assert_int_equal(m.n, 0);
	for (int i = 0; i < RESOLVE_MAX; i++)
		assert_int_equal(resolve_add(&m, "a.test:1:127.0.0.1"), 0);
	assert_int_equal(resolve_add(&m, "a.test:1:127.0.0.1"), VERR_TOO_MANY);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_good),
	        cmocka_unit_test(test_bad),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
