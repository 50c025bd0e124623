/*
 * peers.c - tern-scale peers: a router with many peer connections, each
 * subscribing to its own key and publishing on another, so that every
 * message crosses the router (issue 19's "1,000 peer connections" target).
 *
 *   tern-scale peers [--peers N] [--seconds S] [--size B] [--idle S]
 *                    [--keepalive MS] [--burst M]
 *       a router process (TERN_MODE_ROUTER on loopback TCP) and N peer
 *       nodes in this process; peer i subscribes to p/i and publishes on
 *       p/(i+1)%N. All publish B-byte messages for S seconds, from a few
 *       threads round-robin over the publishers, M messages (default 1)
 *       to one before the next; then the traffic drains
 *       and the router sits idle, every connection open, for S seconds
 *       of --idle. --keepalive sets every node's keepalive_ms (default
 *       the library's): an idle router's work is the keepalives' traffic.
 *
 * Two lines on stdout: "peers" (the time to connect, declare and match,
 * the aggregate rate, each peer's received rate and the fastest/slowest
 * ratio, sent against received, the router's CPU per second of traffic)
 * and "idle" (the router's CPU and context
 * switches per idle second, read from /proc/PID of the router process,
 * and its memory per connection).
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <tern/tern.h>

#include "scale.h"

/* Publishing threads: one per peer would drown two cores in switches, and
 * the router and the peers' I/O threads need the CPU too. */
#define PUB_THREADS 2
/* Descriptors a peer node holds (its socket, epoll, wake-up and timer),
 * with room to spare. */
#define FDS_PER_PEER  6
#define CONNECT_GROUP 100

struct peer {
	tern_node *node;
	tern_sub *sub;
	tern_pub *pub;
	atomic_ulong received; /* by the subscriber's callback, on the I/O thread */
	unsigned long sent;    /* by its one publishing thread */
	unsigned long failed;
};

struct publisher {
	pthread_t thread;
	struct peer *peers;
	long first, n;
	size_t size;
	atomic_bool *stop;
};

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void
die(const char *what)
{
	fprintf(stderr, "tern-scale peers: %s: %s\n", what, tern_last_error());
	exit(1);
}

/* A field of /proc/PID/status or /proc/PID/task/TID/status (VmRSS,
 * voluntary_ctxt_switches...). */
static long
status_field(const char *path, const char *field)
{
	char line[256];
	size_t n = strlen(field);
	long v = -1;
	FILE *f;

	if ((f = fopen(path, "r")) == NULL) {
		return -1;
	}
	while (fgets(line, sizeof(line), f) != NULL) {
		if (strncmp(line, field, n) == 0 && line[n] == ':') {
			v = atol(line + n + 1);
			break;
		}
	}
	fclose(f);
	return v;
}

static long
proc_status(pid_t pid, const char *field)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%ld/status", (long)pid);
	return status_field(path, field);
}

/* Context switches of every thread of a process (the process's own status
 * counts only its first thread's) and, to the nanosecond, the time they
 * ran (schedstat; /proc/PID/stat counts in clock ticks of 10 ms). */
static void
proc_threads(pid_t pid, long *switches, double *run_ms)
{
	char path[300];
	struct dirent *e;
	unsigned long long ns;
	DIR *d;

	*switches = 0;
	*run_ms = 0;
	snprintf(path, sizeof(path), "/proc/%ld/task", (long)pid);
	if ((d = opendir(path)) == NULL) {
		return;
	}
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.') {
			continue;
		}
		snprintf(path, sizeof(path), "/proc/%ld/task/%s/status", (long)pid, e->d_name);
		*switches += status_field(path, "voluntary_ctxt_switches") +
		             status_field(path, "nonvoluntary_ctxt_switches");
		snprintf(path, sizeof(path), "/proc/%ld/task/%s/schedstat", (long)pid, e->d_name);
		FILE *f = fopen(path, "r");
		if (f != NULL && fscanf(f, "%llu", &ns) == 1) {
			*run_ms += (double)ns / 1e6;
		}
		if (f != NULL) {
			fclose(f);
		}
	}
	closedir(d);
}

/* utime + stime of a process, in milliseconds. */
static double
proc_cpu_ms(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long utime, stime;
	FILE *f;
	size_t len;

	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	if ((f = fopen(path, "r")) == NULL) {
		return -1;
	}
	len = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[len] = '\0';
	/* the command name may hold spaces: count fields after its ')' */
	if ((p = strrchr(buf, ')')) == NULL ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime, &stime) !=
	        2) {
		return -1;
	}
	return (double)(utime + stime) * 1000 / (double)sysconf(_SC_CLK_TCK);
}

/* Connections the peers lost (a dropped connection is why reliable
 * messages can go missing: see tern_pub_close), and warnings. */
static atomic_long disconnects, warnings;

