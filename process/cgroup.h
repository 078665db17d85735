/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cgroup.h - one cgroup v2 leaf per started command.
 *
 * The workload cgroups (`user` for pipe commands, `ptys` for PTY ones) are
 * created at start-up by sandbox/workload.c, which then hands their paths to
 * pcg_configure(). From then on every command gets a leaf of its own under
 * one of them, created before the spawn; the child is created in it
 * (clone3) or joins it before exec (spawn.h), so nothing the command runs
 * is ever outside it. The leaf gives
 * three things a process group cannot:
 *   - a kill that reaches every descendant, including ones that called
 *     setsid() or double-forked (cgroup.kill);
 *   - usage for the whole tree (cpu.stat, memory.peak, memory.events);
 *   - per-command limits (memory.max, cpu.max, pids.max).
 *
 * Cost: making and removing a leaf is what a start with a cgroup pays
 * over one without (docs/cgroups.md has the profile), so neither happens on
 * the start path when it can be avoided. While commands start in a run
 * (one after another or at once, see cgroup.c), each parent keeps a small
 * pool of fresh, empty leaves that a worker thread makes ahead of time,
 * sized by that demand and emptied again once it stops; a start takes one
 * (or makes its own when the pool is dry). A leaf is never reused: each command's usage
 * is the leaf's whole counters. Released leaves are removed in batches on
 * the worker pool.
 *
 * Ownership: a leaf belongs to its process until pcg_leaf_release(), which
 * hands it to this module: it is removed as soon as it is empty (watched
 * through inotify on cgroup.events, with a slow timer as a backstop), so a
 * background server started by a command that has ended keeps running in
 * it. What stays on the loop is a small file read or write in cgroupfs.
 *
 * Without pcg_configure() (flag -no-cgroups, no cgroup2, not root) there
 * are no leaves and callers fall back to process groups and wait4 usage.
 */
#ifndef PROCESS_CGROUP_H
#define PROCESS_CGROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct pcg_leaf;

/* Controllers available to leaves (bit set), as found by pcg_configure. */
enum {
	PCG_CPU = 1,
	PCG_MEMORY = 2,
	PCG_PIDS = 4,
};

struct pcg_limits {
	uint64_t memory_max;  /* bytes; 0 = none */
	uint32_t cpu_percent; /* 100 = one core; 0 = none */
	uint32_t pids_max;    /* 0 = none */
};

struct pcg_usage {
	uint64_t user_usec, system_usec;
	uint64_t memory_peak; /* 0 when unknown */
	bool oom_killed;
};

/*
 * Use `user_dir` and `ptys_dir` (absolute cgroup2 directories, copied) as
 * the parents of command leaves. Returns 0 or -errno.
 */
int pcg_configure(const char *user_dir, const char *ptys_dir);
bool pcg_active(void);
/* PCG_* bits of the controllers the leaves can use. */
unsigned pcg_controllers(void);

/*
 * True while `ptys` (or `user`) is frozen for a snapshot. A child created
 * in a frozen cgroup stops before it can exec, and the vfork-style spawn
 * would hold envd's loop until the thaw: such starts must be refused.
 */
bool pcg_parent_frozen(bool pty);

/*
 * A fresh leaf under `ptys` or `user`: a spare from the pool, else made
 * now. NULL with a message in err when it cannot be created (the caller
 * fails the start).
 */
struct pcg_leaf *pcg_leaf_new(bool pty, char *err, size_t errlen);
/* O_WRONLY fd of the leaf's cgroup.procs (owned by the leaf). */
int pcg_leaf_procs_fd(const struct pcg_leaf *l);
/* Live upgrade: take over the existing leaf at `path` (NULL when it is
 * gone or cgroups are off). */
struct pcg_leaf *pcg_leaf_adopt(const char *path);
/* O_RDONLY fd of the leaf directory, or -1 (owned by the leaf). */
int pcg_leaf_dir_fd(const struct pcg_leaf *l);
const char *pcg_leaf_path(const struct pcg_leaf *l);

/*
 * Apply the non-zero limits. Returns 0, or -EOPNOTSUPP (controller
 * missing) / another -errno with a message in err.
 */
int pcg_leaf_limit(struct pcg_leaf *l, const struct pcg_limits *lim, char *err, size_t errlen);

/* True while any process is in the leaf (cgroup.events "populated 1"). */
bool pcg_leaf_populated(const struct pcg_leaf *l);

/* SIGKILL every process in the leaf. 0 or -errno. */
int pcg_leaf_kill(struct pcg_leaf *l);

/* Usage of the leaf's whole tree so far. */
void pcg_leaf_usage(const struct pcg_leaf *l, struct pcg_usage *u);

/*
 * The process is done with the leaf: it is removed now if empty, else once
 * it empties. `l` must not be used afterwards. NULL is a no-op.
 */
void pcg_leaf_release(struct pcg_leaf *l);

/* Released leaves still waiting for their last process to leave. */
size_t pcg_lingering(void);
/* Spare leaves in the pools. */
size_t pcg_spares(void);
/* envd is stopping: remove the spares and released empty leaves now. */
void pcg_shutdown(void);

/* ---- live upgrade ---- */

/*
 * `on`: an upgrade is under way: spares are removed, no job is started
 * (removals run on the loop). `false` again when the exec failed.
 */
void pcg_quiesce(bool on);
/* No cgroup job is on the worker pool (nothing can be made or lost behind
 * the record's back). */
bool pcg_idle(void);
/* Every leaf this module owns (spares, released ones not yet removed):
 * the next image removes them once empty (pcg_release_path). */
void pcg_owned_leaves(void (*fn)(void *ud, const char *path), void *ud);
/* Take over the removal of a leaf the previous image owned. */
void pcg_release_path(const char *path);
/* The same through the hand-over record (base/handover.h, field 1010):
 * the save borrows the paths, the restore releases each. */
struct handover;
void pcg_handover_save(struct handover *h);
void pcg_handover_restore(struct handover *h);

/* ---- helpers shared with the cgroup manager (sandbox/) ---- */

/* Write `val` to dir/file. 0 or -errno. */
int pcg_write(const char *dir, const char *file, const char *val);
/* Read dir/file into buf (NUL-terminated). Bytes read or -errno. */
ssize_t pcg_read(const char *dir, const char *file, char *buf, size_t len);
/* Value of `key` in a flat-keyed file ("populated 1\nfrozen 0\n"); -1 if absent. */
long long pcg_key(const char *text, const char *key);

#endif
