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
#include <unistd.h>

#include "base/errstr.h"
#include "base/log.h"
#include "base/loop.h"

/* How often lingering leaves are re-checked when inotify misses a change. */
#define SWEEP_S 5.0

struct pcg_leaf {
	struct pcg_leaf *next;   /* lingering list */
	char path[PATH_MAX + 64];
	int procs_fd;            /* cgroup.procs, O_WRONLY */
	int dir_fd;              /* the directory, for clone3(CLONE_INTO_CGROUP) */
	int wd;                  /* inotify watch on cgroup.events, or -1 */
};

static char user_dir[PATH_MAX], ptys_dir[PATH_MAX];
static bool active;
static unsigned controllers;
static unsigned long long seq;

static struct pcg_leaf *lingering;
static size_t n_lingering;
static int ino_fd = -1;
static ev_io ino_w;
static ev_timer sweep_w;

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

struct pcg_leaf *pcg_leaf_new(bool pty, char *err, size_t errlen)
{
	struct pcg_leaf *l = calloc(1, sizeof(*l));
	const char *parent = pty ? ptys_dir : user_dir;

	if (!l) {
		snprintf(err, errlen, "%s", go_strerror(ENOMEM));
		return NULL;
	}
	l->wd = -1;
	l->dir_fd = -1;
	/* Names may survive an envd restart: skip the ones in use. */
	for (int tries = 0;; tries++) {
		snprintf(l->path, sizeof(l->path), "%s/cmd-%d-%llu", parent, (int)getpid(), ++seq);
		if (mkdir(l->path, 0755) == 0)
			break;
		if (errno != EEXIST || tries > 100) {
			snprintf(err, errlen, "mkdir %s: %s", l->path, go_strerror(errno));
			free(l);
			return NULL;
		}
	}
	{
		char procs[PATH_MAX + 96];

		snprintf(procs, sizeof(procs), "%s/cgroup.procs", l->path);
		l->procs_fd = open(procs, O_WRONLY | O_CLOEXEC);
	}
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

/* ---- release: remove once empty ---- */

static void leaf_free(struct pcg_leaf *l)
{
	if (l->wd >= 0 && ino_fd >= 0)
		inotify_rm_watch(ino_fd, l->wd);
	if (l->procs_fd >= 0)
		close(l->procs_fd);
	if (l->dir_fd >= 0)
		close(l->dir_fd);
	free(l);
}

/* Try to remove; true when the leaf is gone (or can never be removed). */
static bool try_remove(struct pcg_leaf *l)
{
	if (rmdir(l->path) == 0 || errno == ENOENT)
		return true;
	if (errno == EBUSY)
		return false;
	log_info("cgroup", "cannot remove %s: %s", l->path, go_strerror(errno));
	return true;
}

static void sweep(void)
{
	for (struct pcg_leaf **pp = &lingering; *pp;) {
		struct pcg_leaf *l = *pp;

		if (!pcg_leaf_populated(l) && try_remove(l)) {
			*pp = l->next;
			n_lingering--;
			leaf_free(l);
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

void pcg_leaf_release(struct pcg_leaf *l)
{
	if (!l)
		return;
	close(l->procs_fd);
	l->procs_fd = -1;
	if (l->dir_fd >= 0)
		close(l->dir_fd);
	l->dir_fd = -1;
	if (!pcg_leaf_populated(l) && try_remove(l)) {
		leaf_free(l);
		return;
	}
	if (ino_fd < 0) {
		ino_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
		if (ino_fd >= 0) {
			ev_io_init(&ino_w, ino_cb, ino_fd, EV_READ);
			ev_io_start(envd_loop, &ino_w);
			/* Housekeeping must not keep the loop alive on its own. */
			ev_unref(envd_loop);
		}
		ev_timer_init(&sweep_w, sweep_cb, SWEEP_S, SWEEP_S);
	}
	if (ino_fd >= 0) {
		char ev[PATH_MAX + 96];

		snprintf(ev, sizeof(ev), "%s/cgroup.events", l->path);
		l->wd = inotify_add_watch(ino_fd, ev, IN_MODIFY);
	}
	l->next = lingering;
	lingering = l;
	n_lingering++;
	if (!ev_is_active(&sweep_w))
		ev_timer_again(envd_loop, &sweep_w);
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
