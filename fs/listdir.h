/* SPDX-License-Identifier: Apache-2.0 */
/*
 * listdir.h - the ListDir walk and the recursive remove (docs/protocol.md,
 * "filesystem.Filesystem"),
 * as blocking functions meant for the worker pool.
 *
 * Errors: 0 or a negative errno naming the situation (see each function),
 * message in err; fs_service.c maps it to a code.
 */
#ifndef FS_LISTDIR_H
#define FS_LISTDIR_H

#include <stddef.h>
#include <stdint.h>

#include "filesystem.pb-c.h"

/* Most entries one ListDir returns; more is resource_exhausted. */
#define FS_LISTDIR_MAX_ENTRIES 1000000

struct fs_listing {
	Filesystem__EntryInfo **entries;
	size_t n, cap;
};

/*
 * List `requested` (a resolved path) to `depth` levels (0 means 1).
 * Returns 0 with the entries in `out`, or a negative errno with a message
 * in err: -ENOENT (the path or a component is missing), -ENOTDIR (not a
 * directory), -ELOOP (symlink loop), -ENOMEM, -E2BIG (more than
 * FS_LISTDIR_MAX_ENTRIES), -EIO (any other failure, reported as internal).
 */
int fs_listdir(const char *requested, uint32_t depth, struct fs_listing *out, char *err, size_t errlen);
void fs_listing_free(struct fs_listing *l);

/*
 * The same walk one entry at a time, for a reply written as it is read
 * (fs_service.c streams a large ListDir): bounded memory, the first entry
 * at once. fs_walk_open checks `requested` as fs_listdir does (same
 * errors, same messages) and reads its names; NULL in *out on error.
 * fs_walk_next returns 1 with the next entry in *out (pre-order, the same
 * order and entries as fs_listdir), 0 at the end, or a negative errno with
 * a message (-EIO, -ENOMEM, -E2BIG as fs_listdir). The entry belongs to
 * the walk and is valid until the next call or fs_walk_close. Blocking:
 * run the calls on the worker pool, any thread, one at a time;
 * fs_walk_close makes no system call (the loop may run it).
 */
struct fs_walk;
int fs_walk_open(const char *requested, uint32_t depth, struct fs_walk **out, char *err, size_t errlen);
int fs_walk_next(struct fs_walk *w, Filesystem__EntryInfo **out, char *err, size_t errlen);
void fs_walk_close(struct fs_walk *w);

/*
 * The names in directory `dir` without "." and "..", sorted byte-wise.
 * Returns 0 with a malloc'd array of *n malloc'd names (fs_names_free()),
 * or a negative errno (opendir's, or -ENOMEM).
 */
int fs_read_names(const char *dir, char ***names, size_t *n);
void fs_names_free(char **names, size_t n);

/*
 * rm -rf without following symlinks. A missing path is success. The name
 * is removed from its directory as fs/wpath.h walked it (past a symbolic
 * link of another user's, with that user's rights: -EACCES where it may
 * not). "/" itself is refused (-EBUSY). Returns 0 or -errno with err
 * "unlinkat <path>: <text>" (the failing call).
 */
int fs_remove_all(const char *path, char *err, size_t errlen);

#endif
