/*
 * config_test.c - the config file parser and endpoint syntax, without I/O.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "config.h"

static int
parse(node_config *nc, const char *text, char *err)
{
	config_init(nc);
	return config_parse(nc, text, strlen(text), "t.json", err, CONFIG_ERR_LEN);
}

static void
test_every_key(void **state)
{
	const char *text = "{\n"
	                   "  \"id\": \"edge-1\",\n"
	                   "  \"mode\": \"router\",\n"
	                   "  \"listen\": [\"tcp://127.0.0.1:0\", \"unix:///tmp/t.sock\"],\n"
	                   "  \"connect\": [\"tcp://[::1]:7447\"],\n"
	                   "  \"low_latency\": true,\n"
	                   "  \"batching\": { \"max_bytes\": 16384, \"max_delay_us\": 250 },\n"
	                   "  \"reliability\": \"best_effort\",\n"
	                   "  \"queue\": { \"max_bytes\": 2097152 },\n"
	                   "  \"max_message_bytes\": 1048576,\n"
	                   "  \"chunk_bytes\": 4096,\n"
	                   "  \"publish_timeout_ms\": 500,\n"
	                   "  \"handshake_timeout_ms\": 2000,\n"
	                   "  \"keepalive_ms\": 250,\n"
	                   "  \"reconnect\": { \"initial_ms\": 10, \"max_ms\": 400 },\n"
	                   "  \"log\": \"debug\"\n"
	                   "}\n";
	char err[CONFIG_ERR_LEN] = "";
	node_config nc;

	(void)state;
	assert_int_equal(parse(&nc, text, err), 0);
	assert_string_equal(nc.tern.id, "edge-1");
	assert_int_equal(nc.tern.mode, TERN_MODE_ROUTER);
	assert_int_equal(nc.listen_count, 2);
	assert_string_equal(nc.listen[1], "unix:///tmp/t.sock");
	assert_int_equal(nc.connect_count, 1);
	assert_true(nc.tern.low_latency);
	assert_int_equal(nc.tern.batch_max_bytes, 16384);
	assert_int_equal(nc.tern.batch_max_delay_us, 250);
	assert_int_equal(nc.tern.reliability, TERN_BEST_EFFORT);
	assert_int_equal(nc.tern.queue_max_bytes, 2097152);
	assert_int_equal(nc.tern.max_message_bytes, 1048576);
	assert_int_equal(nc.tern.chunk_bytes, 4096);
	assert_int_equal(nc.tern.publish_timeout_ms, 500);
	assert_int_equal(nc.tern.handshake_timeout_ms, 2000);
	assert_int_equal(nc.tern.keepalive_ms, 250);
	assert_int_equal(nc.tern.reconnect_initial_ms, 10);
	assert_int_equal(nc.tern.reconnect_max_ms, 400);
	assert_int_equal(nc.tern.log_level, TERN_LOG_DEBUG);
	config_free(&nc);
}

static void
test_acl(void **state)
{
	const char *text = "{ \"acl\": [\n"
	                   "  { \"peer\": \"*\", \"allow_sub\": [\"sensors/**\"] },\n"
	                   "  { \"peer\": \"alice\", \"allow_pub\": [\"a/**\", \"b\"],\n"
	                   "    \"allow_sub\": [] } ] }";
	char err[CONFIG_ERR_LEN] = "";
	node_config nc;

	(void)state;
	assert_int_equal(parse(&nc, text, err), 0);
	assert_true(nc.tern.acl_set);
	assert_int_equal(nc.tern.acl_len, 2);
	assert_string_equal(nc.tern.acl[0].peer, "*");
	assert_int_equal(nc.tern.acl[0].allow_pub_len, 0);
	assert_string_equal(nc.tern.acl[0].allow_sub[0], "sensors/**");
	assert_string_equal(nc.tern.acl[1].allow_pub[1], "b");
	assert_int_equal(nc.tern.acl[1].allow_sub_len, 0);
	config_free(&nc);
	assert_false(nc.tern.acl_set);

	/* an empty list is an acl that allows nothing */
	assert_int_equal(parse(&nc, "{ \"acl\": [] }", err), 0);
	assert_true(nc.tern.acl_set);
	assert_int_equal(nc.tern.acl_len, 0);
	config_free(&nc);

	/* a rule half parsed is freed with the rest (the sanitizer build checks) */
	assert_int_not_equal(
	    parse(&nc, "{ \"acl\": [{ \"peer\": \"*\", \"allow_sub\": [\"a\", 3] }] }", err), 0);
	assert_non_null(strstr(err, "acl[0].allow_sub"));
	config_free(&nc);
}

