/*
 * fuzz_conn.c - a whole connection against a real node: the input is every
 * byte a peer sends (preamble, HELLO, then frames).
 *
 * One node per process listens on a Unix socket in a temporary directory.
 * It has a publisher on fuzz/data, so a peer that subscribes to it gets a
 * channel (whose queue is sized from the peer's window), and a subscriber to
 * every key under fuzz/, so data the peer sends is delivered and reassembled. Its acl
 * lets the peer declare fuzz/ and below only, so a SUB or an OPEN elsewhere is refused
 * (a DENY, and a channel that drops what arrives). Each input
 * is written on a fresh connection; then the node must still answer, within
 * CHECK_MS (hang-catching, not a timing goal):
 *   - a second, well-behaved connection completes its handshake and gets a
 *     PONG for its PING, which needs the I/O thread to accept, read and
 *     write;
 *   - a message published on fuzz/check reaches the node's own subscriber.
 * The fuzz connection is then closed, and the node at exit (atexit), which
 * must return: a stuck I/O thread would hang tern_node_close.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "control.h"
#include "fuzz.h"
#include "tern/tern.h"
#include "wire.h"

#define CHECK_MS    10000
#define CHECK_TOKEN 0x636865636bull /* "check" */
#define READ_MAX    (256 * 1024)

static tern_node *node;
static tern_pub *data_pub, *check_pub;
static tern_sub *all_sub, *check_sub;
static char dir[64];
static struct sockaddr_un addr;

static uint64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The node's log, on stderr only when TERN_FUZZ_LOG is set (to look into a
 * finding): every input would otherwise print a few warnings. */
static void
node_log(void *arg, int level, const char *line)
{
	(void)arg;
	(void)level;
	if (getenv("TERN_FUZZ_LOG") != NULL) {
		fprintf(stderr, "node: %s\n", line);
	}
}

static void
node_close(void)
{
	char path[sizeof(addr.sun_path)];

	tern_pub_close(data_pub);
	tern_pub_close(check_pub);
	tern_sub_close(all_sub);
	tern_sub_close(check_sub);
	tern_node_close(node);
	snprintf(path, sizeof(path), "%s", addr.sun_path);
	unlink(path);
	rmdir(dir);
}

/* Small limits, so that what one input may make the node hold stays small. */
static const char *const fuzz_only[] = {"fuzz/**"};
static const tern_acl_rule acl[] = {
    {.peer = "*",
     .allow_pub = fuzz_only,
     .allow_pub_len = 1,
     .allow_sub = fuzz_only,
     .allow_sub_len = 1},
};

static void
node_open(void)
{
	char ep[sizeof(addr.sun_path) + 16], bound[256];
	tern_config cfg;

	signal(SIGPIPE, SIG_IGN);
	snprintf(dir, sizeof(dir), "/tmp/tern-fuzz-conn.XXXXXX");
	FUZZ_CHECK(mkdtemp(dir) != NULL);
	addr.sun_family = AF_UNIX;
	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s/n.sock", dir);
	snprintf(ep, sizeof(ep), "unix://%s", addr.sun_path);
	tern_config_init(&cfg);
	cfg.id = "fuzz-node";
	cfg.chunk_bytes = 4096;
	cfg.max_message_bytes = 65536;
	cfg.queue_max_bytes = 1u << 20;
	cfg.slow_consumer_ms = 1000;
	cfg.publish_timeout_ms = 100;
	cfg.log_fn = node_log;
	cfg.log_level = getenv("TERN_FUZZ_LOG") != NULL ? TERN_LOG_DEBUG : TERN_LOG_ERROR;
	cfg.acl = acl;
	cfg.acl_len = 1;
	cfg.acl_set = true;
	FUZZ_CHECK(tern_node_open(&node, &cfg) == 0);
	FUZZ_CHECK(tern_node_listen(node, ep, bound, sizeof(bound)) == 0);
	FUZZ_CHECK(tern_pub_open(&data_pub, node, "fuzz/data", TERN_BEST_EFFORT) == 0);
	FUZZ_CHECK(tern_pub_open(&check_pub, node, "fuzz/check", TERN_BEST_EFFORT) == 0);
	FUZZ_CHECK(tern_sub_open(&all_sub, node, "fuzz/**", NULL, NULL) == 0);
	FUZZ_CHECK(tern_sub_open(&check_sub, node, "fuzz/check", NULL, NULL) == 0);
	atexit(node_close);
}

static int
connect_node(void)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	FUZZ_CHECK(fd >= 0);
	FUZZ_CHECK(connect(fd, (const struct sockaddr *)&addr, sizeof(addr)) == 0);
	return fd;
}

/*
 * Write all of p, reading what the node sends meanwhile, so neither side can
 * block the other: into keep (up to keep_cap, *kept bytes so far), or
 * dropped when keep is NULL. False if the node closed first.
 */
