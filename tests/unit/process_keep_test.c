/* SPDX-License-Identifier: Apache-2.0 */
/*
 * process_keep_test.c - keep.h, what a restart after a crash needs (see
 * docs/crash.md), played out whole in three processes:
 *
 *   the test        the service manager (it holds the fd store on its
 *                   notify socket) and then the next envd;
 *   a subreaper     our init: it adopts the orphaned command and writes its
 *                   exit into the exit ring (base/exitrec.h);
 *   the old envd    its child: keep_setup, one command started through
 *                   process.h, output read, then SIGKILL.
 *
 * What is kept: the keep file and the command's descriptors, under their
 * names. What is adopted back: the command, listed again with its tag and
 * config, its output from before the crash, its stdin working, and its
 * end (the exit code the subreaper saw); then the store holds only the
 * keep file.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/exitrec.h"
#include "base/sdnotify.h"
#include "process/keep.h"
#include "process/procenv.h"
#include "process/process.h"
#include "process/ring.h"
#include "wire.h"

static int notify = -1;            /* the manager's socket */
static struct sdnotify_store store;

static void setup(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char addr[64];

	snprintf(addr, sizeof(addr), "@envd-keep-test/%d", (int)getpid());
	memcpy(sa.sun_path + 1, addr + 1, strlen(addr) - 1);
	notify = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(notify, 0);
	cr_assert_eq(bind(notify, (struct sockaddr *)&sa, offsetof(struct sockaddr_un, sun_path) + strlen(addr)), 0);
	cr_assert_eq(setenv("NOTIFY_SOCKET", addr, 1), 0);
	sdnotify_store_init(&store, 4096);
	wire_setup(NULL);
}

static void teardown(void)
{
	sdnotify_store_free(&store);
	close(notify);
	wire_teardown();
}

TestSuite(keep, .init = setup, .fini = teardown);

/* What the manager does with the messages that have come: keep or drop. */
static void manager_drain(void)
{
	char buf[1024];
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int) * SDNOTIFY_FDS_MAX)];
	} cm;

	for (;;) {
		struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.b,
				     .msg_controllen = sizeof(cm.b) };
		struct sdnotify_msg m;
		ssize_t k = recvmsg(notify, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);

		if (k < 0)
			return;
		cr_assert_eq(sdnotify_parse(buf, (size_t)k, &m), 0);
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
			int n = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
			int fds[SDNOTIFY_FDS_MAX];

			memcpy(fds, CMSG_DATA(c), (size_t)n * sizeof(int));
			for (int i = 0; i < n; i++)
				cr_assert_geq(sdnotify_store_add(&store, fds[i], m.name), 0);
		}
		if (m.fdstore_remove)
			sdnotify_store_drop(&store, m.name);
	}
}

/* The names in the store, sorted, joined by spaces. */
static const char *stored(void)
{
	static char out[512];
	char *names[64];
	size_t n = 0, o = 0;

	for (size_t i = 0; i < store.n && n < 64; i++)
		names[n++] = store.e[i].name;
	for (size_t i = 1; i < n; i++)
		for (size_t j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
			char *t = names[j];
			names[j] = names[j - 1];
			names[j - 1] = t;
		}
	out[0] = '\0';
	for (size_t i = 0; i < n; i++)
		o += (size_t)snprintf(out + o, sizeof(out) - o, "%s%s", i ? " " : "", names[i]);
	return out;
}

/* ---- the old envd ---- */

static void find_output(void *ud, const struct process_snapshot *s)
{
	*(uint64_t *)ud = ring_end(s->ring);
}

static bool has_output(void *ud)
{
	uint64_t end = 0;

	process_snapshot_each(find_output, &end);
	return end >= 2;
}

/* Start the command, wait for its first line in the ring, tell the test
 * both pids, die. Never returns. */
static void old_envd(int tell)
{
	char *args[] = { "-c", "echo x; read a; echo after $a; exit 7" };
	Process__ProcessConfig c = PROCESS__PROCESS_CONFIG__INIT;
	struct process_spec s = { 0 };
	struct user u;
	char err[256], line[64];

	keep_setup(true);
	if (user_lookup("root", &u, NULL, 0) < 0)
		_exit(2);
	c.cmd = "/bin/sh";
	c.args = args;
	c.n_args = 2;
	s.config = &c;
	s.tag = "kept";
	s.stdin_pipe = true;
	s.user = &u;
	s.cwd = "/";
	s.envp = procenv_for(&u, NULL, 0);
	if (process_start(&s, NULL, err, sizeof(err)) != RPC_OK || !wire_until(NULL, has_output, NULL))
		_exit(3);
	snprintf(line, sizeof(line), "%u %d\n", process_pid(process_first()), (int)getpid());
	if (write(tell, line, strlen(line)) < 0)
		_exit(4);
	kill(getpid(), SIGKILL);
	_exit(5);
}

/* ---- init: the subreaper that records exits ---- */

static void subreaper(int tell, void *exits)
{
	struct rusage ru;
	pid_t pid;
	int st;

	prctl(PR_SET_CHILD_SUBREAPER, 1);
	pid = fork();
	if (pid == 0)
		old_envd(tell);
	close(tell);
	/* As init does: the record, stamped, before the reap (exitrec.h). */
	for (;;) {
		siginfo_t si = { 0 };
		if (syscall(SYS_waitid, P_ALL, 0, &si, WEXITED | WNOWAIT, &ru) < 0)
			break;
		pid = si.si_pid;
		st = si.si_code == CLD_EXITED ? (si.si_status & 0xff) << 8 : si.si_status & 0x7f;
		struct exitrec r = {
			.pid = pid,
			.status = st,
			.utime_us = ru.ru_utime.tv_sec * 1000000 + ru.ru_utime.tv_usec,
			.stime_us = ru.ru_stime.tv_sec * 1000000 + ru.ru_stime.tv_usec,
			.time_ns = exitrec_clock_ns(),
		};
		exitrec_put(exits, &r);
		waitpid(pid, NULL, 0);
	}
	_exit(0);
}

