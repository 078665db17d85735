/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The walk against ripgrep itself: the same tree, `rg --files` with the
 * same options, the same list of files.
 */
#include <criterion/criterion.h>
#include <linux/magic.h>
#include <sys/vfs.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "search/walk.h"

static char root[64];

static void put(const char *rel, const char *text)
{
	char path[512], dir[600];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	snprintf(dir, sizeof(dir), "mkdir -p \"$(dirname '%s')\"", path);
	cr_assert_eq(system(dir), 0);
	fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
	cr_assert_geq(fd, 0, "%s", path);
	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

static void tree(void)
{
	char cmd[256];

	snprintf(root, sizeof(root), "/tmp/walk_test.XXXXXX");
	cr_assert_not_null(mkdtemp(root));
	/* a repository... */
	put("repo/.git/HEAD", "ref: refs/heads/main\n");
	put("repo/.git/info/exclude", "*.excluded\n");
	put("repo/.gitignore", "*.log\n!keep.log\ndist/\n!dist/keep.js\nout/*\n!out/keep.js\n/build\nnode_modules\n");
	put("repo/a.ts", "a");
	put("repo/a.log", "x");
	put("repo/keep.log", "x");
	put("repo/x.excluded", "x");
	put("repo/dist/keep.js", "x");
	put("repo/dist/other.js", "x");
	put("repo/out/keep.js", "x");
	put("repo/out/other.js", "x");
	put("repo/build/b.c", "x");
	put("repo/src/build/kept.c", "x");
	put("repo/node_modules/m/index.js", "x");
	put("repo/src/.gitignore", "*.gen.ts\n!important.gen.ts\n/local\n");
	put("repo/src/x.gen.ts", "x");
	put("repo/src/important.gen.ts", "x");
	put("repo/src/local/l.ts", "x");
	put("repo/src/deep/local/l.ts", "x");
	put("repo/src/.hidden.ts", "x");
	put("repo/.config/c.json", "x");
	put("repo/.ignore", "*.ign\n");
	put("repo/y.ign", "x");
	put("repo/sub/.rgignore", "!y.ign\n*.rg\n");
	put("repo/sub/y.ign", "x");
	put("repo/sub/z.rg", "x");
	/* ...and a plain directory, where .gitignore means nothing */
	put("plain/.gitignore", "x.txt\n");
	put("plain/.ignore", "y.txt\n");
	put("plain/x.txt", "x");
	put("plain/y.txt", "x");
	snprintf(cmd, sizeof(cmd), "ln -s ../plain %s/repo/link && ln -s a.ts %s/repo/alink.ts", root, root);
	cr_assert_eq(system(cmd), 0);
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	system(cmd);
}

TestSuite(walk, .init = tree, .fini = teardown);

struct list {
	char *v[256];
	size_t n;
	pthread_mutex_t mu;
};

static int cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

struct run {
	struct walk *w;
	struct list *l;
};

static void *thread(void *arg)
{
	struct run *r = arg;
	struct walk_cursor *c = walk_cursor_new(r->w);
	struct walk_entry e;
	int rc;

	while ((rc = walk_next(c, &e)) == 1) {
		pthread_mutex_lock(&r->l->mu);
		if (r->l->n < 256)
			r->l->v[r->l->n++] = strndup(e.rel, e.rel_len);
		pthread_mutex_unlock(&r->l->mu);
	}
	walk_cursor_free(c);
	return (void *)(intptr_t)rc;
}

static void ours(const char *sub, const struct walk_opts *o, struct list *l)
{
	char path[256];
	struct walk *w;
	pthread_t t[2];
	struct run r;

	snprintf(path, sizeof(path), "%s/%s", root, sub);
	w = walk_new(path, o);
	r = (struct run){ w, l };
	pthread_mutex_init(&l->mu, NULL);
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, thread, &r);
	for (int i = 0; i < 2; i++) {
		void *rc;
		pthread_join(t[i], &rc);
		cr_expect_eq((intptr_t)rc, 0);
	}
	walk_free(w);
	qsort(l->v, l->n, sizeof(char *), cmp);
}

static void theirs(const char *sub, const char *flags, struct list *l)
{
	char cmd[256], line[512];
	FILE *f;

	snprintf(cmd, sizeof(cmd), "cd %s/%s && rg --files %s 2>/dev/null", root, sub, flags);
	f = popen(cmd, "r");
	cr_assert_not_null(f);
	while (fgets(line, sizeof(line), f) && l->n < 256) {
		line[strcspn(line, "\n")] = '\0';
		l->v[l->n++] = strdup(line);
	}
	pclose(f);
	qsort(l->v, l->n, sizeof(char *), cmp);
}

static void same(const char *sub, const struct walk_opts *o, const char *flags)
{
	struct list a = { .n = 0 }, b = { .n = 0 };
	char as[4096] = "", bs[4096] = "";

	if (system("command -v rg >/dev/null 2>&1") != 0)
		cr_skip_test("ripgrep is not installed (scripts/setup.sh installs it)");
	ours(sub, o, &a);
	theirs(sub, flags, &b);
	for (size_t i = 0; i < a.n; i++) {
		strcat(as, a.v[i]);
		strcat(as, " ");
		free(a.v[i]);
	}
	for (size_t i = 0; i < b.n; i++) {
		strcat(bs, b.v[i]);
		strcat(bs, " ");
		free(b.v[i]);
	}
	cr_expect_str_eq(as, bs, "walk of %s vs rg --files %s:\n ours: %s\n   rg: %s", sub, flags, as, bs);
}

