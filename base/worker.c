/* SPDX-License-Identifier: Apache-2.0 */
/*
 * worker.c - a growing pool of threads over one table of job slots, with
 * per-key caps and per-job deadlines; completions handed back to the loop
 * through an ev_async in the order jobs finish.
 *
 * No allocation per job: a slot of the fixed table holds the job from
 * submit until its done() has run, so the table bounds everything in
 * flight. Three intrusive lists thread through the slots: free, queued
 * (FIFO, waiting for a thread) and finished (waiting for the loop).
 * Running jobs are on no list; their thread holds them.
 *
 * The hand-off is kept cheap, as it is on the path of every request:
 *  - a submit wakes a thread only when no awake thread will come back for
 *    the job: a thread that finishes a job takes the next one without
 *    sleeping, and one that finds the queue empty spins a moment
 *    (WORKER_SPIN_NS) before it sleeps;
 *  - a submit wakes at most as many threads as there are processors,
 *    and one more when every awake thread runs jobs of other keys (a
 *    mount that hangs holds back only its own requests); the pool grows
 *    past that only when the queue stops moving (no job taken for
 *    WORKER_GROW_S while runnable jobs wait: the threads are stuck or
 *    slow), so a load that only needs CPU keeps a few warm threads;
 *  - completions are posted to the finished list and the loop is woken
 *    through one ev_async, which coalesces while a wake is pending; the
 *    loop takes the whole list under one lock hold;
 *  - no allocation: slots are reused.
 */
#include "base/worker.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/loop.h"

double worker_fs_timeout = 30.0;

enum job_state { JOB_FREE, JOB_QUEUED, JOB_RUNNING, JOB_FINISHED };

struct worker_job {
	struct worker_req req;
	enum job_state state;
	bool expired; /* expired() has run */
	bool timed;   /* the timer was started */
	int key_slot; /* index into worker_keys */
	int next, prev;
	ev_timer timer;
	_Atomic unsigned long steps; /* worker_progress() calls of its work */
	unsigned long steps_seen;    /* steps when the timer was last set */
};

/* The job this pool thread runs, for worker_progress(). */
static _Thread_local struct worker_job *current_job;
/* What the running job left for after its completion (worker_after). */
static _Thread_local void (*after_fn)(void *);
static _Thread_local void *after_arg;

/* Per-key counts. A key that finds no free entry shares entry 0 (counted,
 * capped, but with others): a machine with more than WORKER_KEYS mounts in
 * use at once only loses some isolation between them. */
#define WORKER_KEYS 128
struct worker_key {
	uint64_t key;
	unsigned jobs;    /* slots of this key in use (queued, running, finished) */
	unsigned running;
	unsigned stuck;   /* running past their deadline */
};

static struct worker_job worker_jobs[WORKER_QUEUE_MAX];
static struct worker_key worker_keys[WORKER_KEYS];
static int free_head = -1;
/* Slots below this have been used; the rest are untouched, so the table
 * costs memory only as deep as the pool has ever been busy. */
static int fresh_next;
static int queue_head = -1, queue_tail = -1;
static int fin_head = -1, fin_tail = -1;
static size_t n_pending, n_queued, n_running, n_stuck;
static size_t n_extended; /* stall deadlines pushed on by progress */
static size_t n_threads, n_idle;
static unsigned cpu_cap = 2;

static pthread_mutex_t worker_mu = PTHREAD_MUTEX_INITIALIZER;

/*
 * Idle threads, the most recently idle on top; each waits on a condition
 * of its own. Work wakes the top one, so under a light steady load the
 * same few threads serve it and the others reach WORKER_IDLE_S and leave
 * (a shared condition would hand the wake-ups round and keep every thread
 * of a past burst alive). n_idle is the depth of this stack.
 */
struct idler {
	pthread_cond_t cv;
	bool woken;
};
static struct idler *idlers[WORKER_THREADS_MAX];
static bool worker_started;
static ev_async worker_async;

