/*
 * compare.c - two runs, cell by cell, with Welch's t-test (see compare.h).
 */
#include "compare.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* One result row, reduced to its cell and the figure compared. */
struct row {
	struct compare_cell key; /* only the key fields and metric are set */
	double value;
	bool failed;
	int64_t order; /* the row's id: cells keep the order the run ran them in */
};

struct rows {
	struct row *v;
	size_t n;
};

static int
key_cmp(const struct compare_cell *x, const struct compare_cell *y)
{
	int c;

	if ((c = strcmp(x->scenario, y->scenario)) != 0 || (c = strcmp(x->link, y->link)) != 0 ||
	    (c = strcmp(x->layer, y->layer)) != 0 || (c = strcmp(x->mode, y->mode)) != 0) {
		return c;
	}
	if (x->records_per_msg != y->records_per_msg) {
		return x->records_per_msg < y->records_per_msg ? -1 : 1;
	}
	if (x->payload_bytes != y->payload_bytes) {
		return x->payload_bytes < y->payload_bytes ? -1 : 1;
	}
	if (x->concurrency != y->concurrency) {
		return x->concurrency < y->concurrency ? -1 : 1;
	}
	if (x->keys != y->keys) {
		return x->keys < y->keys ? -1 : 1;
	}
	if (x->batch_bytes != y->batch_bytes) {
		return x->batch_bytes < y->batch_bytes ? -1 : 1;
	}
	return (x->rate > y->rate) - (x->rate < y->rate);
}

static int
row_cmp(const void *a, const void *b)
{
	const struct row *x = a;
	const struct row *y = b;
	int c = key_cmp(&x->key, &y->key);

	return c != 0 ? c : (x->order > y->order) - (x->order < y->order);
}

static bool
has_column(sqlite3 *db, const char *table, const char *column)
{
	char sql[128];
	sqlite3_stmt *s;
	bool found = false;

	snprintf(sql, sizeof(sql), "SELECT 1 FROM pragma_table_info('%s') WHERE name = '%s'", table,
	         column);
	if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK) {
		found = sqlite3_step(s) == SQLITE_ROW;
		sqlite3_finalize(s);
	}
	return found;
}

static void
text_col(sqlite3_stmt *s, int i, char *buf, size_t len)
{
	const unsigned char *t = sqlite3_column_text(s, i);

	snprintf(buf, len, "%s", t ? (const char *)t : "");
}

/* Which figure a cell is judged by: latency for open-loop cells (the
 * throughput there is the offered rate), MB/s for raw bytes, else records/s. */
static void
set_metric(struct compare_cell *k)
{
	if (k->rate > 0) {
		k->metric = "lat_p99_us";
		k->higher_is_better = false;
	} else if (strcmp(k->scenario, "bytes") == 0) {
		k->metric = "bytes_per_s";
		k->higher_is_better = true;
	} else {
		k->metric = "records_per_s";
		k->higher_is_better = true;
	}
}

