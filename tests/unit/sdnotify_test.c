/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/sdnotify.h"

Test(sdnotify, names)
{
	cr_assert(sdnotify_name_valid("p123.out"));
	cr_assert(sdnotify_name_valid("stored"));
	cr_assert_not(sdnotify_name_valid(""));
	cr_assert_not(sdnotify_name_valid("a:b"), "':' separates LISTEN_FDNAMES");
	cr_assert_not(sdnotify_name_valid("a\nb"));
	cr_assert_not(sdnotify_name_valid("caf\xc3\xa9"));
	char longn[300];
	memset(longn, 'x', sizeof(longn));
	longn[255] = '\0';
	cr_assert(sdnotify_name_valid(longn));
	longn[255] = 'x';
	longn[256] = '\0';
	cr_assert_not(sdnotify_name_valid(longn));
}

#define PARSE(s, m) sdnotify_parse((s), strlen(s), (m))

Test(sdnotify, parse)
{
	struct sdnotify_msg m;

	cr_assert_eq(PARSE("FDSTORE=1\nFDPOLL=0\nFDNAME=p1.out\n", &m), 0);
	cr_assert(m.fdstore);
	cr_assert(m.fdpoll_off);
	cr_assert_not(m.fdstore_remove);
	cr_assert(m.has_name);
	cr_assert_str_eq(m.name, "p1.out");

	cr_assert_eq(PARSE("FDSTORE=1", &m), 0, "no final newline");
	cr_assert(m.fdstore);
	cr_assert_not(m.has_name);
	cr_assert_str_eq(m.name, "stored", "the default name");

	cr_assert_eq(PARSE("READY=1\nSTATUS=x\nFDSTOREREMOVE=1\nFDNAME=a\n", &m), 0, "unknown lines ignored");
	cr_assert(m.fdstore_remove);
	cr_assert_not(m.fdstore);
	cr_assert_str_eq(m.name, "a");

	cr_assert_eq(PARSE("FDSTORE=1\nFDNAME=a:b\n", &m), -EINVAL);
	cr_assert_eq(PARSE("FDSTORE=1\nFDNAME=\n", &m), -EINVAL);
	cr_assert_eq(PARSE("FDSTORE=10\nFDSTORE=\n", &m), 0);
	cr_assert_not(m.fdstore, "only FDSTORE=1 itself");
	cr_assert_eq(sdnotify_parse("", 0, &m), 0);
}

static bool fd_open(int fd)
{
	return fcntl(fd, F_GETFD) >= 0;
}

Test(sdnotify, store)
{
	struct sdnotify_store s;
	int p[2], q[2];
	char names[64];

	sdnotify_store_init(&s, 3);
	cr_assert_eq(pipe(p), 0);
	cr_assert_eq(pipe(q), 0);
	int pdup = dup(p[0]);
	cr_assert_eq(sdnotify_store_add(&s, p[0], "p.out"), 0);
	cr_assert_eq(sdnotify_store_add(&s, p[1], "p.in"), 0, "the other end of a pipe is another file");
	cr_assert_eq(s.n, 2);
	cr_assert_eq(sdnotify_store_add(&s, pdup, "again"), 0);
	cr_assert_eq(s.n, 2, "a duplicate of a stored file is dropped");
	cr_assert_not(fd_open(pdup), "... and closed");
	cr_assert_eq(sdnotify_store_add(&s, q[0], "q"), 0);
	cr_assert_eq(sdnotify_store_add(&s, q[1], "q"), -EXFULL);
	cr_assert_not(fd_open(q[1]), "refused fds are closed");
	cr_assert_eq(sdnotify_store_names(&s, names, sizeof(names)), (long)strlen("p.out:p.in:q"));
	cr_assert_str_eq(names, "p.out:p.in:q");
	cr_assert_eq(sdnotify_store_names(&s, names, 5), -ENOSPC);
	cr_assert_eq(sdnotify_store_drop(&s, "p.in"), 1);
	cr_assert_not(fd_open(p[1]));
	cr_assert_eq(sdnotify_store_drop(&s, "nothing"), 0);
	cr_assert_eq(s.n, 2);
	cr_assert_eq(sdnotify_store_names(&s, names, sizeof(names)), 7);
	cr_assert_str_eq(names, "p.out:q");
	sdnotify_store_free(&s);
	cr_assert_not(fd_open(p[0]));
	cr_assert_not(fd_open(q[0]));
}

/* The processes whose pidfds are stored are the ones init records exits
 * of: a zombie still counts, a reaped one (or its number's next owner)
 * does not. */
