/*
 * server.c - libwebsockets plumbing: static files, the /ws protocol, pushes.
 *
 * The websocket protocol is protocols[0], so a client that names no
 * subprotocol (a browser's `new WebSocket(url)`, or any websocket tool) lands
 * on it; for HTTP it hands every callback to lws's own file server.
 *
 * Each client has a queue of outgoing messages; lws_write happens only in
 * the WRITEABLE callback, one message per callback, with LWS_PRE bytes of
 * headroom. A client that stops reading is dropped once its queue passes
 * QUEUE_LIMIT rather than growing without bound.
 *
 * With the Live view on, telemetry arrives on tern's I/O thread
 * (dash_server_post), which only appends a copy to the inbox under
 * inbox_lock and wakes this thread with lws_cancel_service(), the one lws
 * call that is safe from another thread. This thread empties the inbox into
 * the live store (live.h) when woken (EVENT_WAIT_CANCELLED) and once a
 * second, when it also pushes a "live" message to every client. GET /metrics
 * is a mount handed to this protocol's callback (LWSMPRO_CALLBACK), which
 * answers from the same store.
 */
#include "server.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <libwebsockets.h>

#include "live.h"
#include "metrics.h"
#include "protocol.h"
#include "store.h"

/* Bytes a slow client may have queued before it is disconnected. */
#define QUEUE_LIMIT (64u * 1024 * 1024)
/* Longest Origin or Host header that is considered. */
#define MAX_HEADER 256
/* Telemetry bytes that may wait for the server thread; beyond, reports are dropped. */
#define INBOX_LIMIT (8u * 1024 * 1024)
/* How often the Live view is pushed, in milliseconds. */
#define LIVE_PUSH_MS 1000
/* Bytes of a /metrics answer written in one WRITEABLE callback. */
#define HTTP_CHUNK 16384

/* One telemetry message waiting in the inbox. */
struct report {
	struct report *next;
	size_t len;
	const char *key;      /* points into data, after the payload */
	unsigned char data[]; /* len bytes of payload, then the key and its NUL */
};

struct out_msg {
	struct out_msg *next;
	size_t len;
	unsigned char data[]; /* LWS_PRE bytes of headroom, then len bytes of JSON */
};

/* Per websocket connection; lws allocates it zeroed. */
struct session {
	struct session *next;
	struct lws *wsi;
	struct out_msg *head;
	struct out_msg *tail;
	size_t queued;
	bool drop; /* too far behind: close at the next WRITEABLE */
	char *rx;  /* the message being received, across fragments */
	size_t rx_len;
	/* GET /metrics, on an HTTP connection */
	unsigned char *http_body; /* LWS_PRE bytes of headroom, then http_len bytes */
	size_t http_len;
	size_t http_sent;
};

struct dash_server {
	lws_sorted_usec_list_t poll_timer; /* first member: the timer callback casts back */
	struct lws_context *context;
	struct dash_store *store;
	struct session *sessions;
	pthread_t thread;
	bool thread_started;
	atomic_bool stop;
	int port;
	int poll_ms;
	bool loopback_only;
	char db_state[320];
	/* the Live view: NULL without --connect */
	struct live *live;
	lws_sorted_usec_list_t live_timer;
	pthread_mutex_t inbox_lock; /* the inbox; taken by tern's I/O thread too */
	struct report *inbox_head;
	struct report *inbox_tail;
	size_t inbox_bytes;
	uint64_t inbox_dropped;
	struct lws_http_mount mounts[3];
	struct lws_protocol_vhost_options mimetypes[4];
	struct lws_protocol_vhost_options headers[4];
	struct lws_protocols protocols[2];
};

static struct dash_server *
server_of(struct lws *wsi)
{
	return lws_context_user(lws_get_context(wsi));
}

/* Copies a header into buf; false if absent or longer than buf. */
static bool
header(struct lws *wsi, enum lws_token_indexes token, char *buf, int size)
{
	int len = lws_hdr_total_length(wsi, token);
	if (len <= 0 || len >= size) {
		return false;
	}
	return lws_hdr_copy(wsi, buf, size, token) > 0;
}

