/*
 * node.c - a node's life: open, the I/O thread's event loop, listening,
 * dialing with exponential backoff, calls from API threads, close.
 *
 * The loop flushes every connection with queued data, then polls. After
 * traffic it keeps polling without sleeping for a short while, so a burst
 * of publications is batched by this thread without a wake-up per message;
 * only when idle does it sleep in epoll_wait, and publishers wake it through
 * an eventfd when they queue the first message after that.
 */
#include <errno.h>
#include <malloc.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "keyexpr.h"
#include "node.h"

#define SPIN_NS 50000 /* keep polling this long after the last activity */

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
tern_config_init(tern_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->mode = TERN_MODE_PEER;
	cfg->batch_max_bytes = 65536;
	cfg->reliability = TERN_RELIABLE;
	cfg->queue_max_bytes = 64ull << 20;
	cfg->max_message_bytes = 64ull << 20;
	cfg->chunk_bytes = 65536;
	cfg->publish_timeout_ms = 10000;
	cfg->slow_consumer_ms = 10000;
	cfg->handshake_timeout_ms = 5000;
	cfg->keepalive_ms = 1000;
	cfg->reconnect_initial_ms = 100;
	cfg->reconnect_max_ms = 1000;
	cfg->log_level = TERN_LOG_INFO;
}

uint64_t
node_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t
node_now_ms(void)
{
	return node_now_ns() / 1000000ull;
}

uint64_t
node_deadline(struct tern_node *node, uint64_t *deadline)
{
	if (*deadline == 0) {
		*deadline = node_now_ms() + node->cfg.publish_timeout_ms;
	}
	return *deadline;
}

void
node_log(struct tern_node *node, int level, const char *fmt, ...)
{
	static const char *names[] = {"error", "warn", "info", "debug"};
	char line[768];
	va_list ap;
	int n;

	if (level > node->cfg.log_level) {
		return;
	}
	n = snprintf(line, sizeof(line), "tern[%s] %s: ", node->id, names[level]);
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	if (node->cfg.log_fn != NULL) {
		node->cfg.log_fn(node->cfg.log_arg, level, line);
	} else {
		fprintf(stderr, "%s\n", line);
	}
}

void
node_wake(struct tern_node *node)
{
	uint64_t one = 1;

	if (write(node->wakefd, &one, sizeof(one)) < 0 && errno != EAGAIN) {
		/* a full eventfd counter still wakes the loop */
	}
}

void
node_peer_ready(struct tern_node *node, struct conn *c)
{
	pthread_mutex_lock(&node->lock);
	if (c->state == CONN_READY && c->peer_synced && !c->counted_ready) {
		c->counted_ready = true;
		node->ready_peers++;
	} else if (c->counted_ready && c->state == CONN_DEAD) {
		c->counted_ready = false;
		node->ready_peers--;
	}
	pthread_cond_broadcast(&node->cond);
	pthread_mutex_unlock(&node->lock);
}

/* Run fn on the I/O thread and wait for its result. */
int
node_call(struct tern_node *node, int (*fn)(struct tern_node *, void *), void *arg)
{
	struct call c = {.fn = fn, .arg = arg};

	if (pthread_equal(pthread_self(), node->thread)) {
		return fn(node, arg);
	}
	pthread_mutex_lock(&node->lock);
	c.next = node->calls;
	node->calls = &c;
	pthread_mutex_unlock(&node->lock);
	node_wake(node);
	pthread_mutex_lock(&node->lock);
	while (!c.done) {
		pthread_cond_wait(&node->cond, &node->lock);
	}
	pthread_mutex_unlock(&node->lock);
	return c.rc;
}

static void
run_calls(struct tern_node *node)
{
	struct call *list, *rev = NULL;

	pthread_mutex_lock(&node->lock);
	list = node->calls;
	node->calls = NULL;
	pthread_mutex_unlock(&node->lock);
	while (list != NULL) { /* oldest first */
		struct call *next = list->next;
		list->next = rev;
		rev = list;
		list = next;
	}
	while (rev != NULL) {
		struct call *next = rev->next;
		int rc = rev->fn(node, rev->arg);
		pthread_mutex_lock(&node->lock);
		rev->rc = rc;
		rev->done = true;
		pthread_cond_broadcast(&node->cond);
		pthread_mutex_unlock(&node->lock);
		rev = next;
	}
}

