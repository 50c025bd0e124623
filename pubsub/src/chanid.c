/*
 * chanid.c - channel ids that come round again, held back until the peer
 * has read the CLOSE.
 */
#include <stdlib.h>
#include <string.h>

#include "chanid.h"
#include "error.h"

#define HELD_MIN 16

char chanid_mark;

void
chanid_init(struct chanid *t, uint32_t max)
{
	memset(t, 0, sizeof(*t));
	t->max = max;
	t->next = 1;
}

void
chanid_free(struct chanid *t)
{
	idtab_free(&t->tab);
	free(t->held);
	t->held = NULL;
	t->head = t->nheld = t->cap = 0;
}

int
chanid_take(struct chanid *t, void *p, uint32_t *id)
{
	uint32_t probe = t->next;

	/* ids in order from where the last search stopped: a page of the table
	 * with nothing in it is 256 free ids */
	for (uint32_t n = 0; n < t->max; n++, probe = probe == t->max ? 1 : probe + 1) {
		if (idtab_get(&t->tab, probe) != NULL) {
			continue;
		}
		if (idtab_put(&t->tab, probe, p) != 0) {
			return tern__error(TERN_ENOMEM, "out of memory");
		}
		*id = probe;
		t->next = probe == t->max ? 1 : probe + 1;
		return 0;
	}
	return tern__error(TERN_ENOMEM, "all %u channel ids of the connection are in use",
	                   (unsigned)t->max);
}

/* Room for one more held id at the end, moving the live ones down first. */
static int
held_room(struct chanid *t)
{
	if (t->head > 0 && t->head + t->nheld == t->cap) {
		memmove(t->held, t->held + t->head, t->nheld * sizeof(*t->held));
		t->head = 0;
	}
	if (t->nheld == t->cap) {
		uint32_t cap = t->cap ? t->cap * 2 : HELD_MIN;
		struct chanid_held *v = realloc(t->held, cap * sizeof(*v));
		if (v == NULL) {
			return TERN_ENOMEM;
		}
		t->held = v;
		t->cap = cap;
	}
	return 0;
}

void
chanid_close(struct chanid *t, uint32_t id, uint64_t now_us)
{
	/* the mark stays in the table either way: a free id would be taken */
	idtab_replace(&t->tab, id, &chanid_mark);
	if (held_room(t) != 0) {
		return;
	}
	t->held[t->head + t->nheld].id = id;
	t->held[t->head + t->nheld].closed_us = now_us;
	t->nheld++;
}

void
chanid_settle(struct chanid *t, uint64_t ping_us)
{
	while (t->nheld > 0 && t->held[t->head].closed_us < ping_us) {
		idtab_del(&t->tab, t->held[t->head].id);
		t->head++;
		t->nheld--;
	}
	if (t->nheld == 0) {
		t->head = 0;
		if (t->cap > HELD_MIN) {
			/* a burst of closes is over: give the memory back */
			free(t->held);
			t->held = NULL;
			t->cap = 0;
		}
	}
}
