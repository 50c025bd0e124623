/*
 * compare.h - two runs of `tern bench`, cell by cell: what changed, whether
 * the change is more than noise, and what differs in the two environments.
 *
 * The figures of a cell are its repeats (--repeat); the test is Welch's
 * t-test on their means. A cell is called a regression or an improvement only
 * when the test says the difference is significant (p < alpha) AND the means
 * differ by more than the threshold; a cell with fewer than two good samples
 * on a side is never significant. Used by `tern bench compare` and by the
 * dashboard's Compare view, so both give the same verdicts.
 *
 * Reads an open SQLite handle; writes nothing. Not thread safe per report.
 */
#ifndef BENCH_COMPARE_H
#define BENCH_COMPARE_H

#include "stats.h"

#include <cjson/cJSON.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define COMPARE_THRESHOLD_PCT 5.0
#define COMPARE_ALPHA         0.01

enum compare_verdict {
	COMPARE_SAME,
	COMPARE_REGRESSION,
	COMPARE_IMPROVEMENT,
	COMPARE_FAILED, /* every sample of the second run failed where the first had one */
};

struct compare_cell {
	char scenario[16];
	char link[32];
	char layer[16];
	char mode[16];
	int64_t records_per_msg;
	int64_t payload_bytes;
	int64_t concurrency;
	int64_t keys;        /* stream: keys the messages went over (1 before --keys) */
	int64_t batch_bytes; /* -1: none (low latency) */
	double rate;         /* open-loop records/s; 0: closed loop */
	const char *metric;  /* "records_per_s", "bytes_per_s" or "lat_p99_us" */
	bool higher_is_better;
	struct sample_stats a; /* over the successful repeats of each run */
	struct sample_stats b;
	uint32_t failed_a;
	uint32_t failed_b;
	double change_pct; /* (b - a) / a of the means, in percent; NAN when a is 0 */
	bool tested;       /* two or more samples on each side */
	double p;          /* two-sided; NAN when not tested */
	bool significant;  /* tested and p < alpha */
	enum compare_verdict verdict;
	int64_t first_row; /* the first run's row id: cells keep the order they ran in */
};

struct compare_diff {
	char name[48]; /* "kernel", "env.governor", "config.duration", ... */
	char *a;       /* NULL: absent in that run */
	char *b;
};

struct compare_report {
	int64_t run_a;
	int64_t run_b;
	char started_a[32];
	char started_b[32];
	double threshold_pct;
	double alpha;
	struct compare_cell *cells; /* the cells both runs have, in the first run's order */
	size_t ncells;
	size_t only_a; /* cells in one run only */
	size_t only_b;
	struct compare_diff *diffs;
	size_t ndiffs;
	size_t regressions; /* including COMPARE_FAILED */
	size_t improvements;
	size_t untested;
};

struct compare_opts {
	double threshold_pct; /* 0: COMPARE_THRESHOLD_PCT */
	double alpha;         /* 0: COMPARE_ALPHA */
};

/* A run named by id, "latest" (the newest run that ended) or "previous" (the
 * one before it). 0 or -1 with err. */
int compare_resolve(sqlite3 *db, const char *spec, int64_t *id, char *err, size_t err_len);

/* Compare run a (before) with run b (after). 0 or -1 with err; on success
 * the caller frees out with compare_report_free. */
int compare_runs(sqlite3 *db, int64_t a, int64_t b, const struct compare_opts *o,
                 struct compare_report *out, char *err, size_t err_len);
void compare_report_free(struct compare_report *r);

const char *compare_verdict_name(enum compare_verdict v);

/* The report as JSON: {"a", "b", "threshold_pct", "alpha", "environment": [...],
 * "cells": [...], "summary": {...}} (docs in bench/README.md). NULL when out
 * of memory. */
cJSON *compare_report_json(const struct compare_report *r);

/* The report as a table for people. */
void compare_report_table(FILE *out, const struct compare_report *r);

#endif
