/*
 * observer.c - a tern node that subscribes to every node's telemetry.
 *
 * The node is a plain peer: it forwards nothing and, with telemetry off,
 * adds no report of its own to what it watches. Its id says what it is, so
 * the nodes it connects to log and report it as the dashboard.
 */
#include "observer.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <tern/tern.h>

#define WATCHED "@tern/**"

struct observer {
	tern_node *node;
	tern_sub *sub;
	struct observer_ops ops;
	void *arg;
	char id[128];
};

static void
on_message(void *arg, const tern_msg *msg)
{
	struct observer *ob = arg;
	ob->ops.report(ob->arg, msg->key, msg->data, msg->len);
}

int
observer_open(struct observer **out, const char *const *endpoints, size_t n, char *err,
              size_t errlen)
{
	struct observer *ob = calloc(1, sizeof(*ob));
	if (ob == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	char host[64] = "host";
	if (gethostname(host, sizeof(host)) != 0) {
		snprintf(host, sizeof(host), "host");
	}
	host[sizeof(host) - 1] = '\0';
	snprintf(ob->id, sizeof(ob->id), "dashboard-%s-%ld", host, (long)getpid());

	tern_config cfg;
	tern_config_init(&cfg);
	cfg.id = ob->id;
	cfg.telemetry_interval_ms = 0;
	int rc = tern_node_open(&ob->node, &cfg);
	if (rc != 0) {
		snprintf(err, errlen, "cannot open a tern node to watch the network: %s",
		         tern_last_error());
		free(ob);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		if (tern_node_connect(ob->node, endpoints[i]) != 0) {
			snprintf(err, errlen, "--connect %s: %s", endpoints[i], tern_last_error());
			observer_close(ob);
			return OBSERVER_EENDPOINT;
		}
	}
	*out = ob;
	return 0;
}

const char *
observer_id(const struct observer *ob)
{
	return ob->id;
}

int
observer_watch(struct observer *ob, const struct observer_ops *ops, void *arg, char *err,
               size_t errlen)
{
	ob->ops = *ops;
	ob->arg = arg;
	if (tern_sub_open(&ob->sub, ob->node, WATCHED, on_message, ob) != 0) {
		snprintf(err, errlen, "cannot subscribe to %s: %s", WATCHED, tern_last_error());
		return -1;
	}
	return 0;
}

void
observer_close(struct observer *ob)
{
	if (ob == NULL) {
		return;
	}
	tern_sub_close(ob->sub);
	tern_node_close(ob->node);
	free(ob);
}
