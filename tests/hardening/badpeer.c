/*
 * badpeer.c - many misbehaving peers against one tern node at once.
 *
 * Four kinds of connection, each opened --N times (all at the same time):
 *   garbage   random bytes from the first byte (not even the magic)
 *   noise     a valid preamble and HELLO, then random bytes as frames
 *   silent    connects and never sends a byte (the node must drop it after
 *             its handshake timeout)
 *   huge      a full handshake, OPEN on --key, then a first CHUNK that
 *             announces a 4 GiB message, followed by chunks up to the
 *             flow-control window, and a PING every 500 ms so that only a
 *             refusal of the message, not the keepalive, closes it
 * Every connection reads and discards what the node sends, and notes when
 * the node closes it. After --hold-ms it prints one line per kind:
 *   result kind=silent opened=300 closed=300 min_ms=2001 median_ms=2003 max_ms=2010
 * (times from the connection's establishment to its close by the node) and
 * exits 0; 1 if the node could not be reached at all.
 *
 * The random bytes come from a fixed seed (--seed), so a failure repeats.
 *
 * --probe opens one connection instead, to show how the node treats one
 * value at a time: a preamble, a HELLO (defaults as above, each field may be
 * set with --hello FIELD=VALUE), SYNC, then each --send MESSAGE in order:
 *   sub:KEY                      SUB of KEY, so the node routes KEY here
 *   open:CHANNEL:KEY[:REL]       OPEN (REL 0 reliable, 1 best effort: 1)
 *   close:CHANNEL                CLOSE
 *   credit:CHANNEL:BYTES:CONSUMED, blocked:CHANNEL:BYTES
 *   ping:TOKEN
 *   ctl:LEN                      a CONTROL frame of LEN bytes (a PING, padded)
 *   frame:TYPE:CHANNEL:SEQ:TOTAL:LEN
 *                                a frame header with these fields (TYPE is
 *                                the first byte: type | flags), then LEN
 *                                bytes of payload, or 64 KiB if LEN is more
 * and a last PING. Numbers are decimal or 0x hexadecimal, up to UINT64_MAX.
 * The probe reads and discards what the node sends (granting no credit), and
 * ends when the node closes the connection, after --hold-ms, or, with
 * --until-pong, when the PONG for its last PING arrives (the node took
 * everything before it), printing
 *   probe closed=0 pong=1 after_ms=12 frames=3
 *   goodbye: REASON
 * (the goodbye line only when the node sent one).
 */
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "control.h"
#include "wire.h"

#define RANDOM_BYTES  8192
#define HUGE_TOTAL    (4ull << 30)
#define HUGE_CHUNK    16384
#define HUGE_SENT_MAX (200 * 1024) /* stays inside the node's 256 KiB window */
#define PING_EVERY_MS 500
#define OUT_MAX       (64 * 1024)
#define MAX_PER_KIND  2000
#define PROBE_OUT     (1 << 20)
#define PROBE_IN      (1 << 20)
#define PROBE_PAD_MAX 65536
#define PROBE_SENDS   64
#define PROBE_TOKEN   0x70726f6265ull /* "probe": the last PING's token */

enum kind { GARBAGE, NOISE, SILENT, HUGE, NKINDS };
static const char *kind_names[NKINDS] = {"garbage", "noise", "silent", "huge"};

struct peer {
	int fd;
	enum kind kind;
	int index;
	uint64_t opened_ms, closed_ms;
	bool closed;
	uint8_t *out; /* bytes still to send: out[off .. len) */
	size_t off, len;
	uint64_t huge_sent; /* payload bytes of the huge message sent so far */
	uint64_t next_ping_ms;
	uint64_t pings;
};

static uint64_t rng_state;

static uint64_t
rng_next(void)
{
	/* xorshift64*: small, fast and reproducible from a seed */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 2685821657736338717ull;
}

static uint64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void
fill_random(uint8_t *p, size_t n)
{
	for (size_t k = 0; k < n; k++) {
		p[k] = (uint8_t)(rng_next() >> 56);
	}
}

