/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs_fwrite_test.c - a file written whole (fs/fwrite.h): atomically
 * through a registered temporary that takes the target's mode and
 * attributes, in place where a rename would not mean the same object, and
 * nothing half-written left behind by a discard.
 */
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
#include <sys/xattr.h>
#include <unistd.h>

#include "base/uptmp.h"
#include "fs/fwrite.h"

static char dir[] = "/tmp/fwrite-test.XXXXXX";
static char regdir[200];
static char err[2 * PATH_MAX + 512];

static void setup(void)
{
	cr_assert(mkdtemp(dir));
	snprintf(regdir, sizeof(regdir), "%s/.registry", dir);
	snprintf(uptmp_registry, sizeof(uptmp_registry), "%s", regdir);
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	return remove(p);
}

static void teardown(void)
{
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(fwrite, .init = setup, .fini = teardown);

static char *at(const char *name)
{
	static char p[4][PATH_MAX];
	static int k;
	char *s = p[k++ % 4];
	snprintf(s, PATH_MAX, "%s/%s", dir, name);
	return s;
}

static void put(const char *path, const char *content)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, content, strlen(content)), (ssize_t)strlen(content));
	close(fd);
}

static char *get(const char *path)
{
	static char buf[4096];
	int fd = open(path, O_RDONLY);
	ssize_t n;

	if (fd < 0)
		return NULL;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n < 0 ? 0 : n] = '\0';
	return buf;
}

/* Names in dir besides the registry: the targets, and no temporary. */
static int temporaries(const char *d)
{
	DIR *dd = opendir(d);
	struct dirent *e;
	int n = 0;

	while ((e = readdir(dd)))
		if (uptmp_name_is(e->d_name, strlen(e->d_name), NULL))
			n++;
	closedir(dd);
	return n;
}

static int registered(void)
{
	DIR *dd = opendir(regdir);
	struct dirent *e;
	int n = 0;

	if (!dd)
		return 0;
	while ((e = readdir(dd)))
		n += e->d_name[0] != '.';
	closedir(dd);
	return n;
}