static bool
loopback_host(const char *host, size_t len)
{
	static const char *const names[] = {"127.0.0.1", "localhost", "[::1]"};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (len == strlen(names[i]) && strncasecmp(host, names[i], len) == 0) {
			return true;
		}
	}
	return false;
}

bool
dash_server_origin_allowed(const char *origin, const char *host, bool loopback_only)
{
	if (origin == NULL) {
		return true;
	}
	if (host == NULL) {
		return false;
	}
	const char *rest;
	if (strncasecmp(origin, "http://", 7) == 0) {
		rest = origin + 7;
	} else if (strncasecmp(origin, "https://", 8) == 0) {
		rest = origin + 8;
	} else {
		return false;
	}
	if (strcasecmp(rest, host) != 0) {
		return false;
	}
	if (loopback_only) {
		/* The host part ends at the last ':' (after a bracketed IPv6 address). */
		const char *colon = strrchr(host, ':');
		size_t len = colon != NULL && colon[1] != '\0' && strchr(colon, ']') == NULL
		                 ? (size_t)(colon - host)
		                 : strlen(host);
		return loopback_host(host, len);
	}
	return true;
}

/* Appends a copy of text to a session's queue and asks for a WRITEABLE callback. */
static void
session_queue(struct session *s, const char *text, size_t len)
{
	if (s->drop) {
		return;
	}
	if (s->queued + len > QUEUE_LIMIT) {
		lwsl_warn("a client fell %zu bytes behind; disconnecting it\n", s->queued);
		s->drop = true;
		lws_callback_on_writable(s->wsi);
		return;
	}
	struct out_msg *m = malloc(sizeof(*m) + LWS_PRE + len);
	if (m == NULL) {
		s->drop = true;
		lws_callback_on_writable(s->wsi);
		return;
	}
	m->next = NULL;
	m->len = len;
	memcpy(m->data + LWS_PRE, text, len);
	if (s->tail != NULL) {
		s->tail->next = m;
	} else {
		s->head = m;
	}
	s->tail = m;
	s->queued += len;
	lws_callback_on_writable(s->wsi);
}

static void
session_send(struct session *s, const cJSON *msg)
{
	size_t len;
	char *text = dash_protocol_print(msg, &len);
	if (text == NULL) {
		s->drop = true;
		lws_callback_on_writable(s->wsi);
		return;
	}
	session_queue(s, text, len);
	free(text);
}

static void
session_free(struct dash_server *srv, struct session *s)
{
	for (struct session **p = &srv->sessions; *p != NULL; p = &(*p)->next) {
		if (*p == s) {
			*p = s->next;
			break;
		}
	}
	while (s->head != NULL) {
		struct out_msg *m = s->head;
		s->head = m->next;
		free(m);
	}
	s->tail = NULL;
	free(s->rx);
	s->rx = NULL;
}

static struct live_time
clock_now(void)
{
	struct timespec mono;
	struct timespec wall;
	clock_gettime(CLOCK_MONOTONIC, &mono);
	clock_gettime(CLOCK_REALTIME, &wall);
	return (struct live_time){
	    .mono_ms = (uint64_t)mono.tv_sec * 1000 + (uint64_t)mono.tv_nsec / 1000000,
	    .wall_ms = (int64_t)wall.tv_sec * 1000 + wall.tv_nsec / 1000000,
	};
}

/* Queues one message for every client. */
static void
broadcast(struct dash_server *srv, const cJSON *msg)
{
	size_t len;
	char *text = msg != NULL ? dash_protocol_print(msg, &len) : NULL;
	if (text == NULL) {
		return;
	}
	for (struct session *s = srv->sessions; s != NULL; s = s->next) {
		session_queue(s, text, len);
	}
	free(text);
}

