/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "process/spawn.h"
#include "base/errstr.h"

#include <errno.h>
#include <stdint.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
#define IOPRIO_WHO_PROCESS 1
#define IOPRIO_CLASS_BE 2
#define IOPRIO_PRIO_VALUE(cls, data) (((cls) << 13) | (data))

static struct rlimit orig_nofile;

/* Before main() can raise the limit for the daemon itself. */
__attribute__((constructor)) static void save_nofile(void)
{
	if (getrlimit(RLIMIT_NOFILE, &orig_nofile) < 0)
		orig_nofile.rlim_cur = orig_nofile.rlim_max = RLIM_INFINITY;
}

void spawn_original_nofile(unsigned long *cur, unsigned long *max)
{
	*cur = (unsigned long)orig_nofile.rlim_cur;
	*max = (unsigned long)orig_nofile.rlim_max;
}

enum stage {
	ST_CGROUP = 1,
	ST_MNTNS,
	ST_SESSION,
	ST_DUP,
	ST_GROUPS,
	ST_GID,
	ST_UID,
	ST_CHDIR,
};

struct report {
	int err;
	int stage;
};

struct child_ctx {
	const struct spawn_req *rq;
	int status_fd;
	char **sh_argv;          /* "sh", <slot for the script path>, args... */
	const char *path;        /* PATH of the child environment */
	bool in_cgroup;          /* created inside the cgroup (clone3): no join */
	uint64_t ignored;        /* bit s-1: signal s is SIG_IGN in envd */
};

/*
 * Signals envd ignores, found once. exec() resets every caught signal to
 * its default by itself; only ignored ones would survive into the child,
 * so only those need a sigaction call there (one or two instead of 62 per
 * spawn). envd sets its dispositions at start-up, before any spawn.
 */
static uint64_t ignored_signals(void)
{
	static bool known;
	static uint64_t mask;

	if (!known) {
		for (int sig = 1; sig < 65; sig++) {
			/* The raw call: libc's sigaction refuses the signals it
			 * keeps for itself (32-34), which can still be ignored. */
			unsigned long ksa[4] = { 0 };
			if (sig != SIGKILL && sig != SIGSTOP &&
			    syscall(SYS_rt_sigaction, sig, NULL, ksa, 8) == 0 &&
			    ksa[0] == (unsigned long)SIG_IGN)
				mask |= 1ull << (sig - 1);
		}
		known = true;
	}
	return mask;
}

/*
 * The child shares our memory until it execs (CLONE_VM|CLONE_VFORK), so it
 * must not allocate or take libc locks, and uses raw syscalls for the id
 * changes: the libc wrappers would broadcast them to the parent's threads.
 * Spawns may run on several worker threads at once: each has a stack of
 * its own for its child.
 */
#define CHILD_STACK_SIZE (64 * 1024)

/* Sanitizer bookkeeping would run on the borrowed stack and misreport it. */
#if defined(__has_attribute)
#if __has_attribute(no_sanitize)
#define CHILD_CODE __attribute__((no_sanitize("address", "undefined")))
#endif
#endif
#ifndef CHILD_CODE
#define CHILD_CODE
#endif

CHILD_CODE static void fail(struct child_ctx *c, int stage, int err)
{
	struct report rep = { err, stage };

	(void)!write(c->status_fd, &rep, sizeof(rep));
	_exit(127);
}

CHILD_CODE static size_t cat(char *buf, size_t pos, size_t len, const char *s)
{
	while (*s && pos + 1 < len)
		buf[pos++] = *s++;
	buf[pos] = '\0';
	return pos;
}

/* execve, running a file without a #! line through /bin/sh like execvp. */
CHILD_CODE static int try_exec(struct child_ctx *c, const char *path)
{
	execve(path, c->rq->argv, c->rq->envp);
	if (errno == ENOEXEC) {
		c->sh_argv[1] = (char *)path;
		execve("/bin/sh", c->sh_argv, c->rq->envp);
		errno = ENOEXEC;
	}
	return errno;
}

