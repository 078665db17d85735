/* SPDX-License-Identifier: Apache-2.0 */
/*
 * output.c - a process's output path (process.h has the policy): the
 * child's pipes or PTY master are read into the ring, and every subscriber
 * (Start or Connect stream) is a cursor into it, sent what fanout.h allows.
 * What it learns that the table must act on goes up through the hooks
 * process.c installs (output_init).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "process/output.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/errstr.h"
#include "base/loop.h"
#include "process/budget.h"
#include "process/endreason.h"
#include "process/fanout.h"
#include "process/lifecycle.h"
#include "process/ring.h"

#define READ_CHUNK (64 * 1024)
/* Reads per wake-up before other watchers get a turn. */
#define READS_PER_WAKE 16

static uint8_t read_buf[READ_CHUNK];
static const struct output_hooks *up;

void output_init(const struct output_hooks *hooks)
{
	up = hooks;
}

/* ---- sending to subscribers --------------------------------------------- */

static int sub_send(struct sub *s, Process__ProcessEvent *ev)
{
	Process__StartResponse sr = PROCESS__START_RESPONSE__INIT;
	Process__ConnectResponse cr = PROCESS__CONNECT_RESPONSE__INIT;

	if (!s->call)
		return -EPIPE;
	if (s->connect) {
		cr.event = ev;
		return rpc_send(s->call, &cr.base);
	}
	sr.event = ev;
	return rpc_send(s->call, &sr.base);
}