static int
load_rows(sqlite3 *db, int64_t run, struct rows *out, char *err, size_t err_len)
{
	/* Databases from before --rate and --repeat have neither column. */
	const char *rate = has_column(db, "results", "rate") ? "IFNULL(rate, 0)" : "0";
	const char *failed = has_column(db, "results", "failed") ? "failed" : "0";
	const char *keys = has_column(db, "results", "keys") ? "keys" : "1";
	char sql[512];
	sqlite3_stmt *s;
	size_t cap = 0;
	int rc;

	snprintf(sql, sizeof(sql),
	         "SELECT scenario, link, layer, mode, records_per_msg, payload_bytes, "
	         "concurrency, IFNULL(batch_bytes, -1), %s, records_per_s, bytes_per_s, "
	         "lat_p99_us, %s, id, %s FROM results WHERE run_id = ?",
	         rate, failed, keys);
	memset(out, 0, sizeof(*out));
	if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) != SQLITE_OK) {
		snprintf(err, err_len, "database: %s", sqlite3_errmsg(db));
		return -1;
	}
	sqlite3_bind_int64(s, 1, run);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		struct row *r;

		if (out->n == cap) {
			size_t ncap = cap ? cap * 2 : 64;
			struct row *nv = realloc(out->v, ncap * sizeof(*nv));

			if (nv == NULL) {
				snprintf(err, err_len, "out of memory");
				sqlite3_finalize(s);
				return -1;
			}
			out->v = nv;
			cap = ncap;
		}
		r = &out->v[out->n++];
		memset(r, 0, sizeof(*r));
		text_col(s, 0, r->key.scenario, sizeof(r->key.scenario));
		text_col(s, 1, r->key.link, sizeof(r->key.link));
		text_col(s, 2, r->key.layer, sizeof(r->key.layer));
		text_col(s, 3, r->key.mode, sizeof(r->key.mode));
		r->key.records_per_msg = sqlite3_column_int64(s, 4);
		r->key.payload_bytes = sqlite3_column_int64(s, 5);
		r->key.concurrency = sqlite3_column_int64(s, 6);
		r->key.batch_bytes = sqlite3_column_int64(s, 7);
		r->key.rate = sqlite3_column_double(s, 8);
		r->key.keys = sqlite3_column_int64(s, 14);
		set_metric(&r->key);
		r->value = sqlite3_column_double(s, strcmp(r->key.metric, "bytes_per_s") == 0 ? 10
		                                    : r->key.higher_is_better                 ? 9
		                                                                              : 11);
		r->failed = sqlite3_column_int(s, 12) != 0 ||
		            (!r->key.higher_is_better && sqlite3_column_type(s, 11) == SQLITE_NULL);
		r->order = sqlite3_column_int64(s, 13);
	}
	sqlite3_finalize(s);
	if (rc != SQLITE_DONE) {
		snprintf(err, err_len, "database: %s", sqlite3_errmsg(db));
		return -1;
	}
	qsort(out->v, out->n, sizeof(*out->v), row_cmp);
	return 0;
}

/* The rows of one cell: [*i, end). Fills the samples that did not fail. */
static size_t
group(const struct rows *r, size_t i, double *vals, size_t *nvals, uint32_t *nfailed)
{
	size_t j = i;

	*nvals = 0;
	*nfailed = 0;
	while (j < r->n && key_cmp(&r->v[i].key, &r->v[j].key) == 0) {
		if (r->v[j].failed) {
			(*nfailed)++;
		} else {
			vals[(*nvals)++] = r->v[j].value;
		}
		j++;
	}
	return j;
}

static void
judge(struct compare_cell *c, const struct compare_opts *o)
{
	struct welch w;
	double worse;

	c->change_pct = c->a.mean != 0 ? (c->b.mean - c->a.mean) / c->a.mean * 100 : NAN;
	c->tested = stats_welch(&c->a, &c->b, &w) == 0;
	c->p = c->tested ? w.p : NAN;
	c->significant = c->tested && c->p < o->alpha;
	c->verdict = COMPARE_SAME;
	if (c->a.n > 0 && c->b.n == 0 && c->failed_b > 0) {
		c->verdict = COMPARE_FAILED;
		return;
	}
	if (!c->significant || isnan(c->change_pct)) {
		return;
	}
	worse = c->higher_is_better ? -c->change_pct : c->change_pct;
	if (worse > o->threshold_pct) {
		c->verdict = COMPARE_REGRESSION;
	} else if (-worse > o->threshold_pct) {
		c->verdict = COMPARE_IMPROVEMENT;
	}
}

static int
order_cmp(const void *a, const void *b)
{
	const struct compare_cell *x = a;
	const struct compare_cell *y = b;

	return (x->first_row > y->first_row) - (x->first_row < y->first_row);
}

/* Walk both sorted row lists and fill out->cells with the cells they share. */
static int
merge(const struct rows *ra, const struct rows *rb, const struct compare_opts *o,
      struct compare_report *out)
{
	size_t n = ra->n > rb->n ? ra->n : rb->n;
	double *va = malloc((n + 1) * sizeof(double));
	double *vb = malloc((n + 1) * sizeof(double));
	size_t i = 0;
	size_t j = 0;