/* Append one frame (header and payload) to p's output. */
static int
put_frame(struct peer *p, const struct wire_frame *f, const uint8_t *payload)
{
	uint8_t hdr[WIRE_HDR_MAX];
	size_t h = wire_header_encode(hdr, f);

	if (p->len + h + f->len > OUT_MAX) {
		return -1;
	}
	memcpy(p->out + p->len, hdr, h);
	p->len += h;
	if (f->len > 0) {
		memcpy(p->out + p->len, payload, (size_t)f->len);
		p->len += (size_t)f->len;
	}
	return 0;
}

static int
put_control(struct peer *p, const struct ctl_msg *m)
{
	uint8_t body[CTL_MSG_MAX];
	int n = ctl_encode(m, body, sizeof(body));
	struct wire_frame f = {.type = WIRE_CONTROL};

	if (n < 0) {
		return -1;
	}
	f.len = (uint64_t)n;
	return put_frame(p, &f, body);
}

/* A HELLO as a node with the default configuration sends it. */
static void
hello_defaults(struct ctl_msg *m)
{
	*m = (struct ctl_msg){.type = CTL_HELLO};
	m->u.hello.mode = 0;
	m->u.hello.low_latency = false;
	m->u.hello.batch_max = 65536;
	m->u.hello.chunk = 65536;
	m->u.hello.max_message = 64u << 20;
	m->u.hello.window = 256u * 1024;
	m->u.hello.keepalive_ms = 1000;
}

static int
put_handshake(struct peer *p, const char *id)
{
	struct ctl_msg m;

	wire_preamble_encode(p->out + p->len);
	p->len += WIRE_PREAMBLE_LEN;
	hello_defaults(&m);
	m.u.hello.id = (struct ctl_str){id, strlen(id)};
	if (put_control(p, &m) != 0) {
		return -1;
	}
	m = (struct ctl_msg){.type = CTL_SYNC};
	return put_control(p, &m);
}

/* The first bytes each kind sends; the huge kind sends more as it goes. */
static int
prepare(struct peer *p, const char *key)
{
	char id[64], publisher[80];

	snprintf(id, sizeof(id), "bad-%d-%s-%d", (int)getpid(), kind_names[p->kind], p->index);
	switch (p->kind) {
	case GARBAGE:
		fill_random(p->out, RANDOM_BYTES);
		p->len = RANDOM_BYTES;
		return 0;
	case NOISE:
		if (put_handshake(p, id) != 0) {
			return -1;
		}
		fill_random(p->out + p->len, RANDOM_BYTES);
		p->len += RANDOM_BYTES;
		return 0;
	case SILENT:
		return 0;
	case HUGE: {
		struct ctl_msg m = {.type = CTL_OPEN};
		if (put_handshake(p, id) != 0) {
			return -1;
		}
		snprintf(publisher, sizeof(publisher), "%s/1", id);
		m.u.open.channel = 1;
		m.u.open.publisher = (struct ctl_str){publisher, strlen(publisher)};
		m.u.open.key = (struct ctl_str){key, strlen(key)};
		m.u.open.reliability = 0;
		m.u.open.instance = rng_next();
		return put_control(p, &m);
	}
	default:
		return -1;
	}
}

/* More to send for a huge peer: the next chunk, or a PING when due. */
static void
refill_huge(struct peer *p, uint64_t now)
{
	static uint8_t payload[HUGE_CHUNK];
	struct wire_frame f = {.type = WIRE_CHUNK, .channel = 1, .len = HUGE_CHUNK};

	if (p->huge_sent < HUGE_SENT_MAX && p->len - p->off < HUGE_CHUNK) {
		if (p->huge_sent == 0) {
			f.flags = WIRE_FLAG_FIRST | WIRE_FLAG_SEQ;
			f.seq = 1;
			f.total = HUGE_TOTAL;
		}
		if (p->off > 0) {
			memmove(p->out, p->out + p->off, p->len - p->off);
			p->len -= p->off;
			p->off = 0;
		}
		if (put_frame(p, &f, payload) == 0) {
			p->huge_sent += HUGE_CHUNK;
		}
	}
	if (p->huge_sent >= HUGE_SENT_MAX && now >= p->next_ping_ms && p->off == p->len) {
		struct ctl_msg m = {.type = CTL_PING};
		m.u.token = ++p->pings;
		p->off = p->len = 0;
		put_control(p, &m);
		p->next_ping_ms = now + PING_EVERY_MS;
	}
}

