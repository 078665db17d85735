/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs_edit_test.c - Edit's parts that need no server: the edits applied to
 * a snapshot (fs/edit.h: in order, all or none, every refusal with its
 * message, line endings untouched), the memory budget, the replacement
 * locks and the target's state (fs/fguard.h), fwrite's last look before
 * the rename, and versions that need no wait (fs_version_stamp).
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/uptmp.h"
#include "fs/edit.h"
#include "fs/entry.h"
#include "fs/fguard.h"
#include "fs/fwrite.h"

static char msg[1024];
static struct fs_edit_result res;

#define OP(o, n) { o, sizeof(o) - 1, n, sizeof(n) - 1, false }
#define OP_ALL(o, n) { o, sizeof(o) - 1, n, sizeof(n) - 1, true }

static int apply(const char *src, bool present, const struct fs_edit_op *ops, size_t n)
{
	return fs_edit_apply(src, src ? strlen(src) : 0, present, ops, n, 1 << 20, "f.txt", &res, msg, sizeof(msg));
}

static void expect_text(const char *want)
{
	cr_assert(res.changed);
	cr_assert_eq(res.len, strlen(want), "%zu bytes, not %zu", res.len, strlen(want));
	cr_assert_eq(memcmp(res.buf, want, res.len), 0, "%.*s", (int)res.len, res.buf);
	fs_edit_result_free(&res);
}

static void teardown_budget(void)
{
	cr_assert_eq(fs_edit_mem_held(), 0, "every edit buffer was given back");
}

TestSuite(edit_apply, .fini = teardown_budget);

Test(edit_apply, one_replacement)
{
	struct fs_edit_op ops[] = { OP("beta", "BETA") };

	cr_assert_eq(apply("alpha\nbeta\ngamma\n", true, ops, 1), 0, "%s", msg);
	cr_assert_eq(res.replacements, 1);
	expect_text("alpha\nBETA\ngamma\n");
}

Test(edit_apply, in_order_each_on_the_result_before)
{
	struct fs_edit_op ops[] = { OP("a = 1", "a = 2"), OP("a = 2;", "b = 3;"), OP_ALL("x", "yy") };

	cr_assert_eq(apply("a = 1;\nx x\n", true, ops, 3), 0, "%s", msg);
	cr_assert_eq(res.replacements, 4);
	expect_text("b = 3;\nyy yy\n");
}

Test(edit_apply, all_or_none)
{
	struct fs_edit_op ops[] = { OP("alpha", "ALPHA"), OP("missing", "x") };

	cr_assert_eq(apply("alpha\n", true, ops, 2), -ESRCH);
	cr_assert_str_eq(msg, "oldText not found in f.txt (edit 2 of 2)");
	cr_assert_null(res.buf, "no result when one edit fails");
}

Test(edit_apply, not_unique_names_count_and_lines)
{
	struct fs_edit_op ops[] = { OP("foo", "bar") };

	cr_assert_eq(apply("foo\nx\nfoo foo\nfoo\n", true, ops, 1), -ENOTUNIQ);
	cr_assert_str_eq(msg, "oldText found 4 times in f.txt, on lines 1, 3 and 4: give more context to make it "
			      "unique, or set replaceAll");
	cr_assert_eq(apply("a foo\n\n\n\n\n\nfoo\nfoo\nfoo\nfoo\nfoo\n", true, ops, 1), -ENOTUNIQ);
	cr_assert(strstr(msg, "6 times") && strstr(msg, "on lines 1, 7, 8, 9, 10, ...:"), "%s", msg);
}

Test(edit_apply, replace_all_and_line_endings_untouched)
{
	struct fs_edit_op ops[] = { OP_ALL("foo", "bar") };

	cr_assert_eq(apply("foo\r\nfoofoo\r\n", true, ops, 1), 0, "%s", msg);
	cr_assert_eq(res.replacements, 3);
	expect_text("bar\r\nbarbar\r\n");
	struct fs_edit_op crlf[] = { OP("a\r\nb", "A\r\nB") };
	cr_assert_eq(apply("a\r\nb\r\n", true, crlf, 1), 0, "%s", msg);
	expect_text("A\r\nB\r\n");
	struct fs_edit_op lf[] = { OP("a\nb", "x") };
	cr_assert_eq(apply("a\r\nb\r\n", true, lf, 1), -ESRCH, "no line ending is translated");
}

