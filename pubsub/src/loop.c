/*
 * loop.c - the I/O thread: polling, spinning and sleeping, listeners,
 * dialers, and the life of each connection from accept (or dial) to free.
 * See loop.h.
 */
#include <errno.h>
#include <malloc.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "error.h"
#include "loop.h"

/*
 * After activity the thread keeps polling for up to SPIN_NS: work that comes
 * back within that time is taken without a wake-up. That pays on a busy
 * connection (the next batch, a reply) and only burns a core when work
 * comes at longer intervals (a slow link paces data out every few hundred
 * microseconds). So the thread keeps a score: work that returns within
 * SPIN_NS of the thread going idle adds SPIN_HIT, work that returns later
 * takes one away, and the thread spins only while the score is above zero:
 * spinning stops once fewer than about one return in SPIN_HIT + 1 would
 * have been caught by it, and comes back with the first that would. A
 * low-latency publisher that wrote a message itself, because the thread
 * was not polling, fills the score at once: a polling thread would have
 * taken the message off its hands.
 */
#define SPIN_NS    50000
#define SPIN_HIT   4
#define SPIN_SCORE 16
/*
 * Batched mode: while a publisher is still adding to a partial batch, let
 * it fill (the publisher writes it itself once full) rather than taking a
 * few messages at a time; write it as soon as the publisher pauses (its
 * rings did not move since the last look, a microsecond ago: this holds
 * only while the thread polls), and never later than FILL_MAX_NS after data
 * was first seen.
 */
#define FILL_MAX_NS 20000
/*
 * Threads without a spin slot linger: after writing they wait LINGER_US
 * (not announced as sleeping, so publishers do not wake them) and write
 * what gathered meanwhile; only after a quiet linger do they sleep. A
 * linger that catches nothing costs a timer wake-up, which a process with
 * many quiet connections (a thousand nodes, each written in bursts) pays
 * per burst: lingering is scored as spinning is, work that comes back
 * within LINGER_US of the thread going idle (caught, or a sleep that ended
 * that soon) adding SPIN_HIT, a linger that caught nothing taking one away.
 */
#define LINGER_US 100

/* Rounds the I/O thread gives up, yielding, to loop_run callers in a row
 * before it waits for its turn (and then goes first, see io_lock): a run of
 * declarations goes on without a wake-up each, and the sockets are still
 * looked at during it. */
#define RUN_TRIES 64

/* While calls keep coming, the sockets are still looked at this often. */
#define CALLS_POLL_NS 20000
#define TICK_NS       10000000ull
/* A quiet node (no data in flight, nothing kept, no handshake or dial due)
 * sleeps until its next keepalive, at most this long, instead of ticking. */
#define QUIET_MAX_MS 1000

/* What epoll reports: every registered descriptor's data points at one. */
enum ev_kind { EV_WAKE = 1, EV_LISTENER, EV_CONN };

/* The loop's record of a connection. */
struct peer {
	int kind; /* EV_CONN; first, as in every event source */
	struct loop *loop;
	struct conn *conn;
	struct dialer *dialer;
	bool gone;          /* dead, and the session has forgotten it */
	bool counted_ready; /* counted in ready_peers */
	bool in_work;       /* on loop->work */
	uint64_t fill_mark, fill_since;
	uint64_t due_ms; /* when its timers next have work (see run_timers) */
	struct peer *next, *prev;
	struct peer *wnext, *wprev; /* on loop->work */
};

struct dialer {
	char endpoint[ENDPOINT_MAX];
	struct endpoint ep;
	struct peer *peer;
	uint64_t next_at_ms;
	uint32_t backoff_ms;
	bool failed_logged;
	struct dialer *next;
};

struct listener {
	int kind; /* EV_LISTENER */
	int fd;
	bool tls; /* tls://: every connection speaks TLS */
	char endpoint[ENDPOINT_MAX];
	char path[ENDPOINT_MAX]; /* unix socket file to remove */
	struct listener *next;
};

struct call {
	int (*fn)(void *arg);
	void *arg;
	int rc;
	atomic_bool done; /* set last, with release: rc is ready */
	struct call *next;
};

struct loop {
	struct conn_env env;
	const tern_config *cfg;
	const struct logger *log;
	const struct loop_ops *ops;
	void *arg;
	int wake_kind; /* EV_WAKE */
	int epfd, wakefd;
	pthread_t thread;
	bool started;
	atomic_int sleeping;
	atomic_bool spinning; /* polling without sleeping: queued data is seen at once */
	atomic_bool missed;   /* a publisher wrote itself: polling would have paid */
	atomic_bool stop;

	/* Held by the I/O thread while it works (not while it waits in
	 * epoll_wait or spins), and by a loop_run caller while its function
	 * runs: either of them has what "I/O thread" marks to itself. */
	pthread_mutex_t run_lock;
	atomic_bool io_waiting; /* the I/O thread waits for run_lock: loop_run lets it go first */
	pthread_mutex_t lock;   /* calls, ready_peers */
	pthread_cond_t cond;
	struct call *calls;
	atomic_bool has_calls;    /* calls is not empty: seen while polling without the lock */
	atomic_int call_sleepers; /* callers waiting on cond for their call's answer */
	int ready_peers;

	/* The connections with work, listed by conn.c on any thread (a stack
	 * taken whole each round), and those the I/O thread looks at each
	 * round: what was listed, what had events, and what still has data,
	 * a backlog or a death to finish. A round costs what is under way,
	 * not what is connected. */
	_Atomic(struct conn *) work_head;
	struct peer *work;      /* I/O thread */
	uint64_t timers_due_ms; /* I/O thread: no peer's timers are due before */
	bool trim_wanted;       /* I/O thread: buffers went back since the last trim */

