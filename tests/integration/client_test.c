/*
 * client_test.c - nodes in client mode: told only the subscriptions their
 * publishers' keys meet, and never less than a peer would be told of them.
 *  - on the wire (a raw socket that says it is a client, to a real
 *    router): nothing before its SYNC is answered; after a SCOPE, the
 *    subscriptions that meet it, then the answer to the SYNC that follows;
 *    later subscriptions only if they meet the scope; a SCOPE from a node
 *    not in client mode, or one that is no key expression, ends its
 *    connection;
 *  - through the API: a client's publisher matches a subscription the
 *    router knew by the time it is first used (its match count, or a
 *    publication with no look at it), whether it was opened before or
 *    after the client connected, and a subscription that comes
 *    later; every message reaches the subscriber; a client's own
 *    subscription works; a client does not listen; after its router
 *    restarts, its publishers find their subscriptions again.
 *
 * Every wait is bounded and fails rather than hangs; bounds are generous,
 * never timing goals.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>

#include <cmocka.h>

#include "nodes.h"
#include "raw.h"

#define WAIT_MS NODES_WAIT_MS

static tern_node *
listening(const char *id, int mode, char *bound, size_t len)
{
	tern_node *n = open_node(id, mode);

	assert_int_equal(tern_node_listen(n, "tcp://127.0.0.1:0", bound, len), 0);
	return n;
}

static tern_node *
connected(const char *id, int mode, const char *bound)
{
	tern_node *n = open_node(id, mode);

	assert_int_equal(tern_node_connect(n, bound), 0);
	assert_int_equal(tern_node_wait_peers(n, 1, WAIT_MS), 0);
	return n;
}

/* Wait until the router has the subscriptions that match key: a peer-mode
 * publisher on it is matched `want` times. */
static void
router_knows(tern_node *probe, const char *key, int want)
{
	tern_pub *p;

	assert_int_equal(tern_pub_open(&p, probe, key, TERN_RELIABLE), 0);
	assert_int_equal(wait_matched(p, want), want);
	tern_pub_close(p);
}

static bool
is_sub(const struct ctl_msg *m, const char *ke)
{
	return m->type == CTL_SUB && m->u.sub.keyexpr.len == strlen(ke) &&
	       memcmp(m->u.sub.keyexpr.p, ke, strlen(ke)) == 0;
}

/* Read up to the next SYNC; the SUBs before it, by key expression, into
 * seen (a comma-separated list). */
static void
until_sync(struct raw *r, char *seen, size_t len)
{
	uint64_t deadline = now_ms() + WAIT_MS;
	struct ctl_msg m;

	seen[0] = '\0';
	while (raw_next(r, &m, deadline)) {
		if (m.type == CTL_SYNC) {
			return;
		}
		if (m.type == CTL_SUB) {
			size_t at = strlen(seen);
			snprintf(seen + at, len - at, "%s%.*s", at > 0 ? "," : "",
			         (int)m.u.sub.keyexpr.len, m.u.sub.keyexpr.p);
		}
	}
	fail_msg("no SYNC from the router in %d ms", WAIT_MS);
}

/* A SCOPE alone: to a node that ends the connection for it, nothing more
 * is written. */
static void
scope_only(struct raw *r, const char *ke)
{
	struct ctl_msg m = {.type = CTL_SCOPE};

	m.u.scope = S(ke);
	raw_send(r, &m);
}

static void
send_scope(struct raw *r, const char *ke)
{
	struct ctl_msg sync = {.type = CTL_SYNC};

	scope_only(r, ke);
	raw_send(r, &sync);
}

static void
unscope(struct raw *r, const char *ke)
{
	struct ctl_msg m = {.type = CTL_UNSCOPE};
	struct ctl_msg sync = {.type = CTL_SYNC};

	m.u.scope = S(ke);
	raw_send(r, &m);
	raw_send(r, &sync);
}

/* Read up to the next SYNC: how many UNSUBs (withdrawn) came before it. */
static int
withdrawn_until_sync(struct raw *r)
{
	uint64_t deadline = now_ms() + WAIT_MS;
	struct ctl_msg m;
	int n = 0;

	while (raw_next(r, &m, deadline)) {
		if (m.type == CTL_SYNC) {
			return n;
		}
		n += m.type == CTL_UNSUB && m.u.sub.end == CTL_UNSUB_WITHDRAWN;
	}
	fail_msg("no SYNC from the router in %d ms", WAIT_MS);
	return -1;
}

