/*
 * report.c - what a run shows: a table per link on stdout (tcp, tern and,
 * when it ran, zmq side by side for each scenario, size and mode, with each
 * layer's ratio to tcp; then the open-loop stream cells, a line per layer
 * with the delivered rate and the latency percentiles), and the whole run
 * as JSON for --out.
 */
#include "matrix.h"
#include "record.h"
#include "stats.h"

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The table's layer columns, in order. tcp and tern always have theirs;
 * zmq only when the run has it. zmq shows records/s and MB/s, no share or
 * CPU, so that three layers fit in about 125 columns. */
enum { COL_TCP, COL_TERN, COL_ZMQ, NCOLS };

static const char *const col_name[NCOLS] = {"tcp", "tern", "zmq"};

/* scenario, size, mode */
#define LABEL_FMT "%-8s %-15s %-7s"
#define LABEL_W   32
/* records/s, MB/s, share, CPU s/GB */
#define FULL_FMT "%6s %6s %5s %6s"
#define FULL_W   26
/* records/s, MB/s */
#define SHORT_FMT "%6s %6s"
#define SHORT_W   13

static bool
same_row(const struct cell *a, const struct cell *b)
{
	return a->link == b->link && a->kind == b->kind && a->lowlat == b->lowlat &&
	       a->records_per_msg == b->records_per_msg && a->payload_bytes == b->payload_bytes &&
	       a->concurrency == b->concurrency && a->batch_bytes == b->batch_bytes &&
	       a->rate == b->rate && a->keys == b->keys;
}

static void
si(double v, char *buf, size_t len)
{
	if (v >= 1e9) {
		snprintf(buf, len, "%.2fG", v / 1e9);
	} else if (v >= 1e6) {
		snprintf(buf, len, "%.2fM", v / 1e6);
	} else if (v >= 1e3) {
		snprintf(buf, len, "%.1fk", v / 1e3);
	} else {
		snprintf(buf, len, "%.0f", v);
	}
}

static bool
ok(const struct bench_run *run, long i)
{
	return i >= 0 && run->done[i] && !run->results[i].failed;
}

/* One layer's columns: records/s, MB/s and, when full, share and CPU s/GB. */
static void
layer_cols(const struct bench_run *run, long i, bool full, char *buf, size_t len)
{
	const struct cell_result *r;
	char rate[16];
	char mbs[16];
	char share[16];
	char cpu[16];

	if (i < 0 || !run->done[i] || run->results[i].failed) {
		bool failed = i >= 0 && run->done[i];
		const char *rest = failed ? "" : "-";

		if (full) {
			snprintf(buf, len, FULL_FMT, failed ? "FAILED" : "-", rest, rest, rest);
		} else {
			snprintf(buf, len, SHORT_FMT, failed ? "FAILED" : "-", rest);
		}
		return;
	}
	r = &run->results[i];
	si(r->records_per_s, rate, sizeof(rate));
	snprintf(mbs, sizeof(mbs), "%.1f", r->bytes_per_s / 1e6);
	if (!full) {
		snprintf(buf, len, SHORT_FMT, rate, mbs);
		return;
	}
	if (r->link_share >= 0) {
		snprintf(share, sizeof(share), "%.2f", r->link_share);
	} else {
		snprintf(share, sizeof(share), "-");
	}
	snprintf(cpu, sizeof(cpu), "%.2f", r->cpu_s_per_gb);
	snprintf(buf, len, FULL_FMT, rate, mbs, share, cpu);
}

/* records/s of cell i over that of cell ref, or "-". */
static void
ratio(const struct bench_run *run, long i, long ref, char *buf, size_t len)
{
	if (ok(run, i) && ok(run, ref) && run->results[ref].records_per_s > 0) {
		snprintf(buf, len, "%.2f",
		         run->results[i].records_per_s / run->results[ref].records_per_s);
	} else {
		snprintf(buf, len, "-");
	}
}

