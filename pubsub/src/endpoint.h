/*
 * endpoint.h - endpoint strings and the sockets behind them.
 *
 * "tcp://HOST:PORT", "tcp://[IPV6]:PORT", "unix:///absolute/path", and
 * "tls://HOST:PORT" (TCP carrying TLS: the socket is the same, conn.c adds
 * the session).
 * Parsing is pure; the socket helpers return non-blocking descriptors and
 * a negative TERN_E... code with a sentence on failure.
 */
#ifndef TERN_ENDPOINT_H
#define TERN_ENDPOINT_H

#include <stddef.h>
#include <sys/socket.h>

#define ENDPOINT_MAX 256

struct endpoint {
	int unix_domain;
	int tls;                 /* tls://: TCP with TLS on top */
	char host[ENDPOINT_MAX]; /* tcp: host or address; unix: path */
	int port;
};

int endpoint_parse(const char *s, struct endpoint *ep);
/* Listening socket; writes the endpoint actually bound into bound. */
int endpoint_listen(const struct endpoint *ep, char *bound, size_t bound_len);
/* Starts a non-blocking connect; *in_progress is set while it completes. */
int endpoint_connect(const struct endpoint *ep, int *in_progress);

#endif
