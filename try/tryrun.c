/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tryrun.c - try runs: the table, the process table's hooks, the RPCs,
 * expiry, and the tries' part of a restart and of a live upgrade
 * (tryrun.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "try/tryrun.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/errstr.h"
#include "base/log.h"
#include "base/loop.h"
#include "base/sdnotify.h"
#include "base/users.h"
#include "base/worker.h"
#include "process/process.h"
#include "rpc/rpc.h"
#include "rpc/rpcerr.h"
#include "try/trydiff.h"
#include "try/tryapply.h"
#include "try/trykeep.h"
#include "try/trylayer.h"
#include "try/tryplan.h"
#include "try/udiff.h"

uint64_t try_max_bytes;
double try_ttl_s = 3600;

/* A file larger than this (either side) gets no unified diff. */
#define UDIFF_FILE_MAX (1024 * 1024)
#define DIFF_BYTES_DEFAULT (256 * 1024)
#define DIFF_LIMIT_DEFAULT 1000
#define DIFF_LIMIT_MAX 100000
/* How long a commit or discard waits for the try's processes to die. */
#define KILL_WAIT_S 10.0
/* Answers of committed and discarded tries kept, at most. */
#define TOMBS_MAX 256

enum try_state { TRY_RUNNING, TRY_ENDED, TRY_COMMITTED, TRY_DISCARDED };

static const char *const state_names[] = { "running", "ended", "committed", "discarded" };

enum busy { BUSY_NONE, BUSY_COMMIT, BUSY_DISCARD };

struct waiter {
	struct waiter *next;
	struct rpc_call *call; /* NULL once gone */
	struct try *t;
};

struct try {
	struct try *next;
	uint32_t pid;            /* 0 until its command is spawned */
	enum try_state state;
	bool expired;            /* discarded because -try-ttl passed */
	char **dirs;             /* requested, then resolved (prepare) */
	size_t n_dirs;
	uid_t uid;
	gid_t gid;
	uint64_t max_bytes;
	struct trylayer layer;
	bool layer_open;
	struct timespec t0;      /* CLOCK_REALTIME_COARSE when it began */
	int64_t expires_ms;      /* Unix ms; 0 while running */
	ev_timer ttl_w;          /* expiry; for a tomb, when its answer goes */
	struct process *p;       /* its command while in the table */
	void (*ready)(struct process *p); /* the end event waits for the diff */
	Process__TryDiff *end_msg; /* the end event's, in end_arena */
	struct arena end_arena;
	unsigned jobs;           /* worker jobs using the layer */
	enum busy busy;
	struct waiter *waiters;  /* commits or discards waiting for this one's outcome */
	struct commit *commit;   /* while busy with a commit */
	struct trykeep *keep;
	bool in_list;
};

static struct try *tries;
static unsigned jobs_in_flight, commits_in_flight;
static volatile bool quiescing;

static bool is_tomb(const struct try *t)
{
	return t->state == TRY_COMMITTED || t->state == TRY_DISCARDED;
}

static struct try *find(uint32_t pid)
{
	for (struct try *t = tries; t; t = t->next)
		if (pid && t->pid == pid)
			return t;
	return NULL;
}

static int64_t now_unix_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void link_try(struct try *t)
{
	t->next = tries;
	tries = t;
	t->in_list = true;
}

static void unlink_try(struct try *t)
{
	for (struct try **pp = &tries; *pp; pp = &(*pp)->next) {
		if (*pp == t) {
			*pp = t->next;
			t->in_list = false;
			return;
		}
	}
}

/*
 * The layer's descriptors closed on the worker pool: the last close of the
 * namespace unmounts everything in it and frees the tmpfs, which takes the
 * kernel tens of milliseconds and must not hold the loop.
 */
struct closer {
	struct trylayer l;
};

static void closer_work(void *arg)
{
	struct closer *c = arg;

	trylayer_close(&c->l);
}

static void closer_done(void *arg)
{
	free(arg);
}

static void close_layer(struct try *t)
{
	struct closer *c = t->layer_open ? malloc(sizeof(*c)) : NULL;

	if (c) {
		c->l = t->layer;
		if (worker_submit(closer_work, closer_done, c) == 0) {
			t->layer.ns_fd = t->layer.root_fd = t->layer.chroot_fd = -1;
			t->layer_open = false;
			return;
		}
		free(c);
	}
	if (t->layer_open)
		trylayer_close(&t->layer);
	t->layer_open = false;
}

/* Free t once nothing refers to it: no job, no process, out of the list. */
static void try_free_if_unused(struct try *t)
{
	if (t->jobs || t->p || t->in_list)
		return;
	ev_timer_stop(envd_loop, &t->ttl_w);
	close_layer(t);
	trykeep_drop(t->keep);
	for (size_t i = 0; i < t->n_dirs; i++)
		free(t->dirs[i]);
	free(t->dirs);
	arena_free(&t->end_arena);
	free(t);
}

/* The try as a record: the crash store's and the live upgrade's. */
static void to_record(const struct try *t, Upgrade__HandoverTry *r)
{
	upgrade__handover_try__init(r);
	r->pid = t->pid;
	r->state = (uint32_t)t->state;
	r->dirs = t->dirs;
	r->n_dirs = t->n_dirs;
	r->t0_sec = t->t0.tv_sec;
	r->t0_nsec = t->t0.tv_nsec;
	r->expires_unix_ms = t->expires_ms;
	r->ns_fd = t->layer.ns_fd;
	r->layer_fd = t->layer.root_fd;
	r->keep_fd = trykeep_fd(t->keep);
	r->max_bytes = t->max_bytes;
	r->uid = t->uid;
	r->gid = t->gid;
}

static void keep_update(struct try *t)
{
	Upgrade__HandoverTry r;

	if (!t->keep)
		return;
	to_record(t, &r);
	trykeep_update(t->keep, &r);
}

/* The layer goes (its processes are dead, or it never ran): once no job uses it. */
static void drop_layer(struct try *t)
{
	trykeep_drop(t->keep);
	t->keep = NULL;
	if (t->jobs)
		return; /* the last job's completion closes it */
	close_layer(t);
}

static void ttl_cb(EV_P_ ev_timer *w, int revents);

static void arm_ttl(struct try *t, double s)
{
	ev_timer_stop(envd_loop, &t->ttl_w);
	ev_timer_set(&t->ttl_w, s > 0.001 ? s : 0.001, 0.);
	ev_timer_start(envd_loop, &t->ttl_w);
}

/* Committed or discarded: only the answer is left, for as long as a
   repeat may come; the oldest answers go past TOMBS_MAX. */
static void become_tomb(struct try *t, enum try_state st)
{
	size_t n = 0;
	struct try *oldest = NULL;

	t->state = st;
	drop_layer(t);
	arm_ttl(t, try_ttl_s > 600 ? try_ttl_s : 600);
	for (struct try *o = tries; o; o = o->next) {
		if (!is_tomb(o))
			continue;
		n++;
		oldest = o; /* new ones go in front */
	}
	if (n > TOMBS_MAX && oldest && oldest != t) {
		unlink_try(oldest);
		try_free_if_unused(oldest);
	}
}

/* ---- the hooks of the process table ------------------------------------- */

static enum rpc_code hook_begin(const char *const *paths, size_t n, const struct user *u, const char *cwd, void **h,
				char *err, size_t errlen)
{
	size_t live = 0;
	struct try *t;
	char buf[PATH_MAX], joined[PATH_MAX];

	for (struct try *o = tries; o; o = o->next)
		live += !is_tomb(o);
	if (live >= TRY_MAX) {
		snprintf(err, errlen, "error starting process: %zu tries are not committed or discarded yet (at most %d)",
			 live, TRY_MAX);
		return RPC_RESOURCE_EXHAUSTED;
	}
	if (n > TRYLAYER_DIRS_MAX) {
		snprintf(err, errlen, "error starting process: a try names at most %d directories", TRYLAYER_DIRS_MAX);
		return RPC_INVALID_ARGUMENT;
	}
	t = calloc(1, sizeof(*t));
	if (!t || !(t->dirs = calloc(n ? n : 1, sizeof(*t->dirs)))) {
		free(t);
		snprintf(err, errlen, "error starting process: %s", go_strerror(ENOMEM));
		return RPC_INTERNAL;
	}
	t->layer.ns_fd = t->layer.root_fd = t->layer.chroot_fd = -1;
	ev_timer_init(&t->ttl_w, ttl_cb, 1., 0.);
	t->ttl_w.data = t;
	t->uid = u->uid;
	t->gid = u->gid;
	t->max_bytes = try_max_bytes;
	for (size_t i = 0; i < (n ? n : 1); i++) {
		const char *p = n ? paths[i] : cwd;
		int rc = 0;

		/* Relative to the command's working directory, as it sees them. */
		if (p[0] == '~')
			rc = path_resolve(u, p, NULL, buf, sizeof(buf), err, errlen);
		else if (p[0] == '/')
			rc = path_clean(p, buf, sizeof(buf));
		else if (snprintf(joined, sizeof(joined), "%s/%s", cwd, p) >= (int)sizeof(joined))
			rc = -ENAMETOOLONG;
		else
			rc = path_clean(joined, buf, sizeof(buf));
		if (rc < 0 || !(t->dirs[i] = strdup(buf))) {
			if (rc == -ENAMETOOLONG || rc == -ENOMEM)
				snprintf(err, errlen, "path too long: %s", p);
			else if (rc == 0)
				snprintf(err, errlen, "error starting process: %s", go_strerror(ENOMEM));
			t->n_dirs = i;
			try_free_if_unused(t);
			return rc == -EINVAL || rc == -ENAMETOOLONG ? RPC_INVALID_ARGUMENT : RPC_INTERNAL;
		}
		t->n_dirs = i + 1;
	}
	link_try(t);
	*h = t;
	return RPC_OK;
}

/*
 * When the try begins, for the commit's check (tryapply.h): the fine
 * clock now, which no file time already given exceeds (multigrain
 * timestamps, Linux 6.13+, give fine ones), then a wait until the coarse
 * clock (which the other file times come from) has passed it, so any
 * change from here on gets a later time. At most one tick.
 */
static void take_t0(struct timespec *t0)
{
	struct timespec now, nap = { 0, 500 * 1000 };

	clock_gettime(CLOCK_REALTIME, t0);
	for (int i = 0; i < 200; i++) {
		clock_gettime(CLOCK_REALTIME_COARSE, &now);
		if (now.tv_sec > t0->tv_sec || (now.tv_sec == t0->tv_sec && now.tv_nsec > t0->tv_nsec))
			return;
		nanosleep(&nap, NULL);
	}
}

/* Worker thread: the spawn job owns t until `started`. */
static int hook_prepare(void *h, int *mntns, int *mntns_root, char *err, size_t errlen)
{
	struct try *t = h;
	char why[1024];
	int rc;

	rc = trylayer_build(t->dirs, t->n_dirs, t->max_bytes, &t->layer, why, sizeof(why));
	if (rc < 0) {
		snprintf(err, errlen, "error starting process: %s", why);
		return rc;
	}
	t->layer_open = true;
	take_t0(&t->t0);
	*mntns = t->layer.ns_fd;
	*mntns_root = t->layer.chroot_fd;
	return 0;
}

/* An older try under the same pid: its command is long gone (the pid was
   used again). It is discarded, with a word in the log. */
static void evict_pid(uint32_t pid, struct try *keep)
{
	for (struct try *o = tries, *next; o; o = next) {
		next = o->next;
		if (o == keep || o->pid != pid)
			continue;
		if (!is_tomb(o))
			log_warn("try", "the try of an earlier process %u is discarded: the pid was used again", pid);
		if (o->layer_open && !o->busy)
			trylayer_kill(&o->layer, 0);
		drop_layer(o);
		unlink_try(o);
		try_free_if_unused(o);
	}
}

static void hook_started(void *h, struct process *p, pid_t pid)
{
	struct try *t = h;
	Upgrade__HandoverTry r;

	/* The spawn is done: no other process joins the namespace. */
	if (t->layer.chroot_fd >= 0) {
		close(t->layer.chroot_fd);
		t->layer.chroot_fd = -1;
	}
	if (!p) {
		/* Nothing ran (or nothing will): the layer goes. */
		drop_layer(t);
		unlink_try(t);
		try_free_if_unused(t);
		return;
	}
	evict_pid((uint32_t)pid, t);
	t->pid = (uint32_t)pid;
	t->p = p;
	to_record(t, &r);
	t->keep = trykeep_start(&r, t->layer.ns_fd, t->layer.root_fd);
	log_info("try", "process %d runs on a try layer over %s%s", (int)pid, t->dirs[0], t->n_dirs > 1 ? " and more" : "");
}

static void hook_fill(void *h, Process__ProcessEvent__EndEvent *end)
{
	struct try *t = h;

	end->try_diff = t->end_msg;
}

static void hook_release(void *h)
{
	struct try *t = h;

	t->p = NULL;
	t->ready = NULL;
	try_free_if_unused(t);
}

/* ---- jobs on the layer ---------------------------------------------------- */

enum job_kind { JOB_END, JOB_DIFF, JOB_COMMIT, JOB_STAGE, JOB_PUBLISH, JOB_DISCARD };

/*
 * A commit under way (try->commit, busy with BUSY_COMMIT), across its jobs:
 * one that kills what is left of the try, takes the diff, checks it, plans
 * and makes the new directories (JOB_COMMIT); then up to STAGE_JOBS that
 * stage the files, each a share of them, at once (JOB_STAGE: on a disk
 * the writes of one thread wait on the journal, which others fill); then
 * one that publishes, or removes what was staged when a stage failed
 * (JOB_PUBLISH). The calls waiting for its outcome are the try's waiters.
 */
#define STAGE_JOBS 4
#define STAGE_SHARE_MIN 64

struct commit {
	struct trydiff d;
	struct tryplan plan;
	struct tryapply *a;
	struct tryapply_root roots[TRYLAYER_DIRS_MAX];
	int upper[TRYLAYER_DIRS_MAX];
	unsigned pending;          /* JOB_STAGE jobs out */
	int rc;
	char err[1536];
	struct tryapply_stats stats;
	ev_timer retry_w;          /* the publish job could not be queued yet */
};

struct try_job {
	enum job_kind kind;
	struct try *t;
	struct rpc_call *call;     /* NULL once answered or gone */
	struct rpc_codec codec;
	/* what the worker reads (t's fields do not change while jobs run) */
	size_t limit;
	bool unified;
	size_t budget;
	const char *state;
	/* results */
	int rc;
	char err[1536];
	struct arena arena;
	Process__TryDiff *msg;
	struct rpc_encoded enc;
	bool encoded;
	struct tryapply_stats stats;
	size_t from, to;           /* JOB_STAGE: its share of the files */
};

static const struct rpc_call_hooks job_hooks;

static void job_cancel(struct rpc_call *call, enum rpc_code why)
{
	struct try_job *j = rpc_call_ud(call);

	(void)why;
	j->call = NULL;
}

static const struct rpc_call_hooks job_hooks = { .on_cancel = job_cancel };

static struct rpc_call *job_take_call(struct try_job *j)
{
	struct rpc_call *c = j->call;

	if (c)
		rpc_call_set_hooks(c, NULL, NULL);
	j->call = NULL;
	return c;
}

static char *astr(struct arena *a, const char *s)
{
	size_t n = strlen(s) + 1;
	char *p = arena_alloc(a, n);

	if (p)
		memcpy(p, s, n);
	return p;
}

static char *abs_path(struct arena *a, const struct try *t, unsigned root, const char *rel)
{
	char buf[PATH_MAX * 2];
	const char *base = t->dirs[root];

	if (!*rel)
		return astr(a, base);
	snprintf(buf, sizeof(buf), "%s/%s", strcmp(base, "/") ? base : "", rel);
	return astr(a, buf);
}

static Filesystem__FileType ftype(mode_t m)
{
	if (S_ISREG(m))
		return FILESYSTEM__FILE_TYPE__FILE_TYPE_FILE;
	if (S_ISDIR(m))
		return FILESYSTEM__FILE_TYPE__FILE_TYPE_DIRECTORY;
	if (S_ISLNK(m))
		return FILESYSTEM__FILE_TYPE__FILE_TYPE_SYMLINK;
	return FILESYSTEM__FILE_TYPE__FILE_TYPE_UNSPECIFIED;
}

/* Up to UDIFF_FILE_MAX bytes of a file; -EFBIG beyond, 1 when it holds a NUL byte. */
static int slurp(int dirfd, const char *path, char **out, size_t *len)
{
	int fd = openat(dirfd, path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	char *b;
	size_t got = 0;

	*out = NULL;
	*len = 0;
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || st.st_size > UDIFF_FILE_MAX) {
		close(fd);
		return -EFBIG;
	}
	b = malloc((size_t)st.st_size + 1);
	if (!b) {
		close(fd);
		return -ENOMEM;
	}
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, b + got, (size_t)st.st_size - got);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	*out = b;
	*len = got;
	return memchr(b, '\0', got) ? 1 : 0;
}

