/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>

#include "changes/inotree.h"
#include "changes/journal.h"

/* A fake filesystem: entries as absolute paths, directories end in '/'. */
static const char *fs[64];
static size_t n_fs;
/* Watches: wd i+1 is the path watched[i]. */
static char *watched[256];
static size_t n_watched;
static int removed[256];
static size_t n_removed;
/* What the sink heard. */
static char heard[64][512];
static size_t n_heard;
static int lost;

static void reset(void)
{
	for (size_t i = 0; i < n_watched; i++)
		free(watched[i]);
	n_fs = n_watched = n_removed = n_heard = 0;
	lost = 0;
}

static void fs_add(const char *p)
{
	fs[n_fs++] = p;
}

static int f_add_watch(void *ud, const char *path)
{
	for (size_t i = 0; i < n_watched; i++)
		if (strcmp(watched[i], path) == 0)
			return (int)i + 1;
	watched[n_watched++] = strdup(path);
	return (int)n_watched;
}

static void f_rm_watch(void *ud, int wd)
{
	removed[n_removed++] = wd;
}

static int f_list(void *ud, const char *path, int (*fn)(void *ctx, const char *name, bool descend), void *ctx)
{
	size_t pl = strcmp(path, "/") == 0 ? 0 : strlen(path);

	for (size_t i = 0; i < n_fs; i++) {
		const char *e = fs[i];
		size_t el = strlen(e);
		bool dir = e[el - 1] == '/';
		size_t nl = el - pl - 1 - (dir ? 1 : 0);
		char name[256];
		if (el <= pl + 1 || strncmp(e, path, pl) != 0 || e[pl] != '/')
			continue;
		if (memchr(e + pl + 1, '/', nl))
			continue; /* deeper */
		snprintf(name, sizeof(name), "%.*s", (int)nl, e + pl + 1);
		fn(ctx, name, dir);
	}
	return 0;
}

static int wd_of(const char *path)
{
	for (size_t i = 0; i < n_watched; i++)
		if (strcmp(watched[i], path) == 0)
			return (int)i + 1;
	cr_assert_fail("%s is not watched", path);
	return -1;
}

static void s_change(void *ud, const char *path, unsigned kinds, bool appeared, bool dir, int64_t since_ns)
{
	char k[16] = "";

	if (kinds & JK_CREATE)
		strcat(k, "C");
	if (kinds & JK_WRITE)
		strcat(k, "W");
	if (kinds & JK_REMOVE)
		strcat(k, "D");
	if (kinds & JK_RENAME)
		strcat(k, "R");
	if (kinds & JK_ATTRIB)
		strcat(k, "A");
	snprintf(heard[n_heard++], sizeof(heard[0]), "%s %s%s%s", k, path, dir ? "/" : "",
		 since_ns ? " since" : "");
}

static void s_lost(void *ud)
{
	lost++;
}

static const struct inotree_ops ops = { .add_watch = f_add_watch, .rm_watch = f_rm_watch, .list = f_list };
static const struct inotree_sink sink = { .change = s_change, .lost = s_lost };

/* Records as read(2) gives them. */
static union {
	struct inotify_event align;
	char b[8192];
} rec;
static size_t rec_len;

static void ev(int wd, uint32_t mask, uint32_t cookie, const char *name)
{
	struct inotify_event e = { .wd = wd, .mask = mask, .cookie = cookie };
	size_t nl = name ? strlen(name) + 1 : 0;

	e.len = (uint32_t)((nl + 15) / 16 * 16);
	memcpy(rec.b + rec_len, &e, sizeof(e));
	memset(rec.b + rec_len + sizeof(e), 0, e.len);
	if (name)
		memcpy(rec.b + rec_len + sizeof(e), name, nl);
	rec_len += sizeof(e) + e.len;
}

static void feed(struct inotree *t)
{
	inotree_feed(t, rec.b, rec_len);
	rec_len = 0;
}

static bool heard_line(const char *line)
{
	for (size_t i = 0; i < n_heard; i++)
		if (strcmp(heard[i], line) == 0)
			return true;
	return false;
}