/* Sends every push message from one poll to every client. */
static void
poll_store(lws_sorted_usec_list_t *timer)
{
	struct dash_server *srv = (struct dash_server *)timer;
	cJSON *events = cJSON_CreateArray();
	if (events != NULL && dash_store_poll(srv->store, events) > 0) {
		cJSON *event;
		cJSON_ArrayForEach(event, events)
		{
			size_t len;
			char *text = dash_protocol_print(event, &len);
			if (text == NULL) {
				continue;
			}
			for (struct session *s = srv->sessions; s != NULL; s = s->next) {
				session_queue(s, text, len);
			}
			free(text);
		}
	}
	cJSON_Delete(events);
	lws_sul_schedule(srv->context, 0, &srv->poll_timer, poll_store,
	                 (lws_usec_t)srv->poll_ms * LWS_US_PER_MS);
}

void
dash_server_post(void *arg, const char *key, const void *data, size_t len)
{
	struct dash_server *srv = arg;
	size_t key_len = strlen(key);
	if (srv->live == NULL) {
		return;
	}
	pthread_mutex_lock(&srv->inbox_lock);
	bool full = srv->inbox_bytes + len + key_len > INBOX_LIMIT;
	if (full) {
		srv->inbox_dropped++;
	}
	pthread_mutex_unlock(&srv->inbox_lock);
	if (full) {
		return;
	}
	struct report *r = malloc(sizeof(*r) + len + key_len + 1);
	if (r == NULL) {
		return;
	}
	r->next = NULL;
	r->len = len;
	memcpy(r->data, data, len);
	memcpy(r->data + len, key, key_len + 1);
	r->key = (const char *)r->data + len;

	pthread_mutex_lock(&srv->inbox_lock);
	bool was_empty = srv->inbox_head == NULL;
	if (srv->inbox_tail != NULL) {
		srv->inbox_tail->next = r;
	} else {
		srv->inbox_head = r;
	}
	srv->inbox_tail = r;
	srv->inbox_bytes += len + key_len;
	pthread_mutex_unlock(&srv->inbox_lock);
	/* A non-empty inbox has already woken the server thread, which empties it whole. */
	if (was_empty) {
		lws_cancel_service(srv->context);
	}
}

/* Moves every waiting report into the live store (server thread). */
static void
inbox_drain(struct dash_server *srv, const struct live_time *now)
{
	pthread_mutex_lock(&srv->inbox_lock);
	struct report *r = srv->inbox_head;
	uint64_t dropped = srv->inbox_dropped;
	srv->inbox_head = NULL;
	srv->inbox_tail = NULL;
	srv->inbox_bytes = 0;
	srv->inbox_dropped = 0;
	pthread_mutex_unlock(&srv->inbox_lock);
	if (dropped > 0) {
		lwsl_warn("dropped %llu telemetry reports: more than 8 MiB waited\n",
		          (unsigned long long)dropped);
	}
	while (r != NULL) {
		struct report *next = r->next;
		uint64_t refused = srv->live->refused;
		if (live_report(srv->live, r->key, (const char *)r->data, r->len, now) < 0 &&
		    (refused & (refused + 1)) == 0) {
			/* Said on the 1st, 2nd, 4th, 8th... refusal: a broken node must not flood
			 * the log. */
			lwsl_warn("refused a telemetry report (%llu so far): %s\n",
			          (unsigned long long)refused + 1, srv->live->last_refusal);
		}
		free(r);
		r = next;
	}
}

static void
inbox_free(struct dash_server *srv)
{
	while (srv->inbox_head != NULL) {
		struct report *r = srv->inbox_head;
		srv->inbox_head = r->next;
		free(r);
	}
	srv->inbox_tail = NULL;
}

/* Each second: take the reports, forget silent nodes, push the Live view. */
static void
live_tick(lws_sorted_usec_list_t *timer)
{
	struct dash_server *srv = lws_container_of(timer, struct dash_server, live_timer);
	struct live_time now = clock_now();
	inbox_drain(srv, &now);
	live_expire(srv->live, &now);
	if (srv->sessions != NULL) {
		cJSON *msg = live_message(srv->live, &now);
		broadcast(srv, msg);
		cJSON_Delete(msg);
	}
	lws_sul_schedule(srv->context, 0, &srv->live_timer, live_tick,
	                 (lws_usec_t)LIVE_PUSH_MS * LWS_US_PER_MS);
}

