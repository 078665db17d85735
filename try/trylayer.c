/* SPDX-License-Identifier: Apache-2.0 */
/*
 * trylayer.c - a try's mount namespace and overlays (trylayer.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "try/trylayer.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/errstr.h"

/* The new mount API (Linux 5.2), where the kernel explains a refusal. The
   numbers are the same on every architecture since 5.1's unified table. */
#ifndef SYS_move_mount
#define SYS_move_mount 429
#endif
#ifndef SYS_fsopen
#define SYS_fsopen 430
#endif
#ifndef SYS_fsconfig
#define SYS_fsconfig 431
#endif
#ifndef SYS_fsmount
#define SYS_fsmount 432
#endif
#define K_FSOPEN_CLOEXEC 1u
#define K_FSCONFIG_SET_STRING 1u
#define K_FSCONFIG_CMD_CREATE 6u
#define K_FSMOUNT_CLOEXEC 1u
#define K_MOUNT_ATTR_NOSUID 0x2u
#define K_MOUNT_ATTR_NODEV 0x4u
#define K_MOUNT_ATTR_NOEXEC 0x8u
#define K_MOVE_MOUNT_F_EMPTY_PATH 0x4u

/* statfs magic numbers of filesystems refused as a lower layer. */
#define FUSE_MAGIC 0x65735546
#define NFS_MAGIC 0x6969
#define SMB_MAGIC 0x517B
#define CIFS_MAGIC 0xFF534D42
#define SMB2_MAGIC 0xFE534D42
#define V9FS_MAGIC 0x01021997
#define CEPH_MAGIC 0x00c36400
#define AFS_MAGIC 0x6B414653

#define HELPER_STACK (64 * 1024)
#define OPT_MAX 512
#define MSG_MAX 256

/* Sanitizer bookkeeping would run on the borrowed stack (process/spawn.c). */
#if defined(__has_attribute)
#if __has_attribute(no_sanitize)
#define HELPER_CODE __attribute__((no_sanitize("address", "undefined")))
#endif
#endif
#ifndef HELPER_CODE
#define HELPER_CODE
#endif

enum stage {
	ST_NONE,
	ST_SLAVE,
	ST_OPEN_DIR,
	ST_OPEN_SUB,
	ST_TMPFS,
	ST_LAYOUT,
	ST_OVERLAY,
	ST_BIND,
	ST_DETACH,
	ST_NS,
};

/*
 * What the helper gets and leaves. It shares our memory and descriptor
 * table until it exits (CLONE_VM | CLONE_VFORK | CLONE_FILES) and must not
 * allocate or take a libc lock: everything it needs is prepared here.
 */
struct helper {
	size_t n;
	const char *dirs[TRYLAYER_DIRS_MAX];
	uid_t uid[TRYLAYER_DIRS_MAX];
	gid_t gid[TRYLAYER_DIRS_MAX];
	mode_t mode[TRYLAYER_DIRS_MAX];
	unsigned attrs[TRYLAYER_DIRS_MAX];          /* MOUNT_ATTR_* of the real mount */
	unsigned long msflags[TRYLAYER_DIRS_MAX];   /* the same as MS_* */
	size_t n_sub[TRYLAYER_DIRS_MAX];
	char *sub[TRYLAYER_DIRS_MAX][TRYLAYER_SUBMOUNTS_MAX];
	char tmpfs_opts[64];
	/* out */
	int lfd[TRYLAYER_DIRS_MAX];
	int sfd[TRYLAYER_DIRS_MAX][TRYLAYER_SUBMOUNTS_MAX];
	int root_fd, ns_fd, chroot_fd;
	int stage, err;
	size_t which;                               /* the directory the failure concerns */
	char kmsg[MSG_MAX];                         /* the kernel's words, where it gave some */
};

HELPER_CODE static size_t h_cat(char *buf, size_t pos, size_t len, const char *s)
{
	while (*s && pos + 1 < len)
		buf[pos++] = *s++;
	buf[pos] = '\0';
	return pos;
}

HELPER_CODE static size_t h_num(char *buf, size_t pos, size_t len, unsigned long v)
{
	char t[24];
	int i = 0;

	do
		t[i++] = (char)('0' + v % 10);
	while ((v /= 10) && i < 23);
	while (i && pos + 1 < len)
		buf[pos++] = t[--i];
	buf[pos] = '\0';
	return pos;
}