Test(edit_apply, empty_old_text_creates_or_fills)
{
	struct fs_edit_op create[] = { OP("", "new file\n"), OP("new", "a new") };

	cr_assert_eq(apply(NULL, false, create, 2), 0, "%s", msg);
	cr_assert_eq(res.replacements, 2);
	expect_text("a new file\n");
	cr_assert_eq(apply("", true, create, 1), 0, "an empty file is filled: %s", msg);
	expect_text("new file\n");
	cr_assert_eq(apply("x", true, create, 1), -EEXIST);
	cr_assert(strstr(msg, "oldText is empty but f.txt is not"), "%s", msg);
	struct fs_edit_op edit[] = { OP("x", "y") };
	cr_assert_eq(apply(NULL, false, edit, 1), -ENOENT);
	cr_assert_str_eq(msg, "file not found: f.txt");
}

/* Occurrences are searched in windows that grow: one across any edge of
 * them is found, dense or sparse. */
Test(edit_apply, found_across_search_windows)
{
	static const size_t at[] = { 0, 4093, 4094 + 6, 12290, 40000, 65530, 99990 };
	struct fs_edit_op ops[] = { OP_ALL("NEEDLE", "pin") };
	size_t n = 100000, want = n;
	char *src = malloc(n + 1), *exp = malloc(n + 1);

	memset(src, 'x', n);
	src[n] = '\0';
	for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++)
		memcpy(src + at[i], "NEEDLE", 6);
	size_t k = 0;
	for (size_t i = 0; i < n;) {
		if (i + 6 <= n && !memcmp(src + i, "NEEDLE", 6)) {
			memcpy(exp + k, "pin", 3);
			k += 3;
			i += 6;
			want -= 3;
		} else {
			exp[k++] = src[i++];
		}
	}
	cr_assert_eq(fs_edit_apply(src, n, true, ops, 1, n, NULL, &res, msg, sizeof(msg)), 0, "%s", msg);
	cr_assert_eq(res.replacements, 7);
	cr_assert_eq(res.len, want);
	cr_assert_eq(memcmp(res.buf, exp, want), 0);
	fs_edit_result_free(&res);
	struct fs_edit_op dense[] = { OP_ALL("x", "yy") };
	cr_assert_eq(fs_edit_apply(src, n, true, dense, 1, 2 * n, NULL, &res, msg, sizeof(msg)), 0, "%s", msg);
	cr_assert_eq(res.replacements, n - 7 * 6);
	fs_edit_result_free(&res);
	free(src);
	free(exp);
}

Test(edit_apply, nothing_changed)
{
	struct fs_edit_op ops[] = { OP("same", "same") };

	cr_assert_eq(apply("the same\n", true, ops, 1), 0);
	cr_assert_not(res.changed);
	cr_assert_null(res.buf);
	cr_assert_eq(res.replacements, 1);
}

Test(edit_apply, bounded)
{
	struct fs_edit_op ops[] = { OP_ALL("a", "aaaa") };
	char src[1000];

	memset(src, 'a', sizeof(src) - 1);
	src[sizeof(src) - 1] = '\0';
	cr_assert_eq(fs_edit_apply(src, strlen(src), true, ops, 1, 2000, NULL, &res, msg, sizeof(msg)), -EFBIG);
	cr_assert(strstr(msg, "3996 bytes, over Edit's limit of 2000"), "%s", msg);
}

