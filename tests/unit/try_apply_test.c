/* SPDX-License-Identifier: Apache-2.0 */
/*
 * try_apply_test.c - a try's commit carried out (try/tryapply.h) on an
 * upper directory made by hand: the real tree ends as the layer shows it
 * (contents, modes, kinds, a rename, deletions, a new tree), no hidden
 * name or registry entry is left; a real file changed after the try began
 * is a conflict with nothing applied; a stop while staging applies
 * nothing and leaves nothing behind; a link of another user's swapped
 * onto the way between the check and the publish is not followed.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "base/uptmp.h"
#include "try/tryapply.h"
#include "testloop.h"

static char dir[] = "/tmp/tryapply-test.XXXXXX";
static char real[PATH_MAX], upper[PATH_MAX], prot[PATH_MAX];
static struct timespec t0;

static void put(const char *base, const char *name, const char *content, mode_t mode)
{
	char p[PATH_MAX + 64];
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
	char p[PATH_MAX + 64];

	snprintf(p, sizeof(p), "%s/%s", base, name);
	cr_assert_eq(mkdir(p, 0755), 0, "mkdir %s: %s", p, strerror(errno));
}

/* Give base/name to nobody (65534). */
static void own(const char *base, const char *name)
{
	char p[PATH_MAX + 64];

	snprintf(p, sizeof(p), "%s/%s", base, name);
	cr_assert_eq(lchown(p, 65534, 65534), 0, "chown %s: %s", p, strerror(errno));
}

static void whiteout(const char *name)
{
	char p[PATH_MAX + 64];

	snprintf(p, sizeof(p), "%s/%s", upper, name);
	cr_assert_eq(mknod(p, S_IFCHR, makedev(0, 0)), 0);
}

static char *slurp(const char *name)
{
	static char buf[4096];
	char p[PATH_MAX + 64];
	int fd;
	ssize_t n;

	snprintf(p, sizeof(p), "%s/%s", real, name);
	fd = open(p, O_RDONLY);
	if (fd < 0)
		return NULL;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return buf;
}

static bool exists(const char *name)
{
	char p[PATH_MAX + 64];
	struct stat st;

	snprintf(p, sizeof(p), "%s/%s", real, name);
	return lstat(p, &st) == 0;
}

static mode_t mode_of(const char *name)
{
	char p[PATH_MAX + 64];
	struct stat st;

	snprintf(p, sizeof(p), "%s/%s", real, name);
	cr_assert_eq(lstat(p, &st), 0, "%s", p);
	return st.st_mode;
}

/* Nothing hidden left in the real tree, nothing in the registries (the
 * uploads' slot file stays, with no record). */
static void nothing_left(void)
{
	char cmd[PATH_MAX * 2];

	snprintf(cmd, sizeof(cmd), "test -z \"$(find %s %s %s -name '.envd-*' -o -path '%s/*' -o -path '%s/[0-9]*' 2>/dev/null | head -1)\"",
		 real, tryapply_registry, uptmp_registry, tryapply_registry, uptmp_registry);
	cr_assert_eq(system(cmd), 0, "something was left behind");
	cr_assert_eq(uptmp_registered(), 0, "a temporary is still registered");
}

