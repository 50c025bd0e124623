/*
 * subscriber.c - listen, receive N messages matching a key expression,
 * check each publisher's sequence numbers, and report messages per second.
 *
 *   tern-example-sub [--listen EP] [--count N] [--low-latency] KEYEXPR
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tern/tern.h>

struct counter {
	long got, want, out_of_order;
	uint64_t last_seq;
	double first, last;
};

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Runs on the node's I/O thread for every message. */
static void
on_message(void *arg, const tern_msg *m)
{
	struct counter *c = arg;

	if (c->got == 0) {
		c->first = now_s();
	}
	if (m->seq != c->last_seq + 1) {
		c->out_of_order++;
	}
	c->last_seq = m->seq;
	c->got++;
	if (c->got % 4096 == 0 || c->got == c->want) {
		c->last = now_s(); /* a clock read per message would cost more than the rest */
	}
}

int
main(int argc, char **argv)
{
	const char *ep = "tcp://127.0.0.1:7447", *ke = NULL;
	long count = 1000000;
	struct counter c = {0};
	tern_config cfg;
	tern_node *node;
	tern_sub *sub;
	char bound[256];

	tern_config_init(&cfg);
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--listen") == 0 && i + 1 < argc) {
			ep = argv[++i];
		} else if (strcmp(argv[i], "--count") == 0 && i + 1 < argc) {
			count = atol(argv[++i]);
		} else if (strcmp(argv[i], "--low-latency") == 0) {
			cfg.low_latency = true;
		} else if (argv[i][0] != '-' && ke == NULL) {
			ke = argv[i];
		} else {
			fprintf(stderr,
			        "usage: %s [--listen EP] [--count N] [--low-latency] KEYEXPR\n",
			        argv[0]);
			return 2;
		}
	}
	c.want = count;
	if (ke == NULL) {
		fprintf(stderr, "%s: a key expression is required\n", argv[0]);
		return 2;
	}
	cfg.log_level = TERN_LOG_WARN;
	if (tern_node_open(&node, &cfg) != 0 ||
	    tern_sub_open(&sub, node, ke, on_message, &c) != 0 ||
	    tern_node_listen(node, ep, bound, sizeof(bound)) != 0) {
		fprintf(stderr, "%s: %s\n", argv[0], tern_last_error());
		return 1;
	}
	printf("listening on %s\n", bound);
	fflush(stdout);
	double deadline = now_s() + 120;
	while (c.got < count && now_s() < deadline) {
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, NULL);
	}
	tern_sub_close(sub);
	double dt = c.last - c.first;
	fprintf(stderr, "messages=%ld out_of_order=%ld seconds=%.3f msgs_per_s=%.0f\n", c.got,
	        c.out_of_order, dt, dt > 0 ? (double)c.got / dt : 0.0);
	tern_node_close(node);
	return c.got == count && c.out_of_order == 0 ? 0 : 1;
}
