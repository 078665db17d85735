/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/state.h"
#include "base/users.h"
#include "process/procenv.h"

static size_t count(char **envp)
{
	size_t n = 0;

	while (envp[n])
		n++;
	return n;
}

Test(procenv, base_variables_in_order)
{
	char **e = procenv_build("/usr/bin:/bin", "/home/user", "user", NULL, 0, NULL, 0);

	cr_assert_not_null(e);
	cr_assert_eq(count(e), 4);
	cr_expect_str_eq(e[0], "PATH=/usr/bin:/bin");
	cr_expect_str_eq(e[1], "HOME=/home/user");
	cr_expect_str_eq(e[2], "USER=user");
	cr_expect_str_eq(e[3], "LOGNAME=user");
	free(e);
}

Test(procenv, store_then_request_later_wins)
{
	const struct procenv_kv store[] = {
		{ "E2B_SANDBOX", "true" },
		{ "FOO", "from-store" },
		{ "HOME", "/store-home" },
	};
	const struct procenv_kv req[] = {
		{ "FOO", "from-request" },
		{ "BAR", "b=c" },
		{ "PATH", "/custom" },
	};
	char **e = procenv_build("/bin", "/root", "root", store, 3, req, 3);

	cr_assert_not_null(e);
	/* Each name once, at the position of its first appearance. */
	cr_assert_eq(count(e), 7);
	cr_expect_str_eq(e[0], "PATH=/custom");
	cr_expect_str_eq(e[1], "HOME=/store-home");
	cr_expect_str_eq(e[2], "USER=root");
	cr_expect_str_eq(e[3], "LOGNAME=root");
	cr_expect_str_eq(e[4], "E2B_SANDBOX=true");
	cr_expect_str_eq(e[5], "FOO=from-request");
	cr_expect_str_eq(e[6], "BAR=b=c");
	cr_expect_str_eq(procenv_get(e, "BAR"), "b=c");
	cr_expect_str_eq(procenv_get(e, "FOO"), "from-request");
	cr_expect_null(procenv_get(e, "FO"));
	cr_expect_null(procenv_get(e, "MISSING"));
	free(e);
}

Test(procenv, empty_values_are_kept)
{
	const struct procenv_kv req[] = { { "EMPTY", "" } };
	char **e = procenv_build("/bin", "/root", "root", NULL, 0, req, 1);

	cr_assert_not_null(e);
	cr_expect_str_eq(e[4], "EMPTY=");
	cr_expect_str_eq(procenv_get(e, "EMPTY"), "");
	free(e);
}

/* The one builder Start and sessions use: envd's PATH, the user, the env
 * store, the request. */
Test(procenv, for_a_user_with_the_store_and_the_request)
{
	struct user u = { .uid = 1000, .gid = 1000 };
	const char *keys[] = { "FROM_INIT", "SHARED" }, *vals[] = { "1", "store" };
	const struct procenv_kv req[] = { { "SHARED", "request" }, { "ONLY_REQ", "r" } };
	char **e;

	snprintf(u.name, sizeof(u.name), "user");
	snprintf(u.home, sizeof(u.home), "/home/user");
	envstore_replace_user(keys, vals, 2);
	envstore_set_internal("E2B_SANDBOX", "true");
	cr_assert_eq(setenv("PATH", "/opt/bin:/bin", 1), 0);
	e = procenv_for(&u, req, 2);
	cr_assert_not_null(e);
	cr_expect_str_eq(procenv_get(e, "PATH"), "/opt/bin:/bin");
	cr_expect_str_eq(procenv_get(e, "HOME"), "/home/user");
	cr_expect_str_eq(procenv_get(e, "USER"), "user");
	cr_expect_str_eq(procenv_get(e, "LOGNAME"), "user");
	cr_expect_str_eq(procenv_get(e, "FROM_INIT"), "1");
	cr_expect_str_eq(procenv_get(e, "E2B_SANDBOX"), "true");
	cr_expect_str_eq(procenv_get(e, "SHARED"), "request", "the request wins over the store");
	cr_expect_str_eq(procenv_get(e, "ONLY_REQ"), "r");
	cr_expect_eq(count(e), 8);
	free(e);

	/* envd without a PATH (or an empty one) gives its commands the default. */
	cr_assert_eq(unsetenv("PATH"), 0);
	e = procenv_for(&u, NULL, 0);
	cr_assert_not_null(e);
	cr_expect_str_eq(procenv_get(e, "PATH"), PROCENV_DEFAULT_PATH);
	cr_expect_null(procenv_get(e, "ONLY_REQ"));
	free(e);
	cr_assert_eq(setenv("PATH", "", 1), 0);
	e = procenv_for(&u, NULL, 0);
	cr_assert_not_null(e);
	cr_expect_str_eq(procenv_get(e, "PATH"), PROCENV_DEFAULT_PATH);
	free(e);
}
