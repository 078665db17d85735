/* SPDX-License-Identifier: Apache-2.0 */
/*
 * reqjob.h - one lifetime for a request's asynchronous work.
 *
 * A handler whose work outlives the callback that started it (worker jobs
 * on a user's files, a response produced over time, a request handed on to
 * another responder) embeds a struct reqjob in its context. The reqjob
 * knows nothing of HTTP or RPC: the request it serves is an opaque peer,
 * tied to it by a binding (http/httpjob.h for a struct http_req,
 * rpc/rpcjob.h for a struct rpc_call) whose close or cancel hook tells the
 * reqjob that the peer went away.
 *
 * References. The context is freed (ops->free) when the last one goes, so
 * no party decides alone who frees:
 *   - the creator holds one from reqjob_init() until its reqjob_release();
 *   - the peer holds one while attached: from reqjob_attach() until it
 *     goes away (reqjob_peer_gone()), is taken back (reqjob_detach()) or is
 *     handed on to another reqjob (reqjob_handoff());
 *   - each job in flight holds one from reqjob_run() until its completion
 *     has run on the loop;
 *   - any code that may end the response and still needs the context
 *     afterwards takes one with reqjob_hold().
 * A handler's callback that answers the request (which may close the peer
 * at once) therefore never frees the context under its caller's feet as
 * long as someone holds a reference across it.
 *
 * States. A reqjob is live while its peer is attached and it is not over.
 * It is over once reqjob_finish() says the request is answered, or once a
 * job's deadline passed (ops->expired then answered or cut it). Only a live
 * reqjob starts jobs and hears of their completion: the completion of a job
 * that returns to a reqjob no longer live is dropped with the job's
 * reference (the thread of a job stuck on a hung mount lets go of the
 * context whenever it comes back). Whatever a job leaves behind for its
 * done() (an fd, a buffer) must therefore be freed by ops->free too.
 *
 * Compare h2o's generator (proceed/stop) and its shared memory
 * (alloc_shared/addref/release): proceed is the owner's on_writable, stop
 * is the peer's close hook, and the references are these.
 *
 * Threads: everything here runs on the loop thread, except reqjob_gone(),
 * which a job's work() may call to stop early.
 *
 * Errors: reqjob_run(), reqjob_run_task() and reqjob_handoff() return 0 or
 * a negative errno, as listed there; the rest cannot fail.
 */
#ifndef ENVD_BASE_REQJOB_H
#define ENVD_BASE_REQJOB_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct reqjob;

/* The context of `ptr`, a struct reqjob embedded as `member` of `type`. */
#define REQJOB_CONTAINER(ptr, type, member) ((type *)(void *)((char *)(ptr) - offsetof(type, member)))

struct reqjob_ops {
	/* Required. The last reference went: free the context. */
	void (*free)(struct reqjob *j);
	/*
	 * Optional. A job's deadline passed while the reqjob was live: answer
	 * the request (504, deadline_exceeded) or cut its response. The reqjob
	 * is over when this runs; the job's thread stays where it is, and its
	 * completion will be dropped.
	 */
	void (*expired)(struct reqjob *j);
	/*
	 * Optional. The peer went away (the client left, the stream was
	 * reset), live or over. Runs before the peer's reference is dropped;
	 * jobs in flight keep theirs.
	 */
	void (*cancel)(struct reqjob *j);
	/*
	 * Optional. The peer's output queue drained while the reqjob is live
	 * (h2o's proceed): a response produced over time takes its next step.
	 * Bindings whose peer has a hook of its own for it (an http_req's
	 * on_writable, which the handler sets) leave this to the handler.
	 */
	void (*writable)(struct reqjob *j);
};

/* How a kind of peer is tied to a reqjob; provided by the peer's glue. */
struct reqjob_binding {
	/* The peer's hooks now lead to j; its close hook calls reqjob_peer_gone(j). */
	void (*bind)(void *peer, struct reqjob *j);
	/* The peer's hooks lead nowhere any more (reqjob_detach). */
	void (*unbind)(void *peer);
};

/*
 * One job in flight. A reqjob has one of its own (reqjob_run); a context
 * that runs several jobs at once embeds one per job (reqjob_run_task).
 * The fields are the reqjob's.
 */
struct reqjob_task {
	struct reqjob *owner;
	void (*work)(void *arg);
	void (*done)(void *arg);
	void *arg;
	bool busy;
};

struct reqjob {
	const struct reqjob_ops *ops;
	const struct reqjob_binding *binding;
	void *peer;            /* NULL before attach and once gone, taken or handed on */
	unsigned refs;
	unsigned jobs;         /* in flight */
	bool over;
	bool expired;          /* over because a job's deadline passed */
	atomic_bool gone;      /* the peer went away; read by work() */

