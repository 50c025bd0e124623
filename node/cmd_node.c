/*
 * cmd_node.c - `tern node`: run a node until SIGINT or SIGTERM.
 *
 * The node itself (connections, forwarding, reconnection) lives in libtern;
 * this command configures it, logs, prints stats on request and closes it
 * cleanly (queued batches written, peers told goodbye) on a signal.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "config.h"
#include "keystats.h"
#include "runtime.h"

#define DEFAULT_LISTEN "tcp://127.0.0.1:7447"

enum node_opt { OPT_MODE = OPT_FIRST_PRIVATE, OPT_STATS, OPT_CHECK };

static const char node_usage[] =
    "usage: tern node [-c FILE] [--listen EP]... [--connect EP]... [--mode MODE]\n"
    "                 [--low-latency|--batched] [--stats] [--log LEVEL] [--id NAME] [--check]\n"
    "\n"
    "Run a node until SIGINT or SIGTERM. A router forwards each publication to the\n"
    "peers that subscribed to it; a peer node forwards between its connections too.\n"
    "\n"
    "  -c, --config FILE  JSON config file (docs/CONFIG.md); flags override it\n"
    "  --listen EP        listen on EP (repeatable); default tcp://127.0.0.1:7447\n"
    "                     EP: tcp://HOST:PORT, tcp://[IPV6]:PORT, unix:///path;\n"
    "                     port 0 picks a free port, printed as 'listening on EP'\n"
    "  --connect EP       connect to EP (repeatable), reconnecting with backoff\n"
    "  --mode MODE        peer (default), router, or client (connects only, routes\n"
    "                     nothing, and is told only the subscriptions it publishes to)\n"
    "  --low-latency      write each message at once, TCP_NODELAY (low_latency: true)\n"
    "  --batched          batch messages for throughput (low_latency: false)\n"
    "  --stats            print per-key messages/s, MB/s, drops and batch size each second\n"
    "  --log LEVEL        error, warn, info (default) or debug\n"
    "  --id NAME          the node's name in logs and stats\n"
    "  --check            print the effective configuration as JSON and exit\n"
    "  -h, --help         show this help\n"
    "\n"
    "SIGUSR1 writes the node's stats as one JSON line on stderr.\n";

static const struct option node_options[] = {
    {"config", required_argument, NULL, OPT_CONFIG},
    {"listen", required_argument, NULL, OPT_LISTEN},
    {"connect", required_argument, NULL, OPT_CONNECT},
    {"mode", required_argument, NULL, OPT_MODE},
    {"low-latency", no_argument, NULL, OPT_LOW_LATENCY},
    {"batched", no_argument, NULL, OPT_BATCHED},
    {"stats", no_argument, NULL, OPT_STATS},
    {"log", required_argument, NULL, OPT_LOG},
    {"id", required_argument, NULL, OPT_ID},
    {"check", no_argument, NULL, OPT_CHECK},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

struct node_stats_state {
	keystats *keys;
	tern_stats last;
	double last_time;
};

static void
print_stats(tern_node *node, struct node_stats_state *ss)
{
	double now = runtime_now();
	double dt = now - ss->last_time;
	tern_stats st;
	uint64_t dbatches;
	uint64_t dbatch_bytes;
	char *json;

	tern_node_stats(node, &st);
	dbatches = st.batches - ss->last.batches;
	dbatch_bytes = st.batch_bytes - ss->last.batch_bytes;
	json = runtime_node_json(node);
	if (json != NULL) {
		keystats_from_json(ss->keys, json);
		free(json);
	}
	keystats_print(ss->keys, stderr, dt);
	fprintf(stderr,
	        "stats node=%s connections=%llu out_msgs_per_s=%.1f out_MB_per_s=%.3f "
	        "in_msgs_per_s=%.1f in_MB_per_s=%.3f drops=%llu mean_batch_bytes=%.0f\n",
	        tern_node_id(node), (unsigned long long)st.connections,
	        dt > 0 ? (double)(st.messages - ss->last.messages) / dt : 0,
	        dt > 0 ? (double)(st.bytes - ss->last.bytes) / dt / 1e6 : 0,
	        dt > 0 ? (double)(st.messages_in - ss->last.messages_in) / dt : 0,
	        dt > 0 ? (double)(st.bytes_in - ss->last.bytes_in) / dt / 1e6 : 0,
	        (unsigned long long)(st.dropped - ss->last.dropped),
	        dbatches > 0 ? (double)dbatch_bytes / (double)dbatches : 0);
	fflush(stderr);
	ss->last = st;
	ss->last_time = now;
}

static int
node_run(node_config *nc, bool stats)
{
	struct node_stats_state ss;
	tern_node *node = NULL;
	double next_stats;
	int rc;

	memset(&ss, 0, sizeof(ss));
	if (stats) {
		ss.keys = keystats_new();
		if (ss.keys == NULL) {
			cli_error("node", "out of memory");
			return EXIT_RUNTIME;
		}
	}
	runtime_signals_init();
	rc = runtime_open(nc, "node", DEFAULT_LISTEN, NULL, &node);
	if (rc != EXIT_OK) {
		keystats_free(ss.keys);
		return rc;
	}
	runtime_signals_unblock();
	ss.last_time = runtime_now();
	next_stats = ss.last_time + 1.0;
	while (!runtime_stop) {
		double now = runtime_now();
		double wait = stats ? next_stats - now : 1.0;
		runtime_sleep(wait > 0.2 ? 0.2 : wait);
		runtime_serve_usr1(node, "node", NULL);
		if (stats && runtime_now() >= next_stats) {
			print_stats(node, &ss);
			next_stats += 1.0;
			if (next_stats < runtime_now()) {
				next_stats = runtime_now() + 1.0;
			}
		}
	}
	runtime_log(TERN_LOG_INFO, "node %s stopping: flushing and saying goodbye to peers",
	            tern_node_id(node));
	tern_node_close(node);
	runtime_log(TERN_LOG_INFO, "node stopped");
	runtime_signals_block();
	keystats_free(ss.keys);
	return EXIT_OK;
}

int
cmd_node(int argc, char **argv)
{
	cli_common cc;
	node_config nc;
	bool stats = false;
	bool check = false;
	int status = EXIT_OK;
	int opt;

	if (cli_common_init(&cc, "node", argc) != 0) {
		cli_error("node", "out of memory");
		return EXIT_RUNTIME;
	}
	optind = 1;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "c:h", node_options, NULL)) != -1) {
		int handled = cli_common_option(&cc, opt, optarg);
		if (handled < 0) {
			status = EXIT_USAGE;
			goto out;
		}
		if (handled > 0) {
			continue;
		}
		switch (opt) {
		case OPT_HELP:
			fputs(node_usage, stdout);
			goto out;
		case OPT_MODE:
			if (strcmp(optarg, "peer") == 0) {
				cc.mode = TERN_MODE_PEER;
			} else if (strcmp(optarg, "router") == 0) {
				cc.mode = TERN_MODE_ROUTER;
			} else if (strcmp(optarg, "client") == 0) {
				cc.mode = TERN_MODE_CLIENT;
			} else {
				cli_error("node", "--mode: \"%s\" is not peer, router or client",
				          optarg);
				status = EXIT_USAGE;
				goto out;
			}
			break;
		case OPT_STATS:
			stats = true;
			break;
		case OPT_CHECK:
			check = true;
			break;
		default:
			cli_bad_option("node", argc, argv, optopt);
			status = EXIT_USAGE;
			goto out;
		}
	}
	if (optind < argc) {
		cli_error("node", "unexpected argument \"%s\" (see 'tern node --help')",
		          argv[optind]);
		status = EXIT_USAGE;
		goto out;
	}
	config_init(&nc);
	status = cli_build_config(&cc, &nc);
	if (status == EXIT_OK && check) {
		status = runtime_apply_defaults(&nc, "node", DEFAULT_LISTEN, NULL);
		if (status == EXIT_OK && tern_config_check(&nc.tern) != 0) {
			cli_error("node", "%s", tern_last_error());
			status = EXIT_USAGE;
		}
		if (status == EXIT_OK) {
			char *text = config_to_json(&nc);
			if (text == NULL) {
				cli_error("node", "out of memory");
				status = EXIT_RUNTIME;
			} else {
				printf("%s\n", text);
				free(text);
			}
		}
	} else if (status == EXIT_OK) {
		status = node_run(&nc, stats);
	}
	config_free(&nc);
out:
	cli_common_free(&cc);
	return status;
}