static void sub_fail(struct sub *s, enum rpc_code code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void sub_fail(struct sub *s, enum rpc_code code, const char *fmt, ...)
{
	struct rpc_call *call = s->call;
	va_list ap;

	if (!call)
		return;
	s->call = NULL;
	va_start(ap, fmt);
	rpc_failv(call, code, fmt, ap);
	va_end(ap);
}

void output_end_fill(struct process *p, Process__ProcessEvent__EndEvent *end,
		     Process__ResourceUsage *use, Process__EndReason *why, char *words, size_t wlen)
{
	process__process_event__end_event__init(end);
	process__resource_usage__init(use);
	process__end_reason__init(why);
	end->exit_code = p->exit_code;
	end->exited = p->exited;
	if (p->usage_known) {
		use->cpu_user_usec = p->usage.user_usec;
		use->cpu_system_usec = p->usage.system_usec;
		use->memory_peak_bytes = p->usage.memory_peak;
		use->oom_killed = p->usage.oom_killed;
		use->wall_usec = p->t_end_us > p->t_start_us ? p->t_end_us - p->t_start_us : 0;
		end->usage = use;
	}
	end->status = p->status;
	up->fill_end(p, end);
	if (p->exit_code != 0) {
		end->optional_error_case = PROCESS__PROCESS_EVENT__END_EVENT__OPTIONAL_ERROR_ERROR;
		end->error = p->status;
	}
	if (p->why.kind != ENDREASON_NONE) {
		endreason_describe(&p->why, p->status, words, wlen);
		why->kind = (Process__EndReason__Kind)p->why.kind;
		why->message = words;
		why->signal = (uint32_t)(p->why.sig > 0 ? p->why.sig : 0);
		why->memory_max_bytes = p->why.memory_max;
		why->memory_peak_bytes = p->why.memory_peak;
		why->timeout_ms = p->why.timeout_ms;
		why->session = p->why.session;
		end->reason = why;
		/* The reference's "signal: killed" says nothing of an OOM kill, a
		 * deadline or a closed session; the words do. */
		if (endreason_in_error(&p->why) && p->exit_code != 0)
			end->error = words;
	}
}

static void sub_send_end(struct sub *s)
{
	struct process *p = s->p;
	Process__ProcessEvent ev = PROCESS__PROCESS_EVENT__INIT;
	Process__ProcessEvent__EndEvent end;
	Process__ResourceUsage use;
	Process__EndReason why;
	char words[512];
	struct rpc_call *call;

	output_end_fill(p, &end, &use, &why, words, sizeof(words));
	ev.event_case = PROCESS__PROCESS_EVENT__EVENT_END;
	ev.end = &end;
	if (sub_send(s, &ev) < 0 || !s->call)
		return;
	call = s->call;
	s->call = NULL;
	rpc_finish(call);
}

/* The withheld range of a budgeted stream (budget.h), before its tail. */
static int sub_send_withheld(struct sub *s, uint64_t to)
{
	struct process *p = s->p;
	Process__ProcessEvent ev = PROCESS__PROCESS_EVENT__INIT;
	Process__OutputWithheld w = PROCESS__OUTPUT_WITHHELD__INIT;
	uint64_t rs = ring_start(&p->ring);

	w.from = s->cursor;
	w.to = to;
	w.bytes = to - s->cursor;
	w.readable_from = rs <= w.from ? w.from : rs < to ? rs : to;
	ev.event_case = PROCESS__PROCESS_EVENT__EVENT_WITHHELD;
	ev.withheld = &w;
	return sub_send(s, &ev);
}

/* A terminal's tail starts on a character, not inside one: past the
 * continuation bytes at `off` (at most 3), where the ring still has them. */
static uint64_t char_start(const struct process *p, uint64_t off, uint64_t limit)
{
	for (int i = 0; i < UTF8_MAX_TAIL && off < limit; i++) {
		enum ring_kind kind;
		uint8_t c;

		if (ring_read(&p->ring, off, &kind, &c, 1) != 1 || kind != RING_PTY || (c & 0xc0) != 0x80)
			break;
		off++;
	}
	return off;
}

static void sub_restart_keepalive(struct sub *s)
{
	ev_timer_again(envd_loop, &s->ka);
}

/* Send what the subscriber may have now; see process.h for the policy. */
static void sub_pump(struct sub *s)
{
	struct process *p = s->p;

	/* The transport may call on_writable from inside rpc_send. */
	if (s->pumping)
		return;
	s->pumping = true;
	while (s->call) {
		bool end_ready = lc_end_ready(p->lc);
		uint64_t limit = end_ready ? p->end_off : ring_end(&p->ring);
		uint64_t upto = limit;
		Process__ProcessEvent ev = PROCESS__PROCESS_EVENT__INIT;
		Process__ProcessEvent__DataEvent data;
		Process__ProcessEvent__GapEvent gap = PROCESS__PROCESS_EVENT__GAP_EVENT__INIT;
		enum ring_kind kind;
		const uint8_t *chunk;
		uint8_t tmp[RING_TEXT_TMP];
		size_t want;
		long n;

		/* An output budget first: it may hold the middle back, or mark it. */
		switch (budget_next(&s->budget, s->cursor, limit, end_ready, &upto)) {
		case BUDGET_HOLD:
			goto out;
		case BUDGET_MARK:
			if (p->pty)
				upto = char_start(p, upto, limit);
			if (sub_send_withheld(s, upto) < 0)
				goto out;
			s->cursor = upto;
			continue;
		case BUDGET_PASS:
			break;
		}
		switch (fanout_next(&p->ring, end_ready, p->end_off, s->cursor, s->replay,
				    rpc_call_queued(s->call) < RPC_SEND_HIGH)) {
		case FANOUT_IDLE:
		case FANOUT_WAIT: /* on_writable or the next read resumes */
			goto out;
		case FANOUT_END:
			if (p->track_wait || p->try_wait)
				goto out; /* track_ready, try_ready resume */
			sub_send_end(s);
			goto out;
		case FANOUT_BEHIND:
			sub_fail(s, RPC_RESOURCE_EXHAUSTED,
				 "stream fell behind the output of process %d: bytes from "
				 "offset %llu were dropped from the %zu-byte buffer; the "
				 "process keeps running (reconnect to follow it)",
				 (int)p->pid, (unsigned long long)s->cursor, p->ring.max);
			goto out;
		case FANOUT_GAP:
			gap.from = s->cursor;
			gap.to = ring_start(&p->ring);
			ev.event_case = PROCESS__PROCESS_EVENT__EVENT_GAP;
			ev.gap = &gap;
			if (sub_send(s, &ev) < 0)
				goto out;
			s->cursor = gap.to;
			continue;
		case FANOUT_DATA:
			break;
		}
		if (upto <= s->cursor)
			goto out;
		process__process_event__data_event__init(&data);
		want = upto - s->cursor < READ_CHUNK ? (size_t)(upto - s->cursor) : READ_CHUNK;
		/* Straight from the ring (PTY output in whole characters): rpc_send
		   encodes (copies) before returning. */
		n = ring_peek_text(&p->ring, s->cursor, upto, lc_end_ready(p->lc) && upto == limit, &kind,
				   &chunk, want, tmp);
		if (n <= 0) {
			/* A budget's head that ends inside a character cannot have
			 * its rest: the head ends before it. */
			if (n == 0 && upto < limit)
				budget_head_stuck(&s->budget, s->cursor);
			if (n == 0 && upto < limit)
				continue;
			goto out;
		}
		/* stdout, stderr and pty share one union slot of the same type. */
		data.output_case = kind == RING_STDOUT ? PROCESS__PROCESS_EVENT__DATA_EVENT__OUTPUT_STDOUT
				 : kind == RING_STDERR ? PROCESS__PROCESS_EVENT__DATA_EVENT__OUTPUT_STDERR
						       : PROCESS__PROCESS_EVENT__DATA_EVENT__OUTPUT_PTY;
		data.pty.data = (uint8_t *)chunk;
		data.pty.len = (size_t)n;
		data.optional_offset_case = PROCESS__PROCESS_EVENT__DATA_EVENT__OPTIONAL_OFFSET_OFFSET;
		data.offset = s->cursor;
		ev.event_case = PROCESS__PROCESS_EVENT__EVENT_DATA;
		ev.data = &data;
		if (sub_send(s, &ev) < 0)
			goto out;
		s->cursor += (uint64_t)n;
		sub_restart_keepalive(s);
	}
out:
	s->pumping = false;
}

void output_fanout(struct process *p)
{
	process_enter(p);
	for (struct sub *s = p->subs; s; s = s->next)
		sub_pump(s);
	up->leave(p);
}

/* ---- reading output ------------------------------------------------------ */

void output_arm_reads(struct process *p)
{
	if (p->out_fd >= 0 && !p->out_eof && !p->paused)
		ev_io_start(envd_loop, &p->out_w);
	else
		ev_io_stop(envd_loop, &p->out_w);
	if (p->err_fd >= 0 && !p->err_eof && !p->paused)
		ev_io_start(envd_loop, &p->err_w);
	else
		ev_io_stop(envd_loop, &p->err_w);
}

/* Pause reading only while every live subscriber lags by over half a ring. */
void output_update_reading(struct process *p)
{
	bool any = false, want = true;

	if (!lc_end_ready(p->lc)) {
		for (struct sub *s = p->subs; s; s = s->next) {
			if (!s->call)
				continue;
			/* A stream holding its middle back wants nothing now. */
			if (budget_holding(&s->budget, s->cursor))
				continue;
			if (!any)
				want = false;
			any = true;
			if (!fanout_lagging(&p->ring, s->cursor))
				want = true;
		}
	}
	if (want == !p->paused)
		return;
	p->paused = !want;
	if (p->paused) {
		for (struct sub *s = p->subs; s; s = s->next)
			s->stall_mark = s->cursor;
		ev_timer_set(&p->stall_w, OUTPUT_STALL_S, 0.);
		ev_timer_start(envd_loop, &p->stall_w);
	} else {
		ev_timer_stop(envd_loop, &p->stall_w);
	}
	output_arm_reads(p);
}

void output_stall_cb(EV_P_ ev_timer *w, int revents)
{
	struct process *p = w->data;
	bool moved = false;

	process_enter(p);
	for (struct sub *s = p->subs; s; s = s->next)
		if (s->call && s->cursor != s->stall_mark)
			moved = true;
	if (moved) {
		for (struct sub *s = p->subs; s; s = s->next)
			s->stall_mark = s->cursor;
		ev_timer_set(&p->stall_w, OUTPUT_STALL_S, 0.);
		ev_timer_start(envd_loop, &p->stall_w);
	} else {
		for (struct sub *s = p->subs; s; s = s->next)
			sub_fail(s, RPC_RESOURCE_EXHAUSTED,
				 "stream stopped reading the output of process %d for %.0f s and "
				 "was closed so the process can go on",
				 (int)p->pid, OUTPUT_STALL_S);
	}
	up->leave(p);
}
void output_read_cb(EV_P_ ev_io *w, int revents)
{
	struct process *p = w->data;
	bool is_err = w == &p->err_w;
	int fd = is_err ? p->err_fd : p->out_fd;
	enum ring_kind kind = p->pty ? RING_PTY : is_err ? RING_STDERR : RING_STDOUT;

	process_enter(p);
	for (int i = 0; i < READS_PER_WAKE && !p->paused; i++) {
		ssize_t n = read(fd, read_buf, sizeof(read_buf));

		if (n > 0) {
			ring_append(&p->ring, kind, read_buf, (size_t)n);
			up->appended(p);
			output_fanout(p);
			output_update_reading(p);
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		/* EOF; for a PTY master EIO means every slave holder is gone. */
		ev_io_stop(EV_A_ w);
		if (is_err) {
			p->err_eof = true;
			close_fd(&p->err_fd);
		} else {
			p->out_eof = true;
			if (!p->pty)
				close_fd(&p->out_fd);
		}
		if (p->out_eof && p->err_eof)
			up->eof(p);
		break;
	}
	up->leave(p);
}

/* ---- subscribers ---------------------------------------------------------- */

static void sub_on_writable(struct rpc_call *call)
{
	struct sub *s = rpc_call_ud(call);
	struct process *p = s->p;

	process_enter(p);
	sub_pump(s);
	up->leave(p);
}

static void sub_on_cancel(struct rpc_call *call, enum rpc_code why)
{
	struct sub *s = rpc_call_ud(call);
	struct process *p = s->p;

	process_enter(p);
	s->call = NULL;
	up->leave(p);
}

static const struct rpc_call_hooks sub_hooks = {
	.on_writable = sub_on_writable,
	.on_cancel = sub_on_cancel,
};

static void ka_cb(EV_P_ ev_timer *w, int revents)
{
	struct sub *s = w->data;
	struct process *p = s->p;
	Process__ProcessEvent ev = PROCESS__PROCESS_EVENT__INIT;
	Process__ProcessEvent__KeepAlive ka = PROCESS__PROCESS_EVENT__KEEP_ALIVE__INIT;

	process_enter(p);
	if (s->call && rpc_call_queued(s->call) < RPC_SEND_HIGH) {
		ev.event_case = PROCESS__PROCESS_EVENT__EVENT_KEEPALIVE;
		ev.keepalive = &ka;
		sub_send(s, &ev);
	}
	up->leave(p);
}

void output_attach(struct process *p, struct rpc_call *call, bool connect, bool replay,
		   uint64_t from, const struct budget *b)
{
	Process__ProcessEvent ev = PROCESS__PROCESS_EVENT__INIT;
	Process__ProcessEvent__StartEvent st = PROCESS__PROCESS_EVENT__START_EVENT__INIT;
	struct sub *s = calloc(1, sizeof(*s));
	double ka;
	int rc;

	if (!s) {
		rpc_fail(call, RPC_INTERNAL, "error subscribing to process %d: %s", (int)p->pid,
			 go_strerror(ENOMEM));
		return;
	}
	process_enter(p);
	s->p = p;
	s->call = call;
	s->connect = connect;
	/* A budgeted stream is offset-aware: it is told of gaps. */
	s->replay = replay || b;
	s->cursor = replay ? (from < ring_end(&p->ring) ? from : ring_end(&p->ring))
			   : ring_end(&p->ring);
	budget_begin(&s->budget, b, s->cursor);
	ka = rpc_call_keepalive_s(call);
	ev_timer_init(&s->ka, ka_cb, ka, ka);
	s->ka.data = s;
	s->next = p->subs;
	p->subs = s;
	rpc_call_set_hooks(call, &sub_hooks, s);

	st.pid = (uint32_t)p->pid;
	ev.event_case = PROCESS__PROCESS_EVENT__EVENT_START;
	ev.start = &st;
	s->pumping = true; /* nothing may overtake the start event */
	rc = sub_send(s, &ev);
	s->pumping = false;
	if (rc == 0 && s->call) {
		ev_timer_again(envd_loop, &s->ka);
		sub_pump(s);
	}
	up->leave(p);
}

unsigned output_streams(const struct process *p)
{
	unsigned n = 0;

	for (const struct sub *s = p->subs; s; s = s->next)
		n += s->call != NULL;
	return n;
}

void output_end_streams(struct process *p, enum rpc_code code, const char *msg)
{
	for (struct sub *s = p->subs; s; s = s->next)
		sub_fail(s, code, "%s", msg);
}

void output_settle(struct process *p)
{
	for (struct sub **pp = &p->subs; *pp;) {
		struct sub *s = *pp;

		if (s->call) {
			pp = &s->next;
			continue;
		}
		*pp = s->next;
		ev_timer_stop(envd_loop, &s->ka);
		free(s);
	}
	output_update_reading(p);
}
