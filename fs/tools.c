/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tools.c - Glob, Grep and ReadLines (tools.h).
 *
 * A call is a struct tool, a request's async job (base/reqjob.h) bound to
 * the call (rpc/rpcjob.h). Its walk jobs run on the pool, one reqjob task
 * each, with a cursor of the shared walk and (Grep) a scanner; what they
 * find goes, encoded and framed, into the tool's output buffer, from which
 * the loop (woken through an ev_async) sends it. The buffer is bounded
 * (TOOLS_OUT_MAX): a job that finds it full keeps its place (the file it
 * is in, the scanner's state) and returns, "parked"; the loop runs it
 * again once the client has read enough (ops->writable). Each job gets
 * what is left of the client's deadline (reqjob's `until`). The tool is
 * freed when its last reference goes: the call's, the handler's and one
 * per job in flight; a parked job holds none, so a client that leaves
 * while all are parked frees it at once.
 *
 * ReadLines is one reqjob job, as Edit is.
 */
#include "fs/tools.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/errstr.h"
#include "base/fsid.h"
#include "base/loop.h"
#include "base/reqjob.h"
#include "base/users.h"
#include "base/worker.h"
#include "filesystem.pb-c.h"
#include "fs/entry.h"
#include "rpc/caller.h"
#include "rpc/rpcjob.h"
#include "search/glob.h"
#include "search/pattern.h"
#include "search/scan.h"
#include "search/walk.h"

#define ERRLEN (PATH_MAX + 256)
/* Framed output waiting for the loop, and one job's batch before it is
 * handed over. */
#define TOOLS_OUT_MAX (256 * 1024)
#define TOOLS_BATCH_MAX (64 * 1024)
/* A job hands its matches over when it has this many bytes of them, or
 * when the last hand-over (at first, the call's start) is this old: each
 * one wakes the loop, and a wake per file with a match costs more than
 * the search of the file. A search quicker than that answers in one
 * write, with its end. */
#define TOOLS_BATCH_MIN (16 * 1024)
#define TOOLS_BATCH_MS 5

enum tool_kind { TOOL_GLOB, TOOL_GREP };
enum grep_mode { MODE_CONTENT, MODE_FILES, MODE_COUNT };

/* A file kept for the end (Glob's entries, Grep's "files"): the best
 * `limit` of them by the call's order, in a heap whose top is the worst. */
struct hit {
	char *rel;
	int64_t mtime;
};

struct heap {
	struct hit *v;
	size_t n, cap;
	bool by_mtime; /* newest first; else by path */
};

struct tool;

struct tool_worker {
	struct tool *t;
	struct walk_cursor *cur;
	struct scanner *sc;
	struct reqjob_task task; /* its job in flight */
	bool parked;   /* stopped for room in the output; to be run again */
	bool in_file;  /* sc is in the middle of fd */
	bool over;     /* its walk is over */
	int fd;
	char rel[PATH_MAX];
	uint8_t *batch;
	size_t blen, bcap;
	int64_t published_ms; /* when the batch was last handed over */
};

struct tool {
	struct reqjob rj;      /* the call; the walk's key, deadline, stall, until */
	enum tool_kind kind;
	struct fsid id;
	gid_t groups[USER_MAX_GROUPS];
	char root[PATH_MAX];
	struct rpc_codec codec;
	unsigned nworkers;
	struct tool_worker w[TOOLS_WORKERS];
	ev_async async;
	/* the search */
	struct walk *walk;
	struct walk_opts wo;
	struct glob *pattern_glob;   /* Glob */
	struct glob *inc[64], *exc[64];
	size_t n_inc, n_exc;
	struct pattern *pat;         /* Grep */
	struct scan_opts so;
	enum grep_mode mode;
	uint32_t limit;
	/* shared by the jobs */
	pthread_mutex_t mu;
	uint8_t *out;
	size_t out_len, out_cap;
	bool notified;
	struct heap heap;
	uint64_t kept_total;         /* files offered to the heap */
	int err_code;                /* first failure: an rpc code, 0 none */
	char err[ERRLEN];
	/* counters (atomic) */
	uint32_t sent, files_searched, files_matched, matches, files_skipped, binary_skipped;
	uint64_t bytes;
	bool truncated, stop;
	/* Glob's last job: the entries and the encoded reply */
	bool finishing;
	struct rpc_encoded enc;
};

static uint32_t add32(uint32_t *p, uint32_t v)
{
	return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}

static bool stopped(struct tool *t)
{
	return __atomic_load_n(&t->stop, __ATOMIC_ACQUIRE);
}

/* First failure wins; the walk stops. Any thread. */
static void tool_fail(struct tool *t, enum rpc_code code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void tool_fail(struct tool *t, enum rpc_code code, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&t->mu);
	if (!t->err_code) {
		t->err_code = (int)code;
		va_start(ap, fmt);
		vsnprintf(t->err, sizeof(t->err), fmt, ap);
		va_end(ap);
	}
	pthread_mutex_unlock(&t->mu);
	__atomic_store_n(&t->stop, true, __ATOMIC_RELEASE);
	if (t->walk)
		walk_stop(t->walk);
}

/* --- the heap of kept files --- */

static bool worse(const struct heap *h, const struct hit *a, const struct hit *b)
{
	if (h->by_mtime)
		return a->mtime < b->mtime || (a->mtime == b->mtime && strcmp(a->rel, b->rel) > 0);
	return strcmp(a->rel, b->rel) > 0;
}

static void sift_down(struct heap *h, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		if (l < h->n && worse(h, &h->v[l], &h->v[m]))
			m = l;
		if (r < h->n && worse(h, &h->v[r], &h->v[m]))
			m = r;
		if (m == i)
			return;
		struct hit tmp = h->v[i];
		h->v[i] = h->v[m];
		h->v[m] = tmp;
		i = m;
	}
}

