/* SPDX-License-Identifier: Apache-2.0 */
/*
 * stdin.c - input to a process (process_write_input in process.h has the
 * contract): bytes the pipe or PTY does not take at once wait in order,
 * with back-pressure on the calls that sent them. What the table must
 * know goes up through the hooks process.c installs (stdin_init).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "process/stdin.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/errstr.h"
#include "base/loop.h"

struct inpause {
	struct inpause *next;
	struct rpc_call *call;
};

static const struct stdin_hooks *up;

void stdin_init(const struct stdin_hooks *hooks)
{
	up = hooks;
}

/* ---- input --------------------------------------------------------------- */

static const Process__SendInputResponse si_resp = PROCESS__SEND_INPUT_RESPONSE__INIT;

static void in_write_error(struct process *p, int e, char *err, size_t errlen)
{
	if (p->pty)
		snprintf(err, errlen, "error writing to tty: error writing to tty of process "
				      "'%d': write /dev/ptmx: %s", (int)p->pid, go_strerror(e));
	else
		snprintf(err, errlen, "error writing to stdin: error writing to stdin of "
				      "process '%d': write |1: %s", (int)p->pid, go_strerror(e));
}

/* Below half the bound again: let paused StreamInput calls go on. */
static void in_resume_streams(struct process *p, bool all)
{
	if (!all && p->inq_len > STDIN_QUEUE_MAX / 2)
		return;
	while (p->in_paused) {
		struct inpause *ip = p->in_paused;

		p->in_paused = ip->next;
		rpc_call_pause_input(ip->call, false);
		free(ip);
	}
}

static void chunk_free(struct process *p, struct inchunk *c)
{
	if (c->owned)
		p->inq_len -= c->len;
	free(c);
}

/*
 * Drop all pending input; unary SendInput calls waiting on it get the
 * error a write would have given (`err`, e.g. EPIPE once the reader is
 * gone).
 */
void stdin_drop(struct process *p, int e)
{
	char msg[256];

	while (p->inq_head) {
		struct inchunk *c = p->inq_head;

		p->inq_head = c->next;
		if (c->call) {
			struct rpc_call *call = c->call;

			c->call = NULL;
			rpc_call_set_hooks(call, NULL, NULL);
			in_write_error(p, e, msg, sizeof(msg));
			rpc_fail(call, RPC_INTERNAL, "%s", msg);
		}
		chunk_free(p, c);
	}
	p->inq_tail = NULL;
	ev_io_stop(envd_loop, &p->in_w);
	in_resume_streams(p, true);
}

/* Write pending chunks in order until the pipe is full. */
void stdin_flush(struct process *p)
{
	while (p->inq_head) {
		struct inchunk *c = p->inq_head;

		while (c->off < c->len) {
			ssize_t n = write(p->in_fd, c->data + c->off, c->len - c->off);

			if (n > 0) {
				c->off += (size_t)n;
				p->in_written += (uint64_t)n;
				continue;
			}
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
				goto full;
			/* Reader gone: nothing queued can be delivered any more. */
			stdin_drop(p, n < 0 ? errno : EPIPE);
			goto done;
		}
		p->inq_head = c->next;
		if (!p->inq_head)
			p->inq_tail = NULL;
		if (c->call) {
			struct rpc_call *call = c->call;

			c->call = NULL;
			rpc_call_set_hooks(call, NULL, NULL);
			rpc_reply(call, &si_resp.base);
		}
		chunk_free(p, c);
	}
done:
	up->wrote(p);
	ev_io_stop(envd_loop, &p->in_w);
	in_resume_streams(p, true);
	if (p->stdin_close_pending) {
		p->stdin_close_pending = false;
		close_fd(&p->in_fd);
		up->closed(p);
	}
	return;
full:
	up->wrote(p);
	in_resume_streams(p, false);
	ev_io_set(&p->in_w, p->in_fd, EV_WRITE);
	ev_io_start(envd_loop, &p->in_w);
}

void stdin_cb(EV_P_ ev_io *w, int revents)
{
	struct process *p = w->data;

	process_enter(p);
	stdin_flush(p);
	up->leave(p);
}

/* The client of a waiting SendInput left: the rest of its bytes go too.
 * They were counted as taken; when nothing was queued behind them, the
 * count goes back, so a retry with the offset writes them. (With a write
 * queued behind, the offsets of that one stand: they assume one writer.) */
static void si_cancel(struct rpc_call *call, enum rpc_code why)
{
	struct inchunk *c = rpc_call_ud(call);

	if (c->p && c->p->inq_tail == c)
		c->p->in_taken -= c->len - c->off;
	c->call = NULL;
	c->data = NULL;
	c->len = c->off;
}

