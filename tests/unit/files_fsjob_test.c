/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "files/fsjob.h"

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
