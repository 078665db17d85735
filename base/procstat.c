/* SPDX-License-Identifier: Apache-2.0 */
#include "base/procstat.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The next space-separated field as a number; advances *p. -EINVAL when
 * the field is missing or not wholly a number. */
static int field(const char **p, const char *end, bool sign, long long *s, unsigned long long *u)
{
	char num[32], *stop;
	const char *q = *p;
	size_t n;

	while (q < end && *q == ' ')
		q++;
	for (n = 0; q + n < end && q[n] != ' ' && q[n] != '\n'; n++)
		;
	if (n == 0 || n >= sizeof(num))
		return -EINVAL;
	memcpy(num, q, n);
	num[n] = '\0';
	errno = 0;
	if (sign)
		*s = strtoll(num, &stop, 10);
	else
		*u = strtoull(num, &stop, 10);
	if (*stop || errno || (!sign && num[0] == '-'))
		return -EINVAL;
	*p = q + n;
	return 0;
}

int procstat_parse(const char *buf, size_t len, struct procstat *out)
{
	const char *end = buf + len, *open = memchr(buf, '(', len), *close = NULL, *p;
	long long v[15];
	unsigned long long u[2];
	size_t n;

	memset(out, 0, sizeof(*out));
	/* The last ')': comm may hold ") " itself. */
	for (p = buf; p < end; p++)
		if (*p == ')')
			close = p;
	if (!open || !close || close < open)
		return -EINVAL;
	p = buf;
	if (field(&p, open, true, &v[0], NULL) < 0 || v[0] <= 0 || v[0] > INT32_MAX)
		return -EINVAL;
	out->pid = (pid_t)v[0];
	n = (size_t)(close - open - 1);
	if (n >= sizeof(out->comm))
		n = sizeof(out->comm) - 1;
	memcpy(out->comm, open + 1, n);
	p = close + 1;
	if (end - p < 2 || p[0] != ' ' || p[1] == ' ')
		return -EINVAL;
	out->state = p[1];
	p += 2;
	/* ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt */
	for (int i = 0; i < 10; i++)
		if (field(&p, end, true, &v[i], NULL) < 0)
			return -EINVAL;
	/* utime stime cutime cstime */
	if (field(&p, end, false, NULL, &u[0]) < 0 || field(&p, end, false, NULL, &u[1]) < 0 ||
	    field(&p, end, true, &v[10], NULL) < 0 || field(&p, end, true, &v[11], NULL) < 0)
		return -EINVAL;
	out->ppid = (pid_t)v[0];
	out->pgrp = (pid_t)v[1];
	out->session = (pid_t)v[2];
	out->utime = u[0];
	out->stime = u[1];
	out->cutime = v[10];
	out->cstime = v[11];
	return 0;
}

int procstat_read(pid_t pid, struct procstat *out)
{
	/* 52 fields of at most 20 digits and a comm of 64 fit. */
	char path[32], buf[1280];
	ssize_t n;
	int fd, e;

	memset(out, 0, sizeof(*out));
	if (pid <= 0)
		return -ENOENT;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT || errno == ESRCH ? -ENOENT : -errno;
	do
		n = read(fd, buf, sizeof(buf));
	while (n < 0 && errno == EINTR);
	e = errno;
	close(fd);
	/* A process reaped between the open and the read reads as ESRCH. */
	if (n < 0)
		return e == ESRCH ? -ENOENT : -e;
	return procstat_parse(buf, (size_t)n, out);
}
