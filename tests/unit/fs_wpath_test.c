/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs_wpath_test.c - the directory of a write (fs/wpath.h): a walk with
 * root's rights goes on as the owner of a link it meets (as nobody for a
 * root-owned link that may be another user's hard link), missing
 * directories are created and given away on their descriptor, and a walk
 * under another identity follows links as they are.
 *
 * Links "of another user" are made by root and lchown'ed to that user:
 * the state is the one the user would have made (the integration suite
 * hostile_write.sh makes them as uid 65534 for real).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fsid.h"
#include "fs/wpath.h"
#include "testloop.h"

static char dir[] = "/tmp/wpath-test.XXXXXX";
static char err[2 * PATH_MAX];

static void setup(void)
{
	if (geteuid() != 0)
		return;
	cr_assert(mkdtemp(dir));
	chmod(dir, 0755);
}

static void teardown(void)
{
	if (geteuid() == 0)
		rm_tree(dir);
}

TestSuite(wpath, .init = setup, .fini = teardown);

#define NEED_ROOT()                                                            \
	do {                                                                   \
		if (geteuid() != 0)                                            \
			cr_skip_test("links of other users need root");        \
	} while (0)

static char *at(const char *name)
{
	static char p[4][PATH_MAX];
	static int k;
	char *s = p[k++ % 4];
	snprintf(s, PATH_MAX, "%s/%s", dir, name);
	return s;
}

/* A directory of root's that only root may write, and one anyone may. */
static void dirs(void)
{
	cr_assert_eq(mkdir(at("rootonly"), 0755), 0);
	cr_assert_eq(mkdir(at("open"), 0777), 0);
	chmod(at("open"), 0777);
	cr_assert_eq(mkdir(at("user"), 0755), 0);
	cr_assert_eq(chown(at("user"), 65534, 65534), 0);
}

/* A symbolic link `name` -> `to` owned by uid. */
static void link_of(uid_t uid, const char *to, const char *name)
{
	cr_assert_eq(symlink(to, at(name)), 0, "%s", strerror(errno));
	cr_assert_eq(lchown(at(name), uid, uid), 0);
}

static void ino_of(int fd, const char *path, bool same)
{
	struct stat a, b;

	cr_assert_eq(fstat(fd, &a), 0);
	cr_assert_eq(stat(path, &b), 0);
	cr_assert_eq(a.st_ino == b.st_ino && a.st_dev == b.st_dev, same, "%s", path);
}

