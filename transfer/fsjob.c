/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsjob.c - mounts of open files, closes off the loop (see fsjob.h).
 */
#include "transfer/fsjob.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/log.h"
#include "base/loop.h"
#include "base/worker.h"

bool fsjob_fstype_local(const char *t)
{
	static const char *const local[] = {
		"ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "ramfs", "overlay", "f2fs",
		"vfat", "exfat", "squashfs", "erofs", "iso9660", "devtmpfs",
	};

	for (size_t i = 0; i < sizeof(local) / sizeof(local[0]); i++)
		if (strcmp(t, local[i]) == 0)
			return true;
	return false;
}

/* The fstype of mount `id` from mountinfo ("... - fstype source opts"). */
static int mount_fstype(unsigned long id, char *out, size_t outlen)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[4096];
	int rc = -ENOENT;

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		unsigned long mid;
		char *sep;

		if (sscanf(line, "%lu", &mid) != 1 || mid != id)
			continue;
		sep = strstr(line, " - ");
		if (sep && sscanf(sep + 3, "%63s", out) == 1 && strlen(out) < outlen)
			rc = 0;
		break;
	}
	fclose(f);
	return rc;
}

/* The fstatfs magic numbers of the kinds fsjob_fstype_local names. */
static bool magic_local(unsigned long m)
{
	static const unsigned long local[] = {
		0xEF53,     /* ext2, ext3, ext4 */
		0x58465342, /* xfs */
		0x9123683E, /* btrfs */
		0x01021994, /* tmpfs, devtmpfs */
		0x858458F6, /* ramfs */
		0x794C7630, /* overlay */
		0xF2F52010, /* f2fs */
		0x4D44,     /* vfat */
		0x2011BAB0, /* exfat */
		0x73717368, /* squashfs */
		0xE0F5E1E2, /* erofs */
		0x9660,     /* iso9660 */
	};

	for (size_t i = 0; i < sizeof(local) / sizeof(local[0]); i++)
		if (m == local[i])
			return true;
	return false;
}

/* The mount id of fd by statx (Linux 5.8+): one call, nothing opened.
 * Returns 0, or -errno when the kernel cannot tell. */
static int statx_mnt_id(int fd, unsigned long *id)
{
#ifdef SYS_statx
	/* struct statx as the kernel lays it out (musl 1.2.3 has none):
	 * stx_mask at 0, stx_mnt_id at 144, 256 bytes in all. */
	uint64_t b[32] = { 0 };
	uint32_t mask;

	if (syscall(SYS_statx, fd, "", 0x1000 /* AT_EMPTY_PATH */ | 0x4000 /* AT_STATX_DONT_SYNC */,
		    0x1000 /* STATX_MNT_ID */, b) < 0)
		return -errno;
	memcpy(&mask, b, sizeof(mask));
	/* No mount has id 0: an emulator that passes the mask on but not
	 * the field (qemu-user) is not believed. */
	if (!(mask & 0x1000) || b[144 / 8] == 0)
		return -ENOSYS;
	*id = (unsigned long)b[144 / 8];
	return 0;
#else
	return -ENOSYS;
#endif
}

/* The key and kind of mount `id`, which open file `fd` is on: fstatfs's
 * magic (a local kind answers it from memory; any other, FUSE or NFS, may
 * ask its server, which is why this runs on a worker only), else the
 * fstype mountinfo gives. */
static int mount_of_id(int fd, unsigned long id, uint64_t *key, bool *local)
{
	char fstype[64];
	struct statfs sf;
	int rc;

	*key = id + 2; /* worker_path_key's numbering */
	if (fstatfs(fd, &sf) == 0) {
		*local = magic_local((unsigned long)sf.f_type);
		return 0;
	}
	if ((rc = mount_fstype(id, fstype, sizeof(fstype))) < 0)
		return rc;
	*local = fsjob_fstype_local(fstype);
	return 0;
}

int fsjob_fd_mount(int fd, uint64_t *key, bool *local)
{
	char p[64], line[256];
	unsigned long id = 0;
	bool found = false;
	FILE *f;

	*key = 1;
	*local = false;
	/* The fast way: statx for the mount; where it cannot tell, /proc's
	 * fdinfo. */
	if (statx_mnt_id(fd, &id) == 0)
		return mount_of_id(fd, id, key, local);
	snprintf(p, sizeof(p), "/proc/self/fdinfo/%d", fd);
	if (!(f = fopen(p, "re")))
		return -errno;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "mnt_id: %lu", &id) == 1) {
			found = true;
			break;
		}
	fclose(f);
	if (!found)
		return -ENOENT;
	return mount_of_id(fd, id, key, local);
}

/*
 * struct statx as the kernel lays it out (musl 1.2.3 has none); only the
 * fields read here are named.
 */
struct kstatx {
	uint32_t mask, blksize;
	uint64_t attributes;
	uint32_t nlink, uid, gid;
	uint16_t mode, spare0;
	uint64_t ino, size, blocks, attributes_mask;
	struct { int64_t sec; uint32_t nsec; int32_t reserved; } atime, btime, ctime, mtime;
	uint32_t rdev_major, rdev_minor, dev_major, dev_minor;
	uint64_t mnt_id;
	uint64_t spare[13];
};
_Static_assert(sizeof(struct kstatx) == 256, "struct statx is 256 bytes");
_Static_assert(offsetof(struct kstatx, mnt_id) == 144, "stx_mnt_id at 144");

#define STATX_BASIC 0x7ffu      /* STATX_BASIC_STATS */
#define STATX_MNT_ID_OLD 0x1000u /* STATX_MNT_ID: reused after unmount */
#define STATX_MNT_ID_UNIQ 0x4000u /* STATX_MNT_ID_UNIQUE: never reused */