/* Under t->mu. Keeps the best `limit`; -ENOMEM. */
static int heap_offer(struct tool *t, const char *rel, int64_t mtime)
{
	struct heap *h = &t->heap;
	struct hit x = { (char *)rel, mtime };

	t->kept_total++;
	if (h->n == t->limit) {
		if (!worse(h, &h->v[0], &x))
			return 0;
		char *s = strdup(rel);
		if (!s)
			return -ENOMEM;
		free(h->v[0].rel);
		h->v[0] = (struct hit){ s, mtime };
		sift_down(h, 0);
		return 0;
	}
	if (h->n == h->cap) {
		size_t cap = h->cap ? h->cap * 2 : 64;
		struct hit *v = realloc(h->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		h->v = v;
		h->cap = cap;
	}
	x.rel = strdup(rel);
	if (!x.rel)
		return -ENOMEM;
	size_t i = h->n++;
	h->v[i] = x;
	while (i && worse(h, &h->v[i], &h->v[(i - 1) / 2])) {
		struct hit tmp = h->v[i];
		h->v[i] = h->v[(i - 1) / 2];
		h->v[(i - 1) / 2] = tmp;
		i = (i - 1) / 2;
	}
	return 0;
}

static const struct heap *sort_heap;

static int best_first(const void *a, const void *b)
{
	const struct hit *x = a, *y = b;
	if (worse(sort_heap, x, y))
		return 1;
	if (worse(sort_heap, y, x))
		return -1;
	return 0;
}

/* The kept files, best first (loop thread or the last job: one at a time). */
static void heap_sort(struct heap *h)
{
	sort_heap = h;
	qsort(h->v, h->n, sizeof(*h->v), best_first);
}

static void heap_free(struct heap *h)
{
	for (size_t i = 0; i < h->n; i++)
		free(h->v[i].rel);
	free(h->v);
	memset(h, 0, sizeof(*h));
}

/* --- scanners and cursors kept between calls --- */

/*
 * Scanners (each with its SCAN_WINDOW window) and walk cursors (each with
 * its listing buffer) are kept from one call to the next, at most
 * TOOLS_WORKERS of each: musl's allocator maps blocks that size at every
 * malloc and unmaps them at every free, and on a small tree those system
 * calls, page faults and TLB shootdowns cost more than the search itself.
 * Freed after TOOLS_KEEP_IDLE_S without a call. Loop thread.
 */
#define TOOLS_KEEP_IDLE_S 30.0
/* The tool structs themselves (some 27 KiB each) likewise, two of them. */
#define TOOLS_KEEP_TOOLS 2

static struct scanner *kept_sc[TOOLS_WORKERS];
static struct walk_cursor *kept_cur[TOOLS_WORKERS];
static struct tool *kept_tool[TOOLS_KEEP_TOOLS];
static unsigned n_kept_sc, n_kept_cur, n_kept_tool;
static ev_timer keep_timer;
static bool keep_timer_init;

static void keep_drop_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	while (n_kept_sc)
		scanner_free(kept_sc[--n_kept_sc]);
	while (n_kept_cur)
		walk_cursor_free(kept_cur[--n_kept_cur]);
	while (n_kept_tool)
		free(kept_tool[--n_kept_tool]);
	ev_timer_stop(loop, w);
}

static void keep_touch(void)
{
	if (!keep_timer_init) {
		ev_init(&keep_timer, keep_drop_cb);
		keep_timer.repeat = TOOLS_KEEP_IDLE_S;
		keep_timer_init = true;
	}
	ev_timer_again(envd_loop, &keep_timer);
}

static struct scanner *scanner_take(const struct pattern *p, const struct scan_opts *o)
{
	while (n_kept_sc) {
		struct scanner *s = kept_sc[--n_kept_sc];
		if (scanner_rebind(s, p, o) == 0)
			return s;
		scanner_free(s);
	}
	return scanner_new(p, o);
}

static void scanner_give(struct scanner *s)
{
	if (!s)
		return;
	if (n_kept_sc == TOOLS_WORKERS) {
		scanner_free(s);
		return;
	}
	kept_sc[n_kept_sc++] = s;
	keep_touch();
}

static struct tool *tool_alloc(void)
{
	if (n_kept_tool) {
		struct tool *t = kept_tool[--n_kept_tool];
		memset(t, 0, sizeof(*t));
		return t;
	}
	return calloc(1, sizeof(struct tool));
}

static void tool_dealloc(struct tool *t)
{
	if (n_kept_tool < TOOLS_KEEP_TOOLS)
		kept_tool[n_kept_tool++] = t;
	else
		free(t);
}

static struct walk_cursor *cursor_take(struct walk *w)
{
	if (n_kept_cur) {
		struct walk_cursor *c = kept_cur[--n_kept_cur];
		walk_cursor_attach(c, w);
		return c;
	}
	return walk_cursor_new(w);
}

/* Before its walk is freed. */
static void cursor_give(struct walk_cursor *c)
{
	if (!c)
		return;
	if (n_kept_cur == TOOLS_WORKERS) {
		walk_cursor_free(c);
		return;
	}
	walk_cursor_detach(c);
	kept_cur[n_kept_cur++] = c;
	keep_touch();
}

/* --- the tool's life --- */

#define TOOL_OF(j) REQJOB_CONTAINER(j, struct tool, rj)

static void tool_free(struct tool *t)
{
	for (unsigned i = 0; i < t->nworkers; i++) {
		struct tool_worker *w = &t->w[i];
		if (w->in_file)
			close(w->fd);
		cursor_give(w->cur);
		scanner_give(w->sc);
		free(w->batch);
	}
	if (ev_is_active(&t->async))
		ev_async_stop(envd_loop, &t->async);
	walk_free(t->walk);
	glob_free(t->pattern_glob);
	for (size_t i = 0; i < t->n_inc; i++)
		glob_free(t->inc[i]);
	for (size_t i = 0; i < t->n_exc; i++)
		glob_free(t->exc[i]);
	pattern_free(t->pat);
	heap_free(&t->heap);
	free(t->out);
	rpc_encoded_free(&t->enc);
	pthread_mutex_destroy(&t->mu);
	tool_dealloc(t);
	keep_touch();
}

/* A parked job's file is closed on a worker: close() of a file on a
 * FUSE mount waits for its daemon (FLUSH), which the loop must never do. */