static bool
write_all(int fd, const uint8_t *p, size_t len, uint64_t deadline, uint8_t *keep, size_t keep_cap,
          size_t *kept)
{
	static uint8_t sink[16384];
	size_t off = 0;

	while (off < len) {
		struct pollfd pfd = {fd, POLLIN | POLLOUT, 0};
		FUZZ_CHECK(now_ms() < deadline); /* the node stopped reading */
		if (poll(&pfd, 1, 100) <= 0) {
			continue;
		}
		if (pfd.revents & POLLIN) {
			ssize_t n = keep != NULL
			                ? recv(fd, keep + *kept, keep_cap - *kept, MSG_DONTWAIT)
			                : recv(fd, sink, sizeof(sink), MSG_DONTWAIT);
			if (n == 0) {
				return false;
			}
			if (n > 0 && keep != NULL) {
				*kept += (size_t)n;
			}
		}
		if (pfd.revents & (POLLHUP | POLLERR)) {
			return false;
		}
		if (pfd.revents & POLLOUT) {
			ssize_t n = send(fd, p + off, len - off, MSG_DONTWAIT | MSG_NOSIGNAL);
			if (n < 0 && errno != EAGAIN && errno != EINTR) {
				return false;
			}
			off += n > 0 ? (size_t)n : 0;
		}
	}
	return true;
}

static size_t
put_frame(uint8_t *out, const struct ctl_msg *m)
{
	uint8_t body[CTL_MSG_MAX];
	struct wire_frame f = {.type = WIRE_CONTROL};
	int n = ctl_encode(m, body, sizeof(body));
	size_t h;

	FUZZ_CHECK(n > 0);
	f.len = (uint64_t)n;
	h = wire_header_encode(out, &f);
	memcpy(out + h, body, (size_t)n);
	return h + (size_t)n;
}

/* Did the frames in buf (after the preamble) hold our PONG? */
static bool
has_pong(const uint8_t *buf, size_t len)
{
	size_t pos = WIRE_PREAMBLE_LEN;

	while (pos < len) {
		struct wire_frame f;
		struct ctl_msg m;
		size_t hlen;
		if (wire_header_decode(buf + pos, len - pos, UINT64_MAX, &f, &hlen) != 1 ||
		    f.len > len - pos - hlen) {
			return false;
		}
		if (f.type == WIRE_CONTROL &&
		    ctl_decode(buf + pos + hlen, (size_t)f.len, &m) == 0 && m.type == CTL_PONG &&
		    m.u.token == CHECK_TOKEN) {
			return true;
		}
		pos += hlen + (size_t)f.len;
	}
	return false;
}

/* A well-behaved peer: preamble, HELLO, PING; the node must PONG. */
static void
check_handshake(void)
{
	static uint8_t in[READ_MAX];
	uint8_t out[3 * (WIRE_HDR_MAX + CTL_MSG_MAX)];
	struct ctl_msg m = {.type = CTL_HELLO};
	uint64_t deadline = now_ms() + CHECK_MS;
	size_t n = WIRE_PREAMBLE_LEN, got = 0;
	int fd = connect_node();

	wire_preamble_encode(out);
	m.u.hello.id = (struct ctl_str){"fuzz-check", 10};
	m.u.hello.batch_max = 65536;
	m.u.hello.chunk = 65536;
	m.u.hello.max_message = 65536;
	m.u.hello.window = 262144;
	m.u.hello.keepalive_ms = 1000;
	n += put_frame(out + n, &m);
	m = (struct ctl_msg){.type = CTL_PING, .u.token = CHECK_TOKEN};
	n += put_frame(out + n, &m);
	/* what the node sends meanwhile (its HELLO) is kept: frames are parsed
	 * from the start */
	FUZZ_CHECK(write_all(fd, out, n, deadline, in, sizeof(in), &got));
	while (!has_pong(in, got)) {
		struct pollfd pfd = {fd, POLLIN, 0};
		FUZZ_CHECK(now_ms() < deadline && got < sizeof(in)); /* the node did not answer */
		if (poll(&pfd, 1, 100) <= 0) {
			continue;
		}
		ssize_t r = recv(fd, in + got, sizeof(in) - got, MSG_DONTWAIT);
		FUZZ_CHECK(r != 0); /* the node closed a well-behaved connection */
		got += r > 0 ? (size_t)r : 0;
	}
	close(fd);
}

/* The node's own publisher reaches its own subscriber. */
static void
check_local(void)
{
	static uint64_t sent;
	tern_msg msg;
	uint64_t v;

	sent++;
	/* a fuzz peer still connected may have subscribed with a max_message
	 * below 8 bytes, or a fuzz peer may have refused the publisher (a
	 * DENY): the publisher is told it missed that peer (and delivers to
	 * the others), which is what reliable means */
	int rc = tern_publish(check_pub, &sent, sizeof(sent));
	FUZZ_CHECK(rc == 0 || rc == TERN_EMSGSIZE || rc == TERN_EACCES);
	/* messages the fuzz peer published on fuzz/check may come first */
	for (;;) {
		FUZZ_CHECK(tern_sub_recv(check_sub, &msg, CHECK_MS) == 0);
		if (msg.len == sizeof(v)) {
			memcpy(&v, msg.data, sizeof(v));
			if (v == sent) {
				return;
			}
		}
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	tern_msg msg;
	int fd;

	if (node == NULL) {
		node_open();
	}
	fd = connect_node();
	write_all(fd, data, size, now_ms() + CHECK_MS, NULL, 0, NULL);
	/* something the peer may have subscribed to */
	tern_publish(data_pub, "x", 1);
	check_handshake();
	check_local();
	close(fd);
	/* what the peer delivered under fuzz/ is dropped */
	while (tern_sub_recv(all_sub, &msg, 0) == 0) {
	}
	return 0;
}