Test(walk, defaults_in_a_repository)
{
	struct walk_opts o = { 0 };
	same("repo", &o, "");
}

Test(walk, a_subdirectory_sees_the_top_gitignore)
{
	struct walk_opts o = { 0 };
	same("repo/src", &o, "");
}

Test(walk, hidden)
{
	struct walk_opts o = { .hidden = true };
	same("repo", &o, "--hidden");
}

Test(walk, no_ignore)
{
	struct walk_opts o = { .no_ignore = true };
	same("repo", &o, "--no-ignore");
}

Test(walk, no_ignore_hidden)
{
	struct walk_opts o = { .no_ignore = true, .hidden = true };
	same("repo", &o, "--no-ignore --hidden");
}

Test(walk, outside_a_repository)
{
	struct walk_opts o = { 0 };
	same("plain", &o, "");
}

Test(walk, include_and_exclude_globs)
{
	struct glob *inc, *exc;
	char err[64];
	const struct glob *incs[1], *excs[1];

	cr_assert_eq(glob_compile("*.ts", 4, GLOB_BASENAME, &inc, err, sizeof(err)), 0);
	cr_assert_eq(glob_compile("local", 5, GLOB_BASENAME, &exc, err, sizeof(err)), 0);
	incs[0] = inc;
	excs[0] = exc;
	struct walk_opts o = { .include = incs, .n_include = 1, .exclude = excs, .n_exclude = 1 };
	same("repo", &o, "-g '*.ts' -g '!local'");
	o.hidden = true;
	same("repo", &o, "-g '*.ts' -g '!local' --hidden");
	glob_free(inc);
	glob_free(exc);
}

Test(walk, root_is_a_file)
{
	struct walk_opts o = { 0 };
	struct list a = { .n = 0 };

	ours("repo/a.log", &o, &a);
	cr_assert_eq(a.n, 1);
	cr_expect_str_eq(a.v[0], "a.log");
	free(a.v[0]);
}

/* walk_entry.local: what the filesystem under the test's directory is
 * (a short read ends a file there), and never for a root given as a
 * file, whose filesystem the walk does not look at. */
Test(walk, local_filesystem_flag)
{
	struct walk_opts o = { 0 };
	char path[256];
	struct walk_entry e;
	struct statfs sf;
	size_t n = 0;

	snprintf(path, sizeof(path), "%s/repo", root);
	cr_assert_eq(statfs(path, &sf), 0);
	unsigned long m = (unsigned long)sf.f_type;
	bool local = m == EXT4_SUPER_MAGIC || m == TMPFS_MAGIC || m == XFS_SUPER_MAGIC || m == BTRFS_SUPER_MAGIC ||
		     m == OVERLAYFS_SUPER_MAGIC || m == F2FS_SUPER_MAGIC || m == RAMFS_MAGIC || m == SQUASHFS_MAGIC;
	struct walk *w = walk_new(path, &o);
	struct walk_cursor *c = walk_cursor_new(w);
	while (walk_next(c, &e) == 1) {
		cr_expect_eq(e.local, local, "%s", e.path);
		n++;
	}
	walk_cursor_free(c);
	walk_free(w);
	cr_assert_gt(n, 0);

	snprintf(path, sizeof(path), "%s/repo/a.log", root);
	w = walk_new(path, &o);
	c = walk_cursor_new(w);
	cr_assert_eq(walk_next(c, &e), 1);
	cr_expect(e.explicit_file);
	cr_expect_not(e.local);
	walk_cursor_free(c);
	walk_free(w);
}

Test(walk, missing_root)
{
	struct walk_opts o = { 0 };
	char path[256];
	struct walk *w;
	struct walk_cursor *c;
	struct walk_entry e;

	snprintf(path, sizeof(path), "%s/nope", root);
	w = walk_new(path, &o);
	c = walk_cursor_new(w);
	cr_expect_eq(walk_next(c, &e), -ENOENT);
	walk_cursor_free(c);
	walk_free(w);
}

/* A cursor kept from one walk for the next (detach, attach) lists the
 * second walk whole, as a fresh one does. */
Test(walk, cursor_kept_for_another_walk)
{
	struct walk_opts o = { 0 };
	char path[256];
	struct walk_entry e;
	size_t first = 0, second = 0, fresh = 0;

	snprintf(path, sizeof(path), "%s/repo", root);
	struct walk *w1 = walk_new(path, &o);
	struct walk_cursor *c = walk_cursor_new(w1);
	while (walk_next(c, &e) == 1)
		first++;
	walk_cursor_detach(c);
	walk_free(w1);
	struct walk *w2 = walk_new(path, &o);
	walk_cursor_attach(c, w2);
	while (walk_next(c, &e) == 1)
		second++;
	walk_cursor_free(c);
	walk_free(w2);
	struct walk *w3 = walk_new(path, &o);
	c = walk_cursor_new(w3);
	while (walk_next(c, &e) == 1)
		fresh++;
	walk_cursor_free(c);
	walk_free(w3);
	cr_assert_gt(first, 0);
	cr_assert_eq(second, first);
	cr_assert_eq(fresh, first);
}

