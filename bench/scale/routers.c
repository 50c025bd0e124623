/*
 * routers.c - tern-scale routers: many subscriptions spread through three
 * routers, the way docs/PROTOCOL.md's "Routing" says they do.
 *
 *   tern-scale routers [--shape chain|triangle] [--subs N] [--peers P]
 *                      [--messages M] [--clients]
 *
 * Three routers R0, R1, R2, each in its own process, linked R0-R1-R2
 * (chain) or also R2-R0 (triangle). P peer nodes, spread evenly over the
 * routers, declare N subscriptions in all, s/PEER/J, as fast as
 * tern_sub_open returns. A publisher node on R0 (an end of the chain) has
 * declared, before them, a publisher on a sample of 1,000 of those keys
 * spread over every peer plus the very last key declared. Convergence is
 * the time from the last declaration until every sampled publisher is
 * matched: the subscriptions crossed every router between their peer and
 * the publisher.
 *
 * Then M reliable messages round-robin over the sampled keys: every
 * subscriber must get exactly what went to its key, in order, and each
 * router should take in (over its connections, duplicates included) only
 * the messages whose path crosses it, once each. Last, a fan-out: one key
 * subscribed on a peer of every router, 1,000 messages; each router
 * should take each of them in once. The per-connection "messages_in" of
 * tern_node_stats_json count what a router took in; tern_node_stats's
 * messages_in counts what it kept, so their difference is the duplicates
 * it dropped.
 *
 * With --clients the P nodes run in client mode: the routers tell them
 * only the subscriptions their publishers' keys meet (none), instead of
 * every subscription.
 *
 * The peers and the publisher share this process; the routers report
 * their endpoints, counters and VmRSS through pipes.
 */
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <tern/tern.h>

#include "scale.h"

#define SAMPLE   1000
#define FANOUT   1000
#define EP_LEN   128
#define WAIT_S   120.0
#define FAN_KEY  "fan/all"
#define NROUTERS 3

struct router_proc {
	pid_t pid;
	int up;   /* the router's replies */
	int down; /* commands to it */
};

struct router_stats {
	long rss_kib;
	long conn_in; /* messages its connections took in, duplicates included */
	long node_in; /* messages it kept */
};

/* The subscribers' tallies: the callbacks run on the peers' I/O threads. */
static atomic_long *got;
static atomic_long misrouted, out_of_order;
static atomic_long fan_got[NROUTERS], fan_repeated;
static atomic_uchar fan_seen[NROUTERS][FANOUT + 1];

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long
rss_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long v = -1;

	if (f == NULL) {
		return -1;
	}
	while (fgets(line, sizeof(line), f) != NULL) {
		if (strncmp(line, "VmRSS:", 6) == 0) {
			v = atol(line + 6);
			break;
		}
	}
	fclose(f);
	return v;
}

static void
die(const char *what)
{
	fprintf(stderr, "tern-scale routers: %s: %s\n", what, tern_last_error());
	exit(1);
}

/* Pipes between processes: all of it or nothing. */
static bool
read_full(int fd, void *buf, size_t len)
{
	for (size_t off = 0; off < len;) {
		ssize_t n = read(fd, (char *)buf + off, len - off);
		if (n <= 0) {
			return false;
		}
		off += (size_t)n;
	}
	return true;
}

static bool
write_full(int fd, const void *buf, size_t len)
{
	for (size_t off = 0; off < len;) {
		ssize_t n = write(fd, (const char *)buf + off, len - off);
		if (n <= 0) {
			return false;
		}
		off += (size_t)n;
	}
	return true;
}

static void
no_telemetry(tern_config *cfg)
{
	cfg->telemetry_interval_ms = 0;
}

static tern_node *
node_open(const char *id, int mode)
{
	return scale_node(id, mode, no_telemetry);
}

/* The per-connection "messages_in" of the stats JSON, summed: they count
 * every message a connection took in, a duplicate the node drops too. */
static long
conn_messages_in(tern_node *n)
{
	size_t need = tern_node_stats_json(n, NULL, 0) + 1;
	char *json = malloc(need);
	const char *p;
	long sum = 0;

	if (json == NULL) {
		return -1;
	}
	tern_node_stats_json(n, json, need);
	p = strstr(json, "\"connections\":[");
	while (p != NULL && (p = strstr(p, "\"messages_in\":")) != NULL) {
		p += strlen("\"messages_in\":");
		sum += atol(p);
	}
	free(json);
	return sum;
}

