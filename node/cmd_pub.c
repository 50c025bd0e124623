/*
 * cmd_pub.c - `tern pub KEY`: publish --data, --size N bytes, or each line of
 * stdin as one message.
 *
 * Before the first message the publisher waits (up to --wait seconds) for a
 * peer and for a matching subscriber, so `printf 'a\nb\n' | tern pub k`
 * reaches a subscriber that is already running instead of racing the
 * handshake. stdin is read with poll() so a signal or SIGUSR1 is served even
 * while `tail -f` is silent.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "config.h"
#include "escape.h"
#include "runtime.h"

#define DEFAULT_CONNECT "tcp://127.0.0.1:7447"
#define READ_CHUNK      65536

enum pub_opt {
	OPT_DATA = OPT_FIRST_PRIVATE,
	OPT_SIZE,
	OPT_COUNT,
	OPT_RATE,
	OPT_BEST_EFFORT,
	OPT_WAIT
};

static const char pub_usage[] =
    "usage: tern pub KEY [-c FILE] [--connect EP]... [--listen EP]... [--data TEXT | --size N]\n"
    "                [--count N] [--rate N] [--low-latency|--batched] [--best-effort]\n"
    "                [--wait SECONDS]\n"
    "\n"
    "Publish messages on KEY. With neither --data nor --size, each line of stdin is\n"
    "one message (without its newline), so 'tail -f app.log | tern pub logs/app' works.\n"
    "With neither --connect nor --listen it connects to tcp://127.0.0.1:7447.\n"
    "\n"
    "  -c, --config FILE  JSON config file (docs/CONFIG.md); flags override it\n"
    "  --connect EP       connect to EP (repeatable)\n"
    "  --listen EP        listen on EP (repeatable); port 0 picks a free port\n"
    "  --data TEXT        publish TEXT\n"
    "  --size N           publish N-byte payloads\n"
    "  --count N          stop after N messages; with --data or --size the default is 1\n"
    "                     and 0 means no limit; with stdin, the default is until EOF\n"
    "  --rate N           at most N messages per second\n"
    "  --best-effort      drop (and count) messages when a queue is full, never block\n"
    "  --wait SECONDS     wait this long for a peer and a subscriber before the first\n"
    "                     message (default 3); then publish anyway\n"
    "  --low-latency, --batched, --log LEVEL, --id NAME: as for 'tern node'\n"
    "  -h, --help         show this help\n"
    "\n"
    "On exit it prints on stderr:\n"
    "  messages=N bytes=B seconds=S msgs_per_s=X MB_per_s=Y\n"
    "(and dropped=D with --best-effort), seconds running from the first message\n"
    "until everything was written to the sockets.\n";

static const struct option pub_options[] = {
    {"config", required_argument, NULL, OPT_CONFIG},
    {"listen", required_argument, NULL, OPT_LISTEN},
    {"connect", required_argument, NULL, OPT_CONNECT},
    {"low-latency", no_argument, NULL, OPT_LOW_LATENCY},
    {"batched", no_argument, NULL, OPT_BATCHED},
    {"log", required_argument, NULL, OPT_LOG},
    {"id", required_argument, NULL, OPT_ID},
    {"data", required_argument, NULL, OPT_DATA},
    {"size", required_argument, NULL, OPT_SIZE},
    {"count", required_argument, NULL, OPT_COUNT},
    {"rate", required_argument, NULL, OPT_RATE},
    {"best-effort", no_argument, NULL, OPT_BEST_EFFORT},
    {"wait", required_argument, NULL, OPT_WAIT},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

struct pub_opts {
	const char *key;
	const char *data;
	uint64_t size;
	bool have_size;
	uint64_t count;
	bool have_count;
	uint64_t rate;
	bool best_effort;
	double wait;
};

struct pub_run {
	const struct pub_opts *opts;
	tern_node *node;
	tern_pub *pub;
	uint64_t max_message;
	uint64_t messages;
	uint64_t bytes;
	uint64_t dropped;
	uint64_t errors;
	double first;
	double next_due;
	bool failed;
	bool unreachable;
};

/* Wait for the start: a peer, then a subscriber that matches (bounded). */
static void
wait_for_audience(struct pub_run *r)
{
	double deadline = runtime_now() + r->opts->wait;
	int rc = tern_node_wait_peers(r->node, 1, (int)(r->opts->wait * 1000));

	if (rc != 0 && runtime_connect_error() != NULL) {
		/* it dialed and nobody answered: publishing would go nowhere */
		cli_error("pub", "%s (gave up after %g s)", runtime_connect_error(), r->opts->wait);
		r->unreachable = true;
		return;
	}
	if (rc != 0) {
		runtime_log(TERN_LOG_WARN, "no peer after %g s; publishing anyway", r->opts->wait);
		return;
	}
	while (!runtime_stop && tern_pub_matched(r->pub) <= 0 && runtime_now() < deadline) {
		runtime_sleep(0.01);
	}
}