static void
test_scope_on_the_wire(void **state)
{
	char bound[128], seen[512];
	tern_node *r = listening("r", TERN_MODE_ROUTER, bound, sizeof(bound));
	tern_node *p = connected("p", TERN_MODE_PEER, bound);
	tern_sub *ax, *a, *bany, *later, *other, *marker;
	struct raw c;
	struct ctl_msg m;

	(void)state;
	assert_int_equal(tern_sub_open(&ax, p, "a/x", NULL, NULL), 0);
	assert_int_equal(tern_sub_open(&bany, p, "b/**", NULL, NULL), 0);
	assert_int_equal(tern_sub_open(&a, p, "a", NULL, NULL), 0);
	router_knows(r, "a", 1);
	router_knows(r, "b/q", 1);
	router_knows(r, "a/x", 1);

	raw_open_as(&c, bound, "c", TERN_MODE_CLIENT);
	until_sync(&c, seen, sizeof(seen));
	assert_string_equal(seen, ""); /* its scope is empty */

	send_scope(&c, "a/x");
	until_sync(&c, seen, sizeof(seen));
	assert_string_equal(seen, "a/x");
	send_scope(&c, "a/x"); /* known: nothing again */
	until_sync(&c, seen, sizeof(seen));
	assert_string_equal(seen, "");
	send_scope(&c, "b/q");
	until_sync(&c, seen, sizeof(seen));
	assert_string_equal(seen, "b/**");
	send_scope(&c, "a"); /* a prefix of what it asked for is new */
	until_sync(&c, seen, sizeof(seen));
	assert_string_equal(seen, "a");
	/* taken back: what no other expression meets is withdrawn */
	unscope(&c, "b/q");
	assert_int_equal(withdrawn_until_sync(&c), 1);
	unscope(&c, "b/q"); /* not in it any more: nothing */
	assert_int_equal(withdrawn_until_sync(&c), 0);
	send_scope(&c, "b/q"); /* and asked again: told again */
	until_sync(&c, seen, sizeof(seen));
	assert_string_equal(seen, "b/**");

	/* later ones: "c/y" meets nothing it asked for, "a/ *" (a wildcard)
	 * does; the router handles p's declarations in order, so once the
	 * wildcard came, "c/y" would have come before it */
	assert_int_equal(tern_sub_open(&other, p, "c/y", NULL, NULL), 0);
	assert_int_equal(tern_sub_open(&later, p, "a/*", NULL, NULL), 0);
	for (uint64_t deadline = now_ms() + WAIT_MS;;) {
		assert_true(raw_next(&c, &m, deadline));
		assert_false(is_sub(&m, "c/y"));
		if (is_sub(&m, "a/*")) {
			break;
		}
	}
	/* and its end, since it was told of it */
	tern_sub_close(later);
	for (uint64_t deadline = now_ms() + WAIT_MS;;) {
		assert_true(raw_next(&c, &m, deadline));
		if (m.type == CTL_UNSUB && m.u.sub.end == CTL_UNSUB_ENDED) {
			break;
		}
	}
	/* "c/y" ended too, untold: no UNSUB of it comes before the SUB of a second "a/x" */
	tern_sub_close(other);
	assert_int_equal(tern_sub_open(&marker, p, "a/x", NULL, NULL), 0);
	for (uint64_t deadline = now_ms() + WAIT_MS;;) {
		assert_true(raw_next(&c, &m, deadline));
		assert_false(m.type == CTL_UNSUB);
		if (is_sub(&m, "a/x")) {
			break;
		}
	}
	close(c.fd);
	tern_sub_close(marker);
	tern_sub_close(bany);
	tern_sub_close(a);
	tern_sub_close(ax);
	tern_node_close(p);
	tern_node_close(r);
}

/* The router ends the connection: reads stop before the deadline. */
static void
ended(struct raw *c)
{
	uint64_t deadline = now_ms() + WAIT_MS;
	struct ctl_msg m;

	c->shut = true; /* a PING now would be answered into a closed socket */
	while (raw_next(c, &m, deadline)) {
	}
	assert_true(now_ms() < deadline);
	close(c->fd);
}

