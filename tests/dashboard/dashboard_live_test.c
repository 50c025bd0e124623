/*
 * dashboard_live_test.c - the Live view's store and GET /metrics without a
 * network: reports in, messages and exposition text out (live.h, metrics.h).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "live.h"
#include "metrics.h"
#include "protocol.h"

static const char *const CONNECT[] = {"tcp://127.0.0.1:7447"};

/* A publisher's report: one key published, one connection to the router. */
static const char *
pub_report(char *buf, size_t size, double rate, double total)
{
	snprintf(
	    buf, size,
	    "{\"node\":\"P\",\"mode\":\"peer\",\"uptime_s\":3.5,\"interval_ms\":1000,"
	    "\"time_us\":1,\"version\":\"0.1.0\",\"keys\":[{\"key\":\"demo/a\","
	    "\"publisher\":\"P/1\",\"role\":\"pub\",\"msgs_per_s\":%g,\"bytes_per_s\":%g,"
	    "\"msgs_total\":%g,\"drops\":2,\"missed\":0,\"blocked_ms\":1.5,\"queue_bytes\":64}],"
	    "\"connections\":[{\"peer\":\"R\",\"endpoint\":\"tcp://127.0.0.1:7447\","
	    "\"mode\":\"batched\",\"peer_mode\":\"router\",\"rtt_us\":90,"
	    "\"bytes_in_per_s\":0,\"bytes_out_per_s\":64000}]}",
	    rate, rate * 64, total);
	return buf;
}

/* The router's report: connections to P, to S and to the dashboard; no key. */
static const char ROUTER[] =
    "{\"node\":\"R\",\"mode\":\"router\",\"uptime_s\":9,\"interval_ms\":1000,\"keys\":[],"
    "\"connections\":[{\"peer\":\"P\",\"endpoint\":\"tcp://127.0.0.1:5000\",\"mode\":\"batched\","
    "\"peer_mode\":\"peer\",\"rtt_us\":70,\"bytes_in_per_s\":64000,\"bytes_out_per_s\":10},"
    "{\"peer\":\"S\",\"endpoint\":\"tcp://127.0.0.1:5001\",\"mode\":\"batched\","
    "\"peer_mode\":\"client\",\"rtt_us\":null,\"bytes_in_per_s\":0,\"bytes_out_per_s\":64000},"
    "{\"peer\":\"dash\",\"endpoint\":\"tcp://127.0.0.1:5002\",\"mode\":\"batched\","
    "\"peer_mode\":\"peer\",\"rtt_us\":50,\"bytes_in_per_s\":0,\"bytes_out_per_s\":900}]}";

/* The subscriber's report (a client): the key delivered, with latency. */
static const char SUB[] =
    "{\"node\":\"S\",\"mode\":\"client\",\"uptime_s\":8,\"interval_ms\":500,\"keys\":[{\"key\":"
    "\"demo/a\",\"publisher\":\"P/1\",\"role\":\"sub\",\"msgs_per_s\":1000,\"bytes_per_s\":64000,"
    "\"msgs_total\":5000,\"drops\":0,\"missed\":3,\"blocked_ms\":0,\"queue_bytes\":0,"
    "\"lat_samples\":900,\"lat_p50_us\":80,\"lat_p99_us\":150,\"lat_p999_us\":400,"
    "\"lat_max_us\":500}],\"connections\":[]}";

static int
report(struct live *lv, const char *node, const char *json, uint64_t ms)
{
	char key[128];
	struct live_time now = {.mono_ms = ms, .wall_ms = 1700000000000 + (int64_t)ms};
	snprintf(key, sizeof(key), "@tern/%s/stats", node);
	return live_report(lv, key, json, strlen(json), &now);
}

static struct live *
network(void)
{
	char buf[2048];
	struct live *lv = live_new("dash", CONNECT, 1);
	assert_non_null(lv);
	assert_int_equal(report(lv, "P", pub_report(buf, sizeof(buf), 1000, 3000), 1000), 0);
	assert_int_equal(report(lv, "R", ROUTER, 1000), 0);
	assert_int_equal(report(lv, "S", SUB, 1000), 0);
	return lv;
}

static const cJSON *
find(const cJSON *array, const char *member, const char *value)
{
	const cJSON *item;
	cJSON_ArrayForEach(item, array)
	{
		const cJSON *m = cJSON_GetObjectItemCaseSensitive(item, member);
		if (cJSON_IsString(m) && strcmp(m->valuestring, value) == 0) {
			return item;
		}
	}
	return NULL;
}