/* The unified diff of one change's regular file, within *budget. */
static void unify(struct try_job *j, const struct trydiff_change *c, int upper_fd, Process__TryChange *tc)
{
	struct try *t = j->t;
	char *a = NULL, *b = NULL, *text = NULL, an[PATH_MAX + 8], bn[PATH_MAX + 8];
	size_t al = 0, bl = 0, tl = 0;
	bool cut = false;
	int ra = 0, rb = 0;

	if (!(S_ISREG(c->mode) || (!c->mode && S_ISREG(c->old_mode))) || !tc->content_changed)
		return;
	if (c->kind != TRYDIFF_CREATED && S_ISREG(c->old_mode)) {
		char real[PATH_MAX * 2];
		snprintf(real, sizeof(real), "%s/%s", t->dirs[c->root], c->from ? c->from : c->path);
		ra = slurp(AT_FDCWD, real, &a, &al);
	}
	if (c->kind != TRYDIFF_DELETED && S_ISREG(c->mode))
		rb = slurp(upper_fd, c->path, &b, &bl);
	if (ra == 1 || rb == 1) {
		tc->binary = true;
	} else if (ra < 0 || rb < 0 || !j->budget) {
		tc->unified_truncated = true;
	} else {
		snprintf(an, sizeof(an), "%s%s", c->kind == TRYDIFF_CREATED ? "" : "a",
			 c->kind == TRYDIFF_CREATED ? "/dev/null" : (c->from ? tc->from : tc->path));
		snprintf(bn, sizeof(bn), "%s%s", c->kind == TRYDIFF_DELETED ? "" : "b",
			 c->kind == TRYDIFF_DELETED ? "/dev/null" : tc->path);
		if (udiff_text(a ? a : "", al, b ? b : "", bl, an, bn, j->budget, &text, &tl, &cut) == 0) {
			tc->unified = astr(&j->arena, text);
			tc->unified_truncated = cut;
			j->budget -= tl < j->budget ? tl : j->budget;
			free(text);
		}
	}
	free(a);
	free(b);
}

