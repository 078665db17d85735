/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tryrun.h - try runs (docs/try.md): a command on a copy-on-write layer,
 * its diff, then commit or discard.
 *
 * The process table's try hooks (process/process.h, struct
 * process_try_ops) and the RPCs TryDiff, CommitTry and DiscardTry. A try
 * is named by its command's pid and lives apart from the process's table
 * entry: running while the command runs, then ended (its processes that
 * are left go on in the layer) until it is committed, discarded, or
 * discarded because -try-ttl passed since its end. A committed or
 * discarded try leaves its answer behind for as long (repeats get the
 * same answer: both are idempotent).
 *
 * Jobs on the layer (the diff, the commit, the discard, the end event's
 * diff) run on the worker pool; everything else on envd_loop.
 */
#ifndef TRY_TRYRUN_H
#define TRY_TRYRUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/handover.h"

/* Tries that are not committed or discarded, at most. */
#define TRY_MAX 32
/* An end event lists this many changes at most (then `truncated`). */
#define TRY_END_CHANGES 1000

/* -try-max-bytes: the layer's tmpfs size (0: half of the memory). */
extern uint64_t try_max_bytes;
/* -try-ttl: seconds a try waits after its end before it is discarded. */
extern double try_ttl_s;

/* Install the hooks (process_try). Call once at start. */
void try_setup(void);

/*
 * After a crash: take back the tries a killed envd kept (trykeep.h), from
 * the descriptors the manager handed over; after keep_adopt_all (their
 * commands are in the table). Returns the number taken back.
 */
struct sdnotify_fd;
size_t try_adopt_all(struct sdnotify_fd *fds, size_t n);

/* Live upgrade: the tries' part of the record (base/handover.h). Restore
   after the processes'. */
void try_handover_save(struct handover *h);
void try_handover_restore(struct handover *h);

/* Jobs on layers in flight (an upgrade waits for them). */
unsigned try_jobs_in_flight(void);
/* An upgrade is under way: a commit still staging stops (nothing applied). */
void try_quiesce(bool on);

#endif