static double
num(const cJSON *obj, const char *name)
{
	const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, name);
	assert_true(cJSON_IsNumber(item));
	return item->valuedouble;
}

static void
test_live_message(void **state)
{
	(void)state;
	struct live *lv = network();
	struct live_time now = {.mono_ms = 1200, .wall_ms = 1700000001200};
	cJSON *msg = live_message(lv, &now);
	assert_non_null(msg);
	assert_string_equal(cJSON_GetObjectItem(msg, "type")->valuestring, "live");
	assert_string_equal(cJSON_GetObjectItem(msg, "observer")->valuestring, "dash");

	/* Three reporting nodes, and the dashboard as a silent peer. */
	const cJSON *nodes = cJSON_GetObjectItem(msg, "nodes");
	assert_int_equal(cJSON_GetArraySize(nodes), 4);
	const cJSON *r = find(nodes, "node", "R");
	assert_non_null(r);
	assert_string_equal(cJSON_GetObjectItem(r, "mode")->valuestring, "router");
	assert_int_equal((int)num(r, "age_ms"), 200);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(r, "connections")), 3);
	const cJSON *to_s = find(cJSON_GetObjectItem(r, "connections"), "peer", "S");
	assert_string_equal(cJSON_GetObjectItem(to_s, "peer_mode")->valuestring, "client");
	assert_string_equal(cJSON_GetObjectItem(find(nodes, "node", "S"), "mode")->valuestring,
	                    "client");
	const cJSON *dash = find(nodes, "node", "dash");
	assert_non_null(dash);
	assert_true(cJSON_IsFalse(cJSON_GetObjectItem(dash, "reporting")));
	assert_true(cJSON_IsTrue(cJSON_GetObjectItem(dash, "observer")));

	/* P-R is one edge though both ends report it: the shorter rtt, each side's bytes out. */
	const cJSON *links = cJSON_GetObjectItem(msg, "links");
	assert_int_equal(cJSON_GetArraySize(links), 3);
	const cJSON *pr = find(links, "b", "R");
	assert_non_null(pr);
	assert_string_equal(cJSON_GetObjectItem(pr, "a")->valuestring, "P");
	assert_int_equal((int)num(pr, "rtt_us"), 70);
	assert_int_equal((int)num(pr, "bytes_a_to_b_per_s"), 64000);
	assert_int_equal((int)num(pr, "bytes_b_to_a_per_s"), 10);
	assert_int_equal((int)num(pr, "connections"), 1);
	const cJSON *rs = find(links, "b", "S");
	assert_true(cJSON_IsNull(cJSON_GetObjectItem(rs, "rtt_us")));
	assert_true(cJSON_IsNull(cJSON_GetObjectItem(rs, "bytes_b_to_a_per_s")));

	/* One series a (node, key, role, publisher). */
	const cJSON *keys = cJSON_GetObjectItem(msg, "keys");
	assert_int_equal(cJSON_GetArraySize(keys), 2);
	const cJSON *sub = find(keys, "role", "sub");
	assert_string_equal(cJSON_GetObjectItem(sub, "node")->valuestring, "S");
	assert_int_equal((int)num(sub, "lat_p99_us"), 150);
	assert_int_equal((int)num(sub, "missed"), 3);
	const cJSON *pub = find(keys, "role", "pub");
	assert_int_equal((int)num(pub, "msgs_per_s"), 1000);
	assert_null(cJSON_GetObjectItem(pub, "lat_p50_us"));
	cJSON_Delete(msg);
	live_free(lv);
}

