/* SPDX-License-Identifier: Apache-2.0 */
/*
 * worker.h - the pool for blocking work: every syscall on a user path, deep
 * directory walks, large copies, gzip blocks.
 *
 * `work(arg)` runs on a pool thread and must not touch loop-owned state;
 * `done(arg)` then runs on the event loop thread (woken through an
 * ev_async), where the result can be sent. Jobs complete in the order they
 * finish, not the order they were submitted: one job that never returns
 * holds back nothing but itself.
 *
 * Why a job can hang: a path on a FUSE mount whose daemon is stopped, or
 * on an NFS server that does not answer, blocks the syscall in the kernel
 * with no timeout. Such a thread cannot be taken back. The pool's answer:
 *
 *  - a job may carry a deadline; when it passes first, `expired(arg)` runs
 *    on the loop (the request is answered there, "deadline_exceeded"),
 *    while the thread stays where it is. `done(arg)` still follows if and
 *    when `work` returns, to free what the job holds. A job whose deadline
 *    passes before any thread took it is dropped: `expired` then `done`
 *    run at once and `work` never runs.
 *  - a job may carry a key, the mount its path is on (worker_path_key).
 *    At most WORKER_KEY_CAP jobs of one key run at once, and only
 *    WORKER_SICK_CAP once one of them has outlived its deadline: one hung
 *    mount cannot take every thread, other mounts keep theirs. Key 0 is
 *    CPU work (gzip blocks), capped at the number of processors.
 *  - threads are started when a runnable job finds none idle, up to
 *    WORKER_THREADS_MAX; threads above WORKER_THREADS_CORE leave after
 *    WORKER_IDLE_S idle, so the pool shrinks back once a mount recovers.
 *
 * Ownership: `arg` belongs to the caller throughout; `done` typically frees
 * it. If the client went away meanwhile, `done` still runs and must notice
 * that itself (e.g. a cancelled flag set by the cancel hook).
 *
 * Errors: worker_run() and worker_submit() return 0 or a negative errno.
 */
#ifndef ENVD_WORKER_H
#define ENVD_WORKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define WORKER_THREADS_CORE 4
#define WORKER_THREADS_MAX 64
#define WORKER_KEY_CAP 16
#define WORKER_SICK_CAP 2
#define WORKER_QUEUE_MAX 2048 /* jobs submitted and not yet done, in all */
#define WORKER_KEY_QUEUE_MAX 512 /* of one key */
#define WORKER_IDLE_S 10

/*
 * Or'ed into a mount's key for a Start's spawn: its child looks up the cwd
 * and the binary, and may stay stuck even when killed (it waits on a lock
 * that a stuck request of the same mount holds). Counted apart, a stuck
 * spawn neither slows the mount's filesystem requests nor those of
 * another mount the spawn only passed through.
 */
#define WORKER_KEY_SPAWN (1ull << 63)

/*
 * Or'ed into a mount's key for the walk jobs of Glob and Grep: a walk
 * enters every mount below its path, and a job stuck on a hung one would
 * otherwise count as a stuck job of the path's own mount, whose other
 * requests would then get WORKER_SICK_CAP threads until it returns.
 * Counted apart, it slows only other walks of that mount.
 */
#define WORKER_KEY_WALK (1ull << 62)

/* The words of a request whose filesystem job outlived its deadline, for
 * every edge that reports one: printf format, arguments (double seconds,
 * const char *path). */
#define WORKER_TIMEOUT_FMT "filesystem did not answer within %g s: %s"

/* The server default deadline of a filesystem request (seconds), used
 * where the client gave none; set by -fs-timeout. */
extern double worker_fs_timeout;

