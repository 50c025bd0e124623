/*
 * peerio_test.c - a node against raw sockets that speak (or fail to speak)
 * the protocol: another version, another magic, garbage; and the batching
 * contract seen from outside (write size bound, idle flush).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "control.h"
#include "tern/tern.h"
#include "wire.h"

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char log_text[16384];

static void
capture(void *arg, int level, const char *line)
{
	(void)arg;
	(void)level;
	pthread_mutex_lock(&log_lock);
	strncat(log_text, line, sizeof(log_text) - strlen(log_text) - 2);
	strcat(log_text, "\n");
	pthread_mutex_unlock(&log_lock);
}

static bool
log_seen(const char *needle)
{
	pthread_mutex_lock(&log_lock);
	bool found = strstr(log_text, needle) != NULL;
	pthread_mutex_unlock(&log_lock);
	return found;
}

static bool
log_has(const char *needle, int wait_ms)
{
	for (int i = 0; i <= wait_ms / 10; i++) {
		if (log_seen(needle)) {
			return true;
		}
		usleep(10000);
	}
	return false;
}

static double
mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static tern_node *
open_node(tern_config *cfg)
{
	tern_config def;
	tern_node *node;

	if (cfg == NULL) {
		tern_config_init(&def);
		cfg = &def;
	}
	cfg->log_fn = capture;
	cfg->log_level = TERN_LOG_DEBUG;
	assert_int_equal(tern_node_open(&node, cfg), 0);
	return node;
}

static int
port_of(const char *ep)
{
	return atoi(strrchr(ep, ':') + 1);
}

static int
raw_connect(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct timeval tv = {5, 0};

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

/* Read until the peer closes (or 5 s); returns the bytes read. */
static size_t
read_all(int fd, uint8_t *buf, size_t cap)
{
	size_t n = 0;

	while (n < cap) {
		ssize_t r = read(fd, buf + n, cap - n);
		if (r <= 0) {
			break;
		}
		n += (size_t)r;
	}
	return n;
}

/* Find a GOODBYE in what a node sent and return its reason. */
static bool
goodbye_reason(const uint8_t *buf, size_t n, char *reason, size_t len)
{
	size_t pos = WIRE_PREAMBLE_LEN;

	while (pos < n) {
		struct wire_frame f;
		size_t hlen;
		struct ctl_msg m;
		if (wire_header_decode(buf + pos, n - pos, 1 << 20, &f, &hlen) != 1 ||
		    f.len > n - pos - hlen) {
			return false;
		}
		if (f.type == WIRE_CONTROL && ctl_decode(buf + pos + hlen, f.len, &m) == 0 &&
		    m.type == CTL_GOODBYE) {
			snprintf(reason, len, "%.*s", (int)m.u.reason.len, m.u.reason.p);
			return true;
		}
		pos += hlen + f.len;
	}
	return false;
}

static void
test_other_version_refused(void **state)
{
	tern_node *node = open_node(NULL);
	char bound[256], reason[512] = "";
	uint8_t pre[WIRE_PREAMBLE_LEN], buf[65536];
	int version = 0;
	(void)state;

	assert_int_equal(tern_node_listen(node, "tcp://127.0.0.1:0", bound, sizeof(bound)), 0);
	int fd = raw_connect(port_of(bound));
	wire_preamble_encode(pre);
	pre[4] = 1; /* a node of the previous version */
	assert_int_equal(write(fd, pre, sizeof(pre)), sizeof(pre));
	size_t n = read_all(fd, buf, sizeof(buf));
	/* the node says which version it speaks, and why it hangs up */
	assert_true(n >= WIRE_PREAMBLE_LEN);
	assert_int_equal(wire_preamble_decode(buf, &version), 0);
	assert_int_equal(version, TERN_PROTOCOL_VERSION);
	assert_true(goodbye_reason(buf, n, reason, sizeof(reason)));
	assert_non_null(strstr(reason, "version 1"));
	snprintf(reason, sizeof(reason),
	         "speaks tern protocol version 1; this node speaks version %d",
	         TERN_PROTOCOL_VERSION);
	assert_true(log_has(reason, 30000));
	close(fd);
	tern_node_close(node);
}

static void *
fake_v1_server(void *arg)
{
	int lfd = *(int *)arg, fd;
	uint8_t pre[WIRE_PREAMBLE_LEN], buf[4096];

	fd = accept(lfd, NULL, NULL);
	if (fd >= 0) {
		wire_preamble_encode(pre);
		pre[4] = 1;
		if (write(fd, pre, sizeof(pre)) < 0) {
			/* the test fails on the log check */
		}
		read_all(fd, buf, sizeof(buf));
		close(fd);
	}
	return NULL;
}

static void
test_connect_to_other_version(void **state)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t len = sizeof(a);
	int lfd = socket(AF_INET, SOCK_STREAM, 0);
	pthread_t th;
	char ep[64];
	(void)state;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(lfd, 4), 0);
	getsockname(lfd, (struct sockaddr *)&a, &len);
	snprintf(ep, sizeof(ep), "tcp://127.0.0.1:%d", ntohs(a.sin_port));
	pthread_create(&th, NULL, fake_v1_server, &lfd);
	tern_node *node = open_node(NULL);
	assert_int_equal(tern_node_connect(node, ep), 0);
	assert_true(log_has("speaks tern protocol version 1", 30000));
	pthread_join(th, NULL);
	tern_node_close(node);
	close(lfd);
}

