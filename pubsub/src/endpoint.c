/*
 * endpoint.c - parsing endpoints and opening TCP and Unix sockets.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "endpoint.h"
#include "error.h"

static int
parse_tcp(const char *s, const char *rest, struct endpoint *ep)
{
	const char *colon;
	const char *scheme = ep->tls ? "tls" : "tcp";
	size_t hlen;
	char *end;
	long port;

	if (rest[0] == '[') {
		const char *close = strchr(rest, ']');
		if (close == NULL || close[1] != ':') {
			return tern__error(TERN_EENDPOINT,
			                   "endpoint '%s': an IPv6 address needs the form "
			                   "%s://[ADDR]:PORT",
			                   s, scheme);
		}
		hlen = (size_t)(close - rest - 1);
		memcpy(ep->host, rest + 1, hlen < ENDPOINT_MAX ? hlen : 0);
		colon = close + 1;
	} else {
		colon = strrchr(rest, ':');
		if (colon == NULL) {
			return tern__error(TERN_EENDPOINT, "endpoint '%s': missing ':PORT'", s);
		}
		hlen = (size_t)(colon - rest);
		if (hlen >= ENDPOINT_MAX) {
			return tern__error(TERN_EENDPOINT, "endpoint '%s': host too long", s);
		}
		memcpy(ep->host, rest, hlen);
	}
	if (hlen == 0 || hlen >= ENDPOINT_MAX) {
		return tern__error(TERN_EENDPOINT, "endpoint '%s': missing host", s);
	}
	ep->host[hlen] = '\0';
	errno = 0;
	port = strtol(colon + 1, &end, 10);
	if (colon[1] == '\0' || *end != '\0' || errno != 0 || port < 0 || port > 65535) {
		return tern__error(TERN_EENDPOINT, "endpoint '%s': port must be 0..65535", s);
	}
	ep->port = (int)port;
	return 0;
}

int
endpoint_parse(const char *s, struct endpoint *ep)
{
	memset(ep, 0, sizeof(*ep));
	if (s == NULL) {
		return tern__error(TERN_EENDPOINT, "no endpoint given");
	}
	if (strncmp(s, "tcp://", 6) == 0) {
		return parse_tcp(s, s + 6, ep);
	}
	if (strncmp(s, "tls://", 6) == 0) {
		ep->tls = 1;
		return parse_tcp(s, s + 6, ep);
	}
	if (strncmp(s, "unix://", 7) == 0) {
		const char *path = s + 7;
		if (path[0] != '/') {
			return tern__error(TERN_EENDPOINT,
			                   "endpoint '%s': a unix endpoint needs an absolute path "
			                   "(unix:///path)",
			                   s);
		}
		if (strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
			return tern__error(TERN_EENDPOINT, "endpoint '%s': path too long", s);
		}
		ep->unix_domain = 1;
		strcpy(ep->host, path);
		return 0;
	}
	return tern__error(TERN_EENDPOINT,
	                   "endpoint '%s': expected tcp://HOST:PORT, tls://HOST:PORT or "
	                   "unix:///PATH",
	                   s);
}

static int
resolve(const struct endpoint *ep, struct sockaddr_storage *ss, socklen_t *len, int passive)
{
	struct addrinfo hints = {0}, *res = NULL;
	char port[16];
	int rc;

	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = passive ? AI_PASSIVE : 0;
	snprintf(port, sizeof(port), "%d", ep->port);
	rc = getaddrinfo(ep->host, port, &hints, &res);
	if (rc != 0 || res == NULL) {
		return tern__error(TERN_EENDPOINT, "cannot resolve host '%s': %s", ep->host,
		                   gai_strerror(rc));
	}
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	*len = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

static int
unix_addr(const struct endpoint *ep, struct sockaddr_storage *ss, socklen_t *len)
{
	struct sockaddr_un *un = (struct sockaddr_un *)ss;

	memset(un, 0, sizeof(*un));
	un->sun_family = AF_UNIX;
	strcpy(un->sun_path, ep->host);
	*len = sizeof(*un);
	return 0;
}

static void
describe(const struct endpoint *ep, int fd, char *out, size_t out_len)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	char host[INET6_ADDRSTRLEN] = "?";
	int port = 0;

	if (ep->unix_domain) {
		snprintf(out, out_len, "unix://%s", ep->host);
		return;
	}
	getsockname(fd, (struct sockaddr *)&ss, &len);
	if (ss.ss_family == AF_INET6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
		inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
		port = ntohs(a->sin6_port);
		snprintf(out, out_len, "%s://[%s]:%d", ep->tls ? "tls" : "tcp", host, port);
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;
		inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
		port = ntohs(a->sin_port);
		snprintf(out, out_len, "%s://%s:%d", ep->tls ? "tls" : "tcp", host, port);
	}
}

int
endpoint_listen(const struct endpoint *ep, char *bound, size_t bound_len)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fd, one = 1, rc;

	rc = ep->unix_domain ? unix_addr(ep, &ss, &len) : resolve(ep, &ss, &len, 1);
	if (rc != 0) {
		return rc;
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		return tern__error(TERN_ESYS, "socket: %s", strerror(errno));
	}
	if (ep->unix_domain) {
		/* a socket file left by a process that is gone would make bind fail;
		 * one that still answers belongs to a live process: leave it alone */
		int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (probe >= 0 && connect(probe, (struct sockaddr *)&ss, len) == 0) {
			close(probe);
			close(fd);
			return tern__error(TERN_EADDRINUSE,
			                   "cannot listen on unix://%s: address in use (another "
			                   "process is listening there)",
			                   ep->host);
		}
		if (probe >= 0) {
			close(probe);
		}
		unlink(ep->host);
	} else {
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	}
	if (bind(fd, (struct sockaddr *)&ss, len) < 0) {
		int e = errno;
		close(fd);
		int code = e == EADDRINUSE ? TERN_EADDRINUSE : TERN_ESYS;
		if (ep->unix_domain) {
			return tern__error(code, "cannot listen on unix://%s: %s", ep->host,
			                   strerror(e));
		}
		return tern__error(code, "cannot listen on %s://%s:%d: %s", ep->tls ? "tls" : "tcp",
		                   ep->host, ep->port, strerror(e));
	}
	if (listen(fd, 1024) < 0) {
		int e = errno;
		close(fd);
		return tern__error(TERN_ESYS, "listen: %s", strerror(e));
	}
	if (bound != NULL) {
		describe(ep, fd, bound, bound_len);
	}
	return fd;
}

int
endpoint_connect(const struct endpoint *ep, int *in_progress)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fd, rc;

	rc = ep->unix_domain ? unix_addr(ep, &ss, &len) : resolve(ep, &ss, &len, 0);
	if (rc != 0) {
		return rc;
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		return tern__error(TERN_ESYS, "socket: %s", strerror(errno));
	}
	*in_progress = 0;
	if (connect(fd, (struct sockaddr *)&ss, len) < 0) {
		if (errno != EINPROGRESS && errno != EAGAIN) {
			int e = errno;
			close(fd);
			return tern__error(TERN_ESYS, "connect: %s", strerror(e));
		}
		*in_progress = 1;
	}
	return fd;
}
