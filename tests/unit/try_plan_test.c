/* SPDX-License-Identifier: Apache-2.0 */
/*
 * try_plan_test.c - the order of a try's commit (try/tryplan.h): every
 * slow step (staging) before anything visible; real directories that go
 * are put aside before what takes their place is published; new trees
 * staged whole and published once; unlinks after the publishes (a
 * rename's old name goes once the new one is there); chmods, then the
 * removal of what was put aside, last.
 */
#include <criterion/criterion.h>
#include <string.h>
#include <sys/stat.h>

#include "try/tryplan.h"

static struct trydiff_change ch(enum trydiff_kind k, const char *path, mode_t mode, mode_t old)
{
	return (struct trydiff_change){ .kind = k, .path = path, .mode = mode, .old_mode = old, .size = -1,
					.old_size = -1 };
}

#define DIR S_IFDIR | 0755
#define REG S_IFREG | 0644
#define LNK S_IFLNK | 0777

static struct trydiff make_diff(struct trydiff_change *c, size_t n)
{
	struct trydiff d;

	trydiff_init(&d, 0);
	d.v = c;
	d.n = d.cap = n;
	return d;
}

/* The index in p of the step (op, change); -1 if none. */
static long at(const struct tryplan *p, enum tryplan_op op, size_t change)
{
	for (size_t i = 0; i < p->n; i++)
		if (p->v[i].op == op && p->v[i].change == change)
			return (long)i;
	return -1;
}

static const struct tryplan_step *step_of(const struct tryplan *p, enum tryplan_op op, size_t change)
{
	long i = at(p, op, change);

	cr_assert_geq(i, 0, "no %s step for change %zu", tryplan_op_name(op), change);
	return &p->v[i];
}

static bool is_stage(enum tryplan_op op)
{
	return op <= TRYPLAN_STAGE_OTHER;
}

