/*
 * cmd_sub.c - `tern sub KEYEXPR`: print every message whose key matches.
 *
 * Messages are pulled from the subscriber on the main thread, so a slow
 * stdout (a pager, a full pipe) slows only this loop and never the node's
 * I/O thread. stdout is flushed whenever no message is waiting: each line
 * reaches `grep` or `jq` at once, yet a burst costs one write, not thousands.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "config.h"
#include "escape.h"
#include "keystats.h"
#include "runtime.h"

#define DEFAULT_CONNECT "tcp://127.0.0.1:7447"

enum sub_opt { OPT_COUNT = OPT_FIRST_PRIVATE, OPT_TIMEOUT, OPT_FORMAT, OPT_STATS };
enum sub_format { FORMAT_PAYLOAD, FORMAT_JSON, FORMAT_NONE };

static const char sub_usage[] =
    "usage: tern sub KEYEXPR [-c FILE] [--connect EP]... [--listen EP]... [--count N]\n"
    "                [--timeout SECONDS] [--format payload|json|none] [--stats]\n"
    "\n"
    "Print every message whose key matches KEYEXPR ('*' matches one chunk, '**' any\n"
    "number: 'sensors/*/temp', 'demo/**'). With neither --connect nor --listen it\n"
    "connects to tcp://127.0.0.1:7447, the default 'tern node'.\n"
    "\n"
    "  -c, --config FILE  JSON config file (docs/CONFIG.md); flags override it\n"
    "  --connect EP       connect to EP (repeatable)\n"
    "  --listen EP        listen on EP (repeatable); port 0 picks a free port\n"
    "  --count N          exit after N messages\n"
    "  --timeout SECONDS  exit after SECONDS (status 1 if --count was not reached)\n"
    "  --format FORMAT    payload (default): KEY<TAB>PAYLOAD, with \\n, \\t, \\\\ and\n"
    "                     \\xHH escapes; json: one object a line with key, payload,\n"
    "                     encoding (utf8 or base64), seq and publisher; none: nothing\n"
    "  --stats            print per-key messages/s, MB/s and drops each second on stderr\n"
    "  --low-latency, --batched, --log LEVEL, --id NAME: as for 'tern node'\n"
    "  -h, --help         show this help\n"
    "\n"
    "On exit it prints on stderr:\n"
    "  messages=N bytes=B seconds=S msgs_per_s=X MB_per_s=Y missed=M\n"
    "where seconds run from the first message to the last and missed counts the\n"
    "messages that the publishers' sequence numbers say never arrived.\n";

static const struct option sub_options[] = {
    {"config", required_argument, NULL, OPT_CONFIG},
    {"listen", required_argument, NULL, OPT_LISTEN},
    {"connect", required_argument, NULL, OPT_CONNECT},
    {"low-latency", no_argument, NULL, OPT_LOW_LATENCY},
    {"batched", no_argument, NULL, OPT_BATCHED},
    {"log", required_argument, NULL, OPT_LOG},
    {"id", required_argument, NULL, OPT_ID},
    {"count", required_argument, NULL, OPT_COUNT},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"format", required_argument, NULL, OPT_FORMAT},
    {"stats", no_argument, NULL, OPT_STATS},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

struct sub_opts {
	const char *keyexpr;
	uint64_t count; /* 0: no limit */
	double timeout; /* 0: none */
	enum sub_format format;
	bool stats;
};

struct sub_run {
	const struct sub_opts *opts;
	tern_node *node;
	tern_sub *sub;
	keystats *keys;
	outbuf line;
	uint64_t messages;
	uint64_t bytes;
	double first;
	double last;
	bool unflushed;
	bool stdout_closed;
	bool failed; /* receiving failed (a peer refused the subscription) */
};

static int
format_message(struct sub_run *r, const tern_msg *msg)
{
	outbuf *ob = &r->line;
	char num[32];
	int rc = 0;

	ob->len = 0;
	if (r->opts->format == FORMAT_PAYLOAD) {
		rc = escape_payload(ob, msg->key, strlen(msg->key));
		rc = rc != 0 ? rc : outbuf_append(ob, "\t", 1);
		rc = rc != 0 ? rc : escape_payload(ob, msg->data, msg->len);
		rc = rc != 0 ? rc : outbuf_append(ob, "\n", 1);
		return rc;
	}
	rc = outbuf_append_str(ob, "{\"key\":");
	rc = rc != 0 ? rc : escape_json_string(ob, msg->key, strlen(msg->key));
	rc = rc != 0 ? rc : outbuf_append_str(ob, ",\"payload\":");
	if (utf8_valid(msg->data, msg->len)) {
		rc = rc != 0 ? rc : escape_json_string(ob, msg->data, msg->len);
		rc = rc != 0 ? rc : outbuf_append_str(ob, ",\"encoding\":\"utf8\"");
	} else {
		rc = rc != 0 ? rc : outbuf_append(ob, "\"", 1);
		rc = rc != 0 ? rc : base64_encode(ob, msg->data, msg->len);
		rc = rc != 0 ? rc : outbuf_append_str(ob, "\",\"encoding\":\"base64\"");
	}
	snprintf(num, sizeof(num), ",\"seq\":%llu", (unsigned long long)msg->seq);
	rc = rc != 0 ? rc : outbuf_append_str(ob, num);
	rc = rc != 0 ? rc : outbuf_append_str(ob, ",\"publisher\":");
	rc = rc != 0 ? rc
	             : escape_json_string(ob, msg->publisher != NULL ? msg->publisher : "",
	                                  msg->publisher != NULL ? strlen(msg->publisher) : 0);
	rc = rc != 0 ? rc : outbuf_append_str(ob, "}\n");
	return rc;
}

