/*
 * control.c - MessagePack encoding of control messages through libmpack.
 *
 * The decoder reads token by token and checks each one's type against the
 * message's schema; libmpack must never be asked to read from an empty
 * buffer, so every read goes through next().
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <mpack.h>

#include "control.h"
#include "error.h"

struct enc {
	mpack_tokbuf_t tb;
	char *p;
	size_t left;
	bool full;
};

static void
put(struct enc *e, mpack_token_t t)
{
	if (!e->full && mpack_write(&e->tb, &e->p, &e->left, &t) != MPACK_OK) {
		e->full = true;
	}
}

static void
put_str(struct enc *e, struct ctl_str s)
{
	put(e, mpack_pack_str((mpack_uint32_t)s.len));
	if (s.len > 0) {
		put(e, mpack_pack_chunk(s.p, (mpack_uint32_t)s.len));
	}
}

static void
put_uint(struct enc *e, uint64_t v)
{
	put(e, mpack_pack_uint(v));
}

static int
arity(int type)
{
	static const int n[] = {
	    [CTL_HELLO] = 9, [CTL_SYNC] = 1,   [CTL_SUB] = 5,     [CTL_UNSUB] = 4,
	    [CTL_OPEN] = 6,  [CTL_CLOSE] = 2,  [CTL_CREDIT] = 4,  [CTL_BLOCKED] = 3,
	    [CTL_PING] = 2,  [CTL_PONG] = 3,   [CTL_GOODBYE] = 2, [CTL_DENY] = 6,
	    [CTL_SCOPE] = 2, [CTL_UNSCOPE] = 2};

	return (type >= CTL_HELLO && type <= CTL_LAST) ? n[type] : 0;
}

const char *
ctl_mode_name(uint64_t mode)
{
	return mode == TERN_MODE_ROUTER ? "router" : mode == TERN_MODE_CLIENT ? "client" : "peer";
}

int
ctl_encode(const struct ctl_msg *m, uint8_t *out, size_t cap)
{
	struct enc e = {.p = (char *)out, .left = cap};

	if (arity(m->type) == 0) {
		return TERN_EINVAL;
	}
	mpack_tokbuf_init(&e.tb);
	put(&e, mpack_pack_array((mpack_uint32_t)arity(m->type)));
	put_uint(&e, (uint64_t)m->type);
	switch (m->type) {
	case CTL_HELLO:
		put_str(&e, m->u.hello.id);
		put_uint(&e, m->u.hello.mode);
		put(&e, mpack_pack_boolean(m->u.hello.low_latency));
		put_uint(&e, m->u.hello.batch_max);
		put_uint(&e, m->u.hello.chunk);
		put_uint(&e, m->u.hello.max_message);
		put_uint(&e, m->u.hello.window);
		put_uint(&e, m->u.hello.keepalive_ms);
		break;
	case CTL_SUB:
	case CTL_UNSUB:
		put_str(&e, m->u.sub.origin);
		put_uint(&e, m->u.sub.sub_id);
		if (m->type == CTL_SUB) {
			put_uint(&e, m->u.sub.hops);
			put_str(&e, m->u.sub.keyexpr);
		} else {
			put_uint(&e, m->u.sub.end);
		}
		break;
	case CTL_OPEN:
		put_uint(&e, m->u.open.channel);
		put_str(&e, m->u.open.publisher);
		put_str(&e, m->u.open.key);
		put_uint(&e, m->u.open.reliability);
		put_uint(&e, m->u.open.instance);
		break;
	case CTL_CLOSE:
		put_uint(&e, m->u.credit.channel);
		break;
	case CTL_CREDIT:
	case CTL_BLOCKED:
		put_uint(&e, m->u.credit.channel);
		put_uint(&e, m->u.credit.bytes);
		if (m->type == CTL_CREDIT) {
			put_uint(&e, m->u.credit.consumed);
		}
		break;
	case CTL_PING:
	case CTL_PONG:
		put_uint(&e, m->u.token);
		if (m->type == CTL_PONG) {
			put_uint(&e, m->u.time_us);
		}
		break;
	case CTL_GOODBYE:
		put_str(&e, m->u.reason);
		break;
	case CTL_SCOPE:
	case CTL_UNSCOPE:
		put_str(&e, m->u.scope);
		break;
	case CTL_DENY:
		put_uint(&e, m->u.deny.what);
		put_str(&e, m->u.deny.name);
		put_uint(&e, m->u.deny.id);
		put_str(&e, m->u.deny.key);
		put_str(&e, m->u.deny.reason);
		break;
	default:
		break;
	}
	if (e.full) {
		return TERN_EINVAL;
	}
	return (int)(cap - e.left);
}

struct dec {
	mpack_tokbuf_t tb;
	const char *p;
	size_t left;
	bool bad;
	char *why; /* NULL: nobody asks why */
	size_t why_len;
};

