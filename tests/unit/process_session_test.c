/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "process/session.h"

static char *text_of(const char *cmd, char **args, size_t n)
{
	Process__ProcessConfig c = PROCESS__PROCESS_CONFIG__INIT;

	c.cmd = (char *)cmd;
	c.args = args;
	c.n_args = n;
	return session_command_text(&c);
}

Test(session, sdk_shape_runs_the_text_itself)
{
	char *a[] = { "-l", "-c", "cd /tmp && echo 'x'" };
	char *t = text_of("/bin/bash", a, 3);

	cr_assert_str_eq(t, "cd /tmp && echo 'x'");
	free(t);
	t = text_of("/bin/sh", a + 1, 2);
	cr_assert_str_eq(t, "cd /tmp && echo 'x'");
	free(t);
}

Test(session, other_commands_are_quoted_words)
{
	char *a[] = { "it's", "", "$HOME" };
	char *t = text_of("/usr/bin/printf", a, 3);

	cr_assert_str_eq(t, "'/usr/bin/printf' 'it'\\''s' '' '$HOME'");
	free(t);
	/* bash with other options is not the SDK's shape */
	char *b[] = { "-c", "x", "y" };
	t = text_of("/bin/bash", b, 3);
	cr_assert_str_eq(t, "'/bin/bash' '-c' 'x' 'y'");
	free(t);
}

Test(session, quote_reports_the_length_it_needs)
{
	char small[4];

	cr_assert_eq(session_quote(NULL, 0, "a'b"), 8);
	cr_assert_eq(session_quote(small, sizeof(small), "abcdef"), 8);
	cr_assert_str_eq(small, "'ab");
}

Test(session, names)
{
	char long_name[SESSION_NAME_MAX + 2];

	cr_assert(session_name_ok("main"));
	cr_assert(session_name_ok("a.b_c-9"));
	cr_assert_not(session_name_ok(""));
	cr_assert_not(session_name_ok(NULL));
	cr_assert_not(session_name_ok("a b"));
	cr_assert_not(session_name_ok("../x"));
	memset(long_name, 'a', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = '\0';
	cr_assert_not(session_name_ok(long_name));
	long_name[SESSION_NAME_MAX] = '\0';
	cr_assert(session_name_ok(long_name));
}