Test(edit_apply, memory_budget)
{
	char *a = fs_edit_buf_alloc(FS_EDIT_MEM_MAX - 10);
	struct fs_edit_op ops[] = { OP("x", "0123456789abcdef") };

	cr_assert_not_null(a);
	errno = 0;
	cr_assert_null(fs_edit_buf_alloc(11));
	cr_assert_eq(errno, EAGAIN);
	cr_assert_eq(apply("x", true, ops, 1), -EAGAIN);
	cr_assert(strstr(msg, "memory budget"), "%s", msg);
	fs_edit_buf_free(a, FS_EDIT_MEM_MAX - 10);
	cr_assert_eq(apply("x", true, ops, 1), 0);
	fs_edit_result_free(&res);
}

/* --- the locks and the state --- */

struct locker {
	const char *path;
	double timeout;
	int rc;
	struct timespec took;
};

static void *lock_other(void *arg)
{
	struct locker *l = arg;
	struct timespec a, b;

	clock_gettime(CLOCK_MONOTONIC, &a);
	l->rc = fguard_lock(l->path, l->timeout);
	clock_gettime(CLOCK_MONOTONIC, &b);
	if (l->rc == 0)
		fguard_unlock(l->path);
	l->took.tv_sec = b.tv_sec - a.tv_sec;
	return NULL;
}

Test(fguard, one_writer_per_path)
{
	struct locker other = { "/x/a.txt", 0.2, 1, { 0 } }, another = { "/x/b.txt", 0.2, 1, { 0 } };
	pthread_t t;

	cr_assert_eq(fguard_lock("/x/a.txt", 1), 0);
	pthread_create(&t, NULL, lock_other, &other);
	pthread_join(t, NULL);
	cr_assert_eq(other.rc, -ETIMEDOUT, "the same path waits for its holder, up to its deadline");
	pthread_create(&t, NULL, lock_other, &another);
	pthread_join(t, NULL);
	cr_assert_eq(another.rc, 0, "another path does not wait");
	fguard_unlock("/x/a.txt");
	other.timeout = 0;
	pthread_create(&t, NULL, lock_other, &other);
	pthread_join(t, NULL);
	cr_assert_eq(other.rc, 0, "released");
}

static char dir[] = "/tmp/fs-edit-test.XXXXXX";

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	return remove(p);
}

static void dir_setup(void)
{
	cr_assert(mkdtemp(dir));
	snprintf(uptmp_registry, sizeof(uptmp_registry), "%s/.registry", dir);
}

static void dir_teardown(void)
{
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(fguard_files, .init = dir_setup, .fini = dir_teardown);

static void put(const char *path, const char *content)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, content, strlen(content)), (ssize_t)strlen(content));
	close(fd);
}

Test(fguard_files, state)
{
	char p[PATH_MAX], v[FS_VERSION_LEN + 1], want[FS_VERSION_LEN + 1];
	struct stat st;
	bool exists = true;

	snprintf(p, sizeof(p), "%s/f", dir);
	cr_assert_eq(fguard_state(p, &exists, v), 0);
	cr_assert_not(exists);
	put(p, "x");
	stat(p, &st);
	fs_version(&st, want);
	cr_assert_eq(fguard_state(p, &exists, v), 0);
	cr_assert(exists);
	cr_assert_str_eq(v, want);
	cr_assert_eq(fguard_state(dir, &exists, v), 0);
	cr_assert(exists);
	cr_assert_str_eq(v, "", "a directory has no version");
}

/* fguard_state_at: the name in the directory, not followed. */
Test(fguard_files, state_at)
{
	char p[PATH_MAX], l[PATH_MAX], v[FS_VERSION_LEN + 1], want[FS_VERSION_LEN + 1];
	struct stat st;
	bool exists = true;
	int d = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);

	cr_assert_geq(d, 0);
	cr_assert_eq(fguard_state_at(d, "g", &exists, v), 0);
	cr_assert_not(exists);
	snprintf(p, sizeof(p), "%s/g", dir);
	put(p, "y");
	stat(p, &st);
	fs_version(&st, want);
	cr_assert_eq(fguard_state_at(d, "g", &exists, v), 0);
	cr_assert(exists);
	cr_assert_str_eq(v, want);
	snprintf(l, sizeof(l), "%s/g-link", dir);
	cr_assert_eq(symlink("g", l), 0);
	cr_assert_eq(fguard_state_at(d, "g-link", &exists, v), 0);
	cr_assert(exists);
	cr_assert_str_eq(v, "", "a link is not followed: no version");
	close(d);
}