Test(fwrite, new_file_atomic_with_parents)
{
	struct fwrite w;
	char *t = at("a/b/new.txt");

	fwrite_init(&w);
	cr_assert_eq(fwrite_begin(&w, t, getuid(), getgid(), true, err, sizeof(err)), 0, "%s", err);
	cr_assert(w.tmp[0], "through a temporary");
	cr_assert_eq(registered(), 1, "registered while it is written");
	cr_assert_null(get(t), "nothing at the target before the commit");
	cr_assert_eq(fwrite_write(&w, "hello ", 6, err, sizeof(err)), 0);
	cr_assert_eq(fwrite_write(&w, "world", 5, err, sizeof(err)), 0);
	cr_assert_eq(fwrite_commit(&w, NULL, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(get(t), "hello world");
	cr_assert_eq(w.fd, -1);
	cr_assert_eq(temporaries(at("a/b")), 0);
	cr_assert_eq(registered(), 0, "forgotten once renamed");
}

Test(fwrite, replace_keeps_mode_and_attributes)
{
	char *t = at("keep.txt");
	struct stat before, after;
	char v[16];

	put(t, "old");
	chmod(t, 0640);
	bool xattrs = setxattr(t, "user.note", "kept", 4, 0) == 0;
	stat(t, &before);
	cr_assert_eq(fwrite_buffer(t, "new content", 11, getuid(), getgid(), true, NULL, err, sizeof(err)), 0, "%s", err);
	stat(t, &after);
	cr_assert_str_eq(get(t), "new content");
	cr_assert_neq(before.st_ino, after.st_ino, "replaced by a rename");
	cr_assert_eq(after.st_mode & 07777, 0640);
	if (xattrs) {
		ssize_t n = getxattr(t, "user.note", v, sizeof(v));
		cr_assert_eq(n, 4);
		cr_assert(!memcmp(v, "kept", 4));
	}
	cr_assert_eq(temporaries(dir), 0);
}

Test(fwrite, in_place_where_a_rename_would_differ)
{
	char *t = at("target.txt"), *lnk = at("link.txt"), *hard = at("hard.txt");
	struct stat before, after, lst;

	put(t, "old");
	cr_assert_eq(symlink(t, lnk), 0);
	stat(t, &before);
	cr_assert_eq(fwrite_buffer(lnk, "through the link", 16, getuid(), getgid(), true, NULL, err, sizeof(err)), 0);
	cr_assert_eq(lstat(lnk, &lst), 0);
	cr_assert(S_ISLNK(lst.st_mode), "the link stays a link");
	cr_assert_str_eq(get(t), "through the link");
	stat(t, &after);
	cr_assert_eq(before.st_ino, after.st_ino);

	cr_assert_eq(link(t, hard), 0);
	cr_assert_eq(fwrite_buffer(hard, "both names", 10, getuid(), getgid(), true, NULL, err, sizeof(err)), 0);
	cr_assert_str_eq(get(t), "both names", "a hard-linked file is written in place");

	cr_assert_eq(fwrite_buffer(t, "asked", 5, getuid(), getgid(), false, NULL, err, sizeof(err)), 0);
	stat(t, &after);
	cr_assert_eq(before.st_ino, after.st_ino, "atomic=false: in place");
	cr_assert_str_eq(get(t), "asked");
	cr_assert_eq(temporaries(dir), 0);
}

Test(fwrite, discard_leaves_nothing_new)
{
	struct fwrite w;
	char *t = at("half.txt"), *old = at("old.txt");

	fwrite_init(&w);
	fwrite_discard(&w); /* nothing yet: nothing happens */
	cr_assert_eq(fwrite_begin(&w, t, getuid(), getgid(), true, err, sizeof(err)), 0);
	fwrite_write(&w, "half", 4, err, sizeof(err));
	fwrite_discard(&w);
	cr_assert_null(get(t));
	cr_assert_eq(temporaries(dir), 0);
	cr_assert_eq(registered(), 0);

	cr_assert_eq(fwrite_begin(&w, t, getuid(), getgid(), false, err, sizeof(err)), 0);
	fwrite_write(&w, "half", 4, err, sizeof(err));
	fwrite_discard(&w);
	cr_assert_null(get(t), "a new file written in place goes again");

	put(old, "previous");
	cr_assert_eq(fwrite_begin(&w, old, getuid(), getgid(), true, err, sizeof(err)), 0);
	fwrite_write(&w, "half", 4, err, sizeof(err));
	fwrite_discard(&w);
	cr_assert_str_eq(get(old), "previous", "atomic: the old content stays");
}

Test(fwrite, directory_refused)
{
	struct fwrite w;

	mkdir(at("sub"), 0755);
	fwrite_init(&w);
	cr_assert_eq(fwrite_begin(&w, at("sub"), getuid(), getgid(), true, err, sizeof(err)), -EISDIR);
	cr_assert(strstr(err, "path is a directory: "), "%s", err);
	fwrite_discard(&w);
	cr_assert_eq(temporaries(dir), 0);
}

Test(fwrite, copy_from_an_fd)
{
	struct fwrite w;
	char *src = at("src.bin"), *t = at("copy.bin");
	size_t n = 300000;
	char *b = malloc(n);

	for (size_t i = 0; i < n; i++)
		b[i] = (char)(i * 7);
	int fd = open(src, O_WRONLY | O_CREAT, 0644);
	cr_assert_eq(write(fd, b, n), (ssize_t)n);
	close(fd);
	fd = open(src, O_RDONLY);
	fwrite_init(&w);
	cr_assert_eq(fwrite_begin(&w, t, getuid(), getgid(), true, err, sizeof(err)), 0);
	cr_assert_eq(fwrite_write(&w, "head", 4, err, sizeof(err)), 0);
	cr_assert_eq(fwrite_copy(&w, fd, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(fwrite_commit(&w, NULL, err, sizeof(err)), 0);
	close(fd);
	struct stat st;
	stat(t, &st);
	cr_assert_eq(st.st_size, (off_t)n + 4);
	fd = open(t, O_RDONLY);
	char *got = malloc(n + 4);
	cr_assert_eq(read(fd, got, n + 4), (ssize_t)n + 4);
	close(fd);
	cr_assert(!memcmp(got, "head", 4) && !memcmp(got + 4, b, n));
	free(got);
	free(b);
}
