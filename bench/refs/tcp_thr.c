/*
 * tcp_thr.c - framed TCP throughput, the reference tern is measured against.
 *
 *   tcp_thr recv [HOST:]PORT SIZE COUNT SECONDS
 *   tcp_thr send [HOST:]PORT SIZE COUNT SECONDS
 *
 * Each record is a 4-byte little-endian length followed by SIZE bytes whose
 * first 8 (fewer if SIZE is smaller) carry the record's sequence number. The
 * sender packs as many whole records as fit into a 64 KiB buffer and hands it
 * to one write(): the batching a careful engineer would do by hand. The
 * receiver reads into a 64 KiB buffer, walks the length prefixes, checks that
 * every record has SIZE bytes and the next sequence number, and counts them.
 *
 * The receiver listens (HOST defaults to 127.0.0.1), takes one connection and
 * prints one line on stdout:
 *   layer=tcp size=S msgs=N expected=C secs=T msgs_per_s=R MB_per_s=M bad=B
 * where secs runs from the first byte read to the last. It exits 0 when it
 * got COUNT good records, 1 when it got fewer (SECONDS passed, or the sender
 * closed early) or any bad one, 2 when it cannot listen or on a usage error.
 * The sender gives up sending after SECONDS and reports on stderr what it
 * sent.
 */
#define _POSIX_C_SOURCE 200809L

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "refs.h"

#define BUF_BYTES (64 * 1024)
#define HDR_BYTES 4
#define SEQ_BYTES 8
#define MAX_SIZE  (BUF_BYTES - HDR_BYTES)
#define TICK_MS   100

struct args {
	struct sockaddr_in addr;
	size_t size;
	uint64_t count;
	double seconds;
};

static int
parse_args(char **argv, struct args *a)
{
	char host[64] = "127.0.0.1";
	const char *port = argv[2];
	const char *colon = strrchr(argv[2], ':');
	uint64_t p;

	if (colon != NULL) {
		size_t hl = (size_t)(colon - argv[2]);
		if (hl == 0 || hl >= sizeof(host)) {
			return -1;
		}
		memcpy(host, argv[2], hl);
		host[hl] = '\0';
		port = colon + 1;
	}
	if (parse_u64(port, &p) != 0 || p == 0 || p > 65535) {
		fprintf(stderr, "tcp_thr: bad port \"%s\"\n", port);
		return -1;
	}
	memset(&a->addr, 0, sizeof(a->addr));
	a->addr.sin_family = AF_INET;
	a->addr.sin_port = htons((uint16_t)p);
	if (inet_pton(AF_INET, host, &a->addr.sin_addr) != 1) {
		fprintf(stderr, "tcp_thr: bad IPv4 address \"%s\"\n", host);
		return -1;
	}
	return parse_size_count_seconds("tcp_thr", argv, MAX_SIZE, &a->size, &a->count,
	                                &a->seconds);
}

/* A receive timeout lets a blocking read() wake up now and then to look at
 * the clock, without a poll() before every read. */