	/* I/O thread */
	struct peer *peers;
	struct listener *listeners;
	struct dialer *dialers;
	bool closing;            /* goodbye said: no more dialing */
	bool ticks_wanted;       /* the session has timed work: keep ticking */
	uint64_t delay_until_ns; /* a batch held for max_delay_us is due then (0: none) */
	uint64_t polled_ns;      /* when one_round last looked at the sockets */
	uint64_t calls_ns;       /* and last ran calls */
	uint64_t batches, batch_bytes, batch_largest; /* of closed connections */
};

static inline void
cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

void
loop_wake(struct loop *l)
{
	uint64_t one = 1;

	if (write(l->wakefd, &one, sizeof(one)) < 0 && errno != EAGAIN) {
		/* a full eventfd counter still wakes the loop */
	}
}

bool
loop_on_thread(const struct loop *l)
{
	return l->started && pthread_equal(pthread_self(), l->thread);
}

bool
loop_polling(const struct loop *l)
{
	return atomic_load(&l->spinning);
}

void
loop_note_missed(struct loop *l)
{
	if (!atomic_load_explicit(&l->missed, memory_order_relaxed)) {
		atomic_store_explicit(&l->missed, true, memory_order_relaxed);
	}
}

bool
loop_take_sleeper(struct loop *l)
{
	return atomic_exchange(&l->sleeping, 0) != 0;
}

bool
loop_is_sleeping(const struct loop *l)
{
	return atomic_load(&l->sleeping) != 0;
}

bool
loop_closing(const struct loop *l)
{
	return l->closing;
}

/* ---- calls from other threads ---- */

/*
 * While the I/O thread polls, the caller looks at its call for a while
 * before it sleeps on the condition: declaring thousands of keys in a row
 * is a call each, and a polling thread answers within microseconds, where
 * a sleep and a wake-up on each side would cost tens.
 */
static void
wait_done(struct loop *l, struct call *c)
{
	uint64_t t0 = clock_ns();
	/* a thread that does not poll answers after a wake-up: sleep at once */
	bool look = atomic_load(&l->spinning);

	for (unsigned n = 0; !atomic_load_explicit(&c->done, memory_order_acquire); n++) {
		if (!look || ((n & 63) == 63 && clock_since(clock_ns(), t0) > SPIN_NS)) {
			/* counted before done is looked at again: run_calls stores
			 * done before it looks at the count */
			pthread_mutex_lock(&l->lock);
			atomic_fetch_add(&l->call_sleepers, 1);
			while (!atomic_load(&c->done)) {
				pthread_cond_wait(&l->cond, &l->lock);
			}
			atomic_fetch_sub(&l->call_sleepers, 1);
			pthread_mutex_unlock(&l->lock);
			return;
		}
		cpu_relax();
	}
}

int
loop_call(struct loop *l, int (*fn)(void *arg), void *arg)
{
	struct call c = {.fn = fn, .arg = arg};

	if (!l->started || loop_on_thread(l)) {
		return fn(arg);
	}
	atomic_init(&c.done, false);
	pthread_mutex_lock(&l->lock);
	c.next = l->calls;
	l->calls = &c;
	atomic_store(&l->has_calls, true);
	pthread_mutex_unlock(&l->lock);
	/* A polling thread sees has_calls; one that stops polling looks at it
	 * after clearing `spinning` (idle), so one of the two sees the other. */
	if (!atomic_load(&l->spinning)) {
		loop_wake(l);
	}
	wait_done(l, &c);
	return c.rc;
}

/* The I/O thread takes run_lock: ahead of loop_run callers, which would
 * otherwise take it back each time it is let go and starve this thread of
 * its reads, PONGs and writes for as long as a run of declarations lasts. */
static void
io_lock(struct loop *l)
{
	atomic_store(&l->io_waiting, true);
	pthread_mutex_lock(&l->run_lock);
	atomic_store(&l->io_waiting, false);
}

int
loop_run(struct loop *l, int (*fn)(void *arg), void *arg)
{
	int rc;

	if (!l->started || loop_on_thread(l)) {
		return fn(arg);
	}
	while (atomic_load(&l->io_waiting)) {
		sched_yield();
	}
	pthread_mutex_lock(&l->run_lock);
	rc = fn(arg);
	pthread_mutex_unlock(&l->run_lock);
	/* what fn queued for a connection is seen by a thread that polls, or
	 * that goes to sleep after this (it looks for pending work first); one
	 * asleep in epoll_wait is woken for it, and only for it: a run of
	 * declarations on a node with no peers wakes nobody */
	if (atomic_load(&l->sleeping) && atomic_load(&l->work_head) != NULL) {
		loop_wake(l);
	}
	return rc;
}

/* True if any call ran: calls are work, and the next one is likely to
 * follow soon (see io_main's pace). */
static bool
run_calls(struct loop *l)
{
	struct call *list, *rev = NULL;

	pthread_mutex_lock(&l->lock);
	list = l->calls;
	l->calls = NULL;
	atomic_store(&l->has_calls, false);
	pthread_mutex_unlock(&l->lock);
	if (list == NULL) {
		return false;
	}
	while (list != NULL) { /* oldest first */
		struct call *next = list->next;
		list->next = rev;
		rev = list;
		list = next;
	}
	while (rev != NULL) {
		struct call *next = rev->next;
		rev->rc = rev->fn(rev->arg);
		/* the caller may return (and its call go) the moment it sees
		 * done; one that looks for it without sleeping needs no lock
		 * and no wake-up, which a run of declarations would pay each */
		atomic_store(&rev->done, true);
		if (atomic_load(&l->call_sleepers) > 0) {
			pthread_mutex_lock(&l->lock);
			pthread_cond_broadcast(&l->cond);
			pthread_mutex_unlock(&l->lock);
		}
		rev = next;
	}
	return true;
}

/* ---- connections ---- */

