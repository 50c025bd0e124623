/*
 * gen_corpus.c - the seed corpus of the fuzz harnesses, from tern's own
 * encoders.
 *
 *   gen_corpus write DIR   write DIR/<harness>/<seed>
 *   gen_corpus check DIR   fail if a seed in DIR differs from what the
 *                          encoders produce today (the corpus is stale)
 *
 * Seeds are valid sessions, every edge length of the hardening rules (0, 1,
 * max-1, max, max+1, UINT32_MAX, UINT64_MAX, and a length whose sum with
 * the header wraps) and a few corrupt frames of each kind. Inputs the
 * fuzzer found are kept beside these under their own names and are left
 * alone by both modes.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "control.h"
#include "fuzz.h"
#include "keyexpr.h"
#include "wire.h"

#define SEED_MAX (128 * 1024)

static uint8_t seed[SEED_MAX];
static size_t seed_len;
static const char *root;
static bool checking;
static int failures;
static int seeds;

static void
put(const void *p, size_t len)
{
	if (seed_len + len > SEED_MAX) {
		fprintf(stderr, "gen_corpus: a seed outgrew %d bytes\n", SEED_MAX);
		exit(1);
	}
	memcpy(seed + seed_len, p, len);
	seed_len += len;
}

static void
put_byte(uint8_t b)
{
	put(&b, 1);
}

static void
put_varint(uint64_t v)
{
	uint8_t buf[WIRE_VARINT_MAX];
	put(buf, wire_varint_encode(buf, v));
}

/* A payload of len bytes that differ from one another. */
static void
put_fill(uint64_t len)
{
	for (uint64_t i = 0; i < len; i++) {
		put_byte((uint8_t)(i * 7 + 1));
	}
}

static void
put_header(int type, int flags, uint64_t channel, uint64_t seq, uint64_t total, uint64_t len)
{
	struct wire_frame f = {.type = type,
	                       .flags = flags,
	                       .channel = channel,
	                       .seq = seq,
	                       .total = total,
	                       .len = len};
	uint8_t buf[WIRE_HDR_MAX];
	put(buf, wire_header_encode(buf, &f));
}

static void
put_data(uint64_t channel, int flags, uint64_t seq, uint64_t len)
{
	put_header(WIRE_DATA, flags, channel, seq, 0, len);
	put_fill(len);
}

static void
put_chunk(uint64_t channel, int flags, uint64_t seq, uint64_t total, uint64_t len)
{
	put_header(WIRE_CHUNK, flags, channel, seq, total, len);
	put_fill(len);
}

/* A stamped data frame or first chunk (WIRE_FLAG_STAMP) and its payload. */
static void
put_stamped(int type, int flags, uint64_t channel, uint64_t stamp, uint64_t total, uint64_t len)
{
	struct wire_frame f = {.type = type,
	                       .flags = flags | WIRE_FLAG_STAMP,
	                       .channel = channel,
	                       .total = total,
	                       .stamp = stamp,
	                       .len = len};
	uint8_t buf[WIRE_HDR_MAX];
	put(buf, wire_header_encode(buf, &f));
	put_fill(len);
}

static void
put_ctl(const struct ctl_msg *m)
{
	uint8_t buf[CTL_MSG_MAX];
	int n = ctl_encode(m, buf, sizeof(buf));

	if (n < 0) {
		fprintf(stderr, "gen_corpus: control message %d does not encode\n", m->type);
		exit(1);
	}
	put_header(WIRE_CONTROL, 0, 0, 0, 0, (uint64_t)n);
	put(buf, (size_t)n);
}

/* A control frame around raw MessagePack bytes. */
static void
put_raw_ctl(const void *p, size_t len)
{
	put_header(WIRE_CONTROL, 0, 0, 0, 0, len);
	put(p, len);
}

static struct ctl_str
str(const char *s)
{
	struct ctl_str r = {s, strlen(s)};
	return r;
}

static void
put_hello(const char *id, uint64_t mode, bool low_latency, uint64_t chunk)
{
	struct ctl_msg m = {.type = CTL_HELLO};

	m.u.hello.id = str(id);
	m.u.hello.mode = mode;
	m.u.hello.low_latency = low_latency;
	m.u.hello.batch_max = 65536;
	m.u.hello.chunk = chunk;
	m.u.hello.max_message = 67108864;
	m.u.hello.window = 262144;
	m.u.hello.keepalive_ms = 1000;
	put_ctl(&m);
}

static void
put_simple(int type, uint64_t a, uint64_t b)
{
	struct ctl_msg m = {.type = type};

	if (type == CTL_PING || type == CTL_PONG) {
		m.u.token = a;
	} else {
		m.u.credit.channel = a;
		m.u.credit.bytes = b;
		m.u.credit.consumed = type == CTL_CREDIT ? 3 * b : 0;
	}
	put_ctl(&m);
}

static void
put_sub(int type, const char *origin, uint64_t id, const char *keyexpr)
{
	struct ctl_msg m = {.type = type};

	m.u.sub.origin = str(origin);
	m.u.sub.sub_id = id;
	m.u.sub.hops = 1;
	m.u.sub.keyexpr = str(keyexpr);
	put_ctl(&m);
}

