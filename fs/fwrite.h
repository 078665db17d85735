/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fwrite.h - a file written whole, as uploads write them (docs/protocol.md,
 * "POST /files"; docs/security.md, "Uploads and in-place writes").
 *
 * Where: the target's directory is walked with fs/wpath.h, which creates
 * the missing parents (owned by the user) and holds root's rights back
 * from whatever a symbolic link of another user's leads to: every name in
 * that directory is then made, opened, renamed or removed relative to its
 * descriptor, with the walk's identity. The target's own name is looked
 * at once (fstatat, not followed) and whatever is opened is checked to be
 * that same file.
 *
 * Atomic (the default of uploads): the bytes go to a temporary file beside
 * the target (base/uptmp.h, registered so that the next envd removes it
 * if this one dies), which is renamed over the target once complete: a
 * reader sees the old content or the new, never half of it, and a cut
 * connection or a crash loses nothing. Over an existing file the
 * temporary is created 0600 and, before its first byte, takes what an
 * in-place write would have left: owned by the user, the target's mode
 * with the set-user-ID bit (and the set-group-ID bit of a group-executable
 * file) cleared as chown(2) clears them, and the target's extended
 * attributes that may pass (base/uptmp.h: user.* and ACLs; never
 * security.* or trusted.*), all read from one descriptor of the target.
 * When the commit finds another file under the name than the one the
 * attributes came from (another writer replaced it meanwhile), it takes
 * that one's. A new target's temporary is created as the file would be
 * (0666 before umask, the directory's default ACL) and given to the user.
 *
 * In place: a target that a rename would not replace as the client means
 * it (a symlink, even a dangling one, which is followed under the wpath
 * rule; a device, a FIFO; a file with other hard links), and every target
 * when atomic is false: the existing file is opened (not followed), given
 * to the user and truncated; a missing one is created (O_EXCL, so never
 * through a link someone swapped in) and removed again if the write fails.
 * Except: a write with root's rights does not go through another name of
 * a file that someone other than root and the file's owner could have put
 * in the directory (a hard link to /etc/shadow in /tmp): it replaces the
 * name, as an atomic write does, whatever `atomic` says.
 *
 * Sources: bytes in pieces (fwrite_write, as they arrive), an fd
 * (fwrite_copy), or a whole buffer in one call (fwrite_buffer). Ends:
 * fwrite_commit, or fwrite_stage and later fwrite_publish for files that
 * must appear together (a try's commit).
 *
 * Threads: every call makes syscalls on the target's path or an fd of a
 * file there: call them from a worker job (base/worker.h), never the loop.
 * A job may run under base/fsid (the writes are then that user's: the
 * kernel checks them, and links are followed as they are).
 *
 * Errors: a negative errno that names the situation, with the message the
 * client sees written into err:
 *   -EISDIR        the target is a directory (HTTP 400);
 *   -ENAMETOOLONG  the temporary file's name does not fit (400);
 *   -EACCES        the write's identity may not write there: a link of
 *                  another user's leads where that user may not (403);
 *   -ENOSPC        no room: no inode, no space for the data or the
 *                  attributes (507);
 *   -EIO           anything else (500);
 * and whatever a writer's before_replace hook returns (Edit's and the
 * conditional upload's -ESTALE: the target changed).
 * After an error of fwrite_begin or fwrite_write, fwrite_discard() drops
 * what was written; fwrite_commit() cleans up after itself.
 */
#ifndef FS_FWRITE_H
#define FS_FWRITE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "fs/entry.h"
#include "fs/wpath.h"

struct fwrite {
	int fd;               /* the file being written; -1 when none */
	bool created;         /* in place: the target did not exist before */
	char target[PATH_MAX];
	char tmp[PATH_MAX];   /* atomic: the temporary file; "" in place */
	char reg[320];        /* ... and its registry entry (base/uptmp.h) */
	struct wpath at;      /* the directory written in, the name there, the identity for names there */
	uid_t uid;            /* the owner fwrite_begin was given */
	gid_t gid;
	bool replaces;        /* atomic over a file: dev/ino, whose attributes the temporary took */
	dev_t dev;
	ino_t ino;
	bool src_checked;     /* fwrite_begin_from: the hook, not the commit, checks dev/ino */
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

/*
 * fwrite_begin for a writer that has looked at the target already, so
 * that neither the walk nor the look is made twice (Edit: its snapshot
 * was read from that same descriptor). `at` is wpath_parent(target)
 * with no directory to make, taken over by w (at->dirfd is -1 after
 * the call, whatever it returns); `src` an fd of the regular file the
 * name led to when opened there not followed (borrowed: the source of
 * the replacement's attributes, not used after this call; -1 when the
 * writer found that the file has no extended attribute, and its hook
 * sees one added since), `st` its fstat. An atomic write then makes its temporary without looking at
 * the name again; a write in place opens the name and checks that it is
 * still st's file (else it goes on as fwrite_begin would). The
 * caller's w->before_replace, set before this call, must fail when the
 * name no longer leads to src's file (Edit's version check compares
 * device and inode): fwrite_commit then leaves that check to it instead
 * of looking again itself. 0 or an error above (-EIO when st is not a
 * regular file).
 */
int fwrite_begin_from(struct fwrite *w, const char *target, struct wpath *at, int src, const struct stat *st, uid_t uid,
		      gid_t gid, bool atomic, char *err, size_t errlen);

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
 * w->before_replace, if set, and renames it over the target. Each returns
 * 0 or an error above; after an error w holds no file. fwrite_discard
 * drops a staged file too.
 *
 * A staged file is known by its names alone (target, tmp, reg: a writer
 * may keep those and publish or discard through another struct fwrite
 * with only them set): fwrite_stage lets go of the directory's descriptor
 * (fwrite.h's walk), so fwrite_publish walks to the directory again (the
 * same rule as fwrite_begin: past another user's link, with their
 * identity) and renames there; fwrite_discard removes by path, with the
 * calling thread's rights. fwrite_commit keeps the
 * descriptor to the end: its rename is made in the directory it walked.
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
