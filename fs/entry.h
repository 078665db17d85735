/* SPDX-License-Identifier: Apache-2.0 */
/*
 * entry.h - EntryInfo construction, user.e2b.* metadata and the directory
 * creation helper shared by the filesystem RPCs and /files (docs/protocol.md,
 * "EntryInfo", "Users and paths", "Go-compatible strings").
 *
 * Everything here does blocking syscalls on one path at a time; it is safe
 * to call from worker threads (no shared mutable state).
 *
 * Errors: 0 or a negative errno naming the situation, with a Go-shaped
 * message in err; the service edge maps it to a code.
 */
#ifndef FS_ENTRY_H
#define FS_ENTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "filesystem.pb-c.h"

/* Go's FileMode.String() for an st_mode, e.g. "-rw-r--r--". buf >= 16. */
void fs_perm_string(mode_t mode, char *buf, size_t len);

/* FILE / DIRECTORY / UNSPECIFIED for an st_mode (never SYMLINK: the
   reference reports a symlink by its target's type, and SDKs rely on it). */
Filesystem__FileType fs_file_type(mode_t mode);

/*
 * EntryInfo for `path` (used verbatim as the `path` field). Returns 0 and
 * a heap message in *out (free with fs_entry_free); -ENOENT with err
 * "file not found: lstat P: no such file or directory"; another -errno
 * with err "error getting file info: lstat P: <text>"; -ENOMEM.
 */
int fs_entry_info(const char *path, Filesystem__EntryInfo **out, char *err, size_t errlen);
/*
 * The same, built in the caller's `buf` (`len` bytes, aligned for any
 * type) when the message and its short strings fit, on the heap when not.
 * For a job that runs on a worker thread: no allocation there, so no
 * contention with the loop for the allocator's lock. fs_entry_free() still
 * releases it (what is on the heap; never buf), and must run before buf
 * is reused.
 */
int fs_entry_info_in(const char *path, void *buf, size_t len, Filesystem__EntryInfo **out, char *err,
		     size_t errlen);
void fs_entry_free(Filesystem__EntryInfo *e);
/* A copy of any EntryInfo (one decoded by protobuf-c, say) in the layout
 * fs_entry_free releases; NULL when out of memory. */
Filesystem__EntryInfo *fs_entry_dup(const Filesystem__EntryInfo *src);

/* Replace e->path with a copy of `path`. 0 or -ENOMEM. */
int fs_entry_set_path(Filesystem__EntryInfo *e, const char *path);

/* --- versions --- */

/*
 * A file's version: an opaque strong validator of its content (the
 * EntryInfo's `version`, ReadLines' `version`), built from what stat()
 * gives without reading the content: device, inode, size, mtime and ctime
 * in nanoseconds, mode; 32 hex digits (the first half of their SHA-256).
 * Any write, truncation, rename over the file or change of mode gives a
 * new ctime or inode, so a new version: see fs_version_settle() for
 * writes within one tick of the clock. Any thread.
 */
#define FS_VERSION_LEN 32
void fs_version(const struct stat *st, char out[FS_VERSION_LEN + 1]);
/*
 * Before fs_version() of a file whose ctime is still within the coarse
 * clock's current tick: wait (up to 20 ms) until the tick is over, so
 * that a later write in the same tick cannot keep the version. No wait
 * when a later write is bound to show anyway: the mtime is later than
 * the ctime (fs_version_stamp), or the filesystem has multigrain
 * timestamps (Linux 6.13 and later on ext4, xfs, btrfs, tmpfs: a change
 * after a stat gets a finer, later ctime). The filesystem is asked
 * through fd when >= 0, else path (only when the ctime is that recent).
 * Returns true when it waited: the caller stats the file again. Worker
 * threads only (it may sleep).
 */
bool fs_version_settle(const struct stat *st, int fd, const char *path);
/*
 * A file envd has just written (fd, before it is closed and renamed into
 * place): give it the precise current time as mtime, later than the
 * coarse ctime any write sets, so that its version is strong at once
 * (fs_version_settle does not wait for it). Nothing on a filesystem with
 * multigrain timestamps. 0, or -errno of futimens (EPERM: the thread's
 * user does not own the file; the version then waits as for any file).
 */
int fs_version_stamp(int fd);
/*
 * Whether the file `st` (open as fd) is on a filesystem with multigrain
 * timestamps, where neither fs_version_settle nor fs_version_stamp has
 * anything to do: a writer that stats one file several times asks once
 * (one fstatfs, and the mount table once per ext4 device). Any thread.
 */
bool fs_version_mgtime(const struct stat *st, int fd);


/* --- metadata (user.e2b.* xattrs) --- */

#define FS_META_PREFIX "user.e2b."
#define FS_META_KEY_MAX 246
#define FS_META_TOTAL_MAX 4096

struct fs_meta_kv {
	char *key;   /* without the prefix */
	char *value;
};

struct fs_meta {
	struct fs_meta_kv *kv;
	size_t n;
};

/*
 * Read user.e2b.* of `path` (following symlinks), keeping only UTF-8 keys
 * and values. Unsupported filesystems and other errors yield an empty set.
 */
void fs_meta_read(const char *path, struct fs_meta *m);
/*
 * fs_meta_read of the file open as fd. Returns the length of the file's
 * whole list of attribute names (all of them, not only user.e2b.*): 0
 * when it has no extended attribute at all; -1 when it could not be read.
 */
ssize_t fs_meta_read_fd(int fd, struct fs_meta *m);
void fs_meta_clear(struct fs_meta *m);
/* Add key/value (copied); a key already present keeps its first value. */
int fs_meta_add(struct fs_meta *m, const char *key, size_t klen, const char *value, size_t vlen);
/*
 * Validate a metadata set: non-empty keys of at most FS_META_KEY_MAX bytes,
 * keys and values printable ASCII, at most FS_META_TOTAL_MAX bytes in total
 * counted as the reference does (9 + key + value each). Returns 0, or
 * -EINVAL with the reason (without the "invalid metadata: " prefix) in err.
 */
int fs_meta_validate(const struct fs_meta *m, char *err, size_t errlen);
/*
 * Make fd's user.e2b.* set exactly `m`. Returns 0 (also when the
 * filesystem has no xattr support), or -errno of the failing call.
 */
int fs_meta_replace_fd(int fd, const struct fs_meta *m);

/*
 * EnsureDirs: create every missing component of `dir`, 0755, given to
 * uid/gid on its descriptor (fs/wpath.h: past a symbolic link of another
 * user's, created as that user could). Returns 0 or -errno with err set
 * to the Go-shaped message ("path is a file: /a", "failed to create
 * directory: ..."); -EACCES where the walk's identity may not create.
 */
int fs_ensure_dirs(const char *dir, uid_t uid, gid_t gid, char *err, size_t errlen);

/* Go filepath.Dir (cleaned parent) of `path`, into out. */
void fs_path_dir(const char *path, char *out, size_t outlen);

/*
 * out = a + "/" + b (b == "" gives a). Returns 0, or -ENAMETOOLONG with
 * out truncated to "".
 */
int fs_join(char *out, size_t outlen, const char *a, const char *b);

/* True if s[0..n) is valid UTF-8. */
bool fs_utf8_valid(const char *s, size_t n);

#endif