static void
test_bad_magic_and_garbage(void **state)
{
	tern_node *a = open_node(NULL), *b = open_node(NULL);
	char bound[256];
	uint8_t buf[4096];
	tern_sub *sub;
	tern_pub *pub;
	tern_msg m;
	(void)state;

	assert_int_equal(tern_node_listen(a, "tcp://127.0.0.1:0", bound, sizeof(bound)), 0);
	assert_int_equal(tern_sub_open(&sub, a, "good", NULL, NULL), 0);
	/* a good peer first */
	assert_int_equal(tern_node_connect(b, bound), 0);
	assert_int_equal(tern_pub_open(&pub, b, "good", -1), 0);
	assert_int_equal(tern_node_wait_peers(b, 1, 30000), 0);

	int fd = raw_connect(port_of(bound));
	assert_int_equal(write(fd, "GET / HTTP/1.1\r\n\r\n", 18), 18);
	read_all(fd, buf, sizeof(buf));
	close(fd);
	assert_true(log_has("is not a tern node (bad magic)", 30000));

	/* a valid preamble, then garbage */
	unsigned seed = 7;
	for (int round = 0; round < 20; round++) {
		fd = raw_connect(port_of(bound));
		wire_preamble_encode(buf);
		for (size_t i = WIRE_PREAMBLE_LEN; i < sizeof(buf); i++) {
			seed = seed * 1103515245u + 12345u;
			buf[i] = (uint8_t)(seed >> 16);
		}
		if (write(fd, buf, sizeof(buf)) < 0) {
			/* the node may already have hung up */
		}
		close(fd);
	}
	/* the good peer is still served */
	for (int i = 0; i < 100; i++) {
		assert_int_equal(tern_publish(pub, "ok", 2), 0);
	}
	for (int i = 0; i < 100; i++) {
		assert_int_equal(tern_sub_recv(sub, &m, 30000), 0);
		assert_int_equal(m.len, 2);
	}
	tern_pub_close(pub);
	tern_sub_close(sub);
	tern_node_close(b);
	tern_node_close(a);
}

static void
test_batches_bounded_and_idle_flush(void **state)
{
	tern_config cfg;
	tern_node *a, *b;
	char bound[256];
	tern_sub *sub;
	tern_pub *pub;
	tern_stats st;
	tern_msg m;
	uint8_t payload[64] = {0};
	(void)state;

	tern_config_init(&cfg);
	cfg.batch_max_bytes = 1024;
	a = open_node(&cfg);
	b = open_node(&cfg);
	assert_int_equal(tern_node_listen(a, "tcp://127.0.0.1:0", bound, sizeof(bound)), 0);
	assert_int_equal(tern_sub_open(&sub, a, "k", NULL, NULL), 0);
	assert_int_equal(tern_node_connect(b, bound), 0);
	assert_int_equal(tern_pub_open(&pub, b, "k", -1), 0);
	assert_int_equal(tern_node_wait_peers(b, 1, 30000), 0);
	/* one message, then nothing: an idle writer sends it without waiting */
	assert_int_equal(tern_publish(pub, "one", 3), 0);
	assert_int_equal(tern_sub_recv(sub, &m, 30000), 0);
	assert_int_equal(m.len, 3);
	for (int i = 0; i < 20000; i++) {
		assert_int_equal(tern_publish(pub, payload, sizeof(payload)), 0);
		if (i % 1000 == 999) {
			for (int k = 0; k < 1000; k++) {
				assert_int_equal(tern_sub_recv(sub, &m, 30000), 0);
			}
		}
	}
	tern_node_stats(b, &st);
	assert_true(st.batches > 0);
	assert_true(st.batch_largest <= 1024);
	/* chunks obey the same bound: a 100 KiB message goes in <= 1 KiB writes */
	static uint8_t big[100 << 10];
	assert_int_equal(tern_publish(pub, big, sizeof(big)), 0);
	assert_int_equal(tern_sub_recv(sub, &m, 30000), 0);
	assert_int_equal(m.len, sizeof(big));
	tern_node_stats(b, &st);
	assert_true(st.batch_largest <= 1024);
	tern_pub_close(pub);
	tern_sub_close(sub);
	tern_node_close(b);
	tern_node_close(a);
}

/* A node writes no batch larger than its peer's HELLO asks for, even when
 * its own batching.max_bytes is larger. */
static void
test_peer_batch_max_honoured(void **state)
{
	tern_config small, big;
	tern_node *a, *b;
	char bound[256];
	tern_sub *sub;
	tern_pub *pub;
	tern_stats st;
	tern_msg m;
	uint8_t payload[64] = {0};
	(void)state;

	tern_config_init(&small);
	small.batch_max_bytes = 1024;
	tern_config_init(&big); /* 64 KiB batches */
	a = open_node(&small);
	b = open_node(&big);
	assert_int_equal(tern_node_listen(a, "tcp://127.0.0.1:0", bound, sizeof(bound)), 0);
	assert_int_equal(tern_sub_open(&sub, a, "k", NULL, NULL), 0);
	assert_int_equal(tern_node_connect(b, bound), 0);
	assert_int_equal(tern_pub_open(&pub, b, "k", -1), 0);
	assert_int_equal(tern_node_wait_peers(b, 1, 5000), 0);
	for (int i = 0; i < 20000; i++) {
		assert_int_equal(tern_publish(pub, payload, sizeof(payload)), 0);
		if (i % 1000 == 999) {
			for (int k = 0; k < 1000; k++) {
				assert_int_equal(tern_sub_recv(sub, &m, 5000), 0);
			}
		}
	}
	static uint8_t large[100 << 10];
	assert_int_equal(tern_publish(pub, large, sizeof(large)), 0);
	assert_int_equal(tern_sub_recv(sub, &m, 5000), 0);
	assert_int_equal(m.len, sizeof(large));
	tern_node_stats(b, &st);
	assert_true(st.batches > 0);
	if (st.batch_largest > 1024) {
		fail_msg("a %llu-byte write to a peer whose batch_max is 1024",
		         (unsigned long long)st.batch_largest);
	}
	tern_pub_close(pub);
	tern_sub_close(sub);
	tern_node_close(b);
	tern_node_close(a);
}

