/* SPDX-License-Identifier: Apache-2.0 */
/*
 * child.h - a short command run from a worker thread and waited for there
 * (mount, umount, findmnt for /init's volumes; iptables for the metadata
 * route).
 *
 * Why a module: the loop's libev reaps every child the daemon has
 * (waitpid(-1) on SIGCHLD) and drops the status of a pid no watcher names.
 * A worker that spawns a command and then calls waitpid(pid) races the
 * loop for it; when the loop wins, the worker sees ECHILD or nothing at
 * all, and a mount that took 2 s was reported "timed out" after the whole
 * budget. child_watch_start() adds one watcher for every pid that, while
 * a child_run() is waiting, keeps the exits the loop reaps where the
 * waiting thread finds them; child_run() also polls waitpid itself, so
 * whichever side reaps, the status arrives.
 *
 * Everything child_run() waits on has the deadline: the output pipe (a
 * command stuck on a hung mount keeps it open) and the exit. Past it the
 * command is killed; one that cannot die (in the kernel on a dead NFS
 * server) is left to the loop to reap when it does.
 *
 * Errors: child_run() returns the command's exit status (0..255),
 * 128 + signal for a killed one, or a negative errno: -ETIMEDOUT past the
 * deadline, what posix_spawn gave (-ENOENT: no such command), -ENOMEM.
 */
#ifndef ENVD_CHILD_H
#define ENVD_CHILD_H

#include <stdbool.h>
#include <stddef.h>

/* Loop thread, once at start-up. Without it child_run() still works, by
 * its own waitpid, as long as nothing else reaps (the unit tests). */
void child_watch_start(void);

/*
 * The ring itself, for code that spawns elsewhere and collects the exit on
 * the loop (the process table's Start, whose child may end before its
 * watcher exists). While at least one hold is out, every exit the loop
 * reaps is kept (the last CHILD_EXITS of them).
 *
 * child_exits_hold(): any thread; returns the position to give
 * child_exit_take(), taken before the spawn. child_exit_take(): any
 * thread; true with *status (the entry is used up) if pid ended after
 * `since`. child_exits_release(): one per hold.
 */
#define CHILD_EXITS 256
unsigned long long child_exits_hold(void);
/* Loop thread: the exits of pids for which known(pid) is true are not
 * kept, as they have watchers of their own (the process table's
 * commands); the ring then holds only the exits someone may wait for,
 * however many commands end at once. */
void child_exits_skip(bool (*known)(int pid));
int child_exit_take(int pid, unsigned long long since, int *status);
void child_exits_release(void);

/* Any thread. Runs argv[0] (found on PATH) with argv, stdin from
 * /dev/null, stdout into out (outlen > 0; NUL-terminated, cut at
 * outlen - 1 bytes) or /dev/null, stderr into /dev/null unless
 * keep_stderr, an empty signal mask and every signal at its default.
 * deadline is CLOCK_MONOTONIC seconds (child_now()). */
int child_run(char *const argv[], double deadline, char *out, size_t outlen, int keep_stderr);

/* CLOCK_MONOTONIC in seconds. */
double child_now(void);

#endif