/* An UNSUB that says how (enum ctl_unsub_end). */
static void
put_end(const char *origin, uint64_t id, uint64_t end)
{
	struct ctl_msg m = {.type = CTL_UNSUB};

	m.u.sub.origin = str(origin);
	m.u.sub.sub_id = id;
	m.u.sub.end = end;
	put_ctl(&m);
}

static void
put_open(uint64_t channel, const char *publisher, const char *key)
{
	struct ctl_msg m = {.type = CTL_OPEN};

	m.u.open.channel = channel;
	m.u.open.publisher = str(publisher);
	m.u.open.key = str(key);
	m.u.open.reliability = 0;
	m.u.open.instance = 0x1234567890abcdefull;
	put_ctl(&m);
}

static void
put_deny(uint64_t what, const char *name, uint64_t id, const char *key, const char *reason)
{
	struct ctl_msg m = {.type = CTL_DENY};

	m.u.deny.what = what;
	m.u.deny.name = str(name);
	m.u.deny.id = id;
	m.u.deny.key = str(key);
	m.u.deny.reason = str(reason);
	put_ctl(&m);
}

static void
put_goodbye(const char *reason)
{
	struct ctl_msg m = {.type = CTL_GOODBYE};

	m.u.reason = str(reason);
	put_ctl(&m);
}

static void
put_preamble(void)
{
	uint8_t p[WIRE_PREAMBLE_LEN];
	wire_preamble_encode(p);
	put(p, sizeof(p));
}

static void
mkdir_p(const char *path)
{
	if (mkdir(path, 0755) != 0 && errno != EEXIST) {
		fprintf(stderr, "gen_corpus: %s: %s\n", path, strerror(errno));
		exit(1);
	}
}

/* Write (or compare) the seed built so far as DIR/harness/name, then start a new one. */
static void
emit(const char *harness, const char *name)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, harness);
	if (!checking) {
		mkdir_p(path);
	}
	snprintf(path, sizeof(path), "%s/%s/%s", root, harness, name);
	seeds++;
	if (checking) {
		static uint8_t have[SEED_MAX + 1];
		size_t n = 0;
		f = fopen(path, "rb");
		if (f != NULL) {
			n = fread(have, 1, sizeof(have), f);
			fclose(f);
		}
		if (f == NULL || n != seed_len || memcmp(have, seed, n) != 0) {
			fprintf(stderr, "gen_corpus: %s is %s\n", path,
			        f == NULL ? "missing" : "stale");
			failures++;
		}
	} else {
		f = fopen(path, "wb");
		if (f == NULL || fwrite(seed, 1, seed_len, f) != seed_len || fclose(f) != 0) {
			fprintf(stderr, "gen_corpus: cannot write %s\n", path);
			exit(1);
		}
	}
	seed_len = 0;
}

static void
frames_valid(void)
{
	put_hello("node-a", 1, false, 4096);
	put_sub(CTL_SUB, "node-a", 1, "sensors/**");
	put_ctl(&(struct ctl_msg){.type = CTL_SYNC});
	put_open(1, "node-a/1", "sensors/room1/temp");
	put_data(1, WIRE_FLAG_SEQ, 1, 5);
	put_data(1, 0, 0, 64);
	put_chunk(1, WIRE_FLAG_FIRST, 0, 10000, 4096);
	put_chunk(1, 0, 0, 0, 4096);
	put_chunk(1, WIRE_FLAG_LAST, 0, 0, 10000 - 2 * 4096);
	put_data(1, 0, 0, 0);
	put_simple(CTL_CREDIT, 1, 131072);
	put_simple(CTL_BLOCKED, 1, 262144);
	put_simple(CTL_PING, 42, 0);
	put_simple(CTL_PONG, 42, 0);
	put_simple(CTL_CLOSE, 1, 0);
	put_sub(CTL_UNSUB, "node-a", 1, "");
	put_goodbye("closing");
	emit("frames", "session");

	/* chunks of two channels interleaved with data frames */
	put_chunk(2, WIRE_FLAG_FIRST | WIRE_FLAG_SEQ, 7, 6000, 3000);
	put_chunk(3, WIRE_FLAG_FIRST | WIRE_FLAG_SEQ, 1, 5000, 2500);
	put_data(4, WIRE_FLAG_SEQ, 100, 10);
	put_chunk(2, WIRE_FLAG_LAST, 0, 0, 3000);
	put_data(4, 0, 0, 10);
	put_chunk(3, WIRE_FLAG_LAST, 0, 0, 2500);
	emit("frames", "interleaved");

	put_chunk(0, WIRE_FLAG_FIRST | WIRE_FLAG_LAST, 0, 100, 100);
	put_chunk(0, WIRE_FLAG_FIRST | WIRE_FLAG_LAST | WIRE_FLAG_SEQ, 9, 0, 0);
	emit("frames", "chunk_single");

	/* publish stamps: on data and first chunks, now, zero, the largest,
	 * and on a later chunk (refused) */
	put_stamped(WIRE_DATA, 0, 6, 1796400000123456ull, 0, 64);
	put_stamped(WIRE_DATA, WIRE_FLAG_SEQ, 6, 0, 0, 8);
	put_stamped(WIRE_CHUNK, WIRE_FLAG_FIRST, 6, UINT64_MAX, 9000, 4096);
	put_chunk(6, WIRE_FLAG_LAST, 0, 0, 9000 - 4096);
	put_stamped(WIRE_CHUNK, WIRE_FLAG_LAST, 6, 1, 0, 10);
	emit("frames", "stamps");

	/* a new FIRST abandons the open message */
	put_chunk(5, WIRE_FLAG_FIRST, 0, 8000, 4000);
	put_chunk(5, WIRE_FLAG_FIRST | WIRE_FLAG_LAST, 0, 50, 50);
	emit("frames", "chunk_abandon");

	/* every ceiling at once: four messages of max_message hold the whole budget */
	for (int c = 0; c < 5; c++) {
		put_chunk((uint64_t)c, WIRE_FLAG_FIRST, 0, FUZZ_MAX_MESSAGE, 1);
	}
	emit("frames", "budget_exhausted");
}