/* One walk of root/sub by this thread alone; whether the ancestors' ignore
 * files came from the kept reading. The list is the walk's (sorted). */
static bool walk_kept(const char *sub, struct list *l)
{
	char path[256];
	struct walk_opts o = { 0 };
	struct walk *w;
	struct walk_stats st;
	struct run r;

	snprintf(path, sizeof(path), "%s/%s", root, sub);
	w = walk_new(path, &o);
	r = (struct run){ w, l };
	pthread_mutex_init(&l->mu, NULL);
	cr_assert_eq((intptr_t)thread(&r), 0);
	walk_get_stats(w, &st);
	walk_free(w);
	qsort(l->v, l->n, sizeof(char *), cmp);
	return st.ancestors_kept;
}

static void list_free(struct list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	l->n = 0;
}

static bool quiet; /* the tree's ancestors are this test's alone (quiet_tree) */

/* Two seconds on, read once more (settled now: kept), then taken kept. */
static void kept_once_settled(const char *sub)
{
	struct list l = { .n = 0 };

	sleep(2);
	walk_kept(sub, &l);
	list_free(&l);
	cr_assert(walk_kept(sub, &l) || !quiet, "kept once settled");
	list_free(&l);
}

/*
 * The ancestors' ignore files are read once and kept while a stat of each
 * ancestor and ignore file shows nothing changed: a rewritten .gitignore
 * above the root, one added, one removed, each is seen by the next walk,
 * which agrees with rg again. (The sleeps: what was touched within the
 * last second is never kept, so each kept case waits two and reads once.)
 */
/* The tree of this test under a /tmp of its own (a tmpfs in a mount
 * namespace of its own): /tmp is one of the root's ancestors, and the
 * other tests running meanwhile make and remove their trees in it. */
static void quiet_tree(void)
{
	/* Under qemu-user (ENVD_TEST_EMULATOR) a path goes through the
	 * emulator's root first, and the mount may not be where the walk
	 * looks: the tree stays in the shared /tmp, and only what must hold
	 * whatever else changes the ancestors is asserted. */
	if (!getenv("ENVD_TEST_EMULATOR")) {
		teardown(); /* the suite's tree, in the shared /tmp */
		if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
		    mount("tmpfs", "/tmp", "tmpfs", 0, "size=16m") != 0)
			cr_skip_test("needs root for a /tmp of its own: %s", strerror(errno));
		quiet = true;
		tree();
	}
}

Test(walk, ancestors_kept_until_they_change, .init = quiet_tree)
{
	struct list l = { .n = 0 };
	struct walk_opts o = { 0 };
	char path[512];

	if (system("command -v rg >/dev/null 2>&1") != 0)
		cr_skip_test("ripgrep is not installed (scripts/setup.sh installs it)");
	sleep(2);
	cr_assert(!walk_kept("repo/src", &l), "the first walk reads them");
	list_free(&l);
	cr_assert(walk_kept("repo/src", &l) || !quiet, "the second takes them as kept");
	list_free(&l);
	same("repo/src", &o, "");

	/* rewritten: the top .gitignore now leaves out every .ts */
	put("repo/.gitignore", "*.log\n*.ts\n");
	cr_assert(!walk_kept("repo/src", &l), "a rewritten .gitignore is read again");
	for (size_t i = 0; i < l.n; i++)
		cr_expect(!strstr(l.v[i], ".ts") || strstr(l.v[i], "important"), "left out now: %s", l.v[i]);
	list_free(&l);
	same("repo/src", &o, "");

	/* added: an .ignore at the top, taking out deep/ */
	kept_once_settled("repo/src");
	put("repo/.ignore", "deep/\n");
	cr_assert(!walk_kept("repo/src", &l), "a new ignore file above is read");
	for (size_t i = 0; i < l.n; i++)
		cr_expect(strncmp(l.v[i], "deep/", 5) != 0, "left out now: %s", l.v[i]);
	list_free(&l);
	same("repo/src", &o, "");

	/* removed: both, and the repository's .git/info/exclude made */
	kept_once_settled("repo/src");
	snprintf(path, sizeof(path), "%s/repo/.gitignore", root);
	cr_assert_eq(unlink(path), 0);
	snprintf(path, sizeof(path), "%s/repo/.ignore", root);
	cr_assert_eq(unlink(path), 0);
	cr_assert(!walk_kept("repo/src", &l));
	list_free(&l);
	same("repo/src", &o, "");
	kept_once_settled("repo/src");
	put("repo/.git/info/exclude", "*.ts\n");
	cr_assert(!walk_kept("repo/src", &l), "a changed exclude is read again");
	list_free(&l);
	same("repo/src", &o, "");
}