/* What this thread learnt of mounts by their unique id: the key (by the
 * reusable id, worker_path_key's numbering) and the kind. A unique id
 * never names another mount, so an entry never goes stale. */
#define MOUNT_MEMO 8
static _Thread_local struct mount_memo {
	uint64_t uniq, key;
	bool local;
} memo[MOUNT_MEMO];
static _Thread_local unsigned memo_next;

static void statx_to_stat(const struct kstatx *x, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_dev = makedev(x->dev_major, x->dev_minor);
	st->st_ino = x->ino;
	st->st_mode = x->mode;
	st->st_nlink = x->nlink;
	st->st_uid = x->uid;
	st->st_gid = x->gid;
	st->st_rdev = makedev(x->rdev_major, x->rdev_minor);
	st->st_size = (off_t)x->size;
	st->st_blksize = x->blksize;
	st->st_blocks = (blkcnt_t)x->blocks;
	st->st_atim = (struct timespec){ x->atime.sec, x->atime.nsec };
	st->st_mtim = (struct timespec){ x->mtime.sec, x->mtime.nsec };
	st->st_ctim = (struct timespec){ x->ctime.sec, x->ctime.nsec };
}

int fsjob_fd_stat(int fd, struct stat *st, uint64_t *key, bool *local)
{
#ifdef SYS_statx
	struct kstatx x;

	memset(&x, 0, sizeof(x));
	if (syscall(SYS_statx, fd, "", 0x1000 /* AT_EMPTY_PATH */, STATX_BASIC | STATX_MNT_ID_UNIQ, &x) == 0 &&
	    (x.mask & STATX_BASIC) == STATX_BASIC) {
		statx_to_stat(&x, st);
		if ((x.mask & STATX_MNT_ID_UNIQ) && x.mnt_id) {
			for (unsigned i = 0; i < MOUNT_MEMO; i++) {
				if (memo[i].uniq == x.mnt_id) {
					*key = memo[i].key;
					*local = memo[i].local;
					return 0;
				}
			}
			uint64_t uniq = x.mnt_id;
			if (fsjob_fd_mount(fd, key, local) == 0) {
				memo[memo_next % MOUNT_MEMO] = (struct mount_memo){ uniq, *key, *local };
				memo_next++;
			}
			return 0;
		}
		/* An older kernel gave the reusable id: the key, and its kind
		 * asked anew (an id may be another mount's by now). A mount id
		 * of 0 (qemu-user passes the mask on without the field) is not
		 * believed. */
		if ((x.mask & STATX_MNT_ID_OLD) && x.mnt_id) {
			*local = false;
			mount_of_id(fd, (unsigned long)x.mnt_id, key, local);
			return 0;
		}
		fsjob_fd_mount(fd, key, local);
		return 0;
	}
#endif
	if (fstat(fd, st) < 0) {
		*key = 1;
		*local = false;
		return -errno;
	}
	fsjob_fd_mount(fd, key, local);
	return 0;
}

/* --- closes and releases --- */

static void close_fd(void *arg)
{
	close((int)(intptr_t)arg);
}

static void release_done(void *arg);

/* Releases the pool refused (full): retried from a timer. */
static struct {
	struct pending_release {
		void (*fn)(void *);
		void *arg;
		uint64_t key;
	} *v;
	size_t n, cap;
	ev_timer retry;
	bool timer_init;
	size_t in_flight;
} rel;

static int release_submit(const struct pending_release *p)
{
	struct worker_req req = { .work = p->fn, .done = release_done, .arg = p->arg, .key = p->key };
	int rc = worker_run(&req);

	if (rc == 0)
		rel.in_flight++;
	return rc;
}

static void release_done(void *arg)
{
	rel.in_flight--;
}

static void release_retry(struct ev_loop *loop, ev_timer *w, int revents)
{
	size_t k = 0;

	for (size_t i = 0; i < rel.n; i++)
		if (release_submit(&rel.v[i]) < 0)
			rel.v[k++] = rel.v[i];
	rel.n = k;
	if (!rel.n)
		ev_timer_stop(loop, w);
}

void fsjob_release(void (*fn)(void *), void *arg, uint64_t key)
{
	struct pending_release p = { fn, arg, key };

	if (release_submit(&p) == 0)
		return;
	if (rel.n == rel.cap) {
		size_t nc = rel.cap ? rel.cap * 2 : 16;
		struct pending_release *nv = realloc(rel.v, nc * sizeof(*nv));
		if (!nv) {
			/* Nothing else left: what stays held is better than a loop
			 * that stops on a hung mount. */
			log_error("files", "fsjob_release: out of memory, a release is dropped");
			return;
		}
		rel.v = nv;
		rel.cap = nc;
	}
	rel.v[rel.n++] = p;
	if (!rel.timer_init) {
		ev_timer_init(&rel.retry, release_retry, 0.5, 0.5);
		rel.timer_init = true;
	}
	if (!ev_is_active(&rel.retry))
		ev_timer_again(envd_loop, &rel.retry);
}

void fsjob_close(int fd, uint64_t key, bool local)
{
	if (fd < 0)
		return;
	if (local)
		close(fd);
	else
		fsjob_release(close_fd, (void *)(intptr_t)fd, key);
}

size_t fsjob_pending(void)
{
	return rel.n + rel.in_flight;
}

void fsjob_timeout_msg(char *out, size_t len, double secs, const char *path)
{
	snprintf(out, len, WORKER_TIMEOUT_FMT, secs, path);
}

void fsjob_busy_msg(char *out, size_t len, const char *path)
{
	snprintf(out, len, "filesystem worker queue is full, retry later: %s", path);
}
