/*
 * child.h - a test's helper process, talked to over two pipes (include
 * after cmocka.h). Fork it before the test opens any node: the child has
 * only the forking thread, and a node's threads would not follow it.
 */
#ifndef TERN_TEST_CHILD_H
#define TERN_TEST_CHILD_H

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

struct child {
	pid_t pid;
	int to, from; /* the parent's ends: write to it, read from it */
};

/* Start fn(in, out) in a child process; it must end with _exit. */
static inline void
child_start(struct child *c, void (*fn)(int in, int out))
{
	int to[2], from[2];

	assert_int_equal(pipe(to), 0);
	assert_int_equal(pipe(from), 0);
	if ((c->pid = fork()) == 0) {
		close(to[1]);
		close(from[0]);
		fn(to[0], from[1]);
		_exit(1);
	}
	assert_true(c->pid > 0);
	close(to[0]);
	close(from[1]);
	c->to = to[1];
	c->from = from[0];
}

/* Close its input (its cue to end) and check that it ended well. */
static inline void
child_end(struct child *c)
{
	int status;

	close(c->to);
	assert_int_equal(waitpid(c->pid, &status, 0), c->pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(c->from);
}

#endif
