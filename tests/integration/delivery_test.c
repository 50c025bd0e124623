/*
 * delivery_test.c - reliable delivery through the public API only, where the
 * route changes under traffic or the I/O thread itself publishes:
 *  - a subscriber that joins a router while large messages flow gets whole
 *    messages from the next one on, and costs the other subscriber nothing;
 *  - a router between peers with different chunk_bytes re-chunks what it
 *    forwards;
 *  - a callback that replies with tern_publish (request/reply), with and
 *    without a pull subscriber on the reply key in the same node;
 *  - a publisher blocked on a stalled subscriber does not stop its node's
 *    I/O thread from serving everything else;
 *  - publishers and subscriptions opened and closed on other threads while
 *    a reliable stream flows (declarations run on their caller's thread,
 *    under the loop's run lock) cost the stream nothing;
 *  - bursts through a router a second or more apart, between which the
 *    send rings that grew give their buffers back, arrive whole and in
 *    order.
 *
 * Nodes live in this process and talk over 127.0.0.1. Every wait is bounded
 * and fails rather than hangs; bounds are generous, never timing goals. The
 * ctest entries run one case each (the first argument filters by name), so a
 * case that leaves a node stuck does not take the others with it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tern/tern.h"

/* ---- helpers ---- */

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char log_text[1 << 16];
static size_t log_len;

/* Keeps the info and warn lines of every node (the debug ones would crowd
 * out what a failure needs to show). */
static void
capture(void *arg, int level, const char *line)
{
	(void)arg;
	if (level > TERN_LOG_INFO) {
		return;
	}
	pthread_mutex_lock(&log_lock);
	size_t n = strlen(line);
	if (log_len + n + 2 < sizeof(log_text)) {
		memcpy(log_text + log_len, line, n);
		log_len += n;
		log_text[log_len++] = '\n';
		log_text[log_len] = '\0';
	}
	pthread_mutex_unlock(&log_lock);
}

static bool
log_has(const char *needle)
{
	pthread_mutex_lock(&log_lock);
	bool found = strstr(log_text, needle) != NULL;
	pthread_mutex_unlock(&log_lock);
	return found;
}

static void
log_reset(void)
{
	pthread_mutex_lock(&log_lock);
	log_len = 0;
	log_text[0] = '\0';
	pthread_mutex_unlock(&log_lock);
}

/* Print why, and what the nodes logged, then fail the test. */
#define FAIL_LOG(...)                                                                              \
	do {                                                                                       \
		print_message(__VA_ARGS__);                                                        \
		print_log();                                                                       \
		fail();                                                                            \
	} while (0)

/* cmocka's print_message cuts long text: one line at a time. */
static void
print_log(void)
{
	pthread_mutex_lock(&log_lock);
	print_message("---- node log ----\n");
	for (const char *p = log_text; *p != '\0';) {
		const char *nl = strchr(p, '\n');
		int n = nl != NULL ? (int)(nl - p) : (int)strlen(p);
		print_message("%.*s\n", n, p);
		p += n + (nl != NULL);
	}
	pthread_mutex_unlock(&log_lock);
}

/* Lines that mean a connection was lost or refused something. */
static void
expect_no_connection_trouble(void)
{
	static const char *bad[] = {"went silent", "closing ",     "disconnected",
	                            "dropping ",   "said goodbye", "without a first chunk"};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (log_has(bad[i])) {
			FAIL_LOG("a node logged '%s': a connection was lost\n", bad[i]);
		}
	}
}

static uint64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void
sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

static void
config(tern_config *cfg, const char *id)
{
	tern_config_init(cfg);
	cfg->id = id;
	cfg->log_fn = capture;
	cfg->log_level = TERN_LOG_INFO;
}

static tern_node *
open_node(const tern_config *cfg)
{
	tern_node *node;

	assert_int_equal(tern_node_open(&node, cfg), 0);
	return node;
}

static tern_node *
open_listening(const tern_config *cfg, char *bound, size_t len)
{
	tern_node *node = open_node(cfg);

	assert_int_equal(tern_node_listen(node, "tcp://127.0.0.1:0", bound, len), 0);
	return node;
}

static void
wait_matched(tern_pub *pub, int n)
{
	for (int i = 0; i < 1000 && tern_pub_matched(pub) < n; i++) {
		sleep_ms(10);
	}
	if (tern_pub_matched(pub) < n) {
		FAIL_LOG("the publisher never saw %d subscriber(s)\n", n);
	}
}

/*
 * A payload that says which message it is: 8-byte words (seq << 32 | index)
 * xor a tag, then bytes that follow seq. Any chunk lost, repeated, moved or
 * cut shows.
 */
