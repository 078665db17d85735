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

/*
 * The ledger of mounts made (path -> lifecycle) in the live-upgrade record
 * (base/handover.h), so a repeated /init does not mount again. The save
 * borrows the ledger's strings; the restore copies the record's (past the
 * ledger's bound of 64, or out of memory, an entry is left out: that
 * volume would be mounted again). Loop thread, while no mount job runs.
 */
struct handover;
void nfs_handover_save(struct handover *h);
void nfs_handover_restore(struct handover *h);

/* mount(8) and friends; tests point these at stand-ins. */
extern const char *nfs_mount_bin;
extern const char *nfs_umount_bin;
extern const char *nfs_findmnt_bin;

#endif
