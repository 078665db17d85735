/* SPDX-License-Identifier: Apache-2.0 */
/*
 * waitfor.c - process.Process/WaitFor (waitfor.h): one waiter per call,
 * woken by what tells of its condition: the port scanner, a process's
 * output and end, inotify, or its own HTTP attempts.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "process/waitfor.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <http_parser.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/errstr.h"
#include "base/log.h"
#include "base/loop.h"
#include "base/users.h"
#include "base/worker.h"
#include "process/process.h"
#include "process/ring.h"
#include "process/waitcond.h"
#include "rpc/caller.h"
#include "search/pattern.h"

struct path_job;

struct waiter {
	struct waiter *next, *prev;     /* every waiter */
	struct waiter *port_next;       /* waiting for a scan (port, http) */
	bool on_ports;
	struct rpc_call *call;
	struct waitcond c;
	char what[640];                 /* the condition in words */
	char seen[640];                 /* what it saw last */
	uint64_t t0_us;
	ev_timer deadline_w;

	/* a scan in progress: a listener that meets it, or one that does not */
	bool scan_hit;
	char hit_addr[64];
	char other_addr[64];

	/* http */
	int fd;
	ev_io io_w;
	ev_timer retry_w, attempt_w;
	http_parser hp;
	char req[WAITCOND_HTTP_PATH_MAX + 128];
	size_t req_len, req_off;
	bool got_status;
	unsigned backoff_ms;

	/* output, exit */
	struct process *p;
	struct process_watch watch;
	uint32_t pid;
	uint64_t cursor;
	struct waitcond_lines lines[3]; /* stdout, stderr, pty */
	struct pattern *pat;
	struct pattern_matcher *m;
	bool matched;
	char *line;                     /* the matching line */
	size_t line_len;
	uint64_t line_off;

	/* path */
	char *path;                     /* resolved */
	int wd;                         /* the watch it waits on, or -1 */
	struct path_job *job;           /* a look at the path under way */
	bool recheck;                   /* something happened meanwhile */
};

static struct waiter *waiters;
static size_t n_waiters;
static struct waiter *port_waiters;
static uint16_t port_refs[65536];   /* waiters per port (bss: pages touched on use) */
static void (*port_kick)(void);

size_t waitfor_count(void)
{
	return n_waiters;
}

void waitfor_port_source(void (*kick)(void))
{
	port_kick = kick;
}

bool waitfor_wants_ports(void)
{
	return port_waiters != NULL;
}

static uint64_t mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* ---- the life of a waiter --------------------------------------------- */

static void ports_leave(struct waiter *w);
static void http_close(struct waiter *w);
static void path_leave(struct waiter *w);

static void waiter_free(struct waiter *w)
{
	ev_timer_stop(envd_loop, &w->deadline_w);
	ports_leave(w);
	http_close(w);
	ev_timer_stop(envd_loop, &w->retry_w);
	if (w->p)
		process_unwatch(w->p, &w->watch);
	for (int i = 0; i < 3; i++)
		waitcond_lines_free(&w->lines[i]);
	pattern_matcher_free(w->m);
	pattern_free(w->pat);
	free(w->line);
	path_leave(w);
	if (w->prev)
		w->prev->next = w->next;
	else
		waiters = w->next;
	if (w->next)
		w->next->prev = w->prev;
	n_waiters--;
	free(w);
}

static void waiter_cancel(struct rpc_call *call, enum rpc_code why)
{
	struct waiter *w = rpc_call_ud(call);

	/* The client's own deadline: it hears what was seen, not "context
	 * deadline exceeded". */
	if (why == RPC_DEADLINE_EXCEEDED)
		rpc_call_set_deadline_message(call, "%s: not met within %.3f s; last seen: %s", w->what,
					      (double)(mono_us() - w->t0_us) / 1e6, w->seen);
	w->call = NULL;
	waiter_free(w);
}

static const struct rpc_call_hooks waiter_hooks = { .on_cancel = waiter_cancel };

