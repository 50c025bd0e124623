/*
 * dashboard.c - the `tern dashboard` command: options, start-up, signals.
 *
 * SIGINT and SIGTERM are caught by a handler that only writes the signal's
 * number into a pipe; the calling thread waits on that pipe, so stopping is
 * ordinary code, and the server thread is woken with lws_cancel_service()
 * from there. The server thread starts with both signals blocked, so they
 * always land on the thread that waits for them.
 *
 * With --connect, the dashboard also opens a tern node (observer.h) whose
 * telemetry subscription feeds the server (dash_server_post). The node is
 * opened and connecting before the server starts, so a bad endpoint is a
 * bad command line; it subscribes once the server runs, and it is closed
 * before the server stops, so no report arrives at a server that is gone.
 */
#include "dashboard.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "observer.h"
#include "server.h"

#ifndef TERN_DASHBOARD_WEB_DIR
#define TERN_DASHBOARD_WEB_DIR "web"
#endif

/* The chart library's files, inside the web folder (npm installs them there). */
#define VENDOR_SUBDIR "/node_modules/chart.js/dist"

struct options {
	const char *db;
	const char *web;
	char host[64];
	int port;
	bool help;
	const char **connect; /* --connect endpoints, in the order given */
	size_t nconnect;
};

static void
usage(FILE *out)
{
	fprintf(
	    out,
	    "usage: tern dashboard [--db FILE] [--listen HOST:PORT] [--web DIR] [--connect EP]...\n"
	    "\n"
	    "Serves the benchmark history that `tern bench` stores, as web pages with charts\n"
	    "and a websocket at /ws (messages: docs/DASHBOARD.md). It only reads the database.\n"
	    "With --connect it also joins a tern network as a peer and shows it live: its nodes\n"
	    "and connections as a graph, and each key's rate and latency over the last minutes;\n"
	    "GET /metrics exports the same figures in Prometheus's text format.\n"
	    "\n"
	    "  --connect EP        a node to join, e.g. a router at tcp://127.0.0.1:7447\n"
	    "                      (repeatable); every node it reaches is shown\n"
	    "  --db FILE           the benchmark database (default tern-bench.db)\n"
	    "  --listen HOST:PORT  address to serve on (default 127.0.0.1:8080); HOST is an IP\n"
	    "                      address ([::1] for IPv6, 0.0.0.0 for every interface);\n"
	    "                      port 0 picks a free port\n"
	    "  --web DIR           the web UI folder (default %s)\n"
	    "  --help              this text\n"
	    "\n"
	    "Stop it with Ctrl-C.\n",
	    TERN_DASHBOARD_WEB_DIR);
}

/* Parses HOST:PORT, with [IPv6]:PORT and "localhost" accepted. */
static int
parse_listen(const char *text, struct options *opt)
{
	const char *colon = strrchr(text, ':');
	if (colon == NULL || colon == text || colon[1] == '\0') {
		fprintf(stderr,
		        "tern dashboard: --listen %s: expected HOST:PORT, e.g. 127.0.0.1:8080\n",
		        text);
		return -1;
	}
	const char *host = text;
	size_t host_len = (size_t)(colon - text);
	if (host[0] == '[') {
		if (host_len < 3 || host[host_len - 1] != ']') {
			fprintf(stderr,
			        "tern dashboard: --listen %s: an IPv6 address goes in "
			        "brackets, e.g. [::1]:8080\n",
			        text);
			return -1;
		}
		host++;
		host_len -= 2;
	} else if (memchr(host, ':', host_len) != NULL) {
		fprintf(stderr,
		        "tern dashboard: --listen %s: put an IPv6 address in brackets, "
		        "e.g. [::1]:8080\n",
		        text);
		return -1;
	}
	if (host_len >= sizeof(opt->host)) {
		fprintf(stderr, "tern dashboard: --listen %s: host too long\n", text);
		return -1;
	}
	if (host_len == 9 && strncmp(host, "localhost", 9) == 0) {
		snprintf(opt->host, sizeof(opt->host), "127.0.0.1");
	} else {
		memcpy(opt->host, host, host_len);
		opt->host[host_len] = '\0';
	}
	if (strspn(opt->host, "0123456789.") != strlen(opt->host) &&
	    strspn(opt->host, "0123456789abcdefABCDEF:.") != strlen(opt->host)) {
		fprintf(
		    stderr,
		    "tern dashboard: --listen %s: HOST must be an IP address such as 127.0.0.1\n",
		    text);
		return -1;
	}
	char *end;
	errno = 0;
	long port = strtol(colon + 1, &end, 10);
	if (errno != 0 || *end != '\0' || port < 0 || port > 65535) {
		fprintf(stderr,
		        "tern dashboard: --listen %s: the port must be a number from 0 to "
		        "65535\n",
		        text);
		return -1;
	}
	opt->port = (int)port;
	return 0;
}

