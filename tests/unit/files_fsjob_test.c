/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "transfer/fsjob.h"

Test(fsjob, local_fstypes)
{
	cr_assert(fsjob_fstype_local("ext4"));
	cr_assert(fsjob_fstype_local("tmpfs"));
	cr_assert(fsjob_fstype_local("overlay"));
	cr_assert(fsjob_fstype_local("xfs"));
	cr_assert_not(fsjob_fstype_local("fuse.bindfs"));
	cr_assert_not(fsjob_fstype_local("fuse.s3fs"));
	cr_assert_not(fsjob_fstype_local("fuseblk"));
	cr_assert_not(fsjob_fstype_local("nfs"));
	cr_assert_not(fsjob_fstype_local("nfs4"));
	cr_assert_not(fsjob_fstype_local("cifs"));
	cr_assert_not(fsjob_fstype_local("ext"));   /* whole names only */
	cr_assert_not(fsjob_fstype_local("ext44"));
	cr_assert_not(fsjob_fstype_local(""));
}

/* The mount of an open fd is the one /proc/self/mountinfo gives for its
 * mnt_id, with the key numbering of worker_path_key (id + 2). */
Test(fsjob, fd_mount_from_proc)
{
	uint64_t key = 0;
	bool local = true;
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);

	cr_assert_geq(fd, 0);
	cr_assert_eq(fsjob_fd_mount(fd, &key, &local), 0);
	cr_assert_gt(key, 2);
	cr_assert_not(local, "procfs is not in the local list: its reads go to the workers");

	char p[64], line[256];
	unsigned long id = 0;
	snprintf(p, sizeof(p), "/proc/self/fdinfo/%d", fd);
	FILE *f = fopen(p, "r");
	cr_assert_not_null(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "mnt_id: %lu", &id) == 1)
			break;
	fclose(f);
	cr_assert_eq(key, id + 2);
	close(fd);

	/* A closed fd: an error, and the safe answers. */
	cr_assert_lt(fsjob_fd_mount(fd, &key, &local), 0);
	cr_assert_eq(key, 1);
	cr_assert_not(local);
}

Test(fsjob, messages)
{
	char m[256];

	fsjob_timeout_msg(m, sizeof(m), 3, "/mnt/s3/a b");
	cr_assert_str_eq(m, "filesystem did not answer within 3 s: /mnt/s3/a b");
	fsjob_timeout_msg(m, sizeof(m), 2.5, "/x");
	cr_assert_str_eq(m, "filesystem did not answer within 2.5 s: /x");
	fsjob_busy_msg(m, sizeof(m), "/x");
	cr_assert_str_eq(m, "filesystem worker queue is full, retry later: /x");
}

/* fsjob_fd_stat: what fstat and fsjob_fd_mount say, in one; asked again
 * (the mount remembered where the kernel gives unique ids), the same. */
Test(fsjob, fd_stat_is_fstat_and_mount)
{
	char path[] = "/tmp/fsjob_stat_XXXXXX";
	int fd = mkstemp(path);

	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, "hello\n", 6), 6);
	for (int round = 0; round < 3; round++) {
		struct stat st, want;
		uint64_t key = 0, wkey = 0;
		bool local = false, wlocal = true;

		cr_assert_eq(fsjob_fd_stat(fd, &st, &key, &local), 0);
		cr_assert_eq(fstat(fd, &want), 0);
		cr_assert_eq(fsjob_fd_mount(fd, &wkey, &wlocal), 0);
		cr_assert_eq(st.st_ino, want.st_ino);
		cr_assert_eq(st.st_dev, want.st_dev);
		cr_assert_eq(st.st_mode, want.st_mode);
		cr_assert_eq(st.st_size, 6);
		cr_assert_eq(st.st_nlink, want.st_nlink);
		cr_assert_eq(st.st_uid, want.st_uid);
		cr_assert_eq(st.st_mtim.tv_sec, want.st_mtim.tv_sec);
		cr_assert_eq(st.st_mtim.tv_nsec, want.st_mtim.tv_nsec);
		cr_assert_eq(key, wkey, "round %d", round);
		cr_assert_eq(local, wlocal, "round %d", round);
	}
	/* Another mount between: each keeps its own answer. */
	int pfd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	struct stat st;
	uint64_t key = 0, fkey = 0;
	bool local = true, flocal = false;
	cr_assert_eq(fsjob_fd_stat(pfd, &st, &key, &local), 0);
	cr_assert_not(local, "procfs goes to the workers");
	cr_assert_eq(fsjob_fd_stat(fd, &st, &fkey, &flocal), 0);
	cr_assert_neq(key, fkey);
	close(pfd);
	close(fd);
	unlink(path);

	/* A closed fd: the error, and the safe answers. */
	cr_assert_lt(fsjob_fd_stat(fd, &st, &key, &local), 0);
	cr_assert_eq(key, 1);
	cr_assert_not(local);
}