static void
test_oversize_refused(void **state)
{
	tern_config cfg;
	tern_node *a, *b;
	char bound[256];
	tern_sub *sub;
	tern_pub *pub;
	tern_msg m;
	(void)state;

	tern_config_init(&cfg);
	cfg.max_message_bytes = 1000;
	a = open_node(&cfg);
	b = open_node(NULL);
	assert_int_equal(tern_node_listen(a, "tcp://127.0.0.1:0", bound, sizeof(bound)), 0);
	assert_int_equal(tern_sub_open(&sub, a, "k", NULL, NULL), 0);
	assert_int_equal(tern_node_connect(b, bound), 0);
	assert_int_equal(tern_pub_open(&pub, b, "k", -1), 0);
	assert_int_equal(tern_node_wait_peers(b, 1, 30000), 0);
	static uint8_t big[2000];
	/* the peer's limit, learned in the handshake, refuses it at the publisher */
	assert_int_equal(tern_publish(pub, big, sizeof(big)), TERN_EMSGSIZE);
	assert_non_null(strstr(tern_last_error(), "limit"));
	assert_int_equal(tern_publish(pub, big, 1000), 0);
	assert_int_equal(tern_sub_recv(sub, &m, 30000), 0);
	assert_int_equal(m.len, 1000);
	tern_pub_close(pub);
	tern_sub_close(sub);
	tern_node_close(b);
	tern_node_close(a);
	/* and the node's own limit */
	tern_config_init(&cfg);
	cfg.max_message_bytes = 10;
	a = open_node(&cfg);
	assert_int_equal(tern_pub_open(&pub, a, "k", -1), 0);
	assert_int_equal(tern_publish(pub, big, 11), TERN_EMSGSIZE);
	tern_pub_close(pub);
	tern_node_close(a);
}

/* ---- many channels sharing small batches: frames stay whole ---- */

#define CHANNELS    4
#define PER_CHANNEL 20000

struct chan_pub {
	tern_pub *pub;
	int index;
};

static size_t
msg_len(int ch, uint64_t seq)
{
	return 1 + (size_t)((seq * 7 + (uint64_t)ch * 13) % 300);
}

static void
fill(uint8_t *p, size_t n, int ch, uint64_t seq)
{
	for (size_t i = 0; i < n; i++) {
		p[i] = (uint8_t)(seq + (uint64_t)ch * 31 + i);
	}
}

static void *
chan_thread(void *arg)
{
	struct chan_pub *cp = arg;
	uint8_t buf[300];

	for (uint64_t seq = 1; seq <= PER_CHANNEL; seq++) {
		size_t n = msg_len(cp->index, seq);
		fill(buf, n, cp->index, seq);
		if (tern_publish(cp->pub, buf, n) != 0) {
			return (void *)1;
		}
	}
	return NULL;
}

static void
test_many_channels_small_batches(void **state)
{
	tern_config cfg;
	tern_node *a, *b;
	char bound[256];
	tern_sub *sub;
	struct chan_pub cp[CHANNELS];
	pthread_t th[CHANNELS];
	uint64_t next[CHANNELS] = {0};
	uint8_t want[300];
	tern_msg m;
	(void)state;

	tern_config_init(&cfg);
	cfg.batch_max_bytes = 1024;
	a = open_node(NULL);
	b = open_node(&cfg);
	assert_int_equal(tern_node_listen(a, "tcp://127.0.0.1:0", bound, sizeof(bound)), 0);
	assert_int_equal(tern_sub_open(&sub, a, "m/*", NULL, NULL), 0);
	assert_int_equal(tern_node_connect(b, bound), 0);
	assert_int_equal(tern_node_wait_peers(b, 1, 30000), 0);
	for (int i = 0; i < CHANNELS; i++) {
		char key[16];
		snprintf(key, sizeof(key), "m/%d", i);
		cp[i].index = i;
		assert_int_equal(tern_pub_open(&cp[i].pub, b, key, -1), 0);
		next[i] = 1;
	}
	for (int i = 0; i < CHANNELS; i++) {
		pthread_create(&th[i], NULL, chan_thread, &cp[i]);
	}
	for (int n = 0; n < CHANNELS * PER_CHANNEL; n++) {
		assert_int_equal(tern_sub_recv(sub, &m, 30000), 0);
		int ch = m.key[2] - '0';
		assert_true(ch >= 0 && ch < CHANNELS);
		assert_true(m.seq == next[ch]);
		assert_int_equal(m.len, msg_len(ch, m.seq));
		fill(want, m.len, ch, m.seq);
		assert_memory_equal(m.data, want, m.len);
		next[ch]++;
	}
	for (int i = 0; i < CHANNELS; i++) {
		void *rc;
		pthread_join(th[i], &rc);
		assert_null(rc);
		tern_pub_close(cp[i].pub);
	}
	tern_sub_close(sub);
	tern_node_close(b);
	tern_node_close(a);
}

/* ---- a subscriber that stops reading one key does not stop another ---- */

struct slow_pub {
	tern_pub *pub;
	atomic_int rc; /* read by the test while the flood still runs */
	atomic_long sent;
	atomic_int stop;
};

