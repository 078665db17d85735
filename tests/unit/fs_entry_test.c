/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "fs/entry.h"
#include "fs/listdir.h"

static char dir[64];

static void mk(const char *rel, const char *content)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	if (!content) {
		cr_assert_eq(mkdir(p, 0755), 0, "mkdir %s", p);
		return;
	}
	FILE *f = fopen(p, "w");
	cr_assert_not_null(f);
	fputs(content, f);
	fclose(f);
}

static void setup(void)
{
	strcpy(dir, "/tmp/fs_entry_test_XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
}

static void teardown(void)
{
	char err[512];
	fs_remove_all(dir, err, sizeof(err));
}

TestSuite(fs_entry, .init = setup, .fini = teardown);

Test(fs_entry, permission_strings)
{
	static const struct {
		mode_t m;
		const char *s;
	} v[] = {
		{ S_IFREG | 0644, "-rw-r--r--" },
		{ S_IFDIR | 0755, "drwxr-xr-x" },
		{ S_IFLNK | 0777, "Lrwxrwxrwx" },
		{ S_IFDIR | S_ISVTX | 0777, "dtrwxrwxrwx" },
		{ S_IFREG | S_ISUID | S_ISGID | 0755, "ugrwxr-xr-x" },
		{ S_IFCHR | 0666, "Dcrw-rw-rw-" },
		{ S_IFBLK | 0660, "Drw-rw----" },
		{ S_IFIFO | 0600, "prw-------" },
		{ S_IFSOCK | 0777, "Srwxrwxrwx" },
		{ S_IFREG | S_ISUID | 0755, "urwxr-xr-x" },
		{ S_IFREG, "----------" },
	};
	char buf[32];
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		fs_perm_string(v[i].m, buf, sizeof(buf));
		cr_expect_str_eq(buf, v[i].s);
	}
}

Test(fs_entry, entry_info_file_and_symlinks)
{
	char p[PATH_MAX], l[PATH_MAX], err[1024];
	Filesystem__EntryInfo *e;

	mk("f.txt", "12345");
	snprintf(p, sizeof(p), "%s/f.txt", dir);
	chmod(p, 0640);
	cr_assert_eq(fs_entry_info(p, &e, err, sizeof(err)), 0);
	cr_assert_str_eq(e->name, "f.txt");
	cr_assert_str_eq(e->path, p);
	cr_assert_eq(e->type, FILESYSTEM__FILE_TYPE__FILE_TYPE_FILE);
	cr_assert_eq(e->size, 5);
	cr_assert_eq(e->mode, 0640);
	cr_assert_str_eq(e->permissions, "-rw-r-----");
	cr_assert_not_null(e->modified_time);
	cr_assert_eq(e->optional_symlink_target_case, FILESYSTEM__ENTRY_INFO__OPTIONAL_SYMLINK_TARGET__NOT_SET);
	fs_entry_free(e);

	snprintf(l, sizeof(l), "%s/link", dir);
	cr_assert_eq(symlink("f.txt", l), 0);
	cr_assert_eq(fs_entry_info(l, &e, err, sizeof(err)), 0);
	cr_assert_eq(e->type, FILESYSTEM__FILE_TYPE__FILE_TYPE_FILE);
	cr_assert_eq(e->size, 5); /* lstat size = length of "f.txt" */
	cr_assert_eq(e->mode, 0640);
	cr_assert_str_eq(e->permissions, "Lrwxrwxrwx");
	cr_assert_str_eq(e->symlink_target, p);
	fs_entry_free(e);

	snprintf(l, sizeof(l), "%s/dangling", dir);
	cr_assert_eq(symlink("/nonexistent/target", l), 0);
	cr_assert_eq(fs_entry_info(l, &e, err, sizeof(err)), 0);
	cr_assert_eq(e->type, FILESYSTEM__FILE_TYPE__FILE_TYPE_UNSPECIFIED);
	cr_assert_eq(e->mode, 0);
	cr_assert_str_eq(e->symlink_target, l);
	fs_entry_free(e);

	snprintf(p, sizeof(p), "%s/missing", dir);
	cr_assert_eq(fs_entry_info(p, &e, err, sizeof(err)), -ENOENT);
	char want[PATH_MAX + 100];
	snprintf(want, sizeof(want), "file not found: lstat %s: no such file or directory", p);
	cr_assert_str_eq(err, want);
}