	out->cells = calloc(ra->n + 1, sizeof(*out->cells));
	if (va == NULL || vb == NULL || out->cells == NULL) {
		free(va);
		free(vb);
		return -1;
	}
	while (i < ra->n || j < rb->n) {
		int c = i == ra->n ? 1 : j == rb->n ? -1 : key_cmp(&ra->v[i].key, &rb->v[j].key);
		size_t na;
		size_t nb;

		if (c < 0) {
			out->only_a++;
			i = group(ra, i, va, &na, &(uint32_t){0});
		} else if (c > 0) {
			out->only_b++;
			j = group(rb, j, vb, &nb, &(uint32_t){0});
		} else {
			struct compare_cell *cell = &out->cells[out->ncells];

			*cell = ra->v[i].key;
			cell->first_row = ra->v[i].order;
			out->ncells++;
			i = group(ra, i, va, &na, &cell->failed_a);
			j = group(rb, j, vb, &nb, &cell->failed_b);
			stats_describe(va, na, &cell->a);
			stats_describe(vb, nb, &cell->b);
			judge(cell, o);
			out->regressions +=
			    cell->verdict == COMPARE_REGRESSION || cell->verdict == COMPARE_FAILED;
			out->improvements += cell->verdict == COMPARE_IMPROVEMENT;
			out->untested += !cell->tested;
		}
	}
	free(va);
	free(vb);
	qsort(out->cells, out->ncells, sizeof(*out->cells), order_cmp);
	return 0;
}

/* ---- environments ---- */

/* The run's columns that describe its environment, in the order listed. */
static const char *const env_columns[] = {"host",     "cpu_model",  "cores",       "kernel",
                                          "compiler", "build_type", "tern_commit", "tern_version"};
#define NENV_COLUMNS (sizeof(env_columns) / sizeof(env_columns[0]))

struct run_row {
	char *col[NENV_COLUMNS];
	cJSON *env;
	cJSON *config;
	char started[32];
};

static void
run_row_free(struct run_row *r)
{
	size_t i;

	for (i = 0; i < NENV_COLUMNS; i++) {
		free(r->col[i]);
	}
	cJSON_Delete(r->env);
	cJSON_Delete(r->config);
}

static char *
dup_col(sqlite3_stmt *s, int i)
{
	const unsigned char *t = sqlite3_column_text(s, i);

	return t ? strdup((const char *)t) : NULL;
}

static int
load_run(sqlite3 *db, int64_t id, struct run_row *r, char *err, size_t err_len)
{
	char sql[512];
	sqlite3_stmt *s;
	size_t i;
	int rc;
	bool v3 = has_column(db, "runs", "env");

	/* Older databases have only cpu, and no env: those read as absent. */
	snprintf(sql, sizeof(sql),
	         "SELECT host, %s, cores, %s, started_at, config, %s FROM runs WHERE id = ?",
	         v3 ? "IFNULL(cpu_model, cpu)" : "cpu",
	         v3 ? "kernel, compiler, build_type, tern_commit, tern_version"
	            : "NULL, NULL, NULL, NULL, tern_version",
	         v3 ? "env" : "NULL");
	memset(r, 0, sizeof(*r));
	if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) != SQLITE_OK) {
		snprintf(err, err_len, "database: %s", sqlite3_errmsg(db));
		return -1;
	}
	sqlite3_bind_int64(s, 1, id);
	rc = sqlite3_step(s);
	if (rc != SQLITE_ROW) {
		if (rc == SQLITE_DONE) {
			snprintf(err, err_len, "no run %lld in the database", (long long)id);
		} else {
			snprintf(err, err_len, "database: %s", sqlite3_errmsg(db));
		}
		sqlite3_finalize(s);
		return -1;
	}
	for (i = 0; i < NENV_COLUMNS; i++) {
		r->col[i] = dup_col(s, (int)i);
	}
	text_col(s, 8, r->started, sizeof(r->started));
	r->config = cJSON_Parse((const char *)sqlite3_column_text(s, 9));
	if (sqlite3_column_type(s, 10) != SQLITE_NULL) {
		r->env = cJSON_Parse((const char *)sqlite3_column_text(s, 10));
	}
	sqlite3_finalize(s);
	return 0;
}

static char *
json_text(const cJSON *v)
{
	if (v == NULL) {
		return NULL;
	}
	if (cJSON_IsString(v)) {
		return strdup(v->valuestring);
	}
	return cJSON_PrintUnformatted(v);
}

