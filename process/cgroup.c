/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "process/cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/errstr.h"
#include "base/handover.h"
#include "base/log.h"
#include "base/loop.h"
#include "base/worker.h"

/* How often lingering leaves are re-checked when inotify misses a change. */
#define SWEEP_S 5.0
/* Released leaves wait this long to be removed together, off the loop. */
#define BATCH_S 0.02
/* Spare leaves: at most this many per parent, made at most this many per job. */
#define POOL_MAX 32
#define POOL_JOB 8
/*
 * Demand. Starts form a run while each comes within the run gap of the one
 * before: RUN_GAP_MIN, or four times the lifetime of the last command that
 * ended (a client running short commands one after another starts the
 * next about one lifetime later, on a fast machine or an emulated one),
 * at most RUN_GAP_MAX. Spares are kept only once a run is RUN_MIN starts
 * long: an occasional command pays the mkdir, a run does not. The target
 * is the number of starts within the last gap (what one refill interval
 * asks for: about 4 for one client, up to POOL_MAX for a burst). When the
 * run ends, the spares are removed on the next HOUSEKEEP_S tick.
 */
#define RUN_GAP_MIN 1.0
#define RUN_GAP_MAX 10.0
#define RUN_MIN 8
#define HOUSEKEEP_S 0.25

struct pcg_leaf {
	struct pcg_leaf *next;   /* pool, doomed or lingering list */
	char path[PATH_MAX + 64];
	int procs_fd;            /* cgroup.procs, O_WRONLY */
	int dir_fd;              /* the directory, for clone3(CLONE_INTO_CGROUP) */
	int wd;                  /* inotify watch on cgroup.events, or -1 */
	int rm_err;              /* removal job: 0 removed, else errno */
	double t_taken;          /* when a start took it (0: not yet) */
};

/* Fresh, never used leaves of one parent, made ahead of time. */
struct pool {
	const char *parent;
	struct pcg_leaf *spare;
	size_t n;
	bool filling;                 /* a job is making more */
	double taken[POOL_MAX];       /* when the last leaves were taken (ring) */
	unsigned n_taken;
	unsigned run;                 /* starts in the current run */
	double last;                  /* when the last one came */
};

static char user_dir[PATH_MAX], ptys_dir[PATH_MAX];
static bool active;
static bool quiet;                /* no new jobs (an upgrade is under way) */
static unsigned controllers;
static unsigned long long seq;    /* leaf names; also used by the workers */
static double last_life;          /* lifetime of the last command whose leaf came back */

static struct pool pools[2] = { { .parent = user_dir }, { .parent = ptys_dir } };
static struct pcg_leaf *lingering;
static size_t n_lingering;
static struct pcg_leaf *doomed;   /* released, to be removed by the next batch */
static size_t n_doomed;
static size_t jobs;               /* cgroup jobs on the worker pool */
static int ino_fd = -1;
static ev_io ino_w;
static ev_timer sweep_w, batch_w, keep_w;
static bool timers_init;

static void housekeep(void);

/* ---- small file helpers ---- */

int pcg_write(const char *dir, const char *file, const char *val)
{
	char path[PATH_MAX];
	int fd, rc = 0;
	size_t n = strlen(val);

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (write(fd, val, n) != (ssize_t)n)
		rc = -errno;
	close(fd);
	return rc;
}

ssize_t pcg_read(const char *dir, const char *file, char *buf, size_t len)
{
	char path[PATH_MAX];
	ssize_t n, got = 0;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	while ((size_t)got + 1 < len && (n = read(fd, buf + got, len - 1 - (size_t)got)) > 0)
		got += n;
	close(fd);
	buf[got] = '\0';
	return got;
}

long long pcg_key(const char *text, const char *key)
{
	size_t kl = strlen(key);

	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (strncmp(p, key, kl) == 0 && p[kl] == ' ')
			return strtoll(p + kl + 1, NULL, 10);
	}
	return -1;
}

/* ---- configuration ---- */

/* Controllers `dir` hands down to its children (cgroup.subtree_control). */
static unsigned delegated(const char *dir)
{
	char buf[256], *save = NULL;
	unsigned m = 0;

	if (pcg_read(dir, "cgroup.subtree_control", buf, sizeof(buf)) < 0)
		return 0;
	for (char *t = strtok_r(buf, " \n", &save); t; t = strtok_r(NULL, " \n", &save)) {
		if (strcmp(t, "cpu") == 0)
			m |= PCG_CPU;
		else if (strcmp(t, "memory") == 0)
			m |= PCG_MEMORY;
		else if (strcmp(t, "pids") == 0)
			m |= PCG_PIDS;
	}
	return m;
}

