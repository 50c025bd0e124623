/*
 * cmd_top.c - `tern top`: a live view of every node the connected node can
 * reach, drawn from the telemetry that each node publishes on
 * @tern/NODE_ID/stats (docs/CONFIG.md, "Telemetry").
 *
 * top opens a node of its own that reports nothing (an observer does not
 * report on itself), subscribes to every key under @tern with a callback
 * that only files each report (reports.h), and on the main thread redraws
 * once a second.
 * On a terminal the view fills the screen and q quits; the terminal's
 * settings are restored on every way out, SIGINT and SIGTERM included
 * (they only set a flag that ends the loop). --once waits long enough to
 * hear from every node, prints one snapshot and exits.
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "config.h"
#include "escape.h"
#include "reports.h"
#include "runtime.h"
#include "term.h"
#include "toptable.h"

#define DEFAULT_CONNECT "tcp://127.0.0.1:7447"
#define DEFAULT_WAIT_S  2.0
/* --once waits this many of the longest report interval heard */
#define ONCE_INTERVALS 1.5
/* sizes when stdout is a terminal that does not say its size */
#define DEFAULT_COLS 80
#define DEFAULT_ROWS 24

enum top_opt { OPT_ONCE = OPT_FIRST_PRIVATE, OPT_FORMAT, OPT_WAIT };
enum top_format { FORMAT_TABLE, FORMAT_JSON };

static const char top_usage[] =
    "usage: tern top [-c FILE] [--connect EP]... [--listen EP]... [--once]\n"
    "                [--format table|json] [--wait SECONDS]\n"
    "\n"
    "Show every node that the connected node can reach, from the telemetry each\n"
    "node publishes on @tern/NODE_ID/stats: its nodes, their connections (round\n"
    "trip, bytes in and out per second) and their keys (messages/s, MB/s, drops,\n"
    "missed, time publishers were blocked, queued bytes and, for subscribers,\n"
    "publish-to-delivery latency percentiles), busiest first, redrawn each second\n"
    "to fit the terminal. q or Ctrl-C quits. With neither --connect nor --listen\n"
    "it connects to tcp://127.0.0.1:7447, the default 'tern node'.\n"
    "\n"
    "  -c, --config FILE  JSON config file (docs/CONFIG.md); flags override it\n"
    "  --connect EP       connect to EP (repeatable)\n"
    "  --listen EP        listen on EP (repeatable); port 0 picks a free port\n"
    "  --once             print one snapshot and exit (status 1 if no node reported)\n"
    "  --format FORMAT    table (default) or json: {\"time_us\":T,\"nodes\":[REPORT...]},\n"
    "                     one object a line each second, or one with --once\n"
    "  --wait SECONDS     --once: listen this long after connecting (default 2, and\n"
    "                     at least 1.5 times the longest report interval heard)\n"
    "  --log LEVEL        error, warn (default), info or debug\n"
    "  --id NAME          this observer's name, as the nodes' connections show it\n"
    "  -h, --help         show this help\n"
    "\n"
    "Nodes report every telemetry.interval_ms (default 1000); a node not heard from\n"
    "for three of its intervals leaves the view. Not on a terminal, the table is\n"
    "printed whole each second, snapshots apart by a blank line.\n";

