/*
 * dashboard.h - `tern dashboard`: serves the benchmark history to a browser.
 *
 * The dashboard reads the SQLite database that `tern bench` writes (read
 * only, never holding a read transaction for long), serves the web UI from a
 * folder over HTTP and speaks JSON over a websocket at /ws (docs/DASHBOARD.md).
 */
#ifndef TERN_DASHBOARD_H
#define TERN_DASHBOARD_H

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Runs `tern dashboard`. argv[0] is "dashboard"; the options are
 * --db FILE (default tern-bench.db), --listen HOST:PORT (default
 * 127.0.0.1:8080; port 0 picks a free port), --web DIR (default: the web/
 * folder of the source tree) and --help. Serves until SIGINT or SIGTERM.
 * Returns the process exit status: 0 after a clean stop, 2 for a bad command
 * line, 1 when the server cannot start.
 */
int dashboard_main(int argc, char **argv);

#ifdef __cplusplus
}
#endif

#endif