int pcg_configure(const char *user, const char *ptys)
{
	if (strlen(user) >= sizeof(user_dir) - 64 || strlen(ptys) >= sizeof(ptys_dir) - 64)
		return -ENAMETOOLONG;
	snprintf(user_dir, sizeof(user_dir), "%s", user);
	snprintf(ptys_dir, sizeof(ptys_dir), "%s", ptys);
	/* A leaf gets a controller only if its parent delegates it. */
	controllers = delegated(user_dir) & delegated(ptys_dir);
	active = true;
	return 0;
}

bool pcg_active(void)
{
	return active;
}

unsigned pcg_controllers(void)
{
	return controllers;
}

/* ---- leaves ---- */

bool pcg_parent_frozen(bool pty)
{
	char buf[16];

	return pcg_read(pty ? ptys_dir : user_dir, "cgroup.freeze", buf, sizeof(buf)) > 0 &&
	       buf[0] == '1';
}

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/*
 * mkdir a new leaf under `parent` and open what the spawn needs. Runs on
 * the loop (a start that found no spare) or on a worker (the pool), so it
 * touches nothing but its own leaf and the atomic name counter.
 */
static struct pcg_leaf *leaf_make(const char *parent, char *err, size_t errlen)
{
	struct pcg_leaf *l = calloc(1, sizeof(*l));
	char procs[PATH_MAX + 96];

	if (!l) {
		snprintf(err, errlen, "%s", go_strerror(ENOMEM));
		return NULL;
	}
	l->wd = -1;
	l->dir_fd = -1;
	/* Names may survive an envd restart: skip the ones in use. */
	for (int tries = 0;; tries++) {
		snprintf(l->path, sizeof(l->path), "%s/cmd-%d-%llu", parent, (int)getpid(),
			 __atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED));
		if (mkdir(l->path, 0755) == 0)
			break;
		if (errno != EEXIST || tries > 100) {
			snprintf(err, errlen, "mkdir %s: %s", l->path, go_strerror(errno));
			free(l);
			return NULL;
		}
	}
	snprintf(procs, sizeof(procs), "%s/cgroup.procs", l->path);
	l->procs_fd = open(procs, O_WRONLY | O_CLOEXEC);
	if (l->procs_fd < 0) {
		snprintf(err, errlen, "open %s/cgroup.procs: %s", l->path, go_strerror(errno));
		rmdir(l->path);
		free(l);
		return NULL;
	}
	/* Optional: without it the child joins through cgroup.procs. */
	l->dir_fd = open(l->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return l;
}

static void close_fds(struct pcg_leaf *l)
{
	if (l->procs_fd >= 0)
		close(l->procs_fd);
	if (l->dir_fd >= 0)
		close(l->dir_fd);
	l->procs_fd = l->dir_fd = -1;
}

static double run_gap(void)
{
	double g = 4 * last_life;

	return g < RUN_GAP_MIN ? RUN_GAP_MIN : g > RUN_GAP_MAX ? RUN_GAP_MAX : g;
}

static size_t pool_target(const struct pool *pl, double now)
{
	double gap = run_gap();
	unsigned d = 0;

	if (quiet || !active || pl->run < RUN_MIN || now - pl->last >= gap)
		return 0;
	for (unsigned i = 0; i < POOL_MAX && i < pl->n_taken; i++)
		if (now - pl->taken[i] < gap)
			d++;
	return d < POOL_MAX ? d : POOL_MAX;
}

/*
 * A job on the worker pool: make spares for `pool`, or remove `leaves`.
 * Kept on a list so that a stopping envd can wait for it and clean up what
 * it made (its completion would never run).
 */
struct job {
	struct job *next;
	struct pool *pool;       /* refill; NULL for a removal */
	const char *parent;
	size_t want;
	struct pcg_leaf *leaves; /* made, or to remove */
	int finished;            /* set by the worker, atomically */
};

static struct job *jobs_out;
static int stopping;             /* read by the workers */

static void job_unlink(struct job *j)
{
	for (struct job **pp = &jobs_out; *pp; pp = &(*pp)->next)
		if (*pp == j) {
			*pp = j->next;
			break;
		}
	jobs--;
}