static struct inotree *tree(size_t max)
{
	struct inotree *t = inotree_new(&ops, &sink, max);
	cr_assert_not_null(t);
	return t;
}

static void base_fs(void)
{
	reset();
	fs_add("/r/");
	fs_add("/r/a/");
	fs_add("/r/a/b/");
	fs_add("/r/f");
	fs_add("/r/n/");
}

Test(inotree, a_root_is_watched_without_reports)
{
	base_fs();
	struct inotree *t = tree(100);
	cr_assert_eq(inotree_add_root(t, "/r", 0), 0);
	cr_expect_eq(inotree_watches(t), 4);
	cr_expect_eq(n_heard, 0);
	cr_expect_eq(lost, 0);
	cr_expect_eq(inotree_add_root(t, "/r/a", 0), 1, "below a root: nothing added");
	cr_expect_eq(inotree_watches(t), 4);
	inotree_free(t);
}

Test(inotree, a_new_directory_is_watched_and_listed)
{
	base_fs();
	struct inotree *t = tree(100);
	inotree_add_root(t, "/r", 0);
	fs_add("/r/m/");
	fs_add("/r/m/k/");
	fs_add("/r/m/k/f");
	ev(wd_of("/r"), IN_CREATE | IN_ISDIR, 0, "m");
	feed(t);
	cr_expect(heard_line("C /r/m/"));
	cr_expect(heard_line("C /r/m/k/"), "made before its parent's watch existed");
	cr_expect(heard_line("C /r/m/k/f"));
	cr_expect_eq(n_heard, 3);
	cr_expect_eq(inotree_watches(t), 6);
	ev(wd_of("/r/m/k"), IN_MODIFY, 0, "f");
	feed(t);
	cr_expect_str_eq(heard[3], "W /r/m/k/f");
	inotree_free(t);
}

Test(inotree, a_rename_pairs_by_cookie_and_moves_the_watches)
{
	base_fs();
	struct inotree *t = tree(100);
	inotree_add_root(t, "/r", 0);
	int a = wd_of("/r/a"), b = wd_of("/r/a/b");
	ev(wd_of("/r"), IN_MOVED_FROM | IN_ISDIR, 7, "a");
	ev(wd_of("/r/n"), IN_MOVED_TO | IN_ISDIR, 7, "z");
	feed(t);
	cr_expect_not(inotree_pending(t));
	cr_expect_eq(n_heard, 2);
	cr_expect_str_eq(heard[0], "DR /r/a/");
	cr_expect_str_eq(heard[1], "CR /r/n/z/");
	ev(a, IN_CREATE, 0, "x");
	ev(b, IN_ATTRIB, 0, "y");
	feed(t);
	cr_expect_str_eq(heard[2], "C /r/n/z/x", "got %s", heard[2]);
	cr_expect_str_eq(heard[3], "A /r/n/z/b/y", "got %s", heard[3]);
	cr_expect_eq(inotree_watches(t), 4);
	cr_expect_eq(n_removed, 0);
	inotree_free(t);
}

Test(inotree, a_half_move_is_a_delete_or_a_create)
{
	base_fs();
	struct inotree *t = tree(100);
	inotree_add_root(t, "/r", 0);
	ev(wd_of("/r"), IN_MOVED_FROM | IN_ISDIR, 9, "a");
	feed(t);
	cr_expect(inotree_pending(t));
	cr_expect_eq(n_heard, 0);
	inotree_flush(t);
	cr_expect_not(inotree_pending(t));
	cr_expect_str_eq(heard[0], "D /r/a/");
	cr_expect_eq(n_removed, 2, "the moved-out tree's watches are removed");
	cr_expect_eq(inotree_watches(t), 2);
	/* an event still queued for a removed watch is dropped */
	ev(wd_of("/r/a"), IN_CREATE, 0, "late");
	/* moved in from outside */
	ev(wd_of("/r"), IN_MOVED_TO, 10, "q");
	feed(t);
	cr_expect_eq(n_heard, 2);
	cr_expect_str_eq(heard[1], "C /r/q");
	inotree_free(t);
}

