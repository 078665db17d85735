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

Test(worker, runs_off_loop)
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

/* --- deadlines, keys, out-of-order completion --- */

struct hjob {
	int id;
	atomic_int *gate; /* the job blocks until *gate */
	bool ran, expired, done;
	int order;
};

static int h_seq;
static int h_done_target;
static int h_done_count;

static void h_work(void *arg)
{
	struct hjob *j = arg;
	while (!atomic_load(j->gate))
		usleep(200);
	j->ran = true;
}

static void h_expired(void *arg)
{
	struct hjob *j = arg;
	j->expired = true;
}

static void h_done(void *arg)
{
	struct hjob *j = arg;
	j->done = true;
	j->order = h_seq++;
	if (++h_done_count >= h_done_target)
		ev_break(envd_loop, EVBREAK_ALL);
}

static int h_run(struct hjob *j, uint64_t key, double timeout)
{
	struct worker_req r = { .work = h_work, .done = h_done, .expired = h_expired,
				.arg = j, .key = key, .timeout = timeout };
	return worker_run(&r);
}

static void h_wait(int n, double max_s)
{
	h_done_target = n;
	if (h_done_count < n)
		run_loop(max_s);
}

/* A job that never returns holds back nothing but itself. */
Test(worker, completes_in_finish_order)
{
	static atomic_int stuck_gate, open_gate = 1;
	static struct hjob a = { .id = 0, .gate = &stuck_gate }, b = { .id = 1, .gate = &open_gate };

	h_seq = h_done_count = 0;
	cr_assert_eq(h_run(&a, 1000, 0), 0);
	cr_assert_eq(h_run(&b, 2000, 0), 0);
	h_wait(1, 120);
	cr_assert(b.done && !a.done, "the later job completes while the first still blocks");
	atomic_store(&stuck_gate, 1);
	h_wait(2, 120);
	cr_assert(a.done && a.ran);
}

static atomic_int h_started;

static void h_work_counted(void *arg)
{
	atomic_fetch_add(&h_started, 1);
	h_work(arg);
}

static int h_run_counted(struct hjob *j, uint64_t key, double timeout)
{
	struct worker_req r = { .work = h_work_counted, .done = h_done, .expired = h_expired,
				.arg = j, .key = key, .timeout = timeout };
	return worker_run(&r);
}

/* Turn the loop until cond() holds; false after max_s (a hang, not a
 * timing: nothing here is expected to take more than moments). */
static bool spin_until(bool (*cond)(void), double max_s)
{
	for (double t = 0; t < max_s; t += 0.01) {
		if (cond())
			return true;
		ev_run(envd_loop, EVRUN_ONCE | EVRUN_NOWAIT);
		usleep(10000);
	}
	return cond();
}

static int want_started;
static bool started_enough(void) { return atomic_load(&h_started) >= want_started; }

/*
 * A job over its key's cap waits in the queue; its deadline drops it there
 * (expired, then done, never run). A running job past its deadline is
 * answered (expired) while its thread stays stuck, and done follows once
 * the work returns. Whether a job starts before a short deadline depends
 * on the machine, so the running case retries with longer deadlines until
 * its job was running when the deadline passed.
 */