static void refill_work(void *arg)
{
	struct job *r = arg;
	char err[PATH_MAX + 160];

	for (size_t i = 0; i < r->want && !__atomic_load_n(&stopping, __ATOMIC_RELAXED); i++) {
		struct pcg_leaf *l = leaf_make(r->parent, err, sizeof(err));

		if (!l)
			break;
		l->next = r->leaves;
		r->leaves = l;
	}
	__atomic_store_n(&r->finished, 1, __ATOMIC_RELEASE);
}

static void doom(struct pcg_leaf *l);

static void refill_done(void *arg)
{
	struct job *r = arg;
	struct pool *pl = r->pool;
	size_t got = 0;

	job_unlink(r);
	pl->filling = false;
	for (struct pcg_leaf *l = r->leaves, *next; l; l = next) {
		next = l->next;
		got++;
		if (quiet || !active) {
			doom(l);
			continue;
		}
		l->next = pl->spare;
		pl->spare = l;
		pl->n++;
	}
	free(r);
	/* A job that made nothing (mkdir failing) is not retried at once. */
	if (got)
		housekeep();
}

/* Start a job for the spares the pool lacks, unless one is out. */
static void pool_fill(struct pool *pl, double now)
{
	size_t target = pool_target(pl, now);
	struct job *r;

	if (pl->filling || pl->n >= target)
		return;
	r = calloc(1, sizeof(*r));
	if (!r)
		return;
	r->pool = pl;
	r->parent = pl->parent;
	r->want = target - pl->n < POOL_JOB ? target - pl->n : POOL_JOB;
	r->next = jobs_out;
	jobs_out = r;
	jobs++;
	if (worker_submit(refill_work, refill_done, r) < 0) {
		job_unlink(r);
		free(r); /* the pool is busy: the next start makes its own leaf */
		return;
	}
	pl->filling = true;
}

struct pcg_leaf *pcg_leaf_new(bool pty, char *err, size_t errlen)
{
	struct pool *pl = &pools[pty ? 1 : 0];
	double now = mono_s();
	struct pcg_leaf *l = pl->spare;

	pl->run = now - pl->last < run_gap() ? pl->run + 1 : 1;
	pl->last = now;
	pl->taken[pl->n_taken++ % POOL_MAX] = now;
	if (l) {
		pl->spare = l->next;
		pl->n--;
		l->next = NULL;
	} else {
		l = leaf_make(pl->parent, err, errlen);
		if (!l)
			return NULL;
	}
	l->t_taken = now;
	pool_fill(pl, now);
	housekeep();
	return l;
}

int pcg_leaf_procs_fd(const struct pcg_leaf *l)
{
	return l->procs_fd;
}

int pcg_leaf_dir_fd(const struct pcg_leaf *l)
{
	return l->dir_fd;
}

const char *pcg_leaf_path(const struct pcg_leaf *l)
{
	return l->path;
}

static int set_limit(struct pcg_leaf *l, unsigned need, const char *ctl, const char *file,
		     const char *val, char *err, size_t errlen)
{
	int rc;

	if (!(controllers & need)) {
		snprintf(err, errlen, "cannot apply the %s limit: the %s controller is not available "
				      "to process cgroups", file, ctl);
		return -EOPNOTSUPP;
	}
	rc = pcg_write(l->path, file, val);
	if (rc < 0)
		snprintf(err, errlen, "cannot apply the %s limit (%s): %s", file, val,
			 go_strerror(-rc));
	return rc == -ENOENT ? -EOPNOTSUPP : rc;
}

int pcg_leaf_limit(struct pcg_leaf *l, const struct pcg_limits *lim, char *err, size_t errlen)
{
	char v[64];
	int rc;

	if (lim->memory_max) {
		snprintf(v, sizeof(v), "%llu", (unsigned long long)lim->memory_max);
		rc = set_limit(l, PCG_MEMORY, "memory", "memory.max", v, err, errlen);
		if (rc < 0)
			return rc;
		/* Over the limit means OOM, not swapping; and the whole command
		 * goes, not one random member of it. Both best effort. */
		pcg_write(l->path, "memory.swap.max", "0");
		pcg_write(l->path, "memory.oom.group", "1");
	}
	if (lim->cpu_percent) {
		/* 100% = one core: quota per 100 ms period. */
		snprintf(v, sizeof(v), "%llu 100000", (unsigned long long)lim->cpu_percent * 1000);
		rc = set_limit(l, PCG_CPU, "cpu", "cpu.max", v, err, errlen);
		if (rc < 0)
			return rc;
	}
	if (lim->pids_max) {
		snprintf(v, sizeof(v), "%u", lim->pids_max);
		rc = set_limit(l, PCG_PIDS, "pids", "pids.max", v, err, errlen);
		if (rc < 0)
			return rc;
	}
	return 0;
}