static void *
flood_thread(void *arg)
{
	struct slow_pub *sp = arg;
	uint8_t buf[1024] = {0};

	while (!atomic_load(&sp->stop)) {
		int rc = tern_publish(sp->pub, buf, sizeof(buf));
		if (rc != 0) {
			atomic_store(&sp->rc, rc);
			break;
		}
		atomic_fetch_add(&sp->sent, 1);
	}
	return NULL;
}

static atomic_long fast_got;

static void
on_fast(void *arg, const tern_msg *m)
{
	(void)arg;
	(void)m;
	atomic_fetch_add(&fast_got, 1);
}

static void
test_slow_key_does_not_stop_others(void **state)
{
	tern_config cfg;
	tern_node *a, *b;
	char bound[256];
	tern_sub *slow, *fast;
	tern_pub *fast_pub;
	struct slow_pub sp = {0};
	pthread_t th;
	(void)state;

	tern_config_init(&cfg);
	cfg.publish_timeout_ms = 3000;
	cfg.queue_max_bytes = 4u << 20;
	a = open_node(&cfg);
	b = open_node(&cfg);
	assert_int_equal(tern_node_listen(a, "tcp://127.0.0.1:0", bound, sizeof(bound)), 0);
	assert_int_equal(tern_sub_open(&slow, a, "slow", NULL, NULL), 0); /* never read */
	assert_int_equal(tern_sub_open(&fast, a, "fast", on_fast, NULL), 0);
	assert_int_equal(tern_node_connect(b, bound), 0);
	assert_int_equal(tern_pub_open(&sp.pub, b, "slow", -1), 0);
	assert_int_equal(tern_pub_open(&fast_pub, b, "fast", -1), 0);
	assert_int_equal(tern_node_wait_peers(b, 1, 30000), 0);
	pthread_create(&th, NULL, flood_thread, &sp);
	/* wait until the slow key is stuck: its publisher has sent and then
	 * stops advancing (a thread merely descheduled for a moment would
	 * only make the fast key's check below start early, not fail) */
	double until = mono_s() + 30;
	long last = -1;
	int still = 0;
	while (still < 10 && mono_s() < until) {
		long now = atomic_load(&sp.sent);
		still = now > 0 && now == last ? still + 1 : 0;
		last = now;
		usleep(20000);
	}
	assert_true(atomic_load(&sp.sent) > 0);
	assert_int_equal(atomic_load(&sp.rc), 0); /* still blocked, not failed */
	for (int i = 0; i < 10000; i++) {
		assert_int_equal(tern_publish(fast_pub, "x", 1), 0);
	}
	until = mono_s() + 30;
	while (atomic_load(&fast_got) < 10000 && mono_s() < until) {
		usleep(1000);
	}
	assert_int_equal(atomic_load(&fast_got), 10000);
	/* the slow key's publisher, blocked meanwhile, times out with an error */
	pthread_join(th, NULL);
	assert_int_equal(atomic_load(&sp.rc), TERN_ETIMEDOUT);
	/* what it sent is bounded by the queues (the sender's queue.max_bytes, the
	 * receiver's window and subscriber queue), not by how long it tried */
	print_message("the stuck key took %ld messages of 1 KiB\n", (long)sp.sent);
	assert_true(sp.sent * 1024 < 12 * 1024 * 1024);
	tern_pub_close(sp.pub);
	tern_pub_close(fast_pub);
	tern_sub_close(slow);
	tern_sub_close(fast);
	tern_node_close(b);
	tern_node_close(a);
}

/* ---- one large message, two pull subscribers: each gets it whole ---- */

static void
fill_big(uint8_t *buf, size_t len, int k)
{
	for (size_t i = 0; i < len; i++) {
		buf[i] = (uint8_t)(i * 7 + (size_t)k);
	}
}

static void
test_large_message_two_pull_subs(void **state)
{
	enum { LEN = 1 << 20, COUNT = 12 };
	tern_node *a, *b;
	char bound[256];
	tern_sub *s1, *s2;
	tern_pub *pub;
	uint8_t *want = malloc(LEN);
	(void)state;

	assert_non_null(want);
	a = open_node(NULL);
	b = open_node(NULL);
	assert_int_equal(tern_node_listen(a, "tcp://127.0.0.1:0", bound, sizeof(bound)), 0);
	assert_int_equal(tern_sub_open(&s1, a, "big", NULL, NULL), 0);
	assert_int_equal(tern_sub_open(&s2, a, "big", NULL, NULL), 0);
	assert_int_equal(tern_node_connect(b, bound), 0);
	assert_int_equal(tern_pub_open(&pub, b, "big", -1), 0);
	assert_int_equal(tern_node_wait_peers(b, 1, 30000), 0);
	for (int i = 0; i < 3000 && tern_pub_matched(pub) < 1; i++) {
		usleep(10000);
	}
	assert_int_equal(tern_pub_matched(pub), 1);
	/* more than either queue holds inline: both take each message as a
	 * buffer of its own, while small ones share the queue between them */
	for (int k = 0; k < COUNT; k++) {
		fill_big(want, LEN, k);
		assert_int_equal(tern_publish(pub, want, LEN), 0);
		assert_int_equal(tern_publish(pub, "small", 5), 0);
	}
	tern_sub *subs[2] = {s1, s2};
	for (int n = 0; n < 2; n++) {
		for (int k = 0; k < COUNT; k++) {
			tern_msg m;
			assert_int_equal(tern_sub_recv(subs[n], &m, 30000), 0);
			assert_int_equal(m.len, LEN);
			fill_big(want, LEN, k);
			assert_memory_equal(m.data, want, LEN);
			assert_int_equal(tern_sub_recv(subs[n], &m, 30000), 0);
			assert_int_equal(m.len, 5);
			assert_memory_equal(m.data, "small", 5);
		}
	}
	tern_pub_close(pub);
	tern_sub_close(s1);
	tern_sub_close(s2);
	tern_node_close(b);
	tern_node_close(a);
	free(want);
}