static int refuse(void *arg, const char *target, char *err, size_t errlen)
{
	(*(int *)arg)++;
	snprintf(err, errlen, "%s changed", target);
	return -ESTALE;
}

Test(fguard_files, fwrite_hook_refuses_the_rename)
{
	char p[PATH_MAX], err[2 * PATH_MAX + 512], buf[16];
	struct fwrite w;
	int calls = 0, fd;

	snprintf(p, sizeof(p), "%s/f", dir);
	put(p, "old");
	fwrite_init(&w);
	w.before_replace = refuse;
	w.before_arg = &calls;
	cr_assert_eq(fwrite_begin(&w, p, getuid(), getgid(), true, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(fwrite_write(&w, "new!", 4, err, sizeof(err)), 0);
	cr_assert_eq(fwrite_commit(&w, NULL, err, sizeof(err)), -ESTALE);
	cr_assert_eq(calls, 1);
	cr_assert(strstr(err, "changed"), "%s", err);
	fd = open(p, O_RDONLY);
	cr_assert_eq(read(fd, buf, sizeof(buf)), 3);
	close(fd);
	cr_assert_eq(memcmp(buf, "old", 3), 0, "the target as it was");
	DIR *d = opendir(dir);
	struct dirent *e;
	while ((e = readdir(d)))
		cr_assert(strncmp(e->d_name, UPTMP_PREFIX, strlen(UPTMP_PREFIX)) != 0, "left behind: %s", e->d_name);
	closedir(d);
}

static int64_t ns(const struct timespec *t)
{
	return (int64_t)t->tv_sec * 1000000000 + t->tv_nsec;
}

/*
 * On a filesystem without multigrain timestamps, a file written a moment
 * ago waits out the tick; one envd stamped does not. ramfs has none (on
 * any kernel), mounted in a mount namespace of this test's own process.
 */
Test(fguard_files, stamped_versions_need_no_wait)
{
	char p[PATH_MAX + 16], mnt[PATH_MAX];
	struct stat st;
	struct timespec a, b;
	int fd;

	snprintf(mnt, sizeof(mnt), "%s/ramfs", dir);
	mkdir(mnt, 0755);
	if (unshare(CLONE_NEWNS) < 0 || mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount("ramfs", mnt, "ramfs", 0, NULL) < 0)
		cr_skip_test("needs root to mount a ramfs in a mount namespace: %s", strerror(errno));
	snprintf(p, sizeof(p), "%s/stamped", mnt);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	cr_assert_eq(write(fd, "x", 1), 1);
	cr_assert_eq(fs_version_stamp(fd), 0);
	fstat(fd, &st);
	close(fd);
	cr_assert_gt(ns(&st.st_mtim), ns(&st.st_ctim), "mtime later than the coarse ctime");
	clock_gettime(CLOCK_MONOTONIC, &a);
	cr_assert_not(fs_version_settle(&st, -1, p), "no wait");
	clock_gettime(CLOCK_MONOTONIC, &b);
	cr_assert_lt(ns(&b) - ns(&a), 1000000);

	snprintf(p, sizeof(p), "%s/plain", mnt);
	put(p, "y");
	stat(p, &st);
	cr_assert_eq(ns(&st.st_mtim), ns(&st.st_ctim));
	struct timespec now;
	clock_gettime(CLOCK_REALTIME_COARSE, &now);
	if (ns(&now) <= ns(&st.st_ctim))
		cr_assert(fs_version_settle(&st, -1, p), "a write of this tick is waited out");
	st.st_ctim.tv_sec -= 10;
	st.st_mtim = st.st_ctim;
	cr_assert_not(fs_version_settle(&st, -1, p), "an old change needs no wait");
	umount2(mnt, MNT_DETACH);
}
