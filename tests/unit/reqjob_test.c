/* SPDX-License-Identifier: Apache-2.0 */
/*
 * reqjob_test.c - the lifetime of a request's async job (base/reqjob.h)
 * on the real worker pool and loop, with a peer of the test's own: the
 * context is freed exactly once, after the last of the creator, the peer
 * and the jobs in flight let go, whatever the order.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdatomic.h>
#include <unistd.h>

#include "base/loop.h"
#include "base/reqjob.h"
#include "base/worker.h"
#include "testloop.h"

/* A wait for an event gives up after this long: a hang, not a timing. */

/* --- a peer: what an HTTP exchange or an RPC call is to the reqjob --- */

struct peer {
	struct reqjob *j; /* the reqjob it is bound to */
	int binds, unbinds;
};

static void peer_bind(void *p, struct reqjob *j)
{
	((struct peer *)p)->j = j;
	((struct peer *)p)->binds++;
}

static void peer_unbind(void *p)
{
	((struct peer *)p)->j = NULL;
	((struct peer *)p)->unbinds++;
}

static const struct reqjob_binding peer_binding = { .bind = peer_bind, .unbind = peer_unbind };

/* The client left: what the binding's close hook does. */
static void peer_close(struct peer *p)
{
	struct reqjob *j = p->j;

	p->j = NULL;
	if (j)
		reqjob_peer_gone(j);
}

/* --- a context with counters; its memory is the test's, never freed --- */

struct ctx {
	struct reqjob job;
	int frees, expireds, cancels, dones;
	struct peer *close_on_expiry; /* the answer closes the exchange at once */
	atomic_int started, ran, gate;
	atomic_bool saw_gone;
	int chain;                    /* jobs done() starts after this one */
};

static void c_free(struct reqjob *j)
{
	REQJOB_CONTAINER(j, struct ctx, job)->frees++;
}

static void c_expired(struct reqjob *j)
{
	struct ctx *c = REQJOB_CONTAINER(j, struct ctx, job);

	c->expireds++;
	cr_assert(j->over && j->expired);
	if (c->close_on_expiry)
		peer_close(c->close_on_expiry);
}

static void c_cancel(struct reqjob *j)
{
	REQJOB_CONTAINER(j, struct ctx, job)->cancels++;
	cr_assert(reqjob_gone(j));
}

static const struct reqjob_ops c_ops = { .free = c_free, .expired = c_expired, .cancel = c_cancel };

static void c_work(void *arg)
{
	struct ctx *c = arg;

	atomic_fetch_add(&c->started, 1);
	while (!atomic_load(&c->gate))
		usleep(200);
	atomic_store(&c->saw_gone, reqjob_gone(&c->job));
	atomic_fetch_add(&c->ran, 1);
}

static void c_done(void *arg)
{
	struct ctx *c = arg;

	c->dones++;
	if (c->chain > 0) {
		c->chain--;
		cr_assert_eq(reqjob_run(&c->job, c_work, c_done, c, 0), 0, "done() may start the next job");
	}
}

static void ctx_init(struct ctx *c, bool open)
{
	memset(c, 0, sizeof(*c));
	reqjob_init(&c->job, &c_ops);
	atomic_store(&c->gate, open);
	c->job.key = 4242;
}

static bool freed(void *arg) { return ((struct ctx *)arg)->frees > 0; }
static bool done_once(void *arg) { return ((struct ctx *)arg)->dones > 0; }
static bool started(void *arg) { return atomic_load(&((struct ctx *)arg)->started) > 0; }
static bool expired(void *arg) { return ((struct ctx *)arg)->expireds > 0; }

/* --- blockers: fill a key's cap so that the next job of it stays queued --- */

static atomic_int blk_gate, blk_started;

static void blk_work(void *arg)
{
	atomic_fetch_add(&blk_started, 1);
	while (!atomic_load(&blk_gate))
		usleep(200);
}

static void blk_done(void *arg) {}

static bool blockers_running(void *arg) { return atomic_load(&blk_started) == WORKER_KEY_CAP; }

