/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Allocation failures in the directory walkers (failalloc.h): every
 * allocation fs_read_names() and fs_listdir() make fails in turn; the call
 * reports -ENOMEM (or, for the listing, another clean error) and leaks
 * nothing.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "failalloc.h"
#include "fs/listdir.h"

static char dir[PATH_MAX];

static void make_tree(void)
{
	char p[PATH_MAX + 32];

	snprintf(dir, sizeof(dir), "/tmp/envd-fsalloc.XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	for (int i = 0; i < 5; i++) {
		snprintf(p, sizeof(p), "%s/f%d", dir, i);
		int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		cr_assert_geq(fd, 0);
		close(fd);
	}
	snprintf(p, sizeof(p), "%s/sub", dir);
	cr_assert_eq(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/sub/inner", dir);
	int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	cr_assert_geq(fd, 0);
	close(fd);
	snprintf(p, sizeof(p), "%s/link", dir);
	cr_assert_eq(symlink("sub", p), 0);
}

static void remove_tree(void)
{
	char err[256];

	fs_remove_all(dir, err, sizeof(err));
}

static int names_op(void *ctx)
{
	char **names;
	size_t n;
	int rc = fs_read_names(dir, &names, &n);

	if (rc < 0)
		return rc;
	rc = n == 7 && strcmp(names[0], "f0") == 0 && strcmp(names[6], "sub") == 0 ? 0 : -EINVAL;
	fs_names_free(names, n);
	return rc;
}

static int listdir_op(void *ctx)
{
	struct fs_listing l;
	char err[512];
	int rc = fs_listdir(dir, 2, &l, err, sizeof(err));

	if (rc < 0)
		return rc;
	rc = l.n == 8 ? 0 : -EINVAL;
	fs_listing_free(&l);
	return rc;
}

Test(fs_alloc, read_names_every_allocation_fails_cleanly, .init = make_tree, .fini = remove_tree)
{
	cr_assert_gt(failalloc_run("fs_read_names", names_op, NULL, 0), 7);
}

Test(fs_alloc, listdir_every_allocation_fails_cleanly, .init = make_tree, .fini = remove_tree)
{
	cr_assert_gt(failalloc_run("fs_listdir", listdir_op, NULL, 0), 8);
}
