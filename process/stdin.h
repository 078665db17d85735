/* SPDX-License-Identifier: Apache-2.0 */
/*
 * stdin.h - input to a process (process_write_input in process.h has the
 * contract): bytes the pipe or PTY does not take at once wait in order,
 * with back-pressure on the calls that sent them.
 *
 * Called by process.c; what the table must know goes up through struct
 * stdin_hooks. Everything runs on envd_loop.
 *
 * Errors: stdin_write and stdin_close return an RPC code with the message
 * in err, as the process.h entry points they implement. Ownership: p owns
 * its queue; an owned chunk holds a copy of the bytes, a unary SendInput
 * over the bound lends its request's bytes until it is answered.
 */
#ifndef PROCESS_STDIN_H
#define PROCESS_STDIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "process/process_int.h"
#include "rpc/rpc.h"

/* Copied input bytes a process holds before StreamInput calls are paused. */
#define STDIN_QUEUE_MAX (4u * 1024 * 1024)

/*
 * What stdin.c tells process.c (installed once with stdin_init):
 *   leave   as output_hooks.leave;
 *   closed  envd closed the child's stdin (CloseStdin, once what was
 *           queued is written);
 *   wrote   bytes were written to the child (p->in_written grew).
 */
struct stdin_hooks {
	void (*leave)(struct process *p);
	void (*closed)(struct process *p);
	void (*wrote)(struct process *p);
};
void stdin_init(const struct stdin_hooks *hooks);

/* The stdin watcher's callback (in_w): write what is pending. */
void stdin_cb(EV_P_ ev_io *w, int revents);

/* Queue a chunk (owned chunks count against STDIN_QUEUE_MAX). */
void stdin_append(struct process *p, struct inchunk *c);

/* Write pending chunks in order until the pipe is full. */
void stdin_flush(struct process *p);

/*
 * Drop all pending input; unary SendInput calls waiting on it get the
 * error a write would have given (`e`, e.g. EPIPE once the reader is gone).
 */
void stdin_drop(struct process *p, int e);

/* process_write_input, process_input_forget and process_close_stdin
 * (process.h has the contract; p->in_taken counts the input taken, and
 * p->in_written what of it was written). */
enum rpc_code stdin_write(struct process *p, struct rpc_call *call, bool stream, bool to_pty,
			  const uint8_t *data, size_t n, bool has_off, uint64_t off, uint64_t *taken,
			  bool *later, char *err, size_t errlen);
void stdin_forget(struct process *p, struct rpc_call *call);
enum rpc_code stdin_close(struct process *p, char *err, size_t errlen);

#endif
