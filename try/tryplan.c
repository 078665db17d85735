/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tryplan.c - the order of a try's commit (tryplan.h).
 */
#include "try/tryplan.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum phase { PH_STAGE, PH_ASIDE, PH_PUBLISH, PH_UNLINK, PH_ATTRS, PH_REMOVE, PH_N };

const char *tryplan_op_name(enum tryplan_op op)
{
	static const char *const names[] = {
		[TRYPLAN_STAGE_ROOT] = "stage-root", [TRYPLAN_STAGE_DIR] = "stage-dir",
		[TRYPLAN_STAGE_FILE] = "stage-file", [TRYPLAN_STAGE_OTHER] = "stage-other",
		[TRYPLAN_ASIDE] = "aside",           [TRYPLAN_PUBLISH] = "publish",
		[TRYPLAN_UNLINK] = "unlink",         [TRYPLAN_ATTRS] = "attrs",
		[TRYPLAN_REMOVE] = "remove",
	};
	return (unsigned)op < sizeof(names) / sizeof(names[0]) && names[op] ? names[op] : "?";
}

/* Changes by (root, path), to find a change's parent directory. */
struct index {
	size_t *slot; /* change + 1; 0 empty */
	size_t cap;
};

static uint64_t key_hash(unsigned root, const char *p, size_t n)
{
	uint64_t h = 1469598103934665603ull ^ root;

	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)p[i]) * 1099511628211ull;
	return h;
}

static size_t index_find(const struct index *ix, const struct trydiff *d, unsigned root, const char *p, size_t n)
{
	size_t i = key_hash(root, p, n) & (ix->cap - 1);

	for (; ix->slot[i]; i = (i + 1) & (ix->cap - 1)) {
		const struct trydiff_change *c = &d->v[ix->slot[i] - 1];

		if (c->root == root && strlen(c->path) == n && memcmp(c->path, p, n) == 0)
			return ix->slot[i] - 1;
	}
	return TRYPLAN_NONE;
}

static int index_build(struct index *ix, const struct trydiff *d)
{
	ix->cap = 16;
	while (ix->cap < d->n * 2)
		ix->cap *= 2;
	ix->slot = calloc(ix->cap, sizeof(*ix->slot));
	if (!ix->slot)
		return -ENOMEM;
	for (size_t c = 0; c < d->n; c++) {
		size_t n = strlen(d->v[c].path), i = key_hash(d->v[c].root, d->v[c].path, n) & (ix->cap - 1);

		while (ix->slot[i])
			i = (i + 1) & (ix->cap - 1);
		ix->slot[i] = c + 1;
	}
	return 0;
}

struct lists {
	struct tryplan_step *v[PH_N];
	size_t n[PH_N], cap[PH_N];
	bool oom;
};

static void push(struct lists *l, enum phase ph, struct tryplan_step st)
{
	if (l->n[ph] == l->cap[ph]) {
		size_t nc = l->cap[ph] ? l->cap[ph] * 2 : 32;
		struct tryplan_step *nv = realloc(l->v[ph], nc * sizeof(*nv));

		if (!nv) {
			l->oom = true;
			return;
		}
		l->v[ph] = nv;
		l->cap[ph] = nc;
	}
	l->v[ph][l->n[ph]++] = st;
}

static struct tryplan_step step(enum tryplan_op op, size_t change, size_t tree, bool hidden)
{
	return (struct tryplan_step){ .op = op, .change = change, .tree = tree, .hidden = hidden };
}

/* A new entry at change c: inside its parent's staged tree, or staged on
   its own and published. Returns the tree c's children go into. */
