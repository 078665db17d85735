/* SPDX-License-Identifier: Apache-2.0 */
/*
 * trylayer.h - a try's copy-on-write layer (docs/try.md, "The layer"): a
 * private mount namespace in which each of the try's directories is an
 * overlay, the real directory as its lower layer and an upper directory on
 * a tmpfs of the try's own.
 *
 * Built by a short-lived helper made with clone(CLONE_NEWNS | CLONE_VM |
 * CLONE_VFORK | CLONE_FILES): it makes its copy of the mount tree a slave
 * of envd's (mounts made later in the sandbox still show in the try; none
 * of the try's leak out), mounts the tmpfs (size: max_bytes, so writes
 * past it fail with ENOSPC there, never on the sandbox's disk) on
 * TRYLAYER_STAGE for a moment, makes <i>/u (taking the real directory's
 * mode and owner: it is what the overlay's root shows) and <i>/w, mounts
 * each overlay (lowerdir the real directory, by an fd opened in the new
 * namespace, so no path needs escaping; redirect_dir, index and metacopy
 * off: a copy-up copies the data, and a directory that was real cannot be
 * renamed, which tools handle as across filesystems), binds the real
 * mounts below each directory back on top of it (they are not part of the
 * layer), detaches the tmpfs from the namespace, and leaves two
 * descriptors in envd's table: the namespace (ns_fd; the command joins it,
 * process/spawn.h) and the tmpfs's root (root_fd; the diff and the commit
 * read the upper directories through it). The mounts live as long as the
 * namespace: while a process is in it or ns_fd is open.
 *
 * Joining a mount namespace (setns) puts a process at the namespace's own
 * root. Where envd runs chrooted (a container started with `unshare
 * --root` or chroot(8)), that is not envd's root: the helper then leaves a
 * third descriptor, envd's root as the new namespace shows it (chroot_fd,
 * O_PATH), to which the command's child changes its root after the join
 * (process/spawn.h). Without a chroot it is -1. Only the command's spawn
 * needs it: nothing else ever joins the namespace.
 *
 * Refused before anything is made (-EOPNOTSUPP, with the reason): no
 * mount namespace for envd (clone fails: not root, a seccomp filter),
 * no overlayfs in the kernel, a directory on FUSE or a network
 * filesystem (NFS, SMB, 9p, Ceph), a directory overlayfs refuses as a
 * lower layer (the kernel's reason where it gives one: too deep a stack
 * of overlays, a case-folding directory). A directory that does not
 * exist, is not one, is `/`, or lies inside another: -EINVAL.
 *
 * Threads: trylayer_build, trylayer_kill and the reads of the layer run on
 * worker threads (they touch the real directories). Errors: 0 or a
 * negative errno as above, with the message in err; -ENOMEM.
 */
#ifndef TRY_TRYLAYER_H
#define TRY_TRYLAYER_H

#include <stddef.h>
#include <stdint.h>

/* Where the helper mounts the tmpfs while it builds (in its namespace only). */
#define TRYLAYER_STAGE "/run/e2b/try"
/* The overlay's own attributes, for a layer mounted by root (trydiff.h). */
#define TRYLAYER_XATTR "trusted."
#define TRYLAYER_DIRS_MAX 16
/* Real mounts below one directory that are bound back on top of it. */
#define TRYLAYER_SUBMOUNTS_MAX 64

struct trylayer {
	int ns_fd;   /* the mount namespace; -1: none */
	int root_fd; /* the tmpfs's root: <i>/u and <i>/w; -1: none */
	int chroot_fd; /* envd's root in the namespace when envd is chrooted; -1: none */
};

/*
 * Resolve the n directories (realpath; each dirs[i] is replaced by the
 * resolved one, malloc'ed, the old freed) and build the layer over them
 * with a tmpfs of max_bytes. On failure l holds nothing.
 */
int trylayer_build(char **dirs, size_t n, uint64_t max_bytes, struct trylayer *l, char *err, size_t errlen);

/* The upper directory of dirs[i] (an open directory fd), or -errno. */
int trylayer_upper(const struct trylayer *l, size_t i);

/* Bytes the layer uses (its tmpfs), 0 when unknown. */
uint64_t trylayer_used(const struct trylayer *l);

/*
 * SIGKILL every process in the layer's namespace and wait, up to wait_s
 * seconds, until none is left (a killed process may finish a write first).
 * Returns the number still there (0: none).
 */
int trylayer_kill(const struct trylayer *l, double wait_s);

/* Close the descriptors (the mounts go with the namespace's last user). */
void trylayer_close(struct trylayer *l);

#endif
