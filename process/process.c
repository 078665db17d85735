/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "process/process.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pty/pty.h"
#include "base/child.h"
#include "base/errstr.h"
#include "base/log.h"
#include "base/procstat.h"
#include "process/cgroup.h"
#include "process/lifecycle.h"
#include "process/output.h"
#include "base/loop.h"
#include "process/process_int.h"
#include "process/ptable.h"
#include "process/ring.h"
#include "process/spawn.h"
#include "process/stdin.h"
#include "base/users.h"
#include "base/worker.h"
#include "process/waitstatus.h"
#include "rpc/rpcerr.h"

size_t process_ring_size = 1024 * 1024;

#define PIPE_SIZE (1024 * 1024)

static struct ptable table;
/* RUSAGE_CHILDREN when the last child was reaped (usage without cgroups). */
static struct rusage children_seen;
/* Ring storage held by finished processes, bounded by retain_budget(). */
static size_t retained_bytes;

static inline struct process *of_entry(struct ptable_entry *e)
{
	return (struct process *)e;
}

/* ---- lifetime ---------------------------------------------------------- */

/* Stop reading, writing and timing the child, and close our pipe ends. */
static void stop_io(struct process *p)
{
	ev_io_stop(envd_loop, &p->out_w);
	ev_io_stop(envd_loop, &p->err_w);
	ev_io_stop(envd_loop, &p->in_w);
	ev_timer_stop(envd_loop, &p->grace_w);
	ev_timer_stop(envd_loop, &p->kill_w);
	ev_timer_stop(envd_loop, &p->stall_w);
	if (p->pty)
		p->in_fd = -1; /* the PTY master is out_fd, closed once */
	close_fd(&p->out_fd);
	close_fd(&p->err_fd);
	close_fd(&p->in_fd);
}

static uint64_t mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static uint64_t tv_us(const struct timeval *tv)
{
	return (uint64_t)tv->tv_sec * 1000000u + (uint64_t)tv->tv_usec;
}

const struct process_tracker *process_tracker;
const struct process_try_ops *process_try;

/* ---- the keeper (process_keeper in process.h) -------------------------- */

const struct process_keeper *process_keeper;

/* What a snapshot says of p, but the timers and the pending input. */
static void view_of(const struct process *p, struct process_snapshot *s)
{
	memset(s, 0, sizeof(*s));
	s->pid = (uint32_t)p->pid;
	s->tag = p->tag;
	s->pty = p->pty;
	s->config = p->config;
	s->finished = lc_finalized(p->lc);
	s->out_fd = p->out_fd;
	s->err_fd = p->err_fd;
	s->in_fd = p->pty ? (p->out_fd >= 0 ? p->out_fd : -1) : p->in_fd;
	s->stdin_close_pending = p->stdin_close_pending;
	s->ring = &p->ring;
	s->reaped = lc_reaped(p->lc);
	s->exit_code = p->exit_code;
	s->exited = p->exited;
	s->status = p->status;
	s->cgroup = p->cg ? pcg_leaf_path(p->cg) : NULL;
	s->pidfd = -1;
	s->t_start_us = p->t_start_us;
	s->idem_key = p->idem_key;
	s->idem_uid = p->idem_uid;
	s->idem_fp = p->idem_key ? p->idem_fp : NULL;
	s->in_taken = p->in_taken;
	s->deadline_ms = p->kill_ms;
	s->kill = p->kill;
	s->termsig = p->termsig;
	s->why = p->why;
}

int process_ring_lend(struct process *p, uint8_t *buf, size_t cap)
{
	return ring_use(&p->ring, buf, cap);
}

static void keeper_start(struct process *p)
{
	struct process_snapshot s;

	if (!process_keeper || p->keep)
		return;
	view_of(p, &s);
	p->keep = process_keeper->start(p, &s);
	/* What reached the command: queued input is not kept across a crash. */
	if (p->keep)
		process_keeper->input_written(p->keep, p->in_written);
}

static void keeper_reaped(struct process *p)
{
	struct process_snapshot s;

	if (!p->keep)
		return;
	view_of(p, &s);
	process_keeper->reaped(p->keep, &s);
}

static void keeper_finalized(struct process *p)
{
	struct process_snapshot s;

	if (!p->keep)
		return;
	view_of(p, &s);
	process_keeper->finalized(p->keep, &s);
}

static void keeper_killed(struct process *p)
{
	struct process_snapshot s;

	if (!p->keep)
		return;
	view_of(p, &s);
	process_keeper->killed(p->keep, &s);
}

static void keeper_drop(struct process *p)
{
	if (!p->keep)
		return;
	/* A lent ring's storage goes with the handle. */
	if (p->ring.fixed)
		ring_clear(&p->ring);
	process_keeper->drop(p->keep);
	p->keep = NULL;
}

/*
 * What a retained ring costs against the retention budget: its storage;
 * for one lent by the keeper (mapped at its full budget at once), the pages
 * written so far, all of them once it has wrapped. Constant once the
 * process is finalized (no more output), as the budget's sums need.
 */
static size_t ring_cost(const struct ring *r)
{
	if (!r->fixed)
		return r->cap;
	if (r->start > 0)
		return r->cap;
	return (r->used + 4095) / 4096 * 4096;
}

static void attach_settled(struct process *p);

/* ---- idempotency keys ---------------------------------------------------- */

/* Processes whose spawn job is under way: not in the table yet, but their
 * key is taken (a repeat must not spawn a second one). */
static struct process *spawning_head;

static void spawning_add(struct process *p)
{
	p->spawning = true;
	p->spawn_next = spawning_head;
	spawning_head = p;
}

static void spawning_remove(struct process *p)
{
	for (struct process **pp = &spawning_head; *pp; pp = &(*pp)->spawn_next) {
		if (*pp == p) {
			*pp = p->spawn_next;
			break;
		}
	}
	p->spawning = false;
	p->spawn_next = NULL;
}

static bool key_is(const struct process *p, uint32_t uid, const char *key)
{
	return p->idem_key && p->idem_uid == uid && strcmp(p->idem_key, key) == 0;
}

struct process *process_find_key(uint32_t uid, const char *key)
{
	if (!key)
		return NULL;
	for (struct process *p = spawning_head; p; p = p->spawn_next)
		if (key_is(p, uid, key))
			return p;
	/* Listed and retained entries alike: a key lives as long as its
	 * entry. Linear, but only a Start with a key pays it, and the table
	 * is bounded by retention. */
	for (struct ptable_entry *e = table.head; e; e = e->next) {
		struct process *q = of_entry(e);

		if ((e->listed || e->retained) && key_is(q, uid, key))
			return q;
	}
	return NULL;
}

const char *process_key(const struct process *p)
{
	return p->idem_key ? p->idem_key : "";
}

const char *process_key_fingerprint(const struct process *p)
{
	return p->idem_key ? p->idem_fp : "";
}

static void rejoin_cancel(struct rpc_call *call, enum rpc_code why)
{
	struct rejoin *r = rpc_call_ud(call);

	r->call = NULL;
}

static const struct rpc_call_hooks rejoin_hooks = { .on_cancel = rejoin_cancel };

/* The spawn is done: every repeat waiting for it becomes a Connect. */
static void rejoins_attach(struct process *p)
{
	while (p->rejoins) {
		struct rejoin *r = p->rejoins;

		p->rejoins = r->next;
		if (r->call) {
			rpc_call_set_hooks(r->call, NULL, NULL);
			process_rejoin(p, r->call, r->has_budget ? &r->budget : NULL);
		}
		free(r);
	}
}

/* The spawn failed: the repeats get what the first Start got. */
static void rejoins_fail(struct process *p, enum rpc_code code, const char *msg)
{
	while (p->rejoins) {
		struct rejoin *r = p->rejoins;

		p->rejoins = r->next;
		if (r->call) {
			rpc_call_set_hooks(r->call, NULL, NULL);
			rpc_fail(r->call, code, "%s", msg);
		}
		free(r);
	}
}

/* ---- watches (WaitFor) ------------------------------------------------------ */

void process_watch(struct process *p, struct process_watch *w)
{
	w->next = p->watches;
	p->watches = w;
}

void process_unwatch(struct process *p, struct process_watch *w)
{
	for (struct process_watch **pp = &p->watches; *pp; pp = &(*pp)->next) {
		if (*pp == w) {
			*pp = w->next;
			w->next = NULL;
			return;
		}
	}
}

const struct ring *process_ring(const struct process *p)
{
	return &p->ring;
}