/* The wire form of d (its first `limit` changes). Worker thread. */
static Process__TryDiff *build_msg(struct try_job *j, const struct trydiff *d, size_t limit, const int *upper)
{
	struct arena *a = &j->arena;
	struct try *t = j->t;
	Process__TryDiff *m = arena_alloc(a, sizeof(*m));
	size_t n = d->n < limit ? d->n : limit;

	if (!m)
		return NULL;
	process__try_diff__init(m);
	m->paths = t->dirs;
	m->n_paths = t->n_dirs;
	m->state = (char *)j->state;
	m->truncated = d->truncated || d->n > limit;
	m->layer_bytes = t->layer_open ? trylayer_used(&t->layer) : 0;
	m->layer_max_bytes = t->max_bytes;
	m->expires_unix_ms = t->expires_ms;
	m->changes = arena_alloc(a, (n ? n : 1) * sizeof(*m->changes));
	Process__TryChange *v = arena_alloc(a, (n ? n : 1) * sizeof(*v));
	if (!m->changes || !v)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		const struct trydiff_change *c = &d->v[i];
		Process__TryChange *tc = &v[i];
		bool both = c->mode && c->old_mode;

		process__try_change__init(tc);
		tc->path = abs_path(a, t, c->root, c->path);
		tc->kind = (Process__TryChangeKind)c->kind;
		tc->type = ftype(c->mode ? c->mode : c->old_mode);
		if (c->from)
			tc->from = abs_path(a, t, c->root, c->from);
		tc->size = c->size;
		tc->old_size = c->old_size;
		tc->mode = c->mode & 07777;
		tc->old_mode = c->old_mode & 07777;
		tc->content_changed = c->kind == TRYDIFF_CREATED || c->kind == TRYDIFF_DELETED || c->content;
		tc->mode_changed = both && (c->mode & 07777) != (c->old_mode & 07777);
		tc->owner_changed = both && (c->uid != c->old_uid || c->gid != c->old_gid);
		if (S_ISLNK(c->mode) && upper) {
			char lt[PATH_MAX];
			ssize_t ln = readlinkat(upper[c->root], c->path, lt, sizeof(lt) - 1);
			if (ln >= 0) {
				lt[ln] = '\0';
				tc->symlink_target = astr(a, lt);
			}
		}
		if (j->unified && upper)
			unify(j, c, upper[c->root], tc);
		m->changes[i] = tc;
		worker_progress();
	}
	m->n_changes = n;
	return a->oom ? NULL : m;
}