bool pcg_leaf_populated(const struct pcg_leaf *l)
{
	char buf[256];

	if (pcg_read(l->path, "cgroup.events", buf, sizeof(buf)) < 0)
		return false;
	return pcg_key(buf, "populated") == 1;
}

int pcg_leaf_kill(struct pcg_leaf *l)
{
	char buf[4096];
	int rc = pcg_write(l->path, "cgroup.kill", "1");

	if (rc != -ENOENT)
		return rc;
	/*
	 * Kernels before 5.14 have no cgroup.kill: freeze the leaf so nothing
	 * can fork while we walk it, kill every member, thaw so the kills are
	 * delivered. Repeated in case a member was mid-clone when frozen.
	 */
	pcg_write(l->path, "cgroup.freeze", "1");
	for (int round = 0; round < 4; round++) {
		bool any = false;

		if (pcg_read(l->path, "cgroup.procs", buf, sizeof(buf)) <= 0)
			break;
		char *save = NULL;

		for (char *t = strtok_r(buf, "\n", &save); t; t = strtok_r(NULL, "\n", &save)) {
			long pid = strtol(t, NULL, 10);

			if (pid > 0 && kill((pid_t)pid, SIGKILL) == 0)
				any = true;
		}
		if (!any)
			break;
	}
	pcg_write(l->path, "cgroup.freeze", "0");
	return 0;
}

void pcg_leaf_usage(const struct pcg_leaf *l, struct pcg_usage *u)
{
	char buf[1024];
	long long v;

	memset(u, 0, sizeof(*u));
	if (pcg_read(l->path, "cpu.stat", buf, sizeof(buf)) > 0) {
		v = pcg_key(buf, "user_usec");
		u->user_usec = v > 0 ? (uint64_t)v : 0;
		v = pcg_key(buf, "system_usec");
		u->system_usec = v > 0 ? (uint64_t)v : 0;
	}
	if (pcg_read(l->path, "memory.peak", buf, sizeof(buf)) > 0)
		u->memory_peak = strtoull(buf, NULL, 10);
	if (pcg_read(l->path, "memory.events", buf, sizeof(buf)) > 0)
		u->oom_killed = pcg_key(buf, "oom_kill") > 0 || pcg_key(buf, "oom_group_kill") > 0;
}

/* ---- release: remove once empty, in batches off the loop ---- */

static void leaf_free(struct pcg_leaf *l)
{
	if (l->wd >= 0 && ino_fd >= 0)
		inotify_rm_watch(ino_fd, l->wd);
	close_fds(l);
	free(l);
}

static void ino_cb(EV_P_ ev_io *w, int revents);
static void sweep_cb(EV_P_ ev_timer *w, int revents);
static void batch_cb(EV_P_ ev_timer *w, int revents);
static void keep_cb(EV_P_ ev_timer *w, int revents);

static void timers(void)
{
	if (timers_init)
		return;
	timers_init = true;
	ev_timer_init(&sweep_w, sweep_cb, SWEEP_S, SWEEP_S);
	ev_timer_init(&batch_w, batch_cb, BATCH_S, 0.);
	ev_timer_init(&keep_w, keep_cb, HOUSEKEEP_S, HOUSEKEEP_S);
}

/* Unpopulated (or never used): queue for the next removal batch. */
static void doom(struct pcg_leaf *l)
{
	timers();
	close_fds(l);
	l->next = doomed;
	doomed = l;
	n_doomed++;
	if (!ev_is_active(&batch_w) && !ev_is_pending(&batch_w)) {
		ev_timer_set(&batch_w, BATCH_S, 0.);
		ev_timer_start(envd_loop, &batch_w);
	}
}