/* Threads spinning for work after their queue ran dry (under worker_mu). A
 * submit that sees one wakes nobody. */
static size_t n_spinning;
/* Bumped by every submit; what a spinning thread watches. */
static _Atomic unsigned long submit_seq;
/* Jobs taken by threads, in all, and as of the last growth check. */
static unsigned long n_taken, n_taken_seen;
/* Runs while runnable jobs wait: grows the pool when the queue stops. */
static ev_timer grow_timer;

/* Jobs submitted since the loop last went to sleep (loop thread), and
 * finished jobs not yet taken by the loop (what it spins on). */
static unsigned long fresh_submits;
/* The longest quick_ns among them. */
static unsigned fresh_spin_ns;
static _Atomic unsigned n_finished;
static ev_prepare worker_prepare;

/* How long the loop, about to sleep right after submitting jobs, waits
 * for them: a quick job (a stat) is back sooner than a wake-up would take,
 * and its completion then costs neither a write to the loop's eventfd nor
 * a wake of the loop. */
#define LOOP_SPIN_NS 60000

/* How long a thread whose queue ran dry looks for more before sleeping. A
 * request's next step usually arrives within a loopback round trip; a
 * wake costs 10-30 us of latency each way. */
#define WORKER_SPIN_NS 100000
/* The queue must move within this, or the pool grows: long enough that
 * threads only preempted on a busy machine do not look stuck. */
#define WORKER_GROW_S 0.02

/* --- intrusive lists (under worker_mu) --- */

static void list_push(int *head, int *tail, int i)
{
	worker_jobs[i].next = -1;
	worker_jobs[i].prev = tail ? *tail : -1;
	if (tail) {
		if (*tail >= 0)
			worker_jobs[*tail].next = i;
		else
			*head = i;
		*tail = i;
	} else {
		worker_jobs[i].next = *head;
		*head = i;
	}
}

static void list_unlink(int *head, int *tail, int i)
{
	struct worker_job *j = &worker_jobs[i];

	if (j->prev >= 0)
		worker_jobs[j->prev].next = j->next;
	else
		*head = j->next;
	if (j->next >= 0)
		worker_jobs[j->next].prev = j->prev;
	else if (tail)
		*tail = j->prev;
	j->next = j->prev = -1;
}

static int key_slot_find(uint64_t key, bool create)
{
	int empty = -1;

	if (key == 0)
		return -1; /* CPU work: counted apart (cpu_cap) */
	for (int i = 1; i < WORKER_KEYS; i++) {
		if (worker_keys[i].jobs && worker_keys[i].key == key)
			return i;
		if (!worker_keys[i].jobs && empty < 0)
			empty = i;
	}
	if (!create)
		return 0;
	if (empty < 0)
		return 0;
	worker_keys[empty].key = key;
	return empty;
}

static unsigned cpu_running;

/* May job i start now? (under worker_mu) */
static bool job_runnable(const struct worker_job *j)
{
	if (j->key_slot < 0)
		return cpu_running < cpu_cap;
	const struct worker_key *k = &worker_keys[j->key_slot];
	return k->running < (k->stuck ? WORKER_SICK_CAP : WORKER_KEY_CAP);
}

/* The first queued job that may run, or -1. (under worker_mu) */
static int next_runnable(void)
{
	for (int i = queue_head; i >= 0; i = worker_jobs[i].next)
		if (job_runnable(&worker_jobs[i]))
			return i;
	return -1;
}

static void count_running(struct worker_job *j, int d)
{
	n_running += d;
	if (j->key_slot < 0)
		cpu_running += d;
	else
		worker_keys[j->key_slot].running += d;
}

/* --- threads --- */

static int thread_spawn(void);

/* Take the most recently idle thread off the stack, marked woken; the
 * caller signals it (after unlocking, so that it does not wake only to
 * wait for the lock). A woken thread never leaves the pool, so the idler
 * stays valid. (under worker_mu) */