static void
serve_usr1(struct pub_run *r)
{
	outbuf extra = {0};
	char counters[160];
	tern_stats st;
	int rc;

	if (!runtime_usr1) {
		return;
	}
	tern_pub_stats(r->pub, &st);
	snprintf(counters, sizeof(counters), ",\"messages\":%llu,\"bytes\":%llu,\"dropped\":%llu}",
	         (unsigned long long)st.messages, (unsigned long long)st.bytes,
	         (unsigned long long)st.dropped);
	rc = outbuf_append_str(&extra, "\"pub\":{\"key\":");
	rc = rc != 0 ? rc : escape_json_string(&extra, r->opts->key, strlen(r->opts->key));
	rc = rc != 0 ? rc : outbuf_append_str(&extra, counters);
	runtime_serve_usr1(r->node, "pub", rc == 0 ? extra.data : NULL);
	outbuf_free(&extra);
}

/* Sleep until the next message is due under --rate. */
static void
pace(struct pub_run *r)
{
	double now;

	if (r->opts->rate == 0) {
		return;
	}
	now = runtime_now();
	if (r->next_due == 0) {
		r->next_due = now;
	}
	while (!runtime_stop && now < r->next_due) {
		runtime_sleep(r->next_due - now);
		serve_usr1(r);
		now = runtime_now();
	}
	r->next_due += 1.0 / (double)r->opts->rate;
	/* after a long stall do not burst to catch up more than a second */
	if (r->next_due < now - 1.0) {
		r->next_due = now;
	}
}

/* Publish one message. Returns false when publishing must stop. */
static bool
publish_one(struct pub_run *r, const void *data, size_t len)
{
	bool warned = false;

	pace(r);
	if (runtime_stop) {
		return false;
	}
	if (r->messages == 0 && r->dropped == 0) {
		r->first = runtime_now();
	}
	for (;;) {
		int rc = tern_publish(r->pub, data, len);
		if (rc == 0) {
			r->messages++;
			r->bytes += len;
			return true;
		}
		if (rc == TERN_EAGAIN) {
			r->dropped++;
			return true;
		}
		if (rc == TERN_EMSGSIZE) {
			cli_error("pub", "a %zu-byte message was refused: %s", len,
			          tern_last_error());
			r->errors++;
			return true;
		}
		/* reliable and a subscriber is slow: keep the message, try again */
		if (rc == TERN_ETIMEDOUT && !runtime_stop) {
			if (!warned) {
				runtime_log(TERN_LOG_WARN,
				            "publishing on %s is blocked by a slow subscriber; "
				            "retrying",
				            r->opts->key);
				warned = true;
			}
			serve_usr1(r);
			continue;
		}
		if (rc == TERN_EACCES) {
			cli_error("pub", "%s", tern_last_error());
			r->failed = true;
		} else if (rc != TERN_ETIMEDOUT) {
			cli_error("pub", "publish failed: %s", tern_last_error());
			r->failed = true;
		}
		return false;
	}
}

static bool
count_reached(const struct pub_run *r)
{
	return r->opts->count > 0 && r->messages + r->dropped + r->errors >= r->opts->count;
}

static void
publish_fixed(struct pub_run *r)
{
	const struct pub_opts *o = r->opts;
	const char *payload = o->data;
	size_t len = o->data != NULL ? strlen(o->data) : 0;
	char *filled = NULL;

	if (o->have_size) {
		filled = malloc(o->size > 0 ? o->size : 1);
		if (filled == NULL) {
			cli_error("pub", "out of memory for a %llu-byte payload",
			          (unsigned long long)o->size);
			r->failed = true;
			return;
		}
		/* printable filler, so `tern sub` output stays readable */
		for (uint64_t i = 0; i < o->size; i++) {
			filled[i] = (char)('a' + i % 26);
		}
		payload = filled;
		len = o->size;
	}
	while (!runtime_stop && !count_reached(r)) {
		serve_usr1(r);
		if (!publish_one(r, payload, len)) {
			break;
		}
	}
	free(filled);
}

