/* SPDX-License-Identifier: Apache-2.0 */
/*
 * uptmp.h - temporary files of atomic uploads (docs/protocol.md, "POST
 * /files"; docs/crash.md).
 *
 * An upload writes `<dir>/.envd-upload.<k><16 hex>` beside its target and
 * renames it over the target once complete; <k> is `r` when the target
 * existed (the rename replaces it) and `n` when it is new, so a watcher
 * can report the rename as the write it stands for.
 *
 * Every temporary file in use is registered in a small directory on
 * tmpfs (uptmp_registry, `<pid>.<hex>` symlinks to the file), so that the
 * next envd removes what a killed one left behind (uptmp_sweep).
 *
 * uptmp_open, uptmp_forget and uptmp_copy_attrs make path syscalls: call
 * them from the worker pool. uptmp_sweep runs on the loop and hands the
 * removals to the worker pool.
 */
#ifndef ENVD_UPTMP_H
#define ENVD_UPTMP_H

#include <stdbool.h>
#include <stddef.h>

#define UPTMP_PREFIX ".envd-upload."

/* The registry directory; "" disables registration and the sweep. */
extern char uptmp_registry[256];

/*
 * Create a new temporary file for `target` in its directory `dir`
 * (O_WRONLY | O_EXCL, mode 0666 before umask), and register it.
 * `replaces`: the target exists. On success returns the fd and fills
 * tmp (the file's path) and reg (its registry entry, "" when none).
 * Returns -errno of open(); -ENAMETOOLONG when a path does not fit.
 */
int uptmp_open(const char *dir, bool replaces, char *tmp, size_t tmplen, char *reg, size_t reglen);

/* Drop a registry entry (the file was renamed or removed). reg may be "". */
void uptmp_forget(const char *reg);

/*
 * Copy the extended attributes of `target` (not followed if a symlink)
 * to fd, except envd's own metadata (user.e2b.*), which the upload sets.
 * Attributes the filesystem or our privileges refuse are skipped.
 * Returns 0, or -ENOSPC / -EDQUOT when the space ran out.
 */
int uptmp_copy_attrs(const char *target, int fd);

/*
 * Whether `name` (a base name) is an upload's temporary file; if so and
 * `replaces` is not NULL, whether the target existed.
 */
bool uptmp_name_is(const char *name, size_t len, bool *replaces);

/*
 * Remove the temporary files registered by envd processes that are gone
 * (a crash or a kill left them): entries of pids that no longer run. Loop
 * thread; the unlinks run on the worker pool. Returns the number of files
 * handed over for removal.
 */
size_t uptmp_sweep(void);

#endif
