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

static int restore(const struct fsid_saved *s)
{
	int rc = 0;

	/* Each step is tried even when one fails: as much of root's
	 * identity as the kernel allows comes back. */
	if (set_fsuid(s->uid) < 0)
		rc = -EPERM;
	if (set_fsgid(s->gid) < 0)
		rc = -EPERM;
	if (raw_setgroups(s->n_groups, s->groups) < 0)
		rc = -EPERM;
	return rc;
}

int fsid_enter(const struct fsid *id, struct fsid_saved *saved)
{
	int n, rc;

	saved->active = false;
	if (id->n_groups < 0 || id->n_groups > FSID_GROUPS_MAX)
		return -EINVAL;
	n = raw_getgroups(FSID_GROUPS_MAX, saved->groups);
	if (n < 0)
		return n == -EINVAL ? -E2BIG : n;
	saved->n_groups = n;
	saved->uid = get_fsuid();
	saved->gid = get_fsgid();
	/* A non-zero fsuid drops only the file capabilities (DAC, FOWNER,
	 * CHOWN, ...); CAP_SETGID and CAP_SETUID, which these calls need,
	 * stay, so the order is free. uid last: until then the thread still
	 * has root's access, which nothing here uses. */
	rc = raw_setgroups(id->n_groups, id->groups);
	if (rc < 0)
		goto fail;
	rc = set_fsgid(id->gid);
	if (rc < 0)
		goto fail;
	rc = set_fsuid(id->uid);
	if (rc < 0)
		goto fail;
	saved->active = true;
	return 0;
fail:
	restore(saved);
	return rc == -EINVAL ? -EINVAL : -EPERM;
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
