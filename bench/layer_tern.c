/*
 * layer_tern.c - the tern layer: the same messages carried by tern
 * publishers and subscribers, through tern.h only.
 *
 * The server is a node that listens, subscribes to "bench/up" with a
 * callback and publishes answers on "bench/down". A client is a node that
 * connects, publishes on "bench/up" and, when it expects answers, subscribes
 * to "bench/down". Each client is its own node, so fanin's publishers each
 * have their own connection. With --keys N a client declares N publishers
 * "bench/up/0" .. "bench/up/N-1" and sends round-robin over them; the
 * server subscribes to each "bench/up/K" with one wildcard subscription.
 */
#include "layer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tern/tern.h>
#include <time.h>

#define KEY_UP   "bench/up"
#define KEY_DOWN "bench/down"

struct tern_server {
	tern_node *node;
	tern_sub *sub, *sub_keys;
	tern_pub *pub;
	layer_msg_fn fn;
	void *arg;
	char error[200];
};

struct tern_client {
	tern_node *node;
	tern_pub *pub;
	tern_pub **pubs; /* with keys > 1: one a key, pub is pubs[0] */
	uint32_t keys, next;
	tern_sub *sub;
	layer_msg_fn fn;
	void *arg;
};

/* The run's certificate files, named for tern_config (copied at open). */
struct tls_paths {
	char cert[512], key[512];
};

/* "tcp://H:P" as "tls://H:P" (or back): the cell and its link relay speak
 * of TCP addresses; tern needs the scheme to know it is TLS. */
static void
with_scheme(char *out, size_t len, const char *scheme, const char *ep)
{
	const char *rest = strstr(ep, "://");

	snprintf(out, len, "%s%s", scheme, rest != NULL ? rest : ep);
}

static void
node_config(tern_config *cfg, const struct layer_opts *o, struct tls_paths *tls)
{
	tern_config_init(cfg);
	cfg->low_latency = o->lowlat;
	if (o->batch_bytes != 0) {
		cfg->batch_max_bytes = o->batch_bytes;
	}
	/* The bytes scenario sends 64 MiB messages; leave room for framing. */
	if (cfg->max_message_bytes < LAYER_MAX_MESSAGE) {
		cfg->max_message_bytes = LAYER_MAX_MESSAGE;
	}
	if (o->tls_dir != NULL) {
		snprintf(tls->cert, sizeof(tls->cert), "%s/cert.pem", o->tls_dir);
		snprintf(tls->key, sizeof(tls->key), "%s/key.pem", o->tls_dir);
		cfg->tls_cert = tls->cert;
		cfg->tls_key = tls->key;
		cfg->tls_ca = tls->cert; /* self-signed: its own authority */
	}
	cfg->log_level = TERN_LOG_WARN;
	/* A publisher stalled this long has failed its cell; do not wait longer. */
	cfg->publish_timeout_ms = 5000;
}

static void
server_on_msg(void *arg, const tern_msg *msg)
{
	struct tern_server *s = arg;

	s->fn(s->arg, 0, msg->data, msg->len);
}

static void
tern_server_close(void *srv)
{
	struct tern_server *s = srv;

	if (s == NULL) {
		return;
	}
	tern_sub_close(s->sub);
	tern_sub_close(s->sub_keys);
	tern_pub_close(s->pub);
	tern_node_close(s->node);
	free(s);
}

static int
fail(char *err, size_t err_len, const char *what, int rc)
{
	snprintf(err, err_len, "tern: %s: %s (%s)", what, tern_strerror(rc), tern_last_error());
	return -1;
}

