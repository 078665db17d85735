/* SPDX-License-Identifier: Apache-2.0 */
/*
 * try_diff_test.c - what a try changed, from its layer's upper directory
 * (try/trydiff.h): an upper directory made by hand the way overlayfs
 * makes one (whiteouts as 0/0 devices and as marked empty files, an
 * opaque directory, an origin naming the real file of a rename), then the
 * same operations through a real overlay on this kernel, which must give
 * the same list.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "try/trydiff.h"
#include "testloop.h"

static char dir[] = "/tmp/trydiff-test.XXXXXX";
static char lower[PATH_MAX], upper[PATH_MAX];

static void setup(void)
{
	cr_assert(mkdtemp(dir));
	snprintf(lower, sizeof(lower), "%s/lower", dir);
	snprintf(upper, sizeof(upper), "%s/upper", dir);
	cr_assert_eq(mkdir(lower, 0755), 0);
}

static void teardown(void)
{
	umount2(dir, MNT_DETACH);
	rm_tree(dir);
}

TestSuite(trydiff, .init = setup, .fini = teardown);

static void put(const char *base, const char *name, const char *content, mode_t mode)
{
	char p[PATH_MAX];
	int fd;

	snprintf(p, sizeof(p), "%s/%s", base, name);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, mode);
	cr_assert_geq(fd, 0, "open %s: %s", p, strerror(errno));
	cr_assert_eq(write(fd, content, strlen(content)), (ssize_t)strlen(content));
	close(fd);
	cr_assert_eq(chmod(p, mode), 0);
}

static void md(const char *base, const char *name)
{
	char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s/%s", base, name);
	cr_assert_eq(mkdir(p, 0755), 0, "mkdir %s: %s", p, strerror(errno));
}

/* The real tree every case starts from. */
static void make_lower(void)
{
	put(lower, "same.txt", "s", 0644);
	put(lower, "mod.txt", "old", 0644);
	put(lower, "mode.txt", "m", 0644);
	put(lower, "del.txt", "d", 0644);
	md(lower, "deldir");
	put(lower, "deldir/x", "x", 0644);
	md(lower, "opq");
	put(lower, "opq/keep1", "k", 0644);
	put(lower, "opq/gone1", "g", 0644);
	put(lower, "typ", "was a file", 0644);
	cr_assert_eq(symlinkat("t1", AT_FDCWD, strcat(strcpy((char[PATH_MAX]){ 0 }, lower), "/lnk")), 0);
	put(lower, "ren_src", "r", 0644);
	put(lower, "xw.txt", "w", 0644);
}

/* What the list must say, in the scan's order. */
static const char *const expected[] = {
	"deleted del.txt",
	"deleted deldir",
	"modified lnk",
	"modified mod.txt",
	"mode mode.txt",
	"created newdir",
	"created newdir/a",
	"created newdir/a/b",
	"created opq/new1",
	"deleted opq/gone1",
	"renamed ren_dst ren_src",
	"modified typ",
	"created typ/inner",
	"deleted xw.txt",
};

static void check_list(const struct trydiff *d)
{
	size_t n = sizeof(expected) / sizeof(expected[0]);
	char got[4096] = "";

	for (size_t i = 0; i < d->n; i++) {
		char l[PATH_MAX];
		snprintf(l, sizeof(l), "%s %s%s%s\n", trydiff_kind_name(d->v[i].kind), d->v[i].path,
			 d->v[i].from ? " " : "", d->v[i].from ? d->v[i].from : "");
		strcat(got, l);
	}
	cr_assert_eq(d->n, n, "%zu changes, not %zu:\n%s", d->n, n, got);
	for (size_t i = 0; i < n; i++) {
		char l[PATH_MAX];
		snprintf(l, sizeof(l), "%s %s%s%s", trydiff_kind_name(d->v[i].kind), d->v[i].path,
			 d->v[i].from ? " " : "", d->v[i].from ? d->v[i].from : "");
		cr_assert_str_eq(l, expected[i], "change %zu:\n%s", i, got);
	}
}

static const struct trydiff_change *find(const struct trydiff *d, const char *path)
{
	for (size_t i = 0; i < d->n; i++)
		if (strcmp(d->v[i].path, path) == 0)
			return &d->v[i];
	return NULL;
}

/* The details every case must show too. */
static void check_details(const struct trydiff *d)
{
	const struct trydiff_change *c;

	c = find(d, "mode.txt");
	cr_assert(c && (c->mode & 07777) == 0755 && (c->old_mode & 07777) == 0644 && !c->content);
	c = find(d, "mod.txt");
	cr_assert(c && c->content && c->size == 3 && c->old_size == 3);
	c = find(d, "typ");
	cr_assert(c && S_ISDIR(c->mode) && S_ISREG(c->old_mode) && c->content);
	c = find(d, "ren_dst");
	cr_assert(c && !c->content && S_ISREG(c->mode) && c->old_size == 1, "a rename with the same bytes");
	c = find(d, "deldir");
	cr_assert(c && S_ISDIR(c->old_mode) && c->mode == 0 && c->size == -1);
	c = find(d, "newdir/a/b");
	cr_assert(c && c->old_mode == 0 && c->old_size == -1 && c->size == 1);
}

static struct trydiff scan(const char *up)
{
	struct trydiff d;
	char err[1024] = "";
	int fd = open(up, O_RDONLY | O_DIRECTORY);

	cr_assert_geq(fd, 0);
	trydiff_init(&d, 0);
	cr_assert_eq(trydiff_scan(fd, lower, "trusted.", 0, &d, err, sizeof(err)), 0, "%s", err);
	close(fd);
	return d;
}

