/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/exitrec.h"

#define REC(p, st, t) (&(struct exitrec){ .pid = (p), .status = (st), .time_ns = (t) })

Test(exitrec, put_find)
{
	size_t len = exitrec_size(4);
	void *m = calloc(1, len);
	struct exitrec r;

	cr_assert_eq(exitrec_find(m, len, 1, 1, &r), -EINVAL, "no ring yet");
	exitrec_init(m, 4);
	cr_assert_eq(exitrec_find(m, len, 1, 1, &r), -ENOENT);
	exitrec_put(m, &(struct exitrec){ .pid = 10, .status = 7 << 8, .utime_us = 5, .time_ns = 100 });
	exitrec_put(m, REC(11, 9, 110));
	cr_assert_eq(exitrec_find(m, len, 11, 50, &r), 0);
	cr_assert_eq(r.status, 9);
	cr_assert_eq(exitrec_find(m, len, 10, 50, &r), 0);
	cr_assert_eq(r.status, 7 << 8);
	cr_assert_eq(r.utime_us, 5);
	cr_assert_eq(exitrec_find(m, len, 10, 0, &r), -EINVAL, "a process with no start stamp is not looked up");
	/* four more exits push the first two out */
	for (int i = 0; i < 4; i++)
		exitrec_put(m, REC(100 + i, 0, 200 + i));
	cr_assert_eq(exitrec_find(m, len, 10, 50, &r), -ENOENT);
	cr_assert_eq(exitrec_find(m, len, 11, 50, &r), -ENOENT);
	cr_assert_eq(exitrec_find(m, len, 103, 50, &r), 0);
	cr_assert_eq(exitrec_find(m, len, 100, 50, &r), 0);
	cr_assert_eq(exitrec_find(m, len - 1, 100, 50, &r), -EINVAL, "a map shorter than the ring");
	cr_assert_eq(exitrec_find(NULL, 0, 100, 50, &r), -EINVAL);
	free(m);
}

/* A pid used again: a process finds its own exit, never the exit of an
 * earlier process with its number, nor of a later one. */
Test(exitrec, lifetime)
{
	size_t len = exitrec_size(8);
	void *m = calloc(1, len);
	struct exitrec r;

	exitrec_init(m, 8);
	/* pid 20003 ended with 77 at t=100 (an earlier process) */
	exitrec_put(m, REC(20003, 77 << 8, 100));
	/* ours started at t=150: that record is not ours */
	cr_assert_eq(exitrec_find(m, len, 20003, 150, &r), -ENOENT, "an earlier process's exit");
	/* ours ends with 3 at t=200; the number goes to another process, which ends at t=300 */
	exitrec_put(m, REC(20003, 3 << 8, 200));
	exitrec_put(m, REC(20003, 5 << 8, 300));
	cr_assert_eq(exitrec_find(m, len, 20003, 150, &r), 0);
	cr_assert_eq(r.status, 3 << 8, "its own, not the later process's");
	cr_assert_eq(exitrec_find(m, len, 20003, 250, &r), 0);
	cr_assert_eq(r.status, 5 << 8, "the later process finds its own");
	free(m);
}

Test(exitrec, version)
{
	size_t len = exitrec_size(2);
	void *m = calloc(1, len);
	struct exitrec r;

	exitrec_init(m, 2);
	exitrec_put(m, REC(5, 1 << 8, 10));
	cr_assert_eq(exitrec_find(m, len, 5, 1, &r), 0);
	((struct exitrec_hdr *)m)->magic = 0x31544958u; /* the first layout: any orphan, after the reap */
	cr_assert_eq(exitrec_find(m, len, 5, 1, &r), -EINVAL, "a ring of the first version is not read");
	free(m);
}

Test(exitrec, clock)
{
	int64_t a = exitrec_clock_ns(), b = exitrec_clock_ns();

	cr_assert_gt(a, 0);
	cr_assert_geq(b, a);
}