Test(worker, deadline_expires_running_and_drops_queued)
{
	static atomic_int gate;
	static struct hjob run[WORKER_KEY_CAP], queued = { .gate = &gate };
	struct worker_stats st;

	h_seq = h_done_count = 0;
	atomic_store(&h_started, 0);
	for (int i = 0; i < WORKER_KEY_CAP; i++) {
		run[i].gate = &gate;
		cr_assert_eq(h_run_counted(&run[i], 77, 0), 0);
	}
	want_started = WORKER_KEY_CAP;
	cr_assert(spin_until(started_enough, 300), "the cap's worth of jobs runs");
	cr_assert_eq(h_run(&queued, 77, 0.2), 0);
	h_wait(1, 300);
	cr_assert(queued.expired && queued.done && !queued.ran, "dropped unrun from the queue");

	static struct hjob late[12];
	double timeout = 0.2;
	int n = 0;
	for (;; n++) {
		cr_assert_lt(n, 12, "a job never started within %.0f s", timeout);
		late[n].gate = &gate;
		int before = atomic_load(&h_started);
		cr_assert_eq(h_run_counted(&late[n], 1000 + n, timeout), 0);
		want_started = before + 1;
		/* Either it starts, or it is dropped at its deadline first. */
		while (!late[n].done && !started_enough())
			ev_run(envd_loop, EVRUN_ONCE);
		if (started_enough())
			break;
		timeout *= 3;
	}
	while (!late[n].expired)
		ev_run(envd_loop, EVRUN_ONCE);
	cr_assert(!late[n].done, "expired while running: not done until its work returns");
	worker_get_stats(&st);
	cr_assert_eq(st.stuck, 1);
	atomic_store(&gate, 1);
	h_wait(1 + WORKER_KEY_CAP + n + 1, 300);
	cr_assert(late[n].done && late[n].ran);
	for (int i = 0; i < WORKER_KEY_CAP; i++)
		cr_assert(run[i].done && run[i].ran);
	worker_get_stats(&st);
	cr_assert_eq(st.stuck, 0);
	cr_assert_eq(st.pending, 0);
}

/*
 * A stall deadline (.stall): while the work keeps calling worker_progress()
 * the deadline starts again each time it passes, so a long walk that keeps
 * moving is never expired; a job that stops moving is, as before. A thread
 * the machine does not run for a whole deadline looks stuck, so the moving
 * case retries with longer deadlines until three deadlines passed with it
 * moving.
 */
static atomic_int s_stop, s_steps;

static void s_work(void *arg)
{
	struct hjob *j = arg;

	while (!atomic_load(&s_stop)) {
		worker_progress();
		atomic_fetch_add(&s_steps, 1);
		usleep(2000);
	}
	j->ran = true;
}

static size_t s_base;
static bool s_extended_thrice(void)
{
	struct worker_stats st;

	worker_get_stats(&st);
	return st.extended >= s_base + 3;
}

Test(worker, stall_deadline_follows_progress)
{
	static struct hjob moving[8];
	struct worker_stats st;
	double timeout = 0.2;
	int n = 0;

	h_seq = h_done_count = 0;
	worker_progress(); /* not on a pool thread: nothing happens */
	for (;; n++) {
		cr_assert_lt(n, 8, "a moving job was expired even at %.1f s", timeout);
		worker_get_stats(&st);
		s_base = st.extended;
		atomic_store(&s_stop, 0);
		struct worker_req r = { .work = s_work, .done = h_done, .expired = h_expired,
					.arg = &moving[n], .key = 4242, .timeout = timeout, .stall = true };
		cr_assert_eq(worker_run(&r), 0);
		while (!moving[n].expired && !s_extended_thrice())
			ev_run(envd_loop, EVRUN_ONCE);
		atomic_store(&s_stop, 1);
		h_wait(n + 1, 300);
		cr_assert(moving[n].done && moving[n].ran);
		if (!moving[n].expired)
			break;
		timeout *= 3;
	}
	cr_assert_gt(atomic_load(&s_steps), 0);

	/* The same deadline on a job that does not move: expired, and done
	 * once its work returns. */
	static atomic_int gate;
	static struct hjob still = { .gate = &gate };
	struct worker_req r = { .work = h_work, .done = h_done, .expired = h_expired,
				.arg = &still, .key = 4243, .timeout = 0.2, .stall = true };
	cr_assert_eq(worker_run(&r), 0);
	while (!still.expired)
		ev_run(envd_loop, EVRUN_ONCE);
	/* Dropped unrun if no thread took it in time, else done on return. */
	cr_assert(!still.done || !still.ran);
	atomic_store(&gate, 1);
	h_wait(n + 2, 300);
	cr_assert(still.done);
	worker_get_stats(&st);
	cr_assert_eq(st.pending, 0);
}