/* ---- a router, in its own process ---- */

static int
router_links(int r, bool triangle)
{
	return triangle || r == 1 ? 2 : 1;
}

static void
router_main(int r, bool triangle, int up, int down)
{
	char id[32], bound[EP_LEN] = {0}, eps[NROUTERS][EP_LEN], cmd = 0;
	struct router_stats st;
	tern_stats ts;
	tern_node *n;

	snprintf(id, sizeof(id), "routers-r%d", r);
	n = node_open(id, TERN_MODE_ROUTER);
	if (tern_node_listen(n, "tcp://127.0.0.1:0", bound, sizeof(bound)) != 0) {
		die("listen");
	}
	if (!write_full(up, bound, sizeof(bound)) || !read_full(down, eps, sizeof(eps))) {
		exit(1);
	}
	/* each router dials the one before it; in a triangle R0 closes the loop */
	if ((r > 0 && tern_node_connect(n, eps[r - 1]) != 0) ||
	    (r == 0 && triangle && tern_node_connect(n, eps[NROUTERS - 1]) != 0)) {
		die("connect routers");
	}
	if (tern_node_wait_peers(n, router_links(r, triangle), 30000) != 0) {
		die("wait for the other routers");
	}
	if (!write_full(up, &cmd, 1)) {
		exit(1);
	}
	while (read_full(down, &cmd, 1) && cmd == 's') {
		tern_node_stats(n, &ts);
		st.rss_kib = rss_kib();
		st.conn_in = conn_messages_in(n);
		st.node_in = (long)ts.messages_in;
		if (!write_full(up, &st, sizeof(st))) {
			break;
		}
	}
	tern_node_close(n);
	exit(0);
}

/* Fork the routers before this process has any thread, and link them. */
static void
routers_start(struct router_proc *rp, bool triangle, char eps[NROUTERS][EP_LEN])
{
	char ready;

	fflush(stdout);
	for (int r = 0; r < NROUTERS; r++) {
		int up[2], down[2];
		if (pipe(up) != 0 || pipe(down) != 0) {
			die("pipe");
		}
		if ((rp[r].pid = fork()) == 0) {
			/* only this process may hold the others' command pipes: a
			 * router must see its own close when this process ends */
			for (int k = 0; k < r; k++) {
				close(rp[k].up);
				close(rp[k].down);
			}
			close(up[0]);
			close(down[1]);
			router_main(r, triangle, up[1], down[0]);
		}
		rp[r].up = up[0];
		rp[r].down = down[1];
		close(up[1]);
		close(down[0]);
	}
	for (int r = 0; r < NROUTERS; r++) {
		if (!read_full(rp[r].up, eps[r], EP_LEN)) {
			die("a router did not start");
		}
	}
	for (int r = 0; r < NROUTERS; r++) {
		if (!write_full(rp[r].down, eps, NROUTERS * EP_LEN)) {
			die("a router did not start");
		}
	}
	for (int r = 0; r < NROUTERS; r++) {
		if (!read_full(rp[r].up, &ready, 1)) {
			die("the routers did not link");
		}
	}
}

static void
routers_stats(const struct router_proc *rp, struct router_stats *st)
{
	for (int r = 0; r < NROUTERS; r++) {
		if (!write_full(rp[r].down, "s", 1) ||
		    !read_full(rp[r].up, &st[r], sizeof(st[r]))) {
			die("a router did not answer");
		}
	}
}

static void
routers_stop(const struct router_proc *rp)
{
	for (int r = 0; r < NROUTERS; r++) {
		if (!write_full(rp[r].down, "q", 1)) {
			kill(rp[r].pid, SIGTERM);
		}
	}
	for (int r = 0; r < NROUTERS; r++) {
		waitpid(rp[r].pid, NULL, 0);
	}
}

/* ---- peers, subscriptions and the publisher (this process) ---- */

struct run {
	bool triangle;
	bool clients; /* the P nodes run in client mode */
	long subs, messages;
	int peers;
	long *first; /* peer p holds subscriptions first[p] .. first[p + 1] - 1 */
	tern_node **peer;
	tern_sub **sub;
	tern_node *pubn;
	long *sample; /* the subscriptions with a publisher */
	tern_pub **pub;
	long *sent; /* per sampled key */
	int nsample;
	tern_sub *fan_sub[NROUTERS];
	tern_pub *fan_pub;
};