Test(fs_entry, entry_info_trailing_slash_and_root)
{
	char p[PATH_MAX], err[1024];
	Filesystem__EntryInfo *e;
	mk("sub", NULL);
	snprintf(p, sizeof(p), "%s/sub/", dir);
	cr_assert_eq(fs_entry_info(p, &e, err, sizeof(err)), 0);
	cr_assert_str_eq(e->name, "sub");
	cr_assert_str_eq(e->path, p); /* not cleaned */
	cr_assert_eq(e->type, FILESYSTEM__FILE_TYPE__FILE_TYPE_DIRECTORY);
	fs_entry_free(e);
	cr_assert_eq(fs_entry_info("/", &e, err, sizeof(err)), 0);
	cr_assert_str_eq(e->name, "/");
	fs_entry_free(e);
}

Test(fs_entry, metadata_read_filters_and_replace)
{
	char p[PATH_MAX];
	struct fs_meta m = { 0 }, r;
	mk("m.txt", "x");
	snprintf(p, sizeof(p), "%s/m.txt", dir);
	if (setxattr(p, "user.e2b.keep", "1", 1, 0) < 0 && (errno == ENOTSUP || errno == EOPNOTSUPP))
		cr_skip_test("no user xattrs on /tmp");
	cr_assert_eq(setxattr(p, "user.e2b.bad", "\xff\xfe", 2, 0), 0);
	cr_assert_eq(setxattr(p, "user.other", "z", 1, 0), 0);
	fs_meta_read(p, &r);
	cr_assert_eq(r.n, 1);
	cr_assert_str_eq(r.kv[0].key, "keep");
	cr_assert_str_eq(r.kv[0].value, "1");
	fs_meta_clear(&r);
	int rfd = open(p, O_RDONLY);
	cr_assert_eq(fs_meta_read_fd(rfd, &r), listxattr(p, NULL, 0), "the whole list's length"); /* the same from a descriptor */
	close(rfd);
	cr_assert_eq(r.n, 1);
	cr_assert_str_eq(r.kv[0].key, "keep");
	cr_assert_str_eq(r.kv[0].value, "1");
	fs_meta_clear(&r);

	cr_assert_eq(fs_meta_add(&m, "new", 3, "v", 1), 0);
	cr_assert_eq(fs_meta_add(&m, "new", 3, "second", 6), 0); /* first wins */
	int fd = open(p, O_RDONLY);
	cr_assert_eq(fs_meta_replace_fd(fd, &m), 0);
	close(fd);
	fs_meta_read(p, &r);
	cr_assert_eq(r.n, 1);
	cr_assert_str_eq(r.kv[0].key, "new");
	cr_assert_str_eq(r.kv[0].value, "v");
	fs_meta_clear(&r);
	char v[8];
	cr_assert_eq(getxattr(p, "user.other", v, sizeof(v)), 1); /* untouched */
	fs_meta_clear(&m);
}

/* A file without any extended attribute: 0, nothing read. */
Test(fs_entry, metadata_read_none)
{
	char p[PATH_MAX];
	struct fs_meta r;

	mk("bare.txt", "x");
	snprintf(p, sizeof(p), "%s/bare.txt", dir);
	if (listxattr(p, NULL, 0) != 0)
		cr_skip_test("new files on /tmp carry attributes here");
	int fd = open(p, O_RDONLY);
	cr_assert_eq(fs_meta_read_fd(fd, &r), 0);
	close(fd);
	cr_assert_eq(r.n, 0);
}

