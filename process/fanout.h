/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fanout.h - the delivery policy for a process's subscribers, as pure
 * decisions over the output ring (see process.h for the reasoning).
 *
 * Each subscriber is a cursor into the ring. fanout_next() says what it
 * gets next; fanout_lagging() says whether it is so far behind that the
 * child should not be read for its sake (reading pauses only while every
 * live subscriber lags).
 *
 * Errors: none; pure decisions.
 */
#ifndef PROCESS_FANOUT_H
#define PROCESS_FANOUT_H

#include <stdbool.h>
#include <stdint.h>

#include "process/ring.h"

enum fanout_action {
	FANOUT_IDLE,   /* caught up: nothing to send until more output */
	FANOUT_WAIT,   /* data pending but the send queue is full */
	FANOUT_DATA,   /* send the chunk at the cursor */
	FANOUT_GAP,    /* cursor was evicted: report [cursor, ring_start) */
	FANOUT_BEHIND, /* cursor was evicted and the subscriber cannot take gaps */
	FANOUT_END,    /* all data up to the end offset sent: send end */
};

/*
 * `end_off` counts only when `end_ready`: data past it is not owed to the
 * subscriber. `replay` subscribers understand gaps; `writable` is false
 * while their send queue is above the high-water mark.
 */
enum fanout_action fanout_next(const struct ring *r, bool end_ready, uint64_t end_off,
			       uint64_t cursor, bool replay, bool writable);

/* More than half the ring behind: the next reads could evict its data. */
bool fanout_lagging(const struct ring *r, uint64_t cursor);

#endif
