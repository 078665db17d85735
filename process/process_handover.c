/* SPDX-License-Identifier: Apache-2.0 */
/*
 * process_handover.c - the process table's part of the hand-over record
 * (process_handover.h), on the table's snapshot and adopt hooks.
 */
#include "process/process_handover.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "base/handover.h"
#include "base/log.h"
#include "process/process.h"
#include "process/ring.h"

#define LOGGER "envd"

static Upgrade__OutputRing *ring_to_record(struct handover *a, const struct ring *rg)
{
	Upgrade__OutputRing *o = handover_alloc(a, sizeof(*o));
	uint64_t off;

	if (!o)
		return NULL;
	upgrade__output_ring__init(o);
	o->start = ring_start(rg);
	o->end = ring_end(rg);
	off = o->start;
	while (off < o->end) {
		enum ring_kind kind;
		const uint8_t *p;
		long n = ring_peek(rg, off, &kind, &p, (size_t)(o->end - off));
		Upgrade__OutputRun *last = o->n_runs ? o->runs[o->n_runs - 1] : NULL;

		if (n <= 0)
			break;
		if (last && last->kind == (uint32_t)kind) {
			uint8_t *d = handover_alloc(a, last->data.len + (size_t)n);
			if (!d)
				return NULL;
			memcpy(d, last->data.data, last->data.len);
			memcpy(d + last->data.len, p, (size_t)n);
			last->data.data = d;
			last->data.len += (size_t)n;
		} else {
			Upgrade__OutputRun *run = handover_alloc(a, sizeof(*run));
			uint8_t *d = handover_alloc(a, (size_t)n);
			if (!run || !d)
				return NULL;
			upgrade__output_run__init(run);
			run->kind = (uint32_t)kind;
			memcpy(d, p, (size_t)n);
			run->data.data = d;
			run->data.len = (size_t)n;
			HANDOVER_PUSH(a, o->runs, o->n_runs, run);
		}
		off += (uint64_t)n;
	}
	/* Bytes that did not fit are recorded as evicted (the start moves). */
	uint64_t have = 0;
	for (size_t i = 0; i < o->n_runs; i++)
		have += o->runs[i]->data.len;
	o->start = o->end - have;
	return o;
}

static void add_process(void *ud, const struct process_snapshot *s)
{
	struct handover *a = ud;

	if (s->finished) {
		Upgrade__HandoverExit *x = handover_alloc(a, sizeof(*x));
		Process__ProcessEvent__EndEvent *end = handover_alloc(a, sizeof(*end));
		if (!x || !end)
			return;
		upgrade__handover_exit__init(x);
		process__process_event__end_event__init(end);
		x->pid = s->pid;
		x->tag = (char *)(s->tag ? s->tag : "");
		x->has_tag = s->tag != NULL;
		end->exit_code = s->exit_code;
		end->exited = s->exited;
		end->status = (char *)s->status;
		if (s->exit_code != 0) {
			end->optional_error_case = PROCESS__PROCESS_EVENT__END_EVENT__OPTIONAL_ERROR_ERROR;
			end->error = (char *)s->status;
		}
		x->end = end;
		x->remaining_ms = s->retain_left_ms;
		x->output = ring_to_record(a, s->ring);
		x->pty = s->pty;
		x->config = (Process__ProcessConfig *)s->config;
		HANDOVER_PUSH(a, a->st->terminated, a->st->n_terminated, x);
		return;
	}
	Upgrade__HandoverProc *p = handover_alloc(a, sizeof(*p));
	if (!p)
		return;
	upgrade__handover_proc__init(p);
	p->pid = s->pid;
	p->tag = (char *)(s->tag ? s->tag : "");
	p->has_tag = s->tag != NULL;
	p->cg_type = (char *)(s->pty ? "pty" : "user");
	p->config = (Process__ProcessConfig *)s->config;
	p->stdout_fd = p->stderr_fd = p->stdin_fd = p->tty_fd = -1;
	if (s->pty) {
		p->tty_fd = s->out_fd;
		p->has_stdout = s->out_fd >= 0;
	} else {
		p->stdout_fd = s->out_fd;
		p->stderr_fd = s->err_fd;
		p->stdin_fd = s->in_fd;
		p->has_stdout = s->out_fd >= 0;
		p->has_stderr = s->err_fd >= 0;
		p->has_stdin = s->in_fd >= 0;
	}
	handover_keep_fd(a, s->out_fd);
	handover_keep_fd(a, s->err_fd);
	handover_keep_fd(a, s->in_fd);
	p->timeout_ms = s->timeout_left_ms;
	p->output = ring_to_record(a, s->ring);
	/* The table flattens pending input into a buffer of the call's own,
	 * gone when fn returns: the record keeps a copy. */
	if (s->stdin_pending_len) {
		uint8_t *in = handover_alloc(a, s->stdin_pending_len);
		if (in) {
			memcpy(in, s->stdin_pending, s->stdin_pending_len);
			p->stdin_pending.data = in;
			p->stdin_pending.len = s->stdin_pending_len;
		}
	}
	p->stdin_close_pending = s->stdin_close_pending;
	p->reaped = s->reaped;
	p->exit_code = s->exit_code;
	p->exited = s->exited;
	p->status = (char *)s->status;
	p->cgroup = (char *)(s->cgroup ? s->cgroup : "");
	HANDOVER_PUSH(a, a->st->processes, a->st->n_processes, p);
}

