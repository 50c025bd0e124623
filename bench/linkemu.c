/*
 * linkemu.c - the in-process link emulator (see linkemu.h).
 *
 * One thread runs an edge-triggered epoll loop over every relayed socket, a
 * timerfd and a stop eventfd. Bytes read are cut into segments of at most
 * SEG_MAX bytes; each segment gets a departure time from the token bucket
 * and a delivery time half a round trip later, and sits in its direction's
 * FIFO until then. Delivered segments move to the destination socket's
 * output list and are written as the socket accepts them. Invariant: in a
 * direction's FIFO, departure and delivery times never decrease, so the
 * head is always the next event.
 */
#include "linkemu.h"
#include "net.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define SEG_MAX        8192
#define READ_MAX       65536
#define QUEUE_MIN      (256 * 1024)
#define OUT_MAX        (4u * 1024 * 1024)
#define HELD_UNLIMITED (64u * 1024 * 1024)
#define RELAY_RCVBUF   (64 * 1024)
#define TAG_LISTEN     0
#define TAG_TIMER      1
#define TAG_STOP       2
#define TAG_BASE       3

struct seg {
	struct seg *next;
	uint32_t pair;
	uint32_t len;
	uint32_t off;
	uint64_t depart;
	uint64_t deliver;
	char data[];
};

struct side {
	int fd;
	bool readable;
	bool writable;
	bool eof;
	struct seg *out_head;
	struct seg *out_tail;
	size_t out_bytes;
};

/* Direction d carries bytes read from s[d] to s[1 - d]. */
struct pair {
	struct side s[2];
	uint32_t inflight[2];
	bool shut[2];
	bool dead;
};

struct dir {
	struct seg *head;
	struct seg *tail;
	struct seg *next_depart;
	size_t queued; /* bytes not yet departed: the bottleneck queue */
	size_t held;   /* every byte this direction holds */
	uint64_t tx_free;
};

struct linkemu {
	double bw;         /* bytes per ns, 0: unlimited */
	uint64_t delay_ns; /* one way */
	size_t queue_max;
	size_t held_max;
	char target[NET_EP_MAX];
	int lfd;
	int tfd;
	int efd;
	int epfd;
	struct pair **pairs;
	size_t npairs;
	size_t cap;
	struct dir dir[2];
	pthread_t thread;
	bool started;
	size_t rotate;
	char buf[READ_MAX];
};

static void
side_free_out(struct linkemu *le, struct side *s, int d)
{
	while (s->out_head != NULL) {
		struct seg *g = s->out_head;

		s->out_head = g->next;
		le->dir[d].held -= g->len;
		free(g);
	}
	s->out_tail = NULL;
	s->out_bytes = 0;
}

static void
pair_kill(struct linkemu *le, struct pair *p)
{
	int k;

	if (p->dead) {
		return;
	}
	p->dead = true;
	for (k = 0; k < 2; k++) {
		if (p->s[k].fd >= 0) {
			close(p->s[k].fd);
			p->s[k].fd = -1;
		}
		/* s[k]'s output came through direction 1 - k. */
		side_free_out(le, &p->s[k], 1 - k);
	}
}

static int
add_pair(struct linkemu *le, int cfd)
{
	char err[160];
	struct pair *p;
	int sfd;
	int rcv = RELAY_RCVBUF;
	int k;

	sfd = net_connect(le->target, err, sizeof(err));
	if (sfd < 0) {
		close(cfd);
		return -1;
	}
	if (le->npairs == le->cap) {
		size_t ncap = le->cap ? le->cap * 2 : 16;
		struct pair **np = realloc(le->pairs, ncap * sizeof(*np));

		if (np == NULL) {
			close(cfd);
			close(sfd);
			return -1;
		}
		le->pairs = np;
		le->cap = ncap;
	}
	p = calloc(1, sizeof(*p));
	if (p == NULL) {
		close(cfd);
		close(sfd);
		return -1;
	}
	p->s[0].fd = cfd;
	p->s[1].fd = sfd;
	for (k = 0; k < 2; k++) {
		struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET};

		net_set_nonblock(p->s[k].fd);
		/* Bytes parked in the relay's own socket buffers would be an unmetered
		 * second queue; keep that buffer modest. */
		setsockopt(p->s[k].fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
		/* The relay forwards what it gets at once; it must not add Nagle delay. */
		net_set_nodelay(p->s[k].fd);
		ev.data.u64 = TAG_BASE + ((uint64_t)le->npairs << 1 | (uint64_t)k);
		epoll_ctl(le->epfd, EPOLL_CTL_ADD, p->s[k].fd, &ev);
	}
	le->pairs[le->npairs++] = p;
	return 0;
}