CHILD_CODE static void exec_cmd(struct child_ctx *c)
{
	const char *file = c->rq->file;
	char buf[4096], msg[1024];
	int err = ENOENT;
	bool seen_eacces = false;
	size_t fl = strlen(file), n;

	if (fl == 0) {
		err = ENOENT;
	} else if (strchr(file, '/')) {
		err = try_exec(c, file);
	} else {
		const char *p = c->path ? c->path : "/usr/local/bin:/usr/bin:/bin";

		for (;;) {
			const char *e = strchrnul(p, ':');
			size_t dl = (size_t)(e - p);

			if (dl + fl + 2 <= sizeof(buf)) {
				/* An empty PATH element means the current directory. */
				if (dl) {
					memcpy(buf, p, dl);
					buf[dl] = '/';
					memcpy(buf + dl + 1, file, fl + 1);
				} else {
					memcpy(buf, file, fl + 1);
				}
				err = try_exec(c, buf);
				if (err == EACCES)
					seen_eacces = true;
				else if (err != ENOENT && err != ENOTDIR && err != ESTALE &&
					 err != ENODEV && err != ETIMEDOUT)
					break;
			}
			if (!*e)
				break;
			p = e + 1;
		}
		if (seen_eacces && (err == ENOENT || err == ENOTDIR))
			err = EACCES;
	}
	/* Same words and codes as `sh -c 'exec "$@"'` in the reference. */
	n = cat(msg, 0, sizeof(msg), "/bin/sh: 1: exec: ");
	n = cat(msg, n, sizeof(msg), file);
	if (err == ENOENT || err == ENOTDIR)
		n = cat(msg, n, sizeof(msg), ": not found\n");
	else if (err == EACCES)
		n = cat(msg, n, sizeof(msg), ": Permission denied\n");
	else {
		n = cat(msg, n, sizeof(msg), ": ");
		n = cat(msg, n, sizeof(msg), go_strerror(err));
		n = cat(msg, n, sizeof(msg), "\n");
	}
	(void)!write(2, msg, n);
	_exit(err == ENOENT || err == ENOTDIR ? 127 : 126);
}

CHILD_CODE static int child_main(void *arg)
{
	struct child_ctx *c = arg;
	const struct spawn_req *rq = c->rq;
	/* All-zero kernel sigaction = SIG_DFL, whatever the arch's layout. */
	unsigned long ksa[4] = { 0 }, none = 0;
	int fd;

	/*
	 * Dispositions first (those envd ignores: see ignored_signals), while
	 * every signal is still blocked. Raw syscalls: libc wrappers may take
	 * locks (musl's sigaction) or run synccalls across the parent's
	 * threads (musl's setrlimit).
	 */
	for (int sig = 1; sig < 65; sig++)
		if (c->ignored & (1ull << (sig - 1)))
			syscall(SYS_rt_sigaction, sig, ksa, NULL, 8);

	/* First, while still root: the command's whole life is in its cgroup. */
	if (rq->join_cgroup && !c->in_cgroup && write(rq->cgroup_procs_fd, "0", 1) != 1)
		fail(c, ST_CGROUP, errno);
	/* Not sharing the parent's fs_struct (no CLONE_FS), the child may
	 * switch mount namespaces; root and cwd become the namespace's, and
	 * envd's own root again where it is chrooted. */
	if (rq->join_mntns && syscall(SYS_setns, rq->mntns_fd, CLONE_NEWNS) < 0)
		fail(c, ST_MNTNS, errno);
	if (rq->join_mntns && rq->mntns_root_fd >= 0 &&
	    (syscall(SYS_fchdir, rq->mntns_root_fd) < 0 || syscall(SYS_chroot, ".") < 0))
		fail(c, ST_MNTNS, errno);

	if (rq->pty) {
		if (setsid() < 0 || ioctl(rq->fd_in, TIOCSCTTY, 0) < 0)
			fail(c, ST_SESSION, errno);
	} else if (setpgid(0, 0) < 0) {
		fail(c, ST_SESSION, errno);
	}
	/* spawn_start guarantees the sources are all >= 3. */
	if (dup2(rq->fd_in, 0) < 0 || dup2(rq->fd_out, 1) < 0 || dup2(rq->fd_err, 2) < 0)
		fail(c, ST_DUP, errno);

	fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		(void)!write(fd, "100", 3);
		close(fd);
	}
	/* envd may run at nice -20 and realtime I/O; the workload must not. */
	setpriority(PRIO_PROCESS, 0, 0);
	syscall(SYS_ioprio_set, IOPRIO_WHO_PROCESS, 0, IOPRIO_PRIO_VALUE(IOPRIO_CLASS_BE, 4));
	syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, &orig_nofile, NULL);

	if (rq->set_ids) {
		if (syscall(SYS_setgroups, (size_t)rq->n_groups, rq->groups) < 0)
			fail(c, ST_GROUPS, errno);
		if (syscall(SYS_setgid, rq->gid) < 0)
			fail(c, ST_GID, errno);
		if (syscall(SYS_setuid, rq->uid) < 0)
			fail(c, ST_UID, errno);
	}
	if (chdir(rq->cwd) < 0)
		fail(c, ST_CHDIR, errno);

	/* Only 0-2 survive exec; the status pipe closes on success. */
	if (syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) < 0) {
		for (int i = 3; i < 65536; i++)
			if (i != c->status_fd)
				fcntl(i, F_SETFD, FD_CLOEXEC);
	}
	syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, NULL, 8);
	exec_cmd(c);
	return 127;
}