static const struct option top_options[] = {
    {"config", required_argument, NULL, OPT_CONFIG},
    {"listen", required_argument, NULL, OPT_LISTEN},
    {"connect", required_argument, NULL, OPT_CONNECT},
    {"log", required_argument, NULL, OPT_LOG},
    {"id", required_argument, NULL, OPT_ID},
    {"once", no_argument, NULL, OPT_ONCE},
    {"format", required_argument, NULL, OPT_FORMAT},
    {"wait", required_argument, NULL, OPT_WAIT},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

struct top_opts {
	bool once;
	enum top_format format;
	double wait;
};

struct top_run {
	const struct top_opts *opts;
	const node_config *nc;
	tern_node *node;
	tern_sub *sub;
	reports *rs;
	outbuf frame;
	bool tty;    /* stdout is a terminal */
	bool screen; /* the alternate screen is on */
	term_keys keys;
	bool stdout_closed;
	bool heard;       /* some node reported, at some point */
	double connected; /* seconds from start to the first connection; < 0: none */
	double silent;    /* --once heard nothing: seconds it listened */
};

static void
on_report(void *arg, const tern_msg *msg)
{
	struct top_run *r = arg;

	/* a report lost for want of memory is replaced by the next one */
	(void)reports_put(r->rs, msg->key, msg->data, msg->len, runtime_now());
}

/* Microseconds since the Unix epoch. */
static long long
wall_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* {"time_us":T,"nodes":[...]}: each node's report as it was published. */
static int
render_json(outbuf *ob, const reports *rs)
{
	char head[64];
	int rc;

	snprintf(head, sizeof(head), "{\"time_us\":%lld,\"nodes\":[", wall_us());
	rc = outbuf_append_str(ob, head);
	for (size_t i = 0; i < reports_count(rs) && rc == 0; i++) {
		const report *rep = reports_at(rs, i);
		if (i > 0) {
			rc = outbuf_append(ob, ",", 1);
		}
		if (rc != 0) {
			break;
		}
		if (memchr(rep->text, '\n', rep->len) == NULL &&
		    memchr(rep->text, '\r', rep->len) == NULL) {
			rc = outbuf_append(ob, rep->text, rep->len);
		} else {
			/* one object a line: a report written over lines is reprinted */
			char *flat = cJSON_PrintUnformatted(rep->json);
			rc = flat != NULL ? outbuf_append_str(ob, flat) : TERN_ENOMEM;
			cJSON_free(flat);
		}
	}
	return rc != 0 ? rc : outbuf_append_str(ob, "]}\n");
}

/* The line shown while no node has reported. (Why a connection fails is
 * known only to the I/O thread's log; it is printed once top has ended.) */
static void
waiting_text(const struct top_run *r, char *buf, size_t len)
{
	const node_config *nc = r->nc;
	tern_stats st;
	size_t n;

	tern_node_stats(r->node, &st);
	n = (size_t)snprintf(buf, len, "waiting for telemetry");
	for (size_t i = 0; i < nc->connect_count && n < len; i++) {
		n += (size_t)snprintf(buf + n, len - n, "%s%s", i == 0 ? " from " : ", ",
		                      nc->connect[i]);
	}
	if (nc->connect_count == 0 && nc->listen_count > 0 && n < len) {
		n += (size_t)snprintf(buf + n, len - n, " on %s", nc->listen[0]);
	}
	if (n < len) {
		snprintf(buf + n, len - n, "%s",
		         st.connections > 0 ? " (connected)" : " (not connected yet)");
	}
}

static int
render_table(struct top_run *r, bool live)
{
	toptable_opts to = {0, 0, false, NULL, NULL};
	char clock[16];
	char waiting[600];
	time_t now = time(NULL);
	struct tm tm;
	int cols = DEFAULT_COLS;
	int rows = DEFAULT_ROWS;

	localtime_r(&now, &tm);
	strftime(clock, sizeof(clock), "%H:%M:%S", &tm);
	to.clock = clock;
	if (r->tty) {
		term_size(STDOUT_FILENO, &cols, &rows);
		to.width = cols;
		/* the last line stays empty: writing it would scroll the screen */
		to.height = live ? (rows > 1 ? rows - 1 : 1) : 0;
		to.ansi = live;
	}
	if (live) {
		waiting_text(r, waiting, sizeof(waiting));
		to.waiting = waiting;
	}
	if (to.ansi && outbuf_append_str(&r->frame, "\033[H") != 0) {
		return TERN_ENOMEM;
	}
	if (toptable_render(&r->frame, r->rs, &to) != 0) {
		return TERN_ENOMEM;
	}
	if (to.ansi) {
		return outbuf_append_str(&r->frame, "\033[J");
	}
	/* snapshots that scroll by are kept apart by a blank line */
	return live ? outbuf_append(&r->frame, "\n", 1) : 0;
}

/* Write to stdout; false when it cannot be written. A signal that
 * interrupts the write (SIGTERM while a slow terminal drains) is no such
 * failure: the frame is cut short, and either the next one draws the whole
 * screen again or the loop ends on the signal's flag. */
static bool
write_out(const char *data, size_t len)
{
	if (fwrite(data, 1, len, stdout) == len && fflush(stdout) == 0) {
		return true;
	}
	if (errno == EINTR) {
		clearerr(stdout);
		return true;
	}
	return false;
}

/* Draw one frame; false when stdout is gone or memory ran out. */
static bool
emit_frame(struct top_run *r, bool live)
{
	int rc;

	r->frame.len = 0;
	if (r->opts->format == FORMAT_JSON) {
		rc = render_json(&r->frame, r->rs);
	} else {
		rc = render_table(r, live);
	}
	if (rc != 0) {
		cli_error("top", "out of memory drawing the view");
		return false;
	}
	if (!write_out(r->frame.data, r->frame.len)) {
		/* the reader went away (tern top --format json | head -1) */
		r->stdout_closed = true;
		return false;
	}
	return true;
}

/* Wait up to seconds for a key; true when it says quit (q, or the
 * terminal is gone). */
static bool
wait_key(struct top_run *r, double seconds)
{
	struct pollfd pfd = {STDIN_FILENO, POLLIN, 0};
	char keys[64];
	ssize_t n;

	if (seconds <= 0) {
		return false;
	}
	if (!r->keys.on) {
		runtime_sleep(seconds);
		return false;
	}
	/* a signal ends the wait with EINTR; the loop then sees the flag */
	if (poll(&pfd, 1, (int)(seconds * 1000) + 1) <= 0) {
		return false;
	}
	n = read(STDIN_FILENO, keys, sizeof(keys));
	if (n < 0) {
		return errno != EINTR && errno != EAGAIN;
	}
	if (n == 0) {
		return true;
	}
	return memchr(keys, 'q', (size_t)n) != NULL || memchr(keys, 'Q', (size_t)n) != NULL;
}

static void
screen_on(struct top_run *r)
{
	static const char on[] = "\033[?1049h\033[?25l\033[H\033[2J";

	/* the alternate screen and no cursor, as top and less have */
	(void)write_out(on, sizeof(on) - 1);
	r->screen = true;
}

static void
screen_off(struct top_run *r)
{
	static const char off[] = "\033[?25h\033[?1049l";

	if (!r->screen) {
		return;
	}
	(void)write_out(off, sizeof(off) - 1);
	r->screen = false;
}

static int
run_live(struct top_run *r)
{
	/* a table is drawn at once ("waiting for ..."); JSON lines only
	 * once there has been time to hear from the nodes */
	double next = runtime_now() + (r->opts->format == FORMAT_TABLE ? 0 : 1.0);

	if (isatty(STDIN_FILENO)) {
		term_keys_on(&r->keys, STDIN_FILENO);
	}
	if (r->tty && r->opts->format == FORMAT_TABLE) {
		screen_on(r);
	}
	while (!runtime_stop) {
		double now = runtime_now();
		if (now >= next) {
			reports_update(r->rs, now);
			r->heard = r->heard || reports_count(r->rs) > 0;
			if (!emit_frame(r, true)) {
				break;
			}
			next += 1.0;
			if (next <= now) {
				next = now + 1.0;
			}
		}
		if (wait_key(r, next - runtime_now())) {
			break;
		}
	}
	screen_off(r);
	term_keys_off(&r->keys);
	return EXIT_OK;
}

static int
run_once(struct top_run *r)
{
	const struct top_opts *o = r->opts;
	double start = runtime_now();
	double connected = 0;
	double now = start;
	tern_stats st;

	while (!runtime_stop) {
		now = runtime_now();
		if (connected == 0) {
			tern_node_stats(r->node, &st);
			if (st.connections > 0) {
				connected = now;
			} else if (now - start >= o->wait) {
				break;
			}
		}
		if (connected > 0) {
			double need;
			reports_update(r->rs, now);
			need = ONCE_INTERVALS * reports_max_interval(r->rs);
			if (now - connected >= (o->wait > need ? o->wait : need)) {
				break;
			}
		}
		runtime_sleep(0.05);
	}
	if (runtime_stop) {
		return EXIT_OK;
	}
	reports_update(r->rs, runtime_now());
	if (reports_count(r->rs) > 0) {
		r->heard = true;
		return emit_frame(r, false) || r->stdout_closed ? EXIT_OK : EXIT_RUNTIME;
	}
	/* said by top_run once the node is closed: see report_silence */
	r->connected = connected > 0 ? connected - start : -1;
	r->silent = connected > 0 ? now - connected : o->wait;
	return EXIT_RUNTIME;
}

/* Why no node was heard from. Called after the node is closed: only then
 * may this thread read what its I/O thread logged. */
static void
report_silence(const struct top_run *r)
{
	const char *why = runtime_connect_error();

	if (r->connected < 0 && why != NULL) {
		cli_error("top", "%s (gave up after %g s)", why, r->silent);
	} else if (r->connected < 0) {
		cli_error("top", "no peer connected within %g s", r->silent);
	} else {
		cli_error("top",
		          "heard from no node within %.1f s of connecting (telemetry.interval_ms 0 "
		          "turns a node's reports off)",
		          r->silent);
	}
}

static int
top_run(node_config *nc, const struct top_opts *o)
{
	struct top_run r;
	int status;
	int rc;

	memset(&r, 0, sizeof(r));
	r.opts = o;
	r.nc = nc;
	r.tty = isatty(STDOUT_FILENO);
	r.rs = reports_new();
	if (r.rs == NULL) {
		cli_error("top", "out of memory");
		return EXIT_RUNTIME;
	}
	runtime_signals_init();
	runtime_quiet_connect_errors();
	status = runtime_open(nc, "top", NULL, DEFAULT_CONNECT, &r.node);
	if (status != EXIT_OK) {
		reports_free(r.rs);
		return status;
	}
	rc = tern_sub_open(&r.sub, r.node, "@tern/**", on_report, &r);
	if (rc != 0) {
		cli_error("top", "cannot subscribe to telemetry: %s", tern_last_error());
		tern_node_close(r.node);
		reports_free(r.rs);
		return EXIT_RUNTIME;
	}
	runtime_signals_unblock();
	status = o->once ? run_once(&r) : run_live(&r);
	tern_sub_close(r.sub);
	tern_node_close(r.node);
	runtime_signals_block();
	if (o->once && !r.heard && status != EXIT_OK) {
		report_silence(&r);
	} else if (!o->once && !r.heard && runtime_connect_error() != NULL) {
		/* the screen had no room for it */
		cli_error("top", "%s", runtime_connect_error());
	}
	reports_free(r.rs);
	outbuf_free(&r.frame);
	return status;
}

static int
parse_args(int argc, char **argv, cli_common *cc, struct top_opts *o, bool *help)
{
	int opt;

	optind = 1;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "c:h", top_options, NULL)) != -1) {
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
		case OPT_ONCE:
			o->once = true;
			break;
		case OPT_FORMAT:
			if (strcmp(optarg, "table") == 0) {
				o->format = FORMAT_TABLE;
			} else if (strcmp(optarg, "json") == 0) {
				o->format = FORMAT_JSON;
			} else {
				cli_error("top", "--format: \"%s\" is not table or json", optarg);
				return EXIT_USAGE;
			}
			break;
		case OPT_WAIT:
			if (cli_parse_seconds("top", "--wait", optarg, &o->wait) != 0) {
				return EXIT_USAGE;
			}
			break;
		default:
			cli_bad_option("top", argc, argv, optopt);
			return EXIT_USAGE;
		}
	}
	if (optind < argc) {
		cli_error("top", "unexpected argument \"%s\" (see 'tern top --help')",
		          argv[optind]);
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

/* Without an id from the file or --id: "top-HOST-PID", so that the
 * connections of the nodes it watches name it for what it is. */
static void
observer_id(node_config *nc)
{
	char host[64];
	char id[CONFIG_MAX_ID_LEN + 1];
	char why[CONFIG_ERR_LEN];

	if (nc->id != NULL) {
		return;
	}
	if (gethostname(host, sizeof(host)) != 0) {
		snprintf(host, sizeof(host), "host");
	}
	host[sizeof(host) - 1] = '\0';
	snprintf(id, sizeof(id), "top-%s-%ld", host, (long)getpid());
	/* a host name the id check refuses leaves the library's default */
	(void)config_set_id(nc, id, why, sizeof(why));
}

int
cmd_top(int argc, char **argv)
{
	struct top_opts o = {false, FORMAT_TABLE, DEFAULT_WAIT_S};
	cli_common cc;
	node_config nc;
	bool help = false;
	int status;

	if (cli_common_init(&cc, "top", argc) != 0) {
		cli_error("top", "out of memory");
		return EXIT_RUNTIME;
	}
	status = parse_args(argc, argv, &cc, &o, &help);
	if (status != EXIT_OK || help) {
		if (help) {
			fputs(top_usage, stdout);
		}
		cli_common_free(&cc);
		return status;
	}
	config_init(&nc);
	nc.tern.log_level = TERN_LOG_WARN;
	status = cli_build_config(&cc, &nc);
	if (status == EXIT_OK) {
		/* an observer does not report on itself, whatever the file says */
		nc.tern.telemetry_interval_ms = 0;
		observer_id(&nc);
		status = top_run(&nc, &o);
	}
	config_free(&nc);
	cli_common_free(&cc);
	return status;
}
