/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "process/spawn.h"

struct run {
	pid_t pid;
	int status;
	char out[4096];
	char err[4096];
	char msg[512];
};

static void slurp(int fd, char *buf, size_t len)
{
	size_t n = 0;
	ssize_t r;

	while (n + 1 < len && (r = read(fd, buf + n, len - 1 - n)) > 0)
		n += (size_t)r;
	buf[n] = '\0';
}

/* Run argv through spawn_start with stdout/stderr pipes and wait for it. */
static void run(struct run *r, char **argv, const char *cwd, char **envp)
{
	int o[2], e[2], in;
	struct spawn_req rq = { 0 };
	size_t argc = 0;

	while (argv[argc])
		argc++;
	cr_assert_eq(pipe2(o, O_CLOEXEC), 0);
	cr_assert_eq(pipe2(e, O_CLOEXEC), 0);
	in = open("/dev/null", O_RDONLY | O_CLOEXEC);
	rq.file = argv[0];
	rq.argv = argv;
	rq.argc = argc;
	rq.envp = envp;
	rq.cwd = cwd;
	rq.fd_in = in;
	rq.fd_out = o[1];
	rq.fd_err = e[1];
	memset(r, 0, sizeof(*r));
	r->pid = spawn_start(&rq, r->msg, sizeof(r->msg));
	close(in);
	close(o[1]);
	close(e[1]);
	if (r->pid > 0) {
		slurp(o[0], r->out, sizeof(r->out));
		slurp(e[0], r->err, sizeof(r->err));
		cr_assert_eq(waitpid(r->pid, &r->status, 0), r->pid);
	}
	close(o[0]);
	close(e[0]);
}

static char *env_path[] = { "PATH=/usr/local/bin:/usr/bin:/bin", NULL };

Test(spawn, runs_a_command_found_on_path)
{
	struct run r;
	char *argv[] = { "echo", "hello", NULL };

	run(&r, argv, "/", env_path);
	cr_assert_gt(r.pid, 0, "%s", r.msg);
	cr_expect(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0);
	cr_expect_str_eq(r.out, "hello\n");
}

Test(spawn, missing_command_is_exit_127_with_message)
{
	struct run r;
	char *argv[] = { "no-such-command-xyz", NULL };

	run(&r, argv, "/", env_path);
	cr_assert_gt(r.pid, 0, "not an RPC error: %s", r.msg);
	cr_expect(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 127);
	cr_expect_str_eq(r.err, "/bin/sh: 1: exec: no-such-command-xyz: not found\n");
}

Test(spawn, missing_absolute_path_is_exit_127)
{
	struct run r;
	char *argv[] = { "/nonexistent/bin", NULL };

	run(&r, argv, "/", env_path);
	cr_assert_gt(r.pid, 0);
	cr_expect(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 127);
	cr_expect_str_eq(r.err, "/bin/sh: 1: exec: /nonexistent/bin: not found\n");
}

Test(spawn, bad_cwd_is_reported_by_the_status_pipe)
{
	struct run r;
	char *argv[] = { "true", NULL };

	run(&r, argv, "/etc/passwd", env_path);
	cr_expect_eq(r.pid, -ENOTDIR);
	cr_expect_str_eq(r.msg, "chdir /etc/passwd: not a directory");
	/* The failed child was reaped by spawn_start. */
	cr_expect_eq(waitpid(-1, NULL, WNOHANG), -1);
}

Test(spawn, script_without_shebang_runs_through_sh)
{
	struct run r;
	char path[] = "/tmp/spawn-test-XXXXXX";
	int fd = mkstemp(path);
	char *argv[] = { path, "arg1", NULL };

	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, "echo script:$1\n", 15), 15);
	close(fd);
	chmod(path, 0755);
	run(&r, argv, "/", env_path);
	unlink(path);
	cr_assert_gt(r.pid, 0);
	cr_expect(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0);
	cr_expect_str_eq(r.out, "script:arg1\n");
}

