/* SPDX-License-Identifier: Apache-2.0 */
/*
 * changes.h - the change journal (docs/protocol.md, "Changes"): which
 * paths changed on the sandbox's filesystems, since a checkpoint and per
 * command. The front of three parts:
 *
 *   changes/source.h   the thread that reads fanotify (or recursive
 *                      inotify where fanotify cannot watch) and feeds the
 *                      journal (changes/journal.h), which it owns;
 *   changes/tracker.h  what a command changed (the process table's
 *                      tracker hooks, the end event's changes);
 *   changes.c          the questions (the Changes RPC, GET /changes), and
 *                      start, stop and hand-over in the order the parts
 *                      need.
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
 * Start the journal (loop thread, before the loop runs) when
 * changes_max_paths is not 0: a new epoch, or the one the hand-over record
 * carried (changes_adopt before). Starts the reader thread (source.h);
 * failures to watch are logged, never fatal. Also installs the process
 * tracker (tracker.h). 0 or -errno.
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
