/* SPDX-License-Identifier: Apache-2.0 */
/*
 * worker.h - a small bounded pool for blocking filesystem work.
 *
 * Deep directory walks, recursive removes and large copies would stall the
 * event loop; they run here instead. `work(arg)` runs on one of
 * WORKER_THREADS threads and must not touch loop-owned state; `done(arg)`
 * then runs on the event loop thread (woken through an ev_async), where
 * the result can be sent. The pool starts on the first submit.
 *
 * Ownership: `arg` belongs to the caller throughout; typically `done`
 * frees it. If the client went away meanwhile, `done` still runs and must
 * notice that itself (e.g. a cancelled flag set by the cancel hook).
 *
 * Errors: worker_submit() returns 0 or a negative errno.
 */
#ifndef ENVD_WORKER_H
#define ENVD_WORKER_H

#include <stddef.h>

#define WORKER_THREADS 2
#define WORKER_QUEUE_MAX 256

/*
 * Queue a job. Call on the loop thread only. Returns 0; -EAGAIN when
 * WORKER_QUEUE_MAX jobs are already waiting or running; -ENOMEM, or
 * another -errno if the threads cannot be started.
 */
int worker_submit(void (*work)(void *arg), void (*done)(void *arg), void *arg);

/* Jobs submitted and not yet completed on the loop (for tests and metrics). */
size_t worker_pending(void);

#endif
