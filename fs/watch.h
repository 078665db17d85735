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
 * The loop never touches the watched filesystem: an event that needs it (a
 * new directory under a recursive watch is added and walked; with entries,
 * the entry of a CREATE, WRITE or CHMOD is stat'ed) is handled in a worker
 * job with the root's mount key, and so is every later event of the same
 * watch until the job is done, so the callback sees them in inotify's
 * order, possibly later than they were read (fs_watch_busy). Events queued
 * behind a job are bounded; past the bound, an overflow event.
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
 * valid only during the call. `entry` is the stat'ed entry of a CREATE,
 * WRITE or CHMOD of a watch started with entries (NULL otherwise, or when
 * the entry was gone); the callback owns it (fs_entry_free). The callback
 * must not free the watch.
 * EVENT_TYPE_OVERFLOW (name ".") means the kernel queue, or the watch's own
 * queue behind a job, overflowed and events were lost: the consumer should
 * rescan.
 */
typedef void (*fs_watch_cb)(void *ud, const char *name, const char *path, Filesystem__EventType type,
			    Filesystem__EntryInfo *entry);

/* Every event read so far has been handed to the callback (loop). */
typedef void (*fs_watch_idle_cb)(void *ud);

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

/*
 * Start delivering events to cb on the loop; with `entries`, CREATE, WRITE
 * and CHMOD events carry the entry. `idle` (optional) runs on the loop when
 * a job's events have been delivered and none wait any more. Loop thread
 * only.
 */
void fs_watch_start(struct fs_watch *w, bool entries, fs_watch_cb cb, fs_watch_idle_cb idle, void *ud);

/* fs_watch_prepare + fs_watch_start. */
int fs_watch_new(const char *root, bool recursive, bool entries, fs_watch_cb cb, fs_watch_idle_cb idle, void *ud,
		 struct fs_watch **out, char *err, size_t errlen);

/*
 * Read every event the kernel has queued now (without waiting): those that
 * need no filesystem are delivered at once, unless a job is in flight; the
 * rest go to the watch's job.
 */
void fs_watch_drain(struct fs_watch *w);

/* Events have been read that the callback has not seen yet (a job). */
bool fs_watch_busy(const struct fs_watch *w);

/* Stop and free. NULL is fine. A job in flight finishes first, on its
 * own, and delivers nothing. */
void fs_watch_free(struct fs_watch *w);

/*
 * Live upgrade. The inotify descriptor and the watch-descriptor table are
 * what a new image needs to carry on with the same instance, so events
 * that happen during the exec wait in the kernel instead of being lost.
 */
int fs_watch_fd(const struct fs_watch *w);
/*
 * The i-th watched directory: 1 and *wd, *rel (relative to the root); 0 past
 * the end. While a job is in flight the table may change between calls (an
 * entry missed or seen twice); *rel stays valid until the loop runs again.
 */
size_t fs_watch_wd(const struct fs_watch *w, size_t i, int *wd, const char **rel);
/*
 * A watch on an inherited inotify descriptor with its table (copied); the
 * descriptor becomes the watch's (close-on-exec and non-blocking again)
 * on success, and stays the caller's on failure. 0 or -ENOMEM.
 */
int fs_watch_adopt(int fd, const char *root, bool recursive, const int *wds, const char *const *rels, size_t n,
		   struct fs_watch **out);

/* Number of watched directories (tests); safe while a job runs. */
size_t fs_watch_count(const struct fs_watch *w);

/*
 * Map an inotify mask to event types, in the order CREATE, RENAME, CHMOD,
 * WRITE, REMOVE. Returns the number written to out (at most 5).
 */
size_t fs_watch_map(uint32_t mask, Filesystem__EventType out[5]);

#endif
