/* SPDX-License-Identifier: Apache-2.0 */
/*
 * process_handover.c - the process table's part of the hand-over record
 * (process_handover.h), on the table's snapshot and adopt hooks.
 */
#include "process/process_handover.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/handover.h"
#include "base/log.h"
#include "process/endreason.h"
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

/* The key's part of a record (NULL without a key). */
static Upgrade__IdempotencyKey *key_to_record(struct handover *a, const struct process_snapshot *s)
{
	Upgrade__IdempotencyKey *k;

	if (!s->idem_key)
		return NULL;
	k = handover_alloc(a, sizeof(*k));
	if (!k)
		return NULL;
	upgrade__idempotency_key__init(k);
	k->key = (char *)s->idem_key;
	k->uid = s->idem_uid;
	k->fingerprint = (char *)(s->idem_fp ? s->idem_fp : "");
	return k;
}

static void key_from_record(const Upgrade__IdempotencyKey *k, struct process_snapshot *s)
{
	if (!k || !k->key || !*k->key)
		return;
	s->idem_key = k->key;
	s->idem_uid = k->uid;
	s->idem_fp = k->fingerprint;
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
		/* Why it ended rides in the end event, as clients see it. */
		if (s->why.kind != ENDREASON_NONE) {
			Process__EndReason *why = handover_alloc(a, sizeof(*why));
			char *words = handover_alloc(a, 512);

			if (why && words) {
				process__end_reason__init(why);
				endreason_describe(&s->why, s->status, words, 512);
				why->kind = (Process__EndReason__Kind)s->why.kind;
				why->message = words;
				why->signal = (uint32_t)(s->why.sig > 0 ? s->why.sig : 0);
				why->memory_max_bytes = s->why.memory_max;
				why->memory_peak_bytes = s->why.memory_peak;
				why->timeout_ms = s->why.timeout_ms;
				why->session = handover_strdup(a, s->why.session);
				end->reason = why;
			}
		}
		x->end = end;
		x->key = key_to_record(a, s);
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
	p->key = key_to_record(a, s);
	p->input_offset = s->in_taken;
	p->deadline_ms = s->deadline_ms;
	p->term_signal = (uint32_t)(s->termsig > 0 ? s->termsig : 0);
	if (s->kill.by != ENDREASON_BY_NONE) {
		Upgrade__KillNote *k = handover_alloc(a, sizeof(*k));

		if (k) {
			upgrade__kill_note__init(k);
			k->by = (uint32_t)s->kill.by;
			k->signal = (uint32_t)s->kill.sig;
			k->timeout_ms = s->kill.timeout_ms;
			k->session = handover_strdup(a, s->kill.session);
			p->kill = k;
		}
	}
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
	key_from_record(hp->key, &s);
	s.in_taken = hp->input_offset;
	s.deadline_ms = hp->deadline_ms;
	s.termsig = (int)hp->term_signal;
	if (hp->kill) {
		s.kill.by = (enum endreason_by)hp->kill->by;
		s.kill.sig = (int)hp->kill->signal;
		s.kill.timeout_ms = hp->kill->timeout_ms;
		snprintf(s.kill.session, sizeof(s.kill.session), "%s", hp->kill->session ? hp->kill->session : "");
	}
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
		if (x->end->reason) {
			const Process__EndReason *r = x->end->reason;

			s.why.kind = (enum endreason_kind)r->kind;
			s.why.sig = (int)r->signal;
			s.why.memory_max = r->memory_max_bytes;
			s.why.memory_peak = r->memory_peak_bytes;
			s.why.timeout_ms = r->timeout_ms;
			snprintf(s.why.session, sizeof(s.why.session), "%s", r->session ? r->session : "");
		}
	}
	key_from_record(x->key, &s);
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
