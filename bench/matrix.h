/*
 * matrix.h - the configuration of a bench run and the cells it expands to.
 */
#ifndef BENCH_MATRIX_H
#define BENCH_MATRIX_H

#include "scenario.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <tern/tern.h>

/* The version stored with each run: the libtern this bench was built with. */
#define TERN_BENCH_VERSION TERN_VERSION

#define MAX_LINKS  32
#define MAX_VALUES 32

struct bench_config {
	struct bench_link links[MAX_LINKS]; /* the links to run, in order */
	size_t nlinks;
	enum scenario_kind scenarios[4];
	size_t nscenarios;
	const struct layer_ops *layers[LAYER_MAX];
	size_t nlayers;
	bool modes[2]; /* false: batched, true: lowlat */
	size_t nmodes;
	uint32_t records[MAX_VALUES];
	size_t nrecords;
	uint32_t keys[MAX_VALUES]; /* --keys: stream messages round-robin over this many keys */
	size_t nkeys;
	uint32_t concurrency[MAX_VALUES];
	size_t nconcurrency;
	uint32_t connections;
	uint32_t fanin_records; /* records per message in fanin */
	uint32_t batch_bytes[MAX_VALUES];
	size_t nbatch_bytes;
	uint64_t sizes[MAX_VALUES]; /* bytes scenario payloads */
	size_t nsizes;
	double duration;
	double rates[MAX_VALUES]; /* --rate: open-loop stream rates (records/s) */
	size_t nrates;
	bool rates_given; /* false: each link's default rate (matrix_link_rates) */
	uint32_t repeat;  /* samples of each cell, the layers interleaved */
	const char *db;
	const char *out;
	const char *note;
	bool quick;
	bool validate;
	bool tls;            /* --tls: every connection over TLS 1.3 (tcp and tern) */
	const char *tls_dir; /* the run's certificate, while it runs (tlsbench.h) */
};

struct bench_run {
	struct bench_config cfg;
	struct cell *cells;
	struct cell_result *results;
	bool *done;
	size_t ncells;
	char started_at[32];
	char finished_at[32];
	const char *status;
};

/* Expand cfg into cells (run->cells, run->ncells). 0 or -1 (out of memory). */
int matrix_build(struct bench_run *run);

/* Open-loop stream rates without --rate: half of a link's bandwidth in
 * record payload, or MATRIX_UNLIMITED_RATE on a link without a limit. */
#define MATRIX_UNLIMITED_RATE 100000.0

/* The open-loop rates (records/s) a link gets; returns how many (at most
 * MAX_VALUES), 0 after --rate 0. */
size_t matrix_link_rates(const struct bench_config *cfg, const struct bench_link *l, double *rates);

/* Seconds a cell is expected to take, for the time-left estimate. */
double matrix_cell_estimate(const struct cell *c);

/* A short label for a cell: "stream wifi tern batched 16 rec/msg", and for
 * an open-loop one "stream lan tern batched 1 rec/msg @ 977k rec/s". */
void matrix_cell_label(const struct cell *c, char *buf, size_t len);

/* The configuration as JSON (caller frees). */
char *matrix_config_json(const struct bench_config *cfg);

/* report.c: the tables on out, and the run as a JSON file. */
void report_tables(FILE *out, const struct bench_run *run);
int report_json(const struct bench_run *run, const char *path, char *err, size_t err_len);

/* progress.c: one line on stderr per cell, or one updating line on a terminal. */
void progress_begin(const struct bench_run *run);
void progress_cell(const struct bench_run *run, size_t i);
void progress_end(void);

/* validate.c: measure the emulator on each emulated link; 0 all within 5%. */
int validate_links(const struct bench_config *cfg, FILE *out);

#endif
