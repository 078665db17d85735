/* SPDX-License-Identifier: Apache-2.0 */
/*
 * uppump_test.c - the upload pump (transfer/uppump.h) on the real worker
 * pool, with a request of the test's own transport (fakereq.h): every
 * body byte reaches the sink in order, gzip is inflated (several members
 * in a row), the client is paused while a job is behind and resumed after,
 * and each way an upload ends is answered once: success, a sink's error,
 * a corrupt gzip body, a transport that overruns the bound, a deadline,
 * the client leaving mid-job.
 */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdio.h>
#include <zlib.h>

#include "base/loop.h"
#include "base/worker.h"
#include "fakereq.h"
#include "transfer/uppump.h"
#include "testloop.h"


struct owner {
	struct uppump pump;
	char *got;          /* what the sink received (worker side) */
	size_t got_len;
	int sinks, finishes, backs, responds, frees, discards;
	atomic_int gate;    /* the sink waits for it */
	atomic_int in_sink;
	int fail_at;        /* the sink fails on this call (1-based); 0: never */
};

static struct owner *own(struct uppump *p) { return UPPUMP_OWNER(p, struct owner, pump); }

static int o_sink(struct uppump *p, const uint8_t *b, size_t n)
{
	struct owner *o = own(p);

	atomic_fetch_add(&o->in_sink, 1);
	while (!atomic_load(&o->gate))
		usleep(200);
	if (++o->sinks == o->fail_at)
		return uppump_fail(p, 507, "not enough disk space available");
	o->got = realloc(o->got, o->got_len + n);
	memcpy(o->got + o->got_len, b, n);
	o->got_len += n;
	return 0;
}

static int o_bad_gzip(struct uppump *p, const char *zmsg)
{
	return uppump_fail(p, 400, "error decompressing request body: gzip: %s", zmsg);
}

static void o_finish(struct uppump *p)
{
	own(p)->finishes++;
	if (p->gzip && (!p->got_input || !p->zended))
		uppump_fail(p, 400, "unexpected EOF");
}

static void o_back(struct uppump *p) { own(p)->backs++; }
static void o_discard(struct uppump *p) { own(p)->discards++; }

static void o_respond(struct uppump *p, struct http_req *r)
{
	char msg[64];
	int n = snprintf(msg, sizeof(msg), "%zu bytes", own(p)->got_len);

	own(p)->responds++;
	http_respond(r, 200, "text/plain", msg, (size_t)n, NULL, 0);
}

static int frees;
static void o_free(struct uppump *p)
{
	struct owner *o = own(p);

	frees++;
	free(o->got);
	free(o);
}

static const struct uppump_ops o_ops = {
	.sink = o_sink,
	.bad_gzip = o_bad_gzip,
	.finish = o_finish,
	.back = o_back,
	.respond = o_respond,
	.discard = o_discard,
	.free = o_free,
};

static struct owner *start(struct fake *f, bool gzip, double timeout)
{
	struct owner *o = calloc(1, sizeof(*o));

	atomic_store(&o->gate, 1);
	uppump_init(&o->pump, &o_ops);
	cr_assert_eq(uppump_alloc(&o->pump, gzip), 0);
	snprintf(o->pump.shown, sizeof(o->pump.shown), "/target");
	o->pump.job.key = 5150;
	o->pump.job.timeout = timeout;
	uppump_start(&o->pump, &f->r, false);
	reqjob_release(&o->pump.job);
	return o;
}

static bool answered(void *arg) { return ((struct fake *)arg)->ended; }
static bool o_in_sink(void *arg) { return atomic_load(&((struct owner *)arg)->in_sink) > 0; }
static bool freed(void *arg) { return frees > 0; }
static bool not_paused(void *arg) { return !((struct fake *)arg)->paused; }

/* A body of n bytes, each its offset mod 251 (so order shows). */
static uint8_t *pattern(size_t n)
{
	uint8_t *b = malloc(n);
	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)(i % 251);
	return b;
}

