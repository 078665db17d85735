/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/entry.h"
#include "fs/listdir.h"
#include "base/loop.h"
#include <errno.h>
#include "fs/watch.h"
#include "base/worker.h"

#define E(t) FILESYSTEM__EVENT_TYPE__EVENT_TYPE_##t

Test(fs_watch, event_mapping)
{
	Filesystem__EventType out[5];
	cr_assert_eq(fs_watch_map(IN_CREATE, out), 1);
	cr_assert_eq(out[0], E(CREATE));
	cr_assert_eq(fs_watch_map(IN_MOVED_TO, out), 1);
	cr_assert_eq(out[0], E(CREATE));
	cr_assert_eq(fs_watch_map(IN_MODIFY, out), 1);
	cr_assert_eq(out[0], E(WRITE));
	cr_assert_eq(fs_watch_map(IN_DELETE, out), 1);
	cr_assert_eq(out[0], E(REMOVE));
	cr_assert_eq(fs_watch_map(IN_DELETE_SELF, out), 1);
	cr_assert_eq(out[0], E(REMOVE));
	cr_assert_eq(fs_watch_map(IN_MOVED_FROM, out), 1);
	cr_assert_eq(out[0], E(RENAME));
	cr_assert_eq(fs_watch_map(IN_MOVE_SELF, out), 1);
	cr_assert_eq(out[0], E(RENAME));
	cr_assert_eq(fs_watch_map(IN_ATTRIB, out), 1);
	cr_assert_eq(out[0], E(CHMOD));
	cr_assert_eq(fs_watch_map(IN_ACCESS | IN_OPEN | IN_CLOSE_WRITE, out), 0);
	/* Several operations in one raw event: CREATE, RENAME, CHMOD, WRITE, REMOVE. */
	cr_assert_eq(fs_watch_map(IN_DELETE | IN_MODIFY | IN_ATTRIB | IN_MOVED_FROM | IN_CREATE, out), 5);
	cr_assert_eq(out[0], E(CREATE));
	cr_assert_eq(out[1], E(RENAME));
	cr_assert_eq(out[2], E(CHMOD));
	cr_assert_eq(out[3], E(WRITE));
	cr_assert_eq(out[4], E(REMOVE));
}

struct rec {
	char names[256][128];
	int types[256];
	bool entry[256];
	int n;
};

static void on_ev(void *ud, const char *name, const char *path, Filesystem__EventType type,
		  Filesystem__EntryInfo *entry)
{
	struct rec *r = ud;
	if (r->n < 256) {
		snprintf(r->names[r->n], sizeof(r->names[0]), "%s", name);
		r->types[r->n] = type;
		r->entry[r->n] = entry != NULL;
		r->n++;
	}
	fs_entry_free(entry);
}

static int find(const struct rec *r, const char *name, int type)
{
	for (int i = 0; i < r->n; i++)
		if (!strcmp(r->names[i], name) && r->types[i] == type)
			return i;
	return -1;
}

static bool has(const struct rec *r, const char *name, int type)
{
	for (int i = 0; i < r->n; i++)
		if (!strcmp(r->names[i], name) && r->types[i] == type)
			return true;
	return false;
}

/*
 * Events that come once the kernel lets go of a removed directory (its
 * watch's IN_IGNORED, its IN_DELETE_SELF) may trail the command that
 * removed it on a loaded machine, and events that need the filesystem (a
 * new directory of a recursive watch, an entry) come from a worker job
 * through the loop: drain and run the loop until COND holds, for two
 * minutes at most, then let the assertion judge.
 */
#define DRAIN_UNTIL(w, cond)                                          \
	do {                                                          \
		fs_watch_drain(w);                                    \
		ev_run(envd_loop, EVRUN_NOWAIT);                      \
		for (int i_ = 0; i_ < 12000 && !(cond); i_++) {       \
			usleep(10000);                                \
			fs_watch_drain(w);                            \
			ev_run(envd_loop, EVRUN_NOWAIT);              \
		}                                                     \
	} while (0)

/* Until the watch has handed on everything it read. */
#define SETTLE(w) DRAIN_UNTIL(w, !fs_watch_busy(w))

static char dir[64];