Test(sdnotify, store_watches)
{
	struct sdnotify_store s;
	int p[2], st;

	sdnotify_store_init(&s, 8);
	cr_assert_eq(pipe(p), 0);
	cr_assert_eq(sdnotify_store_add(&s, p[0], "not.a.pidfd"), 0);
	cr_assert_eq(s.e[0].pid, 0);
	pid_t child = fork();
	cr_assert_geq(child, 0);
	if (child == 0) {
		char b;
		close(p[1]);
		(void)!read(p[0], &b, 1);
		_exit(3);
	}
	int pfd = (int)syscall(SYS_pidfd_open, child, 0);
	cr_assert_geq(pfd, 0);
	cr_assert_eq(sdnotify_store_add(&s, pfd, "child.f"), 0);
	cr_assert_eq(s.e[1].pid, child, "the pidfd's process, from its fdinfo");
	cr_assert(sdnotify_store_watches(&s, child));
	cr_assert_not(sdnotify_store_watches(&s, child + 1));
	cr_assert_not(sdnotify_store_watches(&s, 0));
	close(p[1]); /* the child reads EOF and exits */
	siginfo_t si;
	cr_assert_eq(waitid(P_PID, (id_t)child, &si, WEXITED | WNOWAIT), 0);
	cr_assert(sdnotify_store_watches(&s, child), "a zombie is still the process");
	cr_assert_eq(waitpid(child, &st, 0), child);
	cr_assert_not(sdnotify_store_watches(&s, child), "reaped: its number may be someone else's");
	sdnotify_store_free(&s);
}

/* A store message goes out as one datagram with the fds attached. */
Test(sdnotify, send)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char addr[64], buf[512];
	int srv, p[2], got[4];

	cr_assert_eq(sdnotify_send("x", NULL, 0), -ENOENT, "no NOTIFY_SOCKET");
	cr_assert_not(sdnotify_available());
	snprintf(addr, sizeof(addr), "@sdnotify-test/%d", (int)getpid());
	memcpy(sa.sun_path + 1, addr + 1, strlen(addr) - 1);
	srv = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	cr_assert_eq(bind(srv, (struct sockaddr *)&sa, offsetof(struct sockaddr_un, sun_path) + strlen(addr)), 0);
	setenv("NOTIFY_SOCKET", addr, 1);
	cr_assert(sdnotify_available());
	cr_assert_eq(pipe(p), 0);
	cr_assert_eq(sdnotify_store("p7.out", p, 2), 0);
	cr_assert_eq(sdnotify_store("bad:name", p, 1), -EINVAL);

	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int) * 4)];
	} cm;
	struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.b, .msg_controllen = sizeof(cm.b) };
	ssize_t k = recvmsg(srv, &mh, MSG_CMSG_CLOEXEC);
	cr_assert_gt(k, 0);
	struct sdnotify_msg m;
	cr_assert_eq(sdnotify_parse(buf, (size_t)k, &m), 0);
	cr_assert(m.fdstore && m.fdpoll_off);
	cr_assert_str_eq(m.name, "p7.out");
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	cr_assert(c && c->cmsg_type == SCM_RIGHTS);
	cr_assert_eq((c->cmsg_len - CMSG_LEN(0)) / sizeof(int), 2);
	memcpy(got, CMSG_DATA(c), 2 * sizeof(int));
	/* the received write end feeds the original read end */
	cr_assert_eq(write(got[1], "hi", 2), 2);
	cr_assert_eq(read(p[0], buf, 2), 2);
	cr_assert_eq(memcmp(buf, "hi", 2), 0);

	cr_assert_eq(sdnotify_store_remove("p7.out"), 0);
	k = recv(srv, buf, sizeof(buf), 0);
	cr_assert_eq(sdnotify_parse(buf, (size_t)k, &m), 0);
	cr_assert(m.fdstore_remove && !m.fdstore);
	cr_assert_str_eq(m.name, "p7.out");

	setenv("NOTIFY_SOCKET", "relative", 1);
	cr_assert_eq(sdnotify_send("x", NULL, 0), -EINVAL);
	unsetenv("NOTIFY_SOCKET");
	close(got[0]);
	close(got[1]);
	close(p[0]);
	close(p[1]);
	close(srv);
}

/* A manager whose queue is full: the send does not block; messages wait,
 * in order and with their fds, and go out once the manager reads. */
static int queued_fd = -1, queued_calls;
static void on_queued(int fd)
{
	queued_fd = fd;
	queued_calls++;
}

