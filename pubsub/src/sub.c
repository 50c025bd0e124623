/*
 * sub.c - the public subscriber API over the session's sinks.
 */
#include <stdlib.h>

#include "error.h"
#include "keyexpr.h"
#include "node.h"

struct tern_sub {
	struct session *session;
	struct sink *sink;
};

int
tern_sub_open(tern_sub **out, tern_node *node, const char *keyexpr, tern_sub_fn fn, void *arg)
{
	struct tern_sub *sub;
	int rc;

	if (out == NULL || node == NULL) {
		return tern__error(TERN_EINVAL, "tern_sub_open: no node");
	}
	if ((rc = tern_keyexpr_check(keyexpr)) != 0) {
		return rc;
	}
	sub = calloc(1, sizeof(*sub));
	if (sub == NULL) {
		return TERN_ENOMEM;
	}
	sub->session = tern__node_session(node);
	if ((rc = session_sub_open(sub->session, keyexpr, fn, arg, &sub->sink)) != 0) {
		free(sub);
		return rc;
	}
	*out = sub;
	return 0;
}

int
tern_sub_recv(tern_sub *sub, tern_msg *msg, int timeout_ms)
{
	return session_sub_recv(sub->sink, msg, timeout_ms);
}

void
tern_sub_close(tern_sub *sub)
{
	if (sub == NULL) {
		return;
	}
	session_sub_close(sub->session, sub->sink);
	free(sub);
}

int
tern_sub_status(tern_sub *sub)
{
	return session_sub_status(sub->sink);
}

void
tern_sub_stats(tern_sub *sub, tern_stats *st)
{
	session_sub_stats(sub->sink, st);
}