static void
on_log(void *arg, int level, const char *line)
{
	(void)arg;
	if (strstr(line, ": disconnected from ") != NULL) {
		atomic_fetch_add(&disconnects, 1);
	}
	if (level <= TERN_LOG_WARN && atomic_fetch_add(&warnings, 1) < 5) {
		fprintf(stderr, "%s\n", line);
	}
}

static uint32_t keepalive_ms; /* 0: the library's default */
static long burst = 1;        /* messages to one publisher before the next */

static void
tune(tern_config *cfg)
{
	if (keepalive_ms != 0) {
		cfg->keepalive_ms = keepalive_ms;
	}
	if (cfg->mode == TERN_MODE_PEER) {
		cfg->log_level = TERN_LOG_INFO;
		cfg->log_fn = on_log;
		/* a thousand telemetry threads would take the CPU from the router
		 * under measure, which keeps its own */
		cfg->telemetry_interval_ms = 0;
	}
}

static tern_node *
node_open(const char *id, int mode)
{
	return scale_node(id, mode, tune);
}

/* Enough descriptors for every peer here and every connection at the
 * router (a child inherits the limit); false, saying why, if the hard limit
 * is too low. */
static bool
raise_nofile(long peers)
{
	struct rlimit rl;
	rlim_t need = (rlim_t)peers * FDS_PER_PEER + 64;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
		return false;
	}
	if (rl.rlim_cur >= need) {
		return true;
	}
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need) {
		fprintf(stderr,
		        "tern-scale peers: %ld peers need about %lu descriptors, the hard "
		        "limit is %lu: raise it (ulimit -Hn, limits.conf) or use fewer peers\n",
		        peers, (unsigned long)need, (unsigned long)rl.rlim_max);
		return false;
	}
	rl.rlim_cur = need;
	return setrlimit(RLIMIT_NOFILE, &rl) == 0;
}

/* The router process: listen, say where, and run until the parent closes
 * done_fd. */
static void
router_main(int port_fd, int done_fd)
{
	tern_node *r = node_open("scale-router", TERN_MODE_ROUTER);
	char bound[128], c;

	if (tern_node_listen(r, "tcp://127.0.0.1:0", bound, sizeof(bound)) != 0) {
		die("listen");
	}
	if (write(port_fd, bound, strlen(bound) + 1) < 0) {
		exit(1);
	}
	while (read(done_fd, &c, 1) < 0 && errno == EINTR) {
	}
	tern_node_close(r);
	exit(0);
}

static pid_t
router_start(char *bound, size_t len, int *done_fd)
{
	int pfd[2], dfd[2];
	pid_t pid;

	if (pipe(pfd) != 0 || pipe(dfd) != 0 || (pid = fork()) < 0) {
		perror("tern-scale peers: router process");
		exit(1);
	}
	if (pid == 0) {
		close(pfd[0]);
		close(dfd[1]);
		router_main(pfd[1], dfd[0]);
	}
	close(pfd[1]);
	close(dfd[0]);
	if (read(pfd[0], bound, len - 1) <= 0) {
		fprintf(stderr, "tern-scale peers: the router did not start\n");
		exit(1);
	}
	close(pfd[0]);
	*done_fd = dfd[1];
	return pid;
}

static void
on_msg(void *arg, const tern_msg *m)
{
	struct peer *p = arg;

	(void)m;
	atomic_fetch_add_explicit(&p->received, 1, memory_order_relaxed);
}

/* Connect in groups: a thousand handshakes at once would keep the router
 * past their deadline. */
static void
peers_connect(struct peer *ps, long n, const char *bound)
{
	char id[64];

	for (long g = 0; g < n; g += CONNECT_GROUP) {
		long end = g + CONNECT_GROUP < n ? g + CONNECT_GROUP : n;
		for (long i = g; i < end; i++) {
			snprintf(id, sizeof(id), "scale-peer-%ld", i);
			ps[i].node = node_open(id, TERN_MODE_PEER);
			if (tern_node_connect(ps[i].node, bound) != 0) {
				die("connect");
			}
		}
		for (long i = g; i < end; i++) {
			if (tern_node_wait_peers(ps[i].node, 1, 60000) != 0) {
				die("wait for the router");
			}
		}
	}
}

/* Declare every subscription, then every publisher (*declare_s: how long
 * that took); false if some publisher was not matched within a minute. */