static struct idler *pop_idle(void)
{
	if (!n_idle)
		return NULL;
	struct idler *w = idlers[--n_idle];
	w->woken = true;
	return w;
}

/* Submits between worker_batch_begin() and _end() (loop thread only): the
 * first thread they would wake, woken at the end. */
static int batch_depth;
static struct idler *batch_wake;

/* Hand work to the most recently idle thread, if any. (under worker_mu) */
static void wake_one(void)
{
	struct idler *w = pop_idle();

	if (w)
		pthread_cond_signal(&w->cv);
}

/* Wait idle until woken or WORKER_IDLE_S pass; false on the time-out.
 * (under worker_mu) */
static bool idle_wait(struct idler *me)
{
	struct timespec ts;
	int rc = 0;

	me->woken = false;
	idlers[n_idle++] = me;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += WORKER_IDLE_S;
	while (!me->woken && rc != ETIMEDOUT)
		rc = pthread_cond_timedwait(&me->cv, &worker_mu, &ts);
	if (me->woken)
		return true;
	/* Timed out: still on the stack, somewhere below the top. */
	for (size_t k = 0; k < n_idle; k++) {
		if (idlers[k] == me) {
			memmove(&idlers[k], &idlers[k + 1], (n_idle - k - 1) * sizeof(idlers[0]));
			n_idle--;
			break;
		}
	}
	return false;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

/* Look for a submit for WORKER_SPIN_NS without the lock; true if one came.
 * (called and returns under worker_mu) */
static bool spin_for_work(void)
{
	unsigned long seq = atomic_load_explicit(&submit_seq, memory_order_relaxed);
	struct timespec t0, t;
	bool got = false;

	n_spinning++;
	pthread_mutex_unlock(&worker_mu);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (unsigned n = 1;; n++) {
		if (atomic_load_explicit(&submit_seq, memory_order_acquire) != seq) {
			got = true;
			break;
		}
		cpu_relax();
		if (n % 64 == 0) {
			clock_gettime(CLOCK_MONOTONIC, &t);
			if ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) >= WORKER_SPIN_NS)
				break;
			sched_yield();
		}
	}
	pthread_mutex_lock(&worker_mu);
	n_spinning--;
	return got;
}

static void *worker_main(void *unused)
{
	struct idler me = { .woken = false };
	pthread_condattr_t ca;
	bool notify = false; /* a job of ours finished: wake the loop */

	(void)unused;
	/* The idle time-out is on the monotonic clock: /init may set the
	 * wall clock by minutes. */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&me.cv, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_lock(&worker_mu);
	for (;;) {
		int i = next_runnable();

		if (i < 0) {
			if (notify) {
				/* Outside the lock: the loop takes it to drain. */
				pthread_mutex_unlock(&worker_mu);
				ev_async_send(envd_loop, &worker_async);
				notify = false;
				pthread_mutex_lock(&worker_mu);
				continue;
			}
			if (spin_for_work())
				continue;
			if (next_runnable() >= 0)
				continue;
			if (!idle_wait(&me) && n_threads > WORKER_THREADS_CORE && next_runnable() < 0) {
				n_threads--;
				pthread_mutex_unlock(&worker_mu);
				pthread_cond_destroy(&me.cv);
				return NULL;
			}
			continue;
		}
		struct worker_job *j = &worker_jobs[i];
		list_unlink(&queue_head, &queue_tail, i);
		n_queued--;
		n_taken++;
		j->state = JOB_RUNNING;
		count_running(j, +1);
		void (*work)(void *) = j->req.work;
		void *arg = j->req.arg;
		/* More runnable work queued behind ours, fewer threads awake
		 * than processors: one more comes (the submitter woke one for
		 * a batch, or was kept from waking more: worker_batch_end). */
		struct idler *chain = NULL;
		if (n_queued && n_idle && n_threads - n_idle - n_stuck < cpu_cap && next_runnable() >= 0)
			chain = pop_idle();
		pthread_mutex_unlock(&worker_mu);
		if (chain)
			pthread_cond_signal(&chain->cv);
		if (notify) {
			ev_async_send(envd_loop, &worker_async);
			notify = false;
		}
		current_job = j;
		work(arg);
		current_job = NULL;
		pthread_mutex_lock(&worker_mu);
		count_running(j, -1);
		if (j->expired && j->key_slot >= 0) {
			worker_keys[j->key_slot].stuck--;
			n_stuck--;
		}
		j->state = JOB_FINISHED;
		list_push(&fin_head, &fin_tail, i);
		atomic_fetch_add_explicit(&n_finished, 1, memory_order_release);
		notify = true;
		if (after_fn) {
			/* The loop is told first (the clean-up is not what it
			 * waits for), and may be draining the finished list
			 * meanwhile: not under its lock. */
			void (*fn)(void *) = after_fn;
			after_fn = NULL;
			pthread_mutex_unlock(&worker_mu);
			ev_async_send(envd_loop, &worker_async);
			notify = false;
			fn(after_arg);
			pthread_mutex_lock(&worker_mu);
		}
	}
	return NULL;
}

