/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/child.h"
#include "base/loop.h"

/* Every deadline here is a hang deadline: the commands take milliseconds. */
#define HANG_S 120.0

static int run_sh(const char *script, double budget, char *out, size_t outlen)
{
	char *argv[] = { "sh", "-c", (char *)script, NULL };
	return child_run(argv, child_now() + budget, out, outlen, 0);
}

Test(child, exit_status_and_output)
{
	char out[64];
	cr_assert_eq(run_sh("echo hello; exit 3", HANG_S, out, sizeof(out)), 3);
	cr_assert_str_eq(out, "hello\n");
	cr_assert_eq(run_sh("exit 0", HANG_S, NULL, 0), 0);
	cr_assert_eq(run_sh("kill -TERM $$", HANG_S, NULL, 0), 128 + SIGTERM);
}

Test(child, missing_command)
{
	char *argv[] = { "envd-no-such-command", NULL };
	int rc = child_run(argv, child_now() + HANG_S, NULL, 0, 0);
	/* -ENOENT from posix_spawn; under qemu-user, which runs a vfork-style
	 * clone as a fork, glibc cannot see the exec fail and the child
	 * exits 127 instead. */
	cr_assert(rc == -ENOENT || rc == 127, "rc %d", rc);
}

Test(child, output_longer_than_the_buffer_is_cut_and_drained)
{
	char out[16];
	/* 1 MiB: far more than a pipe holds, so an undrained pipe would block
	 * the command until the deadline. */
	cr_assert_eq(run_sh("head -c 1048576 /dev/zero | tr '\\0' x; exit 5", HANG_S, out, sizeof(out)), 5);
	cr_assert_eq(strlen(out), sizeof(out) - 1);
	cr_assert_str_eq(out, "xxxxxxxxxxxxxxx");
}

Test(child, past_the_deadline_the_command_is_killed)
{
	char out[32];
	/* The shell prints its pid, then sleeps with stdout still open: the
	 * read has to give up at the deadline, not at EOF. */
	cr_assert_eq(run_sh("echo $$; exec sleep 600", 0.5, out, sizeof(out)), -ETIMEDOUT);
	pid_t pid = (pid_t)atoi(out);
	cr_assert_gt(pid, 1, "pid printed: '%s'", out);
	cr_assert_eq(kill(pid, 0), -1, "the command is gone");
	cr_assert_eq(errno, ESRCH);
	/* Without output, the wait for the exit has the deadline too. */
	cr_assert_eq(run_sh("exec sleep 600", 0.3, NULL, 0), -ETIMEDOUT);
}

/* The loop reaps every child (waitpid(-1)), as envd's does. The commands
 * run from another thread, as from a worker: each must still get its own
 * status, never a timeout. */
struct race {
	int n, ok, wrong;
	int last_rc;
	ev_async stop;
};

static void *race_thread(void *arg)
{
	struct race *r = arg;
	for (int i = 0; i < r->n; i++) {
		char script[32];
		snprintf(script, sizeof(script), "exit %d", i % 7);
		int rc = run_sh(script, HANG_S, NULL, 0);
		if (rc == i % 7)
			r->ok++;
		else
			r->wrong++, r->last_rc = rc;
	}
	ev_async_send(envd_loop, &r->stop);
	return NULL;
}

static void race_stop(struct ev_loop *l, ev_async *w, int re)
{
	ev_break(l, EVBREAK_ALL);
}

Test(child, exits_reaped_by_the_loop_reach_the_waiting_thread)
{
	static struct race r = { .n = 100 };
	pthread_t t;
	/* SIGCHLD and the wake-up on the loop thread only, as in envd, where
	 * the worker threads block every signal. */
	sigset_t all, old;
	sigfillset(&all);
	child_watch_start();
	ev_async_init(&r.stop, race_stop);
	ev_async_start(envd_loop, &r.stop);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	cr_assert_eq(pthread_create(&t, NULL, race_thread, &r), 0);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	ev_run(envd_loop, 0);
	pthread_join(t, NULL);
	cr_assert_eq(r.wrong, 0, "%d of %d runs got %d instead of their status", r.wrong, r.n, r.last_rc);
	cr_assert_eq(r.ok, r.n);
}

static int skip_pid;
static bool skip_one(int pid)
{
	return pid == skip_pid;
}

static void tick(struct ev_loop *l, ev_timer *w, int re)
{
}

/* An exit that a watcher of its own awaits (the process table's) is not
 * kept: only those someone may look for take room in the ring. */
Test(child, exits_with_watchers_of_their_own_are_not_kept)
{
	extern char **environ;
	char *argv[] = { "true", NULL };
	pid_t a, b;
	int st;
	ev_timer t;

	child_watch_start();
	child_exits_skip(skip_one);
	unsigned long long since = child_exits_hold();
	cr_assert_eq(posix_spawnp(&a, "true", NULL, NULL, argv, environ), 0);
	skip_pid = a;
	cr_assert_eq(posix_spawnp(&b, "true", NULL, NULL, argv, environ), 0);
	/* The loop reaps both; a tick keeps each turn short. */
	ev_timer_init(&t, tick, 0.1, 0.1);
	ev_timer_start(envd_loop, &t);
	bool got_b = false;
	double deadline = child_now() + HANG_S;
	while ((!got_b || kill(a, 0) == 0) && child_now() < deadline) {
		ev_run(envd_loop, EVRUN_ONCE);
		if (!got_b)
			got_b = child_exit_take(b, since, &st);
	}
	ev_timer_stop(envd_loop, &t);
	cr_assert(got_b, "the other exit is kept");
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	cr_assert_eq(kill(a, 0), -1, "the skipped one was reaped too");
	cr_assert(!child_exit_take(a, since, &st), "and not kept");
	child_exits_release();
	child_exits_skip(NULL);
}