/* Collects fragments of one message; replies once it is complete. */
static int
session_receive(struct dash_server *srv, struct session *s, struct lws *wsi, const void *in,
                size_t len)
{
	if (s->rx_len + len > DASH_MAX_REQUEST) {
		lwsl_warn("refused a websocket message over 64 KiB\n");
		static const char reason[] = "message larger than 64 KiB";
		lws_close_reason(wsi, LWS_CLOSE_STATUS_MESSAGE_TOO_LARGE, (unsigned char *)reason,
		                 sizeof(reason) - 1);
		return -1;
	}
	if (s->rx == NULL) {
		s->rx = malloc(DASH_MAX_REQUEST);
		if (s->rx == NULL) {
			return -1;
		}
	}
	if (len > 0) {
		memcpy(s->rx + s->rx_len, in, len);
		s->rx_len += len;
	}
	if (!lws_is_final_fragment(wsi) || lws_remaining_packet_payload(wsi) > 0) {
		return 0;
	}
	struct live_time now = clock_now();
	cJSON *reply = dash_protocol_reply(srv->store, srv->live, &now, s->rx, s->rx_len);
	s->rx_len = 0;
	if (reply == NULL) {
		return -1;
	}
	session_send(s, reply);
	cJSON_Delete(reply);
	return 0;
}

static int
session_writeable(struct session *s, struct lws *wsi)
{
	if (s->drop) {
		return -1;
	}
	struct out_msg *m = s->head;
	if (m == NULL) {
		return 0;
	}
	int n = lws_write(wsi, m->data + LWS_PRE, m->len, LWS_WRITE_TEXT);
	if (n < (int)m->len) {
		return -1;
	}
	s->head = m->next;
	if (s->head == NULL) {
		s->tail = NULL;
	}
	s->queued -= m->len;
	free(m);
	if (s->head != NULL) {
		lws_callback_on_writable(wsi);
	}
	return 0;
}

static void
http_free(struct session *s)
{
	free(s->http_body);
	s->http_body = NULL;
	s->http_len = 0;
	s->http_sent = 0;
}

/*
 * GET /metrics (uri is the request's path): builds the whole text, sends the
 * headers, and the body when writeable.
 */
static int
metrics_begin(struct dash_server *srv, struct session *s, struct lws *wsi, const char *uri)
{
	unsigned char head[LWS_PRE + 1024];
	unsigned char *start = head + LWS_PRE;
	unsigned char *p = start;
	unsigned char *end = head + sizeof(head) - 1;
	size_t len = 0;

	http_free(s);
	if (uri == NULL || (strcmp(uri, "/metrics") != 0 && strcmp(uri, "/metrics/") != 0)) {
		/* /metrics/anything: nothing there */
		if (lws_return_http_status(wsi, HTTP_STATUS_NOT_FOUND, NULL) != 0) {
			return -1;
		}
		return lws_http_transaction_completed(wsi) ? -1 : 0;
	}
	struct live_time now = clock_now();
	char *text = metrics_text(srv->live, &now, &len);
	if (text == NULL || (s->http_body = malloc(LWS_PRE + len)) == NULL) {
		free(text);
		return -1;
	}
	memcpy(s->http_body + LWS_PRE, text, len);
	free(text);
	s->http_len = len;
	if (lws_add_http_common_headers(wsi, HTTP_STATUS_OK,
	                                "text/plain; version=0.0.4; charset=utf-8",
	                                (lws_filepos_t)len, &p, end) != 0 ||
	    lws_add_http_header_by_token(wsi, WSI_TOKEN_HTTP_CACHE_CONTROL,
	                                 (const unsigned char *)"no-store", 8, &p, end) != 0 ||
	    lws_finalize_write_http_header(wsi, start, &p, end) != 0) {
		http_free(s);
		return -1;
	}
	lws_callback_on_writable(wsi);
	return 0;
}