/* Start one thread (under worker_mu). Signals stay blocked in it: they are
 * the loop's business. Returns 0 or a positive error. */
static int thread_spawn(void)
{
	pthread_attr_t attr;
	sigset_t all, old;
	pthread_t t;
	int rc;

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	/* Directory walks recurse; the stack is only reserved, not resident. */
	pthread_attr_setstacksize(&attr, 8 * 1024 * 1024);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&t, &attr, worker_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (rc == 0)
		n_threads++;
	return rc;
}

/* --- completion on the loop --- */

static void job_release(int i)
{
	struct worker_job *j = &worker_jobs[i];

	if (j->timed)
		ev_timer_stop(envd_loop, &j->timer);
	if (j->key_slot >= 0)
		worker_keys[j->key_slot].jobs--;
	j->state = JOB_FREE;
	j->expired = j->timed = false;
	n_pending--;
	list_push(&free_head, NULL, i);
}

/* Completions taken from the finished list per lock hold. */
#define DRAIN_BATCH 64

static void worker_on_async(struct ev_loop *loop, ev_async *w, int revents)
{
	struct worker_req batch[DRAIN_BATCH];

	for (;;) {
		size_t n = 0;

		pthread_mutex_lock(&worker_mu);
		while (n < DRAIN_BATCH && fin_head >= 0) {
			int i = fin_head;
			list_unlink(&fin_head, &fin_tail, i);
			atomic_fetch_sub_explicit(&n_finished, 1, memory_order_relaxed);
			batch[n++] = worker_jobs[i].req;
			/* The slot is stopped and freed before done() runs, so
			 * done() may submit again (a chain of jobs) without
			 * running out. */
			job_release(i);
		}
		pthread_mutex_unlock(&worker_mu);
		if (!n)
			return;
		for (size_t k = 0; k < n; k++)
			if (batch[k].done)
				batch[k].done(batch[k].arg);
		if (n < DRAIN_BATCH)
			return; /* a later finish sends again */
	}
}

/* The loop is about to sleep: if it just handed jobs to awake threads,
 * wait a moment for them and complete them here. */
static void worker_on_prepare(struct ev_loop *loop, ev_prepare *w, int revents)
{
	struct timespec t0, t;

	long spin_ns = fresh_spin_ns > LOOP_SPIN_NS ? fresh_spin_ns : LOOP_SPIN_NS;

	if (!fresh_submits)
		return;
	fresh_submits = 0;
	fresh_spin_ns = 0;
	/* Only while a thread is on it (not all stuck or asleep): racy
	 * reads, a hint only. */
	if (n_threads <= n_idle + n_stuck)
		return;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (unsigned n = 1;; n++) {
		if (atomic_load_explicit(&n_finished, memory_order_acquire)) {
			worker_on_async(loop, &worker_async, 0);
			return;
		}
		cpu_relax();
		if (n % 64 == 0) {
			clock_gettime(CLOCK_MONOTONIC, &t);
			if ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) >= spin_ns)
				return;
			sched_yield();
		}
	}
}