static const struct {
	const char *name;
	uint64_t len;
} edges[] = {{"0", 0},
             {"1", 1},
             {"max-1", FUZZ_MAX_PAYLOAD - 1},
             {"max", FUZZ_MAX_PAYLOAD},
             {"max+1", FUZZ_MAX_PAYLOAD + 1},
             {"u32max", UINT32_MAX},
             {"u64max", UINT64_MAX}};

static const struct {
	const char *name;
	uint64_t total;
} totals[] = {{"max-1", FUZZ_MAX_MESSAGE - 1},
              {"max", FUZZ_MAX_MESSAGE},
              {"max+1", FUZZ_MAX_MESSAGE + 1},
              {"u32max", UINT32_MAX},
              {"u64max", UINT64_MAX}};

static void
frames_lengths(void)
{
	char name[64];

	for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); i++) {
		uint64_t len = edges[i].len;
		/* what follows the header: the payload, or a little of it */
		uint64_t body = len <= FUZZ_MAX_PAYLOAD + 1 ? len : 16;

		put_header(WIRE_DATA, 0, 1, 0, 0, len);
		put_fill(body);
		snprintf(name, sizeof(name), "len_data_%s", edges[i].name);
		emit("frames", name);

		put_header(WIRE_CHUNK, WIRE_FLAG_FIRST, 1, 0, len, len);
		put_fill(body);
		snprintf(name, sizeof(name), "len_chunk_%s", edges[i].name);
		emit("frames", name);

		put_header(WIRE_CONTROL, 0, 0, 0, 0, len);
		put_fill(body);
		snprintf(name, sizeof(name), "len_control_%s", edges[i].name);
		emit("frames", name);
	}
	for (size_t i = 0; i < sizeof(totals) / sizeof(totals[0]); i++) {
		put_chunk(1, WIRE_FLAG_FIRST, 0, totals[i].total, 100);
		put_chunk(1, 0, 0, 0, 100);
		put_chunk(1, WIRE_FLAG_LAST, 0, 0, 100);
		snprintf(name, sizeof(name), "total_%s", totals[i].name);
		emit("frames", name);
	}
	/* header length plus this wraps around: it must read as "incomplete" */
	put_header(WIRE_DATA, 0, 1, 0, 0, UINT64_MAX - 3);
	put_fill(8);
	emit("frames", "len_wraps");
	put_header(WIRE_CHUNK, WIRE_FLAG_FIRST | WIRE_FLAG_SEQ, 1, UINT64_MAX, UINT64_MAX,
	           UINT64_MAX - 3);
	put_fill(8);
	emit("frames", "len_wraps_chunk");
}

