/* VAULT_HOME / XDG resolution, as DESIGN.md specifies it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "paths.h"
#include "verr.h"

static void
clear_env(void)
{
	unsetenv("VAULT_HOME");
	unsetenv("XDG_DATA_HOME");
	unsetenv("XDG_RUNTIME_DIR");
	setenv("HOME", "/home/u", 1);
}

static void
test_default_home(void **state)
{
	struct paths p;

	(void)state;
	clear_env();
	assert_int_equal(paths_resolve(&p), 0);
	assert_string_equal(p.home, "/home/u/.local/share/vrun");
	assert_string_equal(p.db, "/home/u/.local/share/vrun/vault.db");
	assert_string_equal(p.audit, "/home/u/.local/share/vrun/audit.log");
	assert_string_equal(p.lock, "/home/u/.local/share/vrun/vault.lock");
	assert_string_equal(p.runtime, "/home/u/.local/share/vrun/run");
	paths_clear(&p);
}

static void
test_xdg(void **state)
{
	struct paths p;

	(void)state;
	clear_env();
	setenv("XDG_DATA_HOME", "/data", 1);
	setenv("XDG_RUNTIME_DIR", "/run/user/7", 1);
	assert_int_equal(paths_resolve(&p), 0);
	assert_string_equal(p.home, "/data/vrun");
	assert_string_equal(p.runtime, "/run/user/7/vrun");
	paths_clear(&p);

	/* Relative XDG values are invalid per the spec and ignored. */
	setenv("XDG_DATA_HOME", "data", 1);
	setenv("XDG_RUNTIME_DIR", "run", 1);
	assert_int_equal(paths_resolve(&p), 0);
	assert_string_equal(p.home, "/home/u/.local/share/vrun");
	assert_string_equal(p.runtime, "/home/u/.local/share/vrun/run");
	paths_clear(&p);
}

static void
test_vault_home_isolates(void **state)
{
	struct paths a, b;

	(void)state;
	clear_env();
	setenv("XDG_DATA_HOME", "/data", 1);
	setenv("VAULT_HOME", "/tmp/one/", 1);
	assert_int_equal(paths_resolve(&a), 0);
	assert_string_equal(a.home, "/tmp/one");
	assert_string_equal(a.db, "/tmp/one/vault.db");
	assert_string_equal(a.runtime, "/tmp/one/run");
	paths_clear(&a);

	/* With a shared XDG_RUNTIME_DIR, two homes still get two sockets. */
	setenv("XDG_RUNTIME_DIR", "/run/user/7", 1);
	assert_int_equal(paths_resolve(&a), 0);
	setenv("VAULT_HOME", "/tmp/two", 1);
	assert_int_equal(paths_resolve(&b), 0);
	assert_true(strncmp(a.runtime, "/run/user/7/vrun/h-", 19) == 0);
	assert_true(strncmp(b.runtime, "/run/user/7/vrun/h-", 19) == 0);
	assert_string_not_equal(a.runtime, b.runtime);
	paths_clear(&b);
	/* Same home spelled with a trailing slash: same socket. */
	setenv("VAULT_HOME", "/tmp/one/", 1);
	assert_int_equal(paths_resolve(&b), 0);
	assert_string_equal(a.runtime, b.runtime);
	paths_clear(&a);
	paths_clear(&b);
}

static void
test_bad_home(void **state)
{
	struct paths p;

	(void)state;
	clear_env();
	setenv("VAULT_HOME", "relative/dir", 1);
	assert_int_equal(paths_resolve(&p), VERR_NO_HOME);
	assert_null(p.home);
	setenv("VAULT_HOME", "", 1);
	assert_int_equal(paths_resolve(&p), VERR_NO_HOME);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_default_home),
	        cmocka_unit_test(test_xdg),
	        cmocka_unit_test(test_vault_home_isolates),
	        cmocka_unit_test(test_bad_home),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