static void
fill(uint8_t *p, size_t len, uint64_t seq, uint64_t tag)
{
	size_t words = len / 8;

	for (size_t k = 0; k < words; k++) {
		uint64_t w = (seq << 32 | (uint64_t)k) ^ tag;
		memcpy(p + 8 * k, &w, 8);
	}
	for (size_t i = words * 8; i < len; i++) {
		p[i] = (uint8_t)(seq + i);
	}
}

static bool
intact(const uint8_t *p, size_t len, uint64_t seq, uint64_t tag)
{
	size_t words = len / 8;

	for (size_t k = 0; k < words; k++) {
		uint64_t w;
		memcpy(&w, p + 8 * k, 8);
		if (w != ((seq << 32 | (uint64_t)k) ^ tag)) {
			return false;
		}
	}
	for (size_t i = words * 8; i < len; i++) {
		if (p[i] != (uint8_t)(seq + i)) {
			return false;
		}
	}
	return true;
}

/* One subscriber's view of a stream: in order, whole, no gap after the first. */
struct stream {
	atomic_uint_fast64_t got, first, last;
	atomic_bool bad;
	char why[256];
	size_t (*size_of)(uint64_t seq);
	uint64_t tag;
};

static void
stream_take(struct stream *s, const tern_msg *m)
{
	uint64_t last = atomic_load(&s->last);
	size_t want_len = s->size_of(m->seq);

	if (atomic_load(&s->bad)) {
		return;
	}
	if (last != 0 && m->seq != last + 1) {
		snprintf(s->why, sizeof(s->why), "message %llu after %llu",
		         (unsigned long long)m->seq, (unsigned long long)last);
		atomic_store(&s->bad, true);
		return;
	}
	if (m->len != want_len || !intact(m->data, m->len, m->seq, s->tag)) {
		snprintf(s->why, sizeof(s->why), "message %llu: %zu bytes, not the %zu published%s",
		         (unsigned long long)m->seq, m->len, want_len,
		         m->len == want_len ? " (its content differs)" : "");
		atomic_store(&s->bad, true);
		return;
	}
	if (last == 0) {
		atomic_store(&s->first, m->seq);
	}
	atomic_store(&s->last, m->seq);
	atomic_fetch_add(&s->got, 1);
}

/* Wait until the stream's last message is `last`, failing when nothing moves
 * for idle_ms (the transfer stopped) or it is broken. */
static bool
stream_wait(struct stream *s, uint64_t last, int idle_ms)
{
	uint64_t seen = atomic_load(&s->got), moved = now_ms();

	while (atomic_load(&s->last) != last && !atomic_load(&s->bad)) {
		if (atomic_load(&s->got) != seen) {
			seen = atomic_load(&s->got);
			moved = now_ms();
		} else if (now_ms() - moved > (uint64_t)idle_ms) {
			return false;
		}
		sleep_ms(5);
	}
	return atomic_load(&s->last) == last;
}

/* ---- 1. a subscriber joins a router while large messages flow ---- */

static size_t late_size;

static size_t
late_size_of(uint64_t seq)
{
	(void)seq;
	return late_size;
}

struct late {
	struct stream a, b;
	atomic_bool a_has_first; /* A has the first message ... */
	atomic_bool b_joined;    /* ... and waits in its callback until B is routed */
	tern_pub *pub;
	int count;
	atomic_int sent, rc;
	atomic_bool done;
};

static void
late_on_a(void *arg, const tern_msg *m)
{
	struct late *t = arg;

	stream_take(&t->a, m);
	if (m->seq == 1) {
		/* Hold A's node (for a bounded while) so that the router, whose
		 * queue toward A fills, sits in the middle of the next message when
		 * B's subscription reaches it. */
		atomic_store(&t->a_has_first, true);
		for (int i = 0; i < 200 && !atomic_load(&t->b_joined); i++) {
			sleep_ms(10);
		}
	}
}

static void
late_on_b(void *arg, const tern_msg *m)
{
	stream_take(&((struct late *)arg)->b, m);
}

static void *
late_publisher(void *arg)
{
	struct late *t = arg;
	uint8_t *buf = malloc(late_size);

	assert_non_null(buf);
	for (int i = 1; i <= t->count; i++) {
		fill(buf, late_size, (uint64_t)i, 0x5a);
		int rc = tern_publish(t->pub, buf, late_size);
		if (rc != 0) {
			atomic_store(&t->rc, rc);
			break;
		}
		atomic_fetch_add(&t->sent, 1);
	}
	free(buf);
	atomic_store(&t->done, true);
	return NULL;
}

/* Does the router's connection to `peer` carry a channel for `key` yet? */
static bool
routed(tern_node *router, const char *peer, const char *key)
{
	static char json[1 << 16];
	char needle[200];

	tern_node_stats_json(router, json, sizeof(json));
	snprintf(needle, sizeof(needle), "{\"peer\":\"%s\"", peer);
	const char *at = strstr(json, needle);
	if (at == NULL) {
		return false;
	}
	const char *next = strstr(at + 1, "{\"peer\":");
	snprintf(needle, sizeof(needle), "{\"key\":\"%s\"", key);
	const char *ch = strstr(at, needle);
	return ch != NULL && (next == NULL || ch < next);
}