static void block_key(uint64_t key)
{
	atomic_store(&blk_gate, 0);
	atomic_store(&blk_started, 0);
	for (int i = 0; i < WORKER_KEY_CAP; i++)
		cr_assert_eq(worker_run(&(struct worker_req){ .work = blk_work, .done = blk_done, .key = key }), 0);
	cr_assert(spin_until(blockers_running, NULL), "the key's cap of jobs runs");
}

/* ---------------------------------------------------------------- */

Test(reqjob, completes_on_the_loop_and_frees_once)
{
	static struct ctx c;
	struct peer p = { 0 };

	ctx_init(&c, true);
	reqjob_attach(&c.job, &p, &peer_binding);
	cr_assert_eq(p.j, &c.job);
	cr_assert(reqjob_live(&c.job));
	cr_assert_eq(reqjob_run(&c.job, c_work, c_done, &c, 0), 0);
	cr_assert_eq(reqjob_busy(&c.job), 1);
	reqjob_release(&c.job); /* the creator's */
	cr_assert(spin_until(done_once, &c));
	cr_assert_eq(reqjob_busy(&c.job), 0);
	cr_assert_eq(c.frees, 0, "the peer still holds it");
	peer_close(&p);
	cr_assert_eq(c.frees, 1);
	cr_assert_eq(c.cancels, 1);
	cr_assert_eq(c.expireds, 0);
}

Test(reqjob, cancel_while_queued)
{
	static struct ctx c;
	struct peer p = { 0 };

	block_key(77);
	ctx_init(&c, true);
	c.job.key = 77;
	reqjob_attach(&c.job, &p, &peer_binding);
	cr_assert_eq(reqjob_run(&c.job, c_work, c_done, &c, 0), 0);
	reqjob_release(&c.job);
	cr_assert(!started(&c), "queued behind the key's cap");
	peer_close(&p);
	cr_assert_eq(c.cancels, 1);
	cr_assert(reqjob_gone(&c.job));
	cr_assert_eq(c.frees, 0, "the queued job holds it");
	atomic_store(&blk_gate, 1);
	cr_assert(spin_until(freed, &c));
	cr_assert_eq(c.dones, 0, "no completion to a request that is gone");
	cr_assert(atomic_load(&c.saw_gone), "the work could tell");
	cr_assert_eq(c.frees, 1);
	cr_assert(spin_until(pool_idle, NULL));
}

Test(reqjob, cancel_while_running)
{
	static struct ctx c;
	struct peer p = { 0 };

	ctx_init(&c, false);
	reqjob_attach(&c.job, &p, &peer_binding);
	cr_assert_eq(reqjob_run(&c.job, c_work, c_done, &c, 0), 0);
	reqjob_release(&c.job);
	cr_assert(spin_until(started, &c));
	peer_close(&p);
	cr_assert_eq(c.cancels, 1);
	cr_assert_eq(reqjob_run(&c.job, c_work, c_done, &c, 0), -ECANCELED, "nothing starts once gone");
	cr_assert_eq(c.frees, 0);
	atomic_store(&c.gate, 1);
	cr_assert(spin_until(freed, &c));
	cr_assert_eq(c.dones, 0);
	cr_assert_eq(c.frees, 1);
}

/*
 * The deadline passes while the job runs: ops->expired answers (here the
 * answer closes the exchange at once), the thread stays, and the context
 * lives until the work returns; its completion is dropped. Whether a job
 * starts before a short deadline depends on the machine, so the deadline
 * grows until the job was running when it passed.
 */