static int ring_from_record(struct ring *rg, const Upgrade__OutputRing *o)
{
	uint64_t total = 0;

	ring_init(rg, process_ring_size);
	if (!o)
		return 0;
	for (size_t i = 0; i < o->n_runs; i++)
		total += o->runs[i]->data.len;
	/* Offsets continue where the old image stopped. */
	rg->start = rg->end = o->end - total;
	for (size_t i = 0; i < o->n_runs; i++) {
		uint32_t k = o->runs[i]->kind;
		if (k < RING_STDOUT || k > RING_PTY)
			k = RING_STDOUT;
		if (ring_append(rg, (enum ring_kind)k, o->runs[i]->data.data, o->runs[i]->data.len) < 0)
			return -ENOMEM;
	}
	return 0;
}

static int adopt_proc(const Upgrade__HandoverProc *hp)
{
	struct process_snapshot s = { 0 };
	struct ring rg;
	int rc;

	s.pid = hp->pid;
	s.tag = hp->has_tag ? hp->tag : NULL;
	s.config = hp->config;
	s.pty = (hp->cg_type && strcmp(hp->cg_type, "pty") == 0) || handover_fd_open(hp->tty_fd);
	if (s.pty) {
		s.out_fd = handover_fd_open(hp->tty_fd) ? hp->tty_fd : -1;
		s.err_fd = s.in_fd = -1;
	} else {
		s.out_fd = handover_fd_open(hp->stdout_fd) ? hp->stdout_fd : -1;
		s.err_fd = handover_fd_open(hp->stderr_fd) ? hp->stderr_fd : -1;
		s.in_fd = handover_fd_open(hp->stdin_fd) ? hp->stdin_fd : -1;
	}
	s.timeout_left_ms = hp->timeout_ms;
	s.reaped = hp->reaped;
	s.exit_code = hp->exit_code;
	s.exited = hp->exited;
	s.status = hp->status;
	s.stdin_pending = hp->stdin_pending.data;
	s.stdin_pending_len = hp->stdin_pending.len;
	s.stdin_close_pending = hp->stdin_close_pending;
	s.cgroup = hp->cgroup && *hp->cgroup ? hp->cgroup : NULL;
	if (s.pid == 0 || (!s.reaped && kill((pid_t)s.pid, 0) < 0 && errno == ESRCH && s.out_fd < 0))
		return -ESRCH;
	rc = ring_from_record(&rg, hp->output);
	if (rc == 0)
		rc = process_adopt(&s, &rg);
	ring_free(&rg);
	return rc;
}

static int adopt_exit(const Upgrade__HandoverExit *x)
{
	struct process_snapshot s = { 0 };
	struct ring rg;
	int rc;

	s.pid = x->pid;
	s.tag = x->has_tag ? x->tag : NULL;
	s.finished = true;
	s.pty = x->pty;
	s.config = x->config;
	s.retain_left_ms = x->remaining_ms;
	s.out_fd = s.err_fd = s.in_fd = -1;
	if (x->end) {
		s.exit_code = x->end->exit_code;
		s.exited = x->end->exited;
		s.status = x->end->status;
	}
	if (x->remaining_ms <= 0)
		return -ETIME;
	rc = ring_from_record(&rg, x->output);
	if (rc == 0)
		rc = process_adopt(&s, &rg);
	ring_free(&rg);
	return rc;
}

void process_handover_save(struct handover *h)
{
	process_snapshot_each(add_process, h);
}

void process_handover_restore(struct handover *h)
{
	const Upgrade__HandoverState *st = h->st;
	int rc;

	for (size_t i = 0; i < st->n_processes; i++) {
		rc = adopt_proc(st->processes[i]);
		if (rc < 0) {
			h->taken.procs_failed++;
			log_error(LOGGER, "upgrade: process %u not taken over: %s", st->processes[i]->pid,
				  strerror(-rc));
		} else {
			h->taken.procs++;
		}
	}
	for (size_t i = 0; i < st->n_terminated; i++) {
		rc = adopt_exit(st->terminated[i]);
		if (rc < 0 && rc != -ETIME)
			h->taken.retained_failed++;
		else if (rc == 0)
			h->taken.retained++;
	}
}
