/* SPDX-License-Identifier: Apache-2.0 */
/*
 * worker.c - fixed threads, one bounded ring of jobs, completions handed
 * back to the loop through an ev_async. No allocation per job: the ring
 * holds the jobs themselves.
 */
#include "base/worker.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>

#include "base/loop.h"

struct worker_job {
	void (*work)(void *);
	void (*done)(void *);
	void *arg;
	bool finished;
};

/*
 * Jobs stay in the ring from submit until their done() has run, so the
 * ring bounds everything in flight. Slots are claimed in order; threads
 * take the next unstarted slot; the loop completes finished slots from
 * the head in order (a later job that finishes first waits for the head,
 * which keeps completion order equal to submit order).
 */
static struct worker_job worker_ring[WORKER_QUEUE_MAX];
static size_t worker_head;    /* oldest job not yet completed on the loop */
static size_t worker_next;    /* next job a thread should start */
static size_t worker_count;   /* jobs in the ring */
static size_t worker_unstarted; /* jobs no thread has taken yet */
static pthread_mutex_t worker_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t worker_cv = PTHREAD_COND_INITIALIZER;
static bool worker_started;
static ev_async worker_async;

static void *worker_main(void *unused)
{
	(void)unused;
	pthread_mutex_lock(&worker_mu);
	for (;;) {
		while (!worker_unstarted)
			pthread_cond_wait(&worker_cv, &worker_mu);
		worker_unstarted--;
		struct worker_job *j = &worker_ring[worker_next];
		worker_next = (worker_next + 1) % WORKER_QUEUE_MAX;
		void (*work)(void *) = j->work;
		void *arg = j->arg;
		pthread_mutex_unlock(&worker_mu);
		work(arg);
		pthread_mutex_lock(&worker_mu);
		j->finished = true;
		ev_async_send(envd_loop, &worker_async);
	}
	return NULL;
}

static void worker_on_async(struct ev_loop *loop, ev_async *w, int revents)
{
	for (;;) {
		pthread_mutex_lock(&worker_mu);
		if (!worker_count || !worker_ring[worker_head].finished) {
			pthread_mutex_unlock(&worker_mu);
			return;
		}
		struct worker_job j = worker_ring[worker_head];
		memset(&worker_ring[worker_head], 0, sizeof(worker_ring[0]));
		worker_head = (worker_head + 1) % WORKER_QUEUE_MAX;
		worker_count--;
		pthread_mutex_unlock(&worker_mu);
		if (j.done)
			j.done(j.arg);
	}
}

static int worker_start(void)
{
	pthread_attr_t attr;
	sigset_t all, old;
	int rc;

	ev_async_init(&worker_async, worker_on_async);
	ev_async_start(envd_loop, &worker_async);
	/* The pool must not hold a reference on the loop: idle workers should
	 * not keep ev_run alive. */
	ev_unref(envd_loop);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	/* Directory walks recurse; the stack is only reserved, not resident. */
	pthread_attr_setstacksize(&attr, 8 * 1024 * 1024);
	/* Signals are the loop's business (signalfd/ev_signal): keep them
	 * blocked in the workers. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (int i = 0; i < WORKER_THREADS; i++) {
		pthread_t t;
		rc = pthread_create(&t, &attr, worker_main, NULL);
		if (rc) {
			pthread_sigmask(SIG_SETMASK, &old, NULL);
			pthread_attr_destroy(&attr);
			/* Threads already started keep serving; with none we fail. */
			if (i == 0) {
				ev_ref(envd_loop);
				ev_async_stop(envd_loop, &worker_async);
				return -rc;
			}
			worker_started = true;
			return 0;
		}
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	worker_started = true;
	return 0;
}

int worker_submit(void (*work)(void *arg), void (*done)(void *arg), void *arg)
{
	int rc;

	if (!work)
		return -EINVAL;
	if (!worker_started) {
		rc = worker_start();
		if (rc < 0)
			return rc;
	}
	pthread_mutex_lock(&worker_mu);
	if (worker_count == WORKER_QUEUE_MAX) {
		pthread_mutex_unlock(&worker_mu);
		return -EAGAIN;
	}
	struct worker_job *j = &worker_ring[(worker_head + worker_count) % WORKER_QUEUE_MAX];
	j->work = work;
	j->done = done;
	j->arg = arg;
	j->finished = false;
	worker_count++;
	worker_unstarted++;
	pthread_cond_signal(&worker_cv);
	pthread_mutex_unlock(&worker_mu);
	return 0;
}

size_t worker_pending(void)
{
	size_t n;

	pthread_mutex_lock(&worker_mu);
	n = worker_count;
	pthread_mutex_unlock(&worker_mu);
	return n;
}