/* A list of names longer than the first read's buffer: read again whole. */
Test(fs_entry, metadata_read_long_list)
{
	char p[PATH_MAX], name[96];
	struct fs_meta r;

	mk("long.txt", "x");
	snprintf(p, sizeof(p), "%s/long.txt", dir);
	for (int i = 0; i < 24; i++) {
		snprintf(name, sizeof(name), "user.padding-padding-padding-padding-padding-padding-%02d", i);
		if (setxattr(p, name, "p", 1, 0) < 0 && (errno == ENOTSUP || errno == EOPNOTSUPP))
			cr_skip_test("no user xattrs on /tmp");
	}
	cr_assert_eq(setxattr(p, "user.e2b.last", "found", 5, 0), 0);
	cr_assert_gt(listxattr(p, NULL, 0), 1024);
	int fd = open(p, O_RDONLY);
	cr_assert_gt(fs_meta_read_fd(fd, &r), 1024);
	close(fd);
	cr_assert_eq(r.n, 1);
	cr_assert_str_eq(r.kv[0].key, "last");
	cr_assert_str_eq(r.kv[0].value, "found");
	fs_meta_clear(&r);
	fs_meta_read(p, &r);
	cr_assert_eq(r.n, 1);
	fs_meta_clear(&r);
}

Test(fs_entry, metadata_validation)
{
	struct fs_meta m = { 0 };
	char err[512], key[300], val[5000];

	cr_assert_eq(fs_meta_validate(&m, err, sizeof(err)), 0);
	fs_meta_add(&m, "", 0, "v", 1);
	cr_assert_eq(fs_meta_validate(&m, err, sizeof(err)), -EINVAL);
	cr_assert_str_eq(err, "metadata key must not be empty");
	fs_meta_clear(&m);

	memset(key, 'k', 247);
	fs_meta_add(&m, key, 247, "v", 1);
	cr_assert_eq(fs_meta_validate(&m, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "exceeds 246 bytes"));
	fs_meta_clear(&m);

	fs_meta_add(&m, "ok", 2, "a\tb", 3);
	cr_assert_eq(fs_meta_validate(&m, err, sizeof(err)), -EINVAL);
	cr_assert_str_eq(err, "metadata value for key \"ok\" contains non-printable-ASCII byte 0x09 at offset 1");
	fs_meta_clear(&m);

	fs_meta_add(&m, "k\x01", 2, "v", 1);
	cr_assert_eq(fs_meta_validate(&m, err, sizeof(err)), -EINVAL);
	cr_assert_str_eq(err, "metadata key contains non-printable-ASCII byte 0x01 at offset 1");
	fs_meta_clear(&m);

	memset(val, 'v', 4090);
	fs_meta_add(&m, "k", 1, val, 4086); /* 9 + 1 + 4086 = 4096 */
	cr_assert_eq(fs_meta_validate(&m, err, sizeof(err)), 0);
	fs_meta_clear(&m);
	fs_meta_add(&m, "k", 1, val, 4087);
	cr_assert_eq(fs_meta_validate(&m, err, sizeof(err)), -EINVAL);
	cr_assert_str_eq(err, "total metadata size 4097 exceeds 4096 bytes");
	fs_meta_clear(&m);
}

Test(fs_entry, ensure_dirs)
{
	char p[PATH_MAX], err[1024];
	struct stat st;
	snprintf(p, sizeof(p), "%s/a//b/c/", dir);
	cr_assert_eq(fs_ensure_dirs(p, 1234, 2345, err, sizeof(err)), 0, "%s", err);
	snprintf(p, sizeof(p), "%s/a/b/c", dir);
	cr_assert_eq(stat(p, &st), 0);
	cr_assert(S_ISDIR(st.st_mode));
	cr_assert_eq(st.st_uid, 1234);
	cr_assert_eq(st.st_gid, 2345);
	/* existing dirs are left alone */
	cr_assert_eq(stat(dir, &st), 0);
	cr_assert_neq(st.st_uid, 1234);
	mk("file", "f");
	snprintf(p, sizeof(p), "%s/file/x", dir);
	cr_assert_eq(fs_ensure_dirs(p, 0, 0, err, sizeof(err)), -ENOTDIR);
	char want[PATH_MAX + 32];
	snprintf(want, sizeof(want), "path is a file: %s/file", dir);
	cr_assert_str_eq(err, want);
}