/* Met: answer with what resp says (detail and waited_ms filled here). */
static void waiter_done(struct waiter *w, Process__WaitForResponse *resp, const char *detail)
{
	struct rpc_call *call = w->call;

	resp->detail = (char *)detail;
	resp->waited_ms = (mono_us() - w->t0_us) / 1000;
	w->call = NULL;
	if (call) {
		rpc_call_set_hooks(call, NULL, NULL);
		rpc_reply(call, &resp->base);
	}
	waiter_free(w);
}

static void waiter_fail(struct waiter *w, enum rpc_code code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void waiter_fail(struct waiter *w, enum rpc_code code, const char *fmt, ...)
{
	struct rpc_call *call = w->call;
	va_list ap;

	w->call = NULL;
	if (call) {
		rpc_call_set_hooks(call, NULL, NULL);
		va_start(ap, fmt);
		rpc_failv(call, code, fmt, ap);
		va_end(ap);
	}
	waiter_free(w);
}

static void deadline_cb(EV_P_ ev_timer *t, int revents)
{
	struct waiter *w = t->data;

	waiter_fail(w, RPC_DEADLINE_EXCEEDED, "%s: not met within %.3f s; last seen: %s", w->what,
		    (double)(mono_us() - w->t0_us) / 1e6, w->seen);
}

/* ---- ports -------------------------------------------------------------- */

static void ports_join(struct waiter *w)
{
	if (w->on_ports)
		return;
	w->on_ports = true;
	w->port_next = port_waiters;
	port_waiters = w;
	port_refs[w->c.port]++;
	if (port_kick)
		port_kick();
}

static void ports_leave(struct waiter *w)
{
	if (!w->on_ports)
		return;
	for (struct waiter **pp = &port_waiters; *pp; pp = &(*pp)->port_next) {
		if (*pp == w) {
			*pp = w->port_next;
			break;
		}
	}
	w->on_ports = false;
	w->port_next = NULL;
	port_refs[w->c.port]--;
}

void waitfor_ports_begin(void)
{
	for (struct waiter *w = port_waiters; w; w = w->port_next) {
		w->scan_hit = false;
		w->other_addr[0] = '\0';
	}
}

static void addr_words(int family, const uint8_t addr[16], uint16_t port, char *buf, size_t len)
{
	char a[INET6_ADDRSTRLEN];

	inet_ntop(family, addr, a, sizeof(a));
	snprintf(buf, len, family == AF_INET6 ? "[%s]:%u" : "%s:%u", a, port);
}

void waitfor_port_seen(int family, const uint8_t addr[16], uint16_t port)
{
	if (!port_refs[port])
		return;
	for (struct waiter *w = port_waiters; w; w = w->port_next) {
		if (w->c.port != port || w->scan_hit)
			continue;
		if (waitcond_port_ok(&w->c, family, addr, port)) {
			w->scan_hit = true;
			addr_words(family, addr, port, w->hit_addr, sizeof(w->hit_addr));
		} else if (!w->other_addr[0]) {
			addr_words(family, addr, port, w->other_addr, sizeof(w->other_addr));
		}
	}
}

static void http_attempt(struct waiter *w);

void waitfor_ports_end(void)
{
	struct waiter *met = NULL;

	for (struct waiter **pp = &port_waiters; *pp;) {
		struct waiter *w = *pp;

		if (!w->scan_hit) {
			if (w->other_addr[0])
				snprintf(w->seen, sizeof(w->seen), "port %u listens on %s only", w->c.port,
					 w->other_addr);
			else
				snprintf(w->seen, sizeof(w->seen), "nothing listens on port %u", w->c.port);
			pp = &w->port_next;
			continue;
		}
		/* Off the list first: answering frees it. */
		*pp = w->port_next;
		w->on_ports = false;
		port_refs[w->c.port]--;
		w->port_next = met;
		met = w;
	}
	while (met) {
		struct waiter *w = met;

		met = w->port_next;
		w->port_next = NULL;
		if (w->c.kind == WAITCOND_HTTP) {
			http_attempt(w);
		} else {
			Process__WaitForResponse r = PROCESS__WAIT_FOR_RESPONSE__INIT;
			char d[128];

			snprintf(d, sizeof(d), "listening on %s", w->hit_addr);
			r.address = w->hit_addr;
			waiter_done(w, &r, d);
		}
	}
}

/* ---- http --------------------------------------------------------------- */

static void http_close(struct waiter *w)
{
	ev_io_stop(envd_loop, &w->io_w);
	ev_timer_stop(envd_loop, &w->attempt_w);
	if (w->fd >= 0)
		close(w->fd);
	w->fd = -1;
}

/* Not ready: try again after the back-off (refused: wait for the port). */
static void http_again(struct waiter *w, bool refused)
{
	http_close(w);
	if (refused) {
		ports_join(w);
		return;
	}
	w->backoff_ms = w->backoff_ms ? w->backoff_ms * 2 : WAITFOR_HTTP_RETRY_MIN_MS;
	if (w->backoff_ms > WAITFOR_HTTP_RETRY_MAX_MS)
		w->backoff_ms = WAITFOR_HTTP_RETRY_MAX_MS;
	ev_timer_set(&w->retry_w, w->backoff_ms / 1000.0, 0.);
	ev_timer_start(envd_loop, &w->retry_w);
}

static int hp_headers_complete(http_parser *hp)
{
	struct waiter *w = hp->data;

	w->got_status = true;
	return 1; /* no body wanted */
}

static const http_parser_settings hp_settings = { .on_headers_complete = hp_headers_complete };

static void http_answer(struct waiter *w)
{
	unsigned st = w->hp.status_code;
	char url[WAITCOND_HTTP_PATH_MAX + 64];

	snprintf(url, sizeof(url), "http://127.0.0.1:%u%s", w->c.port, w->c.path);
	if (waitcond_status_ok(&w->c, st)) {
		Process__WaitForResponse r = PROCESS__WAIT_FOR_RESPONSE__INIT;
		char d[64];

		snprintf(d, sizeof(d), "HTTP %u", st);
		r.address = url;
		r.http_status = st;
		waiter_done(w, &r, d);
		return;
	}
	snprintf(w->seen, sizeof(w->seen), "GET %.512s answered HTTP %u", url, st);
	http_again(w, false);
}

static void http_io_cb(EV_P_ ev_io *io, int revents)
{
	struct waiter *w = io->data;
	char buf[4096];

	if (w->req_off < w->req_len) {
		int e = 0;
		socklen_t el = sizeof(e);

		if (w->req_off == 0 && (getsockopt(w->fd, SOL_SOCKET, SO_ERROR, &e, &el) < 0 || e)) {
			snprintf(w->seen, sizeof(w->seen), "connect to 127.0.0.1:%u: %s", w->c.port,
				 go_strerror(e ? e : errno));
			http_again(w, e == ECONNREFUSED);
			return;
		}
		ssize_t n = send(w->fd, w->req + w->req_off, w->req_len - w->req_off, MSG_NOSIGNAL);

		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n < 0) {
			snprintf(w->seen, sizeof(w->seen), "GET http://127.0.0.1:%u%.512s: %s", w->c.port,
				 w->c.path, go_strerror(errno));
			http_again(w, errno == ECONNREFUSED);
			return;
		}
		w->req_off += (size_t)n;
		if (w->req_off == w->req_len) {
			ev_io_stop(EV_A_ io);
			ev_io_set(io, w->fd, EV_READ);
			ev_io_start(EV_A_ io);
		}
		return;
	}
	for (;;) {
		ssize_t n = recv(w->fd, buf, sizeof(buf), 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0) {
			snprintf(w->seen, sizeof(w->seen), "GET http://127.0.0.1:%u%.512s: %s", w->c.port,
				 w->c.path, n < 0 ? go_strerror(errno) : "the connection closed before an answer");
			http_again(w, n < 0 && errno == ECONNREFUSED);
			return;
		}
		http_parser_execute(&w->hp, &hp_settings, buf, (size_t)n);
		if (w->got_status) {
			http_answer(w);
			return;
		}
		if (HTTP_PARSER_ERRNO(&w->hp) != HPE_OK) {
			snprintf(w->seen, sizeof(w->seen), "GET http://127.0.0.1:%u%.512s: not an HTTP answer (%s)",
				 w->c.port, w->c.path, http_errno_description(HTTP_PARSER_ERRNO(&w->hp)));
			http_again(w, false);
			return;
		}
	}
}

