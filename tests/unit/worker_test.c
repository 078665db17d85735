/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "base/loop.h"
#include "base/worker.h"

struct job {
	int id;
	pthread_t ran_on;
	bool done_on_loop;
};

static pthread_t loop_thread;
static int done_order[WORKER_QUEUE_MAX * 2];
static int n_done;
static atomic_int gate; /* workers spin until opened */

static void work_fn(void *arg)
{
	struct job *j = arg;
	while (!atomic_load(&gate))
		usleep(100);
	j->ran_on = pthread_self();
}

static void done_fn(void *arg)
{
	struct job *j = arg;
	j->done_on_loop = pthread_equal(pthread_self(), loop_thread);
	done_order[n_done++] = j->id;
	if (!worker_pending())
		ev_break(envd_loop, EVBREAK_ALL);
}

static ev_timer guard;
static void on_guard(struct ev_loop *l, ev_timer *w, int re)
{
	ev_break(l, EVBREAK_ALL);
}

static void run_loop(double max_s)
{
	ev_timer_init(&guard, on_guard, max_s, 0);
	ev_timer_start(envd_loop, &guard);
	ev_run(envd_loop, 0);
	ev_timer_stop(envd_loop, &guard);
}

Test(worker, runs_off_loop_and_completes_in_order)
{
	static struct job jobs[20];
	loop_thread = pthread_self();
	atomic_store(&gate, 1);
	n_done = 0;
	for (int i = 0; i < 20; i++) {
		jobs[i].id = i;
		cr_assert_eq(worker_submit(work_fn, done_fn, &jobs[i]), 0);
	}
	run_loop(10);
	cr_assert_eq(n_done, 20);
	for (int i = 0; i < 20; i++) {
		cr_assert_eq(done_order[i], i);
		cr_assert(jobs[i].done_on_loop);
		cr_assert(!pthread_equal(jobs[i].ran_on, loop_thread));
	}
	cr_assert_eq(worker_pending(), 0);
}

Test(worker, queue_is_bounded)
{
	static struct job jobs[WORKER_QUEUE_MAX + 1];
	loop_thread = pthread_self();
	atomic_store(&gate, 0);
	n_done = 0;
	for (int i = 0; i < WORKER_QUEUE_MAX; i++) {
		jobs[i].id = i;
		cr_assert_eq(worker_submit(work_fn, done_fn, &jobs[i]), 0);
	}
	cr_assert_eq(worker_submit(work_fn, done_fn, &jobs[WORKER_QUEUE_MAX]), -EAGAIN);
	cr_assert_eq(worker_pending(), WORKER_QUEUE_MAX);
	atomic_store(&gate, 1);
	run_loop(20);
	cr_assert_eq(n_done, WORKER_QUEUE_MAX);
	/* Space again after completion. */
	jobs[0].id = 0;
	n_done = 0;
	cr_assert_eq(worker_submit(work_fn, done_fn, &jobs[0]), 0);
	run_loop(10);
	cr_assert_eq(n_done, 1);
}

Test(worker, rejects_null_work)
{
	cr_assert_eq(worker_submit(NULL, NULL, NULL), -EINVAL);
}