Test(fs_entry, path_dir_and_join)
{
	char out[64];
	fs_path_dir("/a/b/c", out, sizeof(out));
	cr_assert_str_eq(out, "/a/b");
	fs_path_dir("/a", out, sizeof(out));
	cr_assert_str_eq(out, "/");
	fs_path_dir("/a//b//", out, sizeof(out));
	cr_assert_str_eq(out, "/a/b");
	fs_path_dir("x", out, sizeof(out));
	cr_assert_str_eq(out, ".");
	cr_assert_eq(fs_join(out, sizeof(out), "/a", "b"), 0);
	cr_assert_str_eq(out, "/a/b");
	cr_assert_eq(fs_join(out, sizeof(out), "/a", ""), 0);
	cr_assert_str_eq(out, "/a");
	char big[100];
	memset(big, 'x', 99);
	big[99] = '\0';
	cr_assert_eq(fs_join(out, sizeof(out), "/", big), -ENAMETOOLONG);
	cr_assert(fs_utf8_valid("h\xc3\xa9", 3));
	cr_assert_not(fs_utf8_valid("\xc3", 1));
	cr_assert_not(fs_utf8_valid("\xed\xa0\x80", 3)); /* surrogate */
	cr_assert_not(fs_utf8_valid("\xc0\xaf", 2));     /* overlong */
}

Test(fs_entry, listdir_order_depth_and_symlinks)
{
	struct fs_listing l;
	char err[1024], p[PATH_MAX], ln[PATH_MAX];

	mk("b", NULL);
	mk("b/z.txt", "z");
	mk("b/a", NULL);
	mk("b/a/deep.txt", "d");
	mk("a.txt", "a");
	mk("B.txt", "B"); /* byte order: 'B' < 'a' */
	mk("c", NULL);
	mk("c/x", "x");
	snprintf(p, sizeof(p), "%s/c", dir);
	snprintf(ln, sizeof(ln), "%s/ln", dir);
	cr_assert_eq(symlink(p, ln), 0);

	cr_assert_eq(fs_listdir(dir, 0, &l, err, sizeof(err)), 0, "%s", err);
	const char *d1[] = { "B.txt", "a.txt", "b", "c", "ln" };
	cr_assert_eq(l.n, 5);
	for (size_t i = 0; i < 5; i++)
		cr_expect_str_eq(l.entries[i]->name, d1[i]);
	fs_listing_free(&l);

	cr_assert_eq(fs_listdir(dir, 2, &l, err, sizeof(err)), 0);
	const char *d2[] = { "B.txt", "a.txt", "b", "b/a", "b/z.txt", "c", "c/x", "ln" };
	cr_assert_eq(l.n, 8);
	for (size_t i = 0; i < 8; i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, d2[i]);
		cr_expect_str_eq(l.entries[i]->path, p);
	}
	fs_listing_free(&l);

	/* The requested path is a symlink: its target is listed, paths stay under the link. */
	cr_assert_eq(fs_listdir(ln, 5, &l, err, sizeof(err)), 0);
	cr_assert_eq(l.n, 1);
	snprintf(p, sizeof(p), "%s/ln/x", dir);
	cr_assert_str_eq(l.entries[0]->path, p);
	fs_listing_free(&l);

	snprintf(p, sizeof(p), "%s/nope/deeper", dir);
	cr_assert_eq(fs_listdir(p, 1, &l, err, sizeof(err)), -ENOENT);
	char want[PATH_MAX + 100];
	snprintf(want, sizeof(want), "path not found: lstat %s/nope: no such file or directory", dir);
	cr_assert_str_eq(err, want);
	snprintf(p, sizeof(p), "%s/a.txt", dir);
	cr_assert_eq(fs_listdir(p, 1, &l, err, sizeof(err)), -ENOTDIR);
	snprintf(p, sizeof(p), "%s/loop", dir);
	cr_assert_eq(symlink(p, p), 0);
	cr_assert_eq(fs_listdir(p, 1, &l, err, sizeof(err)), -ELOOP);
}