struct worker_req {
	void (*work)(void *arg);    /* on a pool thread; required */
	void (*done)(void *arg);    /* on the loop, once work returned or was dropped */
	void (*expired)(void *arg); /* on the loop, when timeout passed first; optional */
	void *arg;
	uint64_t key;   /* worker_path_key() of the path, or 0 for CPU work */
	double timeout; /* seconds from now; <= 0: no deadline */
	/* The timeout bounds a stall, not the whole job: each time it passes
	 * with worker_progress() called since it was set, it starts again.
	 * For server defaults (the client gave no deadline): a walk of a huge
	 * tree that keeps moving ends when it is done; one stuck on a hung
	 * mount ends between one and two timeouts after its last step. */
	bool stall;
	/* One of several jobs meant to run at the same time (the walk jobs
	 * of a Glob or Grep): a thread is woken for it even while one runs a
	 * job of its key, which would otherwise be expected back for it and
	 * only take it once its own (long) job is done. */
	bool spread;
	/* How long this job usually takes, when longer than a stat (an
	 * Edit's write and rename): the loop, about to sleep right after
	 * submitting it, waits that long for it before it sleeps (the wake
	 * it saves, 15-20 us, is most of what such a job loses to sleeping).
	 * 0: a quick job. Capped at WORKER_SPIN_JOB_MAX_NS. */
	unsigned quick_ns;
};

/* The longest wait a job's quick_ns buys. */
#define WORKER_SPIN_JOB_MAX_NS 200000u

/* On a pool thread, from work(): the job took a step (an entry listed or
 * removed). Pushes on the deadline of a stall-timed job; elsewhere (not on
 * a pool thread, or an ordinary deadline) it changes nothing. */
void worker_progress(void);

/*
 * From work(): run fn(arg) on this thread once the job's completion is
 * posted, before the thread takes other work: clean-up the answer need
 * not wait for (Edit gives the user's identity back there). The job's
 * done() may run on the loop meanwhile, so arg must not be the job's
 * memory (thread-local storage will do). One per job: returns 0, or
 * -EBUSY when one is set already. Not on a pool thread, fn runs at once.
 */
int worker_after(void (*fn)(void *arg), void *arg);

/*
 * Queue a job. Call on the loop thread only. Returns 0; -EAGAIN when
 * WORKER_QUEUE_MAX jobs in all, or WORKER_KEY_QUEUE_MAX of its key, are
 * waiting or running; -EINVAL without work; -ENOMEM, or another -errno
 * if no thread can be started.
 */
int worker_run(const struct worker_req *req);

/*
 * A batch of submits (loop thread only, nestable): the jobs queued by the
 * worker_run() calls in between wake no thread until worker_batch_end(),
 * which wakes one; each woken thread that takes a job while more runnable
 * ones wait wakes the next (up to one awake thread per processor). For a
 * request that queues several jobs at once (Grep, Glob): woken one by
 * one, the first thread could take the loop's processor before the loop
 * had queued the second job, which then waited for the first to finish.
 */
void worker_batch_begin(void);
void worker_batch_end(void);

/* worker_run() with key 0 and no deadline. */
int worker_submit(void (*work)(void *arg), void (*done)(void *arg), void *arg);

/*
 * The key of a path: the id of the mount it lies on, by the longest mount
 * point (of /proc/self/mountinfo, re-read at most once a second) that is a
 * prefix of the path as written. Symlinks are not followed (that would be a
 * syscall on the path): a link into another mount gets its own mount's
 * key, which only shares a cap; it never fails a request. Loop thread only.
 * Returns a non-zero key; 1 when the mount table cannot be read.
 */
uint64_t worker_path_key(const char *path);

/*
 * Where a request's deadline comes from: the client's (ms, > 0) if it gave
 * one, else worker_fs_timeout. Seconds.
 */
double worker_deadline_s(int64_t client_ms);

struct worker_stats {
	size_t threads; /* started and not yet left */
	size_t idle;
	size_t queued;  /* waiting for a thread */
	size_t running;
	size_t stuck;   /* running past their deadline */
	size_t extended; /* stall deadlines pushed on by worker_progress() */
	size_t pending; /* submitted, done() not yet run */
};

/* A snapshot of the pool (for /metrics and tests). */
void worker_get_stats(struct worker_stats *st);

/* Jobs submitted and not yet completed on the loop (for tests and metrics). */
size_t worker_pending(void);

#endif