/* ---- a pull queue that filled up resumes as soon as it is drained ---- */

struct counted_pub {
	tern_pub *pub;
	int count;
	int rc;
};

static void *
counted_thread(void *arg)
{
	struct counted_pub *cp = arg;
	uint8_t buf[8192];

	for (int i = 0; i < cp->count && cp->rc == 0; i++) {
		memset(buf, i & 0xff, sizeof(buf));
		memcpy(buf, &i, sizeof(i));
		cp->rc = tern_publish(cp->pub, buf, sizeof(buf));
	}
	return NULL;
}

static void
test_full_queue_resumes(void **state)
{
	enum { COUNT = 20000 };
	tern_node *a, *b;
	char bound[256];
	tern_sub *sub;
	pthread_t t;
	struct counted_pub cp = {.count = COUNT};
	(void)state;

	a = open_node(NULL);
	b = open_node(NULL);
	assert_int_equal(tern_node_listen(a, "tcp://127.0.0.1:0", bound, sizeof(bound)), 0);
	assert_int_equal(tern_sub_open(&sub, a, "fill", NULL, NULL), 0);
	assert_int_equal(tern_node_connect(b, bound), 0);
	assert_int_equal(tern_pub_open(&cp.pub, b, "fill", -1), 0);
	assert_int_equal(tern_node_wait_peers(b, 1, 30000), 0);
	for (int i = 0; i < 3000 && tern_pub_matched(cp.pub) < 1; i++) {
		usleep(10000);
	}
	assert_int_equal(tern_pub_matched(cp.pub), 1);
	assert_int_equal(pthread_create(&t, NULL, counted_thread, &cp), 0);
	/* pause now and then so that the queue fills and the I/O thread waits
	 * for room, then drain it: each drain must wake the I/O thread, or a
	 * recv below waits until its timeout (a bound for that hang only) */
	for (int i = 0; i < COUNT; i++) {
		tern_msg m;
		int id;
		if (i % 256 == 255) {
			usleep(300);
		}
		assert_int_equal(tern_sub_recv(sub, &m, 30000), 0);
		assert_int_equal(m.len, 8192);
		memcpy(&id, m.data, sizeof(id));
		assert_int_equal(id, i);
	}
	pthread_join(t, NULL);
	assert_int_equal(cp.rc, 0);
	tern_pub_close(cp.pub);
	tern_sub_close(sub);
	tern_node_close(b);
	tern_node_close(a);
}

/* ---- a peer that takes nothing for slow_consumer_ms is dropped ---- */

static atomic_long other_got;

static void
on_other(void *arg, const tern_msg *m)
{
	(void)arg;
	(void)m;
	atomic_fetch_add(&other_got, 1);
}

static void
test_slow_consumer_dropped(void **state)
{
	tern_config cfg;
	tern_node *stuck, *fine, *pubn;
	char ep1[256], ep2[256];
	tern_sub *s1, *s2;
	tern_pub *pub;
	uint8_t buf[1024] = {0};
	long sent = 0;
	(void)state;

	tern_config_init(&cfg);
	cfg.slow_consumer_ms = 1000;
	cfg.queue_max_bytes = 2u << 20;
	stuck = open_node(NULL);
	fine = open_node(NULL);
	pubn = open_node(&cfg);
	assert_int_equal(tern_node_listen(stuck, "tcp://127.0.0.1:0", ep1, sizeof(ep1)), 0);
	assert_int_equal(tern_node_listen(fine, "tcp://127.0.0.1:0", ep2, sizeof(ep2)), 0);
	assert_int_equal(tern_sub_open(&s1, stuck, "feed", NULL, NULL), 0); /* never read */
	assert_int_equal(tern_sub_open(&s2, fine, "feed", on_other, NULL), 0);
	assert_int_equal(tern_node_connect(pubn, ep1), 0);
	assert_int_equal(tern_node_connect(pubn, ep2), 0);
	assert_int_equal(tern_pub_open(&pub, pubn, "feed", -1), 0);
	assert_int_equal(tern_node_wait_peers(pubn, 2, 30000), 0);
	assert_int_equal(tern_pub_matched(pub), 2);
	/* publish until the stuck peer, its queue full, has taken nothing for
	 * 1 s and is dropped (60 s only bounds a hang): publishing goes on
	 * without an error until then and after */
	double until = mono_s() + 60;
	bool dropped = false;
	long after_drop = 0;
	while (after_drop < 1000 && mono_s() < until) {
		assert_int_equal(tern_publish(pub, buf, sizeof(buf)), 0);
		sent++;
		if (sent % 64 == 0) {
			usleep(1000);
			dropped = dropped || log_seen("slow consumer: 'feed' took nothing for");
		}
		after_drop += dropped;
	}
	assert_true(dropped);
	/* (the dropped peer is dialed again and comes back, to be dropped again
	 * while it still reads nothing) */
	tern_pub_flush(pub, 30000);
	until = mono_s() + 30;
	while (atomic_load(&other_got) < sent && mono_s() < until) {
		usleep(1000);
	}
	/* the other subscriber got every message */
	assert_int_equal(atomic_load(&other_got), sent);
	tern_pub_close(pub);
	tern_sub_close(s1);
	tern_sub_close(s2);
	tern_node_close(pubn);
	tern_node_close(fine);
	tern_node_close(stuck);
}

