/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "process/process.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pty/pty.h"
#include "base/buf.h"
#include "base/errstr.h"
#include "process/fanout.h"
#include "base/loop.h"
#include "process/ptable.h"
#include "process/ring.h"
#include "process/spawn.h"
#include "base/users.h"
#include "process/waitstatus.h"

size_t process_ring_size = 1024 * 1024;

#define READ_CHUNK (64 * 1024)
#define PIPE_SIZE (1024 * 1024)
/* Reads per wake-up before other watchers get a turn. */
#define READS_PER_WAKE 16

struct sub {
	struct sub *next;
	struct process *p;
	struct rpc_call *call;   /* NULL once the call is over; freed in leave() */
	uint64_t cursor;         /* next offset to send */
	uint64_t stall_mark;     /* cursor when the stall timer was armed */
	bool connect;            /* ConnectResponse rather than StartResponse */
	bool replay;             /* offset-aware: report gaps instead of failing */
	bool pumping;            /* in sub_pump: a nested on_writable is a no-op */
	ev_timer ka;
};

struct process {
	struct ptable_entry ent; /* first member: entry and process convert */
	Process__ProcessConfig *config;
	char *tag;
	pid_t pid;
	bool pty;
	int out_fd;              /* stdout pipe, or the PTY master */
	int err_fd;              /* stderr pipe; -1 for a PTY */
	int in_fd;               /* stdin pipe, or the PTY master (not owned) */
	ev_io out_w, err_w, in_w;
	ev_child child_w;
	ev_timer grace_w, kill_w, retain_w, stall_w;
	struct ring ring;

	struct buf inq;          /* input not yet accepted by the pipe/PTY */
	bool stdin_close_pending;

	bool in_table, reaped, out_eof, err_eof, end_ready, finalized, expired, paused;
	uint64_t end_off;        /* subscribers get data up to here, then end */
	int exit_code;
	bool exited;
	char status[64];

	struct sub *subs;
	int depth;               /* > 0 while a callback is working on p */
};

static struct ptable table;
/* Ring storage held by finished processes, bounded by retain_budget(). */
unsigned process_max_subs = 128;
static size_t retained_bytes;
static uint8_t read_buf[READ_CHUNK];

static inline struct process *of_entry(struct ptable_entry *e)
{
	return (struct process *)e;
}

/* ---- lifetime ---------------------------------------------------------- */

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

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

static void process_free(struct process *p)
{
	stop_io(p);
	ev_child_stop(envd_loop, &p->child_w);
	ev_timer_stop(envd_loop, &p->retain_w);
	if (p->in_table)
		ptable_remove(&table, &p->ent);
	if (p->finalized)
		retained_bytes -= p->ring.cap;
	ring_free(&p->ring);
	buf_free(&p->inq);
	if (p->config)
		process__process_config__free_unpacked(p->config, NULL);
	free(p->tag);
	free(p);
}

static void update_reading(struct process *p);
static void trim_retained(void);
static size_t retain_budget(void);

/*
 * Callbacks bracket their work with enter/leave so that subscribers
 * cancelled in the middle (rpc_send may report a dead peer at once) and
 * the process itself are only freed when nothing uses them any more.
 */
static void enter(struct process *p)
{
	p->depth++;
}

