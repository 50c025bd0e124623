/*
 * telemetry.h - each node describes itself on @tern/NODE_ID/stats.
 *
 * Once per telemetry.interval_ms a thread of the node asks the session for
 * its keys and connections (session_report, on the I/O thread), turns the
 * totals into rates over the interval, and publishes one JSON object (the
 * SPEC's "Telemetry" section; docs/CONFIG.md lists its fields) best effort
 * through the ordinary publish path, so it crosses routers like any key
 * and costs nothing where nobody subscribes to "@tern".
 *
 * Keys that start with '@' (telemetry itself) are left out of the report.
 */
#ifndef TERN_TELEMETRY_H
#define TERN_TELEMETRY_H

#include <stddef.h>
#include <stdint.h>

#include "tern/tern.h"

struct session;
struct telemetry;

/* Start publishing every cfg->telemetry_interval_ms (not 0). cfg and s
 * must outlive the telemetry. 0, TERN_ENOMEM or TERN_ESYS. */
int telemetry_start(struct telemetry **out, struct session *s, const tern_config *cfg);
/* Stop the thread (no report after it returns); accepts NULL. */
void telemetry_stop(struct telemetry *t);

/* The JSON of one report made now (the rates over the time since the last
 * one). Like snprintf: returns the length the whole text needs. */
size_t telemetry_json(struct telemetry *t, char *buf, size_t len);

#endif
