/*
 * keystats_test.c - per-key counters and their once-a-second lines.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "keystats.h"

/* Print into a string (caller frees). */
static char *
print_to_string(keystats *ks, double interval)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	assert_non_null(f);
	keystats_print(ks, f, interval);
	fclose(f);
	return text;
}

static void
test_rates_per_key(void **state)
{
	keystats *ks = keystats_new();
	char *out;

	(void)state;
	assert_non_null(ks);
	for (int i = 0; i < 10; i++) {
		keystats_add(ks, "a/b", 100000);
	}
	keystats_add(ks, "c", 5);
	out = print_to_string(ks, 2.0);
	assert_non_null(strstr(out, "stats key=a/b msgs_per_s=5.0 MB_per_s=0.500 drops=0\n"));
	assert_non_null(strstr(out, "stats key=c msgs_per_s=0.5 MB_per_s=0.000 drops=0\n"));
	free(out);
	/* nothing moved since: nothing printed */
	out = print_to_string(ks, 1.0);
	assert_string_equal(out, "");
	free(out);
	keystats_free(ks);
}

static void
test_from_node_json(void **state)
{
	const char *json1 = "{\"connections\":[{\"channels\":[{\"key\":\"k\",\"messages\":10,"
	                    "\"bytes\":2000,\"dropped\":1}]},{\"channels\":[{\"key\":\"k\","
	                    "\"messages\":5,\"bytes\":1000,\"dropped\":0}]}]}";
	const char *json2 = "{\"connections\":[{\"channels\":[{\"key\":\"k\",\"messages\":25,"
	                    "\"bytes\":6000,\"dropped\":3}]}]}";
	keystats *ks = keystats_new();
	char *out;

	(void)state;
	keystats_from_json(ks, json1);
	out = print_to_string(ks, 1.0);
	/* the same key on two connections is summed */
	assert_non_null(strstr(out, "stats key=k msgs_per_s=15.0 MB_per_s=0.003 drops=1\n"));
	free(out);
	keystats_from_json(ks, json2);
	out = print_to_string(ks, 1.0);
	assert_non_null(strstr(out, "stats key=k msgs_per_s=10.0 MB_per_s=0.003 drops=2\n"));
	free(out);
	/* text that is not JSON changes nothing */
	keystats_from_json(ks, "not json");
	out = print_to_string(ks, 1.0);
	assert_string_equal(out, "");
	free(out);
	keystats_free(ks);
}

static void
test_key_limit(void **state)
{
	keystats *ks = keystats_new();
	char key[32];
	char *out;

	(void)state;
	for (int i = 0; i < KEYSTATS_MAX_KEYS + 10; i++) {
		snprintf(key, sizeof(key), "k/%d", i);
		keystats_add(ks, key, 1);
	}
	out = print_to_string(ks, 1.0);
	assert_non_null(strstr(out, "stats key=(other keys) msgs_per_s=10.0"));
	free(out);
	keystats_free(ks);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_rates_per_key),
	    cmocka_unit_test(test_from_node_json),
	    cmocka_unit_test(test_key_limit),
	};
	return cmocka_run_group_tests_name("node_keystats", tests, NULL, NULL);
}
