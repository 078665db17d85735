/* SPDX-License-Identifier: Apache-2.0 */
/*
 * uppump_alloc_test.c - the upload pump's buffers (transfer/uppump.h)
 * under allocation failure: each failure is reported, and releasing the
 * pump frees whatever was allocated.
 */
#include <criterion/criterion.h>

#include "failalloc.h"
#include "transfer/uppump.h"

static int frees;

static void o_free(struct uppump *p)
{
	frees++;
}

static const struct uppump_ops o_ops = { .free = o_free };

static int op(void *ctx)
{
	struct uppump p = { 0 };
	int before = frees;
	int rc;

	uppump_init(&p, &o_ops);
	rc = uppump_alloc(&p, *(bool *)ctx);
	reqjob_release(&p.job);
	cr_assert_eq(frees, before + 1, "the owner is freed once, either way");
	return rc;
}

Test(uppump_alloc, plain)
{
	bool gzip = false;
	cr_assert_eq(failalloc_run("uppump plain", op, &gzip, 0), 2);
}

Test(uppump_alloc, gzip)
{
	bool gzip = true;
	cr_assert_geq(failalloc_run("uppump gzip", op, &gzip, 0), 3);
}