static void http_attempt_cb(EV_P_ ev_timer *t, int revents)
{
	struct waiter *w = t->data;

	snprintf(w->seen, sizeof(w->seen), "GET http://127.0.0.1:%u%.512s: no answer within %g s", w->c.port,
		 w->c.path, WAITFOR_HTTP_ATTEMPT_S);
	http_again(w, false);
}

static void http_retry_cb(EV_P_ ev_timer *t, int revents)
{
	http_attempt(t->data);
}

/* One GET on a non-blocking socket (loopback: the connect is at once). */
static void http_attempt(struct waiter *w)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(w->c.port) };

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	w->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (w->fd < 0) {
		snprintf(w->seen, sizeof(w->seen), "socket: %s", go_strerror(errno));
		http_again(w, false);
		return;
	}
	if (connect(w->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 && errno != EINPROGRESS) {
		int e = errno;

		snprintf(w->seen, sizeof(w->seen), "connect to 127.0.0.1:%u: %s", w->c.port, go_strerror(e));
		http_again(w, e == ECONNREFUSED);
		return;
	}
	w->req_len = (size_t)snprintf(w->req, sizeof(w->req),
				      "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%u\r\nUser-Agent: envd-waitfor\r\n"
				      "Accept: */*\r\nConnection: close\r\n\r\n",
				      w->c.path, w->c.port);
	w->req_off = 0;
	w->got_status = false;
	http_parser_init(&w->hp, HTTP_RESPONSE);
	w->hp.data = w;
	ev_io_init(&w->io_w, http_io_cb, w->fd, EV_WRITE);
	w->io_w.data = w;
	ev_io_start(envd_loop, &w->io_w);
	ev_timer_init(&w->attempt_w, http_attempt_cb, WAITFOR_HTTP_ATTEMPT_S, 0.);
	w->attempt_w.data = w;
	ev_timer_start(envd_loop, &w->attempt_w);
}