static void
count_ready(struct loop *l, struct peer *p)
{
	struct conn *c = p->conn;

	pthread_mutex_lock(&l->lock);
	if (conn_state(c) == CONN_READY && c->peer_synced && !p->counted_ready) {
		p->counted_ready = true;
		l->ready_peers++;
	} else if (p->counted_ready && conn_state(c) == CONN_DEAD) {
		p->counted_ready = false;
		l->ready_peers--;
	}
	pthread_cond_broadcast(&l->cond);
	pthread_mutex_unlock(&l->lock);
}

static void
on_ready(void *arg, struct conn *c)
{
	struct peer *p = arg;

	p->loop->ops->ready(p->loop->arg, c);
}

static void
on_synced(void *arg, struct conn *c)
{
	struct peer *p = arg;

	count_ready(p->loop, p);
	p->loop->ops->synced(p->loop->arg, c);
}

static int
on_control(void *arg, struct conn *c, const struct ctl_msg *m)
{
	struct peer *p = arg;

	return p->loop->ops->control(p->loop->arg, c, m);
}

static const struct conn_ops peer_ops = {
    .ready = on_ready, .synced = on_synced, .control = on_control};

static void
work_add(struct loop *l, struct peer *p)
{
	if (p->in_work) {
		return;
	}
	p->in_work = true;
	p->wprev = NULL;
	p->wnext = l->work;
	if (l->work != NULL) {
		l->work->wprev = p;
	}
	l->work = p;
}

static void
work_remove(struct loop *l, struct peer *p)
{
	if (!p->in_work) {
		return;
	}
	p->in_work = false;
	if (p->wprev != NULL) {
		p->wprev->wnext = p->wnext;
	} else {
		l->work = p->wnext;
	}
	if (p->wnext != NULL) {
		p->wnext->wprev = p->wprev;
	}
}

/* What conn.c listed since the last round joins the work. */
static void
take_work(struct loop *l)
{
	struct conn *c = conn_work_take(&l->work_head);

	while (c != NULL) {
		struct conn *next = conn_work_unlist(c);
		work_add(l, c->arg);
		c = next;
	}
}

static struct peer *
peer_new(struct loop *l, int fd, bool outbound, bool connecting, bool tls, const char *endpoint)
{
	struct peer *p = calloc(1, sizeof(*p));

	if (p == NULL) {
		return NULL;
	}
	p->kind = EV_CONN;
	p->loop = l;
	p->conn = conn_new(&l->env, fd, outbound, connecting, endpoint, &peer_ops, p, p);
	if (p->conn == NULL) {
		free(p);
		return NULL;
	}
	if (tls && conn_use_tls(p->conn) != 0) {
		log_line(l->log, TERN_LOG_WARN, "%s", tern_last_error());
		p->conn->fd = -1; /* the caller closes it */
		conn_free(p->conn);
		free(p);
		return NULL;
	}
	p->next = l->peers;
	if (l->peers != NULL) {
		l->peers->prev = p;
	}
	l->peers = p;
	l->timers_due_ms = 0; /* its handshake deadline */
	work_add(l, p);
	return p;
}

struct conn *
loop_next_conn(struct loop *l, struct conn *prev)
{
	struct peer *p = prev == NULL ? l->peers : ((struct peer *)prev->arg)->next;

	return p != NULL ? p->conn : NULL;
}

static void
dial(struct loop *l, struct dialer *d, uint64_t now)
{
	int in_progress, fd = endpoint_connect(&d->ep, &in_progress);

	if (fd < 0) {
		if (!d->failed_logged) {
			log_line(l->log, TERN_LOG_WARN, "cannot connect to %s: %s (retrying)",
			         d->endpoint, tern_last_error());
			d->failed_logged = true;
		}
		d->next_at_ms = now + d->backoff_ms;
		d->backoff_ms = d->backoff_ms * 2 > l->cfg->reconnect_max_ms
		                    ? l->cfg->reconnect_max_ms
		                    : d->backoff_ms * 2;
		return;
	}
	d->peer = peer_new(l, fd, true, in_progress != 0, d->ep.tls != 0, d->endpoint);
	if (d->peer == NULL) {
		close(fd);
		d->next_at_ms = now + d->backoff_ms;
		return;
	}
	d->peer->dialer = d;
	conn_start(d->peer->conn);
}

/* A connection of a dialer ended: schedule the next attempt. */
static void
dialer_lost(struct loop *l, struct dialer *d, bool was_ready)
{
	d->peer = NULL;
	if (was_ready) {
		d->backoff_ms = l->cfg->reconnect_initial_ms;
		d->failed_logged = false;
	}
	d->next_at_ms = clock_ms() + d->backoff_ms;
	d->backoff_ms = d->backoff_ms * 2 > l->cfg->reconnect_max_ms ? l->cfg->reconnect_max_ms
	                                                             : d->backoff_ms * 2;
}

static void
peer_gone(struct loop *l, struct peer *p)
{
	struct conn *c = p->conn;

	p->gone = true;
	l->ops->gone(l->arg, c);
	count_ready(l, p);
	if (c->got_hello) {
		log_line(l->log, TERN_LOG_INFO, "disconnected from %s (%s): %s",
		         c->peer_id[0] ? c->peer_id : "?", c->endpoint, c->reason);
	} else {
		log_line(l->log, TERN_LOG_DEBUG, "connection %s closed: %s", c->endpoint,
		         c->reason);
	}
	if (p->dialer != NULL && !c->got_hello && !p->dialer->failed_logged) {
		log_line(l->log, TERN_LOG_WARN, "cannot connect to %s: %s (retrying)", c->endpoint,
		         c->reason);
		p->dialer->failed_logged = true;
	}
	if (p->dialer != NULL && !l->closing) {
		dialer_lost(l, p->dialer, c->got_hello);
	}
	if (p->dialer != NULL) {
		p->dialer->peer = NULL;
		p->dialer = NULL;
	}
}