static void
dial(struct tern_node *node, struct dialer *d, uint64_t now)
{
	int in_progress, fd = endpoint_connect(&d->ep, &in_progress);

	if (fd < 0) {
		if (!d->failed_logged) {
			node_log(node, TERN_LOG_WARN, "cannot connect to %s: %s (retrying)",
			         d->endpoint, tern_last_error());
			d->failed_logged = true;
		}
		d->next_at_ms = now + d->backoff_ms;
		d->backoff_ms = d->backoff_ms * 2 > node->cfg.reconnect_max_ms
		                    ? node->cfg.reconnect_max_ms
		                    : d->backoff_ms * 2;
		return;
	}
	d->conn = conn_new(node, fd, true, in_progress != 0, d->endpoint);
	if (d->conn == NULL) {
		close(fd);
		d->next_at_ms = now + d->backoff_ms;
		return;
	}
	d->conn->dialer = d;
	conn_start(d->conn);
}

/* A connection of a dialer ended: schedule the next attempt. */
static void
dialer_lost(struct tern_node *node, struct dialer *d, bool was_ready)
{
	uint64_t now = node_now_ms();

	d->conn = NULL;
	if (was_ready) {
		d->backoff_ms = node->cfg.reconnect_initial_ms;
		d->failed_logged = false;
	}
	d->next_at_ms = now + d->backoff_ms;
	d->backoff_ms = d->backoff_ms * 2 > node->cfg.reconnect_max_ms ? node->cfg.reconnect_max_ms
	                                                               : d->backoff_ms * 2;
}

/* Frames it received before dying still wait in a backlog: deliver them first. */
static bool
conn_has_backlog(const struct conn *c)
{
	for (uint32_t k = 0; k < c->ins_cap; k++) {
		if (c->ins[k] != NULL && c->ins[k]->stalled) {
			return true;
		}
	}
	return false;
}

static void
conn_gone(struct tern_node *node, struct conn *c)
{
	bool was_ready = c->got_hello;

	c->gone = true;
	route_conn_gone(node, c);
	node_peer_ready(node, c);
	if (c->got_hello) {
		node_log(node, TERN_LOG_INFO, "disconnected from %s (%s): %s",
		         c->peer_id[0] ? c->peer_id : "?", c->endpoint, c->reason);
	} else {
		node_log(node, TERN_LOG_DEBUG, "connection %s closed: %s", c->endpoint, c->reason);
	}
	if (c->dialer != NULL && !c->got_hello && !c->dialer->failed_logged) {
		node_log(node, TERN_LOG_WARN, "cannot connect to %s: %s (retrying)", c->endpoint,
		         c->reason);
		c->dialer->failed_logged = true;
	}
	if (c->dialer != NULL && !node->closing) {
		dialer_lost(node, c->dialer, was_ready);
		c->dialer = NULL;
	}
	atomic_fetch_add(&node->batches, atomic_load(&c->batches));
	atomic_fetch_add(&node->batch_bytes, atomic_load(&c->batch_bytes));
	if (atomic_load(&c->batch_largest) > atomic_load(&node->batch_largest)) {
		atomic_store(&node->batch_largest, atomic_load(&c->batch_largest));
	}
}

/* glibc keeps freed memory for reuse; hand it back. (Not under ASan, whose
 * allocator is not glibc's: malloc_trim would walk arenas that do not exist.) */
static void
trim_heap(void)
{
#if defined(__SANITIZE_ADDRESS__)
#elif defined(__has_feature)
#if !__has_feature(address_sanitizer)
	malloc_trim(0);
#endif
#else
	malloc_trim(0);
#endif
}

static void
reap_conns(struct tern_node *node)
{
	struct conn **pp = &node->conns;
	bool freed = false;

	while (*pp != NULL) {
		struct conn *c = *pp;
		if (c->state != CONN_DEAD) {
			pp = &c->next;
			continue;
		}
		if (!c->gone) {
			conn_gone(node, c);
		}
		if (conn_has_backlog(c)) {
			pp = &c->next;
			continue;
		}
		*pp = c->next;
		conn_free(c);
		freed = true;
	}
	/* give memory freed by closed connections back to the system, so a burst
	 * of bad peers does not leave the process large */
	if (freed && node_now_ms() - node->last_trim_ms >= 1000) {
		node->last_trim_ms = node_now_ms();
		trim_heap();
	}
}