static void leave(struct process *p)
{
	struct sub **pp;

	if (--p->depth > 0)
		return;
	for (pp = &p->subs; *pp;) {
		struct sub *s = *pp;

		if (s->call) {
			pp = &s->next;
			continue;
		}
		*pp = s->next;
		ev_timer_stop(envd_loop, &s->ka);
		free(s);
	}
	update_reading(p);
	if (p->expired && !p->subs) {
		process_free(p);
		return;
	}
	/* The last reader of a finished process is gone: its ring may now
	 * count against the retention budget. */
	if (p->finalized && !p->subs && retained_bytes > retain_budget())
		trim_retained();
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

static void sub_send_end(struct sub *s)
{
	struct process *p = s->p;
	Process__ProcessEvent ev = PROCESS__PROCESS_EVENT__INIT;
	Process__ProcessEvent__EndEvent end = PROCESS__PROCESS_EVENT__END_EVENT__INIT;
	struct rpc_call *call;

	end.exit_code = p->exit_code;
	end.exited = p->exited;
	end.status = p->status;
	if (p->exit_code != 0) {
		end.optional_error_case = PROCESS__PROCESS_EVENT__END_EVENT__OPTIONAL_ERROR_ERROR;
		end.error = p->status;
	}
	ev.event_case = PROCESS__PROCESS_EVENT__EVENT_END;
	ev.end = &end;
	if (sub_send(s, &ev) < 0 || !s->call)
		return;
	call = s->call;
	s->call = NULL;
	rpc_finish(call);
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
		uint64_t limit = p->end_ready ? p->end_off : ring_end(&p->ring);
		Process__ProcessEvent ev = PROCESS__PROCESS_EVENT__INIT;
		Process__ProcessEvent__DataEvent data;
		Process__ProcessEvent__GapEvent gap = PROCESS__PROCESS_EVENT__GAP_EVENT__INIT;
		enum ring_kind kind;
		const uint8_t *chunk;
		size_t want;
		long n;

		switch (fanout_next(&p->ring, p->end_ready, p->end_off, s->cursor, s->replay,
				    rpc_call_queued(s->call) < RPC_SEND_HIGH)) {
		case FANOUT_IDLE:
		case FANOUT_WAIT: /* on_writable or the next read resumes */
			goto out;
		case FANOUT_END:
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
		process__process_event__data_event__init(&data);
		want = limit - s->cursor < READ_CHUNK ? (size_t)(limit - s->cursor) : READ_CHUNK;
		/* Straight from the ring: rpc_send encodes (copies) before returning. */
		n = ring_peek(&p->ring, s->cursor, &kind, &chunk, want);
		if (n <= 0)
			goto out;
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

static void fanout(struct process *p)
{
	enter(p);
	for (struct sub *s = p->subs; s; s = s->next)
		sub_pump(s);
	leave(p);
}

/* ---- reading output ------------------------------------------------------ */

static void arm_reads(struct process *p)
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
static void update_reading(struct process *p)
{
	bool any = false, want = true;

	if (!p->end_ready && !p->finalized) {
		for (struct sub *s = p->subs; s; s = s->next) {
			if (!s->call)
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
		ev_timer_set(&p->stall_w, PROCESS_STALL_S, 0.);
		ev_timer_start(envd_loop, &p->stall_w);
	} else {
		ev_timer_stop(envd_loop, &p->stall_w);
	}
	arm_reads(p);
}

static void stall_cb(EV_P_ ev_timer *w, int revents)
{
	struct process *p = w->data;
	bool moved = false;

	enter(p);
	for (struct sub *s = p->subs; s; s = s->next)
		if (s->call && s->cursor != s->stall_mark)
			moved = true;
	if (moved) {
		for (struct sub *s = p->subs; s; s = s->next)
			s->stall_mark = s->cursor;
		ev_timer_set(&p->stall_w, PROCESS_STALL_S, 0.);
		ev_timer_start(envd_loop, &p->stall_w);
	} else {
		for (struct sub *s = p->subs; s; s = s->next)
			sub_fail(s, RPC_RESOURCE_EXHAUSTED,
				 "stream stopped reading the output of process %d for %.0f s and "
				 "was closed so the process can go on",
				 (int)p->pid, PROCESS_STALL_S);
	}
	leave(p);
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
		if (!q->finalized || !q->ring.cap || q->subs)
			continue;
		retained_bytes -= q->ring.cap;
		ring_clear(&q->ring);
	}
}

static void finalize(struct process *p)
{
	if (p->finalized)
		return;
	p->finalized = true;
	stop_io(p);
	buf_free(&p->inq);
	p->paused = false;
	p->ent.listed = false;
	p->ent.retained = true;
	ev_timer_set(&p->retain_w, PROCESS_RETAIN_S, 0.);
	ev_timer_start(envd_loop, &p->retain_w);
	retained_bytes += p->ring.cap;
	trim_retained();
}

static void make_end(struct process *p)
{
	if (p->end_ready)
		return;
	p->end_ready = true;
	p->end_off = ring_end(&p->ring);
	ev_timer_stop(envd_loop, &p->grace_w);
	fanout(p);
}

static void check_done(struct process *p)
{
	if (!p->reaped || !p->out_eof || !p->err_eof)
		return;
	make_end(p);
	finalize(p);
}

static void read_cb(EV_P_ ev_io *w, int revents)
{
	struct process *p = w->data;
	bool is_err = w == &p->err_w;
	int fd = is_err ? p->err_fd : p->out_fd;
	enum ring_kind kind = p->pty ? RING_PTY : is_err ? RING_STDERR : RING_STDOUT;

	enter(p);
	for (int i = 0; i < READS_PER_WAKE && !p->paused; i++) {
		ssize_t n = read(fd, read_buf, sizeof(read_buf));

		if (n > 0) {
			ring_append(&p->ring, kind, read_buf, (size_t)n);
			fanout(p);
			update_reading(p);
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
		check_done(p);
		break;
	}
	leave(p);
}

static void child_cb(EV_P_ ev_child *w, int revents)
{
	struct process *p = w->data;

	enter(p);
	ev_child_stop(EV_A_ w);
	p->reaped = true;
	waitstatus_describe(w->rstatus, &p->exit_code, &p->exited, p->status, sizeof(p->status));
	if (p->out_eof && p->err_eof) {
		check_done(p);
	} else {
		/* A descendant still holds the output open: wait a little, no more. */
		ev_timer_set(&p->grace_w, PROCESS_GRACE_S, 0.);
		ev_timer_start(EV_A_ & p->grace_w);
	}
	leave(p);
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
	enter(p);
	make_end(p);
	leave(p);
}

static void kill_cb(EV_P_ ev_timer *w, int revents)
{
	struct process *p = w->data;

	char err[128];

	if (!p->finalized)
		process_signal(p, SIGKILL, err, sizeof(err));
}

static void retain_cb(EV_P_ ev_timer *w, int revents)
{
	struct process *p = w->data;

	enter(p);
	p->ent.retained = false;
	p->expired = true;
	leave(p);
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
		enter(q);
		ev_timer_stop(envd_loop, &q->retain_w);
		e->retained = false;
		q->expired = true;
		leave(q);
	}
}

/* ---- input --------------------------------------------------------------- */

static void in_cb(EV_P_ ev_io *w, int revents)
{
	struct process *p = w->data;
	size_t off = 0;

	while (off < p->inq.len) {
		ssize_t n = write(p->in_fd, p->inq.p + off, p->inq.len - off);

		if (n > 0) {
			off += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		/* Reader gone: nothing queued can be delivered any more. */
		off = p->inq.len;
		break;
	}
	buf_consume(&p->inq, off);
	if (p->inq.len)
		return;
	ev_io_stop(EV_A_ w);
	if (p->stdin_close_pending) {
		p->stdin_close_pending = false;
		close_fd(&p->in_fd);
	}
}

enum rpc_code process_write_input(struct process *p, bool to_pty, const uint8_t *data, size_t n,
				  char *err, size_t errlen)
{
	size_t done = 0;

	if (to_pty && !p->pty) {
		snprintf(err, errlen, "error writing to tty: tty not assigned to process — input "
				      "should be written to the stdin, not the tty");
		return RPC_INTERNAL;
	}
	if (!to_pty && p->pty) {
		snprintf(err, errlen, "error writing to stdin: tty assigned to process — input "
				      "should be written to the pty, not the stdin");
		return RPC_INTERNAL;
	}
	if (p->in_fd < 0 || p->stdin_close_pending) {
		if (to_pty)
			snprintf(err, errlen, "error writing to tty: error writing to tty of process "
					      "'%d': %s", (int)p->pid, go_strerror(EIO));
		else
			snprintf(err, errlen, "error writing to stdin: stdin not enabled or closed");
		return RPC_INTERNAL;
	}
	if (n == 0)
		return RPC_OK;
	while (p->inq.len == 0 && done < n) {
		ssize_t w = write(p->in_fd, data + done, n - done);

		if (w > 0) {
			done += (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (to_pty)
			snprintf(err, errlen, "error writing to tty: error writing to tty of process "
					      "'%d': write /dev/ptmx: %s", (int)p->pid,
				 go_strerror(errno));
		else
			snprintf(err, errlen, "error writing to stdin: error writing to stdin of "
					      "process '%d': write |1: %s", (int)p->pid,
				 go_strerror(errno));
		return RPC_INTERNAL;
	}
	if (done == n)
		return RPC_OK;
	/* The pipe is full: keep the rest, bounded, and write it when it drains. */
	if (p->inq.len + (n - done) > PROCESS_STDIN_MAX) {
		snprintf(err, errlen, "error writing to %s: process %d is not reading its input; "
				      "%u bytes are already waiting", to_pty ? "tty" : "stdin",
			 (int)p->pid, (unsigned)p->inq.len);
		return RPC_RESOURCE_EXHAUSTED;
	}
	if (buf_append(&p->inq, data + done, n - done) < 0) {
		snprintf(err, errlen, "error writing to %s: %s", to_pty ? "tty" : "stdin",
			 go_strerror(ENOMEM));
		return RPC_INTERNAL;
	}
	ev_io_set(&p->in_w, p->in_fd, EV_WRITE);
	ev_io_start(envd_loop, &p->in_w);
	return RPC_OK;
}

enum rpc_code process_close_stdin(struct process *p, char *err, size_t errlen)
{
	if (p->pty) {
		snprintf(err, errlen, "error closing stdin: cannot close stdin for PTY process — "
				      "send Ctrl+D (0x04) instead");
		return RPC_UNKNOWN;
	}
	if (p->in_fd < 0)
		return RPC_OK;
	if (p->inq.len) {
		p->stdin_close_pending = true;
		return RPC_OK;
	}
	ev_io_stop(envd_loop, &p->in_w);
	close_fd(&p->in_fd);
	return RPC_OK;
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
		char path[64], buf[512], *rp;
		long pid, f[4];
		ssize_t n;
		int fd;

		pid = strtol(de->d_name, &rp, 10);
		if (*rp || pid <= 0 || pid == sid)
			continue;
		snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n <= 0)
			continue;
		buf[n] = '\0';
		/* "pid (comm) state ppid pgrp session ...": comm may hold spaces. */
		rp = strrchr(buf, ')');
		if (!rp || sscanf(rp + 1, " %*c %ld %ld %ld %ld", &f[0], &f[1], &f[2], &f[3]) != 4)
			continue;
		if (f[2] == sid && kill((pid_t)pid, sig) == 0)
			hit++;
	}
	closedir(d);
	return hit;
}

enum rpc_code process_signal(struct process *p, int sig, char *err, size_t errlen)
{
	int rc;

	/* The whole group: descendants of the command die with it. */
	rc = kill(-p->pid, sig);
	if (p->pty && signal_session(p->pid, sig) > 0)
		rc = 0;
	if (rc == 0)
		return RPC_OK;
	if (!p->reaped && kill(p->pid, sig) == 0)
		return RPC_OK;
	if (errno == ESRCH)
		snprintf(err, errlen, "error sending signal: os: process already finished");
	else
		snprintf(err, errlen, "error sending signal: %s", go_strerror(errno));
	return RPC_INTERNAL;
}

/* ---- subscribers ---------------------------------------------------------- */

static void sub_on_writable(struct rpc_call *call)
{
	struct sub *s = rpc_call_ud(call);
	struct process *p = s->p;

	enter(p);
	sub_pump(s);
	leave(p);
}

static void sub_on_cancel(struct rpc_call *call, enum rpc_code why)
{
	struct sub *s = rpc_call_ud(call);
	struct process *p = s->p;

	enter(p);
	s->call = NULL;
	leave(p);
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

	enter(p);
	if (s->call && rpc_call_queued(s->call) < RPC_SEND_HIGH) {
		ev.event_case = PROCESS__PROCESS_EVENT__EVENT_KEEPALIVE;
		ev.keepalive = &ka;
		sub_send(s, &ev);
	}
	leave(p);
}

static void sub_attach(struct process *p, struct rpc_call *call, bool connect, bool replay,
		       uint64_t from)
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
	enter(p);
	s->p = p;
	s->call = call;
	s->connect = connect;
	s->replay = replay;
	s->cursor = replay ? (from < ring_end(&p->ring) ? from : ring_end(&p->ring))
			   : ring_end(&p->ring);
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
	leave(p);
}

void process_subscribe(struct process *p, struct rpc_call *call, bool replay, uint64_t from)
{
	size_t n = 0;

	for (struct sub *s = p->subs; s; s = s->next)
		n += s->call != NULL;
	if (n >= process_max_subs) {
		rpc_fail(call, RPC_RESOURCE_EXHAUSTED,
			 "process %d already has %u attached streams", (int)p->pid,
			 process_max_subs);
		return;
	}
	sub_attach(p, call, true, replay, from);
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

static void init_once(void)
{
	static bool done;
	struct sigaction sa;

	if (done)
		return;
	done = true;
	/* A child that closes its stdin must not take envd down with SIGPIPE. */
	if (sigaction(SIGPIPE, NULL, &sa) == 0 && sa.sa_handler == SIG_DFL)
		signal(SIGPIPE, SIG_IGN);
}

enum rpc_code process_start(const struct process_spec *s, struct rpc_call *call, char *err,
			    size_t errlen)
{
	const Process__ProcessConfig *c = s->config;
	int child_fd[3] = { -1, -1, -1 };
	int pipes[3][2] = { { -1, -1 }, { -1, -1 }, { -1, -1 } };
	enum rpc_code code = RPC_INTERNAL;
	struct spawn_req rq = { 0 };
	char cl[1024], serr[512];
	struct process *p;
	char **argv = NULL;
	pid_t pid;

	init_once();
	p = calloc(1, sizeof(*p));
	if (!p) {
		snprintf(err, errlen, "error starting process: %s", go_strerror(ENOMEM));
		return RPC_INTERNAL;
	}
	p->out_fd = p->err_fd = p->in_fd = -1;
	ring_init(&p->ring, process_ring_size);
	buf_init(&p->inq, PROCESS_STDIN_MAX);
	p->pty = s->pty;
	p->config = config_copy(c);
	p->tag = s->tag ? strdup(s->tag) : NULL;
	argv = calloc(c->n_args + 2, sizeof(char *));
	if (!p->config || (s->tag && !p->tag) || !argv) {
		snprintf(err, errlen, "error starting process: %s", go_strerror(ENOMEM));
		goto fail;
	}
	cmdline(c, cl, sizeof(cl));

	if (s->pty) {
		int m, sl, rc = pty_open(&m, &sl, s->cols, s->rows);

		if (rc < 0) {
			snprintf(err, errlen, "error starting pty with command '%s' in dir '%s' with "
					      "'%u' cols and '%u' rows: open /dev/ptmx: %s",
				 cl, s->cwd, s->cols, s->rows, go_strerror(-rc));
			code = RPC_INVALID_ARGUMENT;
			goto fail;
		}
		p->out_fd = p->in_fd = m;
		p->err_eof = true;
		child_fd[0] = child_fd[1] = child_fd[2] = sl;
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
			child_fd[0] = pipes[0][0];
			p->in_fd = pipes[0][1];
			pipes[0][1] = -1;
		} else {
			child_fd[0] = pipes[0][0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
			if (child_fd[0] < 0) {
				snprintf(err, errlen, "error opening /dev/null for command '%s': %s",
					 c->cmd, go_strerror(errno));
				goto fail;
			}
		}
		child_fd[1] = pipes[1][1];
		child_fd[2] = pipes[2][1];
		p->out_fd = pipes[1][0];
		p->err_fd = pipes[2][0];
		pipes[1][0] = pipes[2][0] = -1;
	}

	argv[0] = c->cmd;
	for (size_t i = 0; i < c->n_args; i++)
		argv[i + 1] = c->args[i];
	rq.file = c->cmd;
	rq.argv = argv;
	rq.argc = c->n_args + 1;
	rq.envp = s->envp;
	rq.cwd = s->cwd;
	rq.set_ids = s->set_ids;
	rq.uid = s->user->uid;
	rq.gid = s->user->gid;
	rq.groups = s->user->groups;
	rq.n_groups = s->user->n_groups;
	rq.fd_in = child_fd[0];
	rq.fd_out = child_fd[1];
	rq.fd_err = child_fd[2];
	rq.pty = s->pty;
	pid = spawn_start(&rq, serr, sizeof(serr));
	if (s->pty) {
		close(child_fd[0]);
	} else {
		for (int i = 0; i < 3; i++) {
			close_fd(&pipes[i][0]);
			close_fd(&pipes[i][1]);
		}
	}
	if (pid < 0) {
		if (s->pty)
			snprintf(err, errlen, "error starting pty with command '%s' in dir '%s' with "
					      "'%u' cols and '%u' rows: %s",
				 cl, s->cwd, s->cols, s->rows, serr);
		else
			snprintf(err, errlen, "error starting process '%s': %s", cl, serr);
		code = RPC_INVALID_ARGUMENT;
		goto fail_spawned;
	}
	free(argv);

	p->pid = pid;
	p->ent.pid = (uint32_t)pid;
	p->ent.tag = p->tag;
	evict_retained(pid, p->tag);
	p->ent.listed = true;
	ptable_add(&table, &p->ent);
	p->in_table = true;

	ev_child_init(&p->child_w, child_cb, pid, 0);
	p->child_w.data = p;
	ev_child_start(envd_loop, &p->child_w);
	ev_io_init(&p->out_w, read_cb, p->out_fd, EV_READ);
	p->out_w.data = p;
	ev_io_init(&p->err_w, read_cb, p->err_fd < 0 ? 0 : p->err_fd, EV_READ);
	p->err_w.data = p;
	ev_io_init(&p->in_w, in_cb, p->in_fd < 0 ? 0 : p->in_fd, EV_WRITE);
	p->in_w.data = p;
	ev_timer_init(&p->grace_w, grace_cb, PROCESS_GRACE_S, 0.);
	p->grace_w.data = p;
	ev_timer_init(&p->kill_w, kill_cb, (double)s->timeout_ms / 1000.0, 0.);
	p->kill_w.data = p;
	ev_timer_init(&p->retain_w, retain_cb, PROCESS_RETAIN_S, 0.);
	p->retain_w.data = p;
	ev_timer_init(&p->stall_w, stall_cb, PROCESS_STALL_S, 0.);
	p->stall_w.data = p;
	if (s->timeout_ms > 0)
		ev_timer_start(envd_loop, &p->kill_w);
	arm_reads(p);

	if (call)
		sub_attach(p, call, false, false, 0);
	return RPC_OK;

fail:
	for (int i = 0; i < 3; i++) {
		close_fd(&pipes[i][0]);
		close_fd(&pipes[i][1]);
	}
	if (s->pty && child_fd[0] >= 0)
		close(child_fd[0]);
fail_spawned:
	free(argv);
	process_free(p);
	return code;
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