static void
peer_free(struct loop *l, struct peer *p)
{
	struct conn *c = p->conn;
	uint64_t largest = atomic_load(&c->batch_largest);

	l->batches += atomic_load(&c->batches);
	l->batch_bytes += atomic_load(&c->batch_bytes);
	if (largest > l->batch_largest) {
		l->batch_largest = largest;
	}
	work_remove(l, p);
	if (p->prev != NULL) {
		p->prev->next = p->next;
	} else {
		l->peers = p->next;
	}
	if (p->next != NULL) {
		p->next->prev = p->prev;
	}
	conn_free(c);
	free(p);
}

/* glibc keeps freed memory for reuse; hand it back, at most once a second.
 * The heap is the process's: a process closing a thousand nodes trims once
 * a second, not once per node, each trim walking every arena and
 * interrupting every core. (Not under ASan, whose allocator is not glibc's:
 * malloc_trim would walk arenas that do not exist.) */
static _Atomic uint64_t trimmed_ms;

/* False if the heap was trimmed less than a second ago (see trim_soon). */
static bool
trim_heap(uint64_t now)
{
	uint64_t last = atomic_load(&trimmed_ms);

	if (clock_since(now, last) < 1000 ||
	    !atomic_compare_exchange_strong(&trimmed_ms, &last, now)) {
		return false;
	}
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#elif defined(__has_feature)
#if !__has_feature(address_sanitizer) && !__has_feature(thread_sanitizer)
	malloc_trim(0);
#endif
#else
	malloc_trim(0);
#endif
	return true;
}

/* Memory went back to the heap (a buffer shrank, a connection was freed):
 * trim it at the next timers, or when the last trim is a second old, so
 * that what is freed just after a trim is not left untrimmed. */
static void
trim_soon(struct loop *l)
{
	uint64_t at = atomic_load(&trimmed_ms) + 1000;

	l->trim_wanted = true;
	if (at < l->timers_due_ms) {
		l->timers_due_ms = at;
	}
}

/* Whether a connection still needs the loop every round. */
static bool
has_work(const struct conn *c)
{
	return atomic_load(&c->pending) || atomic_load(&c->dead) || c->nstalled > 0 ||
	       conn_state(c) == CONN_DEAD;
}

/* When a peer's timers are next due, from conn_next_timer (0: a tick). */
static void
set_due(struct loop *l, struct peer *p, uint64_t now, bool exact)
{
	uint64_t t = conn_next_timer(p->conn, exact);

	p->due_ms = t != 0 ? t : now + TICK_NS / 1000000;
	if (p->due_ms < l->timers_due_ms) {
		l->timers_due_ms = p->due_ms;
	}
}

/* Free a dead connection once routing has let go of it, what it received
 * is delivered, and it is off the work stack. True if freed. */
static bool
reap_dead(struct loop *l, struct peer *p)
{
	if (!p->gone) {
		peer_gone(l, p);
	}
	if (conn_busy(p->conn) || atomic_load(&p->conn->listed)) {
		return false;
	}
	peer_free(l, p);
	return true;
}

/* The end of a round: free the dead, and let go of connections that need
 * no more rounds, noting when their timers are due. */
static void
reap(struct loop *l, uint64_t now)
{
	bool freed = false;

	for (struct peer *p = l->work, *next; p != NULL; p = next) {
		next = p->wnext;
		if (conn_state(p->conn) == CONN_DEAD) {
			freed |= reap_dead(l, p);
		} else if (!has_work(p->conn)) {
			work_remove(l, p);
			set_due(l, p, now, false);
		} else if (p->due_ms > now + TICK_NS / 1000000) {
			p->due_ms = now + TICK_NS / 1000000;
			l->timers_due_ms =
			    l->timers_due_ms < p->due_ms ? l->timers_due_ms : p->due_ms;
		}
	}
	/* give memory freed by closed connections back to the system, so a burst
	 * of bad peers does not leave the process large */
	if (freed) {
		trim_soon(l);
	}
}

/*
 * Keepalives are coalesced: when any peer's timers are due, every peer
 * whose timers are due within an eighth of the keepalive interval is seen
 * to as well (its PING goes a little early). A router with a thousand
 * peers then looks at them a few times per interval, not a thousand.
 */
static void
run_timers(struct loop *l)
{
	uint64_t now = clock_ms(), slack = l->cfg->keepalive_ms / 8;

	for (struct dialer *d = l->dialers; d != NULL; d = d->next) {
		if (d->peer == NULL && now >= d->next_at_ms && !l->closing) {
			dial(l, d, now);
		}
	}
	if (now >= l->timers_due_ms) {
		bool gave = false;
		l->timers_due_ms = UINT64_MAX;
		for (struct peer *p = l->peers; p != NULL; p = p->next) {
			if (p->due_ms <= now + slack) {
				gave |= conn_timers(p->conn, now, slack);
				set_due(l, p, now, true);
			} else if (p->due_ms < l->timers_due_ms) {
				l->timers_due_ms = p->due_ms;
			}
		}
		if (gave) {
			trim_soon(l); /* buffers a burst grew went back */
		}
	}
	if (l->trim_wanted && trim_heap(now)) {
		l->trim_wanted = false;
	} else if (l->trim_wanted) {
		trim_soon(l);
	}
	l->ticks_wanted = l->ops->tick(l->arg, now);
}

static void
accept_all(struct loop *l, struct listener *ls)
{
	for (int i = 0; i < 64; i++) {
		int fd = accept4(ls->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED) {
				log_line(l->log, TERN_LOG_WARN, "accept on %s: %s", ls->endpoint,
				         strerror(errno));
			}
			return;
		}
		struct peer *p = peer_new(l, fd, false, false, ls->tls, ls->endpoint);
		if (p == NULL) {
			close(fd);
			continue;
		}
		conn_start(p->conn);
	}
}

