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
 * carried (changes_handover_restore before). Starts the reader thread
 * (source.h); failures to watch are logged, never fatal. Also installs
 * the process tracker (tracker.h). 0 or -errno.
 */
int changes_start(void);

/* Stop the thread and free everything (tests, exit). */
void changes_stop(void);

/* filesystem.Filesystem/Changes. */
void changes_rpc(struct rpc_call *call, const ProtobufCMessage *msg);

/* GET /changes?since=&path=&include=&exclude=&limit=&username= (JSON). */
void changes_http_get(struct http_req *r);

/*
 * The journal in the hand-over record (base/handover.h, field 1009). The
 * save stops the reader thread after it has handed over everything read
 * so far, answers every barrier waiting, and records every path with its
 * sequence numbers, the checkpoint counters, the journal's identity and
 * the fanotify group (kept across the exec; inotify watches are not, and
 * a gap is recorded for them). Nothing is saved while the journal is off.
 * The cancel (the exec failed) lets the thread read again. The restore,
 * before changes_start, takes the record's journal and group over (with
 * -changes-max-paths 0 the group is closed); serials of commands do not
 * cross, so "by" becomes unknown.
 */
struct handover;
void changes_handover_save(struct handover *h);
void changes_handover_cancel(void);
void changes_handover_restore(struct handover *h);

/* Journal state for tests and metrics. */
size_t changes_paths(void);

#endif
