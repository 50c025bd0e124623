/*
 * keymem_test.c - declaring and undeclaring many keys leaves memory where
 * it started: two nodes over loopback TCP, one subscriber on k/(any) and
 * 100,000 publishers k/0 .. k/99999 each sending one message; once every
 * publisher is closed and the subscriber's node has let go of them, the
 * bytes the process holds through malloc are back to what they were
 * before the keys were declared (the same counting by interposition as
 * alloc_test.c, here of live bytes). Also: 100,000 subscriptions in one
 * node, declared and closed; and a connection that carried a backlog,
 * idle again, holds what it held before.
 *
 * No timing is asserted: waits are bounded loops with generous limits.
 */
#include <malloc.h>
#include <pthread.h>
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

#include "child.h"

#include "sanitized.h"

#define KEYS  100000
#define SLACK (64 * 1024) /* what may stay: rounding in the tables that hold what is left */
/* What an idle pull subscription may hold: its record, its key expression
 * and its place in the indexes, but no queue (that comes with a message). */
#define IDLE_SUB_MAX 2048
/* What a router may hold for an idle key it forwards (a remote source, a
 * receive channel, a send channel, its place in the indexes): the 1 KiB of
 * the scale targets (bench/RESULTS.md), in live bytes. */
#define ROUTER_KEY_MAX 1024

#ifndef TERN_TEST_SANITIZED
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
static atomic_long live; /* bytes held through malloc, process-wide */

void *
malloc(size_t n)
{
	void *p = __libc_malloc(n);
	if (p != NULL) {
		atomic_fetch_add(&live, (long)malloc_usable_size(p));
	}
	return p;
}

void *
calloc(size_t a, size_t b)
{
	void *p = __libc_calloc(a, b);
	if (p != NULL) {
		atomic_fetch_add(&live, (long)malloc_usable_size(p));
	}
	return p;
}

void *
realloc(void *p, size_t n)
{
	long before = p != NULL ? (long)malloc_usable_size(p) : 0;
	void *q = __libc_realloc(p, n);
	if (q != NULL) {
		atomic_fetch_add(&live, (long)malloc_usable_size(q) - before);
	} else if (n == 0) {
		atomic_fetch_sub(&live, before);
	}
	return q;
}

void
free(void *p)
{
	if (p != NULL) {
		atomic_fetch_sub(&live, (long)malloc_usable_size(p));
	}
	__libc_free(p);
}

/* Wait (bounded) until the live bytes come within SLACK of base. */
static long
settle_to(long base)
{
	long now = atomic_load(&live);

	for (int i = 0; i < 600 && now - base > SLACK; i++) {
		usleep(50000);
		now = atomic_load(&live);
	}
	return now;
}

/* The live bytes once the connections have given back what the last burst
 * grew (they do after a second of quiet): the least seen over three
 * seconds. A busier burst, on a loaded machine, leaves no more behind. */
static long
quiet_live(void)
{
	long least = atomic_load(&live), now;

	for (int i = 0; i < 60; i++) {
		usleep(50000);
		now = atomic_load(&live);
		least = now < least ? now : least;
	}
	return least;
}

static tern_node *
open_node(const char *id)
{
	tern_config cfg;
	tern_node *n;

	tern_config_init(&cfg);
	cfg.id = id;
	cfg.log_level = TERN_LOG_ERROR;
	cfg.telemetry_interval_ms = 0; /* its report keeps a place per key it saw */
	assert_int_equal(tern_node_open(&n, &cfg), 0);
	return n;
}

/* Declare n publishers on b, let each send one message to a's subscriber,
 * take them all, close the publishers. */
static void
round_of_keys(tern_node *b, tern_sub *sub, long n)
{
	tern_pub **pubs = calloc((size_t)n, sizeof(*pubs));
	char key[32];
	tern_msg m;

	for (long i = 0; i < n; i++) {
		snprintf(key, sizeof(key), "k/%ld", i);
		assert_int_equal(tern_pub_open(&pubs[i], b, key, -1), 0);
	}
	for (int w = 0; w < 60000 && tern_pub_matched(pubs[n - 1]) == 0; w++) {
		usleep(1000);
	}
	for (long i = 0; i < n; i++) {
		assert_int_equal(tern_publish(pubs[i], &i, sizeof(i)), 0);
	}
	for (long i = 0; i < n; i++) {
		assert_int_equal(tern_sub_recv(sub, &m, 30000), 0);
	}
	for (long i = 0; i < n; i++) {
		assert_int_equal(tern_pub_close(pubs[i]), 0);
	}
	free(pubs);
}