/*
 * One hung key takes at most its cap; once one of its jobs is stuck past
 * its deadline it gets WORKER_SICK_CAP; other keys keep running, and the
 * pool grows past the stuck threads to serve them.
 */
Test(worker, hung_key_is_capped_others_run)
{
	static atomic_int hung, open_gate = 1;
	static struct hjob h[WORKER_KEY_CAP + 8], probe[12], other[8];
	struct worker_stats st;

	h_seq = h_done_count = 0;
	atomic_store(&h_started, 0);
	for (int i = 0; i < WORKER_KEY_CAP + 8; i++) {
		h[i].gate = &hung;
		cr_assert_eq(h_run_counted(&h[i], 5, 0), 0);
	}
	want_started = WORKER_KEY_CAP;
	cr_assert(spin_until(started_enough, 300), "the cap's worth runs");
	for (int i = 0; i < 20; i++) { /* and no more, while we look */
		ev_run(envd_loop, EVRUN_ONCE | EVRUN_NOWAIT);
		usleep(5000);
	}
	worker_get_stats(&st);
	cr_assert_eq(st.running, WORKER_KEY_CAP, "no more than the cap runs");
	cr_assert_eq(st.queued, 8);
	/* Other keys run meanwhile, on threads the pool adds. */
	for (int i = 0; i < 8; i++) {
		other[i].gate = &open_gate;
		cr_assert_eq(h_run(&other[i], 6, 0), 0);
	}
	h_wait(8, 300);
	for (int i = 0; i < 8; i++)
		cr_assert(other[i].done && other[i].ran);
	worker_get_stats(&st);
	cr_assert_gt(st.threads, WORKER_KEY_CAP, "the pool grew past the stuck threads");
	/* Release the hung key and let its queue drain. */
	atomic_store(&hung, 1);
	h_wait(8 + WORKER_KEY_CAP + 8, 300);

	/* Now make the key sick: a job of it running past its deadline. */
	static atomic_int hung2;
	double timeout = 0.2;
	int n = 0;
	for (;; n++) {
		cr_assert_lt(n, 12, "a job never started within %.0f s", timeout);
		probe[n].gate = &hung2;
		int before = atomic_load(&h_started);
		cr_assert_eq(h_run_counted(&probe[n], 5, timeout), 0);
		want_started = before + 1;
		while (!probe[n].done && !started_enough())
			ev_run(envd_loop, EVRUN_ONCE);
		if (started_enough())
			break;
		timeout *= 3;
	}
	while (!probe[n].expired)
		ev_run(envd_loop, EVRUN_ONCE);
	/* Sick: WORKER_SICK_CAP in all may run, so of three more one starts. */
	static struct hjob more[3];
	int before = atomic_load(&h_started);
	for (int i = 0; i < 3; i++) {
		more[i].gate = &hung2;
		cr_assert_eq(h_run_counted(&more[i], 5, 0), 0);
	}
	want_started = before + WORKER_SICK_CAP - 1;
	cr_assert(spin_until(started_enough, 300));
	for (int i = 0; i < 20; i++) {
		ev_run(envd_loop, EVRUN_ONCE | EVRUN_NOWAIT);
		usleep(5000);
	}
	cr_assert_eq(atomic_load(&h_started), before + WORKER_SICK_CAP - 1, "a sick key is held at its cap");
	atomic_store(&hung2, 1);
	int total = 8 + WORKER_KEY_CAP + 8 + n + 1 + 3;
	h_wait(total, 300);
	worker_get_stats(&st);
	cr_assert_eq(st.pending, 0);
	cr_assert_eq(st.stuck, 0);
}

