/*
 * publisher.c - publish N messages of S bytes on a key, as fast as the
 * subscriber takes them, and report messages per second.
 *
 *   tern-example-pub [--connect EP] [--count N] [--size S] [--low-latency] KEY
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tern/tern.h>

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int
main(int argc, char **argv)
{
	const char *ep = "tcp://127.0.0.1:7447", *key = NULL;
	long count = 1000000, size = 64;
	tern_config cfg;
	tern_node *node;
	tern_pub *pub;
	char *buf;
	int rc;

	tern_config_init(&cfg);
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--connect") == 0 && i + 1 < argc) {
			ep = argv[++i];
		} else if (strcmp(argv[i], "--count") == 0 && i + 1 < argc) {
			count = atol(argv[++i]);
		} else if (strcmp(argv[i], "--size") == 0 && i + 1 < argc) {
			size = atol(argv[++i]);
		} else if (strcmp(argv[i], "--low-latency") == 0) {
			cfg.low_latency = true;
		} else if (argv[i][0] != '-' && key == NULL) {
			key = argv[i];
		} else {
			fprintf(stderr,
			        "usage: %s [--connect EP] [--count N] [--size S] "
			        "[--low-latency] KEY\n",
			        argv[0]);
			return 2;
		}
	}
	if (key == NULL || count < 0 || size < 0) {
		fprintf(stderr, "%s: a key is required\n", argv[0]);
		return 2;
	}
	cfg.log_level = TERN_LOG_WARN;
	if ((rc = tern_node_open(&node, &cfg)) != 0 || (rc = tern_node_connect(node, ep)) != 0 ||
	    (rc = tern_pub_open(&pub, node, key, -1)) != 0) {
		fprintf(stderr, "%s: %s\n", argv[0], tern_last_error());
		return 1;
	}
	if (tern_node_wait_peers(node, 1, 10000) != 0 || tern_pub_matched(pub) == 0) {
		fprintf(stderr, "%s: no subscriber for '%s' at %s\n", argv[0], key, ep);
		return 1;
	}
	buf = calloc(1, (size_t)size + 1);
	double t0 = now_s();
	for (long i = 0; i < count; i++) {
		memcpy(buf, &i, size >= (long)sizeof(i) ? sizeof(i) : (size_t)size);
		if ((rc = tern_publish(pub, buf, (size_t)size)) != 0) {
			fprintf(stderr, "%s: publish: %s\n", argv[0], tern_last_error());
			break;
		}
	}
	tern_pub_flush(pub, 10000);
	double dt = now_s() - t0;
	fprintf(stderr, "messages=%ld bytes=%ld seconds=%.3f msgs_per_s=%.0f MB_per_s=%.1f\n",
	        count, count * size, dt, (double)count / dt,
	        (double)count * (double)size / dt / 1e6);
	tern_pub_close(pub);
	tern_node_close(node);
	free(buf);
	return rc == 0 ? 0 : 1;
}