static const char *const names[] = {
    [CTL_HELLO] = "HELLO",   [CTL_SYNC] = "SYNC",       [CTL_SUB] = "SUB",
    [CTL_UNSUB] = "UNSUB",   [CTL_OPEN] = "OPEN",       [CTL_CLOSE] = "CLOSE",
    [CTL_CREDIT] = "CREDIT", [CTL_BLOCKED] = "BLOCKED", [CTL_PING] = "PING",
    [CTL_PONG] = "PONG",     [CTL_GOODBYE] = "GOODBYE", [CTL_DENY] = "DENY",
    [CTL_SCOPE] = "SCOPE",   [CTL_UNSCOPE] = "UNSCOPE"};

/* A well-formed number beyond its bound: the message is refused, and the
 * reason names it (the first one found, after no malformed token). */
static void
bound(struct dec *d, int type, const char *field, uint64_t v, uint64_t lo, uint64_t hi)
{
	if (d->bad || (v >= lo && v <= hi)) {
		return;
	}
	d->bad = true;
	if (d->why != NULL) {
		snprintf(d->why, d->why_len, "%s %s is %llu, outside %llu..%llu", names[type],
		         field, (unsigned long long)v, (unsigned long long)lo,
		         (unsigned long long)hi);
	}
}

/* Strings name things (ids, keys, key expressions, reasons) and are kept
 * and printed as C strings: one holding a NUL byte would be cut short
 * there while its length says otherwise, so it is refused. */
static void
text(struct dec *d, int type, const char *field, struct ctl_str s)
{
	if (d->bad || s.len == 0 || memchr(s.p, '\0', s.len) == NULL) {
		return;
	}
	d->bad = true;
	if (d->why != NULL) {
		snprintf(d->why, d->why_len, "%s %s holds a NUL byte", names[type], field);
	}
}

static mpack_token_t
next(struct dec *d)
{
	mpack_token_t t = {0};

	if (d->bad || d->left == 0 || mpack_read(&d->tb, &d->p, &d->left, &t) != MPACK_OK) {
		d->bad = true;
		t.type = 0;
	}
	return t;
}

static uint64_t
get_uint(struct dec *d)
{
	mpack_token_t t = next(d);

	if (t.type != MPACK_TOKEN_UINT) {
		d->bad = true;
		return 0;
	}
	return mpack_unpack_uint(t);
}

static bool
get_bool(struct dec *d)
{
	mpack_token_t t = next(d);

	if (t.type != MPACK_TOKEN_BOOLEAN) {
		d->bad = true;
		return false;
	}
	return mpack_unpack_boolean(t);
}

/* A string of at most max bytes, delivered by libmpack as one chunk. */
static struct ctl_str
get_str(struct dec *d, size_t max)
{
	struct ctl_str s = {"", 0};
	mpack_token_t t = next(d);

	if (t.type != MPACK_TOKEN_STR || t.length > max || t.length > d->left) {
		d->bad = true;
		return s;
	}
	if (t.length == 0) {
		return s;
	}
	t = next(d);
	if (t.type != MPACK_TOKEN_CHUNK) {
		d->bad = true;
		return s;
	}
	s.p = t.data.chunk_ptr;
	s.len = t.length;
	return s;
}