static void
row_label(const struct cell *c, char *buf, size_t len)
{
	char full[128];
	const char *p;

	matrix_cell_label(c, full, sizeof(full));
	/* Drop "scenario link layer mode " from the label: keep the size part. */
	p = full;
	for (int k = 0; k < 4 && p != NULL; k++) {
		p = strchr(p, ' ');
		if (p != NULL) {
			p++;
		}
	}
	snprintf(buf, len, "%s", p ? p : "");
}

/* The spread of a cell's repeats, for the notes: "spread tcp 2% tern 5%". */
static size_t
spread_note(const struct bench_run *run, const double *rsp, const long *idx, int ncols, char *buf,
            size_t len)
{
	size_t n = 0;
	int k;

	for (k = 0; k < ncols && rsp != NULL && n < len; k++) {
		if (ok(run, idx[k]) && rsp[idx[k]] >= 0) {
			int w = snprintf(buf + n, len - n, "%s%s %.0f%%", n == 0 ? "spread " : " ",
			                 col_name[k], rsp[idx[k]]);

			n += w > 0 ? (size_t)w : 0;
		}
	}
	return n < len ? n : len - 1;
}

static void
notes(const struct bench_run *run, const double *rsp, const struct cell *c, const long *idx,
      int ncols, char *buf, size_t len)
{
	size_t n = 0;
	int k;

	buf[0] = '\0';
	if (rsp != NULL) {
		n = spread_note(run, rsp, idx, ncols, buf, len);
		if (n > 0 && n + 2 < len) {
			buf[n++] = ';';
			buf[n++] = ' ';
			buf[n] = '\0';
		}
		buf += n;
		len -= n;
		n = 0;
	}
	if (c->kind == SCEN_PINGPONG && (ok(run, idx[COL_TCP]) || ok(run, idx[COL_TERN]))) {
		long it = idx[COL_TCP];
		long ie = idx[COL_TERN];

		snprintf(buf, len, "rtt p50/p99.9 us: tcp %.0f/%.0f tern %.0f/%.0f",
		         ok(run, it) ? run->results[it].lat_p50_us : -1,
		         ok(run, it) ? run->results[it].lat_p999_us : -1,
		         ok(run, ie) ? run->results[ie].lat_p50_us : -1,
		         ok(run, ie) ? run->results[ie].lat_p999_us : -1);
		return;
	}
	if (c->kind != SCEN_FANIN) {
		return;
	}
	for (k = 0; k < ncols && n < len; k++) {
		if (ok(run, idx[k])) {
			int w = snprintf(buf + n, len - n, "%s%s %.2f",
			                 n == 0 ? "fastest/slowest: " : " ", col_name[k],
			                 run->results[idx[k]].spread);

			n += w > 0 ? (size_t)w : 0;
		}
	}
}

/* A latency for a table: 3.4us, 45us, 1.25ms, 860.2ms, 3.41s; "-" if none. */
static void
latency(double us, char *buf, size_t len)
{
	if (us < 0) {
		snprintf(buf, len, "-");
	} else if (us < 10) {
		snprintf(buf, len, "%.1fus", us);
	} else if (us < 1e3) {
		snprintf(buf, len, "%.0fus", us);
	} else if (us < 1e4) {
		snprintf(buf, len, "%.2fms", us / 1e3);
	} else if (us < 1e6) {
		snprintf(buf, len, "%.1fms", us / 1e3);
	} else {
		snprintf(buf, len, "%.2fs", us / 1e6);
	}
}

/* The open-loop stream cells of a link, apart from the closed-loop rows:
 * one line per cell, the rate and mode written when they change. */