static void close_work(void *arg)
{
	struct tool *t = arg;

	for (unsigned i = 0; i < t->nworkers; i++) {
		if (t->w[i].in_file) {
			close(t->w[i].fd);
			t->w[i].in_file = false;
		}
	}
}

static void close_done(void *arg)
{
	tool_free(arg);
}

/*
 * ops->free: the last reference went, so no job of the tool is on the
 * pool. The files parked jobs left open are closed off the loop first;
 * the reqjob is not used again (its wake-up is stopped now, so nothing
 * takes a reference on it meanwhile).
 */
static void tool_rj_free(struct reqjob *rj)
{
	struct tool *t = TOOL_OF(rj);
	bool open = false;

	if (ev_is_active(&t->async))
		ev_async_stop(envd_loop, &t->async);
	for (unsigned i = 0; i < t->nworkers; i++)
		open = open || t->w[i].in_file;
	if (open && worker_run(&(struct worker_req){ .work = close_work, .done = close_done, .arg = t,
						     .key = t->rj.key }) == 0)
		return;
	tool_free(t);
}

/* The jobs stop at their next file; parked ones are not run again. */
static void tool_stop(struct tool *t)
{
	__atomic_store_n(&t->stop, true, __ATOMIC_RELEASE);
	if (t->walk)
		walk_stop(t->walk);
}

/* ops->cancel: the client left (or its own deadline passed). */
static void tool_rj_cancel(struct reqjob *rj)
{
	tool_stop(TOOL_OF(rj));
}

/* ops->expired: a job outlived the deadline; the call is answered here. */
static void tool_rj_expired(struct reqjob *rj)
{
	struct tool *t = TOOL_OF(rj);

	tool_stop(t);
	rpcjob_expire(rj, t->root);
}

static void grep_step(struct tool *t);

/* ops->writable: the client read; Grep's parked jobs may go on. */
static void tool_rj_writable(struct reqjob *rj)
{
	struct tool *t = TOOL_OF(rj);

	if (t->kind == TOOL_GREP)
		grep_step(t);
}

static const struct reqjob_ops tool_ops = { .free = tool_rj_free, .cancel = tool_rj_cancel,
					    .expired = tool_rj_expired, .writable = tool_rj_writable };

/* --- jobs --- */

static void job_work(void *arg);
static void job_done(void *arg);

/* Run w's job (again) under what is left of the call's deadline. */
static int submit(struct tool_worker *w)
{
	bool parked = w->parked;
	int rc;

	/* Cleared before: once submitted, the job's thread owns the flag. */
	w->parked = false;
	rc = reqjob_run_task(&w->t->rj, &w->task, job_work, job_done, w, REQJOB_SPREAD);
	if (rc < 0)
		w->parked = parked;
	return rc;
}

/* Publish a job's batch; false when the output is full (park). */
static bool publish(struct tool_worker *w)
{
	struct tool *t = w->t;
	bool wake = false;

	if (!w->blen)
		return true;
	pthread_mutex_lock(&t->mu);
	if (t->out_len && t->out_len + w->blen > TOOLS_OUT_MAX) {
		pthread_mutex_unlock(&t->mu);
		return false;
	}
	if (!t->out_len) {
		/* swap the buffers: no copy */
		uint8_t *o = t->out;
		size_t ocap = t->out_cap;
		t->out = w->batch;
		t->out_cap = w->bcap;
		t->out_len = w->blen;
		w->batch = o;
		w->bcap = ocap;
	} else {
		if (t->out_len + w->blen > t->out_cap) {
			size_t cap = t->out_cap * 2 > t->out_len + w->blen ? t->out_cap * 2 : t->out_len + w->blen;
			uint8_t *o = realloc(t->out, cap);
			if (!o) {
				pthread_mutex_unlock(&t->mu);
				tool_fail(t, RPC_RESOURCE_EXHAUSTED, "out of memory");
				w->blen = 0;
				return true;
			}
			t->out = o;
			t->out_cap = cap;
		}
		memcpy(t->out + t->out_len, w->batch, w->blen);
		t->out_len += w->blen;
	}
	w->blen = 0;
	if (!t->notified)
		wake = t->notified = true;
	pthread_mutex_unlock(&t->mu);
	if (wake)
		ev_async_send(envd_loop, &t->async);
	return true;
}

static int64_t coarse_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Between files: hand the batch over when it is big or old enough. */
static bool publish_due(struct tool_worker *w)
{
	int64_t now;

	if (!w->blen)
		return true;
	now = coarse_ms();
	if (w->blen < TOOLS_BATCH_MIN && now - w->published_ms < TOOLS_BATCH_MS)
		return true;
	w->published_ms = now;
	return publish(w);
}

static void frame(struct tool_worker *w, const ProtobufCMessage *msg)
{
	int rc = rpc_frame_append(&w->t->codec, msg, &w->batch, &w->blen, &w->bcap);

	if (rc < 0)
		tool_fail(w->t, RPC_RESOURCE_EXHAUSTED, "cannot encode a match: %s", go_strerror(-rc));
}

/* The scanner's lines end with a NUL (scan.h): usable as they are. */
static char *line_str(const struct scan_line *l)
{
	return (char *)l->text;
}

static bool grep_emit(void *ud, const struct scan_match *m)
{
	struct tool_worker *w = ud;
	struct tool *t = w->t;
	Filesystem__GrepResponse resp = FILESYSTEM__GREP_RESPONSE__INIT;
	Filesystem__GrepMatch gm = FILESYSTEM__GREP_MATCH__INIT;
	char *before[SCAN_CONTEXT_MAX], *after[SCAN_CONTEXT_MAX];

	if (add32(&t->sent, 1) >= t->limit) {
		__atomic_store_n(&t->truncated, true, __ATOMIC_RELAXED);
		__atomic_store_n(&t->stop, true, __ATOMIC_RELEASE);
		walk_stop(t->walk);
		return true;
	}
	gm.path = w->rel;
	gm.line = (uint32_t)m->line.no;
	gm.column = (uint32_t)m->column;
	gm.text = line_str(&m->line);
	gm.text_truncated = m->line.cut;
	for (size_t i = 0; i < m->n_before; i++)
		before[i] = line_str(&m->before[i]);
	for (size_t i = 0; i < m->n_after; i++)
		after[i] = line_str(&m->after[i]);
	gm.before = before;
	gm.n_before = m->n_before;
	gm.after = after;
	gm.n_after = m->n_after;
	resp.event_case = FILESYSTEM__GREP_RESPONSE__EVENT_MATCH;
	resp.match = &gm;
	frame(w, &resp.base);
	return w->blen >= TOOLS_BATCH_MAX || stopped(t);
}