static int
add_diff(struct compare_report *r, size_t *cap, const char *name, char *a, char *b)
{
	struct compare_diff *d;

	if ((a == NULL && b == NULL) || (a != NULL && b != NULL && strcmp(a, b) == 0)) {
		free(a);
		free(b);
		return 0;
	}
	if (r->ndiffs == *cap) {
		size_t ncap = *cap ? *cap * 2 : 16;
		struct compare_diff *nd = realloc(r->diffs, ncap * sizeof(*nd));

		if (nd == NULL) {
			free(a);
			free(b);
			return -1;
		}
		r->diffs = nd;
		*cap = ncap;
	}
	d = &r->diffs[r->ndiffs++];
	snprintf(d->name, sizeof(d->name), "%s", name);
	d->a = a;
	d->b = b;
	return 0;
}

/* Each member of either object that differs, named prefix.member. */
static int
diff_objects(struct compare_report *r, size_t *cap, const char *prefix, const cJSON *a,
             const cJSON *b)
{
	const cJSON *it;
	char name[48];

	cJSON_ArrayForEach(it, a)
	{
		snprintf(name, sizeof(name), "%s.%s", prefix, it->string);
		if (add_diff(r, cap, name, json_text(it),
		             json_text(cJSON_GetObjectItemCaseSensitive(b, it->string))) != 0) {
			return -1;
		}
	}
	cJSON_ArrayForEach(it, b)
	{
		if (cJSON_GetObjectItemCaseSensitive(a, it->string) != NULL) {
			continue;
		}
		snprintf(name, sizeof(name), "%s.%s", prefix, it->string);
		if (add_diff(r, cap, name, NULL, json_text(it)) != 0) {
			return -1;
		}
	}
	return 0;
}

static int
diff_runs(struct compare_report *r, struct run_row *a, struct run_row *b)
{
	size_t cap = 0;
	size_t i;

	for (i = 0; i < NENV_COLUMNS; i++) {
		if (add_diff(r, &cap, env_columns[i], a->col[i], b->col[i]) != 0) {
			return -1;
		}
		a->col[i] = b->col[i] = NULL; /* taken by add_diff */
	}
	if (diff_objects(r, &cap, "env", a->env, b->env) != 0 ||
	    diff_objects(r, &cap, "config", a->config, b->config) != 0) {
		return -1;
	}
	return 0;
}

/* ---- the report ---- */

int
compare_resolve(sqlite3 *db, const char *spec, int64_t *id, char *err, size_t err_len)
{
	char *end;
	long long v = strtoll(spec, &end, 10);
	sqlite3_stmt *s;
	int skip;
	int rc;

	if (*spec != '\0' && *end == '\0' && v > 0) {
		*id = v;
		return 0;
	}
	if (strcmp(spec, "latest") == 0) {
		skip = 0;
	} else if (strcmp(spec, "previous") == 0) {
		skip = 1;
	} else {
		snprintf(err, err_len, "'%s': expected a run id, latest or previous", spec);
		return -1;
	}
	/* A run in progress or cut short is not one to judge a change by. */
	if (sqlite3_prepare_v2(db,
	                       "SELECT id FROM runs WHERE finished_at IS NOT NULL AND "
	                       "IFNULL(status, 'finished') IN ('finished', 'failed') "
	                       "ORDER BY id DESC LIMIT 1 OFFSET ?",
	                       -1, &s, NULL) != SQLITE_OK) {
		snprintf(err, err_len, "database: %s", sqlite3_errmsg(db));
		return -1;
	}
	sqlite3_bind_int(s, 1, skip);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		*id = sqlite3_column_int64(s, 0);
	} else {
		snprintf(err, err_len, "%s: the database has %s finished run", spec,
		         skip ? "no second" : "no");
	}
	sqlite3_finalize(s);
	return rc == SQLITE_ROW ? 0 : -1;
}

int
compare_runs(sqlite3 *db, int64_t a, int64_t b, const struct compare_opts *o,
             struct compare_report *out, char *err, size_t err_len)
{
	struct compare_opts opts = {COMPARE_THRESHOLD_PCT, COMPARE_ALPHA};
	struct run_row run_a;
	struct run_row run_b;
	struct rows ra = {0};
	struct rows rb = {0};
	int rc = -1;

