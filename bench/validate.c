/*
 * validate.c - `tern bench --validate`: measures the link emulator itself.
 *
 * For each emulated link: the shortest of 20 one-byte round trips through the
 * relay against the configured round trip (a busy host only ever adds to a
 * round trip, so the shortest shows what the emulator itself holds back, and
 * would show a release that comes early), and the rate at which a bulk
 * transfer arrives (from the first byte to the last, so the initial delay
 * does not count) against the configured bandwidth. Either off by more than
 * 5% fails; a round trip may also be off by VALIDATE_RTT_SLACK_MS, since
 * loopback sockets and thread wake-ups cost some tens of microseconds that a
 * 0 ms link cannot hide. A link that misses gets two more tries, the last
 * one printed.
 */
#include "linkemu.h"
#include "matrix.h"
#include "net.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define VALIDATE_TOLERANCE    0.05
#define VALIDATE_RTT_SLACK_MS 0.25
#define RTT_SAMPLES           20
#define VALIDATE_TRIES        3
#define RATE_SECONDS          1.0
#define WRITE_CHUNK           65536

struct sink {
	int lfd;
	pthread_t thread;
	uint64_t bytes; /* after the first read */
	uint64_t t_first;
	uint64_t t_last;
	int error;
};

/* First connection: echo each byte back. Second: read all, note the times. */
static void *
sink_main(void *arg)
{
	struct sink *s = arg;
	static const size_t bufsz = 1 << 20;
	char *buf = malloc(bufsz);
	int fd;
	ssize_t n;

	if (buf == NULL) {
		s->error = 1;
		return NULL;
	}
	fd = accept(s->lfd, NULL, NULL);
	if (fd < 0) {
		s->error = 1;
		free(buf);
		return NULL;
	}
	net_set_nodelay(fd);
	while ((n = read(fd, buf, bufsz)) > 0) {
		if (net_write_all(fd, buf, (size_t)n) != 0) {
			break;
		}
	}
	close(fd);
	fd = accept(s->lfd, NULL, NULL);
	if (fd < 0) {
		s->error = 1;
		free(buf);
		return NULL;
	}
	while ((n = read(fd, buf, bufsz)) > 0) {
		uint64_t now = net_now_ns();

		if (s->t_first == 0) {
			s->t_first = now;
		} else {
			s->bytes += (uint64_t)n;
		}
		s->t_last = now;
	}
	close(fd);
	free(buf);
	return NULL;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a;
	double y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double
measure_rtt(const char *ep)
{
	char err[160];
	double samples[RTT_SAMPLES];
	char c = 'x';
	int fd = net_connect(ep, err, sizeof(err));
	int i;

	if (fd < 0) {
		return -1;
	}
	net_set_nodelay(fd);
	for (i = -3; i < RTT_SAMPLES; i++) {
		uint64_t t0 = net_now_ns();

		if (write(fd, &c, 1) != 1 || read(fd, &c, 1) != 1) {
			close(fd);
			return -1;
		}
		if (i >= 0) {
			samples[i] = (double)(net_now_ns() - t0) / 1e6;
		}
	}
	close(fd);
	qsort(samples, RTT_SAMPLES, sizeof(samples[0]), cmp_double);
	return samples[0];
}

static int
send_bulk(const char *ep, uint64_t total)
{
	char err[160];
	char *buf = calloc(1, WRITE_CHUNK);
	int fd = net_connect(ep, err, sizeof(err));
	int rc = 0;

	if (fd < 0 || buf == NULL) {
		free(buf);
		if (fd >= 0) {
			close(fd);
		}
		return -1;
	}
	while (total > 0 && !bench_interrupted) {
		size_t n = total < WRITE_CHUNK ? (size_t)total : WRITE_CHUNK;

		if (net_write_all(fd, buf, n) != 0) {
			rc = -1;
			break;
		}
		total -= n;
	}
	shutdown(fd, SHUT_WR);
	close(fd);
	free(buf);
	return rc;
}

static double
rel_error(double measured, double want)
{
	return want > 0 ? (measured - want) / want : 0;
}

static int
validate_once(const struct bench_link *l, FILE *out, bool last)
{
	struct sink s;
	linkemu *le = NULL;
	char sink_ep[NET_EP_MAX];
	char ep[NET_EP_MAX];
	char err[200];
	double rtt;
	double rate = -1;
	bool ok = true;

	memset(&s, 0, sizeof(s));
	s.lfd = net_listen("tcp://127.0.0.1:0", sink_ep, sizeof(sink_ep), err, sizeof(err));
	if (s.lfd < 0 || pthread_create(&s.thread, NULL, sink_main, &s) != 0) {
		fprintf(stderr, "tern bench: --validate %s: %s\n", l->name, err);
		if (s.lfd >= 0) {
			close(s.lfd);
		}
		return -1;
	}
	if (linkemu_open(&le, l->bandwidth_Bps, l->rtt_ms, sink_ep, ep, sizeof(ep), err,
	                 sizeof(err)) != 0) {
		fprintf(stderr, "tern bench: --validate %s: %s\n", l->name, err);
		shutdown(s.lfd, SHUT_RDWR);
		pthread_join(s.thread, NULL);
		close(s.lfd);
		return -1;
	}
	rtt = measure_rtt(ep);
	if (l->bandwidth_Bps > 0) {
		uint64_t total = (uint64_t)(l->bandwidth_Bps * RATE_SECONDS);

		if (send_bulk(ep, total < (1u << 20) ? (1u << 20) : total) != 0) {
			ok = false;
		}
	} else if (send_bulk(ep, 1u << 20) != 0) {
		ok = false;
	}
	if (rtt < 0 || !ok) {
		/* The sink may still wait for a connection that will never come. */
		shutdown(s.lfd, SHUT_RDWR);
		linkemu_close(le);
		le = NULL;
	}
	pthread_join(s.thread, NULL);
	linkemu_close(le);
	close(s.lfd);
	if (l->bandwidth_Bps > 0 && s.t_last > s.t_first) {
		rate = (double)s.bytes / ((double)(s.t_last - s.t_first) / 1e9);
	}
	if (rtt < 0 || s.error) {
		ok = false;
	} else if (fabs(rtt - l->rtt_ms) >
	           fmax(VALIDATE_TOLERANCE * l->rtt_ms, VALIDATE_RTT_SLACK_MS)) {
		ok = false;
	}
	if (l->bandwidth_Bps > 0 &&
	    (rate < 0 || fabs(rel_error(rate, l->bandwidth_Bps)) > VALIDATE_TOLERANCE)) {
		ok = false;
	}
	if (!ok && !last) {
		return -1;
	}
	if (l->bandwidth_Bps > 0) {
		fprintf(out, "%-10s %10.2f %10.2f %+7.1f%% | %9.3f %9.3f %+8.1f%% | %s\n", l->name,
		        l->bandwidth_Bps / 1e6, rate / 1e6, 100 * rel_error(rate, l->bandwidth_Bps),
		        l->rtt_ms, rtt, 100 * rel_error(rtt, l->rtt_ms), ok ? "ok" : "FAILED");
	} else {
		fprintf(out, "%-10s %10s %10s %8s | %9.3f %9.3f %+8.1f%% | %s\n", l->name, "unlim",
		        "-", "-", l->rtt_ms, rtt, 100 * rel_error(rtt, l->rtt_ms),
		        ok ? "ok" : "FAILED");
	}
	fflush(out);
	return ok ? 0 : -1;
}

/* A busy machine can delay the relay's thread for a moment; that is the
 * machine, not the emulator, so a link gets VALIDATE_TRIES chances. */
static int
validate_one(const struct bench_link *l, FILE *out)
{
	int i;

	for (i = 1; i <= VALIDATE_TRIES && !bench_interrupted; i++) {
		if (validate_once(l, out, i == VALIDATE_TRIES) == 0) {
			return 0;
		}
	}
	return -1;
}

int
validate_links(const struct bench_config *cfg, FILE *out)
{
	int failed = 0;
	int checked = 0;
	size_t i;

	fprintf(out, "%-10s %10s %10s %8s | %9s %9s %9s | %s\n", "link", "set MB/s", "got MB/s",
	        "error", "set ms", "got ms", "error", "verdict");
	for (i = 0; i < cfg->nlinks && !bench_interrupted; i++) {
		if (!cfg->links[i].emulated) {
			continue;
		}
		checked++;
		if (validate_one(&cfg->links[i], out) != 0) {
			failed++;
		}
	}
	if (checked == 0) {
		fprintf(stderr, "tern bench: --validate: none of the links is emulated\n");
		return -1;
	}
	fprintf(out, "%d of %d links within %.0f%%\n", checked - failed, checked,
	        VALIDATE_TOLERANCE * 100);
	return failed == 0 && !bench_interrupted ? 0 : -1;
}
