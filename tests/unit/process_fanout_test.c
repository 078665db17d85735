/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <string.h>

#include "process/fanout.h"
#include "process/ring.h"

static uint8_t junk[RING_REC_MAX];

/* A ring of the minimum budget filled with `n` bytes of stdout. */
static void fill(struct ring *r, size_t n)
{
	ring_init(r, RING_MIN_SIZE);
	while (n > 0) {
		size_t k = n < sizeof(junk) ? n : sizeof(junk);

		ring_append(r, RING_STDOUT, junk, k);
		n -= k;
	}
}

Test(fanout, caught_up_subscriber_is_idle_until_the_end)
{
	struct ring r;

	fill(&r, 100);
	cr_expect_eq(fanout_next(&r, false, 0, 100, false, true), FANOUT_IDLE);
	cr_expect_eq(fanout_next(&r, false, 0, 40, false, true), FANOUT_DATA);
	cr_expect_eq(fanout_next(&r, false, 0, 40, false, false), FANOUT_WAIT,
		     "a full send queue waits for on_writable");
	/* After the end is decided, only data before end_off is owed. */
	cr_expect_eq(fanout_next(&r, true, 100, 100, false, true), FANOUT_END);
	cr_expect_eq(fanout_next(&r, true, 60, 60, false, true), FANOUT_END,
		     "output after the end (a grandchild past the grace) is not owed");
	cr_expect_eq(fanout_next(&r, true, 60, 59, false, true), FANOUT_DATA);
	cr_expect_eq(fanout_next(&r, true, 100, 100, false, false), FANOUT_END,
		     "the end may be queued even when the queue is full");
	ring_free(&r);
}

Test(fanout, evicted_cursor_is_a_gap_or_the_end_of_the_stream)
{
	struct ring r;

	fill(&r, 4 * RING_MIN_SIZE);
	cr_assert_gt(ring_start(&r), 0);
	uint64_t old = ring_start(&r) - 1;

	cr_expect_eq(fanout_next(&r, false, 0, old, true, true), FANOUT_GAP);
	cr_expect_eq(fanout_next(&r, false, 0, old, true, false), FANOUT_WAIT);
	cr_expect_eq(fanout_next(&r, false, 0, old, false, true), FANOUT_BEHIND);
	cr_expect_eq(fanout_next(&r, false, 0, old, false, false), FANOUT_BEHIND,
		     "a stalled plain subscriber is ended without waiting for it");
	cr_expect_eq(fanout_next(&r, false, 0, ring_start(&r), false, true), FANOUT_DATA);
	ring_free(&r);
}

Test(fanout, lagging_means_more_than_half_a_ring_behind)
{
	struct ring r;

	fill(&r, RING_MIN_SIZE);
	cr_expect_not(fanout_lagging(&r, ring_end(&r)));
	cr_expect_not(fanout_lagging(&r, ring_end(&r) - RING_MIN_SIZE / 2));
	cr_expect(fanout_lagging(&r, ring_end(&r) - RING_MIN_SIZE / 2 - 1));
	ring_free(&r);
}
