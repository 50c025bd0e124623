/*
 * cmd_compare.c - `tern bench compare A B`: the verdict of each cell the two
 * runs share, the environment differences first, exit status 3 when a cell
 * regressed significantly beyond the threshold (so a CI job can run it).
 */
#include "commands.h"
#include "compare.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUSY_TIMEOUT_MS 5000

static const char usage[] =
    "usage: tern bench compare A B [--db FILE] [--threshold PCT] [--alpha P]\n"
    "                              [--format table|json]\n"
    "Compares run B with run A (ids, or latest / previous: the newest finished run\n"
    "and the one before it), cell by cell, with Welch's t-test over the repeats.\n"
    "A cell is a regression or an improvement when its change is significant\n"
    "(p < alpha) and beyond the threshold; a cell with one sample a side is never\n"
    "significant (run the bench with --repeat 3 or more).\n"
    "\n"
    "  --db FILE          the database (default tern-bench.db)\n"
    "  --threshold PCT    the change that counts (default 5)\n"
    "  --alpha P          the significance level (default 0.01)\n"
    "  --format FORMAT    table (default) or json\n"
    "\n"
    "Exit status: 0 no significant regression, 3 at least one, 1 an error, 2 usage.\n";

enum { OPT_DB = 256, OPT_THRESHOLD, OPT_ALPHA, OPT_FORMAT, OPT_HELP };

static const struct option opts[] = {
    {"db", required_argument, NULL, OPT_DB},
    {"threshold", required_argument, NULL, OPT_THRESHOLD},
    {"alpha", required_argument, NULL, OPT_ALPHA},
    {"format", required_argument, NULL, OPT_FORMAT},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

static int
parse_number(const char *opt, const char *s, double lo, double hi, double *out)
{
	char *end;
	double v = strtod(s, &end);

	if (*s == '\0' || *end != '\0' || !(v > lo) || !(v < hi)) {
		fprintf(stderr,
		        "tern bench compare: %s %s: expected a number above %g and below %g\n", opt,
		        s, lo, hi);
		return -1;
	}
	*out = v;
	return 0;
}

/* Open the database for reading only: comparing never writes. */
static sqlite3 *
open_db(const char *path)
{
	sqlite3 *db = NULL;

	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
		fprintf(stderr, "tern bench compare: %s: %s\n", path,
		        db ? sqlite3_errmsg(db) : "cannot open");
		sqlite3_close(db);
		return NULL;
	}
	sqlite3_busy_timeout(db, BUSY_TIMEOUT_MS);
	return db;
}

int
bench_compare_main(int argc, char **argv)
{
	struct compare_opts o = {0, 0};
	struct compare_report r;
	const char *path = "tern-bench.db";
	bool json = false;
	char err[300];
	int64_t a;
	int64_t b;
	sqlite3 *db;
	int c;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case OPT_DB:
			path = optarg;
			break;
		case OPT_THRESHOLD:
			if (parse_number("--threshold", optarg, -1e-300, 1e6, &o.threshold_pct) !=
			    0) {
				return BENCH_EXIT_USAGE;
			}
			break;
		case OPT_ALPHA:
			if (parse_number("--alpha", optarg, 0, 1, &o.alpha) != 0) {
				return BENCH_EXIT_USAGE;
			}
			break;
		case OPT_FORMAT:
			if (strcmp(optarg, "json") != 0 && strcmp(optarg, "table") != 0) {
				fprintf(stderr,
				        "tern bench compare: --format %s: expected table or json\n",
				        optarg);
				return BENCH_EXIT_USAGE;
			}
			json = strcmp(optarg, "json") == 0;
			break;
		case OPT_HELP:
			fputs(usage, stdout);
			return 0;
		default:
			fprintf(stderr, "tern bench compare: unknown option or missing value: %s\n",
			        argv[optind - 1]);
			return BENCH_EXIT_USAGE;
		}
	}
	if (argc - optind != 2) {
		fprintf(stderr, "tern bench compare: expected two runs (see --help)\n");
		return BENCH_EXIT_USAGE;
	}
	if ((db = open_db(path)) == NULL) {
		return BENCH_EXIT_FAILED;
	}
	if (compare_resolve(db, argv[optind], &a, err, sizeof(err)) != 0 ||
	    compare_resolve(db, argv[optind + 1], &b, err, sizeof(err)) != 0 ||
	    compare_runs(db, a, b, &o, &r, err, sizeof(err)) != 0) {
		fprintf(stderr, "tern bench compare: %s\n", err);
		sqlite3_close(db);
		return BENCH_EXIT_FAILED;
	}
	sqlite3_close(db);
	if (json) {
		cJSON *j = compare_report_json(&r);
		char *s = j ? cJSON_Print(j) : NULL;

		if (s == NULL) {
			fprintf(stderr, "tern bench compare: out of memory\n");
			cJSON_Delete(j);
			compare_report_free(&r);
			return BENCH_EXIT_FAILED;
		}
		printf("%s\n", s);
		cJSON_free(s);
		cJSON_Delete(j);
	} else {
		compare_report_table(stdout, &r);
	}
	c = r.regressions > 0 ? BENCH_EXIT_REGRESSION : 0;
	compare_report_free(&r);
	return c;
}
