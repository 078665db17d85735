/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cgroup.h - the workload cgroups, set up once at start-up.
 *
 * Under the cgroup root (flag -cgroup-root, a cgroup2 directory, possibly
 * not the mount's top) envd creates `user` (pipe commands) and `ptys` (PTY
 * commands) with fixed weights and a memory budget just below the
 * machine's RAM, delegates the cpu, memory and pids controllers to them,
 * and hands them to process/cgroup.h, which gives every command a leaf
 * below one of them. The freeze endpoints (sandbox/freeze.h) use the same
 * directories. See docs/cgroups.md.
 */
#ifndef SANDBOX_CGROUP_H
#define SANDBOX_CGROUP_H

#include <stdbool.h>

/*
 * Set up under `root`. With `disabled`, or when root is not a cgroup2
 * directory envd may manage, nothing is created and commands run without
 * cgroups (one log line says why). Returns true when cgroups are in use.
 */
bool cgroup_setup(const char *root, bool disabled);

/* The directories in use; NULL when cgroups are off. */
const char *cgroup_root(void);
const char *cgroup_user_dir(void);
const char *cgroup_ptys_dir(void);

#endif
