/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsid.c - per-thread filesystem identity (fsid.h).
 *
 * The calls are raw system calls on purpose: libc's setgroups() is
 * process-wide (a signal-driven broadcast to every thread), the
 * system call itself is not.
 */
#include "base/fsid.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/log.h"

static int raw_setgroups(int n, const gid_t *groups)
{
	return syscall(SYS_setgroups, (long)n, groups) == 0 ? 0 : -errno;
}

static int raw_getgroups(int n, gid_t *groups)
{
	long r = syscall(SYS_getgroups, (long)n, groups);
	return r < 0 ? -errno : (int)r;
}

/* setfsuid() returns the previous value and never reports failure: the
 * way to know is to ask again with an invalid id, which changes nothing. */
static uid_t get_fsuid(void)
{
	return (uid_t)syscall(SYS_setfsuid, (long)-1);
}

static gid_t get_fsgid(void)
{
	return (gid_t)syscall(SYS_setfsgid, (long)-1);
}

static int set_fsuid(uid_t uid)
{
	syscall(SYS_setfsuid, (long)uid);
	return get_fsuid() == uid ? 0 : -EPERM;
}

static int set_fsgid(gid_t gid)
{
	syscall(SYS_setfsgid, (long)gid);
	return get_fsgid() == gid ? 0 : -EPERM;
}

uid_t fsid_current_uid(void)
{
	return get_fsuid();
}

gid_t fsid_current_gid(void)
{
	return get_fsgid();
}

/*
 * What this thread's identity is now, as far as these calls set and
 * checked it: every change of a worker thread's file identity goes
 * through fsid (fsid.h), so once known it need not be asked again, and a
 * change to what the thread already has is skipped. An Edit used to spend
 * 14 system calls on its identity; most were asking, or setting an id to
 * itself. Any failure forgets it: the next call asks the kernel.
 */
static _Thread_local struct {
	bool known;
	uid_t uid;
	gid_t gid;
	int n_groups;
	gid_t groups[FSID_GROUPS_MAX];
} cur;

static int learn(void)
{
	int n = raw_getgroups(FSID_GROUPS_MAX, cur.groups);

	if (n < 0)
		return n == -EINVAL ? -E2BIG : n;
	cur.n_groups = n;
	cur.uid = get_fsuid();
	cur.gid = get_fsgid();
	cur.known = true;
	return 0;
}

static bool same_groups(int n, const gid_t *groups)
{
	return n == cur.n_groups && (n == 0 || memcmp(groups, cur.groups, (size_t)n * sizeof(gid_t)) == 0);
}

/* The thread becomes uid, gid, groups: only what differs is set, each
 * change checked. 0 or -EPERM, which leaves cur unknown. The order is
 * free: a non-zero fsuid drops only the file capabilities (DAC, FOWNER,
 * CHOWN, ...); CAP_SETGID and CAP_SETUID, which these calls need, stay. */
static int become(uid_t uid, gid_t gid, int n, const gid_t *groups)
{
	int rc = 0;

	if (!same_groups(n, groups)) {
		if (raw_setgroups(n, groups) < 0) {
			rc = -EPERM;
		} else {
			memcpy(cur.groups, groups, (size_t)n * sizeof(gid_t));
			cur.n_groups = n;
		}
	}
	if (gid != cur.gid) {
		if (set_fsgid(gid) < 0)
			rc = -EPERM;
		else
			cur.gid = gid;
	}
	if (uid != cur.uid) {
		if (set_fsuid(uid) < 0)
			rc = -EPERM;
		else
			cur.uid = uid;
	}
	if (rc < 0)
		cur.known = false;
	return rc;
}

/* Each step is tried even when one fails: as much of the saved identity
 * as the kernel allows comes back. */
static int restore(const struct fsid_saved *s)
{
	int rc = 0;

	if (!cur.known && (rc = learn()) < 0) {
		/* Not even known: set all of it. */
		rc = 0;
		if (set_fsuid(s->uid) < 0)
			rc = -EPERM;
		if (set_fsgid(s->gid) < 0)
			rc = -EPERM;
		if (raw_setgroups(s->n_groups, s->groups) < 0)
			rc = -EPERM;
		return rc;
	}
	return become(s->uid, s->gid, s->n_groups, s->groups);
}

int fsid_enter(const struct fsid *id, struct fsid_saved *saved)
{
	int rc;

	saved->active = false;
	if (id->n_groups < 0 || id->n_groups > FSID_GROUPS_MAX)
		return -EINVAL;
	if (!cur.known && (rc = learn()) < 0)
		return rc;
	saved->n_groups = cur.n_groups;
	memcpy(saved->groups, cur.groups, (size_t)cur.n_groups * sizeof(gid_t));
	saved->uid = cur.uid;
	saved->gid = cur.gid;
	rc = become(id->uid, id->gid, id->n_groups, id->groups);
	if (rc < 0) {
		restore(saved);
		return rc;
	}
	saved->active = true;
	return 0;
}

uid_t fsid_root_begin(void)
{
	uid_t prev;

	if (!cur.known)
		learn(); /* once a thread: an upload's thread asks nothing after */
	prev = cur.known ? cur.uid : get_fsuid();

	if (prev == 0)
		return prev;
	if (set_fsuid(0) < 0)
		cur.known = false; /* what follows fails as the user would */
	else if (cur.known)
		cur.uid = 0;
	return prev;
}

void fsid_root_end(uid_t prev)
{
	uid_t now = cur.known ? cur.uid : get_fsuid();

	if (now == prev)
		return;
	if (set_fsuid(prev) == 0) {
		if (cur.known)
			cur.uid = prev;
		return;
	}
	/* Root's rights would stay with the rest of a user's job. */
	log_error("fsid", "fsid_root_end: the kernel would not give fsuid %u back; aborting", (unsigned)prev);
	abort();
}

int fsid_leave(struct fsid_saved *saved)
{
	if (!saved->active)
		return 0;
	saved->active = false;
	if (restore(saved) == 0)
		return 0;
	/* A pool thread that kept a user's identity would run the next
	 * request's job as that user: never let it go on. */
	log_error("fsid", "fsid_leave: the kernel would not restore fsuid %u fsgid %u; aborting", (unsigned)saved->uid,
		  (unsigned)saved->gid);
	abort();
}
