/*
 * net.h - the small socket and clock helpers the bench shares: endpoints
 * ("tcp://127.0.0.1:PORT", "unix:///path"), listening, connecting, writing
 * everything, and monotonic time in nanoseconds.
 */
#ifndef BENCH_NET_H
#define BENCH_NET_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define NET_EP_MAX 128

/* Monotonic time, for intervals. */
uint64_t net_now_ns(void);
/* Wall-clock time since the epoch, for record timestamps. */
uint64_t net_wall_ns(void);
/* Sleep for ns nanoseconds (restarted on EINTR). */
void net_sleep_ns(uint64_t ns);
/* Sleep until net_now_ns() reaches t (restarted on EINTR). */
void net_sleep_until_ns(uint64_t t);

/*
 * Listen on an endpoint ("tcp://127.0.0.1:0" or "unix:///path"); the
 * endpoint actually bound is written to bound. Returns the fd or -1 with a
 * reason in err.
 */
int net_listen(const char *endpoint, char *bound, size_t bound_len, char *err, size_t err_len);

/* Connect (blocking) to an endpoint. Returns the fd or -1 with a reason. */
int net_connect(const char *endpoint, char *err, size_t err_len);

/* true for a unix:// endpoint. */
int net_is_unix(const char *endpoint);

int net_set_nonblock(int fd);
/* TCP_NODELAY on a TCP socket; a no-op on a Unix-domain one. */
int net_set_nodelay(int fd);

/* Write all of buf; waits with poll() when a non-blocking fd is full.
 * Returns 0 or -errno. */
int net_write_all(int fd, const void *buf, size_t len);
/* Write two buffers with one writev() where the kernel takes both. */
int net_writev2(int fd, const void *a, size_t alen, const void *b, size_t blen);

#endif
