/*
 * report.c - what a run shows: a table per link on stdout (tcp and tern side
 * by side for each scenario, size and mode, with the tern/tcp ratio; then
 * the open-loop stream cells, a line per layer with the delivered rate and
 * the latency percentiles), and the whole run as JSON for --out.
 */
#include "matrix.h"
#include "record.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool
same_row(const struct cell *a, const struct cell *b)
{
	return a->link == b->link && a->kind == b->kind && a->lowlat == b->lowlat &&
	       a->records_per_msg == b->records_per_msg && a->payload_bytes == b->payload_bytes &&
	       a->concurrency == b->concurrency && a->batch_bytes == b->batch_bytes &&
	       a->rate == b->rate;
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

/* One layer's columns: records/s, MB/s, share, CPU s/GB. */
static void
layer_cols(const struct bench_run *run, long i, char *buf, size_t len)
{
	const struct cell_result *r;
	char rate[16];
	char share[16];

	if (i < 0 || !run->done[i]) {
		snprintf(buf, len, "%10s %9s %6s %8s", "-", "-", "-", "-");
		return;
	}
	r = &run->results[i];
	if (r->failed) {
		snprintf(buf, len, "%10s %9s %6s %8s", "FAILED", "", "", "");
		return;
	}
	si(r->records_per_s, rate, sizeof(rate));
	if (r->link_share >= 0) {
		snprintf(share, sizeof(share), "%.2f", r->link_share);
	} else {
		snprintf(share, sizeof(share), "-");
	}
	snprintf(buf, len, "%10s %9.1f %6s %8.2f", rate, r->bytes_per_s / 1e6, share,
	         r->cpu_s_per_gb);
}

static bool
ok(const struct bench_run *run, long i)
{
	return i >= 0 && run->done[i] && !run->results[i].failed;
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

static void
notes(const struct bench_run *run, const struct cell *c, long it, long ie, char *buf, size_t len)
{
	buf[0] = '\0';
	if (c->kind == SCEN_PINGPONG && (ok(run, it) || ok(run, ie))) {
		double tp50 = ok(run, it) ? run->results[it].lat_p50_us : -1;
		double tp999 = ok(run, it) ? run->results[it].lat_p999_us : -1;
		double ep50 = ok(run, ie) ? run->results[ie].lat_p50_us : -1;
		double ep999 = ok(run, ie) ? run->results[ie].lat_p999_us : -1;

		snprintf(buf, len, "rtt p50/p99.9 us: tcp %.0f/%.0f tern %.0f/%.0f", tp50, tp999,
		         ep50, ep999);
	} else if (c->kind == SCEN_FANIN && (ok(run, it) || ok(run, ie))) {
		snprintf(buf, len, "fastest/slowest: tcp %.2f tern %.2f",
		         ok(run, it) ? run->results[it].spread : -1,
		         ok(run, ie) ? run->results[ie].spread : -1);
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
open_loop_rows(FILE *out, const struct bench_run *run, const struct bench_link *l)
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
			fprintf(out, "%-14s %-7s %-8s | %10s %9s %9s %9s\n", "offered rec/s",
			        "mode", "layer", "records/s", "p50", "p99", "p99.9");
		}
		if (prev == NULL || prev->rate != c->rate) {
			si(c->rate, rate, sizeof(rate));
		}
		if (run->cfg.repeat > 1) {
			snprintf(layer, sizeof(layer), "%s #%u", c->layer->name, c->repeat + 1);
		} else {
			snprintf(layer, sizeof(layer), "%s", c->layer->name);
		}
		if (r->failed) {
			snprintf(got, sizeof(got), "FAILED");
		} else {
			si(r->records_per_s, got, sizeof(got));
		}
		latency(r->lat_p50_us, p50, sizeof(p50));
		latency(r->lat_p99_us, p99, sizeof(p99));
		latency(r->lat_p999_us, p999, sizeof(p999));
		fprintf(out, "%-14s %-7s %-8s | %10s %9s %9s %9s\n", rate,
		        prev != NULL && prev->rate == c->rate && prev->lowlat == c->lowlat
		            ? ""
		            : (c->lowlat ? "lowlat" : "batched"),
		        layer, got, p50, p99, p999);
		prev = c;
	}
}

static void
link_table(FILE *out, const struct bench_run *run, const struct bench_link *l)
{
	bool *shown = calloc(run->ncells, sizeof(*shown));
	size_t i;

	if (shown == NULL) {
		return;
	}
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
	fprintf(out, "%-8s %-20s %-7s | %-36s | %-36s | %8s | %s\n", "scenario", "size", "mode",
	        "tcp: records/s MB/s share cpu-s/GB", "tern: records/s MB/s share cpu-s/GB",
	        "tern/tcp", "notes");
	for (i = 0; i < run->ncells; i++) {
		const struct cell *c = &run->cells[i];
		long it = -1;
		long ie = -1;
		char lab[64];
		char tc[64];
		char te[64];
		char ratio[16];
		char nt[128];
		size_t j;

		if (c->link != l || shown[i] || c->rate > 0) {
			continue;
		}
		for (j = i; j < run->ncells; j++) {
			if (!shown[j] && same_row(c, &run->cells[j])) {
				shown[j] = true;
				if (strcmp(run->cells[j].layer->name, "tcp") == 0) {
					it = (long)j;
				} else {
					ie = (long)j;
				}
			}
		}
		row_label(c, lab, sizeof(lab));
		layer_cols(run, it, tc, sizeof(tc));
		layer_cols(run, ie, te, sizeof(te));
		if (ok(run, it) && ok(run, ie) && run->results[it].records_per_s > 0) {
			snprintf(ratio, sizeof(ratio), "%.2f",
			         run->results[ie].records_per_s / run->results[it].records_per_s);
		} else {
			snprintf(ratio, sizeof(ratio), "-");
		}
		notes(run, c, it, ie, nt, sizeof(nt));
		fprintf(out, "%-8s %-20s %-7s | %-36s | %-36s | %8s | %s\n", scenario_name(c->kind),
		        lab, c->lowlat ? "lowlat" : "batched", tc, te, ratio, nt);
	}
	open_loop_rows(out, run, l);
	for (i = 0; i < run->ncells; i++) {
		if (run->cells[i].link == l && run->done[i] && run->results[i].failed) {
			char lab[128];

			matrix_cell_label(&run->cells[i], lab, sizeof(lab));
			fprintf(out, "  FAILED %s: %s\n", lab, run->results[i].error);
		}
	}
	free(shown);
}

void
report_tables(FILE *out, const struct bench_run *run)
{
	size_t i;

	for (i = 0; i < run->cfg.nlinks; i++) {
		link_table(out, run, &run->cfg.links[i]);
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