bool process_ended(const struct process *p)
{
	return lc_end_ready(p->lc) && !p->track_wait;
}

void process_end_event(struct process *p, Process__ProcessEvent__EndEvent *end,
		       Process__ResourceUsage *use, Process__EndReason *why, char *words,
		       size_t wlen)
{
	output_end_fill(p, end, use, why, words, wlen);
}

/* A callback may unwatch itself: the next one is taken first. */
static void watches_appended(struct process *p)
{
	for (struct process_watch *w = p->watches, *next; w; w = next) {
		next = w->next;
		if (w->appended)
			w->appended(w, p);
	}
}

static void watches_ended(struct process *p)
{
	for (struct process_watch *w = p->watches, *next; w; w = next) {
		next = w->next;
		if (w->ended)
			w->ended(w, p);
	}
}

static void watches_gone(struct process *p)
{
	while (p->watches) {
		struct process_watch *w = p->watches;

		p->watches = w->next;
		w->next = NULL;
		if (w->gone)
			w->gone(w, p);
	}
}

static void process_free(struct process *p)
{
	attach_settled(p);
	watches_gone(p);
	rejoins_fail(p, RPC_INTERNAL, "error starting process: it did not start");
	if (p->spawning)
		spawning_remove(p);
	if (p->track)
		process_tracker->release(p->track);
	if (p->try_h)
		process_try->release(p->try_h);
	pcg_leaf_release(p->cg);
	p->cg = NULL;
	stop_io(p);
	ev_child_stop(envd_loop, &p->child_w);
	ev_timer_stop(envd_loop, &p->retain_w);
	if (p->lc != LC_NEW)
		ptable_remove(&table, &p->ent);
	if (lc_finalized(p->lc))
		retained_bytes -= ring_cost(&p->ring);
	keeper_drop(p);
	ring_free(&p->ring);
	ev_io_stop(envd_loop, &p->pidfd_w);
	ev_timer_stop(envd_loop, &p->pidfd_retry_w);
	if (p->pidfd > 0)
		close(p->pidfd);
	stdin_drop(p, EPIPE);
	if (p->config)
		process__process_config__free_unpacked(p->config, NULL);
	free(p->tag);
	free(p->idem_key);
	free(p);
}

static void trim_retained(void);
static size_t retain_budget(void);

/* The end of a callback's work on p (process_enter in process_int.h). */
static void process_leave(struct process *p)
{
	if (--p->depth > 0)
		return;
	output_settle(p);
	if (p->lc == LC_EXPIRED && !p->subs) {
		process_free(p);
		return;
	}
	/* The last reader of a finished process is gone: its ring may now
	 * count against the retention budget. */
	if (lc_finalized(p->lc) && !p->subs && retained_bytes > retain_budget())
		trim_retained();
}

/*
 * Finished processes keep their output for replay, but many short ones
 * with big output must not add up: past the budget the oldest retained
 * rings are dropped (a later replay then reports them as a gap).
 */
static size_t retain_budget(void)
{
	size_t b = 8 * process_ring_size;

	return b < 16u * 1024 * 1024 ? 16u * 1024 * 1024 : b;
}

static void trim_retained(void)
{
	for (struct ptable_entry *e = table.head; e && retained_bytes > retain_budget();
	     e = e->next) {
		struct process *q = of_entry(e);

		/* A ring someone is still reading is not spare: dropping it would
		 * cut a live stream short (lost output). It is trimmed on a later
		 * pass, once its readers are done; until then the overshoot is
		 * bounded by one ring per attached stream. */
		if (!lc_finalized(q->lc) || !q->ring.cap || q->subs)
			continue;
		retained_bytes -= ring_cost(&q->ring);
		keeper_drop(q);
		ring_clear(&q->ring);
	}
}

/* Entering LC_RETAINED: off the list, I/O closed, kept for late Connects. */
static void finalize(struct process *p)
{
	/* A background child of the command may live on in the leaf: it is
	 * removed once empty, not killed. */
	pcg_leaf_release(p->cg);
	p->cg = NULL;
	keeper_finalized(p);
	stop_io(p);
	stdin_drop(p, EPIPE);
	p->paused = false;
	p->ent.listed = false;
	p->ent.retained = true;
	ev_timer_set(&p->retain_w, PROCESS_RETAIN_S, 0.);
	ev_timer_start(envd_loop, &p->retain_w);
	retained_bytes += ring_cost(&p->ring);
	trim_retained();
}

/* Usage as of the end event: the whole leaf, or the reaped leader. */
static void take_usage(struct process *p)
{
	if (p->cg) {
		pcg_leaf_usage(p->cg, &p->usage);
	} else {
		p->usage.user_usec = tv_us(&p->ru.ru_utime);
		p->usage.system_usec = tv_us(&p->ru.ru_stime);
	}
	if (!p->t_end_us)
		p->t_end_us = mono_us();
	p->usage_known = true;
}

/* An attached command's end is complete (usage read, the tracker's
 * changes in): whoever runs it may move on (process_attach_on_settled). */
static void attach_settled(struct process *p)
{
	void (*fn)(void *ud) = p->settled;

	p->settled = NULL;
	if (fn)
		fn(p->settled_ud);
}

static void track_ready(struct process *p)
{
	p->track_wait = false;
	if (p->track_in_end)
		return; /* answered inside make_end, whose own fanout follows */
	process_enter(p);
	output_fanout(p);
	if (!p->try_wait) {
		watches_ended(p);
		attach_settled(p);
	}
	process_leave(p);
}

/* Why it ended (endreason.h), from what is known now: the signal it died
 * of, the kill envd sent last, its cgroup's OOM count and memory. */
static void decide_why(struct process *p)
{
	const Process__ProcessLimits *lim = p->config ? p->config->limits : NULL;

	endreason_decide(&p->kill, p->termsig, p->usage_known && p->usage.oom_killed,
			 lim ? lim->memory_max_bytes : 0, p->usage_known ? p->usage.memory_peak : 0,
			 &p->why);
	if (p->why.kind != ENDREASON_NONE) {
		char words[256];

		endreason_describe(&p->why, p->status, words, sizeof(words));
		log_info("process", "process %d: %s", (int)p->pid, words);
	}
}

/* The try's changes are in (process_try's end hook): as track_ready. */
static void try_ready(struct process *p)
{
	p->try_wait = false;
	if (p->try_in_end)
		return;
	process_enter(p);
	output_fanout(p);
	if (!p->track_wait) {
		watches_ended(p);
		attach_settled(p);
	}
	process_leave(p);
}

void process_try_attach(struct process *p, void *h)
{
	if (!p->try_h && !lc_end_ready(p->lc))
		p->try_h = h;
}

/* Entering an end-ready state: subscribers get data up to here, then end. */
static void make_end(struct process *p)
{
	take_usage(p);
	decide_why(p);
	/* end_off first: the tracker may answer at once, and nothing may be
	 * sent as the end before it marks where the output ends (a reader
	 * behind the ring's end got its end event early, output cut short). */
	p->end_off = ring_end(&p->ring);
	if (p->track) {
		p->track_wait = true;
		p->track_in_end = true;
		process_tracker->end(p->track, p, track_ready);
		p->track_in_end = false;
	}
	if (p->try_h) {
		p->try_wait = true;
		p->try_in_end = true;
		process_try->end(p->try_h, p, try_ready);
		p->try_in_end = false;
	}
	log_info("process", "process %d ended: %s (%llu output bytes)", (int)p->pid, p->status,
		 (unsigned long long)p->end_off);
	ev_timer_stop(envd_loop, &p->grace_w);
	output_fanout(p);
	if (!p->track_wait && !p->try_wait) {
		watches_ended(p);
		attach_settled(p);
	}
}

/*
 * Apply a lifecycle event (lifecycle.h has the table) and perform what
 * entering the new state means. Events that do not apply are ignored.
 */
static void process_lc_step(struct process *p, enum lc_event e)
{
	enum lc_state prev = p->lc, next = lifecycle_next(prev, e);

	if (next == LC_NONE)
		return;
	p->lc = next;
	if (next == LC_REAPED) {
		/* A descendant still holds the output open: wait a little, no more. */
		ev_timer_set(&p->grace_w, PROCESS_GRACE_S, 0.);
		ev_timer_start(envd_loop, &p->grace_w);
	}
	if (!lc_end_ready(prev) && lc_end_ready(next))
		make_end(p);
	if (!lc_finalized(prev) && lc_finalized(next) && next != LC_EXPIRED)
		finalize(p);
	if (next == LC_EXPIRED) {
		ev_timer_stop(envd_loop, &p->retain_w);
		p->ent.retained = false;
	}
}