static void
run_timers(struct tern_node *node)
{
	uint64_t now = node_now_ms();

	for (struct dialer *d = node->dialers; d != NULL; d = d->next) {
		if (d->conn == NULL && now >= d->next_at_ms && !node->closing) {
			dial(node, d, now);
		}
	}
	for (struct conn *c = node->conns; c != NULL; c = c->next) {
		conn_timers(c, now);
	}
	route_expire_parked(node, now);
}

static void
accept_all(struct tern_node *node, struct listener *l)
{
	for (int i = 0; i < 64; i++) {
		int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED) {
				node_log(node, TERN_LOG_WARN, "accept on %s: %s", l->endpoint,
				         strerror(errno));
			}
			return;
		}
		struct conn *c = conn_new(node, fd, false, false, l->endpoint);
		if (c == NULL) {
			close(fd);
			continue;
		}
		conn_start(c);
	}
}

/*
 * With batching.max_delay_us, a batch that is not full yet waits until its
 * first message has waited that long. Returns true while it should wait,
 * and notes the deadline so the loop does not sleep past it.
 */
static bool
batch_held(struct tern_node *node, struct conn *c)
{
	uint64_t delay_ns = (uint64_t)node->cfg.batch_max_delay_us * 1000u;
	uint64_t since, due, queued;

	if (delay_ns == 0 || c->low_latency || c->state != CONN_READY) {
		return false;
	}
	since = atomic_load(&c->pending_since_ns);
	due = since + delay_ns;
	if (node_now_ns() >= due) {
		return false;
	}
	queued = c->out_len;
	for (int i = 0; i < c->nout; i++) {
		queued += ring_used(&c->outv[i]->ring);
	}
	if (queued >= c->batch_max) {
		return false;
	}
	if (node->delay_until_ns == 0 || due < node->delay_until_ns) {
		node->delay_until_ns = due;
	}
	return true;
}

/*
 * Batched mode: while a publisher is still adding to a partial batch, let
 * it fill (the publisher writes it itself once full) rather than taking a
 * few messages at a time; write it as soon as the publisher pauses (its
 * rings did not move since the last look, a microsecond ago: this holds
 * only while the thread polls), and never later than FILL_MAX_NS after data
 * was first seen.
 */
#define FILL_MAX_NS 20000

static bool
still_filling(struct tern_node *node, struct conn *c)
{
	uint64_t mark = 0, now;

	/* only a polling thread looks again within a microsecond */
	if (c->low_latency || node->cfg.batch_max_delay_us > 0 || c->state != CONN_READY ||
	    !atomic_load_explicit(&node->spinning, memory_order_relaxed)) {
		return false;
	}
	for (int i = 0; i < c->nout; i++) {
		mark += atomic_load_explicit(&c->outv[i]->ring.tail, memory_order_relaxed);
	}
	if (mark == c->fill_mark) {
		return false;
	}
	now = node_now_ns();
	c->fill_mark = mark;
	if (c->fill_since == 0) {
		c->fill_since = now;
	}
	return now - c->fill_since < FILL_MAX_NS;
}

/* Flush every connection with queued data; true if anything was written. */
static bool
flush_all(struct tern_node *node)
{
	bool any = false;

	for (struct conn *c = node->conns; c != NULL; c = c->next) {
		if (atomic_load_explicit(&c->kill, memory_order_acquire) && c->state != CONN_DEAD) {
			node_log(node, TERN_LOG_WARN, "dropping %s (%s): %s", c->peer_id,
			         c->endpoint, c->kill_reason);
			conn_fail(c, c->kill_reason);
			continue;
		}
		/* a full socket is written when epoll says it drained */
		if (atomic_load_explicit(&c->pending, memory_order_acquire) &&
		    !atomic_load_explicit(&c->choked, memory_order_relaxed) &&
		    c->state != CONN_DEAD && !batch_held(node, c)) {
			if (still_filling(node, c)) {
				continue;
			}
			c->fill_since = 0;
			/* busy only if bytes moved: data that waits for credit is
			 * no reason to keep polling */
			any |= conn_flush(c);
		}
	}
	return any;
}

static bool
retry_stalled(struct tern_node *node)
{
	struct inchan **pp = &node->stalled;
	bool progress = false;

	node->subs_blocked = false;
	while (*pp != NULL) {
		struct inchan *in = *pp;
		if (conn_retry_stalled(in)) {
			*pp = in->stall_next;
			in->stall_next = NULL;
			progress = true;
		} else {
			pp = &in->stall_next;
		}
	}
	return progress;
}

