/* SPDX-License-Identifier: Apache-2.0 */
#include "process/waitstatus.h"

#include <stdio.h>
#include <sys/wait.h>

/* Go's syscall signal table for Linux; musl's strsignal words differ. */
static const char *const names[32] = {
	[1] = "hangup",
	[2] = "interrupt",
	[3] = "quit",
	[4] = "illegal instruction",
	[5] = "trace/breakpoint trap",
	[6] = "aborted",
	[7] = "bus error",
	[8] = "floating point exception",
	[9] = "killed",
	[10] = "user defined signal 1",
	[11] = "segmentation fault",
	[12] = "user defined signal 2",
	[13] = "broken pipe",
	[14] = "alarm clock",
	[15] = "terminated",
	[16] = "stack fault",
	[17] = "child exited",
	[18] = "continued",
	[19] = "stopped (signal)",
	[20] = "stopped",
	[21] = "stopped (tty input)",
	[22] = "stopped (tty output)",
	[23] = "urgent I/O condition",
	[24] = "CPU time limit exceeded",
	[25] = "file size limit exceeded",
	[26] = "virtual timer expired",
	[27] = "profiling timer expired",
	[28] = "window changed",
	[29] = "I/O possible",
	[30] = "power failure",
	[31] = "bad system call",
};

const char *waitstatus_signal_name(int sig)
{
	if (sig <= 0 || sig >= 32)
		return NULL;
	return names[sig];
}

void waitstatus_describe(int wstatus, int *exit_code, bool *exited, char *buf, size_t len)
{
	if (WIFEXITED(wstatus)) {
		*exit_code = WEXITSTATUS(wstatus);
		*exited = true;
		snprintf(buf, len, "exit status %d", *exit_code);
		return;
	}
	*exit_code = -1;
	*exited = false;
	if (WIFSIGNALED(wstatus)) {
		int sig = WTERMSIG(wstatus);
		const char *name = waitstatus_signal_name(sig);
		const char *core = WCOREDUMP(wstatus) ? " (core dumped)" : "";

		if (name)
			snprintf(buf, len, "signal: %s%s", name, core);
		else
			snprintf(buf, len, "signal: signal %d%s", sig, core);
		return;
	}
	/* Only terminal statuses reach us; keep Go's fallback wording. */
	snprintf(buf, len, "exit status %d", -1);
}
