/* SPDX-License-Identifier: Apache-2.0 */
/*
 * procstat.h - the fields envd needs of /proc/<pid>/stat (proc(5)).
 *
 * The line is "pid (comm) state ppid pgrp session ...". comm is the
 * executable's name as the process set it: it may hold spaces and
 * parentheses, so it runs from the first '(' to the *last* ')'; the
 * fields after it are read from there. Plain libc, safe on any thread.
 *
 * Errors: 0 or a negative errno (below).
 */
#ifndef ENVD_PROCSTAT_H
#define ENVD_PROCSTAT_H

#include <stddef.h>
#include <sys/types.h>

/* comm bytes kept (the kernel's own limit is 16 for a task, 64 for a
 * kernel thread); longer names are cut. */
#define PROCSTAT_COMM_MAX 64

struct procstat {
	pid_t pid;
	char comm[PROCSTAT_COMM_MAX];
	char state;                   /* R S D Z T t X I ... ('Z': a zombie) */
	pid_t ppid;
	pid_t pgrp;
	pid_t session;
	/* CPU time in clock ticks (sysconf(_SC_CLK_TCK)): the process's own,
	 * and that of the children it has waited for. */
	unsigned long long utime, stime;
	long long cutime, cstime;
};

/*
 * Parse one stat line of `len` bytes (no NUL needed). Returns 0, or
 * -EINVAL when it is not such a line (no "(comm)", a field missing or not
 * a number).
 */
int procstat_parse(const char *buf, size_t len, struct procstat *out);

/*
 * Read and parse /proc/<pid>/stat. Returns 0; -ENOENT when there is no
 * such process (or it was reaped meanwhile); -EINVAL as procstat_parse;
 * another -errno when the file cannot be read. A zombie still has its
 * line (state 'Z').
 */
int procstat_read(pid_t pid, struct procstat *out);

#endif