/* Make the threads the queue needs. A runnable job waiting with no thread
 * taking jobs for WORKER_GROW_S means the awake ones are stuck or slow:
 * one more thread each such period, up to WORKER_THREADS_MAX. */
static void worker_on_grow(struct ev_loop *loop, ev_timer *w, int revents)
{
	size_t runnable = 0;

	pthread_mutex_lock(&worker_mu);
	for (int i = queue_head; i >= 0 && runnable < WORKER_THREADS_MAX; i = worker_jobs[i].next)
		if (job_runnable(&worker_jobs[i]))
			runnable++;
	if (!runnable) {
		ev_timer_stop(loop, w);
	} else if (n_taken == n_taken_seen) {
		/* One at a time: threads that were only preempted on a busy
		 * machine must not look like many stuck ones. */
		if (n_idle)
			wake_one();
		else if (n_threads < WORKER_THREADS_MAX)
			thread_spawn();
	}
	n_taken_seen = n_taken;
	pthread_mutex_unlock(&worker_mu);
}

static void worker_on_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct worker_job *j = w->data;
	int i = (int)(j - worker_jobs);
	struct worker_req req;

	pthread_mutex_lock(&worker_mu);
	j->timed = false;
	if (j->state == JOB_FINISHED) {
		/* Its done() is on its way; the result wins. */
		pthread_mutex_unlock(&worker_mu);
		return;
	}
	if (j->req.stall && j->state == JOB_RUNNING) {
		unsigned long steps = atomic_load_explicit(&j->steps, memory_order_relaxed);
		if (steps != j->steps_seen) {
			/* It moved since the timer was set: not stuck, another round. */
			j->steps_seen = steps;
			ev_timer_set(&j->timer, j->req.timeout, 0.);
			ev_timer_start(envd_loop, &j->timer);
			j->timed = true;
			n_extended++;
			pthread_mutex_unlock(&worker_mu);
			return;
		}
	}
	req = j->req;
	j->expired = true;
	if (j->state == JOB_QUEUED) {
		/* Never started: drop it. */
		list_unlink(&queue_head, &queue_tail, i);
		n_queued--;
		job_release(i);
		pthread_mutex_unlock(&worker_mu);
		if (req.expired)
			req.expired(req.arg);
		if (req.done)
			req.done(req.arg);
		return;
	}
	/* Running past its deadline: the thread is presumed stuck. Its key
	 * drops to the sick cap, and queued jobs may need a new thread. */
	if (j->key_slot >= 0) {
		worker_keys[j->key_slot].stuck++;
		n_stuck++;
	}
	if (!n_idle && next_runnable() >= 0 && n_threads < WORKER_THREADS_MAX)
		thread_spawn();
	pthread_mutex_unlock(&worker_mu);
	if (req.expired)
		req.expired(req.arg);
}

static int worker_start(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	cpu_cap = n >= 2 ? (unsigned)n : 2;
	ev_async_init(&worker_async, worker_on_async);
	ev_async_start(envd_loop, &worker_async);
	ev_timer_init(&grow_timer, worker_on_grow, WORKER_GROW_S, WORKER_GROW_S);
	ev_prepare_init(&worker_prepare, worker_on_prepare);
	ev_prepare_start(envd_loop, &worker_prepare);
	ev_unref(envd_loop);
	/* The pool must not hold a reference on the loop: idle workers should
	 * not keep ev_run alive. */
	ev_unref(envd_loop);
	worker_started = true;
	return 0;
}

