/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fsid.h"

/* A file only uid 0 may read (mode 0600, owned by root), made per test. */
static char dir[64], secret[96], other[96];

static void setup(void)
{
	int fd;

	snprintf(dir, sizeof(dir), "/tmp/fsid_test.XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	chmod(dir, 0755);
	snprintf(secret, sizeof(secret), "%s/secret", dir);
	fd = open(secret, O_CREAT | O_WRONLY, 0600);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, "x", 1), 1);
	close(fd);
	/* And one readable by group 4242 only. */
	snprintf(other, sizeof(other), "%s/group", dir);
	fd = open(other, O_CREAT | O_WRONLY, 0640);
	cr_assert_geq(fd, 0);
	close(fd);
	cr_assert_eq(chown(other, 0, 4242), 0);
	cr_assert_eq(chmod(other, 0640), 0);
}

static void teardown(void)
{
	unlink(secret);
	unlink(other);
	rmdir(dir);
}

static bool can_read(const char *path)
{
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		return false;
	close(fd);
	return true;
}

TestSuite(fsid, .init = setup, .fini = teardown);

Test(fsid, user_is_refused_inside_and_root_again_after)
{
	struct fsid id = { .uid = 65534, .gid = 65534 };
	struct fsid_saved saved;

	if (geteuid() != 0)
		cr_skip_test("needs root");
	cr_assert(can_read(secret));
	cr_assert_eq(fsid_enter(&id, &saved), 0);
	cr_expect_eq(fsid_current_uid(), 65534);
	cr_expect_eq(fsid_current_gid(), 65534);
	cr_expect_not(can_read(secret), "a file of root's, mode 0600, must be refused to uid 65534");
	cr_assert_eq(fsid_leave(&saved), 0);
	cr_expect_eq(fsid_current_uid(), 0);
	cr_expect(can_read(secret), "root's access must come back after fsid_leave");
}

Test(fsid, supplementary_groups_count)
{
	gid_t groups[] = { 4242 };
	struct fsid with = { .uid = 65534, .gid = 65534, .groups = groups, .n_groups = 1 };
	struct fsid without = { .uid = 65534, .gid = 65534 };
	struct fsid_saved saved;

	if (geteuid() != 0)
		cr_skip_test("needs root");
	cr_assert_eq(fsid_enter(&with, &saved), 0);
	cr_expect(can_read(other), "group 4242 may read the file");
	cr_assert_eq(fsid_leave(&saved), 0);
	cr_assert_eq(fsid_enter(&without, &saved), 0);
	cr_expect_not(can_read(other), "without the group the file is refused");
	cr_assert_eq(fsid_leave(&saved), 0);
	/* root's own groups are back */
	cr_expect_eq(getgroups(0, NULL) >= 0, true);
}

/* Another thread keeps root's identity while this one is a user. */
struct peer {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int step; /* 1: main entered; 2: peer checked; 3: main left */
	bool peer_read;
	uid_t peer_fsuid;
};

static void *peer_main(void *arg)
{
	struct peer *p = arg;

	pthread_mutex_lock(&p->mu);
	while (p->step < 1)
		pthread_cond_wait(&p->cv, &p->mu);
	p->peer_read = can_read(secret);
	p->peer_fsuid = fsid_current_uid();
	p->step = 2;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

Test(fsid, other_threads_are_unaffected)
{
	struct fsid id = { .uid = 65534, .gid = 65534 };
	struct fsid_saved saved;
	struct peer p = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };
	pthread_t t;

	if (geteuid() != 0)
		cr_skip_test("needs root");
	cr_assert_eq(pthread_create(&t, NULL, peer_main, &p), 0);
	cr_assert_eq(fsid_enter(&id, &saved), 0);
	pthread_mutex_lock(&p.mu);
	p.step = 1;
	pthread_cond_broadcast(&p.cv);
	while (p.step < 2)
		pthread_cond_wait(&p.cv, &p.mu);
	pthread_mutex_unlock(&p.mu);
	cr_expect_not(can_read(secret));
	cr_assert_eq(fsid_leave(&saved), 0);
	pthread_join(t, NULL);
	cr_expect(p.peer_read, "the other thread still reads as root");
	cr_expect_eq(p.peer_fsuid, 0);
}

Test(fsid, too_many_groups_is_refused_and_nothing_changes)
{
	gid_t groups[FSID_GROUPS_MAX + 1] = { 0 };
	struct fsid id = { .uid = 65534, .gid = 65534, .groups = groups, .n_groups = FSID_GROUPS_MAX + 1 };
	struct fsid_saved saved;
	uid_t before = fsid_current_uid();

	cr_expect_eq(fsid_enter(&id, &saved), -EINVAL);
	cr_expect_not(saved.active);
	cr_expect_eq(fsid_current_uid(), before);
	cr_expect_eq(fsid_leave(&saved), 0);
}

/* Entered twice (a walk as another user inside a job): each leave gives
 * back the identity before it, and an identity the thread already has
 * changes nothing. */
Test(fsid, nested_enters_give_back_each_level)
{
	gid_t g1 = 4242, g2 = 4343;
	struct fsid a = { .uid = 65534, .gid = 65534, .groups = &g1, .n_groups = 1 };
	struct fsid b = { .uid = 4242, .gid = 4343, .groups = &g2, .n_groups = 1 };
	struct fsid_saved sa, sb, sc;

	if (getuid() != 0)
		cr_skip_test("needs root");
	cr_assert_eq(fsid_enter(&a, &sa), 0);
	cr_assert_eq(fsid_current_uid(), 65534);
	cr_assert(can_read(other), "group 4242 reads it");
	cr_assert_eq(fsid_enter(&b, &sb), 0);
	cr_assert_eq(fsid_current_uid(), 4242);
	cr_assert_eq(fsid_current_gid(), 4343);
	cr_assert_not(can_read(other), "4343 is not in group 4242");
	cr_assert_eq(fsid_enter(&b, &sc), 0, "the same identity again");
	cr_assert_eq(fsid_leave(&sc), 0);
	cr_assert_eq(fsid_current_uid(), 4242);
	cr_assert_eq(fsid_leave(&sb), 0);
	cr_assert_eq(fsid_current_uid(), 65534);
	cr_assert_eq(fsid_current_gid(), 65534);
	cr_assert(can_read(other), "group 4242 again");
	cr_assert_eq(fsid_leave(&sa), 0);
	cr_assert_eq(fsid_current_uid(), 0);
	cr_assert_eq(fsid_current_gid(), 0);
	cr_assert(can_read(secret));
}