static void setup(void)
{
	struct timespec now, nap = { 0, 1000000 };

	cr_assert(mkdtemp(dir));
	snprintf(real, sizeof(real), "%s/real", dir);
	snprintf(upper, sizeof(upper), "%s/upper", dir);
	snprintf(tryapply_registry, sizeof(tryapply_registry), "%s/treg", dir);
	snprintf(uptmp_registry, sizeof(uptmp_registry), "%s/ureg", dir);
	cr_assert_eq(mkdir(real, 0755), 0);
	cr_assert_eq(mkdir(upper, 0755), 0);
	put(real, "mod.txt", "old", 0644);
	put(real, "mode.txt", "m", 0644);
	put(real, "del.txt", "d", 0644);
	md(real, "deldir");
	put(real, "deldir/x", "x", 0644);
	put(real, "typ", "a file", 0644);
	md(real, "f2d");
	put(real, "f2d/y", "y", 0644);
	put(real, "ren_src", "r", 0644);
	/* A directory of nobody's, and one of root's beside the tree. */
	md(real, "shared");
	md(real, "shared/sub");
	put(real, "shared/sub/victim", "v", 0644);
	put(real, "shared/sub/keep", "k", 0644);
	own(real, "shared");
	own(real, "shared/sub");
	snprintf(prot, sizeof(prot), "%s/protected", dir);
	cr_assert_eq(mkdir(prot, 0755), 0);
	put(prot, "victim", "root's", 0600);
	put(prot, "keep", "root's", 0600);
	/* The try begins as tryrun.c begins one: the fine clock, then a wait
	   until the coarse one has passed it. */
	clock_gettime(CLOCK_REALTIME, &t0);
	do {
		nanosleep(&nap, NULL);
		clock_gettime(CLOCK_REALTIME_COARSE, &now);
	} while (now.tv_sec < t0.tv_sec || (now.tv_sec == t0.tv_sec && now.tv_nsec <= t0.tv_nsec));

	put(upper, "mod.txt", "new", 0644);
	put(upper, "mode.txt", "m", 0750);
	whiteout("del.txt");
	whiteout("deldir");
	md(upper, "typ");
	put(upper, "typ/inner", "i", 0600);
	put(upper, "f2d", "now a file", 0644);
	md(upper, "new");
	md(upper, "new/sub");
	put(upper, "new/sub/f", "f", 0640);
	cr_assert_eq(symlinkat("mod.txt", AT_FDCWD, strcat(strcpy((char[PATH_MAX + 8]){ 0 }, upper), "/ln")), 0);
	put(upper, "ren_dst", "r", 0644);
	whiteout("ren_src");
	md(upper, "shared");
	md(upper, "shared/sub");
	own(upper, "shared");
	own(upper, "shared/sub");
	whiteout("shared/sub/victim");
}

static void teardown(void)
{
	rm_tree(dir);
}

TestSuite(tryapply, .init = setup, .fini = teardown);

struct run {
	struct trydiff d;
	struct tryplan p;
	struct tryapply_root root;
	int ufd;
	char err[2048];
};

static void scan(struct run *r)
{
	memset(r, 0, sizeof(*r));
	r->ufd = open(upper, O_RDONLY | O_DIRECTORY);
	cr_assert_geq(r->ufd, 0);
	trydiff_init(&r->d, 0);
	cr_assert_eq(trydiff_scan(r->ufd, real, "trusted.", 0, &r->d, r->err, sizeof(r->err)), 0, "%s", r->err);
	r->root = (struct tryapply_root){ .real = real, .upper_fd = r->ufd };
	cr_assert_eq(tryplan_make(&r->d, &r->p), 0);
}

static void done(struct run *r)
{
	tryplan_free(&r->p);
	trydiff_free(&r->d);
	close(r->ufd);
}

Test(tryapply, the_real_tree_ends_as_the_layer_shows_it)
{
	struct run r;
	struct tryapply_stats st;

	scan(&r);
	cr_assert_eq(tryapply_check(&r.d, &r.root, &t0, r.err, sizeof(r.err)), 0, "%s", r.err);
	cr_assert_eq(tryapply_run(&r.d, &r.p, &r.root, NULL, &st, r.err, sizeof(r.err)), 0, "%s", r.err);
	cr_assert_str_eq(slurp("mod.txt"), "new");
	cr_assert_eq(mode_of("mode.txt") & 07777, 0750);
	cr_assert(!exists("del.txt") && !exists("deldir"));
	cr_assert(S_ISDIR(mode_of("typ")));
	cr_assert_str_eq(slurp("typ/inner"), "i");
	cr_assert_eq(mode_of("typ/inner") & 07777, 0600);
	cr_assert(S_ISREG(mode_of("f2d")));
	cr_assert_str_eq(slurp("f2d"), "now a file");
	cr_assert_str_eq(slurp("new/sub/f"), "f");
	cr_assert_eq(mode_of("new/sub/f") & 07777, 0640);
	cr_assert(S_ISLNK(mode_of("ln")));
	cr_assert(!exists("ren_src"));
	cr_assert_str_eq(slurp("ren_dst"), "r");
	cr_assert_geq(st.files, 4);
	nothing_left();
	done(&r);
}