static int
metrics_writeable(struct session *s, struct lws *wsi)
{
	size_t left = s->http_len - s->http_sent;
	size_t n = left > HTTP_CHUNK ? HTTP_CHUNK : left;
	bool last = n == left;
	/* The LWS_PRE bytes before a later chunk are ones already sent: lws may reuse them. */
	if (lws_write(wsi, s->http_body + LWS_PRE + s->http_sent, n,
	              last ? LWS_WRITE_HTTP_FINAL : LWS_WRITE_HTTP) != (int)n) {
		http_free(s);
		return -1;
	}
	s->http_sent += n;
	if (!last) {
		lws_callback_on_writable(wsi);
		return 0;
	}
	http_free(s);
	return lws_http_transaction_completed(wsi) ? -1 : 0;
}

/* Refuses an upgrade to anything but /ws from a page the dashboard served. */
static int
filter_upgrade(struct dash_server *srv, struct lws *wsi)
{
	char uri[64] = "";
	char origin[MAX_HEADER];
	char host[MAX_HEADER];
	if (!header(wsi, WSI_TOKEN_GET_URI, uri, sizeof(uri)) || strcmp(uri, "/ws") != 0) {
		lwsl_warn("refused a websocket upgrade on %s\n", uri[0] ? uri : "a long path");
		return 1;
	}
	bool has_origin = lws_hdr_total_length(wsi, WSI_TOKEN_ORIGIN) > 0;
	bool ok_origin = header(wsi, WSI_TOKEN_ORIGIN, origin, sizeof(origin));
	bool ok_host = header(wsi, WSI_TOKEN_HOST, host, sizeof(host));
	if (has_origin && (!ok_origin || !dash_server_origin_allowed(origin, ok_host ? host : NULL,
	                                                             srv->loopback_only))) {
		fprintf(stderr,
		        "tern dashboard: refused a websocket from origin %.100s (host %.100s)\n",
		        ok_origin ? origin : "(too long)", ok_host ? host : "(none)");
		return 1;
	}
	return 0;
}

static int
callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in, size_t len)
{
	struct session *s = user;
	switch (reason) {
	case LWS_CALLBACK_FILTER_PROTOCOL_CONNECTION:
		return filter_upgrade(server_of(wsi), wsi);
	case LWS_CALLBACK_ESTABLISHED: {
		struct dash_server *srv = server_of(wsi);
		memset(s, 0, sizeof(*s));
		s->wsi = wsi;
		s->next = srv->sessions;
		srv->sessions = s;
		cJSON *runs = dash_protocol_runs(srv->store);
		if (runs == NULL) {
			return -1;
		}
		session_send(s, runs);
		cJSON_Delete(runs);
		if (srv->live != NULL) {
			/* A page opened now sees the last minutes, and the graph at once. */
			struct live_time now = clock_now();
			cJSON *history = live_history_message(srv->live, &now);
			cJSON *live = live_message(srv->live, &now);
			if (history != NULL) {
				session_send(s, history);
			}
			if (live != NULL) {
				session_send(s, live);
			}
			cJSON_Delete(history);
			cJSON_Delete(live);
		}
		return 0;
	}
	case LWS_CALLBACK_RECEIVE:
		return session_receive(server_of(wsi), s, wsi, in, len);
	case LWS_CALLBACK_SERVER_WRITEABLE:
		return session_writeable(s, wsi);
	case LWS_CALLBACK_CLOSED:
		session_free(server_of(wsi), s);
		return 0;
	case LWS_CALLBACK_EVENT_WAIT_CANCELLED: {
		struct dash_server *srv = server_of(wsi);
		if (srv->live != NULL) {
			struct live_time now = clock_now();
			inbox_drain(srv, &now);
		}
		return 0;
	}
	case LWS_CALLBACK_HTTP:
		/* Only the /metrics mount hands requests to this callback. */
		return metrics_begin(server_of(wsi), s, wsi, in);
	case LWS_CALLBACK_HTTP_WRITEABLE:
		if (s != NULL && s->http_body != NULL) {
			return metrics_writeable(s, wsi);
		}
		return lws_callback_http_dummy(wsi, reason, user, in, len);
	case LWS_CALLBACK_CLOSED_HTTP:
	case LWS_CALLBACK_HTTP_DROP_PROTOCOL:
		if (s != NULL) {
			http_free(s);
		}
		return lws_callback_http_dummy(wsi, reason, user, in, len);
	default:
		return lws_callback_http_dummy(wsi, reason, user, in, len);
	}
}