static const struct rpc_call_hooks si_wait_hooks = {
	.on_cancel = si_cancel,
};

void stdin_append(struct process *p, struct inchunk *c)
{
	if (p->inq_tail)
		p->inq_tail->next = c;
	else
		p->inq_head = c;
	p->inq_tail = c;
	if (c->owned)
		p->inq_len += c->len;
}

enum rpc_code stdin_write(struct process *p, struct rpc_call *call, bool stream, bool to_pty,
			  const uint8_t *data, size_t n, bool has_off, uint64_t off, uint64_t *taken,
			  bool *later, char *err, size_t errlen)
{
	size_t done = 0, rest;
	struct inchunk *c;

	*later = false;
	*taken = p->in_taken;
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
	/* A write at an offset: what the process has taken already is not
	 * written again (a retry whose answer was lost), a gap is refused. */
	if (has_off) {
		if (off > p->in_taken) {
			snprintf(err, errlen, "input offset %llu is past the %llu bytes process %d has "
					      "taken: bytes %llu to %llu are missing (send them first)",
				 (unsigned long long)off, (unsigned long long)p->in_taken, (int)p->pid,
				 (unsigned long long)p->in_taken, (unsigned long long)off);
			return RPC_OUT_OF_RANGE;
		}
		if (p->in_taken - off >= n)
			return RPC_OK;
		data += p->in_taken - off;
		n -= (size_t)(p->in_taken - off);
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
	while (!p->inq_head && done < n) {
		ssize_t w = write(p->in_fd, data + done, n - done);

		if (w > 0) {
			done += (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		in_write_error(p, errno, err, errlen);
		p->in_taken += done;
		p->in_written += done;
		*taken = p->in_taken;
		if (done)
			up->wrote(p);
		return RPC_INTERNAL;
	}
	p->in_written += done;
	if (done)
		up->wrote(p);
	if (done == n) {
		p->in_taken += n;
		*taken = p->in_taken;
		return RPC_OK;
	}
	rest = n - done;
	/*
	 * The pipe is full. A unary call too big for the bound keeps its own
	 * bytes and is answered once they are all written; anything else is
	 * copied. A stream over the bound is paused until the pipe drains.
	 */
	if (call && !stream && p->inq_len + rest > STDIN_QUEUE_MAX) {
		c = calloc(1, sizeof(*c));
		if (!c)
			goto nomem;
		c->data = data + done;
		c->call = call;
		rpc_call_set_hooks(call, &si_wait_hooks, c);
		*later = true;
	} else {
		c = calloc(1, sizeof(*c) + rest);
		if (!c)
			goto nomem;
		memcpy(c + 1, data + done, rest);
		c->data = (const uint8_t *)(c + 1);
		c->owned = true;
	}
	c->p = p;
	c->len = rest;
	stdin_append(p, c);
	p->in_taken += n;
	*taken = p->in_taken;
	ev_io_set(&p->in_w, p->in_fd, EV_WRITE);
	ev_io_start(envd_loop, &p->in_w);
	if (call && stream && p->inq_len > STDIN_QUEUE_MAX) {
		struct inpause *ip;

		for (ip = p->in_paused; ip && ip->call != call; ip = ip->next)
			;
		if (!ip && (ip = calloc(1, sizeof(*ip)))) {
			ip->call = call;
			ip->next = p->in_paused;
			p->in_paused = ip;
			rpc_call_pause_input(call, true);
		}
	}
	return RPC_OK;
nomem:
	p->in_taken += done;
	*taken = p->in_taken;
	snprintf(err, errlen, "error writing to %s: %s", to_pty ? "tty" : "stdin",
		 go_strerror(ENOMEM));
	return RPC_INTERNAL;
}

void stdin_forget(struct process *p, struct rpc_call *call)
{
	for (struct inpause **pp = &p->in_paused; *pp; pp = &(*pp)->next) {
		if ((*pp)->call == call) {
			struct inpause *ip = *pp;

			*pp = ip->next;
			free(ip);
			return;
		}
	}
}

enum rpc_code stdin_close(struct process *p, char *err, size_t errlen)
{
	if (p->pty) {
		snprintf(err, errlen, "error closing stdin: cannot close stdin for PTY process — "
				      "send Ctrl+D (0x04) instead");
		return RPC_UNKNOWN;
	}
	if (p->in_fd < 0)
		return RPC_OK;
	if (p->inq_head) {
		p->stdin_close_pending = true;
		return RPC_OK;
	}
	ev_io_stop(envd_loop, &p->in_w);
	close_fd(&p->in_fd);
	up->closed(p);
	return RPC_OK;
}
