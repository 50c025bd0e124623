/*
 * jtext_test.c - JSON text: a fixed buffer behaves like snprintf (cut, NUL
 * ended, the whole length counted), a growing one keeps everything and its
 * memory, strings are escaped.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "jtext.h"

static void
test_fixed_is_like_snprintf(void **state)
{
	char buf[8];
	struct jtext t;
	(void)state;

	jtext_fixed(&t, buf, sizeof(buf));
	jtext_printf(&t, "{\"a\":%d", 12);
	jtext_printf(&t, ",\"b\":%d}", 345);
	assert_int_equal(t.len, strlen("{\"a\":12,\"b\":345}"));
	assert_string_equal(buf, "{\"a\":12");
	jtext_fixed(&t, NULL, 0); /* measuring only */
	jtext_str(&t, "abc");
	assert_int_equal(t.len, 5);
}

static void
test_growing_keeps_all(void **state)
{
	struct jtext t = {0};
	char *first;
	(void)state;

	jtext_restart(&t);
	for (int i = 0; i < 2000; i++) {
		jtext_printf(&t, "%04d,", i);
	}
	assert_int_equal(t.len, 2000 * 5);
	assert_memory_equal(t.buf + 5 * 1999, "1999,", 5);
	assert_int_equal(t.buf[t.len], '\0');
	first = t.buf;
	jtext_restart(&t);
	jtext_printf(&t, "x");
	assert_ptr_equal(t.buf, first); /* the memory is kept */
	assert_string_equal(t.buf, "x");
	free(t.buf);
}

static void
test_escapes(void **state)
{
	char buf[64];
	struct jtext t;
	(void)state;

	jtext_fixed(&t, buf, sizeof(buf));
	jtext_str(&t, "a\"b\\c\n\x01");
	assert_string_equal(buf, "\"a\\\"b\\\\c\\u000a\\u0001\"");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_fixed_is_like_snprintf),
	    cmocka_unit_test(test_growing_keeps_all),
	    cmocka_unit_test(test_escapes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
