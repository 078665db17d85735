/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/exitrec.h"

Test(exitrec, put_find)
{
	size_t len = exitrec_size(4);
	void *m = calloc(1, len);
	struct exitrec r;

	cr_assert_eq(exitrec_find(m, len, 1, &r), -EINVAL, "no ring yet");
	exitrec_init(m, 4);
	cr_assert_eq(exitrec_find(m, len, 1, &r), -ENOENT);
	exitrec_put(m, &(struct exitrec){ .pid = 10, .status = 7 << 8, .utime_us = 5 });
	exitrec_put(m, &(struct exitrec){ .pid = 11, .status = 9 });
	exitrec_put(m, &(struct exitrec){ .pid = 10, .status = 3 << 8 });
	cr_assert_eq(exitrec_find(m, len, 11, &r), 0);
	cr_assert_eq(r.status, 9);
	cr_assert_eq(exitrec_find(m, len, 10, &r), 0);
	cr_assert_eq(r.status, 3 << 8, "the newest record of a reused pid");
	/* four more exits push the first three out */
	for (int i = 0; i < 4; i++)
		exitrec_put(m, &(struct exitrec){ .pid = 100 + i });
	cr_assert_eq(exitrec_find(m, len, 10, &r), -ENOENT);
	cr_assert_eq(exitrec_find(m, len, 11, &r), -ENOENT);
	cr_assert_eq(exitrec_find(m, len, 103, &r), 0);
	cr_assert_eq(exitrec_find(m, len, 100, &r), 0);
	cr_assert_eq(exitrec_find(m, len - 1, 100, &r), -EINVAL, "a map shorter than the ring");
	cr_assert_eq(exitrec_find(NULL, 0, 100, &r), -EINVAL);
	free(m);
}
