/* SPDX-License-Identifier: Apache-2.0 */
#include <archive.h>
#include <archive_entry.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "transfer/archive.h"

/* ---- the pure part: entry names ---- */

Test(archive, name_normalize)
{
	static const struct {
		const char *in, *out;
		int rc;
	} v[] = {
		{ "a", "a", 0 },
		{ "a/b/c", "a/b/c", 0 },
		{ "./a/./b/", "a/b", 0 },
		{ "a//b", "a/b", 0 },
		{ "dir/", "dir", 0 },
		{ "...", "...", 0 },
		{ "a/..b/c..", "a/..b/c..", 0 },
		{ "", "", -EINVAL },
		{ ".", "", -EINVAL },
		{ "./", "", -EINVAL },
		{ "/etc/passwd", "", -EPERM },
		{ "//x", "", -EPERM },
		{ "..", "", -EXDEV },
		{ "../x", "", -EXDEV },
		{ "a/../b", "", -EXDEV },
		{ "a/b/..", "", -EXDEV },
		{ "./../x", "", -EXDEV },
	};
	char out[64];

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		int rc = arch_name_normalize(v[i].in, out, sizeof(out));
		cr_assert_eq(rc, v[i].rc, "%s: rc %d", v[i].in, rc);
		if (rc == 0)
			cr_assert_str_eq(out, v[i].out, "%s", v[i].in);
	}
	cr_assert_eq(arch_name_normalize("abcdefgh/ijklmnop", out, 10), -ENAMETOOLONG);
	cr_assert_str_eq(arch_name_error(-EPERM), "absolute path");
	cr_assert_str_eq(arch_name_error(-EXDEV), "'..' component");
}

Test(archive, formats)
{
	cr_assert_eq(arch_format_parse("tar"), ARCH_TAR);
	cr_assert_eq(arch_format_parse("tgz"), ARCH_TGZ);
	cr_assert_eq(arch_format_parse("tar.gz"), ARCH_TGZ);
	cr_assert_eq(arch_format_parse("zip"), ARCH_ZIP);
	cr_assert_eq(arch_format_parse("rar"), -EINVAL);
	cr_assert_eq(arch_format_parse(""), -EINVAL);
	cr_assert_str_eq(arch_format_ext(ARCH_TGZ), "tar.gz");
}

/* ---- extraction against a real directory ---- */

struct ent {
	const char *name;
	char type;          /* 'f' file, 'd' dir, 'l' symlink, 'h' hard link */
	const char *data;   /* file content or link target */
	int mode;
};

/* A pax tar of `e` in an unnamed file. */
static int make_tar(const struct ent *e, size_t n)
{
	int fd = memfd_create("tar", 0);
	struct archive *a = archive_write_new();
	struct archive_entry *ae = archive_entry_new();

	cr_assert(fd >= 0);
	archive_write_set_format_pax_restricted(a);
	cr_assert_eq(archive_write_open_fd(a, fd), ARCHIVE_OK);
	for (size_t i = 0; i < n; i++) {
		archive_entry_clear(ae);
		archive_entry_set_pathname(ae, e[i].name);
		archive_entry_set_mtime(ae, 1600000000, 0);
		int mode = e[i].mode ? e[i].mode : 0644;
		switch (e[i].type) {
		case 'd':
			archive_entry_set_mode(ae, AE_IFDIR | (mode == 0644 ? 0755 : mode));
			break;
		case 'l':
			archive_entry_set_mode(ae, AE_IFLNK | 0777);
			archive_entry_set_symlink(ae, e[i].data);
			break;
		case 'h':
			archive_entry_set_mode(ae, AE_IFREG | 0644);
			archive_entry_set_hardlink(ae, e[i].data);
			break;
		default:
			archive_entry_set_mode(ae, AE_IFREG | mode);
			archive_entry_set_size(ae, (la_int64_t)strlen(e[i].data));
		}
		cr_assert_eq(archive_write_header(a, ae), ARCHIVE_OK);
		if (e[i].type == 'f')
			archive_write_data(a, e[i].data, strlen(e[i].data));
	}
	archive_write_close(a);
	archive_write_free(a);
	archive_entry_free(ae);
	return fd;
}

static char tmpdir[64];
static int root_fd = -1, list_fd = -1;

static void setup(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/arch-unit.XXXXXX");
	cr_assert_not_null(mkdtemp(tmpdir));
	root_fd = open(tmpdir, O_RDONLY | O_DIRECTORY);
	list_fd = memfd_create("list", 0);
}

static void teardown(void)
{
	close(root_fd);
	close(list_fd);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	cr_assert_eq(system(cmd), 0);
	arch_limits = (struct arch_limits){ 200000, 10ull << 30, 200 };
}