Test(worker, key_queue_is_bounded)
{
	static atomic_int gate;
	static struct hjob j[WORKER_KEY_QUEUE_MAX + 1];

	h_seq = h_done_count = 0;
	for (int i = 0; i < WORKER_KEY_QUEUE_MAX; i++) {
		j[i].gate = &gate;
		cr_assert_eq(h_run(&j[i], 9, 0), 0);
	}
	j[WORKER_KEY_QUEUE_MAX].gate = &gate;
	cr_assert_eq(h_run(&j[WORKER_KEY_QUEUE_MAX], 9, 0), -EAGAIN);
	atomic_store(&gate, 1);
	h_wait(WORKER_KEY_QUEUE_MAX, 120);
}

Test(worker, path_keys_follow_mount_points)
{
	uint64_t root = worker_path_key("/");

	cr_assert_gt(root, 1);
	cr_assert_eq(worker_path_key("/no/such/dir"), root);
	cr_assert_neq(worker_path_key("/proc"), root);
	cr_assert_eq(worker_path_key("/proc/self/status"), worker_path_key("/proc"));
	cr_assert_eq(worker_path_key("/procfoo"), root, "a prefix only at a / counts");
	cr_assert_eq(worker_deadline_s(1500), 1.5);
	cr_assert_eq(worker_deadline_s(0), worker_fs_timeout);
}

/*
 * After a burst, a light steady load is served by the threads that are
 * idle the shortest; the rest leave the pool after WORKER_IDLE_S, so it
 * shrinks back to its core even while requests keep coming.
 */
Test(worker, shrinks_under_a_light_steady_load, .timeout = 300)
{
	static atomic_int gate;
	static atomic_int open_gate = 1;
	static struct hjob burst[WORKER_KEY_CAP];
	struct worker_stats st;
	int done = 0;

	h_seq = h_done_count = 0;
	atomic_store(&h_started, 0);
	for (int i = 0; i < WORKER_KEY_CAP; i++) {
		burst[i].gate = &gate;
		cr_assert_eq(h_run_counted(&burst[i], 9, 0), 0);
	}
	want_started = WORKER_KEY_CAP;
	cr_assert(spin_until(started_enough, 300), "the burst runs at once");
	atomic_store(&gate, 1);
	h_wait(done += WORKER_KEY_CAP, 300);
	worker_get_stats(&st);
	cr_assert_geq(st.threads, WORKER_KEY_CAP, "the pool grew for the burst");
	/* One quick job every few tens of ms, until the pool is back (the
	 * time-out is a hang bound, not a timing). */
	for (;;) {
		static struct hjob trickle;
		trickle = (struct hjob){ .gate = &open_gate };
		cr_assert_eq(h_run(&trickle, 9, 0), 0);
		h_wait(++done, 300);
		worker_get_stats(&st);
		if (st.threads <= WORKER_THREADS_CORE)
			break;
		run_loop(0.03);
	}
	cr_assert_eq(st.threads, WORKER_THREADS_CORE);
}

/*
 * A job submitted with .spread while a job of its key runs gets a thread
 * of its own: it starts while the first still runs, rather than waiting
 * for that thread to come back (the walk jobs of a Grep run side by side).
 */
Test(worker, spread_jobs_run_side_by_side)
{
	static atomic_int gate;
	static struct hjob first = { .gate = &gate }, second = { .gate = &gate };

	h_seq = h_done_count = 0;
	atomic_store(&h_started, 0);
	cr_assert_eq(h_run_counted(&first, 4242, 0), 0);
	want_started = 1;
	cr_assert(spin_until(started_enough, 300));
	struct worker_req r = { .work = h_work_counted, .done = h_done, .arg = &second, .key = 4242, .spread = true };
	cr_assert_eq(worker_run(&r), 0);
	want_started = 2;
	cr_assert(spin_until(started_enough, 300), "the second runs while the first still blocks");
	atomic_store(&gate, 1);
	h_wait(2, 300);
	cr_assert(first.done && second.done);
}

/* A batch queues its jobs before any thread wakes; the one woken at its
 * end wakes the next as it takes its job: both run side by side (each
 * blocks until the other started, so a wake lost in the batch hangs). Run
 * twice: with no thread yet, then with the first round's asleep. */