static void
accept_all(struct linkemu *le)
{
	for (;;) {
		int cfd = accept4(le->lfd, NULL, NULL, SOCK_CLOEXEC);

		if (cfd < 0) {
			return;
		}
		add_pair(le, cfd);
	}
}

/* Move departed and delivered segments along. Returns true on any delivery. */
static bool
advance(struct linkemu *le, uint64_t now)
{
	bool moved = false;
	int d;

	for (d = 0; d < 2; d++) {
		struct dir *dr = &le->dir[d];

		while (dr->next_depart != NULL && dr->next_depart->depart <= now) {
			dr->queued -= dr->next_depart->len;
			dr->next_depart = dr->next_depart->next;
		}
		while (dr->head != NULL && dr->head->deliver <= now) {
			struct seg *g = dr->head;
			struct pair *p = le->pairs[g->pair];

			dr->head = g->next;
			if (dr->head == NULL) {
				dr->tail = NULL;
			}
			if (dr->next_depart == g) {
				dr->next_depart = g->next;
				dr->queued -= g->len;
			}
			p->inflight[d]--;
			g->next = NULL;
			if (p->dead) {
				dr->held -= g->len;
				free(g);
				continue;
			}
			if (p->s[1 - d].out_tail != NULL) {
				p->s[1 - d].out_tail->next = g;
			} else {
				p->s[1 - d].out_head = g;
			}
			p->s[1 - d].out_tail = g;
			p->s[1 - d].out_bytes += g->len;
			moved = true;
		}
	}
	return moved;
}

/* Write what side k of p has to send (direction 1 - k brought it). */
static bool
flush_side(struct linkemu *le, struct pair *p, int k)
{
	struct side *s = &p->s[k];
	bool progress = false;

	while (s->out_head != NULL && s->writable && !p->dead) {
		struct iovec iov[16];
		struct seg *g = s->out_head;
		int n = 0;
		ssize_t w;

		for (; g != NULL && n < 16; g = g->next, n++) {
			iov[n].iov_base = g->data + g->off;
			iov[n].iov_len = g->len - g->off;
		}
		struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};

		/* sendmsg rather than writev: a vanished peer must not raise SIGPIPE. */
		w = sendmsg(s->fd, &mh, MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EINTR) {
				continue;
			}
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				s->writable = false;
				break;
			}
			pair_kill(le, p);
			return true;
		}
		progress = true;
		while (w > 0) {
			g = s->out_head;
			if ((size_t)w >= g->len - g->off) {
				w -= (ssize_t)(g->len - g->off);
				s->out_head = g->next;
				if (s->out_head == NULL) {
					s->out_tail = NULL;
				}
				s->out_bytes -= g->len;
				le->dir[1 - k].held -= g->len;
				free(g);
			} else {
				g->off += (uint32_t)w;
				w = 0;
			}
		}
	}
	/* Everything the other side sent has arrived: pass its end on. */
	if (!p->dead && s->out_head == NULL && p->s[1 - k].eof && p->inflight[1 - k] == 0 &&
	    !p->shut[1 - k]) {
		shutdown(s->fd, SHUT_WR);
		p->shut[1 - k] = true;
		progress = true;
		if (p->shut[0] && p->shut[1]) {
			pair_kill(le, p);
		}
	}
	return progress;
}

static bool
admits(const struct linkemu *le, const struct pair *p, int d)
{
	const struct dir *dr = &le->dir[d];

	return dr->queued < le->queue_max && dr->held < le->held_max &&
	       p->s[1 - d].out_bytes < OUT_MAX;
}

