/*
 * server.h - the dashboard's HTTP and websocket server on libwebsockets.
 *
 * One libwebsockets context served by its own thread. Everything that touches
 * a connection, the store or the Live view's state runs on that thread: the
 * websocket and HTTP callbacks, a timer that polls the store for changes and
 * pushes them to every client, and, with --connect, a timer that pushes the
 * Live view each second. Other threads only start and stop the server and,
 * with dash_server_post(), hand it telemetry reports.
 */
#ifndef TERN_DASHBOARD_SERVER_H
#define TERN_DASHBOARD_SERVER_H

#include <stdbool.h>
#include <stddef.h>

struct dash_server_config {
	const char *host;       /* an IP address to bind ("127.0.0.1", "::1", "0.0.0.0") */
	int port;               /* 0 picks a free port */
	const char *web_dir;    /* served at / */
	const char *vendor_dir; /* served at /vendor/: the chart library's dist folder */
	const char *db_path;    /* the benchmark database, opened read-only */
	int poll_ms;            /* how often the database is checked for changes */
	/* The Live view, on when live is set (tern dashboard --connect) */
	bool live;
	const char *observer;       /* the id of the dashboard's own tern node */
	const char *const *connect; /* the endpoints it connects to */
	size_t nconnect;
};

struct dash_server;

/*
 * Binds, opens the store and starts the service thread. On failure returns
 * a negative value and writes why into err. On success *out owns the server.
 */
int dash_server_start(struct dash_server **out, const struct dash_server_config *cfg, char *err,
                      size_t errlen);

/* The port the server listens on (the one picked when cfg->port was 0). */
int dash_server_port(const struct dash_server *srv);

/* A sentence about the database's state, for the start-up line. */
const char *dash_server_db_state(const struct dash_server *srv);

/*
 * Hands the server one message under @tern (its key, and len bytes of
 * payload); it is copied. Thread safe, never blocks for long: this
 * is what tern's I/O thread calls (observer_ops.report). Reports that pile
 * up beyond a few MiB while the server thread is busy are dropped. Ignored
 * when the Live view is off.
 */
void dash_server_post(void *srv, const char *key, const void *data, size_t len);

/* Stops the service thread, closes every connection and frees the server. Accepts NULL. */
void dash_server_stop(struct dash_server *srv);

/*
 * True when an upgrade's Origin header belongs to the page the dashboard
 * served: its host:port equals the Host header (and, when the server listens
 * on loopback only, names a loopback host, so a DNS-rebinding page is refused
 * too). A request without Origin (not from a browser) is allowed.
 */
bool dash_server_origin_allowed(const char *origin, const char *host, bool loopback_only);

#endif
