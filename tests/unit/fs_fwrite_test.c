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

#include "base/fsid.h"
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
	/* The registry's slot file is held open from the first
	 * registration on: open it before a test counts descriptors. */
	char tmp[PATH_MAX], reg[320];
	snprintf(tmp, sizeof(tmp), "%s/" UPTMP_PREFIX "n0000000000000000", dir);
	uptmp_register(tmp, reg, sizeof(reg));
	cr_assert(reg[0]);
	uptmp_forget(reg);
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

/* Temporaries registered: whole records of the slot file, symlink entries. */
static int registered(void)
{
	return (int)uptmp_registered();
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

/* --- what a local user can do to a write of root's (docs/security.md) --- */

#define NEED_ROOT()                                                            \
	do {                                                                   \
		if (geteuid() != 0)                                            \
			cr_skip_test("files of other users need root");        \
	} while (0)

/* dir opened to everyone's lookups; rootonly (root's, 0755), user (uid
 * 65534's) and open (sticky, world-writable, as /tmp) in it. */
static void other_users(void)
{
	chmod(dir, 0755);
	cr_assert_eq(mkdir(at("rootonly"), 0755), 0);
	cr_assert_eq(mkdir(at("user"), 0755), 0);
	cr_assert_eq(chown(at("user"), 65534, 65534), 0);
	cr_assert_eq(mkdir(at("open"), 0777), 0);
	cr_assert_eq(chmod(at("open"), 01777), 0);
}

/* A file of uid's with `mode` and content "old". */
static void put_as(const char *path, uid_t uid, mode_t mode)
{
	put(path, "old");
	cr_assert_eq(chown(path, uid, uid), 0);
	cr_assert_eq(chmod(path, mode), 0);
}

static mode_t mode_of(const char *path)
{
	struct stat st;

	cr_assert_eq(lstat(path, &st), 0, "%s", path);
	return st.st_mode & 07777;
}

/* The case: the owner of a target sets set-ID bits, root uploads
 * over it. The replacement keeps what chown(2) leaves, exactly as the
 * kernel leaves it for the same file written in place. */
Test(fwrite, set_id_bits_go_as_chown_drops_them)
{
	static const mode_t modes[] = { 04755, 02755, 02745, 06775, 04700, 0755 };

	NEED_ROOT();
	other_users();
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		char *a = at("rootonly/atomic"), *b = at("rootonly/inplace");
		put_as(a, 65534, modes[i]);
		put_as(b, 65534, modes[i]);
		cr_assert_eq(fwrite_buffer(a, "ELF", 3, 0, 0, true, NULL, err, sizeof(err)), 0, "%s", err);
		cr_assert_eq(fwrite_buffer(b, "ELF", 3, 0, 0, false, NULL, err, sizeof(err)), 0, "%s", err);
		struct stat st;
		cr_assert_eq(stat(a, &st), 0);
		cr_assert_eq(st.st_uid, 0);
		cr_assert_eq(st.st_mode & S_ISUID, 0, "mode %o: no set-user-ID root file", modes[i]);
		cr_assert_eq(mode_of(a), mode_of(b), "mode %o: atomic %o, in place %o", modes[i], mode_of(a), mode_of(b));
		unlink(a);
		unlink(b);
	}
}

/* File capabilities, other security.* and trusted.* attributes stay with
 * the old file; user.* ones pass. */