static void
open_loop_rows(FILE *out, const struct bench_run *run, const double *rsp,
               const struct bench_link *l)
{
	const struct cell *prev = NULL;
	size_t i;

	for (i = 0; i < run->ncells; i++) {
		const struct cell *c = &run->cells[i];
		const struct cell_result *r = &run->results[i];
		char rate[24] = "";
		char layer[32];
		char got[16];
		char p50[16];
		char p99[16];
		char p999[16];

		if (c->link != l || c->rate <= 0 || !run->done[i]) {
			continue;
		}
		if (prev == NULL) {
			fprintf(out,
			        "open loop, 1 record a message: one-way latency from each record's "
			        "intended send time\n");
			fprintf(out, "%-14s %-7s %-8s | %10s %9s %9s %9s%s\n", "offered rec/s",
			        "mode", "layer", "records/s", "p50", "p99", "p99.9",
			        rsp != NULL ? " | p99 spread" : "");
		}
		if (prev == NULL || prev->rate != c->rate) {
			si(c->rate, rate, sizeof(rate));
		}
		snprintf(layer, sizeof(layer), "%s", c->layer->name);
		if (r->failed) {
			snprintf(got, sizeof(got), "FAILED");
		} else {
			si(r->records_per_s, got, sizeof(got));
		}
		latency(r->lat_p50_us, p50, sizeof(p50));
		latency(r->lat_p99_us, p99, sizeof(p99));
		latency(r->lat_p999_us, p999, sizeof(p999));
		fprintf(out, "%-14s %-7s %-8s | %10s %9s %9s %9s", rate,
		        prev != NULL && prev->rate == c->rate && prev->lowlat == c->lowlat
		            ? ""
		            : (c->lowlat ? "lowlat" : "batched"),
		        layer, got, p50, p99, p999);
		if (rsp != NULL && !r->failed && rsp[i] >= 0) {
			fprintf(out, " | %.0f%%", rsp[i]);
		}
		fprintf(out, "\n");
		prev = c;
	}
}

static void
link_header(FILE *out, const struct bench_link *l, bool zmq)
{
	if (l->is_unix) {
		fprintf(out, "\n== link %s: Unix-domain socket, no emulation ==\n", l->name);
	} else if (!l->emulated) {
		fprintf(out, "\n== link %s: TCP on 127.0.0.1, no emulation ==\n", l->name);
	} else if (l->bandwidth_Bps > 0) {
		fprintf(out, "\n== link %s: %.1f MB/s, %.3g ms round trip ==\n", l->name,
		        l->bandwidth_Bps / 1e6, l->rtt_ms);
	} else {
		fprintf(out, "\n== link %s: unlimited, %.3g ms round trip ==\n", l->name,
		        l->rtt_ms);
	}
	fprintf(out, "%-*s | %-*s | %-*s |", LABEL_W, "", FULL_W, "tcp", FULL_W, "tern");
	if (zmq) {
		fprintf(out, " %-*s | %-16s |\n", SHORT_W, "zmq", "ratio to tcp");
	} else {
		fprintf(out, " %-8s |\n", "ratio");
	}
	fprintf(out, LABEL_FMT " | " FULL_FMT " | " FULL_FMT " | ", "scenario", "size", "mode",
	        "rec/s", "MB/s", "share", "cpu/GB", "rec/s", "MB/s", "share", "cpu/GB");
	if (zmq) {
		fprintf(out, SHORT_FMT " | %8s %7s | notes\n", "rec/s", "MB/s", "tern/tcp",
		        "zmq/tcp");
	} else {
		fprintf(out, "%8s | notes\n", "tern/tcp");
	}
}

