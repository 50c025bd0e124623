/*
 * idtab.h - pointers indexed by a 32-bit id (a connection's channel ids),
 * in pages allocated while one of their ids is in use.
 *
 * A lookup is two loads, with no hashing or probing. A table indexed
 * directly by id would keep room for every id ever used; here a page of
 * IDTAB_PAGE ids goes when its last id does, and what stays is a pointer
 * for each page the highest id has passed (channel ids come round again
 * below a bound: chanid.h). Pure: no locks, no I/O.
 */
#ifndef TERN_IDTAB_H
#define TERN_IDTAB_H

#include <stdint.h>

#define IDTAB_PAGE 256

struct idtab_page {
	uint32_t n; /* ids in use */
	void *v[IDTAB_PAGE];
};

struct idtab {
	struct idtab_page **pages;
	uint32_t cap; /* ids below this have a place in pages */
};

/* Put p (not NULL) at a free id; 0, or TERN_ENOMEM (the table unchanged). */
int idtab_put(struct idtab *t, uint32_t id, void *p);
/* Put p (not NULL) in place of the value the id holds. */
static inline void
idtab_replace(struct idtab *t, uint32_t id, void *p)
{
	t->pages[id / IDTAB_PAGE]->v[id % IDTAB_PAGE] = p;
}

/* Free the id (it holds a value). */
void idtab_del(struct idtab *t, uint32_t id);
void idtab_free(struct idtab *t);

static inline void *
idtab_get(const struct idtab *t, uint64_t id)
{
	struct idtab_page *p;

	if (id >= t->cap || (p = t->pages[id / IDTAB_PAGE]) == NULL) {
		return NULL;
	}
	return p->v[id % IDTAB_PAGE];
}

#endif
