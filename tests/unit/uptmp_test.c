/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "base/fsid.h"
#include "base/loop.h"
#include "base/uptmp.h"
#include "base/worker.h"

#define NAME_IS(s, r) uptmp_name_is((s), strlen(s), (r))

/* A fresh directory `dir` (a mkdtemp template) and the registry in it,
 * `dir`/registry (made now, or left to the first registration). */
static void registry_under(char *dir, char *reg_dir, size_t len, bool make)
{
	cr_assert(mkdtemp(dir));
	snprintf(reg_dir, len, "%s/registry", dir);
	if (make)
		cr_assert_eq(mkdir(reg_dir, 0700), 0);
	snprintf(uptmp_registry, sizeof(uptmp_registry), "%s", reg_dir);
}

Test(uptmp, name_is)
{
	bool r = false;

	cr_assert(NAME_IS(".envd-upload.r0123456789abcdef", &r));
	cr_assert(r);
	cr_assert(NAME_IS(".envd-upload.nfedcba9876543210", &r));
	cr_assert_not(r);
	cr_assert(NAME_IS(".envd-upload.n0000000000000000", NULL));
	cr_assert_not(NAME_IS(".envd-upload.x0123456789abcdef", NULL), "kind is r or n");
	cr_assert_not(NAME_IS(".envd-upload.r0123456789ABCDEF", NULL), "lower-case hex only");
	cr_assert_not(NAME_IS(".envd-upload.r0123456789abcde", NULL), "too short");
	cr_assert_not(NAME_IS(".envd-upload.r0123456789abcdef0", NULL), "too long");
	cr_assert_not(NAME_IS("envd-upload.r0123456789abcdef", NULL));
	cr_assert_not(NAME_IS("", NULL));
	/* the length given wins over the NUL */
	cr_assert(uptmp_name_is(".envd-upload.r0123456789abcdefXYZ", 30, NULL));
}

