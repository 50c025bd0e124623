/*
 * runtime.c - signals, logging and node start-up shared by the commands.
 */
#include "runtime.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

volatile sig_atomic_t runtime_stop;
volatile sig_atomic_t runtime_usr1;

/* Set once before the node opens, read by the I/O thread afterwards. */
static int log_level = TERN_LOG_INFO;

/* When the first stop signal came, in monotonic seconds. */
static volatile sig_atomic_t stop_since;

static void
on_stop_signal(int sig)
{
	struct timespec ts;

	(void)sig;
	/* clock_gettime is async-signal-safe */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	/* A second ^C a while later, with the node still flushing, means "now".
	 * One right after the first is the same event delivered twice (timeout(1)
	 * and shells signal both the process and its group). */
	if (runtime_stop && ts.tv_sec - stop_since >= 2) {
		_exit(130);
	}
	if (!runtime_stop) {
		stop_since = (sig_atomic_t)ts.tv_sec;
		runtime_stop = 1;
	}
}

static void
on_usr1(int sig)
{
	(void)sig;
	runtime_usr1 = 1;
}

static void
signal_mask(int how)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGUSR1);
	pthread_sigmask(how, &set, NULL);
}

void
runtime_signals_init(void)
{
	struct sigaction sa;

	signal_mask(SIG_BLOCK);
	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	/* no SA_RESTART: a blocking read or poll returns EINTR and the loop
	 * looks at the flags */
	sa.sa_handler = on_stop_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sa.sa_handler = on_usr1;
	sigaction(SIGUSR1, &sa, NULL);
	/* a closed stdout (tern sub | head) is an error return, not a death */
	signal(SIGPIPE, SIG_IGN);
}

void
runtime_signals_unblock(void)
{
	signal_mask(SIG_UNBLOCK);
}

void
runtime_signals_block(void)
{
	signal_mask(SIG_BLOCK);
}

/* The node's id once it is open; lines before that say just "tern". */
static char log_id[256] = "tern";

