/* SPDX-License-Identifier: Apache-2.0 */
/*
 * trydiff.h - what a try changed (docs/try.md, "The diff"): the upper
 * directory of its overlay compared with the real directory below it.
 *
 * Only what the upper directory holds can differ, so the scan walks it and
 * looks at the real directory only where the layer names something:
 *   - a whiteout (overlayfs's mark of a deletion: a character device 0/0,
 *     or, where the kernel writes them, a zero-length file with the
 *     overlay.whiteout attribute) over a real entry: DELETED (a directory
 *     whole, its entries not listed);
 *   - an entry with no real counterpart: CREATED (in a new directory,
 *     every entry below it too);
 *   - an entry over a real one: MODIFIED when the content (bytes, a
 *     symlink's target, a device number) or the kind of entry differs,
 *     MODE when only the permission bits or the owner do, nothing when
 *     neither does (a copy-up without a change, times alone);
 *   - an opaque directory (overlay.opaque: the real entries below it are
 *     hidden, as after rm -rf and mkdir): the real entries the layer does
 *     not list are DELETED;
 *   - a regular file created whose overlay.origin (the file handle of the
 *     real file it was copied up from) is that of a file DELETED here:
 *     RENAMED from there (content says whether it was edited too).
 * Times are not compared. Overlay attributes are read under the `trusted.`
 * prefix (a layer mounted by root; `user.` for one mounted with userxattr).
 *
 * Paths are relative to the directory ("a/b"), depth first, names sorted
 * within a directory. The scan stops after `limit` changes (`truncated`),
 * which also leaves renames among the unlisted ones unpaired.
 *
 * Threads: the scan reads both trees (worker jobs). Errors: 0, or a
 * negative errno with a message naming the path: -ENOMEM, -ELOOP (deeper
 * than TRYDIFF_DEPTH_MAX), -EIO (a read failed).
 */
#ifndef TRY_TRYDIFF_H
#define TRY_TRYDIFF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "base/arena.h"

#define TRYDIFF_DEPTH_MAX 256
/* The largest file handle kept for rename pairing and the commit's check. */
#define TRYDIFF_HANDLE_MAX 64

enum trydiff_kind {
	TRYDIFF_CREATED = 1,
	TRYDIFF_MODIFIED,
	TRYDIFF_DELETED,
	TRYDIFF_RENAMED,
	TRYDIFF_MODE,
};

/* A file handle (name_to_handle_at's, or overlay's origin's). */
struct trydiff_handle {
	int type;
	uint8_t len; /* 0: none */
	uint8_t bytes[TRYDIFF_HANDLE_MAX];
};

struct trydiff_change {
	const char *path;     /* relative; in the diff's arena */
	const char *from;     /* RENAMED: the old relative path, else NULL */
	enum trydiff_kind kind;
	mode_t mode;          /* the layer's entry (type and bits); 0 when DELETED */
	mode_t old_mode;      /* the real entry; 0 when CREATED */
	uid_t uid, old_uid;
	gid_t gid, old_gid;
	int64_t size, old_size; /* -1 when absent */
	bool content;         /* the content (or the kind) differs */
	bool opaque;          /* a directory that hides the real one's entries */
	unsigned root;        /* which of the try's directories (trydiff_scan's `root`) */
	/*
	 * An entry of the layer: the handle of the real file it was copied up
	 * from (overlay.origin), when the kernel recorded one. DELETED: the
	 * real entry's own handle (for pairing renames).
	 */
	struct trydiff_handle handle;
};

struct trydiff {
	struct trydiff_change *v;
	size_t n, cap;
	size_t limit;
	bool truncated;
	struct arena arena;   /* paths */
};

void trydiff_init(struct trydiff *d, size_t limit);
void trydiff_free(struct trydiff *d);

/*
 * Compare the layer's upper directory `upper_fd` (an open directory) with
 * the real directory `lower` (absolute). The prefix of the overlay
 * attributes is `xattr_prefix` ("trusted." or "user."). Appends to d, its
 * changes marked with `root`.
 */
int trydiff_scan(int upper_fd, const char *lower, const char *xattr_prefix, unsigned root, struct trydiff *d,
		 char *err, size_t errlen);

/*
 * Whether two regular files have the same bytes (sizes first). 1 same, 0
 * different, or -errno of an open or read. Any thread.
 */
int trydiff_same_bytes(int dirfd_a, const char *a, int dirfd_b, const char *b);

/* The handle of `path` (not followed); 0 or -errno. Any thread. */
int trydiff_handle_of(const char *path, struct trydiff_handle *h);
bool trydiff_handle_eq(const struct trydiff_handle *a, const struct trydiff_handle *b);

/* The wire name of a kind ("created", ...), for logs and tests. */
const char *trydiff_kind_name(enum trydiff_kind k);

#endif