/*
 * ---- data the peer has not acknowledged does not wake the node ----
 *
 * A subscriber's callback holds its node's I/O thread, so the message it
 * got is never acknowledged and stays in the publisher's ring. The
 * publisher's node then has nothing to do until a timer is due (the
 * slow-consumer look, slow_consumer_ms / 8; keepalives set far apart):
 * its I/O thread must sleep, not wake every 10 ms to look. Counted as the
 * voluntary context switches of every thread but this one over a second
 * (the held subscriber's thread adds none); a loaded machine can only
 * make a sleeping thread wake less often.
 */

static pthread_mutex_t held_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t held_cond = PTHREAD_COND_INITIALIZER;
static bool held_released;
static atomic_int held_entered;

static void
on_held(void *arg, const tern_msg *m)
{
	(void)arg;
	(void)m;
	atomic_fetch_add(&held_entered, 1);
	pthread_mutex_lock(&held_lock);
	while (!held_released) {
		pthread_cond_wait(&held_cond, &held_lock);
	}
	pthread_mutex_unlock(&held_lock);
}

/* The ids of this process's threads, at most cap of them; how many. */
static int
list_threads(long *ids, int cap)
{
	struct dirent *e;
	DIR *d = opendir("/proc/self/task");
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d)) != NULL && n < cap) {
		if (e->d_name[0] != '.') {
			ids[n++] = atol(e->d_name);
		}
	}
	closedir(d);
	return n;
}

/* The thread started since list_threads filled was[nwas]. */
static long
new_thread(const long *was, int nwas)
{
	long now[64];
	int n = list_threads(now, 64);

	for (int i = 0; i < n; i++) {
		bool old = false;
		for (int k = 0; k < nwas && !old; k++) {
			old = now[i] == was[k];
		}
		if (!old) {
			return now[i];
		}
	}
	fail_msg("no new thread");
	return 0;
}

static long
thread_switches(long tid)
{
	char path[64], line[128];
	FILE *f;
	long v = 0;

	snprintf(path, sizeof(path), "/proc/self/task/%ld/status", tid);
	if ((f = fopen(path, "r")) == NULL) {
		return 0;
	}
	while (fgets(line, sizeof(line), f) != NULL) {
		if (strncmp(line, "voluntary_ctxt_switches:", 24) == 0) {
			v = atol(line + 24);
		}
	}
	fclose(f);
	return v;
}

/* Voluntary context switches of every thread but the caller. */
static long
others_switches(void)
{
	long ids[64], self = (long)syscall(SYS_gettid), sum = 0;
	int n = list_threads(ids, 64);

	for (int i = 0; i < n; i++) {
		sum += ids[i] != self ? thread_switches(ids[i]) : 0;
	}
	return sum;
}

static void
test_held_data_does_not_wake(void **state)
{
	tern_config cfg;
	tern_node *subn, *pubn;
	char ep[256];
	tern_sub *sub;
	tern_pub *pub;
	uint8_t buf[64] = {0};
	(void)state;

	tern_config_init(&cfg);
	cfg.keepalive_ms = 60000;
	subn = open_node(&cfg);
	tern_config_init(&cfg);
	cfg.keepalive_ms = 60000;
	pubn = open_node(&cfg);
	assert_int_equal(tern_node_listen(subn, "tcp://127.0.0.1:0", ep, sizeof(ep)), 0);
	assert_int_equal(tern_sub_open(&sub, subn, "held", on_held, NULL), 0);
	assert_int_equal(tern_node_connect(pubn, ep), 0);
	assert_int_equal(tern_pub_open(&pub, pubn, "held", -1), 0);
	for (int w = 0; w < 30000 && tern_pub_matched(pub) != 1; w++) {
		usleep(1000);
	}
	assert_int_equal(tern_pub_matched(pub), 1);
	assert_int_equal(tern_publish(pub, buf, sizeof(buf)), 0);
	for (int w = 0; w < 30000 && atomic_load(&held_entered) == 0; w++) {
		usleep(1000);
	}
	assert_int_equal(atomic_load(&held_entered), 1);
	usleep(200000); /* what follows the write (a linger, a poll) is over */
	long before = others_switches();
	usleep(1000000);
	long woke = others_switches() - before;
	print_message("%ld voluntary context switches in a second\n", woke);
	pthread_mutex_lock(&held_lock);
	held_released = true;
	pthread_cond_broadcast(&held_cond);
	pthread_mutex_unlock(&held_lock);
	/* a tick every 10 ms would be 100; the timers due in that second, a few */
	assert_in_range(woke, 0, 25);
	assert_int_equal(tern_pub_flush(pub, 30000), 0);
	tern_pub_close(pub);
	tern_sub_close(sub);
	tern_node_close(pubn);
	tern_node_close(subn);
}

/*
 * ---- a thread whose lingers catch nothing stops lingering ----
 *
 * One message every 5 ms: each wakes the subscriber's I/O thread, which
 * delivers it and writes a CREDIT. A thread that then lingered (100 us for
 * more work that does not come) would also wake at the end of every
 * linger: two voluntary context switches a message, and no fewer, against
 * one once lingering has been seen not to pay. Counted for that thread
 * alone (it shares no lock with another thread here, so a preempted one
 * cannot add to it) over messages 100 to 300, after its spin and linger
 * scores have had their first misses. A loaded machine spaces the messages
 * further apart, which changes nothing here.
 */

static atomic_long quiet_got;

static void
on_quiet(void *arg, const tern_msg *m)
{
	(void)arg;
	(void)m;
	atomic_fetch_add(&quiet_got, 1);
}