static void
log_write(int level, const char *text, bool from_library)
{
	static const char *const names[] = {"error", "warn", "info", "debug"};
	struct timespec ts;
	struct tm tm;
	char stamp[32];

	if (level > log_level) {
		return;
	}
	if (level < TERN_LOG_ERROR || level > TERN_LOG_DEBUG) {
		level = TERN_LOG_INFO;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
	/* one call per line: stdio locks the stream, lines do not interleave;
	 * the library's lines already say "tern[id] level: " */
	if (from_library) {
		fprintf(stderr, "%s.%03ldZ %s\n", stamp, ts.tv_nsec / 1000000L, text);
	} else {
		fprintf(stderr, "%s.%03ldZ tern[%s] %s: %s\n", stamp, ts.tv_nsec / 1000000L, log_id,
		        names[level], text);
	}
}

static bool quiet_connect_errors;
static char connect_error[512];

/* "tern[id] warn: cannot connect to EP: why (retrying)" -> "cannot connect to EP: why" */
static void
remember_connect_error(const char *line)
{
	const char *p = strstr(line, "cannot connect to ");
	const char *end = p != NULL ? strstr(p, " (retrying)") : NULL;
	size_t n;

	if (p == NULL) {
		return;
	}
	n = end != NULL ? (size_t)(end - p) : strlen(p);
	if (n >= sizeof(connect_error)) {
		n = sizeof(connect_error) - 1;
	}
	memcpy(connect_error, p, n);
	connect_error[n] = '\0';
}

static void
on_library_log(void *arg, int level, const char *line)
{
	(void)arg;
	if (strstr(line, "cannot connect to ") != NULL) {
		remember_connect_error(line);
		if (quiet_connect_errors) {
			return; /* the command reports it once, when it gives up */
		}
	}
	log_write(level, line, true);
}

void
runtime_quiet_connect_errors(void)
{
	quiet_connect_errors = true;
}

const char *
runtime_connect_error(void)
{
	return connect_error[0] ? connect_error : NULL;
}

void
runtime_log(int level, const char *fmt, ...)
{
	char line[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	log_write(level, line, false);
}

double
runtime_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void
runtime_sleep(double seconds)
{
	struct timespec ts;

	if (seconds <= 0) {
		return;
	}
	ts.tv_sec = (time_t)seconds;
	ts.tv_nsec = (long)((seconds - (double)ts.tv_sec) * 1e9);
	/* EINTR ends the sleep early: the caller looks at the signal flags */
	nanosleep(&ts, NULL);
}

static int
open_error_status(int rc)
{
	return rc == TERN_EINVAL || rc == TERN_EENDPOINT ? EXIT_USAGE : EXIT_RUNTIME;
}

int
runtime_apply_defaults(node_config *nc, const char *cmd, const char *default_listen,
                       const char *default_connect)
{
	char why[CONFIG_ERR_LEN];

	/* a client does not listen: it is only told what it publishes to */
	if (!nc->listen_set && default_listen != NULL && nc->tern.mode != TERN_MODE_CLIENT &&
	    config_add_endpoint(nc, true, default_listen, why, sizeof(why)) != 0) {
		cli_error(cmd, "%s", why);
		return EXIT_RUNTIME;
	}
	if (!nc->listen_set && !nc->connect_set && default_connect != NULL &&
	    config_add_endpoint(nc, false, default_connect, why, sizeof(why)) != 0) {
		cli_error(cmd, "%s", why);
		return EXIT_RUNTIME;
	}
	return EXIT_OK;
}

int
runtime_open(node_config *nc, const char *cmd, const char *default_listen,
             const char *default_connect, tern_node **out)
{
	tern_node *node = NULL;
	int rc;

	log_level = nc->tern.log_level;
	nc->tern.log_fn = on_library_log;
	nc->tern.log_arg = NULL;
	rc = runtime_apply_defaults(nc, cmd, default_listen, default_connect);
	if (rc != EXIT_OK) {
		return rc;
	}
	rc = tern_node_open(&node, &nc->tern);
	if (rc != 0) {
		cli_error(cmd, "cannot start the node: %s", tern_last_error());
		return open_error_status(rc);
	}
	snprintf(log_id, sizeof(log_id), "%s", tern_node_id(node));
	for (size_t i = 0; i < nc->listen_count; i++) {
		char bound[256];
		rc = tern_node_listen(node, nc->listen[i], bound, sizeof(bound));
		if (rc != 0) {
			/* the library's sentence names the endpoint and the reason */
			cli_error(cmd, "%s", tern_last_error());
			tern_node_close(node);
			return open_error_status(rc);
		}
		/* the library logs it at info; below that level print it anyway:
		 * with port 0 this is how a script learns the port */
		if (log_level < TERN_LOG_INFO) {
			fprintf(stderr, "tern %s: listening on %s\n", cmd, bound);
		}
	}
	for (size_t i = 0; i < nc->connect_count; i++) {
		rc = tern_node_connect(node, nc->connect[i]);
		if (rc != 0) {
			cli_error(cmd, "%s", tern_last_error());
			tern_node_close(node);
			return open_error_status(rc);
		}
	}
	runtime_log(TERN_LOG_INFO, "node %s running: mode %s, connections %s", tern_node_id(node),
	            config_mode_name(nc->tern.mode),
	            nc->tern.low_latency ? "low-latency" : "batched");
	*out = node;
	return EXIT_OK;
}

char *
runtime_node_json(tern_node *node)
{
	/* stats of a node with many channels can be long; ask for the size */
	size_t cap = 4096;
	char *buf = malloc(cap);
	size_t need;

	if (buf == NULL) {
		return NULL;
	}
	need = tern_node_stats_json(node, buf, cap);
	if (need >= cap) {
		char *grown;
		if (need > 64u * 1024 * 1024) {
			free(buf);
			return NULL;
		}
		cap = need + 1;
		grown = realloc(buf, cap);
		if (grown == NULL) {
			free(buf);
			return NULL;
		}
		buf = grown;
		need = tern_node_stats_json(node, buf, cap);
		if (need >= cap) {
			buf[cap - 1] = '\0';
		}
	}
	return buf;
}

void
runtime_serve_usr1(tern_node *node, const char *cmd, const char *extra)
{
	char *json;

	if (!runtime_usr1) {
		return;
	}
	runtime_usr1 = 0;
	json = runtime_node_json(node);
	fprintf(stderr, "{\"command\":\"%s\"%s%s,\"node\":%s}\n", cmd,
	        extra != NULL && extra[0] != '\0' ? "," : "", extra != NULL ? extra : "",
	        json != NULL && json[0] != '\0' ? json : "null");
	fflush(stderr);
	free(json);
}

void
runtime_summary(uint64_t messages, uint64_t bytes, double seconds, const char *extra)
{
	double rate = seconds > 0 ? (double)messages / seconds : 0;
	double mbps = seconds > 0 ? (double)bytes / seconds / 1e6 : 0;

	fprintf(stderr, "messages=%llu bytes=%llu seconds=%.3f msgs_per_s=%.1f MB_per_s=%.3f%s\n",
	        (unsigned long long)messages, (unsigned long long)bytes, seconds, rate, mbps,
	        extra != NULL ? extra : "");
	fflush(stderr);
}