static bool
peers_declare(struct peer *ps, long n, double *declare_s)
{
	char key[64];
	double deadline, t0 = now_s();

	for (long i = 0; i < n; i++) {
		snprintf(key, sizeof(key), "p/%ld", i);
		if (tern_sub_open(&ps[i].sub, ps[i].node, key, on_msg, &ps[i]) != 0) {
			die("subscribe");
		}
	}
	for (long i = 0; i < n; i++) {
		snprintf(key, sizeof(key), "p/%ld", (i + 1) % n);
		if (tern_pub_open(&ps[i].pub, ps[i].node, key, TERN_RELIABLE) != 0) {
			die("declare a publisher");
		}
	}
	*declare_s = now_s() - t0;
	deadline = now_s() + 60;
	for (long i = 0; i < n; i++) {
		while (tern_pub_matched(ps[i].pub) == 0) {
			if (now_s() > deadline) {
				fprintf(stderr, "tern-scale peers: publisher %ld not matched\n", i);
				return false;
			}
			usleep(1000);
		}
	}
	return true;
}

static void *
publish_main(void *arg)
{
	struct publisher *w = arg;
	uint8_t *buf = calloc(1, w->size);

	while (!atomic_load_explicit(w->stop, memory_order_relaxed)) {
		for (long i = w->first; i < w->n; i += PUB_THREADS) {
			struct peer *p = &w->peers[i];
			for (long b = 0; b < burst; b++) {
				if (tern_publish(p->pub, buf, w->size) == 0) {
					p->sent++;
				} else {
					p->failed++;
				}
			}
		}
	}
	free(buf);
	return NULL;
}

static unsigned long
received_total(struct peer *ps, long n)
{
	unsigned long sum = 0;

	for (long i = 0; i < n; i++) {
		sum += atomic_load(&ps[i].received);
	}
	return sum;
}

/* Publish from every peer for seconds; each peer's received count over
 * that time goes to got[]. Returns the time it took. */
static double
traffic(struct peer *ps, long n, double seconds, size_t size, unsigned long *got)
{
	struct publisher w[PUB_THREADS];
	atomic_bool stop = false;
	double t0;

	for (long i = 0; i < n; i++) {
		got[i] = atomic_load(&ps[i].received);
	}
	t0 = now_s();
	for (int t = 0; t < PUB_THREADS; t++) {
		w[t] = (struct publisher){
		    .peers = ps, .first = t, .n = n, .size = size, .stop = &stop};
		pthread_create(&w[t].thread, NULL, publish_main, &w[t]);
	}
	usleep((useconds_t)(seconds * 1e6));
	for (long i = 0; i < n; i++) {
		got[i] = atomic_load(&ps[i].received) - got[i];
	}
	t0 = now_s() - t0;
	atomic_store(&stop, true);
	for (int t = 0; t < PUB_THREADS; t++) {
		pthread_join(w[t].thread, NULL);
	}
	return t0;
}