static void child_cb(EV_P_ ev_child *w, int revents)
{
	struct process *p = w->data;

	process_enter(p);
	struct rusage now;

	ev_child_stop(EV_A_ w);
	p->t_end_us = mono_us();
	/*
	 * Without a cgroup the usage is the leader's rusage (with the
	 * descendants it waited for). libev reaps for us, so it is taken as
	 * the growth of RUSAGE_CHILDREN since the previous reap: exact unless
	 * two children are reaped in the same loop iteration, when the first
	 * callback gets both shares.
	 */
	if (getrusage(RUSAGE_CHILDREN, &now) == 0) {
		uint64_t u = tv_us(&now.ru_utime), su = tv_us(&now.ru_stime);
		uint64_t u0 = tv_us(&children_seen.ru_utime), s0 = tv_us(&children_seen.ru_stime);

		p->ru.ru_utime.tv_sec = (time_t)((u > u0 ? u - u0 : 0) / 1000000u);
		p->ru.ru_utime.tv_usec = (suseconds_t)((u > u0 ? u - u0 : 0) % 1000000u);
		p->ru.ru_stime.tv_sec = (time_t)((su > s0 ? su - s0 : 0) / 1000000u);
		p->ru.ru_stime.tv_usec = (suseconds_t)((su > s0 ? su - s0 : 0) % 1000000u);
		children_seen = now;
	}
	waitstatus_describe(w->rstatus, &p->exit_code, &p->exited, p->status, sizeof(p->status));
	p->termsig = WIFSIGNALED(w->rstatus) ? WTERMSIG(w->rstatus) : 0;
	keeper_reaped(p);
	process_lc_step(p, LC_EV_REAPED);
	process_leave(p);
}

/*
 * The end of a process taken back after a crash (not our child): its
 * pidfd turns readable when it exits; the status comes from the kernel or
 * the reaper (the keeper's exit_status), once the reaper has reaped it
 * (waited for as long as it takes), or a moment later: retried for up to
 * 5 s, then reported unknown.
 */
#define PIDFD_RETRY_S 0.02
#define PIDFD_TRIES 250

static void pidfd_check(struct process *p)
{
	struct rusage ru = { 0 };
	int st;

	int rc = process_keeper ? process_keeper->exit_status(p->keep, p->pid, p->pidfd, &st, &ru) : -EAGAIN;

	if (rc < 0) {
		if (rc == -EBUSY || ++p->pidfd_tries < PIDFD_TRIES) {
			ev_timer_set(&p->pidfd_retry_w, PIDFD_RETRY_S, 0.);
			ev_timer_start(envd_loop, &p->pidfd_retry_w);
			return;
		}
		st = -1;
	}
	process_enter(p);
	ev_io_stop(envd_loop, &p->pidfd_w);
	if (p->pidfd > 0)
		close(p->pidfd);
	p->pidfd = -1;
	p->t_end_us = mono_us();
	p->ru = ru;
	if (st >= 0) {
		waitstatus_describe(st, &p->exit_code, &p->exited, p->status, sizeof(p->status));
		p->termsig = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
	} else {
		p->exit_code = -1;
		p->exited = false;
		snprintf(p->status, sizeof(p->status), "unknown: ended while envd was down");
		log_msg("warn", "process", "process %d ended while envd was down; its exit status is unknown",
			(int)p->pid);
	}
	keeper_reaped(p);
	process_lc_step(p, LC_EV_REAPED);
	process_leave(p);
}

static void pidfd_cb(EV_P_ ev_io *w, int revents)
{
	struct process *p = w->data;

	ev_io_stop(EV_A_ w);
	pidfd_check(p);
}

static void pidfd_retry_cb(EV_P_ ev_timer *w, int revents)
{
	pidfd_check(w->data);
}

static void grace_cb(EV_P_ ev_timer *w, int revents)
{
	struct process *p = w->data;

	/*
	 * Unread output because *we* paused for a slow reader is not a
	 * descendant holding the pipe: keep waiting (the stall timer bounds it).
	 */
	if (p->paused) {
		ev_timer_set(w, PROCESS_GRACE_S, 0.);
		ev_timer_start(EV_A_ w);
		return;
	}
	process_enter(p);
	process_lc_step(p, LC_EV_GRACE);
	process_leave(p);
}

static enum rpc_code signal_by(struct process *p, int sig, enum endreason_by by, char *err,
			       size_t errlen);

static void kill_cb(EV_P_ ev_timer *w, int revents)
{
	struct process *p = w->data;

	char err[128];

	if (!lc_finalized(p->lc))
		signal_by(p, SIGKILL, ENDREASON_BY_TIMEOUT, err, sizeof(err));
}

static void retain_cb(EV_P_ ev_timer *w, int revents)
{
	struct process *p = w->data;

	process_enter(p);
	process_lc_step(p, LC_EV_EXPIRED);
	process_leave(p);
}

/* The timers of a process, started and adopted alike; the caller arms the
 * kill timer (the deadline, `timeout_s` from now) when there is one. */
static void init_timers(struct process *p, double timeout_s)
{
	ev_timer_init(&p->grace_w, grace_cb, PROCESS_GRACE_S, 0.);
	p->grace_w.data = p;
	ev_timer_init(&p->kill_w, kill_cb, timeout_s, 0.);
	p->kill_w.data = p;
	ev_timer_init(&p->retain_w, retain_cb, PROCESS_RETAIN_S, 0.);
	p->retain_w.data = p;
	ev_timer_init(&p->stall_w, output_stall_cb, OUTPUT_STALL_S, 0.);
	p->stall_w.data = p;
}

/* A new process takes over its pid and tag from retained ones: a late
   Connect by pid or tag must find the new process, not a finished one. */
static void evict_retained(pid_t pid, const char *tag)
{
	struct ptable_entry *e, *next;

	/* Untagged starts only compete with their own pid: walk its bucket. */
	for (e = tag ? table.head : ptable_pid_chain(&table, (uint32_t)pid); e; e = next) {
		struct process *q = of_entry(e);

		next = tag ? e->next : e->pid_next;
		if (!e->retained)
			continue;
		if (e->pid != (uint32_t)pid && !(tag && e->tag && strcmp(e->tag, tag) == 0))
			continue;
		process_enter(q);
		process_lc_step(q, LC_EV_EXPIRED);
		process_leave(q);
	}
}

static void (*activity_fn)(void);

void process_on_activity(void (*fn)(void))
{
	activity_fn = fn;
}

/* A client started a process or wrote to one (process_on_activity). */
static void process_activity(void)
{
	if (activity_fn)
		activity_fn();
}

enum rpc_code process_resize(struct process *p, unsigned cols, unsigned rows, char *err,
			     size_t errlen)
{
	int rc;

	if (!p->pty) {
		snprintf(err, errlen, "error resizing tty: tty not assigned to process");
		return RPC_INTERNAL;
	}
	if (p->out_fd < 0) {
		snprintf(err, errlen, "error resizing tty: %s", go_strerror(EBADF));
		return RPC_INTERNAL;
	}
	rc = pty_resize(p->out_fd, cols, rows);
	if (rc < 0) {
		snprintf(err, errlen, "error resizing tty: %s", go_strerror(-rc));
		return RPC_INTERNAL;
	}
	return RPC_OK;
}

/*
 * An interactive shell on a PTY puts each job in a process group of its
 * own, inside the session it leads: signal every member of the session.
 * Reading /proc costs well under a millisecond per hundred processes.
 */
static int signal_session(pid_t sid, int sig)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	int hit = 0;

	if (!d)
		return 0;
	while ((de = readdir(d))) {
		struct procstat st;
		char *rp;
		long pid = strtol(de->d_name, &rp, 10);

		if (*rp || pid <= 0 || pid == sid || procstat_read((pid_t)pid, &st) < 0)
			continue;
		if (st.session == sid && kill((pid_t)pid, sig) == 0)
			hit++;
	}
	closedir(d);
	return hit;
}

void process_kill_note(struct process *p, int sig, enum endreason_by by, const char *session)
{
	/* Only before the end: an end event, once made, says what it says.
	 * A SIGKILL already sent is what it will die of: a later SIGCONT or
	 * SIGTERM does not take its place. */
	if (lc_end_ready(p->lc) || (p->kill.sig == SIGKILL && sig != SIGKILL))
		return;
	p->kill.by = by;
	p->kill.sig = sig;
	p->kill.timeout_ms = by == ENDREASON_BY_TIMEOUT ? p->kill_ms : 0;
	snprintf(p->kill.session, sizeof(p->kill.session), "%s", session ? session : "");
	keeper_killed(p);
}