static void xattr(const char *base, const char *name, const char *key, const void *v, size_t n)
{
	char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s/%s", base, name);
	cr_assert_eq(lsetxattr(p, key, v, n, 0), 0, "setxattr %s %s: %s", p, key, strerror(errno));
}

static void whiteout(const char *base, const char *name)
{
	char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s/%s", base, name);
	cr_assert_eq(mknod(p, S_IFCHR | 0, makedev(0, 0)), 0, "mknod %s: %s", p, strerror(errno));
}

Test(trydiff, an_upper_directory_made_by_hand)
{
	struct trydiff_handle h;
	uint8_t fb[5 + 16 + TRYDIFF_HANDLE_MAX] = { 0, 0xfb };
	char p[PATH_MAX + 16];

	make_lower();
	cr_assert_eq(mkdir(upper, 0755), 0);
	put(upper, "same.txt", "s", 0644);             /* copied up, unchanged */
	put(upper, "mod.txt", "new", 0644);
	put(upper, "mode.txt", "m", 0755);
	whiteout(upper, "del.txt");
	whiteout(upper, "deldir");
	md(upper, "opq");
	xattr(upper, "opq", "trusted.overlay.opaque", "y", 1);
	put(upper, "opq/keep1", "k", 0644);
	put(upper, "opq/new1", "n", 0644);
	md(upper, "typ");
	put(upper, "typ/inner", "i", 0644);
	cr_assert_eq(symlinkat("t2", AT_FDCWD, strcat(strcpy((char[PATH_MAX]){ 0 }, upper), "/lnk")), 0);
	md(upper, "newdir");
	md(upper, "newdir/a");
	put(upper, "newdir/a/b", "b", 0644);
	/* A rename: the real file's handle as the copy's origin, a whiteout where it was. */
	snprintf(p, sizeof(p), "%s/ren_src", lower);
	cr_assert_eq(trydiff_handle_of(p, &h), 0);
	fb[2] = (uint8_t)(21 + h.len);
	fb[4] = (uint8_t)h.type;
	memcpy(fb + 21, h.bytes, h.len);
	put(upper, "ren_dst", "r", 0644);
	xattr(upper, "ren_dst", "trusted.overlay.origin", fb, 21 + h.len);
	whiteout(upper, "ren_src");
	/* A whiteout written as a marked empty file; one over nothing. */
	put(upper, "xw.txt", "", 0000);
	xattr(upper, "xw.txt", "trusted.overlay.whiteout", "", 0);
	whiteout(upper, "ghost");

	struct trydiff d = scan(upper);
	check_list(&d);
	check_details(&d);
	trydiff_free(&d);
}

Test(trydiff, a_limit_cuts_the_list)
{
	struct trydiff d;
	char err[256] = "";
	int fd;

	make_lower();
	cr_assert_eq(mkdir(upper, 0755), 0);
	put(upper, "a", "1", 0644);
	put(upper, "b", "2", 0644);
	put(upper, "c", "3", 0644);
	fd = open(upper, O_RDONLY | O_DIRECTORY);
	trydiff_init(&d, 2);
	cr_assert_eq(trydiff_scan(fd, lower, "trusted.", 0, &d, err, sizeof(err)), 0);
	close(fd);
	cr_assert_eq(d.n, 2);
	cr_assert(d.truncated);
	trydiff_free(&d);
}

static void sh(const char *cmd)
{
	cr_assert_eq(system(cmd), 0, "%s", cmd);
}

Test(trydiff, the_same_operations_through_a_real_overlay)
{
	char m[PATH_MAX], t[256], opts[4 * PATH_MAX + 128], cmd[8 * PATH_MAX];

	make_lower();
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		cr_skip_test("no private mount namespace here (%s)", strerror(errno));
	snprintf(m, sizeof(m), "%s/merged", dir);
	snprintf(t, sizeof(t), "%s/layer", dir);
	cr_assert_eq(mkdir(m, 0755), 0);
	cr_assert_eq(mkdir(t, 0700), 0);
	cr_assert_eq(mount("t", t, "tmpfs", 0, "size=16m"), 0);
	snprintf(upper, sizeof(upper), "%.256s/u", t);
	snprintf(cmd, sizeof(cmd), "%s/w", t);
	cr_assert_eq(mkdir(upper, 0755), 0);
	cr_assert_eq(mkdir(cmd, 0755), 0);
	snprintf(opts, sizeof(opts), "lowerdir=%.1024s,upperdir=%.1024s,workdir=%.1024s,redirect_dir=off,index=off,"
		 "metacopy=off", lower, upper, cmd);
	if (mount("overlay", m, "overlay", 0, opts) < 0)
		cr_skip_test("no overlayfs here (%s)", strerror(errno));
	snprintf(cmd, sizeof(cmd),
		 "cd %s && cat same.txt >/dev/null && touch same.txt && echo -n new > mod.txt && chmod 755 mode.txt && "
		 "rm del.txt && rm -r deldir && rm -rf opq && mkdir opq && echo -n k > opq/keep1 && "
		 "echo -n n > opq/new1 && rm typ && mkdir typ && echo -n i > typ/inner && ln -sfn t2 lnk && "
		 "mkdir -p newdir/a && echo -n b > newdir/a/b && mv ren_src ren_dst && rm xw.txt && "
		 "touch ghost && rm ghost",
		 m);
	sh(cmd);
	struct trydiff d = scan(upper);
	umount2(m, MNT_DETACH);
	check_list(&d);
	check_details(&d);
	trydiff_free(&d);
}
