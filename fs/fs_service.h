/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs_service.h - the filesystem.Filesystem Connect service
 * (docs/protocol.md, "filesystem.Filesystem").
 * main registers it with rpc_register(&fs_service).
 *
 * Errors: the internals' negative errno values are mapped once, with
 * rpc_code_from_errno() (rpc/rpcerr.h), where a call is answered.
 */
#ifndef FS_FS_SERVICE_H
#define FS_FS_SERVICE_H

#include <stdbool.h>
#include <stddef.h>

#include "filesystem.pb-c.h"

#include "rpc/rpc.h"

extern const struct rpc_service fs_service;

/* Limit on CreateWatcher watchers alive at once (at most 4096). */
extern size_t fs_max_watchers;

/* Watchers created with CreateWatcher and not yet removed (tests, metrics). */
size_t fs_service_watcher_count(void);

/* Live upgrade: a CreateWatcher watcher as the hand-over record holds it. */
struct fs_watch;
struct fs_watcher_snapshot {
	const char *id, *path;
	bool recursive, include_entry;
	const Filesystem__FilesystemEvent *const *events; /* not yet fetched */
	size_t n_events;
	/* Export: the live watch (fs_watch_fd, fs_watch_wd). Adopt: NULL. */
	const struct fs_watch *watch;
	/* Adopt: an inherited inotify instance and its table, or fd -1. */
	int inotify_fd;
	const int *wds;
	const char *const *rels;
	size_t n_wds;
};

/* End every WatchDir stream with `code` and `msg` (clients re-subscribe). */
void fs_end_streams(enum rpc_code code, const char *msg);

/* Every watcher, after draining what the kernel has queued. */
void fs_watchers_snapshot_each(void (*fn)(void *ud, const struct fs_watcher_snapshot *s), void *ud);

/* Re-arm a watcher under its old id with its pending events. 0 or -errno. */
int fs_watcher_adopt(const struct fs_watcher_snapshot *s, char *err, size_t errlen);

#endif
