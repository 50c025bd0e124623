/*
 * park.c - frames kept for a peer that lost its connection. See park.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "park.h"

/* Messages above this are not kept for an absent peer: its queue would
 * have to grow by the message's size for each. */
#define PARK_MESSAGE_MAX 65536

void
park_free(struct parked *p)
{
	ring_free(&p->ring);
	free(p);
}

void
park_free_all(struct parked **list)
{
	while (*list != NULL) {
		struct parked *p = *list;
		*list = p->next;
		park_free(p);
	}
}

static struct parked *
unlink_peer(struct parked **list, const char *peer)
{
	for (struct parked **pp = list; *pp != NULL; pp = &(*pp)->next) {
		if (strcmp((*pp)->peer_id, peer) == 0) {
			struct parked *p = *pp;
			*pp = p->next;
			return p;
		}
	}
	return NULL;
}

size_t
park_keep(struct parked **list, const char *peer, struct outchan *oc, uint64_t expires_ms,
          bool withdrawn)
{
	struct parked *p, *old;

	if (ring_used(&oc->ring) == 0 && !withdrawn) {
		return 0;
	}
	if ((old = unlink_peer(list, peer)) != NULL) {
		park_free(old);
	}
	p = calloc(1, sizeof(*p));
	if (p == NULL) {
		return 0;
	}
	snprintf(p->peer_id, sizeof(p->peer_id), "%s", peer);
	outchan_take_kept(oc, &p->ring, &p->head_seq, &p->head_mid);
	p->expires_ms = expires_ms;
	p->withdrawn = withdrawn;
	p->next = *list;
	*list = p;
	return ring_used(&p->ring);
}

int
park_resume(struct parked **list, const char *peer, struct outchan *oc, uint64_t *dropped)
{
	struct parked *p = unlink_peer(list, peer);
	int messages;

	if (p == NULL) {
		return -1;
	}
	messages = outchan_resume(oc, &p->ring, p->head_seq, p->head_mid);
	*dropped = p->dropped;
	park_free(p);
	return messages;
}

bool
park_room(struct parked *list, size_t len, uint64_t budget)
{
	size_t need = len + WIRE_HDR_MAX;

	for (struct parked *p = list; p != NULL; p = p->next) {
		if (p->withdrawn || ring_space(&p->ring) >= need) {
			continue;
		}
		if (ring_used(&p->ring) + need > budget ||
		    ring_grow(&p->ring, ring_used(&p->ring) + need) != 0) {
			return false;
		}
	}
	return true;
}

void
park_append(struct parked *list, const char *peer, uint64_t seq, const uint8_t *data, size_t len)
{
	struct wire_frame f = {.type = WIRE_DATA, .flags = WIRE_FLAG_SEQ, .seq = seq, .len = len};
	uint8_t hdr[WIRE_HDR_MAX];
	size_t hlen = wire_header_encode(hdr, &f);

	for (struct parked *p = list; p != NULL; p = p->next) {
		if (peer != NULL && strcmp(p->peer_id, peer) != 0) {
			continue;
		}
		if (len > PARK_MESSAGE_MAX || ring_space(&p->ring) < hlen + len) {
			p->dropped++;
			continue;
		}
		ring_put(&p->ring, hdr, hlen, data, len);
	}
}

struct parked *
park_expired(struct parked **list, uint64_t now_ms)
{
	for (struct parked **pp = list; *pp != NULL; pp = &(*pp)->next) {
		if (now_ms >= (*pp)->expires_ms) {
			struct parked *p = *pp;
			*pp = p->next;
			return p;
		}
	}
	return NULL;
}