static void
late_subscriber(size_t size, int count)
{
	tern_config cfg;
	tern_node *r, *a, *b, *p;
	tern_sub *sa, *sb;
	char ep[256];
	pthread_t th;
	struct late *t = calloc(1, sizeof(*t));

	assert_non_null(t);
	log_reset();
	late_size = size;
	t->count = count;
	t->a.size_of = t->b.size_of = late_size_of;
	t->a.tag = t->b.tag = 0x5a;

	config(&cfg, "late-router");
	cfg.mode = TERN_MODE_ROUTER;
	cfg.keepalive_ms = 2000; /* A's node is held for up to 2 s on purpose */
	r = open_listening(&cfg, ep, sizeof(ep));
	config(&cfg, "late-a");
	a = open_node(&cfg);
	config(&cfg, "late-b");
	b = open_node(&cfg);
	config(&cfg, "late-pub");
	p = open_node(&cfg);
	assert_int_equal(tern_sub_open(&sa, a, "big/**", late_on_a, t), 0);
	assert_int_equal(tern_node_connect(a, ep), 0);
	assert_int_equal(tern_node_connect(b, ep), 0);
	assert_int_equal(tern_node_connect(p, ep), 0);
	assert_int_equal(tern_node_wait_peers(r, 3, 10000), 0);
	assert_int_equal(tern_pub_open(&t->pub, p, "big/x", TERN_RELIABLE), 0);
	assert_int_equal(tern_node_wait_peers(p, 1, 10000), 0);
	wait_matched(t->pub, 1);

	pthread_create(&th, NULL, late_publisher, t);
	for (int i = 0; i < 3000 && !atomic_load(&t->a_has_first); i++) {
		sleep_ms(10);
	}
	if (!atomic_load(&t->a_has_first)) {
		FAIL_LOG("A did not receive the first message within 30 s\n");
	}
	assert_int_equal(tern_sub_open(&sb, b, "big/**", late_on_b, t), 0);
	for (int i = 0; i < 150 && !routed(r, "late-b", "big/x"); i++) {
		sleep_ms(10);
	}
	atomic_store(&t->b_joined, true);

	/* the publisher is done once each message is queued or refused */
	for (int i = 0; i < 12000 && !atomic_load(&t->done); i++) {
		sleep_ms(10);
	}
	if (!atomic_load(&t->done)) {
		FAIL_LOG("the publisher is still blocked after 120 s (%d of %d published)\n",
		         atomic_load(&t->sent), count);
	}
	pthread_join(th, NULL);
	bool a_all = stream_wait(&t->a, (uint64_t)count, 10000);
	bool b_all = stream_wait(&t->b, (uint64_t)count, 10000);
	tern_stats st_a, st_b;
	tern_sub_stats(sa, &st_a);
	tern_sub_stats(sb, &st_b);
	print_message("%d x %zu bytes: published %d (last rc %d), A got %llu (missed %llu), B got "
	              "%llu from %llu to %llu (missed %llu)\n",
	              count, size, atomic_load(&t->sent), atomic_load(&t->rc),
	              (unsigned long long)atomic_load(&t->a.got), (unsigned long long)st_a.missed,
	              (unsigned long long)atomic_load(&t->b.got),
	              (unsigned long long)atomic_load(&t->b.first),
	              (unsigned long long)atomic_load(&t->b.last), (unsigned long long)st_b.missed);
	if (atomic_load(&t->a.bad)) {
		FAIL_LOG("A: %s\n", t->a.why);
	}
	if (atomic_load(&t->b.bad)) {
		FAIL_LOG("B: %s\n", t->b.why);
	}
	if (atomic_load(&t->rc) != 0 || atomic_load(&t->sent) != count) {
		FAIL_LOG("tern_publish failed: %s\n", tern_strerror(atomic_load(&t->rc)));
	}
	if (!a_all || atomic_load(&t->a.got) != (uint64_t)count || st_a.missed != 0) {
		FAIL_LOG("A received %llu of %d messages, although every tern_publish returned 0\n",
		         (unsigned long long)atomic_load(&t->a.got), count);
	}
	/* B joined after the first message: it gets every whole message from the
	 * next one it could see from its start, through the last */
	if (!b_all || atomic_load(&t->b.first) < 2 || st_b.missed != 0) {
		FAIL_LOG("B did not receive a whole suffix of the messages\n");
	}
	expect_no_connection_trouble();

	tern_pub_close(t->pub);
	tern_sub_close(sa);
	tern_sub_close(sb);
	tern_node_close(p);
	tern_node_close(b);
	tern_node_close(a);
	tern_node_close(r);
	free(t);
}

