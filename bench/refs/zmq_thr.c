/*
 * zmq_thr.c - ZeroMQ PUB/SUB throughput, a reference tern is measured against.
 *
 *   zmq_thr recv ENDPOINT SIZE COUNT SECONDS    (SUB, binds ENDPOINT)
 *   zmq_thr send ENDPOINT SIZE COUNT SECONDS    (PUB, connects to ENDPOINT)
 *
 * Both high-water marks are 0 (unlimited), so a PUB socket never drops a
 * message and every one of COUNT must arrive. The SUB socket subscribes to
 * everything. A PUB socket drops what it sends before a subscription has
 * reached it, so the sender opens the socket as XPUB (a PUB socket that also
 * hands the subscriptions it receives to the application; its send path is
 * the same) and starts once the subscription has arrived. The first 8 bytes of
 * each message (fewer if SIZE is smaller) carry its sequence number.
 *
 * The receiver prints one line on stdout:
 *   layer=zmq size=S msgs=N expected=C secs=T msgs_per_s=R MB_per_s=M bad=B
 * where secs runs from the first message received to the last, and bad counts
 * messages of the wrong size or out of sequence. It exits 0 when it got COUNT
 * good messages, 1 when it got fewer within SECONDS or any bad one, 2 on a
 * usage or socket error. The sender gives up sending after SECONDS.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "refs.h"

#define SEQ_BYTES 8
#define TICK_MS   100

struct args {
	const char *endpoint;
	size_t size;
	uint64_t count;
	double seconds;
};

static int
parse_args(char **argv, struct args *a)
{
	a->endpoint = argv[2];
	return parse_size_count_seconds("zmq_thr", argv, 1u << 30, &a->size, &a->count,
	                                &a->seconds);
}

static int
set_int(void *sock, int option, int value, const char *name)
{
	if (zmq_setsockopt(sock, option, &value, sizeof(value)) != 0) {
		fprintf(stderr, "zmq_thr: setting %s: %s\n", name, zmq_strerror(errno));
		return -1;
	}
	return 0;
}

static int
run_send(void *ctx, const struct args *a)
{
	size_t seq_bytes = a->size < SEQ_BYTES ? a->size : SEQ_BYTES;
	double deadline = now_s() + a->seconds;
	double start, secs;
	uint64_t sent = 0;
	int status = 0;
	uint8_t *payload = calloc(1, a->size);
	void *s = zmq_socket(ctx, ZMQ_XPUB);

	if (payload == NULL || s == NULL) {
		fprintf(stderr, "zmq_thr send: %s\n",
		        s == NULL ? zmq_strerror(errno) : "out of memory");
		free(payload);
		return 2;
	}
	memset(payload, 'x', a->size);
	/* linger bounds how long closing waits for queued messages to go out */
	if (set_int(s, ZMQ_SNDHWM, 0, "ZMQ_SNDHWM") != 0 ||
	    set_int(s, ZMQ_RCVTIMEO, TICK_MS, "ZMQ_RCVTIMEO") != 0 ||
	    set_int(s, ZMQ_LINGER, (int)(a->seconds * 1000) + 5000, "ZMQ_LINGER") != 0) {
		status = 2;
		goto out;
	}
	if (zmq_connect(s, a->endpoint) != 0) {
		fprintf(stderr, "zmq_thr send: connect %s: %s\n", a->endpoint, zmq_strerror(errno));
		status = 2;
		goto out;
	}
	for (;;) {
		uint8_t sub[256];
		int n = zmq_recv(s, sub, sizeof(sub), 0);
		if (n >= 1 && sub[0] == 1) {
			break; /* a subscription */
		}
		if (n < 0 && errno != EAGAIN && errno != EINTR) {
			fprintf(stderr, "zmq_thr send: %s\n", zmq_strerror(errno));
			status = 2;
			goto out;
		}
		if (now_s() >= deadline) {
			fprintf(stderr, "zmq_thr send: no subscriber within %g s\n", a->seconds);
			status = 2;
			goto out;
		}
	}

	start = now_s();
	while (sent < a->count) {
		if ((sent & 1023) == 0 && sent > 0 && now_s() >= deadline) {
			break;
		}
		put_le(payload, sent, seq_bytes);
		if (zmq_send(s, payload, a->size, 0) < 0) {
			if (errno == EINTR) {
				continue;
			}
			fprintf(stderr, "zmq_thr send: %s\n", zmq_strerror(errno));
			status = 2;
			break;
		}
		sent++;
	}
	secs = now_s() - start;
	fprintf(stderr, "zmq_thr send: sent=%llu secs=%.3f msgs_per_s=%.0f\n",
	        (unsigned long long)sent, secs, secs > 0 ? (double)sent / secs : 0);
	if (status == 0 && sent < a->count) {
		status = 1;
	}