/* Still populated (a background child lives on): watch until it empties. */
static void linger(struct pcg_leaf *l)
{
	if (ino_fd < 0) {
		ino_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
		if (ino_fd >= 0) {
			ev_io_init(&ino_w, ino_cb, ino_fd, EV_READ);
			ev_io_start(envd_loop, &ino_w);
			/* Housekeeping must not keep the loop alive on its own. */
			ev_unref(envd_loop);
		}
	}
	if (ino_fd >= 0 && l->wd < 0) {
		char ev[PATH_MAX + 96];

		snprintf(ev, sizeof(ev), "%s/cgroup.events", l->path);
		l->wd = inotify_add_watch(ino_fd, ev, IN_MODIFY);
	}
	l->next = lingering;
	lingering = l;
	n_lingering++;
	timers();
	if (!ev_is_active(&sweep_w))
		ev_timer_again(envd_loop, &sweep_w);
}

static void remove_leaves(struct pcg_leaf *list)
{
	for (struct pcg_leaf *l = list; l; l = l->next)
		l->rm_err = rmdir(l->path) == 0 ? 0 : errno;
}

static void remove_work(void *arg)
{
	struct job *j = arg;

	remove_leaves(j->leaves);
	__atomic_store_n(&j->finished, 1, __ATOMIC_RELEASE);
}

/* rmdir's verdict: gone, still populated, or never removable. */
static void removed(struct pcg_leaf *l)
{
	if (l->rm_err == EBUSY) {
		linger(l);
		return;
	}
	if (l->rm_err && l->rm_err != ENOENT)
		log_info("cgroup", "cannot remove %s: %s", l->path, go_strerror(l->rm_err));
	leaf_free(l);
}

static void removed_all(struct pcg_leaf *list)
{
	for (struct pcg_leaf *l = list, *next; l; l = next) {
		next = l->next;
		removed(l);
	}
}

static void remove_done(void *arg)
{
	struct job *j = arg;

	job_unlink(j);
	removed_all(j->leaves);
	free(j);
	if (doomed && !ev_is_active(&batch_w)) {
		ev_timer_set(&batch_w, BATCH_S, 0.);
		ev_timer_start(envd_loop, &batch_w);
	}
}

static void batch_cb(EV_P_ ev_timer *w, int revents)
{
	struct pcg_leaf *batch = doomed;
	struct job *j;

	if (!batch)
		return;
	doomed = NULL;
	n_doomed = 0;
	j = quiet ? NULL : calloc(1, sizeof(*j));
	if (j) {
		j->leaves = batch;
		j->next = jobs_out;
		jobs_out = j;
		jobs++;
		if (worker_submit(remove_work, remove_done, j) == 0)
			return;
		job_unlink(j);
		free(j);
	}
	/* The worker pool is full (or an upgrade waits): remove here. */
	remove_leaves(batch);
	removed_all(batch);
}

static void sweep(void)
{
	for (struct pcg_leaf **pp = &lingering; *pp;) {
		struct pcg_leaf *l = *pp;

		if (!pcg_leaf_populated(l)) {
			*pp = l->next;
			n_lingering--;
			if (l->wd >= 0 && ino_fd >= 0)
				inotify_rm_watch(ino_fd, l->wd);
			l->wd = -1;
			doom(l);
			continue;
		}
		pp = &l->next;
	}
	if (!lingering)
		ev_timer_stop(envd_loop, &sweep_w);
}

static void ino_cb(EV_P_ ev_io *w, int revents)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));

	/* Which leaf changed matters little: checking them all is cheap. */
	while (read(ino_fd, buf, sizeof(buf)) > 0)
		;
	sweep();
}

static void sweep_cb(EV_P_ ev_timer *w, int revents)
{
	sweep();
}

/* Spares beyond the demand go; missing ones are made. */
static void housekeep(void)
{
	double now = mono_s();
	bool any = false;

	timers();
	for (int i = 0; i < 2; i++) {
		struct pool *pl = &pools[i];
		size_t target = pool_target(pl, now);

		while (pl->n > target) {
			struct pcg_leaf *l = pl->spare;

			pl->spare = l->next;
			pl->n--;
			doom(l);
		}
		pool_fill(pl, now);
		if (pl->n || pl->filling)
			any = true;
	}
	if (any && !ev_is_active(&keep_w)) {
		ev_timer_again(envd_loop, &keep_w);
		/* Like the sweep: spares alone do not keep the loop running. */
		ev_unref(envd_loop);
	} else if (!any && ev_is_active(&keep_w)) {
		ev_ref(envd_loop);
		ev_timer_stop(envd_loop, &keep_w);
	}
}

static void keep_cb(EV_P_ ev_timer *w, int revents)
{
	housekeep();
}