/* ---- output and exit ------------------------------------------------------ */

static bool line_cb(void *ud, const char *line, size_t len, uint64_t off, bool cut)
{
	struct waiter *w = ud;
	struct pattern_hit hit;
	int rc = pattern_line(w->m, line, len, false, cut, &hit);

	if (rc == 1) {
		w->line = malloc(len + 1);
		if (w->line) {
			memcpy(w->line, line, len);
			w->line[len] = '\0';
			w->line_len = len;
		}
		w->line_off = off;
		w->matched = true;
		return true;
	}
	snprintf(w->seen, sizeof(w->seen), "%s line at offset %llu: '%.*s'%s",
		 rc == -E2BIG ? "too costly to match:" : "last", (unsigned long long)off,
		 (int)(len < 160 ? len : 160), line, len > 160 ? "..." : "");
	return false;
}

/* Match what the ring holds past the cursor. */
static void output_scan(struct waiter *w, struct process *p)
{
	const struct ring *r = process_ring(p);

	while (!w->matched && w->cursor < ring_end(r)) {
		enum ring_kind kind;
		const uint8_t *d;
		long n = ring_peek(r, w->cursor, &kind, &d, (size_t)(ring_end(r) - w->cursor));

		if (n == -ERANGE) {
			w->cursor = ring_start(r);
			continue;
		}
		if (n <= 0)
			break;
		if (!w->c.stream || (int)kind == w->c.stream || (w->c.stream == 1 && kind == RING_PTY)) {
			if (waitcond_lines_feed(&w->lines[kind - 1], d, (size_t)n, w->cursor, line_cb, w) < 0)
				snprintf(w->seen, sizeof(w->seen), "out of memory assembling lines");
		}
		w->cursor += (uint64_t)n;
	}
}

static void output_met(struct waiter *w)
{
	Process__WaitForResponse r = PROCESS__WAIT_FOR_RESPONSE__INIT;
	char d[96];

	snprintf(d, sizeof(d), "a line of process %u at offset %llu", w->pid, (unsigned long long)w->line_off);
	r.line = w->line ? w->line : "";
	r.line_offset = w->line_off;
	waiter_done(w, &r, d);
}