/* Scan every directory of the try into d. */
static int scan_all(struct try_job *j, struct trydiff *d, int *upper)
{
	struct try *t = j->t;
	int rc = 0;

	for (size_t i = 0; i < t->n_dirs; i++)
		upper[i] = -1;
	for (size_t i = 0; i < t->n_dirs && rc == 0 && !d->truncated; i++) {
		upper[i] = trylayer_upper(&t->layer, i);
		if (upper[i] < 0) {
			rc = upper[i];
			snprintf(j->err, sizeof(j->err), "reading the try's layer over %s: %s", t->dirs[i],
				 go_strerror(-rc));
			upper[i] = -1;
			break;
		}
		rc = trydiff_scan(upper[i], t->dirs[i], TRYLAYER_XATTR, (unsigned)i, d, j->err, sizeof(j->err));
	}
	return rc;
}

static void close_uppers(const struct try *t, int *upper)
{
	for (size_t i = 0; i < t->n_dirs; i++)
		if (upper[i] >= 0)
			close(upper[i]);
}

static void diff_work(struct try_job *j)
{
	struct trydiff d;
	int upper[TRYLAYER_DIRS_MAX];

	trydiff_init(&d, j->limit + 1);
	j->rc = scan_all(j, &d, upper);
	if (j->rc == 0 && !(j->msg = build_msg(j, &d, j->limit, upper)))
		j->rc = -ENOMEM;
	close_uppers(j->t, upper);
	trydiff_free(&d);
	if (j->rc == 0 && j->kind == JOB_DIFF) {
		Process__TryDiffResponse resp = PROCESS__TRY_DIFF_RESPONSE__INIT;

		resp.diff = j->msg;
		j->rc = rpc_encode(&j->codec, &resp.base, &j->enc);
		j->encoded = j->rc == 0;
	}
	if (j->rc == -ENOMEM && !j->err[0])
		snprintf(j->err, sizeof(j->err), "error reading the try's changes: %s", go_strerror(ENOMEM));
}

static void commit_work(struct try_job *j)
{
	struct try *t = j->t;
	struct commit *c = t->commit;
	int left;

	for (size_t i = 0; i < TRYLAYER_DIRS_MAX; i++)
		c->upper[i] = -1;
	/* What is left of the try's processes could still write to the layer. */
	left = trylayer_kill(&t->layer, KILL_WAIT_S);
	if (left) {
		c->rc = -EBUSY;
		snprintf(c->err, sizeof(c->err), "%d processes of the try did not end within %g s of SIGKILL", left,
			 KILL_WAIT_S);
		return;
	}
	trydiff_init(&c->d, 0);
	c->rc = scan_all(j, &c->d, c->upper);
	if (c->rc < 0) {
		snprintf(c->err, sizeof(c->err), "%s", j->err);
		return;
	}
	for (size_t i = 0; i < t->n_dirs; i++)
		c->roots[i] = (struct tryapply_root){ .real = t->dirs[i], .upper_fd = c->upper[i] };
	c->rc = tryapply_check(&c->d, c->roots, &t->t0, c->err, sizeof(c->err));
	if (c->rc == 0 && (c->rc = tryplan_make(&c->d, &c->plan)) < 0)
		snprintf(c->err, sizeof(c->err), "planning the commit: %s", go_strerror(-c->rc));
	if (c->rc == 0 && (c->rc = tryapply_new(&c->d, &c->plan, c->roots, &c->a)) < 0)
		snprintf(c->err, sizeof(c->err), "committing: %s", go_strerror(-c->rc));
	if (c->rc == 0)
		c->rc = tryapply_stage_dirs(c->a, &quiescing, &c->stats, c->err, sizeof(c->err));
}

