/* SPDX-License-Identifier: Apache-2.0 */
/*
 * reqjob.c - one lifetime for a request's asynchronous work (reqjob.h).
 */
#include "base/reqjob.h"

#include <errno.h>
#include <string.h>

#include "base/log.h"
#include "base/loop.h"
#include "base/worker.h"

void reqjob_init(struct reqjob *j, const struct reqjob_ops *ops)
{
	memset(j, 0, sizeof(*j));
	j->ops = ops;
	j->refs = 1;
	atomic_init(&j->gone, false);
}

void reqjob_hold(struct reqjob *j)
{
	j->refs++;
}

void reqjob_release(struct reqjob *j)
{
	if (!j->refs) {
		/* Freeing twice would be worse than a leak; the log names it. */
		log_error("reqjob", "reqjob_release: no reference held (released twice?)");
		return;
	}
	if (--j->refs == 0)
		j->ops->free(j);
}

void reqjob_attach(struct reqjob *j, void *peer, const struct reqjob_binding *b)
{
	j->peer = peer;
	j->binding = b;
	j->refs++;
	b->bind(peer, j);
}

void reqjob_peer_gone(struct reqjob *j)
{
	if (!j->peer)
		return;
	j->peer = NULL;
	atomic_store_explicit(&j->gone, true, memory_order_relaxed);
	if (j->ops->cancel)
		j->ops->cancel(j);
	reqjob_release(j);
}

void *reqjob_detach(struct reqjob *j)
{
	void *peer = j->peer;

	if (!peer)
		return NULL;
	j->peer = NULL;
	j->binding->unbind(peer);
	reqjob_release(j);
	return peer;
}

int reqjob_handoff(struct reqjob *from, struct reqjob *to)
{
	void *peer = from->peer;

	if (!peer)
		return -ENOTCONN;
	from->peer = NULL;
	to->peer = peer;
	to->binding = from->binding;
	to->refs++;
	to->binding->bind(peer, to);
	reqjob_release(from);
	return 0;
}

void *reqjob_peer(const struct reqjob *j)
{
	return j->peer;
}

bool reqjob_live(const struct reqjob *j)
{
	return j->peer && !j->over;
}

void reqjob_finish(struct reqjob *j)
{
	j->over = true;
}

unsigned reqjob_busy(const struct reqjob *j)
{
	return j->jobs;
}

bool reqjob_task_busy(const struct reqjob_task *t)
{
	return t->busy;
}

bool reqjob_gone(const struct reqjob *j)
{
	return atomic_load_explicit(&j->gone, memory_order_relaxed);
}

static void task_work(void *arg)
{
	struct reqjob_task *t = arg;

	t->work(t->arg);
}

/* The deadline passed first: the owner answers, once, if it still can. */
static void task_expired(void *arg)
{
	struct reqjob *j = ((struct reqjob_task *)arg)->owner;

	if (!reqjob_live(j))
		return;
	j->over = true;
	j->expired = true;
	if (j->ops->expired)
		j->ops->expired(j);
}

static void task_done(void *arg)
{
	struct reqjob_task *t = arg;
	struct reqjob *j = t->owner;

	/* Free before done(), which may start the next job on this task. */
	t->busy = false;
	j->jobs--;
	if (reqjob_live(j))
		t->done(t->arg);
	reqjob_release(j);
}

int reqjob_run_task(struct reqjob *j, struct reqjob_task *t, void (*work)(void *arg), void (*done)(void *arg),
		    void *arg, unsigned flags)
{
	struct worker_req req = { .work = task_work, .done = task_done, .expired = task_expired, .arg = t,
				  .key = j->key, .timeout = j->timeout, .stall = j->stall,
				  .spread = (flags & REQJOB_SPREAD) != 0,
				  .quick_ns = (flags & REQJOB_WRITES) ? REQJOB_WRITES_NS : 0 };
	int rc;

	if (!reqjob_live(j))
		return -ECANCELED;
	if (t->busy)
		return -EBUSY;
	if (j->until > 0 && !j->stall) {
		/* A job that starts late must not push the client's deadline on. */
		req.timeout = j->until - ev_now(envd_loop);
		if (req.timeout < 0.001)
			req.timeout = 0.001;
	}
	if (flags & (REQJOB_NO_DEADLINE | REQJOB_CPU)) {
		req.timeout = 0;
		req.stall = false;
	}
	if (flags & REQJOB_CPU)
		req.key = 0;
	t->owner = j;
	t->work = work;
	t->done = done;
	t->arg = arg;
	rc = worker_run(&req);
	if (rc < 0)
		return rc;
	t->busy = true;
	j->jobs++;
	j->refs++;
	return 0;
}

int reqjob_run(struct reqjob *j, void (*work)(void *arg), void (*done)(void *arg), void *arg, unsigned flags)
{
	return reqjob_run_task(j, &j->task, work, done, arg, flags);
}