/* Own group, oom_score_adj 100, nice 0, empty mask, only fds 0-2, env as given. */
Test(spawn, child_hygiene)
{
	struct run r;
	char *argv[] = { "/bin/sh", "-c",
			 "echo pg=$(($(cut -d' ' -f5 /proc/self/stat) == $$)) "
			 "oom=$(cat /proc/self/oom_score_adj) "
			 "fds=$(ls /proc/self/fd | wc -l) "
			 "sigblk=$(grep SigBlk /proc/self/status | cut -f2) "
			 "sigign=$(grep SigIgn /proc/self/status | cut -f2) "
			 "foo=$FOO pwd=$(pwd)",
			 NULL };
	char *envp[] = { "PATH=/usr/bin:/bin", "FOO=bar", NULL };
	int dummy = open("/dev/null", O_RDONLY); /* not close-on-exec: must not leak */

	signal(SIGUSR1, SIG_IGN);
	run(&r, argv, "/tmp", envp);
	close(dummy);
	cr_assert_gt(r.pid, 0, "%s", r.msg);
	cr_expect(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "%s", r.err);
	/* `ls` of a subshell sees 0-2 plus its own directory fd. */
	cr_expect_str_eq(r.out,
			 "pg=1 oom=100 fds=4 sigblk=0000000000000000 "
			 "sigign=0000000000000000 foo=bar pwd=/tmp\n",
			 "got: %s", r.out);
}

/* The daemon may raise its own RLIMIT_NOFILE; children get the original. */
Test(spawn, child_gets_the_original_nofile_limit)
{
	struct run r;
	struct rlimit now;
	unsigned long cur, max;
	char want[64];
	char *argv[] = { "/bin/sh", "-c", "ulimit -Sn", NULL };

	spawn_original_nofile(&cur, &max);
	cr_assert_eq(getrlimit(RLIMIT_NOFILE, &now), 0);
	now.rlim_cur = cur > 64 ? cur - 1 : cur + 1;
	if (now.rlim_cur > now.rlim_max)
		now.rlim_cur = now.rlim_max;
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &now), 0);
	run(&r, argv, "/", env_path);
	cr_assert_gt(r.pid, 0);
	snprintf(want, sizeof(want), "%lu\n", cur);
	cr_expect_str_eq(r.out, want);
}

/* envd runs niced (-20 in production); its children start at nice 0. */
Test(spawn, child_nice_is_reset_to_zero)
{
	struct run r;
	char *argv[] = { "/bin/sh", "-c", "cut -d' ' -f19 /proc/self/stat", NULL };

	cr_assert_eq(setpriority(PRIO_PROCESS, 0, 5), 0);
	run(&r, argv, "/", env_path);
	cr_assert_gt(r.pid, 0);
	if (geteuid() == 0)
		cr_expect_str_eq(r.out, "0\n", "nice of the child");
	else
		cr_expect_str_eq(r.out, "5\n", "without privilege nice cannot go down");
}

/*
 * The join: the child writes "0" to the cgroup.procs fd before anything
 * else. A regular file stands in for cgroup.procs here (no cgroup2 needed),
 * which also takes the clone() path: clone3 needs a cgroup directory.
 */
static void run_joined(struct run *r, char **argv, int procs_fd, int dir_fd)
{
	int o[2], e[2], in;
	struct spawn_req rq = { 0 };

	cr_assert_eq(pipe2(o, O_CLOEXEC), 0);
	cr_assert_eq(pipe2(e, O_CLOEXEC), 0);
	in = open("/dev/null", O_RDONLY | O_CLOEXEC);
	rq.file = argv[0];
	rq.argv = argv;
	rq.argc = 1;
	rq.envp = env_path;
	rq.cwd = "/";
	rq.fd_in = in;
	rq.fd_out = o[1];
	rq.fd_err = e[1];
	rq.join_cgroup = true;
	rq.cgroup_procs_fd = procs_fd;
	rq.cgroup_dir_fd = dir_fd;
	memset(r, 0, sizeof(*r));
	r->pid = spawn_start(&rq, r->msg, sizeof(r->msg));
	close(in);
	close(o[1]);
	close(e[1]);
	if (r->pid > 0) {
		slurp(o[0], r->out, sizeof(r->out));
		cr_assert_eq(waitpid(r->pid, &r->status, 0), r->pid);
	}
	close(o[0]);
	close(e[0]);
}