/* 4 MiB messages: quick, and still 64 chunks each */
static void
test_late_subscriber(void **state)
{
	(void)state;
	late_subscriber(4u << 20, 20);
}

/* as reported: 20 messages of 32 MiB */
static void
test_late_subscriber_32m(void **state)
{
	(void)state;
	late_subscriber(32u << 20, 20);
}

/* ---- 2. a router between peers with different chunk sizes ---- */

static const size_t rechunk_sizes[] = {1u << 20, 3000, 100000,          (1u << 20) + 1, 5u << 20,
                                       65536,    1,    (64u << 10) - 3, 777777,         4096};
#define RECHUNK_N (sizeof(rechunk_sizes) / sizeof(rechunk_sizes[0]))

static size_t
rechunk_size_of(uint64_t seq)
{
	return seq >= 1 && seq <= RECHUNK_N ? rechunk_sizes[seq - 1] : 0;
}

static void
on_stream(void *arg, const tern_msg *m)
{
	stream_take(arg, m);
}

static void
test_rechunk(void **state)
{
	tern_config cfg;
	tern_node *r, *p, *s;
	tern_pub *pub;
	tern_sub *sub;
	char ep[256];
	struct stream *st = calloc(1, sizeof(*st));
	uint8_t *buf = malloc(5u << 20);
	(void)state;

	assert_non_null(st);
	assert_non_null(buf);
	log_reset();
	st->size_of = rechunk_size_of;
	st->tag = 0xc4;
	config(&cfg, "chunk-router"); /* default chunk_bytes (64 KiB) */
	cfg.mode = TERN_MODE_ROUTER;
	r = open_listening(&cfg, ep, sizeof(ep));
	config(&cfg, "chunk-pub");
	cfg.chunk_bytes = 1u << 20;
	cfg.batch_max_bytes = 4u << 20;
	p = open_node(&cfg);
	config(&cfg, "chunk-sub");
	cfg.chunk_bytes = 4096;
	s = open_node(&cfg);
	assert_int_equal(tern_sub_open(&sub, s, "chunk/**", on_stream, st), 0);
	assert_int_equal(tern_node_connect(s, ep), 0);
	assert_int_equal(tern_node_connect(p, ep), 0);
	assert_int_equal(tern_node_wait_peers(r, 2, 10000), 0);
	assert_int_equal(tern_pub_open(&pub, p, "chunk/x", TERN_RELIABLE), 0);
	assert_int_equal(tern_node_wait_peers(p, 1, 10000), 0);
	wait_matched(pub, 1);
	for (uint64_t i = 1; i <= RECHUNK_N; i++) {
		fill(buf, rechunk_size_of(i), i, 0xc4);
		int rc = tern_publish(pub, buf, rechunk_size_of(i));
		if (rc != 0) {
			FAIL_LOG("publish %llu: %s\n", (unsigned long long)i, tern_strerror(rc));
		}
	}
	bool all = stream_wait(st, RECHUNK_N, 10000);
	print_message("the subscriber (chunk_bytes 4096) got %llu of %zu messages\n",
	              (unsigned long long)atomic_load(&st->got), RECHUNK_N);
	if (atomic_load(&st->bad)) {
		FAIL_LOG("%s\n", st->why);
	}
	if (!all || atomic_load(&st->got) != RECHUNK_N || atomic_load(&st->first) != 1) {
		FAIL_LOG("the messages did not all arrive through the router\n");
	}
	expect_no_connection_trouble();
	tern_pub_close(pub);
	tern_sub_close(sub);
	tern_node_close(p);
	tern_node_close(s);
	tern_node_close(r);
	free(buf);
	free(st);
}

/* ---- 3. request/reply: a callback that publishes ---- */

#define RR_REQUESTS  100000
#define RR_REPLY_LEN 512 /* replies outweigh requests: credit toward the client runs out */

struct rr {
	tern_pub *reply;
	atomic_int reply_rc;   /* the first failure of a reply's tern_publish */
	atomic_long replied;   /* replies the server's callback published */
	struct stream replies; /* what the client received */
	tern_sub *pull;        /* a pull subscriber on the server matching replies */
	atomic_long pulled;    /* messages it took */
	atomic_bool stop;
};

static size_t
rr_reply_size(uint64_t seq)
{
	(void)seq;
	return RR_REPLY_LEN;
}