Test(inotree, a_directory_renamed_over_another)
{
	base_fs();
	struct inotree *t = tree(100);
	inotree_add_root(t, "/r", 0);
	int a = wd_of("/r/a");
	ev(wd_of("/r"), IN_MOVED_FROM | IN_ISDIR, 3, "a");
	ev(wd_of("/r"), IN_MOVED_TO | IN_ISDIR, 3, "n");
	ev(wd_of("/r/n"), IN_DELETE_SELF, 0, NULL);
	ev(wd_of("/r/n"), IN_IGNORED, 0, NULL);
	ev(a, IN_CREATE, 0, "x");
	feed(t);
	cr_expect_str_eq(heard[2], "C /r/n/x", "got %s", heard[2]);
	cr_expect_eq(inotree_watches(t), 3);
	inotree_free(t);
}

Test(inotree, deletes_and_ignored_watches)
{
	base_fs();
	struct inotree *t = tree(100);
	inotree_add_root(t, "/r", 0);
	int b = wd_of("/r/a/b");
	ev(b, IN_DELETE_SELF, 0, NULL);
	ev(wd_of("/r/a"), IN_DELETE | IN_ISDIR, 0, "b");
	ev(b, IN_IGNORED, 0, NULL);
	ev(b, IN_CREATE, 0, "never");
	ev(wd_of("/r"), IN_DELETE, 0, "f");
	feed(t);
	cr_expect_eq(n_heard, 2);
	cr_expect_str_eq(heard[0], "D /r/a/b/");
	cr_expect_str_eq(heard[1], "D /r/f");
	cr_expect_eq(inotree_watches(t), 3);
	/* the root's own changes, which no watched parent reports */
	ev(wd_of("/r"), IN_ATTRIB | IN_ISDIR, 0, NULL);
	feed(t);
	cr_expect_str_eq(heard[2], "A /r/");
	inotree_free(t);
}

Test(inotree, past_the_budget_changes_are_lost)
{
	base_fs();
	struct inotree *t = tree(2);
	cr_expect_eq(inotree_add_root(t, "/r", 0), 0);
	cr_expect_eq(inotree_watches(t), 2);
	cr_expect_eq(lost, 1);
	fs_add("/r/new/");
	ev(wd_of("/r"), IN_CREATE | IN_ISDIR, 0, "new");
	feed(t);
	cr_expect_str_eq(heard[0], "C /r/new/", "the directory itself is still reported");
	cr_expect_eq(lost, 2);
	cr_expect_eq(inotree_add_root(t, "/s", 0), -ENOSPC);
	inotree_free(t);
}

Test(inotree, overflow_is_a_loss)
{
	base_fs();
	struct inotree *t = tree(100);
	inotree_add_root(t, "/r", 0);
	ev(-1, IN_Q_OVERFLOW, 0, NULL);
	feed(t);
	cr_expect_eq(lost, 1);
	inotree_free(t);
}

Test(inotree, a_recent_root_offers_each_entry)
{
	base_fs();
	struct inotree *t = tree(100);
	cr_assert_eq(inotree_add_root(t, "/r", 1234), 0);
	cr_expect(heard_line("C /r/a/ since"));
	cr_expect(heard_line("C /r/a/b/ since"));
	cr_expect(heard_line("C /r/f since"));
	cr_expect_eq(n_heard, 4);
	inotree_free(t);
}

Test(inotree, root_slash_paths)
{
	reset();
	fs_add("/d/");
	struct inotree *t = tree(100);
	cr_assert_eq(inotree_add_root(t, "/", 0), 0);
	ev(wd_of("/"), IN_CREATE, 0, "x");
	ev(wd_of("/d"), IN_CREATE, 0, "y");
	feed(t);
	cr_expect_str_eq(heard[0], "C /x");
	cr_expect_str_eq(heard[1], "C /d/y");
	inotree_free(t);
}