struct line_reader {
	char *buf;
	size_t len;
	size_t cap;
	bool skipping; /* inside a line that was too long */
	bool eof;
};

/* Read more of stdin; false on EOF or error. Waits at most 100 ms. */
static bool
reader_fill(struct line_reader *lr, uint64_t limit)
{
	struct pollfd pfd = {STDIN_FILENO, POLLIN, 0};
	ssize_t n;

	if (poll(&pfd, 1, 100) <= 0) {
		return true;
	}
	if (lr->cap - lr->len < READ_CHUNK) {
		size_t cap = lr->len + READ_CHUNK;
		char *grown;
		if (cap > limit + READ_CHUNK + 1) {
			/* the line is longer than a message may be: drop what we have */
			lr->len = 0;
			lr->skipping = true;
			cap = READ_CHUNK;
		}
		if (cap > lr->cap) {
			grown = realloc(lr->buf, cap);
			if (grown == NULL) {
				return false;
			}
			lr->buf = grown;
			lr->cap = cap;
		}
	}
	n = read(STDIN_FILENO, lr->buf + lr->len, lr->cap - lr->len);
	if (n < 0 && errno == EINTR) {
		return true;
	}
	if (n <= 0) {
		lr->eof = true;
		return false;
	}
	lr->len += (size_t)n;
	return true;
}

static void
publish_lines(struct pub_run *r)
{
	struct line_reader lr = {NULL, 0, 0, false, false};
	bool more = true;

	while (!runtime_stop && !count_reached(r) && !r->failed) {
		char *nl;
		size_t used = 0;

		serve_usr1(r);
		more = reader_fill(&lr, r->max_message);
		/* lr.buf is NULL until the first byte arrives: test len first */
		while (!runtime_stop && !count_reached(r) && lr.len > used &&
		       (nl = memchr(lr.buf + used, '\n', lr.len - used)) != NULL) {
			size_t line_len = (size_t)(nl - (lr.buf + used));
			if (lr.skipping) {
				cli_error("pub",
				          "a line longer than max_message_bytes (%llu) was "
				          "skipped",
				          (unsigned long long)r->max_message);
				lr.skipping = false;
				r->errors++;
			} else if (!publish_one(r, lr.buf + used, line_len)) {
				break;
			}
			used += line_len + 1;
		}
		if (used > 0) {
			memmove(lr.buf, lr.buf + used, lr.len - used);
			lr.len -= used;
		}
		if (!more) {
			if (!lr.eof) {
				cli_error("pub", "out of memory reading a line of stdin");
				r->failed = true;
			}
			break;
		}
	}
	/* the last line of a file may have no newline */
	if (lr.eof && lr.len > 0 && !lr.skipping && !runtime_stop && !count_reached(r)) {
		publish_one(r, lr.buf, lr.len);
	}
	free(lr.buf);
}

static int
pub_run(node_config *nc, const struct pub_opts *o)
{
	struct pub_run r;
	char extra[64] = "";
	double seconds;
	int status;
	int rc;

	memset(&r, 0, sizeof(r));
	r.opts = o;
	r.max_message = nc->tern.max_message_bytes;
	if (o->best_effort) {
		nc->tern.reliability = TERN_BEST_EFFORT;
	}
	runtime_signals_init();
	runtime_quiet_connect_errors();
	status = runtime_open(nc, "pub", NULL, DEFAULT_CONNECT, &r.node);
	if (status != EXIT_OK) {
		return status;
	}
	rc = tern_pub_open(&r.pub, r.node, o->key, o->best_effort ? TERN_BEST_EFFORT : -1);
	if (rc != 0) {
		cli_error("pub", "cannot publish on \"%s\": %s", o->key, tern_last_error());
		tern_node_close(r.node);
		return rc == TERN_EKEY ? EXIT_USAGE : EXIT_RUNTIME;
	}
	runtime_signals_unblock();
	wait_for_audience(&r);
	if (r.unreachable) {
		tern_pub_close(r.pub);
		tern_node_close(r.node);
		return EXIT_RUNTIME;
	}
	if (o->data != NULL || o->have_size) {
		publish_fixed(&r);
	} else {
		publish_lines(&r);
	}
	/* the summary covers the time until the last byte reached the socket */
	rc = tern_pub_flush(
	    r.pub, (int)(nc->tern.publish_timeout_ms > 0 ? nc->tern.publish_timeout_ms : 1000));
	if (rc != 0) {
		runtime_log(TERN_LOG_WARN, "not everything was written before exit: %s",
		            tern_last_error());
	}
	seconds = r.messages > 0 ? runtime_now() - r.first : 0;
	/* reliable: what a subscriber never got makes the exit status non-zero */
	rc = tern_pub_close(r.pub);
	if (rc == TERN_EACCES && !r.failed) {
		/* refused by a peer's acl after the last message went out */
		cli_error("pub", "%s", tern_last_error());
		r.failed = true;
	} else if (rc != 0 && rc != TERN_EACCES) {
		runtime_log(TERN_LOG_ERROR, "%s", tern_last_error());
		r.failed = true;
	}
	tern_node_close(r.node);
	runtime_signals_block();
	if (o->best_effort) {
		snprintf(extra, sizeof(extra), " dropped=%llu", (unsigned long long)r.dropped);
	}
	runtime_summary(r.messages, r.bytes, seconds, extra);
	return r.failed || r.errors > 0 ? EXIT_RUNTIME : EXIT_OK;
}