static int
parse_options(int argc, char **argv, struct options *opt)
{
	opt->db = "tern-bench.db";
	opt->web = TERN_DASHBOARD_WEB_DIR;
	snprintf(opt->host, sizeof(opt->host), "127.0.0.1");
	opt->port = 8080;
	opt->help = false;
	opt->nconnect = 0;
	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i];
		if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
			opt->help = true;
			return 0;
		}
		bool takes_value = strcmp(arg, "--db") == 0 || strcmp(arg, "--listen") == 0 ||
		                   strcmp(arg, "--web") == 0 || strcmp(arg, "--connect") == 0;
		if (!takes_value) {
			fprintf(stderr,
			        "tern dashboard: unknown option %s (see tern dashboard --help)\n",
			        arg);
			return -1;
		}
		if (i + 1 >= argc || argv[i + 1][0] == '\0') {
			fprintf(stderr, "tern dashboard: %s needs a value\n", arg);
			return -1;
		}
		const char *value = argv[++i];
		if (strcmp(arg, "--db") == 0) {
			opt->db = value;
		} else if (strcmp(arg, "--connect") == 0) {
			opt->connect[opt->nconnect++] = value;
		} else if (strcmp(arg, "--web") == 0) {
			opt->web = value;
		} else if (parse_listen(value, opt) < 0) {
			return -1;
		}
	}
	return 0;
}

/* The web folder must hold the page; the chart library is only warned about. */
static int
check_web(const char *web, char *vendor, size_t size)
{
	char index[PATH_MAX];
	struct stat sb;
	int n = snprintf(index, sizeof(index), "%s/index.html", web);
	if (n < 0 || (size_t)n >= sizeof(index) || stat(index, &sb) != 0) {
		fprintf(stderr,
		        "tern dashboard: --web %s: no index.html there; give the web/ folder "
		        "of the tern sources\n",
		        web);
		return -1;
	}
	n = snprintf(vendor, size, "%s" VENDOR_SUBDIR, web);
	if (n < 0 || (size_t)n >= size) {
		fprintf(stderr, "tern dashboard: --web %s: path too long\n", web);
		return -1;
	}
	if (stat(vendor, &sb) != 0) {
		fprintf(
		    stderr,
		    "tern dashboard: warning: the chart library is not installed in %s; the page "
		    "will show tables only. Run `npm ci --omit=dev` in %s (scripts/setup does "
		    "it)\n",
		    vendor, web);
	}
	return 0;
}

/* The write end of the stop pipe, for the signal handler. */
static volatile sig_atomic_t stop_fd = -1;

static void
on_stop_signal(int sig)
{
	unsigned char byte = (unsigned char)sig;
	int saved = errno;
	if (stop_fd >= 0 && write(stop_fd, &byte, 1) < 0) {
		/* The pipe is full: a stop is already pending. */
	}
	errno = saved;
}

/* Blocks until SIGINT or SIGTERM; returns which. */
static int
wait_for_stop(int fd)
{
	unsigned char byte = 0;
	for (;;) {
		ssize_t n = read(fd, &byte, 1);
		if (n == 1) {
			return byte;
		}
		if (n < 0 && errno == EINTR) {
			continue;
		}
		return SIGTERM;
	}
}

static void
print_banner(const struct options *opt, const struct dash_server *srv, const struct observer *ob)
{
	bool ipv6 = strchr(opt->host, ':') != NULL;
	const char *shown = strcmp(opt->host, "0.0.0.0") == 0 ? "127.0.0.1"
	                    : strcmp(opt->host, "::") == 0    ? "::1"
	                                                      : opt->host;
	printf("tern dashboard: serving %s at http://%s%s%s:%d/ (Ctrl-C stops)\n", opt->db,
	       ipv6 ? "[" : "", shown, ipv6 ? "]" : "", dash_server_port(srv));
	if (dash_server_db_state(srv)[0] != '\0') {
		printf("tern dashboard: %s; the page will update when `tern bench --db %s` writes "
		       "a run\n",
		       dash_server_db_state(srv), opt->db);
	}
	if (ob != NULL) {
		printf("tern dashboard: watching the network of");
		for (size_t i = 0; i < opt->nconnect; i++) {
			printf(" %s", opt->connect[i]);
		}
		printf(" as %s (Live view; Prometheus metrics at /metrics)\n", observer_id(ob));
	}
	fflush(stdout);
}

