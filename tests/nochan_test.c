/*
 * nochan_test.c - a reliable publisher whose channel to a subscribing peer
 * cannot be opened learns it: tern_publish and tern_pub_close return
 * TERN_ENOMEM naming the peer and the key, rather than 0 for messages that
 * never leave. A best-effort publisher in the same spot goes on (its
 * losses are allowed); a publisher opened afterwards, with memory, reaches
 * the subscriber.
 *
 * The failure is an allocation made to fail: while `fail_chan` is set,
 * calloc of a send channel's size returns NULL (the same interposition as
 * alloc_test.c; the sanitizers bring their own allocator, so it is skipped
 * there).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tern/tern.h"

#include "outchan.h"

#include "sanitized.h"

#define WAIT_MS 30000

#ifndef TERN_TEST_SANITIZED
extern void *__libc_calloc(size_t, size_t);
static atomic_bool fail_chan;
static atomic_int failed;

void *
calloc(size_t a, size_t b)
{
	if (a == 1 && b == sizeof(struct outchan) && atomic_load(&fail_chan)) {
		atomic_fetch_add(&failed, 1);
		return NULL;
	}
	return __libc_calloc(a, b);
}

static tern_node *
open_node(const char *id)
{
	tern_config cfg;
	tern_node *n;

	tern_config_init(&cfg);
	cfg.id = id;
	cfg.log_level = TERN_LOG_ERROR;
	cfg.publish_timeout_ms = 2000;
	assert_int_equal(tern_node_open(&n, &cfg), 0);
	return n;
}

/* Wait (bounded) until pub's match count is at least 1. */
static int
wait_matched(tern_pub *pub)
{
	int n = tern_pub_matched(pub);

	for (int w = 0; w < WAIT_MS && n == 0; w++) {
		usleep(1000);
		n = tern_pub_matched(pub);
	}
	return n;
}
#endif

static void
test_publisher_learns_of_a_missing_channel(void **state)
{
#ifndef TERN_TEST_SANITIZED
	tern_node *a = open_node("nochan-sub"), *b = open_node("nochan-pub");
	tern_pub *lost, *best, *ok;
	char bound[256];
	tern_sub *sub;
	tern_msg m;
	int x = 1;

	(void)state;
	assert_int_equal(tern_node_listen(a, "tcp://127.0.0.1:0", bound, sizeof(bound)), 0);
	assert_int_equal(tern_sub_open(&sub, a, "k/**", NULL, NULL), 0);
	assert_int_equal(tern_node_connect(b, bound), 0);
	assert_int_equal(tern_node_wait_peers(b, 1, WAIT_MS), 0);
	/* the subscription has reached b: a publisher opened now opens its
	 * channel inside tern_pub_open */
	assert_int_equal(tern_pub_open(&ok, b, "k/probe", TERN_RELIABLE), 0);
	assert_int_equal(wait_matched(ok), 1);
	assert_int_equal(tern_pub_close(ok), 0);

	atomic_store(&fail_chan, true);
	assert_int_equal(tern_pub_open(&lost, b, "k/lost", TERN_RELIABLE), 0);
	assert_int_equal(tern_pub_open(&best, b, "k/best", TERN_BEST_EFFORT), 0);
	atomic_store(&fail_chan, false);
	assert_int_equal(atomic_load(&failed), 2);

	assert_int_equal(tern_publish(lost, &x, sizeof(x)), TERN_ENOMEM);
	assert_non_null(strstr(tern_last_error(), "nochan-sub"));
	assert_non_null(strstr(tern_last_error(), "k/lost"));
	assert_int_equal(tern_publish(best, &x, sizeof(x)), 0);

	/* memory is back: a new publisher reaches the subscriber */
	assert_int_equal(tern_pub_open(&ok, b, "k/ok", TERN_RELIABLE), 0);
	assert_int_equal(wait_matched(ok), 1);
	assert_int_equal(tern_publish(ok, &x, sizeof(x)), 0);
	assert_int_equal(tern_sub_recv(sub, &m, WAIT_MS), 0);
	assert_string_equal(m.key, "k/ok");

	assert_int_equal(tern_pub_close(lost), TERN_ENOMEM);
	assert_int_equal(tern_pub_close(best), 0);
	assert_int_equal(tern_pub_close(ok), 0);
	tern_sub_close(sub);
	tern_node_close(b);
	tern_node_close(a);
#else
	(void)state;
	skip();
#endif
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_publisher_learns_of_a_missing_channel),
	};
	return cmocka_run_group_tests_name("nochan", tests, NULL, NULL);
}