static int
parse_args(int argc, char **argv, cli_common *cc, struct pub_opts *o, bool *help)
{
	int opt;

	optind = 1;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "c:h", pub_options, NULL)) != -1) {
		int handled = cli_common_option(cc, opt, optarg);
		if (handled < 0) {
			return EXIT_USAGE;
		}
		if (handled > 0) {
			continue;
		}
		switch (opt) {
		case OPT_HELP:
			*help = true;
			return EXIT_OK;
		case OPT_DATA:
			o->data = optarg;
			break;
		case OPT_SIZE:
			if (cli_parse_u64("pub", "--size", optarg, 0, 4294967295ull, &o->size) !=
			    0) {
				return EXIT_USAGE;
			}
			o->have_size = true;
			break;
		case OPT_COUNT:
			if (cli_parse_u64("pub", "--count", optarg, 0, UINT64_MAX / 4, &o->count) !=
			    0) {
				return EXIT_USAGE;
			}
			o->have_count = true;
			break;
		case OPT_RATE:
			if (cli_parse_u64("pub", "--rate", optarg, 1, 100000000, &o->rate) != 0) {
				return EXIT_USAGE;
			}
			break;
		case OPT_BEST_EFFORT:
			o->best_effort = true;
			break;
		case OPT_WAIT:
			if (cli_parse_seconds("pub", "--wait", optarg, &o->wait) != 0) {
				return EXIT_USAGE;
			}
			break;
		default:
			cli_bad_option("pub", argc, argv, optopt);
			return EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		cli_error("pub", "missing KEY (see 'tern pub --help')");
		return EXIT_USAGE;
	}
	if (optind + 1 < argc) {
		cli_error("pub", "unexpected argument \"%s\" (see 'tern pub --help')",
		          argv[optind + 1]);
		return EXIT_USAGE;
	}
	if (o->data != NULL && o->have_size) {
		cli_error("pub", "--data and --size cannot be used together");
		return EXIT_USAGE;
	}
	o->key = argv[optind];
	if (tern_key_check(o->key) != 0) {
		cli_error("pub", "%s", tern_last_error());
		return EXIT_USAGE;
	}
	if (!o->have_count && (o->data != NULL || o->have_size)) {
		o->count = 1;
	}
	return EXIT_OK;
}

int
cmd_pub(int argc, char **argv)
{
	struct pub_opts o;
	cli_common cc;
	node_config nc;
	bool help = false;
	int status;

	memset(&o, 0, sizeof(o));
	o.wait = 3.0;
	if (cli_common_init(&cc, "pub", argc) != 0) {
		cli_error("pub", "out of memory");
		return EXIT_RUNTIME;
	}
	status = parse_args(argc, argv, &cc, &o, &help);
	if (status != EXIT_OK || help) {
		if (help) {
			fputs(pub_usage, stdout);
		}
		cli_common_free(&cc);
		return status;
	}
	config_init(&nc);
	nc.tern.log_level = TERN_LOG_WARN;
	status = cli_build_config(&cc, &nc);
	if (status == EXIT_OK && o.have_size && o.size > nc.tern.max_message_bytes) {
		cli_error("pub", "--size %llu is larger than max_message_bytes (%llu)",
		          (unsigned long long)o.size,
		          (unsigned long long)nc.tern.max_message_bytes);
		status = EXIT_USAGE;
	}
	if (status == EXIT_OK) {
		status = pub_run(&nc, &o);
	}
	config_free(&nc);
	cli_common_free(&cc);
	return status;
}