Test(reqjob, expiry_then_late_completion)
{
	static struct ctx cs[12];
	struct peer p[12] = { 0 };
	double timeout = 0.2;
	int n;

	for (n = 0;; n++) {
		cr_assert_lt(n, 12, "a job never started within %.0f s", timeout);
		struct ctx *c = &cs[n];
		ctx_init(c, false);
		c->job.key = 1000 + n;
		c->job.timeout = timeout;
		c->close_on_expiry = &p[n];
		reqjob_attach(&c->job, &p[n], &peer_binding);
		cr_assert_eq(reqjob_run(&c->job, c_work, c_done, c, 0), 0);
		reqjob_release(&c->job);
		cr_assert(spin_until(expired, c));
		if (started(c))
			break;
		/* Dropped from the queue unrun: expired, then freed at once. */
		cr_assert(spin_until(freed, c));
		cr_assert_eq(c->dones, 0);
		timeout *= 3;
	}
	struct ctx *c = &cs[n];
	cr_assert_eq(c->expireds, 1);
	cr_assert_eq(c->cancels, 1, "the 504 closed the exchange");
	cr_assert_eq(c->frees, 0, "the stuck job still holds it");
	atomic_store(&c->gate, 1);
	cr_assert(spin_until(freed, c));
	cr_assert_eq(c->dones, 0, "a late completion is dropped");
	cr_assert_eq(c->frees, 1);
	cr_assert_eq(c->expireds, 1);
}

/* Expired while the exchange stays open (an HTTP/1.1 body still drains):
 * over, so no job starts and no completion comes, until the close. */
Test(reqjob, expiry_makes_it_over)
{
	static struct ctx c;
	struct peer p = { 0 };

	block_key(88);
	ctx_init(&c, true);
	c.job.key = 88;
	c.job.timeout = 0.05;
	reqjob_attach(&c.job, &p, &peer_binding);
	cr_assert_eq(reqjob_run(&c.job, c_work, c_done, &c, 0), 0);
	reqjob_release(&c.job);
	cr_assert(spin_until(expired, &c));
	cr_assert(!reqjob_live(&c.job));
	cr_assert_eq(reqjob_run(&c.job, c_work, c_done, &c, 0), -ECANCELED);
	cr_assert_eq(c.frees, 0, "the exchange holds it");
	peer_close(&p);
	atomic_store(&blk_gate, 1);
	cr_assert(spin_until(freed, &c));
	cr_assert_eq(atomic_load(&c.ran), 0, "dropped from the queue, never run");
	cr_assert_eq(c.dones, 0);
	cr_assert_eq(c.frees, 1);
	cr_assert(spin_until(pool_idle, NULL));
}

Test(reqjob, handoff_moves_the_peer)
{
	static struct ctx a, b;
	struct peer p = { 0 };

	ctx_init(&a, false);
	ctx_init(&b, true);
	reqjob_attach(&a.job, &p, &peer_binding);
	cr_assert_eq(reqjob_run(&a.job, c_work, c_done, &a, 0), 0);
	cr_assert_eq(reqjob_handoff(&a.job, &b.job), 0);
	cr_assert_eq(p.j, &b.job, "the peer's hooks lead to the new responder");
	cr_assert_eq(p.binds, 2);
	cr_assert(!reqjob_live(&a.job) && reqjob_live(&b.job));
	cr_assert_eq(reqjob_handoff(&a.job, &b.job), -ENOTCONN);
	reqjob_release(&a.job);
	cr_assert_eq(a.frees, 0, "its job in flight holds it");
	cr_assert_eq(a.cancels, 0, "handing on is not a cancel");
	atomic_store(&a.gate, 1);
	cr_assert(spin_until(freed, &a));
	cr_assert_eq(a.dones, 0, "the old responder hears nothing more");
	cr_assert_eq(reqjob_run(&b.job, c_work, c_done, &b, 0), 0);
	reqjob_release(&b.job);
	cr_assert(spin_until(done_once, &b));
	cr_assert_eq(b.frees, 0);
	peer_close(&p);
	cr_assert_eq(b.cancels, 1);
	cr_assert_eq(b.frees, 1);
	cr_assert_eq(a.frees, 1);
}