/* lws's log lines, without its timestamp, marked as the dashboard's. */
static void
log_line(int level, const char *line)
{
	(void)level;
	fprintf(stderr, "tern dashboard: %s", line);
}

static void *
service_thread(void *arg)
{
	struct dash_server *srv = arg;
	while (!atomic_load(&srv->stop)) {
		if (lws_service(srv->context, 0) < 0) {
			break;
		}
	}
	return NULL;
}

static void
set_pvo(struct lws_protocol_vhost_options *list, size_t count, const char *const pairs[][2])
{
	for (size_t i = 0; i < count; i++) {
		list[i].next = i + 1 < count ? &list[i + 1] : NULL;
		list[i].options = NULL;
		list[i].name = pairs[i][0];
		list[i].value = pairs[i][1];
	}
}

static void
init_mounts(struct dash_server *srv, const struct dash_server_config *cfg)
{
	static const char *const mimetypes[][2] = {
	    {".mjs", "text/javascript"},
	    {".map", "application/json"},
	    {".json", "application/json"},
	    {".svg", "image/svg+xml"},
	};
	/* The page loads only its own files and talks only to its own server. */
	static const char *const headers[][2] = {
	    {"content-security-policy:",
	     "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
	     "img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; "
	     "frame-ancestors 'none'"},
	    {"x-content-type-options:", "nosniff"},
	    {"referrer-policy:", "no-referrer"},
	    {"x-frame-options:", "DENY"},
	};
	set_pvo(srv->mimetypes, 4, mimetypes);
	set_pvo(srv->headers, 4, headers);

	struct lws_http_mount *vendor = &srv->mounts[0];
	struct lws_http_mount *metrics = &srv->mounts[1];
	struct lws_http_mount *root = &srv->mounts[2];
	memset(srv->mounts, 0, sizeof(srv->mounts));
	vendor->mount_next = metrics;
	metrics->mount_next = root;
	metrics->mountpoint = "/metrics";
	metrics->mountpoint_len = 8;
	metrics->origin = "tern-dashboard"; /* the protocol whose callback answers */
	metrics->origin_protocol = LWSMPRO_CALLBACK;
	vendor->mountpoint = "/vendor";
	vendor->mountpoint_len = 7;
	vendor->origin = cfg->vendor_dir;
	vendor->origin_protocol = LWSMPRO_FILE;
	vendor->extra_mimetypes = srv->mimetypes;
	root->mountpoint = "/";
	root->mountpoint_len = 1;
	root->origin = cfg->web_dir;
	root->def = "index.html";
	root->origin_protocol = LWSMPRO_FILE;
	root->extra_mimetypes = srv->mimetypes;
}