static void
frames_corrupt(void)
{
	static const uint8_t overlong[] = {0x00, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
	                                   0x80, 0x80, 0x80, 0x80, 0x01, 0x00};
	static const uint8_t bit65[] = {0x00, 0xff, 0xff, 0xff, 0xff, 0xff,
	                                0xff, 0xff, 0xff, 0xff, 0x02, 0x00};
	static const uint8_t ctl_arity[] = {0x93, 0x09, 0x01, 0x02}; /* PING, 3 elements */
	static const uint8_t ctl_type0[] = {0x91, 0x00};             /* no such type */
	static const uint8_t ctl_type12[] = {0x91, 0x0c};            /* DENY, no fields */
	static const uint8_t ctl_not_array[] = {0x82, 0x01, 0x02, 0x03, 0x04}; /* a map */
	static const uint8_t ctl_negative[] = {0x92, 0x09, 0xff};              /* PING -1 */
	static const uint8_t ctl_str_token[] = {0x92, 0x09, 0xa1, 'x'};        /* PING "x" */
	static const uint8_t ctl_nested[] = {0x92, 0x09, 0x91, 0x01};          /* PING [1] */
	static const uint8_t ctl_str_past_end[] = {0x92, 0x0b, 0xdb, 0xff, 0xff,
	                                           0xff, 0xff, 'b',  'y',  'e'};
	static const uint8_t ctl_bin[] = {0x92, 0x0b, 0xc4, 0x03, 'b', 'y', 'e'};
	static const uint8_t ctl_str8[] = {0x92, 0x0b, 0xd9, 0x03, 'b', 'y', 'e'};
	static const uint8_t ctl_uint64[] = {0x92, 0x09, 0xcf, 0, 0, 0, 0, 0, 0, 0, 5};
	static const uint8_t ctl_truncated[] = {0x93, 0x07, 0x01};
	static const uint8_t ctl_trailing[] = {0x92, 0x09, 0x01, 0xc0};

	for (int t = 3; t < 8; t++) {
		put_byte((uint8_t)t);
		put_varint(1);
		put_varint(0);
	}
	emit("frames", "bad_type");
	put_byte(WIRE_DATA | WIRE_FLAG_FIRST);
	put_varint(1);
	put_varint(1);
	put_varint(0);
	emit("frames", "bad_flags_data");
	put_byte(WIRE_CONTROL | WIRE_FLAG_SEQ);
	put_varint(0);
	emit("frames", "bad_flags_control");
	put_byte(WIRE_CHUNK | 0x40);
	put_varint(1);
	put_varint(0);
	emit("frames", "bad_flags_chunk");
	put(overlong, sizeof(overlong));
	emit("frames", "varint_overlong");
	put(bit65, sizeof(bit65));
	emit("frames", "varint_65_bits");
	put_data((uint64_t)UINT32_MAX + 1, 0, 0, 1);
	emit("frames", "channel_above_u32");
	put_data(UINT32_MAX, 0, 0, 1);
	emit("frames", "channel_u32max");
	put_header(WIRE_CHUNK, WIRE_FLAG_FIRST, 1, 0, 10, 11);
	put_fill(11);
	emit("frames", "first_longer_than_total");
	put_chunk(1, 0, 0, 0, 10);
	emit("frames", "chunk_without_first");
	put_chunk(1, WIRE_FLAG_FIRST, 0, 10, 5);
	put_chunk(1, WIRE_FLAG_LAST, 0, 0, 10);
	emit("frames", "chunk_overrun");
	put_chunk(1, WIRE_FLAG_FIRST, 0, 10, 5);
	put_chunk(1, WIRE_FLAG_LAST, 0, 0, 4);
	emit("frames", "last_too_early");
	put_raw_ctl(ctl_arity, sizeof(ctl_arity));
	emit("frames", "ctl_wrong_arity");
	put_raw_ctl(ctl_type0, sizeof(ctl_type0));
	emit("frames", "ctl_type_0");
	put_raw_ctl(ctl_type12, sizeof(ctl_type12));
	emit("frames", "ctl_type_12");
	put_raw_ctl(ctl_not_array, sizeof(ctl_not_array));
	emit("frames", "ctl_not_array");
	put_raw_ctl(ctl_negative, sizeof(ctl_negative));
	emit("frames", "ctl_negative");
	put_raw_ctl(ctl_str_token, sizeof(ctl_str_token));
	emit("frames", "ctl_string_for_uint");
	put_raw_ctl(ctl_nested, sizeof(ctl_nested));
	emit("frames", "ctl_nested");
	put_raw_ctl(ctl_str_past_end, sizeof(ctl_str_past_end));
	emit("frames", "ctl_str_past_end");
	put_raw_ctl(ctl_bin, sizeof(ctl_bin));
	emit("frames", "ctl_bin_for_str");
	put_raw_ctl(ctl_str8, sizeof(ctl_str8));
	emit("frames", "ctl_str8_short");
	put_raw_ctl(ctl_uint64, sizeof(ctl_uint64));
	emit("frames", "ctl_uint64_small");
	put_raw_ctl(ctl_truncated, sizeof(ctl_truncated));
	emit("frames", "ctl_truncated");
	put_raw_ctl(ctl_trailing, sizeof(ctl_trailing));
	emit("frames", "ctl_trailing");
	put_raw_ctl("", 0);
	emit("frames", "ctl_empty");
	emit("frames", "empty");
}

/* A HELLO with every number given: the connection harness's edges. */
static void
put_hello_as(uint64_t mode, uint64_t batch_max, uint64_t chunk, uint64_t window,
             uint64_t keepalive_ms)
{
	struct ctl_msg m = {.type = CTL_HELLO};

	m.u.hello.id = str("fuzz-peer");
	m.u.hello.mode = mode;
	m.u.hello.batch_max = batch_max;
	m.u.hello.chunk = chunk;
	m.u.hello.max_message = 65536;
	m.u.hello.window = window;
	m.u.hello.keepalive_ms = keepalive_ms;
	put_ctl(&m);
}

static void
put_hello_numbers(uint64_t batch_max, uint64_t chunk, uint64_t window, uint64_t keepalive_ms)
{
	put_hello_as(0, batch_max, chunk, window, keepalive_ms);
}

static void
put_scope(int type, const char *ke)
{
	struct ctl_msg m = {.type = type};

	m.u.scope = str(ke);
	put_ctl(&m);
}

static void
put_credit(uint64_t channel, uint64_t bytes, uint64_t consumed)
{
	struct ctl_msg m = {.type = CTL_CREDIT};

	m.u.credit.channel = channel;
	m.u.credit.bytes = bytes;
	m.u.credit.consumed = consumed;
	put_ctl(&m);
}

/* Preamble, a HELLO with these numbers, SYNC and a subscription to what
 * the harness's node publishes (fuzz/data): the node then opens a channel
 * toward the peer, its queue sized from the window. */
