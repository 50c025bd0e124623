/*
 * exchange.c - `tern bench export` and `tern bench import`: a run, its links
 * and its results as one JSON file, so runs from several machines can meet
 * in one database (and one dashboard).
 *
 * The file holds every column of the run's rows except the ids, named as in
 * the schema, so a run keeps its host and environment. Import takes the
 * columns the database knows and names the ones it does not; it writes the
 * whole run in one transaction or nothing.
 *
 * {"format": "tern-bench-run", "version": 1, "schema_version": 3,
 *  "run": {...}, "links": [{...}], "results": [{...}]}
 */
#include "commands.h"
#include "compare.h"
#include "store.h"

#include <cjson/cJSON.h>
#include <getopt.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FORMAT_NAME    "tern-bench-run"
#define FORMAT_VERSION 1
/* A run file larger than this is not one tern bench wrote (a full run is ~1 MB). */
#define IMPORT_MAX_BYTES (256L * 1024 * 1024)

/* ---- export ---- */

/* The rows of one query as an array of objects; skip names a column left out. */
static cJSON *
rows_json(sqlite3 *db, const char *sql, int64_t run, const char *skip1, const char *skip2,
          char *err, size_t err_len)
{
	cJSON *a = cJSON_CreateArray();
	sqlite3_stmt *s;
	int rc;

	if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) != SQLITE_OK) {
		snprintf(err, err_len, "database: %s", sqlite3_errmsg(db));
		cJSON_Delete(a);
		return NULL;
	}
	sqlite3_bind_int64(s, 1, run);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		cJSON *o = cJSON_CreateObject();
		int i;

		for (i = 0; i < sqlite3_column_count(s); i++) {
			const char *name = sqlite3_column_name(s, i);

			if (strcmp(name, skip1) == 0 || strcmp(name, skip2) == 0) {
				continue;
			}
			switch (sqlite3_column_type(s, i)) {
			case SQLITE_INTEGER:
				cJSON_AddNumberToObject(o, name,
				                        (double)sqlite3_column_int64(s, i));
				break;
			case SQLITE_FLOAT:
				cJSON_AddNumberToObject(o, name, sqlite3_column_double(s, i));
				break;
			case SQLITE_NULL:
				cJSON_AddNullToObject(o, name);
				break;
			default:
				cJSON_AddStringToObject(o, name,
				                        (const char *)sqlite3_column_text(s, i));
				break;
			}
		}
		cJSON_AddItemToArray(a, o);
	}
	sqlite3_finalize(s);
	if (rc != SQLITE_DONE) {
		snprintf(err, err_len, "database: %s", sqlite3_errmsg(db));
		cJSON_Delete(a);
		return NULL;
	}
	return a;
}

static cJSON *
export_run(sqlite3 *db, int64_t run, char *err, size_t err_len)
{
	cJSON *o = cJSON_CreateObject();
	cJSON *runs =
	    rows_json(db, "SELECT * FROM runs WHERE id = ?", run, "id", "id", err, err_len);
	cJSON *links = NULL;
	cJSON *results = NULL;

	if (runs != NULL && cJSON_GetArraySize(runs) == 0) {
		snprintf(err, err_len, "no run %lld in the database", (long long)run);
	} else if (runs != NULL) {
		links = rows_json(db, "SELECT * FROM links WHERE run_id = ? ORDER BY rowid", run,
		                  "run_id", "run_id", err, err_len);
		results = rows_json(db, "SELECT * FROM results WHERE run_id = ? ORDER BY id", run,
		                    "id", "run_id", err, err_len);
	}
	if (links == NULL || results == NULL) {
		cJSON_Delete(o);
		cJSON_Delete(runs);
		cJSON_Delete(links);
		cJSON_Delete(results);
		return NULL;
	}
	cJSON_AddStringToObject(o, "format", FORMAT_NAME);
	cJSON_AddNumberToObject(o, "version", FORMAT_VERSION);
	cJSON_AddNumberToObject(o, "schema_version", STORE_SCHEMA_VERSION);
	cJSON_AddItemToObject(o, "run", cJSON_DetachItemFromArray(runs, 0));
	cJSON_Delete(runs);
	cJSON_AddItemToObject(o, "links", links);
	cJSON_AddItemToObject(o, "results", results);
	return o;
}

