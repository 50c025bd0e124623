/*
 * protocol.c - parses client requests and builds the dashboard's messages.
 *
 * Every request is validated before it reaches the store: the type must be
 * known, numbers must be integers in range, strings short. A bad request gets
 * an "error" reply naming what is wrong; it never closes the connection.
 */
#include "protocol.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Longest link, layer, mode or scenario name a trend request may carry. */
#define MAX_NAME 128

static cJSON *
error_reply(const char *request, const char *fmt, const char *detail)
{
	char text[512];
	snprintf(text, sizeof(text), fmt, detail != NULL ? detail : "");
	cJSON *msg = cJSON_CreateObject();
	if (msg == NULL || cJSON_AddStringToObject(msg, "type", "error") == NULL) {
		cJSON_Delete(msg);
		return NULL;
	}
	if (request != NULL) {
		cJSON_AddStringToObject(msg, "request", request);
	} else {
		cJSON_AddNullToObject(msg, "request");
	}
	cJSON_AddStringToObject(msg, "error", text);
	return msg;
}

cJSON *
dash_protocol_runs(struct dash_store *st)
{
	char err[256];
	cJSON *msg = cJSON_CreateObject();
	cJSON *db = dash_store_describe(st);
	if (msg == NULL || db == NULL || cJSON_AddStringToObject(msg, "type", "runs") == NULL) {
		cJSON_Delete(msg);
		cJSON_Delete(db);
		return NULL;
	}
	cJSON_AddItemToObject(msg, "db", db);
	cJSON *runs = dash_store_runs(st, err, sizeof(err));
	if (runs == NULL) {
		/* The db description already says why there is nothing to list. */
		runs = cJSON_CreateArray();
	}
	if (runs == NULL) {
		cJSON_Delete(msg);
		return NULL;
	}
	cJSON_AddItemToObject(msg, "runs", runs);
	return msg;
}

/* An integer member in [min, max]; false if absent, fractional or out of range. */
static bool
get_int(const cJSON *req, const char *name, int64_t min, int64_t max, int64_t *out)
{
	const cJSON *item = cJSON_GetObjectItemCaseSensitive(req, name);
	if (!cJSON_IsNumber(item)) {
		return false;
	}
	double v = item->valuedouble;
	if (!isfinite(v) || v < (double)min || v > (double)max || (double)(int64_t)v != v) {
		return false;
	}
	*out = (int64_t)v;
	return true;
}

/* A non-empty string member of at most MAX_NAME bytes, or NULL. */
static const char *
get_name(const cJSON *req, const char *name)
{
	const cJSON *item = cJSON_GetObjectItemCaseSensitive(req, name);
	if (!cJSON_IsString(item) || item->valuestring[0] == '\0' ||
	    strlen(item->valuestring) > MAX_NAME) {
		return NULL;
	}
	return item->valuestring;
}

static cJSON *
reply_run(struct dash_store *st, const cJSON *req)
{
	int64_t run_id;
	char err[256];
	if (!get_int(req, "run_id", 1, INT64_C(1) << 53, &run_id)) {
		return error_reply("run", "%s", "\"run_id\" must be a positive integer");
	}
	cJSON *body = dash_store_run(st, run_id, err, sizeof(err));
	if (body == NULL) {
		return error_reply("run", "%s", err);
	}
	cJSON *msg = cJSON_CreateObject();
	if (msg == NULL) {
		cJSON_Delete(body);
		return NULL;
	}
	cJSON_AddStringToObject(msg, "type", "run");
	cJSON_AddNumberToObject(msg, "run_id", (double)run_id);
	cJSON *item;
	while ((item = body->child) != NULL) {
		cJSON_AddItemToObject(msg, item->string, cJSON_DetachItemViaPointer(body, item));
	}
	cJSON_Delete(body);
	return msg;
}

static cJSON *
reply_trend(struct dash_store *st, const cJSON *req)
{
	struct dash_store_cell cell;
	char err[256];
	const cJSON *scenario = cJSON_GetObjectItemCaseSensitive(req, "scenario");
	cell.scenario = scenario == NULL ? "stream" : get_name(req, "scenario");
	cell.link = get_name(req, "link");
	cell.layer = get_name(req, "layer");
	cell.mode = get_name(req, "mode");
	if (cell.scenario == NULL || cell.link == NULL || cell.layer == NULL || cell.mode == NULL) {
		return error_reply("trend", "%s",
		                   "\"link\", \"layer\", \"mode\" (and \"scenario\" if given) must "
		                   "be non-empty strings of at most 128 bytes");
	}
	if (!get_int(req, "records_per_msg", 0, INT32_MAX, &cell.records_per_msg)) {
		return error_reply("trend", "%s",
		                   "\"records_per_msg\" must be an integer, 0 or more");
	}
	cell.keys = 1;
	if (cJSON_GetObjectItemCaseSensitive(req, "keys") != NULL &&
	    !get_int(req, "keys", 1, INT32_MAX, &cell.keys)) {
		return error_reply("trend", "%s", "\"keys\" must be an integer, 1 or more");
	}
	cJSON *points = dash_store_trend(st, &cell, err, sizeof(err));
	if (points == NULL) {
		return error_reply("trend", "%s", err);
	}
	cJSON *msg = cJSON_CreateObject();
	cJSON *key = cJSON_CreateObject();
	if (msg == NULL || key == NULL) {
		cJSON_Delete(msg);
		cJSON_Delete(key);
		cJSON_Delete(points);
		return NULL;
	}
	cJSON_AddStringToObject(key, "scenario", cell.scenario);
	cJSON_AddStringToObject(key, "link", cell.link);
	cJSON_AddStringToObject(key, "layer", cell.layer);
	cJSON_AddStringToObject(key, "mode", cell.mode);
	cJSON_AddNumberToObject(key, "records_per_msg", (double)cell.records_per_msg);
	cJSON_AddNumberToObject(key, "keys", (double)cell.keys);
	cJSON_AddStringToObject(msg, "type", "trend");
	cJSON_AddItemToObject(msg, "cell", key);
	cJSON_AddItemToObject(msg, "points", points);
	return msg;
}