/* The payload is the subscription's number: a message that reaches
 * another subscription's callback was misrouted. */
static void
on_msg(void *arg, const tern_msg *m)
{
	atomic_long *slot = arg;
	long g = -1;

	if (m->len == sizeof(g)) {
		memcpy(&g, m->data, sizeof(g));
	}
	if (g < 0 || &got[g] != slot) {
		atomic_fetch_add(&misrouted, 1);
	}
	if ((uint64_t)atomic_fetch_add(slot, 1) + 1 != m->seq) {
		atomic_fetch_add(&out_of_order, 1);
	}
}

static void
on_fan(void *arg, const tern_msg *m)
{
	long r = (atomic_long *)arg - fan_got;

	if (m->seq < 1 || m->seq > FANOUT || atomic_exchange(&fan_seen[r][m->seq], 1) != 0) {
		atomic_fetch_add(&fan_repeated, 1);
	}
	atomic_fetch_add(&fan_got[r], 1);
}

static int
peer_of(const struct run *w, long g)
{
	int lo = 0, hi = w->peers - 1;

	while (lo < hi) {
		int mid = (lo + hi + 1) / 2;
		if (w->first[mid] <= g) {
			lo = mid;
		} else {
			hi = mid - 1;
		}
	}
	return lo;
}

static void
key_of(const struct run *w, long g, char *key, size_t len)
{
	int p = peer_of(w, g);

	snprintf(key, len, "s/%d/%ld", p, g - w->first[p]);
}

/* Peer p hangs off router p mod 3; the publisher off R0. */
static void
peers_open(struct run *w, char eps[NROUTERS][EP_LEN])
{
	char id[32];

	w->peer = calloc((size_t)w->peers, sizeof(*w->peer));
	w->first = calloc((size_t)w->peers + 1, sizeof(*w->first));
	for (int p = 0; p < w->peers; p++) {
		snprintf(id, sizeof(id), "routers-p%d", p);
		w->peer[p] = node_open(id, w->clients ? TERN_MODE_CLIENT : TERN_MODE_PEER);
		if (tern_node_connect(w->peer[p], eps[p % NROUTERS]) != 0) {
			die("connect a peer");
		}
		w->first[p + 1] = w->first[p] + w->subs / w->peers + (p < w->subs % w->peers);
	}
	w->pubn = node_open("routers-pub", TERN_MODE_PEER);
	if (tern_node_connect(w->pubn, eps[0]) != 0) {
		die("connect the publisher");
	}
	for (int p = 0; p < w->peers; p++) {
		if (tern_node_wait_peers(w->peer[p], 1, 30000) != 0) {
			die("a peer did not reach its router");
		}
	}
	if (tern_node_wait_peers(w->pubn, 1, 30000) != 0) {
		die("the publisher did not reach R0");
	}
}

/* Publishers on evenly spaced subscriptions, the first and the last
 * included, and the fan-out key with a subscriber behind each router. */
static void
publishers_open(struct run *w)
{
	char key[64];

	w->nsample = w->subs < SAMPLE + 1 ? (int)w->subs : SAMPLE + 1;
	w->sample = calloc((size_t)w->nsample, sizeof(*w->sample));
	w->pub = calloc((size_t)w->nsample, sizeof(*w->pub));
	w->sent = calloc((size_t)w->nsample, sizeof(*w->sent));
	for (int s = 0; s < w->nsample; s++) {
		w->sample[s] = w->nsample > 1 ? (long)s * (w->subs - 1) / (w->nsample - 1) : 0;
		key_of(w, w->sample[s], key, sizeof(key));
		if (tern_pub_open(&w->pub[s], w->pubn, key, TERN_RELIABLE) != 0) {
			die("declare a publisher");
		}
	}
	for (int r = 0; r < NROUTERS; r++) {
		if (tern_sub_open(&w->fan_sub[r], w->peer[r], FAN_KEY, on_fan, &fan_got[r]) != 0) {
			die("subscribe to the fan-out key");
		}
	}
	if (tern_pub_open(&w->fan_pub, w->pubn, FAN_KEY, TERN_RELIABLE) != 0) {
		die("declare the fan-out publisher");
	}
}