	if (o != NULL && o->threshold_pct > 0) {
		opts.threshold_pct = o->threshold_pct;
	}
	if (o != NULL && o->alpha > 0) {
		opts.alpha = o->alpha;
	}
	memset(out, 0, sizeof(*out));
	memset(&run_a, 0, sizeof(run_a));
	memset(&run_b, 0, sizeof(run_b));
	out->run_a = a;
	out->run_b = b;
	out->threshold_pct = opts.threshold_pct;
	out->alpha = opts.alpha;
	if (load_run(db, a, &run_a, err, err_len) != 0 ||
	    load_run(db, b, &run_b, err, err_len) != 0 ||
	    load_rows(db, a, &ra, err, err_len) != 0 || load_rows(db, b, &rb, err, err_len) != 0) {
		goto done;
	}
	snprintf(out->started_a, sizeof(out->started_a), "%s", run_a.started);
	snprintf(out->started_b, sizeof(out->started_b), "%s", run_b.started);
	if (merge(&ra, &rb, &opts, out) != 0 || diff_runs(out, &run_a, &run_b) != 0) {
		snprintf(err, err_len, "out of memory");
		compare_report_free(out);
		goto done;
	}
	rc = 0;
done:
	run_row_free(&run_a);
	run_row_free(&run_b);
	free(ra.v);
	free(rb.v);
	return rc;
}

void
compare_report_free(struct compare_report *r)
{
	size_t i;

	for (i = 0; i < r->ndiffs; i++) {
		free(r->diffs[i].a);
		free(r->diffs[i].b);
	}
	free(r->diffs);
	free(r->cells);
	memset(r, 0, sizeof(*r));
}

const char *
compare_verdict_name(enum compare_verdict v)
{
	switch (v) {
	case COMPARE_REGRESSION:
		return "regression";
	case COMPARE_IMPROVEMENT:
		return "improvement";
	case COMPARE_FAILED:
		return "failed";
	case COMPARE_SAME:
		break;
	}
	return "same";
}

static void
size_text(int64_t n, char *buf, size_t len)
{
	if (n >= 1048576 && n % 1048576 == 0) {
		snprintf(buf, len, "%lldMiB", (long long)(n / 1048576));
	} else if (n >= 1024 && n % 1024 == 0) {
		snprintf(buf, len, "%lldKiB", (long long)(n / 1024));
	} else {
		snprintf(buf, len, "%lldB", (long long)n);
	}
}

/* "stream wifi tern batched 16 rec/msg", as the bench's progress line says it. */
static void
cell_label(const struct compare_cell *c, char *buf, size_t len)
{
	char param[64];
	char sz[24];

	if (strcmp(c->scenario, "pingpong") == 0) {
		snprintf(param, sizeof(param), "%lld in flight", (long long)c->concurrency);
	} else if (strcmp(c->scenario, "bytes") == 0) {
		size_text(c->payload_bytes, param, sizeof(param));
	} else if (strcmp(c->scenario, "fanin") == 0) {
		size_text(c->batch_bytes, sz, sizeof(sz));
		snprintf(param, sizeof(param), "%lld conns%s%s", (long long)c->concurrency,
		         c->batch_bytes > 0 ? " " : "", c->batch_bytes > 0 ? sz : "");
	} else if (c->rate > 0) {
		snprintf(param, sizeof(param), "%lld rec/msg @ %.0f rec/s",
		         (long long)c->records_per_msg, c->rate);
	} else {
		snprintf(param, sizeof(param), "%lld rec/msg", (long long)c->records_per_msg);
	}
	if (c->keys > 1) {
		size_t n = strlen(param);
		snprintf(param + n, sizeof(param) - n, " %lld keys", (long long)c->keys);
	}
	snprintf(buf, len, "%s %s %s %s %s", c->scenario, c->link, c->layer, c->mode, param);
}

static cJSON *
sample_json(const struct sample_stats *s, uint32_t failed)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddNumberToObject(o, "n", (double)s->n);
	cJSON_AddNumberToObject(o, "failed", failed);
	if (s->n > 0) {
		cJSON_AddNumberToObject(o, "mean", s->mean);
		cJSON_AddNumberToObject(o, "median", s->median);
		cJSON_AddNumberToObject(o, "sd", s->sd);
		cJSON_AddNumberToObject(o, "min", s->min);
		cJSON_AddNumberToObject(o, "max", s->max);
	}
	return o;
}