static bool
anything_pending(struct tern_node *node)
{
	for (struct conn *c = node->conns; c != NULL; c = c->next) {
		if ((atomic_load(&c->pending) && !atomic_load(&c->choked)) ||
		    atomic_load(&c->kill)) {
			return true;
		}
	}
	return false;
}

/* Handle what epoll reports within timeout_us (negative: no limit). */
static int
poll_events(struct tern_node *node, int64_t timeout_us)
{
	struct epoll_event evs[64];
	struct timespec ts = {.tv_sec = timeout_us / 1000000,
	                      .tv_nsec = timeout_us % 1000000 * 1000};
	int n = epoll_pwait2(node->epfd, evs, 64, timeout_us < 0 ? NULL : &ts, NULL);

	for (int i = 0; i < n; i++) {
		struct evsrc *src = evs[i].data.ptr;
		if (src->kind == EV_WAKE) {
			uint64_t v;
			if (read(node->wakefd, &v, sizeof(v)) < 0) {
				/* nothing to read: a spurious wake */
			}
		} else if (src->kind == EV_LISTENER) {
			accept_all(node, (struct listener *)src);
		} else {
			conn_on_event((struct conn *)src, evs[i].events);
		}
	}
	return n;
}

/*
 * Spinning after traffic saves a wake-up per burst, but only pays while a
 * core is free for it: on a machine with few cores, or a process with many
 * nodes (a benchmark's hundred senders), spinning threads would take the
 * CPU from the threads that do the work. So at most one I/O thread per
 * spare core spins at a time, process-wide. The others linger: after
 * writing, they wait LINGER_US (not announced as sleeping, so publishers
 * do not wake them) and write what gathered meanwhile; only after a quiet
 * linger do they sleep. A stream thus costs a timed wait per batch instead
 * of a wake-up per few messages, and full batches are written by the
 * publishers themselves anyway.
 */
#define LINGER_US 100

static atomic_int spinners;

static bool
spin_slot_take(struct tern_node *node)
{
	static int max;

	if (max == 0) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		max = n > 2 ? (int)n - 1 : 1;
	}
	if (atomic_fetch_add(&spinners, 1) < max) {
		atomic_store(&node->spinning, true);
		return true;
	}
	atomic_fetch_sub(&spinners, 1);
	return false;
}

static void
spin_slot_give(struct tern_node *node, bool *have)
{
	if (*have) {
		atomic_store(&node->spinning, false);
		atomic_fetch_sub(&spinners, 1);
		*have = false;
	}
}

/* Sleep until an event, a wake-up or the next timer tick. */
static void
io_sleep(struct tern_node *node)
{
	/* Announce it, then look once more for work queued before the
	 * announcement became visible to publishers. */
	atomic_store(&node->sleeping, 1);
	pthread_mutex_lock(&node->lock);
	bool calls = node->calls != NULL;
	pthread_mutex_unlock(&node->lock);
	if (!anything_pending(node) && !calls) {
		poll_events(node, 10000);
		sub_release_all(node);
	}
	atomic_store(&node->sleeping, 0);
}