Test(reqjob, double_release_and_double_close)
{
	static struct ctx c;
	struct peer p = { 0 };

	ctx_init(&c, true);
	reqjob_attach(&c.job, &p, &peer_binding);
	struct reqjob *j = p.j;
	peer_close(&p);
	reqjob_peer_gone(j); /* a second close hook: nothing */
	cr_assert_eq(c.cancels, 1);
	cr_assert_eq(c.frees, 0);
	reqjob_release(&c.job);
	cr_assert_eq(c.frees, 1);
	reqjob_release(&c.job); /* one too many: logged, ignored */
	cr_assert_eq(c.frees, 1);

	/* Taken back, then the close hook of a peer no longer bound. */
	ctx_init(&c, true);
	reqjob_attach(&c.job, &p, &peer_binding);
	cr_assert_eq(reqjob_detach(&c.job), &p);
	cr_assert_eq(p.unbinds, 1);
	cr_assert_null(reqjob_detach(&c.job));
	reqjob_peer_gone(&c.job);
	cr_assert_eq(c.cancels, 0, "taking the peer back is not a cancel");
	reqjob_release(&c.job);
	cr_assert_eq(c.frees, 1);
}

/* A hold keeps the context across an answer that closes the exchange at once. */
Test(reqjob, hold_across_a_synchronous_close)
{
	static struct ctx c;
	struct peer p = { 0 };

	ctx_init(&c, true);
	reqjob_attach(&c.job, &p, &peer_binding);
	reqjob_release(&c.job);
	reqjob_hold(&c.job);
	peer_close(&p);
	cr_assert_eq(c.frees, 0);
	reqjob_release(&c.job);
	cr_assert_eq(c.frees, 1);
}

Test(reqjob, chain_from_done)
{
	static struct ctx c;
	struct peer p = { 0 };

	ctx_init(&c, true);
	c.chain = 3;
	reqjob_attach(&c.job, &p, &peer_binding);
	cr_assert_eq(reqjob_run(&c.job, c_work, c_done, &c, 0), 0);
	reqjob_release(&c.job);
	cr_assert(spin_until(pool_idle, NULL));
	cr_assert_eq(c.dones, 4);
	cr_assert_eq(atomic_load(&c.ran), 4);
	peer_close(&p);
	cr_assert_eq(c.frees, 1);
}

struct multi {
	struct reqjob job;
	struct reqjob_task t[2];
	int dones, frees;
	atomic_int gate;
};

static void m_free(struct reqjob *j) { REQJOB_CONTAINER(j, struct multi, job)->frees++; }
static const struct reqjob_ops m_ops = { .free = m_free };
static void m_work(void *arg)
{
	struct multi *m = arg;
	while (!atomic_load(&m->gate))
		usleep(200);
}
static void m_done(void *arg) { ((struct multi *)arg)->dones++; }
static bool m_two_done(void *arg) { return ((struct multi *)arg)->dones == 2; }

Test(reqjob, several_tasks_at_once)
{
	static struct multi m;
	struct peer p = { 0 };

	reqjob_init(&m.job, &m_ops);
	reqjob_attach(&m.job, &p, &peer_binding);
	cr_assert_eq(reqjob_run_task(&m.job, &m.t[0], m_work, m_done, &m, REQJOB_CPU), 0);
	cr_assert_eq(reqjob_run_task(&m.job, &m.t[1], m_work, m_done, &m, REQJOB_NO_DEADLINE), 0);
	cr_assert_eq(reqjob_run_task(&m.job, &m.t[0], m_work, m_done, &m, 0), -EBUSY, "one job per task");
	cr_assert_eq(reqjob_busy(&m.job), 2);
	cr_assert(reqjob_task_busy(&m.t[0]) && reqjob_task_busy(&m.t[1]));
	reqjob_release(&m.job);
	atomic_store(&m.gate, 1);
	cr_assert(spin_until(m_two_done, &m));
	cr_assert(!reqjob_task_busy(&m.t[0]) && !reqjob_task_busy(&m.t[1]), "free again once done() ran");
	peer_close(&p);
	cr_assert_eq(m.frees, 1);
}