static double
declare_subs(struct run *w)
{
	char key[64];
	double t0 = now_s();

	w->sub = calloc((size_t)w->subs, sizeof(*w->sub));
	got = calloc((size_t)w->subs, sizeof(*got));
	for (int p = 0; p < w->peers; p++) {
		for (long g = w->first[p]; g < w->first[p + 1]; g++) {
			snprintf(key, sizeof(key), "s/%d/%ld", p, g - w->first[p]);
			if (tern_sub_open(&w->sub[g], w->peer[p], key, on_msg, &got[g]) != 0) {
				die("subscribe");
			}
		}
	}
	return now_s() - t0;
}

/* Seconds from now until every sampled publisher is matched, or -1. */
static double
converge(const struct run *w)
{
	double t0 = now_s();
	int s = 0;

	while (now_s() - t0 < WAIT_S) {
		while (s < w->nsample && tern_pub_matched(w->pub[s]) > 0) {
			s++;
		}
		if (s == w->nsample) {
			return now_s() - t0;
		}
		usleep(500);
	}
	return -1;
}

/* Which routers a message to a peer of router r crosses, from R0. */
static bool
crosses(const struct run *w, int router, int r)
{
	return w->triangle ? router == 0 || router == r : router <= r;
}

static long
received(const struct run *w)
{
	long n = 0;

	for (int s = 0; s < w->nsample; s++) {
		n += atomic_load(&got[w->sample[s]]);
	}
	return n;
}

/* Router counters once they stop moving: a duplicate on its way counts. */
static void
stats_settled(const struct router_proc *rp, struct router_stats *st)
{
	struct router_stats last[NROUTERS];

	routers_stats(rp, last);
	for (int i = 0; i < 50; i++) {
		bool same = true;
		usleep(100000);
		routers_stats(rp, st);
		for (int r = 0; r < NROUTERS; r++) {
			same = same && st[r].conn_in == last[r].conn_in;
			last[r] = st[r];
		}
		if (same) {
			return;
		}
	}
}

static void
print_routers(const char *what, const struct router_stats *a, const struct router_stats *b,
              const long *expected)
{
	printf(" %s_in=%ld,%ld,%ld expected=%ld,%ld,%ld duplicates_dropped=%ld,%ld,%ld", what,
	       b[0].conn_in - a[0].conn_in, b[1].conn_in - a[1].conn_in,
	       b[2].conn_in - a[2].conn_in, expected[0], expected[1], expected[2],
	       (b[0].conn_in - a[0].conn_in) - (b[0].node_in - a[0].node_in),
	       (b[1].conn_in - a[1].conn_in) - (b[1].node_in - a[1].node_in),
	       (b[2].conn_in - a[2].conn_in) - (b[2].node_in - a[2].node_in));
}

/* M messages round-robin over the sampled keys; true if each subscriber
 * got exactly its own, in order. */
static bool
send_sampled(struct run *w, const struct router_proc *rp)
{
	struct router_stats a[NROUTERS], b[NROUTERS];
	long expected[NROUTERS] = {0}, all = 0;
	double t0;

	routers_stats(rp, a);
	for (long i = 0; i < w->messages; i++) {
		int s = (int)(i % w->nsample);
		int r = peer_of(w, w->sample[s]) % NROUTERS;
		if (tern_publish(w->pub[s], &w->sample[s], sizeof(w->sample[s])) != 0) {
			die("publish");
		}
		w->sent[s]++;
		for (int k = 0; k < NROUTERS; k++) {
			expected[k] += crosses(w, k, r);
		}
	}
	for (t0 = now_s(); received(w) < w->messages && now_s() - t0 < WAIT_S;) {
		usleep(1000);
	}
	stats_settled(rp, b);
	bool exact = atomic_load(&misrouted) == 0 && atomic_load(&out_of_order) == 0;
	for (int s = 0; s < w->nsample; s++) {
		exact = exact && atomic_load(&got[w->sample[s]]) == w->sent[s];
	}
	for (long g = 0; g < w->subs; g++) {
		all += atomic_load(&got[g]);
	}
	printf("routers_messages shape=%s sent=%ld received=%ld misrouted=%ld out_of_order=%ld "
	       "exact=%s",
	       w->triangle ? "triangle" : "chain", w->messages, all, atomic_load(&misrouted),
	       atomic_load(&out_of_order), exact && all == w->messages ? "yes" : "no");
	print_routers("router", a, b, expected);
	printf("\n");
	return exact && all == w->messages;
}