static void *
io_main(void *arg)
{
	struct tern_node *node = arg;
	uint64_t last_busy = node_now_ns();
	uint64_t last_timers = 0;
	unsigned idle_rounds = 0;
	bool spinning = false, linger = false;

	while (!atomic_load(&node->stop)) {
		bool busy = false;
		uint64_t now;

		/* while idle-spinning, look at the sockets and the clock only every
		 * few rounds: queued data is seen through the pending flags */
		if (idle_rounds > 0 && (idle_rounds & 15) != 0) {
			idle_rounds++;
			if (!anything_pending(node)) {
				cpu_relax();
				continue;
			}
		}
		run_calls(node);
		busy |= poll_events(node, 0) > 0;
		sub_release_all(node);
		busy |= flush_all(node);
		if (node->stalled != NULL) {
			busy |= retry_stalled(node);
			sub_release_all(node);
		}
		reap_conns(node);
		now = node_now_ns();
		if (now - last_timers > 10000000ull) {
			run_timers(node);
			last_timers = now;
		}
		if (busy) {
			last_busy = now;
			idle_rounds = 0;
			linger = true;
			continue;
		}
		if (now - last_busy < SPIN_NS && (spinning || (spinning = spin_slot_take(node)))) {
			/* spin politely: a thread waiting for this core runs first */
			sched_yield();
			idle_rounds++;
			continue;
		}
		spin_slot_give(node, &spinning);
		idle_rounds = 0;
		if (linger && node->delay_until_ns == 0) {
			linger = poll_events(node, LINGER_US) > 0;
			sub_release_all(node);
			continue;
		}
		if (node->delay_until_ns != 0) {
			/* a held batch is due soon: wait for it without sleeping long */
			uint64_t left = node->delay_until_ns > now ? node->delay_until_ns - now : 0;
			node->delay_until_ns = 0;
			if (left > 2000000) {
				poll_events(node, (int64_t)(left / 1000) - 1000);
				sub_release_all(node);
			}
			continue;
		}
		io_sleep(node);
		last_busy = node_now_ns();
		last_busy -= SPIN_NS; /* a timer tick is not traffic: sleep again soon */
	}
	spin_slot_give(node, &spinning);
	return NULL;
}

/* "<host>-<pid>", and "<host>-<pid>.<n>" for the n-th further node of a
 * process: ids must differ, since they identify subscriptions' origins. */
static void
default_id(char *out, size_t len)
{
	static atomic_int opened;
	char host[128] = "host";
	int n = atomic_fetch_add(&opened, 1);

	gethostname(host, sizeof(host) - 1);
	host[sizeof(host) - 1] = '\0';
	if (n == 0) {
		snprintf(out, len, "%s-%d", host, (int)getpid());
	} else {
		snprintf(out, len, "%s-%d.%d", host, (int)getpid(), n + 1);
	}
}

static int
validate_config(const tern_config *cfg)
{
	if (cfg->id != NULL && (strlen(cfg->id) == 0 || strlen(cfg->id) > CTL_ID_MAX)) {
		return tern__error(TERN_EINVAL, "id must be 1 to %d bytes", CTL_ID_MAX);
	}
	if (cfg->id != NULL && strchr(cfg->id, '/') != NULL) {
		return tern__error(TERN_EINVAL, "id '%s' must not contain '/'", cfg->id);
	}
	if (cfg->batch_max_bytes < 512 || cfg->batch_max_bytes > (64u << 20)) {
		return tern__error(TERN_EINVAL, "batching.max_bytes must be 512 .. 64 MiB");
	}
	if (cfg->chunk_bytes < 256 || cfg->chunk_bytes > (16u << 20)) {
		return tern__error(TERN_EINVAL, "chunk_bytes must be 256 .. 16 MiB");
	}
	if (cfg->max_message_bytes == 0 || cfg->queue_max_bytes < (1u << 20)) {
		return tern__error(TERN_EINVAL,
		                   "max_message_bytes must be > 0 and queue.max_bytes >= 1 MiB");
	}
	if (cfg->mode != TERN_MODE_PEER && cfg->mode != TERN_MODE_ROUTER) {
		return tern__error(TERN_EINVAL, "mode must be peer or router");
	}
	if (cfg->slow_consumer_ms == 0) {
		return tern__error(TERN_EINVAL, "slow_consumer_ms must be > 0");
	}
	if (cfg->keepalive_ms == 0 || cfg->reconnect_initial_ms == 0 ||
	    cfg->reconnect_max_ms < cfg->reconnect_initial_ms) {
		return tern__error(TERN_EINVAL, "keepalive and reconnect delays must be > 0");
	}
	return 0;
}

static int
node_setup(struct tern_node *node, const tern_config *cfg)
{
	struct epoll_event ev = {.events = EPOLLIN};

	node->cfg = *cfg;
	if (cfg->id != NULL) {
		snprintf(node->id, sizeof(node->id), "%s", cfg->id);
	} else {
		default_id(node->id, sizeof(node->id));
	}
	node->cfg.id = node->id;
	if (getrandom(&node->instance, sizeof(node->instance), 0) != sizeof(node->instance)) {
		node->instance = node_now_ns() ^ ((uint64_t)getpid() << 32);
	}
	node->window_init = 256u << 10;
	if (node->window_init < 2ull * cfg->chunk_bytes) {
		node->window_init = 2ull * cfg->chunk_bytes;
	}
	node->window_max = cfg->queue_max_bytes / 2;
	if (node->window_max < node->window_init) {
		node->window_max = node->window_init;
	}
	node->next_sub_id = 1;
	node->next_pub_id = 1;
	pthread_mutex_init(&node->lock, NULL);
	pthread_cond_init(&node->cond, NULL);
	node->epfd = epoll_create1(EPOLL_CLOEXEC);
	node->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (node->epfd < 0 || node->wakefd < 0) {
		return tern__error(TERN_ESYS, "epoll/eventfd: %s", strerror(errno));
	}
	node->wake_ev.kind = EV_WAKE;
	ev.data.ptr = &node->wake_ev;
	epoll_ctl(node->epfd, EPOLL_CTL_ADD, node->wakefd, &ev);
	return 0;
}