/* fs_walk hands out what fs_listdir collects, in the same order, one
 * entry at a time, for trees of every shape (a wide directory, deep
 * chains, empty directories) and depths. */
static void walk_equals_listdir(const char *root, uint32_t depth)
{
	struct fs_listing l;
	struct fs_walk *w;
	Filesystem__EntryInfo *e;
	char err[1024];
	size_t i = 0;
	int rc;

	cr_assert_eq(fs_listdir(root, depth, &l, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(fs_walk_open(root, depth, &w, err, sizeof(err)), 0, "%s", err);
	while ((rc = fs_walk_next(w, &e, err, sizeof(err))) > 0) {
		cr_assert_lt(i, l.n, "more entries walked than listed");
		cr_assert_str_eq(e->path, l.entries[i]->path);
		cr_assert_str_eq(e->name, l.entries[i]->name);
		cr_assert_eq(e->type, l.entries[i]->type);
		cr_assert_eq(e->size, l.entries[i]->size);
		i++;
	}
	cr_assert_eq(rc, 0, "%s", err);
	cr_assert_eq(i, l.n, "depth %u: %zu walked, %zu listed", depth, i, l.n);
	/* After the end it stays at the end. */
	cr_assert_eq(fs_walk_next(w, &e, err, sizeof(err)), 0);
	fs_walk_close(w);
	fs_listing_free(&l);
}

Test(fs_entry, walk_one_entry_at_a_time)
{
	char p[PATH_MAX], err[1024];
	struct fs_walk *w;
	Filesystem__EntryInfo *e;

	for (int i = 0; i < 3000; i++) {
		snprintf(p, sizeof(p), "wide/f%04d", (i * 7919) % 3000);
		if (i == 0)
			mk("wide", NULL);
		mk(p, "");
	}
	mk("deep", NULL);
	snprintf(p, sizeof(p), "deep");
	for (int i = 0; i < 20; i++) {
		strcat(p, "/d");
		mk(p, NULL);
	}
	mk("empty", NULL);
	mk("top.txt", "t");
	for (uint32_t d = 0; d < 25; d += 3)
		walk_equals_listdir(dir, d);

	/* The wide directory in byte order, its first entry without the rest
	   read twice, and closing half-way is clean. */
	snprintf(p, sizeof(p), "%s/wide", dir);
	cr_assert_eq(fs_walk_open(p, 1, &w, err, sizeof(err)), 0);
	cr_assert_eq(fs_walk_next(w, &e, err, sizeof(err)), 1);
	cr_assert_str_eq(e->name, "f0000");
	cr_assert_eq(fs_walk_next(w, &e, err, sizeof(err)), 1);
	cr_assert_str_eq(e->name, "f0001");
	fs_walk_close(w);

	/* Errors before the first entry are fs_listdir's. */
	snprintf(p, sizeof(p), "%s/top.txt", dir);
	cr_assert_eq(fs_walk_open(p, 1, &w, err, sizeof(err)), -ENOTDIR);
	cr_assert_null(w);
	snprintf(p, sizeof(p), "%s/none", dir);
	cr_assert_eq(fs_walk_open(p, 1, &w, err, sizeof(err)), -ENOENT);
	cr_assert(strstr(err, "path not found"));

	/* A directory that vanishes while it waits its turn is skipped. */
	snprintf(p, sizeof(p), "%s", dir);
	cr_assert_eq(fs_walk_open(p, 3, &w, err, sizeof(err)), 0);
	for (;;) {
		int rc = fs_walk_next(w, &e, err, sizeof(err));

		cr_assert_geq(rc, 0, "%s", err);
		if (rc == 0)
			break;
		if (strcmp(e->name, "empty") == 0) {
			char q[PATH_MAX];

			snprintf(q, sizeof(q), "%s/empty", dir);
			cr_assert_eq(rmdir(q), 0);
		}
	}
	fs_walk_close(w);
}

Test(fs_entry, remove_all)
{
	char p[PATH_MAX], err[1024], target[PATH_MAX];
	struct stat st;

	mk("t", NULL);
	mk("t/a", NULL);
	mk("t/a/f", "f");
	mk("keep", "k");
	snprintf(target, sizeof(target), "%s/keep", dir);
	snprintf(p, sizeof(p), "%s/t/a/link", dir);
	cr_assert_eq(symlink(target, p), 0);
	for (int i = 0; i < 300; i++) {
		char n[32];
		snprintf(n, sizeof(n), "t/f%03d", i);
		mk(n, "x");
	}
	snprintf(p, sizeof(p), "%s/t", dir);
	cr_assert_eq(fs_remove_all(p, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(lstat(p, &st), -1);
	cr_assert_eq(stat(target, &st), 0);
	cr_assert_eq(fs_remove_all(p, err, sizeof(err)), 0); /* missing is fine */
	cr_assert_eq(fs_remove_all(target, err, sizeof(err)), 0);
	cr_assert_eq(stat(target, &st), -1);
	snprintf(p, sizeof(p), "%s/.", dir);
	cr_assert_eq(fs_remove_all(p, err, sizeof(err)), -EINVAL);
}

/* A 1500-level tree: the walk and the remove must not run out of stack. */
Test(fs_entry, deep_tree)
{
	char p[PATH_MAX], err[1024];
	struct fs_listing l;
	int fd = open(dir, O_RDONLY | O_DIRECTORY);

	for (int i = 0; i < 1500; i++) {
		cr_assert_eq(mkdirat(fd, "d", 0755), 0);
		int nfd = openat(fd, "d", O_RDONLY | O_DIRECTORY);
		close(fd);
		fd = nfd;
	}
	close(fd);
	cr_assert_eq(fs_listdir(dir, 100000, &l, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(l.n, 1500);
	fs_listing_free(&l);
	snprintf(p, sizeof(p), "%s/d", dir);
	cr_assert_eq(fs_remove_all(p, err, sizeof(err)), 0, "%s", err);
	struct stat st;
	cr_assert_eq(lstat(p, &st), -1);
}

/* Built in the caller's buffer when it fits, on the heap when not; the
 * same message either way, and fs_entry_free releases both. */
Test(fs_entry, entry_info_in_caller_storage)
{
	_Alignas(max_align_t) unsigned char buf[1024], small[64];
	char p[PATH_MAX], err[512];
	Filesystem__EntryInfo *a, *b, *c;

	mk("f.txt", "hello");
	snprintf(p, sizeof(p), "%s/f.txt", dir);
	cr_assert_eq(setxattr(p, "user.e2b.k", "v", 1, 0) == 0 || errno == ENOTSUP, 1);
	cr_assert_eq(fs_entry_info(p, &a, err, sizeof(err)), 0);
	cr_assert_eq(fs_entry_info_in(p, buf, sizeof(buf), &b, err, sizeof(err)), 0);
	cr_assert_eq(fs_entry_info_in(p, small, sizeof(small), &c, err, sizeof(err)), 0);
	cr_assert_eq((void *)b, (void *)buf, "fits: in the buffer");
	cr_assert_neq((void *)c, (void *)small, "too small: on the heap");
	Filesystem__EntryInfo *v[] = { b, c };
	for (int i = 0; i < 2; i++) {
		cr_assert_str_eq(v[i]->name, a->name);
		cr_assert_str_eq(v[i]->path, a->path);
		cr_assert_str_eq(v[i]->permissions, a->permissions);
		cr_assert_str_eq(v[i]->owner, a->owner);
		cr_assert_eq(v[i]->size, 5);
		cr_assert_eq(v[i]->type, a->type);
		cr_assert_eq(v[i]->n_metadata, a->n_metadata);
		cr_assert_not_null(v[i]->modified_time);
		cr_assert_eq(v[i]->modified_time->seconds, a->modified_time->seconds);
	}
	fs_entry_free(a);
	fs_entry_free(b);
	fs_entry_free(c);
	/* A missing path: the error, nothing built. */
	snprintf(p, sizeof(p), "%s/nope", dir);
	cr_assert_eq(fs_entry_info_in(p, buf, sizeof(buf), &b, err, sizeof(err)), -ENOENT);
	cr_assert_null(b);
}
