/*
 * observer.h - the dashboard's own tern node, which watches a network.
 *
 * `tern dashboard --connect EP` opens a node through libtern (tern.h) that
 * connects to each EP, publishes nothing, sends no telemetry of its own
 * (telemetry.interval_ms 0) and subscribes to every key under @tern: every
 * node's report (docs/CONFIG.md, "Telemetry") reaches the function the
 * caller hands to observer_watch(). It knows nothing of the server: the caller decides what
 * to do with a report.
 */
#ifndef TERN_DASHBOARD_OBSERVER_H
#define TERN_DASHBOARD_OBSERVER_H

#include <stddef.h>

struct observer_ops {
	/*
	 * One message under @tern: its key and payload (len bytes, not
	 * NUL-terminated), valid only during the call. Runs on tern's I/O
	 * thread: it must not block (take a short lock at most) and must not
	 * close the observer.
	 */
	void (*report)(void *arg, const char *key, const void *data, size_t len);
};

struct observer;

/* observer_open's failure when an endpoint does not parse (a bad command line). */
#define OBSERVER_EENDPOINT (-2)

/*
 * Opens the node and starts connecting to endpoints[0..n-1] (in the
 * background, again whenever a connection is lost). On failure returns
 * OBSERVER_EENDPOINT for an endpoint that does not parse, -1 otherwise, and
 * writes a sentence into err that names the endpoint.
 */
int observer_open(struct observer **out, const char *const *endpoints, size_t n, char *err,
                  size_t errlen);

/* The node's id ("dashboard-HOST-PID"), as its peers see it. */
const char *observer_id(const struct observer *ob);

/*
 * Subscribes to every key under @tern; from then on ops->report(arg, ...)
 * is called for each message until observer_close(). Returns 0, or a negative value with a
 * sentence in err.
 */
int observer_watch(struct observer *ob, const struct observer_ops *ops, void *arg, char *err,
                   size_t errlen);

/* Unsubscribes and closes the node; no report is delivered once it returns. Accepts NULL. */
void observer_close(struct observer *ob);

#endif
