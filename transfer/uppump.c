/* SPDX-License-Identifier: Apache-2.0 */
/*
 * uppump.c - a request body pumped to the worker pool (uppump.h).
 */
#include "transfer/uppump.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/httpjob.h"
#include "transfer/fsjob.h"

static void pump_free(struct reqjob *j)
{
	struct uppump *p = REQJOB_CONTAINER(j, struct uppump, job);

	if (p->zinit)
		inflateEnd(&p->zs);
	free(p->zout);
	free(p->in);
	free(p->work);
	p->ops->free(p);
}

static void pump_resume(struct uppump *p, struct http_req *r)
{
	if (p->paused) {
		p->paused = false;
		http_req_pause_body(r, false);
	}
}

/* The request is answered with the recorded error; the rest of the body
 * drains, ignored, so the connection lives on. */
static void pump_answer_error(struct uppump *p, struct http_req *r)
{
	reqjob_finish(&p->job);
	pump_resume(p, r);
	http_respond_json_error(r, p->status, p->msg); /* may call on_close */
}

/* A job outlived its deadline: answer 504 while its thread stays stuck. */
static void pump_expired(struct reqjob *j)
{
	struct uppump *p = REQJOB_CONTAINER(j, struct uppump, job);
	struct http_req *r = httpjob_req(j);
	char msg[FILES_MSGLEN];

	pump_resume(p, r);
	fsjob_timeout_msg(msg, sizeof(msg), j->timeout, p->shown);
	http_respond_json_error(r, 504, msg); /* may call on_close */
}

static const struct reqjob_ops pump_ops = { .free = pump_free, .expired = pump_expired };

void uppump_init(struct uppump *p, const struct uppump_ops *ops)
{
	reqjob_init(&p->job, &pump_ops);
	p->ops = ops;
}

int uppump_alloc(struct uppump *p, bool gzip)
{
	p->in = malloc(UPPUMP_IN_MAX);
	p->work = malloc(UPPUMP_IN_MAX);
	if (!p->in || !p->work)
		return -ENOMEM;
	p->gzip = gzip;
	if (!gzip)
		return 0;
	p->zout = malloc(UPPUMP_ZCHUNK);
	if (!p->zout || inflateInit2(&p->zs, 16 + MAX_WBITS) != Z_OK)
		return -ENOMEM;
	p->zinit = true;
	return 0;
}

int uppump_fail(struct uppump *p, int status, const char *fmt, ...)
{
	va_list ap;

	if (p->ops->discard)
		p->ops->discard(p);
	if (p->failed)
		return -ECANCELED;
	p->failed = true;
	p->status = status;
	va_start(ap, fmt);
	vsnprintf(p->msg, sizeof(p->msg), fmt, ap);
	va_end(ap);
	return -ECANCELED;
}

/* Worker: gzip body bytes, inflated into the sink chunk by chunk. */
static int pump_inflate(struct uppump *p, const uint8_t *b, size_t n)
{
	p->zs.next_in = (Bytef *)b;
	p->zs.avail_in = (uInt)n;
	if (n)
		p->got_input = true;
	while (p->zs.avail_in > 0) {
		if (p->zended) {
			/* Another gzip member follows (Go reads multistream). */
			inflateReset(&p->zs);
			p->zended = false;
		}
		p->zs.next_out = p->zout;
		p->zs.avail_out = UPPUMP_ZCHUNK;
		int zr = inflate(&p->zs, Z_NO_FLUSH);
		size_t have = UPPUMP_ZCHUNK - p->zs.avail_out;
		if (zr == Z_DATA_ERROR || zr == Z_NEED_DICT || zr == Z_STREAM_ERROR || zr == Z_MEM_ERROR)
			return p->ops->bad_gzip(p, p->zs.msg ? p->zs.msg : "invalid data");
		if (have) {
			int rc = p->ops->sink(p, p->zout, have);
			if (rc)
				return rc;
		}
		if (zr == Z_STREAM_END)
			p->zended = true;
		else if (zr == Z_BUF_ERROR && have == 0)
			break;
	}
	return 0;
}