/*
 * With batching.max_delay_us, a batch that is not full yet waits until its
 * first message has waited that long. Returns true while it should wait,
 * and notes the deadline so the loop does not sleep past it.
 */
static bool
batch_held(struct loop *l, struct conn *c)
{
	uint64_t delay_ns = (uint64_t)l->cfg->batch_max_delay_us * 1000u;
	uint64_t due;

	if (delay_ns == 0 || c->low_latency || conn_state(c) != CONN_READY) {
		return false;
	}
	due = atomic_load(&c->pending_since_ns) + delay_ns;
	if (clock_ns() >= due || conn_queued(c) >= c->batch_max) {
		return false;
	}
	if (l->delay_until_ns == 0 || due < l->delay_until_ns) {
		l->delay_until_ns = due;
	}
	return true;
}

static bool
still_filling(struct loop *l, struct peer *p)
{
	struct conn *c = p->conn;
	uint64_t mark, now;

	/* only a polling thread looks again within a microsecond */
	if (c->low_latency || l->cfg->batch_max_delay_us > 0 || conn_state(c) != CONN_READY ||
	    !atomic_load_explicit(&l->spinning, memory_order_relaxed)) {
		return false;
	}
	mark = conn_tail_mark(c);
	if (mark == p->fill_mark) {
		return false;
	}
	now = clock_ns();
	p->fill_mark = mark;
	if (p->fill_since == 0) {
		p->fill_since = now;
	}
	return clock_since(now, p->fill_since) < FILL_MAX_NS;
}

/* Flush every connection with queued data; true if anything was written. */
static bool
flush_all(struct loop *l)
{
	bool any = false;

	for (struct peer *p = l->work; p != NULL; p = p->wnext) {
		struct conn *c = p->conn;
		/* a full socket is written when epoll says it drained */
		if (atomic_load_explicit(&c->pending, memory_order_acquire) &&
		    !atomic_load_explicit(&c->choked, memory_order_relaxed) &&
		    conn_state(c) != CONN_DEAD && !batch_held(l, c)) {
			if (still_filling(l, p)) {
				continue;
			}
			p->fill_since = 0;
			/* busy only if bytes moved: data that waits for credit is
			 * no reason to keep polling */
			any |= conn_flush(c);
		}
		conn_reap_failed_write(c);
	}
	return any;
}

static bool
retry_stalled(struct loop *l)
{
	bool progress = false;

	for (struct peer *p = l->work; p != NULL; p = p->wnext) {
		if (p->conn->nstalled > 0) {
			progress |= conn_retry_stalled(p->conn);
		}
	}
	return progress;
}

static bool
anything_pending(struct loop *l)
{
	if (atomic_load(&l->work_head) != NULL) {
		return true;
	}
	for (struct peer *p = l->work; p != NULL; p = p->wnext) {
		if (atomic_load(&p->conn->pending) && !atomic_load(&p->conn->choked)) {
			return true;
		}
	}
	return false;
}

/* Handle what epoll reports within timeout_us (negative: no limit). */
static int
poll_events(struct loop *l, int64_t timeout_us)
{
	struct epoll_event evs[64];
	struct timespec ts = {.tv_sec = timeout_us / 1000000,
	                      .tv_nsec = timeout_us % 1000000 * 1000};
	int n;

	if (timeout_us == 0) {
		n = epoll_pwait2(l->epfd, evs, 64, &ts, NULL);
	} else {
		/* loop_run callers go on while this thread waits */
		pthread_mutex_unlock(&l->run_lock);
		n = epoll_pwait2(l->epfd, evs, 64, timeout_us < 0 ? NULL : &ts, NULL);
		io_lock(l);
	}

	for (int i = 0; i < n; i++) {
		int *kind = evs[i].data.ptr;
		if (*kind == EV_WAKE) {
			uint64_t v;
			if (read(l->wakefd, &v, sizeof(v)) < 0) {
				/* nothing to read: a spurious wake */
			}
		} else if (*kind == EV_LISTENER) {
			accept_all(l, (struct listener *)(void *)kind);
		} else {
			struct peer *p = (struct peer *)(void *)kind;
			conn_on_event(p->conn, evs[i].events);
			work_add(l, p); /* its timers may be due sooner now */
		}
	}
	return n;
}

/*
 * Spinning after traffic saves a wake-up per burst, but only pays while a
 * core is free for it: on a machine with few cores, or a process with many
 * nodes (a benchmark's hundred senders), spinning threads would take the
 * CPU from the threads that do the work. So at most one I/O thread per
 * spare core spins at a time, process-wide.
 */
static atomic_int spinners;

static bool
spin_slot_take(struct loop *l)
{
	static atomic_int max;

	if (atomic_load(&max) == 0) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		atomic_store(&max, n > 2 ? (int)n - 1 : 1);
	}
	if (atomic_fetch_add(&spinners, 1) < atomic_load(&max)) {
		atomic_store(&l->spinning, true);
		return true;
	}
	atomic_fetch_sub(&spinners, 1);
	return false;
}

static void
spin_slot_give(struct loop *l, bool *have)
{
	if (*have) {
		atomic_store(&l->spinning, false);
		atomic_fetch_sub(&spinners, 1);
		*have = false;
	}
}

/* How long a sleep may last: a tick while anything is under way, else until
 * the next keepalive or dial, so an idle node does not wake 100 times a
 * second for nothing. */