enum rpc_code process_signal(struct process *p, int sig, char *err, size_t errlen)
{
	return signal_by(p, sig, ENDREASON_BY_CLIENT, err, errlen);
}

static enum rpc_code signal_by(struct process *p, int sig, enum endreason_by by, char *err,
			       size_t errlen)
{
	int rc;

	/* Noted first: an attached command waiting in its session ends inside
	 * the signal op. */
	process_kill_note(p, sig, by, NULL);
	if (p->attached) {
		rc = p->aops ? p->aops->signal(p->aud, sig) : -ESRCH;
		if (rc == 0)
			return RPC_OK;
		if (rc == -ESRCH)
			snprintf(err, errlen, "error sending signal: os: process already finished");
		else
			snprintf(err, errlen, "error sending signal: %s", go_strerror(-rc));
		return RPC_INTERNAL;
	}
	/*
	 * SIGKILL empties the command's cgroup: descendants that left the
	 * process group (setsid, double fork) die too. Other signals are the
	 * command's to handle and go to its group as before.
	 */
	if (sig == SIGKILL && p->cg && pcg_leaf_populated(p->cg)) {
		rc = pcg_leaf_kill(p->cg);
		if (rc == 0)
			return RPC_OK;
		log_info("process", "cgroup kill of %s failed: %s; signalling the group",
			 pcg_leaf_path(p->cg), go_strerror(-rc));
	}

	/* The whole group: descendants of the command die with it. */
	rc = kill(-p->pid, sig);
	if (p->pty && signal_session(p->pid, sig) > 0)
		rc = 0;
	if (rc == 0)
		return RPC_OK;
	if (!lc_reaped(p->lc) && kill(p->pid, sig) == 0)
		return RPC_OK;
	if (errno == ESRCH)
		snprintf(err, errlen, "error sending signal: os: process already finished");
	else
		snprintf(err, errlen, "error sending signal: %s", go_strerror(errno));
	return RPC_INTERNAL;
}

/* ---- start ------------------------------------------------------------------ */

static int nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	return fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 ? -errno : 0;
}

static Process__ProcessConfig *config_copy(const Process__ProcessConfig *c)
{
	size_t n = process__process_config__get_packed_size(c);
	uint8_t *buf = malloc(n ? n : 1);
	Process__ProcessConfig *out;

	if (!buf)
		return NULL;
	process__process_config__pack(c, buf);
	out = process__process_config__unpack(NULL, n, buf);
	free(buf);
	return out;
}

static void cmdline(const Process__ProcessConfig *c, char *out, size_t len)
{
	size_t o = (size_t)snprintf(out, len, "%s ", c->cmd ? c->cmd : "");

	for (size_t i = 0; i < c->n_args && o < len; i++)
		o += (size_t)snprintf(out + o, len - o, "%s%s", i ? " " : "", c->args[i]);
}

/* p is started with the spec's idempotency key. 0 or -ENOMEM. */
static int take_key(struct process *p, const struct process_spec *s)
{
	p->idem_key = strdup(s->idem_key);
	if (!p->idem_key)
		return -ENOMEM;
	p->idem_uid = s->idem_uid;
	snprintf(p->idem_fp, sizeof(p->idem_fp), "%s", s->idem_fp ? s->idem_fp : "");
	return 0;
}

static bool has_limits(const Process__ProcessLimits *l)
{
	return l && (l->memory_max_bytes || l->cpu_percent || l->pids_max);
}

/*
 * The command's own cgroup leaf, limits applied, before the spawn. A
 * `_system` command stays in envd's cgroup as in the reference (never
 * frozen with the workload). Limits that cannot be applied fail the start:
 * silently running without them would be worse.
 */
static enum rpc_code place(struct process *p, const struct process_spec *s, char *err,
			   size_t errlen)
{
	const Process__ProcessLimits *lim = s->config->limits;
	bool system = s->tag && strcmp(s->tag, "_system") == 0;
	struct pcg_limits pl;
	char why[512];

	if (!pcg_active() || system) {
		if (!has_limits(lim))
			return RPC_OK;
		snprintf(err, errlen, "error starting process: resource limits need a cgroup for the "
				      "command, and %s",
			 system ? "a process tagged _system runs in envd's own cgroup"
				: "envd runs without cgroups here (-no-cgroups, no cgroup2 "
				  "filesystem, or not root)");
		return RPC_FAILED_PRECONDITION;
	}
	if (pcg_parent_frozen(s->pty)) {
		snprintf(err, errlen, "error starting process: the workload is frozen for a snapshot; "
				      "try again once it is thawed");
		return RPC_UNAVAILABLE;
	}
	p->cg = pcg_leaf_new(s->pty, why, sizeof(why));
	if (!p->cg) {
		snprintf(err, errlen, "error starting process: cannot create its cgroup: %s", why);
		return RPC_INTERNAL;
	}
	if (!has_limits(lim))
		return RPC_OK;
	pl.memory_max = lim->memory_max_bytes;
	pl.cpu_percent = lim->cpu_percent;
	pl.pids_max = lim->pids_max;
	if (pcg_leaf_limit(p->cg, &pl, why, sizeof(why)) < 0) {
		snprintf(err, errlen, "error starting process: %s", why);
		return RPC_FAILED_PRECONDITION;
	}
	return RPC_OK;
}

/* ---- what output.c and stdin.c report up ---------------------------------- */

static void out_eof(struct process *p)
{
	process_lc_step(p, LC_EV_OUTPUT_EOF);
}

static void out_appended(struct process *p)
{
	if (p->keep)
		process_keeper->sync(p->keep, &p->ring);
	watches_appended(p);
}

static void out_fill_end(struct process *p, Process__ProcessEvent__EndEvent *end)
{
	if (p->track)
		process_tracker->fill(p->track, end);
	if (p->try_h)
		process_try->fill(p->try_h, end);
}

static const struct output_hooks out_hooks = {
	.leave = process_leave,
	.eof = out_eof,
	.appended = out_appended,
	.fill_end = out_fill_end,
};

static void in_closed(struct process *p)
{
	if (p->keep)
		process_keeper->stdin_closed(p->keep);
}

static void in_wrote(struct process *p)
{
	if (p->keep)
		process_keeper->input_written(p->keep, p->in_written);
}

static const struct stdin_hooks in_hooks = {
	.leave = process_leave,
	.closed = in_closed,
	.wrote = in_wrote,
};

static void init_once(void)
{
	static bool done;
	struct sigaction sa;

	if (done)
		return;
	done = true;
	output_init(&out_hooks);
	stdin_init(&in_hooks);
	/* A child that closes its stdin must not take envd down with SIGPIPE. */
	if (sigaction(SIGPIPE, NULL, &sa) == 0 && sa.sa_handler == SIG_DFL)
		signal(SIGPIPE, SIG_IGN);
}

/*
 * The spawn runs in a worker job: the thread that clones waits for the
 * child's chdir and exec (CLONE_VFORK), and on a hung mount (the cwd, the
 * command's binary) that is forever. The loop prepares everything (leaf
 * cgroup, PTY or pipes) and completes the Start when the job is done. The
 * job checks the cwd first (a missing one has an error of its own), so a
 * Start costs one trip to a worker thread and back.
 *
 * libev reaps every child (waitpid(-1)) and drops the status of a pid no
 * watcher names, and a child whose job is not done has none yet: while
 * spawns are in flight, a hold on base/child.c's ring keeps the exits the
 * loop reaps, numbered so that a spawn only takes an exit that came after
 * it began (a pid is reused only after a wrap).
 */
static unsigned spawns_in_flight;

unsigned process_spawns_in_flight(void)
{
	return spawns_in_flight;
}

/* A command of the table: its exit goes to its own watcher. */
static bool pid_in_table(int pid)
{
	return ptable_find_pid(&table, (uint32_t)pid, true) != NULL;
}

/* The position in the ring the spawn's exit will come after. */
static uint64_t spawns_begin(void)
{
	child_watch_start();
	child_exits_skip(pid_in_table);
	spawns_in_flight++;
	return child_exits_hold();
}

static void spawns_end(void)
{
	spawns_in_flight--;
	child_exits_release();
}