HELPER_CODE static int h_fail(struct helper *h, int stage, size_t which, int err)
{
	h->stage = stage;
	h->which = which;
	h->err = err;
	return 1;
}

/* The kernel's own words for a refused fs context ("e overlayfs: ..."). */
HELPER_CODE static void h_kmsg(struct helper *h, int fs)
{
	ssize_t n = read(fs, h->kmsg, sizeof(h->kmsg) - 1);

	h->kmsg[n > 0 ? n : 0] = '\0';
	if (n > 0 && h->kmsg[n - 1] == '\n')
		h->kmsg[n - 1] = '\0';
}

HELPER_CODE static int h_overlay(struct helper *h, size_t i, const char *lower, const char *upper, const char *work)
{
	static const char *const keys[] = { "redirect_dir", "index", "metacopy" };
	int fs = (int)syscall(SYS_fsopen, "overlay", K_FSOPEN_CLOEXEC), mnt, rc = 0;

	if (fs < 0 && errno == ENOSYS) {
		/* Before the new API: the same options in one string. */
		char opts[OPT_MAX];
		size_t o = h_cat(opts, 0, sizeof(opts), "lowerdir=");
		o = h_cat(opts, o, sizeof(opts), lower);
		o = h_cat(opts, o, sizeof(opts), ",upperdir=");
		o = h_cat(opts, o, sizeof(opts), upper);
		o = h_cat(opts, o, sizeof(opts), ",workdir=");
		o = h_cat(opts, o, sizeof(opts), work);
		h_cat(opts, o, sizeof(opts), ",redirect_dir=off,index=off,metacopy=off");
		return mount("overlay", h->dirs[i], "overlay", h->msflags[i], opts) < 0 ? errno : 0;
	}
	if (fs < 0)
		return errno;
	if (syscall(SYS_fsconfig, fs, K_FSCONFIG_SET_STRING, "lowerdir", lower, 0) < 0 ||
	    syscall(SYS_fsconfig, fs, K_FSCONFIG_SET_STRING, "upperdir", upper, 0) < 0 ||
	    syscall(SYS_fsconfig, fs, K_FSCONFIG_SET_STRING, "workdir", work, 0) < 0)
		rc = errno;
	for (size_t k = 0; !rc && k < sizeof(keys) / sizeof(keys[0]); k++)
		if (syscall(SYS_fsconfig, fs, K_FSCONFIG_SET_STRING, keys[k], "off", 0) < 0)
			rc = errno;
	if (!rc && syscall(SYS_fsconfig, fs, K_FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		rc = errno;
	if (rc) {
		h_kmsg(h, fs);
		close(fs);
		return rc;
	}
	mnt = (int)syscall(SYS_fsmount, fs, K_FSMOUNT_CLOEXEC, h->attrs[i]);
	if (mnt < 0) {
		rc = errno;
		h_kmsg(h, fs);
		close(fs);
		return rc;
	}
	close(fs);
	if (syscall(SYS_move_mount, mnt, "", AT_FDCWD, h->dirs[i], K_MOVE_MOUNT_F_EMPTY_PATH) < 0)
		rc = errno;
	close(mnt);
	return rc;
}

HELPER_CODE static int helper_main(void *arg)
{
	struct helper *h = arg;
	char lower[64], upper[128], work[128], p[128];
	struct stat in, top;
	int rc;

	/* Envd's mounts keep showing here; nothing made here goes back. */
	if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0)
		return h_fail(h, ST_SLAVE, 0, errno);
	/* In this namespace: these name its own copies of the mounts. */
	for (size_t i = 0; i < h->n; i++) {
		h->lfd[i] = open(h->dirs[i], O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (h->lfd[i] < 0)
			return h_fail(h, ST_OPEN_DIR, i, errno);
		for (size_t j = 0; j < h->n_sub[i]; j++) {
			h->sfd[i][j] = open(h->sub[i][j], O_PATH | O_CLOEXEC);
			if (h->sfd[i][j] < 0)
				return h_fail(h, ST_OPEN_SUB, i, errno);
		}
	}
	if (mount("envd-try", TRYLAYER_STAGE, "tmpfs", 0, h->tmpfs_opts) < 0)
		return h_fail(h, ST_TMPFS, 0, errno);
	h->root_fd = open(TRYLAYER_STAGE, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (h->root_fd < 0)
		return h_fail(h, ST_TMPFS, 0, errno);
	for (size_t i = 0; i < h->n; i++) {
		size_t o = h_num(p, 0, sizeof(p), i);
		if (mkdirat(h->root_fd, p, 0700) < 0)
			return h_fail(h, ST_LAYOUT, i, errno);
		h_cat(p, o, sizeof(p), "/u");
		/* The overlay's root is the upper directory: it must look like
		   the real one. */
		if (mkdirat(h->root_fd, p, 0700) < 0 || fchownat(h->root_fd, p, h->uid[i], h->gid[i], 0) < 0 ||
		    fchmodat(h->root_fd, p, h->mode[i] & 07777, 0) < 0)
			return h_fail(h, ST_LAYOUT, i, errno);
		p[o] = '\0';
		h_cat(p, o, sizeof(p), "/w");
		if (mkdirat(h->root_fd, p, 0700) < 0)
			return h_fail(h, ST_LAYOUT, i, errno);
	}
	for (size_t i = 0; i < h->n; i++) {
		size_t o;

		o = h_cat(lower, 0, sizeof(lower), "/proc/self/fd/");
		h_num(lower, o, sizeof(lower), (unsigned long)h->lfd[i]);
		o = h_cat(upper, 0, sizeof(upper), TRYLAYER_STAGE "/");
		o = h_num(upper, o, sizeof(upper), i);
		h_cat(upper, o, sizeof(upper), "/u");
		o = h_cat(work, 0, sizeof(work), TRYLAYER_STAGE "/");
		o = h_num(work, o, sizeof(work), i);
		h_cat(work, o, sizeof(work), "/w");
		if ((rc = h_overlay(h, i, lower, upper, work)) != 0)
			return h_fail(h, ST_OVERLAY, i, rc);
		/* Mounts below the directory are not part of the layer: the
		   real ones again, on top of it. */
		for (size_t j = 0; j < h->n_sub[i]; j++) {
			o = h_cat(p, 0, sizeof(p), "/proc/self/fd/");
			h_num(p, o, sizeof(p), (unsigned long)h->sfd[i][j]);
			if (mount(p, h->sub[i][j], NULL, MS_BIND | MS_REC, NULL) < 0)
				return h_fail(h, ST_BIND, i, errno);
		}
	}
	/* The command must not see the upper directories. */
	if (umount2(TRYLAYER_STAGE, MNT_DETACH) < 0)
		return h_fail(h, ST_DETACH, 0, errno);
	h->ns_fd = open("/proc/thread-self/ns/mnt", O_RDONLY | O_CLOEXEC);
	if (h->ns_fd < 0)
		return h_fail(h, ST_NS, 0, errno);
	/* Our root here: where envd is chrooted, the command must be too. */
	h->chroot_fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (h->chroot_fd < 0)
		return h_fail(h, ST_NS, 0, errno);
	/* The join's own root (the helper has an fs_struct of its own and is
	   gone next): the same directory means no chroot, and no descriptor.
	   Where the join is refused, the descriptor stays: the chroot is
	   then made in vain, never missed. */
	if (fstat(h->chroot_fd, &in) == 0 && syscall(SYS_setns, h->ns_fd, CLONE_NEWNS) == 0 &&
	    stat("/", &top) == 0 && in.st_dev == top.st_dev && in.st_ino == top.st_ino) {
		close(h->chroot_fd);
		h->chroot_fd = -1;
	}
	return 0;
}

/* ---- the parent's side ---- */

static int refuse(char *err, size_t errlen, int rc, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int refuse(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return rc;
}

/* Octal escapes of /proc/self/mountinfo ("\040" for a space) undone in place. */
static void unescape(char *s)
{
	char *o = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '7' && s[2] >= '0' && s[2] <= '7' && s[3] >= '0' &&
		    s[3] <= '7') {
			*o++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else {
			*o++ = *s;
		}
	}
	*o = '\0';
}

/* The mount points strictly below dir, outermost only (each bound with
   what is below it). */
static int submounts(const char *dir, char **out, size_t *n, char *err, size_t errlen)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	size_t dl = strlen(dir);
	char *line = NULL;
	size_t cap = 0;
	int rc = 0;

	*n = 0;
	if (!f)
		return 0;
	while (getline(&line, &cap, f) > 0) {
		char *save = NULL, *tok = strtok_r(line, " ", &save);
		char *mp = NULL;
		bool inside = false;

		for (int k = 1; tok && k <= 5; k++) {
			if (k == 5)
				mp = tok;
			tok = k < 5 ? strtok_r(NULL, " ", &save) : tok;
		}
		if (!mp)
			continue;
		unescape(mp);
		if (strncmp(mp, dir, dl) != 0 || mp[dl] != '/' || !mp[dl + 1])
			continue;
		/* Below one already listed, or above (then it replaces it). */
		for (size_t i = 0; i < *n; i++) {
			size_t l = strlen(out[i]);
			if (strncmp(mp, out[i], l) == 0 && (mp[l] == '/' || !mp[l])) {
				inside = true;
				break;
			}
		}
		if (inside)
			continue;
		for (size_t i = 0; i < *n;) {
			size_t l = strlen(mp);
			if (strncmp(out[i], mp, l) == 0 && out[i][l] == '/') {
				free(out[i]);
				out[i] = out[--*n];
			} else {
				i++;
			}
		}
		if (*n >= TRYLAYER_SUBMOUNTS_MAX) {
			rc = refuse(err, errlen, -EOPNOTSUPP, "more than %d mounts below %s", TRYLAYER_SUBMOUNTS_MAX,
				    dir);
			break;
		}
		if (!(out[*n] = strdup(mp))) {
			rc = -ENOMEM;
			break;
		}
		(*n)++;
	}
	free(line);
	fclose(f);
	return rc;
}

static const char *remote_kind(long type)
{
	switch ((unsigned long)type & 0xffffffffu) {
	case FUSE_MAGIC:
		return "a FUSE filesystem";
	case NFS_MAGIC:
		return "NFS";
	case SMB_MAGIC:
	case CIFS_MAGIC:
	case SMB2_MAGIC:
		return "SMB";
	case V9FS_MAGIC:
		return "9p";
	case CEPH_MAGIC:
		return "Ceph";
	case AFS_MAGIC:
		return "AFS";
	}
	return NULL;
}

/* Resolve, then the checks that need no namespace. */
static int check_dirs(char **dirs, size_t n, struct helper *h, char *err, size_t errlen)
{
	for (size_t i = 0; i < n; i++) {
		char *r = realpath(dirs[i], NULL);
		struct stat st;
		struct statfs sf;
		struct statvfs sv;
		const char *kind;

		if (!r) {
			if (errno == ENOENT || errno == ENOTDIR)
				return refuse(err, errlen, -EINVAL, "try directory '%s' does not exist", dirs[i]);
			return refuse(err, errlen, -EINVAL, "try directory '%s': %s", dirs[i], go_strerror(errno));
		}
		free(dirs[i]);
		dirs[i] = r;
		if (stat(r, &st) < 0 || !S_ISDIR(st.st_mode))
			return refuse(err, errlen, -EINVAL, "try directory '%s' is not a directory", r);
		if (strcmp(r, "/") == 0)
			return refuse(err, errlen, -EINVAL,
				      "the root directory cannot be a try directory: name the directories the command "
				      "works in");
		if (statfs(r, &sf) == 0 && (kind = remote_kind(sf.f_type)))
			return refuse(err, errlen, -EOPNOTSUPP,
				      "try directory %s is on %s, which overlayfs cannot take as its lower layer here",
				      r, kind);
		h->uid[i] = st.st_uid;
		h->gid[i] = st.st_gid;
		h->mode[i] = st.st_mode;
		if (statvfs(r, &sv) == 0) {
			if (sv.f_flag & ST_NOSUID) {
				h->attrs[i] |= K_MOUNT_ATTR_NOSUID;
				h->msflags[i] |= MS_NOSUID;
			}
			if (sv.f_flag & ST_NODEV) {
				h->attrs[i] |= K_MOUNT_ATTR_NODEV;
				h->msflags[i] |= MS_NODEV;
			}
			if (sv.f_flag & ST_NOEXEC) {
				h->attrs[i] |= K_MOUNT_ATTR_NOEXEC;
				h->msflags[i] |= MS_NOEXEC;
			}
		}
	}
	for (size_t i = 0; i < n; i++) {
		for (size_t j = 0; j < n; j++) {
			size_t l = strlen(dirs[j]);

			if (i == j)
				continue;
			if (strcmp(dirs[i], dirs[j]) == 0)
				return refuse(err, errlen, -EINVAL, "try directory %s is named twice", dirs[i]);
			if (strncmp(dirs[i], dirs[j], l) == 0 && dirs[i][l] == '/')
				return refuse(err, errlen, -EINVAL, "try directory %s lies inside %s: name one of them",
					      dirs[i], dirs[j]);
		}
	}
	return 0;
}

static int explain(const struct helper *h, char *err, size_t errlen)
{
	const char *dir = h->which < h->n ? h->dirs[h->which] : "";
	int e = h->err;

	switch (h->stage) {
	case ST_SLAVE:
		if (e == EINVAL)
			return refuse(err, errlen, -EOPNOTSUPP,
				      "a try needs a private mount namespace: envd's root is not a mount point (a "
				      "chroot into a directory that is not one)");
		return refuse(err, errlen, -EOPNOTSUPP, "a try needs a private mount namespace: %s", go_strerror(e));
	case ST_OPEN_DIR:
	case ST_OPEN_SUB:
		return refuse(err, errlen, e == ENOENT ? -EINVAL : -EOPNOTSUPP, "try directory %s: %s", dir,
			      go_strerror(e));
	case ST_TMPFS:
		return refuse(err, errlen, -EOPNOTSUPP, "cannot make the try's layer (a tmpfs on %s): %s",
			      TRYLAYER_STAGE, go_strerror(e));
	case ST_LAYOUT:
		return refuse(err, errlen, -EOPNOTSUPP, "cannot make the try's layer: %s", go_strerror(e));
	case ST_OVERLAY:
		if (e == ENODEV)
			return refuse(err, errlen, -EOPNOTSUPP, "overlayfs is not available in this kernel");
		if (h->kmsg[0])
			return refuse(err, errlen, -EOPNOTSUPP,
				      "overlayfs refuses %s as its lower layer: %s (%s)", dir,
				      h->kmsg[0] && h->kmsg[1] == ' ' ? h->kmsg + 2 : h->kmsg, go_strerror(e));
		return refuse(err, errlen, -EOPNOTSUPP,
			      "overlayfs refuses %s as its lower layer: %s (the kernel log says why)", dir,
			      go_strerror(e));
	case ST_BIND:
		return refuse(err, errlen, -EOPNOTSUPP, "cannot show the mounts below %s in the try: %s", dir,
			      go_strerror(e));
	default:
		return refuse(err, errlen, -EOPNOTSUPP, "cannot make the try's mount namespace: %s", go_strerror(e));
	}
}

static void helper_close_paths(struct helper *h)
{
	for (size_t i = 0; i < h->n; i++) {
		if (h->lfd[i] >= 0)
			close(h->lfd[i]);
		for (size_t j = 0; j < h->n_sub[i]; j++) {
			if (h->sfd[i][j] >= 0)
				close(h->sfd[i][j]);
			free(h->sub[i][j]);
		}
	}
}

int trylayer_build(char **dirs, size_t n, uint64_t max_bytes, struct trylayer *l, char *err, size_t errlen)
{
	struct helper *h = calloc(1, sizeof(*h));
	char *stack = NULL;
	sigset_t all, old;
	pid_t pid;
	int rc, st;

	l->ns_fd = l->root_fd = l->chroot_fd = -1;
	if (!h || n > TRYLAYER_DIRS_MAX || !(stack = aligned_alloc(16, HELPER_STACK))) {
		free(h);
		free(stack);
		return n > TRYLAYER_DIRS_MAX ? refuse(err, errlen, -EINVAL, "a try names at most %d directories",
						      TRYLAYER_DIRS_MAX)
					     : refuse(err, errlen, -ENOMEM, "%s", go_strerror(ENOMEM));
	}
	h->n = n;
	h->root_fd = h->ns_fd = h->chroot_fd = -1;
	for (size_t i = 0; i < TRYLAYER_DIRS_MAX; i++) {
		h->lfd[i] = -1;
		for (size_t j = 0; j < TRYLAYER_SUBMOUNTS_MAX; j++)
			h->sfd[i][j] = -1;
	}
	if ((rc = check_dirs(dirs, n, h, err, errlen)) < 0)
		goto out;
	for (size_t i = 0; i < n; i++) {
		h->dirs[i] = dirs[i];
		if ((rc = submounts(dirs[i], h->sub[i], &h->n_sub[i], err, errlen)) < 0)
			goto out;
	}
	snprintf(h->tmpfs_opts, sizeof(h->tmpfs_opts), "size=%llu,mode=0700", (unsigned long long)max_bytes);
	if (mkdir(TRYLAYER_STAGE, 0700) < 0 && errno != EEXIST) {
		rc = refuse(err, errlen, -EOPNOTSUPP, "cannot make %s: %s", TRYLAYER_STAGE, go_strerror(errno));
		goto out;
	}
	/* No handler of ours may run on the helper's borrowed stack; no
	   exit signal: libev's reaper leaves it to us (__WCLONE). */
	sigfillset(&all);
	sigprocmask(SIG_SETMASK, &all, &old);
	pid = clone(helper_main, stack + HELPER_STACK, CLONE_NEWNS | CLONE_VM | CLONE_VFORK | CLONE_FILES, h);
	rc = pid < 0 ? -errno : 0;
	sigprocmask(SIG_SETMASK, &old, NULL);
	if (rc < 0) {
		rc = refuse(err, errlen, -EOPNOTSUPP, "a try needs a private mount namespace: clone: %s",
			    go_strerror(-rc));
		goto out;
	}
	while (waitpid(pid, &st, __WCLONE) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || h->stage != ST_NONE) {
		if (h->stage == ST_NONE) {
			h->stage = ST_NS;
			h->err = EIO;
		}
		rc = explain(h, err, errlen);
		if (h->root_fd >= 0)
			close(h->root_fd);
		if (h->ns_fd >= 0)
			close(h->ns_fd);
		if (h->chroot_fd >= 0)
			close(h->chroot_fd);
		goto out;
	}
	l->ns_fd = h->ns_fd;
	l->root_fd = h->root_fd;
	l->chroot_fd = h->chroot_fd;
	rc = 0;
out:
	helper_close_paths(h);
	free(h);
	free(stack);
	return rc;
}

int trylayer_upper(const struct trylayer *l, size_t i)
{
	char p[32];
	int fd;

	snprintf(p, sizeof(p), "%zu/u", i);
	fd = openat(l->root_fd, p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

uint64_t trylayer_used(const struct trylayer *l)
{
	struct statfs sf;

	if (l->root_fd < 0 || fstatfs(l->root_fd, &sf) < 0)
		return 0;
	return (uint64_t)(sf.f_blocks - sf.f_bfree) * (uint64_t)sf.f_bsize;
}

/* The processes whose mount namespace is ino: signalled; how many. */
static int kill_in(ino_t ino)
{
	char want[64], p[64], got[64];
	DIR *d = opendir("/proc");
	struct dirent *de;
	int n = 0;

	if (!d)
		return 0;
	snprintf(want, sizeof(want), "mnt:[%llu]", (unsigned long long)ino);
	while ((de = readdir(d))) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);
		ssize_t l;

		if (pid <= 0 || *end || pid == getpid())
			continue;
		snprintf(p, sizeof(p), "/proc/%ld/ns/mnt", pid);
		l = readlink(p, got, sizeof(got) - 1);
		if (l <= 0)
			continue;
		got[l] = '\0';
		if (strcmp(got, want) == 0 && kill((pid_t)pid, SIGKILL) == 0)
			n++;
	}
	closedir(d);
	return n;
}

int trylayer_kill(const struct trylayer *l, double wait_s)
{
	struct stat st;
	struct timespec t0, now, nap = { 0, 5 * 1000 * 1000 };
	int left;

	if (l->ns_fd < 0 || fstat(l->ns_fd, &st) < 0)
		return 0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while ((left = kill_in(st.st_ino)) > 0) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		if ((double)(now.tv_sec - t0.tv_sec) + (double)(now.tv_nsec - t0.tv_nsec) / 1e9 > wait_s)
			return left;
		nanosleep(&nap, NULL);
	}
	return 0;
}

void trylayer_close(struct trylayer *l)
{
	if (l->ns_fd >= 0)
		close(l->ns_fd);
	if (l->root_fd >= 0)
		close(l->root_fd);
	if (l->chroot_fd >= 0)
		close(l->chroot_fd);
	l->ns_fd = l->root_fd = l->chroot_fd = -1;
}
