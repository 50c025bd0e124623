/*
 * store.h - the benchmark's SQLite database: schema, migration, and the
 * writes of one run (the run row first, each result as its cell finishes,
 * the end of the run last), so a dashboard sees a run fill in live.
 *
 * Schema version (PRAGMA user_version) 3: the SPEC's minimum schema plus
 * runs.status, results.failed, results.error, results.cpu_s_per_gb and
 * results.spread (version 2), and the run's environment (runs.cpu_model,
 * kernel, compiler, build_type, tern_commit, env, pid), results.repeat and
 * results.rate (version 3). An older database is migrated in place with
 * ALTER TABLE ADD COLUMN.
 */
#ifndef BENCH_STORE_H
#define BENCH_STORE_H

#include "scenario.h"

#include <stdint.h>

#define STORE_SCHEMA_VERSION 4

typedef struct store store;

struct run_info {
	const char *tern_version;
	const char *host;
	const char *cpu;
	int cores;
	const char *note;
	const char *config_json;
	/* the environment (runenv.h); NULL leaves a column empty */
	const char *cpu_model;
	const char *kernel;
	const char *compiler;
	const char *build_type;
	const char *tern_commit;
	const char *env_json;
	long pid;
};

/* Open (creating or migrating) the database at path. 0 or -1 with err. */
int store_open(store **out, const char *path, char *err, size_t err_len);
void store_close(store *st);

/* The schema version of the open database. */
int store_schema_version(store *st);

int store_run_begin(store *st, const struct run_info *ri, int64_t *run_id, char *err,
                    size_t err_len);
int store_link(store *st, int64_t run_id, const struct bench_link *l, char *err, size_t err_len);
int store_result(store *st, int64_t run_id, const struct cell *c, const struct cell_result *r,
                 char *err, size_t err_len);
/*
 * Marks `interrupted` each run still `running` whose bench is gone: its host
 * is this machine's (gethostname) and no process has its pid (a bench killed
 * with SIGKILL, or a machine that rebooted, never ended its run). store_open
 * does it, best effort. Returns the number of runs marked, or -1 with err.
 * A pid reused since by another process keeps its run `running`.
 */
int store_mark_interrupted(store *st, char *err, size_t err_len);

/* status: "finished", "failed" or "interrupted"; sets finished_at. */
int store_run_end(store *st, int64_t run_id, const char *status, char *err, size_t err_len);

/* The database handle, for the modules that read or copy whole runs
 * (exchange.c); valid until store_close. */
struct sqlite3 *store_handle(store *st);

/* The time now as ISO 8601 UTC, e.g. 2026-12-02T10:11:12Z. */
void store_now_iso(char *buf, size_t len);

#endif