/* ---- the test: the manager, then the next envd ---- */

struct seen {
	uint32_t pid;
	bool found, finished, reaped, exited;
	int exit_code;
	char status[64];
	char out[256];
	char tag[32];
};

static void look(void *ud, const struct process_snapshot *s)
{
	struct seen *v = ud;
	enum ring_kind kind;
	uint64_t off = ring_start(s->ring);
	size_t o = 0;
	long n;

	if (s->pid != v->pid)
		return;
	v->found = true;
	v->finished = s->finished;
	v->reaped = s->reaped;
	v->exited = s->exited;
	v->exit_code = s->exit_code;
	snprintf(v->status, sizeof(v->status), "%s", s->status ? s->status : "");
	snprintf(v->tag, sizeof(v->tag), "%s", s->tag ? s->tag : "");
	while (o + 1 < sizeof(v->out) && (n = ring_read(s->ring, off, &kind, v->out + o, sizeof(v->out) - 1 - o)) > 0) {
		o += (size_t)n;
		off += (uint64_t)n;
	}
	v->out[o] = '\0';
}

static bool gone(void *ud)
{
	return kill((pid_t)(intptr_t)ud, 0) < 0 && errno == ESRCH;
}

static bool not_listed(void *ud)
{
	return process_find_pid((uint32_t)(uintptr_t)ud, false) == NULL;
}

Test(keep, what_is_kept_and_what_is_adopted_back)
{
	size_t exits_len = exitrec_size(64);
	int exits_fd = memfd_create("init.exits", MFD_CLOEXEC), tell[2];
	void *exits;
	pid_t init_pid;
	uint32_t pid;
	int old_pid;
	char line[64] = "", want[256], err[256];
	struct seen v = { 0 };

	cr_assert_geq(exits_fd, 0);
	cr_assert_eq(ftruncate(exits_fd, (off_t)exits_len), 0);
	exits = mmap(NULL, exits_len, PROT_READ | PROT_WRITE, MAP_SHARED, exits_fd, 0);
	cr_assert_neq(exits, MAP_FAILED);
	exitrec_init(exits, 64);
	cr_assert_eq(pipe2(tell, O_CLOEXEC), 0);
	init_pid = fork();
	cr_assert_geq(init_pid, 0);
	if (init_pid == 0) {
		close(tell[0]);
		subreaper(tell[1], exits);
	}
	close(tell[1]);
	/* The old envd's word that its command runs and printed, then its death. */
	cr_assert_gt(read(tell[0], line, sizeof(line) - 1), 0, "the old envd could not start its command");
	close(tell[0]);
	cr_assert_eq(sscanf(line, "%u %d", &pid, &old_pid), 2);
	cr_assert(wire_until(NULL, gone, (void *)(intptr_t)old_pid));

	/* What is kept: the keep file, stdout, stderr, stdin, a pidfd. */
	manager_drain();
	snprintf(want, sizeof(want), "p%u.e p%u.f p%u.i p%u.k p%u.o", pid, pid, pid, pid, pid);
	cr_assert_str_eq(stored(), want);

	/* The next envd gets them, the exit ring with them, as a manager hands
	 * them over (sdnotify_listen_fds). */
	struct sdnotify_fd handed[8];
	size_t n = 0;
	for (size_t i = 0; i < store.n; i++) {
		handed[n].fd = dup(store.e[i].fd);
		snprintf(handed[n].name, sizeof(handed[n].name), "%s", store.e[i].name);
		n++;
	}
	handed[n].fd = exits_fd;
	snprintf(handed[n].name, sizeof(handed[n].name), "%s", EXITREC_NAME);
	n++;
	keep_setup(true);
	cr_assert_eq(keep_adopt_all(handed, n), 1);
	for (size_t i = 0; i < n; i++)
		cr_expect_eq(handed[i].fd, -1, "%s is consumed", handed[i].name);

	/* Adopted back: listed, with its tag, config and output. */
	struct process *p = process_find_pid(pid, false);
	cr_assert_not_null(p);
	cr_expect_str_eq(process_tag(p), "kept");
	cr_expect_str_eq(process_config(p)->cmd, "/bin/sh");
	v.pid = pid;
	process_snapshot_each(look, &v);
	cr_assert(v.found);
	cr_expect_not(v.finished);
	cr_expect_not(v.reaped);
	cr_expect_str_eq(v.out, "x\n");

	/* Its stdin works; its end is learnt from the pidfd and the exit ring. */
	bool later;
	uint64_t taken;
	cr_assert_eq(process_write_input(p, NULL, false, false, (const uint8_t *)"go\n", 3, false, 0, &taken, &later, err, sizeof(err)),
		     RPC_OK, "%s", err);
	cr_assert(wire_until(NULL, not_listed, (void *)(uintptr_t)pid));
	memset(&v, 0, sizeof(v));
	v.pid = pid;
	process_snapshot_each(look, &v);
	cr_assert(v.found, "retained for a late Connect");
	cr_expect(v.finished);
	cr_expect(v.exited);
	cr_expect_eq(v.exit_code, 7);
	cr_expect_str_eq(v.status, "exit status 7");
	cr_expect_str_eq(v.out, "x\nafter go\n");
	cr_expect_str_eq(v.tag, "kept");

	/* Ended: its descriptors leave the store, the keep file stays. */
	manager_drain();
	snprintf(want, sizeof(want), "p%u.k", pid);
	cr_expect_str_eq(stored(), want);
	munmap(exits, exits_len);
}
