/* SPDX-License-Identifier: Apache-2.0 */
/* Output budgets (process/budget.h): the env form, and the accounting that
 * decides what one stream is sent. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "process/budget.h"

Test(budget, parse)
{
	struct budget b;
	char err[256];

	cr_expect_eq(budget_parse("head:4096,tail:16384", &b, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(b.head, 4096);
	cr_expect_eq(b.tail, 16384);
	cr_expect_eq(budget_parse("tail:16k,head:4K", &b, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(b.head, 4096);
	cr_expect_eq(b.tail, 16384);
	cr_expect_eq(budget_parse("head:1m", &b, err, sizeof(err)), 0);
	cr_expect_eq(b.head, 1024 * 1024);
	cr_expect_eq(b.tail, 0, "a part left out is 0");
	cr_expect_eq(budget_parse("tail:0", &b, err, sizeof(err)), 0);
	cr_expect_eq(b.head, 0);
	cr_expect_eq(budget_parse("head:1024m", &b, err, sizeof(err)), 0, "the largest");
	cr_expect_eq(b.head, BUDGET_MAX);

	const char *bad[] = { "", "head", "head:", "head:x", "head:-1", "head:1,", "head:1;tail:2",
			      "head:1,head:2", "middle:4", "head:1 ", "head:1g", "head:1025m",
			      "head:99999999999999999999", "HEAD:1" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		cr_expect_eq(budget_parse(bad[i], &b, err, sizeof(err)), -EINVAL, "'%s' is refused", bad[i]);
		cr_expect(strstr(err, "invalid output budget"), "'%s': %s", bad[i], err);
	}
}

/* Drive a stream: what budget_next says at each point. */
Test(budget, head_hold_mark_tail)
{
	struct budget b = { .head = 100, .tail = 50 };
	struct budget_state st;
	uint64_t upto;

	budget_begin(&st, &b, 0);
	cr_expect(st.on);
	/* The head goes out live, no further than its end. */
	cr_expect_eq(budget_next(&st, 0, 30, false, &upto), BUDGET_PASS);
	cr_expect_eq(upto, 30);
	cr_expect_eq(budget_next(&st, 30, 5000, false, &upto), BUDGET_PASS);
	cr_expect_eq(upto, 100);
	cr_expect_not(budget_holding(&st, 30));
	/* Past it: held, and holding never lags the child. */
	cr_expect_eq(budget_next(&st, 100, 5000, false, &upto), BUDGET_HOLD);
	cr_expect(budget_holding(&st, 100));
	/* The end: the marker up to the tail, then the tail as usual. */
	cr_expect_eq(budget_next(&st, 100, 10000, true, &upto), BUDGET_MARK);
	cr_expect_eq(upto, 9950);
	cr_expect_eq(st.phase, BUDGET_TAIL);
	cr_expect_not(budget_holding(&st, 9950));
	cr_expect_eq(budget_next(&st, 9950, 10000, true, &upto), BUDGET_PASS);
	cr_expect_eq(upto, 10000);
}

Test(budget, short_output_has_no_marker)
{
	struct budget b = { .head = 100, .tail = 50 };
	struct budget_state st;
	uint64_t upto;

	/* 140 bytes: the head, then the 40 past it fit in the tail. */
	budget_begin(&st, &b, 0);
	cr_expect_eq(budget_next(&st, 100, 140, true, &upto), BUDGET_PASS);
	cr_expect_eq(upto, 140);
	/* Exactly head + tail: no marker either. */
	budget_begin(&st, &b, 0);
	cr_expect_eq(budget_next(&st, 100, 150, true, &upto), BUDGET_PASS);
	/* One more byte: a marker of one byte. */
	budget_begin(&st, &b, 0);
	cr_expect_eq(budget_next(&st, 100, 151, true, &upto), BUDGET_MARK);
	cr_expect_eq(upto, 101);
	/* Shorter than the head: all of it goes out, as without a budget. */
	budget_begin(&st, &b, 0);
	cr_expect_eq(budget_next(&st, 0, 20, true, &upto), BUDGET_PASS);
	cr_expect_eq(upto, 20);
}

Test(budget, counted_from_where_the_stream_starts)
{
	struct budget b = { .head = 10, .tail = 5 };
	struct budget_state st;
	uint64_t upto;

	/* A Connect from offset 1000: its head is 1000..1010. */
	budget_begin(&st, &b, 1000);
	cr_expect_eq(budget_next(&st, 1000, 2000, false, &upto), BUDGET_PASS);
	cr_expect_eq(upto, 1010);
	cr_expect_eq(budget_next(&st, 1010, 2000, true, &upto), BUDGET_MARK);
	cr_expect_eq(upto, 1995);
}

Test(budget, zero_head_and_tail)
{
	struct budget b = { 0 };
	struct budget_state st;
	uint64_t upto;

	budget_begin(&st, &b, 0);
	cr_expect_eq(budget_next(&st, 0, 10, false, &upto), BUDGET_HOLD);
	cr_expect_eq(budget_next(&st, 0, 10, true, &upto), BUDGET_MARK, "everything withheld");
	cr_expect_eq(upto, 10);
	cr_expect_eq(budget_next(&st, 10, 10, true, &upto), BUDGET_PASS);
	/* Nothing written at all: no marker. */
	budget_begin(&st, &b, 0);
	cr_expect_eq(budget_next(&st, 0, 0, true, &upto), BUDGET_PASS);
}

Test(budget, stuck_head_and_no_budget)
{
	struct budget b = { .head = 100, .tail = 10 };
	struct budget_state st;
	uint64_t upto;

	/* A character cut at the head's end: the head ends before it. */
	budget_begin(&st, &b, 0);
	budget_head_stuck(&st, 98);
	cr_expect_eq(budget_next(&st, 98, 500, false, &upto), BUDGET_HOLD);
	cr_expect_eq(budget_next(&st, 98, 500, true, &upto), BUDGET_MARK);
	cr_expect_eq(upto, 490);
	/* No budget: always as before. */
	budget_begin(&st, NULL, 0);
	cr_expect_not(st.on);
	cr_expect_eq(budget_next(&st, 0, 500, false, &upto), BUDGET_PASS);
	cr_expect_eq(upto, 500);
	cr_expect_not(budget_holding(&st, 1000));
}