static int
write_file(const char *path, const char *text, char *err, size_t err_len)
{
	FILE *f = strcmp(path, "-") == 0 ? stdout : fopen(path, "w");
	int rc = 0;

	if (f == NULL) {
		snprintf(err, err_len, "%s: cannot write the file", path);
		return -1;
	}
	if (fputs(text, f) < 0 || fputc('\n', f) < 0) {
		rc = -1;
	}
	if (f != stdout && fclose(f) != 0) {
		rc = -1;
	}
	if (rc != 0) {
		snprintf(err, err_len, "%s: write failed", path);
	}
	return rc;
}

static const char export_usage[] =
    "usage: tern bench export RUN --out FILE.json [--db FILE]\n"
    "Writes run RUN (an id, latest or previous) with its links, results and\n"
    "environment as JSON (--out - for stdout), for tern bench import.\n";

enum { OPT_DB = 256, OPT_OUT, OPT_HELP };

static const struct option xopts[] = {
    {"db", required_argument, NULL, OPT_DB},
    {"out", required_argument, NULL, OPT_OUT},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

/* Parse --db, --out and --help; the one positional argument in *arg. */
static int
parse(const char *cmd, const char *usage, int argc, char **argv, const char **db, const char **out,
      const char **arg)
{
	int c;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "", xopts, NULL)) != -1) {
		switch (c) {
		case OPT_DB:
			*db = optarg;
			break;
		case OPT_OUT:
			if (out == NULL) {
				goto unknown;
			}
			*out = optarg;
			break;
		case OPT_HELP:
			fputs(usage, stdout);
			return 1;
		default:
		unknown:
			fprintf(stderr, "tern bench %s: unknown option or missing value: %s\n", cmd,
			        argv[optind - 1]);
			return -1;
		}
	}
	if (argc - optind != 1) {
		fprintf(stderr, "tern bench %s: expected one %s (see --help)\n", cmd,
		        out ? "run" : "file");
		return -1;
	}
	*arg = argv[optind];
	return 0;
}

int
bench_export_main(int argc, char **argv)
{
	const char *path = "tern-bench.db";
	const char *out = NULL;
	const char *spec;
	char err[300];
	sqlite3 *db = NULL;
	int64_t run;
	cJSON *j = NULL;
	char *text = NULL;
	int rc = parse("export", export_usage, argc, argv, &path, &out, &spec);

	if (rc != 0) {
		return rc > 0 ? 0 : BENCH_EXIT_USAGE;
	}
	if (out == NULL) {
		fprintf(stderr, "tern bench export: --out FILE.json is needed (- for stdout)\n");
		return BENCH_EXIT_USAGE;
	}
	rc = BENCH_EXIT_FAILED;
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
		snprintf(err, sizeof(err), "%s: %s", path, db ? sqlite3_errmsg(db) : "cannot open");
	} else if (sqlite3_busy_timeout(db, 5000) == SQLITE_OK &&
	           compare_resolve(db, spec, &run, err, sizeof(err)) == 0 &&
	           (j = export_run(db, run, err, sizeof(err))) != NULL) {
		text = cJSON_Print(j);
		if (text == NULL) {
			snprintf(err, sizeof(err), "out of memory");
		} else if (write_file(out, text, err, sizeof(err)) == 0) {
			rc = 0;
		}
	}
	if (rc != 0) {
		fprintf(stderr, "tern bench export: %s\n", err);
	} else if (strcmp(out, "-") != 0) {
		fprintf(stderr, "tern bench export: run %lld written to %s\n", (long long)run, out);
	}
	cJSON_free(text);
	cJSON_Delete(j);
	sqlite3_close(db);
	return rc;
}

/* ---- import ---- */

static bool
table_has(sqlite3 *db, const char *table, const char *column)
{
	sqlite3_stmt *s;
	bool found = false;

	if (sqlite3_prepare_v2(db, "SELECT 1 FROM pragma_table_info(?) WHERE name = ?", -1, &s,
	                       NULL) == SQLITE_OK) {
		sqlite3_bind_text(s, 1, table, -1, SQLITE_STATIC);
		sqlite3_bind_text(s, 2, column, -1, SQLITE_STATIC);
		found = sqlite3_step(s) == SQLITE_ROW;
		sqlite3_finalize(s);
	}
	return found;
}

