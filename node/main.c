/*
 * main.c - the tern executable: dispatches to `tern node`, `tern pub`,
 * `tern sub` and `tern top`, and execs the helpers tern-bench and
 * tern-dashboard for `tern bench` and `tern dashboard` (helper.h says why
 * they are apart).
 */
#include <stdio.h>
#include <string.h>

#include <tern/tern.h>

#include "cli.h"
#include "commands.h"
#include "finish.h"
#include "helper.h"

static const char usage[] =
    "usage: tern COMMAND [OPTIONS]\n"
    "\n"
    "tern is a publish/subscribe middleware. Every tern process is a node; nodes\n"
    "connect over TCP or Unix-domain sockets.\n"
    "\n"
    "commands:\n"
    "  node        run a node (a peer, or a router that forwards between peers)\n"
    "  pub KEY     publish messages on KEY (from --data, --size or stdin lines)\n"
    "  sub EXPR    print the messages whose key matches EXPR\n"
    "  top         watch every reachable node: connections, key rates, latency\n"
    "  bench       run the benchmark matrix\n"
    "  dashboard   serve the benchmark dashboard\n"
    "\n"
    "options:\n"
    "  -h, --help  show this help; 'tern COMMAND --help' shows a command's options\n"
    "  --version   print the tern version and the wire protocol version\n"
    "\n"
    "Quick start, in three terminals: 'tern node', 'tern sub \"demo/**\"',\n"
    "'tern pub demo/hello --data hello'. The config file is described in docs/CONFIG.md.\n";

static int
dispatch(int argc, char **argv)
{
	const char *cmd;

	if (argc < 2) {
		fputs(usage, stderr);
		return EXIT_USAGE;
	}
	cmd = argv[1];
	if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
		fputs(usage, stdout);
		return EXIT_OK;
	}
	if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
		printf("tern %s (wire protocol %d)\n", tern_version(), tern_protocol_version());
		return EXIT_OK;
	}
	if (strcmp(cmd, "node") == 0) {
		return cmd_node(argc - 1, argv + 1);
	}
	if (strcmp(cmd, "pub") == 0) {
		return cmd_pub(argc - 1, argv + 1);
	}
	if (strcmp(cmd, "sub") == 0) {
		return cmd_sub(argc - 1, argv + 1);
	}
	if (strcmp(cmd, "top") == 0) {
		return cmd_top(argc - 1, argv + 1);
	}
	if (strcmp(cmd, "bench") == 0) {
		return helper_run("bench", argv + 1);
	}
	if (strcmp(cmd, "dashboard") == 0) {
		return helper_run("dashboard", argv + 1);
	}
	fprintf(stderr, "tern: unknown command \"%s\" (see 'tern --help')\n", cmd);
	return EXIT_USAGE;
}

int
main(int argc, char **argv)
{
	return finish_stdout(argc > 1 ? argv[1] : NULL, dispatch(argc, argv));
}
