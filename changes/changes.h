/* SPDX-License-Identifier: Apache-2.0 */
/*
 * changes.h - the change journal (docs/protocol.md, "Changes"): which
 * paths changed on the sandbox's filesystems, since a checkpoint and per
 * command.
 *
 * A fanotify group with a filesystem mark on every local filesystem that
 * takes one (the root filesystem, tmpfs mounts...) reports every change by
 * directory handle + name. A thread of our own reads the group, resolves
 * handles to paths (open_by_handle_at, readlink of the descriptor), stats
 * the result and looks up the writing process's cgroup and parents; the
 * loop only records the resolved batches in the journal (changes/journal.h)
 * and answers questions. Network and FUSE mounts are listed as not
 * tracked. When the thread falls behind (the kernel queue overflows) the
 * journal records a gap and checkpoints before it answer resync.
 *
 * Where fanotify is unavailable (no CAP_SYS_ADMIN, no FID reporting), or a
 * local filesystem refuses its mark (a default overlayfs, a btrfs
 * subvolume), the same thread watches a few trees there with recursive
 * inotify (changes/inotree.h): the home directories (/root, /home/<name>),
 * /tmp, and the working directory of each command started with
 * trackChanges. inotify names no writer: those changes are attributed
 * "during" in a command's end event.
 *
 * The loop never makes a syscall on a user's path here: the request's
 * path is only a string prefix of journal entries.
 *
 * Errors: negative errno values; the RPC and HTTP edges answer them.
 */
#ifndef CHANGES_CHANGES_H
#define CHANGES_CHANGES_H

#include <stdbool.h>
#include <stddef.h>

#include "handover.pb-c.h"
#include "http/http.h"
#include "rpc/rpc.h"

/* Paths the journal keeps (-changes-max-paths); 0: the journal is off. */
extern size_t changes_max_paths;

/* Where changes are read from (-changes-source). */
enum changes_source {
	CHANGES_SOURCE_AUTO,     /* fanotify; inotify where it is unavailable */
	CHANGES_SOURCE_FANOTIFY, /* fanotify only */
	CHANGES_SOURCE_INOTIFY,  /* inotify only (tests; a kernel whose fanotify misbehaves) */
};
extern enum changes_source changes_source;

/* Directories inotify may watch (-changes-inotify-watches); 0: half of
 * /proc/sys/fs/inotify/max_user_watches, the rest left to the user's own
 * watchers. */
extern size_t changes_inotify_watches;

/*
 * Start the journal (loop thread, before the loop runs): a new epoch, or
 * the one the hand-over record carried (changes_adopt before). Starts the
 * reader thread; failures to watch are logged, never fatal. Also installs
 * the process tracker (process.h). 0 or -errno.
 */
int changes_start(void);

/* Stop the thread and free everything (tests, exit). */
void changes_stop(void);

/* filesystem.Filesystem/Changes. */
void changes_rpc(struct rpc_call *call, const ProtobufCMessage *msg);

/* GET /changes?since=&path=&include=&exclude=&limit=&username= (JSON). */
void changes_http_get(struct http_req *r);

/*
 * Live upgrade. changes_snapshot stops the thread after it has handed over
 * everything read so far and fills `out` (memory valid until changes_stop
 * or the process image is replaced); the fanotify descriptor is in
 * out->fanotify_fd. changes_adopt restores the record's journal for
 * changes_start (which takes the descriptor over). 0 or -errno.
 */
int changes_snapshot(Upgrade__ChangeJournal *out);
/* The exec failed: carry on (the thread reads again). */
void changes_resume(void);
/* Take the record's journal (copied) for changes_start; before it. */
int changes_adopt(const Upgrade__ChangeJournal *in);

/* Journal state for tests and metrics. */
size_t changes_paths(void);

#endif