struct spawn_job {
	struct process *p;            /* owned until done */
	struct rpc_call *call;        /* NULL once answered or gone */
	struct spawn_req rq;
	struct user u;                /* rq.groups points in here */
	char **argv;                  /* into p->config */
	char **envp;                  /* owned */
	char *cwd;
	int child_fd[3];              /* the child's ends, closed once it has them */
	bool pty;
	unsigned cols, rows;
	int64_t timeout_ms;
	double deadline;              /* seconds */
	const char *exec_path;        /* the command if a path, else the cwd: its mount keys the job */
	bool no_cwd;                  /* stat(cwd) said ENOENT */
	bool spawning;                /* past the cwd check (atomic) */
	char cl[1024];
	uint64_t reap_seq;            /* ring position when the job began */
	pid_t pid_early;              /* stored by the kernel as the child is made */
	bool returned;                /* spawn_start returned (atomic) */
	bool killed;                  /* given up: the child is killed */
	pid_t pid;                    /* spawn_start's result */
	char serr[512];
	struct budget budget;         /* the Start stream's output budget */
	bool has_budget;
	void *try_h;                  /* a try run's handle (process_try), until p takes it */
	int try_rc;                   /* the try's layer could not be made: -errno */
};

static void spawn_job_free(struct spawn_job *j)
{
	int last = -1;

	/* A start that did not get as far as its process: the layer goes. */
	if (j->try_h)
		process_try->started(j->try_h, NULL, -1);
	for (int i = 0; i < 3; i++) {
		if (j->child_fd[i] >= 0 && j->child_fd[i] != last)
			close(j->child_fd[i]);
		last = j->child_fd[i];
	}
	free(j->argv);
	free(j->envp);
	free(j->cwd);
	free(j);
}

/*
 * Give up on the child (its Start ended at its deadline): one stuck in its
 * chdir or exec on a hung mount is killed, which wakes it (FUSE and NFS
 * requests wait killably) and frees the job's thread; not when it waits for
 * a directory lock that a stuck request of the mount holds (a mkdir there):
 * then both go on when the mount answers. The pid cannot have been
 * reused while spawn_start has not returned: the child is not reaped yet,
 * or only just (a reuse would need a pid wrap in between).
 */
static void spawn_job_kill(struct spawn_job *j)
{
	pid_t pid = __atomic_load_n(&j->pid_early, __ATOMIC_ACQUIRE);

	j->killed = true;
	if (pid > 0 && !__atomic_load_n(&j->returned, __ATOMIC_ACQUIRE))
		kill(pid, SIGKILL);
}

/* What did not answer: the cwd while it is checked, then the command. */
static const char *spawn_job_hang_path(const struct spawn_job *j)
{
	return __atomic_load_n(&j->spawning, __ATOMIC_ACQUIRE) ? j->exec_path : j->cwd;
}

static void spawn_job_on_cancel(struct rpc_call *call, enum rpc_code why)
{
	struct spawn_job *j = rpc_call_ud(call);

	j->call = NULL;
	/* A client that went away leaves its command running, as after the
	 * start; its deadline ends the Start and the command. */
	if (why == RPC_DEADLINE_EXCEEDED) {
		rpc_call_set_deadline_message(call, WORKER_TIMEOUT_FMT, j->deadline, spawn_job_hang_path(j));
		spawn_job_kill(j);
	}
}

static const struct rpc_call_hooks spawn_job_hooks = { .on_cancel = spawn_job_on_cancel };

static void spawn_job_work(void *arg)
{
	struct spawn_job *j = arg;
	struct stat st;
	int mntns = -1, mntns_root = -1;

	/* A try's layer first: where it cannot be made, nothing runs. */
	if (j->try_h) {
		j->try_rc = process_try->prepare(j->try_h, &mntns, &mntns_root, j->serr, sizeof(j->serr));
		if (j->try_rc < 0) {
			j->pid = j->try_rc;
			__atomic_store_n(&j->returned, true, __ATOMIC_RELEASE);
			return;
		}
		j->rq.join_mntns = true;
		j->rq.mntns_fd = mntns;
		j->rq.mntns_root_fd = mntns_root;
	}
	if (stat(j->cwd, &st) < 0 && errno == ENOENT) {
		j->no_cwd = true;
		j->pid = -ENOENT;
	} else {
		__atomic_store_n(&j->spawning, true, __ATOMIC_RELEASE);
		j->pid = spawn_start(&j->rq, j->serr, sizeof(j->serr));
		/* The command runs already: what it changes is its own now,
		 * not once the loop has heard of it. */
		if (j->pid > 0 && j->p->track)
			process_tracker->set_pid(j->p->track, j->pid);
	}
	__atomic_store_n(&j->returned, true, __ATOMIC_RELEASE);
}

static void spawn_job_expired(void *arg)
{
	struct spawn_job *j = arg;
	struct rpc_call *call = j->call;

	if (call) {
		j->call = NULL;
		rpc_call_set_hooks(call, NULL, NULL);
		rpc_fail(call, RPC_DEADLINE_EXCEEDED, WORKER_TIMEOUT_FMT, j->deadline, spawn_job_hang_path(j));
	}
	spawn_job_kill(j);
}

static void spawn_register(struct spawn_job *j)
{
	struct process *p = j->p;
	pid_t pid = j->pid;
	int status;

	p->pid = pid;
	p->ent.pid = (uint32_t)pid;
	p->ent.tag = p->tag;
	evict_retained(pid, p->tag);
	p->ent.listed = true;
	ptable_add(&table, &p->ent);
	process_lc_step(p, LC_EV_REGISTERED);

	ev_child_init(&p->child_w, child_cb, pid, 0);
	p->child_w.data = p;
	ev_child_start(envd_loop, &p->child_w);
	/* Reaped before it had a watcher: its exit is handed on as libev would. */
	if (child_exit_take(pid, j->reap_seq, &status)) {
		p->child_w.rpid = pid;
		p->child_w.rstatus = status;
		ev_feed_event(envd_loop, &p->child_w, EV_CHILD);
	}
	ev_io_init(&p->out_w, output_read_cb, p->out_fd, EV_READ);
	p->out_w.data = p;
	ev_io_init(&p->err_w, output_read_cb, p->err_fd < 0 ? 0 : p->err_fd, EV_READ);
	p->err_w.data = p;
	ev_io_init(&p->in_w, stdin_cb, p->in_fd < 0 ? 0 : p->in_fd, EV_WRITE);
	p->in_w.data = p;
	init_timers(p, (double)j->timeout_ms / 1000.0);
	p->kill_ms = j->timeout_ms > 0 ? j->timeout_ms : 0;
	if (j->timeout_ms > 0)
		ev_timer_start(envd_loop, &p->kill_w);
	output_arm_reads(p);

	keeper_start(p);
	log_info("process", "process %d started: %s%s%s", (int)pid, j->cl, p->tag ? " tag=" : "",
		 p->tag ? p->tag : "");
}

static void spawn_job_done(void *arg)
{
	struct spawn_job *j = arg;
	struct rpc_call *call = j->call;
	char msg[PATH_MAX + sizeof(j->cl) + sizeof(j->serr) + 128];
	int status;

	if (call) {
		rpc_call_set_hooks(call, NULL, NULL);
		rpc_call_set_deadline_message(call, NULL);
	}
	spawning_remove(j->p);
	if (j->pid < 0) {
		enum rpc_code code = RPC_INVALID_ARGUMENT;

		if (j->try_rc < 0) {
			code = rpc_code_from_errno(j->try_rc);
			snprintf(msg, sizeof(msg), "%s", j->serr);
		} else if (j->no_cwd)
			snprintf(msg, sizeof(msg), "cwd '%s' does not exist", j->cwd);
		else if (j->pty)
			snprintf(msg, sizeof(msg),
				 "error starting pty with command '%s' in dir '%s' with '%u' cols and '%u' rows: %s",
				 j->cl, j->cwd, j->cols, j->rows, j->serr);
		else
			snprintf(msg, sizeof(msg), "error starting process '%s': %s", j->cl, j->serr);
		if (call)
			rpc_fail(call, code, "%s", msg);
		/* Repeats of the Start (its key) get the same answer. */
		rejoins_fail(j->p, code, msg);
		process_free(j->p);
	} else if (j->killed) {
		/* Answered already (deadline_exceeded); the child goes, whether it
		 * died in its exec or had just made it. Its leaf is doomed with p. */
		if (!child_exit_take(j->pid, j->reap_seq, &status)) {
			kill(-j->pid, SIGKILL);
			kill(j->pid, SIGKILL);
		}
		log_info("process", "process %d killed: it did not start within %g s: %s", (int)j->pid,
			 j->deadline, j->cl);
		snprintf(msg, sizeof(msg), WORKER_TIMEOUT_FMT, j->deadline, spawn_job_hang_path(j));
		rejoins_fail(j->p, RPC_DEADLINE_EXCEEDED, msg);
		process_free(j->p);
	} else {
		spawn_register(j);
		if (j->try_h) {
			j->p->try_h = j->try_h;
			j->try_h = NULL;
			process_try->started(j->p->try_h, j->p, j->pid);
		}
		if (call)
			output_attach(j->p, call, false, false, 0, j->has_budget ? &j->budget : NULL);
		rejoins_attach(j->p);
	}
	spawns_end();
	spawn_job_free(j);
}