/*
 * clone3(CLONE_VM | CLONE_VFORK | CLONE_INTO_CGROUP): the child is born in
 * its cgroup, which spares the join's cgroup migration (a write lock that
 * waits for an RCU grace period, about 150 us). libc has no clone3
 * wrapper that runs a function on a new stack, so this is the few
 * instructions such a wrapper is: the child calls fn(arg) on the stack the
 * kernel switched it to and exits with its result; the parent gets the pid
 * or -errno. Other architectures use clone() and the join.
 */
#if defined(__x86_64__) || defined(__aarch64__)
#define HAVE_CLONE3 1
struct clone3_args {
	uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, set_tid,
		set_tid_size, cgroup;
};

#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL
#endif

static long clone3_run(struct clone3_args *ca, int (*fn)(void *), void *arg)
{
#if defined(__x86_64__)
	register long rax __asm__("rax") = SYS_clone3;
	register void *rdi __asm__("rdi") = ca;
	register long rsi __asm__("rsi") = (long)sizeof(*ca);
	register void *r12 __asm__("r12") = (void *)fn;
	register void *r13 __asm__("r13") = arg;

	__asm__ volatile("syscall\n\t"
			 "test %%rax, %%rax\n\t"
			 "jnz 1f\n\t"
			 "xor %%ebp, %%ebp\n\t"
			 "mov %%r13, %%rdi\n\t"
			 "call *%%r12\n\t"
			 "mov %%eax, %%edi\n\t"
			 "mov $60, %%eax\n\t" /* exit */
			 "syscall\n\t"
			 "hlt\n\t"
			 "1:\n\t"
			 : "+r"(rax)
			 : "r"(rdi), "r"(rsi), "r"(r12), "r"(r13)
			 : "rcx", "r11", "memory", "cc");
	return rax;
#else
	register long x8 __asm__("x8") = SYS_clone3;
	register long x0 __asm__("x0") = (long)ca;
	register long x1 __asm__("x1") = (long)sizeof(*ca);
	register void *x19 __asm__("x19") = (void *)fn;
	register void *x20 __asm__("x20") = arg;

	__asm__ volatile("svc #0\n\t"
			 "cbnz x0, 1f\n\t"
			 "mov x29, xzr\n\t"
			 "mov x0, x20\n\t"
			 "blr x19\n\t"
			 "mov x8, #93\n\t" /* exit */
			 "svc #0\n\t"
			 "1:\n\t"
			 : "+r"(x0)
			 : "r"(x8), "r"(x1), "r"(x19), "r"(x20)
			 : "memory", "cc");
	return x0;
#endif
}

/* Cleared once the kernel shows it lacks clone3 or CLONE_INTO_CGROUP. */
static bool clone3_ok = true;
#endif

static const char *stage_name(int stage)
{
	return stage == ST_CHDIR ? "chdir" : "fork/exec";
}

/* Move fds 0-2 out of the way so the child's dup2 sequence cannot clobber. */
static int high_fd(int fd, int *tmp)
{
	if (fd >= 3)
		return fd;
	*tmp = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	return *tmp;
}