int
dash_server_start(struct dash_server **out, const struct dash_server_config *cfg, char *err,
                  size_t errlen)
{
	struct dash_server *srv = calloc(1, sizeof(*srv));
	if (srv == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	atomic_init(&srv->stop, false);
	pthread_mutex_init(&srv->inbox_lock, NULL);
	srv->poll_ms = cfg->poll_ms > 0 ? cfg->poll_ms : 250;
	if (cfg->live &&
	    (srv->live = live_new(cfg->observer, cfg->connect, cfg->nconnect)) == NULL) {
		snprintf(err, errlen, "out of memory");
		pthread_mutex_destroy(&srv->inbox_lock);
		free(srv);
		return -1;
	}
	srv->store = dash_store_open(cfg->db_path);
	if (srv->store == NULL) {
		snprintf(err, errlen, "out of memory");
		live_free(srv->live);
		pthread_mutex_destroy(&srv->inbox_lock);
		free(srv);
		return -1;
	}
	snprintf(srv->db_state, sizeof(srv->db_state), "%s",
	         dash_store_state(srv->store) == DASH_STORE_READY ? ""
	                                                          : dash_store_reason(srv->store));
	init_mounts(srv, cfg);
	srv->protocols[0] = (struct lws_protocols){
	    .name = "tern-dashboard",
	    .callback = callback,
	    .per_session_data_size = sizeof(struct session),
	    .rx_buffer_size = 4096,
	};

	bool ipv6 = strchr(cfg->host, ':') != NULL;
	bool any = strcmp(cfg->host, "0.0.0.0") == 0 || strcmp(cfg->host, "::") == 0;
	srv->loopback_only = strcmp(cfg->host, "127.0.0.1") == 0 || strcmp(cfg->host, "::1") == 0;

	struct lws_context_creation_info info;
	memset(&info, 0, sizeof(info));
	info.port = cfg->port;
	/* lws binds every interface unless iface is set and IPv6 is off (for IPv4). */
	info.iface = any ? NULL : cfg->host;
	info.options = 0;
	if (!ipv6) {
		info.options |= LWS_SERVER_OPTION_DISABLE_IPV6;
	}
	info.protocols = srv->protocols;
	info.mounts = srv->mounts;
	info.headers = srv->headers;
	info.user = srv;
	info.vhost_name = "tern-dashboard";
	info.timeout_secs = 10;

	/* Silent while starting: a failure is reported as one line below, not lws's three. */
	lws_set_log_level(0, log_line);
	srv->context = lws_create_context(&info);
	lws_set_log_level(LLL_ERR | LLL_WARN, log_line);
	if (srv->context == NULL) {
		snprintf(err, errlen,
		         "cannot listen on %s:%d (is the port in use? pick another with --listen)",
		         cfg->host, cfg->port);
		dash_store_close(srv->store);
		live_free(srv->live);
		pthread_mutex_destroy(&srv->inbox_lock);
		free(srv);
		return -1;
	}
	struct lws_vhost *vhost = lws_get_vhost_by_name(srv->context, "tern-dashboard");
	srv->port = vhost != NULL ? lws_get_vhost_listen_port(vhost) : cfg->port;
	lws_sul_schedule(srv->context, 0, &srv->poll_timer, poll_store,
	                 (lws_usec_t)srv->poll_ms * LWS_US_PER_MS);
	if (srv->live != NULL) {
		lws_sul_schedule(srv->context, 0, &srv->live_timer, live_tick,
		                 (lws_usec_t)LIVE_PUSH_MS * LWS_US_PER_MS);
	}
	if (pthread_create(&srv->thread, NULL, service_thread, srv) != 0) {
		snprintf(err, errlen, "cannot start the server thread");
		dash_server_stop(srv);
		return -1;
	}
	srv->thread_started = true;
	*out = srv;
	return 0;
}

int
dash_server_port(const struct dash_server *srv)
{
	return srv->port;
}

const char *
dash_server_db_state(const struct dash_server *srv)
{
	return srv->db_state;
}

void
dash_server_stop(struct dash_server *srv)
{
	if (srv == NULL) {
		return;
	}
	atomic_store(&srv->stop, true);
	if (srv->thread_started) {
		lws_cancel_service(srv->context);
		pthread_join(srv->thread, NULL);
	}
	lws_sul_cancel(&srv->poll_timer);
	if (srv->live != NULL) {
		lws_sul_cancel(&srv->live_timer);
	}
	/* Destroying the context closes every connection (CLOSED frees each session). */
	lws_context_destroy(srv->context);
	dash_store_close(srv->store);
	inbox_free(srv);
	live_free(srv->live);
	pthread_mutex_destroy(&srv->inbox_lock);
	free(srv);
}
