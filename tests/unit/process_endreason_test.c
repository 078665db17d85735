/* SPDX-License-Identifier: Apache-2.0 */
/* Why a command ended (process/endreason.h): who decides, and the words. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>

#include "process/endreason.h"

#define MiB (1024ull * 1024)

Test(endreason, oom_kill_of_the_command)
{
	struct endreason r;
	char buf[256];

	endreason_decide(NULL, SIGKILL, true, 512 * MiB, 511 * MiB + 1000, &r);
	cr_expect_eq(r.kind, ENDREASON_OOM);
	endreason_describe(&r, "signal: killed", buf, sizeof(buf));
	cr_expect_str_eq(buf, "out of memory: killed by the kernel OOM killer (memory.max 512 MiB, peak 511 MiB)");
	cr_expect(endreason_in_error(&r));
	/* No limit of its own (the machine ran out), GiB, unknown peak. */
	endreason_decide(NULL, SIGKILL, true, 0, 2048 * MiB, &r);
	endreason_describe(&r, "signal: killed", buf, sizeof(buf));
	cr_expect_str_eq(buf, "out of memory: killed by the kernel OOM killer (no memory.max of its own, peak 2 GiB)");
	endreason_decide(NULL, SIGKILL, true, 1024 * MiB, 0, &r);
	endreason_describe(&r, "signal: killed", buf, sizeof(buf));
	cr_expect_str_eq(buf, "out of memory: killed by the kernel OOM killer (memory.max 1 GiB)");
}

Test(endreason, oom_kill_inside_the_command)
{
	struct endreason r;
	char buf[256];

	/* A child was killed; the shell reported it and exited. */
	endreason_decide(NULL, 0, true, 32 * MiB, 31 * MiB, &r);
	cr_expect_eq(r.kind, ENDREASON_OOM);
	endreason_describe(&r, "exit status 137", buf, sizeof(buf));
	cr_expect_str_eq(buf, "out of memory: the kernel OOM killer killed a process of the command "
			      "(memory.max 32 MiB, peak 31 MiB); exit status 137");
}

Test(endreason, envd_kills)
{
	struct endreason_kill k = { .by = ENDREASON_BY_TIMEOUT, .sig = SIGKILL, .timeout_ms = 700 };
	struct endreason r;
	char buf[256];

	endreason_decide(&k, SIGKILL, false, 0, 0, &r);
	cr_expect_eq(r.kind, ENDREASON_TIMEOUT);
	endreason_describe(&r, "signal: killed", buf, sizeof(buf));
	cr_expect_str_eq(buf, "timeout: killed by envd when its deadline of 700 ms passed");
	cr_expect(endreason_in_error(&r));
	k.timeout_ms = 5000;
	endreason_decide(&k, SIGKILL, false, 0, 0, &r);
	endreason_describe(&r, "signal: killed", buf, sizeof(buf));
	cr_expect_str_eq(buf, "timeout: killed by envd when its deadline of 5 s passed");

	k = (struct endreason_kill){ .by = ENDREASON_BY_SESSION, .sig = SIGKILL };
	strcpy(k.session, "build");
	endreason_decide(&k, SIGKILL, false, 0, 0, &r);
	cr_expect_eq(r.kind, ENDREASON_SESSION);
	endreason_describe(&r, "signal: killed", buf, sizeof(buf));
	cr_expect_str_eq(buf, "session closed: killed by envd when its session 'build' was closed");

	k = (struct endreason_kill){ .by = ENDREASON_BY_CLIENT, .sig = SIGTERM };
	endreason_decide(&k, SIGTERM, false, 0, 0, &r);
	cr_expect_eq(r.kind, ENDREASON_SIGNAL);
	cr_expect_eq(r.sig, SIGTERM);
	endreason_describe(&r, "signal: terminated", buf, sizeof(buf));
	cr_expect_str_eq(buf, "signal: terminated: sent by a client (SendSignal)");
	cr_expect_not(endreason_in_error(&r), "the reference's error text stays for a client's own kill");
}

Test(endreason, only_what_it_died_of)
{
	struct endreason_kill k = { .by = ENDREASON_BY_CLIENT, .sig = SIGTERM };
	struct endreason r;

	/* It trapped the SIGTERM and exited: no reason. */
	endreason_decide(&k, 0, false, 0, 0, &r);
	cr_expect_eq(r.kind, ENDREASON_NONE);
	/* It ignored the SIGTERM and the OOM killer got it: the OOM kill. */
	endreason_decide(&k, SIGKILL, true, 0, 0, &r);
	cr_expect_eq(r.kind, ENDREASON_OOM);
	/* envd's SIGKILL wins over an OOM count of a child before it. */
	k = (struct endreason_kill){ .by = ENDREASON_BY_TIMEOUT, .sig = SIGKILL, .timeout_ms = 1 };
	endreason_decide(&k, SIGKILL, true, 0, 0, &r);
	cr_expect_eq(r.kind, ENDREASON_TIMEOUT);
	/* Nothing at all. */
	endreason_decide(NULL, 0, false, 0, 0, &r);
	cr_expect_eq(r.kind, ENDREASON_NONE);
	endreason_decide(NULL, SIGSEGV, false, 0, 0, &r);
	cr_expect_eq(r.kind, ENDREASON_NONE, "a crash of its own is its status alone");
	char buf[8] = "x";
	endreason_describe(&r, "signal: segmentation fault", buf, sizeof(buf));
	cr_expect_str_eq(buf, "");
}
