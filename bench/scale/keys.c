/*
 * keys.c - tern-scale: what many keys cost, measured the way a new user
 * would meet it, with the C API only (issue 19's table).
 *
 *   tern-scale declare [--keys N]
 *       one node, no peers: the time to declare N publishers, then N
 *       subscriptions, and the memory each key holds while declared and
 *       after all are closed again
 *   tern-scale stream [--keys LIST] [--seconds S] [--size B]
 *       for each K in LIST: a subscriber process (one pull subscriber on
 *       k/ and any chunks after it) and a publisher process (K publishers k/0 .. k/K-1, B-byte
 *       messages round-robin over them for S seconds) over loopback TCP;
 *       the time to declare, messages/s at the receiver, the publisher's
 *       and subscriber's peak memory, and the ratio to the first K's rate
 *
 *   tern-scale arrival [--keys N]
 *       a router with N publishers behind it: how long a new subscription
 *       to one key takes to reach that key's publisher (median of 21)
 *   tern-scale idle [--keys N]
 *       the memory N declared, matched, idle keys hold in the publisher
 *       process, the router's and the subscriber's
 *
 * Every figure goes to stdout, one line a measurement, as key=value pairs a
 * script can read. The process forks for the subscriber, so each side's
 * memory is its own.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <tern/tern.h>

#include "scale.h"

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* VmRSS or VmHWM of this process, in KiB. */
static long
status_kib(const char *field)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long v = -1;
	size_t n = strlen(field);

	if (f == NULL) {
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

static void
die(const char *what)
{
	fprintf(stderr, "tern-scale: %s: %s\n", what, tern_last_error());
	exit(1);
}

tern_node *
scale_node(const char *id, int mode, void (*tune)(tern_config *cfg))
{
	tern_config cfg;
	tern_node *n;

	tern_config_init(&cfg);
	cfg.id = id;
	cfg.mode = mode;
	cfg.log_level = TERN_LOG_ERROR;
	if (tune != NULL) {
		tune(&cfg);
	}
	if (tern_node_open(&n, &cfg) != 0) {
		die("open a node");
	}
	return n;
}

static tern_pub **
declare_pubs(tern_node *n, long keys, double *seconds)
{
	tern_pub **pubs = calloc((size_t)keys, sizeof(*pubs));
	char key[64];
	double t0 = now_s();

	for (long i = 0; i < keys; i++) {
		snprintf(key, sizeof(key), "k/%ld", i);
		if (tern_pub_open(&pubs[i], n, key, -1) != 0) {
			die("declare a publisher");
		}
	}
	*seconds = now_s() - t0;
	return pubs;
}

static int
cmd_declare(long keys)
{
	tern_node *n = scale_node("scale-declare", TERN_MODE_PEER, NULL);
	long rss0 = status_kib("VmRSS"), rss1, rss2, rss3;
	tern_sub **subs = calloc((size_t)keys, sizeof(*subs));
	double tp, ts, t0;
	char ke[64];
	tern_pub **pubs = declare_pubs(n, keys, &tp);

	rss1 = status_kib("VmRSS");
	t0 = now_s();
	for (long i = 0; i < keys; i++) {
		snprintf(ke, sizeof(ke), "s/%ld/*", i);
		if (tern_sub_open(&subs[i], n, ke, NULL, NULL) != 0) {
			die("declare a subscription");
		}
	}
	ts = now_s() - t0;
	rss2 = status_kib("VmRSS");
	t0 = now_s();
	for (long i = 0; i < keys; i++) {
		tern_pub_close(pubs[i]);
		tern_sub_close(subs[i]);
	}
	double tc = now_s() - t0;
	rss3 = status_kib("VmRSS");
	printf("declare keys=%ld pubs_s=%.3f subs_s=%.3f close_s=%.3f pub_bytes_per_key=%.0f "
	       "sub_bytes_per_key=%.0f rss_start_kib=%ld rss_end_kib=%ld\n",
	       keys, tp, ts, tc, (double)(rss1 - rss0) * 1024 / (double)keys,
	       (double)(rss2 - rss1) * 1024 / (double)keys, rss0, rss3);
	tern_node_close(n);
	free(pubs);
	free(subs);
	return 0;
}

/* The subscriber's side: report on fd how many it got, over how long. */
static void
subscriber(int port_fd, int result_fd, double idle_s)
{
	tern_node *n = scale_node("scale-sub", TERN_MODE_PEER, NULL);
	char bound[128];
	tern_sub *sub;
	tern_msg m;
	long count = 0;
	double first = 0, last = 0, start = now_s();

	if (tern_node_listen(n, "tcp://127.0.0.1:0", bound, sizeof(bound)) != 0 ||
	    tern_sub_open(&sub, n, "k/**", NULL, NULL) != 0) {
		die("subscriber");
	}
	if (write(port_fd, bound, strlen(bound) + 1) < 0) {
		exit(1);
	}
	for (;;) {
		int rc = tern_sub_recv(sub, &m, (int)(idle_s * 1000));
		if (rc == TERN_ETIMEDOUT && count > 0) {
			break;
		}
		if (rc != 0) {
			if (now_s() - start > 600) {
				break;
			}
			continue;
		}
		last = now_s();
		if (count++ == 0) {
			first = last;
		}
	}
	char line[256];
	int len =
	    snprintf(line, sizeof(line), "%ld %.6f %ld", count, last - first, status_kib("VmHWM"));
	if (write(result_fd, line, (size_t)len + 1) < 0) {
		exit(1);
	}
	tern_sub_close(sub);
	tern_node_close(n);
	exit(0);
}

static double
stream_one(long keys, double seconds, size_t size, double ref)
{
	int pfd[2], rfd[2];
	char bound[128] = {0}, res[256] = {0};
	pid_t pid;

	if (pipe(pfd) != 0 || pipe(rfd) != 0) {
		return 0;
	}
	if ((pid = fork()) == 0) {
		subscriber(pfd[1], rfd[1], 5.0);
	}
	if (read(pfd[0], bound, sizeof(bound) - 1) <= 0) {
		fprintf(stderr, "tern-scale: the subscriber did not start\n");
		exit(1);
	}
	tern_node *n = scale_node("scale-pub", TERN_MODE_PEER, NULL);
	double declare_s, t0, deadline, start = now_s();
	if (tern_node_connect(n, bound) != 0 || tern_node_wait_peers(n, 1, 10000) != 0) {
		die("connect");
	}
	tern_pub **pubs = declare_pubs(n, keys, &declare_s);
	/* routes are made on the I/O thread: the last declared is matched last */
	deadline = now_s() + 60;
	while (tern_pub_matched(pubs[keys - 1]) == 0 && now_s() < deadline) {
		usleep(1000);
	}
	double matched_s = now_s() - start;
	uint8_t *buf = calloc(1, size);
	long sent = 0;
	t0 = now_s();
	while (now_s() - t0 < seconds) {
		for (int b = 0; b < 1024; b++) {
			memcpy(buf, &sent, size >= sizeof(sent) ? sizeof(sent) : size);
			if (tern_publish(pubs[sent % keys], buf, size) != 0) {
				die("publish");
			}
			sent++;
		}
	}
	long pub_hwm = status_kib("VmHWM");
	if (read(rfd[0], res, sizeof(res) - 1) <= 0) {
		fprintf(stderr, "tern-scale: no result from the subscriber\n");
	}
	long got = 0, sub_hwm = 0;
	double span = 0;
	sscanf(res, "%ld %lf %ld", &got, &span, &sub_hwm);
	double rate = span > 0 ? (double)got / span : 0;
	printf("stream keys=%ld declare_s=%.3f matched_s=%.3f sent=%ld received=%ld "
	       "msgs_per_s=%.0f ratio=%.2f pub_peak_kib=%ld sub_peak_kib=%ld\n",
	       keys, declare_s, matched_s, sent, got, rate, ref > 0 ? rate / ref : 1.0, pub_hwm,
	       sub_hwm);
	fflush(stdout);
	for (long i = 0; i < keys; i++) {
		tern_pub_close(pubs[i]);
	}
	tern_node_close(n);
	waitpid(pid, NULL, 0);
	free(pubs);
	free(buf);
	close(pfd[0]);
	close(pfd[1]);
	close(rfd[0]);
	close(rfd[1]);
	return rate;
}

/*
 * A router R with a publisher node P behind it (N publishers k/0 ..); a
 * subscriber node S connects and subscribes to one key at a time: how long
 * until P's publisher on that key is matched (the subscription crossed S,
 * R and P). Then the memory: VmRSS of this process (R, P and S) per key
 * before any subscription, after the publishers were declared, and after
 * N subscriptions on S (one per key, which R then holds too).
 */
static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static int
cmd_arrival(long keys)
{
	tern_node *r = scale_node("scale-router", TERN_MODE_ROUTER, NULL), *p, *sn;
	char bound[128], ke[64];
	double ms[21];
	tern_sub *sub;
	double declare_s;

	if (tern_node_listen(r, "tcp://127.0.0.1:0", bound, sizeof(bound)) != 0) {
		die("listen");
	}
	p = scale_node("scale-pub", TERN_MODE_PEER, NULL);
	sn = scale_node("scale-sub", TERN_MODE_PEER, NULL);
	if (tern_node_connect(p, bound) != 0 || tern_node_connect(sn, bound) != 0 ||
	    tern_node_wait_peers(r, 2, 10000) != 0) {
		die("connect");
	}
	tern_pub **pubs = declare_pubs(p, keys, &declare_s);
	usleep(500000); /* the OPENs reach the router */
	for (int i = 0; i < 21; i++) {
		long k = (keys / 21) * i + i;
		k = k < keys ? k : keys - 1;
		snprintf(ke, sizeof(ke), "k/%ld", k);
		double t0 = now_s();
		if (tern_sub_open(&sub, sn, ke, NULL, NULL) != 0) {
			die("subscribe");
		}
		while (tern_pub_matched(pubs[k]) == 0 && now_s() - t0 < 10) {
			usleep(20);
		}
		ms[i] = (now_s() - t0) * 1000;
		tern_sub_close(sub);
		while (tern_pub_matched(pubs[k]) != 0 && now_s() - t0 < 20) {
			usleep(100);
		}
	}
	qsort(ms, 21, sizeof(ms[0]), cmp_double);
	printf("arrival keys=%ld declare_s=%.3f sub_to_matched_ms_median=%.3f min=%.3f max=%.3f "
	       "(21 subscriptions, one at a time, through a router)\n",
	       keys, declare_s, ms[10], ms[0], ms[20]);
	fflush(stdout);
	for (long i = 0; i < keys; i++) {
		tern_pub_close(pubs[i]);
	}
	free(pubs);
	tern_node_close(sn);
	tern_node_close(p);
	tern_node_close(r);
	return 0;
}

/* A process that reports its VmRSS on res_fd when the parent says go on
 * go_fd (the baseline), again at the second go, and ends at the third. */
static void
report_rss(int res_fd, int go_fd)
{
	char res[64], go;
	long before, after;

	if (read(go_fd, &go, 1) != 1) {
		exit(1);
	}
	before = status_kib("VmRSS");
	if (read(go_fd, &go, 1) != 1) {
		exit(1);
	}
	after = status_kib("VmRSS");
	int len = snprintf(res, sizeof(res), "%ld %ld", before, after);
	if (write(res_fd, res, (size_t)len + 1) < 0) {
		exit(1);
	}
	(void)read(go_fd, &go, 1);
}

/* The memory of idle declared keys, each process's VmRSS before and after,
 * per key: a publisher process (this one) with N publishers, a router
 * process, and a subscriber process on "k/" "**" behind the router. */
static int
cmd_idle(long keys)
{
	int pfd[2], rr[2], rgo[2], sr[2], sgo[2];
	char bound[128] = {0}, res[64] = {0}, go = 0;
	pid_t router, subscriber;

	if (pipe(pfd) != 0 || pipe(rr) != 0 || pipe(rgo) != 0 || pipe(sr) != 0 || pipe(sgo) != 0) {
		return 1;
	}
	if ((router = fork()) == 0) {
		tern_node *r = scale_node("scale-router", TERN_MODE_ROUTER, NULL);
		if (tern_node_listen(r, "tcp://127.0.0.1:0", bound, sizeof(bound)) != 0 ||
		    write(pfd[1], bound, strlen(bound) + 1) < 0) {
			die("router");
		}
		report_rss(rr[1], rgo[0]);
		tern_node_close(r);
		exit(0);
	}
	if (read(pfd[0], bound, sizeof(bound) - 1) <= 0) {
		return 1;
	}
	if ((subscriber = fork()) == 0) {
		tern_node *sn = scale_node("scale-sub", TERN_MODE_PEER, NULL);
		tern_sub *sub;
		if (tern_node_connect(sn, bound) != 0 || tern_node_wait_peers(sn, 1, 10000) != 0 ||
		    tern_sub_open(&sub, sn, "k/**", NULL, NULL) != 0) {
			die("subscriber");
		}
		report_rss(sr[1], sgo[0]);
		tern_sub_close(sub);
		tern_node_close(sn);
		exit(0);
	}
	tern_node *p = scale_node("scale-pub", TERN_MODE_PEER, NULL);
	double declare_s;
	if (tern_node_connect(p, bound) != 0 || tern_node_wait_peers(p, 1, 10000) != 0) {
		die("connect");
	}
	usleep(300000);
	long p0 = status_kib("VmRSS");
	if (write(rgo[1], &go, 1) != 1 || write(sgo[1], &go, 1) != 1) {
		return 1;
	}
	tern_pub **pubs = declare_pubs(p, keys, &declare_s);
	for (double t0 = now_s(); tern_pub_matched(pubs[keys - 1]) == 0 && now_s() - t0 < 60;) {
		usleep(1000);
	}
	usleep(1000000); /* the router and the subscriber settle */
	long p1 = status_kib("VmRSS");
	long r0 = 0, r1 = 0, s0 = 0, s1 = 0;
	if (write(rgo[1], &go, 1) != 1 || read(rr[0], res, sizeof(res) - 1) <= 0) {
		return 1;
	}
	sscanf(res, "%ld %ld", &r0, &r1);
	if (write(sgo[1], &go, 1) != 1 || read(sr[0], res, sizeof(res) - 1) <= 0) {
		return 1;
	}
	sscanf(res, "%ld %ld", &s0, &s1);
	printf("idle keys=%ld publisher_bytes_per_key=%.0f router_bytes_per_key=%.0f "
	       "subscriber_bytes_per_key=%.0f (VmRSS: publisher %ld -> %ld KiB, router %ld -> %ld "
	       "KiB, subscriber %ld -> %ld KiB)\n",
	       keys, (double)(p1 - p0) * 1024 / (double)keys,
	       (double)(r1 - r0) * 1024 / (double)keys, (double)(s1 - s0) * 1024 / (double)keys, p0,
	       p1, r0, r1, s0, s1);
	fflush(stdout);
	for (long i = 0; i < keys; i++) {
		tern_pub_close(pubs[i]);
	}
	free(pubs);
	tern_node_close(p);
	if (write(rgo[1], &go, 1) != 1 || write(sgo[1], &go, 1) != 1) {
		return 1;
	}
	waitpid(subscriber, NULL, 0);
	waitpid(router, NULL, 0);
	return 0;
}

static void
usage(void)
{
	fprintf(stderr, "usage: tern-scale declare [--keys N]\n"
	                "       tern-scale stream [--keys N,N,...] [--seconds S] [--size B]\n"
	                "       tern-scale arrival [--keys N]\n"
	                "       tern-scale idle [--keys N]\n"
	                "       tern-scale peers [--peers N] [--seconds S] [--size B] [--idle S]\n"
	                "                         [--keepalive MS] [--burst M]\n"
	                "       tern-scale routers [--shape chain|triangle] [--subs N] [--peers P] "
	                "[--messages M]\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	const char *keys = NULL;
	double seconds = 3;
	long size = 64;

	if (argc < 2) {
		usage();
	}
	if (strcmp(argv[1], "peers") == 0) {
		int rc = scale_peers(argc, argv);
		if (rc == 2) {
			usage();
		}
		return rc;
	}
	if (strcmp(argv[1], "routers") == 0) {
		return scale_routers(argc - 1, argv + 1);
	}
	for (int i = 2; i < argc; i++) {
		if (strcmp(argv[i], "--keys") == 0 && i + 1 < argc) {
			keys = argv[++i];
		} else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
			seconds = atof(argv[++i]);
		} else if (strcmp(argv[i], "--size") == 0 && i + 1 < argc) {
			size = atol(argv[++i]);
		} else {
			usage();
		}
	}
	signal(SIGPIPE, SIG_IGN);
	if (strcmp(argv[1], "declare") == 0) {
		long n = keys != NULL ? atol(keys) : 100000;
		return n > 0 ? cmd_declare(n) : 2;
	}
	if (strcmp(argv[1], "arrival") == 0 || strcmp(argv[1], "idle") == 0) {
		long n = keys != NULL ? atol(keys) : 100000;
		if (n <= 0) {
			usage();
		}
		return argv[1][0] == 'a' ? cmd_arrival(n) : cmd_idle(n);
	}
	if (strcmp(argv[1], "stream") == 0 && size > 0 && seconds > 0) {
		char list[256];
		double ref = 0;
		snprintf(list, sizeof(list), "%s", keys != NULL ? keys : "1,100,10000,100000");
		for (char *save, *t = strtok_r(list, ",", &save); t != NULL;
		     t = strtok_r(NULL, ",", &save)) {
			long k = atol(t);
			if (k <= 0) {
				usage();
			}
			double r = stream_one(k, seconds, (size_t)size, ref);
			if (ref == 0) {
				ref = r;
			}
		}
		return 0;
	}
	usage();
	return 2;
}