Test(wpath, plain_path_keeps_the_identity)
{
	struct wpath p;

	NEED_ROOT();
	dirs();
	wpath_init(&p);
	cr_assert_eq(wpath_parent(&p, at("rootonly/f.txt"), NULL, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(p.name, "f.txt");
	cr_assert(!p.slash);
	ino_of(p.dirfd, at("rootonly"), true);
	cr_assert(!p.as.set);
	cr_assert(wpath_as_root(&p));
	wpath_close(&p);

	cr_assert_eq(wpath_parent(&p, at("rootonly/d/"), NULL, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(p.name, "d");
	cr_assert(p.slash);
	wpath_close(&p);
	cr_assert_eq(wpath_parent(&p, "/", NULL, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(p.name, "");
	wpath_close(&p);
}

Test(wpath, root_link_followed_as_root)
{
	struct wpath p;

	NEED_ROOT();
	dirs();
	link_of(0, "rootonly", "rl");
	wpath_init(&p);
	cr_assert_eq(wpath_parent(&p, at("rl/f"), NULL, err, sizeof(err)), 0, "%s", err);
	ino_of(p.dirfd, at("rootonly"), true);
	cr_assert(!p.as.set, "a link of root's keeps root's rights");
	wpath_close(&p);
}

Test(wpath, another_users_link_goes_on_as_that_user)
{
	struct wpath p;
	struct fsid_saved sv;

	NEED_ROOT();
	dirs();
	link_of(65534, at("rootonly"), "user/to-root");
	link_of(65534, at("open"), "user/to-open");
	wpath_init(&p);
	cr_assert_eq(wpath_parent(&p, at("user/to-root/passwd"), NULL, err, sizeof(err)), 0, "%s", err);
	ino_of(p.dirfd, at("rootonly"), true);
	cr_assert(p.as.set);
	cr_assert_eq(p.as.uid, 65534);
	cr_assert(!wpath_as_root(&p));
	/* What the caller does there, it does as uid 65534: refused. */
	cr_assert_eq(wpath_enter(&p, &sv), 0);
	cr_assert_eq(fsid_current_uid(), 65534);
	int fd = openat(p.dirfd, "passwd", O_WRONLY | O_CREAT | O_EXCL, 0644);
	int e = errno;
	wpath_leave(&sv);
	cr_assert_eq(fsid_current_uid(), 0, "the identity is given back");
	cr_assert_eq(fd, -1);
	cr_assert_eq(e, EACCES);
	wpath_close(&p);

	/* Creating missing directories through it: refused in root's
	 * directory, done (and given away) where the link's owner may. */
	struct wpath_mk mk = { .uid = 1234, .gid = 2345 };
	cr_assert_eq(wpath_dir(&p, at("user/to-root/new/deeper"), &mk, err, sizeof(err)), -EACCES);
	cr_assert(strstr(err, "failed to create directory: mkdir "), "%s", err);
	cr_assert_neq(access(at("rootonly/new"), F_OK), 0);
	wpath_close(&p);
	cr_assert_eq(wpath_dir(&p, at("user/to-open/new/deeper"), &mk, err, sizeof(err)), 0, "%s", err);
	struct stat st;
	cr_assert_eq(stat(at("open/new/deeper"), &st), 0);
	cr_assert_eq(st.st_uid, 1234);
	cr_assert_eq(st.st_gid, 2345);
	cr_assert_eq(st.st_mode & 07777, 0755);
	cr_assert_eq(stat(at("open/new"), &st), 0);
	cr_assert_eq(st.st_uid, 1234, "each level made as the link's owner, then given away");
	wpath_close(&p);
}

Test(wpath, created_directories_are_the_users)
{
	struct wpath p;
	struct wpath_mk mk = { .uid = 1234, .gid = 2345 };
	struct stat st;

	NEED_ROOT();
	dirs();
	wpath_init(&p);
	cr_assert_eq(wpath_dir(&p, at("rootonly/a/b/c"), &mk, err, sizeof(err)), 0, "%s", err);
	ino_of(p.dirfd, at("rootonly/a/b/c"), true);
	wpath_close(&p);
	for (const char *d = "rootonly/a"; d; d = !strcmp(d, "rootonly/a") ? "rootonly/a/b" : !strcmp(d, "rootonly/a/b") ? "rootonly/a/b/c" : NULL) {
		cr_assert_eq(stat(at(d), &st), 0);
		cr_assert_eq(st.st_uid, 1234, "%s", d);
		cr_assert_eq(st.st_gid, 2345, "%s", d);
	}
	/* More levels than are given away at once. */
	char deep[PATH_MAX] = "rootonly/deep";
	for (int i = 0; i < 40; i++)
		strcat(deep, "/d");
	cr_assert_eq(wpath_dir(&p, at(deep), &mk, err, sizeof(err)), 0, "%s", err);
	wpath_close(&p);
	for (size_t n = strlen("rootonly/deep"); n <= strlen(deep); n += 2) {
		char sub[PATH_MAX];
		snprintf(sub, sizeof(sub), "%.*s", (int)n, deep);
		cr_assert_eq(stat(at(sub), &st), 0, "%s", sub);
		cr_assert_eq(st.st_uid, 1234, "%s", sub);
	}
	/* An existing directory is left as it is. */
	cr_assert_eq(stat(at("rootonly"), &st), 0);
	cr_assert_eq(st.st_uid, 0);
}

Test(wpath, hard_linked_root_link_in_an_open_directory)
{
	struct wpath p;

	NEED_ROOT();
	dirs();
	link_of(0, at("rootonly"), "rootlink");
	/* Anyone could have made this second name (fs.protected_hardlinks 0). */
	cr_assert_eq(link(at("rootlink"), at("open/planted")), 0);
	wpath_init(&p);
	cr_assert_eq(wpath_parent(&p, at("open/planted/x"), NULL, err, sizeof(err)), 0, "%s", err);
	cr_assert(p.as.set);
	cr_assert_eq(p.as.uid, 65534, "a maker that cannot be told is nobody");
	wpath_close(&p);
	/* The same link with one name is root's own. */
	cr_assert_eq(unlink(at("open/planted")), 0);
	cr_assert_eq(wpath_parent(&p, at("rootlink/x"), NULL, err, sizeof(err)), 0, "%s", err);
	cr_assert(!p.as.set);
	wpath_close(&p);
}

Test(wpath, errors)
{
	struct wpath p;
	struct wpath_mk mk = { .uid = 0, .gid = 0 };

	NEED_ROOT();
	dirs();
	close(open(at("file"), O_WRONLY | O_CREAT, 0644));
	wpath_init(&p);
	cr_assert_eq(wpath_dir(&p, at("file/sub"), &mk, err, sizeof(err)), -ENOTDIR);
	cr_assert(strstr(err, "path is a file: ") && strstr(err, "/file"), "%s", err);
	cr_assert_eq(wpath_dir(&p, at("missing/sub"), NULL, err, sizeof(err)), -ENOENT);
	cr_assert_eq(symlink("loop2", at("loop1")), 0);
	cr_assert_eq(symlink("loop1", at("loop2")), 0);
	cr_assert_eq(wpath_dir(&p, at("loop1/x"), &mk, err, sizeof(err)), -ELOOP);
	cr_assert_eq(p.dirfd, -1, "nothing open after an error");
}

Test(wpath, follow_the_last_component)
{
	struct wpath p;

	NEED_ROOT();
	dirs();
	close(open(at("rootonly/secret"), O_WRONLY | O_CREAT, 0600));
	link_of(65534, at("rootonly/secret"), "open/x");
	link_of(0, "../rootonly/secret", "open/y");
	wpath_init(&p);
	cr_assert_eq(wpath_parent(&p, at("open/y"), NULL, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(wpath_follow(&p, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(p.name, "secret");
	ino_of(p.dirfd, at("rootonly"), true);
	cr_assert(p.followed);
	cr_assert(!p.as.set);
	wpath_close(&p);

	cr_assert_eq(wpath_parent(&p, at("open/x"), NULL, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(wpath_follow(&p, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(p.name, "secret");
	cr_assert(p.as.set);
	cr_assert_eq(p.as.uid, 65534);
	wpath_close(&p);

	cr_assert_eq(wpath_parent(&p, at("open"), NULL, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(wpath_follow(&p, err, sizeof(err)), -EINVAL, "not a link");
	wpath_close(&p);
}

/* A walk that already runs as a user (a job under base/fsid) follows
 * links as they are: the kernel holds it to that user's rights. */
Test(wpath, under_a_users_identity_links_are_followed_as_they_are)
{
	struct fsid id = { .uid = 65534, .gid = 65534 };
	struct fsid_saved sv;
	struct wpath p;
	int rc;

	NEED_ROOT();
	dirs();
	link_of(1234, at("open"), "user/other");
	cr_assert_eq(fsid_enter(&id, &sv), 0);
	wpath_init(&p);
	rc = wpath_parent(&p, at("user/other/f"), NULL, err, sizeof(err));
	bool as_set = p.as.set;
	wpath_close(&p);
	fsid_leave(&sv);
	cr_assert_eq(rc, 0, "%s", err);
	cr_assert(!as_set);
}