/* Wait until what was sent has arrived, or nothing moved for 5 s. */
static void
drain(struct peer *ps, long n, unsigned long sent)
{
	unsigned long last = received_total(ps, n), now;
	double moved = now_s();

	while ((now = received_total(ps, n)) < sent && now_s() - moved < 5) {
		if (now != last) {
			last = now;
			moved = now_s();
		}
		usleep(10000);
	}
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The "peers" line; the number of peers whose count is off. */
static long
report_traffic(struct peer *ps, long n, double span, const unsigned long *got, double declare_s,
               double connect_s, double matched_s, double router_ms)
{
	double *rate = calloc((size_t)n, sizeof(*rate)), sum = 0;
	unsigned long sent = 0, received = 0, failed = 0;
	long off = 0;

	for (long i = 0; i < n; i++) {
		const struct peer *from = &ps[(i + n - 1) % n];
		unsigned long r = atomic_load(&ps[i].received);
		rate[i] = (double)got[i] / span;
		sum += (double)got[i];
		sent += ps[i].sent;
		failed += ps[i].failed;
		received += r;
		if (r != from->sent) {
			if (off++ < 5) {
				fprintf(stderr,
				        "tern-scale peers: error: peer %ld received %lu, "
				        "peer %ld sent it %lu\n",
				        i, r, (i + n - 1) % n, from->sent);
			}
		}
	}
	qsort(rate, (size_t)n, sizeof(*rate), cmp_double);
	printf("peers n=%ld connect_s=%.3f declare_s=%.3f matched_s=%.3f seconds=%.3f "
	       "msgs_per_s=%.0f fastest_slowest=%.2f min=%.0f median=%.0f max=%.0f sent=%lu "
	       "received=%lu publish_errors=%lu peers_off=%ld disconnects=%ld warnings=%ld "
	       "router_cpu_ms_per_s=%.0f\n",
	       n, connect_s, declare_s, matched_s, span, sum / span,
	       rate[0] > 0 ? rate[n - 1] / rate[0] : 0.0, rate[0], rate[n / 2], rate[n - 1], sent,
	       received, failed, off, atomic_load(&disconnects), atomic_load(&warnings),
	       router_ms / span);
	fflush(stdout);
	free(rate);
	return off;
}

/* The "idle" line: the router's CPU over seconds of no traffic, and its
 * memory per connection (before: listening, no peer yet). */
static void
report_idle(pid_t router, long n, double seconds, long rss_before, long rss_declared)
{
	double cpu0 = proc_cpu_ms(router), self0 = proc_cpu_ms(getpid()), run0, run;
	double t0 = now_s(), span;
	long sw0, sw;

	proc_threads(router, &sw0, &run0);
	usleep((useconds_t)(seconds * 1e6));
	span = now_s() - t0;
	double cpu = proc_cpu_ms(router) - cpu0, self = proc_cpu_ms(getpid()) - self0;
	proc_threads(router, &sw, &run);
	long rss = proc_status(router, "VmRSS");
	printf("idle n=%ld seconds=%.3f router_cpu_ms_per_s=%.2f router_run_ms_per_s=%.3f "
	       "router_ctxt_switches_per_s=%.1f peers_cpu_ms_per_s=%.2f router_rss_kib=%ld "
	       "router_rss_before_kib=%ld per_conn_kib=%.1f per_conn_after_traffic_kib=%.1f\n",
	       n, span, cpu / span, (run - run0) / span, (double)(sw - sw0) / span, self / span,
	       rss, rss_before, (double)(rss_declared - rss_before) / (double)n,
	       (double)(rss - rss_before) / (double)n);
	fflush(stdout);
}

/* The "close" line: how long closing the publishers and subscribers, then
 * the nodes, took. */
static void
peers_close(struct peer *ps, long n)
{
	double t0 = now_s(), t1;

	for (long i = 0; i < n; i++) {
		tern_pub_close(ps[i].pub);
		tern_sub_close(ps[i].sub);
	}
	t1 = now_s();
	for (long i = 0; i < n; i++) {
		tern_node_close(ps[i].node);
	}
	printf("close n=%ld pubs_subs_s=%.3f nodes_s=%.3f\n", n, t1 - t0, now_s() - t1);
	fflush(stdout);
}

static int
run(long n, double seconds, size_t size, double idle_s)
{
	char bound[128] = {0};
	int done_fd;
	struct peer *ps = calloc((size_t)n, sizeof(*ps));
	unsigned long *got = calloc((size_t)n, sizeof(*got)), sent = 0;
	pid_t router = router_start(bound, sizeof(bound), &done_fd);

	usleep(200000); /* the router settles before its memory is read */
	long rss_before = proc_status(router, "VmRSS");
	double t0 = now_s();
	peers_connect(ps, n, bound);
	double connect_s = now_s() - t0;
	double declare_s;
	t0 = now_s();
	if (!peers_declare(ps, n, &declare_s)) {
		exit(1);
	}
	double matched_s = now_s() - t0;
	usleep(500000);
	long rss_declared = proc_status(router, "VmRSS");
	double router_ms = proc_cpu_ms(router);
	double span = traffic(ps, n, seconds, size, got);
	router_ms = proc_cpu_ms(router) - router_ms;
	for (long i = 0; i < n; i++) {
		sent += ps[i].sent;
	}
	drain(ps, n, sent);
	long off = report_traffic(ps, n, span, got, declare_s, connect_s, matched_s, router_ms);
	usleep(1000000); /* acknowledgements and trims are done */
	report_idle(router, n, idle_s, rss_before, rss_declared);
	peers_close(ps, n);
	close(done_fd);
	waitpid(router, NULL, 0);
	free(ps);
	free(got);
	return off == 0 ? 0 : 1;
}

int
scale_peers(int argc, char **argv)
{
	long n = 1000, size = 64;
	double seconds = 5, idle_s = 10;

	for (int i = 2; i < argc; i++) {
		if (i + 1 >= argc) {
			return 2;
		} else if (strcmp(argv[i], "--peers") == 0) {
			n = atol(argv[++i]);
		} else if (strcmp(argv[i], "--seconds") == 0) {
			seconds = atof(argv[++i]);
		} else if (strcmp(argv[i], "--size") == 0) {
			size = atol(argv[++i]);
		} else if (strcmp(argv[i], "--idle") == 0) {
			idle_s = atof(argv[++i]);
		} else if (strcmp(argv[i], "--burst") == 0) {
			burst = atol(argv[++i]);
			if (burst < 1 || burst > 1000000) {
				return 2;
			}
		} else if (strcmp(argv[i], "--keepalive") == 0) {
			long ms = atol(argv[++i]);
			keepalive_ms = ms > 0 && ms <= 3600000 ? (uint32_t)ms : 0;
			if (keepalive_ms == 0) {
				return 2;
			}
		} else {
			return 2;
		}
	}
	if (n < 2 || size <= 0 || seconds <= 0 || idle_s <= 0) {
		return 2;
	}
	if (!raise_nofile(n)) {
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	return run(n, seconds, (size_t)size, idle_s);
}