/* Open the entry as a file to read; -errno. */
static int open_entry(const struct walk_entry *e)
{
	int fd;

	if (e->explicit_file)
		fd = openat(AT_FDCWD, e->path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	else
		fd = openat(e->dirfd, e->name, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW | O_NONBLOCK);
	return fd < 0 ? -errno : fd;
}

static void root_error(struct tool *t, int rc)
{
	if (rc == -ENOENT)
		tool_fail(t, RPC_NOT_FOUND, "path not found: %s", t->root);
	else if (rc == -EINVAL)
		tool_fail(t, RPC_INVALID_ARGUMENT, "path is neither a file nor a directory: %s", t->root);
	else if (rc == -EACCES || rc == -EPERM)
		tool_fail(t, RPC_PERMISSION_DENIED, "permission denied: %s", t->root);
	else if (rc == -ENOMEM)
		tool_fail(t, RPC_RESOURCE_EXHAUSTED, "out of memory");
	else
		tool_fail(t, RPC_INTERNAL, "error reading %s: %s", t->root, go_strerror(-rc));
}

/* A file done: counters and what the mode reports per file. */
static void grep_file_done(struct tool_worker *w)
{
	struct tool *t = w->t;
	const struct scan_result *r = scanner_result(w->sc);

	add32(&t->files_searched, 1);
	__atomic_fetch_add(&t->bytes, r->bytes, __ATOMIC_RELAXED);
	add32(&t->matches, (uint32_t)r->matches);
	if (r->quit && !r->matches)
		add32(&t->binary_skipped, 1);
	if (r->matches) {
		add32(&t->files_matched, 1);
		if (t->mode == MODE_FILES) {
			struct stat st;
			int64_t mt = fstat(w->fd, &st) == 0 ? (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec : 0;
			pthread_mutex_lock(&t->mu);
			int rc = heap_offer(t, w->rel, mt);
			pthread_mutex_unlock(&t->mu);
			if (rc)
				tool_fail(t, RPC_RESOURCE_EXHAUSTED, "out of memory");
		} else if (t->mode == MODE_COUNT) {
			if (add32(&t->sent, 1) >= t->limit) {
				__atomic_store_n(&t->truncated, true, __ATOMIC_RELAXED);
				__atomic_store_n(&t->stop, true, __ATOMIC_RELEASE);
				walk_stop(t->walk);
			} else {
				Filesystem__GrepResponse resp = FILESYSTEM__GREP_RESPONSE__INIT;
				Filesystem__GrepMatch gm = FILESYSTEM__GREP_MATCH__INIT;
				gm.path = w->rel;
				gm.count = (uint32_t)r->matches;
				resp.event_case = FILESYSTEM__GREP_RESPONSE__EVENT_MATCH;
				resp.match = &gm;
				frame(w, &resp.base);
			}
		}
	}
	close(w->fd);
	w->in_file = false;
}

/* Grep's job: files from the walk, each scanned; false when parked. */
static bool grep_run(struct tool_worker *w)
{
	struct tool *t = w->t;
	struct walk_entry e;
	int rc;

	for (;;) {
		if (stopped(t))
			break;
		if (!w->in_file) {
			if (!publish_due(w))
				return false;
			rc = walk_next(w->cur, &e);
			if (rc == 0) {
				w->over = true;
				break;
			}
			if (rc < 0) {
				if (rc != -ECANCELED)
					root_error(t, rc);
				break;
			}
			int fd = open_entry(&e);
			if (fd < 0 && e.explicit_file) {
				/* the path itself: the caller is told */
				root_error(t, fd);
				break;
			}
			if (fd < 0) {
				/* not readable by the user (or gone meanwhile) */
				if (fd == -EACCES || fd == -EPERM)
					add32(&t->files_skipped, 1);
				continue;
			}
			snprintf(w->rel, sizeof(w->rel), "%.*s", (int)e.rel_len, e.rel);
			w->fd = fd;
			w->in_file = true;
			scanner_start(w->sc, fd, e.local);
			if (e.explicit_file) {
				/* a named file is searched even when it is binary */
				scanner_free(w->sc);
				struct scan_opts so = t->so;
				so.quit_on_binary = false;
				w->sc = scanner_new(t->pat, &so);
				if (!w->sc) {
					tool_fail(t, RPC_RESOURCE_EXHAUSTED, "out of memory");
					break;
				}
				scanner_start(w->sc, fd, false);
			}
		}
		rc = scanner_run(w->sc, grep_emit, w);
		if (rc == SCAN_PAUSED) {
			if (stopped(t))
				break;
			if (!publish(w))
				return false;
			continue;
		}
		if (rc == -E2BIG) {
			tool_fail(t, RPC_RESOURCE_EXHAUSTED,
				  "pattern too complex: it hit its match limit on %s line %llu (simplify it, or make it "
				  "fixedString)", w->rel, (unsigned long long)scanner_result(w->sc)->limit_line);
			break;
		}
		if (rc < 0) {
			/* a file that cannot be read after all (EIO, EISDIR...): left out */
			if (rc == -EACCES || rc == -EPERM)
				add32(&t->files_skipped, 1);
			close(w->fd);
			w->in_file = false;
			continue;
		}
		grep_file_done(w);
	}
	if (w->in_file) {
		close(w->fd);
		w->in_file = false;
	}
	publish(w); /* what is left goes even past the bound: it is small */
	return true;
}

/* Glob's job: matching files into the heap. */
static void glob_run(struct tool_worker *w)
{
	struct tool *t = w->t;
	struct walk_entry e;
	int rc;

	for (;;) {
		if (stopped(t))
			return;
		rc = walk_next(w->cur, &e);
		if (rc == 0) {
			w->over = true;
			return;
		}
		if (rc < 0) {
			if (rc != -ECANCELED)
				root_error(t, rc);
			return;
		}
		if (!glob_match(t->pattern_glob, e.rel, e.rel_len))
			continue;
		int64_t mt = 0;
		if (t->heap.by_mtime) {
			struct stat st;
			if (fstatat(e.dirfd, e.name, &st, AT_SYMLINK_NOFOLLOW) < 0)
				continue;
			mt = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
		}
		pthread_mutex_lock(&t->mu);
		rc = heap_offer(t, e.rel, mt);
		pthread_mutex_unlock(&t->mu);
		if (rc) {
			tool_fail(t, RPC_RESOURCE_EXHAUSTED, "out of memory");
			return;
		}
	}
}

/* Glob's last step, on a worker: the entries of the kept files, encoded. */
static void glob_finish(struct tool *t)
{
	Filesystem__GlobResponse resp = FILESYSTEM__GLOB_RESPONSE__INIT;
	Filesystem__EntryInfo **entries;
	char path[PATH_MAX], err[ERRLEN];
	size_t n = 0;
	int rc;

	heap_sort(&t->heap);
	entries = calloc(t->heap.n ? t->heap.n : 1, sizeof(*entries));
	if (!entries) {
		tool_fail(t, RPC_RESOURCE_EXHAUSTED, "out of memory");
		return;
	}
	for (size_t i = 0; i < t->heap.n; i++) {
		Filesystem__EntryInfo *ei;
		if (fs_join(path, sizeof(path), t->root, t->heap.v[i].rel) < 0)
			continue;
		if (fs_entry_info(path, &ei, err, sizeof(err)) < 0)
			continue; /* gone meanwhile */
		entries[n++] = ei;
	}
	resp.entries = entries;
	resp.n_entries = n;
	resp.truncated = t->kept_total > t->heap.n;
	rc = rpc_encode(&t->codec, &resp.base, &t->enc);
	if (rc < 0)
		tool_fail(t, RPC_RESOURCE_EXHAUSTED, "cannot encode response: %s", go_strerror(-rc));
	for (size_t i = 0; i < n; i++)
		fs_entry_free(entries[i]);
	free(entries);
}

static void job_work(void *arg)
{
	struct tool_worker *w = arg;
	struct tool *t = w->t;
	struct fsid_saved saved;
	int rc = fsid_enter(&t->id, &saved);

	if (rc < 0) {
		tool_fail(t, RPC_INTERNAL, "cannot act as uid %u: %s", (unsigned)t->id.uid, go_strerror(-rc));
		return;
	}
	if (t->finishing)
		glob_finish(t);
	else if (t->kind == TOOL_GREP)
		w->parked = !grep_run(w);
	else
		glob_run(w);
	fsid_leave(&saved);
}

/* Grep's end, while the call is live: the kept files ("files"), the
 * summary, the end of stream. */
static void grep_end(struct tool *t)
{
	struct rpc_call *call = rpcjob_take(&t->rj);
	Filesystem__GrepResponse resp = FILESYSTEM__GREP_RESPONSE__INIT;
	Filesystem__GrepSummary sum = FILESYSTEM__GREP_SUMMARY__INIT;
	struct walk_stats ws;

	if (!call)
		return;
	if (t->out_len) {
		rpc_send_framed(call, t->out, t->out_len);
		t->out = NULL;
		t->out_len = t->out_cap = 0;
	}
	if (t->err_code) {
		rpc_fail(call, (enum rpc_code)t->err_code, "%s", t->err);
		return;
	}
	if (t->mode == MODE_FILES) {
		Filesystem__GrepMatch gm = FILESYSTEM__GREP_MATCH__INIT;
		heap_sort(&t->heap);
		resp.event_case = FILESYSTEM__GREP_RESPONSE__EVENT_MATCH;
		resp.match = &gm;
		for (size_t i = 0; i < t->heap.n; i++) {
			gm.path = t->heap.v[i].rel;
			rpc_send(call, &resp.base);
		}
		if (t->kept_total > t->heap.n)
			t->truncated = true;
	}
	walk_get_stats(t->walk, &ws);
	sum.files_searched = t->files_searched;
	sum.files_matched = t->files_matched;
	sum.matches = t->matches;
	sum.bytes_searched = t->bytes;
	sum.truncated = t->truncated;
	sum.files_skipped = t->files_skipped + (uint32_t)ws.dirs_denied;
	sum.binary_skipped = t->binary_skipped;
	resp.event_case = FILESYSTEM__GREP_RESPONSE__EVENT_SUMMARY;
	resp.match = NULL;
	resp.summary = &sum;
	rpc_send(call, &resp.base);
	rpc_finish(call);
}

/* Send what the jobs framed; run parked jobs again when there is room. */
static void tool_pump(struct tool *t)
{
	struct rpc_call *call;
	uint8_t *out = NULL;
	size_t len = 0;

	/* Sending may end the call (its peer's reference goes with it). */
	reqjob_hold(&t->rj);
	call = reqjob_live(&t->rj) ? rpcjob_call(&t->rj) : NULL;
	pthread_mutex_lock(&t->mu);
	if (call && t->out_len) {
		out = t->out;
		len = t->out_len;
		t->out = NULL;
		t->out_len = t->out_cap = 0;
	}
	t->notified = false;
	pthread_mutex_unlock(&t->mu);
	if (out)
		rpc_send_framed(call, out, len);
	if (!reqjob_live(&t->rj) || rpc_call_queued(call) >= RPC_SEND_HIGH / 2)
		goto out; /* ops->writable comes back here */
	for (unsigned i = 0; i < t->nworkers; i++) {
		struct tool_worker *w = &t->w[i];
		if (w->parked && !reqjob_task_busy(&w->task) && !stopped(t)) {
			int rc = submit(w);
			if (rc < 0)
				tool_fail(t, RPC_RESOURCE_EXHAUSTED, "filesystem worker queue is full, retry later: %s",
					  t->root);
		}
	}
out:
	reqjob_release(&t->rj);
}


static bool any_parked(const struct tool *t)
{
	for (unsigned i = 0; i < t->nworkers; i++)
		if (t->w[i].parked && !stopped((struct tool *)t))
			return true;
	return false;
}

/* Grep goes on: output sent, parked jobs run again, or, once no job is
 * left to run, the end. After a job's completion and when the client read. */
static void grep_step(struct tool *t)
{
	reqjob_hold(&t->rj);
	tool_pump(t);
	if (reqjob_live(&t->rj) && !reqjob_busy(&t->rj) && !any_parked(t))
		grep_end(t);
	reqjob_release(&t->rj);
}

/* Glob's jobs are all back: the entries, made off the loop by one more
 * job, then the reply. */
static void glob_step(struct tool *t)
{
	if (reqjob_busy(&t->rj))
		return;
	if (!t->finishing && !t->err_code) {
		t->finishing = true;
		if (submit(&t->w[0]) == 0)
			return;
		tool_fail(t, RPC_RESOURCE_EXHAUSTED, "filesystem worker queue is full, retry later: %s", t->root);
	}
	rpcjob_answer(&t->rj, t->err_code ? (enum rpc_code)t->err_code : RPC_OK, t->err, &t->enc);
}

/* A job handed output over (only Grep's do). */
static void tool_async_cb(struct ev_loop *loop, ev_async *a, int revents)
{
	grep_step(a->data);
}

/* A job's completion, while the call is live (reqjob drops the others). */
static void job_done(void *arg)
{
	struct tool_worker *w = arg;

	if (w->t->kind == TOOL_GREP)
		grep_step(w->t);
	else
		glob_step(w->t);
}

/* --- the calls --- */

static unsigned nprocs(void)
{
	static unsigned n;
	if (!n) {
		long v = sysconf(_SC_NPROCESSORS_ONLN);
		n = v < 1 ? 1 : v > TOOLS_WORKERS ? TOOLS_WORKERS : (unsigned)v;
	}
	return n;
}

/* A tool for the call on req_path: user, path, codec, deadline; the
 * caller holds its reference. NULL when the call was answered. */
static struct tool *tool_new(struct rpc_call *call, enum tool_kind kind, const char *req_path)
{
	struct tool *t = tool_alloc();
	struct user u;

	if (!t) {
		rpc_fail(call, RPC_RESOURCE_EXHAUSTED, "out of memory");
		return NULL;
	}
	if (caller_of(call, req_path, &u, t->root, sizeof(t->root)) < 0) {
		tool_dealloc(t);
		return NULL;
	}
	t->kind = kind;
	t->id.uid = u.uid;
	t->id.gid = u.gid;
	t->id.n_groups = u.n_groups < USER_MAX_GROUPS ? u.n_groups : USER_MAX_GROUPS;
	memcpy(t->groups, u.groups, (size_t)t->id.n_groups * sizeof(gid_t));
	t->id.groups = t->groups;
	reqjob_init(&t->rj, &tool_ops);
	t->rj.key = worker_path_key(t->root) | WORKER_KEY_WALK;
	int64_t ms = rpc_call_timeout_ms(call);
	/* a client's deadline is the call's: each job gets what is left of
	 * it; the server's default bounds each job's stall */
	t->rj.stall = ms <= 0;
	t->rj.timeout = worker_deadline_s(ms);
	if (!t->rj.stall)
		t->rj.until = ev_now(envd_loop) + t->rj.timeout;
	rpc_call_codec(call, &t->codec);
	pthread_mutex_init(&t->mu, NULL);
	ev_async_init(&t->async, tool_async_cb);
	t->async.data = t;
	return t;
}

/* Start the walk jobs; the call is answered from their completions. Lets
 * go of the caller's reference. */
static void tool_start(struct rpc_call *call, struct tool *t)
{
	int64_t ms = rpc_call_timeout_ms(call);

	t->walk = walk_new(t->root, &t->wo);
	if (!t->walk)
		goto nomem;
	t->nworkers = nprocs();
	int64_t start_ms = coarse_ms();
	for (unsigned i = 0; i < t->nworkers; i++) {
		struct tool_worker *w = &t->w[i];
		w->t = t;
		w->published_ms = start_ms;
		w->cur = cursor_take(t->walk);
		if (!w->cur)
			goto nomem;
		if (t->kind == TOOL_GREP && !(w->sc = scanner_take(t->pat, &t->so)))
			goto nomem;
	}
	ev_async_start(envd_loop, &t->async);
	rpcjob_attach(&t->rj, call);
	if (ms > 0)
		rpc_call_set_deadline_message(call, WORKER_TIMEOUT_FMT, worker_deadline_s(ms), t->root);
	worker_batch_begin();
	for (unsigned i = 0; i < t->nworkers; i++) {
		int rc = submit(&t->w[i]);
		if (rc < 0) {
			if (i == 0)
				rpc_fail(rpcjob_take(&t->rj), RPC_RESOURCE_EXHAUSTED,
					 "filesystem worker queue is full, retry later: %s: %s", t->root, go_strerror(-rc));
			break; /* fewer jobs: the walk still gets done */
		}
	}
	worker_batch_end();
	reqjob_release(&t->rj);
	return;
nomem:
	rpc_fail(call, RPC_RESOURCE_EXHAUSTED, "out of memory");
	reqjob_release(&t->rj);
}

static int compile_globs(struct rpc_call *call, char **src, size_t n, struct glob **out, size_t *nout,
			 const char *what)
{
	char err[256];

	if (n > 64) {
		rpc_fail(call, RPC_INVALID_ARGUMENT, "at most 64 %s globs", what);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		int rc = glob_compile(src[i], strlen(src[i]), GLOB_BASENAME | GLOB_LEADING_SLASH, &out[i], err,
				      sizeof(err));
		if (rc) {
			rpc_fail(call, rc == -ENOMEM ? RPC_RESOURCE_EXHAUSTED : RPC_INVALID_ARGUMENT,
				 "invalid %s glob %s: %s", what, src[i], err);
			return -1;
		}
		(*nout)++;
	}
	return 0;
}

void fs_tools_grep(struct rpc_call *call, const ProtobufCMessage *msg)
{
	const Filesystem__GrepRequest *req = (const Filesystem__GrepRequest *)msg;
	struct pattern_opts po = { .fixed = req->fixed_string, .ignore_case = req->ignore_case };
	struct tool *t;
	char err[512];
	int rc;

	if (req->multiline) {
		rpc_fail(call, RPC_UNIMPLEMENTED, "multiline is not supported; match within lines");
		return;
	}
	if (req->context_before > SCAN_CONTEXT_MAX || req->context_after > SCAN_CONTEXT_MAX) {
		rpc_fail(call, RPC_INVALID_ARGUMENT, "contextBefore and contextAfter are at most %d", SCAN_CONTEXT_MAX);
		return;
	}
	if (req->max_line_bytes > SCAN_LINE_MAX) {
		rpc_fail(call, RPC_INVALID_ARGUMENT, "maxLineBytes is at most %d", SCAN_LINE_MAX);
		return;
	}
	if (req->limit > TOOLS_LIMIT_MAX) {
		rpc_fail(call, RPC_INVALID_ARGUMENT, "limit is at most %d", TOOLS_LIMIT_MAX);
		return;
	}
	enum grep_mode mode;
	if (!req->output_mode[0] || !strcmp(req->output_mode, "content"))
		mode = MODE_CONTENT;
	else if (!strcmp(req->output_mode, "files"))
		mode = MODE_FILES;
	else if (!strcmp(req->output_mode, "count"))
		mode = MODE_COUNT;
	else {
		rpc_fail(call, RPC_INVALID_ARGUMENT, "outputMode must be content, files or count, not %s",
			 req->output_mode);
		return;
	}
	t = tool_new(call, TOOL_GREP, req->path);
	if (!t)
		return;
	rc = pattern_compile(req->pattern, strlen(req->pattern), &po, &t->pat, err, sizeof(err));
	if (rc) {
		rpc_fail(call, rc == -ENOMEM ? RPC_RESOURCE_EXHAUSTED : RPC_INVALID_ARGUMENT, "%s", err);
		reqjob_release(&t->rj);
		return;
	}
	if (compile_globs(call, req->include, req->n_include, t->inc, &t->n_inc, "include") ||
	    compile_globs(call, req->exclude, req->n_exclude, t->exc, &t->n_exc, "exclude")) {
		reqjob_release(&t->rj);
		return;
	}
	t->mode = mode;
	t->limit = req->limit ? req->limit : TOOLS_LIMIT_DEFAULT;
	t->heap.by_mtime = true;
	t->so = (struct scan_opts){
		.mode = mode == MODE_CONTENT ? SCAN_CONTENT : mode == MODE_FILES ? SCAN_FILES : SCAN_COUNT,
		.before = req->context_before,
		.after = req->context_after,
		.max_line = req->max_line_bytes ? req->max_line_bytes : TOOLS_LINE_DEFAULT,
		.max_count = req->max_count,
		.quit_on_binary = true,
	};
	t->wo = (struct walk_opts){
		.hidden = req->hidden,
		.no_ignore = req->no_ignore,
		.include = (const struct glob *const *)t->inc,
		.n_include = t->n_inc,
		.exclude = (const struct glob *const *)t->exc,
		.n_exclude = t->n_exc,
		.progress = worker_progress,
	};
	tool_start(call, t);
}

void fs_tools_glob(struct rpc_call *call, const ProtobufCMessage *msg)
{
	const Filesystem__GlobRequest *req = (const Filesystem__GlobRequest *)msg;
	struct tool *t;
	char err[256];
	bool by_mtime;
	int rc;

	if (!req->sort[0] || !strcmp(req->sort, "path"))
		by_mtime = false;
	else if (!strcmp(req->sort, "mtime"))
		by_mtime = true;
	else {
		rpc_fail(call, RPC_INVALID_ARGUMENT, "sort must be path or mtime, not %s", req->sort);
		return;
	}
	if (req->limit > TOOLS_LIMIT_MAX) {
		rpc_fail(call, RPC_INVALID_ARGUMENT, "limit is at most %d", TOOLS_LIMIT_MAX);
		return;
	}
	if (!req->pattern[0]) {
		rpc_fail(call, RPC_INVALID_ARGUMENT, "pattern is empty");
		return;
	}
	t = tool_new(call, TOOL_GLOB, req->path);
	if (!t)
		return;
	/* "./src/x.ts" names what "src/x.ts" names */
	const char *pat = req->pattern;
	while (pat[0] == '.' && pat[1] == '/')
		pat += 2;
	rc = glob_compile(pat, strlen(pat), 0, &t->pattern_glob, err, sizeof(err));
	if (rc) {
		rpc_fail(call, rc == -ENOMEM ? RPC_RESOURCE_EXHAUSTED : RPC_INVALID_ARGUMENT, "invalid glob %s: %s",
			 req->pattern, err);
		reqjob_release(&t->rj);
		return;
	}
	t->limit = req->limit ? req->limit : TOOLS_LIMIT_DEFAULT;
	t->heap.by_mtime = by_mtime;
	t->wo = (struct walk_opts){
		.hidden = req->hidden,
		.no_ignore = req->no_ignore,
		.prune = t->pattern_glob,
		.progress = worker_progress,
	};
	tool_start(call, t);
}

/* --- ReadLines: one job --- */

struct read_job {
	struct reqjob rj;      /* the call; the file's key, deadline, stall */
	struct fsid id;
	gid_t groups[USER_MAX_GROUPS];
	char path[PATH_MAX];
	uint32_t offset, limit, max_bytes;
	struct rpc_codec codec;
	enum rpc_code code;
	char err[ERRLEN];
	struct rpc_encoded enc;
};

static void read_fail(struct read_job *j, enum rpc_code code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void read_fail(struct read_job *j, enum rpc_code code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(j->err, sizeof(j->err), fmt, ap);
	va_end(ap);
	j->code = code;
}

static void read_lines(struct read_job *j)
{
	Filesystem__ReadLinesResponse resp = FILESYSTEM__READ_LINES_RESPONSE__INIT;
	struct scan_lines l;
	char version[FS_VERSION_LEN + 1];
	struct stat st;
	char *buf;
	int fd, rc;

	fd = openat(AT_FDCWD, j->path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		int e = errno;
		if (e == ENOENT)
			read_fail(j, RPC_NOT_FOUND, "file not found: %s", j->path);
		else if (e == EACCES || e == EPERM)
			read_fail(j, RPC_PERMISSION_DENIED, "permission denied: %s", j->path);
		else
			read_fail(j, RPC_INTERNAL, "error opening %s: %s", j->path, go_strerror(e));
		return;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		read_fail(j, RPC_INVALID_ARGUMENT, "path is not a file: %s", j->path);
		close(fd);
		return;
	}
	/* The version of what is read: taken before the read, so a change
	 * during it makes the version stale, never the other way round. */
	if (fs_version_settle(&st, fd, NULL))
		fstat(fd, &st);
	fs_version(&st, version);
	buf = malloc(SCAN_WINDOW);
	if (!buf) {
		read_fail(j, RPC_RESOURCE_EXHAUSTED, "out of memory");
		close(fd);
		return;
	}
	rc = scan_read_lines(fd, j->offset, j->limit, j->max_bytes, buf, &l);
	free(buf);
	close(fd);
	if (rc < 0) {
		read_fail(j, rc == -ENOMEM ? RPC_RESOURCE_EXHAUSTED : RPC_INTERNAL, "error reading %s: %s", j->path,
			  go_strerror(-rc));
		return;
	}
	resp.lines = l.lines;
	resp.n_lines = l.n;
	resp.first_line = (uint32_t)l.first;
	resp.total_lines = l.total > UINT32_MAX ? UINT32_MAX : (uint32_t)l.total;
	resp.truncated = l.truncated;
	resp.binary = l.binary;
	resp.version = version;
	rc = rpc_encode(&j->codec, &resp.base, &j->enc);
	scan_lines_free(&l);
	if (rc < 0)
		read_fail(j, RPC_RESOURCE_EXHAUSTED, "cannot encode response: %s", go_strerror(-rc));
	else
		j->code = RPC_OK;
}

static void read_work(void *arg)
{
	struct read_job *j = arg;
	struct fsid_saved saved;
	int rc = fsid_enter(&j->id, &saved);

	if (rc < 0) {
		read_fail(j, RPC_INTERNAL, "cannot act as uid %u: %s", (unsigned)j->id.uid, go_strerror(-rc));
		return;
	}
	read_lines(j);
	fsid_leave(&saved);
}

/* The read came back while the call is live (reqjob drops it otherwise). */
static void read_done(void *arg)
{
	struct read_job *j = arg;

	rpcjob_answer(&j->rj, j->code, j->err, &j->enc);
}

static void read_expired(struct reqjob *rj)
{
	struct read_job *j = REQJOB_CONTAINER(rj, struct read_job, rj);

	rpcjob_expire(rj, j->path);
}

static void read_free(struct reqjob *rj)
{
	struct read_job *j = REQJOB_CONTAINER(rj, struct read_job, rj);

	rpc_encoded_free(&j->enc);
	free(j);
}

static const struct reqjob_ops read_ops = { .free = read_free, .expired = read_expired };

void fs_tools_read_lines(struct rpc_call *call, const ProtobufCMessage *msg)
{
	const Filesystem__ReadLinesRequest *req = (const Filesystem__ReadLinesRequest *)msg;
	struct read_job *j;
	struct user u;
	int64_t ms;
	int rc;

	if (req->limit > TOOLS_LIMIT_MAX) {
		rpc_fail(call, RPC_INVALID_ARGUMENT, "limit is at most %d", TOOLS_LIMIT_MAX);
		return;
	}
	if (req->max_bytes > rpc_max_message / 2) {
		rpc_fail(call, RPC_INVALID_ARGUMENT, "maxBytes is at most %zu", rpc_max_message / 2);
		return;
	}
	j = calloc(1, sizeof(*j));
	if (!j) {
		rpc_fail(call, RPC_RESOURCE_EXHAUSTED, "out of memory");
		return;
	}
	if (caller_of(call, req->path, &u, j->path, sizeof(j->path)) < 0) {
		free(j);
		return;
	}
	j->id.uid = u.uid;
	j->id.gid = u.gid;
	j->id.n_groups = u.n_groups < USER_MAX_GROUPS ? u.n_groups : USER_MAX_GROUPS;
	memcpy(j->groups, u.groups, (size_t)j->id.n_groups * sizeof(gid_t));
	j->id.groups = j->groups;
	j->offset = req->offset ? req->offset : 1;
	j->limit = req->limit ? req->limit : TOOLS_READ_LIMIT_DEFAULT;
	j->max_bytes = req->max_bytes ? req->max_bytes : TOOLS_READ_BYTES_DEFAULT;
	ms = rpc_call_timeout_ms(call);
	reqjob_init(&j->rj, &read_ops);
	j->rj.key = worker_path_key(j->path);
	j->rj.timeout = worker_deadline_s(ms);
	j->rj.stall = ms <= 0;
	rpc_call_codec(call, &j->codec);
	rpcjob_attach(&j->rj, call);
	rc = reqjob_run(&j->rj, read_work, read_done, j, 0);
	if (rc < 0)
		rpc_fail(rpcjob_take(&j->rj), RPC_RESOURCE_EXHAUSTED, "filesystem worker queue is full, retry later: %s: %s",
			 j->path, go_strerror(-rc));
	else if (ms > 0)
		rpc_call_set_deadline_message(call, WORKER_TIMEOUT_FMT, j->rj.timeout, j->path);
	reqjob_release(&j->rj);
}
