/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tracker.h - what a command changed: the change journal's side of the
 * process table's tracker hooks (process/process.h, struct
 * process_tracker), and the wire form of journal changes.
 *
 * Every command is registered with the source (changes/source.h) before it
 * is spawned, under a serial of its own, so the source can name it as the
 * writer of a change. A command started with trackChanges gets, in its end
 * event, the changes it made ("by") and those nobody is named for that
 * happened while it ran ("during"), once a barrier says the journal holds
 * everything the kernel had queued at its end: at most 1000, then
 * `overflow`. Serials live as long as the process's table entry.
 *
 * Loop thread only, except the set_pid hook (any thread).
 */
#ifndef CHANGES_TRACKER_H
#define CHANGES_TRACKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "changes/journal.h"
#include "filesystem.pb-c.h"

/* Install the hooks into process_tracker (after source_start). */
void tracker_install(void);

/* The pid of the command with this serial, 0 when it is gone. */
uint32_t tracker_pid(uint32_t serial);

/*
 * Wire form of n changes into caller-provided arrays: items[n], ptrs[n],
 * evs[n * JK_N], ts[n]. Paths point into the journal (valid until the next
 * record) unless the caller copies them. in_cmd: for a command's end
 * event, where a change nobody is named for happened "during" the command
 * (in a Changes reply it names nobody).
 */
void tracker_to_wire(const struct journal_change *ch, size_t n, Filesystem__Change *items, Filesystem__Change **ptrs,
		     Filesystem__EventType *evs, Google__Protobuf__Timestamp *ts, bool in_cmd);

#endif
