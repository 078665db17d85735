/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fguard.h - a file replaced only while it is what its writer expects:
 * Edit's ifVersion and the If-Match / If-None-Match of POST /files
 * (docs/protocol.md, "Versions", "Edit").
 *
 * Two parts:
 *   - a lock per path within envd: a writer holds it across its last
 *     check of the target and the rename that replaces it (the check runs
 *     as fwrite's before_replace hook, fs/fwrite.h), so that of two
 *     writers expecting the same version one replaces the file and the
 *     other finds it changed, never both;
 *   - the target's state as the check needs it: there or not, and its
 *     version (fs/entry.h).
 *
 * A writer outside envd (a process in the sandbox) takes no lock: the
 * check right before the rename still sees any change it made until
 * then; what it writes between that stat and the rename (microseconds)
 * is the one window left.
 *
 * Paths are compared by name as given (resolved, not canonical): two
 * names of one file (through a symlink) are two locks. Distinct paths
 * whose hashes meet share a lock, which only serialises them.
 *
 * Threads: worker threads (a lock may wait; the state stats the path).
 *
 * Errors: fguard_lock returns 0 or -ETIMEDOUT; fguard_state and
 * fguard_state_at 0 or the -errno of the stat other than ENOENT.
 */
#ifndef FS_FGUARD_H
#define FS_FGUARD_H

#include <stdbool.h>

#include "fs/entry.h"

/* Writers that may hold or wait for locks at once: more wait for a slot. */
#define FGUARD_SLOTS 128

/*
 * Hold the lock of `path`, waiting up to timeout_s seconds (<= 0: no
 * bound) while another writer holds it. 0, or -ETIMEDOUT.
 */
int fguard_lock(const char *path, double timeout_s);
void fguard_unlock(const char *path);

/*
 * Whether `path` (followed if a symlink) exists and, for a regular file,
 * its version (fs_version; "" for anything else). No settle: what is
 * compared is a version handed out earlier, and any change since shows.
 */
int fguard_state(const char *path, bool *exists, char version[FS_VERSION_LEN + 1]);

/*
 * fguard_state of the name `name` in the directory `dirfd`, not followed:
 * for a writer that holds that directory open (fs/wpath.h) and renames
 * there. A symbolic link found there is no regular file (version "").
 */
int fguard_state_at(int dirfd, const char *name, bool *exists, char version[FS_VERSION_LEN + 1]);

#endif
