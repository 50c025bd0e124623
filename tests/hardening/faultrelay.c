/*
 * faultrelay.c - a TCP relay that injects the faults a kernel without netem
 * cannot: a fixed delay, a stall, and a reset.
 *
 * It listens on one address and, for each client, connects to the target
 * and copies bytes both ways. "down" is the direction from the target to the
 * client, "up" the other one; byte offsets count the bytes forwarded in the
 * direction chosen with --dir (down by default, where a subscriber that
 * dials the relay receives its stream).
 *
 * Faults apply to the first --faults connections (1 by default), so that a
 * peer that reconnects after a reset gets a clean path:
 *   --delay-ms N           every byte leaves N ms after it arrived (both ways,
 *                          every connection)
 *   --stall-ms N           forward nothing either way for N ms, starting at
 *                          --stall-at-bytes X or --stall-after-ms T
 *   --reset-at-bytes X     close both sockets with a reset (SO_LINGER 0) once
 *   --reset-after-ms T     X bytes went through, or T ms after the connection
 *
 * Everything is bounded: each direction buffers at most 256 KiB (beyond
 * that the relay stops reading, so TCP flow control holds the sender back),
 * and the relay exits by itself after --lifetime seconds (120 by default),
 * or at SIGINT or SIGTERM. It prints "listening on HOST:PORT" on stderr
 * once bound, and one line per event, so that a test can time them.
 */
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define DIR_BUF       (256 * 1024)
#define MAX_SEGS      4096
#define MAX_PAIRS     64
#define CONNECT_TO_MS 3000

struct seg {
	uint64_t end;      /* cumulative input offset where this segment ends */
	uint64_t ready_ms; /* when its bytes may leave */
};

/* One direction of a relayed connection. */
struct dir {
	int from, to;
	uint8_t *buf;
	size_t off, len; /* unsent bytes are buf[off .. off + len) */
	uint64_t in_total, out_total;
	struct seg segs[MAX_SEGS];
	size_t seg_head, nsegs; /* a circular queue, used only with a delay */
	bool eof;               /* the source closed its side */
	bool shut;              /* the end of stream was passed on */
};

struct pair {
	int id;
	int cfd, sfd;
	uint64_t start_ms;
	bool faulty;
	bool stalled, stall_done;
	uint64_t stall_until_ms;
	struct dir down, up;
};

struct opts {
	const char *listen, *connect;
	uint64_t delay_ms;
	uint64_t stall_ms, stall_at_bytes, stall_after_ms;
	bool stall_at_set, stall_after_set;
	uint64_t reset_at_bytes, reset_after_ms;
	bool reset_at_set, reset_after_set;
	int faults;
	bool dir_up;
	uint64_t lifetime_s;
};

static volatile sig_atomic_t stop;
static struct opts o;
static struct pair *pairs[MAX_PAIRS];
static int next_id = 1;

