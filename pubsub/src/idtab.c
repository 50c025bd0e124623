/*
 * idtab.c - a table of pointers by growing id, in pages.
 */
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "idtab.h"

/* Room in t->pages for the page of id. */
static int
reach(struct idtab *t, uint32_t id)
{
	uint32_t npages = t->cap / IDTAB_PAGE, want = npages ? npages : 4;
	struct idtab_page **p;

	if (id < t->cap) {
		return 0;
	}
	while ((uint64_t)want * IDTAB_PAGE <= id) {
		want *= 2;
	}
	if ((p = realloc(t->pages, want * sizeof(*p))) == NULL) {
		return TERN_ENOMEM;
	}
	memset(p + npages, 0, (want - npages) * sizeof(*p));
	t->pages = p;
	t->cap = want * IDTAB_PAGE;
	return 0;
}

int
idtab_put(struct idtab *t, uint32_t id, void *p)
{
	struct idtab_page **page;

	if (reach(t, id) != 0) {
		return TERN_ENOMEM;
	}
	page = &t->pages[id / IDTAB_PAGE];
	if (*page == NULL && (*page = calloc(1, sizeof(**page))) == NULL) {
		return TERN_ENOMEM;
	}
	(*page)->v[id % IDTAB_PAGE] = p;
	(*page)->n++;
	return 0;
}

void
idtab_del(struct idtab *t, uint32_t id)
{
	struct idtab_page **page = &t->pages[id / IDTAB_PAGE];

	(*page)->v[id % IDTAB_PAGE] = NULL;
	if (--(*page)->n == 0) {
		free(*page);
		*page = NULL;
	}
}

void
idtab_free(struct idtab *t)
{
	for (uint32_t i = 0; i < t->cap / IDTAB_PAGE; i++) {
		free(t->pages[i]);
	}
	free(t->pages);
	t->pages = NULL;
	t->cap = 0;
}
