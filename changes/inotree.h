/* SPDX-License-Identifier: Apache-2.0 */
/*
 * inotree.h - recursive inotify watches over a few directory trees, the
 * change journal's source where fanotify is unavailable (changes/changes.c;
 * docs/protocol.md, "Changes").
 *
 * A tree watches each root and every directory below it on the same
 * filesystem (it does not cross into other mounts), breadth first, at
 * most `max_watches` directories. It turns the kernel's inotify records
 * into changes for the journal: a path, the JK_* kinds (changes/journal.h),
 * whether the change made the path appear. Directories that appear are
 * watched at once and listed after the watch is added, so entries made
 * before the watch existed are reported as created. IN_MOVED_FROM and
 * IN_MOVED_TO with the same cookie are one rename (old path removed, new
 * one created, both RENAME; a watched directory keeps its watches under
 * its new name); a move whose other half is not seen is a delete or a
 * create. Past the budget, when the kernel refuses a watch, or when its
 * queue overflowed, the sink is told that changes were lost.
 *
 * Threads: a tree belongs to one thread, which makes every call. The
 * system calls (add a watch, list a directory, remove a watch) go through
 * `struct inotree_ops`, so the journal's reader thread makes them and the
 * unit tests can feed records without a kernel.
 *
 * Ownership: the tree owns its nodes and copies every path it is given;
 * paths handed to the sink are valid for the call only.
 * Errors: negative errno values.
 */
#ifndef CHANGES_INOTREE_H
#define CHANGES_INOTREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The system calls, injected. */
struct inotree_ops {
	/* Watch the directory at `path`: its watch descriptor, or -errno. */
	int (*add_watch)(void *ud, const char *path);
	void (*rm_watch)(void *ud, int wd);
	/*
	 * Call fn for each entry of the directory at `path` (not "." or
	 * ".."); `descend` is true for a subdirectory on the same filesystem
	 * (not a mount point, not a symlink). Stops when fn returns non-zero.
	 * 0 or -errno.
	 */
	int (*list)(void *ud, const char *path, int (*fn)(void *ctx, const char *name, bool descend), void *ctx);
	void *ud;
};

/* Where changes go. */
struct inotree_sink {
	/*
	 * One change of `path` (absolute). `appeared`: created or moved in.
	 * `dir`: it is, or was, a directory. `since_ns`: 0 for a change the
	 * kernel reported; else the entry was found in the first listing of
	 * a root added with a `recent_ns`, and is a change only if it changed
	 * at or after that wall-clock time (the sink looks).
	 */
	void (*change)(void *ud, const char *path, unsigned kinds, bool appeared, bool dir, int64_t since_ns);
	/* Changes were lost (overflow, a directory that could not be watched). */
	void (*lost)(void *ud);
	void *ud;
};

struct inotree;

/* A tree with no roots. NULL when out of memory. */
struct inotree *inotree_new(const struct inotree_ops *ops, const struct inotree_sink *sink, size_t max_watches);
/* Free the tree; the watches are left to the caller's descriptor (closing it removes them). */
void inotree_free(struct inotree *t);

/*
 * Watch the directory at `path` (absolute, clean) and everything below
 * it. Nothing is reported for entries already there, except, with
 * recent_ns > 0, each entry as a possible change since then (see
 * inotree_sink). A root that is, or lies below, a watched directory
 * adds nothing. 0, 1 when already watched, or -errno of the root's watch
 * (-ENOSPC past the budget).
 */
int inotree_add_root(struct inotree *t, const char *path, int64_t recent_ns);

/* Feed `len` bytes of struct inotify_event records, as read(2) gave them. */
void inotree_feed(struct inotree *t, const void *buf, size_t len);

/*
 * A move's first half waits for its second: true while one does. The
 * reader looks at the descriptor once more, briefly, then calls
 * inotree_flush, which reports each waiting half as a delete.
 */
bool inotree_pending(const struct inotree *t);
void inotree_flush(struct inotree *t);

/* Directories watched now. */
size_t inotree_watches(const struct inotree *t);

/* The roots (absolute paths), for replies; fn is called once per root. */
void inotree_each_root(const struct inotree *t, void (*fn)(void *ud, const char *path), void *ud);

#endif