static void stage_work(struct try_job *j)
{
	struct commit *c = j->t->commit;

	j->rc = tryapply_stage_files(c->a, j->from, j->to, &quiescing, &j->stats, j->err, sizeof(j->err));
}

static void publish_work(struct try_job *j)
{
	struct commit *c = j->t->commit;

	if (!c->a)
		return;
	/* The check again, now that everything slow is done: what changed in
	   the real tree while the files were staged is a conflict too. */
	if (c->rc == 0)
		c->rc = tryapply_check(&c->d, c->roots, &j->t->t0, c->err, sizeof(c->err));
	if (c->rc < 0) {
		tryapply_unstage(c->a);
		return;
	}
	c->rc = tryapply_publish(c->a, &c->stats, c->err, sizeof(c->err));
	if (c->rc == 0)
		j->msg = build_msg(j, &c->d, TRY_END_CHANGES, NULL); /* NULL: applied, listing nothing */
}

static void discard_work(struct try_job *j)
{
	int left = trylayer_kill(&j->t->layer, KILL_WAIT_S);

	if (left)
		log_warn("try", "discarding the try of process %u: %d of its processes did not end within %g s", j->t->pid,
			 left, KILL_WAIT_S);
}

static void job_work(void *arg)
{
	struct try_job *j = arg;

	switch (j->kind) {
	case JOB_END:
	case JOB_DIFF:
		diff_work(j);
		break;
	case JOB_COMMIT:
		commit_work(j);
		break;
	case JOB_STAGE:
		stage_work(j);
		break;
	case JOB_PUBLISH:
		publish_work(j);
		break;
	case JOB_DISCARD:
		discard_work(j);
		break;
	}
}

static void job_free(struct try_job *j)
{
	if (j->encoded)
		rpc_encoded_free(&j->enc);
	arena_free(&j->arena);
	free(j);
}

static void answer_waiters(struct try *t, enum rpc_code code, const char *msg, const ProtobufCMessage *reply)
{
	struct waiter *w = t->waiters;

	t->waiters = NULL;
	while (w) {
		struct waiter *next = w->next;

		if (w->call) {
			rpc_call_set_hooks(w->call, NULL, NULL);
			if (code == RPC_OK)
				rpc_reply(w->call, reply);
			else
				rpc_fail(w->call, code, "%s", msg);
		}
		free(w);
		w = next;
	}
}

static void end_ready(struct try *t)
{
	void (*ready)(struct process *) = t->ready;

	t->ready = NULL;
	if (ready && t->p)
		ready(t->p);
}

static void commit_prepared(struct try *t);
static void commit_publish(struct try *t);
static void commit_finish(struct try *t, Process__TryDiff *applied);

static void job_done(void *arg)
{
	struct try_job *j = arg;
	struct try *t = j->t;
	struct rpc_call *call = job_take_call(j);
	enum rpc_code code = rpc_code_from_errno(j->rc);

	t->jobs--;
	jobs_in_flight--;
	switch (j->kind) {
	case JOB_END:
		if (j->rc == 0 && j->msg) {
			arena_free(&t->end_arena);
			t->end_arena = j->arena;
			memset(&j->arena, 0, sizeof(j->arena));
			t->end_msg = j->msg;
		} else {
			log_warn("try", "process %u: the end event carries no try diff: %s", t->pid, j->err);
		}
		end_ready(t);
		break;
	case JOB_DIFF:
		if (call && j->rc == 0) {
			rpc_reply_encoded(call, &j->enc);
			j->encoded = false;
		} else if (call) {
			rpc_fail(call, code, "%s", j->err[0] ? j->err : go_strerror(-j->rc));
		}
		break;
	case JOB_COMMIT:
		commit_prepared(t);
		break;
	case JOB_STAGE: {
		struct commit *c = t->commit;

		c->pending--;
		c->stats.files += j->stats.files;
		c->stats.bytes += j->stats.bytes;
		if (j->rc < 0 && c->rc == 0) {
			c->rc = j->rc;
			snprintf(c->err, sizeof(c->err), "%s", j->err);
		}
		if (!c->pending)
			commit_publish(t);
		break;
	}
	case JOB_PUBLISH:
		commit_finish(t, j->msg);
		break;
	case JOB_DISCARD: {
		Process__DiscardTryResponse resp = PROCESS__DISCARD_TRY_RESPONSE__INIT;

		t->busy = BUSY_NONE;
		log_info("try", "the try of process %u is discarded%s", t->pid, t->expired ? " (it expired)" : "");
		if (call)
			rpc_reply(call, &resp.base);
		answer_waiters(t, RPC_OK, NULL, &resp.base);
		become_tomb(t, TRY_DISCARDED);
		/* A command killed by the discard waited for nothing. */
		end_ready(t);
		break;
	}
	}
	/* The layer went while this job used it. */
	if (!t->jobs && !t->keep && is_tomb(t) && t->layer_open)
		close_layer(t);
	job_free(j);
	try_free_if_unused(t);
}

/* Queue a job on t's layer; the call (may be NULL) is answered when it is done. */
static int job_run(struct try *t, enum job_kind kind, struct rpc_call *call, struct try_job *j)
{
	int rc;

	j->kind = kind;
	j->t = t;
	j->state = state_names[t->state];
	if (call)
		rpc_call_codec(call, &j->codec);
	/* Keyed by the first directory's mount: a hung one holds only its own. */
	rc = worker_run(&(struct worker_req){ .work = job_work, .done = job_done, .arg = j,
					      .key = worker_path_key(t->dirs[0]) });
	if (rc < 0)
		return rc;
	t->jobs++;
	jobs_in_flight++;
	if (call) {
		j->call = call;
		rpc_call_set_hooks(call, &job_hooks, j);
	}
	return 0;
}

static struct try_job *job_new(void)
{
	return calloc(1, sizeof(struct try_job));
}