static void
test_defaults_kept(void **state)
{
	char err[CONFIG_ERR_LEN] = "";
	node_config nc;
	tern_config def;

	(void)state;
	tern_config_init(&def);
	assert_int_equal(parse(&nc, "{ \"low_latency\": true }", err), 0);
	assert_true(nc.tern.low_latency);
	assert_int_equal(nc.tern.batch_max_bytes, def.batch_max_bytes);
	assert_int_equal(nc.tern.queue_max_bytes, def.queue_max_bytes);
	assert_false(nc.listen_set);
	assert_false(nc.connect_set);
	config_free(&nc);
	/* an explicit empty list means "none", not "the default" */
	assert_int_equal(parse(&nc, "{ \"listen\": [] }", err), 0);
	assert_true(nc.listen_set);
	assert_int_equal(nc.listen_count, 0);
	config_free(&nc);
}

static void
test_syntax_position(void **state)
{
	char err[CONFIG_ERR_LEN] = "";
	node_config nc;

	(void)state;
	assert_int_equal(parse(&nc, "{\n\n  \"a\": nope\n}", err), TERN_EINVAL);
	assert_non_null(strstr(err, "t.json:3:"));
	config_free(&nc);
	assert_int_equal(parse(&nc, "{}\n  x", err), TERN_EINVAL);
	assert_non_null(strstr(err, "t.json:2:3: text after the JSON object"));
	config_free(&nc);
}

static void
test_key_errors(void **state)
{
	static const struct {
		const char *text;
		const char *message;
	} cases[] = {
	    {"{\"mod\": \"peer\"}", "key \"mod\": unknown key"},
	    {"{\"queue\": {\"max\": 1}}", "key \"queue.max\": unknown key"},
	    {"{\"low_latency\": 1}", "key \"low_latency\": must be true or false"},
	    {"{\"keepalive_ms\": 5}", "key \"keepalive_ms\": must be an integer from 10"},
	    {"{\"batching\": {\"max_bytes\": 70000000}}", "key \"batching.max_bytes\""},
	    {"{\"connect\": [\"tcp://h:1\", \"tcp://h\"]}", "endpoint \"tcp://h\""},
	    {"{\"log\": \"trace\"}", "key \"log\": must be one of"},
	    {"{\"log\": \"info\", \"log\": \"warn\"}", "key \"log\": appears twice"},
	};
	char err[CONFIG_ERR_LEN];
	node_config nc;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		err[0] = '\0';
		assert_int_not_equal(parse(&nc, cases[i].text, err), 0);
		if (strstr(err, cases[i].message) == NULL) {
			fail_msg("%s: got \"%s\", want \"%s\"", cases[i].text, err,
			         cases[i].message);
		}
		assert_non_null(strstr(err, "t.json"));
		config_free(&nc);
	}
}

static void
test_endpoints(void **state)
{
	static const char *const good[] = {
	    "tcp://127.0.0.1:7447", "tcp://localhost:0",     "tcp://[::1]:65535",
	    "tcp://[fe80::1]:1",    "unix:///run/tern.sock", "tcp://my-host.example:80",
	};
	static const char *const bad[] = {
	    "tcp://127.0.0.1",    "tcp://:7447",     "tcp://127.0.0.1:65536",
	    "tcp://127.0.0.1:-1", "tcp://[::1]7447", "tcp://[::1:7447",
	    "tcp://1.2.3:80",     "tcp://a b:1",     "unix://rel",
	    "unix:///",           "udp://x:1",       "",
	    "tcp://h:1x",
	};
	char err[CONFIG_ERR_LEN];

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		if (config_endpoint_check(good[i], err, sizeof(err)) != 0) {
			fail_msg("%s refused: %s", good[i], err);
		}
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		if (config_endpoint_check(bad[i], err, sizeof(err)) != TERN_EENDPOINT) {
			fail_msg("%s accepted", bad[i]);
		}
		assert_true(strlen(err) > 0);
	}
}

static void
test_to_json_round_trip(void **state)
{
	char err[CONFIG_ERR_LEN] = "";
	node_config a;
	node_config b;
	char *text;

	(void)state;
	assert_int_equal(parse(&a,
	                       "{\"mode\": \"router\", \"batching\": {\"max_bytes\": 1024}, "
	                       "\"connect\": [\"unix:///x\"]}",
	                       err),
	                 0);
	text = config_to_json(&a);
	assert_non_null(text);
	/* what --check prints is itself a valid config */
	assert_int_equal(parse(&b, text, err), 0);
	assert_int_equal(b.tern.mode, TERN_MODE_ROUTER);
	assert_int_equal(b.tern.batch_max_bytes, 1024);
	assert_string_equal(b.connect[0], "unix:///x");
	free(text);
	config_free(&a);
	config_free(&b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_every_key),          cmocka_unit_test(test_acl),
	    cmocka_unit_test(test_defaults_kept),      cmocka_unit_test(test_syntax_position),
	    cmocka_unit_test(test_key_errors),         cmocka_unit_test(test_endpoints),
	    cmocka_unit_test(test_to_json_round_trip),
	};
	return cmocka_run_group_tests_name("node_config", tests, NULL, NULL);
}
