/*
 * goodbye_test.c - a closing node says GOODBYE and then writes nothing
 * more to that connection, whatever its peer still sends.
 *
 * A node that wrote after its goodbye (an acknowledgement of a message
 * that crossed the goodbye) failed that write on its own half-closed
 * socket, and closed the connection at once: a peer could then find the
 * connection broken before it read the goodbye, take the node for one that
 * would come back, and keep messages for it (a `tern pub` exited with
 * "4948 reliable messages ... were not delivered" after its router
 * restarted, in node_reconnect_router_restart). Here a raw peer reads the
 * goodbye, sends one more message (which the node reads and owes an
 * acknowledgement), gives the node a moment, and hangs up: the node must
 * see the peer hang up, not fail a write. (On a machine too slow to read
 * the message within that moment the test shows nothing either way; it
 * cannot fail for being slow.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <pthread.h>
#include <stdatomic.h>

#include "raw.h"

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char log_text[1 << 16];
static size_t log_len;
static atomic_int delivered;

static void
capture(void *arg, int level, const char *line)
{
	(void)arg;
	if (level > TERN_LOG_INFO) {
		return;
	}
	pthread_mutex_lock(&log_lock);
	size_t n = strlen(line);
	if (log_len + n + 2 < sizeof(log_text)) {
		memcpy(log_text + log_len, line, n);
		log_len += n;
		log_text[log_len++] = '\n';
		log_text[log_len] = '\0';
	}
	pthread_mutex_unlock(&log_lock);
}

static void
on_msg(void *arg, const tern_msg *m)
{
	(void)arg;
	(void)m;
	atomic_fetch_add(&delivered, 1);
}

static void *
close_node(void *arg)
{
	tern_node_close(arg);
	return NULL;
}

static bool
wait_delivered(int n)
{
	uint64_t deadline = now_ms() + NODES_WAIT_MS;

	while (atomic_load(&delivered) < n && now_ms() < deadline) {
		usleep(1000);
	}
	return atomic_load(&delivered) >= n;
}

static bool
log_has(const char *needle)
{
	pthread_mutex_lock(&log_lock);
	bool found = strstr(log_text, needle) != NULL;
	pthread_mutex_unlock(&log_lock);
	return found;
}

static void
test_nothing_written_after_goodbye(void **state)
{
	tern_config cfg;
	tern_node *n;
	tern_sub *sub;
	char bound[256];
	struct raw x;
	struct ctl_msg m, open = {.type = CTL_OPEN};
	pthread_t closer;
	bool bye = false;
	(void)state;

	tern_config_init(&cfg);
	cfg.id = "bye-node";
	cfg.log_fn = capture;
	cfg.log_level = TERN_LOG_INFO;
	assert_int_equal(tern_node_open(&n, &cfg), 0);
	assert_int_equal(tern_node_listen(n, "tcp://127.0.0.1:0", bound, sizeof(bound)), 0);
	assert_int_equal(tern_sub_open(&sub, n, "g/**", on_msg, NULL), 0);

	raw_open_as(&x, bound, "bye-raw", TERN_MODE_PEER);
	open.u.open.channel = 1;
	open.u.open.publisher = S("bye-raw-pub");
	open.u.open.key = S("g/1");
	open.u.open.reliability = TERN_RELIABLE;
	open.u.open.instance = 1;
	raw_send(&x, &open);
	raw_data(&x, 1, 1);
	assert_true(wait_delivered(1));
	tern_sub_close(sub); /* what comes now is read and dropped, and acknowledged */

	assert_int_equal(pthread_create(&closer, NULL, close_node, n), 0);
	uint64_t deadline = now_ms() + NODES_WAIT_MS;
	while (!bye && raw_next(&x, &m, deadline)) {
		bye = m.type == CTL_GOODBYE;
	}
	assert_true(bye);
	/* a message that crosses the goodbye: the node takes it (the peer's
	 * data is still read) and owes it an acknowledgement */
	raw_data(&x, 1, 2);
	for (int w = 0; w < 1000 && !log_has("disconnected from bye-raw"); w++) {
		usleep(1000);
	}
	x.shut = true;
	close(x.fd);
	pthread_join(closer, NULL);

	print_message("%s", log_text);
	assert_non_null(strstr(log_text, "disconnected from bye-raw"));
	assert_null(strstr(log_text, "write:"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_nothing_written_after_goodbye),
	};
	return cmocka_run_group_tests_name("goodbye", tests, NULL, NULL);
}