/* ---- a commit's jobs, in turn ------------------------------------------- */

static void commit_free(struct try *t)
{
	struct commit *c = t->commit;

	if (!c)
		return;
	ev_timer_stop(envd_loop, &c->retry_w);
	tryapply_free(c->a);
	tryplan_free(&c->plan);
	trydiff_free(&c->d);
	for (size_t i = 0; i < TRYLAYER_DIRS_MAX; i++)
		if (c->upper[i] >= 0)
			close(c->upper[i]);
	free(c);
	t->commit = NULL;
	commits_in_flight--;
}

static void retry_publish_cb(EV_P_ ev_timer *w, int revents)
{
	(void)revents;
	commit_publish(w->data);
}

/* The last job: publish, or remove what was staged. Retried until queued:
   staged files must not be left to the next envd's sweep. */
static void commit_publish(struct try *t)
{
	struct try_job *j = job_new();

	if (j && job_run(t, JOB_PUBLISH, NULL, j) == 0)
		return;
	free(j);
	ev_timer_set(&t->commit->retry_w, 0.01, 0.);
	ev_timer_start(envd_loop, &t->commit->retry_w);
}

/* The diff checked and planned, the directories made: the files in shares. */
static void commit_prepared(struct try *t)
{
	struct commit *c = t->commit;
	size_t n, k;

	if (c->rc < 0 || !c->a) {
		commit_publish(t);
		return;
	}
	n = tryapply_files(c->a);
	k = n / STAGE_SHARE_MIN;
	k = k < 1 ? 1 : k > STAGE_JOBS ? STAGE_JOBS : k;
	for (size_t i = 0; i < k; i++) {
		struct try_job *j = job_new();

		if (!j) {
			c->rc = -ENOMEM;
			snprintf(c->err, sizeof(c->err), "committing: %s", go_strerror(ENOMEM));
			break;
		}
		j->from = n * i / k;
		j->to = n * (i + 1) / k;
		if (job_run(t, JOB_STAGE, NULL, j) < 0) {
			free(j);
			c->rc = -EAGAIN;
			snprintf(c->err, sizeof(c->err), "filesystem worker queue is full, retry later: %s", t->dirs[0]);
			break;
		}
		c->pending++;
	}
	if (!c->pending)
		commit_publish(t);
}

/* The outcome, to every call that waits for it. */
static void commit_finish(struct try *t, Process__TryDiff *applied)
{
	struct commit *c = t->commit;
	Process__CommitTryResponse resp = PROCESS__COMMIT_TRY_RESPONSE__INIT;
	Process__TryDiff none = PROCESS__TRY_DIFF__INIT;
	enum rpc_code code = rpc_code_from_errno(c->rc);

	t->busy = BUSY_NONE;
	if (c->rc == 0) {
		log_info("try", "the try of process %u is committed: %zu files (%zu bytes), %zu directories, "
				"%zu removed, %zu chmods",
			 t->pid, c->stats.files, c->stats.bytes, c->stats.dirs, c->stats.removed, c->stats.attrs);
		if (applied) {
			applied->state = (char *)state_names[TRY_COMMITTED];
			applied->expires_unix_ms = 0;
		}
		none.state = (char *)state_names[TRY_COMMITTED];
		none.paths = t->dirs;
		none.n_paths = t->n_dirs;
		resp.applied = applied ? applied : &none;
		answer_waiters(t, RPC_OK, NULL, &resp.base);
		commit_free(t);
		become_tomb(t, TRY_COMMITTED);
		return;
	}
	if (c->rc == -ECANCELED) {
		code = RPC_UNAVAILABLE;
		snprintf(c->err, sizeof(c->err), "envd is upgrading; nothing was applied: commit again");
	}
	log_info("try", "the try of process %u was not committed: %s", t->pid, c->err);
	answer_waiters(t, code, c->err, NULL);
	commit_free(t);
}

/* ---- the end of a try's command ---------------------------------------- */

/* The end event of a try discarded while its command ran: its state alone. */
static void end_state_only(struct try *t, enum try_state st)
{
	Process__TryDiff *m;

	arena_free(&t->end_arena);
	t->end_msg = NULL;
	if (!(m = arena_alloc(&t->end_arena, sizeof(*m))))
		return;
	process__try_diff__init(m);
	m->state = (char *)state_names[st];
	m->paths = t->dirs;
	m->n_paths = t->n_dirs;
	m->layer_max_bytes = t->max_bytes;
	t->end_msg = m;
}

static void hook_end(void *h, struct process *p, void (*ready)(struct process *p))
{
	struct try *t = h;
	struct try_job *j;

	if (t->state == TRY_RUNNING) {
		t->state = TRY_ENDED;
		t->expires_ms = now_unix_ms() + (int64_t)(try_ttl_s * 1000);
		arm_ttl(t, try_ttl_s);
		keep_update(t);
	}
	t->p = p;
	t->ready = ready;
	/* Discarded while it ran (or being): its end has nothing to list. */
	if (is_tomb(t) || t->busy || !t->layer_open || !(j = job_new())) {
		end_state_only(t, t->busy == BUSY_DISCARD ? TRY_DISCARDED : t->state);
		end_ready(t);
		return;
	}
	j->limit = TRY_END_CHANGES;
	if (job_run(t, JOB_END, NULL, j) < 0) {
		free(j);
		end_ready(t);
	}
}

/* ---- expiry ------------------------------------------------------------------ */

static void ttl_cb(EV_P_ ev_timer *w, int revents)
{
	struct try *t = w->data;
	struct try_job *j;

	(void)revents;
	if (is_tomb(t)) {
		/* The answer has been kept long enough. */
		unlink_try(t);
		try_free_if_unused(t);
		return;
	}
	if (t->busy || t->state == TRY_RUNNING || !(j = job_new())) {
		arm_ttl(t, 1.0);
		return;
	}
	t->expired = true;
	t->busy = BUSY_DISCARD;
	if (job_run(t, JOB_DISCARD, NULL, j) < 0) {
		free(j);
		t->busy = BUSY_NONE;
		t->expired = false;
		arm_ttl(t, 1.0);
	}
}

/* ---- the RPCs ------------------------------------------------------------------ */

static struct try *find_or_fail(struct rpc_call *call, uint32_t pid)
{
	struct try *t = find(pid);

