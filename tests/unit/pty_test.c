/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "pty/pty.h"

Test(pty, opens_a_pair_with_the_requested_size)
{
	struct winsize ws;
	int m, s;

	cr_assert_eq(pty_open(&m, &s, 123, 45), 0);
	cr_expect(fcntl(m, F_GETFD) & FD_CLOEXEC);
	cr_expect(fcntl(s, F_GETFD) & FD_CLOEXEC);
	cr_expect(fcntl(m, F_GETFL) & O_NONBLOCK, "the master never blocks the loop");
	cr_assert_eq(ioctl(s, TIOCGWINSZ, &ws), 0);
	cr_expect_eq(ws.ws_col, 123);
	cr_expect_eq(ws.ws_row, 45);
	cr_assert_eq(pty_resize(m, 80, 24), 0);
	cr_assert_eq(ioctl(s, TIOCGWINSZ, &ws), 0);
	cr_expect_eq(ws.ws_col, 80);
	cr_expect_eq(ws.ws_row, 24);
	cr_expect_eq(pty_resize(m, 70000, 1), -EINVAL);
	close(s);
	close(m);
}

Test(pty, slave_output_reaches_the_master_with_crlf)
{
	char buf[64];
	ssize_t n = -1;
	int m, s;

	cr_assert_eq(pty_open(&m, &s, 0, 0), 0);
	cr_assert_eq(write(s, "hi\n", 3), 3);
	for (int i = 0; i < 100 && n < 0; i++) {
		n = read(m, buf, sizeof(buf));
		if (n < 0)
			usleep(1000);
	}
	cr_assert_eq(n, 4, "default termios maps NL to CR NL");
	cr_expect_eq(memcmp(buf, "hi\r\n", 4), 0);
	close(s);
	/* Every slave closed: the master reads EIO, which envd treats as EOF. */
	n = read(m, buf, sizeof(buf));
	cr_expect(n == 0 || (n < 0 && errno == EIO));
	close(m);
}