Test(fwrite, privileged_attributes_do_not_pass)
{
	/* VFS_CAP_REVISION_2, effective, permitted CAP_SETUID (bit 7). */
	static const unsigned char cap[20] = { 0x01, 0x00, 0x00, 0x02, 0x80 };
	char *t, v[64];

	NEED_ROOT();
	other_users();
	t = at("rootonly/tool");
	put_as(t, 0, 0755);
	if (setxattr(t, "user.note", "kept", 4, 0) < 0)
		cr_skip_test("no user xattrs here");
	cr_assert_eq(setxattr(t, "security.capability", cap, sizeof(cap), 0), 0, "%s", strerror(errno));
	cr_assert_eq(setxattr(t, "trusted.overlay.opaque", "y", 1, 0), 0);
	cr_assert_eq(fwrite_buffer(t, "new", 3, 0, 0, true, NULL, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(get(t), "new");
	cr_assert_eq(getxattr(t, "user.note", v, sizeof(v)), 4);
	cr_assert_eq(getxattr(t, "security.capability", v, sizeof(v)), -1, "capabilities must not pass");
	cr_assert_eq(getxattr(t, "trusted.overlay.opaque", v, sizeof(v)), -1);
}

/* The temporary over an existing file has its owner and mode before the
 * first byte, and never more than 0600 on the way there. */
Test(fwrite, the_temporary_is_the_targets_before_any_byte)
{
	struct fwrite w;
	struct stat st;
	char *t;

	NEED_ROOT();
	other_users();
	t = at("rootonly/private");
	put_as(t, 0, 0600);
	mode_t old = umask(0);
	fwrite_init(&w);
	cr_assert_eq(fwrite_begin(&w, t, 65534, 65534, true, err, sizeof(err)), 0, "%s", err);
	umask(old);
	cr_assert(w.tmp[0]);
	cr_assert_eq(stat(w.tmp, &st), 0);
	cr_assert_eq(st.st_size, 0);
	cr_assert_eq(st.st_mode & 07777, 0600, "%o", st.st_mode & 07777);
	cr_assert_eq(st.st_uid, 65534);
	cr_assert_eq(st.st_gid, 65534);
	fwrite_discard(&w);

	put_as(t, 0, 0640);
	fwrite_init(&w);
	cr_assert_eq(fwrite_begin(&w, t, 0, 0, true, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(stat(w.tmp, &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0640);
	fwrite_discard(&w);
	cr_assert_eq(temporaries(at("rootonly")), 0);
}

/* The temporary is created 0600, whatever the umask: seen where the
 * owner cannot be given (a job running as a user asks for root's), which
 * stops the write before the mode is set. */
Test(fwrite, the_temporary_is_created_0600)
{
	struct fsid id = { .uid = 65534, .gid = 65534 };
	struct fsid_saved sv;
	struct fwrite w;
	struct stat st;
	int rc;

	NEED_ROOT();
	other_users();
	put_as(at("user/t"), 65534, 0666);
	mode_t old = umask(0);
	fwrite_init(&w);
	cr_assert_eq(fsid_enter(&id, &sv), 0);
	rc = fwrite_begin(&w, at("user/t"), 0, 0, true, err, sizeof(err));
	fsid_leave(&sv);
	umask(old);
	cr_assert_eq(rc, -EIO);
	cr_assert(strstr(err, "error changing file ownership"), "%s", err);
	cr_assert(w.tmp[0]);
	cr_assert_eq(stat(w.tmp, &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0600, "created %o", st.st_mode & 07777);
	fwrite_discard(&w);
	cr_assert_eq(temporaries(at("user")), 0);
}

/* Another writer replaces the target during the write: the commit gives
 * the new content that file's attributes, not the earlier one's. */
Test(fwrite, the_commit_takes_the_file_under_the_name_now)
{
	struct fwrite w;
	char *t = at("swap.txt"), *other = at("other.txt"), v[16];

	put(t, "first");
	chmod(t, 0640);
	bool xattrs = setxattr(t, "user.first", "1", 1, 0) == 0;
	fwrite_init(&w);
	cr_assert_eq(fwrite_begin(&w, t, getuid(), getgid(), true, err, sizeof(err)), 0, "%s", err);
	put(other, "second");
	chmod(other, 0604);
	if (xattrs)
		setxattr(other, "user.second", "2", 1, 0);
	cr_assert_eq(rename(other, t), 0);
	cr_assert_eq(fwrite_write(&w, "mine", 4, err, sizeof(err)), 0);
	cr_assert_eq(fwrite_commit(&w, NULL, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(get(t), "mine");
	cr_assert_eq(mode_of(t), 0604);
	if (xattrs) {
		cr_assert_eq(getxattr(t, "user.second", v, sizeof(v)), 1);
		cr_assert_eq(getxattr(t, "user.first", v, sizeof(v)), -1);
	}
}

/* A user's link into a directory only root may write: every form of the
 * write is refused by the kernel (the write goes on as the link's
 * owner), and nothing there changes. */
Test(fwrite, another_users_link_does_not_take_roots_rights)
{
	struct stat st;

	NEED_ROOT();
	other_users();
	put_as(at("rootonly/secret"), 0, 0600);
	cr_assert_eq(symlink(at("rootonly/secret"), at("user/x")), 0);
	cr_assert_eq(lchown(at("user/x"), 65534, 65534), 0);
	cr_assert_eq(symlink(at("rootonly/new"), at("user/dangling")), 0);
	cr_assert_eq(lchown(at("user/dangling"), 65534, 65534), 0);
	cr_assert_eq(symlink(at("rootonly"), at("user/d")), 0);
	cr_assert_eq(lchown(at("user/d"), 65534, 65534), 0);

	for (int atomic = 0; atomic < 2; atomic++) {
		cr_assert_eq(fwrite_buffer(at("user/x"), "evil", 4, 0, 0, atomic, NULL, err, sizeof(err)), -EACCES);
		cr_assert(strstr(err, "permission denied"), "%s", err);
		cr_assert_eq(fwrite_buffer(at("user/dangling"), "evil", 4, 0, 0, atomic, NULL, err, sizeof(err)), -EACCES);
		cr_assert_eq(fwrite_buffer(at("user/d/secret"), "evil", 4, 0, 0, atomic, NULL, err, sizeof(err)), -EACCES);
		cr_assert_eq(fwrite_buffer(at("user/d/sub/f"), "evil", 4, 0, 0, atomic, NULL, err, sizeof(err)), -EACCES);
	}
	cr_assert_str_eq(get(at("rootonly/secret")), "old");
	cr_assert_eq(stat(at("rootonly/secret"), &st), 0);
	cr_assert_eq(st.st_uid, 0, "never chowned");
	cr_assert_eq(access(at("rootonly/new"), F_OK), -1);
	cr_assert_eq(access(at("rootonly/sub"), F_OK), -1);
	cr_assert_eq(temporaries(at("rootonly")), 0);

	/* Where the link's owner may write, the write goes through. */
	put_as(at("user/real"), 65534, 0644);
	cr_assert_eq(symlink("real", at("user/mine")), 0);
	cr_assert_eq(lchown(at("user/mine"), 65534, 65534), 0);
	cr_assert_eq(fwrite_buffer(at("user/mine"), "fine", 4, 0, 0, true, NULL, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(get(at("user/real")), "fine");
	cr_assert_eq(stat(at("user/real"), &st), 0);
	cr_assert_eq(st.st_uid, 0, "given to the request's user on the descriptor");
}

/* A second name of root's file in a directory anyone can write (a hard
 * link where fs.protected_hardlinks is 0): root does not write through
 * it, whatever atomic says; the name is replaced. */
Test(fwrite, a_planted_hard_link_is_replaced_not_written_through)
{
	struct stat a, b;

	NEED_ROOT();
	other_users();
	put_as(at("rootonly/shadow"), 0, 0640);
	for (int atomic = 0; atomic < 2; atomic++) {
		cr_assert_eq(link(at("rootonly/shadow"), at("open/h")), 0);
		cr_assert_eq(fwrite_buffer(at("open/h"), "evil", 4, 65534, 65534, atomic, NULL, err, sizeof(err)), 0,
			     "%s", err);
		cr_assert_str_eq(get(at("rootonly/shadow")), "old");
		cr_assert_eq(stat(at("rootonly/shadow"), &a), 0);
		cr_assert_eq(stat(at("open/h"), &b), 0);
		cr_assert_eq(a.st_uid, 0, "never chowned");
		cr_assert_neq(a.st_ino, b.st_ino);
		cr_assert_str_eq(get(at("open/h")), "evil");
		cr_assert_eq(b.st_uid, 65534);
		cr_assert_eq(unlink(at("open/h")), 0);
	}
	/* In the file owner's own directory, hard links are written through. */
	put_as(at("user/f"), 65534, 0644);
	cr_assert_eq(link(at("user/f"), at("user/g")), 0);
	cr_assert_eq(fwrite_buffer(at("user/g"), "both", 4, 65534, 65534, true, NULL, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(get(at("user/f")), "both");
}

/* A job that runs as a user (base/fsid, as Edit does) writes as that user:
 * a link of another user's is followed as it is, the kernel judges. */
Test(fwrite, under_a_users_identity_the_kernel_judges)
{
	struct fsid id = { .uid = 65534, .gid = 65534 };
	struct fsid_saved sv;
	int r1, r2;

	NEED_ROOT();
	other_users();
	cr_assert_eq(symlink(at("rootonly"), at("user/to-root")), 0);
	cr_assert_eq(lchown(at("user/to-root"), 1234, 1234), 0);
	cr_assert_eq(symlink(at("user"), at("open/to-user")), 0);
	cr_assert_eq(lchown(at("open/to-user"), 1234, 1234), 0);
	cr_assert_eq(fsid_enter(&id, &sv), 0);
	r1 = fwrite_buffer(at("user/to-root/f"), "x", 1, (uid_t)-1, (gid_t)-1, true, NULL, err, sizeof(err));
	r2 = fwrite_buffer(at("open/to-user/f"), "y", 1, (uid_t)-1, (gid_t)-1, true, NULL, err, sizeof(err));
	fsid_leave(&sv);
	cr_assert_eq(r1, -EACCES);
	cr_assert_eq(r2, 0, "%s", err);
	cr_assert_str_eq(get(at("user/f")), "y");
	struct stat st;
	cr_assert_eq(stat(at("user/f"), &st), 0);
	cr_assert_eq(st.st_uid, 65534);
}

/* Descriptors this process has open. */
static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* fwrite_stage then fwrite_publish (a try's commit): the staged file is
 * complete, with the target's attributes, and nothing of the walk stays
 * open; it is published, or dropped, through another struct that knows
 * only its names. */
Test(fwrite, staged_then_published_by_its_names)
{
	struct fwrite w, p;
	char *t = at("s/target"), *u = at("s/other");
	int fds;

	cr_assert_eq(mkdir(at("s"), 0755), 0);
	put(t, "old");
	chmod(t, 0640);
	put(u, "old too");
	fds = open_fds();

	fwrite_init(&w);
	cr_assert_eq(fwrite_begin(&w, t, getuid(), getgid(), true, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(fwrite_write(&w, "staged", 6, err, sizeof(err)), 0);
	cr_assert_eq(fwrite_stage(&w, NULL, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(open_fds(), fds, "the staged file holds no descriptor");
	cr_assert_str_eq(get(t), "old");
	cr_assert_str_eq(get(w.tmp), "staged");
	cr_assert_eq(mode_of(w.tmp), 0640);
	cr_assert_eq(registered(), 1);

	fwrite_init(&p);
	snprintf(p.target, sizeof(p.target), "%s", t);
	snprintf(p.tmp, sizeof(p.tmp), "%s", w.tmp);
	snprintf(p.reg, sizeof(p.reg), "%s", w.reg);
	cr_assert_eq(fwrite_publish(&p, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(get(t), "staged");
	cr_assert_eq(mode_of(t), 0640);
	cr_assert_eq(temporaries(at("s")), 0);
	cr_assert_eq(registered(), 0);

	/* Staged and dropped: the target stays, the temporary goes. */
	fwrite_init(&w);
	cr_assert_eq(fwrite_begin(&w, u, getuid(), getgid(), true, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(fwrite_write(&w, "never", 5, err, sizeof(err)), 0);
	cr_assert_eq(fwrite_stage(&w, NULL, err, sizeof(err)), 0, "%s", err);
	fwrite_init(&p);
	snprintf(p.tmp, sizeof(p.tmp), "%s", w.tmp);
	snprintf(p.reg, sizeof(p.reg), "%s", w.reg);
	fwrite_discard(&p);
	cr_assert_str_eq(get(u), "old too");
	cr_assert_eq(temporaries(at("s")), 0);
	cr_assert_eq(registered(), 0);
	cr_assert_eq(open_fds(), fds);
}

static int refuse(void *arg, const char *target, char *e, size_t elen)
{
	++*(int *)arg;
	snprintf(e, elen, "%s changed", target);
	return -ESTALE;
}

/* The writer's hook refuses the rename of a commit made in the walked
 * directory: the target stays, the temporary and its registry entry go,
 * no descriptor stays open. */
Test(fwrite, the_hook_refuses_the_rename)
{
	struct fwrite w;
	char *t = at("h/target");
	int calls = 0, fds;

	cr_assert_eq(mkdir(at("h"), 0755), 0);
	put(t, "kept");
	fds = open_fds();
	fwrite_init(&w);
	w.before_replace = refuse;
	w.before_arg = &calls;
	cr_assert_eq(fwrite_begin(&w, t, getuid(), getgid(), true, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(fwrite_write(&w, "lost", 4, err, sizeof(err)), 0);
	cr_assert_eq(fwrite_commit(&w, NULL, err, sizeof(err)), -ESTALE);
	cr_assert_eq(calls, 1);
	cr_assert(strstr(err, "changed"), "%s", err);
	cr_assert_str_eq(get(t), "kept");
	cr_assert_eq(temporaries(at("h")), 0);
	cr_assert_eq(registered(), 0);
	cr_assert_eq(open_fds(), fds);
	fwrite_discard(&w); /* after the commit: nothing left to do */
}

static int pass(void *arg, const char *target, char *err, size_t errlen)
{
	(*(int *)arg)++;
	return 0;
}

/* The name's directory walked and the file opened by the writer itself
 * (as Edit does): replaced through a temporary that takes mode and
 * attributes from that descriptor; the walk is w's, nothing stays open. */
Test(fwrite, begin_from_a_walk_and_an_open_file)
{
	struct fwrite w;
	struct wpath p;
	struct stat st, after;
	char *t = at("from/f.txt"), v[16];
	int calls = 0, fds, src;

	cr_assert_eq(mkdir(at("from"), 0755), 0);
	put(t, "before");
	chmod(t, 0640);
	bool xattrs = setxattr(t, "user.note", "kept", 4, 0) == 0;
	fds = open_fds();
	wpath_init(&p);
	cr_assert_eq(wpath_parent(&p, t, NULL, err, sizeof(err)), 0, "%s", err);
	src = openat(p.dirfd, p.name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	cr_assert_geq(src, 0);
	cr_assert_eq(fstat(src, &st), 0);
	fwrite_init(&w);
	w.before_replace = pass;
	w.before_arg = &calls;
	cr_assert_eq(fwrite_begin_from(&w, t, &p, src, &st, getuid(), getgid(), true, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(p.dirfd, -1, "the walk is w's now");
	cr_assert(w.tmp[0], "through a temporary");
	close(src);
	cr_assert_eq(fwrite_write(&w, "after", 5, err, sizeof(err)), 0);
	cr_assert_eq(fwrite_commit(&w, NULL, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(calls, 1);
	cr_assert_str_eq(get(t), "after");
	cr_assert_eq(stat(t, &after), 0);
	cr_assert_neq(after.st_ino, st.st_ino, "replaced");
	cr_assert_eq(after.st_mode & 07777, 0640);
	if (xattrs)
		cr_assert_eq(getxattr(t, "user.note", v, sizeof(v)), 4);
	cr_assert_eq(temporaries(at("from")), 0);
	cr_assert_eq(registered(), 0);
	cr_assert_eq(open_fds(), fds);
}

/* In place from the same start: the file itself is written (same inode);
 * and when the name no longer leads to the file opened, the write goes on
 * as fwrite_begin's would, to what is there now. */
Test(fwrite, begin_from_in_place_and_a_changed_name)
{
	struct fwrite w;
	struct wpath p;
	struct stat st, after;
	char *t = at("ip/f.txt");
	int src;

	cr_assert_eq(mkdir(at("ip"), 0755), 0);
	put(t, "before");
	wpath_init(&p);
	cr_assert_eq(wpath_parent(&p, t, NULL, err, sizeof(err)), 0, "%s", err);
	src = openat(p.dirfd, p.name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	cr_assert_eq(fstat(src, &st), 0);
	fwrite_init(&w);
	cr_assert_eq(fwrite_begin_from(&w, t, &p, src, &st, getuid(), getgid(), false, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(w.tmp[0], '\0', "in place");
	cr_assert_eq(fwrite_write(&w, "inside", 6, err, sizeof(err)), 0);
	cr_assert_eq(fwrite_commit(&w, NULL, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(stat(t, &after), 0);
	cr_assert_eq(after.st_ino, st.st_ino);
	cr_assert_str_eq(get(t), "inside");

	/* another file under the name since it was opened */
	cr_assert_eq(wpath_parent(&p, t, NULL, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(unlink(t), 0);
	put(t, "another");
	fwrite_init(&w);
	cr_assert_eq(fwrite_begin_from(&w, t, &p, src, &st, getuid(), getgid(), false, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(fwrite_write(&w, "over it", 7, err, sizeof(err)), 0);
	cr_assert_eq(fwrite_commit(&w, NULL, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(get(t), "over it");
	close(src);
}
