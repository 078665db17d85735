/* SPDX-License-Identifier: Apache-2.0 */
/*
 * source.h - what feeds the change journal: a thread of its own reads the
 * kernel's reports of changes and the loop records them in the journal
 * (changes/journal.h), which this module owns.
 *
 * A fanotify group with a filesystem mark on every local filesystem that
 * takes one (the root filesystem, tmpfs mounts...) reports every change by
 * directory handle + name. The thread reads the group, resolves handles to
 * paths (open_by_handle_at, readlink of the descriptor), stats the result
 * and names the writer: a registered command (by pid, cgroup or parent
 * chain), envd itself, another process, or one that is gone. Network and
 * FUSE mounts are listed as not tracked. When the thread falls behind (the
 * kernel queue overflows) the journal records a gap and checkpoints before
 * it answer resync.
 *
 * Where fanotify is unavailable (no CAP_SYS_ADMIN, no FID reporting), or a
 * local filesystem refuses its mark (a default overlayfs, a btrfs
 * subvolume), the same thread watches a few trees there with recursive
 * inotify (changes/inotree.h): the home directories (/root, /home/<name>)
 * and /tmp (or the roots the configuration names), and the working
 * directories registered with source_register.
 * inotify names no writer (JA_UNKNOWN).
 *
 * Threads: every function here is for the loop thread, except
 * source_set_pid (any thread). Every syscall on a path is made on the
 * source's own thread, never on the loop.
 *
 * Errors: negative errno values.
 */
#ifndef CHANGES_SOURCE_H
#define CHANGES_SOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "changes/journal.h"
#include "handover.pb-c.h"

struct source_config {
	size_t max_paths;       /* paths the journal keeps (> 0) */
	bool fanotify;          /* fanotify may be used */
	bool inotify;           /* inotify may be used where fanotify does not see */
	size_t inotify_watches; /* directories inotify may watch; 0: half of
				 * /proc/sys/fs/inotify/max_user_watches */
	/* Trees inotify watches from the start (NULL-terminated, borrowed
	 * until source_stop); NULL: the home directories and /tmp. */
	const char *const *roots;
};

/*
 * Start (before the loop runs): a journal of a new epoch, or the one
 * source_adopt restored, then the reader thread. Failures to watch are
 * logged, never fatal; fanotify alone asked for and unavailable leaves the
 * journal on but fed by nothing (0). -ENOMEM, or the errno of eventfd or
 * pthread_create (the journal is on regardless: source_on()).
 */
int source_start(const struct source_config *cfg);
/* Stop the thread and free everything (tests, exit); every barrier waiting
 * is answered (caught_up false). */
void source_stop(void);
/* The journal was started (source_start got past its allocation). */
bool source_on(void);

/* The journal the thread feeds; owned here, read by the loop only, valid
 * from source_start to source_stop. */
struct journal *source_journal(void);

/*
 * Call fn(ud, true) once every change the kernel had queued when this was
 * called is in the journal, or fn(ud, false) after 5 s, or at
 * source_stop/source_snapshot. fn runs on the loop, never inside this
 * call. 0, or -ENOMEM (fn is not called).
 */
int source_barrier(void (*fn)(void *ud, bool caught_up), void *ud);
/* Look for new mounts before the next batch (at most once a second). */
void source_rescan(void);

/*
 * The command registry the thread names writers from: `serial` (the
 * tracker's number, nonzero) is the command with `pid` (<= 0: not known
 * yet, the spawn is in flight) and cgroup leaf `cgroup` (a full path, or
 * NULL). With cwd set (a tracked command's working directory) and inotify
 * allowed, the thread also watches that tree if fanotify does not see it.
 * Strings are copied. Out of memory: the command is simply not named.
 */
void source_register(uint32_t serial, pid_t pid, const char *cgroup, const char *cwd);
/* The command's pid, once its spawn has exec'd (any thread). */
void source_set_pid(uint32_t serial, pid_t pid);
/* The command is gone: its serial names no writer from now on. */
void source_unregister(uint32_t serial);

/*
 * Copies of the mount points not tracked and of the inotify roots that lie
 * under `prefix` or hold it ("" or "/": all). Each list is a calloc'ed
 * array of strdup'ed strings with *n entries, owned by the caller (NULL
 * when out of memory).
 */
void source_roots_under(const char *prefix, char ***not_tracked, size_t *n_not_tracked, char ***inotify_roots,
			size_t *n_inotify_roots);

/*
 * Live upgrade. source_snapshot stops the thread after it has handed over
 * everything read so far, answers every barrier, and fills `out` (memory
 * valid until the next snapshot or source_stop); the fanotify descriptor
 * is in out->fanotify_fd (-1 without one). 0 (also when off: out->epoch
 * 0) or -ENOMEM.
 */
int source_snapshot(Upgrade__ChangeJournal *out);
/* The exec failed: the thread reads again. */
void source_resume(void);
/*
 * Before source_start: take the record's journal (copied) with room for
 * max_paths; the group's descriptor is taken over (close-on-exec set) by
 * source_start. With max_paths 0 or no epoch in the record, the
 * descriptor is closed and nothing is taken. 0 or -ENOMEM.
 */
int source_adopt(const Upgrade__ChangeJournal *in, size_t max_paths);

#endif
