/*
 * progress.c - where a run is: the cell, its number out of the total, the
 * time elapsed and an estimate of the time left, on stderr. On a terminal
 * the line is rewritten in place; otherwise each cell gets a plain line, so
 * logs stay readable.
 */
#include "matrix.h"
#include "net.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static uint64_t started_ns;
static bool tty;

static void
fmt_time(double s, char *buf, size_t len)
{
	unsigned t = s > 0 ? (unsigned)(s + 0.5) : 0;

	if (t >= 3600) {
		snprintf(buf, len, "%uh%02um", t / 3600, t / 60 % 60);
	} else {
		snprintf(buf, len, "%um%02us", t / 60, t % 60);
	}
}

void
progress_begin(const struct bench_run *run)
{
	double est = 0;
	char t[32];
	size_t i;

	started_ns = net_now_ns();
	tty = isatty(STDERR_FILENO) == 1;
	for (i = 0; i < run->ncells; i++) {
		est += matrix_cell_estimate(&run->cells[i]);
	}
	fmt_time(est, t, sizeof(t));
	fprintf(stderr, "tern bench: %zu cells, about %s\n", run->ncells, t);
}

void
progress_cell(const struct bench_run *run, size_t i)
{
	double elapsed = (double)(net_now_ns() - started_ns) / 1e9;
	double done_est = 0;
	double left_est = 0;
	double left;
	char label[160];
	char e[32];
	char l[32];
	size_t j;

	for (j = 0; j < run->ncells; j++) {
		if (j < i) {
			done_est += matrix_cell_estimate(&run->cells[j]);
		} else {
			left_est += matrix_cell_estimate(&run->cells[j]);
		}
	}
	/* Scale the estimate by how fast the cells so far went. */
	left = done_est > 0 && elapsed > 0 ? left_est * elapsed / done_est : left_est;
	matrix_cell_label(&run->cells[i], label, sizeof(label));
	if (run->cfg.repeat > 1) {
		size_t n = strlen(label);

		snprintf(label + n, sizeof(label) - n, " (repeat %u/%u)", run->cells[i].repeat + 1,
		         run->cfg.repeat);
	}
	fmt_time(elapsed, e, sizeof(e));
	fmt_time(left, l, sizeof(l));
	if (tty) {
		fprintf(stderr, "\r\033[K[%zu/%zu] %s  elapsed %s  left ~%s", i + 1, run->ncells,
		        label, e, l);
	} else {
		fprintf(stderr, "[%zu/%zu] %s  elapsed %s  left ~%s\n", i + 1, run->ncells, label,
		        e, l);
	}
	fflush(stderr);
}

void
progress_end(void)
{
	if (tty) {
		fprintf(stderr, "\r\033[K");
	}
	fflush(stderr);
}