static void
conn_start(uint64_t batch_max, uint64_t chunk, uint64_t window, uint64_t keepalive_ms)
{
	put_preamble();
	put_hello_numbers(batch_max, chunk, window, keepalive_ms);
	put_ctl(&(struct ctl_msg){.type = CTL_SYNC});
	put_sub(CTL_SUB, "fuzz-peer", 1, "fuzz/**");
}

/* fuzz_conn: whole connections, as a peer sends them to a node with
 * chunk_bytes 4096 and max_message_bytes 65536. */
static void
conn(void)
{
	const uint64_t u64 = UINT64_MAX;

	conn_start(65536, 65536, 262144, 1000);
	put_open(1, "fuzz-peer/1", "fuzz/x");
	put_data(1, WIRE_FLAG_SEQ, 1, 10);
	put_data(1, 0, 0, 5);
	put_chunk(1, WIRE_FLAG_FIRST, 0, 6000, 3000);
	put_chunk(1, WIRE_FLAG_LAST, 0, 0, 3000);
	put_credit(1, 65536, 100);
	put_simple(CTL_BLOCKED, 1, 0);
	put_simple(CTL_PING, 42, 0);
	put_simple(CTL_CLOSE, 1, 0);
	put_sub(CTL_UNSUB, "fuzz-peer", 1, "fuzz/**");
	/* a subscription that ends, a stale SUB for it, the answer, an end
	 * of one never declared */
	put_sub(CTL_SUB, "far", 9, "fuzz/y");
	put_end("far", 9, CTL_UNSUB_ENDED);
	put_sub(CTL_SUB, "far", 9, "fuzz/y");
	put_end("far", 9, CTL_UNSUB_ENDED_ACK);
	put_end("nobody", 3, CTL_UNSUB_ENDED);
	put_goodbye("done");
	emit("conn", "session");
	/* the node's acl allows fuzz/ and below only: a SUB and an OPEN it
	 * refuses, data on the refused channel, then DENYs of the node's own
	 * declarations (its subscribers' numbers start at random: these are
	 * refusals of ones it does not know) */
	conn_start(65536, 65536, 262144, 1000);
	put_sub(CTL_SUB, "fuzz-peer", 2, "secret/**");
	put_open(2, "fuzz-peer/2", "secret/x");
	put_data(2, WIRE_FLAG_SEQ, 1, 10);
	put_chunk(2, WIRE_FLAG_FIRST, 0, 6000, 3000);
	put_chunk(2, WIRE_FLAG_LAST, 0, 0, 3000);
	put_simple(CTL_CLOSE, 2, 0);
	put_open(2, "fuzz-peer/2", "secret/x");
	put_deny(CTL_DENY_SUB, "fuzz-node", 1, "fuzz/**", "access denied");
	put_deny(CTL_DENY_SUB, "nobody", 7, "x", "");
	put_deny(CTL_DENY_OPEN, "fuzz-node/1", 1, "fuzz/data", "access denied");
	put_deny(CTL_DENY_OPEN, "x", WIRE_CHANNEL_MAX, "x", "");
	emit("conn", "acl_refused");
	/* a client: its SCOPEs, each answered at its SYNC, then a bad one */
	put_preamble();
	put_hello_as(2, 65536, 65536, 262144, 1000);
	put_scope(CTL_SCOPE, "fuzz/x");
	put_ctl(&(struct ctl_msg){.type = CTL_SYNC});
	put_sub(CTL_SUB, "fuzz-peer", 1, "fuzz/**");
	put_scope(CTL_SCOPE, "fuzz/**");
	put_scope(CTL_SCOPE, "fuzz/x");
	put_ctl(&(struct ctl_msg){.type = CTL_SYNC});
	put_scope(CTL_UNSCOPE, "fuzz/**");
	put_scope(CTL_UNSCOPE, "never/asked");
	put_scope(CTL_SCOPE, "fuzz//x");
	emit("conn", "client_scopes");
	/* the HELLOs that once hung the node (2^62+1) or grew it (4 GiB) */
	conn_start(65536, 65536, (1ull << 62) + 1, 1000);
	emit("conn", "hello_window_2p62_plus_1");
	conn_start(65536, 65536, 4ull << 30, 1000);
	emit("conn", "hello_window_4g");
	conn_start(u64, u64, u64, u64);
	emit("conn", "hello_u64max");
	conn_start(CTL_BATCH_MIN, CTL_CHUNK_MIN, CTL_WINDOW_MIN, CTL_KEEPALIVE_MIN);
	put_open(1, "fuzz-peer/1", "fuzz/x");
	put_data(1, 0, 0, 256);
	put_credit(1, 1, 1);
	emit("conn", "hello_min_edges");
	conn_start(CTL_BATCH_MAX, CTL_CHUNK_MAX, CTL_WINDOW_MAX, CTL_KEEPALIVE_MAX);
	put_credit(1, CTL_CREDIT_MAX, CTL_CONSUMED_MAX);
	emit("conn", "hello_max_edges");
	conn_start(65536, 65536, 262144, 1000);
	put_credit(1, u64, u64);
	put_simple(CTL_BLOCKED, 1, u64);
	emit("conn", "credit_u64max");
	conn_start(65536, 65536, 262144, 1000);
	put_header(WIRE_CONTROL, 0, 0, 0, 0, WIRE_CONTROL_MAX + 1);
	put_fill(WIRE_CONTROL_MAX + 1);
	emit("conn", "control_4097");
	conn_start(65536, 65536, 262144, 1000);
	put_header(WIRE_CONTROL, 0, 0, 0, 0, u64);
	emit("conn", "control_u64max");
	conn_start(65536, 65536, 262144, 1000);
	put_open(WIRE_CHANNEL_MAX, "fuzz-peer/1", "fuzz/x");
	put_data(WIRE_CHANNEL_MAX, WIRE_FLAG_SEQ, u64, 1);
	put_data(WIRE_CHANNEL_MAX + 1ull, 0, 0, 1);
	emit("conn", "channel_edges");
	conn_start(65536, 65536, 262144, 1000);
	put_open(1, "fuzz-peer/1", "fuzz/x");
	put_chunk(1, WIRE_FLAG_FIRST, 0, u64, 16);
	emit("conn", "chunk_total_u64max");
	put_preamble();
	put_data(1, 0, 0, 3);
	emit("conn", "data_before_hello");
	put("HTTP/1.1 200 OK\r\n", 17);
	emit("conn", "not_tern");
}