out:
	zmq_close(s);
	free(payload);
	return status;
}

static int
run_recv(void *ctx, const struct args *a)
{
	size_t seq_bytes = a->size < SEQ_BYTES ? a->size : SEQ_BYTES;
	uint64_t seq_mask = seq_bytes >= 8 ? UINT64_MAX : (UINT64_C(1) << (8 * seq_bytes)) - 1;
	double deadline = now_s() + a->seconds;
	double first = 0, last = 0;
	uint64_t msgs = 0, bad = 0;
	zmq_msg_t m;
	void *s = zmq_socket(ctx, ZMQ_SUB);

	if (s == NULL) {
		fprintf(stderr, "zmq_thr recv: %s\n", zmq_strerror(errno));
		return 2;
	}
	if (set_int(s, ZMQ_RCVHWM, 0, "ZMQ_RCVHWM") != 0 ||
	    set_int(s, ZMQ_RCVTIMEO, TICK_MS, "ZMQ_RCVTIMEO") != 0 ||
	    set_int(s, ZMQ_LINGER, 0, "ZMQ_LINGER") != 0 ||
	    zmq_setsockopt(s, ZMQ_SUBSCRIBE, "", 0) != 0) {
		zmq_close(s);
		return 2;
	}
	if (zmq_bind(s, a->endpoint) != 0) {
		fprintf(stderr, "zmq_thr recv: bind %s: %s\n", a->endpoint, zmq_strerror(errno));
		zmq_close(s);
		return 2;
	}

	zmq_msg_init(&m);
	while (msgs < a->count) {
		int n = zmq_msg_recv(&m, s, 0);
		if (n < 0) {
			if (errno != EAGAIN && errno != EINTR) {
				fprintf(stderr, "zmq_thr recv: %s\n", zmq_strerror(errno));
				break;
			}
			if (now_s() >= deadline) {
				fprintf(stderr, "zmq_thr recv: gave up after %g s\n", a->seconds);
				break;
			}
			continue;
		}
		last = now_s();
		if (msgs == 0) {
			first = last;
		}
		if ((size_t)n != a->size ||
		    get_le(zmq_msg_data(&m), seq_bytes) != (msgs & seq_mask)) {
			if (bad++ == 0) {
				fprintf(stderr,
				        "zmq_thr recv: message %llu: %d bytes or out of sequence\n",
				        (unsigned long long)msgs, n);
			}
		}
		msgs++;
		if ((msgs & 65535) == 0 && last >= deadline && msgs < a->count) {
			fprintf(stderr, "zmq_thr recv: gave up after %g s\n", a->seconds);
			break;
		}
	}
	zmq_msg_close(&m);
	zmq_close(s);

	return report_recv("zmq", a->size, msgs, a->count, last - first, bad);
}

int
main(int argc, char **argv)
{
	struct args a;
	int status;

	if (argc != 6 || (strcmp(argv[1], "send") != 0 && strcmp(argv[1], "recv") != 0)) {
		fprintf(stderr, "usage: zmq_thr send|recv ENDPOINT SIZE COUNT SECONDS\n");
		return 2;
	}
	if (parse_args(argv, &a) != 0) {
		return 2;
	}
	void *ctx = zmq_ctx_new();
	if (ctx == NULL) {
		fprintf(stderr, "zmq_thr: %s\n", zmq_strerror(errno));
		return 2;
	}
	status = strcmp(argv[1], "send") == 0 ? run_send(ctx, &a) : run_recv(ctx, &a);
	zmq_ctx_term(ctx);
	return status;
}