static void
test_history_ring(void **state)
{
	(void)state;
	char buf[2048];
	struct live *lv = live_new("dash", CONNECT, 1);
	for (int i = 1; i <= LIVE_HISTORY + 20; i++) {
		assert_int_equal(
		    report(lv, "P", pub_report(buf, sizeof(buf), i, i), (uint64_t)i * 1000), 0);
	}
	struct live_time now = {.mono_ms = 400000, .wall_ms = 0};
	cJSON *msg = live_history_message(lv, &now);
	const cJSON *series = cJSON_GetObjectItem(msg, "series");
	assert_int_equal(cJSON_GetArraySize(series), 1);
	const cJSON *points = cJSON_GetObjectItem(cJSON_GetArrayItem(series, 0), "points");
	assert_int_equal(cJSON_GetArraySize(points), LIVE_HISTORY);
	/* Oldest first: the first 20 fell out of the ring. */
	const cJSON *first = cJSON_GetArrayItem(points, 0);
	const cJSON *last = cJSON_GetArrayItem(points, LIVE_HISTORY - 1);
	assert_int_equal((int)cJSON_GetArrayItem(first, 1)->valuedouble, 21);
	assert_int_equal((int)cJSON_GetArrayItem(last, 1)->valuedouble, LIVE_HISTORY + 20);
	assert_true(cJSON_GetArrayItem(first, 0)->valuedouble <
	            cJSON_GetArrayItem(last, 0)->valuedouble);
	/* A publisher has no latency: null. */
	assert_true(cJSON_IsNull(cJSON_GetArrayItem(last, 3)));
	cJSON_Delete(msg);
	live_free(lv);
}

static void
test_expiry(void **state)
{
	(void)state;
	struct live *lv = network();
	/* S reports every 500 ms: silent for 1.6 s it is gone; P and R (1 s) stay. */
	struct live_time now = {.mono_ms = 2600, .wall_ms = 0};
	assert_int_equal(live_expire(lv, &now), 1);
	assert_int_equal(lv->nnodes, 2);
	assert_int_equal(lv->series_total, 1);
	now.mono_ms = 4100;
	assert_int_equal(live_expire(lv, &now), 2);
	assert_int_equal(lv->nnodes, 0);
	assert_int_equal(lv->series_total, 0);

	/* A key its node stops reporting goes after three intervals too. */
	assert_int_equal(report(lv, "S", SUB, 5000), 0);
	const char *no_keys = "{\"node\":\"S\",\"interval_ms\":500,\"keys\":[],\"connections\":[]}";
	assert_int_equal(report(lv, "S", no_keys, 5500), 0);
	assert_int_equal(lv->series_total, 1);
	assert_int_equal(report(lv, "S", no_keys, 6600), 0);
	assert_int_equal(lv->series_total, 0);
	live_free(lv);
}

static void
test_refusals(void **state)
{
	(void)state;
	struct live *lv = live_new("dash", CONNECT, 1);
	struct live_time now = {.mono_ms = 1, .wall_ms = 1};
	/* Not a report key: ignored, not refused. */
	assert_int_equal(live_report(lv, "@tern/P/other", "{}", 2, &now), 1);
	assert_int_equal(live_report(lv, "@tern/a/b/stats", "{}", 2, &now), 1);
	assert_int_equal(lv->refused, 0);
	assert_int_equal(report(lv, "P", "not json", 1), -1);
	assert_int_equal(report(lv, "P", "[1,2]", 1), -1);
	assert_int_equal(report(lv, "P", "{\"node\":\"Q\"}", 1), -1);
	assert_non_null(strstr(lv->last_refusal, "another node"));
	assert_int_equal(lv->refused, 3);
	assert_int_equal(lv->nnodes, 0);
	/* A key without a role is left out; the rest of the report is taken. */
	assert_int_equal(report(lv, "P",
	                        "{\"node\":\"P\",\"keys\":[{\"key\":\"x\"},{\"key\":\"y\",\"role\":"
	                        "\"pub\",\"msgs_per_s\":\"fast\"}]}",
	                        1),
	                 0);
	assert_int_equal(lv->nnodes, 1);
	assert_int_equal(lv->series_total, 1);
	assert_true(lv->nodes[0]->series[0]->msgs_per_s == 0);
	live_free(lv);
}