static int
bind_value(sqlite3_stmt *s, int i, const cJSON *v)
{
	if (cJSON_IsNull(v)) {
		return sqlite3_bind_null(s, i);
	}
	if (cJSON_IsString(v)) {
		return sqlite3_bind_text(s, i, v->valuestring, -1, SQLITE_TRANSIENT);
	}
	if (cJSON_IsBool(v)) {
		return sqlite3_bind_int(s, i, cJSON_IsTrue(v));
	}
	if (cJSON_IsNumber(v)) {
		/* Whole numbers go back as integers, so a column keeps its type. */
		if (v->valuedouble == (double)(sqlite3_int64)v->valuedouble &&
		    v->valuedouble > -9e15 && v->valuedouble < 9e15) {
			return sqlite3_bind_int64(s, i, (sqlite3_int64)v->valuedouble);
		}
		return sqlite3_bind_double(s, i, v->valuedouble);
	}
	return SQLITE_MISMATCH;
}

/* Insert one object as a row of table; run_id (when > 0) fills run_id. The
 * members the table lacks are counted in *unknown. */
static int
insert_row(sqlite3 *db, const char *table, const cJSON *row, int64_t run_id, int *unknown,
           char *err, size_t err_len)
{
	char cols[4096] = "";
	char marks[1024] = "";
	char sql[5200];
	const cJSON *it;
	sqlite3_stmt *s;
	size_t cl = 0;
	size_t ml = 0;
	int n = 0;
	int rc;

	if (!cJSON_IsObject(row)) {
		snprintf(err, err_len, "%s: a row is not an object", table);
		return -1;
	}
	if (run_id > 0) {
		cl += (size_t)snprintf(cols + cl, sizeof(cols) - cl, "run_id");
		ml += (size_t)snprintf(marks + ml, sizeof(marks) - ml, "?");
		n++;
	}
	cJSON_ArrayForEach(it, row)
	{
		if (strcmp(it->string, "id") == 0 || strcmp(it->string, "run_id") == 0 ||
		    !table_has(db, table, it->string)) {
			*unknown +=
			    strcmp(it->string, "id") != 0 && strcmp(it->string, "run_id") != 0;
			continue;
		}
		if (cl + strlen(it->string) + 4 >= sizeof(cols) || ml + 3 >= sizeof(marks)) {
			snprintf(err, err_len, "%s: too many columns", table);
			return -1;
		}
		cl += (size_t)snprintf(cols + cl, sizeof(cols) - cl, "%s\"%s\"", n ? "," : "",
		                       it->string);
		ml += (size_t)snprintf(marks + ml, sizeof(marks) - ml, "%s?", n ? "," : "");
		n++;
	}
	snprintf(sql, sizeof(sql), "INSERT INTO %s (%s) VALUES (%s)", table, cols, marks);
	if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) != SQLITE_OK) {
		snprintf(err, err_len, "database: %s", sqlite3_errmsg(db));
		return -1;
	}
	n = 1;
	if (run_id > 0) {
		sqlite3_bind_int64(s, n++, run_id);
	}
	cJSON_ArrayForEach(it, row)
	{
		if (strcmp(it->string, "id") == 0 || strcmp(it->string, "run_id") == 0 ||
		    !table_has(db, table, it->string)) {
			continue;
		}
		if (bind_value(s, n++, it) != SQLITE_OK) {
			snprintf(err, err_len, "%s.%s: not a number, string or null", table,
			         it->string);
			sqlite3_finalize(s);
			return -1;
		}
	}
	rc = sqlite3_step(s);
	sqlite3_finalize(s);
	if (rc != SQLITE_DONE) {
		snprintf(err, err_len, "%s: %s", table, sqlite3_errmsg(db));
		return -1;
	}
	return 0;
}

