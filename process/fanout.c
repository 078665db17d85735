/* SPDX-License-Identifier: Apache-2.0 */
#include "process/fanout.h"

enum fanout_action fanout_next(const struct ring *r, bool end_ready, uint64_t end_off,
			       uint64_t cursor, bool replay, bool writable)
{
	uint64_t limit = end_ready ? end_off : ring_end(r);

	if (cursor >= limit)
		return end_ready ? FANOUT_END : FANOUT_IDLE;
	/*
	 * An evicted cursor ends a plain subscriber at once, full queue or
	 * not, so a stalled peer does not keep the process pinned.
	 */
	if (cursor < ring_start(r) && !replay)
		return FANOUT_BEHIND;
	if (!writable)
		return FANOUT_WAIT;
	if (cursor < ring_start(r))
		return FANOUT_GAP;
	return FANOUT_DATA;
}

bool fanout_lagging(const struct ring *r, uint64_t cursor)
{
	return ring_end(r) - cursor > r->max / 2;
}