static int64_t
sleep_us(struct loop *l)
{
	uint64_t now = clock_ms(), next = now + QUIET_MAX_MS, tick_ms = TICK_NS / 1000000;

	if (l->ticks_wanted) {
		return (int64_t)tick_ms * 1000;
	}
	for (struct dialer *d = l->dialers; d != NULL; d = d->next) {
		if (d->peer == NULL && !l->closing && d->next_at_ms < next) {
			next = d->next_at_ms;
		}
	}
	if (l->timers_due_ms < next) {
		next = l->timers_due_ms;
	}
	return (int64_t)(next > now + tick_ms ? next - now : tick_ms) * 1000;
}

/* Sleep until an event, a wake-up or the next timer. */
static void
io_sleep(struct loop *l)
{
	/* Announce it, then look once more for work queued before the
	 * announcement became visible to publishers. */
	atomic_store(&l->sleeping, 1);
	pthread_mutex_lock(&l->lock);
	bool calls = l->calls != NULL;
	pthread_mutex_unlock(&l->lock);
	if (!anything_pending(l) && !calls) {
		poll_events(l, sleep_us(l));
		l->ops->round(l->arg);
	}
	atomic_store(&l->sleeping, 0);
}

/* One round: calls, events, writes, backlogs, dead connections, timers.
 * True if anything moved. */
static bool
one_round(struct loop *l, uint64_t *last_timers)
{
	bool busy = false, calls = run_calls(l);
	uint64_t now = clock_ns();

	/* A run of calls (thousands of declarations) comes a call every few
	 * microseconds: the sockets are looked at every CALLS_POLL_NS then, not
	 * at each call, which would cost a system call each. */
	if (calls) {
		l->calls_ns = now;
	}
	if (clock_since(now, l->calls_ns) > CALLS_POLL_NS ||
	    clock_since(now, l->polled_ns) > CALLS_POLL_NS) {
		busy |= poll_events(l, 0) > 0;
		l->polled_ns = now;
	}
	busy |= calls;
	busy |= l->ops->round(l->arg);
	take_work(l);
	busy |= flush_all(l);
	busy |= retry_stalled(l);
	l->ops->round(l->arg);
	now = clock_ns();
	reap(l, now / 1000000);
	if (clock_since(now, *last_timers) > TICK_NS) {
		run_timers(l);
		*last_timers = now;
	}
	return busy;
}

/* Idle: wait for a batch that is held back, or linger, or sleep. True if
 * events came while lingering, or calls came while polling. */
static bool
idle(struct loop *l, bool *linger)
{
	uint64_t now = clock_ns();

	if (atomic_load(&l->has_calls)) {
		return true; /* queued while this thread polled: no wake-up came */
	}
	if (*linger && l->delay_until_ns == 0) {
		*linger = poll_events(l, LINGER_US) > 0;
		l->ops->round(l->arg);
		return *linger;
	}
	if (l->delay_until_ns != 0) {
		/* a held batch is due soon: wait for it without sleeping long */
		uint64_t left = l->delay_until_ns > now ? l->delay_until_ns - now : 0;
		l->delay_until_ns = 0;
		if (left > 2000000) {
			poll_events(l, (int64_t)(left / 1000) - 1000);
			l->ops->round(l->arg);
		}
		return false;
	}
	io_sleep(l);
	return false;
}

/* When work last moved, and whether spinning pays. I/O thread. */
struct pace {
	uint64_t last_busy;
	int score;   /* 0..SPIN_SCORE: spin while above 0 */
	int linger;  /* 0..SPIN_SCORE: linger while above 0 */
	bool waited; /* idle since last_busy */
};

/* A spin or linger score after a return of work it would (hit) or would
 * not have caught: SPIN_HIT up to SPIN_SCORE, or one down to 0. */
static int
score_after(int score, bool hit)
{
	if (hit) {
		return score + SPIN_HIT > SPIN_SCORE ? SPIN_SCORE : score + SPIN_HIT;
	}
	return score > 0 ? score - 1 : 0;
}

static void
pace_busy(struct pace *p)
{
	uint64_t now = clock_ns();

	if (p->waited) {
		p->score = score_after(p->score, clock_since(now, p->last_busy) < SPIN_NS);
		p->waited = false;
	}
	p->last_busy = now;
}

static void *
io_main(void *arg)
{
	struct loop *l = arg;
	struct pace pace = {.last_busy = clock_ns(), .score = SPIN_SCORE, .linger = SPIN_SCORE};
	uint64_t last_timers = 0;
	unsigned idle_rounds = 0, run_busy = 0;
	bool spinning = false, linger = false;

	while (!atomic_load(&l->stop)) {
		/* while idle-spinning, look at the sockets and the clock only every
		 * few rounds: queued data is seen through the pending flags */
		if (idle_rounds > 0 && (idle_rounds & 15) != 0) {
			idle_rounds++;
			if (!anything_pending(l) && !atomic_load(&l->has_calls)) {
				cpu_relax();
				continue;
			}
		}
		/* a loop_run caller has it: its function is done within
		 * microseconds, and another follows; a thread that waited here
		 * would cost each of them a wake-up */
		if (pthread_mutex_trylock(&l->run_lock) != 0) {
			if (++run_busy < RUN_TRIES) {
				sched_yield();
				continue;
			}
			io_lock(l);
		}
		run_busy = 0;
		bool busy = one_round(l, &last_timers);
		pthread_mutex_unlock(&l->run_lock);
		if (busy) {
			pace_busy(&pace);
			idle_rounds = 0;
			linger = pace.linger > 0;
			continue;
		}
		pace.waited = true;
		if (atomic_load_explicit(&l->missed, memory_order_relaxed)) {
			atomic_store_explicit(&l->missed, false, memory_order_relaxed);
			pace.score = SPIN_SCORE;
			pace.last_busy = clock_ns();
		}
		if (pace.score > 0 && clock_since(clock_ns(), pace.last_busy) < SPIN_NS &&
		    (spinning || (spinning = spin_slot_take(l)))) {
			/* spin politely: a thread waiting for this core runs first,
			 * except during a run of calls, whose next one comes within
			 * microseconds and would wait for the system call */
			if (clock_since(clock_ns(), l->calls_ns) > CALLS_POLL_NS) {
				sched_yield();
			} else {
				cpu_relax();
			}
			idle_rounds++;
			continue;
		}
		spin_slot_give(l, &spinning);
		idle_rounds = 0;
		io_lock(l);
		bool lingered = linger && l->delay_until_ns == 0;
		bool slept = !linger && l->delay_until_ns == 0;
		bool woke = idle(l, &linger);
		pthread_mutex_unlock(&l->run_lock);
		if (lingered) {
			pace.linger = score_after(pace.linger, woke);
		} else if (slept && clock_since(clock_ns(), pace.last_busy) < LINGER_US * 1000) {
			/* a linger would have caught it */
			pace.linger = score_after(pace.linger, true);
		}
		if (woke) {
			pace_busy(&pace); /* events came while lingering */
		} else if (slept) {
			/* a timer tick is not traffic: sleep again soon */
			pace.last_busy = clock_ns() - SPIN_NS;
		}
	}
	spin_slot_give(l, &spinning);
	return NULL;
}