void pcg_leaf_release(struct pcg_leaf *l)
{
	if (!l)
		return;
	if (l->t_taken > 0)
		last_life = mono_s() - l->t_taken;
	doom(l);
}

void pcg_release_path(const char *path)
{
	struct pcg_leaf *l;

	if (!path || !*path || strlen(path) >= sizeof(l->path))
		return;
	l = calloc(1, sizeof(*l));
	if (!l)
		return;
	l->wd = l->procs_fd = l->dir_fd = -1;
	snprintf(l->path, sizeof(l->path), "%s", path);
	doom(l);
}

void pcg_quiesce(bool on)
{
	quiet = on;
	/* Quiet: the pools' target is 0, so their spares are doomed now. */
	housekeep();
}

bool pcg_idle(void)
{
	return jobs == 0;
}

void pcg_owned_leaves(void (*fn)(void *ud, const char *path), void *ud)
{
	for (int i = 0; i < 2; i++)
		for (struct pcg_leaf *l = pools[i].spare; l; l = l->next)
			fn(ud, l->path);
	for (struct pcg_leaf *l = doomed; l; l = l->next)
		fn(ud, l->path);
	for (struct pcg_leaf *l = lingering; l; l = l->next)
		fn(ud, l->path);
}

static void save_leaf(void *ud, const char *path)
{
	struct handover *h = ud;

	/* Borrowed: the module's lists are unchanged until the record is packed. */
	HANDOVER_PUSH(h, h->st->cgroup_leaves, h->st->n_cgroup_leaves, (char *)path);
}

void pcg_handover_save(struct handover *h)
{
	pcg_owned_leaves(save_leaf, h);
}

void pcg_handover_restore(struct handover *h)
{
	for (size_t i = 0; i < h->st->n_cgroup_leaves; i++)
		pcg_release_path(h->st->cgroup_leaves[i]);
}

void pcg_shutdown(void)
{
	quiet = true;
	__atomic_store_n(&stopping, 1, __ATOMIC_RELAXED);
	housekeep();
	/* The loop has stopped: jobs still out never complete. Wait for each
	 * (bounded: a worker stuck in the kernel is left to the exit), then
	 * remove what it made or was to remove. */
	for (struct job *j = jobs_out, *next; j; j = next) {
		struct timespec ms = { 0, 1000000 };

		next = j->next;
		for (int i = 0; i < 2000 && !__atomic_load_n(&j->finished, __ATOMIC_ACQUIRE); i++)
			nanosleep(&ms, NULL);
		if (!__atomic_load_n(&j->finished, __ATOMIC_ACQUIRE))
			continue;
		for (struct pcg_leaf *l = j->leaves; l; l = l->next)
			close_fds(l);
		remove_leaves(j->leaves);
		for (struct pcg_leaf *l = j->leaves, *ln; l; l = ln) {
			ln = l->next;
			leaf_free(l);
		}
		free(j);
	}
	jobs_out = NULL;
	jobs = 0;
	if (doomed) {
		struct pcg_leaf *batch = doomed;

		doomed = NULL;
		n_doomed = 0;
		remove_leaves(batch);
		for (struct pcg_leaf *l = batch, *ln; l; l = ln) {
			ln = l->next;
			leaf_free(l);
		}
	}
	for (struct pcg_leaf *l = lingering, *ln; l; l = ln) {
		ln = l->next;
		leaf_free(l);
	}
	lingering = NULL;
	n_lingering = 0;
}

size_t pcg_spares(void)
{
	return pools[0].n + pools[1].n;
}

size_t pcg_lingering(void)
{
	return n_lingering;
}

/* ---- live upgrade ---- */

struct pcg_leaf *pcg_leaf_adopt(const char *path)
{
	struct pcg_leaf *l;
	char procs[PATH_MAX + 96];

	if (!active || !path || !*path || strlen(path) >= sizeof(l->path))
		return NULL;
	l = calloc(1, sizeof(*l));
	if (!l)
		return NULL;
	l->wd = -1;
	snprintf(l->path, sizeof(l->path), "%s", path);
	snprintf(procs, sizeof(procs), "%s/cgroup.procs", l->path);
	l->procs_fd = open(procs, O_WRONLY | O_CLOEXEC);
	if (l->procs_fd < 0) {
		free(l);
		return NULL;
	}
	l->dir_fd = open(l->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return l;
}
