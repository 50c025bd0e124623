/*
 * keyexpr_test.c - key and key-expression checking and matching.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "keyexpr.h"
#include "tern/tern.h"

struct match_case {
	const char *ke, *key;
	bool match;
};

static const struct match_case matches[] = {
    {"a", "a", true},
    {"a", "b", false},
    {"a/b", "a/b", true},
    {"a/b", "a/c", false},
    {"a/b", "a", false},
    {"a", "a/b", false},
    {"*", "a", true},
    {"*", "a/b", false},
    {"a/*", "a/b", true},
    {"a/*", "a", false},
    {"a/*", "a/b/c", false},
    {"*/b", "a/b", true},
    {"*/b", "a/c", false},
    {"a/*/c", "a/b/c", true},
    {"a/*/c", "a/c", false},
    {"**", "a", true},
    {"**", "a/b/c", true},
    {"a/**", "a", true},
    {"a/**", "a/b", true},
    {"a/**", "a/b/c/d", true},
    {"a/**", "b/a", false},
    {"**/c", "c", true},
    {"**/c", "a/b/c", true},
    {"**/c", "a/b/d", false},
    {"a/**/c", "a/c", true},
    {"a/**/c", "a/b/c", true},
    {"a/**/c", "a/b/b/c", true},
    {"a/**/c", "a/b/d", false},
    {"sensors/*/temp", "sensors/room-1/temp", true},
    {"sensors/*/temp", "sensors/room-1/hum", false},
    {"sensors/**", "sensors/a/b", true},
    {"sensors/**", "other/x", false},
    {"sensors/**", "sensors", true},
    {"**/**", "a", true},
    {"*/**", "a", true},
    {"*/**", "a/b/c", true},
    {"**/*/b", "b", false},
    {"**/*/b", "a/b", true},
    {"a/**/**/b", "a/b", true},
    {"a/b*", "a/bc", false}, /* invalid expression never matches */
    {"ab", "abc", false},
    {"abc", "ab", false},
    {"a/*/*", "a/b/c", true},
    {"a/*/*", "a/b", false},
    /* a chunk starting with '@' is matched only by name, never by a wildcard */
    {"**", "@tern/n1/stats", false},
    {"*/n1/stats", "@tern/n1/stats", false},
    {"*/**", "@tern/n1/stats", false},
    {"@tern/**", "@tern/n1/stats", true},
    {"@tern/*/stats", "@tern/n1/stats", true},
    {"@tern/n1/stats", "@tern/n1/stats", true},
    {"@tern/**", "@other/n1", false},
    {"a/**", "a/@x", false},
    {"a/*", "a/@x", false},
    {"a/@x", "a/@x", true},
    {"a/**/c", "a/@x/c", false},
    {"a/**", "a/b@x", true}, /* only a leading '@' reserves a chunk */
};

static void
test_match_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(matches) / sizeof(matches[0]); i++) {
		const struct match_case *c = &matches[i];
		bool got = tern_keyexpr_match(c->ke, c->key);
		if (got != c->match) {
			fail_msg("'%s' vs '%s': expected %s", c->ke, c->key,
			         c->match ? "match" : "no match");
		}
	}
	assert_true(sizeof(matches) / sizeof(matches[0]) >= 40);
}

static void
test_invalid_forms(void **state)
{
	static const char *bad_ke[] = {"",   "/a",    "a/",  "a//b",   "ab*",
	                               "*b", "a/**b", "***", "a/*x/c", "/"};
	static const char *bad_key[] = {"", "/a", "a/", "a//b", "a/*", "**", "a*b"};
	(void)state;

	for (size_t i = 0; i < sizeof(bad_ke) / sizeof(bad_ke[0]); i++) {
		assert_int_equal(tern_keyexpr_check(bad_ke[i]), TERN_EKEY);
		if (bad_ke[i][0] != '\0') {
			/* the message names the expression */
			assert_non_null(strstr(tern_last_error(), bad_ke[i]));
		}
	}
	for (size_t i = 0; i < sizeof(bad_key) / sizeof(bad_key[0]); i++) {
		assert_int_equal(tern_key_check(bad_key[i]), TERN_EKEY);
	}
	assert_int_equal(tern_keyexpr_check(NULL), TERN_EKEY);
	assert_int_equal(tern_keyexpr_check("a/*/b/**"), 0);
	assert_int_equal(tern_key_check("sensors/room-1/temp"), 0);
}

static void
test_limits(void **state)
{
	char long_key[TERN_KEY_MAX_LEN + 2];
	char many[2 * TERN_KEY_MAX_CHUNKS + 4];
	(void)state;

	memset(long_key, 'a', sizeof(long_key) - 1);
	long_key[sizeof(long_key) - 1] = '\0';
	assert_int_equal(tern_key_check(long_key), TERN_EKEY);
	for (int i = 0; i < TERN_KEY_MAX_CHUNKS + 1; i++) {
		many[2 * i] = 'a';
		many[2 * i + 1] = '/';
	}
	many[2 * TERN_KEY_MAX_CHUNKS + 1] = '\0';
	assert_int_equal(tern_key_check(many), TERN_EKEY);
	/* a key with a NUL inside its length is refused */
	assert_int_equal(tern__key_check("a\0b", 3, false), TERN_EKEY);
}

static void
test_intersect(void **state)
{
	(void)state;
	assert_true(tern_keyexpr_intersect("a/*", "*/b"));
	assert_true(tern_keyexpr_intersect("a/**", "**/z"));
	assert_true(tern_keyexpr_intersect("**", "x/y"));
	assert_false(tern_keyexpr_intersect("a/*", "b/*"));
	assert_false(tern_keyexpr_intersect("a/*/c", "a/b"));
	assert_true(tern_keyexpr_intersect("a/**/c", "a/*/*/c"));
	/* telemetry is seen only by a subscription that names "@tern" */
	assert_false(tern_keyexpr_intersect("**", "@tern/**"));
	assert_false(tern_keyexpr_intersect("*/**", "@tern/n1/stats"));
	assert_true(tern_keyexpr_intersect("@tern/**", "@tern/*/stats"));
	/* no key is matched by both: "**" matches no "@" chunk */
	assert_false(tern_keyexpr_intersect("@tern/**", "**"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_match_table),
	    cmocka_unit_test(test_invalid_forms),
	    cmocka_unit_test(test_limits),
	    cmocka_unit_test(test_intersect),
	};
	return cmocka_run_group_tests_name("keyexpr", tests, NULL, NULL);
}