static void
flush_stdout(struct sub_run *r)
{
	if (!r->unflushed || r->stdout_closed) {
		return;
	}
	r->unflushed = false;
	if (fflush(stdout) != 0) {
		/* the reader went away (tern sub | head -1): stop quietly */
		r->stdout_closed = true;
		runtime_stop = 1;
	}
}

static void
handle_message(struct sub_run *r, const tern_msg *msg, double now)
{
	if (r->messages == 0) {
		r->first = now;
	}
	r->last = now;
	r->messages++;
	r->bytes += msg->len;
	if (r->keys != NULL) {
		keystats_add(r->keys, msg->key, msg->len);
	}
	if (r->opts->format == FORMAT_NONE || r->stdout_closed) {
		return;
	}
	if (format_message(r, msg) != 0) {
		cli_error("sub", "out of memory formatting a %zu-byte message", msg->len);
		return;
	}
	if (fwrite(r->line.data, 1, r->line.len, stdout) != r->line.len) {
		r->stdout_closed = true;
		runtime_stop = 1;
		return;
	}
	r->unflushed = true;
}

static void
print_sub_stats(struct sub_run *r, double interval, tern_stats *last)
{
	tern_stats st;
	tern_stats nst;

	tern_sub_stats(r->sub, &st);
	tern_node_stats(r->node, &nst);
	keystats_print(r->keys, stderr, interval);
	fprintf(stderr,
	        "stats sub=%s msgs_per_s=%.1f MB_per_s=%.3f missed=%llu connections=%llu "
	        "mean_batch_bytes=%.0f\n",
	        r->opts->keyexpr,
	        interval > 0 ? (double)(st.messages - last->messages) / interval : 0,
	        interval > 0 ? (double)(st.bytes - last->bytes) / interval / 1e6 : 0,
	        (unsigned long long)st.missed, (unsigned long long)nst.connections,
	        nst.batches > 0 ? (double)nst.batch_bytes / (double)nst.batches : 0);
	fflush(stderr);
	*last = st;
}

static void
serve_usr1(struct sub_run *r)
{
	char extra[256];
	tern_stats st;

	if (!runtime_usr1) {
		return;
	}
	tern_sub_stats(r->sub, &st);
	snprintf(extra, sizeof(extra),
	         "\"sub\":{\"messages\":%llu,\"bytes\":%llu,\"missed\":%llu,\"dropped\":%llu}",
	         (unsigned long long)st.messages, (unsigned long long)st.bytes,
	         (unsigned long long)st.missed, (unsigned long long)st.dropped);
	runtime_serve_usr1(r->node, "sub", extra);
}

/* Returns true if the loop ended because the timeout passed. */
static bool
receive_loop(struct sub_run *r)
{
	const struct sub_opts *o = r->opts;
	double start = runtime_now();
	double deadline = o->timeout > 0 ? start + o->timeout : 0;
	double next_stats = start + 1.0;
	double last_stats = start;
	tern_stats last = {0};

	double now = start;
	unsigned since_clock = 0;

	while (!runtime_stop && (o->count == 0 || r->messages < o->count)) {
		double wait = 0.1;
		tern_msg msg;
		int rc;

		/* a burst reads the clock once in a while, not once a message: the
		 * time of the last message is then off by at most a few microseconds */
		if (++since_clock >= 256) {
			now = runtime_now();
			since_clock = 0;
		}
		if (deadline > 0 && now >= deadline) {
			return true;
		}
		if (o->stats && now >= next_stats) {
			print_sub_stats(r, now - last_stats, &last);
			last_stats = now;
			next_stats = now + 1.0;
		}
		serve_usr1(r);
		rc = tern_sub_recv(r->sub, &msg, 0);
		if (rc == TERN_ETIMEDOUT) {
			flush_stdout(r);
			if (deadline > 0 && deadline - now < wait) {
				wait = deadline - now;
			}
			if (o->stats && next_stats - now < wait) {
				wait = next_stats - now;
			}
			rc = tern_sub_recv(r->sub, &msg, wait > 0.001 ? (int)(wait * 1000) : 1);
			now = runtime_now();
			since_clock = 0;
		}
		if (rc == TERN_ETIMEDOUT) {
			continue;
		}
		if (rc != 0) {
			if (rc == TERN_EACCES) {
				cli_error("sub", "%s", tern_last_error()); /* a peer's acl */
			} else {
				cli_error("sub", "receive failed: %s", tern_last_error());
			}
			r->failed = true;
			runtime_stop = 1;
			break;
		}
		handle_message(r, &msg, now);
		if (o->count != 0 && r->messages == o->count) {
			r->last = runtime_now();
		}
	}
	flush_stdout(r);
	return false;
}

