/* SPDX-License-Identifier: Apache-2.0 */
/*
 * spawn.h - start a command the way envd starts processes (docs/protocol.md,
 * "Start"): clone(CLONE_VM|CLONE_VFORK) + execve, never fork() of the
 * daemon's heap, with set-up failures reported through a close-on-exec pipe
 * (EOF = exec reached, a record = failed at that step).
 *
 * In the child: the command's cgroup (when given; born in it through
 * clone3 where the kernel can), the mount namespace of a try run (when
 * given), a new process group (or, for a PTY, a new session with the
 * slave as controlling terminal), oom_score_adj 100, nice 0, ionice
 * best-effort 4, the original RLIMIT_NOFILE, supplementary groups, gid,
 * uid, cwd, default signal dispositions and an empty mask, only fds 0-2.
 * `file` is looked up on the PATH of `envp`; when it cannot be executed
 * the child writes a shell-style message on its stderr and exits 127 (not
 * found) or 126, as the reference's /bin/sh wrapper does.
 *
 * Errors: a pid, or a negative errno with a Go-shaped message.
 */
#ifndef PROCESS_SPAWN_H
#define PROCESS_SPAWN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct spawn_req {
	const char *file;        /* command as requested */
	char **argv;             /* argv[0] = file, NULL-terminated */
	size_t argc;
	char **envp;
	const char *cwd;
	bool set_ids;            /* apply uid/gid/groups */
	uid_t uid;
	gid_t gid;
	const gid_t *groups;
	int n_groups;
	int fd_in, fd_out, fd_err; /* become 0, 1, 2 in the child */
	bool pty;                /* setsid + TIOCSCTTY on fd_in */
	/*
	 * Join a cgroup before anything else: the child writes "0" to this
	 * cgroup.procs fd while still sharing our memory (CLONE_VFORK holds us
	 * until it execs), so no instruction of the command runs outside it.
	 */
	bool join_cgroup;
	int cgroup_procs_fd;
	/*
	 * The same cgroup's directory (O_RDONLY), or -1: where the kernel has
	 * clone3(CLONE_INTO_CGROUP) the child is created inside it instead.
	 */
	int cgroup_dir_fd;
	/*
	 * Join the mount namespace mntns_fd (a try run's, docs/try.md): while
	 * still root and before the chdir, so the cwd and the command are
	 * looked up in it. The join puts the child at the namespace's root;
	 * mntns_root_fd (a directory in that namespace, or -1) is then made
	 * its root (fchdir and chroot): envd's own root where envd runs
	 * chrooted. Read only with join_mntns.
	 */
	bool join_mntns;
	int mntns_fd;
	int mntns_root_fd;
	/*
	 * Or NULL: the kernel stores the child's pid here as soon as the
	 * child exists (CLONE_PARENT_SETTID), before it has exec'd, so
	 * another thread can SIGKILL a child stuck in its chdir or exec on a
	 * hung mount (spawn_start returns once the child is gone).
	 */
	pid_t *pid_early;
};

/*
 * Start the child. Returns its pid, or -errno with a Go-style message in
 * err ("chdir /x: not a directory", "fork/exec /bin/bash: operation not
 * permitted"). The child is reaped before an error is returned.
 *
 * The calling thread waits until the child has exec'd or exited, which on
 * a hung mount (the cwd, the command) may be forever: envd calls it in a
 * worker job, never on the loop. Safe on several threads at once; the
 * caller's signals need not be blocked.
 */
pid_t spawn_start(const struct spawn_req *rq, char *err, size_t errlen);

/* RLIMIT_NOFILE soft limit as envd started with (captured before main). */
void spawn_original_nofile(unsigned long *cur, unsigned long *max);

#endif
