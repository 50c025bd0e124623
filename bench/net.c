/*
 * net.c - sockets and clocks for the bench (see net.h).
 */
#include "net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

uint64_t
net_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t
net_wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void
net_sleep_ns(uint64_t ns)
{
	struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000u),
	                      .tv_nsec = (long)(ns % 1000000000u)};

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
	}
}

void
net_sleep_until_ns(uint64_t t)
{
	struct timespec ts = {.tv_sec = (time_t)(t / 1000000000u),
	                      .tv_nsec = (long)(t % 1000000000u)};

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
	}
}

int
net_is_unix(const char *endpoint)
{
	return strncmp(endpoint, "unix://", 7) == 0;
}

/* Parse "tcp://A.B.C.D:PORT" or "unix:///path" into a sockaddr. */
static int
parse_endpoint(const char *ep, struct sockaddr_storage *ss, socklen_t *sl, char *err,
               size_t err_len)
{
	memset(ss, 0, sizeof(*ss));
	if (net_is_unix(ep)) {
		struct sockaddr_un *un = (struct sockaddr_un *)ss;
		const char *path = ep + 7;

		if (path[0] != '/' || strlen(path) >= sizeof(un->sun_path)) {
			snprintf(err, err_len, "endpoint %s: the path must be absolute and short",
			         ep);
			return -1;
		}
		un->sun_family = AF_UNIX;
		memcpy(un->sun_path, path, strlen(path) + 1);
		*sl = (socklen_t)sizeof(*un);
		return 0;
	}
	if (strncmp(ep, "tcp://", 6) == 0) {
		struct sockaddr_in *in = (struct sockaddr_in *)ss;
		char host[64];
		const char *colon = strrchr(ep + 6, ':');
		char *end;
		long port;
		size_t hl;

		if (colon == NULL) {
			snprintf(err, err_len, "endpoint %s has no port", ep);
			return -1;
		}
		hl = (size_t)(colon - (ep + 6));
		if (hl == 0 || hl >= sizeof(host)) {
			snprintf(err, err_len, "endpoint %s has a bad host", ep);
			return -1;
		}
		memcpy(host, ep + 6, hl);
		host[hl] = '\0';
		port = strtol(colon + 1, &end, 10);
		if (*end != '\0' || port < 0 || port > 65535) {
			snprintf(err, err_len, "endpoint %s has a bad port", ep);
			return -1;
		}
		in->sin_family = AF_INET;
		in->sin_port = htons((uint16_t)port);
		if (inet_pton(AF_INET, host, &in->sin_addr) != 1) {
			snprintf(err, err_len, "endpoint %s: the host must be an IPv4 address", ep);
			return -1;
		}
		*sl = (socklen_t)sizeof(*in);
		return 0;
	}
	snprintf(err, err_len, "endpoint %s: expected tcp://HOST:PORT or unix:///path", ep);
	return -1;
}

int
net_listen(const char *endpoint, char *bound, size_t bound_len, char *err, size_t err_len)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	int fd;
	int one = 1;

	if (parse_endpoint(endpoint, &ss, &sl, err, err_len) != 0) {
		return -1;
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, err_len, "socket: %s", strerror(errno));
		return -1;
	}
	if (ss.ss_family == AF_UNIX) {
		unlink(((struct sockaddr_un *)&ss)->sun_path);
	} else {
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	}
	if (bind(fd, (struct sockaddr *)&ss, sl) != 0 || listen(fd, 1024) != 0) {
		snprintf(err, err_len, "listen on %s: %s", endpoint, strerror(errno));
		close(fd);
		return -1;
	}
	if (ss.ss_family == AF_UNIX) {
		snprintf(bound, bound_len, "%s", endpoint);
	} else {
		struct sockaddr_in in;
		socklen_t il = sizeof(in);

		getsockname(fd, (struct sockaddr *)&in, &il);
		snprintf(bound, bound_len, "tcp://127.0.0.1:%u", (unsigned)ntohs(in.sin_port));
	}
	return fd;
}

int
net_connect(const char *endpoint, char *err, size_t err_len)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	int fd;

	if (parse_endpoint(endpoint, &ss, &sl, err, err_len) != 0) {
		return -1;
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, err_len, "socket: %s", strerror(errno));
		return -1;
	}
	while (connect(fd, (struct sockaddr *)&ss, sl) != 0) {
		if (errno == EINTR) {
			continue;
		}
		snprintf(err, err_len, "connect to %s: %s", endpoint, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

int
net_set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		return -errno;
	}
	return 0;
}

int
net_set_nodelay(int fd)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int one = 1;

	if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0) {
		return -errno;
	}
	if (ss.ss_family != AF_INET && ss.ss_family != AF_INET6) {
		return 0;
	}
	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0) {
		return -errno;
	}
	return 0;
}

static int
wait_writable(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLOUT};

	if (poll(&p, 1, -1) < 0 && errno != EINTR) {
		return -errno;
	}
	return 0;
}

int
net_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EINTR) {
				continue;
			}
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				int rc = wait_writable(fd);

				if (rc != 0) {
					return rc;
				}
				continue;
			}
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int
net_writev2(int fd, const void *a, size_t alen, const void *b, size_t blen)
{
	struct iovec iov[2] = {{(void *)a, alen}, {(void *)b, blen}};
	struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 2};
	ssize_t n;

	for (;;) {
		n = sendmsg(fd, &mh, MSG_NOSIGNAL);
		if (n >= 0) {
			break;
		}
		if (errno == EINTR) {
			continue;
		}
		if (errno == EAGAIN || errno == EWOULDBLOCK) {
			int rc = wait_writable(fd);

			if (rc != 0) {
				return rc;
			}
			continue;
		}
		return -errno;
	}
	/* A short write: finish what is left of each buffer. */
	if ((size_t)n < alen) {
		int rc = net_write_all(fd, (const char *)a + n, alen - (size_t)n);

		if (rc != 0) {
			return rc;
		}
		return net_write_all(fd, b, blen);
	}
	return net_write_all(fd, (const char *)b + ((size_t)n - alen), blen - ((size_t)n - alen));
}
