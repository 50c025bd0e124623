/*
 * main_dashboard.c - tern-dashboard, the helper executable behind
 * `tern dashboard`.
 *
 * tern execs it (helper.h) so that only the dashboard loads libwebsockets,
 * OpenSSL and SQLite, not every tern process. dashboard_main() gets the argv
 * that `tern dashboard` has always passed it: argv[0] is "dashboard", then
 * the user's arguments.
 */
#include <stddef.h>

#include "dashboard.h"
#include "finish.h"

int
main(int argc, char **argv)
{
	char *none[] = {"dashboard", NULL};

	if (argc < 1) {
		argc = 1;
		argv = none;
	}
	argv[0] = "dashboard";
	return finish_stdout("dashboard", dashboard_main(argc, argv));
}