/* Opens the observer for --connect (none without it). Returns 0, or the exit status. */
static int
open_observer(const struct options *opt, struct observer **ob)
{
	char err[512];
	*ob = NULL;
	if (opt->nconnect == 0) {
		return 0;
	}
	int rc = observer_open(ob, opt->connect, opt->nconnect, err, sizeof(err));
	if (rc != 0) {
		fprintf(stderr, "tern dashboard: %s\n", err);
		return rc == OBSERVER_EENDPOINT ? 2 : 1;
	}
	return 0;
}

/* Runs the dashboard once the options are known; returns the exit status. */
static int
run(const struct options *opt)
{
	char vendor[PATH_MAX];
	if (check_web(opt->web, vendor, sizeof(vendor)) < 0) {
		return 2;
	}
	/* The observer's I/O thread starts here: block the stop signals in it too. */
	sigset_t stop_signals;
	sigset_t old_mask;
	sigemptyset(&stop_signals);
	sigaddset(&stop_signals, SIGINT);
	sigaddset(&stop_signals, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &stop_signals, &old_mask);
	struct observer *ob = NULL;
	int status = open_observer(opt, &ob);
	pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
	if (status != 0) {
		return status;
	}

	int pipe_fds[2];
	/* Non-blocking writes: the handler must never wait. */
	if (pipe2(pipe_fds, O_CLOEXEC) != 0 || fcntl(pipe_fds[1], F_SETFL, O_NONBLOCK) != 0) {
		fprintf(stderr, "tern dashboard: cannot create a pipe: %s\n", strerror(errno));
		observer_close(ob);
		return 1;
	}
	stop_fd = pipe_fds[1];
	struct sigaction action;
	struct sigaction old_int;
	struct sigaction old_term;
	memset(&action, 0, sizeof(action));
	action.sa_handler = on_stop_signal;
	sigemptyset(&action.sa_mask);
	sigaction(SIGINT, &action, &old_int);
	sigaction(SIGTERM, &action, &old_term);

	/* The server thread inherits this mask: the signals stay with this thread. */
	pthread_sigmask(SIG_BLOCK, &stop_signals, &old_mask);

	struct dash_server_config cfg = {
	    .host = opt->host,
	    .port = opt->port,
	    .web_dir = opt->web,
	    .vendor_dir = vendor,
	    .db_path = opt->db,
	    .poll_ms = 250,
	    .live = ob != NULL,
	    .observer = ob != NULL ? observer_id(ob) : NULL,
	    .connect = opt->connect,
	    .nconnect = opt->nconnect,
	};
	struct dash_server *srv = NULL;
	char err[256];
	int started = dash_server_start(&srv, &cfg, err, sizeof(err));
	pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
	if (started == 0 && ob != NULL) {
		static const struct observer_ops ops = {.report = dash_server_post};
		started = observer_watch(ob, &ops, srv, err, sizeof(err));
	}
	if (started < 0) {
		fprintf(stderr, "tern dashboard: %s\n", err);
		observer_close(ob);
		dash_server_stop(srv);
		status = 1;
	} else {
		print_banner(opt, srv, ob);
		int sig = wait_for_stop(pipe_fds[0]);
		/* No report may reach the server once it is stopping. */
		observer_close(ob);
		dash_server_stop(srv);
		fprintf(stderr, "tern dashboard: stopped (%s)\n",
		        sig == SIGINT ? "SIGINT" : "SIGTERM");
	}
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	stop_fd = -1;
	close(pipe_fds[0]);
	close(pipe_fds[1]);
	return status;
}

int
dashboard_main(int argc, char **argv)
{
	struct options opt;
	/* Room for every --connect the command line could hold. */
	opt.connect = calloc((size_t)(argc > 0 ? argc : 1), sizeof(*opt.connect));
	if (opt.connect == NULL) {
		fprintf(stderr, "tern dashboard: out of memory\n");
		return 1;
	}
	int status = parse_options(argc, argv, &opt) < 0 ? 2 : 0;
	if (status == 0 && opt.help) {
		usage(stdout);
	} else if (status == 0) {
		status = run(&opt);
	}
	free(opt.connect);
	return status;
}
