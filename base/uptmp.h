/* SPDX-License-Identifier: Apache-2.0 */
/*
 * uptmp.h - temporary files of atomic uploads (docs/protocol.md, "POST
 * /files"; docs/crash.md).
 *
 * An upload writes `<dir>/.envd-upload.<k><16 hex>` beside its target and
 * renames it over the target once complete; <k> is `r` when the target
 * existed (the rename replaces it) and `n` when it is new, so a watcher
 * can report the rename as the write it stands for.
 *
 * Every temporary file in use is registered in a small directory on tmpfs
 * (uptmp_registry), so that the next envd removes what a killed one left
 * behind (uptmp_sweep). Each envd keeps one slot file there,
 * `slots.<pid>.<16 hex>` (the hex tells an instance from the image it
 * replaced in a live upgrade, which had the same pid), made (mode 0600,
 * the directory 0700 when missing) and opened once as root, its descriptor
 * (close-on-exec) held for the process's life: UPTMP_SLOTS records of
 * UPTMP_SLOT_SIZE bytes, a slot per temporary in use. A record is a
 * 16-byte head (magic "EUS1", the path's length, an FNV-1a sum of the
 * length and the path) and the absolute path, NUL-terminated; registering
 * writes it, forgetting zeroes the head: one pwrite() each, with no
 * credential change and no path lookup, and slots are handed out from a
 * bitmap without a system call. When no slot is free, the path is longer
 * than UPTMP_SLOT_PATH_MAX or the slot file cannot be made, the entry is a
 * symlink to the file, `<pid>.<16 hex of its name>`, as older envds wrote
 * them.
 *
 * uptmp_registry is read at the first registration (the slot file is
 * made in it then); set it before.
 *
 * uptmp_create_registered, uptmp_register, uptmp_open, uptmp_forget and the
 * attribute copies make file syscalls: call them from the worker pool.
 * uptmp_sweep runs on the loop and hands the removals to the worker pool.
 */
#ifndef ENVD_UPTMP_H
#define ENVD_UPTMP_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define UPTMP_PREFIX ".envd-upload."

/* The registry directory; "" disables registration and the sweep. */
extern char uptmp_registry[256];

/* Slots of one envd: uploads, Edits and archive extractions hold one
 * temporary each while they write, a try's commit one per staged file;
 * beyond that, symlink entries. The file is sparse: a page per eight
 * records ever used at once, 512 KiB at most. */
#define UPTMP_SLOTS 1024
#define UPTMP_SLOT_SIZE 512
/* The longest path a slot records (the rest of a record is its head). */
#define UPTMP_SLOT_PATH_MAX (UPTMP_SLOT_SIZE - 16 - 1)

/*
 * Register tmp (a temporary's path) under uptmp_registry; reg gets
 * the entry (`<slot file>#<slot>`, or a symlink's path), "" when there is
 * none (no registry, or it could not be written: best effort, only a
 * crash's leftover then stays). Safe from many threads at once.
 */
void uptmp_register(const char *tmp, char *reg, size_t reglen);

/*
 * Create a new temporary file for a target in directory `dirfd` (an fd
 * of it, O_PATH will do, or AT_FDCWD) whose path is `dir`: O_WRONLY |
 * O_CREAT | O_EXCL (never through a link), mode `mode` before umask.
 * `replaces`: the target exists. On
 * success returns the fd and fills tmp with the file's path (`dir` joined
 * with its name, which starts after the last '/'). Returns -errno of
 * openat(); -ENAMETOOLONG when the path does not fit.
 *
 * The file is registered (uptmp_register, reg filled) before it is made,
 * so a daemon killed at any point leaves no temporary the next one's
 * sweep does not know (at worst an entry for a file never made); after
 * an error nothing is left registered. May run under a user's identity
 * (base/fsid.h): the entry is written with root's.
 */
int uptmp_create_registered(int dirfd, const char *dir, bool replaces, mode_t mode, char *tmp, size_t tmplen,
			    char *reg, size_t reglen);

/* uptmp_create_registered(AT_FDCWD, dir, replaces, 0666, ...). */
int uptmp_open(const char *dir, bool replaces, char *tmp, size_t tmplen, char *reg, size_t reglen);

/* Drop a registry entry (the file was renamed or removed): the slot is
 * free again once its record is cleared. reg may be "". */
void uptmp_forget(const char *reg);

/*
 * Copy the extended attributes of the file open as `from` to fd `to`,
 * except those a replacement must not inherit: envd's own metadata
 * (user.e2b.*, which the upload sets), every security.* attribute (file
 * capabilities, which would hand the new content privileges; integrity
 * hashes of the old content; LSM labels, which the kernel's policy gives a
 * new file) and every trusted.* one (root-only attributes that describe
 * the old inode to the kernel or a daemon, overlayfs's among them). What
 * is kept: user.* and system.* (ACLs). Attributes the filesystem or our
 * privileges refuse are skipped.
 * Returns 0, or -ENOSPC / -EDQUOT when the space ran out.
 */
int uptmp_copy_attrs_fd(int from, int to);

/*
 * As uptmp_copy_attrs_fd, from the file `target` names (not followed if a
 * symlink). A name can be swapped between calls: writers take a
 * descriptor's (fs/fwrite.h does).
 */
int uptmp_copy_attrs(const char *target, int fd);

/*
 * Whether `name` (a base name) is an upload's temporary file; if so and
 * `replaces` is not NULL, whether the target existed.
 */
bool uptmp_name_is(const char *name, size_t len, bool *replaces);

/*
 * Remove the temporary files registered by envd processes that are gone
 * (a crash or a kill left them): slot files and symlink entries of pids
 * that no longer run, or of our own pid but not our own slot file (the
 * image a live upgrade replaced). Only a path whose last component passes
 * uptmp_name_is is unlinked (a link by that name is removed, not
 * followed), and from a slot only a whole record (its sum matches): a
 * torn or planted one is skipped. A slot file is removed once the files
 * it names are; symlink entries one by one. Loop thread, at start; the unlinks run on the worker pool.
 * Returns the number of files handed over for removal.
 */
size_t uptmp_sweep(void);

/*
 * The temporaries registered under uptmp_registry by any envd: whole
 * records of slot files, and symlink entries. Makes file syscalls (for
 * tests and diagnostics).
 */
size_t uptmp_registered(void);

#endif
