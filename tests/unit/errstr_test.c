/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <errno.h>

#include "base/errstr.h"

Test(errstr, texts)
{
	cr_assert_str_eq(go_strerror(ENOENT), "no such file or directory");
	cr_assert_str_eq(go_strerror(EACCES), "permission denied");
	cr_assert_str_eq(go_strerror(EPERM), "operation not permitted");
	cr_assert_str_eq(go_strerror(EEXIST), "file exists");
	cr_assert_str_eq(go_strerror(ENOTDIR), "not a directory");
	cr_assert_str_eq(go_strerror(EISDIR), "is a directory");
	cr_assert_str_eq(go_strerror(ENOTEMPTY), "directory not empty");
	cr_assert_str_eq(go_strerror(EXDEV), "invalid cross-device link");
	cr_assert_str_eq(go_strerror(ENOSPC), "no space left on device");
	cr_assert_str_eq(go_strerror(EDQUOT), "disk quota exceeded");
	cr_assert_str_eq(go_strerror(ELOOP), "too many levels of symbolic links");
	cr_assert_str_eq(go_strerror(ENAMETOOLONG), "file name too long");
	cr_assert_str_eq(go_strerror(EPIPE), "broken pipe");
	cr_assert_str_eq(go_strerror(EIO), "input/output error");
	cr_assert_str_eq(go_strerror(EBUSY), "device or resource busy");
	cr_assert_str_eq(go_strerror(EINVAL), "invalid argument");
	cr_assert_str_eq(go_strerror(ETXTBSY), "text file busy");
	cr_assert_str_eq(go_strerror(EROFS), "read-only file system");
	cr_assert_str_eq(go_strerror(ENOTSUP), "operation not supported");
	cr_assert_str_eq(go_strerror(EOPNOTSUPP), "operation not supported");
	cr_assert_str_eq(go_strerror(-ENOENT), "no such file or directory");
	cr_assert_str_eq(go_strerror(4000), "errno 4000");
}
