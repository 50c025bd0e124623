/*
 * finish.c - flushing standard output at exit, for tern and its helpers.
 */
#include "finish.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

int
finish_stdout(const char *cmd, int status)
{
	if (fflush(stdout) == EOF || ferror(stdout)) {
		fprintf(stderr, "tern%s%s: cannot write to standard output: %s\n",
		        cmd != NULL ? " " : "", cmd != NULL ? cmd : "",
		        strerror(errno ? errno : EIO));
		if (status == EXIT_OK) {
			status = EXIT_RUNTIME;
		}
	}
	return status;
}
