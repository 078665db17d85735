/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsjob.h - what the /files handlers share to keep user files off the
 * event loop.
 *
 * A file on a FUSE or network mount can block every call on it: open,
 * read, sendfile and close too (FUSE sends a FLUSH on each close). Those
 * run in worker jobs keyed by the file's mount. Only a file whose mount is
 * of a local kind (ext4, xfs, btrfs, tmpfs, overlay...) may be sent with
 * sendfile from the loop and closed there.
 *
 * Which mount a file is on is asked of the open fd (statx's mount id,
 * fstatfs's kind; /proc's fdinfo and mountinfo where statx cannot tell),
 * never of the path; so a symlink into another mount is judged by where
 * it really leads.
 */
#ifndef TRANSFER_FSJOB_H
#define TRANSFER_FSJOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

/*
 * Worker side. The mount of open file `fd`: *key as worker_path_key()
 * would give for a path on it, *local when its fstype is one that cannot
 * hang. Returns 0, or -errno (then *key = 1 and *local = false).
 */
int fsjob_fd_mount(int fd, uint64_t *key, bool *local);

/*
 * Worker side. fstat(fd) and fsjob_fd_mount(fd) in one: *st as fstat
 * gives it, *key and *local as fsjob_fd_mount. Where the kernel names
 * mounts by an id it never reuses (statx's STATX_MNT_ID_UNIQUE, Linux
 * 6.8), a mount's key and kind are remembered per thread: one statx then
 * answers all of it. Returns 0, or -errno when fstat fails (*key = 1 and
 * *local = false also when only the mount cannot be told).
 */
int fsjob_fd_stat(int fd, struct stat *st, uint64_t *key, bool *local);

/* True for the fstypes whose calls never wait on a server (pure). */
bool fsjob_fstype_local(const char *fstype);

/*
 * Loop side. Close fd where it cannot stall the loop: here when `local`,
 * else in a worker job of `key`. Never fails: when the pool is full the
 * close is retried until a job takes it.
 */
void fsjob_close(int fd, uint64_t key, bool local);

/*
 * Loop side. Run fn(arg) in a worker job of `key` (no deadline): the way
 * to free what holds fds of user files (directory streams, a writer
 * walking a tree). Never fails, as fsjob_close.
 */
void fsjob_release(void (*fn)(void *), void *arg, uint64_t key);

/* "filesystem did not answer within N s: PATH" into out. */
void fsjob_timeout_msg(char *out, size_t len, double secs, const char *path);

/* "filesystem worker queue is full, retry later: PATH" into out. */
void fsjob_busy_msg(char *out, size_t len, const char *path);

/* Closes and releases handed over and not yet done (tests, metrics). */
size_t fsjob_pending(void);

#endif
