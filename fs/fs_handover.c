/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs_handover.c - the polled watchers' part of the hand-over record
 * (fs_handover.h), on the Filesystem service's snapshot and adopt hooks.
 */
#include "fs/fs_handover.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/handover.h"
#include "base/log.h"
#include "fs/fs_service.h"
#include "fs/watch.h"

#define LOGGER "envd"

static void add_watcher(void *ud, const struct fs_watcher_snapshot *s)
{
	struct handover *h = ud;
	Upgrade__HandoverWatcher *w = handover_alloc(h, sizeof(*w));

	if (!w)
		return;
	upgrade__handover_watcher__init(w);
	w->id = (char *)s->id;
	w->path = (char *)s->path;
	w->recursive = s->recursive;
	w->include_entry_info = s->include_entry;
	w->pending_events = (Filesystem__FilesystemEvent **)s->events;
	w->n_pending_events = s->n_events;
	if (s->watch) {
		int wd;
		const char *rel;
		w->inotify_fd = fs_watch_fd(s->watch);
		for (size_t i = 0; fs_watch_wd(s->watch, i, &wd, &rel); i++) {
			Upgrade__WatchDescriptor *d = handover_alloc(h, sizeof(*d));
			if (!d)
				return;
			upgrade__watch_descriptor__init(d);
			d->wd = wd;
			d->rel = (char *)rel;
			HANDOVER_PUSH(h, w->wds, w->n_wds, d);
		}
		handover_keep_fd(h, w->inotify_fd);
	}
	HANDOVER_PUSH(h, h->st->watchers, h->st->n_watchers, w);
}

void fs_handover_save(struct handover *h)
{
	fs_watchers_snapshot_each(add_watcher, h);
}

void fs_handover_restore(struct handover *h)
{
	const Upgrade__HandoverState *st = h->st;

	for (size_t i = 0; i < st->n_watchers; i++) {
		Upgrade__HandoverWatcher *hw = st->watchers[i];
		struct fs_watcher_snapshot ws = {
			.id = hw->id, .path = hw->path, .recursive = hw->recursive,
			.include_entry = hw->include_entry_info,
			.events = (const Filesystem__FilesystemEvent *const *)hw->pending_events,
			.n_events = hw->n_pending_events,
			.inotify_fd = -1,
		};
		int *wds = NULL;
		const char **rels = NULL;
		/* Our own record: the same inotify instance carries on. */
		if (hw->inotify_fd > 0 && handover_fd_open(hw->inotify_fd) && hw->n_wds &&
		    (wds = calloc(hw->n_wds, sizeof(*wds))) && (rels = calloc(hw->n_wds, sizeof(*rels)))) {
			for (size_t k = 0; k < hw->n_wds; k++) {
				wds[k] = hw->wds[k]->wd;
				rels[k] = hw->wds[k]->rel;
			}
			ws.inotify_fd = hw->inotify_fd;
			ws.wds = wds;
			ws.rels = rels;
			ws.n_wds = hw->n_wds;
		}
		char err[256];
		int arc = fs_watcher_adopt(&ws, err, sizeof(err));
		free(wds);
		free(rels);
		if (arc < 0 && ws.inotify_fd >= 0)
			close(ws.inotify_fd);
		if (arc < 0) {
			h->taken.watchers_failed++;
			log_error(LOGGER, "upgrade: watcher %s on %s not re-armed: %s", hw->id, hw->path, err);
		} else {
			h->taken.watchers++;
		}
	}
}
