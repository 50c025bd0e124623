/*
 * ketree.c - the key expression tree. See ketree.h.
 *
 * The walk is keyexpr.c's dynamic program laid over the tree: a state is a
 * node (the stored prefix so far) and a position in the query, and the
 * moves are that program's cases, one edge at a time.
 */
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "keyexpr.h"
#include "ketree.h"

struct query {
	int n;
	const char *p[TERN_KEY_MAX_CHUNKS];
	size_t len[TERN_KEY_MAX_CHUNKS];
};

struct walk {
	struct ketree *t;
	const struct query *q;
	void (*fn)(void *arg, void *val);
	void *arg;
};

static bool
is_star(const char *p, size_t len)
{
	return len == 1 && p[0] == '*';
}

static bool
is_dstar(const char *p, size_t len)
{
	return len == 2 && p[0] == '*' && p[1] == '*';
}

static bool
reserved(const char *p, size_t len)
{
	return len > 0 && p[0] == '@';
}

static int
split(const char *s, size_t len, struct query *q)
{
	size_t start = 0;

	q->n = 0;
	for (size_t i = 0; i <= len; i++) {
		if (i == len || s[i] == '/') {
			if (q->n == TERN_KEY_MAX_CHUNKS) {
				return -1;
			}
			q->p[q->n] = s + start;
			q->len[q->n++] = i - start;
			start = i + 1;
		}
	}
	return 0;
}

struct chunk_key {
	const char *p;
	size_t len;
};

static bool
chunk_eq(const void *val, const void *key)
{
	const struct ketree_node *n = val;
	const struct chunk_key *k = key;

	return n->len == k->len && memcmp(n->chunk, k->p, k->len) == 0;
}

static struct ketree_node *
kid(const struct ketree_node *n, const char *p, size_t len)
{
	struct chunk_key k = {p, len};

	return hmap_find(&n->kids, hmap_hash(p, len, 0), chunk_eq, &k);
}

static struct ketree_node *
node_new(struct ketree_node *parent, const char *p, size_t len)
{
	struct ketree_node *n = calloc(1, sizeof(*n) + len + 1);

	if (n == NULL) {
		return NULL;
	}
	n->parent = parent;
	n->len = len;
	n->hash = hmap_hash(p, len, 0);
	memcpy(n->chunk, p, len);
	return n;
}

static bool
root_ready(struct ketree *t)
{
	if (t->root == NULL) {
		t->root = node_new(NULL, "", 0);
	}
	return t->root != NULL;
}

/* Room for one more value than nvals; false without memory. */
static bool
grow_vals(struct ketree_node *n)
{
	uint32_t cap = n->vals_cap ? n->vals_cap * 2 : 2;
	void **v;

	if (n->vals_cap == 0) {
		if ((v = malloc(cap * sizeof(*v))) == NULL) {
			return false;
		}
		v[0] = n->v.one;
	} else if ((v = realloc(n->v.many, cap * sizeof(*v))) == NULL) {
		return false;
	}
	n->v.many = v;
	n->vals_cap = cap;
	return true;
}

static void
free_vals(struct ketree_node *n)
{
	if (n->vals_cap) {
		free(n->v.many);
	}
	n->v.many = NULL;
	n->vals_cap = 0;
}

/* Drop empty nodes from n up. */
static void
prune(struct ketree *t, struct ketree_node *n)
{
	while (n != NULL && n != t->root && n->nvals == 0 && n->kids.n == 0) {
		struct ketree_node *p = n->parent;
		hmap_del(&p->kids, n->hash, n);
		if (p->star == n) {
			p->star = NULL;
		}
		if (p->dstar == n) {
			p->dstar = NULL;
		}
		free_vals(n);
		free(n);
		t->nodes--;
		n = p;
	}
	if (t->root != NULL && t->root->nvals == 0 && t->root->kids.n == 0) {
		free_vals(t->root);
		free(t->root);
		t->root = NULL;
	}
}

int
ketree_add(struct ketree *t, const char *ke, size_t len, void *val)
{
	struct query q;
	struct ketree_node *n;

	if (split(ke, len, &q) != 0 || !root_ready(t)) {
		return TERN_ENOMEM;
	}
	n = t->root;
	for (int i = 0; i < q.n; i++) {
		struct ketree_node *k = kid(n, q.p[i], q.len[i]);
		if (k == NULL) {
			if ((k = node_new(n, q.p[i], q.len[i])) == NULL ||
			    !hmap_put(&n->kids, k->hash, k)) {
				free(k);
				prune(t, n);
				return TERN_ENOMEM;
			}
			t->nodes++;
			if (is_star(q.p[i], q.len[i])) {
				n->star = k;
			} else if (is_dstar(q.p[i], q.len[i])) {
				n->dstar = k;
			}
		}
		n = k;
	}
	if (n->nvals == 0 && n->vals_cap == 0) {
		n->v.one = val; /* most keys have one value: no array */
		n->nvals = 1;
		return 0;
	}
	if (n->nvals == (n->vals_cap ? n->vals_cap : 1) && !grow_vals(n)) {
		prune(t, n);
		return TERN_ENOMEM;
	}
	n->v.many[n->nvals++] = val;
	return 0;
}