Test(tryplan, the_phases_and_what_each_change_becomes)
{
	struct trydiff_change c[] = {
		ch(TRYDIFF_CREATED, "new", DIR, 0),           /* 0: a new tree */
		ch(TRYDIFF_CREATED, "new/sub", DIR, 0),       /* 1 */
		ch(TRYDIFF_CREATED, "new/sub/f", REG, 0),     /* 2 */
		ch(TRYDIFF_CREATED, "top.txt", REG, 0),       /* 3 */
		ch(TRYDIFF_MODIFIED, "mod.txt", REG, REG),    /* 4 */
		ch(TRYDIFF_MODIFIED, "typ", DIR, REG),        /* 5: a directory where a file was */
		ch(TRYDIFF_CREATED, "typ/inner", REG, 0),     /* 6 */
		ch(TRYDIFF_MODIFIED, "f2d", REG, DIR),        /* 7: a file where a directory was */
		ch(TRYDIFF_DELETED, "gone", 0, DIR),          /* 8 */
		ch(TRYDIFF_DELETED, "x", 0, REG),             /* 9 */
		ch(TRYDIFF_RENAMED, "b", REG, REG),           /* 10: from a */
		ch(TRYDIFF_MODE, "m", REG | 0111, REG),       /* 11 */
		ch(TRYDIFF_CREATED, "ln", LNK, 0),            /* 12 */
		ch(TRYDIFF_MODE, "", DIR, S_IFDIR | 0700),    /* 13: the directory itself */
		ch(TRYDIFF_MODIFIED, "ln2", LNK, LNK),        /* 14: a symlink's target */
	};
	size_t n = sizeof(c) / sizeof(c[0]);
	struct trydiff d;
	struct tryplan p;
	long last_stage = -1, first_visible = -1;

	c[10].from = "a";
	d = make_diff(c, n);
	cr_assert_eq(tryplan_make(&d, &p), 0);

	/* Everything slow first: no visible step between stages. */
	for (size_t i = 0; i < p.n; i++) {
		if (is_stage(p.v[i].op))
			last_stage = (long)i;
		else if (first_visible < 0)
			first_visible = (long)i;
	}
	cr_assert_lt(last_stage, first_visible, "a stage after a visible step");

	/* A new tree: staged whole, published once. */
	cr_assert_eq(step_of(&p, TRYPLAN_STAGE_ROOT, 0)->tree, 0);
	cr_assert_eq(step_of(&p, TRYPLAN_STAGE_DIR, 1)->tree, 0);
	cr_assert_eq(step_of(&p, TRYPLAN_STAGE_FILE, 2)->tree, 0);
	cr_assert_lt(at(&p, TRYPLAN_STAGE_ROOT, 0), at(&p, TRYPLAN_STAGE_DIR, 1));
	cr_assert_lt(at(&p, TRYPLAN_STAGE_DIR, 1), at(&p, TRYPLAN_STAGE_FILE, 2));
	cr_assert_geq(at(&p, TRYPLAN_PUBLISH, 0), 0);
	cr_assert_eq(at(&p, TRYPLAN_PUBLISH, 1), -1, "inside a tree: published with it");
	cr_assert_eq(at(&p, TRYPLAN_PUBLISH, 2), -1);

	/* Files beside their place, by the write path's temporary. */
	cr_assert_eq(step_of(&p, TRYPLAN_STAGE_FILE, 3)->tree, TRYPLAN_NONE);
	cr_assert(!step_of(&p, TRYPLAN_STAGE_FILE, 3)->hidden);
	cr_assert(!step_of(&p, TRYPLAN_STAGE_FILE, 4)->hidden);
	cr_assert_geq(at(&p, TRYPLAN_PUBLISH, 3), 0);
	cr_assert_geq(at(&p, TRYPLAN_PUBLISH, 4), 0);

	/* Another kind of entry: the real one aside, then the new one, then removed. */
	cr_assert_lt(at(&p, TRYPLAN_ASIDE, 5), at(&p, TRYPLAN_PUBLISH, 5));
	cr_assert_eq(step_of(&p, TRYPLAN_STAGE_ROOT, 5)->tree, 5);
	cr_assert_eq(step_of(&p, TRYPLAN_STAGE_FILE, 6)->tree, 5, "a file in a directory that replaced a file");
	cr_assert_lt(at(&p, TRYPLAN_ASIDE, 7), at(&p, TRYPLAN_PUBLISH, 7));
	cr_assert(step_of(&p, TRYPLAN_STAGE_FILE, 7)->hidden, "its place is a directory until the aside");
	cr_assert(step_of(&p, TRYPLAN_PUBLISH, 7)->hidden);
	cr_assert_gt(at(&p, TRYPLAN_REMOVE, 5), at(&p, TRYPLAN_PUBLISH, 5));
	cr_assert_gt(at(&p, TRYPLAN_REMOVE, 7), at(&p, TRYPLAN_PUBLISH, 7));

	/* Deletions: a directory aside then removed, a file unlinked. */
	cr_assert_geq(at(&p, TRYPLAN_ASIDE, 8), 0);
	cr_assert_gt(at(&p, TRYPLAN_REMOVE, 8), at(&p, TRYPLAN_ASIDE, 8));
	cr_assert_eq(at(&p, TRYPLAN_UNLINK, 8), -1);
	cr_assert_geq(at(&p, TRYPLAN_UNLINK, 9), 0);

	/* A rename: the new name published before the old one goes. */
	cr_assert(step_of(&p, TRYPLAN_UNLINK, 10)->from);
	cr_assert_lt(at(&p, TRYPLAN_PUBLISH, 10), at(&p, TRYPLAN_UNLINK, 10));

	/* Symlinks are made under a hidden name and renamed into place. */
	cr_assert(step_of(&p, TRYPLAN_STAGE_OTHER, 12)->hidden);
	cr_assert(step_of(&p, TRYPLAN_STAGE_OTHER, 14)->hidden);
	cr_assert_geq(at(&p, TRYPLAN_PUBLISH, 14), 0);

	/* Modes only: chmod, no copy. */
	cr_assert_geq(at(&p, TRYPLAN_ATTRS, 11), 0);
	cr_assert_geq(at(&p, TRYPLAN_ATTRS, 13), 0);
	cr_assert_eq(at(&p, TRYPLAN_STAGE_FILE, 11), -1);

	/* The phases in order: aside < publish < unlink < attrs < remove. */
	enum tryplan_op order[] = { TRYPLAN_ASIDE, TRYPLAN_PUBLISH, TRYPLAN_UNLINK, TRYPLAN_ATTRS, TRYPLAN_REMOVE };
	long prev_max = first_visible;
	for (size_t k = 0; k < sizeof(order) / sizeof(order[0]); k++) {
		long lo = -1, hi = -1;
		for (size_t i = 0; i < p.n; i++) {
			if (p.v[i].op != order[k])
				continue;
			if (lo < 0)
				lo = (long)i;
			hi = (long)i;
		}
		cr_assert_geq(lo, prev_max, "%s steps begin before the previous phase ended", tryplan_op_name(order[k]));
		if (hi >= 0)
			prev_max = hi;
	}

	/* Every change is in the plan. */
	for (size_t i = 0; i < n; i++) {
		bool seen = false;
		for (size_t k = 0; k < p.n && !seen; k++)
			seen = p.v[k].change == i;
		cr_assert(seen, "change %zu (%s) has no step", i, c[i].path);
	}
	tryplan_free(&p);
}

Test(tryplan, an_empty_diff_is_an_empty_plan)
{
	struct trydiff d = make_diff(NULL, 0);
	struct tryplan p;

	cr_assert_eq(tryplan_make(&d, &p), 0);
	cr_assert_eq(p.n, 0);
	tryplan_free(&p);
}

Test(tryplan, a_tree_in_a_second_directory_is_its_own)
{
	struct trydiff_change c[] = {
		ch(TRYDIFF_CREATED, "x", DIR, 0),
		ch(TRYDIFF_CREATED, "x", DIR, 0),
		ch(TRYDIFF_CREATED, "x/f", REG, 0),
	};
	struct trydiff d;
	struct tryplan p;

	c[1].root = 1;
	c[2].root = 1;
	d = make_diff(c, 3);
	cr_assert_eq(tryplan_make(&d, &p), 0);
	cr_assert_eq(step_of(&p, TRYPLAN_STAGE_ROOT, 0)->tree, 0);
	cr_assert_eq(step_of(&p, TRYPLAN_STAGE_ROOT, 1)->tree, 1);
	cr_assert_eq(step_of(&p, TRYPLAN_STAGE_FILE, 2)->tree, 1, "x/f belongs to the second directory's x");
	tryplan_free(&p);
}