static int
connect_to(const struct sockaddr_storage *ss, socklen_t sslen)
{
	struct timeval tv = {5, 0};
	int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0) {
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (const struct sockaddr *)ss, sslen) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static void
mark_closed(struct peer *p, uint64_t now)
{
	if (!p->closed) {
		p->closed = true;
		p->closed_ms = now;
	}
}

static void
serve(struct peer *p, short revents, uint64_t now)
{
	uint8_t sink[16384];

	if ((revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
		ssize_t n = recv(p->fd, sink, sizeof(sink), MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
			mark_closed(p, now);
			return;
		}
	}
	if (p->kind == HUGE) {
		refill_huge(p, now);
	}
	if (p->off < p->len) {
		ssize_t n =
		    send(p->fd, p->out + p->off, p->len - p->off, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0 && errno != EAGAIN && errno != EINTR) {
			mark_closed(p, now);
			return;
		}
		if (n > 0) {
			p->off += (size_t)n;
		}
		if (p->off == p->len && p->kind != HUGE) {
			p->off = p->len = 0;
		}
	}
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void
report(struct peer *peers, int npeers)
{
	static uint64_t times[NKINDS * MAX_PER_KIND];

	for (int k = 0; k < NKINDS; k++) {
		int opened = 0, closed = 0;
		for (int i = 0; i < npeers; i++) {
			if (peers[i].kind != (enum kind)k) {
				continue;
			}
			opened++;
			if (peers[i].closed) {
				times[closed++] = peers[i].closed_ms - peers[i].opened_ms;
			}
		}
		if (opened == 0) {
			continue;
		}
		qsort(times, (size_t)closed, sizeof(times[0]), cmp_u64);
		printf(
		    "result kind=%s opened=%d closed=%d min_ms=%llu median_ms=%llu max_ms=%llu\n",
		    kind_names[k], opened, closed, (unsigned long long)(closed ? times[0] : 0),
		    (unsigned long long)(closed ? times[closed / 2] : 0),
		    (unsigned long long)(closed ? times[closed - 1] : 0));
	}
}

static int
resolve(const char *hostport, struct sockaddr_storage *ss, socklen_t *sslen)
{
	char host[256];
	const char *colon = strrchr(hostport, ':');
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST},
	                *res = NULL;
	size_t hlen;

	if (colon == NULL || (size_t)(colon - hostport) >= sizeof(host)) {
		return -1;
	}
	hlen = (size_t)(colon - hostport);
	memcpy(host, hostport, hlen);
	host[hlen] = '\0';
	if (getaddrinfo(host, colon + 1, &hints, &res) != 0) {
		return -1;
	}
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	*sslen = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

/* ---- --probe: one connection, one value at a time ---- */

struct probe {
	struct ctl_msg hello;
	const char *sends[PROBE_SENDS];
	int nsends;
	bool until_pong;
	uint8_t *out;
	size_t len;
};

static bool
parse_u64(const char *s, uint64_t *v)
{
	char *end;

	if (s == NULL || *s == '\0' || *s == '-') {
		return false;
	}
	errno = 0;
	*v = strtoull(s, &end, 0);
	return errno == 0 && (*end == '\0' || *end == ':');
}

/* The n-th ':'-separated field of spec (0: the message name). */
static const char *
spec_field(const char *spec, int n, char *buf, size_t cap)
{
	const char *p = spec;

	for (int i = 0; i < n; i++) {
		p = strchr(p, ':');
		if (p == NULL) {
			return NULL;
		}
		p++;
	}
	size_t len = strcspn(p, ":");
	if (len >= cap) {
		return NULL;
	}
	memcpy(buf, p, len);
	buf[len] = '\0';
	return buf;
}

static bool
spec_u64(const char *spec, int n, uint64_t *v)
{
	char buf[64];

	return parse_u64(spec_field(spec, n, buf, sizeof(buf)), v);
}

static int
hello_set(struct ctl_msg *m, const char *arg)
{
	const char *eq = strchr(arg, '=');
	uint64_t v;

	if (eq == NULL || !parse_u64(eq + 1, &v)) {
		return -1;
	}
	size_t n = (size_t)(eq - arg);
	if (n == 6 && strncmp(arg, "window", n) == 0) {
		m->u.hello.window = v;
	} else if (n == 9 && strncmp(arg, "batch_max", n) == 0) {
		m->u.hello.batch_max = v;
	} else if (n == 5 && strncmp(arg, "chunk", n) == 0) {
		m->u.hello.chunk = v;
	} else if (n == 11 && strncmp(arg, "max_message", n) == 0) {
		m->u.hello.max_message = v;
	} else if (n == 12 && strncmp(arg, "keepalive_ms", n) == 0) {
		m->u.hello.keepalive_ms = v;
	} else if (n == 4 && strncmp(arg, "mode", n) == 0) {
		m->u.hello.mode = v;
	} else if (n == 11 && strncmp(arg, "low_latency", n) == 0) {
		m->u.hello.low_latency = v != 0;
	} else {
		return -1;
	}
	return 0;
}

static int
probe_put(struct probe *pr, const struct wire_frame *f, const uint8_t *payload, size_t plen)
{
	uint8_t hdr[WIRE_HDR_MAX];
	size_t h = wire_header_encode(hdr, f);

	if (pr->len + h + plen > PROBE_OUT) {
		return -1;
	}
	memcpy(pr->out + pr->len, hdr, h);
	pr->len += h;
	memcpy(pr->out + pr->len, payload, plen);
	pr->len += plen;
	return 0;
}

static int
probe_ctl(struct probe *pr, const struct ctl_msg *m)
{
	uint8_t body[CTL_MSG_MAX];
	int n = ctl_encode(m, body, sizeof(body));
	struct wire_frame f = {.type = WIRE_CONTROL};

	if (n < 0) {
		return -1;
	}
	f.len = (uint64_t)n;
	return probe_put(pr, &f, body, (size_t)n);
}

/* One --send MESSAGE appended to the probe's output. */
static int
probe_send(struct probe *pr, const char *spec)
{
	static uint8_t pad[PROBE_PAD_MAX];
	char name[16], key[CTL_TEXT_MAX + 1], publisher[80];
	struct ctl_msg m = {0};
	uint64_t a = 0, b = 0, rel = 1;

	if (spec_field(spec, 0, name, sizeof(name)) == NULL) {
		return -1;
	}
	if (strcmp(name, "sub") == 0 && spec_field(spec, 1, key, sizeof(key)) != NULL) {
		m.type = CTL_SUB;
		m.u.sub.origin = pr->hello.u.hello.id;
		m.u.sub.sub_id = 1;
		m.u.sub.keyexpr = (struct ctl_str){key, strlen(key)};
		return probe_ctl(pr, &m);
	}
	if (strcmp(name, "open") == 0 && spec_u64(spec, 1, &a) &&
	    spec_field(spec, 2, key, sizeof(key)) != NULL) {
		if (spec_field(spec, 3, publisher, sizeof(publisher)) != NULL &&
		    !spec_u64(spec, 3, &rel)) {
			return -1;
		}
		snprintf(publisher, sizeof(publisher), "%.*s/1", (int)pr->hello.u.hello.id.len,
		         pr->hello.u.hello.id.p);
		m.type = CTL_OPEN;
		m.u.open.channel = a;
		m.u.open.publisher = (struct ctl_str){publisher, strlen(publisher)};
		m.u.open.key = (struct ctl_str){key, strlen(key)};
		m.u.open.reliability = rel;
		m.u.open.instance = rng_next();
		return probe_ctl(pr, &m);
	}
	if (strcmp(name, "close") == 0 && spec_u64(spec, 1, &a)) {
		m.type = CTL_CLOSE;
		m.u.credit.channel = a;
		return probe_ctl(pr, &m);
	}
	if ((strcmp(name, "credit") == 0 || strcmp(name, "blocked") == 0) &&
	    spec_u64(spec, 1, &a) && spec_u64(spec, 2, &b)) {
		m.type = name[0] == 'c' ? CTL_CREDIT : CTL_BLOCKED;
		m.u.credit.channel = a;
		m.u.credit.bytes = b;
		if (m.type == CTL_CREDIT && !spec_u64(spec, 3, &m.u.credit.consumed)) {
			return -1;
		}
		return probe_ctl(pr, &m);
	}
	if (strcmp(name, "ping") == 0 && spec_u64(spec, 1, &a)) {
		m.type = CTL_PING;
		m.u.token = a;
		return probe_ctl(pr, &m);
	}
	if (strcmp(name, "ctl") == 0 && spec_u64(spec, 1, &a) && a <= PROBE_PAD_MAX) {
		struct wire_frame f = {.type = WIRE_CONTROL, .len = a};
		m.type = CTL_PING;
		int n = ctl_encode(&m, pad, sizeof(pad));
		memset(pad + n, 0, sizeof(pad) - (size_t)n);
		return probe_put(pr, &f, pad, (size_t)a);
	}
	if (strcmp(name, "frame") == 0) {
		struct wire_frame f = {0};
		uint64_t type;
		if (!spec_u64(spec, 1, &type) || type > 0xff || !spec_u64(spec, 2, &f.channel) ||
		    !spec_u64(spec, 3, &f.seq) || !spec_u64(spec, 4, &f.total) ||
		    !spec_u64(spec, 5, &f.len)) {
			return -1;
		}
		f.type = (int)(type & WIRE_TYPE_MASK);
		f.flags = (int)(type & ~(uint64_t)WIRE_TYPE_MASK);
		memset(pad, 0x5a, sizeof(pad));
		return probe_put(pr, &f, pad,
		                 f.len < PROBE_PAD_MAX ? (size_t)f.len : PROBE_PAD_MAX);
	}
	return -1;
}

/* Frames the node sent; remembers the reason of a GOODBYE. */
static size_t
probe_parse(uint8_t *in, size_t len, size_t *skip, unsigned *frames, bool *pong, char *goodbye,
            size_t cap)
{
	size_t pos = 0;

	if (*skip > 0) { /* the preamble */
		pos = len < *skip ? len : *skip;
		*skip -= pos;
	}
	while (pos < len) {
		struct wire_frame f;
		struct ctl_msg m;
		size_t hlen;
		if (wire_header_decode(in + pos, len - pos, UINT64_MAX, &f, &hlen) != 1 ||
		    f.len > len - pos - hlen) {
			break;
		}
		(*frames)++;
		if (f.type == WIRE_CONTROL && ctl_decode(in + pos + hlen, (size_t)f.len, &m) == 0) {
			if (m.type == CTL_GOODBYE) {
				snprintf(goodbye, cap, "%.*s", (int)m.u.reason.len, m.u.reason.p);
			}
			if (m.type == CTL_PONG && m.u.token == PROBE_TOKEN) {
				*pong = true;
			}
		}
		pos += hlen + (size_t)f.len;
	}
	memmove(in, in + pos, len - pos);
	return len - pos;
}

static int
run_probe(const struct sockaddr_storage *ss, socklen_t sslen, struct probe *pr, long hold_ms)
{
	char id[64], goodbye[CTL_TEXT_MAX + 1] = "";
	uint8_t *in = malloc(PROBE_IN);
	size_t off = 0, inlen = 0, skip = WIRE_PREAMBLE_LEN;
	unsigned frames = 0;
	bool closed = false, pong = false;
	struct ctl_msg ping = {.type = CTL_PING, .u.token = PROBE_TOKEN};
	uint64_t t0, closed_ms = 0, end;
	int fd;

	pr->out = malloc(PROBE_OUT);
	if (in == NULL || pr->out == NULL) {
		fprintf(stderr, "badpeer: out of memory\n");
		return 1;
	}
	snprintf(id, sizeof(id), "bad-%d-probe", (int)getpid());
	pr->hello.u.hello.id = (struct ctl_str){id, strlen(id)};
	wire_preamble_encode(pr->out);
	pr->len = WIRE_PREAMBLE_LEN;
	struct ctl_msg sync = {.type = CTL_SYNC};
	if (probe_ctl(pr, &pr->hello) != 0 || probe_ctl(pr, &sync) != 0) {
		fprintf(stderr, "badpeer: cannot encode the HELLO\n");
		return 1;
	}
	for (int i = 0; i < pr->nsends; i++) {
		if (probe_send(pr, pr->sends[i]) != 0) {
			fprintf(stderr, "badpeer: bad --send '%s'\n", pr->sends[i]);
			return 2;
		}
	}
	if (probe_ctl(pr, &ping) != 0) {
		fprintf(stderr, "badpeer: too much to send\n");
		return 2;
	}
	fd = connect_to(ss, sslen);
	if (fd < 0) {
		fprintf(stderr, "badpeer: cannot connect: %s\n", strerror(errno));
		return 1;
	}
	t0 = now_ms();
	end = t0 + (uint64_t)hold_ms;
	for (uint64_t now = t0; now < end && !closed && !(pong && pr->until_pong); now = now_ms()) {
		struct pollfd pfd = {fd, (short)(POLLIN | (off < pr->len ? POLLOUT : 0)), 0};
		if (poll(&pfd, 1, 50) < 0 && errno != EINTR) {
			break;
		}
		now = now_ms();
		if (pfd.revents & (POLLIN | POLLHUP | POLLERR)) {
			if (inlen == PROBE_IN) {
				inlen = 0; /* a frame larger than we care to read: drop it */
			}
			ssize_t n = recv(fd, in + inlen, PROBE_IN - inlen, MSG_DONTWAIT);
			if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
				closed = true;
				closed_ms = now;
				break;
			}
			if (n > 0) {
				inlen = probe_parse(in, inlen + (size_t)n, &skip, &frames, &pong,
				                    goodbye, sizeof(goodbye));
			}
		}
		if ((pfd.revents & POLLOUT) && off < pr->len) {
			ssize_t n =
			    send(fd, pr->out + off, pr->len - off, MSG_DONTWAIT | MSG_NOSIGNAL);
			if (n > 0) {
				off += (size_t)n;
			}
		}
	}
	printf("probe closed=%d pong=%d after_ms=%llu frames=%u\n", closed ? 1 : 0, pong ? 1 : 0,
	       (unsigned long long)(closed ? closed_ms - t0 : now_ms() - t0), frames);
	if (goodbye[0] != '\0') {
		printf("goodbye: %s\n", goodbye);
	}
	close(fd);
	free(in);
	free(pr->out);
	return 0;
}

static void
usage(void)
{
	fprintf(stderr,
	        "usage: badpeer --connect HOST:PORT [--garbage N] [--noise N] [--silent N]\n"
	        "               [--huge N] [--key KEY] [--hold-ms MS] [--seed S]\n"
	        "       badpeer --connect HOST:PORT --probe [--hello FIELD=VALUE]...\n"
	        "               [--send MESSAGE]... [--until-pong] [--hold-ms MS]\n");
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {{"connect", required_argument, NULL, 'c'},
	                                         {"garbage", required_argument, NULL, 'g'},
	                                         {"noise", required_argument, NULL, 'n'},
	                                         {"silent", required_argument, NULL, 's'},
	                                         {"huge", required_argument, NULL, 'u'},
	                                         {"key", required_argument, NULL, 'k'},
	                                         {"hold-ms", required_argument, NULL, 'H'},
	                                         {"seed", required_argument, NULL, 'S'},
	                                         {"probe", no_argument, NULL, 'P'},
	                                         {"hello", required_argument, NULL, 'h'},
	                                         {"send", required_argument, NULL, 'x'},
	                                         {"until-pong", no_argument, NULL, 'U'},
	                                         {NULL, 0, NULL, 0}};
	const char *target = NULL, *key = "bad/huge";
	int counts[NKINDS] = {0};
	long hold_ms = 10000;
	struct sockaddr_storage ss;
	socklen_t sslen;
	struct peer *peers;
	struct pollfd *pfds;
	int npeers = 0, total = 0, failed_connects = 0, ch;
	struct rlimit rl;
	uint64_t end;
	static struct probe pr;
	bool probe = false;

	rng_state = 0x7465726e2d626164ull; /* "tern-bad" */
	hello_defaults(&pr.hello);
	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case 'c':
			target = optarg;
			break;
		case 'g':
			counts[GARBAGE] = atoi(optarg);
			break;
		case 'n':
			counts[NOISE] = atoi(optarg);
			break;
		case 's':
			counts[SILENT] = atoi(optarg);
			break;
		case 'u':
			counts[HUGE] = atoi(optarg);
			break;
		case 'k':
			key = optarg;
			break;
		case 'H':
			hold_ms = atol(optarg);
			break;
		case 'S':
			rng_state = strtoull(optarg, NULL, 0) | 1;
			break;
		case 'P':
			probe = true;
			break;
		case 'U':
			pr.until_pong = true;
			break;
		case 'h':
			if (hello_set(&pr.hello, optarg) != 0) {
				fprintf(stderr, "badpeer: bad --hello '%s'\n", optarg);
				return 2;
			}
			break;
		case 'x':
			if (pr.nsends == PROBE_SENDS) {
				fprintf(stderr, "badpeer: at most %d --send\n", PROBE_SENDS);
				return 2;
			}
			pr.sends[pr.nsends++] = optarg;
			break;
		default:
			usage();
			return 2;
		}
	}
	for (int k = 0; k < NKINDS; k++) {
		if (counts[k] < 0 || counts[k] > MAX_PER_KIND) {
			fprintf(stderr, "badpeer: at most %d connections of each kind\n",
			        MAX_PER_KIND);
			return 2;
		}
		total += counts[k];
	}
	if (target == NULL || hold_ms < 0 || hold_ms > 600000 ||
	    resolve(target, &ss, &sslen) != 0) {
		usage();
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	if (probe) {
		return run_probe(&ss, sslen, &pr, hold_ms);
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)total + 64) {
		rl.rlim_cur = rl.rlim_max < (rlim_t)total + 64 ? rl.rlim_max : (rlim_t)total + 64;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	peers = calloc((size_t)total + 1, sizeof(*peers));
	pfds = calloc((size_t)total + 1, sizeof(*pfds));
	if (peers == NULL || pfds == NULL) {
		fprintf(stderr, "badpeer: out of memory\n");
		return 1;
	}
	/* interleave the kinds so that each meets the node in the same state */
	for (int round = 0; npeers + failed_connects < total; round++) {
		for (int k = 0; k < NKINDS; k++) {
			struct peer *p = &peers[npeers];
			if (round >= counts[k]) {
				continue;
			}
			p->kind = (enum kind)k;
			p->index = round;
			p->fd = connect_to(&ss, sslen);
			if (p->fd < 0) {
				failed_connects++;
				continue;
			}
			p->opened_ms = now_ms();
			p->out = malloc(OUT_MAX);
			if (p->out == NULL || prepare(p, key) != 0) {
				fprintf(stderr, "badpeer: cannot prepare a connection\n");
				return 1;
			}
			npeers++;
		}
	}
	fprintf(stderr, "badpeer: %d connections open, %d failed to connect\n", npeers,
	        failed_connects);
	if (npeers == 0) {
		return 1;
	}
	end = now_ms() + (uint64_t)hold_ms;
	for (uint64_t now = now_ms(); now < end; now = now_ms()) {
		int open = 0;
		for (int i = 0; i < npeers; i++) {
			struct peer *p = &peers[i];
			bool want_out =
			    p->off < p->len || (p->kind == HUGE && p->huge_sent < HUGE_SENT_MAX);
			pfds[i] = (struct pollfd){p->closed ? -1 : p->fd,
			                          (short)(POLLIN | (want_out ? POLLOUT : 0)), 0};
			open += !p->closed;
		}
		if (open == 0) {
			break;
		}
		if (poll(pfds, (nfds_t)npeers, 50) < 0 && errno != EINTR) {
			break;
		}
		now = now_ms();
		for (int i = 0; i < npeers; i++) {
			if (!peers[i].closed) {
				serve(&peers[i], pfds[i].revents, now);
			}
		}
	}
	report(peers, npeers);
	printf("result kind=connect failed=%d\n", failed_connects);
	for (int i = 0; i < npeers; i++) {
		close(peers[i].fd);
		free(peers[i].out);
	}
	free(peers);
	free(pfds);
	return 0;
}