/* The server: each request gets a reply, published from the callback. */
static void
rr_on_request(void *arg, const tern_msg *m)
{
	struct rr *t = arg;
	uint8_t reply[RR_REPLY_LEN];
	uint64_t n;

	if (m->len != sizeof(n)) {
		return;
	}
	memcpy(&n, m->data, sizeof(n));
	fill(reply, sizeof(reply), n, 0x77); /* reply n answers request n */
	int rc = tern_publish(t->reply, reply, sizeof(reply));
	if (rc != 0) {
		int zero = 0;
		atomic_compare_exchange_strong(&t->reply_rc, &zero, rc);
		return;
	}
	atomic_fetch_add(&t->replied, 1);
}

static void
rr_on_reply(void *arg, const tern_msg *m)
{
	stream_take(&((struct rr *)arg)->replies, m);
}

static void *
rr_drain(void *arg)
{
	struct rr *t = arg;
	tern_msg m;

	while (!atomic_load(&t->stop)) {
		if (tern_sub_recv(t->pull, &m, 50) == 0) {
			atomic_fetch_add(&t->pulled, 1);
		}
	}
	return NULL;
}

static void
reply_from_callback(bool with_pull)
{
	tern_config cfg;
	tern_node *server, *client;
	tern_sub *req_sub, *rep_sub;
	tern_pub *req;
	char ep[256];
	pthread_t drain;
	struct rr *t = calloc(1, sizeof(*t));

	assert_non_null(t);
	log_reset();
	t->replies.size_of = rr_reply_size;
	t->replies.tag = 0x77;
	config(&cfg, "rr-server");
	server = open_listening(&cfg, ep, sizeof(ep));
	config(&cfg, "rr-client");
	client = open_node(&cfg);
	assert_int_equal(tern_pub_open(&t->reply, server, "rr/rep", TERN_RELIABLE), 0);
	assert_int_equal(tern_sub_open(&req_sub, server, "rr/req", rr_on_request, t), 0);
	if (with_pull) {
		/* matches the requests and this node's own replies */
		assert_int_equal(tern_sub_open(&t->pull, server, "rr/**", NULL, NULL), 0);
		pthread_create(&drain, NULL, rr_drain, t);
	}
	assert_int_equal(tern_sub_open(&rep_sub, client, "rr/rep", rr_on_reply, t), 0);
	assert_int_equal(tern_node_connect(client, ep), 0);
	assert_int_equal(tern_pub_open(&req, client, "rr/req", TERN_RELIABLE), 0);
	assert_int_equal(tern_node_wait_peers(client, 1, 10000), 0);
	wait_matched(req, 1);
	wait_matched(t->reply, with_pull ? 2 : 1);

	/* requests are pipelined: the client does not wait for each reply */
	uint64_t moved = now_ms();
	long seen = 0;
	for (uint64_t n = 1; n <= RR_REQUESTS; n++) {
		int rc = tern_publish(req, &n, sizeof(n));
		if (rc != 0) {
			FAIL_LOG(
			    "request %llu: %s (the server took %ld, replied %ld, the client has "
			    "%llu replies)\n",
			    (unsigned long long)n, tern_strerror(rc), (long)(n - 1),
			    atomic_load(&t->replied),
			    (unsigned long long)atomic_load(&t->replies.got));
		}
		if ((n & 1023) == 0 && atomic_load(&t->replied) == seen) {
			/* a server that stopped answering must fail the test, not hang it */
			if (now_ms() - moved > 20000) {
				FAIL_LOG(
				    "no reply published for 20 s after %ld replies (%llu requests "
				    "sent)\n",
				    seen, (unsigned long long)n);
			}
		} else if ((n & 1023) == 0) {
			seen = atomic_load(&t->replied);
			moved = now_ms();
		}
	}
	bool all = stream_wait(&t->replies, RR_REQUESTS, 20000);
	print_message("%d requests: the server published %ld replies (first failure: %s), the "
	              "client received %llu, the server's pull subscriber took %ld\n",
	              RR_REQUESTS, atomic_load(&t->replied),
	              atomic_load(&t->reply_rc) ? tern_strerror(atomic_load(&t->reply_rc)) : "none",
	              (unsigned long long)atomic_load(&t->replies.got), atomic_load(&t->pulled));
	if (atomic_load(&t->replies.bad)) {
		FAIL_LOG("replies: %s\n", t->replies.why);
	}
	if (atomic_load(&t->reply_rc) != 0) {
		FAIL_LOG("a reply's tern_publish failed on the server: %s\n",
		         tern_strerror(atomic_load(&t->reply_rc)));
	}
	if (!all || atomic_load(&t->replies.got) != RR_REQUESTS ||
	    atomic_load(&t->replies.first) != 1) {
		FAIL_LOG("the client did not receive every reply\n");
	}
	if (with_pull) {
		/* it sees every request and every reply */
		for (int i = 0; i < 2000 && atomic_load(&t->pulled) < 2L * RR_REQUESTS; i++) {
			sleep_ms(10);
		}
		assert_int_equal(atomic_load(&t->pulled), 2L * RR_REQUESTS);
	}
	expect_no_connection_trouble();
	atomic_store(&t->stop, true);
	if (with_pull) {
		pthread_join(drain, NULL);
		tern_sub_close(t->pull);
	}
	tern_pub_close(req);
	tern_sub_close(rep_sub);
	tern_sub_close(req_sub);
	tern_pub_close(t->reply);
	tern_node_close(client);
	tern_node_close(server);
	free(t);
}

