/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/users.h"

static char passwd_tmp[] = "/tmp/users_test_passwd_XXXXXX";
static char group_tmp[] = "/tmp/users_test_group_XXXXXX";
static const char *saved_passwd, *saved_group;

static void write_file(char *tmpl, const char *content)
{
	int fd = mkstemp(tmpl);
	cr_assert(fd >= 0);
	cr_assert_eq(write(fd, content, strlen(content)), (ssize_t)strlen(content));
	close(fd);
}

static void setup(void)
{
	saved_passwd = users_passwd_path;
	saved_group = users_group_path;
	strcpy(passwd_tmp, "/tmp/users_test_passwd_XXXXXX");
	strcpy(group_tmp, "/tmp/users_test_group_XXXXXX");
	write_file(passwd_tmp, "root:x:0:0:root:/root:/bin/bash\n"
			       "# a comment\n"
			       "\n"
			       "malformed line without colons\n"
			       "user:x:1000:1000:User,,,:/home/user:/bin/bash\n"
			       "bob:x:1001:100:Bob:/home/bob:/bin/sh\n"
			       "baduid:x:abc:1000::/home/baduid:/bin/sh\n"
			       "badgid:x:12:99999999999::/home/badgid:/bin/sh\n"
			       "user:x:2000:2000:dup:/home/dup:/bin/sh\n"
			       "nohome:x:1002:1002");
	write_file(group_tmp, "root:x:0:\n"
			      "users:x:100:user,bob\n"
			      "user:x:1000:\n"
			      "sudo:x:27:user\n"
			      "broken:x:notanumber:user\n"
			      "short:x\n"
			      "docker:x:999:alice,user\n"
			      "users2:x:1000:user\n"
			      "prefix:x:555:username,xuser\n");
	users_passwd_path = passwd_tmp;
	users_group_path = group_tmp;
}

static void teardown(void)
{
	unlink(passwd_tmp);
	unlink(group_tmp);
	users_passwd_path = saved_passwd;
	users_group_path = saved_group;
}

TestSuite(users, .init = setup, .fini = teardown);

Test(users, lookup_root)
{
	struct user u;
	cr_assert_eq(user_lookup("root", &u, NULL, 0), 0);
	cr_assert_str_eq(u.name, "root");
	cr_assert_eq(u.uid, 0);
	cr_assert_eq(u.gid, 0);
	cr_assert_str_eq(u.home, "/root");
	cr_assert_eq(u.n_groups, 1);
	cr_assert_eq(u.groups[0], 0);
}

Test(users, lookup_first_match_and_groups)
{
	struct user u;
	cr_assert_eq(user_lookup("user", &u, NULL, 0), 0);
	cr_assert_eq(u.uid, 1000);
	cr_assert_eq(u.gid, 1000);
	cr_assert_str_eq(u.home, "/home/user");
	/* primary first, then users(100), sudo(27), docker(999); the
	 * users2 entry repeats the primary gid and is skipped, malformed and
	 * prefix-only matches are ignored. */
	cr_assert_eq(u.n_groups, 4);
	cr_assert_eq(u.groups[0], 1000);
	cr_assert_eq(u.groups[1], 100);
	cr_assert_eq(u.groups[2], 27);
	cr_assert_eq(u.groups[3], 999);
}

Test(users, lookup_unknown)
{
	struct user u;
	char err[256];
	cr_assert_eq(user_lookup("nobody", &u, err, sizeof(err)), -ENOENT);
	cr_assert_str_eq(err, "user: unknown user nobody");
	cr_assert_eq(user_lookup("", &u, err, sizeof(err)), -ENOENT);
	cr_assert_str_eq(err, "user: unknown user ");
	/* Five-field line: no home field, so not a valid entry. */
	cr_assert_eq(user_lookup("nohome", &u, err, sizeof(err)), -ENOENT);
}

Test(users, lookup_bad_ids)
{
	struct user u;
	char err[256];
	cr_assert_eq(user_lookup("baduid", &u, err, sizeof(err)), -EINVAL);
	cr_assert(strncmp(err, "error parsing uid 'abc': ", 25) == 0, "%s", err);
	cr_assert_eq(user_lookup("badgid", &u, err, sizeof(err)), -EINVAL);
	cr_assert(strncmp(err, "error parsing gid '99999999999': ", 33) == 0, "%s", err);
}

Test(users, lookup_missing_file)
{
	struct user u;
	char err[256];
	users_passwd_path = "/nonexistent/passwd";
	cr_assert_eq(user_lookup("root", &u, err, sizeof(err)), -ENOENT);
	cr_assert_str_eq(err, "open /nonexistent/passwd: no such file or directory");
}

Test(users, names_of_ids)
{
	char b[64];
	user_name_of(1001, b, sizeof(b));
	cr_assert_str_eq(b, "bob");
	user_name_of(0, b, sizeof(b));
	cr_assert_str_eq(b, "root");
	user_name_of(4242, b, sizeof(b));
	cr_assert_str_eq(b, "4242");
	group_name_of(100, b, sizeof(b));
	cr_assert_str_eq(b, "users");
	group_name_of(27, b, sizeof(b));
	cr_assert_str_eq(b, "sudo");
	group_name_of(31337, b, sizeof(b));
	cr_assert_str_eq(b, "31337");
}