int worker_run(const struct worker_req *req)
{
	struct idler *waking = NULL;
	int i, ks = -1, rc;

	if (!req || !req->work)
		return -EINVAL;
	if (!worker_started)
		worker_start();
	pthread_mutex_lock(&worker_mu);
	if (free_head < 0 && fresh_next == WORKER_QUEUE_MAX) {
		pthread_mutex_unlock(&worker_mu);
		return -EAGAIN;
	}
	if (req->key) {
		ks = key_slot_find(req->key, true);
		if (worker_keys[ks].jobs >= WORKER_KEY_QUEUE_MAX) {
			pthread_mutex_unlock(&worker_mu);
			return -EAGAIN;
		}
	}
	if (free_head >= 0) {
		i = free_head;
		list_unlink(&free_head, NULL, i);
	} else {
		i = fresh_next++;
	}
	struct worker_job *j = &worker_jobs[i];
	j->req = *req;
	j->key_slot = ks;
	j->expired = false;
	atomic_store_explicit(&j->steps, 0, memory_order_relaxed);
	j->steps_seen = 0;
	if (ks >= 0) {
		if (!worker_keys[ks].jobs)
			worker_keys[ks].key = req->key;
		worker_keys[ks].jobs++;
	}
	j->state = JOB_QUEUED;
	list_push(&queue_head, &queue_tail, i);
	n_queued++;
	n_pending++;
	atomic_fetch_add_explicit(&submit_seq, 1, memory_order_release);
	rc = 0;
	if (job_runnable(j)) {
		/* Threads that will look at the queue without a wake: running
		 * (and not known stuck), spinning, or woken and on their way. */
		size_t awake = n_threads - n_idle - n_stuck;
		/* ... of them, those running a job of this key, which come
		 * back to the queue when it returns (unless its mount hangs:
		 * then only this key's own requests wait). */
		unsigned mine = j->key_slot < 0 ? cpu_running : worker_keys[j->key_slot].running;
		if (j->key_slot >= 0)
			mine -= worker_keys[j->key_slot].stuck;
		bool free_hands = awake > n_running - n_stuck;
		if (awake == 0 || (!free_hands && (mine == 0 || req->spread)) || (awake < cpu_cap && n_queued > awake)) {
			if (n_idle)
				waking = pop_idle();
			else if (n_threads < WORKER_THREADS_MAX)
				rc = thread_spawn();
		}
		if (!ev_is_active(&grow_timer)) {
			n_taken_seen = n_taken;
			ev_timer_again(envd_loop, &grow_timer);
		}
	}
	if (rc && !n_threads) {
		/* No thread at all: the job could never run. */
		list_unlink(&queue_head, &queue_tail, i);
		n_queued--;
		job_release(i);
		pthread_mutex_unlock(&worker_mu);
		return -rc;
	}
	if (req->timeout > 0) {
		ev_timer_init(&j->timer, worker_on_timer, req->timeout, 0.);
		j->timer.data = j;
		ev_timer_start(envd_loop, &j->timer);
		j->timed = true;
	}
	fresh_submits++;
	if (req->quick_ns > fresh_spin_ns)
		fresh_spin_ns = req->quick_ns < WORKER_SPIN_JOB_MAX_NS ? req->quick_ns : WORKER_SPIN_JOB_MAX_NS;
	if (waking && batch_depth) {
		if (!batch_wake) {
			batch_wake = waking;
		} else {
			/* Back on top, unwoken: the first one's thread wakes it
			 * when it takes its job (worker_main, chain). */
			waking->woken = false;
			idlers[n_idle++] = waking;
		}
		waking = NULL;
	}
	pthread_mutex_unlock(&worker_mu);
	if (waking)
		pthread_cond_signal(&waking->cv);
	return 0;
}

void worker_batch_begin(void)
{
	batch_depth++;
}

void worker_batch_end(void)
{
	struct idler *w;

	if (--batch_depth > 0)
		return;
	pthread_mutex_lock(&worker_mu);
	w = batch_wake;
	batch_wake = NULL;
	pthread_mutex_unlock(&worker_mu);
	if (w)
		pthread_cond_signal(&w->cv);
}

