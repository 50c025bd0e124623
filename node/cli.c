/*
 * cli.c - the options every tern command shares, and building a config from
 * defaults, file and flags, in that order (so flags override the file).
 */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void
cli_error(const char *cmd, const char *fmt, ...)
{
	char line[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	/* one fprintf, so the line is not interleaved with log lines */
	fprintf(stderr, "tern %s: %s\n", cmd, line);
}

int
cli_common_init(cli_common *cc, const char *cmd, int argc)
{
	size_t n = argc > 0 ? (size_t)argc : 1;

	memset(cc, 0, sizeof(*cc));
	cc->cmd = cmd;
	cc->low_latency = -1;
	cc->mode = -1;
	cc->log_level = -1;
	cc->listen = calloc(n, sizeof(*cc->listen));
	cc->connect = calloc(n, sizeof(*cc->connect));
	if (cc->listen == NULL || cc->connect == NULL) {
		cli_common_free(cc);
		return TERN_ENOMEM;
	}
	return 0;
}

void
cli_common_free(cli_common *cc)
{
	free(cc->listen);
	free(cc->connect);
	cc->listen = NULL;
	cc->connect = NULL;
}

int
cli_common_option(cli_common *cc, int opt, const char *arg)
{
	char why[CONFIG_ERR_LEN];

	switch (opt) {
	case OPT_CONFIG:
		cc->config_path = arg;
		return 1;
	case OPT_LISTEN:
	case OPT_CONNECT:
		if (config_endpoint_check(arg, why, sizeof(why)) != 0) {
			cli_error(cc->cmd, "%s: %s", opt == OPT_LISTEN ? "--listen" : "--connect",
			          why);
			return -1;
		}
		if (opt == OPT_LISTEN) {
			cc->listen[cc->listen_count++] = arg;
		} else {
			cc->connect[cc->connect_count++] = arg;
		}
		return 1;
	case OPT_LOW_LATENCY:
		cc->low_latency = 1;
		return 1;
	case OPT_BATCHED:
		cc->low_latency = 0;
		return 1;
	case OPT_LOG:
		cc->log_level = config_log_parse(arg);
		if (cc->log_level < 0) {
			cli_error(cc->cmd, "--log: \"%s\" is not one of error, warn, info, debug",
			          arg);
			return -1;
		}
		return 1;
	case OPT_ID:
		cc->id = arg;
		return 1;
	default:
		return 0;
	}
}

int
cli_build_config(const cli_common *cc, node_config *nc)
{
	char why[CONFIG_ERR_LEN];

	if (cc->config_path != NULL && config_load(nc, cc->config_path, why, sizeof(why)) != 0) {
		cli_error(cc->cmd, "%s", why);
		return EXIT_USAGE;
	}
	if (cc->listen_count > 0) {
		config_clear_endpoints(nc, true);
	}
	for (int i = 0; i < cc->listen_count; i++) {
		if (config_add_endpoint(nc, true, cc->listen[i], why, sizeof(why)) != 0) {
			cli_error(cc->cmd, "--listen: %s", why);
			return EXIT_USAGE;
		}
	}
	if (cc->connect_count > 0) {
		config_clear_endpoints(nc, false);
	}
	for (int i = 0; i < cc->connect_count; i++) {
		if (config_add_endpoint(nc, false, cc->connect[i], why, sizeof(why)) != 0) {
			cli_error(cc->cmd, "--connect: %s", why);
			return EXIT_USAGE;
		}
	}
	if (cc->low_latency >= 0) {
		nc->tern.low_latency = cc->low_latency == 1;
	}
	if (cc->mode >= 0) {
		nc->tern.mode = cc->mode;
	}
	if (cc->log_level >= 0) {
		nc->tern.log_level = cc->log_level;
	}
	if (cc->id != NULL && config_set_id(nc, cc->id, why, sizeof(why)) != 0) {
		cli_error(cc->cmd, "--id: %s", why);
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

int
cli_parse_u64(const char *cmd, const char *flag, const char *s, uint64_t min, uint64_t max,
              uint64_t *out)
{
	char *end = NULL;
	unsigned long long v;

	errno = 0;
	if (s[0] == '-' || s[0] == '\0') {
		cli_error(cmd, "%s: \"%s\" is not a number from %llu to %llu", flag, s,
		          (unsigned long long)min, (unsigned long long)max);
		return -1;
	}
	v = strtoull(s, &end, 10);
	if (errno != 0 || *end != '\0' || v < min || v > max) {
		cli_error(cmd, "%s: \"%s\" is not a number from %llu to %llu", flag, s,
		          (unsigned long long)min, (unsigned long long)max);
		return -1;
	}
	*out = v;
	return 0;
}

int
cli_parse_seconds(const char *cmd, const char *flag, const char *s, double *out)
{
	char *end = NULL;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno != 0 || end == s || *end != '\0' || !isfinite(v) || v < 0 || v > 31536000) {
		cli_error(cmd, "%s: \"%s\" is not a number of seconds (e.g. 2.5)", flag, s);
		return -1;
	}
	*out = v;
	return 0;
}

void
cli_bad_option(const char *cmd, int argc, char **argv, int optopt_value)
{
	/* getopt_long leaves the offending word at optind - 1 */
	const char *word = optind - 1 < argc && optind >= 1 ? argv[optind - 1] : "?";

	if (optopt_value != 0 && strchr(word, '=') == NULL && word[0] == '-' && word[1] != '-') {
		cli_error(cmd, "unknown option or missing value: -%c (see 'tern %s --help')",
		          optopt_value, cmd);
	} else {
		cli_error(cmd, "unknown option or missing value: %s (see 'tern %s --help')", word,
		          cmd);
	}
}