static void
test_metrics(void **state)
{
	(void)state;
	struct live *lv = network();
	struct live_time now = {.mono_ms = 1500, .wall_ms = 0};
	size_t len = 0;
	char *text = metrics_text(lv, &now, &len);
	assert_non_null(text);
	assert_int_equal(strlen(text), len);
	assert_non_null(strstr(text, "# TYPE tern_key_messages_total counter\n"));
	assert_non_null(strstr(
	    text,
	    "tern_key_messages_total{node=\"P\",key=\"demo/a\",role=\"pub\",publisher=\"P/1\"} "
	    "3000\n"));
	assert_non_null(strstr(text, "# TYPE tern_key_latency_seconds summary\n"));
	assert_non_null(strstr(text,
	                       "tern_key_latency_seconds{node=\"S\",key=\"demo/a\",role=\"sub\","
	                       "publisher=\"P/1\",quantile=\"0.99\"} 0.00015\n"));
	assert_non_null(strstr(text, "tern_key_latency_seconds_count{node=\"S\",key=\"demo/a\","
	                             "role=\"sub\",publisher=\"P/1\"} 900\n"));
	assert_non_null(strstr(text,
	                       "tern_key_blocked_seconds{node=\"P\",key=\"demo/a\",role=\"pub\","
	                       "publisher=\"P/1\"} 0.0015\n"));
	assert_non_null(strstr(text, "tern_connection_rtt_seconds{node=\"P\",peer=\"R\",endpoint="
	                             "\"tcp://127.0.0.1:7447\"} 9e-05\n"));
	assert_non_null(strstr(text, "tern_node_up{node=\"R\",mode=\"router\"} 1\n"));
	assert_non_null(strstr(text, "tern_node_up{node=\"S\",mode=\"client\"} 1\n"));
	/* No rtt yet: no sample. Drops only for publishers, missed only for subscribers. */
	assert_null(strstr(text, "tern_connection_rtt_seconds{node=\"R\",peer=\"S\""));
	assert_null(strstr(text, "tern_key_drops_total{node=\"S\""));
	assert_null(strstr(text, "tern_key_missed_total{node=\"P\""));
	free(text);
	live_free(lv);
}

static void
test_metrics_escaping(void **state)
{
	(void)state;
	struct live *lv = live_new("dash", CONNECT, 1);
	/* A node id with a quote, a backslash and a newline. */
	const char *report_text = "{\"node\":\"a\\\"b\\\\c\\nd\",\"keys\":[],\"connections\":[]}";
	struct live_time now = {.mono_ms = 1, .wall_ms = 1};
	assert_int_equal(
	    live_report(lv, "@tern/a\"b\\c\nd/stats", report_text, strlen(report_text), &now), 0);
	size_t len;
	char *text = metrics_text(lv, &now, &len);
	assert_non_null(strstr(text, "tern_node_up{node=\"a\\\"b\\\\c\\nd\",mode=\"peer\"} 1\n"));
	free(text);
	live_free(lv);
}

static void
test_without_connect(void **state)
{
	(void)state;
	struct live_time now = {.mono_ms = 1, .wall_ms = 1};
	size_t len;
	char *text = metrics_text(NULL, &now, &len);
	assert_non_null(text);
	assert_true(text[0] == '#');
	assert_non_null(strstr(text, "--connect"));
	assert_non_null(strstr(text, "\ntern_dashboard_nodes 0\n"));
	assert_null(strstr(text, "tern_key_"));
	free(text);

	/* The live requests say how to turn the Live view on. */
	const char *req = "{\"type\":\"live_history\",\"req\":4}";
	cJSON *reply = dash_protocol_reply(NULL, NULL, &now, req, strlen(req));
	assert_string_equal(cJSON_GetObjectItem(reply, "type")->valuestring, "error");
	assert_string_equal(cJSON_GetObjectItem(reply, "request")->valuestring, "live_history");
	assert_non_null(strstr(cJSON_GetObjectItem(reply, "error")->valuestring, "--connect"));
	assert_int_equal((int)num(reply, "req"), 4);
	cJSON_Delete(reply);
}

static void
test_live_requests(void **state)
{
	(void)state;
	struct live *lv = network();
	struct live_time now = {.mono_ms = 1100, .wall_ms = 1};
	const char *req = "{\"type\":\"live\",\"req\":\"x\"}";
	cJSON *reply = dash_protocol_reply(NULL, lv, &now, req, strlen(req));
	assert_string_equal(cJSON_GetObjectItem(reply, "type")->valuestring, "live");
	assert_string_equal(cJSON_GetObjectItem(reply, "req")->valuestring, "x");
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(reply, "keys")), 2);
	cJSON_Delete(reply);
	live_free(lv);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_live_message),    cmocka_unit_test(test_history_ring),
	    cmocka_unit_test(test_expiry),          cmocka_unit_test(test_refusals),
	    cmocka_unit_test(test_metrics),         cmocka_unit_test(test_metrics_escaping),
	    cmocka_unit_test(test_without_connect), cmocka_unit_test(test_live_requests),
	};
	return cmocka_run_group_tests_name("dashboard_live", tests, NULL, NULL);
}