int
tern_node_open(tern_node **out, const tern_config *cfg)
{
	tern_config defaults;
	struct tern_node *node;
	int rc;

	if (out == NULL) {
		return tern__error(TERN_EINVAL, "no place for the node");
	}
	if (cfg == NULL) {
		tern_config_init(&defaults);
		cfg = &defaults;
	}
	if ((rc = validate_config(cfg)) != 0) {
		return rc;
	}
	node = calloc(1, sizeof(*node));
	if (node == NULL) {
		return TERN_ENOMEM;
	}
	if ((rc = node_setup(node, cfg)) != 0 ||
	    pthread_create(&node->thread, NULL, io_main, node) != 0) {
		if (node->epfd > 0) {
			close(node->epfd);
		}
		if (node->wakefd > 0) {
			close(node->wakefd);
		}
		free(node);
		return rc != 0 ? rc : tern__error(TERN_ESYS, "cannot start the I/O thread");
	}
	*out = node;
	return 0;
}

const char *
tern_node_id(const tern_node *node)
{
	return node->id;
}

struct listen_args {
	const char *endpoint;
	char *bound;
	size_t bound_len;
	char err[512];
};

static int
do_listen(struct tern_node *node, void *arg)
{
	struct listen_args *a = arg;
	struct endpoint ep;
	struct listener *l;
	struct epoll_event ev = {.events = EPOLLIN};
	int fd, rc;

	if ((rc = endpoint_parse(a->endpoint, &ep)) != 0) {
		snprintf(a->err, sizeof(a->err), "%s", tern_last_error());
		return rc;
	}
	l = calloc(1, sizeof(*l));
	if (l == NULL) {
		return TERN_ENOMEM;
	}
	fd = endpoint_listen(&ep, l->endpoint, sizeof(l->endpoint));
	if (fd < 0) {
		snprintf(a->err, sizeof(a->err), "%s", tern_last_error());
		free(l);
		return fd;
	}
	l->ev.kind = EV_LISTENER;
	l->fd = fd;
	if (ep.unix_domain) {
		snprintf(l->path, sizeof(l->path), "%s", ep.host);
	}
	ev.data.ptr = &l->ev;
	epoll_ctl(node->epfd, EPOLL_CTL_ADD, fd, &ev);
	l->next = node->listeners;
	node->listeners = l;
	if (a->bound != NULL && a->bound_len > 0) {
		snprintf(a->bound, a->bound_len, "%s", l->endpoint);
	}
	node_log(node, TERN_LOG_INFO, "listening on %s", l->endpoint);
	return 0;
}

int
tern_node_listen(tern_node *node, const char *endpoint, char *bound, size_t bound_len)
{
	struct listen_args a = {.endpoint = endpoint, .bound = bound, .bound_len = bound_len};
	int rc = node_call(node, do_listen, &a);

	if (rc != 0 && a.err[0]) {
		tern__error(rc, "%s", a.err);
	}
	return rc;
}

static int
do_connect(struct tern_node *node, void *arg)
{
	struct dialer *d = arg;

	d->backoff_ms = node->cfg.reconnect_initial_ms;
	d->next_at_ms = 0;
	d->next = node->dialers;
	node->dialers = d;
	dial(node, d, node_now_ms());
	return 0;
}

int
tern_node_connect(tern_node *node, const char *endpoint)
{
	struct dialer *d;
	int rc;

	d = calloc(1, sizeof(*d));
	if (d == NULL) {
		return TERN_ENOMEM;
	}
	if ((rc = endpoint_parse(endpoint, &d->ep)) != 0) {
		free(d);
		return rc;
	}
	snprintf(d->endpoint, sizeof(d->endpoint), "%s", endpoint);
	return node_call(node, do_connect, d);
}