static int
sub_run(node_config *nc, const struct sub_opts *o)
{
	struct sub_run r;
	tern_stats st;
	char extra[64];
	bool timed_out;
	int status = EXIT_OK;
	int rc;

	memset(&r, 0, sizeof(r));
	r.opts = o;
	if (o->stats) {
		r.keys = keystats_new();
		if (r.keys == NULL) {
			cli_error("sub", "out of memory");
			return EXIT_RUNTIME;
		}
	}
	runtime_signals_init();
	runtime_quiet_connect_errors();
	status = runtime_open(nc, "sub", NULL, DEFAULT_CONNECT, &r.node);
	if (status != EXIT_OK) {
		keystats_free(r.keys);
		return status;
	}
	rc = tern_sub_open(&r.sub, r.node, o->keyexpr, NULL, NULL);
	if (rc != 0) {
		cli_error("sub", "cannot subscribe to \"%s\": %s", o->keyexpr, tern_last_error());
		tern_node_close(r.node);
		keystats_free(r.keys);
		return rc == TERN_EKEY ? EXIT_USAGE : EXIT_RUNTIME;
	}
	runtime_signals_unblock();
	timed_out = receive_loop(&r);
	tern_sub_stats(r.sub, &st);
	tern_sub_close(r.sub);
	tern_node_close(r.node);
	runtime_signals_block();
	if (r.failed) {
		status = EXIT_RUNTIME;
	} else if (timed_out && r.messages == 0 && runtime_connect_error() != NULL) {
		cli_error("sub", "%s (gave up after %g s)", runtime_connect_error(), o->timeout);
		status = EXIT_RUNTIME;
	} else if (timed_out && o->count > 0 && r.messages < o->count) {
		cli_error("sub", "timed out after %g s with %llu of %llu messages", o->timeout,
		          (unsigned long long)r.messages, (unsigned long long)o->count);
		status = EXIT_RUNTIME;
	}
	snprintf(extra, sizeof(extra), " missed=%llu", (unsigned long long)st.missed);
	runtime_summary(r.messages, r.bytes, r.messages > 1 ? r.last - r.first : 0, extra);
	outbuf_free(&r.line);
	keystats_free(r.keys);
	return status;
}

static int
parse_args(int argc, char **argv, cli_common *cc, struct sub_opts *o, bool *help)
{
	int opt;

	optind = 1;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "c:h", sub_options, NULL)) != -1) {
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
		case OPT_COUNT:
			if (cli_parse_u64("sub", "--count", optarg, 1, UINT64_MAX / 2, &o->count) !=
			    0) {
				return EXIT_USAGE;
			}
			break;
		case OPT_TIMEOUT:
			if (cli_parse_seconds("sub", "--timeout", optarg, &o->timeout) != 0) {
				return EXIT_USAGE;
			}
			break;
		case OPT_FORMAT:
			if (strcmp(optarg, "payload") == 0) {
				o->format = FORMAT_PAYLOAD;
			} else if (strcmp(optarg, "json") == 0) {
				o->format = FORMAT_JSON;
			} else if (strcmp(optarg, "none") == 0) {
				o->format = FORMAT_NONE;
			} else {
				cli_error("sub", "--format: \"%s\" is not payload, json or none",
				          optarg);
				return EXIT_USAGE;
			}
			break;
		case OPT_STATS:
			o->stats = true;
			break;
		default:
			cli_bad_option("sub", argc, argv, optopt);
			return EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		cli_error("sub", "missing KEYEXPR (see 'tern sub --help')");
		return EXIT_USAGE;
	}
	if (optind + 1 < argc) {
		cli_error("sub", "unexpected argument \"%s\" (see 'tern sub --help')",
		          argv[optind + 1]);
		return EXIT_USAGE;
	}
	o->keyexpr = argv[optind];
	if (tern_keyexpr_check(o->keyexpr) != 0) {
		cli_error("sub", "%s", tern_last_error());
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

int
cmd_sub(int argc, char **argv)
{
	struct sub_opts o = {NULL, 0, 0, FORMAT_PAYLOAD, false};
	cli_common cc;
	node_config nc;
	bool help = false;
	int status;

	if (cli_common_init(&cc, "sub", argc) != 0) {
		cli_error("sub", "out of memory");
		return EXIT_RUNTIME;
	}
	status = parse_args(argc, argv, &cc, &o, &help);
	if (status != EXIT_OK || help) {
		if (help) {
			fputs(sub_usage, stdout);
		}
		cli_common_free(&cc);
		return status;
	}
	config_init(&nc);
	/* connection events are for nodes; a sub only warns unless told */
	nc.tern.log_level = TERN_LOG_WARN;
	status = cli_build_config(&cc, &nc);
	if (status == EXIT_OK) {
		status = sub_run(&nc, &o);
	}
	config_free(&nc);
	cli_common_free(&cc);
	return status;
}