static void
test_reply_from_callback(void **state)
{
	(void)state;
	reply_from_callback(false);
}

static void
test_reply_from_callback_pull(void **state)
{
	(void)state;
	reply_from_callback(true);
}

/* ---- 4. a blocked publisher does not stop its node ---- */

struct blocked {
	tern_node *node;
	tern_pub *stuck;
	atomic_long sent;
	atomic_int rc;
	atomic_bool stop, churn_done;
	atomic_long churn_max_ms; /* the longest subscribe or unsubscribe */
	atomic_int live_got;
};

static void *
blocked_flood(void *arg)
{
	struct blocked *t = arg;
	uint8_t msg[1024] = {0};

	while (!atomic_load(&t->stop)) {
		int rc = tern_publish(t->stuck, msg, sizeof(msg));
		if (rc != 0) {
			atomic_store(&t->rc, rc);
			break;
		}
		atomic_fetch_add(&t->sent, 1);
	}
	return NULL;
}

/* Subscribe and unsubscribe on the publisher's node: each changes its routes. */
static void *
blocked_churn(void *arg)
{
	struct blocked *t = arg;

	for (int i = 0; i < 5; i++) {
		tern_sub *s;
		uint64_t t0 = now_ms();
		assert_int_equal(tern_sub_open(&s, t->node, "other/k", NULL, NULL), 0);
		tern_sub_close(s);
		long took = (long)(now_ms() - t0);
		if (took > atomic_load(&t->churn_max_ms)) {
			atomic_store(&t->churn_max_ms, took);
		}
	}
	atomic_store(&t->churn_done, true);
	return NULL;
}

static void
on_live(void *arg, const tern_msg *m)
{
	(void)m;
	atomic_fetch_add(&((struct blocked *)arg)->live_got, 1);
}

static void
test_blocked_publisher(void **state)
{
	tern_config cfg;
	tern_node *n1, *n2;
	tern_sub *stalled, *live_sub;
	tern_pub *live;
	char ep[256];
	pthread_t flood, churn;
	struct blocked *t = calloc(1, sizeof(*t));
	(void)state;

	assert_non_null(t);
	log_reset();
	config(&cfg, "blocked-sub");
	n2 = open_listening(&cfg, ep, sizeof(ep));
	config(&cfg, "blocked-pub");
	cfg.publish_timeout_ms = 15000; /* the publisher stays blocked through the test */
	cfg.slow_consumer_ms = 60000;   /* and the stalled peer is not dropped meanwhile */
	cfg.queue_max_bytes = 1u << 20;
	n1 = open_node(&cfg);
	t->node = n1;
	assert_int_equal(tern_sub_open(&stalled, n2, "stuck", NULL, NULL), 0); /* never read */
	assert_int_equal(tern_sub_open(&live_sub, n2, "live", on_live, t), 0);
	assert_int_equal(tern_node_connect(n1, ep), 0);
	assert_int_equal(tern_pub_open(&t->stuck, n1, "stuck", TERN_RELIABLE), 0);
	assert_int_equal(tern_pub_open(&live, n1, "live", TERN_RELIABLE), 0);
	assert_int_equal(tern_node_wait_peers(n1, 1, 10000), 0);
	wait_matched(t->stuck, 1);
	wait_matched(live, 1);

	pthread_create(&flood, NULL, blocked_flood, t);
	/* the stalled subscriber's queue, its node's window and this node's
	 * queue fill up: the publisher stops advancing, blocked in tern_publish */
	long last = -1;
	for (int i = 0; i < 500 && atomic_load(&t->sent) != last; i++) {
		last = atomic_load(&t->sent);
		sleep_ms(100);
	}
	assert_true(atomic_load(&t->sent) > 0);
	assert_int_equal(atomic_load(&t->rc), 0); /* blocked, not failed */

	pthread_create(&churn, NULL, blocked_churn, t);
	/* meanwhile another key keeps flowing, message by message */
	for (int i = 1; i <= 40 || !atomic_load(&t->churn_done); i++) {
		uint64_t t0 = now_ms();
		assert_int_equal(tern_publish(live, "x", 1), 0);
		while (atomic_load(&t->live_got) < i && now_ms() - t0 < 5000) {
			sleep_ms(1);
		}
		if (atomic_load(&t->live_got) < i) {
			FAIL_LOG("live message %d did not arrive within 5 s while the other key's "
			         "publisher was blocked\n",
			         i);
		}
		if (i > 2000) {
			FAIL_LOG("subscribing on the publisher's node did not finish\n");
		}
		sleep_ms(20);
	}
	pthread_join(churn, NULL);
	print_message("stuck publisher: %ld messages; live: %d; longest subscribe or "
	              "unsubscribe: %ld ms\n",
	              atomic_load(&t->sent), atomic_load(&t->live_got),
	              atomic_load(&t->churn_max_ms));
	if (atomic_load(&t->churn_max_ms) > 5000) {
		FAIL_LOG("a subscribe or unsubscribe took %ld ms\n", atomic_load(&t->churn_max_ms));
	}
	assert_int_equal(atomic_load(&t->rc), 0); /* still blocked, not timed out */
	expect_no_connection_trouble();

	atomic_store(&t->stop, true);
	tern_sub_close(stalled); /* the blocked publisher's channel goes: it returns */
	pthread_join(flood, NULL);
	tern_pub_close(t->stuck);
	tern_pub_close(live);
	tern_sub_close(live_sub);
	tern_node_close(n1);
	tern_node_close(n2);
	free(t);
}