static void
test_unpaid_linger_stops(void **state)
{
	long was[64];
	int nwas = list_threads(was, 64);
	tern_node *subn = open_node(NULL);
	long io = new_thread(was, nwas);
	tern_node *pubn = open_node(NULL);
	char ep[256];
	tern_sub *sub;
	tern_pub *pub;
	uint8_t buf[64] = {0};
	long before = 0;
	(void)state;

	assert_int_equal(tern_node_listen(subn, "tcp://127.0.0.1:0", ep, sizeof(ep)), 0);
	assert_int_equal(tern_sub_open(&sub, subn, "quiet", on_quiet, NULL), 0);
	assert_int_equal(tern_node_connect(pubn, ep), 0);
	assert_int_equal(tern_pub_open(&pub, pubn, "quiet", -1), 0);
	for (int w = 0; w < 30000 && tern_pub_matched(pub) != 1; w++) {
		usleep(1000);
	}
	assert_int_equal(tern_pub_matched(pub), 1);
	for (long i = 0; i < 300; i++) {
		if (i == 100) {
			before = thread_switches(io);
		}
		assert_int_equal(tern_publish(pub, buf, sizeof(buf)), 0);
		usleep(5000);
	}
	long woke = thread_switches(io) - before;
	assert_int_equal(tern_pub_flush(pub, 30000), 0);
	for (int w = 0; w < 30000 && atomic_load(&quiet_got) < 300; w++) {
		usleep(1000);
	}
	assert_int_equal(atomic_load(&quiet_got), 300);
	print_message("%ld voluntary context switches over 200 messages\n", woke);
	/* one a message (200), two with a linger after each (400) */
	assert_in_range(woke, 0, 300);
	tern_pub_close(pub);
	tern_sub_close(sub);
	tern_node_close(pubn);
	tern_node_close(subn);
}

/*
 * ---- batching.max_delay_us holds a batch until the delay ends ----
 *
 * Asserted by order and by lower bounds, which a loaded machine cannot
 * break (it delivers later, never earlier): no message arrives before the
 * delay has passed since the first of them was published; all arrive, in
 * order, within a bound that only catches a hang; and the ones published
 * inside the delay travel in one write.
 */

#define HOLD_US 1000000

static void
test_max_delay_holds_batch(void **state)
{
	tern_config cfg, cfg_a;
	tern_node *a, *b;
	char bound[256];
	tern_sub *sub;
	tern_pub *pub;
	tern_stats before, after;
	tern_msg m;
	double t0, t1;
	(void)state;

	/* no keepalive traffic while the batch is held */
	tern_config_init(&cfg_a);
	cfg_a.keepalive_ms = 60000;
	tern_config_init(&cfg);
	cfg.keepalive_ms = 60000;
	cfg.batch_max_delay_us = HOLD_US;
	a = open_node(&cfg_a);
	b = open_node(&cfg);
	assert_int_equal(tern_node_listen(a, "tcp://127.0.0.1:0", bound, sizeof(bound)), 0);
	assert_int_equal(tern_sub_open(&sub, a, "d", NULL, NULL), 0);
	assert_int_equal(tern_node_connect(b, bound), 0);
	assert_int_equal(tern_pub_open(&pub, b, "d", -1), 0);
	assert_int_equal(tern_node_wait_peers(b, 1, 30000), 0);
	for (int i = 0; i < 3000 && tern_pub_matched(pub) != 1; i++) {
		usleep(10000);
	}
	assert_int_equal(tern_pub_matched(pub), 1);
	/* a first message through the same hold: once it is here, the
	 * channel's OPEN and all else b had queued are on the wire */
	assert_int_equal(tern_publish(pub, "first", 5), 0);
	assert_int_equal(tern_sub_recv(sub, &m, 30000), 0);
	tern_node_stats(b, &before);
	t0 = mono_s();
	for (int i = 0; i < 100; i++) {
		char text[16];
		int n = snprintf(text, sizeof(text), "%d", i);
		assert_int_equal(tern_publish(pub, text, (size_t)n), 0);
	}
	t1 = mono_s();
	for (int i = 0; i < 100; i++) {
		char text[16];
		int n = snprintf(text, sizeof(text), "%d", i);
		assert_int_equal(tern_sub_recv(sub, &m, 30000), 0);
		assert_true(mono_s() >= t0 + HOLD_US / 1e6);
		assert_int_equal(m.len, n);
		assert_memory_equal(m.data, text, (size_t)n);
	}
	tern_node_stats(b, &after);
	if (t1 - t0 < HOLD_US / 1e6) {
		assert_int_equal(after.batches - before.batches, 1);
	} else {
		/* the publishing thread itself was held up past the delay: the
		 * batch rightly left before the last publications */
		print_message("publishing took %.3f s, longer than the delay; %llu writes\n",
		              t1 - t0, (unsigned long long)(after.batches - before.batches));
	}
	tern_pub_close(pub);
	tern_sub_close(sub);
	tern_node_close(b);
	tern_node_close(a);
}

/* ---- a connection reset mid-stream: reliable mode resumes ---- */

struct relay {
	int lfd;
	int target_port;
	size_t reset_after; /* bytes forwarded toward the subscriber, first connection only */
	atomic_int stop;
	int resets;
};

static int
listen_any(int *port)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	bind(fd, (struct sockaddr *)&a, sizeof(a));
	listen(fd, 8);
	getsockname(fd, (struct sockaddr *)&a, &len);
	*port = ntohs(a.sin_port);
	return fd;
}