static int
tern_server_open(void **out, const struct layer_opts *o, const char *listen_ep, layer_msg_fn fn,
                 void *arg, char *bound, size_t bound_len, char *err, size_t err_len)
{
	struct tern_server *s = calloc(1, sizeof(*s));
	struct tls_paths tls;
	tern_config cfg;
	int rc;

	*out = NULL;
	if (s == NULL) {
		snprintf(err, err_len, "tern server: out of memory");
		return -1;
	}
	s->fn = fn;
	s->arg = arg;
	node_config(&cfg, o, &tls);
	cfg.id = "bench-receiver";
	if (o->tls_dir != NULL && strncmp(listen_ep, "tcp://", 6) != 0) {
		free(s);
		snprintf(err, err_len, "tern: TLS needs a TCP link, not %s", listen_ep);
		return -1;
	}
	rc = tern_node_open(&s->node, &cfg);
	if (rc != 0) {
		free(s);
		return fail(err, err_len, "open the receiver node", rc);
	}
	if (o->tls_dir != NULL) {
		char tls_ep[300];
		with_scheme(tls_ep, sizeof(tls_ep), "tls", listen_ep);
		rc = tern_node_listen(s->node, tls_ep, bound, bound_len);
		if (rc == 0) {
			with_scheme(tls_ep, sizeof(tls_ep), "tcp", bound);
			snprintf(bound, bound_len, "%s", tls_ep);
		}
	} else {
		rc = tern_node_listen(s->node, listen_ep, bound, bound_len);
	}
	if (rc == 0) {
		rc = tern_sub_open(&s->sub, s->node, KEY_UP, server_on_msg, s);
	}
	if (rc == 0 && o->keys > 1) {
		rc = tern_sub_open(&s->sub_keys, s->node, KEY_UP "/*", server_on_msg, s);
	}
	if (rc == 0) {
		rc = tern_pub_open(&s->pub, s->node, KEY_DOWN, TERN_RELIABLE);
	}
	if (rc != 0) {
		fail(err, err_len, "set up the receiver", rc);
		tern_server_close(s);
		return -1;
	}
	*out = s;
	return 0;
}

static int
tern_server_reply(void *srv, uint32_t conn, const void *data, size_t len)
{
	struct tern_server *s = srv;
	int rc;

	(void)conn;
	rc = tern_publish(s->pub, data, len);
	if (rc != 0 && s->error[0] == '\0') {
		snprintf(s->error, sizeof(s->error), "tern: reply: %s", tern_strerror(rc));
	}
	return rc;
}

static const char *
tern_server_error(void *srv)
{
	struct tern_server *s = srv;

	return s->error[0] ? s->error : NULL;
}

static void
client_on_msg(void *arg, const tern_msg *msg)
{
	struct tern_client *c = arg;

	c->fn(c->arg, 0, msg->data, msg->len);
}

static void
tern_client_close(void *cli)
{
	struct tern_client *c = cli;

	if (c == NULL) {
		return;
	}
	tern_sub_close(c->sub);
	if (c->pubs != NULL) {
		for (uint32_t i = 0; i < c->keys && c->pubs[i] != NULL; i++) {
			tern_pub_close(c->pubs[i]);
		}
		free(c->pubs);
	} else {
		tern_pub_close(c->pub);
	}
	tern_node_close(c->node);
	free(c);
}