static void
add_number_or_null(cJSON *o, const char *name, double v)
{
	if (isfinite(v)) {
		cJSON_AddNumberToObject(o, name, v);
	} else {
		cJSON_AddNullToObject(o, name);
	}
}

static cJSON *
cell_json(const struct compare_cell *c)
{
	cJSON *o = cJSON_CreateObject();
	char label[160];

	cell_label(c, label, sizeof(label));
	cJSON_AddStringToObject(o, "label", label);
	cJSON_AddStringToObject(o, "scenario", c->scenario);
	cJSON_AddStringToObject(o, "link", c->link);
	cJSON_AddStringToObject(o, "layer", c->layer);
	cJSON_AddStringToObject(o, "mode", c->mode);
	cJSON_AddNumberToObject(o, "records_per_msg", (double)c->records_per_msg);
	cJSON_AddNumberToObject(o, "payload_bytes", (double)c->payload_bytes);
	cJSON_AddNumberToObject(o, "concurrency", (double)c->concurrency);
	if (c->batch_bytes >= 0) {
		cJSON_AddNumberToObject(o, "batch_bytes", (double)c->batch_bytes);
	} else {
		cJSON_AddNullToObject(o, "batch_bytes");
	}
	add_number_or_null(o, "rate", c->rate > 0 ? c->rate : NAN);
	cJSON_AddStringToObject(o, "metric", c->metric);
	cJSON_AddBoolToObject(o, "higher_is_better", c->higher_is_better);
	cJSON_AddItemToObject(o, "a", sample_json(&c->a, c->failed_a));
	cJSON_AddItemToObject(o, "b", sample_json(&c->b, c->failed_b));
	add_number_or_null(o, "change_pct", c->change_pct);
	add_number_or_null(o, "p", c->p);
	cJSON_AddBoolToObject(o, "tested", c->tested);
	cJSON_AddBoolToObject(o, "significant", c->significant);
	cJSON_AddStringToObject(o, "verdict", compare_verdict_name(c->verdict));
	return o;
}

cJSON *
compare_report_json(const struct compare_report *r)
{
	cJSON *o = cJSON_CreateObject();
	cJSON *a;
	cJSON *sum;
	size_t i;

	if (o == NULL) {
		return NULL;
	}
	cJSON_AddNumberToObject(o, "a", (double)r->run_a);
	cJSON_AddNumberToObject(o, "b", (double)r->run_b);
	cJSON_AddStringToObject(o, "started_a", r->started_a);
	cJSON_AddStringToObject(o, "started_b", r->started_b);
	cJSON_AddNumberToObject(o, "threshold_pct", r->threshold_pct);
	cJSON_AddNumberToObject(o, "alpha", r->alpha);
	a = cJSON_AddArrayToObject(o, "environment");
	for (i = 0; i < r->ndiffs; i++) {
		cJSON *d = cJSON_CreateObject();

		cJSON_AddStringToObject(d, "name", r->diffs[i].name);
		if (r->diffs[i].a != NULL) {
			cJSON_AddStringToObject(d, "a", r->diffs[i].a);
		} else {
			cJSON_AddNullToObject(d, "a");
		}
		if (r->diffs[i].b != NULL) {
			cJSON_AddStringToObject(d, "b", r->diffs[i].b);
		} else {
			cJSON_AddNullToObject(d, "b");
		}
		cJSON_AddItemToArray(a, d);
	}
	a = cJSON_AddArrayToObject(o, "cells");
	for (i = 0; i < r->ncells; i++) {
		cJSON_AddItemToArray(a, cell_json(&r->cells[i]));
	}
	sum = cJSON_AddObjectToObject(o, "summary");
	cJSON_AddNumberToObject(sum, "cells", (double)r->ncells);
	cJSON_AddNumberToObject(sum, "regressions", (double)r->regressions);
	cJSON_AddNumberToObject(sum, "improvements", (double)r->improvements);
	cJSON_AddNumberToObject(sum, "same",
	                        (double)(r->ncells - r->regressions - r->improvements));
	cJSON_AddNumberToObject(sum, "untested", (double)r->untested);
	cJSON_AddNumberToObject(sum, "only_a", (double)r->only_a);
	cJSON_AddNumberToObject(sum, "only_b", (double)r->only_b);
	return o;
}

