/*
 * alloc_test.c - the hot path (publish, batch, write, read, decode,
 * deliver) makes no heap allocation per message: after a warm-up, 100,000
 * messages between two nodes cost zero calls to malloc, calloc or realloc,
 * in every thread of the process.
 *
 * Buffers that adapt (a channel's ring doubling when its window has grown,
 * a queue growing for a stalled peer) may still grow a few times, each time
 * doubling: that is a bounded number of allocations for any number of
 * messages, so the test allows a handful and fails on anything that scales
 * with the message count.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tern/tern.h"

/* ASan and TSan bring their own allocator: a malloc interposed here would
 * hand their free() blocks they never allocated. */
#include "sanitized.h"

#ifndef TERN_TEST_SANITIZED
/* Count every allocation of the process by interposing glibc's allocator. */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
static atomic_long allocations;

void *
malloc(size_t n)
{
	atomic_fetch_add(&allocations, 1);
	return __libc_malloc(n);
}

void *
calloc(size_t a, size_t b)
{
	atomic_fetch_add(&allocations, 1);
	return __libc_calloc(a, b);
}

void *
realloc(void *p, size_t n)
{
	atomic_fetch_add(&allocations, 1);
	return __libc_realloc(p, n);
}
#endif

#ifndef TERN_TEST_SANITIZED
static atomic_long delivered;

static void
on_msg(void *arg, const tern_msg *m)
{
	(void)arg;
	(void)m;
	atomic_fetch_add(&delivered, 1);
}
#endif

/* burst: messages published before a pull subscriber takes them (1: each
 * is taken at once) */
static void
run(bool low_latency, bool pull, long keys, long burst)
{
#ifndef TERN_TEST_SANITIZED
	tern_config cfg;
	tern_node *a, *b;
	tern_sub *sub;
	tern_pub **pubs = calloc((size_t)keys, sizeof(*pubs));
	char bound[256], key[64];
	uint8_t payload[64] = {0};
	tern_msg m;
	const long warm = 50000, count = 100000;

	/* the counter sees allocations made anywhere in the process */
	long probe = atomic_load(&allocations);
	void *volatile p = malloc(16);
	free(p);
	assert_int_equal(atomic_load(&allocations), probe + 1);

	tern_config_init(&cfg);
	cfg.low_latency = low_latency;
	cfg.log_level = TERN_LOG_ERROR;
	assert_int_equal(tern_node_open(&a, &cfg), 0);
	assert_int_equal(tern_node_open(&b, &cfg), 0);
	assert_int_equal(tern_node_listen(a, "tcp://127.0.0.1:0", bound, sizeof(bound)), 0);
	assert_int_equal(tern_sub_open(&sub, a, "hot/**", pull ? NULL : on_msg, NULL), 0);
	assert_int_equal(tern_node_connect(b, bound), 0);
	for (long k = 0; k < keys; k++) {
		snprintf(key, sizeof(key), "hot/path/%ld", k);
		assert_int_equal(tern_pub_open(&pubs[k], b, key, -1), 0);
	}
	assert_int_equal(tern_node_wait_peers(b, 1, 5000), 0);
	atomic_store(&delivered, 0);
	for (long round = 0; round < 2; round++) {
		long n = round == 0 ? warm : count;
		long before = atomic_load(&allocations);
		for (long i = 0; i < n; i++) {
			memcpy(payload, &i, sizeof(i));
			assert_int_equal(tern_publish(pubs[i % keys], payload, sizeof(payload)), 0);
			for (long r = 0; pull && (i + 1) % burst == 0 && r < burst; r++) {
				assert_int_equal(tern_sub_recv(sub, &m, 5000), 0);
			}
		}
		if (!pull) {
			for (int w = 0; w < 5000 && atomic_load(&delivered) < warm + round * count;
			     w++) {
				usleep(1000);
			}
			assert_int_equal(atomic_load(&delivered), warm + round * count);
		}
		if (round == 1) {
			long used = atomic_load(&allocations) - before;
			print_message(
			    "%s, %s subscriber, %ld keys: %ld allocations for %ld messages\n",
			    low_latency ? "low-latency" : "batched", pull ? "pull" : "callback",
			    keys, used, count);
			/* with many keys, a channel's ring may still double once or
			 * twice as acknowledgement delays vary: a bound per key,
			 * where an allocation per message would make 100,000 */
			assert_true(used <= 8 + (keys > 1 ? 2 * keys : 0));
		}
	}
	for (long k = 0; k < keys; k++) {
		tern_pub_close(pubs[k]);
	}
	free(pubs);
	tern_sub_close(sub);
	tern_node_close(b);
	tern_node_close(a);
#else
	(void)low_latency;
	(void)pull;
	(void)keys;
	(void)burst;
	skip();
#endif
}

static void
test_batched_callback(void **state)
{
	(void)state;
	run(false, false, 1, 1);
}

static void
test_lowlat_callback(void **state)
{
	(void)state;
	run(true, false, 1, 1);
}

static void
test_batched_pull(void **state)
{
	(void)state;
	run(false, true, 1, 1);
}

/* Many keys round-robin: each message on its own channel, touching a
 * thousand channels a read. */
static void
test_batched_many_keys(void **state)
{
	(void)state;
	run(false, false, 2000, 1);
}

/* Many keys and a pull subscriber behind: bursts that fill its queue, so
 * that channels keep frames aside until it takes them (a backlog each),
 * burst after burst. */
static void
test_batched_many_keys_behind(void **state)
{
	(void)state;
	run(false, true, 2000, 25000);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_batched_callback),
	    cmocka_unit_test(test_lowlat_callback),
	    cmocka_unit_test(test_batched_pull),
	    cmocka_unit_test(test_batched_many_keys),
	    cmocka_unit_test(test_batched_many_keys_behind),
	};
	return cmocka_run_group_tests_name("alloc", tests, NULL, NULL);
}