static void
test_scope_from_a_peer_refused(void **state)
{
	char bound[128], seen[64];
	tern_node *r = listening("r", TERN_MODE_ROUTER, bound, sizeof(bound));
	struct raw c;

	(void)state;
	raw_open_as(&c, bound, "notaclient", TERN_MODE_PEER);
	scope_only(&c, "a/x");
	ended(&c);
	/* and a client's SCOPE that is no key expression */
	raw_open_as(&c, bound, "badclient", TERN_MODE_CLIENT);
	until_sync(&c, seen, sizeof(seen));
	scope_only(&c, "a//x");
	ended(&c);
	tern_node_close(r);
}

/* n reliable messages on pub, each its number; then the subscriber gets
 * each of them once, in order. */
static void
publish_and_check(tern_pub *pub, tern_sub *sub, int n)
{
	for (int k = 1; k <= n; k++) {
		assert_int_equal(tern_publish(pub, &k, sizeof(k)), 0);
	}
	assert_int_equal(tern_pub_flush(pub, WAIT_MS), 0);
	for (int k = 1; k <= n; k++) {
		tern_msg msg;
		int v;
		assert_int_equal(tern_sub_recv(sub, &msg, WAIT_MS), 0);
		assert_int_equal(msg.len, sizeof(v));
		memcpy(&v, msg.data, sizeof(v));
		assert_int_equal(v, k);
	}
}

static void
test_client_publishes(void **state)
{
	char bound[128], why[64];
	tern_node *r = listening("r", TERN_MODE_ROUTER, bound, sizeof(bound));
	tern_node *s = connected("s", TERN_MODE_PEER, bound);
	tern_node *c = open_node("c", TERN_MODE_CLIENT);
	tern_pub *before, *after, *late, *at_once;
	tern_sub *sk, *sk2, *sk3, *slate, *mine;

	(void)state;
	assert_int_equal(tern_node_listen(c, "tcp://127.0.0.1:0", why, sizeof(why)), TERN_EINVAL);
	assert_int_equal(tern_sub_open(&sk, s, "k", NULL, NULL), 0);
	assert_int_equal(tern_sub_open(&sk2, s, "k2/**", NULL, NULL), 0);
	router_knows(r, "k", 1);
	router_knows(r, "k2/x", 1);
	assert_int_equal(tern_sub_open(&sk3, s, "k3", NULL, NULL), 0);
	router_knows(r, "k3", 1);

	/* opened before the client connects: matched once it is ready */
	assert_int_equal(tern_pub_open(&before, c, "k2/x", TERN_RELIABLE), 0);
	assert_int_equal(tern_pub_matched(before), 0);
	assert_int_equal(tern_node_connect(c, bound), 0);
	assert_int_equal(tern_node_wait_peers(c, 1, WAIT_MS), 0);
	assert_int_equal(tern_pub_matched(before), 1);
	/* opened after: matched when tern_pub_open returns */
	assert_int_equal(tern_pub_open(&after, c, "k", TERN_RELIABLE), 0);
	assert_int_equal(tern_pub_matched(after), 1);
	publish_and_check(after, sk, 1000);
	publish_and_check(before, sk2, 1000);
	/* published to at once, with no look at its match count first, on a
	 * key none of the client's others meets */
	assert_int_equal(tern_pub_open(&at_once, c, "k3", TERN_RELIABLE), 0);
	publish_and_check(at_once, sk3, 1000);

	/* a subscription that comes later reaches the client */
	assert_int_equal(tern_pub_open(&late, c, "late", TERN_RELIABLE), 0);
	assert_int_equal(tern_pub_matched(late), 0);
	assert_int_equal(tern_sub_open(&slate, s, "late", NULL, NULL), 0);
	assert_int_equal(wait_matched(late, 1), 1);
	publish_and_check(late, slate, 100);
	/* closed, its key is taken back (UNSCOPE); opened again, told again */
	assert_int_equal(tern_pub_close(late), 0);
	assert_int_equal(tern_pub_open(&late, c, "late", TERN_RELIABLE), 0);
	assert_int_equal(tern_pub_matched(late), 1);
	publish_and_check(late, slate, 100);

	/* its own subscription: told to the router like any other */
	assert_int_equal(tern_sub_open(&mine, c, "to/c", NULL, NULL), 0);
	{
		tern_pub *to_c;
		assert_int_equal(tern_pub_open(&to_c, s, "to/c", TERN_RELIABLE), 0);
		assert_int_equal(wait_matched(to_c, 1), 1);
		publish_and_check(to_c, mine, 100);
		assert_int_equal(tern_pub_close(to_c), 0);
	}

	assert_int_equal(tern_pub_close(before), 0);
	assert_int_equal(tern_pub_close(after), 0);
	assert_int_equal(tern_pub_close(at_once), 0);
	assert_int_equal(tern_pub_close(late), 0);
	tern_sub_close(mine);
	tern_sub_close(slate);
	tern_sub_close(sk3);
	tern_sub_close(sk2);
	tern_sub_close(sk);
	tern_node_close(c);
	tern_node_close(s);
	tern_node_close(r);
}