/* One key with a subscriber behind every router: the case where routes
 * to different subscribers could cross a router twice. */
static bool
send_fanout(struct run *w, const struct router_proc *rp)
{
	struct router_stats a[NROUTERS], b[NROUTERS];
	long expected[NROUTERS] = {FANOUT, FANOUT, FANOUT};
	double t0;

	routers_stats(rp, a);
	for (long i = 0; i < FANOUT; i++) {
		if (tern_publish(w->fan_pub, &i, sizeof(i)) != 0) {
			die("publish");
		}
	}
	for (t0 = now_s(); now_s() - t0 < WAIT_S; usleep(1000)) {
		long n =
		    atomic_load(&fan_got[0]) + atomic_load(&fan_got[1]) + atomic_load(&fan_got[2]);
		if (n >= NROUTERS * FANOUT) {
			break;
		}
	}
	stats_settled(rp, b);
	bool exact = atomic_load(&fan_repeated) == 0;
	for (int r = 0; r < NROUTERS; r++) {
		exact = exact && atomic_load(&fan_got[r]) == FANOUT;
	}
	printf("routers_fanout shape=%s sent=%d received=%ld,%ld,%ld repeated=%ld exact=%s",
	       w->triangle ? "triangle" : "chain", FANOUT, atomic_load(&fan_got[0]),
	       atomic_load(&fan_got[1]), atomic_load(&fan_got[2]), atomic_load(&fan_repeated),
	       exact ? "yes" : "no");
	print_routers("router", a, b, expected);
	printf("\n");
	return exact;
}

static int
run(struct run *w)
{
	struct router_proc rp[NROUTERS];
	struct router_stats before[NROUTERS], after[NROUTERS];
	char eps[NROUTERS][EP_LEN];
	double declare_s, converge_s;
	long peers_rss;
	bool ok;

	routers_start(rp, w->triangle, eps);
	routers_stats(rp, before);
	peers_open(w, eps);
	publishers_open(w);
	declare_s = declare_subs(w);
	converge_s = converge(w);
	routers_stats(rp, after);
	peers_rss = rss_kib();
	printf("routers shape=%s subs=%ld peers=%d%s sampled=%d declare_s=%.3f "
	       "converge_s=%.3f router_rss_kib=%ld,%ld,%ld (before declarations %ld,%ld,%ld) "
	       "peers_and_publisher_rss_kib=%ld\n",
	       w->triangle ? "triangle" : "chain", w->subs, w->peers,
	       w->clients ? " (clients)" : "", w->nsample, declare_s, converge_s, after[0].rss_kib,
	       after[1].rss_kib, after[2].rss_kib, before[0].rss_kib, before[1].rss_kib,
	       before[2].rss_kib, peers_rss);
	fflush(stdout);
	ok = converge_s >= 0;
	if (ok) {
		ok = send_sampled(w, rp);
		ok = send_fanout(w, rp) && ok;
	}
	routers_stop(rp);
	/* closing the subscriptions one at a time would take as long as
	 * declaring them did: the process ends with them open */
	fflush(stdout);
	_exit(ok ? 0 : 1);
}

static void
usage(void)
{
	fprintf(stderr, "usage: tern-scale routers [--shape chain|triangle] [--subs N] "
	                "[--peers P] [--messages M] [--clients]\n");
	exit(2);
}

int
scale_routers(int argc, char **argv)
{
	struct run w = {.triangle = true, .subs = 100000, .peers = 300, .messages = 10000};

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--shape") == 0 && i + 1 < argc) {
			const char *s = argv[++i];
			if (strcmp(s, "chain") != 0 && strcmp(s, "triangle") != 0) {
				usage();
			}
			w.triangle = s[0] == 't';
		} else if (strcmp(argv[i], "--subs") == 0 && i + 1 < argc) {
			w.subs = atol(argv[++i]);
		} else if (strcmp(argv[i], "--peers") == 0 && i + 1 < argc) {
			w.peers = atoi(argv[++i]);
		} else if (strcmp(argv[i], "--messages") == 0 && i + 1 < argc) {
			w.messages = atol(argv[++i]);
		} else if (strcmp(argv[i], "--clients") == 0) {
			w.clients = true;
		} else {
			usage();
		}
	}
	if (w.subs < 1 || w.peers < NROUTERS || w.messages < 0) {
		usage();
	}
	signal(SIGPIPE, SIG_IGN);
	return run(&w);
}