Test(reqjob, finish_drops_what_follows)
{
	static struct ctx c;
	struct peer p = { 0 };

	ctx_init(&c, false);
	reqjob_attach(&c.job, &p, &peer_binding);
	cr_assert_eq(reqjob_run(&c.job, c_work, c_done, &c, 0), 0);
	reqjob_finish(&c.job);
	cr_assert(!reqjob_live(&c.job));
	cr_assert_eq(reqjob_run(&c.job, c_work, c_done, &c, 0), -ECANCELED);
	reqjob_release(&c.job);
	atomic_store(&c.gate, 1);
	cr_assert(spin_until(pool_idle, NULL));
	cr_assert_eq(c.dones, 0, "answered: the completion is dropped");
	cr_assert_eq(c.frees, 0, "the exchange is still open");
	peer_close(&p);
	cr_assert_eq(c.frees, 1);
}

Test(reqjob, nothing_runs_without_a_peer)
{
	static struct ctx c;

	ctx_init(&c, true);
	cr_assert_eq(reqjob_run(&c.job, c_work, c_done, &c, 0), -ECANCELED);
	cr_assert_eq(reqjob_busy(&c.job), 0);
	reqjob_release(&c.job);
	cr_assert_eq(c.frees, 1);
}

/*
 * `until` bounds every job by what is left of the request's deadline: a
 * job whose own timeout is far longer than the test's hang bound expires
 * all the same once that point has passed.
 */
Test(reqjob, until_bounds_the_job_by_what_is_left)
{
	static struct ctx c;
	struct peer p = { 0 };

	ctx_init(&c, false);
	c.job.timeout = 10 * HANG_S;
	c.job.until = ev_now(envd_loop) + 0.02;
	c.close_on_expiry = &p;
	reqjob_attach(&c.job, &p, &peer_binding);
	cr_assert_eq(reqjob_run(&c.job, c_work, c_done, &c, 0), 0);
	reqjob_release(&c.job);
	cr_assert(spin_until(expired, &c), "the job outlived what was left of the deadline");
	cr_assert_eq(c.expireds, 1);
	cr_assert(c.job.expired);
	atomic_store(&c.gate, 1);
	cr_assert(spin_until(freed, &c));
	cr_assert_eq(c.dones, 0);
	cr_assert_eq(c.frees, 1);
	cr_assert(spin_until(pool_idle, NULL));
}

/* Jobs of one key submitted together with REQJOB_SPREAD run at the same
 * time: each waits (at most the hang bound) to see the other started. */
struct meet {
	struct reqjob job;
	struct reqjob_task t[2];
	atomic_int started;
	atomic_int met;
	int dones, frees;
};

static void meet_free(struct reqjob *j) { REQJOB_CONTAINER(j, struct meet, job)->frees++; }
static const struct reqjob_ops meet_ops = { .free = meet_free };
static void meet_work(void *arg)
{
	struct meet *m = arg;

	atomic_fetch_add(&m->started, 1);
	for (double t = 0; t < HANG_S && atomic_load(&m->started) < 2; t += 0.0002)
		usleep(200);
	if (atomic_load(&m->started) == 2)
		atomic_fetch_add(&m->met, 1);
}
static void meet_done(void *arg) { ((struct meet *)arg)->dones++; }
static bool meet_two_done(void *arg) { return ((struct meet *)arg)->dones == 2; }

Test(reqjob, spread_jobs_run_together)
{
	static struct meet m;
	struct peer p = { 0 };

	reqjob_init(&m.job, &meet_ops);
	m.job.key = 5151;
	reqjob_attach(&m.job, &p, &peer_binding);
	cr_assert_eq(reqjob_run_task(&m.job, &m.t[0], meet_work, meet_done, &m, REQJOB_SPREAD), 0);
	cr_assert_eq(reqjob_run_task(&m.job, &m.t[1], meet_work, meet_done, &m, REQJOB_SPREAD), 0);
	reqjob_release(&m.job);
	cr_assert(spin_until(meet_two_done, &m));
	cr_assert_eq(atomic_load(&m.met), 2, "both jobs were running at once");
	peer_close(&p);
	cr_assert_eq(m.frees, 1);
}
