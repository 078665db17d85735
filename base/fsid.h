/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsid.h - a worker thread's filesystem identity: a job runs its file
 * system calls as the request's user (fsuid, fsgid, supplementary groups)
 * and gives root's identity back when it is done.
 *
 * Why per thread: Linux keeps the credentials of each thread apart.
 * setfsuid(), setfsgid() and the raw setgroups system call change the
 * calling thread only. libc's setgroups()/setuid() do not: glibc and musl
 * broadcast them to every thread of the process (POSIX wants one identity
 * per process), which would hand the whole daemon to one request's user.
 * So this module makes the system calls itself and never calls those
 * wrappers.
 *
 * With an fsuid other than 0 the kernel drops the file capabilities
 * (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER, ...) from the
 * thread's effective set, so permission checks are the user's own; setting
 * fsuid 0 again raises them (they stay permitted). Nothing else of the
 * thread changes: real and effective ids stay root's.
 *
 * Each thread's identity is remembered between calls (every change of
 * it goes through here), so a call makes only the changes it needs: ids
 * and groups the thread has already are not set again; each change made
 * is checked with the kernel.
 *
 * Use: fsid_enter() at the start of a job, fsid_leave() on every way out
 * (one exit label). A thread that is not root (the unit tests as a plain
 * user) can only enter its own identity.
 *
 * Errors: fsid_enter() returns 0 or a negative errno (-EINVAL for more
 * than FSID_GROUPS_MAX groups; -EPERM when the kernel refused a change,
 * in which case the thread is back at its own identity).
 * fsid_leave() cannot fail in practice; it returns -EPERM when the kernel
 * would not give the saved identity back (the job should then not return
 * the thread to other work: see fsid_leave()).
 */
#ifndef ENVD_FSID_H
#define ENVD_FSID_H

#include <stdbool.h>
#include <sys/types.h>

#define FSID_GROUPS_MAX 64

struct fsid {
	uid_t uid;
	gid_t gid;
	const gid_t *groups; /* supplementary groups; borrowed for the call */
	int n_groups;
};

/* The identity the thread had before fsid_enter(), to give back. */
struct fsid_saved {
	uid_t uid;
	gid_t gid;
	gid_t groups[FSID_GROUPS_MAX];
	int n_groups;
	bool active; /* set by a successful fsid_enter() */
};

/*
 * Become `id` for file access on this thread. On failure nothing is left
 * changed (what was set is undone) and *saved is inactive.
 */
int fsid_enter(const struct fsid *id, struct fsid_saved *saved);

/*
 * Back to the saved identity (a no-op for an inactive one). Returns 0, or
 * -EPERM if the kernel would not restore it; the process then logs and
 * aborts, because a pool thread with a user's identity would run the
 * next job with it (fsid_leave() does this itself after logging).
 */
int fsid_leave(struct fsid_saved *saved);

/*
 * For a call on envd's own files (the registry of temporary files,
 * base/uptmp.h) from a job that runs as a user: the thread's fsuid is 0
 * (root's file capabilities with it) until fsid_root_end(prev), where
 * prev is what fsid_root_begin() returned. Only the fsuid changes: two
 * credential changes where a whole identity would take six. If the
 * kernel will not give the user's fsuid back, the process logs and
 * aborts, as fsid_leave() does.
 */
uid_t fsid_root_begin(void);
void fsid_root_end(uid_t prev);

/* This thread's current fsuid / fsgid (for tests and assertions). */
uid_t fsid_current_uid(void);
gid_t fsid_current_gid(void);

#endif