static void
handshake(void)
{
	char id[CTL_ID_MAX + 2];

	put_preamble();
	put_hello("node-a", 0, false, 65536);
	put_ctl(&(struct ctl_msg){.type = CTL_SYNC});
	emit("handshake", "hello");
	put_preamble();
	put_hello("r", 1, true, 256);
	emit("handshake", "hello_router_low_latency");
	memset(id, 'n', sizeof(id));
	id[CTL_ID_MAX] = '\0';
	put_preamble();
	put_hello(id, 0, false, 1u << 24);
	emit("handshake", "hello_id_255");
	id[CTL_ID_MAX] = 'n';
	id[CTL_ID_MAX + 1] = '\0';
	put_preamble();
	put_hello(id, 0, false, 65536);
	emit("handshake", "hello_id_256");
	put_preamble();
	put_hello("big", 1, false, UINT64_MAX);
	emit("handshake", "hello_chunk_u64max");
	put_preamble();
	put_hello("tiny", 0, false, 1);
	emit("handshake", "hello_chunk_1");
	put_preamble();
	emit("handshake", "preamble_only");
	put("TERX\x01\0\0\0", 8);
	emit("handshake", "bad_magic");
	put("TERN\x03\0\0\0", 8);
	put_hello("future", 0, false, 65536);
	emit("handshake", "version_3");
	put("TERN\x01\0\0\0", 8);
	put_hello("past", 0, false, 65536);
	emit("handshake", "version_1");
	put("TERN\x00\0\0\0", 8);
	emit("handshake", "version_0");
	put("TERN\x02\xff\xff\xff", 8);
	put_hello("reserved", 0, false, 65536);
	emit("handshake", "reserved_set");
	put("GET / HTTP/1.1\r\n\r\n", 18);
	emit("handshake", "http");
	put_preamble();
	put_sub(CTL_SUB, "node-a", 1, "a/b");
	emit("handshake", "sub_first");
	put_preamble();
	put_data(1, WIRE_FLAG_SEQ, 1, 4);
	emit("handshake", "data_first");
	put_preamble();
	put_hello("node-a", 0, false, 65536);
	seed_len -= 3;
	emit("handshake", "hello_truncated");
}

/* what a tls:// client may read before its handshake is over: see fuzz_tls.c */
static void
tls(void)
{
	/* a record header: type, legacy version, length */
	static const uint8_t server_hello[] = {0x16, 0x03, 0x03, 0x00, 0x7a, 0x02,
	                                       0x00, 0x00, 0x76, 0x03, 0x03};
	static const uint8_t alert[] = {0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28};
	static const uint8_t huge[] = {0x16, 0x03, 0x03, 0xff, 0xff};
	static const uint8_t sslv2[] = {0x80, 0x2e, 0x01, 0x03, 0x01};

	put_preamble();
	put_hello("plain", 0, false, 65536);
	emit("tls", "plain_tern_node");
	put(server_hello, sizeof(server_hello));
	put_fill(40);
	emit("tls", "server_hello_truncated");
	put(alert, sizeof(alert));
	emit("tls", "alert_handshake_failure");
	put(huge, sizeof(huge));
	put_fill(64);
	emit("tls", "record_too_long");
	put(sslv2, sizeof(sslv2));
	emit("tls", "sslv2_header");
	put_byte(0x16);
	emit("tls", "one_byte");
	put("HTTP/1.1 400 Bad Request\r\n\r\n", 28);
	emit("tls", "http");
}

/* reasm ops: see fuzz_reasm.c */
static void
op(int channel, int flags, uint64_t total, uint64_t len, uint64_t body)
{
	put_byte((uint8_t)(channel | flags));
	if (flags & WIRE_FLAG_FIRST) {
		put_varint(total);
	}
	put_varint(len);
	put_fill(body);
}

