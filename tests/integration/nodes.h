/*
 * nodes.h - what the routing tests share (include after cmocka.h): a node
 * with an id and a mode, quiet but for errors, and a bounded wait for a
 * publisher's match count.
 */
#ifndef TERN_TEST_NODES_H
#define TERN_TEST_NODES_H

#include <unistd.h>

#include "tern/tern.h"

#define NODES_WAIT_MS 30000

/* A configuration with an id and a mode, quiet but for errors: for a test
 * that changes more before it opens the node. */
static inline void
node_config(tern_config *cfg, const char *id, int mode)
{
	tern_config_init(cfg);
	cfg->id = id;
	cfg->mode = mode;
	cfg->log_level = TERN_LOG_ERROR;
}

static inline tern_node *
open_node(const char *id, int mode)
{
	tern_config cfg;
	tern_node *n;

	node_config(&cfg, id, mode);
	assert_int_equal(tern_node_open(&n, &cfg), 0);
	return n;
}

/* A node that dials its router again within half a second after it goes
 * (a test that restarts the router), with no telemetry. */
static inline tern_node *
open_redialing(const char *id, int mode)
{
	tern_config cfg;
	tern_node *n;

	node_config(&cfg, id, mode);
	cfg.reconnect_max_ms = 500;
	cfg.telemetry_interval_ms = 0;
	assert_int_equal(tern_node_open(&n, &cfg), 0);
	return n;
}

/* Wait (up to NODES_WAIT_MS) until pub's match count is `want`; the count
 * at the end. */
static inline int
wait_matched(tern_pub *pub, int want)
{
	int n = tern_pub_matched(pub);

	for (int w = 0; w < NODES_WAIT_MS && n != want; w++) {
		usleep(1000);
		n = tern_pub_matched(pub);
	}
	return n;
}

#endif
