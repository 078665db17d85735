/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/procstat.h"

static int parse(const char *line, struct procstat *st)
{
	return procstat_parse(line, strlen(line), st);
}

Test(procstat, fields_of_a_plain_line)
{
	struct procstat st;

	cr_assert_eq(parse("4242 (bash) S 100 4242 4242 34816 4300 4194304 900 1200 3 4 "
			   "17 5 -1 22 20 0 1 0 123456 9000000 500 18446744073709551615\n",
			   &st), 0);
	cr_expect_eq(st.pid, 4242);
	cr_expect_str_eq(st.comm, "bash");
	cr_expect_eq(st.state, 'S');
	cr_expect_eq(st.ppid, 100);
	cr_expect_eq(st.pgrp, 4242);
	cr_expect_eq(st.session, 4242);
	cr_expect_eq(st.utime, 17);
	cr_expect_eq(st.stime, 5);
	cr_expect_eq(st.cutime, -1);
	cr_expect_eq(st.cstime, 22);
}

Test(procstat, comm_with_spaces_and_parentheses)
{
	struct procstat st;

	/* The name runs to the last ')': one that mimics the fields after it
	 * cannot shift them. */
	cr_assert_eq(parse("77 (a) R 1 2 3 (b)) S 5 6 7 0 -1 0 0 0 0 0 8 9 10 11", &st), 0);
	cr_expect_str_eq(st.comm, "a) R 1 2 3 (b)");
	cr_expect_eq(st.state, 'S');
	cr_expect_eq(st.ppid, 5);
	cr_expect_eq(st.pgrp, 6);
	cr_expect_eq(st.session, 7);
	cr_expect_eq(st.utime, 8);
	cr_expect_eq(st.cstime, 11);
	cr_assert_eq(parse("78 () S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0", &st), 0);
	cr_expect_str_eq(st.comm, "");
	cr_assert_eq(parse("79 (x y\tz) Z 1 1 1 0 -1 0 0 0 0 0 0 0 0 0", &st), 0);
	cr_expect_str_eq(st.comm, "x y\tz");
	cr_expect_eq(st.state, 'Z');
}

Test(procstat, a_long_comm_is_cut)
{
	char line[512], name[200];
	struct procstat st;

	memset(name, 'n', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	snprintf(line, sizeof(line), "5 (%s) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0", name);
	cr_assert_eq(parse(line, &st), 0);
	cr_expect_eq(strlen(st.comm), PROCSTAT_COMM_MAX - 1);
	cr_expect_eq(st.ppid, 1);
}

Test(procstat, malformed_lines_are_einval)
{
	struct procstat st;

	cr_expect_eq(parse("", &st), -EINVAL);
	cr_expect_eq(parse("12 bash S 1 1 1", &st), -EINVAL);
	cr_expect_eq(parse("12 (bash", &st), -EINVAL);
	cr_expect_eq(parse("x (bash) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0", &st), -EINVAL);
	cr_expect_eq(parse("12 (bash) S 1 1", &st), -EINVAL, "fields missing");
	cr_expect_eq(parse("12 (bash) S 1 x 1 0 -1 0 0 0 0 0 0 0 0 0", &st), -EINVAL);
	cr_expect_eq(parse("12 (bash) S 1 1 1 0 -1 0 0 0 0 0 -5 0 0 0", &st), -EINVAL,
		     "utime is unsigned");
	cr_expect_eq(parse("12 (bash)", &st), -EINVAL);
	/* Not NUL-terminated: only `len` bytes are looked at. */
	cr_expect_eq(procstat_parse("12 (bash) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0", 12, &st), -EINVAL);
}

/*
 * A child of ours in a process group of its own, asleep: read as another
 * process's entry (qemu-user answers a process's own /proc/self/stat with
 * a made-up line whose group and session are 0, so the arm64 unit run
 * could not check those fields on getpid()).
 */
Test(procstat, a_child)
{
	struct procstat st;
	int go[2];
	char c;

	cr_assert_eq(pipe(go), 0);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		setpgid(0, 0);
		close(go[0]);
		(void)!write(go[1], "x", 1);
		pause();
		_exit(0);
	}
	close(go[1]);
	cr_assert_eq(read(go[0], &c, 1), 1);
	close(go[0]);
	/* Asleep in pause() once its state says so; until then it may still run. */
	for (int i = 0; i < 120000; i++) {
		cr_assert_eq(procstat_read(pid, &st), 0);
		if (st.state == 'S')
			break;
		usleep(1000);
	}
	cr_expect_eq(st.pid, pid);
	cr_expect_eq(st.ppid, getpid());
	cr_expect_eq(st.pgrp, pid);
	cr_expect_eq(st.session, getsid(0));
	cr_expect_eq(st.state, 'S');
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* Hang deadline for a child that exits at once. */
#define HANG_S 120

Test(procstat, a_zombie_then_a_missing_pid)
{
	struct procstat st;
	pid_t pid = fork();

	cr_assert_geq(pid, 0);
	if (pid == 0)
		_exit(0);
	/* Unreaped: the line is there, in state Z, until the wait. */
	time_t until = time(NULL) + HANG_S;
	int rc;
	while ((rc = procstat_read(pid, &st)) == 0 && st.state != 'Z' && time(NULL) < until)
		usleep(1000);
	cr_assert_eq(rc, 0);
	cr_expect_eq(st.state, 'Z');
	cr_expect_eq(st.ppid, getpid());
	cr_assert_eq(waitpid(pid, NULL, 0), pid);
	cr_expect_eq(procstat_read(pid, &st), -ENOENT);
	cr_expect_eq(procstat_read(0, &st), -ENOENT);
	cr_expect_eq(procstat_read(-1, &st), -ENOENT);
}
