/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tryplan.h - the order in which a try's commit applies its changes
 * (docs/try.md, "Commit"): everything slow first, out of sight, then the
 * changes become visible in a burst of renames, unlinks and chmods.
 *
 * Phases, each finished before the next begins:
 *   1. stage: every new or changed regular file is written whole beside
 *      its place (the atomic write path, fs/fwrite.h); a new directory
 *      whose parent exists is made under a hidden name there, with
 *      everything the try created below it (a staged tree); symlinks,
 *      devices and FIFOs are made under hidden names;
 *   2. aside: real directories that go (deleted, or replaced by another
 *      kind of entry) and real entries replaced by another kind are
 *      renamed to hidden names beside them: each disappears in one step;
 *   3. publish: staged files, trees and entries take their places, in the
 *      scan's order (parents before children; trees are disjoint);
 *   4. unlink: real non-directories that go (deleted, renamed away: after
 *      their new name exists);
 *   5. attrs: mode and owner of entries whose content stays;
 *   6. remove: what was put aside is removed, now invisible.
 * What is visible half-applied is therefore phases 2 to 5: renames,
 * unlinks and chmods, whatever the size of the data.
 *
 * Pure: no I/O. Errors: -ENOMEM.
 */
#ifndef TRY_TRYPLAN_H
#define TRY_TRYPLAN_H

#include <stdbool.h>
#include <stddef.h>

#include "try/trydiff.h"

enum tryplan_op {
	TRYPLAN_STAGE_ROOT = 1, /* a new directory: made under a hidden name beside its place */
	TRYPLAN_STAGE_DIR,      /* a directory inside a staged tree */
	TRYPLAN_STAGE_FILE,     /* a regular file: beside its place, or inside its tree */
	TRYPLAN_STAGE_OTHER,    /* a symlink, device, FIFO or socket */
	TRYPLAN_ASIDE,          /* the real entry at the change's path goes out of the way */
	TRYPLAN_PUBLISH,        /* a staged entry (not inside a tree) takes its place */
	TRYPLAN_UNLINK,         /* the real non-directory at the path (`from` for a rename) goes */
	TRYPLAN_ATTRS,          /* mode and owner of the real entry */
	TRYPLAN_REMOVE,         /* the entry put aside is removed */
};

#define TRYPLAN_NONE ((size_t)-1)

struct tryplan_step {
	enum tryplan_op op;
	size_t change;          /* index into the diff */
	size_t tree;            /* staged inside the tree of this change (its STAGE_ROOT), or TRYPLAN_NONE */
	bool hidden;            /* STAGE_FILE/OTHER and PUBLISH: staged under a hidden name (its place is
				   taken by another kind of entry until phase 2) */
	bool from;              /* UNLINK: the change's `from` (a rename's old name) */
};

struct tryplan {
	struct tryplan_step *v;
	size_t n;
};

/* The steps for every change of d, in order. 0 or -ENOMEM. */
int tryplan_make(const struct trydiff *d, struct tryplan *p);
void tryplan_free(struct tryplan *p);

const char *tryplan_op_name(enum tryplan_op op);

#endif