/* The router's side of test_router_key_cost, in a process of its own (its
 * own count of live bytes): listen, tell the address on out, then answer
 * each byte on in with the live bytes, until the pipe closes. */
static void
router_process(int in, int out)
{
	tern_config cfg;
	tern_node *r;
	char bound[256], cmd;

	tern_config_init(&cfg);
	cfg.id = "keymem-router";
	cfg.mode = TERN_MODE_ROUTER;
	cfg.log_level = TERN_LOG_ERROR;
	cfg.telemetry_interval_ms = 0;
	if (tern_node_open(&r, &cfg) != 0 ||
	    tern_node_listen(r, "tcp://127.0.0.1:0", bound, sizeof(bound)) != 0 ||
	    write(out, bound, sizeof(bound)) != (ssize_t)sizeof(bound)) {
		_exit(1);
	}
	while (read(in, &cmd, 1) == 1) {
		long now = atomic_load(&live);
		if (write(out, &now, sizeof(now)) != (ssize_t)sizeof(now)) {
			_exit(1);
		}
	}
	tern_node_close(r);
	_exit(0);
}

static long
ask_live(struct child *router)
{
	char cmd = 'l';
	long now = -1;

	assert_int_equal(write(router->to, &cmd, 1), 1);
	assert_int_equal(read(router->from, &now, sizeof(now)), (ssize_t)sizeof(now));
	return now;
}
#endif

/*
 * A router between a publisher of KEYS idle keys and a subscriber to all of
 * them holds at most ROUTER_KEY_MAX live bytes a key. Runs first: it forks,
 * and no other node's threads may exist then.
 */
static void
test_router_key_cost(void **state)
{
#ifndef TERN_TEST_SANITIZED
	struct child router;
	char bound[256], key[32];
	tern_pub **pubs = calloc(KEYS, sizeof(*pubs)), *probe;
	tern_sub *sub;
	tern_msg m;
	long base, after;

	(void)state;
	child_start(&router, router_process);
	assert_int_equal(read(router.from, bound, sizeof(bound)), (ssize_t)sizeof(bound));
	tern_node *s = open_node("keymem-sub"), *p = open_node("keymem-pub");
	assert_int_equal(tern_node_connect(s, bound), 0);
	assert_int_equal(tern_node_connect(p, bound), 0);
	assert_int_equal(tern_node_wait_peers(s, 1, 10000), 0);
	assert_int_equal(tern_node_wait_peers(p, 1, 10000), 0);
	assert_int_equal(tern_sub_open(&sub, s, "k/**", NULL, NULL), 0);
	/* the subscription has reached the publisher's node through the router */
	assert_int_equal(tern_pub_open(&probe, p, "k/probe", -1), 0);
	for (int w = 0; w < 60000 && tern_pub_matched(probe) == 0; w++) {
		usleep(1000);
	}
	assert_true(tern_pub_matched(probe) > 0);
	usleep(200000);
	base = ask_live(&router);
	for (long i = 0; i < KEYS; i++) {
		snprintf(key, sizeof(key), "k/%ld", i);
		assert_int_equal(tern_pub_open(&pubs[i], p, key, -1), 0);
	}
	/* the router takes a connection's messages in order: when this one
	 * has come through, it has opened a channel onward for every key */
	assert_int_equal(tern_publish(probe, "x", 1), 0);
	assert_int_equal(tern_sub_recv(sub, &m, 60000), 0);
	after = ask_live(&router);
	print_message("router: live bytes %ld before %d idle keys, %ld after: %ld a key\n", base,
	              KEYS, after, (after - base) / KEYS);
	assert_true((after - base) / KEYS <= ROUTER_KEY_MAX);
	child_end(&router);
	for (long i = 0; i < KEYS; i++) {
		assert_int_equal(tern_pub_close(pubs[i]), 0);
	}
	tern_pub_close(probe);
	tern_sub_close(sub);
	tern_node_close(p);
	tern_node_close(s);
	free(pubs);
#else
	(void)state;
	skip();
#endif
}

