/* SPDX-License-Identifier: Apache-2.0 */
/*
 * watch.h - inotify directory watching on the event loop (docs/protocol.md,
 * "Watching").
 *
 * One struct fs_watch is one inotify instance watching a root directory
 * (and, when recursive, every directory below it, including ones created
 * later). Raw inotify events are turned into FilesystemEvent types and
 * names relative to the root, and handed to a callback on the loop.
 *
 * Errors: 0 or a negative errno naming the situation (see each function),
 * message in err; fs_service.c maps it to a code.
 */
#ifndef FS_WATCH_H
#define FS_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "filesystem.pb-c.h"

struct fs_watch;

/*
 * One event. `name` is relative to the root ("." for the root itself);
 * `path` is root + "/" + name as the entry would be stat'ed. Both are
 * valid only during the call. The callback must not free the watch.
 * EVENT_TYPE_OVERFLOW (name ".") means the kernel queue overflowed and
 * events were lost: the consumer should rescan.
 */
typedef void (*fs_watch_cb)(void *ud, const char *name, const char *path, Filesystem__EventType type);

/*
 * Validate `root` for watching: it exists, is a directory and, unless
 * allowed, is not on a network filesystem (NFS, CIFS/SMB, FUSE). Returns 0,
 * or a negative errno with the message in err: -ENOENT, -ENOTDIR, -EREMOTE
 * (network filesystem), -EIO (stat/statfs failed otherwise).
 */
int fs_watch_check(const char *root, bool allow_network_mounts, char *err, size_t errlen);

/*
 * Create the inotify instance and add the watches (for a recursive watch
 * this walks the whole tree, so it may take long): blocking, touches no
 * loop state, safe on a worker thread. Events that happen meanwhile wait
 * in the kernel queue. Returns 0 and *out, or -errno with err set
 * ("error adding path <W> to watcher: ...").
 */
int fs_watch_prepare(const char *root, bool recursive, struct fs_watch **out, char *err, size_t errlen);

/* Start delivering events to cb on the loop. Loop thread only. */
void fs_watch_start(struct fs_watch *w, fs_watch_cb cb, void *ud);

/* fs_watch_prepare + fs_watch_start. */
int fs_watch_new(const char *root, bool recursive, fs_watch_cb cb, void *ud, struct fs_watch **out,
		 char *err, size_t errlen);

/* Process every event the kernel has queued now (without waiting). */
void fs_watch_drain(struct fs_watch *w);

/* Stop and free. NULL is fine. */
void fs_watch_free(struct fs_watch *w);

/* Number of watched directories (tests). */
size_t fs_watch_count(const struct fs_watch *w);

/*
 * Map an inotify mask to event types, in the order CREATE, RENAME, CHMOD,
 * WRITE, REMOVE. Returns the number written to out (at most 5).
 */
size_t fs_watch_map(uint32_t mask, Filesystem__EventType out[5]);

#endif
