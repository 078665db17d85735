/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pty.h - pseudo-terminal pairs for PTY processes: opened with the requested
 * window size before the child starts, resized by Update.
 *
 * Errors: 0 or a negative errno.
 */
#ifndef PTY_PTY_H
#define PTY_PTY_H

/*
 * Open a new PTY pair with window size cols x rows (0 allowed). Both fds
 * are close-on-exec; the master is non-blocking, the slave is not our
 * controlling terminal. Returns 0 or -errno.
 */
int pty_open(int *master, int *slave, unsigned cols, unsigned rows);

/* Set the window size; the kernel signals SIGWINCH to the foreground group. */
int pty_resize(int master, unsigned cols, unsigned rows);

#endif