Test(tryapply, a_real_file_changed_since_the_try_began_is_a_conflict)
{
	struct run r;
	char p[PATH_MAX + 16];

	scan(&r);
	put(real, "mod.txt", "theirs", 0644);
	cr_assert_eq(tryapply_check(&r.d, &r.root, &t0, r.err, sizeof(r.err)), -ESTALE);
	snprintf(p, sizeof(p), "%s/mod.txt", real);
	cr_assert(strstr(r.err, p), "the conflict names the file: %s", r.err);
	cr_assert_str_eq(slurp("mod.txt"), "theirs");
	cr_assert(exists("del.txt"), "nothing applied");
	done(&r);
}

Test(tryapply, a_file_added_below_a_directory_that_goes_is_a_conflict)
{
	struct run r;

	scan(&r);
	put(real, "deldir/new", "n", 0644);
	cr_assert_eq(tryapply_check(&r.d, &r.root, &t0, r.err, sizeof(r.err)), -ESTALE);
	cr_assert(strstr(r.err, "deldir"), "%s", r.err);
	done(&r);
}

Test(tryapply, a_stop_while_staging_applies_nothing)
{
	struct run r;
	struct tryapply_stats st;
	volatile bool stop = true;

	scan(&r);
	cr_assert_eq(tryapply_run(&r.d, &r.p, &r.root, &stop, &st, r.err, sizeof(r.err)), -ECANCELED);
	cr_assert_str_eq(slurp("mod.txt"), "old");
	cr_assert(exists("del.txt") && exists("deldir/x") && !exists("new"));
	nothing_left();
	done(&r);
}

static char *slurp_at(const char *base, const char *name)
{
	static char buf[64];
	char p[PATH_MAX + 64];
	ssize_t n;
	int fd;

	snprintf(p, sizeof(p), "%s/%s", base, name);
	if ((fd = open(p, O_RDONLY)) < 0)
		return NULL;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return buf;
}

/* Everything staged, then nobody swaps its own directory on the way for a
   link to a root directory (as its owner may): the publish refuses the
   link instead of removing and replacing root's files behind it. */
Test(tryapply, a_link_of_another_users_swapped_onto_the_way_is_not_followed)
{
	struct run r;
	struct tryapply *t;
	struct tryapply_stats st, part;
	char sub[PATH_MAX + 32], old[PATH_MAX + 32];

	scan(&r);
	cr_assert_eq(tryapply_check(&r.d, &r.root, &t0, r.err, sizeof(r.err)), 0, "%s", r.err);
	cr_assert_eq(tryapply_new(&r.d, &r.p, &r.root, &t), 0);
	memset(&st, 0, sizeof(st));
	memset(&part, 0, sizeof(part));
	cr_assert_eq(tryapply_stage_dirs(t, NULL, &st, r.err, sizeof(r.err)), 0, "%s", r.err);
	cr_assert_eq(tryapply_stage_files(t, 0, tryapply_files(t), NULL, &part, r.err, sizeof(r.err)), 0, "%s", r.err);

	snprintf(sub, sizeof(sub), "%s/shared/sub", real);
	snprintf(old, sizeof(old), "%s/shared/sub.old", real);
	cr_assert_eq(rename(sub, old), 0);
	cr_assert_eq(symlink(prot, sub), 0);
	own(real, "shared/sub");
	cr_assert_eq(chmod(dir, 0755), 0); /* nobody may look there, as in /tmp */

	cr_assert_lt(tryapply_publish(t, &st, r.err, sizeof(r.err)), 0, "the publish went through the link");
	cr_assert(strstr(r.err, "symbolic link of another user's"), "%s", r.err);
	cr_assert_str_eq(slurp_at(prot, "victim"), "root's");
	cr_assert_str_eq(slurp_at(prot, "keep"), "root's");
	tryapply_free(t);
	done(&r);
}