/* Deliver b in pieces of `step`, turning the loop while paused. */
static void deliver(struct fake *f, const uint8_t *b, size_t n, size_t step)
{
	for (size_t off = 0; off < n;) {
		size_t k = n - off < step ? n - off : step;
		if (!fake_body(f, b + off, k)) {
			ev_run(envd_loop, EVRUN_ONCE | EVRUN_NOWAIT);
			usleep(1000);
			continue;
		}
		off += k;
	}
}

Test(uppump, raw_body_in_order)
{
	struct fake *f = fake_new(HTTP_M_POST, "/files", "", NULL);
	struct owner *o = start(f, false, 30);
	size_t n = 3 * UPPUMP_IN_MAX + 12345;
	uint8_t *b = pattern(n);

	deliver(f, b, n, 7777);
	fake_body_end(f);
	cr_assert(spin_until(answered, f));
	cr_assert_eq(f->status, 200, "%s", f->body);
	cr_assert_eq(o->got_len, n);
	cr_assert(memcmp(o->got, b, n) == 0, "every byte, in order");
	cr_assert_eq(o->finishes, 1);
	cr_assert_eq(o->responds, 1);
	cr_assert_eq(o->discards, 0);
	cr_assert_eq(f->resumes, f->pauses, "never left paused");
	fake_free(f);
	cr_assert_eq(frees, 1);
	free(b);
}

static size_t gz(const uint8_t *in, size_t n, uint8_t *out, size_t cap)
{
	z_stream z = { 0 };

	deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
	z.next_in = (Bytef *)in;
	z.avail_in = (uInt)n;
	z.next_out = out;
	z.avail_out = (uInt)cap;
	cr_assert_eq(deflate(&z, Z_FINISH), Z_STREAM_END);
	size_t k = cap - z.avail_out;
	deflateEnd(&z);
	return k;
}

Test(uppump, gzip_members_in_a_row)
{
	struct fake *f = fake_new(HTTP_M_POST, "/files", "", NULL);
	struct owner *o = start(f, true, 30);
	size_t n = 300000;
	uint8_t *b = pattern(n), *z = malloc(2 * n + 1024);
	size_t k1 = gz(b, n / 3, z, n + 512);
	size_t k2 = gz(b + n / 3, n - n / 3, z + k1, n + 512);

	deliver(f, z, k1 + k2, 1000);
	fake_body_end(f);
	cr_assert(spin_until(answered, f));
	cr_assert_eq(f->status, 200, "%s", f->body);
	cr_assert_eq(o->got_len, n);
	cr_assert(memcmp(o->got, b, n) == 0);
	fake_free(f);
	free(b);
	free(z);
}

Test(uppump, corrupt_gzip)
{
	struct fake *f = fake_new(HTTP_M_POST, "/files", "", NULL);
	struct owner *o = start(f, true, 30);

	fake_body(f, "this is not gzip", 16);
	fake_body_end(f);
	cr_assert(spin_until(answered, f));
	cr_assert_eq(f->status, 400);
	cr_assert(strstr(f->body, "error decompressing request body: gzip: "), "%s", f->body);
	cr_assert_eq(o->responds, 0);
	cr_assert_eq(o->discards, 1);
	fake_free(f);
	cr_assert_eq(frees, 1);
}

Test(uppump, sink_error_answered_and_rest_drained)
{
	struct fake *f = fake_new(HTTP_M_POST, "/files", "", NULL);
	struct owner *o = start(f, false, 30);
	size_t n = 2 * UPPUMP_KICK;
	uint8_t *b = pattern(n);

	o->fail_at = 1;
	deliver(f, b, n, 4096);
	cr_assert(spin_until(answered, f));
	cr_assert_eq(f->status, 507);
	cr_assert(strstr(f->body, "not enough disk space available"), "%s", f->body);
	cr_assert(!f->paused, "the rest of the body drains");
	/* Ignored from here: no job, no second answer. */
	deliver(f, b, n, 4096);
	fake_body_end(f);
	cr_assert(spin_until(pool_idle, NULL));
	cr_assert_eq(o->sinks, 1);
	cr_assert_eq(o->finishes, 0);
	fake_free(f);
	cr_assert_eq(frees, 1);
	free(b);
}