static int
tern_client_open(void **out, const struct layer_opts *o, const char *ep, layer_msg_fn reply_fn,
                 void *arg, char *err, size_t err_len)
{
	struct tern_client *c = calloc(1, sizeof(*c));
	struct tls_paths tls;
	char tls_ep[300];
	tern_config cfg;
	int rc;

	*out = NULL;
	if (c == NULL) {
		snprintf(err, err_len, "tern client: out of memory");
		return -1;
	}
	c->fn = reply_fn;
	c->arg = arg;
	node_config(&cfg, o, &tls);
	rc = tern_node_open(&c->node, &cfg);
	if (rc != 0) {
		free(c);
		return fail(err, err_len, "open a sender node", rc);
	}
	c->keys = o->keys > 1 ? o->keys : 1;
	if (c->keys == 1) {
		rc = tern_pub_open(&c->pub, c->node, KEY_UP, TERN_RELIABLE);
	} else if ((c->pubs = calloc(c->keys, sizeof(*c->pubs))) == NULL) {
		rc = TERN_ENOMEM;
	} else {
		char key[64];
		rc = 0;
		for (uint32_t i = 0; i < c->keys && rc == 0; i++) {
			layer_key(key, sizeof(key), c->keys, i);
			rc = tern_pub_open(&c->pubs[i], c->node, key, TERN_RELIABLE);
		}
		c->pub = c->pubs[0];
	}
	if (rc == 0 && reply_fn != NULL) {
		rc = tern_sub_open(&c->sub, c->node, KEY_DOWN, client_on_msg, c);
	}
	if (rc == 0 && o->tls_dir != NULL) {
		with_scheme(tls_ep, sizeof(tls_ep), "tls", ep);
		ep = tls_ep;
	}
	if (rc == 0) {
		rc = tern_node_connect(c->node, ep);
	}
	if (rc != 0) {
		fail(err, err_len, "set up a sender node", rc);
		tern_client_close(c);
		return -1;
	}
	*out = c;
	return 0;
}

static int
tern_client_ready(void *cli, int timeout_ms, char *err, size_t err_len)
{
	struct tern_client *c = cli;
	struct timespec ms = {.tv_sec = 0, .tv_nsec = 1000000};
	int rc;
	int waited;

	rc = tern_node_wait_peers(c->node, 1, timeout_ms);
	if (rc != 0) {
		return fail(err, err_len, "the sender found no receiver", rc);
	}
	/* The peer is there; its subscription may still be on its way (the
	 * routes of many keys are made in the order they were declared) */
	tern_pub *last = c->pubs != NULL ? c->pubs[c->keys - 1] : c->pub;
	for (waited = 0; tern_pub_matched(c->pub) <= 0 || tern_pub_matched(last) <= 0; waited++) {
		if (waited >= timeout_ms) {
			snprintf(err, err_len,
			         "tern: the receiver's subscription never reached the "
			         "sender within %d ms",
			         timeout_ms);
			return -1;
		}
		nanosleep(&ms, NULL);
	}
	return 0;
}

static int
tern_client_send(void *cli, const void *data, size_t len)
{
	struct tern_client *c = cli;

	if (c->pubs != NULL) {
		tern_pub *p = c->pubs[c->next];
		c->next = c->next + 1 == c->keys ? 0 : c->next + 1;
		return tern_publish(p, data, len);
	}
	return tern_publish(c->pub, data, len);
}

/* Bytes the sender's node has written to its sockets. */
static uint64_t
written(tern_node *node)
{
	tern_stats st;

	tern_node_stats(node, &st);
	return st.batch_bytes;
}

static int
tern_client_flush(void *cli, bool final)
{
	struct tern_client *c = cli;
	int rc;

	/* tern writes as soon as its writer is idle; only the end needs a wait.
	 * Like the tcp layer's last blocking write, it waits as long as the
	 * link keeps taking data (a hundred senders drain one slow link for a
	 * while), and fails only when nothing moved for 5 s. */
	if (!final) {
		return 0;
	}
	for (;;) {
		uint64_t before = written(c->node);
		rc = 0;
		for (uint32_t i = 0; i < c->keys && rc == 0; i++) {
			rc = tern_pub_flush(c->pubs != NULL ? c->pubs[i] : c->pub, 5000);
		}
		if (rc != TERN_ETIMEDOUT || written(c->node) == before) {
			return rc;
		}
	}
}

const struct layer_ops layer_tern_ops = {
    .name = "tern",
    .server_open = tern_server_open,
    .server_reply = tern_server_reply,
    .server_error = tern_server_error,
    .server_close = tern_server_close,
    .client_open = tern_client_open,
    .client_ready = tern_client_ready,
    .client_send = tern_client_send,
    .client_flush = tern_client_flush,
    .client_close = tern_client_close,
};