/* ---- open, listen, connect, close ---- */

int
loop_open(struct loop **out, const tern_config *cfg, const struct logger *log, uint64_t window_init,
          uint64_t window_max, const struct loop_ops *ops, void *arg)
{
	struct epoll_event ev = {.events = EPOLLIN};
	struct loop *l = calloc(1, sizeof(*l));

	if (l == NULL) {
		return TERN_ENOMEM;
	}
	l->cfg = cfg;
	l->log = log;
	l->ops = ops;
	l->arg = arg;
	l->wake_kind = EV_WAKE;
	pthread_mutex_init(&l->run_lock, NULL);
	pthread_mutex_init(&l->lock, NULL);
	pthread_cond_init(&l->cond, NULL);
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	l->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (l->epfd < 0 || l->wakefd < 0) {
		int rc = tern__error(TERN_ESYS, "epoll/eventfd: %s", strerror(errno));
		if (l->epfd >= 0) {
			close(l->epfd);
		}
		if (l->wakefd >= 0) {
			close(l->wakefd);
		}
		free(l);
		return rc;
	}
	ev.data.ptr = &l->wake_kind;
	epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->wakefd, &ev);
	l->env.cfg = cfg;
	l->env.log = log;
	l->env.epfd = l->epfd;
	l->env.work = &l->work_head;
	atomic_init(&l->work_head, NULL);
	l->env.window_init = window_init;
	l->env.window_max = window_max;
	if (cfg->tls_cert != NULL || cfg->tls_key != NULL || cfg->tls_ca != NULL) {
		/* read the files now: a bad one fails the node's open, named */
		int rc = tls_ctx_new(&l->env.tls, cfg->tls_cert, cfg->tls_key, cfg->tls_ca,
		                     cfg->tls_verify_peer);
		if (rc != 0) {
			close(l->epfd);
			close(l->wakefd);
			pthread_mutex_destroy(&l->run_lock);
			pthread_mutex_destroy(&l->lock);
			pthread_cond_destroy(&l->cond);
			free(l);
			return rc;
		}
	}
	*out = l;
	return 0;
}

int
loop_start(struct loop *l)
{
	if (pthread_create(&l->thread, NULL, io_main, l) != 0) {
		return tern__error(TERN_ESYS, "cannot start the I/O thread");
	}
	l->started = true;
	return 0;
}

struct listen_args {
	struct loop *loop;
	const char *endpoint;
	char *bound;
	size_t bound_len;
	char err[512];
};

static int
do_listen(void *arg)
{
	struct listen_args *a = arg;
	struct loop *l = a->loop;
	struct epoll_event ev = {.events = EPOLLIN};
	struct endpoint ep;
	struct listener *ls;
	int fd, rc;

	if ((rc = endpoint_parse(a->endpoint, &ep)) != 0) {
		snprintf(a->err, sizeof(a->err), "%s", tern_last_error());
		return rc;
	}
	if (ep.tls && (l->env.tls == NULL || !tls_ctx_has_cert(l->env.tls))) {
		snprintf(a->err, sizeof(a->err),
		         "cannot listen on %s: a TLS listener needs tls.cert and tls.key "
		         "(docs/CONFIG.md)",
		         a->endpoint);
		return TERN_EINVAL;
	}
	ls = calloc(1, sizeof(*ls));
	if (ls == NULL) {
		return TERN_ENOMEM;
	}
	fd = endpoint_listen(&ep, ls->endpoint, sizeof(ls->endpoint));
	if (fd < 0) {
		snprintf(a->err, sizeof(a->err), "%s", tern_last_error());
		free(ls);
		return fd;
	}
	ls->kind = EV_LISTENER;
	ls->fd = fd;
	ls->tls = ep.tls != 0;
	if (ep.unix_domain) {
		snprintf(ls->path, sizeof(ls->path), "%s", ep.host);
	}
	ev.data.ptr = ls;
	epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev);
	ls->next = l->listeners;
	l->listeners = ls;
	if (a->bound != NULL && a->bound_len > 0) {
		snprintf(a->bound, a->bound_len, "%s", ls->endpoint);
	}
	log_line(l->log, TERN_LOG_INFO, "listening on %s", ls->endpoint);
	return 0;
}

int
loop_listen(struct loop *l, const char *endpoint, char *bound, size_t bound_len)
{
	struct listen_args a = {
	    .loop = l, .endpoint = endpoint, .bound = bound, .bound_len = bound_len};
	int rc = loop_call(l, do_listen, &a);

	if (rc != 0 && a.err[0]) {
		tern__error(rc, "%s", a.err);
	}
	return rc;
}