int worker_submit(void (*work)(void *arg), void (*done)(void *arg), void *arg)
{
	struct worker_req req = { .work = work, .done = done, .arg = arg };

	return worker_run(&req);
}

int worker_after(void (*fn)(void *arg), void *arg)
{
	if (!current_job) {
		fn(arg);
		return 0;
	}
	if (after_fn)
		return -EBUSY;
	after_fn = fn;
	after_arg = arg;
	return 0;
}

void worker_progress(void)
{
	struct worker_job *j = current_job;

	if (j)
		atomic_fetch_add_explicit(&j->steps, 1, memory_order_relaxed);
}

double worker_deadline_s(int64_t client_ms)
{
	return client_ms > 0 ? (double)client_ms / 1000.0 : worker_fs_timeout;
}

void worker_get_stats(struct worker_stats *st)
{
	pthread_mutex_lock(&worker_mu);
	st->threads = n_threads;
	st->idle = n_idle;
	st->queued = n_queued;
	st->running = n_running;
	st->stuck = n_stuck;
	st->extended = n_extended;
	st->pending = n_pending;
	pthread_mutex_unlock(&worker_mu);
}

size_t worker_pending(void)
{
	size_t n;

	pthread_mutex_lock(&worker_mu);
	n = n_pending;
	pthread_mutex_unlock(&worker_mu);
	return n;
}

/* --- mount keys --- */

struct mount_ent {
	uint64_t id;
	unsigned short len; /* of the mount point */
	char point[238];
};

#define MOUNTS_MAX 512
static struct mount_ent mounts[MOUNTS_MAX];
static size_t n_mounts;
static ev_tstamp mounts_read_at = -1e9;

/* Undo mountinfo's octal escapes (\040 for a space) in place. */
static void unescape(char *s)
{
	char *w = s;

	for (char *r = s; *r; r++) {
		if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' &&
		    r[3] >= '0' && r[3] <= '7') {
			*w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
			r += 3;
		} else {
			*w++ = *r;
		}
	}
	*w = 0;
}

/* /proc is the kernel's own: reading it never waits on a mount's server. */
static void mounts_read(void)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[1024];

	if (!f)
		return;
	n_mounts = 0;
	while (n_mounts < MOUNTS_MAX && fgets(line, sizeof(line), f)) {
		unsigned long id;
		char point[512];

		if (sscanf(line, "%lu %*u %*s %*s %511s", &id, point) != 2)
			continue;
		unescape(point);
		size_t len = strlen(point);
		if (len >= sizeof(mounts[0].point))
			continue; /* its paths share the key of the mount above it */
		mounts[n_mounts].id = id;
		mounts[n_mounts].len = (unsigned short)len;
		memcpy(mounts[n_mounts].point, point, len + 1);
		n_mounts++;
	}
	fclose(f);
}

uint64_t worker_path_key(const char *path)
{
	ev_tstamp now = ev_now(envd_loop);
	size_t best_len = 0;
	uint64_t best = 1;
	bool found = false;

	if (now - mounts_read_at >= 1.0) {
		mounts_read();
		mounts_read_at = now;
	}
	if (!path)
		return best;
	/* Later lines are mounted on top of earlier ones at the same point:
	 * the last match of the longest length wins. */
	for (size_t i = 0; i < n_mounts; i++) {
		const struct mount_ent *m = &mounts[i];
		size_t l = m->len;

		if (l == 1 && m->point[0] == '/') {
			l = 0; /* the root: a prefix of everything */
		} else if (strncmp(path, m->point, l) != 0 || (path[l] != '/' && path[l] != 0)) {
			continue;
		}
		if (!found || l >= best_len) {
			best_len = l;
			best = m->id + 2; /* never 0 (CPU) nor 1 (unknown) */
			found = true;
		}
	}
	return best;
}