static void
link_table(FILE *out, const struct bench_run *run, const double *rsp, const struct bench_link *l)
{
	bool *shown = calloc(run->ncells, sizeof(*shown));
	bool zmq = false;
	int ncols;
	size_t i;

	if (shown == NULL) {
		return;
	}
	for (i = 0; i < run->cfg.nlayers; i++) {
		zmq |= strcmp(run->cfg.layers[i]->name, col_name[COL_ZMQ]) == 0;
	}
	ncols = zmq ? NCOLS : COL_ZMQ;
	link_header(out, l, zmq);
	for (i = 0; i < run->ncells; i++) {
		const struct cell *c = &run->cells[i];
		long idx[NCOLS] = {-1, -1, -1};
		char lab[64];
		char cols[NCOLS][64];
		char rt[16];
		char rz[16];
		char nt[192];
		size_t j;
		int k;

		if (c->link != l || shown[i] || c->rate > 0) {
			continue;
		}
		for (j = i; j < run->ncells; j++) {
			if (shown[j] || !same_row(c, &run->cells[j])) {
				continue;
			}
			shown[j] = true;
			for (k = 0; k < ncols; k++) {
				if (strcmp(run->cells[j].layer->name, col_name[k]) == 0) {
					idx[k] = (long)j;
				}
			}
		}
		row_label(c, lab, sizeof(lab));
		for (k = 0; k < ncols; k++) {
			layer_cols(run, idx[k], k != COL_ZMQ, cols[k], sizeof(cols[k]));
		}
		ratio(run, idx[COL_TERN], idx[COL_TCP], rt, sizeof(rt));
		notes(run, rsp, c, idx, ncols, nt, sizeof(nt));
		if (strlen(nt) >= 2 && strcmp(nt + strlen(nt) - 2, "; ") == 0) {
			nt[strlen(nt) - 2] = '\0'; /* the spread, and no other note */
		}
		fprintf(out, LABEL_FMT " | %s | %s | ", scenario_name(c->kind), lab,
		        c->lowlat ? "lowlat" : "batched", cols[COL_TCP], cols[COL_TERN]);
		if (zmq) {
			ratio(run, idx[COL_ZMQ], idx[COL_TCP], rz, sizeof(rz));
			fprintf(out, "%s | %8s %7s | %s\n", cols[COL_ZMQ], rt, rz, nt);
		} else {
			fprintf(out, "%8s | %s\n", rt, nt);
		}
	}
	open_loop_rows(out, run, rsp, l);
	for (i = 0; i < run->ncells; i++) {
		if (run->cells[i].link == l && run->done[i] && run->results[i].failed) {
			char lab[128];

			matrix_cell_label(&run->cells[i], lab, sizeof(lab));
			fprintf(out, "  FAILED %s: %s\n", lab, run->results[i].error);
		}
	}
	free(shown);
}

/* One figure of the repeats of a cell, over the good ones (stats.h). */
static struct sample_stats
figure_of(const struct bench_run *run, const size_t *rows, size_t n, size_t offset, double *tmp)
{
	struct sample_stats st;
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		const struct cell_result *r = &run->results[rows[i]];
		double v;

		memcpy(&v, (const char *)r + offset, sizeof(v));
		if (run->done[rows[i]] && !r->failed && v >= 0) {
			tmp[k++] = v;
		}
	}
	stats_describe(tmp, k, &st);
	return st;
}

/* A run with --repeat, as a run of one sample a cell: each cell's medians
 * (and its first failure, if a repeat failed), and in spread[] the range of
 * its records/s (open loop: its p99) in percent of the median. */
