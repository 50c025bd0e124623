/*
 * finish.h - the last step of every tern executable: flush standard output
 * and count data that could not be written (a full disk, a closed pipe) as a
 * failure, not a success with nothing to show for it. tern and its helpers
 * tern-bench and tern-dashboard share it, so `tern bench >/dev/full` fails
 * the same way whichever executable ran it.
 */
#ifndef TERN_NODE_FINISH_H
#define TERN_NODE_FINISH_H

/*
 * Flush stdout and return status, or EXIT_RUNTIME when stdout could not be
 * written and status was EXIT_OK, after one line on stderr:
 * "tern CMD: cannot write to standard output: REASON" ("tern: ..." when cmd
 * is NULL).
 */
int finish_stdout(const char *cmd, int status);

#endif