/* Read one bounded helping from side d of p into direction d's queue. */
static bool
read_side(struct linkemu *le, struct pair *p, uint32_t idx, int d, uint64_t now)
{
	char *buf = le->buf;
	struct side *s = &p->s[d];
	struct dir *dr = &le->dir[d];
	size_t room;
	size_t off = 0;
	ssize_t n;

	if (!s->readable || s->eof || p->dead || !admits(le, p, d)) {
		return false;
	}
	room = le->queue_max - dr->queued;
	if (room > READ_MAX) {
		room = READ_MAX;
	}
	n = read(s->fd, buf, room);
	if (n < 0) {
		if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
			s->readable = errno == EINTR;
			return false;
		}
		pair_kill(le, p);
		return true;
	}
	if (n == 0) {
		s->eof = true;
		s->readable = false;
		flush_side(le, p, 1 - d);
		return true;
	}
	while (off < (size_t)n) {
		size_t len = (size_t)n - off;
		struct seg *g;

		if (len > SEG_MAX) {
			len = SEG_MAX;
		}
		g = malloc(sizeof(*g) + len);
		if (g == NULL) {
			pair_kill(le, p);
			return true;
		}
		memcpy(g->data, buf + off, len);
		g->next = NULL;
		g->pair = idx;
		g->len = (uint32_t)len;
		g->off = 0;
		if (le->bw > 0) {
			uint64_t start = dr->tx_free > now ? dr->tx_free : now;

			g->depart = start + (uint64_t)((double)len / le->bw);
			dr->tx_free = g->depart;
		} else {
			g->depart = now;
		}
		g->deliver = g->depart + le->delay_ns;
		if (dr->tail != NULL) {
			dr->tail->next = g;
		} else {
			dr->head = g;
		}
		dr->tail = g;
		if (dr->next_depart == NULL) {
			dr->next_depart = g;
		}
		dr->queued += len;
		dr->held += len;
		p->inflight[d]++;
		off += len;
	}
	return true;
}

static void
arm_timer(struct linkemu *le)
{
	struct itimerspec its;
	uint64_t next = UINT64_MAX;
	int d;

	memset(&its, 0, sizeof(its));
	for (d = 0; d < 2; d++) {
		struct dir *dr = &le->dir[d];

		if (dr->head != NULL && dr->head->deliver < next) {
			next = dr->head->deliver;
		}
		/* A full queue reopens when its head departs. */
		if (dr->queued >= le->queue_max && dr->next_depart != NULL &&
		    dr->next_depart->depart < next) {
			next = dr->next_depart->depart;
		}
	}
	if (next != UINT64_MAX) {
		if (next == 0) {
			next = 1;
		}
		its.it_value.tv_sec = (time_t)(next / 1000000000u);
		its.it_value.tv_nsec = (long)(next % 1000000000u);
	}
	timerfd_settime(le->tfd, TFD_TIMER_ABSTIME, &its, NULL);
}

