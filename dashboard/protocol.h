/*
 * protocol.h - the dashboard's websocket messages (docs/DASHBOARD.md).
 *
 * Pure translation between JSON text from a client and the store: no
 * sockets, so every message type is testable without a server.
 */
#ifndef TERN_DASHBOARD_PROTOCOL_H
#define TERN_DASHBOARD_PROTOCOL_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "live.h"
#include "store.h"

/* The largest message a client may send; a larger one closes the connection. */
#define DASH_MAX_REQUEST (64 * 1024)

/* {"type": "runs", "db": {...}, "runs": [...]}: sent on connect and on request. */
cJSON *dash_protocol_runs(struct dash_store *st);

/*
 * The reply to one client message of len bytes (not NUL-terminated): a
 * "runs", "run", "trend", "compare", "live" or "live_history" message, or
 * {"type": "error", "error": "..."} for a message that does not parse or
 * asks for something that does not exist. live is the Live view's store, or
 * NULL when the dashboard watches no network (then "live" and
 * "live_history" are errors); now is the time for its messages. A "req"
 * member of the request is copied into the reply. NULL only if out of
 * memory. The caller owns the result.
 */
cJSON *dash_protocol_reply(struct dash_store *st, const struct live *live,
                           const struct live_time *now, const char *msg, size_t len);

/* The JSON text of a message, without whitespace; the caller frees it with free(). */
char *dash_protocol_print(const cJSON *msg, size_t *len);

#endif
