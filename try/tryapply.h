/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tryapply.h - a try's commit carried out (docs/try.md, "Commit"): the
 * optimistic check that nothing it would write changed in the real
 * directories since the try began, then the plan (tryplan.h) applied.
 *
 * The check. A try remembers when it began (t0: the real-time clock
 * read before its command started, which no file time given until then
 * exceeds; its command starts once the coarse clock that file times come
 * from has passed t0). Every change of a real entry, whether a write, a
 * truncation, a chmod, a chown or a rename over it, sets the entry's
 * change time (ctime) to now, and ctime cannot be set otherwise, so a
 * real entry with a ctime after t0 changed since the try began.
 * For each entry the commit would write, replace, chmod or remove:
 *   - it must be there, with a ctime not after t0; where the layer's copy
 *     names the real file it came from (overlay.origin), that must still
 *     be the file at its path (a rename over it is caught twice);
 *   - a directory that goes is walked: nothing below it may have changed;
 *   - a new entry's place must still be free, and a new file copied up
 *     from a real one that is gone since (deleted under the try) is a
 *     conflict too;
 *   - every directory on the way must still be a directory (not a symlink).
 * Any of these: -ESTALE with the first one named, and nothing is applied.
 * This is equivalent to comparing each entry's version (fs/entry.h) at
 * the start with its version now, without reading every version at the
 * start. A clock set back while the try runs defeats it (as it would the
 * versions).
 *
 * Applying: each regular file through fs/fwrite.h (a registered temporary
 * beside its place, the layer's mode and owner, the real file's other
 * attributes, renamed into place), inside a staged tree in place. Hidden
 * names are `.envd-try.<16 hex>` beside their place, registered under
 * tryapply_registry (symlinks `<envd pid>.<hex>` to them) so that the next
 * envd removes what a killed one left (tryapply_sweep). A failure while
 * staging removes what was staged: nothing was applied. A failure while
 * publishing stops there, puts back what was put aside where it can, and
 * says how far it got: the try stays, and a second commit applies what
 * is still different.
 *
 * Threads: worker jobs (every call is on the real paths). Errors: 0, or a
 * negative errno with a message naming the path: -ESTALE (a conflict),
 * -ENOSPC, -ECANCELED (`stop` was set while staging: nothing applied),
 * -EIO.
 */
#ifndef TRY_TRYAPPLY_H
#define TRY_TRYAPPLY_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "try/trydiff.h"
#include "try/tryplan.h"

#define TRYAPPLY_PREFIX ".envd-try."

/* The registry of hidden names in use; "" disables it. */
extern char tryapply_registry[256];

/* One of the try's directories: the real one and its layer's upper directory. */
struct tryapply_root {
	const char *real;
	int upper_fd;
};

struct tryapply_stats {
	size_t files, bytes, dirs, removed, attrs;
};

int tryapply_check(const struct trydiff *d, const struct tryapply_root *roots, const struct timespec *t0,
		   char *err, size_t errlen);

/*
 * A commit in steps, so that its files can be staged by several worker
 * jobs at once (they are independent once their directories exist):
 *   tryapply_new          for d and its plan p (both borrowed until free);
 *   tryapply_stage_dirs   the new directories (one job, first);
 *   tryapply_stage_files  the files and other entries [from, to) of the
 *                         tryapply_files() to stage; calls on disjoint
 *                         ranges may run on several threads at once;
 *   then tryapply_publish, or tryapply_unstage when a stage failed or was
 *   stopped; tryapply_free. Stats add up in the caller's st.
 * tryapply_run does all of it on the calling thread.
 */
struct tryapply;
int tryapply_new(const struct trydiff *d, const struct tryplan *p, const struct tryapply_root *roots,
		 struct tryapply **out);
size_t tryapply_files(const struct tryapply *t);
int tryapply_stage_dirs(struct tryapply *t, const volatile bool *stop, struct tryapply_stats *st, char *err,
			size_t errlen);
int tryapply_stage_files(struct tryapply *t, size_t from, size_t to, const volatile bool *stop,
			 struct tryapply_stats *st, char *err, size_t errlen);
int tryapply_publish(struct tryapply *t, struct tryapply_stats *st, char *err, size_t errlen);
void tryapply_unstage(struct tryapply *t);
void tryapply_free(struct tryapply *t);

int tryapply_run(const struct trydiff *d, const struct tryplan *p, const struct tryapply_root *roots,
		 const volatile bool *stop, struct tryapply_stats *st, char *err, size_t errlen);

/* Remove what killed envds left under hidden names (loop; the removals
   run on the worker pool). Returns the number handed over. */
size_t tryapply_sweep(void);

/* Whether `name` (a base name) is one of the commit's hidden names. */
bool tryapply_name_is(const char *name);

#endif