enum rpc_code process_start(const struct process_spec *s, struct rpc_call *call, char *err,
			    size_t errlen)
{
	const Process__ProcessConfig *c;
	int pipes[3][2] = { { -1, -1 }, { -1, -1 }, { -1, -1 } };
	enum rpc_code code = RPC_INTERNAL;
	struct spawn_job *j;
	struct process *p;
	int rc;

	init_once();
	process_activity();
	j = calloc(1, sizeof(*j));
	p = j ? calloc(1, sizeof(*p)) : NULL;
	if (!p) {
		free(j);
		free(s->envp);
		if (s->try_h)
			process_try->started(s->try_h, NULL, -1);
		snprintf(err, errlen, "error starting process: %s", go_strerror(ENOMEM));
		return RPC_INTERNAL;
	}
	j->p = p;
	j->envp = s->envp;
	j->try_h = s->try_h;
	j->child_fd[0] = j->child_fd[1] = j->child_fd[2] = -1;
	p->lc = LC_NEW;
	p->out_fd = p->err_fd = p->in_fd = -1;
	ring_init(&p->ring, process_ring_size);
	p->pty = s->pty;
	p->config = config_copy(s->config);
	p->tag = s->tag ? strdup(s->tag) : NULL;
	c = p->config;
	j->argv = c ? calloc(c->n_args + 2, sizeof(char *)) : NULL;
	j->cwd = strdup(s->cwd);
	if (!p->config || (s->tag && !p->tag) || !j->argv || !j->cwd) {
		snprintf(err, errlen, "error starting process: %s", go_strerror(ENOMEM));
		goto fail;
	}
	cmdline(c, j->cl, sizeof(j->cl));
	if (s->idem_key && take_key(p, s) < 0) {
		snprintf(err, errlen, "error starting process: %s", go_strerror(ENOMEM));
		goto fail;
	}
	if (s->budget) {
		j->budget = *s->budget;
		j->has_budget = true;
	}
	code = place(p, s, err, errlen);
	if (code != RPC_OK)
		goto fail;
	code = RPC_INTERNAL;

	if (s->pty) {
		int m, sl;

		rc = pty_open(&m, &sl, s->cols, s->rows);
		if (rc < 0) {
			snprintf(err, errlen, "error starting pty with command '%s' in dir '%s' with "
					      "'%u' cols and '%u' rows: open /dev/ptmx: %s",
				 j->cl, s->cwd, s->cols, s->rows, go_strerror(-rc));
			code = RPC_INVALID_ARGUMENT;
			goto fail;
		}
		p->out_fd = p->in_fd = m;
		p->err_eof = true;
		j->child_fd[0] = j->child_fd[1] = j->child_fd[2] = sl;
	} else {
		static const char *const names[3] = { "stdin", "stdout", "stderr" };

		for (int i = 0; i < 3; i++) {
			if (i == 0 && !s->stdin_pipe)
				continue;
			if (pipe2(pipes[i], O_CLOEXEC) < 0 || nonblock(pipes[i][i == 0 ? 1 : 0]) < 0) {
				snprintf(err, errlen, "error creating %s pipe for command '%s': %s",
					 names[i], c->cmd, go_strerror(errno));
				goto fail;
			}
		}
		/* Fewer wake-ups per byte; best effort (pipe-max-size may be lower). */
		fcntl(pipes[1][0], F_SETPIPE_SZ, PIPE_SIZE);
		fcntl(pipes[2][0], F_SETPIPE_SZ, PIPE_SIZE);
		if (s->stdin_pipe) {
			j->child_fd[0] = pipes[0][0];
			p->in_fd = pipes[0][1];
		} else {
			j->child_fd[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
			if (j->child_fd[0] < 0) {
				snprintf(err, errlen, "error opening /dev/null for command '%s': %s",
					 c->cmd, go_strerror(errno));
				goto fail;
			}
		}
		j->child_fd[1] = pipes[1][1];
		j->child_fd[2] = pipes[2][1];
		p->out_fd = pipes[1][0];
		p->err_fd = pipes[2][0];
	}

	j->argv[0] = c->cmd;
	for (size_t i = 0; i < c->n_args; i++)
		j->argv[i + 1] = c->args[i];
	j->u = *s->user;
	j->rq.file = c->cmd;
	j->rq.argv = j->argv;
	j->rq.argc = c->n_args + 1;
	j->rq.envp = j->envp;
	j->rq.cwd = j->cwd;
	j->rq.set_ids = s->set_ids;
	j->rq.uid = j->u.uid;
	j->rq.gid = j->u.gid;
	j->rq.groups = j->u.groups;
	j->rq.n_groups = j->u.n_groups;
	j->rq.fd_in = j->child_fd[0];
	j->rq.fd_out = j->child_fd[1];
	j->rq.fd_err = j->child_fd[2];
	j->rq.pty = s->pty;
	j->rq.cgroup_dir_fd = -1;
	if (p->cg) {
		j->rq.join_cgroup = true;
		j->rq.cgroup_procs_fd = pcg_leaf_procs_fd(p->cg);
		j->rq.cgroup_dir_fd = pcg_leaf_dir_fd(p->cg);
	}
	j->rq.pid_early = &j->pid_early;
	j->pty = s->pty;
	j->cols = s->cols;
	j->rows = s->rows;
	j->timeout_ms = s->timeout_ms;
	j->exec_path = c->cmd[0] == '/' ? c->cmd : j->cwd;
	j->deadline = worker_deadline_s(s->timeout_ms);
	if (process_tracker)
		p->track = process_tracker->begin(p, -1, p->cg ? pcg_leaf_path(p->cg) : NULL, s->track_changes,
						  j->cwd);
	/* A job dropped at its deadline before a thread took it never ran. */
	j->pid = -ETIMEDOUT;
	snprintf(j->serr, sizeof(j->serr), "fork/exec %s: %s", c->cmd, go_strerror(ETIMEDOUT));
	p->t_start_us = mono_us();
	j->reap_seq = spawns_begin();
	rc = worker_run(&(struct worker_req){ .work = spawn_job_work, .done = spawn_job_done,
					      .expired = spawn_job_expired, .arg = j,
					      .key = worker_path_key(j->exec_path) | WORKER_KEY_SPAWN,
					      .timeout = j->deadline });
	if (rc < 0) {
		spawns_end();
		snprintf(err, errlen, "filesystem worker queue is full, retry later: %s: %s", j->cwd,
			 go_strerror(-rc));
		code = RPC_RESOURCE_EXHAUSTED;
		/* The parent's ends are p's now; the child's are the job's. */
		process_free(p);
		spawn_job_free(j);
		return code;
	}
	j->call = call;
	if (call) {
		rpc_call_set_hooks(call, &spawn_job_hooks, j);
		if (s->timeout_ms > 0)
			rpc_call_set_deadline_message(call, WORKER_TIMEOUT_FMT, j->deadline, j->cwd);
	}
	/* Its key is taken from now on: a repeat waits for this spawn. */
	spawning_add(p);
	return RPC_OK;

fail:
	for (int i = 0; i < 3; i++) {
		close_fd(&pipes[i][0]);
		close_fd(&pipes[i][1]);
	}
	if (s->pty && j->child_fd[0] >= 0)
		close(j->child_fd[0]);
	j->child_fd[0] = j->child_fd[1] = j->child_fd[2] = -1;
	process_free(p);
	spawn_job_free(j);
	return code;
}

/* ---- streams and input ------------------------------------------------------ */

unsigned process_max_subs = 128;

void process_subscribe(struct process *p, struct rpc_call *call, bool replay, uint64_t from,
		       const struct budget *b)
{
	if (output_streams(p) >= process_max_subs) {
		rpc_fail(call, RPC_RESOURCE_EXHAUSTED, "process %d already has %u attached streams",
			 (int)p->pid, process_max_subs);
		return;
	}
	output_attach(p, call, true, replay, from, b);
}

void process_rejoin(struct process *p, struct rpc_call *call, const struct budget *b)
{
	if (p->spawning) {
		struct rejoin *r = calloc(1, sizeof(*r));

		if (!r) {
			rpc_fail(call, RPC_INTERNAL, "error starting process: %s", go_strerror(ENOMEM));
			return;
		}
		r->p = p;
		r->call = call;
		if (b) {
			r->budget = *b;
			r->has_budget = true;
		}
		r->next = p->rejoins;
		p->rejoins = r;
		rpc_call_set_hooks(call, &rejoin_hooks, r);
		return;
	}
	if (output_streams(p) >= process_max_subs) {
		rpc_fail(call, RPC_RESOURCE_EXHAUSTED, "process %d already has %u attached streams",
			 (int)p->pid, process_max_subs);
		return;
	}
	/* The Start's own stream type, as a Connect from the first byte. */
	output_attach(p, call, false, true, 0, b);
}

enum rpc_code process_write_input(struct process *p, struct rpc_call *call, bool stream,
				  bool to_pty, const uint8_t *data, size_t n, bool has_off,
				  uint64_t off, uint64_t *taken, bool *later, char *err, size_t errlen)
{
	process_activity();
	return stdin_write(p, call, stream, to_pty, data, n, has_off, off, taken, later, err, errlen);
}

uint64_t process_input_taken(const struct process *p)
{
	return p->in_taken;
}

void process_input_forget(struct process *p, struct rpc_call *call)
{
	stdin_forget(p, call);
}

enum rpc_code process_close_stdin(struct process *p, char *err, size_t errlen)
{
	return stdin_close(p, err, errlen);
}

/* ---- lookups ------------------------------------------------------------------ */

struct process *process_find_pid(uint32_t pid, bool retained_too)
{
	struct ptable_entry *e = ptable_find_pid(&table, pid, retained_too);

	return e ? of_entry(e) : NULL;
}

struct process *process_find_tag(const char *tag, bool retained_too)
{
	struct ptable_entry *e = ptable_find_tag(&table, tag, retained_too);

	return e ? of_entry(e) : NULL;
}

struct process *process_first(void)
{
	for (struct ptable_entry *e = table.head; e; e = e->next)
		if (e->listed)
			return of_entry(e);
	return NULL;
}

struct process *process_next(const struct process *p)
{
	for (struct ptable_entry *e = p->ent.next; e; e = e->next)
		if (e->listed)
			return of_entry(e);
	return NULL;
}

size_t process_count(void)
{
	return ptable_count_listed(&table);
}

uint32_t process_pid(const struct process *p)
{
	return (uint32_t)p->pid;
}

const char *process_tag(const struct process *p)
{
	return p->tag;
}

const Process__ProcessConfig *process_config(const struct process *p)
{
	return p->config;
}

/* ---- live upgrade ------------------------------------------------------------ */

static int64_t timer_left_ms(ev_timer *t)
{
	if (!ev_is_active(t))
		return 0;
	ev_tstamp left = ev_timer_remaining(envd_loop, t);
	int64_t ms = (int64_t)(left * 1000.0);

	return ms > 0 ? ms : 1;
}

void process_snapshot_each(void (*fn)(void *ud, const struct process_snapshot *s), void *ud)
{
	for (struct ptable_entry *e = table.head; e; e = e->next) {
		struct process *p = of_entry(e);
		struct process_snapshot s = { 0 };
		uint8_t *pending = NULL;
		size_t n = 0;

		if (!e->listed && !e->retained)
			continue;
		/* A running session command lives in its shell: the session's
		   own record carries what can be (session_snapshot_each). */
		if (p->attached && !lc_finalized(p->lc))
			continue;
		view_of(p, &s);
		s.timeout_left_ms = timer_left_ms(&p->kill_w);
		s.retain_left_ms = timer_left_ms(&p->retain_w);
		/* Pending input, flattened (chunks may borrow request bytes). */
		for (struct inchunk *c = p->inq_head; c; c = c->next)
			n += c->len - c->off;
		if (n && (pending = malloc(n))) {
			size_t o = 0;
			for (struct inchunk *c = p->inq_head; c; c = c->next) {
				if (c->data)
					memcpy(pending + o, c->data + c->off, c->len - c->off);
				o += c->len - c->off;
			}
			s.stdin_pending = pending;
			s.stdin_pending_len = n;
		}
		fn(ud, &s);
		free(pending);
	}
}

void process_end_streams(enum rpc_code code, const char *msg)
{
	for (struct ptable_entry *e = table.head; e; e = e->next) {
		struct process *p = of_entry(e);

		process_enter(p);
		output_end_streams(p, code, msg);
		process_leave(p);
	}
}

int process_adopt(const struct process_snapshot *s, struct ring *ring)
{
	struct process *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	if (s->stdin_pending_len) {
		struct inchunk *c = malloc(sizeof(*c) + s->stdin_pending_len);
		if (!c) {
			free(p);
			return -ENOMEM;
		}
		memset(c, 0, sizeof(*c));
		c->p = p;
		c->data = (const uint8_t *)(c + 1);
		memcpy(c + 1, s->stdin_pending, s->stdin_pending_len);
		c->len = s->stdin_pending_len;
		c->owned = true;
		stdin_append(p, c);
	}
	p->config = s->config ? config_copy(s->config) : calloc(1, sizeof(Process__ProcessConfig));
	if (p->config && !s->config)
		process__process_config__init(p->config);
	p->tag = s->tag ? strdup(s->tag) : NULL;
	p->idem_key = s->idem_key && *s->idem_key ? strdup(s->idem_key) : NULL;
	if (!p->config || (s->tag && !p->tag) || (s->idem_key && *s->idem_key && !p->idem_key)) {
		stdin_drop(p, EPIPE);
		if (p->config)
			process__process_config__free_unpacked(p->config, NULL);
		free(p->tag);
		free(p->idem_key);
		free(p);
		return -ENOMEM;
	}
	p->idem_uid = s->idem_uid;
	snprintf(p->idem_fp, sizeof(p->idem_fp), "%s", s->idem_fp ? s->idem_fp : "");
	/* The pending input is part of what it has taken. */
	p->in_taken = s->in_taken > s->stdin_pending_len ? s->in_taken : s->stdin_pending_len;
	p->in_written = p->in_taken - s->stdin_pending_len;
	p->kill_ms = s->deadline_ms;
	p->kill = s->kill;
	p->termsig = s->termsig;
	p->why = s->why;
	init_once();
	p->ring = *ring;
	memset(ring, 0, sizeof(*ring));
	ring_init(ring, p->ring.max);
	p->pid = (pid_t)s->pid;
	p->pty = s->pty;
	p->out_fd = p->err_fd = p->in_fd = -1;
	p->stdin_close_pending = s->stdin_close_pending;
	p->exit_code = s->exit_code;
	p->exited = s->exited;
	snprintf(p->status, sizeof(p->status), "%s", s->status ? s->status : "");
	p->t_start_us = s->t_start_us ? s->t_start_us : mono_us();
	if (s->cgroup && !s->finished)
		p->cg = pcg_leaf_adopt(s->cgroup);

	ev_child_init(&p->child_w, child_cb, p->pid, 0);
	p->child_w.data = p;
	init_timers(p, (double)s->timeout_left_ms / 1000.0);
	ev_io_init(&p->out_w, output_read_cb, 0, EV_READ);
	p->out_w.data = p;
	ev_io_init(&p->err_w, output_read_cb, 0, EV_READ);
	p->err_w.data = p;
	ev_io_init(&p->in_w, stdin_cb, 0, EV_WRITE);
	p->in_w.data = p;

	p->ent.pid = s->pid;
	p->ent.tag = p->tag;
	if (s->finished) {
		/* Retained: the end event is all that is left to give. */
		p->out_eof = p->err_eof = true;
		p->end_off = ring_end(&p->ring);
		p->usage_known = false;
		p->lc = LC_RETAINED;
		p->ent.retained = true;
		ptable_add(&table, &p->ent);
		retained_bytes += ring_cost(&p->ring);
		ev_timer_set(&p->retain_w, s->retain_left_ms > 0 ? (double)s->retain_left_ms / 1000.0 : 0.001,
			     0.);
		ev_timer_start(envd_loop, &p->retain_w);
		/* After a crash its ring is in the keep file, the keeper's. */
		keeper_start(p);
		return 0;
	}

	p->out_fd = s->out_fd;
	p->err_fd = p->pty ? -1 : s->err_fd;
	p->in_fd = p->pty ? (s->out_fd >= 0 ? s->out_fd : -1) : s->in_fd;
	if (p->out_fd >= 0) {
		nonblock(p->out_fd);
		fcntl(p->out_fd, F_SETFD, FD_CLOEXEC);
	} else {
		p->out_eof = true;
	}
	if (p->err_fd >= 0) {
		nonblock(p->err_fd);
		fcntl(p->err_fd, F_SETFD, FD_CLOEXEC);
	} else {
		p->err_eof = true;
	}
	if (!p->pty && p->in_fd >= 0) {
		nonblock(p->in_fd);
		fcntl(p->in_fd, F_SETFD, FD_CLOEXEC);
	}
	ev_io_set(&p->out_w, p->out_fd < 0 ? 0 : p->out_fd, EV_READ);
	ev_io_set(&p->err_w, p->err_fd < 0 ? 0 : p->err_fd, EV_READ);
	ev_io_set(&p->in_w, p->in_fd < 0 ? 0 : p->in_fd, EV_WRITE);
	p->lc = LC_NEW;
	p->ent.listed = true;
	ptable_add(&table, &p->ent);
	process_enter(p);
	process_lc_step(p, LC_EV_REGISTERED);
	if (s->reaped) {
		process_lc_step(p, LC_EV_REAPED);
	} else if (s->not_child) {
		p->pidfd = s->pidfd >= 0 ? s->pidfd : (int)syscall(SYS_pidfd_open, p->pid, 0);
		ev_io_init(&p->pidfd_w, pidfd_cb, p->pidfd >= 0 ? p->pidfd : 0, EV_READ);
		p->pidfd_w.data = p;
		ev_timer_init(&p->pidfd_retry_w, pidfd_retry_cb, PIDFD_RETRY_S, 0.);
		p->pidfd_retry_w.data = p;
		if (p->pidfd >= 0) {
			fcntl(p->pidfd, F_SETFD, FD_CLOEXEC);
			ev_io_start(envd_loop, &p->pidfd_w);
		} else {
			/* Gone and reaped already: the reaper has the status. */
			ev_timer_start(envd_loop, &p->pidfd_retry_w);
		}
	} else {
		ev_child_start(envd_loop, &p->child_w);
	}
	if (s->timeout_left_ms > 0)
		ev_timer_start(envd_loop, &p->kill_w);
	if (p->inq_head && p->in_fd >= 0)
		stdin_flush(p);
	output_arm_reads(p);
	/* A live upgrade's process is kept again; after a crash the keeper
	 * gives back the handle it kept it with. */
	keeper_start(p);
	if (p->out_eof && p->err_eof)
		process_lc_step(p, LC_EV_OUTPUT_EOF);
	process_leave(p);
	return 0;
}

/* ---- attached commands ---------------------------------------------------- */

enum rpc_code process_attach(const struct process_spec *s, uint32_t pid, const int fds[3],
			     const struct process_attach_ops *ops, void *ud, struct rpc_call *call,
			     struct process **out, char *err, size_t errlen)
{
	struct process *p;
	enum rpc_code code;

	init_once();
	process_activity();
	p = calloc(1, sizeof(*p));
	if (!p) {
		snprintf(err, errlen, "error starting process: %s", go_strerror(ENOMEM));
		return RPC_INTERNAL;
	}
	p->lc = LC_NEW;
	p->out_fd = p->err_fd = p->in_fd = -1;
	ring_init(&p->ring, process_ring_size);
	p->config = config_copy(s->config);
	p->tag = s->tag ? strdup(s->tag) : NULL;
	if (!p->config || (s->tag && !p->tag)) {
		snprintf(err, errlen, "error starting process: %s", go_strerror(ENOMEM));
		process_free(p);
		return RPC_INTERNAL;
	}
	p->attached = true;
	if (s->idem_key && take_key(p, s) < 0) {
		snprintf(err, errlen, "error starting process: %s", go_strerror(ENOMEM));
		process_free(p);
		return RPC_INTERNAL;
	}
	code = place(p, s, err, errlen);
	if (code != RPC_OK) {
		process_free(p);
		return code;
	}
	p->aops = ops;
	p->aud = ud;
	p->in_fd = fds[0];
	p->out_fd = fds[1];
	p->err_fd = fds[2];
	p->t_start_us = mono_us();
	p->pid = (pid_t)pid;
	/* Its changes are those of its leaf (the shell is in it while it runs). */
	if (process_tracker)
		p->track = process_tracker->begin(p, -1, p->cg ? pcg_leaf_path(p->cg) : NULL,
						  s->track_changes, s->cwd);
	p->ent.pid = pid;
	p->ent.tag = p->tag;
	evict_retained(p->pid, p->tag);
	p->ent.listed = true;
	ptable_add(&table, &p->ent);
	process_lc_step(p, LC_EV_REGISTERED);
	ev_io_init(&p->out_w, output_read_cb, p->out_fd, EV_READ);
	p->out_w.data = p;
	ev_io_init(&p->err_w, output_read_cb, p->err_fd, EV_READ);
	p->err_w.data = p;
	ev_io_init(&p->in_w, stdin_cb, p->in_fd < 0 ? 0 : p->in_fd, EV_WRITE);
	p->in_w.data = p;
	init_timers(p, (double)s->timeout_ms / 1000.0);
	p->kill_ms = s->timeout_ms > 0 ? s->timeout_ms : 0;
	if (s->timeout_ms > 0)
		ev_timer_start(envd_loop, &p->kill_w);
	output_arm_reads(p);
	if (call)
		output_attach(p, call, false, false, 0, s->budget);
	*out = p;
	return RPC_OK;
}

static uint8_t attach_buf[64 * 1024];

/* What the command wrote is in the pipe by the time it exits: read that
 * much, no more (a background job may go on writing). */
static void attach_drain(struct process *p, int *fd, ev_io *w, enum ring_kind kind, bool *eof,
			 const struct process_attach_ops *ops, void *ud)
{
	int left = 0;

	if (*fd < 0 || *eof)
		return;
	ev_io_stop(envd_loop, w);
	if (ioctl(*fd, FIONREAD, &left) < 0)
		left = 0;
	while (left > 0) {
		ssize_t n = read(*fd, attach_buf, (size_t)left < sizeof(attach_buf) ? (size_t)left : sizeof(attach_buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		ring_append(&p->ring, kind, attach_buf, (size_t)n);
		output_fanout(p);
		left -= (int)n;
	}
	ops->keep_fd(ud, *fd);
	*fd = -1;
	*eof = true;
}

void process_attach_exit(struct process *p, int wstatus)
{
	const struct process_attach_ops *ops = p->aops;
	void *ud = p->aud;

	if (!ops)
		return;
	process_enter(p);
	p->aops = NULL;
	p->t_end_us = mono_us();
	waitstatus_describe(wstatus, &p->exit_code, &p->exited, p->status, sizeof(p->status));
	p->termsig = WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : 0;
	attach_drain(p, &p->out_fd, &p->out_w, RING_STDOUT, &p->out_eof, ops, ud);
	attach_drain(p, &p->err_fd, &p->err_w, RING_STDERR, &p->err_eof, ops, ud);
	process_lc_step(p, LC_EV_REAPED);
	process_lc_step(p, LC_EV_OUTPUT_EOF);
	process_leave(p);
}

void process_attach_on_settled(struct process *p, void (*fn)(void *ud), void *ud)
{
	p->settled = fn;
	p->settled_ud = ud;
}

void process_attach_settle_cancel(struct process *p)
{
	p->settled = NULL;
}

const struct pcg_leaf *process_attach_leaf(const struct process *p)
{
	return p->cg;
}

void process_attach_leaf_drop(struct process *p)
{
	pcg_leaf_release(p->cg);
	p->cg = NULL;
}

void process_attach_fds(const struct process *p, int fds[3])
{
	fds[0] = p->in_fd;
	fds[1] = p->out_fd;
	fds[2] = p->err_fd;
}

void process_attach_running(struct process *p)
{
	p->t_start_us = mono_us();
}

void process_attach_usage(struct process *p, uint64_t user_us, uint64_t sys_us)
{
	p->ru.ru_utime.tv_sec = (time_t)(user_us / 1000000u);
	p->ru.ru_utime.tv_usec = (suseconds_t)(user_us % 1000000u);
	p->ru.ru_stime.tv_sec = (time_t)(sys_us / 1000000u);
	p->ru.ru_stime.tv_usec = (suseconds_t)(sys_us % 1000000u);
}