static void
set_recv_timeout(int fd, int ms)
{
	struct timeval tv = {ms / 1000, (ms % 1000) * 1000};

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

static int
write_all(int fd, const uint8_t *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0) {
			if (errno == EINTR) {
				continue;
			}
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int
run_send(const struct args *a)
{
	static uint8_t buf[BUF_BYTES];
	size_t frame = HDR_BYTES + a->size;
	size_t seq_bytes = a->size < SEQ_BYTES ? a->size : SEQ_BYTES;
	double start = now_s();
	double deadline = start + a->seconds;
	size_t used = 0;
	uint64_t sent = 0;
	int fd = -1;

	/* a receiver that gives up must show as a write error, not kill us */
	signal(SIGPIPE, SIG_IGN);

	/* the receiver may not be listening yet */
	for (;;) {
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd < 0) {
			perror("tcp_thr send: socket");
			return 2;
		}
		if (connect(fd, (const struct sockaddr *)&a->addr, sizeof(a->addr)) == 0) {
			break;
		}
		close(fd);
		if (now_s() >= deadline) {
			perror("tcp_thr send: connect");
			return 2;
		}
		nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
	}

	memset(buf, 'x', sizeof(buf));
	start = now_s();
	for (sent = 0; sent < a->count; sent++) {
		if (used + frame > BUF_BYTES) {
			if (write_all(fd, buf, used) != 0) {
				perror("tcp_thr send: write");
				close(fd);
				return 2;
			}
			used = 0;
			if (now_s() >= deadline) {
				break;
			}
		}
		put_le(buf + used, a->size, HDR_BYTES);
		put_le(buf + used + HDR_BYTES, sent, seq_bytes);
		used += frame;
	}
	if (used > 0 && write_all(fd, buf, used) != 0) {
		perror("tcp_thr send: write");
		close(fd);
		return 2;
	}
	double secs = now_s() - start;

	/* wait (bounded) for the receiver to close, so it has read everything */
	shutdown(fd, SHUT_WR);
	set_recv_timeout(fd, TICK_MS);
	for (;;) {
		uint8_t tmp[64];
		ssize_t r = read(fd, tmp, sizeof(tmp));
		if (r == 0 ||
		    (r < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)) {
			break;
		}
		if (now_s() >= deadline + 5) {
			break;
		}
	}
	close(fd);
	fprintf(stderr, "tcp_thr send: sent=%llu secs=%.3f msgs_per_s=%.0f\n",
	        (unsigned long long)sent, secs, secs > 0 ? (double)sent / secs : 0);
	return sent == a->count ? 0 : 1;
}

static int
accept_one(int lfd, double deadline)
{
	for (;;) {
		struct pollfd p = {lfd, POLLIN, 0};
		double left = deadline - now_s();
		if (left <= 0) {
			fprintf(stderr, "tcp_thr recv: no connection within the time cap\n");
			return -1;
		}
		int rc = poll(&p, 1, left > 1 ? 1000 : (int)(left * 1000) + 1);
		if (rc < 0 && errno != EINTR) {
			perror("tcp_thr recv: poll");
			return -1;
		}
		if (rc > 0) {
			int fd = accept(lfd, NULL, NULL);
			if (fd >= 0) {
				return fd;
			}
			if (errno != EINTR && errno != ECONNABORTED) {
				perror("tcp_thr recv: accept");
				return -1;
			}
		}
	}
}

static int
run_recv(const struct args *a)
{
	static uint8_t buf[BUF_BYTES];
	size_t seq_bytes = a->size < SEQ_BYTES ? a->size : SEQ_BYTES;
	uint64_t seq_mask = seq_bytes >= 8 ? UINT64_MAX : (UINT64_C(1) << (8 * seq_bytes)) - 1;
	double deadline = now_s() + a->seconds;
	double first = 0, last = 0;
	uint64_t msgs = 0, bad = 0;
	bool started = false;
	size_t have = 0;
	int one = 1;

	int lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0) {
		perror("tcp_thr recv: socket");
		return 2;
	}
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (const struct sockaddr *)&a->addr, sizeof(a->addr)) != 0 ||
	    listen(lfd, 1) != 0) {
		perror("tcp_thr recv: bind/listen");
		close(lfd);
		return 2;
	}
	int fd = accept_one(lfd, deadline);
	close(lfd);
	if (fd >= 0) {
		set_recv_timeout(fd, TICK_MS);
	}

	while (fd >= 0 && msgs < a->count && bad == 0) {
		ssize_t r = read(fd, buf + have, sizeof(buf) - have);
		if (r < 0) {
			if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) {
				if (now_s() >= deadline) {
					fprintf(stderr, "tcp_thr recv: gave up after %g s\n",
					        a->seconds);
					break;
				}
				continue;
			}
			perror("tcp_thr recv: read");
			break;
		}
		if (r == 0) {
			fprintf(stderr, "tcp_thr recv: sender closed early\n");
			break;
		}
		last = now_s();
		if (!started) {
			first = last;
			started = true;
		}
		have += (size_t)r;

		size_t off = 0;
		while (have - off >= HDR_BYTES) {
			uint64_t len = get_le(buf + off, HDR_BYTES);
			if (len != a->size) {
				fprintf(stderr,
				        "tcp_thr recv: record %llu has length %llu, not %zu\n",
				        (unsigned long long)msgs, (unsigned long long)len, a->size);
				bad++;
				break;
			}
			if (have - off - HDR_BYTES < len) {
				break;
			}
			if (get_le(buf + off + HDR_BYTES, seq_bytes) != (msgs & seq_mask)) {
				if (bad++ == 0) {
					fprintf(stderr,
					        "tcp_thr recv: record %llu out of sequence\n",
					        (unsigned long long)msgs);
				}
			}
			msgs++;
			off += HDR_BYTES + (size_t)len;
		}
		if (off > 0) {
			memmove(buf, buf + off, have - off);
			have -= off;
		}
		if (last >= deadline && msgs < a->count) {
			fprintf(stderr, "tcp_thr recv: gave up after %g s\n", a->seconds);
			break;
		}
	}
	if (fd >= 0) {
		close(fd);
	}

	return report_recv("tcp", a->size, msgs, a->count, last - first, bad);
}

int
main(int argc, char **argv)
{
	struct args a;

	if (argc != 6 || (strcmp(argv[1], "send") != 0 && strcmp(argv[1], "recv") != 0)) {
		fprintf(stderr, "usage: tcp_thr send|recv [HOST:]PORT SIZE COUNT SECONDS\n");
		return 2;
	}
	if (parse_args(argv, &a) != 0) {
		return 2;
	}
	return strcmp(argv[1], "send") == 0 ? run_send(&a) : run_recv(&a);
}