static const char *clean(const char *in)
{
	static char out[4096];
	path_clean(in, out, sizeof(out));
	return out;
}

Test(paths, clean)
{
	static const char *const cases[][2] = {
		{ "", "." },
		{ "abc", "abc" },
		{ "abc/def", "abc/def" },
		{ "a/b/c", "a/b/c" },
		{ ".", "." },
		{ "..", ".." },
		{ "../..", "../.." },
		{ "../../abc", "../../abc" },
		{ "/abc", "/abc" },
		{ "/", "/" },
		{ "abc/", "abc" },
		{ "abc/def/", "abc/def" },
		{ "/abc/", "/abc" },
		{ "abc//def//ghi", "abc/def/ghi" },
		{ "//abc", "/abc" },
		{ "///abc", "/abc" },
		{ "//abc//", "/abc" },
		{ "abc//", "abc" },
		{ "abc/./def", "abc/def" },
		{ "/./abc/def", "/abc/def" },
		{ "abc/.", "abc" },
		{ "abc/def/ghi/../jkl", "abc/def/jkl" },
		{ "abc/def/../ghi/../jkl", "abc/jkl" },
		{ "abc/def/..", "abc" },
		{ "abc/def/../..", "." },
		{ "/abc/def/../..", "/" },
		{ "abc/def/../../..", ".." },
		{ "/abc/def/../../..", "/" },
		{ "abc/def/../../../ghi/jkl/../../../mno", "../../mno" },
		{ "/../abc", "/abc" },
		{ "abc/./../def", "def" },
		{ "abc//./../def", "def" },
		{ "abc/../../././../def", "../../def" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		cr_expect_str_eq(clean(cases[i][0]), cases[i][1], "clean(%s)", cases[i][0]);
}

Test(paths, base)
{
	static const char *const cases[][2] = {
		{ "", "." },     { ".", "." },       { "/.", "." },     { "/", "/" },
		{ "////", "/" }, { "x/", "x" },      { "abc", "abc" },  { "abc/def", "def" },
		{ "a/b/.x", ".x" }, { "a/b/c.", "c." }, { "a/b/c.x", "c.x" }, { "/home/user/", "user" },
	};
	char out[256];
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		path_base(cases[i][0], out, sizeof(out));
		cr_expect_str_eq(out, cases[i][1], "base(%s)", cases[i][0]);
	}
}

Test(paths, resolve)
{
	struct user u = { .name = "user", .uid = 1000, .gid = 1000, .home = "/home/user" };
	char out[PATH_MAX], err[256];

	cr_assert_eq(path_resolve(&u, "", NULL, out, sizeof(out), err, sizeof(err)), 0);
	cr_assert_str_eq(out, "/home/user");
	cr_assert_eq(path_resolve(&u, "", "/work", out, sizeof(out), err, sizeof(err)), 0);
	cr_assert_str_eq(out, "/work");
	/* Relative paths go under home even with a workdir (quirk B.8). */
	cr_assert_eq(path_resolve(&u, "foo", "/work", out, sizeof(out), err, sizeof(err)), 0);
	cr_assert_str_eq(out, "/home/user/foo");
	cr_assert_eq(path_resolve(&u, "a/./b/../c/", NULL, out, sizeof(out), err, sizeof(err)), 0);
	cr_assert_str_eq(out, "/home/user/a/c");
	cr_assert_eq(path_resolve(&u, "../../../etc", NULL, out, sizeof(out), err, sizeof(err)), 0);
	cr_assert_str_eq(out, "/etc");
	cr_assert_eq(path_resolve(&u, "~", NULL, out, sizeof(out), err, sizeof(err)), 0);
	cr_assert_str_eq(out, "/home/user");
	cr_assert_eq(path_resolve(&u, "~/", NULL, out, sizeof(out), err, sizeof(err)), 0);
	cr_assert_str_eq(out, "/home/user");
	cr_assert_eq(path_resolve(&u, "~/x//y/../z", NULL, out, sizeof(out), err, sizeof(err)), 0);
	cr_assert_str_eq(out, "/home/user/x/z");
	/* Absolute paths are not cleaned (quirk B.9). */
	cr_assert_eq(path_resolve(&u, "/a//b/../c/", NULL, out, sizeof(out), err, sizeof(err)), 0);
	cr_assert_str_eq(out, "/a//b/../c/");
	cr_assert_eq(path_resolve(&u, "~bob/x", NULL, out, sizeof(out), err, sizeof(err)), -EINVAL);
	cr_assert_str_eq(err,
			 "failed to expand path '~bob/x' for user 'user': cannot expand user-specific home dir");
	/* Workdir relative? only absolute workdirs come from /init, but an
	 * empty path + "~" workdir still expands. */
	cr_assert_eq(path_resolve(&u, "", "~/w", out, sizeof(out), err, sizeof(err)), 0);
	cr_assert_str_eq(out, "/home/user/w");
}

Test(paths, resolve_too_long)
{
	struct user u = { .name = "user", .home = "/home/user" };
	char out[16], err[256];
	cr_assert_eq(path_resolve(&u, "/0123456789abcdefghij", NULL, out, sizeof(out), err, sizeof(err)),
		     -ENAMETOOLONG);
	cr_assert_eq(path_resolve(&u, "0123456789abcdefghij", NULL, out, sizeof(out), err, sizeof(err)),
		     -ENAMETOOLONG);
}