Test(sdnotify, queue_when_full)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char addr[64], buf[512], text[64];
	int srv, p[2];

	snprintf(addr, sizeof(addr), "@sdnotify-queue/%d", (int)getpid());
	memcpy(sa.sun_path + 1, addr + 1, strlen(addr) - 1);
	srv = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	cr_assert_eq(bind(srv, (struct sockaddr *)&sa, offsetof(struct sockaddr_un, sun_path) + strlen(addr)), 0);
	setenv("NOTIFY_SOCKET", addr, 1);
	sdnotify_on_queued = on_queued;
	cr_assert_eq(pipe(p), 0);
	/* nobody reads: the kernel's queue fills, then ours */
	int sent = 0;
	for (; sdnotify_queued() == 0 && sent < 100000; sent++) {
		snprintf(text, sizeof(text), "FDNAME=m%d\n", sent);
		cr_assert_eq(sdnotify_send(text, NULL, 0), 0);
	}
	cr_assert_eq(sdnotify_queued(), 1, "the message that found the queue full waits");
	cr_assert_eq(queued_calls, 1);
	cr_assert_geq(queued_fd, 0);
	/* later ones queue behind it even if the manager has room meanwhile */
	cr_assert_eq(sdnotify_send("FDSTORE=1\nFDNAME=withfd\n", &p[1], 1), 0);
	close(p[1]); /* ours: the queued copy keeps the pipe's write end */
	cr_assert_eq(sdnotify_queued(), 2);
	cr_assert_eq(queued_calls, 1, "told once per episode");
	cr_assert_eq(sdnotify_flush(), -EAGAIN, "still full");

	/* the manager reads everything; flush delivers the rest in order */
	for (int i = 0; i < sent; i++) {
		if (i == sent - 1)
			cr_assert_eq(sdnotify_flush(), 0, "room again: all sent");
		ssize_t k = recv(srv, buf, sizeof(buf) - 1, MSG_DONTWAIT);
		cr_assert_gt(k, 0);
		buf[k] = '\0';
		snprintf(text, sizeof(text), "FDNAME=m%d\n", i);
		cr_assert_str_eq(buf, text, "message %d in order", i);
	}
	cr_assert_eq(sdnotify_queued(), 0);
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} cm;
	struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) - 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.b, .msg_controllen = sizeof(cm.b) };
	ssize_t k = recvmsg(srv, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	cr_assert_gt(k, 0);
	buf[k] = '\0';
	cr_assert_str_eq(buf, "FDSTORE=1\nFDNAME=withfd\n");
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	cr_assert(c && c->cmsg_type == SCM_RIGHTS);
	int got;
	memcpy(&got, CMSG_DATA(c), sizeof(int));
	cr_assert_eq(write(got, "q", 1), 1, "the fd sent is the pipe's write end");
	cr_assert_eq(read(p[0], buf, 1), 1);
	close(got);
	/* only the sent copy held the write end: EOF now */
	cr_assert_eq(read(p[0], buf, 1), 0);

	sdnotify_on_queued = NULL;
	unsetenv("NOTIFY_SOCKET");
	close(p[0]);
	close(srv);
}

/* LISTEN_FDS from fd 3 on, for our pid only; fd 3 and up belong to the
 * test runner here, so the check runs in a child. */
Test(sdnotify, listen_fds)
{
	pid_t pid = fork();

	cr_assert_geq(pid, 0);
	if (pid == 0) {
		int p[2];
		struct sdnotify_fd f[4];
		char v[32];
		if (pipe(p) < 0 || dup2(p[0], 3) < 0 || dup2(p[1], 4) < 0 || dup2(p[1], 5) < 0)
			_exit(10);
		setenv("LISTEN_PID", "1", 1); /* not us */
		setenv("LISTEN_FDS", "2", 1);
		if (sdnotify_listen_fds(f, 4) != 0 || getenv("LISTEN_FDS"))
			_exit(11);
		snprintf(v, sizeof(v), "%d", (int)getpid());
		setenv("LISTEN_PID", v, 1);
		setenv("LISTEN_FDS", "3", 1);
		setenv("LISTEN_FDNAMES", "p.out:p.in", 1); /* one name short */
		size_t n = sdnotify_listen_fds(f, 4);
		if (n != 3 || f[0].fd != 3 || f[1].fd != 4 || f[2].fd != 5)
			_exit(12);
		if (strcmp(f[0].name, "p.out") || strcmp(f[1].name, "p.in") || strcmp(f[2].name, "unknown"))
			_exit(13);
		if (!(fcntl(3, F_GETFD) & FD_CLOEXEC) || getenv("LISTEN_PID") || getenv("LISTEN_FDNAMES"))
			_exit(14);
		/* more fds than room: the rest are closed */
		setenv("LISTEN_PID", v, 1);
		setenv("LISTEN_FDS", "3", 1);
		if (sdnotify_listen_fds(f, 1) != 1 || fcntl(4, F_GETFD) >= 0 || fcntl(5, F_GETFD) >= 0)
			_exit(15);
		_exit(0);
	}
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st));
	cr_assert_eq(WEXITSTATUS(st), 0, "child check %d failed", WEXITSTATUS(st));
}