static void setup(void)
{
	strcpy(dir, "/tmp/fs_watch_test_XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
}

static void teardown(void)
{
	char err[512];
	fs_remove_all(dir, err, sizeof(err));
}

static void sh(const char *fmt, const char *arg)
{
	char cmd[PATH_MAX * 3];
	snprintf(cmd, sizeof(cmd), fmt, arg, arg, arg);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
}

TestSuite(fs_watch_live, .init = setup, .fini = teardown);

Test(fs_watch_live, check_errors)
{
	char err[1024], p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/missing", dir);
	cr_assert_eq(fs_watch_check(p, false, err, sizeof(err)), -ENOENT);
	sh("touch %s/file", dir);
	snprintf(p, sizeof(p), "%s/file", dir);
	cr_assert_eq(fs_watch_check(p, false, err, sizeof(err)), -ENOTDIR);
	cr_assert_eq(fs_watch_check(dir, false, err, sizeof(err)), 0);
}

Test(fs_watch_live, non_recursive)
{
	struct rec *r = calloc(1, sizeof(*r));
	struct fs_watch *w;
	char err[1024];

	sh("mkdir %s/sub", dir);
	cr_assert_eq(fs_watch_new(dir, false, false, on_ev, NULL, r, &w, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(fs_watch_count(w), 1);
	sh("echo hi > %s/a.txt && echo more >> %s/a.txt && chmod 600 %s/a.txt", dir);
	sh("mv %s/a.txt %s/b.txt && touch %s/sub/inner", dir);
	sh("rm %s/b.txt", dir);
	fs_watch_drain(w);
	cr_assert(has(r, "a.txt", E(CREATE)));
	cr_assert(has(r, "a.txt", E(WRITE)));
	cr_assert(has(r, "a.txt", E(CHMOD)));
	cr_assert(has(r, "a.txt", E(RENAME)));
	cr_assert(has(r, "b.txt", E(CREATE)));
	cr_assert(has(r, "b.txt", E(REMOVE)));
	for (int i = 0; i < r->n; i++)
		cr_assert(strncmp(r->names[i], "sub/", 4) != 0, "non-recursive saw %s", r->names[i]);
	fs_watch_free(w);
	free(r);
}

Test(fs_watch_live, recursive_new_subdirs_and_renames)
{
	struct rec *r = calloc(1, sizeof(*r));
	struct fs_watch *w;
	char err[1024];

	sh("mkdir -p %s/pre/old", dir);
	cr_assert_eq(fs_watch_new(dir, true, false, on_ev, NULL, r, &w, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(fs_watch_count(w), 3);
	cr_assert_eq(r->n, 0); /* nothing for pre-existing entries */
	sh("touch %s/pre/old/f", dir);
	sh("mkdir -p %s/x/y/z && touch %s/x/y/z/leaf", dir);
	DRAIN_UNTIL(w, has(r, "x/y/z/leaf", E(CREATE)) && fs_watch_count(w) == 6);
	SETTLE(w);
	cr_assert(has(r, "pre/old/f", E(CREATE)));
	cr_assert(has(r, "x", E(CREATE)));
	cr_assert(has(r, "x/y", E(CREATE)));
	cr_assert(has(r, "x/y/z", E(CREATE)));
	cr_assert(has(r, "x/y/z/leaf", E(CREATE)));
	cr_assert_eq(fs_watch_count(w), 6);

	/* rename within the tree: the watch follows under the new name */
	r->n = 0;
	sh("mv %s/x %s/renamed", dir);
	SETTLE(w);
	sh("touch %s/renamed/y/after", dir);
	DRAIN_UNTIL(w, has(r, "renamed/y/after", E(CREATE)));
	cr_assert(has(r, "x", E(RENAME)));
	cr_assert(has(r, "renamed", E(CREATE)));
	cr_assert(has(r, "renamed/y/after", E(CREATE)));

	/* deleting a watched subdir reports it once, from the parent */
	r->n = 0;
	sh("rm -r %s/pre", dir);
	DRAIN_UNTIL(w, has(r, "pre", E(REMOVE)) && has(r, "pre/old", E(REMOVE)));
	int removes = 0;
	for (int i = 0; i < r->n; i++)
		removes += !strcmp(r->names[i], "pre") && r->types[i] == E(REMOVE);
	cr_assert_eq(removes, 1);
	cr_assert(has(r, "pre/old", E(REMOVE)));
	DRAIN_UNTIL(w, fs_watch_count(w) == 4);
	cr_assert_eq(fs_watch_count(w), 4);
	fs_watch_free(w);
	free(r);
}

Test(fs_watch_live, root_removed_and_moved)
{
	struct rec *r = calloc(1, sizeof(*r));
	struct fs_watch *w;
	char err[1024], sub[PATH_MAX];

	snprintf(sub, sizeof(sub), "%s/root", dir);
	cr_assert_eq(mkdir(sub, 0755), 0);
	cr_assert_eq(fs_watch_new(sub, false, false, on_ev, NULL, r, &w, err, sizeof(err)), 0);
	cr_assert_eq(rmdir(sub), 0);
	DRAIN_UNTIL(w, has(r, ".", E(REMOVE)));
	cr_assert(has(r, ".", E(REMOVE)));
	fs_watch_free(w);

	r->n = 0;
	cr_assert_eq(mkdir(sub, 0755), 0);
	cr_assert_eq(fs_watch_new(sub, true, false, on_ev, NULL, r, &w, err, sizeof(err)), 0);
	sh("mv %s/root %s/moved", dir);
	DRAIN_UNTIL(w, has(r, ".", E(RENAME)) && fs_watch_count(w) == 0);
	cr_assert(has(r, ".", E(RENAME)));
	cr_assert_eq(fs_watch_count(w), 0);
	fs_watch_free(w);
	free(r);
}

struct count {
	int total, overflow;
};

static void on_count(void *ud, const char *name, const char *path, Filesystem__EventType type,
		     Filesystem__EntryInfo *entry)
{
	struct count *c = ud;
	fs_entry_free(entry);
	c->total++;
	if (type == E(OVERFLOW)) {
		c->overflow++;
		cr_assert_str_eq(name, ".");
	}
}

/* More events than the kernel queue holds: the loss is reported, not silent. */
Test(fs_watch_live, queue_overflow_is_reported)
{
	struct count c = { 0 };
	struct fs_watch *w;
	char err[1024], p[128];
	long max = 16384;
	FILE *f = fopen("/proc/sys/fs/inotify/max_queued_events", "r");

	if (f) {
		if (fscanf(f, "%ld", &max) != 1)
			max = 16384;
		fclose(f);
	}
	cr_assert_lt(max, 200000, "max_queued_events too large for this test");
	cr_assert_eq(fs_watch_new(dir, false, false, on_count, NULL, &c, &w, err, sizeof(err)), 0);
	for (long i = 0; i < max + 100; i++) {
		snprintf(p, sizeof(p), "%s/f%ld", dir, i);
		int fd = open(p, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
		cr_assert_geq(fd, 0);
		close(fd);
	}
	fs_watch_drain(w);
	cr_assert_eq(c.overflow, 1);
	cr_assert_geq(c.total, max);
	fs_watch_free(w);
}

/* Events after one that waits for the job (a new directory) wait too. */
Test(fs_watch_live, job_keeps_order)
{
	struct rec *r = calloc(1, sizeof(*r));
	struct fs_watch *w;
	char err[1024];

	cr_assert_eq(fs_watch_new(dir, true, false, on_ev, NULL, r, &w, err, sizeof(err)), 0, "%s", err);
	sh("mkdir %s/nd && touch %s/nd/in && touch %s/plain", dir);
	DRAIN_UNTIL(w, has(r, "plain", E(CREATE)) && has(r, "nd/in", E(CREATE)));
	SETTLE(w);
	cr_assert_geq(find(r, "nd", E(CREATE)), 0);
	cr_assert_lt(find(r, "nd", E(CREATE)), find(r, "plain", E(CREATE)));
	cr_assert_lt(find(r, "nd/in", E(CREATE)), find(r, "plain", E(CREATE)));
	cr_assert_eq(fs_watch_count(w), 2);
	/* With nothing waiting, an event needing no filesystem is at once. */
	r->n = 0;
	sh("rm %s/plain", dir);
	fs_watch_drain(w);
	cr_assert(has(r, "plain", E(REMOVE)));
	fs_watch_free(w);
	free(r);
}

/* With entries, CREATE, WRITE and CHMOD carry the entry, stat'ed in the job. */
Test(fs_watch_live, entries_from_the_job)
{
	struct rec *r = calloc(1, sizeof(*r));
	struct fs_watch *w;
	char err[1024];
	int i;

	cr_assert_eq(fs_watch_new(dir, true, true, on_ev, NULL, r, &w, err, sizeof(err)), 0, "%s", err);
	sh("mkdir -p %s/a/b", dir);
	DRAIN_UNTIL(w, has(r, "a/b", E(CREATE)));
	SETTLE(w);
	i = find(r, "a", E(CREATE));
	cr_assert_geq(i, 0);
	cr_assert(r->entry[i]);
	cr_assert(r->entry[find(r, "a/b", E(CREATE))]);
	r->n = 0;
	sh("echo x > %s/a/b/f && chmod 600 %s/a/b/f", dir);
	sh("echo y > %s/top && rm %s/top", dir);
	DRAIN_UNTIL(w, has(r, "top", E(REMOVE)));
	SETTLE(w);
	i = find(r, "a/b/f", E(CHMOD));
	cr_assert_geq(i, 0);
	cr_assert(r->entry[i]);
	cr_assert(r->entry[find(r, "a/b/f", E(CREATE))]);
	cr_assert_lt(i, find(r, "top", E(CREATE)));
	/* Removed before the job stat'ed it: the events go without. */
	cr_assert(!r->entry[find(r, "top", E(CREATE))]);
	cr_assert(!r->entry[find(r, "top", E(REMOVE))]);
	cr_assert_lt(find(r, "top", E(CREATE)), find(r, "top", E(REMOVE)));
	fs_watch_free(w);
	free(r);
}

/* Freed while its job runs: the job finishes on its own, delivers nothing
 * and frees the watch (the sanitizer build checks the memory). */
Test(fs_watch_live, free_while_job_in_flight)
{
	struct rec *r = calloc(1, sizeof(*r));
	struct fs_watch *w;
	char err[1024];

	cr_assert_eq(fs_watch_new(dir, true, true, on_ev, NULL, r, &w, err, sizeof(err)), 0, "%s", err);
	sh("mkdir -p %s/a/b/c/d && touch %s/a/b/c/d/e", dir);
	fs_watch_drain(w);
	cr_assert(fs_watch_busy(w));
	fs_watch_free(w);
	for (int i = 0; i < 12000 && worker_pending(); i++) {
		usleep(10000);
		ev_run(envd_loop, EVRUN_NOWAIT);
	}
	cr_assert_eq(worker_pending(), 0);
	cr_assert_eq(r->n, 0);
	free(r);
}