	if (!t)
		rpc_fail(call, RPC_NOT_FOUND, "no try run of process %u", pid);
	return t;
}

static void rpc_diff(struct rpc_call *call, const ProtobufCMessage *msg)
{
	const Process__TryDiffRequest *rq = (const Process__TryDiffRequest *)msg;
	struct try *t = find_or_fail(call, rq->pid);
	struct try_job *j;
	size_t cap = rpc_max_message / 2;

	if (!t)
		return;
	if (is_tomb(t) || !t->layer_open) {
		Process__TryDiffResponse resp = PROCESS__TRY_DIFF_RESPONSE__INIT;
		Process__TryDiff d = PROCESS__TRY_DIFF__INIT;

		d.state = (char *)state_names[t->state];
		d.paths = t->dirs;
		d.n_paths = t->n_dirs;
		d.layer_max_bytes = t->max_bytes;
		resp.diff = &d;
		rpc_reply(call, &resp.base);
		return;
	}
	if (!(j = job_new())) {
		rpc_fail(call, RPC_RESOURCE_EXHAUSTED, "error reading the try's changes: %s", go_strerror(ENOMEM));
		return;
	}
	j->limit = rq->limit ? (rq->limit < DIFF_LIMIT_MAX ? rq->limit : DIFF_LIMIT_MAX) : DIFF_LIMIT_DEFAULT;
	j->unified = rq->unified;
	j->budget = rq->max_bytes ? rq->max_bytes : DIFF_BYTES_DEFAULT;
	if (j->budget > cap)
		j->budget = cap;
	if (job_run(t, JOB_DIFF, call, j) < 0) {
		free(j);
		rpc_fail(call, RPC_RESOURCE_EXHAUSTED, "filesystem worker queue is full, retry later: %s", t->dirs[0]);
	}
}

static void waiter_cancel(struct rpc_call *call, enum rpc_code why)
{
	struct waiter *w = rpc_call_ud(call);

	(void)why;
	w->call = NULL;
}

static const struct rpc_call_hooks waiter_hooks = { .on_cancel = waiter_cancel };

static void wait_for_outcome(struct try *t, struct rpc_call *call)
{
	struct waiter *w = calloc(1, sizeof(*w));

	if (!w) {
		rpc_fail(call, RPC_RESOURCE_EXHAUSTED, "%s", go_strerror(ENOMEM));
		return;
	}
	w->call = call;
	w->t = t;
	w->next = t->waiters;
	t->waiters = w;
	rpc_call_set_hooks(call, &waiter_hooks, w);
}

static void rpc_commit(struct rpc_call *call, const ProtobufCMessage *msg)
{
	const Process__CommitTryRequest *rq = (const Process__CommitTryRequest *)msg;
	struct try *t = find_or_fail(call, rq->pid);
	struct try_job *j;

	if (!t)
		return;
	if (t->state == TRY_COMMITTED) {
		Process__CommitTryResponse resp = PROCESS__COMMIT_TRY_RESPONSE__INIT;
		Process__TryDiff d = PROCESS__TRY_DIFF__INIT;

		d.state = (char *)state_names[TRY_COMMITTED];
		d.paths = t->dirs;
		d.n_paths = t->n_dirs;
		resp.applied = &d;
		rpc_reply(call, &resp.base);
		return;
	}
	if (t->state == TRY_DISCARDED) {
		rpc_fail(call, RPC_FAILED_PRECONDITION, "the try of process %u was discarded%s", t->pid,
			 t->expired ? " (it expired)" : "");
		return;
	}
	if (t->state == TRY_RUNNING) {
		rpc_fail(call, RPC_FAILED_PRECONDITION,
			 "process %u is still running: a try is committed once its command has ended", t->pid);
		return;
	}
	if (t->busy == BUSY_COMMIT) {
		wait_for_outcome(t, call);
		return;
	}
	if (t->busy == BUSY_DISCARD) {
		rpc_fail(call, RPC_FAILED_PRECONDITION, "the try of process %u is being discarded", t->pid);
		return;
	}
	if (!(j = job_new()) || !(t->commit = calloc(1, sizeof(*t->commit)))) {
		free(j);
		rpc_fail(call, RPC_RESOURCE_EXHAUSTED, "%s", go_strerror(ENOMEM));
		return;
	}
	commits_in_flight++;
	for (size_t i = 0; i < TRYLAYER_DIRS_MAX; i++)
		t->commit->upper[i] = -1;
	ev_timer_init(&t->commit->retry_w, retry_publish_cb, 0.01, 0.);
	t->commit->retry_w.data = t;
	if (job_run(t, JOB_COMMIT, NULL, j) < 0) {
		free(j);
		commit_free(t);
		rpc_fail(call, RPC_RESOURCE_EXHAUSTED, "filesystem worker queue is full, retry later: %s", t->dirs[0]);
		return;
	}
	t->busy = BUSY_COMMIT;
	/* The caller waits for the outcome as a second commit would. */
	wait_for_outcome(t, call);
}

static void rpc_discard(struct rpc_call *call, const ProtobufCMessage *msg)
{
	const Process__DiscardTryRequest *rq = (const Process__DiscardTryRequest *)msg;
	Process__DiscardTryResponse resp = PROCESS__DISCARD_TRY_RESPONSE__INIT;
	struct try *t = find_or_fail(call, rq->pid);
	struct try_job *j;

	if (!t)
		return;
	if (t->state == TRY_DISCARDED) {
		rpc_reply(call, &resp.base);
		return;
	}
	if (t->state == TRY_COMMITTED) {
		rpc_fail(call, RPC_FAILED_PRECONDITION, "the try of process %u was committed", t->pid);
		return;
	}
	if (t->busy == BUSY_DISCARD) {
		wait_for_outcome(t, call);
		return;
	}
	if (t->busy == BUSY_COMMIT) {
		rpc_fail(call, RPC_FAILED_PRECONDITION, "the try of process %u is being committed", t->pid);
		return;
	}
	if (!(j = job_new())) {
		rpc_fail(call, RPC_RESOURCE_EXHAUSTED, "%s", go_strerror(ENOMEM));
		return;
	}
	t->busy = BUSY_DISCARD;
	if (job_run(t, JOB_DISCARD, call, j) < 0) {
		free(j);
		t->busy = BUSY_NONE;
		rpc_fail(call, RPC_RESOURCE_EXHAUSTED, "filesystem worker queue is full, retry later: %s", t->dirs[0]);
	}
}