/* 1234567 -> "1.23M"; microseconds as they are. */
static void
figure(double v, char *buf, size_t len)
{
	if (v >= 1e9) {
		snprintf(buf, len, "%.3gG", v / 1e9);
	} else if (v >= 1e6) {
		snprintf(buf, len, "%.3gM", v / 1e6);
	} else if (v >= 1e3) {
		snprintf(buf, len, "%.3gk", v / 1e3);
	} else {
		snprintf(buf, len, "%.3g", v);
	}
}

/* "3.76M ±2.1%" (mean and relative standard deviation), or "failed". */
static void
sample_text(const struct sample_stats *s, uint32_t failed, char *buf, size_t len)
{
	char f[24];

	if (s->n == 0) {
		snprintf(buf, len, "%s", failed ? "failed" : "-");
		return;
	}
	figure(s->mean, f, sizeof(f));
	if (s->n > 1 && s->mean != 0) {
		snprintf(buf, len, "%s ±%.1f%%", f, s->sd / s->mean * 100);
	} else {
		snprintf(buf, len, "%s", f);
	}
}

static const char *
metric_unit(const char *metric)
{
	return strcmp(metric, "bytes_per_s") == 0  ? "B/s"
	       : strcmp(metric, "lat_p99_us") == 0 ? "p99 us"
	                                           : "rec/s";
}

void
compare_report_table(FILE *out, const struct compare_report *r)
{
	size_t i;

	fprintf(out, "run %lld (%s) -> run %lld (%s): %zu cells in both\n\n", (long long)r->run_a,
	        r->started_a, (long long)r->run_b, r->started_b, r->ncells);
	if (r->ndiffs > 0) {
		fprintf(out, "%-22s %-32s %s\n", "environment", "before", "after");
		for (i = 0; i < r->ndiffs; i++) {
			fprintf(out, "%-22s %-32.200s %.200s\n", r->diffs[i].name,
			        r->diffs[i].a ? r->diffs[i].a : "(none)",
			        r->diffs[i].b ? r->diffs[i].b : "(none)");
		}
	} else {
		fprintf(out, "environment: the same\n");
	}
	fprintf(out, "\n%-48s %-7s %14s %14s %8s %7s %5s  %s\n", "cell", "figure", "before",
	        "after", "change", "p", "n", "verdict");
	for (i = 0; i < r->ncells; i++) {
		const struct compare_cell *c = &r->cells[i];
		char label[160];
		char sa[40];
		char sb[40];
		char change[16];
		char p[16];
		char n[16];

		cell_label(c, label, sizeof(label));
		sample_text(&c->a, c->failed_a, sa, sizeof(sa));
		sample_text(&c->b, c->failed_b, sb, sizeof(sb));
		if (isfinite(c->change_pct)) {
			snprintf(change, sizeof(change), "%+.1f%%", c->change_pct);
		} else {
			snprintf(change, sizeof(change), "-");
		}
		if (c->tested) {
			snprintf(p, sizeof(p), "%.3g", c->p);
		} else {
			snprintf(p, sizeof(p), "-");
		}
		snprintf(n, sizeof(n), "%zu/%zu", c->a.n, c->b.n);
		fprintf(out, "%-48s %-7s %14s %14s %8s %7s %5s  %s%s\n", label,
		        metric_unit(c->metric), sa, sb, change, p, n,
		        compare_verdict_name(c->verdict),
		        c->tested || c->verdict == COMPARE_FAILED ? "" : " (one sample: untested)");
	}
	fprintf(out,
	        "\n%zu regression%s, %zu improvement%s, %zu same (%zu untested); %zu cells only in "
	        "run %lld, %zu only in run %lld. A change is a verdict when p < %g and it is "
	        "beyond %g%%.\n",
	        r->regressions, r->regressions == 1 ? "" : "s", r->improvements,
	        r->improvements == 1 ? "" : "s", r->ncells - r->regressions - r->improvements,
	        r->untested, r->only_a, (long long)r->run_a, r->only_b, (long long)r->run_b,
	        r->alpha, r->threshold_pct);
}