pid_t spawn_start(const struct spawn_req *rq, char *err, size_t errlen)
{
	struct spawn_req r = *rq;
	struct child_ctx c = { .rq = &r };
	int sp[2] = { -1, -1 }, tmp[3] = { -1, -1, -1 };
	sigset_t all, old;
	struct report rep;
	pid_t pid, early = 0, *ptid = r.pid_early ? r.pid_early : &early;
	char *child_stack;
	ssize_t n;
	int rc;

	c.sh_argv = calloc(r.argc + 2, sizeof(char *));
	child_stack = aligned_alloc(16, CHILD_STACK_SIZE);
	if (!c.sh_argv || !child_stack) {
		free(c.sh_argv);
		free(child_stack);
		snprintf(err, errlen, "fork/exec %s: %s", r.file, go_strerror(ENOMEM));
		return -ENOMEM;
	}
	c.sh_argv[0] = "sh";
	for (size_t i = 1; i < r.argc; i++)
		c.sh_argv[i + 1] = r.argv[i];
	for (char **e = r.envp; e && *e; e++)
		if (strncmp(*e, "PATH=", 5) == 0)
			c.path = *e + 5;

	r.fd_in = high_fd(r.fd_in, &tmp[0]);
	r.fd_out = high_fd(r.fd_out, &tmp[1]);
	r.fd_err = high_fd(r.fd_err, &tmp[2]);
	if (r.fd_in < 0 || r.fd_out < 0 || r.fd_err < 0 || pipe2(sp, O_CLOEXEC) < 0) {
		rc = -errno;
		snprintf(err, errlen, "fork/exec %s: %s", r.file, go_strerror(errno));
		goto out;
	}
	c.status_fd = sp[1];
	c.ignored = ignored_signals();

	/* No handler of ours may run on the child's borrowed stack. */
	sigfillset(&all);
	sigprocmask(SIG_SETMASK, &all, &old);
	pid = -1;
	rc = -ENOSYS;
#ifdef HAVE_CLONE3
	if (r.join_cgroup && r.cgroup_dir_fd >= 0 && clone3_ok) {
		struct clone3_args ca = {
			.flags = CLONE_VM | CLONE_VFORK | CLONE_INTO_CGROUP | CLONE_PARENT_SETTID,
			.parent_tid = (uint64_t)(uintptr_t)ptid,
			.exit_signal = SIGCHLD,
			.stack = (uint64_t)(uintptr_t)child_stack,
			.stack_size = CHILD_STACK_SIZE,
			.cgroup = (uint64_t)r.cgroup_dir_fd,
		};
		long v;

		c.in_cgroup = true;
		v = clone3_run(&ca, child_main, &c);
		pid = v < 0 ? -1 : (pid_t)v;
		rc = v < 0 ? (int)v : 0;
		/* Old kernel: clone() and the join from now on. */
		if (rc == -ENOSYS || rc == -E2BIG || rc == -EINVAL)
			clone3_ok = false;
	}
#endif
	if (pid < 0) {
		c.in_cgroup = false;
		pid = clone(child_main, child_stack + CHILD_STACK_SIZE,
			    CLONE_VM | CLONE_VFORK | CLONE_PARENT_SETTID | SIGCHLD, &c, ptid);
		rc = pid < 0 ? -errno : 0;
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	close(sp[1]);
	if (rc < 0) {
		snprintf(err, errlen, "fork/exec %s: %s", r.file, go_strerror(-rc));
		goto out;
	}
	/* The child has exec'd or exited by now (CLONE_VFORK): this cannot block. */
	do
		n = read(sp[0], &rep, sizeof(rep));
	while (n < 0 && errno == EINTR);
	if (n == (ssize_t)sizeof(rep)) {
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		if (rep.stage == ST_CHDIR)
			snprintf(err, errlen, "chdir %s: %s", r.cwd, go_strerror(rep.err));
		else if (rep.stage == ST_MNTNS)
			snprintf(err, errlen, "fork/exec %s: joining the try's mount namespace: %s", r.file,
				 go_strerror(rep.err));
		else
			snprintf(err, errlen, "%s %s: %s", stage_name(rep.stage), r.file,
				 go_strerror(rep.err));
		rc = -rep.err;
		goto out;
	}
	rc = pid;
out:
	if (sp[0] >= 0)
		close(sp[0]);
	for (int i = 0; i < 3; i++)
		if (tmp[i] >= 0)
			close(tmp[i]);
	free(c.sh_argv);
	free(child_stack);
	return rc;
}
