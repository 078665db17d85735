/* SPDX-License-Identifier: Apache-2.0 */
/*
 * walk.h - a directory tree walked by several threads at once, with
 * ripgrep's default filters: ignore files (search/ignore.h), hidden
 * entries skipped, symbolic links not followed (nor listed), include and
 * exclude globs.
 *
 * The walk is a shared stack of directories still to read. Each thread
 * has a cursor: it takes a directory, reads all of its entries (the
 * ignore files among them are read and parsed first), pushes the
 * subdirectories that pass for any thread to take, and hands out the
 * files one by one (walk_next). Threads that find the stack empty while
 * another still reads a directory wait for it; the walk is over when the
 * stack is empty and no thread holds a directory.
 *
 * The kernel's own filesystems (proc, sysfs, cgroup, debugfs, ...) are
 * not entered below the root: their files never end or block (/proc/kmsg)
 * and are no one's sources. The root itself may be one.
 *
 * The root may be a file: it is then the only entry, whatever the ignore
 * rules say (a path named explicitly is searched, as ripgrep does). Ignore
 * files of the root's ancestors count as they do for ripgrep (a
 * .gitignore at the repository's top applies to a walk of a
 * subdirectory). What they say is kept for the next walk of the same
 * root as the same user, and taken again once a stat per ancestor
 * directory and per ignore file found shows nothing changed (walk.c).
 *
 * Blocking: everything here makes system calls on the walked paths and
 * must run on a worker thread (as the request's user: search/../base/fsid.h).
 *
 * Memory: a cursor holds one directory's entries (up to WALK_DIR_BUF
 * bytes of them at once); the stack holds a path per directory waiting.
 *
 * Ownership: the walk owns copies of nothing the caller passes but the
 * root path: globs and the options must outlive it.
 *
 * Errors: walk_next() returns 1 (an entry), 0 (the walk is over),
 * -ECANCELED (walk_stop() was called), -ENOMEM, or a negative errno for
 * the root (-ENOENT: it does not exist; -EINVAL: it is neither a regular
 * file nor a directory; a symbolic link to either is followed).
 * Directories that cannot be read below the root are counted
 * (walk_stats), not returned.
 */
#ifndef SEARCH_WALK_H
#define SEARCH_WALK_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "search/glob.h"

#define WALK_DIR_BUF (64 * 1024)

struct walk_opts {
	bool hidden;               /* include hidden files and directories */
	bool no_ignore;            /* ignore files are not read */
	bool git_anywhere;         /* .gitignore outside a git repository too */
	/* ripgrep's -g, relative to the root: an entry matching an exclude
	 * is left out; one matching an include is taken, whatever the ignore
	 * files and hidden say; with includes, a file matching none is left
	 * out (directories are not: they go on to the other filters). */
	const struct glob *const *include;
	size_t n_include;
	const struct glob *const *exclude;
	size_t n_exclude;
	const struct glob *prune;  /* directories where it cannot match are not entered */
	bool dirs;                 /* hand out directories too (after their filters) */
	void (*progress)(void);    /* called per directory entry (worker_progress) */
};

struct walk_entry {
	const char *path;     /* absolute; valid until the next walk_next() on the cursor */
	size_t len;
	const char *rel;      /* relative to the root ("" for a root that is a file's name...) */
	size_t rel_len;
	int dirfd;            /* the directory holding it (for openat), or AT_FDCWD */
	const char *name;     /* its name in dirfd (or the whole path) */
	bool is_dir;
	bool explicit_file;   /* the root itself, a file */
	/* on a filesystem of a local disk or of memory (ext4, xfs, btrfs,
	 * f2fs, tmpfs, ramfs, squashfs, overlay), where a read of a regular
	 * file that comes back short has met its end; false when unknown
	 * (FUSE, NFS, ..., the root given as a file) */
	bool local;
};

struct walk_stats {
	uint64_t dirs;          /* directories read */
	uint64_t dirs_denied;   /* directories that could not be read (permission) */
	uint64_t dirs_failed;   /* ... for another reason */
	uint64_t entries;       /* directory entries looked at */
	uint64_t dirs_pseudo;   /* directories of the kernel's filesystems left out */
	bool ancestors_kept;    /* the ignore files above the root were not read again:
				 * the kept reading of them still held */
};

struct walk;
struct walk_cursor;

/* root: an absolute path, copied. NULL when out of memory. */
struct walk *walk_new(const char *root, const struct walk_opts *o);
void walk_free(struct walk *w);
/* Stop every thread at its next step (any thread). */
void walk_stop(struct walk *w);
bool walk_stopped(const struct walk *w);

struct walk_cursor *walk_cursor_new(struct walk *w);
/* Gives back the directory the cursor holds, if any. */
void walk_cursor_free(struct walk_cursor *c);
/*
 * A cursor kept for another walk (its listing buffer is allocated once):
 * walk_cursor_detach() lets go of its walk as walk_cursor_free() would
 * (before that walk is freed), walk_cursor_attach() gives it the next.
 */
void walk_cursor_detach(struct walk_cursor *c);
void walk_cursor_attach(struct walk_cursor *c, struct walk *w);

int walk_next(struct walk_cursor *c, struct walk_entry *e);

/* Summed over the cursors whose walk_next() said the walk is over, or
 * that were freed. */
void walk_get_stats(struct walk *w, struct walk_stats *st);

#endif
