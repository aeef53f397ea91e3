/* Every error code has its own message; unknown codes are still safe. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "verr.h"

static void
test_messages_distinct(void **state)
{
	(void)state;
	for (int a = VERR_OK; a > VERR_LIMIT_LAST; a--) {
		const char *ma = verr_strerror(a);

		assert_non_null(ma);
		assert_string_not_equal(ma, "unknown error");
		for (int b = a - 1; b > VERR_LIMIT_LAST; b--)
			assert_string_not_equal(ma, verr_strerror(b));
	}
	assert_string_equal(verr_strerror(VERR_LIMIT_LAST), "unknown error");
	assert_string_equal(verr_strerror(12345), "unknown error");
}

static void
test_decrypt_errors_say_so(void **state)
{
	(void)state;
	/* Whatever part of the file is damaged, the person reads the same lead. */
	assert_non_null(strstr(verr_strerror(VERR_VAULT_FORMAT), "cannot decrypt vault"));
	assert_non_null(strstr(verr_strerror(VERR_VAULT_KDF), "cannot decrypt vault"));
	assert_non_null(strstr(verr_strerror(VERR_VAULT_DECRYPT), "cannot decrypt vault"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_messages_distinct),
	        cmocka_unit_test(test_decrypt_errors_say_so),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
