/* SPDX-License-Identifier: Apache-2.0 */
/*
 * child.c - commands run and waited for from worker threads, with the
 * exits the loop reaps handed over through a small ring (child.h).
 */
#include "base/child.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/loop.h"

extern char **environ;

/* A killed command normally goes at once; one stuck in the kernel is not
 * waited for longer than this (the loop reaps it if it ever ends). */
#define CHILD_KILL_GRACE_S 2.0
/* How often a waiting thread looks with waitpid itself: the loop may not
 * be reaping (no watcher, or busy), and then nobody else will. */
#define CHILD_POLL_S 0.05

static pthread_mutex_t child_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t child_cv;
static pthread_once_t child_once = PTHREAD_ONCE_INIT;
static unsigned child_waiters;  /* holds out (child_run() calls among them) */
static uint64_t child_seq;      /* exits kept so far */
static struct {
	pid_t pid;
	int status;
} child_exits[CHILD_EXITS];

static ev_child child_any_w;
static bool child_watching;
static bool (*child_known)(int pid); /* loop thread only */

double child_now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void child_cv_init(void)
{
	pthread_condattr_t a;
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&child_cv, &a);
	pthread_condattr_destroy(&a);
}

/* Loop thread: every child's exit, after libev reaped it, kept while a
 * hold is out and no watcher of its own awaits it (child_exits_skip).
 * CHILD_EXITS covers a burst of that many other children ending between a
 * command's exit and the look of whoever waits for it. */
static void child_any_cb(EV_P_ ev_child *w, int revents)
{
	(void)revents;
	if (child_known && child_known(w->rpid))
		return;
	pthread_mutex_lock(&child_mu);
	if (child_waiters > 0) {
		child_exits[child_seq % CHILD_EXITS].pid = w->rpid;
		child_exits[child_seq % CHILD_EXITS].status = w->rstatus;
		child_seq++;
		pthread_cond_broadcast(&child_cv);
	}
	pthread_mutex_unlock(&child_mu);
}

void child_watch_start(void)
{
	if (child_watching)
		return;
	pthread_once(&child_once, child_cv_init);
	ev_child_init(&child_any_w, child_any_cb, 0, 0);
	ev_child_start(envd_loop, &child_any_w);
	ev_unref(envd_loop); /* it alone does not keep the loop running */
	child_watching = true;
}

void child_exits_skip(bool (*known)(int pid))
{
	child_known = known;
}

unsigned long long child_exits_hold(void)
{
	pthread_mutex_lock(&child_mu);
	child_waiters++;
	uint64_t since = child_seq;
	pthread_mutex_unlock(&child_mu);
	return since;
}

void child_exits_release(void)
{
	pthread_mutex_lock(&child_mu);
	child_waiters--;
	pthread_mutex_unlock(&child_mu);
}

/* Takes pid's exit from the ring if the loop reaped it after `since`.
 * Called with child_mu held. */
static bool child_take(pid_t pid, uint64_t since, int *status)
{
	uint64_t from = child_seq > CHILD_EXITS ? child_seq - CHILD_EXITS : 0;

	for (uint64_t i = since > from ? since : from; i < child_seq; i++) {
		if (child_exits[i % CHILD_EXITS].pid == pid) {
			*status = child_exits[i % CHILD_EXITS].status;
			child_exits[i % CHILD_EXITS].pid = 0;
			return true;
		}
	}
	return false;
}

int child_exit_take(int pid, unsigned long long since, int *status)
{
	pthread_mutex_lock(&child_mu);
	bool got = child_take((pid_t)pid, since, status);
	pthread_mutex_unlock(&child_mu);
	return got;
}

/* 0 with *status once pid has ended, whoever reaped it; -ETIMEDOUT. */
static int child_wait(pid_t pid, uint64_t since, double deadline, int *status)
{
	for (;;) {
		if (waitpid(pid, status, WNOHANG) == pid)
			return 0;
		pthread_mutex_lock(&child_mu);
		bool got = child_take(pid, since, status);
		double now = child_now();
		if (!got && now < deadline) {
			double until = now + CHILD_POLL_S < deadline ? now + CHILD_POLL_S : deadline;
			struct timespec ts = { (time_t)until, (long)((until - (double)(time_t)until) * 1e9) };
			pthread_cond_timedwait(&child_cv, &child_mu, &ts);
			got = child_take(pid, since, status);
		}
		pthread_mutex_unlock(&child_mu);
		if (got)
			return 0;
		if (now >= deadline)
			return -ETIMEDOUT;
	}
}

/* Reads the command's stdout until EOF or the deadline; keeps what fits
 * and drains the rest, so a talkative command never blocks on the pipe. */
static int child_read(int fd, double deadline, char *out, size_t outlen)
{
	size_t len = 0;
	char scratch[512];

	for (;;) {
		double left = deadline - child_now();
		if (left <= 0) {
			out[len] = '\0';
			return -ETIMEDOUT;
		}
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int ms = left > 1.0 ? 1000 : (int)(left * 1000) + 1;
		int k = poll(&p, 1, ms);
		if (k < 0 && errno != EINTR)
			break;
		if (k <= 0)
			continue;
		ssize_t n;
		if (len + 1 < outlen)
			n = read(fd, out + len, outlen - 1 - len);
		else
			n = read(fd, scratch, sizeof(scratch));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (len + 1 < outlen)
			len += (size_t)n;
	}
	out[len] = '\0';
	return 0;
}

int child_run(char *const argv[], double deadline, char *out, size_t outlen, int keep_stderr)
{
	int pipefd[2] = { -1, -1 };
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t sa;
	sigset_t none, all;
	pid_t pid;
	int status = 0, rc;
	uint64_t since;

	pthread_once(&child_once, child_cv_init);
	if (out && outlen > 0) {
		out[0] = '\0';
		if (pipe2(pipefd, O_CLOEXEC) < 0)
			return -errno;
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	if (pipefd[1] >= 0)
		posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
	else
		posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	if (!keep_stderr)
		posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	/* Worker threads block every signal: the command gets an empty mask
	 * and default dispositions, as any program expects. */
	sigemptyset(&none);
	sigfillset(&all);
	posix_spawnattr_init(&sa);
	posix_spawnattr_setsigmask(&sa, &none);
	posix_spawnattr_setsigdefault(&sa, &all);
	posix_spawnattr_setflags(&sa, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

	/* Counted before the spawn: the exit may be reaped before posix_spawn
	 * even returns here. */
	since = child_exits_hold();
	rc = posix_spawnp(&pid, argv[0], &fa, &sa, argv, environ);
	posix_spawnattr_destroy(&sa);
	posix_spawn_file_actions_destroy(&fa);
	if (pipefd[1] >= 0)
		close(pipefd[1]);
	if (rc != 0) {
		rc = -rc;
		goto out;
	}
	rc = pipefd[0] >= 0 ? child_read(pipefd[0], deadline, out, outlen) : 0;
	if (rc == 0)
		rc = child_wait(pid, since, deadline, &status);
	if (rc == -ETIMEDOUT) {
		kill(pid, SIGKILL);
		child_wait(pid, since, child_now() + CHILD_KILL_GRACE_S, &status);
	}
out:
	if (pipefd[0] >= 0)
		close(pipefd[0]);
	child_exits_release();
	if (rc < 0)
		return rc;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
