/*
 * stamps_test.c - how many messages carry a publish stamp (docs/PROTOCOL.md,
 * "Publish stamps"): about one a millisecond per key, and at most
 * STAMPS_PER_MS (32) a millisecond from one node whatever its number of
 * keys, so that ten thousand keys cost no more clock reads, header bytes
 * and histogram entries than a few.
 *
 * The count is read from the subscriber's telemetry: each stamped message
 * delivered is one latency sample of its key, and the histograms are only
 * emptied by a report, which is built only while someone subscribes to it;
 * the first report after the traffic holds them all. The bound is on the
 * publisher's wall clock, the clock its stamps are taken on: a slow machine
 * only stretches that time, so the check cannot fail for being loaded.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tern/tern.h"

#define KEYS          2000
#define MESSAGES      200000
#define STAMPS_PER_MS 32 /* session.c */

static atomic_long delivered;

static void
on_msg(void *arg, const tern_msg *m)
{
	(void)arg;
	(void)m;
	atomic_fetch_add(&delivered, 1);
}

static uint64_t
wall_ms(void)
{
	struct timeval tv;

	gettimeofday(&tv, NULL);
	return (uint64_t)tv.tv_sec * 1000 + (uint64_t)tv.tv_usec / 1000;
}

/* The sum of a report's "lat_samples" (subscribed keys only carry them). */
static long
samples_in(const char *json, size_t len)
{
	static const char name[] = "\"lat_samples\":";
	long total = 0;
	const char *p = json, *end = json + len;

	while (p < end && (p = memmem(p, (size_t)(end - p), name, sizeof(name) - 1)) != NULL) {
		p += sizeof(name) - 1;
		total += strtol(p, NULL, 10);
	}
	return total;
}

static void
test_stamps_per_node_bounded(void **state)
{
	tern_config cfg;
	tern_node *a, *b;
	tern_sub *sub, *stats;
	tern_pub **pubs = calloc(KEYS, sizeof(*pubs));
	char bound[256], key[32];
	uint8_t payload[16] = {0};
	tern_msg m;
	(void)state;

	tern_config_init(&cfg);
	cfg.log_level = TERN_LOG_ERROR;
	cfg.id = "stamps-sub";
	cfg.telemetry_interval_ms = 100;
	assert_int_equal(tern_node_open(&a, &cfg), 0);
	cfg.id = "stamps-pub";
	cfg.telemetry_interval_ms = 0;
	assert_int_equal(tern_node_open(&b, &cfg), 0);
	assert_int_equal(tern_node_listen(a, "tcp://127.0.0.1:0", bound, sizeof(bound)), 0);
	assert_int_equal(tern_sub_open(&sub, a, "st/**", on_msg, NULL), 0);
	assert_int_equal(tern_node_connect(b, bound), 0);
	assert_int_equal(tern_node_wait_peers(b, 1, 10000), 0);
	for (int k = 0; k < KEYS; k++) {
		snprintf(key, sizeof(key), "st/%d", k);
		assert_int_equal(tern_pub_open(&pubs[k], b, key, -1), 0);
	}
	for (int w = 0; w < 30000 && tern_pub_matched(pubs[KEYS - 1]) == 0; w++) {
		usleep(1000);
	}
	assert_true(tern_pub_matched(pubs[KEYS - 1]) > 0);

	uint64_t t0 = wall_ms();
	for (long i = 0; i < MESSAGES; i++) {
		memcpy(payload, &i, sizeof(i));
		assert_int_equal(tern_publish(pubs[i % KEYS], payload, sizeof(payload)), 0);
	}
	uint64_t elapsed = wall_ms() - t0;
	for (int w = 0; w < 60000 && atomic_load(&delivered) < MESSAGES; w++) {
		usleep(1000);
	}
	assert_int_equal(atomic_load(&delivered), MESSAGES);

	assert_int_equal(tern_sub_open(&stats, a, "@tern/stamps-sub/stats", NULL, NULL), 0);
	assert_int_equal(tern_sub_recv(stats, &m, 30000), 0);
	long stamped = samples_in((const char *)m.data, m.len);
	long most = STAMPS_PER_MS * (long)(elapsed + 1);
	print_message("%d messages over %d keys in %llu ms: %ld stamped, at most %ld allowed\n",
	              MESSAGES, KEYS, (unsigned long long)elapsed, stamped, most);
	assert_true(stamped > 0);
	assert_true(stamped <= most);

	tern_sub_close(stats);
	for (int k = 0; k < KEYS; k++) {
		tern_pub_close(pubs[k]);
	}
	free(pubs);
	tern_sub_close(sub);
	tern_node_close(b);
	tern_node_close(a);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_stamps_per_node_bounded),
	};
	return cmocka_run_group_tests_name("stamps", tests, NULL, NULL);
}
