/*
 * reports_test.c - the latest report of each node for `tern top`: which
 * keys are reports, the newest wins, a text that is not a report is
 * ignored, a silent node is forgotten, and a thread filing reports while
 * the main thread reads them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pthread.h>

#include <cmocka.h>

#include "reports.h"

static void
put(reports *rs, const char *key, const char *text, double now)
{
	assert_int_equal(reports_put(rs, key, text, strlen(text), now), 0);
}

static void
test_keys_and_order(void **state)
{
	reports *rs = reports_new();

	(void)state;
	assert_non_null(rs);
	put(rs, "@tern/b/stats", "{\"node\":\"b\",\"interval_ms\":500}", 0);
	put(rs, "@tern/a/stats", "{\"node\":\"a\"}", 0);
	/* not reports: other keys under @tern, a data key, an id with a '/' */
	put(rs, "@tern/c/other", "{\"node\":\"c\"}", 0);
	put(rs, "@tern/d/e/stats", "{\"node\":\"d\"}", 0);
	put(rs, "demo/stats", "{\"node\":\"x\"}", 0);
	put(rs, "@tern//stats", "{\"node\":\"\"}", 0);
	reports_update(rs, 0.1);
	assert_int_equal(reports_count(rs), 2);
	assert_string_equal(reports_at(rs, 0)->id, "a");
	assert_string_equal(reports_at(rs, 1)->id, "b");
	assert_null(reports_at(rs, 2));
	assert_string_equal(reports_at(rs, 1)->text, "{\"node\":\"b\",\"interval_ms\":500}");
	assert_true(reports_at(rs, 0)->interval == 1.0); /* the default */
	assert_true(reports_at(rs, 1)->interval == 0.5);
	assert_true(reports_max_interval(rs) == 1.0);
	assert_int_equal(reports_rejected(rs), 0);
	reports_free(rs);
}

static void
test_newest_wins(void **state)
{
	reports *rs = reports_new();

	(void)state;
	put(rs, "@tern/a/stats", "{\"node\":\"a\",\"uptime_s\":1}", 0);
	put(rs, "@tern/a/stats", "{\"node\":\"a\",\"uptime_s\":2}", 1);
	reports_update(rs, 1);
	assert_int_equal(reports_count(rs), 1);
	assert_string_equal(reports_at(rs, 0)->text, "{\"node\":\"a\",\"uptime_s\":2}");
	put(rs, "@tern/a/stats", "{\"node\":\"a\",\"uptime_s\":3}", 2);
	reports_update(rs, 2);
	assert_int_equal(reports_count(rs), 1);
	assert_true(cJSON_GetObjectItem(reports_at(rs, 0)->json, "uptime_s")->valuedouble == 3);
	assert_true(reports_at(rs, 0)->heard == 2);
	reports_free(rs);
}

static void
test_not_reports(void **state)
{
	reports *rs = reports_new();

	(void)state;
	put(rs, "@tern/a/stats", "not json", 0);
	put(rs, "@tern/b/stats", "[1,2]", 0);
	put(rs, "@tern/c/stats", "{\"mode\":\"peer\"}", 0);
	put(rs, "@tern/d/stats", "{\"node\":\"d\"} trailing", 0);
	put(rs, "@tern/e/stats", "{\"node\":\"e\"}\n", 0);
	assert_int_equal(reports_put(rs, "@tern/f/stats", "{\"node\":\"f\"}\0x", 14, 0), 0);
	reports_update(rs, 0);
	assert_int_equal(reports_count(rs), 1);
	assert_string_equal(reports_at(rs, 0)->id, "e");
	assert_int_equal(reports_rejected(rs), 5);
	/* a bad report does not replace a good one */
	put(rs, "@tern/e/stats", "{", 1);
	reports_update(rs, 1);
	assert_int_equal(reports_count(rs), 1);
	assert_string_equal(reports_at(rs, 0)->text, "{\"node\":\"e\"}\n");
	reports_free(rs);
}

static void
test_silent_nodes_leave(void **state)
{
	reports *rs = reports_new();

	(void)state;
	put(rs, "@tern/slow/stats", "{\"node\":\"slow\",\"interval_ms\":1000}", 10);
	put(rs, "@tern/fast/stats", "{\"node\":\"fast\",\"interval_ms\":100}", 10);
	reports_update(rs, 10.25);
	assert_int_equal(reports_count(rs), 2);
	reports_update(rs, 10.35); /* fast: silent for more than 3 x 100 ms */
	assert_int_equal(reports_count(rs), 1);
	assert_string_equal(reports_at(rs, 0)->id, "slow");
	reports_update(rs, 12.9);
	assert_int_equal(reports_count(rs), 1);
	put(rs, "@tern/fast/stats", "{\"node\":\"fast\",\"interval_ms\":100}", 12.95);
	reports_update(rs, 13.05); /* slow: 3.05 s */
	assert_int_equal(reports_count(rs), 1);
	assert_string_equal(reports_at(rs, 0)->id, "fast");
	assert_true(reports_max_interval(rs) == 0.1);
	reports_update(rs, 20);
	assert_int_equal(reports_count(rs), 0);
	assert_true(reports_max_interval(rs) == 0);
	reports_free(rs);
}

static void
test_node_limit(void **state)
{
	reports *rs = reports_new();
	char key[64];
	char text[64];

	(void)state;
	for (int i = 0; i < REPORTS_MAX_NODES + 5; i++) {
		snprintf(key, sizeof(key), "@tern/n%05d/stats", i);
		snprintf(text, sizeof(text), "{\"node\":\"n%05d\"}", i);
		put(rs, key, text, 0);
	}
	reports_update(rs, 0);
	assert_int_equal(reports_count(rs), REPORTS_MAX_NODES);
	reports_free(rs);
}

struct writer {
	reports *rs;
	int n;
};

static void *
write_reports(void *arg)
{
	struct writer *w = arg;
	char key[64];
	char text[64];

	for (int i = 0; i < w->n; i++) {
		snprintf(key, sizeof(key), "@tern/n%d/stats", i % 7);
		snprintf(text, sizeof(text), "{\"node\":\"n%d\",\"seq\":%d}", i % 7, i);
		reports_put(w->rs, key, text, strlen(text), 0);
	}
	return NULL;
}

static void
test_two_threads(void **state)
{
	struct writer w = {reports_new(), 20000};
	pthread_t t;

	(void)state;
	assert_int_equal(pthread_create(&t, NULL, write_reports, &w), 0);
	for (int i = 0; i < 2000; i++) {
		reports_update(w.rs, 0);
		assert_true(reports_count(w.rs) <= 7);
	}
	pthread_join(t, NULL);
	reports_update(w.rs, 0);
	assert_int_equal(reports_count(w.rs), 7);
	/* the last report of n6: i = 19998 */
	assert_string_equal(reports_at(w.rs, 6)->text, "{\"node\":\"n6\",\"seq\":19998}");
	reports_free(w.rs);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_keys_and_order), cmocka_unit_test(test_newest_wins),
	    cmocka_unit_test(test_not_reports),    cmocka_unit_test(test_silent_nodes_leave),
	    cmocka_unit_test(test_node_limit),     cmocka_unit_test(test_two_threads),
	};
	return cmocka_run_group_tests_name("node_reports", tests, NULL, NULL);
}
