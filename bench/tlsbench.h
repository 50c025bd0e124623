/*
 * tlsbench.h - TLS for `tern bench --tls`: a throwaway certificate for the
 * run, and the tcp reference's TLS sessions through the same OpenSSL that
 * libtern uses, with the same settings (TLS 1.3 only, no session tickets,
 * mutual authentication against the run's certificate).
 *
 * Threads: tlsbench_make/remove run on the bench's main thread. A
 * tlsbench_io may be used from two threads (the tcp client's sender and its
 * reader): every OpenSSL call on it takes its lock, as libtern's do.
 */
#ifndef BENCH_TLSBENCH_H
#define BENCH_TLSBENCH_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* Make DIR (under TMPDIR) with cert.pem and key.pem: one self-signed EC
 * certificate, CN "tern-bench", that both ends present and trust; and the
 * context the tcp reference's sessions use. */
int tlsbench_make(char *dir, size_t dir_len, char *err, size_t err_len);
void tlsbench_remove(const char *dir);

struct tlsbench_io {
	int fd;
	void *ssl; /* SSL *; NULL: plain */
	pthread_mutex_t lock;
};

/* Handshake on a connected blocking socket (server: answer it), then make
 * the socket non-blocking. 0, or -1 with err. Records the handshake's wall
 * time for tlsbench_report. */
int tlsbench_open(struct tlsbench_io *io, int fd, bool server, char *err, size_t err_len);
void tlsbench_close(struct tlsbench_io *io);
/* Write all of buf (waits in poll while the socket is full). 0 or -1. */
int tlsbench_write_all(struct tlsbench_io *io, const void *buf, size_t len);
/* Read what is there: > 0 bytes, 0 closed, -1 error, -2 nothing now
 * (block: wait in poll for a whole record first). */
ssize_t tlsbench_read(struct tlsbench_io *io, void *buf, size_t len, bool block);

/* The handshakes of this run: count, median and max wall time. */
void tlsbench_report(FILE *out);

#endif
