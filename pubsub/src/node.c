/*
 * node.c - the public node API: configuration defaults and checks, open,
 * listen, connect, wait for peers, counters, close. The work happens in
 * the session (session.h) and its I/O thread (loop.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "acl.h"
#include "clock.h"
#include "control.h"
#include "error.h"
#include "log.h"
#include "node.h"
#include "session.h"
#include "telemetry.h"
#include "tls.h"

struct tern_node {
	tern_config cfg; /* cfg.id points at id */
	char id[CTL_ID_MAX + 1];
	char *tls_cert, *tls_key, *tls_ca; /* cfg.tls_* point at these */
	struct logger log;
	struct session *session;
	struct telemetry *telemetry; /* NULL: telemetry.interval_ms is 0 */
	tern_acl_rule *acl;          /* cfg.acl points at this copy (one block) */
};

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
	cfg->telemetry_interval_ms = 1000;
	cfg->tls_verify_peer = -1;
	cfg->log_level = TERN_LOG_INFO;
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
	if (cfg->mode != TERN_MODE_PEER && cfg->mode != TERN_MODE_ROUTER &&
	    cfg->mode != TERN_MODE_CLIENT) {
		return tern__error(TERN_EINVAL, "mode must be peer, router or client");
	}
	if (cfg->slow_consumer_ms == 0) {
		return tern__error(TERN_EINVAL, "slow_consumer_ms must be > 0");
	}
	if (cfg->telemetry_interval_ms != 0 &&
	    (cfg->telemetry_interval_ms < 10 || cfg->telemetry_interval_ms > 3600000)) {
		return tern__error(TERN_EINVAL,
		                   "telemetry.interval_ms must be 0 (off) or 10 .. 3600000");
	}
	if (cfg->tls_verify_peer < -1 || cfg->tls_verify_peer > 1) {
		return tern__error(TERN_EINVAL, "tls_verify_peer must be -1 (auto), 0 or 1");
	}
	if (cfg->keepalive_ms == 0 || cfg->reconnect_initial_ms == 0 ||
	    cfg->reconnect_max_ms < cfg->reconnect_initial_ms) {
		return tern__error(TERN_EINVAL, "keepalive and reconnect delays must be > 0");
	}
	if (cfg->acl_set) {
		return tern_acl_check(cfg->acl, cfg->acl_len);
	}
	return 0;
}

int
tern_config_check(const tern_config *cfg)
{
	struct tls_ctx *tls = NULL;
	int rc = validate_config(cfg);

	if (rc == 0 && (cfg->tls_cert != NULL || cfg->tls_key != NULL || cfg->tls_ca != NULL)) {
		rc = tls_ctx_new(&tls, cfg->tls_cert, cfg->tls_key, cfg->tls_ca,
		                 cfg->tls_verify_peer);
		tls_ctx_free(tls);
	}
	return rc;
}

/* A copy of *field, which then points at it (NULL stays NULL). */
static bool
copy_str(char **owned, const char **field)
{
	if (*field == NULL) {
		return true;
	}
	*owned = strdup(*field);
	*field = *owned;
	return *owned != NULL;
}

static void
node_free(struct tern_node *node)
{
	free(node->tls_cert);
	free(node->tls_key);
	free(node->tls_ca);
	free(node->acl);
	free(node);
}

int
tern_node_open(tern_node **out, const tern_config *cfg)
{
	uint64_t instance, window_init, window_max;
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
	node->cfg = *cfg;
	if (cfg->id != NULL) {
		snprintf(node->id, sizeof(node->id), "%s", cfg->id);
	} else {
		default_id(node->id, sizeof(node->id));
	}
	node->cfg.id = node->id;
	if (!copy_str(&node->tls_cert, &node->cfg.tls_cert) ||
	    !copy_str(&node->tls_key, &node->cfg.tls_key) ||
	    !copy_str(&node->tls_ca, &node->cfg.tls_ca)) {
		node_free(node);
		return TERN_ENOMEM;
	}
	if (cfg->acl_set && cfg->acl_len > 0) {
		if ((node->acl = acl_copy(cfg->acl, cfg->acl_len)) == NULL) {
			node_free(node);
			return TERN_ENOMEM;
		}
		node->cfg.acl = node->acl;
	}
	node->log.id = node->id;
	node->log.level = cfg->log_level;
	node->log.fn = cfg->log_fn;
	node->log.arg = cfg->log_arg;
	if (getrandom(&instance, sizeof(instance), 0) != sizeof(instance)) {
		instance = clock_ns() ^ ((uint64_t)getpid() << 32);
	}
	/* the window a receiving channel starts with, and where it stops */
	window_init = 256u << 10;
	if (window_init < 2ull * cfg->chunk_bytes) {
		window_init = 2ull * cfg->chunk_bytes;
	}
	window_max = cfg->queue_max_bytes / 2;
	if (window_max < window_init) {
		window_max = window_init;
	}
	rc =
	    session_open(&node->session, &node->cfg, &node->log, instance, window_init, window_max);
	if (rc != 0) {
		node_free(node);
		return rc;
	}
	if (node->cfg.telemetry_interval_ms > 0 &&
	    (rc = telemetry_start(&node->telemetry, node->session, &node->cfg)) != 0) {
		session_close(node->session);
		node_free(node);
		return rc;
	}
	*out = node;
	return 0;
}

const char *
tern_node_id(const tern_node *node)
{
	return node->id;
}

int
tern_node_listen(tern_node *node, const char *endpoint, char *bound, size_t bound_len)
{
	if (node->cfg.mode == TERN_MODE_CLIENT) {
		return tern__error(TERN_EINVAL, "a node in client mode does not listen (%s)",
		                   endpoint);
	}
	return loop_listen(session_loop(node->session), endpoint, bound, bound_len);
}

int
tern_node_connect(tern_node *node, const char *endpoint)
{
	return loop_connect(session_loop(node->session), endpoint);
}

int
tern_node_wait_peers(tern_node *node, int n, int timeout_ms)
{
	return loop_wait_peers(session_loop(node->session), n, timeout_ms);
}

void
tern_node_stats(tern_node *node, tern_stats *st)
{
	session_stats(node->session, st);
}

size_t
tern_node_stats_json(tern_node *node, char *buf, size_t len)
{
	return session_stats_json(node->session, buf, len);
}

void
tern_node_close(tern_node *node)
{
	if (node == NULL) {
		return;
	}
	telemetry_stop(node->telemetry);
	session_close(node->session);
	node_free(node);
}

struct session *
tern__node_session(tern_node *node)
{
	return node->session;
}
