/*
 * stats.c - the node's counters, as a struct and as one JSON object.
 */
#include <stdio.h>
#include <string.h>

#include "node.h"

static int
sum_batches(struct tern_node *node, void *arg)
{
	tern_stats *st = arg;

	st->messages = atomic_load(&node->messages_out);
	st->bytes = atomic_load(&node->bytes_out);
	st->dropped = atomic_load(&node->dropped);
	for (struct tern_pub *p = node->pubs; p != NULL; p = p->next) {
		st->messages += atomic_load(&p->messages);
		st->bytes += atomic_load(&p->bytes);
		st->dropped += atomic_load(&p->dropped);
	}
	st->batches = atomic_load(&node->batches);
	st->batch_bytes = atomic_load(&node->batch_bytes);
	st->batch_largest = atomic_load(&node->batch_largest);
	for (struct conn *c = node->conns; c != NULL; c = c->next) {
		uint64_t largest = atomic_load(&c->batch_largest);
		st->batches += atomic_load(&c->batches);
		st->batch_bytes += atomic_load(&c->batch_bytes);
		if (largest > st->batch_largest) {
			st->batch_largest = largest;
		}
	}
	return 0;
}

void
tern_node_stats(tern_node *node, tern_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->messages_in = atomic_load(&node->messages_in);
	st->bytes_in = atomic_load(&node->bytes_in);
	pthread_mutex_lock(&node->lock);
	st->connections = (uint64_t)node->ready_peers;
	pthread_mutex_unlock(&node->lock);
	node_call(node, sum_batches, st);
}

struct json_args {
	char *buf;
	size_t len, used;
};

static void emit(struct json_args *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#include <stdarg.h>
static void
emit(struct json_args *a, const char *fmt, ...)
{
	va_list ap;
	size_t room = a->used < a->len ? a->len - a->used : 0;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(a->buf ? a->buf + (a->used < a->len ? a->used : a->len) : NULL, room, fmt,
	              ap);
	va_end(ap);
	if (n > 0) {
		a->used += (size_t)n;
	}
}

/* A string with JSON's escapes (ids and keys are plain text, but checked). */
static void
emit_str(struct json_args *a, const char *s)
{
	emit(a, "\"");
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '"' || ch == '\\') {
			emit(a, "\\%c", ch);
		} else if (ch < 0x20) {
			emit(a, "\\u%04x", ch);
		} else {
			emit(a, "%c", ch);
		}
	}
	emit(a, "\"");
}

static int
do_json(struct tern_node *node, void *arg)
{
	struct json_args *a = arg;
	bool first = true;
	tern_stats st;

	sum_batches(node, &st);

	emit(a, "{\"id\":");
	emit_str(a, node->id);
	emit(a,
	     ",\"mode\":\"%s\",\"messages_out\":%llu,\"bytes_out\":%llu,\"dropped\":%llu,"
	     "\"messages_in\":%llu,\"bytes_in\":%llu,\"connections\":[",
	     node->cfg.mode == TERN_MODE_ROUTER ? "router" : "peer",
	     (unsigned long long)st.messages, (unsigned long long)st.bytes,
	     (unsigned long long)st.dropped, (unsigned long long)atomic_load(&node->messages_in),
	     (unsigned long long)atomic_load(&node->bytes_in));
	for (struct conn *c = node->conns; c != NULL; c = c->next) {
		if (c->state != CONN_READY) {
			continue;
		}
		emit(a, "%s{\"peer\":", first ? "" : ",");
		emit_str(a, c->peer_id);
		emit(a, ",\"endpoint\":");
		emit_str(a, c->endpoint);
		emit(a,
		     ",\"mode\":\"%s\",\"batches\":%llu,\"batch_bytes\":%llu,"
		     "\"batch_largest\":%llu,\"messages_in\":%llu,\"bytes_in\":%llu,"
		     "\"channels\":[",
		     c->low_latency ? "low-latency" : "batched",
		     (unsigned long long)atomic_load(&c->batches),
		     (unsigned long long)atomic_load(&c->batch_bytes),
		     (unsigned long long)atomic_load(&c->batch_largest),
		     (unsigned long long)atomic_load(&c->messages_in),
		     (unsigned long long)atomic_load(&c->bytes_in));
		pthread_mutex_lock(&c->wlock);
		for (int i = 0; i < c->nout; i++) {
			struct outchan *oc = c->outv[i];
			emit(a, "%s{\"key\":", i ? "," : "");
			emit_str(a, oc->src->key);
			emit(a, ",\"messages\":%llu,\"bytes\":%llu,\"dropped\":%llu}",
			     (unsigned long long)oc->messages, (unsigned long long)oc->bytes,
			     (unsigned long long)oc->dropped);
		}
		pthread_mutex_unlock(&c->wlock);
		emit(a, "]}");
		first = false;
	}
	emit(a, "]}");
	return 0;
}

size_t
tern_node_stats_json(tern_node *node, char *buf, size_t len)
{
	struct json_args a = {.buf = buf, .len = len};

	if (buf != NULL && len > 0) {
		buf[0] = '\0';
	}
	node_call(node, do_json, &a);
	return a.used;
}
