/* SPDX-License-Identifier: Apache-2.0 */
/*
 * workload.h - the workload cgroups, set up once at start-up.
 *
 * Under the cgroup root (flag -cgroup-root, a cgroup2 directory, possibly
 * not the mount's top) envd creates `user` (pipe commands) and `ptys` (PTY
 * commands) with fixed weights and a memory budget just below the
 * machine's RAM, delegates the cpu, memory and pids controllers to them,
 * and hands them to process/cgroup.h, which gives every command a leaf
 * below one of them. The freeze endpoints (sandbox/freeze.h) use the same
 * directories. See docs/cgroups.md.
 */
#ifndef SANDBOX_WORKLOAD_H
#define SANDBOX_WORKLOAD_H

#include <stdbool.h>
#include <stddef.h>

/*
 * Set up under `root`. With `disabled`, or when root is not a cgroup2
 * directory envd may manage, nothing is created and commands run without
 * cgroups (workload_status() says why). Returns true when cgroups are in use.
 */
bool workload_setup(const char *root, bool disabled);

/*
 * Where cgroup2 is mounted, for when -cgroup-root is not given:
 * /sys/fs/cgroup if it is cgroup2, else the first cgroup2 mount in
 * /proc/self/mountinfo (a hybrid host mounts it at /sys/fs/cgroup/unified).
 * Written into `out`; NULL when there is none.
 */
const char *workload_find_root(char *out, size_t len);

/* One phrase for the start-up line: where the cgroups are, or why off. */
const char *workload_status(void);

/* The directories in use; NULL when cgroups are off. */
const char *workload_root(void);
const char *workload_user_dir(void);
const char *workload_ptys_dir(void);

#endif