static int extract(const struct ent *e, size_t n, struct arch_extract *x, bool keep_setid)
{
	int fd = make_tar(e, n);
	struct stat st;
	fstat(fd, &st);
	memset(x, 0, sizeof(*x));
	x->archive_fd = fd;
	x->archive_size = (uint64_t)st.st_size;
	x->format = ARCH_TAR;
	x->root_fd = root_fd;
	x->final_dir = "/final";
	x->uid = getuid();
	x->gid = getgid();
	x->keep_setid = keep_setid;
	x->list_fd = list_fd;
	int rc = arch_extract_run(x);
	close(fd);
	return rc;
}

static bool exists(const char *rel)
{
	struct stat st;
	return fstatat(root_fd, rel, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

TestSuite(extract, .init = setup, .fini = teardown);

Test(extract, tree_and_list)
{
	const struct ent e[] = {
		{ "./d/", 'd', NULL, 0750 }, { "d/f.txt", 'f', "hello", 0640 }, { "d/l", 'l', "f.txt", 0 },
		{ "implicit/x", 'f', "x", 0 }, { "d/h", 'h', "d/f.txt", 0 },
	};
	struct arch_extract x;
	struct stat st;

	cr_assert_eq(extract(e, 5, &x, false), 0, "%s", x.msg);
	cr_assert_eq(x.entries, 5);
	cr_assert(fstatat(root_fd, "d", &st, 0) == 0 && (st.st_mode & 07777) == 0750);
	cr_assert(fstatat(root_fd, "d/f.txt", &st, 0) == 0 && st.st_size == 5 && (st.st_mode & 07777) == 0640);
	cr_assert_eq(st.st_mtime, 1600000000);
	cr_assert_eq(st.st_nlink, 2, "hard link made");
	char t[16] = "";
	cr_assert_eq(readlinkat(root_fd, "d/l", t, sizeof(t)), 5);
	cr_assert(exists("implicit/x"));

	char list[4096] = "";
	cr_assert(pread(list_fd, list, sizeof(list) - 1, 0) > 0);
	cr_assert_not_null(strstr(list, "{\"name\":\"f.txt\",\"type\":\"file\",\"path\":\"/final/d/f.txt\",\"size\":5}"), "%s", list);
	cr_assert_not_null(strstr(list, "\"type\":\"symlink\""));
	cr_assert_not_null(strstr(list, "\"type\":\"dir\""));
}

Test(extract, refuses_dotdot_and_absolute)
{
	const struct ent a[] = { { "ok", 'f', "1", 0 }, { "x/../../evil", 'f', "1", 0 } };
	const struct ent b[] = { { "/etc/evil", 'f', "1", 0 } };
	struct arch_extract x;

	cr_assert_lt(extract(a, 2, &x, false), 0);
	cr_assert_eq(x.status, 400);
	cr_assert_not_null(strstr(x.msg, "x/../../evil"), "%s", x.msg);
	cr_assert_lt(extract(b, 1, &x, false), 0);
	cr_assert_eq(x.status, 400);
	cr_assert_not_null(strstr(x.msg, "absolute"), "%s", x.msg);
}

Test(extract, never_through_a_symlink)
{
	const struct ent a[] = { { "s", 'l', "/", 0 }, { "s/tmp/evil", 'f', "1", 0 } };
	const struct ent b[] = { { "s", 'l', "sub", 0 }, { "sub/", 'd', NULL, 0 }, { "s/x", 'f', "1", 0 } };
	struct arch_extract x;

	cr_assert_lt(extract(a, 2, &x, false), 0);
	cr_assert_eq(x.status, 400);
	cr_assert_not_null(strstr(x.msg, "symlink 's'"), "%s", x.msg);
	cr_assert(access("/tmp/evil", F_OK) != 0);
	/* even a link that stays inside is never followed */
	cr_assert_lt(extract(b, 3, &x, false), 0);
	cr_assert_eq(x.status, 400);
	cr_assert_not(exists("sub/x"));
}

Test(extract, hard_links_stay_inside)
{
	const struct ent a[] = { { "h", 'h', "/etc/shadow", 0 } };
	const struct ent b[] = { { "h", 'h', "../outside", 0 } };
	const struct ent c[] = { { "h", 'h', "later", 0 }, { "later", 'f', "1", 0 } };
	const struct ent d[] = { { "s", 'l', "/etc", 0 }, { "h", 'h', "s/shadow", 0 } };
	struct arch_extract x;

	cr_assert_lt(extract(a, 1, &x, false), 0);
	cr_assert_eq(x.status, 400);
	cr_assert_lt(extract(b, 1, &x, false), 0);
	cr_assert_eq(x.status, 400);
	cr_assert_lt(extract(c, 2, &x, false), 0);
	cr_assert_eq(x.status, 400);
	cr_assert_lt(extract(d, 2, &x, false), 0);
	cr_assert_eq(x.status, 400, "%s", x.msg);
	cr_assert_not(exists("h"));
}

Test(extract, setid_bits)
{
	const struct ent a[] = { { "s", 'f', "x", 06755 } };
	struct arch_extract x;
	struct stat st;

	cr_assert_eq(extract(a, 1, &x, false), 0, "%s", x.msg);
	cr_assert(fstatat(root_fd, "s", &st, 0) == 0);
	cr_assert_eq(st.st_mode & 07777, 0755);
	cr_assert_eq(extract(a, 1, &x, true), 0, "%s", x.msg);
	cr_assert(fstatat(root_fd, "s", &st, 0) == 0);
	cr_assert_eq(st.st_mode & 07777, 06755);
}

Test(extract, limits)
{
	const struct ent a[] = { { "a", 'f', "1", 0 }, { "b", 'f', "2", 0 }, { "c", 'f', "3", 0 } };
	const struct ent b[] = { { "a", 'f', "0123456789", 0 } };
	struct arch_extract x;

	arch_limits.max_entries = 2;
	cr_assert_lt(extract(a, 3, &x, false), 0);
	cr_assert_eq(x.status, 413);
	arch_limits.max_entries = 0; /* no limit */
	cr_assert_eq(extract(a, 3, &x, false), 0);
	arch_limits.max_bytes = 5;
	cr_assert_lt(extract(b, 1, &x, false), 0);
	cr_assert_eq(x.status, 413);
	cr_assert_not_null(strstr(x.msg, "expands beyond"));
}

Test(extract, garbage_and_truncation)
{
	const struct ent a[] = { { "big", 'f', "0123456789012345678901234567890123456789", 0 } };
	struct arch_extract x;
	int fd = make_tar(a, 1);

	memset(&x, 0, sizeof(x));
	x.archive_fd = fd;
	x.format = ARCH_TAR;
	x.root_fd = root_fd;
	x.final_dir = "/f";
	x.list_fd = list_fd;
	cr_assert_eq(ftruncate(fd, 520), 0); /* header and a few bytes */
	x.archive_size = 520;
	cr_assert_lt(arch_extract_run(&x), 0);
	cr_assert_eq(x.status, 400);
	cr_assert_eq(ftruncate(fd, 0), 0);
	cr_assert_eq(write(fd, "not an archive at all, not even close", 37), 37);
	x.archive_size = 37;
	cr_assert_lt(arch_extract_run(&x), 0);
	cr_assert_eq(x.status, 400, "%s", x.msg);
	close(fd);
}

/* ---- moving into place ---- */

Test(extract, merge_rules)
{
	char dst[96];
	snprintf(dst, sizeof(dst), "%s/dst", tmpdir);
	const struct ent a[] = { { "src/", 'd', NULL, 0 }, { "src/keep/new", 'f', "new", 0 }, { "src/f", 'f', "archive", 0 } };
	struct arch_extract x;
	int st = 0;
	char msg[512];

	cr_assert_eq(extract(a, 3, &x, false), 0, "%s", x.msg);
	cr_assert_eq(mkdirat(root_fd, "dst", 0755), 0);
	cr_assert_eq(mkdirat(root_fd, "dst/keep", 0755), 0);
	int old = openat(root_fd, "dst/keep/old", O_CREAT | O_WRONLY, 0644);
	close(old);
	int f = openat(root_fd, "dst/f", O_CREAT | O_WRONLY, 0644);
	cr_assert_eq(write(f, "before", 6), 6);
	close(f);
	int src = openat(root_fd, "src", O_RDONLY | O_DIRECTORY);
	int d = openat(root_fd, "dst", O_RDONLY | O_DIRECTORY);
	cr_assert_eq(arch_merge_check(src, d, &st, msg, sizeof(msg)), 0, "%s", msg);
	cr_assert_eq(arch_merge(src, d, msg, sizeof(msg)), 0, "%s", msg);
	cr_assert(exists("dst/keep/old"));
	cr_assert(exists("dst/keep/new"));
	char buf[16] = "";
	int rf = openat(root_fd, "dst/f", O_RDONLY);
	cr_assert_eq(read(rf, buf, sizeof(buf)), 7);
	cr_assert_str_eq(buf, "archive");
	close(rf);
	close(src);
	close(d);
}

Test(extract, merge_conflicts)
{
	const struct ent a[] = { { "src/", 'd', NULL, 0 }, { "src/link/x", 'f', "1", 0 } };
	const struct ent b[] = { { "src/", 'd', NULL, 0 }, { "src/isdir", 'f', "1", 0 } };
	struct arch_extract x;
	int st = 0;
	char msg[512];

	cr_assert_eq(mkdirat(root_fd, "dst", 0755), 0);
	cr_assert_eq(symlinkat("/tmp", root_fd, "dst/link"), 0);
	cr_assert_eq(mkdirat(root_fd, "dst/isdir", 0755), 0);
	int d = openat(root_fd, "dst", O_RDONLY | O_DIRECTORY);

	cr_assert_eq(extract(a, 2, &x, false), 0, "%s", x.msg);
	int src = openat(root_fd, "src", O_RDONLY | O_DIRECTORY);
	cr_assert_lt(arch_merge_check(src, d, &st, msg, sizeof(msg)), 0);
	cr_assert_eq(st, 400);
	cr_assert_not_null(strstr(msg, "symlink 'link'"), "%s", msg);
	close(src);
	cr_assert_eq(arch_remove_tree(root_fd, "src"), 0);
	cr_assert_not(exists("src"));

	cr_assert_eq(extract(b, 2, &x, false), 0, "%s", x.msg);
	src = openat(root_fd, "src", O_RDONLY | O_DIRECTORY);
	cr_assert_lt(arch_merge_check(src, d, &st, msg, sizeof(msg)), 0);
	cr_assert_eq(st, 409);
	close(src);
	close(d);
}

/* ---- creating ---- */

Test(extract, writer_round_trip)
{
	/* a tree: a small file, a zero-copy sized file, a symlink, a FIFO */
	cr_assert_eq(mkdirat(root_fd, "t", 0755), 0);
	cr_assert_eq(mkdirat(root_fd, "t/sub", 0700), 0);
	int f = openat(root_fd, "t/sub/small", O_CREAT | O_WRONLY, 0600);
	cr_assert_eq(write(f, "small", 5), 5);
	close(f);
	static char big[200000];
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (char)(i * 7);
	f = openat(root_fd, "t/big", O_CREAT | O_WRONLY, 0644);
	cr_assert_eq(write(f, big, sizeof(big)), (ssize_t)sizeof(big));
	close(f);
	cr_assert_eq(symlinkat("sub/small", root_fd, "t/link"), 0);
	cr_assert_eq(mkfifoat(root_fd, "t/fifo", 0644), 0);

	char dir[96], err[256];
	snprintf(dir, sizeof(dir), "%s/t", tmpdir);
	for (int zc = 0; zc < 2; zc++) {
		struct arch_writer *w = arch_writer_new(dir, ARCH_TAR, zc, err, sizeof(err));
		cr_assert_not_null(w, "%s", err);
		int out = memfd_create("out", 0);
		struct arch_piece p[ARCH_MAX_PIECES];
		size_t n;
		int rc;
		bool saw_file_piece = false;
		do {
			rc = arch_writer_fill(w, 4096, p, &n, err, sizeof(err));
			cr_assert_geq(rc, 0, "%s", err);
			for (size_t i = 0; i < n; i++) {
				if (p[i].fd >= 0) {
					saw_file_piece = true;
					char *b = malloc(p[i].len);
					cr_assert_eq(pread(p[i].fd, b, p[i].len, p[i].off), (ssize_t)p[i].len);
					cr_assert_eq(write(out, b, p[i].len), (ssize_t)p[i].len);
					free(b);
				} else {
					cr_assert_eq(write(out, p[i].p, p[i].n), (ssize_t)p[i].n);
				}
			}
		} while (rc == 1);
		cr_assert_eq(saw_file_piece, zc == 1);
		uint64_t entries, skipped;
		arch_writer_counts(w, &entries, &skipped);
		cr_assert_eq(entries, 4);
		cr_assert_eq(skipped, 1, "the FIFO");
		arch_writer_free(w);

		/* read it back */
		struct archive *a = archive_read_new();
		struct archive_entry *e;
		archive_read_support_format_tar(a);
		lseek(out, 0, SEEK_SET);
		cr_assert_eq(archive_read_open_fd(a, out, 4096), ARCHIVE_OK);
		int seen = 0;
		while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
			const char *nm = archive_entry_pathname(e);
			seen++;
			if (!strcmp(nm, "big")) {
				static char rb[sizeof(big)];
				cr_assert_eq(archive_read_data(a, rb, sizeof(rb)), (la_ssize_t)sizeof(rb));
				cr_assert_eq(memcmp(rb, big, sizeof(big)), 0);
			} else if (!strcmp(nm, "link")) {
				cr_assert_str_eq(archive_entry_symlink(e), "sub/small");
			} else if (!strcmp(nm, "sub/")) {
				cr_assert_eq(archive_entry_perm(e), 0700);
			} else {
				cr_assert_str_eq(nm, "sub/small");
			}
		}
		cr_assert_eq(seen, 4);
		archive_read_free(a);
		close(out);
	}
}
