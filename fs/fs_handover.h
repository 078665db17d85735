/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs_handover.h - the polled watchers' part of the live-upgrade record
 * (base/handover.h, docs/upgrade.md): each CreateWatcher watcher's id,
 * path, flags and the events not yet fetched, with its inotify instance
 * and watch table.
 *
 * The save keeps the inotify descriptor across the exec (events that
 * happen meanwhile wait in the kernel) and borrows the watchers' strings
 * and events (unchanged until the record is packed). The restore re-arms
 * each watcher under its old id (fs_service.h, fs_watcher_adopt): on the
 * same instance when the record carries one that is open, on a new one
 * otherwise (a record of the upstream implementation); counts go to
 * h->taken (watchers). Loop thread only.
 */
#ifndef FS_FS_HANDOVER_H
#define FS_FS_HANDOVER_H

struct handover;

void fs_handover_save(struct handover *h);
void fs_handover_restore(struct handover *h);

#endif