struct connect_args {
	struct loop *loop;
	struct dialer *dialer;
};

static int
do_connect(void *arg)
{
	struct connect_args *a = arg;
	struct loop *l = a->loop;
	struct dialer *d = a->dialer;

	if (d->ep.tls && l->env.tls == NULL) {
		/* no TLS settings: encrypt, but neither present nor check a
		 * certificate */
		int rc = tls_ctx_new(&l->env.tls, NULL, NULL, NULL, 0);
		if (rc != 0) {
			free(d);
			return rc;
		}
	}
	d->backoff_ms = l->cfg->reconnect_initial_ms;
	d->next_at_ms = 0;
	d->next = l->dialers;
	l->dialers = d;
	dial(l, d, clock_ms());
	return 0;
}

int
loop_connect(struct loop *l, const char *endpoint)
{
	struct connect_args a = {.loop = l};
	int rc;

	a.dialer = calloc(1, sizeof(*a.dialer));
	if (a.dialer == NULL) {
		return TERN_ENOMEM;
	}
	if ((rc = endpoint_parse(endpoint, &a.dialer->ep)) != 0) {
		free(a.dialer);
		return rc;
	}
	snprintf(a.dialer->endpoint, sizeof(a.dialer->endpoint), "%s", endpoint);
	return loop_call(l, do_connect, &a);
}

int
loop_wait_peers(struct loop *l, int n, int timeout_ms)
{
	struct timespec ts = clock_deadline_in(timeout_ms > 0 ? (uint64_t)timeout_ms : 0);
	int rc = 0;

	pthread_mutex_lock(&l->lock);
	while (l->ready_peers < n && rc == 0) {
		if (timeout_ms < 0) {
			pthread_cond_wait(&l->cond, &l->lock);
		} else if (pthread_cond_timedwait(&l->cond, &l->lock, &ts) == ETIMEDOUT) {
			rc = l->ready_peers >= n ? 0 : TERN_ETIMEDOUT;
		}
	}
	pthread_mutex_unlock(&l->lock);
	return rc;
}

int
loop_ready_peers(struct loop *l)
{
	pthread_mutex_lock(&l->lock);
	int n = l->ready_peers;
	pthread_mutex_unlock(&l->lock);
	return n;
}

void
loop_write_totals(struct loop *l, tern_stats *st)
{
	st->batches = l->batches;
	st->batch_bytes = l->batch_bytes;
	st->batch_largest = l->batch_largest;
	for (struct peer *p = l->peers; p != NULL; p = p->next) {
		uint64_t largest = atomic_load(&p->conn->batch_largest);
		st->batches += atomic_load(&p->conn->batches);
		st->batch_bytes += atomic_load(&p->conn->batch_bytes);
		if (largest > st->batch_largest) {
			st->batch_largest = largest;
		}
	}
}

static int
do_goodbye(void *arg)
{
	struct loop *l = arg;

	l->closing = true;
	for (struct peer *p = l->peers; p != NULL; p = p->next) {
		struct conn *c = p->conn;
		if (conn_state(c) == CONN_READY) {
			/* Half-close and wait for the peer to hang up: closing with
			 * its credit grants unread would reset the connection and
			 * could discard data the peer has received but not read. */
			conn_say_goodbye(c, "node closing");
		} else {
			conn_fail(c, "node closing");
		}
	}
	return 0;
}

static int
all_closed(void *arg)
{
	struct loop *l = arg;

	return l->peers == NULL;
}

static int
drain_done(void *arg)
{
	struct loop *l = arg;

	for (struct peer *p = l->peers; p != NULL; p = p->next) {
		struct conn *c = p->conn;
		/* reliable data is done when the peer has consumed it, not when it
		 * is in the kernel: a slow link may still be carrying it */
		if (conn_state(c) == CONN_READY &&
		    (atomic_load(&c->pending) || conn_queued(c) > 0)) {
			return 0;
		}
	}
	return 1;
}

static void
wait_until(struct loop *l, int (*done)(void *), uint64_t ms)
{
	uint64_t deadline = clock_ms() + ms;

	while (loop_call(l, done, l) == 0 && clock_ms() < deadline) {
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, NULL);
	}
}

static void
free_all(struct loop *l)
{
	while (l->peers != NULL) {
		struct peer *p = l->peers;
		if (!p->gone) {
			conn_fail(p->conn, "node closing");
			p->gone = true;
			l->ops->gone(l->arg, p->conn);
		}
		peer_free(l, p);
	}
	while (l->listeners != NULL) {
		struct listener *ls = l->listeners;
		l->listeners = ls->next;
		close(ls->fd);
		if (ls->path[0]) {
			unlink(ls->path);
		}
		free(ls);
	}
	while (l->dialers != NULL) {
		struct dialer *d = l->dialers;
		l->dialers = d->next;
		free(d);
	}
}

void
loop_close(struct loop *l)
{
	if (l == NULL) {
		return;
	}
	if (l->started) {
		/* write what is queued, bounded, then say goodbye; what was sent is
		 * consumed by then: peers hang up as soon as the goodbye reaches
		 * them, one round trip */
		wait_until(l, drain_done, l->cfg->publish_timeout_ms);
		loop_call(l, do_goodbye, l);
		wait_until(l, all_closed, 3000);
		atomic_store(&l->stop, true);
		loop_wake(l);
		pthread_join(l->thread, NULL);
		l->started = false;
	}
	free_all(l);
	tls_ctx_free(l->env.tls);
	close(l->epfd);
	close(l->wakefd);
	pthread_mutex_destroy(&l->run_lock);
	pthread_mutex_destroy(&l->lock);
	pthread_cond_destroy(&l->cond);
	free(l);
}