/* Worker: consume `work`, and finish when it was the last. */
static void pump_work(void *arg)
{
	struct uppump *p = arg;

	if (!p->failed && p->ops->prepare)
		p->ops->prepare(p);
	if (!p->failed && p->work_len) {
		if (p->gzip)
			pump_inflate(p, p->work, p->work_len);
		else
			p->ops->sink(p, p->work, p->work_len);
	}
	p->work_len = 0;
	if (p->finishing && !p->failed)
		p->ops->finish(p);
}

static void pump_done(void *arg);

/* Loop: hand the buffered bytes (or the last step) to the pool. */
static void pump_submit(struct uppump *p)
{
	unsigned flags = p->ops->unbounded && p->ops->unbounded(p, p->finishing) ? REQJOB_NO_DEADLINE : 0;
	char msg[FILES_MSGLEN];

	if (reqjob_run(&p->job, pump_work, pump_done, p, flags) == 0)
		return;
	fsjob_busy_msg(msg, sizeof(msg), p->shown);
	uppump_fail(p, 503, "%s", msg);
	pump_answer_error(p, httpjob_req(&p->job));
}

static void pump_kick(struct uppump *p)
{
	uint8_t *t;

	if (reqjob_busy(&p->job) || !reqjob_live(&p->job))
		return;
	/* Batch small deliveries: one thread hand-off per UPPUMP_KICK bytes. */
	if (!p->body_ended && p->in_len < UPPUMP_KICK)
		return;
	t = p->work;
	p->work = p->in;
	p->work_len = p->in_len;
	p->in = t;
	p->in_len = 0;
	p->finishing = p->body_ended;
	pump_submit(p);
}

/* Loop, while the exchange is live: the job is back. */
static void pump_done(void *arg)
{
	struct uppump *p = arg;
	struct http_req *r = httpjob_req(&p->job);

	if (p->ops->back)
		p->ops->back(p);
	if (p->overrun)
		uppump_fail(p, 500, "error reading request body: too much data buffered");
	if (p->failed) {
		pump_answer_error(p, r);
		return;
	}
	if (p->finishing) {
		reqjob_finish(&p->job);
		p->ops->respond(p, r);
		return;
	}
	if (p->in_len >= UPPUMP_KICK || p->body_ended) {
		pump_kick(p);
		return;
	}
	pump_resume(p, r);
}

static struct uppump *pump_of(struct http_req *r)
{
	struct reqjob *j = httpjob_of(r);

	return j ? REQJOB_CONTAINER(j, struct uppump, job) : NULL;
}

/* Whether body bytes are still wanted: not answered, and no error that a
 * job left for the loop to send (`failed` is the job's while it runs). */
static bool pump_wants_body(struct uppump *p)
{
	return reqjob_live(&p->job) && (reqjob_busy(&p->job) || !p->failed);
}

static void pump_on_body(struct http_req *r, const uint8_t *b, size_t n)
{
	struct uppump *p = pump_of(r);

	if (!p || !pump_wants_body(p))
		return; /* drained and ignored after an answer */
	if (p->in_len + n > UPPUMP_IN_MAX) {
		/* The transport kept delivering far past the pause: fail rather
		 * than lose bytes or buffer without bound. */
		p->overrun = true;
		if (!reqjob_busy(&p->job)) {
			uppump_fail(p, 500, "error reading request body: too much data buffered");
			pump_answer_error(p, r);
		}
		return;
	}
	memcpy(p->in + p->in_len, b, n);
	p->in_len += n;
	if (reqjob_busy(&p->job) && p->in_len >= UPPUMP_IN_HIGH && !p->paused) {
		p->paused = true;
		http_req_pause_body(r, true);
	}
	pump_kick(p);
}

static void pump_on_body_end(struct http_req *r)
{
	struct uppump *p = pump_of(r);

	if (!p || !pump_wants_body(p))
		return;
	p->body_ended = true;
	pump_kick(p);
}

void uppump_start(struct uppump *p, struct http_req *r, bool first_job)
{
	httpjob_attach(&p->job, r);
	r->on_body = pump_on_body;
	r->on_body_end = pump_on_body_end;
	if (first_job)
		pump_submit(p);
	if (r->body_done)
		pump_on_body_end(r);
}
