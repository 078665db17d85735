/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lifecycle.h - the life of a started command as one explicit state.
 *
 * A command ends when two independent things have both happened: its
 * leader was reaped, and its output reached EOF (every holder of the
 * pipes or the PTY slave closed them). Either may come first; a
 * descendant holding the output open is waited for PROCESS_GRACE_S, after
 * which the end event is sent while the output is still followed. Once
 * both are done the command leaves the list and is retained for late
 * Connects until the retention time passes. As a table:
 *
 *   NEW         --registered--> RUNNING
 *   RUNNING     --output_eof--> OUTPUT_DONE    --reaped--> RETAINED
 *   RUNNING     --reaped------> REAPED         --output_eof--> RETAINED
 *   REAPED      --grace-------> ENDED          --output_eof--> RETAINED
 *   RETAINED    --expired-----> EXPIRED        (freed with its last reader)
 *
 * Any other pair is not a transition (lifecycle_next returns LC_NONE) and
 * the caller keeps its state. The module is pure: process.c performs the
 * side effects of entering a state (arm the grace timer, build the end
 * event, unlist and retain).
 */
#ifndef PROCESS_LIFECYCLE_H
#define PROCESS_LIFECYCLE_H

#include <stdbool.h>

enum lc_state {
	LC_NONE = 0,     /* "no transition" from lifecycle_next */
	LC_NEW,          /* spawned (or spawning), not in the table yet */
	LC_RUNNING,      /* leader alive, output open */
	LC_OUTPUT_DONE,  /* output at EOF, leader not reaped yet */
	LC_REAPED,       /* leader reaped, output still open: grace running */
	LC_ENDED,        /* end event built at the grace; output still open */
	LC_RETAINED,     /* reaped and EOF: unlisted, kept for late Connects */
	LC_EXPIRED,      /* retention over: freed once nothing uses it */
};

enum lc_event {
	LC_EV_REGISTERED,
	LC_EV_OUTPUT_EOF, /* the last output stream reached EOF */
	LC_EV_REAPED,
	LC_EV_GRACE,      /* PROCESS_GRACE_S after the reap, output still open */
	LC_EV_EXPIRED,    /* retention over, or evicted by a new process */
	/* (A failed start is freed straight from NEW: it never ran.) */
};

/* The state after `e` in `s`, or LC_NONE when `e` does not apply. */
enum lc_state lifecycle_next(enum lc_state s, enum lc_event e);

const char *lifecycle_state_name(enum lc_state s);

/* Facts the rest of process.c (and output.c) asks about. */
static inline bool lc_reaped(enum lc_state s)
{
	return s == LC_REAPED || s == LC_ENDED || s == LC_RETAINED || s == LC_EXPIRED;
}

/* The end event is built: subscribers get data up to end_off, then end. */
static inline bool lc_end_ready(enum lc_state s)
{
	return s == LC_ENDED || s == LC_RETAINED || s == LC_EXPIRED;
}

/* Off the list; I/O stopped; the ring counts as retained memory. */
static inline bool lc_finalized(enum lc_state s)
{
	return s == LC_RETAINED || s == LC_EXPIRED;
}

#endif