#define RKEYS 100

static atomic_long r_received;

static void
count_msg(void *arg, const tern_msg *m)
{
	(void)arg;
	(void)m;
	atomic_fetch_add(&r_received, 1);
}

/* Wait (bounded) until every publisher's match count is want: how many are. */
static int
all_matched(tern_pub **pubs, int want)
{
	int n = 0;

	for (int w = 0; w < WAIT_MS / 10; w++, usleep(10000)) {
		n = 0;
		for (int k = 0; k < RKEYS; k++) {
			n += tern_pub_matched(pubs[k]) == want;
		}
		if (n == RKEYS) {
			break;
		}
	}
	return n;
}

/* A message on each key; every one arrives (bounded wait). */
static void
one_each(tern_pub **pubs, long total)
{
	for (int k = 0; k < RKEYS; k++) {
		assert_int_equal(tern_publish(pubs[k], &k, sizeof(k)), 0);
	}
	for (int w = 0; w < WAIT_MS / 10 && atomic_load(&r_received) < total; w++) {
		usleep(10000);
	}
	assert_int_equal(atomic_load(&r_received), total);
}

/* The router goes and comes back: the client names its keys again, and its
 * publishers find the subscriptions again. */
static void
test_router_restart(void **state)
{
	char dir[] = "/tmp/tern-client-XXXXXX", ep[128], key[160];
	tern_node *r, *s, *c;
	tern_pub *pubs[RKEYS];
	tern_sub *subs[RKEYS];

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(ep, sizeof(ep), "unix://%s/router.sock", dir);
	r = open_redialing("r", TERN_MODE_ROUTER);
	assert_int_equal(tern_node_listen(r, ep, NULL, 0), 0);
	s = open_redialing("s", TERN_MODE_PEER);
	c = open_redialing("c", TERN_MODE_CLIENT);
	assert_int_equal(tern_node_connect(s, ep), 0);
	assert_int_equal(tern_node_connect(c, ep), 0);
	assert_int_equal(tern_node_wait_peers(r, 2, WAIT_MS), 0);
	for (int k = 0; k < RKEYS; k++) {
		snprintf(key, sizeof(key), "c/%d", k);
		assert_int_equal(tern_sub_open(&subs[k], s, key, count_msg, NULL), 0);
		assert_int_equal(tern_pub_open(&pubs[k], c, key, TERN_RELIABLE), 0);
	}
	assert_int_equal(all_matched(pubs, 1), RKEYS);
	one_each(pubs, RKEYS);

	tern_node_close(r);
	assert_int_equal(all_matched(pubs, 0), RKEYS);
	r = open_redialing("r", TERN_MODE_ROUTER);
	assert_int_equal(tern_node_listen(r, ep, NULL, 0), 0);
	assert_int_equal(tern_node_wait_peers(r, 2, WAIT_MS), 0);
	assert_int_equal(all_matched(pubs, 1), RKEYS);
	one_each(pubs, 2 * RKEYS);

	for (int k = 0; k < RKEYS; k++) {
		assert_int_equal(tern_pub_close(pubs[k]), 0);
		tern_sub_close(subs[k]);
	}
	tern_node_close(c);
	tern_node_close(s);
	tern_node_close(r);
	snprintf(key, sizeof(key), "%s/router.sock", dir);
	unlink(key);
	rmdir(dir);
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest all[] = {
	    cmocka_unit_test(test_scope_on_the_wire),
	    cmocka_unit_test(test_scope_from_a_peer_refused),
	    cmocka_unit_test(test_client_publishes),
	    cmocka_unit_test(test_router_restart),
	};

	signal(SIGPIPE, SIG_IGN); /* a write to a closed peer fails its assert instead */
	if (argc > 1) {
		cmocka_set_test_filter(argv[1]);
	}
	return cmocka_run_group_tests(all, NULL, NULL);
}