static void
test_publishers_come_and_go(void **state)
{
#ifndef TERN_TEST_SANITIZED
	tern_node *a = open_node("keymem-a"), *b = open_node("keymem-b");
	char bound[256];
	tern_sub *sub;

	(void)state;
	assert_int_equal(tern_node_listen(a, "tcp://127.0.0.1:0", bound, sizeof(bound)), 0);
	assert_int_equal(tern_sub_open(&sub, a, "k/**", NULL, NULL), 0);
	assert_int_equal(tern_node_connect(b, bound), 0);
	assert_int_equal(tern_node_wait_peers(b, 1, 10000), 0);
	/* a first round, so that what is made once (the tables' first pages,
	 * the allocator's own) is there before counting */
	round_of_keys(b, sub, 20000);
	long base = quiet_live();
	round_of_keys(b, sub, KEYS);
	long after = settle_to(base);
	print_message("live bytes: %ld before %d keys, %ld after (%+ld)\n", base, KEYS, after,
	              after - base);
	assert_true(after - base <= SLACK);
	tern_sub_close(sub);
	tern_node_close(b);
	tern_node_close(a);
#else
	(void)state;
	skip(); /* the sanitizers bring their own allocator */
#endif
}

static void
test_subscriptions_come_and_go(void **state)
{
#ifndef TERN_TEST_SANITIZED
	tern_node *a = open_node("keymem-subs");
	tern_sub **subs = calloc(KEYS, sizeof(*subs));
	char ke[32];
	long base, after;

	(void)state;
	base = atomic_load(&live);
	for (long i = 0; i < KEYS; i++) {
		snprintf(ke, sizeof(ke), "s/%ld/*", i);
		assert_int_equal(tern_sub_open(&subs[i], a, ke, NULL, NULL), 0);
	}
	long open = atomic_load(&live);
	print_message("live bytes per idle subscription: %ld\n", (open - base) / KEYS);
	/* a subscription that never got a message holds no queue yet */
	assert_true((open - base) / KEYS <= IDLE_SUB_MAX);
	for (long i = 0; i < KEYS; i++) {
		tern_sub_close(subs[i]);
	}
	after = settle_to(base);
	print_message("live bytes: %ld before %d subscriptions, %ld after (%+ld)\n", base, KEYS,
	              after, after - base);
	assert_true(after - base <= SLACK);
	tern_node_close(a);
	free(subs);
#else
	(void)state;
	skip();
#endif
}

#ifndef TERN_TEST_SANITIZED
/* This process's resident memory in KiB (VmRSS), or -1. */
static long
rss_kib(void)
{
	char line[256];
	long kib = -1;
	FILE *f = fopen("/proc/self/status", "r");

	while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1) {
			break;
		}
	}
	if (f != NULL) {
		fclose(f);
	}
	return kib;
}

#define BACKLOG_KEYS 8
#define BACKLOG_MSGS 32000
#define BACKLOG_LEN  1024

struct drain {
	tern_sub *sub;
	int n, got;
};

static void *
drain_thread(void *arg)
{
	struct drain *d = arg;
	tern_msg m;

	while (d->got < d->n && tern_sub_recv(d->sub, &m, 30000) == 0) {
		d->got++;
	}
	return NULL;
}

/* b -> router -> a, BACKLOG_KEYS reliable keys in turn; n messages of
 * BACKLOG_LEN bytes taken by a thread of their own while they are
 * published. Returns the most resident memory seen meanwhile (looked at
 * every 1,024 messages: the buffers grow early, and a look only at the end
 * could come after a stalled thread's second of quiet, when they may
 * have gone back). */
