/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nfs.h - NFS volume mounts requested by /init (docs/protocol.md, "POST
 * /init"), done by the worker pool so the loop never waits on mount(8).
 *
 * Errors: 0 or a negative errno; mount failures come back as a message.
 */
#ifndef ENVD_NFS_H
#define ENVD_NFS_H

#include <stddef.h>

struct nfs_volume {
	char *target;  /* "<host>:/<volume>" */
	char *path;
};

/*
 * Mount every volume not already mounted for `lifecycle` (may be NULL).
 * `vols` and the strings are copied. done(ud, err) runs on the loop; err
 * is NULL on success or a message ("failed to setup NFS volumes: ...").
 * Returns 0, or -EAGAIN/-ENOMEM when the job could not be queued.
 */
int nfs_mount_async(const struct nfs_volume *vols, size_t n, const char *lifecycle,
		    void (*done)(void *ud, const char *err), void *ud);

/* mount(8) and friends; tests point these at stand-ins. */
extern const char *nfs_mount_bin;
extern const char *nfs_umount_bin;
extern const char *nfs_findmnt_bin;

#endif