static int
merge_repeats(const struct bench_run *run, struct bench_run *view, double **spread)
{
	size_t *rows = calloc(run->ncells, sizeof(*rows));
	double *tmp = calloc(run->ncells, sizeof(*tmp));
	bool *taken = calloc(run->ncells, sizeof(*taken));
	static const size_t figures[] = {
	    offsetof(struct cell_result, seconds),     offsetof(struct cell_result, records_per_s),
	    offsetof(struct cell_result, bytes_per_s), offsetof(struct cell_result, link_share),
	    offsetof(struct cell_result, lat_p50_us),  offsetof(struct cell_result, lat_p99_us),
	    offsetof(struct cell_result, lat_p999_us), offsetof(struct cell_result, spread),
	    offsetof(struct cell_result, cpu_s_per_gb)};

	*view = *run;
	view->cells = calloc(run->ncells, sizeof(*view->cells));
	view->results = calloc(run->ncells, sizeof(*view->results));
	view->done = calloc(run->ncells, sizeof(*view->done));
	*spread = calloc(run->ncells, sizeof(**spread));
	view->ncells = 0;
	if (rows == NULL || tmp == NULL || taken == NULL || view->cells == NULL ||
	    view->results == NULL || view->done == NULL || *spread == NULL) {
		free(rows);
		free(tmp);
		free(taken);
		return -1;
	}
	for (size_t i = 0; i < run->ncells; i++) {
		const struct cell *c = &run->cells[i];
		struct cell_result *m = &view->results[view->ncells];
		size_t n = 0;
		bool any = false;

		if (taken[i]) {
			continue;
		}
		for (size_t j = i; j < run->ncells; j++) {
			if (!taken[j] && run->cells[j].layer == c->layer &&
			    same_row(c, &run->cells[j])) {
				taken[j] = true;
				rows[n++] = j;
			}
		}
		for (size_t k = 0; k < n; k++) {
			const struct cell_result *r = &run->results[rows[k]];

			any |= run->done[rows[k]];
			if (run->done[rows[k]] && r->failed && !m->failed) {
				*m = *r; /* a repeat that failed fails the cell */
			}
		}
		if (!m->failed) {
			size_t fig = c->rate > 0 ? offsetof(struct cell_result, lat_p99_us)
			                         : offsetof(struct cell_result, records_per_s);
			struct sample_stats st;

			for (size_t f = 0; f < sizeof(figures) / sizeof(figures[0]); f++) {
				double v;

				st = figure_of(run, rows, n, figures[f], tmp);
				v = st.n > 0 ? st.median : -1;
				memcpy((char *)m + figures[f], &v, sizeof(v));
			}
			st = figure_of(run, rows, n, fig, tmp);
			(*spread)[view->ncells] =
			    st.n > 1 && st.median > 0 ? (st.max - st.min) / st.median * 100 : -1;
		}
		view->cells[view->ncells] = *c;
		view->cells[view->ncells].repeat = 0;
		view->done[view->ncells] = any;
		view->ncells++;
	}
	free(rows);
	free(tmp);
	free(taken);
	return 0;
}

void
report_tables(FILE *out, const struct bench_run *run)
{
	struct bench_run view;
	double *spread = NULL;
	size_t i;

	if (run->cfg.tls) {
		fprintf(out, "\nEvery connection over TLS 1.3 (tern: tls://, tcp: OpenSSL on the "
		             "socket)\n");
	}
	if (run->cfg.repeat > 1 && merge_repeats(run, &view, &spread) == 0) {
		fprintf(out,
		        "\n%u repeats of each cell: medians, and the spread (max - min) of "
		        "records/s (open loop: p99) in percent of the median\n",
		        run->cfg.repeat);
		for (i = 0; i < run->cfg.nlinks; i++) {
			link_table(out, &view, spread, &run->cfg.links[i]);
		}
		free(view.cells);
		free(view.results);
		free(view.done);
		free(spread);
		fflush(out);
		return;
	}
	for (i = 0; i < run->cfg.nlinks; i++) {
		link_table(out, run, NULL, &run->cfg.links[i]);
	}
	fflush(out);
}

static void
add_opt(cJSON *o, const char *k, double v)
{
	if (v >= 0) {
		cJSON_AddNumberToObject(o, k, v);
	} else {
		cJSON_AddNullToObject(o, k);
	}
}