static long
stream_through(tern_pub **pubs, tern_sub *sub, int n)
{
	static uint8_t payload[BACKLOG_LEN];
	struct drain d = {.sub = sub, .n = n};
	long most = rss_kib(), now;
	pthread_t t;

	assert_int_equal(pthread_create(&t, NULL, drain_thread, &d), 0);
	for (int i = 0; i < n; i++) {
		assert_int_equal(tern_publish(pubs[i % BACKLOG_KEYS], payload, sizeof(payload)), 0);
		if (i % 1024 == 1023 && (now = rss_kib()) > most) {
			most = now;
		}
	}
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(d.got, n);
	now = rss_kib();
	return now > most ? now : most;
}
#endif

/*
 * A stream of 32 MB on 8 keys through a router grows the send rings on its way (the
 * publisher's to the router, the router's to the subscriber) to hold a
 * window or more each; once the stream has stopped for a while, the
 * connections, still open, hold no more than before it, and the process
 * gives the memory back to the system (VmRSS).
 */
static void
test_idle_after_backlog(void **state)
{
#ifndef TERN_TEST_SANITIZED
	tern_node *a = open_node("keymem-bl-sub"), *b = open_node("keymem-bl-pub"), *r;
	char bound[256];
	tern_config cfg;
	tern_pub *pubs[BACKLOG_KEYS];
	tern_sub *sub;

	(void)state;
	tern_config_init(&cfg);
	cfg.id = "keymem-bl-router";
	cfg.mode = TERN_MODE_ROUTER;
	cfg.log_level = TERN_LOG_ERROR;
	cfg.telemetry_interval_ms = 0;
	assert_int_equal(tern_node_open(&r, &cfg), 0);
	assert_int_equal(tern_node_listen(r, "tcp://127.0.0.1:0", bound, sizeof(bound)), 0);
	assert_int_equal(tern_node_connect(a, bound), 0);
	assert_int_equal(tern_node_connect(b, bound), 0);
	assert_int_equal(tern_node_wait_peers(a, 1, 10000), 0);
	assert_int_equal(tern_node_wait_peers(b, 1, 10000), 0);
	assert_int_equal(tern_sub_open(&sub, a, "bl/*", NULL, NULL), 0);
	for (int k = 0; k < BACKLOG_KEYS; k++) {
		char key[16];
		snprintf(key, sizeof(key), "bl/%d", k);
		assert_int_equal(tern_pub_open(&pubs[k], b, key, -1), 0);
		for (int w = 0; w < 60000 && tern_pub_matched(pubs[k]) == 0; w++) {
			usleep(1000);
		}
		assert_true(tern_pub_matched(pubs[k]) > 0);
	}
	/* what a few messages make (queues, first buffers) is there before
	 * counting */
	stream_through(pubs, sub, 16 * BACKLOG_KEYS);
	long base = quiet_live(), rss_base = rss_kib();
	long rss_peak = stream_through(pubs, sub, BACKLOG_MSGS);
	long after = settle_to(base);
	/* the pages under what was freed go back to the system too: at least
	 * half of what the backlog added to the process's resident memory */
	long rss = rss_kib();
	for (int i = 0; i < 300 && rss - rss_base > (rss_peak - rss_base) / 2; i++) {
		usleep(100000);
		rss = rss_kib();
	}
	print_message("resident: %ld KiB before the backlog, %ld at most during it, %ld after\n",
	              rss_base, rss_peak, rss);
	assert_true(rss_base > 0 && rss - rss_base <= (rss_peak - rss_base) / 2);
	print_message("live bytes: %ld before a backlog of %d bytes, %ld after (%+ld)\n", base,
	              BACKLOG_MSGS * BACKLOG_LEN, after, after - base);
	assert_true(after - base <= SLACK);
	for (int k = 0; k < BACKLOG_KEYS; k++) {
		tern_pub_close(pubs[k]);
	}
	tern_sub_close(sub);
	tern_node_close(b);
	tern_node_close(a);
	tern_node_close(r);
#else
	(void)state;
	skip();
#endif
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_router_key_cost),
	    cmocka_unit_test(test_publishers_come_and_go),
	    cmocka_unit_test(test_subscriptions_come_and_go),
	    cmocka_unit_test(test_idle_after_backlog),
	};
	return cmocka_run_group_tests_name("keymem", tests, NULL, NULL);
}