static void exit_met(struct waiter *w, struct process *p)
{
	Process__WaitForResponse r = PROCESS__WAIT_FOR_RESPONSE__INIT;
	Process__ProcessEvent__EndEvent end;
	Process__ResourceUsage use;
	Process__EndReason why;
	char words[512], d[128];

	process_end_event(p, &end, &use, &why, words, sizeof(words));
	snprintf(d, sizeof(d), "process %u ended: %s", w->pid, end.status ? end.status : "");
	r.end = &end;
	waiter_done(w, &r, d);
}

/* The output ended without a match: it never will now. */
static void output_over(struct waiter *w, struct process *p)
{
	char status[64] = "";
	Process__ProcessEvent__EndEvent end;
	Process__ResourceUsage use;
	Process__EndReason why;
	char words[512];

	for (int i = 0; i < 3 && !w->matched; i++)
		waitcond_lines_flush(&w->lines[i], line_cb, w);
	if (w->matched) {
		output_met(w);
		return;
	}
	process_end_event(p, &end, &use, &why, words, sizeof(words));
	snprintf(status, sizeof(status), "%s", end.status ? end.status : "");
	waiter_fail(w, RPC_FAILED_PRECONDITION, "%s: process %u ended (%s) without such a line; %s", w->what,
		    w->pid, status, w->seen);
}

static void watch_appended(struct process_watch *pw, struct process *p)
{
	struct waiter *w = (struct waiter *)((char *)pw - offsetof(struct waiter, watch));

	if (w->c.kind != WAITCOND_OUTPUT)
		return;
	output_scan(w, p);
	if (w->matched)
		output_met(w);
}

static void watch_ended(struct process_watch *pw, struct process *p)
{
	struct waiter *w = (struct waiter *)((char *)pw - offsetof(struct waiter, watch));

	if (w->c.kind == WAITCOND_EXIT) {
		exit_met(w, p);
		return;
	}
	output_scan(w, p);
	if (w->matched)
		output_met(w);
	else
		output_over(w, p);
}

static void watch_gone(struct process_watch *pw, struct process *p)
{
	struct waiter *w = (struct waiter *)((char *)pw - offsetof(struct waiter, watch));

	w->p = NULL; /* dropped from it already */
	waiter_fail(w, RPC_FAILED_PRECONDITION, "%s: process %u is gone", w->what, w->pid);
}

static struct process *find_process(const Process__ProcessSelector *s)
{
	if (s->selector_case == PROCESS__PROCESS_SELECTOR__SELECTOR_PID)
		return process_find_pid(s->pid, true);
	return process_find_tag(s->tag, true);
}

static void process_wait(struct waiter *w)
{
	struct process *p = find_process(w->c.process);
	struct pattern_opts po = { 0 };
	char err[512];

	if (!p) {
		if (w->c.process->selector_case == PROCESS__PROCESS_SELECTOR__SELECTOR_PID)
			waiter_fail(w, RPC_NOT_FOUND, "process with pid %u not found", w->c.process->pid);
		else
			waiter_fail(w, RPC_NOT_FOUND, "process with tag %s not found", w->c.process->tag);
		return;
	}
	w->pid = process_pid(p);
	if (w->c.kind == WAITCOND_EXIT) {
		if (process_ended(p)) {
			exit_met(w, p);
			return;
		}
		snprintf(w->seen, sizeof(w->seen), "process %u still running", w->pid);
	} else {
		po.fixed = w->c.fixed;
		po.ignore_case = w->c.ignore_case;
		if (pattern_compile(w->c.pattern, strlen(w->c.pattern), &po, &w->pat, err, sizeof(err)) < 0) {
			waiter_fail(w, RPC_INVALID_ARGUMENT, "invalid pattern: %s", err);
			return;
		}
		w->m = pattern_matcher_new(w->pat);
		if (!w->m) {
			waiter_fail(w, RPC_RESOURCE_EXHAUSTED, "out of memory for the pattern");
			return;
		}
		/* Output already written counts: all the ring still holds. */
		w->cursor = ring_start(process_ring(p));
		if (w->cursor > 0)
			snprintf(w->seen, sizeof(w->seen), "no line yet (output before offset %llu was dropped "
				 "from the ring)", (unsigned long long)w->cursor);
		else
			snprintf(w->seen, sizeof(w->seen), "no line yet");
		output_scan(w, p);
		if (w->matched) {
			output_met(w);
			return;
		}
		if (process_ended(p)) {
			output_over(w, p);
			return;
		}
	}
	w->watch.appended = watch_appended;
	w->watch.ended = watch_ended;
	w->watch.gone = watch_gone;
	w->p = p;
	process_watch(p, &w->watch);
}