static atomic_int batch_gate;

static bool pool_all_idle(void)
{
	struct worker_stats st;

	worker_get_stats(&st);
	return st.threads >= 2 && st.idle == st.threads;
}

Test(worker, a_batch_runs_its_jobs_side_by_side)
{
	static struct hjob a[2] = { { .gate = &batch_gate }, { .gate = &batch_gate } };
	struct worker_stats st;
	size_t threads = 0;

	for (int round = 0; round < 2; round++) {
		if (round == 1) {
			/* the first round's threads asleep: the batch wakes one,
			 * that one the other, and the pool need not grow */
			cr_assert(spin_until(pool_all_idle, 300));
			worker_get_stats(&st);
			threads = st.threads;
		}
		h_seq = h_done_count = 0;
		atomic_store(&h_started, 0);
		atomic_store(&batch_gate, 0);
		a[0].done = a[1].done = a[0].ran = a[1].ran = false;
		worker_batch_begin();
		worker_batch_begin(); /* nested: only the outer end wakes */
		cr_assert_eq(h_run_counted(&a[0], 0, 0), 0);
		cr_assert_eq(h_run_counted(&a[1], 0, 0), 0);
		worker_batch_end();
		worker_batch_end();
		/* Without turning the loop: its grow timer would wake a
		 * thread too, late, and hide a lost wake. */
		bool both = false;
		for (int k = 0; k < 300000 && !both; k++) {
			both = atomic_load(&h_started) >= 2;
			if (!both)
				usleep(1000);
		}
		atomic_store(&batch_gate, 1);
		cr_assert(both, "round %d: both jobs of the batch ran at once", round);
		h_wait(2, 300);
		cr_assert(a[0].done && a[1].done);
		if (round == 1) {
			worker_get_stats(&st);
			cr_assert_eq(st.threads, threads, "woken, not grown: %zu threads, %zu before", st.threads,
				     threads);
		}
	}
}

/* worker_after: the clean-up runs once per job on the job's thread, after
 * the job and before that thread's next job; a second one is refused; off
 * the pool it runs at once. */
static _Thread_local int after_pending;
static atomic_int after_runs, after_early, after_busy;

static void after_fn(void *arg)
{
	if (!pthread_equal(pthread_self(), *(pthread_t *)arg))
		atomic_fetch_add(&after_early, 1); /* another thread's: never */
	after_pending = 0;
	atomic_fetch_add(&after_runs, 1);
}

static void after_work(void *arg)
{
	struct job *j = arg;
	static _Thread_local pthread_t self;

	if (after_pending)
		atomic_fetch_add(&after_early, 1); /* the last job's did not run first */
	self = pthread_self();
	j->ran_on = self;
	after_pending = 1;
	cr_assert_eq(worker_after(after_fn, &self), 0);
	if (worker_after(after_fn, &self) == -EBUSY)
		atomic_fetch_add(&after_busy, 1);
}

Test(worker, after_runs_once_after_each_job)
{
	static struct job jobs[40];
	pthread_t me = pthread_self();

	loop_thread = me;
	n_done = 0;
	for (int i = 0; i < 40; i++) {
		jobs[i].id = i;
		cr_assert_eq(worker_submit(after_work, done_fn, &jobs[i]), 0);
	}
	run_loop(10);
	cr_assert_eq(n_done, 40);
	/* the last clean-ups may still run after the loop took the answers (a
	 * hang deadline of two minutes) */
	for (int k = 0; k < 120000 && atomic_load(&after_runs) < 40; k++)
		usleep(1000);
	cr_assert_eq(atomic_load(&after_runs), 40);
	cr_assert_eq(atomic_load(&after_busy), 40);
	cr_assert_eq(atomic_load(&after_early), 0);
	after_pending = 1;
	cr_assert_eq(worker_after(after_fn, &me), 0);
	cr_assert_eq(after_pending, 0, "off the pool it ran at once");
	cr_assert_eq(atomic_load(&after_runs), 41);
}