static struct ketree_node *
find(const struct ketree *t, const char *ke, size_t len)
{
	struct query q;
	struct ketree_node *n = t->root;

	if (split(ke, len, &q) != 0) {
		return NULL;
	}
	for (int i = 0; i < q.n && n != NULL; i++) {
		n = kid(n, q.p[i], q.len[i]);
	}
	return n;
}

const struct ketree_node *
ketree_find(const struct ketree *t, const char *ke, size_t len)
{
	return find(t, ke, len);
}

bool
ketree_remove(struct ketree *t, const char *ke, size_t len, const void *val)
{
	struct ketree_node *n = find(t, ke, len);

	if (n == NULL) {
		return false;
	}
	for (uint32_t i = 0; i < n->nvals; i++) {
		void **vals = n->vals_cap ? n->v.many : &n->v.one;
		if (vals[i] == val) {
			vals[i] = vals[--n->nvals];
			if (n->nvals == 0) {
				free_vals(n);
			}
			prune(t, n);
			return true;
		}
	}
	return false;
}

/* First time at (n, j) in this walk? */
static bool
first_visit(struct walk *w, struct ketree_node *n, int j)
{
	if (n->walk != w->t->walk) {
		n->walk = w->t->walk;
		n->reported = n->seen_end = false;
		n->seen = 0;
	}
	if (j == w->q->n) {
		if (n->seen_end) {
			return false;
		}
		n->seen_end = true;
		return true;
	}
	if (n->seen & (1ull << j)) {
		return false;
	}
	n->seen |= 1ull << j;
	return true;
}

static void visit(struct walk *w, struct ketree_node *n, int j);

/* A stored '**' edge to d, met at query position j: it takes the query's
 * chunks from j on, none that is reserved, as many as it likes. */
static void
visit_dstar(struct walk *w, struct ketree_node *d, int j)
{
	const struct query *q = w->q;

	for (;; j++) {
		visit(w, d, j);
		if (j == q->n || reserved(q->p[j], q->len[j])) {
			return;
		}
	}
}

/* Two chunks, neither '**', name a common chunk. */
static bool
meet(const struct ketree_node *k, const char *p, size_t len)
{
	bool ks = is_star(k->chunk, k->len), qs = is_star(p, len);

	if (ks || qs) {
		return (ks && qs) || (ks ? !reserved(p, len) : !reserved(k->chunk, k->len));
	}
	return k->len == len && memcmp(k->chunk, p, len) == 0;
}

static void
visit(struct walk *w, struct ketree_node *n, int j)
{
	const struct query *q = w->q;

	if (!first_visit(w, n, j)) {
		return;
	}
	if (j == q->n && n->nvals > 0 && !n->reported) {
		n->reported = true;
		void *const *vals = ketree_vals(n);
		for (uint32_t i = 0; i < n->nvals; i++) {
			w->fn(w->arg, vals[i]);
		}
	}
	if (n->dstar != NULL) {
		visit_dstar(w, n->dstar, j);
	}
	if (j == q->n) {
		return;
	}
	if (is_dstar(q->p[j], q->len[j])) {
		/* the query's '**' takes none of the stored chunks ... */
		visit(w, n, j + 1);
		/* ... or one more, of any that is not reserved */
		size_t pos = 0;
		for (struct ketree_node *k; (k = hmap_next(&n->kids, &pos)) != NULL;) {
			if (!reserved(k->chunk, k->len)) {
				visit(w, k, j);
			}
		}
		return;
	}
	if (is_star(q->p[j], q->len[j])) {
		size_t pos = 0;
		for (struct ketree_node *k; (k = hmap_next(&n->kids, &pos)) != NULL;) {
			if (k != n->dstar && meet(k, q->p[j], q->len[j])) {
				visit(w, k, j + 1);
			}
		}
		return;
	}
	struct ketree_node *k = kid(n, q->p[j], q->len[j]);
	if (k != NULL) {
		visit(w, k, j + 1);
	}
	if (n->star != NULL && !reserved(q->p[j], q->len[j])) {
		visit(w, n->star, j + 1);
	}
}

void
ketree_visit(struct ketree *t, const char *qs, size_t len, void (*fn)(void *arg, void *val),
             void *arg)
{
	struct query q;
	struct walk w = {.t = t, .q = &q, .fn = fn, .arg = arg};

	if (t->root == NULL || split(qs, len, &q) != 0) {
		return;
	}
	if (++t->walk == 0) {
		t->walk = 1; /* 0 would look like a node's first walk */
	}
	visit(&w, t->root, 0);
}

static void
free_node(struct ketree_node *n)
{
	size_t pos = 0;

	for (struct ketree_node *k; (k = hmap_next(&n->kids, &pos)) != NULL;) {
		free_node(k);
	}
	hmap_free(&n->kids);
	free_vals(n);
	free(n);
}

void
ketree_free(struct ketree *t)
{
	if (t->root != NULL) {
		free_node(t->root);
	}
	t->root = NULL;
	t->nodes = 0;
}