/* ---- declarations on other threads, under traffic ---- */

#define CHURN_ROUNDS   1000
#define CHURN_MESSAGES 200000
#define CHURN_WAIT_MS  30000

struct churn {
	tern_node *node;
	int id;
	atomic_int *failed;
};

/* Open a subscription and a publisher on a key of its own, publish one
 * message, get it back, close both: CHURN_ROUNDS times. */
static void *
churn_main(void *arg)
{
	struct churn *c = arg;

	for (int i = 0; i < CHURN_ROUNDS && atomic_load(c->failed) == 0; i++) {
		char key[64];
		tern_sub *sub;
		tern_pub *pub;
		tern_msg m;

		snprintf(key, sizeof(key), "churn/%d/%d", c->id, i);
		if (tern_sub_open(&sub, c->node, key, NULL, NULL) != 0) {
			atomic_store(c->failed, 1);
			break;
		}
		if (tern_pub_open(&pub, c->node, key, TERN_RELIABLE) != 0) {
			atomic_store(c->failed, 2);
			tern_sub_close(sub);
			break;
		}
		if (tern_publish(pub, &i, sizeof(i)) != 0 ||
		    tern_sub_recv(sub, &m, CHURN_WAIT_MS) != 0 || m.len != sizeof(i) ||
		    memcmp(m.data, &i, sizeof(i)) != 0) {
			atomic_store(c->failed, 3);
		}
		if (tern_pub_close(pub) != 0) {
			atomic_store(c->failed, 4);
		}
		tern_sub_close(sub);
	}
	return NULL;
}

struct churn_stream {
	tern_pub *pub;
	atomic_int rc;
};

static void *
stream_main(void *arg)
{
	struct churn_stream *st = arg;

	for (uint32_t i = 0; i < CHURN_MESSAGES; i++) {
		int rc = tern_publish(st->pub, &i, sizeof(i));
		if (rc != 0) {
			atomic_store(&st->rc, rc);
			break;
		}
	}
	return NULL;
}

/*
 * Node a streams CHURN_MESSAGES reliable messages to a pull subscriber on
 * node b, while two threads on a and one on b open and close publishers
 * and subscriptions (each declaration a route change on both nodes, each
 * close an end spread to the other). The stream arrives whole and in
 * order, and every declaration works.
 */
static void
test_declare_under_traffic(void **state)
{
	tern_config ca, cb;
	char bound[256];
	atomic_int failed = 0;
	struct churn ch[3];
	struct churn_stream st = {.rc = 0};
	pthread_t churners[3], streamer;
	tern_node *a, *b;
	tern_sub *sub;
	tern_msg m;
	(void)state;

	log_reset();
	config(&ca, "churn-a");
	config(&cb, "churn-b");
	a = open_listening(&ca, bound, sizeof(bound));
	b = open_node(&cb);
	assert_int_equal(tern_node_connect(b, bound), 0);
	assert_int_equal(tern_node_wait_peers(b, 1, CHURN_WAIT_MS), 0);
	assert_int_equal(tern_sub_open(&sub, b, "stream/main", NULL, NULL), 0);
	assert_int_equal(tern_pub_open(&st.pub, a, "stream/main", TERN_RELIABLE), 0);
	wait_matched(st.pub, 1);

	for (int k = 0; k < 3; k++) {
		ch[k] = (struct churn){k < 2 ? a : b, k, &failed};
		assert_int_equal(pthread_create(&churners[k], NULL, churn_main, &ch[k]), 0);
	}
	assert_int_equal(pthread_create(&streamer, NULL, stream_main, &st), 0);
	for (uint32_t i = 0; i < CHURN_MESSAGES; i++) {
		uint32_t got;
		if (tern_sub_recv(sub, &m, CHURN_WAIT_MS) != 0) {
			FAIL_LOG("message %u of the stream did not come\n", i);
		}
		memcpy(&got, m.data, sizeof(got));
		if (got != i) {
			FAIL_LOG("message %u of the stream came as %u\n", i, got);
		}
	}
	pthread_join(streamer, NULL);
	for (int k = 0; k < 3; k++) {
		pthread_join(churners[k], NULL);
	}
	assert_int_equal(atomic_load(&st.rc), 0);
	assert_int_equal(atomic_load(&failed), 0);
	expect_no_connection_trouble();

	assert_int_equal(tern_pub_close(st.pub), 0);
	tern_sub_close(sub);
	tern_node_close(b);
	tern_node_close(a);
}

