/* SPDX-License-Identifier: Apache-2.0 */
/*
 * output.h - a process's output path (process.h has the policy): the
 * child's pipes or PTY master are read into the ring (ring.h), and every
 * subscriber, a Start or Connect stream, is a cursor into it, sent what
 * fanout.h allows, with keep-alives and the stall timer.
 *
 * Called by process.c, which owns the table and the lifecycle; what output
 * learns that the table must act on goes up through struct output_hooks.
 * Everything runs on envd_loop.
 *
 * Errors: nothing is returned; a stream that fails (out of memory, fallen
 * behind, stalled, its peer gone) is ended with an RPC code and message.
 * Ownership: output_attach allocates the struct sub (process_int.h) and
 * p's list owns it; output_settle frees the ones whose call is over.
 */
#ifndef PROCESS_OUTPUT_H
#define PROCESS_OUTPUT_H

#include <stdbool.h>
#include <stdint.h>

#include "process.pb-c.h"
#include "process/budget.h"
#include "process/process_int.h"
#include "rpc/rpc.h"

/* A stream that took nothing for this long while reading was paused for it
 * is ended, so the process can go on. */
#define OUTPUT_STALL_S 10.0

/*
 * What output.c tells process.c, which owns the table and the lifecycle
 * (installed once with output_init):
 *   leave     the outermost callback working on p is done (see above);
 *   eof       both output streams reached EOF;
 *   appended  output was appended to the ring;
 *   fill_end  add what the table knows to an end event (the command's
 *             changes): output.c fills the exit and the usage.
 */
struct output_hooks {
	void (*leave)(struct process *p);
	void (*eof)(struct process *p);
	void (*appended)(struct process *p);
	void (*fill_end)(struct process *p, Process__ProcessEvent__EndEvent *end);
};
void output_init(const struct output_hooks *hooks);

/* The output watchers' callback (out_w and err_w) and the stall timer's. */
void output_read_cb(EV_P_ ev_io *w, int revents);
void output_stall_cb(EV_P_ ev_timer *w, int revents);

/* Start or stop the output watchers for the current state. */
void output_arm_reads(struct process *p);

/* Pause reading only while every live subscriber lags by over half a ring. */
void output_update_reading(struct process *p);

/* Send every subscriber what it may have now (fanout.h has the policy). */
void output_fanout(struct process *p);

/*
 * Subscribe `call` (a Start stream, or a Connect one when `connect`): the
 * start event, then output from `from` (when `replay`) or from now on,
 * within the output budget `b` (budget.h; NULL: none). Fails the call when
 * out of memory.
 */
void output_attach(struct process *p, struct rpc_call *call, bool connect, bool replay,
		   uint64_t from, const struct budget *b);

/*
 * p's end event as every subscriber gets it: exit, usage, the table's
 * additions (fill_end), and why it ended (p->why) in words written to
 * `words`; *use and *why are the event's storage.
 */
void output_end_fill(struct process *p, Process__ProcessEvent__EndEvent *end,
		     Process__ResourceUsage *use, Process__EndReason *why, char *words, size_t wlen);

/* Streams attached to p whose call is not over. */
unsigned output_streams(const struct process *p);

/* End every stream attached to p with `code` and `msg`. */
void output_end_streams(struct process *p, enum rpc_code code, const char *msg);

/* Free the subscribers whose call is over, then update reading (the
 * outermost leave). */
void output_settle(struct process *p);

#endif