static void
reasm(void)
{
	/* selectors: max_message 4096 (6), 65536 (9), UINT64_MAX (14); budget 1 MiB (11) */
	const uint8_t max4k = 6 | 11 << 4, max64k = 9 | 11 << 4, unlimited = 14 | 11 << 4;
	char name[64];

	put_byte(max64k);
	op(0, WIRE_FLAG_FIRST, 10000, 4000, 4000);
	op(0, 0, 0, 4000, 4000);
	op(0, WIRE_FLAG_LAST, 0, 2000, 2000);
	emit("reasm", "three_chunks");

	put_byte(max64k);
	op(0, WIRE_FLAG_FIRST, 300, 100, 100);
	op(1, WIRE_FLAG_FIRST, 200, 100, 100);
	op(2, WIRE_FLAG_FIRST | WIRE_FLAG_LAST, 50, 50, 50);
	op(1, WIRE_FLAG_LAST, 0, 100, 100);
	op(0, 0, 0, 100, 100);
	op(3, WIRE_FLAG_FIRST | WIRE_FLAG_LAST, 0, 0, 0);
	op(0, WIRE_FLAG_LAST, 0, 100, 100);
	emit("reasm", "interleaved");

	for (size_t i = 0; i < 3; i++) {
		uint64_t total = 4095 + i;
		put_byte(max4k);
		op(0, WIRE_FLAG_FIRST, total, 4000, 4000);
		op(0, WIRE_FLAG_LAST, 0, total - 4000, total - 4000);
		snprintf(name, sizeof(name), "total_%s",
		         i == 0   ? "max-1"
		         : i == 1 ? "max"
		                  : "max+1");
		emit("reasm", name);
	}
	put_byte(max4k);
	op(0, WIRE_FLAG_FIRST, UINT32_MAX, 10, 10);
	emit("reasm", "total_u32max");
	put_byte(max4k);
	op(0, WIRE_FLAG_FIRST, UINT64_MAX, 10, 10);
	emit("reasm", "total_u64max");
	/* no max_message: the budget alone refuses these */
	put_byte(unlimited);
	op(0, WIRE_FLAG_FIRST, UINT64_MAX, 10, 10);
	op(1, WIRE_FLAG_FIRST, UINT32_MAX, 10, 10);
	op(2, WIRE_FLAG_FIRST, (1u << 20) + 1, 10, 10);
	op(3, WIRE_FLAG_FIRST | WIRE_FLAG_LAST, 1u << 20, 0, 0);
	emit("reasm", "budget_edges");
	/* a length that would wrap filled + len */
	put_byte(max64k);
	op(0, WIRE_FLAG_FIRST, 100, 10, 10);
	op(0, 0, 0, UINT64_MAX - 3, 4);
	emit("reasm", "len_wraps");

	put_byte(max64k);
	op(0, 0, 0, 10, 10);
	emit("reasm", "without_first");
	put_byte(max64k);
	op(0, WIRE_FLAG_FIRST, 10, 20, 20);
	emit("reasm", "first_longer_than_total");
	put_byte(max64k);
	op(0, WIRE_FLAG_FIRST, 10, 5, 5);
	op(0, WIRE_FLAG_LAST, 0, 4, 4);
	emit("reasm", "last_too_early");
	put_byte(max64k);
	op(0, WIRE_FLAG_FIRST, 1000, 10, 10);
	op(0, WIRE_FLAG_FIRST, 20, 10, 10);
	op(0, WIRE_FLAG_LAST, 0, 10, 10);
	emit("reasm", "abandoned");
	put_byte(max64k);
	op(1, WIRE_FLAG_FIRST, 1000, 10, 10);
	put_byte(0x40 | 1);
	op(1, 0, 0, 10, 10);
	emit("reasm", "reset_then_chunk");
	put_byte(0);
	op(0, WIRE_FLAG_FIRST | WIRE_FLAG_LAST, 0, 0, 0);
	op(0, WIRE_FLAG_FIRST | WIRE_FLAG_LAST, 1, 1, 1);
	emit("reasm", "zero_budget");
}

static void
key_pair(const char *name, const char *a, size_t a_len, const char *b, size_t b_len)
{
	put_byte((uint8_t)(a_len & 0xff));
	put_byte((uint8_t)(a_len >> 8));
	put(a, a_len);
	put(b, b_len);
	emit("keyexpr", name);
}

static void
key(const char *name, const char *a, const char *b)
{
	key_pair(name, a, strlen(a), b, strlen(b));
}

static void
keyexpr(void)
{
	static char big[2 * TERN_KEY_MAX_LEN + 8];
	size_t n = 0;

	key("equal", "a/b/c", "a/b/c");
	key("star", "a/*/c", "a/b/c");
	key("star_no_match", "a/*/c", "a/b/d/c");
	key("dstar_empty", "a/**", "a");
	key("dstar_all", "**", "x/y/z");
	key("dstar_twice", "a/**/b/**/c", "a/x/b/y/z/c");
	key("star_dstar", "*/**", "**/x");
	key("wild_in_chunk", "a/b*", "a/bc");
	key("leading_slash", "/a", "a/");
	key("empty_chunk", "a//b", "a/b");
	key("empty", "", "a");
	key_pair("nul", "a\0b", 3, "a", 1);
	for (int i = 0; i < TERN_KEY_MAX_CHUNKS; i++) {
		n += (size_t)sprintf(big + n, i ? "/c" : "c");
	}
	key("chunks_64", big, "**");
	strcpy(big + n, "/c");
	key("chunks_65", big, "**");
	n = 0;
	for (int i = 0; i < 20; i++) {
		n += (size_t)sprintf(big + n, i ? "/**" : "**");
	}
	key("dstars", big, "a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/q/r/s/t/u/v/w/x/y/z");
	memset(big, 'k', TERN_KEY_MAX_LEN + 1);
	key_pair("len_max", big, TERN_KEY_MAX_LEN, "k/*", 3);
	key_pair("len_max+1", big, TERN_KEY_MAX_LEN + 1, "**", 2);
}