/* A job behind: the client is paused past UPPUMP_IN_HIGH and resumed
 * once the job is back; bytes beyond UPPUMP_IN_MAX fail the upload. */
Test(uppump, pause_and_overrun)
{
	struct fake *f = fake_new(HTTP_M_POST, "/files", "", NULL);
	struct owner *o = start(f, false, 30);
	uint8_t *b = pattern(UPPUMP_IN_MAX);

	atomic_store(&o->gate, 0);
	fake_body(f, b, UPPUMP_KICK);
	cr_assert(spin_until(o_in_sink, o), "the first batch is with a job");
	fake_body(f, b, UPPUMP_IN_HIGH);
	cr_assert(f->paused, "paused while the job is behind");
	/* A transport that does not honour the pause. */
	f->r.on_body(&f->r, b, UPPUMP_IN_MAX);
	cr_assert(!f->ended, "answered when the job is back, not under it");
	atomic_store(&o->gate, 1);
	cr_assert(spin_until(answered, f));
	cr_assert_eq(f->status, 500);
	cr_assert(strstr(f->body, "error reading request body: too much data buffered"), "%s", f->body);
	cr_assert(!f->paused);
	fake_free(f);
	cr_assert_eq(frees, 1);
	free(b);
}

Test(uppump, pause_then_resume)
{
	struct fake *f = fake_new(HTTP_M_POST, "/files", "", NULL);
	struct owner *o = start(f, false, 30);
	uint8_t *b = pattern(UPPUMP_IN_HIGH + UPPUMP_KICK);

	atomic_store(&o->gate, 0);
	fake_body(f, b, UPPUMP_KICK);
	cr_assert(spin_until(o_in_sink, o));
	fake_body(f, b + UPPUMP_KICK, UPPUMP_IN_HIGH);
	cr_assert(f->paused);
	atomic_store(&o->gate, 1);
	cr_assert(spin_until(not_paused, f), "resumed once the jobs caught up");
	fake_body_end(f);
	cr_assert(spin_until(answered, f));
	cr_assert_eq(f->status, 200, "%s", f->body);
	cr_assert_eq(o->got_len, UPPUMP_IN_HIGH + UPPUMP_KICK);
	cr_assert(memcmp(o->got, b, o->got_len) == 0);
	cr_assert_eq(f->pauses, 1);
	fake_free(f);
	free(b);
}

/* The mount does not answer: 504 naming the target; the context lives on
 * until the stuck job returns. */
Test(uppump, deadline)
{
	struct fake *f = fake_new(HTTP_M_POST, "/files", "", NULL);
	struct owner *o = start(f, false, 0.05);

	atomic_store(&o->gate, 0);
	fake_body(f, "x", 1);
	fake_body_end(f);
	cr_assert(spin_until(answered, f));
	cr_assert_eq(f->status, 504);
	cr_assert(strstr(f->body, "filesystem did not answer within 0.05 s: /target"), "%s", f->body);
	fake_close(f, true);
	atomic_store(&o->gate, 1);
	cr_assert(spin_until(freed, NULL));
	cr_assert_eq(f->begins, 1, "no second answer");
	fake_free(f);
}

Test(uppump, client_gone_mid_job)
{
	struct fake *f = fake_new(HTTP_M_POST, "/files", "", NULL);
	struct owner *o = start(f, false, 30);

	atomic_store(&o->gate, 0);
	fake_body(f, "abc", 3);
	fake_body_end(f);
	cr_assert(spin_until(o_in_sink, o));
	fake_close(f, false);
	cr_assert_eq(frees, 0, "the job holds it");
	atomic_store(&o->gate, 1);
	cr_assert(spin_until(freed, NULL));
	cr_assert(!f->begun, "nobody to answer");
	fake_free(f);
}
