/*
 * escape_test.c - payload escaping, JSON strings, UTF-8 and base64.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "escape.h"

static const char *
payload(outbuf *ob, const char *data, size_t len)
{
	ob->len = 0;
	assert_int_equal(escape_payload(ob, data, len), 0);
	return ob->data;
}

static void
test_payload_escapes(void **state)
{
	outbuf ob = {0};

	(void)state;
	assert_string_equal(payload(&ob, "hello, tern", 11), "hello, tern");
	assert_string_equal(payload(&ob, "a\nb", 3), "a\\nb");
	assert_string_equal(payload(&ob, "a\tb\r", 4), "a\\tb\\r");
	assert_string_equal(payload(&ob, "back\\slash", 10), "back\\\\slash");
	assert_string_equal(payload(&ob, "\x00\x01\x7f", 3), "\\x00\\x01\\x7f");
	/* valid UTF-8 passes, stray bytes are escaped */
	assert_string_equal(payload(&ob, "caf\xc3\xa9", 5), "caf\xc3\xa9");
	assert_string_equal(payload(&ob, "\xc3(", 2), "\\xc3(");
	assert_string_equal(payload(&ob, "\xff", 1), "\\xff");
	assert_string_equal(payload(&ob, "", 0), "");
	outbuf_free(&ob);
}

static void
test_utf8(void **state)
{
	(void)state;
	assert_true(utf8_valid("plain", 5));
	assert_true(utf8_valid("\xe2\x82\xac", 3));
	assert_true(utf8_valid("\xf0\x9f\x90\xa6", 4));
	assert_false(utf8_valid("\xc0\xaf", 2));         /* overlong */
	assert_false(utf8_valid("\xed\xa0\x80", 3));     /* surrogate */
	assert_false(utf8_valid("\xf4\x90\x80\x80", 4)); /* above U+10FFFF */
	assert_false(utf8_valid("\xe2\x82", 2));         /* truncated */
}

static void
test_json_string(void **state)
{
	outbuf ob = {0};

	(void)state;
	assert_int_equal(escape_json_string(&ob, "a\"b\\c\n\x01", 7), 0);
	assert_string_equal(ob.data, "\"a\\\"b\\\\c\\n\\u0001\"");
	outbuf_free(&ob);
}

static void
test_base64(void **state)
{
	static const struct {
		const char *in;
		const char *out;
	} vectors[] = {
	    {"", ""},
	    {"f", "Zg=="},
	    {"fo", "Zm8="},
	    {"foo", "Zm9v"},
	    {"foob", "Zm9vYg=="},
	    {"fooba", "Zm9vYmE="},
	    {"foobar", "Zm9vYmFy"},
	};
	outbuf ob = {0};

	(void)state;
	for (size_t i = 0; i < sizeof(vectors) / sizeof(vectors[0]); i++) {
		ob.len = 0;
		assert_int_equal(base64_encode(&ob, vectors[i].in, strlen(vectors[i].in)), 0);
		assert_string_equal(ob.len > 0 ? ob.data : "", vectors[i].out);
	}
	ob.len = 0;
	assert_int_equal(base64_encode(&ob, "\xff\x00\x80", 3), 0);
	assert_string_equal(ob.data, "/wCA");
	outbuf_free(&ob);
}

static void
test_large_payload(void **state)
{
	size_t n = 1 << 20;
	char *big = malloc(n);
	outbuf ob = {0};

	(void)state;
	assert_non_null(big);
	memset(big, '\n', n);
	assert_int_equal(escape_payload(&ob, big, n), 0);
	assert_int_equal(ob.len, 2 * n);
	free(big);
	outbuf_free(&ob);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_payload_escapes), cmocka_unit_test(test_utf8),
	    cmocka_unit_test(test_json_string),     cmocka_unit_test(test_base64),
	    cmocka_unit_test(test_large_payload),
	};
	return cmocka_run_group_tests_name("node_escape", tests, NULL, NULL);
}