	/*
	 * Where the jobs run (base/worker.h), set by the owner before
	 * reqjob_run and changed whenever no job is in flight: the mount's
	 * key (0: CPU work), the deadline in seconds (<= 0: none), and
	 * whether it bounds a stall rather than the job (worker_req.stall).
	 */
	uint64_t key;
	double timeout;
	bool stall;
	/*
	 * Optional (0: unused). The time on the loop's clock (ev_now) by
	 * which the whole request must be over, for a request of several
	 * jobs one after another under the client's deadline (a search whose
	 * paused jobs start again when its client has read): each job then
	 * gets what is left of it (at least 1 ms) rather than `timeout` from
	 * its own start, and `timeout` only names the deadline in messages.
	 * Ignored with `stall`, whose wait starts afresh by design.
	 */
	double until;

	struct reqjob_task task;
};

/* This job has no deadline (a large copy that takes its time on a healthy disk). */
#define REQJOB_NO_DEADLINE 1u
/* Computation on memory: key 0, no deadline. */
#define REQJOB_CPU 2u
/*
 * One of several jobs of the request meant to run at the same time (the
 * walk jobs of a search): worker_req.spread, so that it does not wait for
 * a thread busy with a job of its own key.
 */
#define REQJOB_SPREAD 4u
/*
 * A short job that writes: a file's temporary written and renamed into
 * place (an Edit), some 100 us on tmpfs where a stat is 10. The loop,
 * about to sleep right after submitting it, waits up to REQJOB_WRITES_NS
 * for it (worker_req.quick_ns) rather than a stat's 60 us, and completes
 * it without being woken.
 */
#define REQJOB_WRITES 8u
#define REQJOB_WRITES_NS 150000u

/* Set up j with one reference, the caller's. key, timeout and stall start at 0. */
void reqjob_init(struct reqjob *j, const struct reqjob_ops *ops);

/* Take a reference. */
void reqjob_hold(struct reqjob *j);

/*
 * Drop a reference; the last one calls ops->free. A release with no
 * reference held is a bug of the caller's: it is logged and ignored.
 */
void reqjob_release(struct reqjob *j);

/*
 * Tie `peer` (which must not be NULL) to j, which has none, through its
 * binding: b->bind(peer, j) runs and the peer holds a reference.
 */
void reqjob_attach(struct reqjob *j, void *peer, const struct reqjob_binding *b);

/*
 * The binding's close hook: the peer went away. Marks j gone, runs
 * ops->cancel, drops the peer's reference. Nothing when no peer is
 * attached (already gone, taken back or handed on).
 */
void reqjob_peer_gone(struct reqjob *j);

/*
 * Take the peer back, to end it (an RPC call is answered so): it is
 * unbound and j lets go of it, without ops->cancel. Returns the peer, or
 * NULL when none is attached. j may be freed by this call unless the
 * caller holds a reference.
 */
void *reqjob_detach(struct reqjob *j);

/*
 * Hand the peer of `from` on to `to` (which has none): the peer is bound
 * to `to` and holds a reference on it; `from` lets go of it without
 * ops->cancel and is no longer live (completions of its jobs in flight
 * are dropped). Returns 0, or -ENOTCONN when `from` has no peer.
 */
int reqjob_handoff(struct reqjob *from, struct reqjob *to);

/* The peer, or NULL. */
void *reqjob_peer(const struct reqjob *j);

/* Peer attached and not over. */
bool reqjob_live(const struct reqjob *j);

/* The request is answered: no job starts or completes to the owner any more. */
void reqjob_finish(struct reqjob *j);

/* Jobs in flight. */
unsigned reqjob_busy(const struct reqjob *j);

/*
 * Whether task t has a job in flight: until its completion has run (or
 * was dropped), its work() may still be using what t's job works on.
 */
bool reqjob_task_busy(const struct reqjob_task *t);

/* Whether the peer went away. Any thread: a job's work() may stop early. */
bool reqjob_gone(const struct reqjob *j);

/*
 * Run work(arg) on the worker pool with j's key and deadline (flags:
 * REQJOB_NO_DEADLINE, REQJOB_CPU, REQJOB_SPREAD), then done(arg) on the loop if j is
 * still live by then. If the deadline passes first, ops->expired runs
 * instead (see there). The job holds a reference until its completion.
 * Returns 0; -ECANCELED when j is not live; -EBUSY when j's own task is in
 * flight; or worker_run()'s error (-EAGAIN: the queue is full).
 */
int reqjob_run(struct reqjob *j, void (*work)(void *arg), void (*done)(void *arg), void *arg, unsigned flags);

/* reqjob_run() with a task of the caller's (several jobs at once). */
int reqjob_run_task(struct reqjob *j, struct reqjob_task *t, void (*work)(void *arg), void (*done)(void *arg),
		    void *arg, unsigned flags);

#endif