/* Copy both ways until either side closes, or reset both after a budget. */
static void
relay_pair(struct relay *r, int a, int b, size_t budget)
{
	uint8_t buf[16384];
	size_t forwarded = 0;
	struct pollfd p[2] = {{.fd = a, .events = POLLIN}, {.fd = b, .events = POLLIN}};

	while (!atomic_load(&r->stop)) {
		if (poll(p, 2, 100) <= 0) {
			continue;
		}
		for (int i = 0; i < 2; i++) {
			if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR))) {
				continue;
			}
			ssize_t n = read(p[i].fd, buf, sizeof(buf));
			if (n <= 0 || write(p[1 - i].fd, buf, (size_t)n) != n) {
				return;
			}
			if (i == 0 && budget > 0 && (forwarded += (size_t)n) >= budget) {
				struct linger lg = {1, 0}; /* close with RST */
				setsockopt(a, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
				setsockopt(b, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
				r->resets++;
				return;
			}
		}
	}
}

static void *
relay_thread(void *arg)
{
	struct relay *r = arg;

	for (int round = 0; !atomic_load(&r->stop) && round < 10; round++) {
		struct pollfd pl = {.fd = r->lfd, .events = POLLIN};
		if (poll(&pl, 1, 100) <= 0) {
			round--;
			continue;
		}
		int a = accept(r->lfd, NULL, NULL);
		int b = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in t = {.sin_family = AF_INET, .sin_port = htons(r->target_port)};
		t.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		if (a < 0 || connect(b, (struct sockaddr *)&t, sizeof(t)) != 0) {
			close(a);
			close(b);
			continue;
		}
		relay_pair(r, a, b, round == 0 ? r->reset_after : 0);
		close(a);
		close(b);
	}
	return NULL;
}

#define RESUME_COUNT 300000

static void
test_reset_resumes_reliable(void **state)
{
	tern_node *subn, *pubn;
	char bound[256], ep[64];
	struct relay r = {.reset_after = 4u << 20};
	pthread_t th;
	tern_sub *sub;
	tern_pub *pub;
	tern_msg m;
	tern_stats st;
	uint8_t buf[64] = {0};
	int relay_port;
	(void)state;

	subn = open_node(NULL);
	pubn = open_node(NULL);
	assert_int_equal(tern_node_listen(subn, "tcp://127.0.0.1:0", bound, sizeof(bound)), 0);
	assert_int_equal(tern_sub_open(&sub, subn, "r", NULL, NULL), 0);
	r.target_port = port_of(bound);
	r.lfd = listen_any(&relay_port);
	pthread_create(&th, NULL, relay_thread, &r);
	snprintf(ep, sizeof(ep), "tcp://127.0.0.1:%d", relay_port);
	assert_int_equal(tern_node_connect(pubn, ep), 0);
	assert_int_equal(tern_pub_open(&pub, pubn, "r", -1), 0);
	assert_int_equal(tern_node_wait_peers(pubn, 1, 30000), 0);
	uint64_t next = 1;
	for (uint64_t i = 1; i <= RESUME_COUNT; i++) {
		memcpy(buf, &i, sizeof(i));
		/* the publisher never sees an error: the break is the library's business */
		assert_int_equal(tern_publish(pub, buf, sizeof(buf)), 0);
		while (tern_sub_recv(sub, &m, 0) == 0) {
			uint64_t v;
			memcpy(&v, m.data, sizeof(v));
			if (v != next) {
				print_message("expected %llu, got %llu (seq %llu), %d reset(s)\n",
				              (unsigned long long)next, (unsigned long long)v,
				              (unsigned long long)m.seq, r.resets);
			}
			assert_true(v == next); /* in order, none twice */
			next++;
		}
	}
	while (next <= RESUME_COUNT && tern_sub_recv(sub, &m, 30000) == 0) {
		uint64_t v;
		memcpy(&v, m.data, sizeof(v));
		if (v != next) {
			print_message("expected %llu, got %llu (seq %llu)\n",
			              (unsigned long long)next, (unsigned long long)v,
			              (unsigned long long)m.seq);
		}
		assert_true(v == next);
		next++;
	}
	tern_sub_stats(sub, &st);
	print_message("%d reset(s); %llu of %d delivered, %llu missed\n", r.resets,
	              (unsigned long long)(next - 1), RESUME_COUNT, (unsigned long long)st.missed);
	assert_int_equal(r.resets, 1);
	assert_true(log_has("resuming 'r'", 100));
	assert_true(next - 1 == RESUME_COUNT);
	assert_true(st.missed == 0);
	atomic_store(&r.stop, 1);
	tern_pub_close(pub);
	tern_node_close(pubn);
	pthread_join(th, NULL);
	close(r.lfd);
	tern_sub_close(sub);
	tern_node_close(subn);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_other_version_refused),
	    cmocka_unit_test(test_connect_to_other_version),
	    cmocka_unit_test(test_bad_magic_and_garbage),
	    cmocka_unit_test(test_batches_bounded_and_idle_flush),
	    cmocka_unit_test(test_peer_batch_max_honoured),
	    cmocka_unit_test(test_oversize_refused),
	    cmocka_unit_test(test_many_channels_small_batches),
	    cmocka_unit_test(test_slow_key_does_not_stop_others),
	    cmocka_unit_test(test_large_message_two_pull_subs),
	    cmocka_unit_test(test_full_queue_resumes),
	    cmocka_unit_test(test_slow_consumer_dropped),
	    cmocka_unit_test(test_held_data_does_not_wake),
	    cmocka_unit_test(test_unpaid_linger_stops),
	    cmocka_unit_test(test_max_delay_holds_batch),
	    cmocka_unit_test(test_reset_resumes_reliable),
	};
	return cmocka_run_group_tests_name("peerio", tests, NULL, NULL);
}
