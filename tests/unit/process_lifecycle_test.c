/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>

#include "process/lifecycle.h"

#define NS (LC_EXPIRED + 1)
#define NE (LC_EV_EXPIRED + 1)

/* The whole table, written out: every (state, event) pair. */
static const enum lc_state table[NS][NE] = {
	/*                 REGISTERED  OUTPUT_EOF      REAPED        GRACE     EXPIRED */
	[LC_NONE]        = {LC_NONE,    LC_NONE,        LC_NONE,      LC_NONE,  LC_NONE},
	[LC_NEW]         = {LC_RUNNING, LC_NONE,        LC_NONE,      LC_NONE,  LC_NONE},
	[LC_RUNNING]     = {LC_NONE,    LC_OUTPUT_DONE, LC_REAPED,    LC_NONE,  LC_NONE},
	[LC_OUTPUT_DONE] = {LC_NONE,    LC_NONE,        LC_RETAINED,  LC_NONE,  LC_NONE},
	[LC_REAPED]      = {LC_NONE,    LC_RETAINED,    LC_NONE,      LC_ENDED, LC_NONE},
	[LC_ENDED]       = {LC_NONE,    LC_RETAINED,    LC_NONE,      LC_NONE,  LC_NONE},
	[LC_RETAINED]    = {LC_NONE,    LC_NONE,        LC_NONE,      LC_NONE,  LC_EXPIRED},
	[LC_EXPIRED]     = {LC_NONE,    LC_NONE,        LC_NONE,      LC_NONE,  LC_NONE},
};

Test(lifecycle, every_pair_matches_the_table)
{
	for (int s = 0; s < NS; s++)
		for (int e = 0; e < NE; e++)
			cr_expect_eq(lifecycle_next((enum lc_state)s, (enum lc_event)e), table[s][e],
				     "%s + event %d", lifecycle_state_name((enum lc_state)s), e);
}

static enum lc_state run(const enum lc_event *ev, size_t n)
{
	enum lc_state s = LC_NEW;

	for (size_t i = 0; i < n; i++) {
		enum lc_state next = lifecycle_next(s, ev[i]);

		if (next != LC_NONE)
			s = next;
	}
	return s;
}

Test(lifecycle, reap_and_eof_in_either_order_retain)
{
	const enum lc_event a[] = { LC_EV_REGISTERED, LC_EV_REAPED, LC_EV_OUTPUT_EOF };
	const enum lc_event b[] = { LC_EV_REGISTERED, LC_EV_OUTPUT_EOF, LC_EV_REAPED };
	const enum lc_event c[] = { LC_EV_REGISTERED, LC_EV_REAPED, LC_EV_GRACE, LC_EV_OUTPUT_EOF };

	cr_expect_eq(run(a, 3), LC_RETAINED);
	cr_expect_eq(run(b, 3), LC_RETAINED);
	cr_expect_eq(run(c, 4), LC_RETAINED, "a descendant closed the output after the grace");
}

Test(lifecycle, duplicate_and_late_events_change_nothing)
{
	/* A grace timer firing after EOF, a second reap, EOF twice. */
	const enum lc_event ev[] = { LC_EV_REGISTERED, LC_EV_REAPED, LC_EV_REAPED, LC_EV_OUTPUT_EOF,
				     LC_EV_GRACE, LC_EV_OUTPUT_EOF };

	cr_expect_eq(run(ev, 6), LC_RETAINED);
	cr_expect_eq(lifecycle_next(LC_RUNNING, LC_EV_GRACE), LC_NONE, "no grace before the reap");
	cr_expect_eq(lifecycle_next(LC_RUNNING, LC_EV_REGISTERED), LC_NONE);
	cr_expect_eq(lifecycle_next(LC_ENDED, LC_EV_EXPIRED), LC_NONE,
		     "only a retained process expires: a listed one is still followed");
}

Test(lifecycle, predicates_follow_the_states)
{
	cr_expect(!lc_reaped(LC_RUNNING));
	cr_expect(!lc_reaped(LC_OUTPUT_DONE));
	cr_expect(lc_reaped(LC_REAPED));
	cr_expect(lc_reaped(LC_ENDED));
	cr_expect(lc_reaped(LC_RETAINED));

	cr_expect(!lc_end_ready(LC_REAPED), "the grace has not passed yet");
	cr_expect(lc_end_ready(LC_ENDED));
	cr_expect(lc_end_ready(LC_RETAINED));

	cr_expect(!lc_finalized(LC_ENDED), "still listed while the output is open");
	cr_expect(lc_finalized(LC_RETAINED));
	cr_expect(lc_finalized(LC_EXPIRED));
}

Test(lifecycle, names)
{
	cr_expect_str_eq(lifecycle_state_name(LC_RETAINED), "retained");
	cr_expect_str_eq(lifecycle_state_name((enum lc_state)99), "?");
}
