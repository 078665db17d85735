/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fwrite.h - a file written whole, as uploads write them (docs/protocol.md,
 * "POST /files").
 *
 * Atomic (the default of uploads): the bytes go to a temporary file beside
 * the target (base/uptmp.h, registered so that the next envd removes it
 * if this one dies), which takes the target's owner (the user's), mode and
 * extended attributes (ACLs among them) and is renamed over the target
 * once complete: a reader sees the old content or the new, never half of
 * it, and a cut connection or a crash loses nothing. A target that a
 * rename would not replace as the client means it (a symlink, even a
 * dangling one, a device, a FIFO, a file with other hard links) is written
 * in place, as is every target when atomic is false: opened with O_TRUNC,
 * an existing file chowned to the user, a new one removed again if the
 * write fails.
 *
 * The parent directories are created as needed, owned by the user.
 *
 * Sources: bytes in pieces (fwrite_write, as they arrive), an fd
 * (fwrite_copy), or a whole buffer in one call (fwrite_buffer).
 *
 * Threads: every call makes syscalls on the target's path or an fd of a
 * file there: call them from a worker job (base/worker.h), never the loop.
 *
 * Errors: a negative errno that names the situation, with the message the
 * client sees written into err:
 *   -EISDIR        the target is a directory (HTTP 400);
 *   -ENAMETOOLONG  the temporary file's name does not fit (400);
 *   -ENOSPC        no room: no inode, no space for the data or the
 *                  attributes (507);
 *   -EIO           anything else (500).
 * After an error of fwrite_begin or fwrite_write, fwrite_discard() drops
 * what was written; fwrite_commit() cleans up after itself.
 */
#ifndef FS_FWRITE_H
#define FS_FWRITE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "fs/entry.h"

struct fwrite {
	int fd;               /* the file being written; -1 when none */
	bool created;         /* in place: the target did not exist before */
	char target[PATH_MAX];
	char tmp[PATH_MAX];   /* atomic: the temporary file; "" in place */
	char reg[320];        /* ... and its registry entry (base/uptmp.h) */
	/*
	 * Optional (set after fwrite_init): called by fwrite_commit right
	 * before the temporary replaces the target (closed, about to be
	 * renamed), on the same thread. A negative return abandons the
	 * write (the temporary is removed; the target stays as it is) and
	 * is fwrite_commit's result, with the hook's message in err. A
	 * writer checks there that the target is still what it expects
	 * (fs/fguard.h). Not called for a write in place, which replaced
	 * the target's content from fwrite_begin on.
	 */
	int (*before_replace)(void *arg, const char *target, char *err, size_t errlen);
	void *before_arg;
};

/* No file yet (fd -1): fwrite_discard() does nothing. No hook. */
void fwrite_init(struct fwrite *w);

/*
 * Open `target` (an absolute, resolved path) for writing as uid:gid,
 * atomically where `atomic` and a rename can replace it. 0 or an error
 * above.
 */
int fwrite_begin(struct fwrite *w, const char *target, uid_t uid, gid_t gid, bool atomic, char *err, size_t errlen);

/* Append n bytes. 0, -ENOSPC ("not enough disk space available") or -EIO. */
int fwrite_write(struct fwrite *w, const void *p, size_t n, char *err, size_t errlen);

/* Append what is left of fd `in` (copy_file_range where it can). As fwrite_write. */
int fwrite_copy(struct fwrite *w, int in, char *err, size_t errlen);

/*
 * Complete the file: set envd's metadata (`meta`, may be NULL; user.e2b.*
 * attributes, fs_meta_replace_fd), close, w->before_replace if set,
 * rename into place. 0, an error above or the hook's; either way w holds
 * no file afterwards.
 */
int fwrite_commit(struct fwrite *w, const struct fs_meta *meta, char *err, size_t errlen);

/*
 * fwrite_commit in two steps, for a writer that makes many files appear
 * together (a try's commit, docs/try.md: every file is written first, then
 * all are renamed into place at once). fwrite_stage sets the metadata and
 * closes the file, which stays a registered temporary beside the target
 * (written in place: it is complete as it stands); fwrite_publish runs
 * w->before_replace, if set, and renames it over the target. Each returns 0 or an error above; after an error w
 * holds no file. fwrite_discard drops a staged file too.
 */
int fwrite_stage(struct fwrite *w, const struct fs_meta *meta, char *err, size_t errlen);
int fwrite_publish(struct fwrite *w, char *err, size_t errlen);

/* Drop the file in progress: nothing half-written stays that was not there before. */
void fwrite_discard(struct fwrite *w);

/* fwrite_begin, fwrite_write of p[0..n), fwrite_commit; discarded on an error. */
int fwrite_buffer(const char *target, const void *p, size_t n, uid_t uid, gid_t gid, bool atomic,
		  const struct fs_meta *meta, char *err, size_t errlen);

/*
 * Copy all of fd `in` to fd `out` from where each stands: copy_file_range,
 * or read and write where the filesystems cannot. 0 or -errno.
 */
int fwrite_copy_fds(int in, int out);

#endif