int
tern_node_wait_peers(tern_node *node, int n, int timeout_ms)
{
	struct timespec ts;
	int rc = 0;

	clock_gettime(CLOCK_REALTIME, &ts);
	if (timeout_ms >= 0) {
		ts.tv_sec += timeout_ms / 1000;
		ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
	}
	pthread_mutex_lock(&node->lock);
	while (node->ready_peers < n && rc == 0) {
		if (timeout_ms < 0) {
			pthread_cond_wait(&node->cond, &node->lock);
		} else if (pthread_cond_timedwait(&node->cond, &node->lock, &ts) == ETIMEDOUT) {
			rc = node->ready_peers >= n ? 0 : TERN_ETIMEDOUT;
		}
	}
	pthread_mutex_unlock(&node->lock);
	return rc;
}

static int
do_goodbye(struct tern_node *node, void *arg)
{
	struct ctl_msg m = {.type = CTL_GOODBYE};
	(void)arg;

	m.u.reason.p = "node closing";
	m.u.reason.len = strlen(m.u.reason.p);
	node->closing = true;
	for (struct conn *c = node->conns; c != NULL; c = c->next) {
		if (c->state == CONN_READY) {
			conn_send_ctl(c, &m);
			conn_flush(c);
			/* Half-close and wait for the peer to hang up: closing with
			 * its credit grants unread would reset the connection and
			 * could discard data the peer has received but not read. */
			shutdown(c->fd, SHUT_WR);
		} else {
			conn_fail(c, "node closing");
		}
	}
	return 0;
}

static int
all_closed(struct tern_node *node, void *arg)
{
	(void)arg;
	return node->conns == NULL;
}

static int
drain_done(struct tern_node *node, void *arg)
{
	(void)arg;
	for (struct conn *c = node->conns; c != NULL; c = c->next) {
		if (c->state != CONN_READY) {
			continue;
		}
		if (atomic_load(&c->pending) || c->out_len > 0) {
			return 0;
		}
		/* reliable data is done when the peer has consumed it, not when it
		 * is in the kernel: a slow link may still be carrying it */
		for (int i = 0; i < c->nout; i++) {
			if (ring_used(&c->outv[i]->ring) > 0) {
				return 0;
			}
		}
	}
	return 1;
}

static void
node_free_all(struct tern_node *node)
{
	node->stalled = NULL;
	while (node->conns != NULL) {
		struct conn *c = node->conns;
		node->conns = c->next;
		if (!c->gone) {
			route_conn_gone(node, c);
		}
		conn_free(c);
	}
	while (node->listeners != NULL) {
		struct listener *l = node->listeners;
		node->listeners = l->next;
		close(l->fd);
		if (l->path[0]) {
			unlink(l->path);
		}
		free(l);
	}
	while (node->dialers != NULL) {
		struct dialer *d = node->dialers;
		node->dialers = d->next;
		free(d);
	}
	while (node->interests != NULL) {
		struct interest *i = node->interests;
		node->interests = i->next;
		free(i->origin);
		free(i->keyexpr);
		free(i->from);
		free(i);
	}
	while (node->remote != NULL) {
		struct src *s = node->remote;
		node->remote = s->next;
		route_src_clear(s);
		free(s);
	}
}

void
tern_node_close(tern_node *node)
{
	uint64_t deadline;

	if (node == NULL) {
		return;
	}
	/* write what is queued, bounded, then say goodbye */
	deadline = node_now_ms() + node->cfg.publish_timeout_ms;
	while (node_call(node, drain_done, NULL) == 0 && node_now_ms() < deadline) {
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, NULL);
	}
	node_call(node, do_goodbye, NULL);
	/* what was sent is consumed by now: peers hang up as soon as the goodbye
	 * reaches them, one round trip */
	deadline = node_now_ms() + 3000;
	while (node_call(node, all_closed, NULL) == 0 && node_now_ms() < deadline) {
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, NULL);
	}
	atomic_store(&node->stop, true);
	node_wake(node);
	pthread_join(node->thread, NULL);
	node_free_all(node);
	close(node->epfd);
	close(node->wakefd);
	pthread_mutex_destroy(&node->lock);
	pthread_cond_destroy(&node->cond);
	free(node->held);
	free(node);
}
