/*
 * bench_db_check.h - small helpers for the bench tests: a scratch database
 * path and one-number queries against it.
 */
#ifndef BENCH_DB_CHECK_H
#define BENCH_DB_CHECK_H

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* Fill path with a fresh name for a database (the file does not exist). */
static void
scratch_db(char *path, size_t len, const char *tag)
{
	int fd;

	snprintf(path, len, "/tmp/tern-bench-%s-XXXXXX", tag);
	fd = mkstemp(path);
	if (fd >= 0) {
		close(fd);
		unlink(path);
	}
}

static void
remove_db(const char *path)
{
	char p[300];

	unlink(path);
	snprintf(p, sizeof(p), "%s-wal", path);
	unlink(p);
	snprintf(p, sizeof(p), "%s-shm", path);
	unlink(p);
}

/* The first column of the first row as a double; -1e300 when there is none. */
static double
db_number(const char *path, const char *sql)
{
	sqlite3 *db;
	sqlite3_stmt *s;
	double v = -1e300;

	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
		sqlite3_close(db);
		return v;
	}
	sqlite3_busy_timeout(db, 5000);
	if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK) {
		if (sqlite3_step(s) == SQLITE_ROW && sqlite3_column_type(s, 0) != SQLITE_NULL) {
			v = sqlite3_column_double(s, 0);
		}
		sqlite3_finalize(s);
	}
	sqlite3_close(db);
	return v;
}

#endif