static void
decode_body(struct dec *d, struct ctl_msg *m)
{
	int t = m->type;

	switch (t) {
	case CTL_HELLO:
		m->u.hello.id = get_str(d, CTL_ID_MAX);
		m->u.hello.mode = get_uint(d);
		m->u.hello.low_latency = get_bool(d);
		m->u.hello.batch_max = get_uint(d);
		m->u.hello.chunk = get_uint(d);
		m->u.hello.max_message = get_uint(d);
		m->u.hello.window = get_uint(d);
		m->u.hello.keepalive_ms = get_uint(d);
		bound(d, t, "id length", m->u.hello.id.len, 1, CTL_ID_MAX);
		text(d, t, "id", m->u.hello.id);
		bound(d, t, "mode", m->u.hello.mode, 0, 2);
		bound(d, t, "batch_max", m->u.hello.batch_max, CTL_BATCH_MIN, CTL_BATCH_MAX);
		bound(d, t, "chunk", m->u.hello.chunk, CTL_CHUNK_MIN, CTL_CHUNK_MAX);
		bound(d, t, "max_message", m->u.hello.max_message, 1, UINT64_MAX);
		bound(d, t, "window", m->u.hello.window, CTL_WINDOW_MIN, CTL_WINDOW_MAX);
		bound(d, t, "keepalive_ms", m->u.hello.keepalive_ms, CTL_KEEPALIVE_MIN,
		      CTL_KEEPALIVE_MAX);
		break;
	case CTL_SUB:
	case CTL_UNSUB:
		m->u.sub.origin = get_str(d, CTL_ID_MAX);
		m->u.sub.sub_id = get_uint(d);
		if (t == CTL_SUB) {
			m->u.sub.hops = get_uint(d);
			m->u.sub.keyexpr = get_str(d, CTL_TEXT_MAX);
		} else {
			m->u.sub.end = get_uint(d);
			bound(d, t, "end", m->u.sub.end, CTL_UNSUB_WITHDRAWN, CTL_UNSUB_ENDED_ACK);
		}
		text(d, t, "origin", m->u.sub.origin);
		text(d, t, "keyexpr", m->u.sub.keyexpr);
		break;
	case CTL_OPEN:
		m->u.open.channel = get_uint(d);
		m->u.open.publisher = get_str(d, CTL_ID_MAX + 24);
		m->u.open.key = get_str(d, CTL_TEXT_MAX);
		m->u.open.reliability = get_uint(d);
		m->u.open.instance = get_uint(d);
		bound(d, t, "channel", m->u.open.channel, 1, CTL_CHANNEL_MAX);
		bound(d, t, "reliability", m->u.open.reliability, 0, 1);
		text(d, t, "publisher", m->u.open.publisher);
		text(d, t, "key", m->u.open.key);
		break;
	case CTL_CLOSE:
		m->u.credit.channel = get_uint(d);
		bound(d, t, "channel", m->u.credit.channel, 1, CTL_CHANNEL_MAX);
		break;
	case CTL_CREDIT:
	case CTL_BLOCKED:
		m->u.credit.channel = get_uint(d);
		m->u.credit.bytes = get_uint(d);
		if (t == CTL_CREDIT) {
			m->u.credit.consumed = get_uint(d);
		}
		bound(d, t, "channel", m->u.credit.channel, 1, CTL_CHANNEL_MAX);
		bound(d, t, "bytes", m->u.credit.bytes, 0, CTL_CREDIT_MAX);
		bound(d, t, "consumed", m->u.credit.consumed, 0, CTL_CONSUMED_MAX);
		break;
	case CTL_PING:
	case CTL_PONG:
		m->u.token = get_uint(d);
		if (t == CTL_PONG) {
			m->u.time_us = get_uint(d);
		}
		break;
	case CTL_GOODBYE:
		m->u.reason = get_str(d, CTL_TEXT_MAX);
		text(d, t, "reason", m->u.reason);
		break;
	case CTL_SCOPE:
	case CTL_UNSCOPE:
		m->u.scope = get_str(d, CTL_TEXT_MAX);
		text(d, t, "keyexpr", m->u.scope);
		break;
	case CTL_DENY:
		m->u.deny.what = get_uint(d);
		m->u.deny.name = get_str(d, CTL_ID_MAX + 24);
		m->u.deny.id = get_uint(d);
		m->u.deny.key = get_str(d, CTL_TEXT_MAX);
		m->u.deny.reason = get_str(d, CTL_TEXT_MAX);
		bound(d, t, "what", m->u.deny.what, CTL_DENY_SUB, CTL_DENY_OPEN);
		if (m->u.deny.what == CTL_DENY_OPEN) {
			bound(d, t, "channel", m->u.deny.id, 1, CTL_CHANNEL_MAX);
		}
		text(d, t, "name", m->u.deny.name);
		text(d, t, "key", m->u.deny.key);
		text(d, t, "reason", m->u.deny.reason);
		break;
	default:
		break;
	}
}

int
ctl_decode_explain(const uint8_t *p, size_t len, struct ctl_msg *m, char *why, size_t why_len)
{
	struct dec d = {.p = (const char *)p, .left = len, .why = why, .why_len = why_len};
	mpack_token_t t;
	uint64_t type;

	memset(m, 0, sizeof(*m));
	if (why != NULL && why_len > 0) {
		why[0] = '\0';
	}
	mpack_tokbuf_init(&d.tb);
	t = next(&d);
	if (d.bad || t.type != MPACK_TOKEN_ARRAY) {
		goto malformed;
	}
	type = get_uint(&d);
	if (d.bad || type > CTL_LAST || arity((int)type) == 0 ||
	    t.length != (mpack_uint32_t)arity((int)type)) {
		goto malformed;
	}
	m->type = (int)type;
	decode_body(&d, m);
	if (!d.bad && d.left != 0 && why != NULL) {
		snprintf(why, why_len, "malformed %s (%zu bytes after it)", names[m->type], d.left);
	}
	if (d.bad || d.left != 0) {
		goto malformed;
	}
	return 0;
malformed:
	if (why != NULL && why_len > 0 && why[0] == '\0') {
		snprintf(why, why_len, "malformed %s",
		         m->type != 0 ? names[m->type] : "control message");
	}
	return TERN_EPROTO;
}

int
ctl_decode(const uint8_t *p, size_t len, struct ctl_msg *m)
{
	return ctl_decode_explain(p, len, m, NULL, 0);
}