/* {"type": "compare", ...the report of `tern bench compare A B --format json`}. */
static cJSON *
reply_compare(struct dash_store *st, const cJSON *req)
{
	int64_t a;
	int64_t b;
	char err[320];
	if (!get_int(req, "a", 1, INT64_C(1) << 53, &a) ||
	    !get_int(req, "b", 1, INT64_C(1) << 53, &b)) {
		return error_reply("compare", "%s",
		                   "\"a\" and \"b\" must be positive integers (run ids)");
	}
	cJSON *report = dash_store_compare(st, a, b, err, sizeof(err));
	if (report == NULL) {
		return error_reply("compare", "%s", err);
	}
	cJSON *msg = cJSON_CreateObject();
	if (msg == NULL || cJSON_AddStringToObject(msg, "type", "compare") == NULL) {
		cJSON_Delete(msg);
		cJSON_Delete(report);
		return NULL;
	}
	cJSON *item;
	while ((item = report->child) != NULL) {
		cJSON_AddItemToObject(msg, item->string, cJSON_DetachItemViaPointer(report, item));
	}
	cJSON_Delete(report);
	return msg;
}

/* {"type": "live"} or {"type": "live_history"}: what the Live view's store holds now. */
static cJSON *
reply_live(const struct live *live, const struct live_time *now, const char *type)
{
	if (live == NULL) {
		return error_reply(type, "%s",
		                   "this dashboard watches no network: start it with --connect EP "
		                   "(a router's endpoint) for the Live view");
	}
	return strcmp(type, "live") == 0 ? live_message(live, now)
	                                 : live_history_message(live, now);
}

static cJSON *
dispatch(struct dash_store *st, const struct live *live, const struct live_time *now,
         const cJSON *req)
{
	if (!cJSON_IsObject(req)) {
		return error_reply(NULL, "%s", "a message must be a JSON object with a \"type\"");
	}
	const cJSON *type = cJSON_GetObjectItemCaseSensitive(req, "type");
	if (!cJSON_IsString(type)) {
		return error_reply(NULL, "%s", "a message needs a \"type\" string");
	}
	if (strcmp(type->valuestring, "runs") == 0) {
		return dash_protocol_runs(st);
	}
	if (strcmp(type->valuestring, "run") == 0) {
		return reply_run(st, req);
	}
	if (strcmp(type->valuestring, "trend") == 0) {
		return reply_trend(st, req);
	}
	if (strcmp(type->valuestring, "compare") == 0) {
		return reply_compare(st, req);
	}
	if (strcmp(type->valuestring, "live") == 0 ||
	    strcmp(type->valuestring, "live_history") == 0) {
		return reply_live(live, now, type->valuestring);
	}
	char name[64];
	snprintf(name, sizeof(name), "%s", type->valuestring);
	return error_reply(NULL,
	                   "unknown message type \"%s\" (known: runs, run, trend, compare, live, "
	                   "live_history)",
	                   name);
}

cJSON *
dash_protocol_reply(struct dash_store *st, const struct live *live, const struct live_time *now,
                    const char *msg, size_t len)
{
	if (len > DASH_MAX_REQUEST) {
		return error_reply(NULL, "%s", "message larger than 64 KiB");
	}
	cJSON *req = cJSON_ParseWithLength(msg, len);
	if (req == NULL) {
		return error_reply(NULL, "%s", "the message is not valid JSON");
	}
	cJSON *reply = dispatch(st, live, now, req);
	const cJSON *tag = cJSON_GetObjectItemCaseSensitive(req, "req");
	if (reply != NULL && tag != NULL && (cJSON_IsNumber(tag) || cJSON_IsString(tag))) {
		cJSON_AddItemToObject(reply, "req", cJSON_Duplicate(tag, false));
	}
	cJSON_Delete(req);
	return reply;
}

char *
dash_protocol_print(const cJSON *msg, size_t *len)
{
	char *text = cJSON_PrintUnformatted(msg);
	if (text != NULL && len != NULL) {
		*len = strlen(text);
	}
	return text;
}
