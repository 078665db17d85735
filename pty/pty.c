/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "pty/pty.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

int pty_resize(int master, unsigned cols, unsigned rows)
{
	struct winsize ws = { .ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols };

	if (cols > 0xffff || rows > 0xffff)
		return -EINVAL;
	return ioctl(master, TIOCSWINSZ, &ws) < 0 ? -errno : 0;
}

int pty_open(int *master, int *slave, unsigned cols, unsigned rows)
{
	char name[64];
	int m, s, rc;

	m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
	if (m < 0)
		return -errno;
	if (grantpt(m) < 0 || unlockpt(m) < 0) {
		rc = -errno;
		goto fail_m;
	}
	rc = ptsname_r(m, name, sizeof(name));
	if (rc != 0) {
		rc = -rc;
		goto fail_m;
	}
	s = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (s < 0) {
		rc = -errno;
		goto fail_m;
	}
	rc = pty_resize(m, cols, rows);
	if (rc < 0)
		goto fail_s;
	*master = m;
	*slave = s;
	return 0;
fail_s:
	close(s);
fail_m:
	close(m);
	return rc;
}