static void
on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static uint64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void event(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* One line on stderr with a timestamp in ms since an arbitrary origin. */
static void
event(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "faultrelay %llu ms: ", (unsigned long long)now_ms());
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* Split "HOST:PORT" or "[V6]:PORT" into a sockaddr. Returns 0 or -1. */
static int
resolve(const char *hostport, struct sockaddr_storage *ss, socklen_t *sslen)
{
	char host[256];
	const char *colon = strrchr(hostport, ':');
	const char *h = hostport;
	size_t hlen;
	struct addrinfo hints, *res = NULL;
	int rc;

	if (colon == NULL || colon[1] == '\0') {
		fprintf(stderr, "faultrelay: %s: expected HOST:PORT\n", hostport);
		return -1;
	}
	hlen = (size_t)(colon - hostport);
	if (hlen >= 2 && h[0] == '[' && h[hlen - 1] == ']') {
		h++;
		hlen -= 2;
	}
	if (hlen == 0 || hlen >= sizeof(host)) {
		fprintf(stderr, "faultrelay: %s: bad host\n", hostport);
		return -1;
	}
	memcpy(host, h, hlen);
	host[hlen] = '\0';
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
	rc = getaddrinfo(host, colon + 1, &hints, &res);
	if (rc != 0) {
		fprintf(stderr, "faultrelay: %s: %s\n", hostport, gai_strerror(rc));
		return -1;
	}
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	*sslen = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

static int
listen_on(const char *hostport)
{
	struct sockaddr_storage ss;
	socklen_t sslen;
	char host[NI_MAXHOST], serv[NI_MAXSERV];
	int one = 1, fd;

	if (resolve(hostport, &ss, &sslen) != 0) {
		return -1;
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		fprintf(stderr, "faultrelay: socket: %s\n", strerror(errno));
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, sslen) != 0 || listen(fd, 64) != 0) {
		fprintf(stderr, "faultrelay: cannot listen on %s: %s\n", hostport, strerror(errno));
		close(fd);
		return -1;
	}
	sslen = sizeof(ss);
	getsockname(fd, (struct sockaddr *)&ss, &sslen);
	if (getnameinfo((struct sockaddr *)&ss, sslen, host, sizeof(host), serv, sizeof(serv),
	                NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
		fprintf(stderr, "faultrelay: getnameinfo failed\n");
		close(fd);
		return -1;
	}
	fprintf(stderr,
	        ss.ss_family == AF_INET6 ? "listening on [%s]:%s\n" : "listening on %s:%s\n", host,
	        serv);
	return fd;
}

/* A blocking connect bounded by CONNECT_TO_MS. Afterwards every call on
 * the socket passes MSG_DONTWAIT. */
static int
connect_target(void)
{
	struct sockaddr_storage ss;
	socklen_t sslen;
	struct timeval tv = {CONNECT_TO_MS / 1000, (CONNECT_TO_MS % 1000) * 1000};
	int one = 1, fd;

	if (resolve(o.connect, &ss, &sslen) != 0) {
		return -1;
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&ss, sslen) != 0) {
		event("cannot connect to %s: %s", o.connect, strerror(errno));
		close(fd);
		return -1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

/* No Nagle delay: the relay must not add latency of its own. */
static void
tune_socket(int fd)
{
	int one = 1;
	struct timeval tv = {0, 0};

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/* Close with a reset: SO_LINGER with a zero timeout discards unsent data
 * and sends RST instead of FIN. */
static void
close_reset(int fd)
{
	struct linger lg = {1, 0};

	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(fd);
}

static void
pair_free(struct pair *p, bool reset)
{
	if (reset) {
		close_reset(p->cfd);
		close_reset(p->sfd);
	} else {
		close(p->cfd);
		close(p->sfd);
	}
	free(p->down.buf);
	free(p->up.buf);
	event("connection %d ended: down %llu bytes, up %llu bytes%s", p->id,
	      (unsigned long long)p->down.out_total, (unsigned long long)p->up.out_total,
	      reset ? " (reset)" : "");
	free(p);
}

static struct pair *
pair_new(int cfd)
{
	struct pair *p;
	int sfd = connect_target();

	if (sfd < 0) {
		close_reset(cfd);
		return NULL;
	}
	p = calloc(1, sizeof(*p));
	if (p != NULL) {
		p->down.buf = malloc(DIR_BUF);
		p->up.buf = malloc(DIR_BUF);
	}
	if (p == NULL || p->down.buf == NULL || p->up.buf == NULL) {
		if (p != NULL) {
			free(p->down.buf);
			free(p->up.buf);
			free(p);
		}
		close_reset(cfd);
		close(sfd);
		return NULL;
	}
	tune_socket(cfd);
	tune_socket(sfd);
	p->id = next_id++;
	p->cfd = cfd;
	p->sfd = sfd;
	p->start_ms = now_ms();
	p->faulty = p->id <= o.faults;
	p->down.from = sfd;
	p->down.to = cfd;
	p->up.from = cfd;
	p->up.to = sfd;
	event("connection %d accepted%s", p->id, p->faulty ? " (faults apply)" : "");
	return p;
}

static struct dir *
fault_dir(struct pair *p)
{
	return o.dir_up ? &p->up : &p->down;
}

/* How many buffered bytes of d may be written now: those whose delay has
 * passed, and never beyond a fault's byte offset before the fault fires. */
static size_t
sendable(struct pair *p, struct dir *d, uint64_t now)
{
	uint64_t limit = d->out_total + d->len;

	if (o.delay_ms > 0) {
		limit = d->out_total;
		for (size_t k = 0; k < d->nsegs; k++) {
			const struct seg *s = &d->segs[(d->seg_head + k) % MAX_SEGS];
			if (s->ready_ms > now) {
				break;
			}
			limit = s->end;
		}
	}
	if (p->faulty && d == fault_dir(p)) {
		if (o.stall_at_set && !p->stall_done && limit > o.stall_at_bytes) {
			limit = o.stall_at_bytes > d->out_total ? o.stall_at_bytes : d->out_total;
		}
		if (o.reset_at_set && limit > o.reset_at_bytes) {
			limit = o.reset_at_bytes > d->out_total ? o.reset_at_bytes : d->out_total;
		}
	}
	return (size_t)(limit - d->out_total);
}

/* Read what fits from d->from. Returns -1 on a hard error (a reset). */
static int
dir_read(struct dir *d, uint64_t now)
{
	ssize_t n;

	if (d->off + d->len == DIR_BUF && d->off > 0) {
		memmove(d->buf, d->buf + d->off, d->len);
		d->off = 0;
	}
	n = recv(d->from, d->buf + d->off + d->len, DIR_BUF - d->off - d->len, MSG_DONTWAIT);
	if (n < 0) {
		return errno == EAGAIN || errno == EINTR ? 0 : -1;
	}
	if (n == 0) {
		d->eof = true;
		return 0;
	}
	d->len += (size_t)n;
	d->in_total += (uint64_t)n;
	if (o.delay_ms > 0) {
		struct seg *last =
		    d->nsegs > 0 ? &d->segs[(d->seg_head + d->nsegs - 1) % MAX_SEGS] : NULL;
		if (last != NULL && last->ready_ms == now + o.delay_ms) {
			last->end = d->in_total;
		} else {
			d->segs[(d->seg_head + d->nsegs) % MAX_SEGS] =
			    (struct seg){d->in_total, now + o.delay_ms};
			d->nsegs++;
		}
	}
	return 0;
}

static int
dir_write(struct pair *p, struct dir *d, uint64_t now)
{
	size_t can = sendable(p, d, now);
	ssize_t n;

	if (can == 0) {
		return 0;
	}
	n = send(d->to, d->buf + d->off, can, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (n < 0) {
		return errno == EAGAIN || errno == EINTR ? 0 : -1;
	}
	d->off += (size_t)n;
	d->len -= (size_t)n;
	d->out_total += (uint64_t)n;
	if (d->len == 0) {
		d->off = 0;
	}
	while (d->nsegs > 0 && d->segs[d->seg_head].end <= d->out_total) {
		d->seg_head = (d->seg_head + 1) % MAX_SEGS;
		d->nsegs--;
	}
	return 0;
}

/* Start or end a stall, or fire a reset. Returns true if the pair was reset. */
static bool
apply_faults(struct pair *p, uint64_t now)
{
	struct dir *d = fault_dir(p);

	if (!p->faulty) {
		return false;
	}
	if (p->stalled && now >= p->stall_until_ms) {
		p->stalled = false;
		p->stall_done = true;
		event("connection %d: stall ends at byte %llu", p->id,
		      (unsigned long long)d->out_total);
	}
	if (o.stall_ms > 0 && !p->stalled && !p->stall_done &&
	    ((o.stall_at_set && d->out_total >= o.stall_at_bytes) ||
	     (o.stall_after_set && now - p->start_ms >= o.stall_after_ms))) {
		p->stalled = true;
		p->stall_until_ms = now + o.stall_ms;
		event("connection %d: stall of %llu ms starts at byte %llu", p->id,
		      (unsigned long long)o.stall_ms, (unsigned long long)d->out_total);
	}
	if ((o.reset_at_set && d->out_total >= o.reset_at_bytes) ||
	    (o.reset_after_set && now - p->start_ms >= o.reset_after_ms)) {
		event("connection %d: reset at byte %llu", p->id, (unsigned long long)d->out_total);
		return true;
	}
	return false;
}

/* The earliest moment a timer of p is due, to bound the poll timeout. */
static uint64_t
next_due(struct pair *p, uint64_t now)
{
	uint64_t due = now + 100;
	struct dir *dirs[2] = {&p->down, &p->up};

	for (int k = 0; k < 2; k++) {
		struct dir *d = dirs[k];
		if (o.delay_ms > 0 && d->nsegs > 0 && d->segs[d->seg_head].ready_ms < due) {
			due = d->segs[d->seg_head].ready_ms;
		}
	}
	if (p->faulty && p->stalled && p->stall_until_ms < due) {
		due = p->stall_until_ms;
	}
	if (p->faulty && o.stall_after_set && !p->stall_done && !p->stalled &&
	    p->start_ms + o.stall_after_ms < due) {
		due = p->start_ms + o.stall_after_ms;
	}
	if (p->faulty && o.reset_after_set && p->start_ms + o.reset_after_ms < due) {
		due = p->start_ms + o.reset_after_ms;
	}
	return due < now ? now : due;
}

/* Pass an end of stream on once everything before it went out. */
static void
dir_finish(struct dir *d)
{
	if (d->eof && d->len == 0 && !d->shut) {
		shutdown(d->to, SHUT_WR);
		d->shut = true;
	}
}

static void
usage(FILE *f)
{
	fprintf(f, "usage: faultrelay --listen HOST:PORT --connect HOST:PORT [--delay-ms N]\n"
	           "                  [--stall-ms N (--stall-at-bytes X | --stall-after-ms T)]\n"
	           "                  [--reset-at-bytes X | --reset-after-ms T] [--faults N]\n"
	           "                  [--dir down|up] [--lifetime SECONDS]\n");
}

static int
parse_u64(const char *name, const char *s, uint64_t *v)
{
	char *end;

	errno = 0;
	if (s[0] < '0' || s[0] > '9') {
		fprintf(stderr, "faultrelay: %s: not a number: %s\n", name, s);
		return -1;
	}
	*v = strtoull(s, &end, 10);
	if (errno != 0 || *end != '\0') {
		fprintf(stderr, "faultrelay: %s: not a number: %s\n", name, s);
		return -1;
	}
	return 0;
}

static int
parse_args(int argc, char **argv)
{
	static const struct option longopts[] = {{"listen", required_argument, NULL, 'l'},
	                                         {"connect", required_argument, NULL, 'c'},
	                                         {"delay-ms", required_argument, NULL, 'd'},
	                                         {"stall-ms", required_argument, NULL, 's'},
	                                         {"stall-at-bytes", required_argument, NULL, 'S'},
	                                         {"stall-after-ms", required_argument, NULL, 'T'},
	                                         {"reset-at-bytes", required_argument, NULL, 'r'},
	                                         {"reset-after-ms", required_argument, NULL, 'R'},
	                                         {"faults", required_argument, NULL, 'f'},
	                                         {"dir", required_argument, NULL, 'D'},
	                                         {"lifetime", required_argument, NULL, 'L'},
	                                         {"help", no_argument, NULL, 'h'},
	                                         {NULL, 0, NULL, 0}};
	uint64_t v;
	int ch, rc = 0;

	o.faults = 1;
	o.lifetime_s = 120;
	while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1 && rc == 0) {
		switch (ch) {
		case 'l':
			o.listen = optarg;
			break;
		case 'c':
			o.connect = optarg;
			break;
		case 'd':
			rc = parse_u64("--delay-ms", optarg, &o.delay_ms);
			break;
		case 's':
			rc = parse_u64("--stall-ms", optarg, &o.stall_ms);
			break;
		case 'S':
			rc = parse_u64("--stall-at-bytes", optarg, &o.stall_at_bytes);
			o.stall_at_set = true;
			break;
		case 'T':
			rc = parse_u64("--stall-after-ms", optarg, &o.stall_after_ms);
			o.stall_after_set = true;
			break;
		case 'r':
			rc = parse_u64("--reset-at-bytes", optarg, &o.reset_at_bytes);
			o.reset_at_set = true;
			break;
		case 'R':
			rc = parse_u64("--reset-after-ms", optarg, &o.reset_after_ms);
			o.reset_after_set = true;
			break;
		case 'f':
			rc = parse_u64("--faults", optarg, &v);
			o.faults = v > MAX_PAIRS * 1000 ? MAX_PAIRS * 1000 : (int)v;
			break;
		case 'D':
			if (strcmp(optarg, "up") != 0 && strcmp(optarg, "down") != 0) {
				fprintf(stderr, "faultrelay: --dir must be up or down\n");
				rc = -1;
			}
			o.dir_up = strcmp(optarg, "up") == 0;
			break;
		case 'L':
			rc = parse_u64("--lifetime", optarg, &o.lifetime_s);
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return -1;
		}
	}
	if (rc != 0) {
		return -1;
	}
	if (optind != argc || o.listen == NULL || o.connect == NULL) {
		usage(stderr);
		return -1;
	}
	if (o.stall_ms > 0 && !o.stall_at_set && !o.stall_after_set) {
		fprintf(stderr,
		        "faultrelay: --stall-ms needs --stall-at-bytes or --stall-after-ms\n");
		return -1;
	}
	if (o.delay_ms > 60000 || o.stall_ms > 600000 || o.lifetime_s > 3600) {
		fprintf(stderr, "faultrelay: delay at most 60000 ms, stall at most 600000 ms, "
		                "lifetime at most 3600 s\n");
		return -1;
	}
	return 0;
}

/* Serve one pair after poll: returns false when it is over (and freed). */
static bool
pair_step(struct pair *p, const struct pollfd *cpfd, const struct pollfd *spfd, uint64_t now)
{
	struct dir *dirs[2] = {&p->down, &p->up};
	bool failed = false;

	if (((cpfd->revents | spfd->revents) & POLLNVAL) != 0) {
		failed = true;
	}
	if (!p->stalled && !failed) {
		for (int k = 0; k < 2; k++) {
			struct dir *d = dirs[k];
			const struct pollfd *in = d->from == p->cfd ? cpfd : spfd;
			const struct pollfd *out = d->to == p->cfd ? cpfd : spfd;
			if ((in->revents & (POLLIN | POLLHUP | POLLERR)) != 0 && !d->eof &&
			    d->off + d->len < DIR_BUF && d->nsegs < MAX_SEGS) {
				failed = failed || dir_read(d, now) != 0;
			}
			if ((out->revents & (POLLOUT | POLLERR)) != 0 || d->len > 0) {
				failed = failed || dir_write(p, d, now) != 0;
			}
			dir_finish(d);
		}
	}
	if (failed) {
		event("connection %d: a peer reset or failed", p->id);
		pair_free(p, true);
		return false;
	}
	if (apply_faults(p, now)) {
		pair_free(p, true);
		return false;
	}
	if (p->down.shut && p->up.shut) {
		pair_free(p, false);
		return false;
	}
	return true;
}

int
main(int argc, char **argv)
{
	struct sigaction sa;
	struct pollfd pfds[1 + 2 * MAX_PAIRS];
	uint64_t end_ms;
	int lfd;

	if (parse_args(argc, argv) != 0) {
		return 2;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stderr, NULL, _IOLBF, 0);
	lfd = listen_on(o.listen);
	if (lfd < 0) {
		return 1;
	}
	end_ms = now_ms() + o.lifetime_s * 1000u;
	while (!stop && now_ms() < end_ms) {
		uint64_t now = now_ms(), due = now + 100;
		int n = 1;

		pfds[0] = (struct pollfd){lfd, POLLIN, 0};
		for (int k = 0; k < MAX_PAIRS; k++) {
			struct pair *p = pairs[k];
			short cev = 0, sev = 0;
			if (p == NULL) {
				continue;
			}
			if (!p->stalled) {
				bool room_down = !p->down.eof &&
				                 p->down.off + p->down.len < DIR_BUF &&
				                 p->down.nsegs < MAX_SEGS;
				bool room_up = !p->up.eof && p->up.off + p->up.len < DIR_BUF &&
				               p->up.nsegs < MAX_SEGS;
				sev |= room_down ? POLLIN : 0;
				cev |= room_up ? POLLIN : 0;
				cev |= sendable(p, &p->down, now) > 0 ? POLLOUT : 0;
				sev |= sendable(p, &p->up, now) > 0 ? POLLOUT : 0;
			}
			pfds[n++] = (struct pollfd){p->cfd, cev, 0};
			pfds[n++] = (struct pollfd){p->sfd, sev, 0};
			uint64_t d = next_due(p, now);
			due = d < due ? d : due;
		}
		if (poll(pfds, (nfds_t)n, (int)(due - now)) < 0 && errno != EINTR) {
			fprintf(stderr, "faultrelay: poll: %s\n", strerror(errno));
			return 1;
		}
		now = now_ms();
		n = 1;
		for (int k = 0; k < MAX_PAIRS; k++) {
			if (pairs[k] == NULL) {
				continue;
			}
			if (!pair_step(pairs[k], &pfds[n], &pfds[n + 1], now)) {
				pairs[k] = NULL;
			}
			n += 2;
		}
		if ((pfds[0].revents & POLLIN) != 0) {
			int cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
			int slot = -1;
			for (int k = 0; k < MAX_PAIRS && cfd >= 0; k++) {
				if (pairs[k] == NULL) {
					slot = k;
					break;
				}
			}
			if (cfd >= 0 && slot < 0) {
				event("too many connections; refusing one");
				close_reset(cfd);
			} else if (cfd >= 0) {
				pairs[slot] = pair_new(cfd);
			}
		}
	}
	for (int k = 0; k < MAX_PAIRS; k++) {
		if (pairs[k] != NULL) {
			pair_free(pairs[k], false);
		}
	}
	close(lfd);
	event("exiting");
	return 0;
}
