/* SPDX-License-Identifier: Apache-2.0 */
/*
 * httpjob_test.c - a reqjob bound to an HTTP exchange (http/httpjob.h):
 * the exchange's hooks lead to the reqjob that serves it, its close lets
 * go of it, and a hand-off leaves none of the old responder's hooks.
 */
#include <criterion/criterion.h>

#include "base/reqjob.h"
#include "http/http.h"
#include "http/httpjob.h"

struct ctx {
	struct reqjob job;
	int frees, cancels;
};

static void c_free(struct reqjob *j) { REQJOB_CONTAINER(j, struct ctx, job)->frees++; }
static void c_cancel(struct reqjob *j) { REQJOB_CONTAINER(j, struct ctx, job)->cancels++; }
static const struct reqjob_ops c_ops = { .free = c_free, .cancel = c_cancel };

static void on_body(struct http_req *r, const uint8_t *p, size_t n) {}
static void on_body_end(struct http_req *r) {}
static void on_writable(struct http_req *r) {}

Test(httpjob, close_lets_go)
{
	struct http_req r = { 0 };
	struct ctx c = { 0 };

	reqjob_init(&c.job, &c_ops);
	httpjob_attach(&c.job, &r);
	cr_assert_eq(httpjob_of(&r), &c.job);
	cr_assert_eq(httpjob_req(&c.job), &r);
	cr_assert_not_null(r.on_close);
	reqjob_release(&c.job);
	cr_assert_eq(c.frees, 0, "the exchange holds it");
	r.on_close(&r, false);
	cr_assert_null(httpjob_of(&r));
	cr_assert_eq(c.cancels, 1);
	cr_assert_eq(c.frees, 1);
}

Test(httpjob, handoff_leaves_no_old_hooks)
{
	struct http_req r = { 0 };
	struct ctx a = { 0 }, b = { 0 };

	reqjob_init(&a.job, &c_ops);
	reqjob_init(&b.job, &c_ops);
	httpjob_attach(&a.job, &r);
	r.on_body = on_body;
	r.on_body_end = on_body_end;
	r.on_writable = on_writable;
	cr_assert_eq(reqjob_handoff(&a.job, &b.job), 0);
	cr_assert_eq(httpjob_of(&r), &b.job);
	cr_assert_null(httpjob_req(&a.job));
	cr_assert_null(r.on_body);
	cr_assert_null(r.on_body_end);
	cr_assert_null(r.on_writable);
	reqjob_release(&a.job);
	cr_assert_eq(a.frees, 1);
	cr_assert_eq(a.cancels, 0);
	reqjob_release(&b.job);
	r.on_close(&r, true);
	cr_assert_eq(b.cancels, 1);
	cr_assert_eq(b.frees, 1);
}

Test(httpjob, detach_unhooks)
{
	struct http_req r = { 0 };
	struct ctx c = { 0 };

	reqjob_init(&c.job, &c_ops);
	httpjob_attach(&c.job, &r);
	cr_assert_eq(reqjob_detach(&c.job), &r);
	cr_assert_null(r.ud);
	cr_assert_null(r.on_close);
	cr_assert_eq(c.cancels, 0);
	reqjob_release(&c.job);
	cr_assert_eq(c.frees, 1);
}