Test(spawn, joins_its_cgroup_before_exec)
{
	char path[] = "/tmp/spawn-procs-XXXXXX", buf[8] = "";
	char *argv[] = { "true", NULL };
	struct run r;
	int fd = mkstemp(path);

	cr_assert_geq(fd, 0);
	run_joined(&r, argv, fd, -1);
	cr_assert_gt(r.pid, 0, "%s", r.msg);
	cr_expect(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0);
	cr_expect_eq(pread(fd, buf, sizeof(buf) - 1, 0), 1);
	cr_expect_str_eq(buf, "0", "the child wrote 0 (itself) to cgroup.procs");
	close(fd);
	unlink(path);
}

Test(spawn, a_failed_join_fails_the_start)
{
	char *argv[] = { "true", NULL };
	struct run r;
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC); /* not writable */

	run_joined(&r, argv, fd, -1);
	cr_expect_lt(r.pid, 0, "nothing runs outside its cgroup");
	cr_expect(strstr(r.msg, "fork/exec true") != NULL, "%s", r.msg);
	close(fd);
}

Test(spawn, a_directory_that_is_not_a_cgroup_falls_back_to_the_join)
{
	char path[] = "/tmp/spawn-procs-XXXXXX", buf[8] = "";
	char *argv[] = { "true", NULL };
	struct run r;
	int fd = mkstemp(path), dir = open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	cr_assert_geq(fd, 0);
	run_joined(&r, argv, fd, dir);
	cr_assert_gt(r.pid, 0, "%s", r.msg);
	cr_expect(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0);
	cr_expect_eq(pread(fd, buf, sizeof(buf) - 1, 0), 1, "clone3 refused the fd; clone() joined");
	close(dir);
	close(fd);
	unlink(path);
}

static int exit_at_once(void *arg)
{
	_exit(0);
}

/*
 * Whether clone(CLONE_PARENT_SETTID) stores the child's pid where the
 * parent sees it. The kernel does; qemu-user runs CLONE_VM|CLONE_VFORK as
 * a fork and stores it in the child's copy of memory, so there pid_early
 * stays 0 and cannot be checked.
 */
static bool parent_settid_is_seen(void)
{
	static char stack[16384] __attribute__((aligned(16)));
	pid_t tid = 0, pid;

	pid = clone(exit_at_once, stack + sizeof(stack), CLONE_VM | CLONE_VFORK | CLONE_PARENT_SETTID | SIGCHLD,
		    NULL, &tid);
	cr_assert_gt(pid, 0);
	cr_assert_eq(waitpid(pid, NULL, 0), pid);
	return tid == pid;
}

static bool check_early;

/*
 * Spawns run on worker threads, several at once: each child gets a stack
 * of its own, and its pid is stored before spawn_start returns.
 */
static void *spawn_many(void *arg)
{
	int *bad = arg;
	char *argv[] = { "/bin/true", NULL };

	for (int i = 0; i < 20; i++) {
		int in = open("/dev/null", O_RDONLY | O_CLOEXEC), st = -1;
		pid_t early = 0, pid;
		char msg[256];
		struct spawn_req rq = { .file = argv[0], .argv = argv, .argc = 1, .envp = env_path, .cwd = "/",
					.fd_in = in, .fd_out = in, .fd_err = in, .pid_early = &early };

		pid = spawn_start(&rq, msg, sizeof(msg));
		close(in);
		if (pid <= 0 || (check_early && early != pid) || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
		    WEXITSTATUS(st))
			(*bad)++;
	}
	return NULL;
}

Test(spawn, concurrent_spawns_from_threads)
{
	pthread_t t[2];
	int bad[2] = { 0, 0 };

	check_early = parent_settid_is_seen();
	for (int i = 0; i < 2; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, spawn_many, &bad[i]), 0);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	cr_assert_eq(bad[0] + bad[1], 0);
}