#define BURSTS      4
#define BURST_MSGS  2000
#define BURST_BYTES 1024
/* Quiet gaps around the second after which an idle ring's buffer goes
 * back, so that some bursts start as it goes and others after. */
static const int burst_gap_ms[BURSTS] = {0, 2200, 1300, 2200};

static void *
bursts_main(void *arg)
{
	struct churn_stream *st = arg;
	static uint8_t payload[BURST_BYTES];

	for (uint64_t i = 0; i < BURSTS * BURST_MSGS; i++) {
		if (i % BURST_MSGS == 0) {
			sleep_ms(burst_gap_ms[i / BURST_MSGS]);
		}
		fill(payload, sizeof(payload), i, 0x77);
		int rc = tern_publish(st->pub, payload, sizeof(payload));
		if (rc != 0) {
			atomic_store(&st->rc, rc);
			break;
		}
	}
	return NULL;
}

/*
 * Bursts of 2 MB from a publisher through a router to a pull subscriber,
 * apart by quiet gaps of 1.3 to 2.2 seconds: the rings on the
 * way (the publisher's, the router's) grow in each burst and give their
 * buffers back in the gaps, while the publisher's thread and the router's
 * I/O thread produce into them. Every message arrives, intact and in
 * order.
 */
static void
test_bursts_after_idle(void **state)
{
	struct churn_stream st = {.rc = 0};
	tern_config cfg;
	char ep[256];
	pthread_t th;
	tern_node *r, *a, *b;
	tern_sub *sub;
	tern_msg m;
	(void)state;

	log_reset();
	config(&cfg, "bursts-router");
	cfg.mode = TERN_MODE_ROUTER;
	r = open_listening(&cfg, ep, sizeof(ep));
	config(&cfg, "bursts-pub");
	a = open_node(&cfg);
	config(&cfg, "bursts-sub");
	b = open_node(&cfg);
	assert_int_equal(tern_node_connect(a, ep), 0);
	assert_int_equal(tern_node_connect(b, ep), 0);
	assert_int_equal(tern_node_wait_peers(a, 1, CHURN_WAIT_MS), 0);
	assert_int_equal(tern_node_wait_peers(b, 1, CHURN_WAIT_MS), 0);
	assert_int_equal(tern_sub_open(&sub, b, "bursts/x", NULL, NULL), 0);
	assert_int_equal(tern_pub_open(&st.pub, a, "bursts/x", TERN_RELIABLE), 0);
	wait_matched(st.pub, 1);

	assert_int_equal(pthread_create(&th, NULL, bursts_main, &st), 0);
	for (uint64_t i = 0; i < BURSTS * BURST_MSGS; i++) {
		if (tern_sub_recv(sub, &m, CHURN_WAIT_MS) != 0) {
			FAIL_LOG("message %llu of the bursts did not come\n",
			         (unsigned long long)i);
		}
		if (m.len != BURST_BYTES || !intact(m.data, m.len, i, 0x77)) {
			FAIL_LOG("message %llu of the bursts came changed or out of order\n",
			         (unsigned long long)i);
		}
	}
	pthread_join(th, NULL);
	assert_int_equal(atomic_load(&st.rc), 0);
	expect_no_connection_trouble();

	assert_int_equal(tern_pub_close(st.pub), 0);
	tern_sub_close(sub);
	tern_node_close(a);
	tern_node_close(b);
	tern_node_close(r);
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_late_subscriber),
	    cmocka_unit_test(test_late_subscriber_32m),
	    cmocka_unit_test(test_rechunk),
	    cmocka_unit_test(test_reply_from_callback),
	    cmocka_unit_test(test_reply_from_callback_pull),
	    cmocka_unit_test(test_blocked_publisher),
	    cmocka_unit_test(test_declare_under_traffic),
	    cmocka_unit_test(test_bursts_after_idle),
	};

	if (argc > 1) {
		cmocka_set_test_filter(argv[1]);
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