/* ---- set-up, restarts and upgrades --------------------------------------- */

static const struct process_try_ops ops = {
	.begin = hook_begin,
	.prepare = hook_prepare,
	.started = hook_started,
	.end = hook_end,
	.fill = hook_fill,
	.release = hook_release,
	.diff = rpc_diff,
	.commit = rpc_commit,
	.discard = rpc_discard,
};

/* Half of the memory, as tmpfs's own default size. */
static uint64_t half_memory(void)
{
	FILE *f = fopen("/proc/meminfo", "re");
	unsigned long long kb = 0;
	char line[256];

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "MemTotal: %llu kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb ? (uint64_t)kb * 1024 / 2 : 256ull << 20;
}

void try_setup(void)
{
	if (!try_max_bytes)
		try_max_bytes = half_memory();
	process_try = &ops;
}

unsigned try_jobs_in_flight(void)
{
	return jobs_in_flight + commits_in_flight;
}

void try_quiesce(bool on)
{
	quiescing = on;
}

/* A try from a record (a restart's or an upgrade's), its descriptors taken. */
static struct try *from_record(const Upgrade__HandoverTry *r, int ns_fd, int layer_fd)
{
	struct try *t = calloc(1, sizeof(*t));

	if (!t || !(t->dirs = calloc(r->n_dirs ? r->n_dirs : 1, sizeof(*t->dirs)))) {
		free(t);
		return NULL;
	}
	for (size_t i = 0; i < r->n_dirs; i++) {
		if (!(t->dirs[i] = strdup(r->dirs[i] ? r->dirs[i] : "/"))) {
			t->n_dirs = i;
			try_free_if_unused(t);
			return NULL;
		}
		t->n_dirs = i + 1;
	}
	ev_timer_init(&t->ttl_w, ttl_cb, 1., 0.);
	t->ttl_w.data = t;
	t->pid = r->pid;
	t->state = r->state <= TRY_DISCARDED ? (enum try_state)r->state : TRY_ENDED;
	t->t0.tv_sec = r->t0_sec;
	t->t0.tv_nsec = r->t0_nsec;
	t->max_bytes = r->max_bytes;
	t->uid = r->uid;
	t->gid = r->gid;
	t->expires_ms = r->expires_unix_ms;
	t->layer.ns_fd = ns_fd;
	t->layer.root_fd = layer_fd;
	/* Only a spawn needs it, and nothing spawns into a layer again. */
	t->layer.chroot_fd = -1;
	t->layer_open = ns_fd >= 0 && layer_fd >= 0;
	if (ns_fd >= 0)
		fcntl(ns_fd, F_SETFD, FD_CLOEXEC);
	if (layer_fd >= 0)
		fcntl(layer_fd, F_SETFD, FD_CLOEXEC);
	link_try(t);
	return t;
}

/* Back with its command (taken back already) and its expiry. */
static void relink(struct try *t, int64_t left_ms)
{
	struct process *p;

	if (is_tomb(t)) {
		arm_ttl(t, try_ttl_s > 600 ? try_ttl_s : 600);
		return;
	}
	if (!t->layer_open) {
		t->state = TRY_DISCARDED;
		arm_ttl(t, 600);
		return;
	}
	p = process_find_pid(t->pid, false);
	if (t->state == TRY_RUNNING && p) {
		process_try_attach(p, t);
		t->p = p;
		return;
	}
	if (t->state == TRY_RUNNING) {
		/* It ended while no envd watched: its expiry counts from now. */
		t->state = TRY_ENDED;
		t->expires_ms = now_unix_ms() + (int64_t)(try_ttl_s * 1000);
		left_ms = (int64_t)(try_ttl_s * 1000);
		keep_update(t);
	}
	arm_ttl(t, (double)left_ms / 1000.0);
}

static void adopt_one(void *ud, const Upgrade__HandoverTry *r, int ns_fd, int layer_fd, struct trykeep *k)
{
	size_t *n = ud;
	struct try *t = from_record(r, ns_fd, layer_fd);

	if (!t) {
		close(ns_fd);
		close(layer_fd);
		trykeep_drop(k);
		return;
	}
	t->keep = k;
	relink(t, t->expires_ms ? t->expires_ms - now_unix_ms() : 0);
	log_info("try", "the try of process %u over %s was taken back after a restart (%s)", t->pid, t->dirs[0],
		 state_names[t->state]);
	(*n)++;
}

size_t try_adopt_all(struct sdnotify_fd *fds, size_t n)
{
	size_t taken = 0;

	trykeep_take(fds, n, adopt_one, &taken);
	return taken;
}

void try_handover_save(struct handover *h)
{
	Upgrade__HandoverState *st = h->st;

	for (struct try *t = tries; t; t = t->next) {
		Upgrade__HandoverTry *r = handover_alloc(h, sizeof(*r));

		if (!r || !t->pid)
			continue;
		to_record(t, r);
		if (!is_tomb(t) && t->expires_ms)
			r->expires_left_ms = t->expires_ms - now_unix_ms();
		if (!t->layer_open) {
			r->ns_fd = r->layer_fd = -1;
		} else {
			handover_keep_fd(h, t->layer.ns_fd);
			handover_keep_fd(h, t->layer.root_fd);
		}
		if (t->keep)
			handover_keep_fd(h, trykeep_fd(t->keep));
		HANDOVER_PUSH(h, st->tries, st->n_tries, r);
	}
}

void try_handover_restore(struct handover *h)
{
	const Upgrade__HandoverState *st = h->st;

	for (size_t i = 0; i < st->n_tries; i++) {
		const Upgrade__HandoverTry *r = st->tries[i];
		bool live = r->state < TRY_COMMITTED;
		int ns = live && handover_fd_open(r->ns_fd) ? r->ns_fd : -1;
		int lf = live && handover_fd_open(r->layer_fd) ? r->layer_fd : -1;
		struct try *t = from_record(r, ns, lf);

		if (!t)
			continue;
		if (live && handover_fd_open(r->keep_fd))
			t->keep = trykeep_resume(r->pid, r->keep_fd);
		relink(t, r->expires_left_ms);
	}
}
