/*
 * acl_test.c - access rules on a router, through the public API only:
 *  - a subscriber allowed "sensors" and below but not "secret": it receives
 *    what is published on sensors/y, its subscription to everything under
 *    secret fails with TERN_EACCES and a sentence naming the key and the
 *    router, and its connection's counters show that exactly the sensors
 *    messages crossed it: nothing of secret ever did;
 *  - a publisher allowed only under "a" is refused on b/x: its publish and
 *    close return TERN_EACCES, the router drops and counts what arrived on
 *    the refused channel, and the subscriber under "b" gets nothing.
 *
 * Nodes live in this process and talk over 127.0.0.1 (plain TCP: no peer
 * proves an identity, so "*" rules apply). Every wait is bounded and fails
 * rather than hangs; bounds are generous, never timing goals.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "tern/tern.h"

#define WAIT_MS 30000

static uint64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void
quiet(void *arg, int level, const char *line)
{
	(void)arg;
	if (level <= TERN_LOG_WARN && getenv("TERN_TEST_LOG") != NULL) {
		fprintf(stderr, "%s\n", line);
	}
}

static tern_node *
open_node(const char *id, int mode, const tern_acl_rule *acl, size_t acl_len)
{
	tern_config cfg;
	tern_node *n = NULL;

	tern_config_init(&cfg);
	cfg.id = id;
	cfg.mode = mode;
	cfg.telemetry_interval_ms = 0;
	cfg.log_fn = quiet;
	if (acl != NULL) {
		cfg.acl = acl;
		cfg.acl_len = acl_len;
		cfg.acl_set = true;
	}
	assert_int_equal(tern_node_open(&n, &cfg), 0);
	return n;
}

/* A JSON number after "name": in text (the first one), or -1. */
static long long
json_number(const char *text, const char *name)
{
	char pat[64];
	const char *p;

	snprintf(pat, sizeof(pat), "\"%s\":", name);
	p = strstr(text, pat);
	return p != NULL ? strtoll(p + strlen(pat), NULL, 10) : -1;
}

/* The node's stats JSON, and the counters of its only connection. */
static void
conn_counters(tern_node *n, long long *messages_in, long long *bytes_in)
{
	static char json[65536];
	const char *conns;

	assert_true(tern_node_stats_json(n, json, sizeof(json)) < sizeof(json));
	conns = strstr(json, "\"connections\":[{");
	assert_non_null(conns);
	assert_null(strstr(conns + 16, "{\"peer\":")); /* one connection only */
	*messages_in = json_number(conns, "messages_in");
	*bytes_in = json_number(conns, "bytes_in");
}

static long long
refused_in(tern_node *n)
{
	static char json[65536];

	assert_true(tern_node_stats_json(n, json, sizeof(json)) < sizeof(json));
	return json_number(json, "refused_in");
}

static const char *const sensors_only[] = {"sensors/**"};
static const char *const any[] = {"**"};
static const char *const a_only[] = {"a/**"};

static void
test_subscriber_refused_secret(void **state)
{
	const tern_acl_rule acl[] = {
	    {.peer = "*",
	     .allow_sub = sensors_only,
	     .allow_sub_len = 1,
	     .allow_pub = any,
	     .allow_pub_len = 1},
	    /* a peer that proves this name would read secrets; nobody here does */
	    {.peer = "auditor", .allow_sub = any, .allow_sub_len = 1},
	};
	enum { N_SECRET = 50, M_SENSORS = 30 };
	tern_node *r = open_node("acl-r", TERN_MODE_ROUTER, acl, 2);
	tern_node *s = open_node("acl-s", TERN_MODE_PEER, NULL, 0);
	tern_node *p = open_node("acl-p", TERN_MODE_PEER, NULL, 0);
	char ep[128];
	tern_sub *sensors, *secret;
	tern_pub *psecret, *psensors;
	long long msgs, bytes;
	uint64_t deadline;
	int got = 0, rc;
	tern_msg m;

	(void)state;
	assert_int_equal(tern_node_listen(r, "tcp://127.0.0.1:0", ep, sizeof(ep)), 0);
	assert_int_equal(tern_sub_open(&sensors, s, "sensors/**", NULL, NULL), 0);
	assert_int_equal(tern_sub_open(&secret, s, "secret/**", NULL, NULL), 0);
	assert_int_equal(tern_node_connect(s, ep), 0);
	assert_int_equal(tern_node_wait_peers(s, 1, WAIT_MS), 0);

	/* the refusal: recv fails (it does not just stay silent), with a sentence */
	rc = tern_sub_recv(secret, &m, WAIT_MS);
	assert_int_equal(rc, TERN_EACCES);
	assert_non_null(strstr(tern_last_error(), "access denied: subscribe to 'secret/**'"));
	assert_non_null(strstr(tern_last_error(), "at acl-r"));
	assert_int_equal(tern_sub_status(secret), TERN_EACCES);
	assert_int_equal(tern_sub_status(sensors), 0);

	assert_int_equal(tern_pub_open(&psecret, p, "secret/x", -1), 0);
	assert_int_equal(tern_pub_open(&psensors, p, "sensors/y", -1), 0);
	assert_int_equal(tern_node_connect(p, ep), 0);
	assert_int_equal(tern_node_wait_peers(p, 1, WAIT_MS), 0);
	/* the router wants sensors/y for s: wait until p has the route */
	deadline = now_ms() + WAIT_MS;
	while (tern_pub_matched(psensors) < 1 && now_ms() < deadline) {
		struct timespec ts = {0, 5000000};
		nanosleep(&ts, NULL);
	}
	assert_true(tern_pub_matched(psensors) >= 1);
	/* secrets first, so that were they forwarded they would arrive first */
	for (int i = 0; i < N_SECRET; i++) {
		assert_int_equal(tern_publish(psecret, "classified", 10), 0);
	}
	for (int i = 0; i < M_SENSORS; i++) {
		assert_int_equal(tern_publish(psensors, "21.5C", 5), 0);
	}
	while (got < M_SENSORS && tern_sub_recv(sensors, &m, WAIT_MS) == 0) {
		assert_string_equal(m.key, "sensors/y");
		got++;
	}
	assert_int_equal(got, M_SENSORS);
	/* the publisher's close waits until the router consumed everything it
	 * sent; whatever the router forwards after that comes from its buffers,
	 * which its own flush pushes out when p leaves: close p and r, then
	 * read s's connection counters while it still exists... they must not
	 * move past M_SENSORS. */
	assert_int_equal(tern_pub_close(psecret), 0); /* nobody subscribed: nothing refused */
	assert_int_equal(tern_pub_close(psensors), 0);
	tern_node_close(p);
	conn_counters(s, &msgs, &bytes);
	tern_node_close(r);
	assert_int_equal(msgs, M_SENSORS);
	assert_int_equal(bytes, M_SENSORS * 5);
	assert_int_equal(tern_sub_recv(sensors, &m, 0), TERN_ETIMEDOUT);
	assert_int_equal(tern_sub_recv(secret, &m, 0), TERN_EACCES);
	tern_sub_close(sensors);
	tern_sub_close(secret);
	tern_node_close(s);
}

