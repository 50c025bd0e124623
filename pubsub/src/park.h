/*
 * park.h - what a reliable channel held when its connection broke, kept
 * per peer, sent again when the same peer is back, and meanwhile filled by
 * new publications. Given up after slow_consumer_ms. Also what it held
 * when its peer withdrew the subscriptions it served (that peer's route to
 * them went away, and may come back at once, as when a route moves):
 * kept the same way, but never waited for.
 *
 * Threads: a source's parked list belongs to whoever holds the source's
 * route (the I/O thread, or a publisher holding the route lock).
 */
#ifndef TERN_PARK_H
#define TERN_PARK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "control.h"
#include "outchan.h"
#include "ring.h"

struct parked {
	char peer_id[CTL_ID_MAX + 1];
	struct ring ring;
	uint64_t head_seq;   /* sequence number of the first message in ring */
	bool head_mid;       /* ring starts inside a message: skip to the next */
	uint64_t expires_ms; /* given up then */
	uint64_t dropped;    /* messages that did not fit */
	bool withdrawn;      /* the peer withdrew: a publisher never waits for room */
	struct parked *next;
};

/* Keep what oc holds for peer (one entry per peer: a newer loss replaces
 * an older one). Returns the bytes kept. A withdrawn peer gets an entry
 * even when oc held nothing, for what is published meanwhile. */
size_t park_keep(struct parked **list, const char *peer, struct outchan *oc, uint64_t expires_ms,
                 bool withdrawn);
/* The peer is back: queue what was kept for it on oc (renumbered; the peer
 * drops what it had received already). Returns the messages queued, -1 if
 * nothing was kept; *dropped: messages that had not fit. */
int park_resume(struct parked **list, const char *peer, struct outchan *oc, uint64_t *dropped);
/* Room for a message of len bytes in every entry but a withdrawn peer's
 * (growing them within budget bytes each); false if one is full. */
bool park_room(struct parked *list, size_t len, uint64_t budget);
/* Add a publication to every entry (peer NULL) or to peer's. Messages that
 * do not fit count as dropped. */
void park_append(struct parked *list, const char *peer, uint64_t seq, const uint8_t *data,
                 size_t len);
/* Drop the entries expired at now_ms; returns the first such peer's entry
 * unlinked (the caller frees it with park_free), or NULL. */
struct parked *park_expired(struct parked **list, uint64_t now_ms);
void park_free(struct parked *p);
void park_free_all(struct parked **list);

#endif