static int
import_json(sqlite3 *db, const cJSON *j, int64_t *run_id, int *unknown, char *err, size_t err_len)
{
	const cJSON *format = cJSON_GetObjectItemCaseSensitive(j, "format");
	const cJSON *version = cJSON_GetObjectItemCaseSensitive(j, "version");
	const cJSON *run = cJSON_GetObjectItemCaseSensitive(j, "run");
	const cJSON *links = cJSON_GetObjectItemCaseSensitive(j, "links");
	const cJSON *results = cJSON_GetObjectItemCaseSensitive(j, "results");
	const cJSON *it;

	if (!cJSON_IsString(format) || strcmp(format->valuestring, FORMAT_NAME) != 0 ||
	    !cJSON_IsNumber(version)) {
		snprintf(err, err_len, "not a run written by tern bench export");
		return -1;
	}
	if (version->valuedouble > FORMAT_VERSION) {
		snprintf(err, err_len, "file format version %g is newer than this tern bench (%d)",
		         version->valuedouble, FORMAT_VERSION);
		return -1;
	}
	if (!cJSON_IsObject(run) || !cJSON_IsArray(links) || !cJSON_IsArray(results)) {
		snprintf(err, err_len, "the file lacks its run, links or results");
		return -1;
	}
	if (insert_row(db, "runs", run, 0, unknown, err, err_len) != 0) {
		return -1;
	}
	*run_id = sqlite3_last_insert_rowid(db);
	cJSON_ArrayForEach(it, links)
	{
		if (insert_row(db, "links", it, *run_id, unknown, err, err_len) != 0) {
			return -1;
		}
	}
	cJSON_ArrayForEach(it, results)
	{
		if (insert_row(db, "results", it, *run_id, unknown, err, err_len) != 0) {
			return -1;
		}
	}
	return 0;
}

static char *
read_file(const char *path, char *err, size_t err_len)
{
	FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
	char *buf = NULL;
	size_t len = 0;
	size_t cap = 0;

	if (f == NULL) {
		snprintf(err, err_len, "%s: cannot read the file", path);
		return NULL;
	}
	for (;;) {
		size_t n;

		if (cap - len < 65536) {
			char *nb;

			cap = cap ? cap * 2 : 1 << 20;
			if (cap > (size_t)IMPORT_MAX_BYTES + 1 ||
			    (nb = realloc(buf, cap + 1)) == NULL) {
				snprintf(err, err_len, "%s: larger than %ld MiB: not a run file",
				         path, IMPORT_MAX_BYTES >> 20);
				free(buf);
				buf = NULL;
				break;
			}
			buf = nb;
		}
		n = fread(buf + len, 1, cap - len, f);
		len += n;
		if (n == 0) {
			buf[len] = '\0';
			break;
		}
	}
	if (f != stdin) {
		fclose(f);
	}
	return buf;
}

static const char import_usage[] =
    "usage: tern bench import FILE.json [--db FILE]\n"
    "Adds a run written by tern bench export (- reads stdin) to the database as a\n"
    "new run, keeping its host and environment.\n";

int
bench_import_main(int argc, char **argv)
{
	const char *path = "tern-bench.db";
	const char *file;
	char err[300] = "";
	store *st = NULL;
	cJSON *j = NULL;
	char *text;
	int64_t run = 0;
	int unknown = 0;
	int rc = parse("import", import_usage, argc, argv, &path, NULL, &file);
	sqlite3 *db;

	if (rc != 0) {
		return rc > 0 ? 0 : BENCH_EXIT_USAGE;
	}
	if ((text = read_file(file, err, sizeof(err))) == NULL) {
		fprintf(stderr, "tern bench import: %s\n", err);
		return BENCH_EXIT_FAILED;
	}
	j = cJSON_Parse(text);
	free(text);
	if (j == NULL) {
		fprintf(stderr, "tern bench import: %s: not JSON\n", file);
		return BENCH_EXIT_FAILED;
	}
	if (store_open(&st, path, err, sizeof(err)) != 0) {
		fprintf(stderr, "tern bench import: %s\n", err);
		cJSON_Delete(j);
		return BENCH_EXIT_FAILED;
	}
	db = store_handle(st);
	rc = BENCH_EXIT_FAILED;
	if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) {
		snprintf(err, sizeof(err), "database: %s", sqlite3_errmsg(db));
	} else if (import_json(db, j, &run, &unknown, err, sizeof(err)) != 0) {
		sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
	} else if (sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
		snprintf(err, sizeof(err), "database: %s", sqlite3_errmsg(db));
	} else {
		rc = 0;
	}
	if (rc != 0) {
		fprintf(stderr, "tern bench import: %s: %s (nothing imported)\n", file, err);
	} else {
		fprintf(stderr, "tern bench import: %s is run %lld in %s%s\n", file, (long long)run,
		        path,
		        unknown ? " (values of columns this database lacks were left out)" : "");
	}
	store_close(st);
	cJSON_Delete(j);
	return rc;
}
