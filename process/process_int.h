/* SPDX-License-Identifier: Apache-2.0 */
/*
 * process_int.h - the state of one started or attached command, shared by
 * the three files that implement process.h:
 *
 *   process.c   the process table and each process's lifecycle: start
 *               (spawn jobs), child exit, timers, retention, signals,
 *               lookups, snapshot/adopt for a live upgrade;
 *   output.c    (output.h) the output path: the child's pipes (or PTY
 *               master) read into the ring, and the subscribers
 *               (Start/Connect streams) it is delivered to;
 *   stdin.c     (stdin.h) input to the child: the pending-input queue
 *               behind SendInput, StreamInput and CloseStdin.
 *
 * Types only (and process_enter): it declares no function of the three.
 * process.c calls down into output.h and stdin.h; those two report up
 * through hooks process.c installs, so the dependency runs one way
 * (scripts/check-layers.sh sees it). Nothing outside process/ includes
 * this; the public surface is process.h. Everything runs on envd_loop.
 */
#ifndef PROCESS_PROCESS_INT_H
#define PROCESS_PROCESS_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <unistd.h>

#include "process.pb-c.h"
#include "base/loop.h"
#include "process/budget.h"
#include "process/cgroup.h"
#include "process/endreason.h"
#include "process/idem.h"
#include "process/lifecycle.h"
#include "process/ptable.h"
#include "process/ring.h"
#include "rpc/rpc.h"

struct sub {
	struct sub *next;
	struct process *p;
	struct rpc_call *call;   /* NULL once the call is over; freed in output_settle() */
	uint64_t cursor;         /* next offset to send */
	uint64_t stall_mark;     /* cursor when the stall timer was armed */
	bool connect;            /* ConnectResponse rather than StartResponse */
	bool replay;             /* offset-aware: report gaps instead of failing */
	bool pumping;            /* in sub_pump: a nested on_writable is a no-op */
	struct budget_state budget; /* its output budget (budget.h), if on */
	ev_timer ka;
};

/* A repeated Start with a key that came while the first one's spawn was
 * under way: it is answered as a Connect once the spawn is done. */
struct rejoin {
	struct rejoin *next;
	struct process *p;
	struct rpc_call *call;
	struct budget budget;
	bool has_budget;
};

struct process {
	struct ptable_entry ent; /* first member: entry and process convert */
	Process__ProcessConfig *config;
	char *tag;
	pid_t pid;
	bool pty;
	int out_fd;              /* stdout pipe, or the PTY master */
	int err_fd;              /* stderr pipe; -1 for a PTY */
	int in_fd;               /* stdin pipe, or the PTY master (not owned) */
	ev_io out_w, err_w, in_w;
	ev_child child_w;
	ev_timer grace_w, kill_w, retain_w, stall_w;
	struct ring ring;

	/* Input not yet accepted by the pipe/PTY, in order (stdin.c). */
	struct inchunk *inq_head, *inq_tail;
	size_t inq_len;          /* bytes of owned (copied) chunks: the memory bound */
	struct inpause *in_paused; /* StreamInput calls paused for back-pressure */
	bool stdin_close_pending; /* CloseStdin came while input was still queued */

	enum lc_state lc;        /* lifecycle.h: reaped, ended, retained, expired */
	bool out_eof, err_eof;   /* per output stream; both -> LC_EV_OUTPUT_EOF */
	bool paused;             /* output reading paused for slow subscribers */
	uint64_t end_off;        /* subscribers get data up to here, then end */
	int exit_code;
	bool exited;
	char status[64];

	struct sub *subs;
	int depth;               /* > 0 while a callback is working on p */
	struct process_watch *watches; /* process.h: WaitFor's observers */

	struct pcg_leaf *cg;     /* own cgroup leaf, or NULL (owned until released) */
	uint64_t t_start_us;     /* CLOCK_MONOTONIC at spawn */
	uint64_t t_end_us;       /* at reap */
	struct pcg_usage usage;  /* filled at make_end */
	bool usage_known;
	struct rusage ru;        /* reaped children's usage credited to us (no cgroup) */
	void *track;             /* process_tracker handle, or NULL */
	bool track_wait;         /* the end event waits for the tracker */
	bool track_in_end;       /* inside the tracker's end() call */
	void *try_h;             /* process_try handle, or NULL */
	bool try_wait;           /* the end event waits for the try's changes */
	bool try_in_end;         /* inside the try's end() call */

	/* An attached command (process_attach): no child of ours. */
	bool attached;
	const struct process_attach_ops *aops; /* NULL once it exited */
	void *aud;

	void *keep;              /* process_keeper's handle (keep.c), or NULL */
	int pidfd;               /* adopted after a crash: its end comes through here */
	ev_io pidfd_w;
	ev_timer pidfd_retry_w;  /* the reaper has not recorded the exit yet */
	int pidfd_tries;
	void (*settled)(void *ud); /* once its end is complete; NULL: none */
	void *settled_ud;

	/* Its idempotency key (idem.h), scoped to a user: found by
	 * process_find_key while it is in the table, spawning or retained. */
	char *idem_key;
	uint32_t idem_uid;
	char idem_fp[IDEM_FP_LEN];
	struct rejoin *rejoins;  /* repeats waiting for the spawn */
	bool spawning;           /* its spawn job is under way */
	struct process *spawn_next; /* in the list of those (process.c) */

	uint64_t in_taken;       /* input bytes written or queued, in order */
	uint64_t in_written;     /* of which written to the pipe or terminal */

	int64_t kill_ms;         /* the deadline it was given (ms; 0: none) */
	struct endreason_kill kill; /* the last kill envd sent it */
	int termsig;             /* the signal the leader died of; 0: it exited */
	struct endreason why;    /* made with the end event */
};

/*
 * A piece of pending input. Owned chunks hold a copy of the bytes (they
 * follow the struct); a unary SendInput larger than the bound borrows its
 * request's bytes instead (valid until its call ends) and is answered when
 * the last of them is written.
 */
struct inchunk {
	struct inchunk *next;
	struct process *p;
	const uint8_t *data;
	size_t len, off;
	struct rpc_call *call;   /* borrowed: the SendInput to answer; else NULL */
	bool owned;
};

static inline void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/*
 * Callbacks bracket their work with process_enter and the leave hook
 * (output_hooks, stdin_hooks: process.c's process_leave) so that
 * subscribers cancelled in the middle (rpc_send may report a dead peer at
 * once) and the process itself are only freed when nothing uses them any
 * more. The outermost leave frees the subscribers whose call is over
 * (output_settle), updates output reading, and frees an expired process.
 */
static inline void process_enter(struct process *p)
{
	p->depth++;
}

#endif
