/*
 * pub.c - the public publisher API over the session's local sources.
 */
#include <stdlib.h>

#include "error.h"
#include "keyexpr.h"
#include "node.h"

struct tern_pub {
	struct session *session;
	struct src *src;
};

int
tern_pub_open(tern_pub **out, tern_node *node, const char *key, int reliability)
{
	struct tern_pub *pub;
	int rc;

	if (out == NULL || node == NULL) {
		return tern__error(TERN_EINVAL, "tern_pub_open: no node");
	}
	if ((rc = tern_key_check(key)) != 0) {
		return rc;
	}
	pub = calloc(1, sizeof(*pub));
	if (pub == NULL) {
		return TERN_ENOMEM;
	}
	pub->session = tern__node_session(node);
	if ((rc = session_pub_open(pub->session, key, reliability, &pub->src)) != 0) {
		free(pub);
		return rc;
	}
	*out = pub;
	return 0;
}

int
tern_publish(tern_pub *pub, const void *data, size_t len)
{
	return session_publish(pub->session, pub->src, data, len);
}

int
tern_pub_flush(tern_pub *pub, int timeout_ms)
{
	return session_pub_flush(pub->session, pub->src, timeout_ms);
}

int
tern_pub_matched(tern_pub *pub)
{
	return session_pub_matched(pub->src);
}

int
tern_pub_close(tern_pub *pub)
{
	int rc;

	if (pub == NULL) {
		return 0;
	}
	rc = session_pub_close(pub->session, pub->src);
	free(pub);
	return rc;
}

void
tern_pub_stats(tern_pub *pub, tern_stats *st)
{
	session_pub_stats(pub->src, st);
}
