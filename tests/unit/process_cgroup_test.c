/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "process/cgroup.h"

Test(pcg, flat_keyed_files)
{
	const char *ev = "populated 1\nfrozen 0\n";
	const char *stat = "usage_usec 5000\nuser_usec 3000\nsystem_usec 2000\n";

	cr_expect_eq(pcg_key(ev, "populated"), 1);
	cr_expect_eq(pcg_key(ev, "frozen"), 0);
	cr_expect_eq(pcg_key(ev, "froze"), -1, "a prefix of a key is not the key");
	cr_expect_eq(pcg_key(stat, "user_usec"), 3000);
	cr_expect_eq(pcg_key(stat, "usec"), -1);
	cr_expect_eq(pcg_key(stat, "system_usec"), 2000, "the last line too");
	cr_expect_eq(pcg_key("", "x"), -1);
	cr_expect_eq(pcg_key("oom 0\noom_kill 3", "oom_kill"), 3, "no trailing newline");
}

static char dir[64];

static void mkfile(const char *d, const char *name, const char *text)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", d, name);
	f = fopen(path, "w");
	cr_assert(f);
	fputs(text, f);
	fclose(f);
}

Test(pcg, read_write_and_delegated_controllers)
{
	char user[128], ptys[128], buf[64];

	snprintf(dir, sizeof(dir), "/tmp/pcg-test-%d", (int)getpid());
	snprintf(user, sizeof(user), "%s/user", dir);
	snprintf(ptys, sizeof(ptys), "%s/ptys", dir);
	cr_assert(mkdir(dir, 0700) == 0);
	cr_assert(mkdir(user, 0700) == 0);
	cr_assert(mkdir(ptys, 0700) == 0);
	mkfile(user, "cgroup.subtree_control", "cpu memory pids\n");
	mkfile(ptys, "cgroup.subtree_control", "cpu pids\n");
	mkfile(user, "memory.max", "max\n");

	cr_expect_eq(pcg_write(user, "memory.max", "1024"), 0);
	cr_expect_eq(pcg_read(user, "memory.max", buf, sizeof(buf)), 4);
	cr_expect_str_eq(buf, "1024");
	cr_expect_eq(pcg_write(user, "nope", "1"), -ENOENT, "absent files are not created");
	cr_expect_eq(pcg_read(user, "nope", buf, sizeof(buf)), -ENOENT);
	cr_expect_eq(pcg_read(user, "cgroup.subtree_control", buf, 5), 4, "bounded by the buffer");
	cr_expect_str_eq(buf, "cpu ");

	cr_expect(!pcg_active());
	cr_expect_eq(pcg_configure(user, ptys), 0);
	cr_expect(pcg_active());
	cr_expect_eq(pcg_controllers(), PCG_CPU | PCG_PIDS,
		     "a leaf only gets what both parents delegate");
	cr_expect(!pcg_parent_frozen(false));
	mkfile(user, "cgroup.freeze", "1\n");
	cr_expect(pcg_parent_frozen(false));
	cr_expect(!pcg_parent_frozen(true));

	/* Not a cgroup: there is no cgroup.procs to join, so no leaf. */
	{
		char err[512];
		struct pcg_leaf *l = pcg_leaf_new(false, err, sizeof(err));

		cr_expect_null(l);
		cr_expect(strstr(err, "cgroup.procs") != NULL, "%s", err);
	}
	cr_expect_eq(pcg_lingering(), 0);
	{
		char cmd[128];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		cr_expect_eq(system(cmd), 0);
	}
}