/* ---- paths ------------------------------------------------------------------ */

/*
 * One inotify instance for every path waiter; a directory's watch is
 * shared (inotify gives the same wd for the same inode) and counted. A
 * watch is removed only while no job is out: a job may be adding that
 * same directory again, and would get back a wd just removed.
 */
#define PATH_MASK (IN_CREATE | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)

struct wdref {
	int wd;
	unsigned refs;
};

static int ino_fd = -1;
static ev_io ino_w;
static struct wdref *wds;
static size_t n_wds, cap_wds;
static unsigned jobs_out;

struct path_job {
	struct waiter *w;    /* NULL once the waiter is gone */
	char *path;
	int ino;
	bool exists;
	int wd;              /* the watch it set, or -1 */
	char where[PATH_MAX]; /* the deepest directory that exists */
	int err;
};

static struct wdref *wd_find(int wd)
{
	for (size_t i = 0; i < n_wds; i++)
		if (wds[i].wd == wd)
			return &wds[i];
	return NULL;
}

static int wd_ref(int wd)
{
	struct wdref *r = wd_find(wd);

	if (r) {
		r->refs++;
		return 0;
	}
	if (n_wds == cap_wds) {
		size_t cap = cap_wds ? cap_wds * 2 : 16;
		struct wdref *n = realloc(wds, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		wds = n;
		cap_wds = cap;
	}
	wds[n_wds++] = (struct wdref){ .wd = wd, .refs = 1 };
	return 0;
}

/* Watches nobody uses go, unless a job is out (see above). */
static void wd_sweep(void)
{
	if (jobs_out)
		return;
	for (size_t i = 0; i < n_wds;) {
		if (wds[i].refs) {
			i++;
			continue;
		}
		inotify_rm_watch(ino_fd, wds[i].wd);
		wds[i] = wds[--n_wds];
	}
}

static void wd_unref(int wd)
{
	struct wdref *r = wd_find(wd);

	if (r && r->refs)
		r->refs--;
	wd_sweep();
}

/* A watch a job set that no waiter took: counted at none, so it goes. */
static void wd_orphan(int wd)
{
	if (wd >= 0 && !wd_find(wd) && wd_ref(wd) == 0)
		wd_unref(wd);
	wd_sweep();
}

/* On a worker of the path's mount: does it exist; if not, watch the
 * deepest directory that does, then look again (no creation slips in
 * between). */
static void path_work(void *arg)
{
	struct path_job *j = arg;
	struct stat st;
	char *slash;

	j->wd = -1;
	if (lstat(j->path, &st) == 0) {
		j->exists = true;
		return;
	}
	snprintf(j->where, sizeof(j->where), "%s", j->path);
	for (;;) {
		slash = strrchr(j->where, '/');
		if (!slash)
			break;
		if (slash == j->where)
			slash[1] = '\0';
		else
			*slash = '\0';
		j->wd = inotify_add_watch(j->ino, j->where, PATH_MASK);
		if (j->wd >= 0)
			break;
		j->err = errno;
		if (strcmp(j->where, "/") == 0)
			break;
	}
	if (lstat(j->path, &st) == 0)
		j->exists = true;
}

static void path_look(struct waiter *w);

static void path_done(void *arg)
{
	struct path_job *j = arg;
	struct waiter *w = j->w;

	jobs_out--;
	if (!w) {
		/* The waiter left meanwhile: its watch, if any, goes unused. */
		wd_orphan(j->wd);
		free(j->path);
		free(j);
		return;
	}
	w->job = NULL;
	if (j->exists) {
		Process__WaitForResponse r = PROCESS__WAIT_FOR_RESPONSE__INIT;
		char d[PATH_MAX + 16];

		wd_orphan(j->wd);
		snprintf(d, sizeof(d), "%s exists", w->path);
		free(j->path);
		free(j);
		waiter_done(w, &r, d);
		return;
	}
	if (j->wd < 0) {
		snprintf(w->seen, sizeof(w->seen), "%.400s does not exist, and no directory above it can be watched: %s",
			 w->path, go_strerror(j->err));
		free(j->path);
		free(j);
		/* Nothing will tell: look again now and then. */
		ev_timer_set(&w->retry_w, WAITFOR_HTTP_RETRY_MAX_MS / 1000.0, 0.);
		ev_timer_start(envd_loop, &w->retry_w);
		return;
	}
	if (w->wd != j->wd) {
		int old = w->wd;

		if (wd_ref(j->wd) < 0) {
			free(j->path);
			free(j);
			waiter_fail(w, RPC_RESOURCE_EXHAUSTED, "out of memory watching %s", w->path);
			return;
		}
		w->wd = j->wd;
		if (old >= 0)
			wd_unref(old);
	}
	snprintf(w->seen, sizeof(w->seen), "%.300s does not exist (watching %.300s)", w->path, j->where);
	free(j->path);
	free(j);
	wd_sweep();
	if (w->recheck) {
		w->recheck = false;
		path_look(w);
	}
}

static void path_expired(void *arg)
{
	struct path_job *j = arg;

	if (j->w)
		snprintf(j->w->seen, sizeof(j->w->seen), WORKER_TIMEOUT_FMT, worker_fs_timeout, j->path);
}

static void path_look(struct waiter *w)
{
	struct path_job *j;
	int rc;

	if (w->job) {
		w->recheck = true;
		return;
	}
	j = calloc(1, sizeof(*j));
	if (!j || !(j->path = strdup(w->path))) {
		free(j);
		waiter_fail(w, RPC_RESOURCE_EXHAUSTED, "out of memory watching %s", w->path);
		return;
	}
	j->w = w;
	j->ino = ino_fd;
	rc = worker_run(&(struct worker_req){ .work = path_work, .done = path_done, .expired = path_expired,
					      .arg = j, .key = worker_path_key(w->path),
					      .timeout = worker_fs_timeout });
	if (rc < 0) {
		free(j->path);
		free(j);
		waiter_fail(w, RPC_RESOURCE_EXHAUSTED, "filesystem worker queue is full, retry later: %s",
			    w->path);
		return;
	}
	jobs_out++;
	w->job = j;
}

static void ino_cb(EV_P_ ev_io *io, int revents)
{
	char buf[8192] __attribute__((aligned(__alignof__(struct inotify_event))));

	for (;;) {
		ssize_t n = read(ino_fd, buf, sizeof(buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		for (char *p = buf; p < buf + n;) {
			const struct inotify_event *ev = (const struct inotify_event *)p;

			/* Whatever happened in (or to) the directory: each waiter on it
			 * looks again, in a job. A waiter whose job is out looks again
			 * after it whatever the event: the job may have just watched a
			 * deeper directory (a wd the waiter learns only when the job is
			 * done), and a name made there after the job's last look would
			 * otherwise tell nobody. */
			for (struct waiter *w = waiters, *next; w; w = next) {
				next = w->next;
				if (w->c.kind == WAITCOND_PATH &&
				    (w->wd == ev->wd || w->job || (ev->mask & IN_Q_OVERFLOW)))
					path_look(w);
			}
			p += sizeof(*ev) + ev->len;
		}
	}
}

static void path_leave(struct waiter *w)
{
	if (w->job)
		w->job->w = NULL;
	w->job = NULL;
	if (w->wd >= 0)
		wd_unref(w->wd);
	w->wd = -1;
	free(w->path);
	w->path = NULL;
}

static void path_retry_cb(EV_P_ ev_timer *t, int revents)
{
	path_look(t->data);
}

static void path_wait(struct waiter *w)
{
	struct user *u = calloc(1, sizeof(*u));
	char *path = malloc(PATH_MAX);

	if (!u || !path) {
		free(u);
		free(path);
		waiter_fail(w, RPC_RESOURCE_EXHAUSTED, "out of memory");
		return;
	}
	/* caller_of answers a bad user or path itself. */
	if (caller_of(w->call, w->c.fs_path, u, path, PATH_MAX) < 0) {
		free(u);
		free(path);
		w->call = NULL;
		waiter_free(w);
		return;
	}
	free(u);
	w->path = path;
	snprintf(w->what, sizeof(w->what), "%.600s to exist", path);
	snprintf(w->seen, sizeof(w->seen), "not looked at yet");
	if (ino_fd < 0) {
		ino_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
		if (ino_fd < 0) {
			waiter_fail(w, RPC_RESOURCE_EXHAUSTED, "cannot watch %s: inotify: %s", path,
				    go_strerror(errno));
			return;
		}
		ev_io_init(&ino_w, ino_cb, ino_fd, EV_READ);
		ev_io_start(envd_loop, &ino_w);
		/* An idle inotify instance must not keep a test's loop alive. */
		ev_unref(envd_loop);
	}
	ev_timer_init(&w->retry_w, path_retry_cb, 1., 0.);
	w->retry_w.data = w;
	path_look(w);
}

/* ---- the call ------------------------------------------------------------ */

void waitfor_start(struct rpc_call *call, const ProtobufCMessage *msg)
{
	const Process__WaitForRequest *rq = (const Process__WaitForRequest *)msg;
	struct waiter *w;
	char err[512];
	double secs;

	if (n_waiters >= WAITFOR_MAX) {
		rpc_fail(call, RPC_RESOURCE_EXHAUSTED, "too many waiters (%d)", WAITFOR_MAX);
		return;
	}
	w = calloc(1, sizeof(*w));
	if (!w) {
		rpc_fail(call, RPC_RESOURCE_EXHAUSTED, "out of memory");
		return;
	}
	if (waitcond_parse(rq, &w->c, err, sizeof(err)) < 0) {
		free(w);
		rpc_fail(call, RPC_INVALID_ARGUMENT, "%s", err);
		return;
	}
	if ((w->c.kind == WAITCOND_PORT || w->c.kind == WAITCOND_HTTP) && !port_kick) {
		free(w);
		rpc_fail(call, RPC_FAILED_PRECONDITION,
			 "waiting for a port needs the port scanner, which is off here (-no-port-forward)");
		return;
	}
	w->call = call;
	w->fd = -1;
	w->wd = -1;
	w->t0_us = mono_us();
	waitcond_describe(&w->c, w->what, sizeof(w->what));
	snprintf(w->seen, sizeof(w->seen), "nothing yet");
	w->next = waiters;
	if (waiters)
		waiters->prev = w;
	waiters = w;
	n_waiters++;
	rpc_call_set_hooks(call, &waiter_hooks, w);
	/* Its own deadline, or the call's; without either, the default. */
	secs = w->c.timeout_ms ? w->c.timeout_ms / 1000.0
	       : rpc_call_timeout_ms(call) > 0 ? 0
					       : WAITCOND_DEFAULT_MS / 1000.0;
	ev_timer_init(&w->deadline_w, deadline_cb, secs, 0.);
	w->deadline_w.data = w;
	if (secs > 0)
		ev_timer_start(envd_loop, &w->deadline_w);
	ev_timer_init(&w->retry_w, http_retry_cb, 1., 0.);
	w->retry_w.data = w;
	ev_init(&w->attempt_w, http_attempt_cb);
	w->attempt_w.data = w;

	switch (w->c.kind) {
	case WAITCOND_PORT:
	case WAITCOND_HTTP:
		snprintf(w->seen, sizeof(w->seen), "no scan of the listeners yet");
		ports_join(w);
		return;
	case WAITCOND_OUTPUT:
	case WAITCOND_EXIT:
		process_wait(w);
		return;
	case WAITCOND_PATH:
		path_wait(w);
		return;
	}
}