static void
test_publisher_refused(void **state)
{
	const tern_acl_rule acl[] = {
	    {.peer = "*",
	     .allow_sub = any,
	     .allow_sub_len = 1,
	     .allow_pub = a_only,
	     .allow_pub_len = 1},
	};
	tern_node *r = open_node("acl-r2", TERN_MODE_ROUTER, acl, 1);
	tern_node *s = open_node("acl-s2", TERN_MODE_PEER, NULL, 0);
	tern_node *p = open_node("acl-p2", TERN_MODE_PEER, NULL, 0);
	char ep[128];
	tern_sub *sb, *sa;
	tern_pub *pb, *pa;
	uint64_t deadline;
	tern_stats st;
	tern_msg m;
	int rc = 0, sent = 0;

	(void)state;
	assert_int_equal(tern_node_listen(r, "tcp://127.0.0.1:0", ep, sizeof(ep)), 0);
	assert_int_equal(tern_sub_open(&sb, s, "b/**", NULL, NULL), 0);
	assert_int_equal(tern_sub_open(&sa, s, "a/**", NULL, NULL), 0);
	assert_int_equal(tern_node_connect(s, ep), 0);
	assert_int_equal(tern_node_wait_peers(s, 1, WAIT_MS), 0);
	assert_int_equal(tern_pub_open(&pb, p, "b/x", -1), 0);
	assert_int_equal(tern_pub_open(&pa, p, "a/x", -1), 0);
	assert_int_equal(tern_node_connect(p, ep), 0);
	assert_int_equal(tern_node_wait_peers(p, 1, WAIT_MS), 0);
	deadline = now_ms() + WAIT_MS;
	while ((tern_pub_matched(pb) < 1 || tern_pub_matched(pa) < 1) && now_ms() < deadline) {
		struct timespec ts = {0, 5000000};
		nanosleep(&ts, NULL);
	}
	assert_true(tern_pub_matched(pb) >= 1);
	/* publish until the refusal comes back (it answers the OPEN) */
	deadline = now_ms() + WAIT_MS;
	while ((rc = tern_publish(pb, "nope", 4)) == 0 && now_ms() < deadline) {
		struct timespec ts = {0, 1000000};
		sent++;
		nanosleep(&ts, NULL);
	}
	assert_int_equal(rc, TERN_EACCES);
	assert_non_null(strstr(tern_last_error(), "access denied: publish on 'b/x'"));
	assert_non_null(strstr(tern_last_error(), "at acl-r2"));
	assert_int_equal(tern_publish(pb, "nope", 4), TERN_EACCES); /* it stays refused */
	sent += 2; /* the two refused ones went out too, to be dropped there */
	/* the allowed key flows on the same connection */
	assert_int_equal(tern_publish(pa, "yes", 3), 0);
	assert_int_equal(tern_sub_recv(sa, &m, WAIT_MS), 0);
	assert_string_equal(m.key, "a/x");
	/* close waits until the router consumed (and dropped) what it was sent */
	assert_int_equal(tern_pub_close(pb), TERN_EACCES);
	assert_int_equal(tern_pub_close(pa), 0);
	assert_int_equal(refused_in(r), sent);
	tern_node_close(p);
	tern_node_close(r);
	assert_int_equal(tern_sub_recv(sb, &m, 0), TERN_ETIMEDOUT);
	tern_sub_stats(sb, &st);
	assert_int_equal(st.messages, 0);
	tern_sub_close(sa);
	tern_sub_close(sb);
	tern_node_close(s);
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_subscriber_refused_secret),
	    cmocka_unit_test(test_publisher_refused),
	};

	if (argc > 1) {
		cmocka_set_test_filter(argv[1]);
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