static void
config(const char *name, const char *text)
{
	put(text, strlen(text));
	emit("config", name);
}

static void
configs(void)
{
	config("example", "{\n"
	                  "  \"id\": \"edge-1\",\n"
	                  "  \"mode\": \"peer\",\n"
	                  "  \"listen\": [\"tcp://127.0.0.1:7447\"],\n"
	                  "  \"connect\": [],\n"
	                  "  \"low_latency\": false,\n"
	                  "  \"batching\": {\"max_bytes\": 65536, \"max_delay_us\": 0},\n"
	                  "  \"reliability\": \"reliable\",\n"
	                  "  \"queue\": {\"max_bytes\": 67108864},\n"
	                  "  \"max_message_bytes\": 67108864,\n"
	                  "  \"chunk_bytes\": 65536,\n"
	                  "  \"publish_timeout_ms\": 10000,\n"
	                  "  \"handshake_timeout_ms\": 5000,\n"
	                  "  \"keepalive_ms\": 1000,\n"
	                  "  \"slow_consumer_ms\": 10000,\n"
	                  "  \"reconnect\": {\"initial_ms\": 100, \"max_ms\": 1000},\n"
	                  "  \"log\": \"info\"\n"
	                  "}\n");
	config("router", "{\"id\":\"r1\",\"mode\":\"router\",\"low_latency\":true,"
	                 "\"reliability\":\"best_effort\",\"log\":\"debug\","
	                 "\"listen\":[\"tcp://[::1]:0\",\"unix:///run/tern.sock\"],"
	                 "\"connect\":[\"tcp://localhost:7447\"]}");
	config("empty_object", "{}");
	config("empty", "");
	config("not_object", "[1, 2]");
	config("trailing", "{} x");
	config("unknown_key", "{\"batching\": {\"max_byte\": 1}}");
	config("wrong_type", "{\"chunk_bytes\": \"big\"}");
	config("float", "{\"chunk_bytes\": 1024.5}");
	config("exponent", "{\"max_message_bytes\": 1e9}");
	config("negative", "{\"publish_timeout_ms\": -1}");
	config("min_edges", "{\"batching\":{\"max_bytes\":512},\"chunk_bytes\":256,"
	                    "\"max_message_bytes\":1,\"queue\":{\"max_bytes\":1048576}}");
	config("max_edges", "{\"batching\":{\"max_bytes\":16777216},\"chunk_bytes\":16777216,"
	                    "\"max_message_bytes\":4294967295,"
	                    "\"queue\":{\"max_bytes\":68719476736}}");
	config("above_max", "{\"max_message_bytes\": 4294967296}");
	config("below_min", "{\"chunk_bytes\": 255}");
	config("huge_number", "{\"queue\": {\"max_bytes\": 1e400}}");
	config("reconnect_order", "{\"reconnect\": {\"initial_ms\": 2000, \"max_ms\": 1000}}");
	config("duplicate_key", "{\"id\": \"a\", \"id\": \"b\", \"listen\": [], \"listen\": []}");
	config("bad_endpoints", "{\"connect\": [\"tcp://host\", \"tcp://h:99999\", "
	                        "\"unix://relative\", \"udp://x:1\", \"tcp://[::1:5\"]}");
	config("bad_id", "{\"id\": \"has space/and\\\"quote\"}");
	config("null", "{\"log\": null}");
	config("unicode", "{\"id\": \"n\\u00e9ud\\ud83d\\ude00\"}");
	config("bom", "\xef\xbb\xbf{}");
	config("comment", "{ /* no comments in JSON */ }");
	config("deep", "{\"a\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
	               "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}");
	config("unterminated", "{\"id\": \"abc");
}

int
main(int argc, char **argv)
{
	if (argc != 3 || (strcmp(argv[1], "write") != 0 && strcmp(argv[1], "check") != 0)) {
		fprintf(stderr, "usage: %s write|check DIR\n", argv[0]);
		return 2;
	}
	checking = strcmp(argv[1], "check") == 0;
	root = argv[2];
	if (!checking) {
		mkdir_p(root);
	}
	frames_valid();
	frames_lengths();
	frames_corrupt();
	handshake();
	tls();
	conn();
	reasm();
	keyexpr();
	configs();
	if (failures > 0) {
		fprintf(stderr,
		        "gen_corpus: %d of %d seeds differ from the encoders; run "
		        "'gen_corpus write tests/fuzz/corpus' and review the change\n",
		        failures, seeds);
		return 1;
	}
	printf("gen_corpus: %d seeds %s\n", seeds, checking ? "up to date" : "written");
	return 0;
}
