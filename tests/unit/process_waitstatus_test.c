/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "process/waitstatus.h"

/* Wait statuses as the kernel encodes them. */
#define EXITED(n) (((n) & 0xff) << 8)
#define SIGNALED(s) ((s) & 0x7f)
#define CORE 0x80

Test(waitstatus, exit_statuses)
{
	char buf[64];
	int code;
	bool exited;

	waitstatus_describe(EXITED(0), &code, &exited, buf, sizeof(buf));
	cr_expect_eq(code, 0);
	cr_expect(exited);
	cr_expect_str_eq(buf, "exit status 0");

	waitstatus_describe(EXITED(1), &code, &exited, buf, sizeof(buf));
	cr_expect_eq(code, 1);
	cr_expect_str_eq(buf, "exit status 1");

	waitstatus_describe(EXITED(127), &code, &exited, buf, sizeof(buf));
	cr_expect_eq(code, 127);
	cr_expect_str_eq(buf, "exit status 127");

	waitstatus_describe(EXITED(255), &code, &exited, buf, sizeof(buf));
	cr_expect_eq(code, 255);
	cr_expect_str_eq(buf, "exit status 255");
}

Test(waitstatus, every_signal_name)
{
	static const char *const want[32] = {
		NULL, "hangup", "interrupt", "quit", "illegal instruction",
		"trace/breakpoint trap", "aborted", "bus error", "floating point exception",
		"killed", "user defined signal 1", "segmentation fault", "user defined signal 2",
		"broken pipe", "alarm clock", "terminated", "stack fault", "child exited",
		"continued", "stopped (signal)", "stopped", "stopped (tty input)",
		"stopped (tty output)", "urgent I/O condition", "CPU time limit exceeded",
		"file size limit exceeded", "virtual timer expired", "profiling timer expired",
		"window changed", "I/O possible", "power failure", "bad system call",
	};
	char buf[64], exp[80];
	int code;
	bool exited;

	for (int s = 1; s < 32; s++) {
		cr_expect_str_eq(waitstatus_signal_name(s), want[s], "signal %d", s);
		waitstatus_describe(SIGNALED(s), &code, &exited, buf, sizeof(buf));
		snprintf(exp, sizeof(exp), "signal: %s", want[s]);
		cr_expect_str_eq(buf, exp, "signal %d", s);
		cr_expect_eq(code, -1);
		cr_expect_not(exited);
	}
}

Test(waitstatus, core_dump_and_unknown_signals)
{
	char buf[64];
	int code;
	bool exited;

	waitstatus_describe(SIGNALED(6) | CORE, &code, &exited, buf, sizeof(buf));
	cr_expect_str_eq(buf, "signal: aborted (core dumped)");
	waitstatus_describe(SIGNALED(11) | CORE, &code, &exited, buf, sizeof(buf));
	cr_expect_str_eq(buf, "signal: segmentation fault (core dumped)");
	waitstatus_describe(SIGNALED(34), &code, &exited, buf, sizeof(buf));
	cr_expect_str_eq(buf, "signal: signal 34");
	cr_expect_eq(code, -1);
	cr_expect_null(waitstatus_signal_name(0));
	cr_expect_null(waitstatus_signal_name(64));
}