static void *
relay_main(void *arg)
{
	struct linkemu *le = arg;
	struct epoll_event evs[64];

	/* The default 50 us timer slack would blur sub-millisecond delays. */
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	for (;;) {
		bool progress;
		int n;
		int i;

		do {
			uint64_t now = net_now_ns();
			size_t j;

			progress = advance(le, now);
			/* Start each round at another connection, so the one that comes
			 * first does not always take the room the queue frees. */
			le->rotate++;
			for (j = 0; j < le->npairs; j++) {
				uint32_t idx = (uint32_t)((j + le->rotate) % le->npairs);
				struct pair *p = le->pairs[idx];

				if (p->dead) {
					continue;
				}
				progress |= flush_side(le, p, 0);
				progress |= flush_side(le, p, 1);
				progress |= read_side(le, p, idx, 0, now);
				progress |= read_side(le, p, idx, 1, now);
			}
		} while (progress);
		arm_timer(le);
		n = epoll_wait(le->epfd, evs, 64, -1);
		if (n < 0 && errno != EINTR) {
			break;
		}
		for (i = 0; i < n; i++) {
			uint64_t tag = evs[i].data.u64;
			uint64_t v;

			if (tag == TAG_STOP) {
				return NULL;
			}
			if (tag == TAG_TIMER) {
				if (read(le->tfd, &v, sizeof(v)) < 0) {
					continue;
				}
				continue;
			}
			if (tag == TAG_LISTEN) {
				accept_all(le);
				continue;
			}
			tag -= TAG_BASE;
			if ((tag >> 1) < le->npairs) {
				struct side *s = &le->pairs[tag >> 1]->s[tag & 1];

				if (evs[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
					s->readable = true;
				}
				if (evs[i].events & (EPOLLOUT | EPOLLHUP | EPOLLERR)) {
					s->writable = true;
				}
			}
		}
	}
	return NULL;
}

int
linkemu_open(linkemu **out, double bandwidth_Bps, double rtt_ms, const char *target, char *ep,
             size_t ep_len, char *err, size_t err_len)
{
	struct linkemu *le;
	struct epoll_event ev = {.events = EPOLLIN};
	double bdp;

	*out = NULL;
	if (bandwidth_Bps < 0 || rtt_ms < 0 || strlen(target) >= NET_EP_MAX) {
		snprintf(err, err_len, "link emulator: bad bandwidth, round trip or target");
		return -1;
	}
	le = calloc(1, sizeof(*le));
	if (le == NULL) {
		snprintf(err, err_len, "link emulator: out of memory");
		return -1;
	}
	le->lfd = le->tfd = le->efd = le->epfd = -1;
	le->bw = bandwidth_Bps / 1e9;
	le->delay_ns = (uint64_t)(rtt_ms * 1e6 / 2.0);
	bdp = bandwidth_Bps * rtt_ms / 1000.0;
	le->queue_max = bdp > QUEUE_MIN ? (size_t)bdp : QUEUE_MIN;
	le->held_max = bandwidth_Bps > 0 ? le->queue_max + (size_t)bdp + READ_MAX : HELD_UNLIMITED;
	if (bandwidth_Bps == 0) {
		/* With no bottleneck nothing queues; only the delay line holds bytes. */
		le->queue_max = HELD_UNLIMITED;
	}
	snprintf(le->target, sizeof(le->target), "%s", target);
	le->lfd = net_listen("tcp://127.0.0.1:0", ep, ep_len, err, err_len);
	le->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	le->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	le->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (le->lfd < 0 || le->tfd < 0 || le->efd < 0 || le->epfd < 0) {
		if (le->lfd >= 0) {
			snprintf(err, err_len, "link emulator: %s", strerror(errno));
		}
		linkemu_close(le);
		return -1;
	}
	net_set_nonblock(le->lfd);
	ev.data.u64 = TAG_LISTEN;
	epoll_ctl(le->epfd, EPOLL_CTL_ADD, le->lfd, &ev);
	ev.data.u64 = TAG_TIMER;
	epoll_ctl(le->epfd, EPOLL_CTL_ADD, le->tfd, &ev);
	ev.data.u64 = TAG_STOP;
	epoll_ctl(le->epfd, EPOLL_CTL_ADD, le->efd, &ev);
	if (pthread_create(&le->thread, NULL, relay_main, le) != 0) {
		snprintf(err, err_len, "link emulator: cannot start its thread");
		linkemu_close(le);
		return -1;
	}
	le->started = true;
	*out = le;
	return 0;
}

double
linkemu_cpu_seconds(linkemu *le)
{
	clockid_t cid;
	struct timespec ts;

	if (le == NULL || !le->started || pthread_getcpuclockid(le->thread, &cid) != 0 ||
	    clock_gettime(cid, &ts) != 0) {
		return 0.0;
	}
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void
linkemu_close(linkemu *le)
{
	size_t i;
	int d;

	if (le == NULL) {
		return;
	}
	if (le->started) {
		uint64_t one = 1;

		if (write(le->efd, &one, sizeof(one)) < 0) {
			/* An eventfd write cannot fail here; join anyway. */
		}
		pthread_join(le->thread, NULL);
	}
	for (i = 0; i < le->npairs; i++) {
		pair_kill(le, le->pairs[i]);
		free(le->pairs[i]);
	}
	for (d = 0; d < 2; d++) {
		while (le->dir[d].head != NULL) {
			struct seg *g = le->dir[d].head;

			le->dir[d].head = g->next;
			free(g);
		}
	}
	free(le->pairs);
	if (le->lfd >= 0) {
		close(le->lfd);
	}
	if (le->tfd >= 0) {
		close(le->tfd);
	}
	if (le->efd >= 0) {
		close(le->efd);
	}
	if (le->epfd >= 0) {
		close(le->epfd);
	}
	free(le);
}