/* Remove directory d and the files in it. */
static void rm_dir(const char *d)
{
	DIR *dd = opendir(d);
	struct dirent *de;
	char p[PATH_MAX];

	while (dd && (de = readdir(dd)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
			snprintf(p, sizeof(p), "%s/%s", d, de->d_name);
			unlink(p);
		}
	if (dd)
		closedir(dd);
	rmdir(d);
}

/* The slot an entry names (`<slot file>#<n>`), or -1 for a symlink entry. */
static int slot_in(const char *reg)
{
	const char *h = strrchr(reg, '#');

	return h && strstr(reg, "/slots.") ? atoi(h + 1) : -1;
}

/* The slot file an entry names, in out. */
static void slot_file_of(const char *reg, char *out, size_t len)
{
	snprintf(out, len, "%.*s", (int)(strrchr(reg, '#') - reg), reg);
}

/* The path slot s of the file records, "" when cleared. */
static void slot_read(const char *file, int s, char *out)
{
	unsigned char rec[UPTMP_SLOT_SIZE] = { 0 };
	uint32_t magic, len;
	int fd = open(file, O_RDONLY);

	cr_assert_geq(fd, 0, "%s", file);
	cr_assert_geq(pread(fd, rec, sizeof(rec), (off_t)s * UPTMP_SLOT_SIZE), 0);
	close(fd);
	memcpy(&magic, rec, 4);
	memcpy(&len, rec + 4, 4);
	out[0] = '\0';
	if (magic == 0x31535545u)
		snprintf(out, UPTMP_SLOT_PATH_MAX + 1, "%.*s", (int)len, (const char *)rec + 16);
}

/* A temporary file is created beside the target, named for the kind,
 * registered in a slot of this envd's slot file, and forgotten. */
Test(uptmp, open_registers_and_forgets)
{
	char dir[] = "/tmp/uptmp-test.XXXXXX", reg_dir[200], tmp[PATH_MAX], reg[320], file[320], rec[PATH_MAX];
	struct stat st;
	int fd;

	registry_under(dir, reg_dir, sizeof(reg_dir), false);
	fd = uptmp_open(dir, true, tmp, sizeof(tmp), reg, sizeof(reg));
	cr_assert_geq(fd, 0);
	const char *base = strrchr(tmp, '/') + 1;
	bool r = false;
	cr_assert(NAME_IS(base, &r), "%s", base);
	cr_assert(r);
	cr_assert_eq(strncmp(tmp, dir, strlen(dir)), 0);
	cr_assert_eq(stat(tmp, &st), 0);
	cr_assert_eq(slot_in(reg), 0, "the first slot: %s", reg);
	slot_file_of(reg, file, sizeof(file));
	char want[64];
	snprintf(want, sizeof(want), "/slots.%ld.", (long)getpid());
	cr_assert(strstr(file, want), "the slot file %s names our pid", file);
	cr_assert_eq(stat(reg_dir, &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0700);
	cr_assert_eq(lstat(file, &st), 0);
	cr_assert(S_ISREG(st.st_mode));
	cr_assert_eq(st.st_mode & 07777, 0600);
	slot_read(file, 0, rec);
	cr_assert_str_eq(rec, tmp);
	cr_assert_eq(uptmp_registered(), 1);

	/* a second one never collides */
	char tmp2[PATH_MAX], reg2[320];
	int fd2 = uptmp_open(dir, false, tmp2, sizeof(tmp2), reg2, sizeof(reg2));
	cr_assert_geq(fd2, 0);
	cr_assert_str_neq(tmp, tmp2);
	cr_assert(NAME_IS(strrchr(tmp2, '/') + 1, &r));
	cr_assert_not(r);
	cr_assert_eq(slot_in(reg2), 1);
	cr_assert_eq(uptmp_registered(), 2);

	uptmp_forget(reg);
	uptmp_forget("");
	slot_read(file, 0, rec);
	cr_assert_str_eq(rec, "", "forgetting clears the record");
	cr_assert_eq(uptmp_registered(), 1);
	/* a freed slot is handed out again, lowest first */
	char tmp3[PATH_MAX], reg3[320];
	int fd3 = uptmp_open(dir, false, tmp3, sizeof(tmp3), reg3, sizeof(reg3));
	cr_assert_geq(fd3, 0);
	cr_assert_eq(slot_in(reg3), 0);
	slot_read(file, 0, rec);
	cr_assert_str_eq(rec, tmp3);
	uptmp_forget(reg2);
	uptmp_forget(reg3);
	cr_assert_eq(uptmp_registered(), 0);
	close(fd);
	close(fd2);
	close(fd3);
	unlink(tmp);
	unlink(tmp2);
	unlink(tmp3);
	unlink(file);
	rmdir(reg_dir);
	rmdir(dir);
}

Test(uptmp, open_too_long)
{
	char dir[PATH_MAX], tmp[64], reg[320];

	memset(dir, 'a', 100);
	dir[0] = '/';
	dir[100] = '\0';
	cr_assert_eq(uptmp_open(dir, false, tmp, sizeof(tmp), reg, sizeof(reg)), -ENAMETOOLONG);
	cr_assert_eq(tmp[0], '\0');
}

/* Other attributes are copied; envd's own metadata is not (the upload
 * sets it). */
Test(uptmp, copy_attrs)
{
	char dir[] = "/tmp/uptmp-attr.XXXXXX", src[PATH_MAX], dst[PATH_MAX], v[64];

	cr_assert(mkdtemp(dir));
	snprintf(src, sizeof(src), "%s/src", dir);
	snprintf(dst, sizeof(dst), "%s/dst", dir);
	close(open(src, O_WRONLY | O_CREAT, 0644));
	if (setxattr(src, "user.custom", "kept", 4, 0) < 0) {
		unlink(src);
		rmdir(dir);
		cr_skip_test("no user xattrs on /tmp");
	}
	cr_assert_eq(setxattr(src, "user.e2b.owner", "old", 3, 0), 0);
	int fd = open(dst, O_WRONLY | O_CREAT, 0644);
	cr_assert_geq(fd, 0);
	cr_assert_eq(uptmp_copy_attrs(src, fd), 0);
	ssize_t n = fgetxattr(fd, "user.custom", v, sizeof(v));
	cr_assert_eq(n, 4);
	cr_assert_eq(memcmp(v, "kept", 4), 0);
	cr_assert_eq(fgetxattr(fd, "user.e2b.owner", v, sizeof(v)), -1);
	/* a target without attributes, or gone, copies nothing and succeeds */
	cr_assert_eq(uptmp_copy_attrs("/nonexistent/x", fd), 0);
	close(fd);
	unlink(src);
	unlink(dst);
	rmdir(dir);
}

/* A job running as a user (Edit) registers its temporaries all the same:
 * the registry is root's, written with root's rights, and the job keeps
 * its user's identity around the calls. */
Test(uptmp, registered_from_a_users_job)
{
	char dir[] = "/tmp/uptmp-user.XXXXXX", reg_dir[200], tmp[PATH_MAX], reg[320];
	struct fsid id = { .uid = 65534, .gid = 65534 };
	struct fsid_saved saved;
	struct stat st;

	if (getuid() != 0)
		cr_skip_test("needs root");
	registry_under(dir, reg_dir, sizeof(reg_dir), true);
	snprintf(tmp, sizeof(tmp), "%s/.envd-upload.r0123456789abcdef", dir);
	cr_assert_eq(fsid_enter(&id, &saved), 0);
	uptmp_register(tmp, reg, sizeof(reg));
	cr_assert_eq(fsid_current_uid(), 65534, "still the user's job");
	cr_assert(reg[0], "registered");
	cr_assert_eq(fsid_leave(&saved), 0);
	cr_assert_geq(slot_in(reg), 0, "in a slot: %s", reg);
	char file[320];
	slot_file_of(reg, file, sizeof(file));
	cr_assert_eq(lstat(file, &st), 0);
	cr_assert_eq(st.st_uid, 0, "the slot file is root's");
	cr_assert_eq(uptmp_registered(), 1);
	cr_assert_eq(fsid_enter(&id, &saved), 0);
	uptmp_forget(reg);
	cr_assert_eq(fsid_current_uid(), 65534);
	cr_assert_eq(fsid_leave(&saved), 0);
	cr_assert_eq(uptmp_registered(), 0, "forgotten");
	unlink(file);
	rmdir(reg_dir);
	rmdir(dir);
}

/* A temporary that cannot be made leaves no registry entry behind (the
   entry is written first, so that a kill between the two is harmless). */
Test(uptmp, a_failed_create_leaves_no_entry)
{
	char dir[] = "/tmp/uptmp-fail.XXXXXX", reg_dir[200], missing[300], tmp[PATH_MAX], reg[320];
	DIR *d;
	struct dirent *de;
	int n = 0;

	registry_under(dir, reg_dir, sizeof(reg_dir), false);
	snprintf(missing, sizeof(missing), "%s/no/such/dir", dir);
	cr_assert_eq(uptmp_open(missing, false, tmp, sizeof(tmp), reg, sizeof(reg)), -ENOENT);
	cr_assert_str_eq(reg, "");
	cr_assert_str_eq(tmp, "");
	cr_assert_not_null(d = opendir(reg_dir), "the registry was made for the entry");
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	cr_assert_eq(n, 1, "the slot file stays, for the next");
	cr_assert_eq(uptmp_registered(), 0, "the entry is gone with the failure");
	rm_dir(reg_dir);
	rmdir(dir);
	rmdir(dir);
}

/* --- slots --- */

/* A temporary's path in dir, its random part from n. */
static void tmp_path(char *out, size_t len, const char *dir, unsigned long n)
{
	int l = snprintf(out, len, "%s/.envd-upload.n%016lx", dir, n);

	cr_assert(l > 0 && (size_t)l < len);
}

/* Every slot in use, the next registration is a symlink entry; a freed
 * slot is used again. */
Test(uptmp, slots_exhausted_fall_back_to_a_symlink)
{
	char dir[] = "/tmp/uptmp-full.XXXXXX", reg_dir[200], tmp[PATH_MAX], link[PATH_MAX];
	static char regs[UPTMP_SLOTS][320];
	char reg[320];
	struct stat st;

	registry_under(dir, reg_dir, sizeof(reg_dir), false);
	for (int i = 0; i < UPTMP_SLOTS; i++) {
		tmp_path(tmp, sizeof(tmp), dir, (unsigned long)i);
		uptmp_register(tmp, regs[i], sizeof(regs[i]));
		cr_assert_eq(slot_in(regs[i]), i, "%d: %s", i, regs[i]);
	}
	tmp_path(tmp, sizeof(tmp), dir, 0xfffful);
	uptmp_register(tmp, reg, sizeof(reg));
	cr_assert_eq(slot_in(reg), -1, "no slot left: %s", reg);
	cr_assert_eq(lstat(reg, &st), 0, "%s", reg);
	cr_assert(S_ISLNK(st.st_mode));
	ssize_t l = readlink(reg, link, sizeof(link) - 1);
	cr_assert_gt(l, 0);
	link[l] = '\0';
	cr_assert_str_eq(link, tmp);
	cr_assert_eq(uptmp_registered(), UPTMP_SLOTS + 1);
	uptmp_forget(reg);
	cr_assert_eq(lstat(reg, &st), -1, "the symlink entry is forgotten");

	uptmp_forget(regs[700]);
	uptmp_register(tmp, reg, sizeof(reg));
	cr_assert_eq(slot_in(reg), 700, "the freed slot: %s", reg);
	uptmp_forget(reg);
	for (int i = 0; i < UPTMP_SLOTS; i++)
		if (i != 700)
			uptmp_forget(regs[i]);
	cr_assert_eq(uptmp_registered(), 0);
	rm_dir(reg_dir);
	rmdir(dir);
}

/* A path too long for a record, and a relative one, get a symlink entry. */
Test(uptmp, long_paths_fall_back_to_a_symlink)
{
	char dir[] = "/tmp/uptmp-long.XXXXXX", reg_dir[200], tmp[PATH_MAX], deep[PATH_MAX], reg[320];
	struct stat st;

	registry_under(dir, reg_dir, sizeof(reg_dir), false);
	snprintf(deep, sizeof(deep), "%s/", dir);
	while (strlen(deep) < UPTMP_SLOT_PATH_MAX)
		strcat(deep, "d");
	tmp_path(tmp, sizeof(tmp), deep, 1);
	uptmp_register(tmp, reg, sizeof(reg));
	cr_assert_eq(slot_in(reg), -1, "%s", reg);
	cr_assert_eq(lstat(reg, &st), 0);
	cr_assert(S_ISLNK(st.st_mode));
	uptmp_forget(reg);
	/* the longest that fits */
	snprintf(tmp, sizeof(tmp), "%s", deep);
	tmp[UPTMP_SLOT_PATH_MAX - 31] = '\0';
	snprintf(tmp + strlen(tmp), sizeof(tmp) - strlen(tmp), "/.envd-upload.r0123456789abcdef");
	cr_assert_eq(strlen(tmp), UPTMP_SLOT_PATH_MAX);
	uptmp_register(tmp, reg, sizeof(reg));
	cr_assert_eq(slot_in(reg), 0, "%s", reg);
	char file[320], rec[PATH_MAX];
	slot_file_of(reg, file, sizeof(file));
	slot_read(file, 0, rec);
	cr_assert_str_eq(rec, tmp);
	uptmp_forget(reg);
	uptmp_register(".envd-upload.r0123456789abcdef", reg, sizeof(reg));
	cr_assert_eq(slot_in(reg), -1, "a relative path: %s", reg);
	uptmp_forget(reg);
	cr_assert_eq(uptmp_registered(), 0);
	rm_dir(reg_dir);
	rmdir(dir);
}

/* Threads registering and forgetting at once never share a slot: each
 * marks the slots it holds, and the record it reads back is its own. */
#define RACERS 8
#define RACE_ROUNDS 3000
#define RACE_HELD 40
static atomic_int slot_holder[UPTMP_SLOTS];
static char race_dir[64];
static atomic_int race_errors;

static void *racer(void *arg)
{
	int me = (int)(intptr_t)arg + 1;
	char regs[RACE_HELD][320], tmp[PATH_MAX], file[320], rec[PATH_MAX];
	int held = 0;

	for (int r = 0; r < RACE_ROUNDS; r++) {
		int i = held < RACE_HELD && (r % 3 || !held) ? held++ : -1;
		if (i < 0) {
			/* give back the oldest */
			i = 0;
			int s = slot_in(regs[i]);
			if (s >= 0 && atomic_exchange(&slot_holder[s], 0) != me)
				atomic_fetch_add(&race_errors, 1);
			uptmp_forget(regs[i]);
			memmove(regs[0], regs[1], sizeof(regs[0]) * (size_t)(held - 1));
			i = held - 1;
		}
		tmp_path(tmp, sizeof(tmp), race_dir, (unsigned long)me << 32 | (unsigned long)r);
		uptmp_register(tmp, regs[i], sizeof(regs[i]));
		int s = slot_in(regs[i]);
		if (s < 0) {
			atomic_fetch_add(&race_errors, 1000);
			continue;
		}
		int was = 0;
		if (!atomic_compare_exchange_strong(&slot_holder[s], &was, me))
			atomic_fetch_add(&race_errors, 1);
		slot_file_of(regs[i], file, sizeof(file));
		slot_read(file, s, rec);
		if (strcmp(rec, tmp) != 0)
			atomic_fetch_add(&race_errors, 1);
	}
	for (int i = 0; i < held; i++) {
		int s = slot_in(regs[i]);
		if (s >= 0)
			atomic_store(&slot_holder[s], 0);
		uptmp_forget(regs[i]);
	}
	return NULL;
}

Test(uptmp, slots_from_many_threads)
{
	char dir[] = "/tmp/uptmp-race.XXXXXX", reg_dir[200];
	pthread_t t[RACERS];

	registry_under(dir, reg_dir, sizeof(reg_dir), false);
	snprintf(race_dir, sizeof(race_dir), "%s", dir);
	for (intptr_t i = 0; i < RACERS; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, racer, (void *)i), 0);
	for (int i = 0; i < RACERS; i++)
		pthread_join(t[i], NULL);
	cr_assert_eq(atomic_load(&race_errors), 0, "a slot was handed to two temporaries, or went missing");
	cr_assert_eq(uptmp_registered(), 0, "all forgotten");
	DIR *d = opendir(reg_dir);
	struct dirent *de;
	int files = 0;
	while ((de = readdir(d)))
		files += de->d_name[0] != '.';
	closedir(d);
	cr_assert_eq(files, 1, "one slot file, opened once");
	rm_dir(reg_dir);
	rmdir(dir);
}

/* --- the sweep --- */

/* The record's sum written out here, not taken from uptmp.c: the format
 * is read by the next envd across a live upgrade, and this pins it. */
static uint64_t fnv(const char *p, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull ^ (uint64_t)len;

	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

/* Write a record at slot s of file: path's bytes, its length and sum as
 * given (a torn record claims more than it holds). */
static void put_record(int fd, int s, const char *path, uint32_t len, uint64_t sum)
{
	unsigned char rec[UPTMP_SLOT_SIZE] = { 0 };
	uint32_t magic = 0x31535545u;

	memcpy(rec, &magic, 4);
	memcpy(rec + 4, &len, 4);
	memcpy(rec + 8, &sum, 8);
	memcpy(rec + 16, path, strlen(path));
	cr_assert_eq(pwrite(fd, rec, 16 + strlen(path) + 1, (off_t)s * UPTMP_SLOT_SIZE), (ssize_t)(16 + strlen(path) + 1));
}

static void put_whole(int fd, int s, const char *path)
{
	put_record(fd, s, path, (uint32_t)strlen(path), fnv(path, strlen(path)));
}

static int new_slot_file(const char *reg_dir, long pid, const char *hex)
{
	char p[PATH_MAX];
	int fd;

	snprintf(p, sizeof(p), "%s/slots.%ld.%s", reg_dir, pid, hex);
	fd = open(p, O_RDWR | O_CREAT | O_EXCL, 0600);
	cr_assert_geq(fd, 0, "%s", p);
	return fd;
}

static bool exists(const char *dir, const char *name)
{
	char p[PATH_MAX];
	struct stat st;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return lstat(p, &st) == 0;
}

static void touch(const char *dir, const char *name)
{
	char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	int fd = open(p, O_WRONLY | O_CREAT, 0644);
	cr_assert_geq(fd, 0, "%s", p);
	close(fd);
}

static ev_timer hang_guard;
static void on_hang(struct ev_loop *l, ev_timer *w, int re)
{
	ev_break(l, EVBREAK_ALL);
}

/* Turn the loop until the sweep's jobs are done (a hang bound, not a
 * timing: they take moments). */
static void sweep_and_wait(void)
{
	uptmp_sweep();
	ev_timer_init(&hang_guard, on_hang, 180.0, 0);
	ev_timer_start(envd_loop, &hang_guard);
	while (worker_pending() && ev_is_active(&hang_guard))
		ev_run(envd_loop, EVRUN_ONCE);
	ev_timer_stop(envd_loop, &hang_guard);
	cr_assert_eq(worker_pending(), 0, "the sweep's jobs came back");
}

/* A dead pid: a child that has exited and been reaped. */
static long dead_pid(void)
{
	pid_t p = fork();

	if (p == 0)
		_exit(0);
	waitpid(p, NULL, 0);
	return (long)p;
}

/* A dead envd's records go with the files they name, only files named as
 * temporaries, and only whole records; its slot file goes after. */
Test(uptmp, sweep_a_dead_envds_slot_file)
{
	char dir[] = "/tmp/uptmp-sweep.XXXXXX", reg_dir[200], p[PATH_MAX], q[PATH_MAX], sub[PATH_MAX];
	long dead = dead_pid();

	registry_under(dir, reg_dir, sizeof(reg_dir), true);
	snprintf(sub, sizeof(sub), "%s/.envd-upload.r00000000000000aa", dir);
	cr_assert_eq(mkdir(sub, 0755), 0);
	touch(dir, ".envd-upload.r0000000000000001"); /* whole record: removed */
	touch(dir, ".envd-upload.r0000000000000002"); /* whole, far slot: removed */
	touch(dir, ".envd-upload.r0000000000000003"); /* torn: kept */
	touch(dir, ".envd-upload.r00000000000000aa/.envd-upload.n0000000000000004"); /* kept */
	touch(dir, "keep.me");                        /* not a temporary: kept */
	touch(dir, ".envd-upload.r0000000000000005"); /* a cleared slot: kept */
	snprintf(q, sizeof(q), "%s/.envd-upload.r0000000000000006", dir);
	cr_assert_eq(symlink("keep.me", q), 0);       /* a link by a temporary's name: removed, not followed */

	int fd = new_slot_file(reg_dir, dead, "00112233445566aa");
	snprintf(p, sizeof(p), "%s/.envd-upload.r0000000000000001", dir);
	put_whole(fd, 0, p);
	snprintf(p, sizeof(p), "%s/.envd-upload.r0000000000000002", dir);
	put_whole(fd, UPTMP_SLOTS - 1, p);
	/* torn: the head of the longer path, its bytes cut to a temporary's
	 * path (and zeros after) */
	snprintf(p, sizeof(p), "%s/.envd-upload.r0000000000000003/x", dir);
	snprintf(q, sizeof(q), "%s/.envd-upload.r0000000000000003", dir);
	put_record(fd, 1, q, (uint32_t)strlen(p), fnv(p, strlen(p)));
	/* torn the other way: the right length, a sum for other bytes */
	snprintf(p, sizeof(p), "%s/.envd-upload.r00000000000000aa/.envd-upload.n0000000000000004", dir);
	put_record(fd, 2, p, (uint32_t)strlen(p), fnv(p, strlen(p)) ^ 1);
	/* whole, but not a temporary's name */
	snprintf(p, sizeof(p), "%s/keep.me", dir);
	put_whole(fd, 3, p);
	/* whole, but a directory's name in the middle passes for a temporary */
	put_whole(fd, 4, sub);
	/* a cleared slot over an old record */
	snprintf(p, sizeof(p), "%s/.envd-upload.r0000000000000005", dir);
	put_whole(fd, 5, p);
	cr_assert_eq(pwrite(fd, "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 16, 5 * UPTMP_SLOT_SIZE), 16);
	snprintf(p, sizeof(p), "%s/.envd-upload.r0000000000000006", dir);
	put_whole(fd, 6, p);
	/* garbage */
	char junk[UPTMP_SLOT_SIZE];
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (char)(i * 37 + 11);
	cr_assert_eq(pwrite(fd, junk, sizeof(junk), 7 * UPTMP_SLOT_SIZE), (ssize_t)sizeof(junk));
	close(fd);
	cr_assert_eq(uptmp_registered(), 4, "whole records naming temporaries (the directory's too)");

	sweep_and_wait();
	cr_assert_not(exists(dir, ".envd-upload.r0000000000000001"));
	cr_assert_not(exists(dir, ".envd-upload.r0000000000000002"));
	cr_assert(exists(dir, ".envd-upload.r0000000000000003"), "a torn record removes nothing");
	cr_assert(exists(dir, ".envd-upload.r00000000000000aa/.envd-upload.n0000000000000004"));
	cr_assert(exists(dir, ".envd-upload.r00000000000000aa"), "a directory is not unlinked");
	cr_assert(exists(dir, "keep.me"));
	cr_assert(exists(dir, ".envd-upload.r0000000000000005"), "a cleared record removes nothing");
	cr_assert_not(exists(dir, ".envd-upload.r0000000000000006"), "the link itself goes");
	cr_assert(exists(dir, "keep.me"), "... not what it points to");
	snprintf(p, sizeof(p), "slots.%ld.00112233445566aa", dead);
	cr_assert_not(exists(reg_dir, p), "the slot file goes with its files");
	snprintf(p, sizeof(p), "rm -rf -- '%s'", dir);
	cr_assert_eq(system(p), 0);
}

/* A live envd's slot file and symlink entries are left alone; a dead
 * one's symlink entries (an older envd's) are swept; a slot file that is
 * a link is dropped, never read through. */
Test(uptmp, sweep_skips_the_living_and_takes_old_entries)
{
	char dir[] = "/tmp/uptmp-live.XXXXXX", reg_dir[200], p[PATH_MAX], q[PATH_MAX];
	long dead = dead_pid();
	pid_t live = fork();

	if (live == 0) {
		pause();
		_exit(0);
	}
	registry_under(dir, reg_dir, sizeof(reg_dir), true);
	touch(dir, ".envd-upload.n0000000000000011"); /* a live envd's record */
	touch(dir, ".envd-upload.n0000000000000012"); /* a live envd's symlink entry */
	touch(dir, ".envd-upload.n0000000000000013"); /* a dead one's symlink entry */
	touch(dir, ".envd-upload.n0000000000000014"); /* behind a linked slot file */
	int fd = new_slot_file(reg_dir, live, "0000000000000011");
	snprintf(p, sizeof(p), "%s/.envd-upload.n0000000000000011", dir);
	put_whole(fd, 0, p);
	close(fd);
	snprintf(p, sizeof(p), "%s/.envd-upload.n0000000000000012", dir);
	snprintf(q, sizeof(q), "%s/%ld.0000000000000012", reg_dir, (long)live);
	cr_assert_eq(symlink(p, q), 0);
	snprintf(p, sizeof(p), "%s/.envd-upload.n0000000000000013", dir);
	snprintf(q, sizeof(q), "%s/%ld.0000000000000013", reg_dir, dead);
	cr_assert_eq(symlink(p, q), 0);
	/* a slot file elsewhere, linked in under a dead pid's name */
	snprintf(p, sizeof(p), "%s/elsewhere", dir);
	fd = open(p, O_RDWR | O_CREAT, 0600);
	snprintf(q, sizeof(q), "%s/.envd-upload.n0000000000000014", dir);
	put_whole(fd, 0, q);
	close(fd);
	snprintf(q, sizeof(q), "%s/slots.%ld.0000000000000014", reg_dir, dead);
	cr_assert_eq(symlink(p, q), 0);

	sweep_and_wait();
	kill(live, SIGKILL);
	waitpid(live, NULL, 0);
	cr_assert(exists(dir, ".envd-upload.n0000000000000011"), "a live envd's temporary stays");
	snprintf(p, sizeof(p), "slots.%ld.0000000000000011", (long)live);
	cr_assert(exists(reg_dir, p), "... and its slot file");
	cr_assert(exists(dir, ".envd-upload.n0000000000000012"));
	snprintf(p, sizeof(p), "%ld.0000000000000012", (long)live);
	cr_assert(exists(reg_dir, p));
	cr_assert_not(exists(dir, ".envd-upload.n0000000000000013"), "an old entry of a dead envd is swept");
	snprintf(p, sizeof(p), "%ld.0000000000000013", dead);
	cr_assert_not(exists(reg_dir, p));
	cr_assert(exists(dir, ".envd-upload.n0000000000000014"), "a linked slot file is not read");
	snprintf(p, sizeof(p), "slots.%ld.0000000000000014", dead);
	cr_assert_not(exists(reg_dir, p), "... and dropped");
	cr_assert(exists(dir, "elsewhere"));
	snprintf(p, sizeof(p), "rm -rf -- '%s'", dir);
	cr_assert_eq(system(p), 0);
}

/* After a live upgrade the new image has the old one's pid: the old
 * image's slot file and symlink entries are swept, the new one's own slot
 * file (made before this sweep here) is not. */
Test(uptmp, sweep_same_pid_new_instance)
{
	char dir[] = "/tmp/uptmp-exec.XXXXXX", reg_dir[200], p[PATH_MAX], q[PATH_MAX], reg[320], file[320];
	long me = (long)getpid();

	registry_under(dir, reg_dir, sizeof(reg_dir), true);
	touch(dir, ".envd-upload.r0000000000000021"); /* the old image's record */
	touch(dir, ".envd-upload.r0000000000000022"); /* the old image's symlink entry */
	touch(dir, ".envd-upload.r0000000000000023"); /* ours */
	int fd = new_slot_file(reg_dir, me, "0000000000000021");
	snprintf(p, sizeof(p), "%s/.envd-upload.r0000000000000021", dir);
	put_whole(fd, 0, p);
	close(fd);
	snprintf(p, sizeof(p), "%s/.envd-upload.r0000000000000022", dir);
	snprintf(q, sizeof(q), "%s/%ld.0000000000000022", reg_dir, me);
	cr_assert_eq(symlink(p, q), 0);
	snprintf(p, sizeof(p), "%s/.envd-upload.r0000000000000023", dir);
	uptmp_register(p, reg, sizeof(reg));
	cr_assert_eq(slot_in(reg), 0);
	slot_file_of(reg, file, sizeof(file));

	sweep_and_wait();
	cr_assert_not(exists(dir, ".envd-upload.r0000000000000021"), "the old image's temporary is swept");
	snprintf(p, sizeof(p), "slots.%ld.0000000000000021", me);
	cr_assert_not(exists(reg_dir, p), "... and its slot file");
	cr_assert_not(exists(dir, ".envd-upload.r0000000000000022"), "the old image's symlink entry is swept");
	cr_assert(exists(dir, ".envd-upload.r0000000000000023"), "our own temporary stays");
	cr_assert(exists(reg_dir, strrchr(file, '/') + 1), "... and our slot file");
	cr_assert_eq(uptmp_registered(), 1);
	uptmp_forget(reg);
	cr_assert_eq(uptmp_registered(), 0);
	snprintf(p, sizeof(p), "rm -rf -- '%s'", dir);
	cr_assert_eq(system(p), 0);
}
