/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "base/fsid.h"
#include "base/uptmp.h"

#define NAME_IS(s, r) uptmp_name_is((s), strlen(s), (r))

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

/* A temporary file is created beside the target, named for the kind,
 * registered as a symlink to it, and forgotten. */
Test(uptmp, open_registers_and_forgets)
{
	char dir[] = "/tmp/uptmp-test.XXXXXX", reg_dir[200], tmp[PATH_MAX], reg[320], link[PATH_MAX];
	struct stat st;
	int fd;

	cr_assert(mkdtemp(dir));
	snprintf(reg_dir, sizeof(reg_dir), "%s/registry", dir); /* created on demand */
	snprintf(uptmp_registry, sizeof(uptmp_registry), "%s", reg_dir);
	fd = uptmp_open(dir, true, tmp, sizeof(tmp), reg, sizeof(reg));
	cr_assert_geq(fd, 0);
	const char *base = strrchr(tmp, '/') + 1;
	bool r = false;
	cr_assert(NAME_IS(base, &r), "%s", base);
	cr_assert(r);
	cr_assert_eq(strncmp(tmp, dir, strlen(dir)), 0);
	cr_assert_eq(stat(tmp, &st), 0);
	cr_assert(reg[0]);
	ssize_t l = readlink(reg, link, sizeof(link) - 1);
	cr_assert_gt(l, 0);
	link[l] = '\0';
	cr_assert_str_eq(link, tmp);
	char want[64];
	snprintf(want, sizeof(want), "/%ld.", (long)getpid());
	cr_assert(strstr(reg, want), "entry %s names our pid", reg);

	/* a second one never collides */
	char tmp2[PATH_MAX], reg2[320];
	int fd2 = uptmp_open(dir, false, tmp2, sizeof(tmp2), reg2, sizeof(reg2));
	cr_assert_geq(fd2, 0);
	cr_assert_str_neq(tmp, tmp2);
	cr_assert(NAME_IS(strrchr(tmp2, '/') + 1, &r));
	cr_assert_not(r);

	uptmp_forget(reg);
	uptmp_forget(reg2);
	uptmp_forget("");
	cr_assert_eq(lstat(reg, &st), -1);
	close(fd);
	close(fd2);
	unlink(tmp);
	unlink(tmp2);
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
	cr_assert(mkdtemp(dir));
	snprintf(reg_dir, sizeof(reg_dir), "%s/registry", dir);
	cr_assert_eq(mkdir(reg_dir, 0700), 0);
	snprintf(uptmp_registry, sizeof(uptmp_registry), "%s", reg_dir);
	snprintf(tmp, sizeof(tmp), "%s/.envd-upload.r0123456789abcdef", dir);
	cr_assert_eq(fsid_enter(&id, &saved), 0);
	uptmp_register(tmp, reg, sizeof(reg));
	cr_assert_eq(fsid_current_uid(), 65534, "still the user's job");
	cr_assert(reg[0], "registered");
	cr_assert_eq(fsid_leave(&saved), 0);
	cr_assert_eq(lstat(reg, &st), 0);
	cr_assert(S_ISLNK(st.st_mode));
	cr_assert_eq(fsid_enter(&id, &saved), 0);
	uptmp_forget(reg);
	cr_assert_eq(fsid_current_uid(), 65534);
	cr_assert_eq(fsid_leave(&saved), 0);
	cr_assert_eq(lstat(reg, &st), -1, "forgotten");
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

	cr_assert(mkdtemp(dir));
	snprintf(reg_dir, sizeof(reg_dir), "%s/registry", dir);
	snprintf(uptmp_registry, sizeof(uptmp_registry), "%s", reg_dir);
	snprintf(missing, sizeof(missing), "%s/no/such/dir", dir);
	cr_assert_eq(uptmp_open(missing, false, tmp, sizeof(tmp), reg, sizeof(reg)), -ENOENT);
	cr_assert_str_eq(reg, "");
	cr_assert_str_eq(tmp, "");
	cr_assert_not_null(d = opendir(reg_dir), "the registry was made for the entry");
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	cr_assert_eq(n, 0, "the entry is gone with the failure");
	rmdir(reg_dir);
	rmdir(dir);
}