static size_t stage_new(struct lists *l, size_t c, mode_t mode, size_t ptree, bool hidden)
{
	if (S_ISDIR(mode)) {
		if (ptree != TRYPLAN_NONE) {
			push(l, PH_STAGE, step(TRYPLAN_STAGE_DIR, c, ptree, false));
			return ptree;
		}
		push(l, PH_STAGE, step(TRYPLAN_STAGE_ROOT, c, c, true));
		push(l, PH_PUBLISH, step(TRYPLAN_PUBLISH, c, TRYPLAN_NONE, true));
		return c;
	}
	if (ptree != TRYPLAN_NONE) {
		push(l, PH_STAGE, step(S_ISREG(mode) ? TRYPLAN_STAGE_FILE : TRYPLAN_STAGE_OTHER, c, ptree, false));
		return TRYPLAN_NONE;
	}
	/* Symlinks and the like are always made under a hidden name; a file
	   by the write path's own temporary unless its place is taken by
	   another kind of entry until the aside phase. */
	hidden = hidden || !S_ISREG(mode);
	push(l, PH_STAGE, step(S_ISREG(mode) ? TRYPLAN_STAGE_FILE : TRYPLAN_STAGE_OTHER, c, TRYPLAN_NONE, hidden));
	push(l, PH_PUBLISH, step(TRYPLAN_PUBLISH, c, TRYPLAN_NONE, hidden));
	return TRYPLAN_NONE;
}

int tryplan_make(const struct trydiff *d, struct tryplan *p)
{
	struct index ix = { 0 };
	struct lists l = { 0 };
	size_t *tree = NULL, total = 0;
	int rc = -ENOMEM;

	p->v = NULL;
	p->n = 0;
	if (index_build(&ix, d) < 0 || !(tree = malloc((d->n + 1) * sizeof(*tree))))
		goto out;
	for (size_t c = 0; c < d->n; c++) {
		const struct trydiff_change *ch = &d->v[c];
		const char *slash = strrchr(ch->path, '/');
		size_t parent = TRYPLAN_NONE, ptree = TRYPLAN_NONE;

		tree[c] = TRYPLAN_NONE;
		if (ch->path[0])
			parent = index_find(&ix, d, ch->root, ch->path, slash ? (size_t)(slash - ch->path) : 0);
		/* The scan lists a directory before what is in it. */
		if (parent != TRYPLAN_NONE && parent < c)
			ptree = tree[parent];

		switch (ch->kind) {
		case TRYDIFF_CREATED:
			tree[c] = stage_new(&l, c, ch->mode, ptree, false);
			break;
		case TRYDIFF_RENAMED:
			tree[c] = stage_new(&l, c, ch->mode, ptree, false);
			push(&l, PH_UNLINK, (struct tryplan_step){ .op = TRYPLAN_UNLINK, .change = c,
								   .tree = TRYPLAN_NONE, .from = true });
			break;
		case TRYDIFF_MODIFIED:
			if ((ch->mode & S_IFMT) != (ch->old_mode & S_IFMT)) {
				/* Another kind of entry: the real one steps aside first. */
				push(&l, PH_ASIDE, step(TRYPLAN_ASIDE, c, TRYPLAN_NONE, true));
				push(&l, PH_REMOVE, step(TRYPLAN_REMOVE, c, TRYPLAN_NONE, true));
				tree[c] = stage_new(&l, c, ch->mode, TRYPLAN_NONE, true);
			} else {
				stage_new(&l, c, ch->mode, TRYPLAN_NONE, false);
			}
			break;
		case TRYDIFF_MODE:
			push(&l, PH_ATTRS, step(TRYPLAN_ATTRS, c, TRYPLAN_NONE, false));
			break;
		case TRYDIFF_DELETED:
			if (S_ISDIR(ch->old_mode)) {
				push(&l, PH_ASIDE, step(TRYPLAN_ASIDE, c, TRYPLAN_NONE, true));
				push(&l, PH_REMOVE, step(TRYPLAN_REMOVE, c, TRYPLAN_NONE, true));
			} else {
				push(&l, PH_UNLINK, step(TRYPLAN_UNLINK, c, TRYPLAN_NONE, false));
			}
			break;
		}
	}
	if (l.oom)
		goto out;
	for (int ph = 0; ph < PH_N; ph++)
		total += l.n[ph];
	p->v = malloc((total ? total : 1) * sizeof(*p->v));
	if (!p->v)
		goto out;
	for (int ph = 0; ph < PH_N; ph++) {
		if (l.n[ph])
			memcpy(p->v + p->n, l.v[ph], l.n[ph] * sizeof(*p->v));
		p->n += l.n[ph];
	}
	rc = 0;
out:
	for (int ph = 0; ph < PH_N; ph++)
		free(l.v[ph]);
	free(ix.slot);
	free(tree);
	return rc;
}

void tryplan_free(struct tryplan *p)
{
	free(p->v);
	p->v = NULL;
	p->n = 0;
}