int
report_json(const struct bench_run *run, const char *path, char *err, size_t err_len)
{
	cJSON *o = cJSON_CreateObject();
	cJSON *cfg = NULL;
	cJSON *a;
	char *cs = matrix_config_json(&run->cfg);
	char *text;
	FILE *f;
	bool bad;
	size_t i;

	cJSON_AddStringToObject(o, "started_at", run->started_at);
	if (run->finished_at[0]) {
		cJSON_AddStringToObject(o, "finished_at", run->finished_at);
	} else {
		cJSON_AddNullToObject(o, "finished_at");
	}
	cJSON_AddStringToObject(o, "status", run->status ? run->status : "running");
	cJSON_AddStringToObject(o, "tern_version", TERN_BENCH_VERSION);
	if (run->cfg.note) {
		cJSON_AddStringToObject(o, "note", run->cfg.note);
	}
	if (cs != NULL) {
		cfg = cJSON_Parse(cs);
		free(cs);
	}
	cJSON_AddItemToObject(o, "config", cfg ? cfg : cJSON_CreateNull());
	a = cJSON_AddArrayToObject(o, "results");
	for (i = 0; i < run->ncells; i++) {
		const struct cell *c = &run->cells[i];
		const struct cell_result *r = &run->results[i];
		cJSON *x;

		if (!run->done[i]) {
			continue;
		}
		x = cJSON_CreateObject();
		cJSON_AddStringToObject(x, "scenario", scenario_name(c->kind));
		cJSON_AddStringToObject(x, "link", c->link->name);
		cJSON_AddStringToObject(x, "layer", c->layer->name);
		cJSON_AddStringToObject(x, "mode", c->lowlat ? "lowlat" : "batched");
		cJSON_AddNumberToObject(x, "records_per_msg", c->records_per_msg);
		cJSON_AddNumberToObject(x, "payload_bytes", (double)c->payload_bytes);
		cJSON_AddNumberToObject(x, "concurrency", c->concurrency);
		cJSON_AddNumberToObject(x, "keys", c->keys > 0 ? c->keys : 1);
		if (c->lowlat) {
			cJSON_AddNullToObject(x, "batch_bytes");
		} else {
			cJSON_AddNumberToObject(x, "batch_bytes",
			                        c->batch_bytes ? c->batch_bytes : 65536);
		}
		cJSON_AddNumberToObject(x, "record_bytes",
		                        c->kind == SCEN_BYTES ? 0 : RECORD_BYTES);
		cJSON_AddNumberToObject(x, "seconds", r->seconds);
		cJSON_AddNumberToObject(x, "messages", (double)r->messages);
		cJSON_AddNumberToObject(x, "records", (double)r->records);
		cJSON_AddNumberToObject(x, "bytes", (double)r->bytes);
		cJSON_AddNumberToObject(x, "records_per_s", r->records_per_s);
		cJSON_AddNumberToObject(x, "bytes_per_s", r->bytes_per_s);
		add_opt(x, "rate", c->rate > 0 ? c->rate : -1);
		cJSON_AddNumberToObject(x, "repeat", c->repeat);
		add_opt(x, "link_share", r->link_share);
		add_opt(x, "lat_p50_us", r->lat_p50_us);
		add_opt(x, "lat_p99_us", r->lat_p99_us);
		add_opt(x, "lat_p999_us", r->lat_p999_us);
		add_opt(x, "spread", r->spread);
		cJSON_AddNumberToObject(x, "lost", (double)r->lost);
		add_opt(x, "cpu_s_per_gb", r->bytes > 0 ? r->cpu_s_per_gb : -1);
		cJSON_AddBoolToObject(x, "failed", r->failed);
		if (r->failed) {
			cJSON_AddStringToObject(x, "error", r->error);
		} else {
			cJSON_AddNullToObject(x, "error");
		}
		cJSON_AddItemToArray(a, x);
	}
	text = cJSON_Print(o);
	cJSON_Delete(o);
	if (text == NULL) {
		snprintf(err, err_len, "--out: out of memory");
		return -1;
	}
	f = fopen(path, "w");
	if (f == NULL) {
		snprintf(err, err_len, "--out %s: cannot create the file", path);
		free(text);
		return -1;
	}
	fputs(text, f);
	fputc('\n', f);
	bad = ferror(f) != 0;
	if (fclose(f) != 0 || bad) {
		snprintf(err, err_len, "--out %s: cannot write the file", path);
		free(text);
		return -1;
	}
	free(text);
	return 0;
}
