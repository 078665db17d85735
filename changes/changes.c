/* SPDX-License-Identifier: Apache-2.0 */
/*
 * changes.c - the change journal fed by fanotify, or by recursive inotify
 * where fanotify is unavailable (changes.h).
 *
 * Threads: the reader thread owns the fanotify group's reading, the mount
 * table (fsid -> descriptor for open_by_handle_at), the inotify watch tree
 * (changes/inotree.h) and every syscall on a path. It hands resolved batches to the loop through a locked list and an
 * ev_async; the loop owns the journal. The command registry (pid and
 * cgroup of each command, for attribution) is written by the loop and
 * read by the thread under the same lock.
 *
 * Barriers: a caller that must see every change made before now (a
 * Changes call, a command's end) asks for a barrier; the thread answers it
 * with the first batch it publishes after reading the group empty, so the
 * answer includes everything the kernel had queued when it was asked.
 */
#include "changes/changes.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/fanotify.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "base/loop.h"
#include "base/state.h"
#include "base/users.h"
#include "changes/inotree.h"
#include "changes/journal.h"
#include "process/process.h"
#include "proto/pbjson.h"
#include "base/uptmp.h"

size_t changes_max_paths = 200000;
enum changes_source changes_source = CHANGES_SOURCE_AUTO;
size_t changes_inotify_watches;

/* A reply without a limit stops here (the rest is paged). */
#define CHANGES_PAGE_MAX 10000
/* An end event carries at most this many changes (then `overflow`). */
#define CMD_CHANGES_MAX 1000
/* Resolved events waiting for the loop before the thread drops (gap). */
#define PENDING_MAX (1u << 20)
/* A barrier is answered within this, caught up or not. */
#define BARRIER_TIMEOUT_S 5.0
#define MOUNTS_MAX 256
/* How long a writer that is gone may wait for the pids of spawns in flight. */
#define PID_WAIT_MS 200
/* Working directories of tracked commands watched with inotify, at most. */
#define CWD_ROOTS_MAX 64
/* A tracked command's cwd is watched a moment after the command started:
 * entries changed from this long before its registration are its changes. */
#define CWD_SLACK_NS 50000000LL

/* ---- one batch of resolved events, thread -> loop ---- */

struct batch {
	struct batch *next;
	struct journal_event *ev;
	size_t *path_off; /* offsets into strs, turned into ev[i].path on the loop */
	size_t n, cap;
	char *strs;
	size_t slen, scap;
	bool gap_before;    /* events were lost before these */
	uint64_t barrier;   /* barriers up to this one are answered by this batch */
};

struct mnt {
	uint64_t dev;
	__kernel_fsid_t fsid;
	int fd;           /* O_PATH of the mount point, for open_by_handle_at */
	bool marked;
	bool net;         /* a network or FUSE filesystem */
	char *point;
	char *why;        /* not tracked: why (NULL when tracked) */
};

struct reg {
	uint32_t serial;
	pid_t pid;
	char *cg;         /* cgroup leaf's path, or NULL */
	int64_t t_ns;     /* when registered (wall clock) */
};

/* A directory the loop asks the thread to watch with inotify (a tracked command's cwd). */
struct rootreq {
	struct rootreq *next;
	int64_t since_ns;
	char path[];
};

static struct {
	struct journal j;
	bool on;
	int fan_fd;
	int wake_fd;          /* eventfd: barrier, rescan or stop */
	pthread_t thread;
	bool thread_started;
	ev_async async;
	ev_timer barrier_timer;

	pthread_mutex_t mu;   /* guards the fields below */
	pthread_cond_t pid_cv; /* a registered command got its pid, or left */
	struct batch *out_head, *out_tail;
	struct batch *spare;  /* used batches back from the loop, for reuse */
	size_t n_spare;
	size_t out_events;
	bool lost;            /* events dropped since the last batch */
	struct reg *regs;
	size_t n_regs, cap_regs;
	char **not_tracked;   /* mount points, a copy for the loop */
	size_t n_not_tracked;
	char **ino_roots;     /* directories inotify watches, a copy for the loop */
	size_t n_ino_roots;
	struct rootreq *root_reqs;
	bool stop;

	_Atomic uint64_t barrier_req;
	uint64_t barrier_done;    /* loop */
	struct waiter *waiters;   /* loop */
	uint32_t next_serial;     /* loop */

	/* thread-only */
	struct mnt mnts[MOUNTS_MAX];
	size_t n_mnts;
	_Atomic bool rescan;
	int64_t last_scan_ns;
	struct batch *cur;    /* the batch being filled */
	int ino_fd;
	struct inotree *ino;
	size_t n_cwd_roots;
	bool ino_said;        /* inotify_init1 failed: logged */
	bool cwd_said;        /* CWD_ROOTS_MAX reached: logged */

	/* the journal came from a hand-over record (with this group, or -1) */
	bool adopted;
	int adopt_fd;
} C = { .fan_fd = -1, .wake_fd = -1, .adopt_fd = -1, .ino_fd = -1, .mu = PTHREAD_MUTEX_INITIALIZER,
	.pid_cv = PTHREAD_COND_INITIALIZER };

/* ---- thread side ---- */

static int64_t wall_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static const char *const network_fs[] = { "nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "virtiofs", "ceph",
					  "glusterfs", "afs", "fuse", "fuseblk", NULL };
/* Kernel and pseudo filesystems: nothing a command's files live on. */
static const char *const pseudo_fs[] = { "proc", "sysfs", "cgroup", "cgroup2", "devpts", "mqueue", "debugfs",
					 "tracefs", "securityfs", "pstore", "bpf", "configfs", "fusectl",
					 "hugetlbfs", "autofs", "binfmt_misc", "nsfs", "efivarfs", "rpc_pipefs",
					 "selinuxfs", "devtmpfs", "ramfs", NULL };

static bool in_list(const char *s, const char *const *l)
{
	for (; *l; l++)
		if (strcmp(s, *l) == 0)
			return true;
	return false;
}

/* Undo mountinfo's octal escapes (\040 for a space) in place. */
static void unescape(char *s)
{
	char *o = s;
	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' && s[3] >= '0' &&
		    s[3] <= '7') {
			*o++ = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 | (s[3] - '0'));
			s += 3;
		} else {
			*o++ = *s;
		}
	}
	*o = '\0';
}

static struct mnt *mnt_by_dev(uint64_t dev)
{
	for (size_t i = 0; i < C.n_mnts; i++)
		if (C.mnts[i].dev == dev)
			return &C.mnts[i];
	return NULL;
}

/* Replace a list of paths the loop reads (under the lock) by `l` (n entries, owned). */
static void install_list(char ***list, size_t *n_list, char **l, size_t n)
{
	pthread_mutex_lock(&C.mu);
	for (size_t i = 0; i < *n_list; i++)
		free((*list)[i]);
	free(*list);
	*list = l;
	*n_list = n;
	pthread_mutex_unlock(&C.mu);
}

static void publish_not_tracked(void)
{
	char **l = calloc(C.n_mnts + 1, sizeof(*l));
	size_t n = 0;

	if (!l)
		return;
	for (size_t i = 0; i < C.n_mnts; i++)
		if (C.mnts[i].why && (l[n] = strdup(C.mnts[i].point)))
			n++;
	install_list(&C.not_tracked, &C.n_not_tracked, l, n);
}

#define FAN_EVENTS \
	(FAN_CREATE | FAN_DELETE | FAN_MOVED_FROM | FAN_MOVED_TO | FAN_MODIFY | FAN_ATTRIB | FAN_ONDIR)

/*
 * Mark every local filesystem not marked yet (new mounts appear: a tmpfs,
 * an NFS export). One mark per superblock; the mount whose root is the
 * filesystem's root is the one handles are opened through.
 */
static void scan_mounts(void)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[8192];
	bool changed = false;

	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		unsigned maj, min;
		char root[4096], point[4096], *dash, fstype[256];

		if (sscanf(line, "%*u %*u %u:%u %4095s %4095s", &maj, &min, root, point) != 4)
			continue;
		dash = strstr(line, " - ");
		if (!dash || sscanf(dash + 3, "%255s", fstype) != 1)
			continue;
		unescape(point);
		unescape(root);
		uint64_t dev = (uint64_t)maj << 32 | min;
		if (in_list(fstype, pseudo_fs))
			continue;
		if (mnt_by_dev(dev) || C.n_mnts == MOUNTS_MAX)
			continue;
		bool net = in_list(fstype, network_fs) || strncmp(fstype, "fuse.", 5) == 0;
		if (!net && strcmp(root, "/") != 0)
			continue; /* a bind mount of part of a filesystem: its own mount comes too */
		struct mnt *m = &C.mnts[C.n_mnts];
		memset(m, 0, sizeof(*m));
		m->dev = dev;
		m->fd = -1;
		m->net = net;
		m->point = strdup(point);
		if (!m->point)
			break;
		C.n_mnts++;
		changed = true;
		if (net) {
			m->why = strdup(fstype);
			log_msg("info", "changes", "not tracked: %s (%s: network or FUSE filesystem)", point, fstype);
			continue;
		}
		if (C.fan_fd < 0) {
			/* inotify, below its roots only */
			m->why = strdup("no fanotify");
			continue;
		}
		m->fd = open(point, O_RDONLY | O_DIRECTORY | O_CLOEXEC); /* O_PATH is refused as mount_fd */
		struct statfs sf;
		if (m->fd < 0 || fstatfs(m->fd, &sf) < 0) {
			m->why = strdup(strerror(errno));
			continue;
		}
		memcpy(&m->fsid, &sf.f_fsid, sizeof(m->fsid));
		if (syscall(SYS_fanotify_mark, C.fan_fd, FAN_MARK_ADD | FAN_MARK_FILESYSTEM, (uint64_t)FAN_EVENTS,
			    AT_FDCWD, point) < 0) {
			int e = errno;
			m->why = strdup(strerror(e));
			log_msg("info", "changes", "not tracked: %s (%s: %s)", point, fstype, strerror(e));
			close(m->fd);
			m->fd = -1;
			continue;
		}
		m->marked = true;
		log_msg("info", "changes", "tracking %s (%s)", point, fstype);
	}
	fclose(f);
	if (changed)
		publish_not_tracked();
}

static int mount_fd_for(const __kernel_fsid_t *fsid)
{
	for (size_t i = 0; i < C.n_mnts; i++)
		if (C.mnts[i].marked && memcmp(&C.mnts[i].fsid, fsid, sizeof(*fsid)) == 0)
			return C.mnts[i].fd;
	return -1;
}

/* Per-batch cache: directory handle -> its path now. */
struct dcache {
	unsigned char key[MAX_HANDLE_SZ + 16];
	size_t klen;
	int fd;
	char path[PATH_MAX];
	bool ok;
};
#define DCACHE_N 64
static struct dcache dcache[DCACHE_N];
static size_t dcache_n;

static void dcache_clear(void)
{
	for (size_t i = 0; i < dcache_n; i++)
		if (dcache[i].fd >= 0)
			close(dcache[i].fd);
	dcache_n = 0;
}

/* The directory a handle names, opened O_PATH, with its path; NULL if gone. */
static struct dcache *resolve_dir(const __kernel_fsid_t *fsid, struct file_handle *fh)
{
	size_t klen = sizeof(*fsid) + sizeof(*fh) + fh->handle_bytes;
	unsigned char key[sizeof(dcache[0].key)];
	char link[64];
	struct dcache *d;

	if (klen > sizeof(key))
		return NULL;
	memcpy(key, fsid, sizeof(*fsid));
	memcpy(key + sizeof(*fsid), fh, sizeof(*fh) + fh->handle_bytes);
	for (size_t i = 0; i < dcache_n; i++)
		if (dcache[i].klen == klen && memcmp(dcache[i].key, key, klen) == 0)
			return dcache[i].ok ? &dcache[i] : NULL;
	if (dcache_n == DCACHE_N)
		dcache_clear();
	d = &dcache[dcache_n++];
	memcpy(d->key, key, klen);
	d->klen = klen;
	d->ok = false;
	d->fd = -1;
	int mfd = mount_fd_for(fsid);
	if (mfd < 0)
		return NULL;
	d->fd = open_by_handle_at(mfd, fh, O_PATH | O_CLOEXEC);
	if (d->fd < 0)
		return NULL; /* ESTALE: the directory is gone */
	snprintf(link, sizeof(link), "/proc/self/fd/%d", d->fd);
	ssize_t n = readlink(link, d->path, sizeof(d->path) - 1);
	if (n <= 0)
		return NULL;
	d->path[n] = '\0';
	if (n > 10 && strcmp(d->path + n - 10, " (deleted)") == 0)
		return NULL;
	d->ok = true;
	return d;
}

/* ---- attribution ---- */

struct pinfo {
	pid_t pid;
	uint8_t attr;
	uint32_t cmd;
};
#define PCACHE_N 32
static struct pinfo pcache[PCACHE_N];
static size_t pcache_n;

/* Is cgroup `cg` (as /proc/PID/cgroup names it) the leaf `leaf` (a full path) or below it? */
static bool cg_within(const char *cg, const char *leaf)
{
	/* Compare the tail of leaf after each '/', at least two components. */
	size_t cl = strlen(cg);
	for (const char *s = leaf; (s = strchr(s, '/')); s++) {
		const char *t = strchr(s + 1, '/');
		if (!t)
			break;
		size_t sl = strlen(s);
		if (cl >= sl && strncmp(cg, s, sl) == 0 && (cg[sl] == '\0' || cg[sl] == '/'))
			return true;
	}
	return false;
}

static bool read_small(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return false;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	return true;
}

/* Registry lookups; C.mu held. */
static const struct reg *reg_by_pid(pid_t pid)
{
	for (size_t i = 0; i < C.n_regs; i++)
		if (C.regs[i].pid == pid)
			return &C.regs[i];
	return NULL;
}

/*
 * A command is registered before its spawn and given its pid once the
 * spawning worker thread runs again after the exec. A short command can
 * write, exit and be reaped in between, so its events name a pid that is
 * gone and not registered yet. Before such a writer is called gone, wait
 * (C.mu held, at most PID_WAIT_MS) for the pids of the spawns begun within
 * the last second (the result is cached per pid, see attribute()).
 */
static const struct reg *reg_by_pid_pending(pid_t pid)
{
	struct timespec until;
	const struct reg *r;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_nsec += PID_WAIT_MS * 1000000L;
	until.tv_sec += until.tv_nsec / 1000000000L;
	until.tv_nsec %= 1000000000L;
	for (;;) {
		bool pending = false;

		if ((r = reg_by_pid(pid)))
			return r;
		/* Only spawns begun within the last second: one stuck on a hung
		 * mount (pid unknown until its deadline) must not make every
		 * such writer wait. */
		int64_t recent = wall_ns() - 1000000000LL;
		for (size_t i = 0; i < C.n_regs && !pending; i++)
			pending = C.regs[i].pid <= 0 && C.regs[i].t_ns > recent;
		if (!pending || pthread_cond_timedwait(&C.pid_cv, &C.mu, &until) == ETIMEDOUT)
			return reg_by_pid(pid);
	}
}

static void attribute(pid_t pid, uint8_t *attr, uint32_t *cmd)
{
	char path[64], buf[1024];
	const struct reg *r;

	*cmd = 0;
	if (pid == getpid()) {
		*attr = JA_ENVD;
		return;
	}
	for (size_t i = 0; i < pcache_n; i++)
		if (pcache[i].pid == pid) {
			*attr = pcache[i].attr;
			*cmd = pcache[i].cmd;
			return;
		}
	*attr = JA_OTHER;
	pthread_mutex_lock(&C.mu);
	r = reg_by_pid(pid);
	if (r) {
		*attr = JA_BY;
		*cmd = r->serial;
	}
	pthread_mutex_unlock(&C.mu);
	if (*attr == JA_BY)
		goto out;
	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	if (!read_small(path, buf, sizeof(buf))) {
		*attr = JA_GONE;
		pthread_mutex_lock(&C.mu);
		r = reg_by_pid_pending(pid);
		if (r) {
			*attr = JA_BY;
			*cmd = r->serial;
		}
		pthread_mutex_unlock(&C.mu);
		goto out;
	}
	/* cgroup2: "0::/path" */
	char *cg = strstr(buf, "0::");
	if (cg) {
		cg += 3;
		cg[strcspn(cg, "\n")] = '\0';
		pthread_mutex_lock(&C.mu);
		for (size_t i = 0; i < C.n_regs; i++)
			if (C.regs[i].cg && cg_within(cg, C.regs[i].cg)) {
				*attr = JA_BY;
				*cmd = C.regs[i].serial;
				break;
			}
		pthread_mutex_unlock(&C.mu);
		if (*attr == JA_BY)
			goto out;
	}
	/* Without cgroups: the parent chain, while it is still there. */
	pid_t p = pid;
	for (int depth = 0; depth < 64 && p > 1; depth++) {
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)p);
		if (!read_small(path, buf, sizeof(buf)))
			break;
		char *rp = strrchr(buf, ')');
		int ppid;
		if (!rp || sscanf(rp + 1, " %*c %d", &ppid) != 1)
			break;
		p = ppid;
		pthread_mutex_lock(&C.mu);
		r = reg_by_pid(p);
		if (r) {
			*attr = JA_BY;
			*cmd = r->serial;
		}
		pthread_mutex_unlock(&C.mu);
		if (r)
			break;
	}
out:
	if (pcache_n < PCACHE_N)
		pcache[pcache_n++] = (struct pinfo){ pid, *attr, *cmd };
}

/* ---- batches ---- */

/*
 * Batches are made on the thread and consumed on the loop. Their buffers
 * go back to the thread for the next batches: freed on the loop, musl's
 * allocator would hand their pages to the kernel (an madvise each, with a
 * TLB shoot-down on every processor) for every batch, i.e. on every burst
 * of changes anywhere on the machine. A few are kept, of a bounded size.
 */
#define SPARE_MAX 16
#define SPARE_EVENTS_MAX 4096
#define SPARE_STRS_MAX (256 * 1024)

static struct batch *batch_new(void)
{
	struct batch *b;

	pthread_mutex_lock(&C.mu);
	b = C.spare;
	if (b) {
		C.spare = b->next;
		C.n_spare--;
	}
	pthread_mutex_unlock(&C.mu);
	if (!b)
		return calloc(1, sizeof(struct batch));
	b->next = NULL;
	b->n = b->slen = 0;
	b->gap_before = false;
	b->barrier = 0;
	return b;
}

static void batch_free(struct batch *b)
{
	if (!b)
		return;
	free(b->ev);
	free(b->path_off);
	free(b->strs);
	free(b);
}

/* Loop: a consumed batch goes back to the thread, or is freed. */
static void batch_recycle(struct batch *b)
{
	if (b->cap <= SPARE_EVENTS_MAX && b->scap <= SPARE_STRS_MAX) {
		pthread_mutex_lock(&C.mu);
		if (C.n_spare < SPARE_MAX) {
			b->next = C.spare;
			C.spare = b;
			C.n_spare++;
			b = NULL;
		}
		pthread_mutex_unlock(&C.mu);
	}
	batch_free(b);
}

static int batch_add(struct batch *b, const struct journal_event *ev, const char *path)
{
	size_t pl = strlen(path) + 1;

	if (b->n == b->cap) {
		size_t nc = b->cap ? b->cap * 2 : 256;
		struct journal_event *ne = realloc(b->ev, nc * sizeof(*ne));
		if (!ne)
			return -ENOMEM;
		b->ev = ne;
		size_t *no = realloc(b->path_off, nc * sizeof(*no));
		if (!no)
			return -ENOMEM;
		b->path_off = no;
		b->cap = nc;
	}
	if (b->slen + pl > b->scap) {
		size_t nc = b->scap ? b->scap * 2 : 16384;
		while (nc < b->slen + pl)
			nc *= 2;
		char *ns = realloc(b->strs, nc);
		if (!ns)
			return -ENOMEM;
		b->strs = ns;
		b->scap = nc;
	}
	memcpy(b->strs + b->slen, path, pl);
	b->ev[b->n] = *ev;
	b->path_off[b->n] = b->slen;
	b->slen += pl;
	b->n++;
	return 0;
}

/* Hand a batch to the loop (or drop it, and say so, when the loop is far behind). */
static void publish(struct batch *b)
{
	pthread_mutex_lock(&C.mu);
	if (C.out_events + b->n > PENDING_MAX) {
		C.lost = true;
		b->n = 0; /* keep the barrier answer, drop the events */
	}
	/* The loop has not taken the last one yet: add to it rather than
	 * queue one more (a busy machine makes a batch per read). */
	struct batch *t = C.out_tail;
	if (t && !C.lost && b->n <= 256 && t->n + b->n <= SPARE_EVENTS_MAX) {
		size_t k = 0, n0 = t->n, slen0 = t->slen;
		for (; k < b->n; k++)
			if (batch_add(t, &b->ev[k], b->strs + b->path_off[k]) < 0)
				break;
		if (k == b->n) {
			C.out_events += b->n;
			if (b->barrier > t->barrier)
				t->barrier = b->barrier;
			if (C.n_spare < SPARE_MAX && b->cap <= SPARE_EVENTS_MAX && b->scap <= SPARE_STRS_MAX) {
				b->next = C.spare;
				C.spare = b;
				C.n_spare++;
				b = NULL;
			}
			pthread_mutex_unlock(&C.mu);
			batch_free(b);
			ev_async_send(envd_loop, &C.async);
			return;
		}
		t->n = n0; /* out of memory: undo, b goes as it is */
		t->slen = slen0;
	}
	b->gap_before = C.lost;
	C.lost = false;
	C.out_events += b->n;
	if (C.out_tail)
		C.out_tail->next = b;
	else
		C.out_head = b;
	C.out_tail = b;
	pthread_mutex_unlock(&C.mu);
	ev_async_send(envd_loop, &C.async);
}

static uint8_t ftype_of(mode_t m)
{
	return S_ISREG(m) ? JF_FILE : S_ISDIR(m) ? JF_DIR : S_ISLNK(m) ? JF_SYMLINK : JF_OTHER;
}

static unsigned kinds_of(uint64_t mask)
{
	unsigned k = 0;
	if (mask & FAN_CREATE)
		k |= JK_CREATE;
	if (mask & FAN_MOVED_TO)
		k |= JK_CREATE | JK_RENAME;
	if (mask & FAN_MOVED_FROM)
		k |= JK_REMOVE | JK_RENAME;
	if (mask & FAN_DELETE)
		k |= JK_REMOVE;
	if (mask & FAN_MODIFY)
		k |= JK_WRITE;
	if (mask & FAN_ATTRIB)
		k |= JK_ATTRIB;
	return k;
}

/* One event's directory record: resolve, stat, attribute, add. */
static void take_event(struct batch *b, const struct fanotify_event_metadata *md,
		       const struct fanotify_event_info_fid *fid, int64_t now)
{
	struct file_handle *fh = (struct file_handle *)fid->handle;
	const char *name = (const char *)(fh->f_handle + fh->handle_bytes);
	struct journal_event ev = { 0 };
	char path[PATH_MAX];
	struct stat st;
	struct dcache *d = resolve_dir(&fid->fsid, fh);

	if (!d)
		return; /* the directory is gone: its own deletion is reported by its parent */
	bool self = strcmp(name, ".") == 0 || !*name;
	/* An upload's temporary file: its rename shows on the target. */
	if (!self && uptmp_name_is(name, strlen(name), NULL))
		return;
	if (self)
		snprintf(path, sizeof(path), "%s", d->path);
	else if (snprintf(path, sizeof(path), "%s/%s", strcmp(d->path, "/") ? d->path : "", name) >=
		 (int)sizeof(path))
		return;
	ev.kinds = kinds_of(md->mask);
	ev.was_absent = (md->mask & (FAN_CREATE | FAN_MOVED_TO)) != 0;
	if (fstatat(d->fd, self ? "" : name, &st, AT_SYMLINK_NOFOLLOW | (self ? AT_EMPTY_PATH : 0)) == 0) {
		ev.exists = true;
		ev.ftype = ftype_of(st.st_mode);
		ev.size = st.st_size;
	} else {
		ev.exists = false;
		ev.ftype = md->mask & FAN_ONDIR ? JF_DIR : JF_UNKNOWN;
		ev.size = -1;
	}
	ev.time_ns = now;
	attribute(md->pid, &ev.attr, &ev.cmd);
	if (batch_add(b, &ev, path) < 0)
		C.lost = true;
	/* A directory moved: cached paths below it are stale now. */
	if ((md->mask & (FAN_MOVED_FROM | FAN_MOVED_TO)) && (md->mask & FAN_ONDIR))
		dcache_clear();
}

static void parse_events(struct batch *b, const char *buf, size_t len)
{
	int64_t now = wall_ns();
	struct fanotify_event_metadata md;

	/* Records are 4-byte aligned, the metadata's mask is 8 bytes: copy it out. */
	for (size_t pos = 0; pos + sizeof(md) <= len; pos += md.event_len) {
		const char *ev = buf + pos;
		memcpy(&md, ev, sizeof(md));
		if (md.event_len < sizeof(md) || pos + md.event_len > len)
			break;
		if (md.vers != FANOTIFY_METADATA_VERSION)
			continue;
		if (md.mask & FAN_Q_OVERFLOW) {
			C.lost = true;
			continue;
		}
		if (md.fd >= 0)
			close(md.fd);
		for (size_t off = md.metadata_len; off + sizeof(struct fanotify_event_info_header) <= md.event_len;) {
			const struct fanotify_event_info_header *h = (const void *)(ev + off);
			if (h->len == 0 || off + h->len > md.event_len)
				break;
			if (h->info_type == FAN_EVENT_INFO_TYPE_DFID_NAME || h->info_type == FAN_EVENT_INFO_TYPE_DFID)
				take_event(b, &md, (const struct fanotify_event_info_fid *)h, now);
			off += h->len;
		}
	}
}

/* ---- inotify, where fanotify does not see ---- */

static void publish_ino_roots(void);

static int ino_add_watch(void *ud, const char *path)
{
	int wd = inotify_add_watch(C.ino_fd, path,
				   IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_MODIFY | IN_ATTRIB |
					   IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW | IN_EXCL_UNLINK);
	return wd < 0 ? -errno : wd;
}

static void ino_rm_watch(void *ud, int wd)
{
	inotify_rm_watch(C.ino_fd, wd);
}

static int ino_list(void *ud, const char *path, int (*fn)(void *ctx, const char *name, bool descend), void *ctx)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct dirent *de;
	struct stat st;
	DIR *d;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !(d = fdopendir(fd))) {
		int e = errno;
		close(fd);
		return -e;
	}
	dev_t dev = st.st_dev;
	while ((de = readdir(d))) {
		bool descend = false;
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		/* Not into other mounts: fanotify may see them, or they may be
		 * network filesystems that could hold this thread. */
		if ((de->d_type == DT_DIR || de->d_type == DT_UNKNOWN) &&
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0)
			descend = S_ISDIR(st.st_mode) && st.st_dev == dev;
		if (fn(ctx, de->d_name, descend))
			break;
	}
	closedir(d);
	return 0;
}

/*
 * statx(2)'s record as far as the birth time: musl has no statx(), and
 * <linux/stat.h> clashes with its <sys/stat.h>. The kernel writes 256
 * bytes; the tail is room to spare.
 */
struct sx_time {
	int64_t sec;
	uint32_t nsec;
	int32_t reserved;
};
struct sx_rec {
	uint32_t mask, blksize;
	uint64_t attributes;
	uint32_t nlink, uid, gid;
	uint16_t mode, spare0;
	uint64_t ino, size, blocks, attributes_mask;
	struct sx_time atime, btime, ctime, mtime;
	uint64_t spare[48];
};
#define SX_BTIME 0x800u

/* When the filesystem keeps it, the path's birth time; else -1. */
static int64_t birth_ns(const char *path)
{
#ifdef SYS_statx
	struct sx_rec sx;
	memset(&sx, 0, sizeof(sx));
	if (syscall(SYS_statx, AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, SX_BTIME, &sx) == 0 && (sx.mask & SX_BTIME))
		return sx.btime.sec * 1000000000LL + sx.btime.nsec;
#endif
	return -1;
}

static void ino_change(void *ud, const char *path, unsigned kinds, bool appeared, bool dir, int64_t since_ns)
{
	struct journal_event ev = { 0 };
	struct stat st;

	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	if (uptmp_name_is(base, strlen(base), NULL))
		return; /* an upload's temporary file: its rename shows on the target */
	if (!C.cur) {
		C.lost = true;
		return;
	}
	ev.kinds = kinds;
	ev.was_absent = appeared;
	if (lstat(path, &st) == 0) {
		ev.exists = true;
		ev.ftype = ftype_of(st.st_mode);
		ev.size = st.st_size;
	} else {
		ev.ftype = dir ? JF_DIR : JF_UNKNOWN;
		ev.size = -1;
	}
	if (since_ns) {
		/* Found in the first listing of a command's cwd: a change of
		 * the command only if it changed since it started. */
		if (!ev.exists || (int64_t)st.st_ctim.tv_sec * 1000000000LL + st.st_ctim.tv_nsec < since_ns)
			return;
		int64_t born = birth_ns(path);
		if (born >= 0 && born < since_ns) {
			ev.kinds = JK_WRITE;
			ev.was_absent = false;
		}
	}
	ev.time_ns = wall_ns();
	ev.attr = JA_UNKNOWN; /* inotify names no writer */
	if (batch_add(C.cur, &ev, path) < 0)
		C.lost = true;
	if (C.cur->n >= 65536) {
		publish(C.cur);
		if (!(C.cur = batch_new()))
			C.lost = true;
	}
}

static void ino_lost(void *ud)
{
	C.lost = true;
}

static const struct inotree_ops ino_ops = { .add_watch = ino_add_watch, .rm_watch = ino_rm_watch, .list = ino_list };
static const struct inotree_sink ino_sink = { .change = ino_change, .lost = ino_lost };

/* Watches inotify may use: the flag, else half of the user's limit (the rest is for the user's own watchers). */
static size_t ino_budget(void)
{
	char buf[64];
	long long sys = 8192;

	if (read_small("/proc/sys/fs/inotify/max_user_watches", buf, sizeof(buf)) && atoll(buf) > 0)
		sys = atoll(buf);
	if (changes_inotify_watches)
		return changes_inotify_watches < (size_t)sys ? changes_inotify_watches : (size_t)sys;
	return sys > 1 ? (size_t)sys / 2 : 1;
}

static int ino_open(void)
{
	size_t budget = ino_budget();

	C.ino_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (C.ino_fd < 0) {
		int e = errno;
		if (!C.ino_said)
			log_msg("warn", "changes", "change journal: inotify unavailable (%s)", strerror(e));
		C.ino_said = true;
		return -e;
	}
	if (!(C.ino = inotree_new(&ino_ops, &ino_sink, budget))) {
		close(C.ino_fd);
		C.ino_fd = -1;
		return -ENOMEM;
	}
	log_msg("info", "changes", "inotify: up to %zu directories", budget);
	return 0;
}

/* The type of the filesystem mounted at or above `path` (mountinfo's longest match). */
static bool fstype_at(const char *path, char *fstype, size_t len)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[8192], point[4096], *dash;
	size_t best = 0;
	bool found = false;

	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%*u %*u %*u:%*u %*s %4095s", point) != 1 || !(dash = strstr(line, " - ")))
			continue;
		unescape(point);
		size_t l = strlen(point);
		bool within = strcmp(point, "/") == 0 ||
			      (strncmp(path, point, l) == 0 && (path[l] == '\0' || path[l] == '/'));
		char t[256];
		if (within && l >= best && sscanf(dash + 3, "%255s", t) == 1) {
			best = l;
			snprintf(fstype, len, "%s", t);
			found = true;
		}
	}
	fclose(f);
	return found;
}

/*
 * Watch the tree at `path` with inotify if fanotify does not see it: a
 * local filesystem without a mark. since_ns > 0: a tracked command's cwd
 * (see ino_change). Not "/" (all of it would be the whole budget).
 */
static void ino_add(const char *path, int64_t since_ns)
{
	char real[PATH_MAX], fstype[256];
	struct stat st;
	struct mnt *m;

	/* The mount table first, by the path's string alone: a cwd on a FUSE
	 * or NFS mount that hangs must not hold this thread (and with it the
	 * whole journal) in realpath or stat. */
	if (path[0] == '/' && fstype_at(path, fstype, sizeof(fstype)) &&
	    (in_list(fstype, pseudo_fs) || in_list(fstype, network_fs) || strncmp(fstype, "fuse.", 5) == 0))
		return;
	if (!realpath(path, real) || strcmp(real, "/") == 0 || stat(real, &st) < 0 || !S_ISDIR(st.st_mode))
		return;
	/* the mount table keys devices as mountinfo spells them, major:minor */
	if ((m = mnt_by_dev((uint64_t)major(st.st_dev) << 32 | minor(st.st_dev))) && (m->marked || m->net))
		return;
	if (fstype_at(real, fstype, sizeof(fstype)) &&
	    (in_list(fstype, pseudo_fs) || in_list(fstype, network_fs) || strncmp(fstype, "fuse.", 5) == 0))
		return;
	if (!C.ino && ino_open() < 0)
		return;
	if (since_ns && C.n_cwd_roots >= CWD_ROOTS_MAX) {
		if (!C.cwd_said)
			log_msg("warn", "changes", "inotify: %d working directories watched, no more (%s is not)",
				CWD_ROOTS_MAX, real);
		C.cwd_said = true;
		return;
	}
	int64_t t0 = wall_ns();
	size_t before = inotree_watches(C.ino);
	int rc = inotree_add_root(C.ino, real, since_ns);
	if (rc == 0) {
		if (since_ns)
			C.n_cwd_roots++;
		log_msg("info", "changes", "inotify: watching %s (%s): %zu directories in %.1f ms", real, fstype,
			inotree_watches(C.ino) - before, (double)(wall_ns() - t0) / 1e6);
		publish_ino_roots();
	} else if (rc < 0) {
		log_msg("warn", "changes", "inotify: cannot watch %s: %s", real, strerror(-rc));
	}
}

/* The home directories and /tmp. */
static void ino_default_roots(void)
{
	DIR *d;
	struct dirent *de;
	char path[PATH_MAX];

	ino_add("/root", 0);
	if ((d = opendir("/home"))) {
		while ((de = readdir(d)))
			if (de->d_name[0] != '.' && snprintf(path, sizeof(path), "/home/%s", de->d_name) < (int)sizeof(path))
				ino_add(path, 0);
		closedir(d);
	}
	ino_add("/tmp", 0);
}

static void ino_take_requests(void)
{
	struct rootreq *r;

	pthread_mutex_lock(&C.mu);
	r = C.root_reqs;
	C.root_reqs = NULL;
	pthread_mutex_unlock(&C.mu);
	while (r) {
		struct rootreq *next = r->next;
		ino_add(r->path, r->since_ns);
		free(r);
		r = next;
	}
}

static char ino_buf[64 * 1024] __attribute__((aligned(__alignof__(struct inotify_event))));

static void ino_drain(void)
{
	if (!C.ino)
		return;
	for (;;) {
		ssize_t n = read(C.ino_fd, ino_buf, sizeof(ino_buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n > 0) {
			inotree_feed(C.ino, ino_buf, (size_t)n);
			continue;
		}
		/* Empty. A move's second half is queued just after its first:
		 * look once more, briefly, before calling it a delete. */
		if (inotree_pending(C.ino)) {
			struct pollfd p = { .fd = C.ino_fd, .events = POLLIN };
			if (poll(&p, 1, 2) > 0)
				continue;
			inotree_flush(C.ino);
		}
		break;
	}
}

static void ino_root_copy(void *ud, const char *path)
{
	char ***v = ud;
	size_t n = 0;

	while ((*v)[n])
		n++;
	char **nv = realloc(*v, (n + 2) * sizeof(*nv));
	if (!nv)
		return;
	*v = nv;
	if ((nv[n] = strdup(path)))
		n++;
	nv[n] = NULL;
}

static void publish_ino_roots(void)
{
	char **l = calloc(1, sizeof(*l));
	size_t n = 0;

	if (!l)
		return;
	inotree_each_root(C.ino, ino_root_copy, &l);
	while (l[n])
		n++;
	install_list(&C.ino_roots, &C.n_ino_roots, l, n);
}

static char read_buf[256 * 1024] __attribute__((aligned(8)));

static void *reader_main(void *arg)
{
	struct pollfd pf[3] = { { .fd = C.fan_fd, .events = POLLIN },
				{ .fd = C.wake_fd, .events = POLLIN },
				{ .fd = -1, .events = POLLIN } };

	C.last_scan_ns = wall_ns();
	scan_mounts();
	/* Before the first batch: a barrier is answered only once the roots are watched. */
	if (changes_source != CHANGES_SOURCE_FANOTIFY)
		ino_default_roots();
	for (;;) {
		bool stop;
		pthread_mutex_lock(&C.mu);
		stop = C.stop;
		pthread_mutex_unlock(&C.mu);
		if (stop)
			break;
		pf[2].fd = C.ino_fd;
		if (poll(pf, 3, -1) < 0 && errno != EINTR)
			break;
		if (pf[1].revents & POLLIN) {
			uint64_t v;
			if (read(C.wake_fd, &v, sizeof(v)) < 0) {
				/* nothing to do: the flags below say why we were woken */
			}
		}
		/* New mounts are looked for when asked, at most once a second. */
		if (atomic_load(&C.rescan) && wall_ns() - C.last_scan_ns > 1000000000LL) {
			atomic_store(&C.rescan, false);
			C.last_scan_ns = wall_ns();
			scan_mounts();
		}
		uint64_t want = atomic_load(&C.barrier_req);
		if (!(C.cur = batch_new())) {
			C.lost = true;
			continue;
		}
		pcache_n = 0;
		if (changes_source != CHANGES_SOURCE_FANOTIFY)
			ino_take_requests();
		while (C.fan_fd >= 0 && C.cur) {
			ssize_t n = read(C.fan_fd, read_buf, sizeof(read_buf));
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				break;
			parse_events(C.cur, read_buf, (size_t)n);
			if (C.cur->n >= 65536) {
				publish(C.cur);
				pcache_n = 0;
				if (!(C.cur = batch_new()))
					C.lost = true;
			}
		}
		dcache_clear();
		ino_drain();
		if (C.cur) {
			C.cur->barrier = want;
			publish(C.cur);
			C.cur = NULL;
		}
	}
	return NULL;
}

static void wake_thread(void)
{
	uint64_t one = 1;
	if (write(C.wake_fd, &one, sizeof(one)) < 0) {
		/* the counter is full: the thread is awake anyway */
	}
}

/* ---- loop side ---- */

struct waiter {
	struct waiter *next;
	uint64_t id;
	ev_tstamp deadline;
	void (*fn)(void *ud, bool caught_up);
	void *ud;
};

static void fire_waiters(bool all)
{
	struct waiter **pp = &C.waiters;
	ev_tstamp now = ev_now(envd_loop);

	while (*pp) {
		struct waiter *w = *pp;
		bool done = w->id <= C.barrier_done;
		if (done || all || now >= w->deadline) {
			*pp = w->next;
			w->fn(w->ud, done);
			free(w);
		} else {
			pp = &w->next;
		}
	}
	if (!C.waiters)
		ev_timer_stop(envd_loop, &C.barrier_timer);
}

/* Call fn once every change made before now is in the journal (or after BARRIER_TIMEOUT_S). */
static int barrier(void (*fn)(void *ud, bool caught_up), void *ud)
{
	struct waiter *w = calloc(1, sizeof(*w));

	if (!w)
		return -ENOMEM;
	w->id = atomic_fetch_add(&C.barrier_req, 1) + 1;
	w->deadline = ev_now(envd_loop) + BARRIER_TIMEOUT_S;
	w->fn = fn;
	w->ud = ud;
	w->next = C.waiters;
	C.waiters = w;
	if (!ev_is_active(&C.barrier_timer)) {
		ev_timer_set(&C.barrier_timer, 0.5, 0.5);
		ev_timer_start(envd_loop, &C.barrier_timer);
	}
	wake_thread();
	return 0;
}

static void barrier_timer_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	fire_waiters(false);
}

static void on_async(struct ev_loop *loop, ev_async *a, int revents)
{
	struct batch *b;

	pthread_mutex_lock(&C.mu);
	b = C.out_head;
	C.out_head = C.out_tail = NULL;
	C.out_events = 0;
	pthread_mutex_unlock(&C.mu);
	while (b) {
		struct batch *next = b->next;
		if (b->gap_before)
			journal_gap(&C.j);
		for (size_t i = 0; i < b->n; i++) {
			b->ev[i].path = b->strs + b->path_off[i];
			journal_record(&C.j, &b->ev[i]);
		}
		if (b->barrier > C.barrier_done)
			C.barrier_done = b->barrier;
		batch_recycle(b);
		b = next;
	}
	fire_waiters(false);
}

/* ---- conversion to the wire ---- */

static const Filesystem__EventType kind_type[JK_N] = {
	FILESYSTEM__EVENT_TYPE__EVENT_TYPE_CREATE, FILESYSTEM__EVENT_TYPE__EVENT_TYPE_WRITE,
	FILESYSTEM__EVENT_TYPE__EVENT_TYPE_REMOVE, FILESYSTEM__EVENT_TYPE__EVENT_TYPE_RENAME,
	FILESYSTEM__EVENT_TYPE__EVENT_TYPE_CHMOD,
};

/*
 * In a command's end event a change nobody is named for (inotify names no
 * writer) happened "during" the command; in a Changes reply it says
 * nothing.
 */
static const char *attr_name(uint8_t a, bool in_cmd)
{
	switch (a) {
	case JA_BY:
		return "by";
	case JA_GONE:
		return "during";
	case JA_OTHER:
		return "other";
	case JA_ENVD:
		return "envd";
	case JA_UNKNOWN:
		return in_cmd ? "during" : "";
	default:
		return "";
	}
}

/* Command pid by serial (loop). */
struct cmd {
	struct cmd *next;
	uint32_t serial;
	pid_t pid;
	bool track;
	uint64_t since;
	struct process *p;
	void (*ready)(struct process *p);
	bool waiting;
	bool released_while_waiting;
	/* the end event's changes */
	Process__CommandChanges msg;
	Filesystem__Change *items;
	Filesystem__Change **ptrs;
	Filesystem__EventType *evs;
	Google__Protobuf__Timestamp *ts;
	char *paths;
	char since_tok[JOURNAL_TOKEN_LEN], until_tok[JOURNAL_TOKEN_LEN];
	bool filled;
};
static struct cmd *cmds;

static uint32_t pid_of_serial(uint32_t serial)
{
	for (struct cmd *c = cmds; c; c = c->next)
		if (c->serial == serial)
			return (uint32_t)__atomic_load_n(&c->pid, __ATOMIC_RELAXED);
	return 0;
}

/*
 * Wire form of n changes into caller-provided arrays: items[n], ptrs[n],
 * evs[n*JK_N], ts[n]; paths point into the journal (valid until the next
 * record) unless the caller copies them.
 */
static void to_wire(const struct journal_change *ch, size_t n, Filesystem__Change *items, Filesystem__Change **ptrs,
		    Filesystem__EventType *evs, Google__Protobuf__Timestamp *ts, bool in_cmd)
{
	static const Filesystem__FileType ft[] = {
		FILESYSTEM__FILE_TYPE__FILE_TYPE_UNSPECIFIED, FILESYSTEM__FILE_TYPE__FILE_TYPE_FILE,
		FILESYSTEM__FILE_TYPE__FILE_TYPE_DIRECTORY, FILESYSTEM__FILE_TYPE__FILE_TYPE_SYMLINK,
		FILESYSTEM__FILE_TYPE__FILE_TYPE_UNSPECIFIED,
	};
	for (size_t i = 0; i < n; i++) {
		const struct journal_entry *e = ch[i].e;
		Filesystem__Change *c = &items[i];

		filesystem__change__init(c);
		google__protobuf__timestamp__init(&ts[i]);
		c->path = (char *)e->path;
		c->type = (Filesystem__ChangeType)ch[i].type;
		c->file_type = ft[e->ftype < 5 ? e->ftype : 0];
		c->size = ch[i].exists ? e->size : -1;
		ts[i].seconds = e->time_ns / 1000000000LL;
		ts[i].nanos = (int32_t)(e->time_ns % 1000000000LL);
		c->time = &ts[i];
		c->events = &evs[i * JK_N];
		for (unsigned k = 0; k < JK_N; k++)
			if (ch[i].kinds & (1u << k))
				c->events[c->n_events++] = kind_type[k];
		c->attribution = (char *)attr_name(e->attr, in_cmd);
		if (e->attr == JA_BY)
			c->pid = pid_of_serial(e->cmd);
		ptrs[i] = c;
	}
}

/* ---- process tracker ---- */

static void *trk_begin(struct process *p, pid_t pid, const char *cgroup, bool track, const char *cwd)
{
	struct cmd *c = calloc(1, sizeof(*c));
	struct rootreq *rq = NULL;
	struct reg *nr;

	if (!c)
		return NULL;
	c->serial = ++C.next_serial;
	if (!c->serial)
		c->serial = ++C.next_serial;
	c->pid = pid;
	c->track = track;
	c->p = p;
	c->since = journal_checkpoint(&C.j);
	pthread_mutex_lock(&C.mu);
	if (C.n_regs == C.cap_regs) {
		size_t nc = C.cap_regs ? C.cap_regs * 2 : 16;
		nr = realloc(C.regs, nc * sizeof(*nr));
		if (nr) {
			C.regs = nr;
			C.cap_regs = nc;
		}
	}
	if (C.n_regs < C.cap_regs)
		C.regs[C.n_regs++] = (struct reg){ c->serial, pid, cgroup ? strdup(cgroup) : NULL, wall_ns() };
	/* Where fanotify does not see, the thread watches the cwd with inotify
	 * (a no-op when it is below a root already, or fanotify sees it). */
	if (track && cwd && *cwd && changes_source != CHANGES_SOURCE_FANOTIFY &&
	    (rq = malloc(sizeof(*rq) + strlen(cwd) + 1))) {
		strcpy(rq->path, cwd);
		rq->since_ns = wall_ns() - CWD_SLACK_NS;
		rq->next = C.root_reqs;
		C.root_reqs = rq;
	}
	pthread_mutex_unlock(&C.mu);
	if (rq)
		wake_thread();
	c->next = cmds;
	cmds = c;
	return c;
}

static void cmd_collect(struct cmd *c, bool caught_up)
{
	struct journal_query q;
	struct journal_result r;
	uint64_t until = journal_checkpoint(&C.j);

	journal_token(&C.j, c->since, c->since, c->since_tok);
	journal_token(&C.j, until, until, c->until_tok);
	process__command_changes__init(&c->msg);
	c->msg.since = c->since_tok;
	c->msg.until = c->until_tok;
	c->filled = true;
	journal_query_init(&q);
	q.base = q.cursor = c->since;
	q.by_cmd = c->serial;
	q.with_during = true;
	if (journal_run(&C.j, &q, &r) < 0) {
		c->msg.overflow = true;
		return;
	}
	c->msg.resync = r.resync || !caught_up;
	c->msg.overflow = c->msg.resync;
	/* "by" first, then "during"; at most CMD_CHANGES_MAX. */
	size_t n = 0, total = 0;
	struct journal_change *sorted = r.n ? calloc(r.n, sizeof(*sorted)) : NULL;
	if (r.n && !sorted) {
		c->msg.overflow = true;
		journal_result_free(&r);
		return;
	}
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < r.n; i++)
			if ((r.changes[i].e->attr == JA_BY) == (pass == 0))
				sorted[total++] = r.changes[i];
	n = total > CMD_CHANGES_MAX ? CMD_CHANGES_MAX : total;
	if (total > n)
		c->msg.overflow = true;
	size_t plen = 0;
	for (size_t i = 0; i < n; i++)
		plen += strlen(sorted[i].e->path) + 1;
	if (n) {
		c->items = calloc(n, sizeof(*c->items));
		c->ptrs = calloc(n, sizeof(*c->ptrs));
		c->evs = calloc(n * JK_N, sizeof(*c->evs));
		c->ts = calloc(n, sizeof(*c->ts));
		c->paths = malloc(plen);
		if (!c->items || !c->ptrs || !c->evs || !c->ts || !c->paths) {
			c->msg.overflow = true;
			n = 0;
		}
	}
	if (n) {
		to_wire(sorted, n, c->items, c->ptrs, c->evs, c->ts, true);
		/* The journal's strings move on: keep copies. */
		char *o = c->paths;
		for (size_t i = 0; i < n; i++) {
			size_t l = strlen(c->items[i].path) + 1;
			memcpy(o, c->items[i].path, l);
			c->items[i].path = o;
			o += l;
		}
		c->msg.changes = c->ptrs;
		c->msg.n_changes = n;
	}
	free(sorted);
	journal_result_free(&r);
}

static void cmd_barrier_done(void *ud, bool caught_up)
{
	struct cmd *c = ud;

	c->waiting = false;
	if (c->released_while_waiting) {
		free(c);
		return;
	}
	cmd_collect(c, caught_up);
	c->ready(c->p);
}

static void trk_end(void *h, struct process *p, void (*ready)(struct process *p))
{
	struct cmd *c = h;

	if (!c->track || c->filled) {
		ready(p);
		return;
	}
	c->ready = ready;
	c->waiting = true;
	if (barrier(cmd_barrier_done, c) < 0) {
		c->waiting = false;
		cmd_collect(c, false);
		ready(p);
	}
}

static void trk_fill(void *h, Process__ProcessEvent__EndEvent *end)
{
	struct cmd *c = h;

	if (c->track && c->filled)
		end->changes = &c->msg;
}

static void trk_release(void *h)
{
	struct cmd *c = h;

	for (struct cmd **pp = &cmds; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	pthread_mutex_lock(&C.mu);
	for (size_t i = 0; i < C.n_regs; i++)
		if (C.regs[i].serial == c->serial) {
			free(C.regs[i].cg);
			C.regs[i] = C.regs[--C.n_regs];
			break;
		}
	pthread_cond_broadcast(&C.pid_cv);
	pthread_mutex_unlock(&C.mu);
	free(c->items);
	free(c->ptrs);
	free(c->evs);
	free(c->ts);
	free(c->paths);
	if (c->waiting)
		c->released_while_waiting = true;
	else
		free(c);
}

/* The spawn's worker thread, as soon as the child has exec'd: events the
 * command causes from then on are its own (the loop learns the pid later). */
static void trk_set_pid(void *h, pid_t pid)
{
	struct cmd *c = h;

	pthread_mutex_lock(&C.mu);
	__atomic_store_n(&c->pid, pid, __ATOMIC_RELAXED);
	for (size_t i = 0; i < C.n_regs; i++)
		if (C.regs[i].serial == c->serial) {
			C.regs[i].pid = pid;
			break;
		}
	pthread_cond_broadcast(&C.pid_cv);
	pthread_mutex_unlock(&C.mu);
}

struct sync_req {
	void (*done)(void *ud);
	void *ud;
};

static void sync_done(void *ud, bool caught_up)
{
	struct sync_req r = *(struct sync_req *)ud;

	(void)caught_up;
	free(ud);
	r.done(r.ud);
}

static int trk_sync(void (*done)(void *ud), void *ud)
{
	struct sync_req *r = malloc(sizeof(*r));
	int rc;

	if (!r)
		return -ENOMEM;
	r->done = done;
	r->ud = ud;
	rc = barrier(sync_done, r);
	if (rc < 0)
		free(r);
	return rc;
}

static const struct process_tracker tracker = {
	.begin = trk_begin, .set_pid = trk_set_pid, .end = trk_end, .fill = trk_fill, .release = trk_release,
	.sync = trk_sync,
};

/* ---- queries (RPC and HTTP) ---- */

struct ask {
	struct rpc_call *call;   /* RPC: NULL once the client left */
	struct http_req *r;      /* HTTP: NULL once the client left */
	bool waiting;
	bool has_since;
	bool other_epoch;
	uint64_t base, cursor;
	char prefix[PATH_MAX];
	char **inc, **exc;
	size_t n_inc, n_exc;
	uint32_t limit;
};

static void ask_free(struct ask *a)
{
	for (size_t i = 0; i < a->n_inc; i++)
		free(a->inc[i]);
	for (size_t i = 0; i < a->n_exc; i++)
		free(a->exc[i]);
	free(a->inc);
	free(a->exc);
	free(a);
}

static bool under(const char *path, const char *prefix)
{
	size_t l = strlen(prefix);
	if (!*prefix || strcmp(prefix, "/") == 0)
		return true;
	return strncmp(path, prefix, l) == 0 && (path[l] == '\0' || path[l] == '/');
}

/* Build the reply; the caller encodes it, then calls reply_free. */
struct reply {
	Filesystem__ChangesResponse resp;
	struct journal_result r;
	Filesystem__Change *items;
	Filesystem__Change **ptrs;
	Filesystem__EventType *evs;
	Google__Protobuf__Timestamp *ts;
	char next[JOURNAL_TOKEN_LEN];
	char **nt, **ir;
};

static void reply_free(struct reply *rp)
{
	journal_result_free(&rp->r);
	free(rp->items);
	free(rp->ptrs);
	free(rp->evs);
	free(rp->ts);
	if (rp->nt)
		for (size_t i = 0; i < rp->resp.n_not_tracked; i++)
			free(rp->nt[i]);
	free(rp->nt);
	if (rp->ir)
		for (size_t i = 0; i < rp->resp.n_inotify_roots; i++)
			free(rp->ir[i]);
	free(rp->ir);
}

static int build_reply(struct ask *a, struct reply *rp)
{
	struct journal_query q;

	memset(rp, 0, sizeof(*rp));
	filesystem__changes_response__init(&rp->resp);
	if (!a->has_since) {
		uint64_t t = journal_checkpoint(&C.j);
		journal_token(&C.j, t, t, rp->next);
		rp->resp.next = rp->next;
	} else if (a->other_epoch) {
		uint64_t t = journal_checkpoint(&C.j);
		journal_token(&C.j, t, t, rp->next);
		rp->resp.next = rp->next;
		rp->resp.resync = true;
	} else {
		journal_query_init(&q);
		q.base = a->base;
		q.cursor = a->cursor;
		q.prefix = a->prefix;
		q.include = (const char *const *)a->inc;
		q.n_include = a->n_inc;
		q.exclude = (const char *const *)a->exc;
		q.n_exclude = a->n_exc;
		q.limit = a->limit ? a->limit : CHANGES_PAGE_MAX;
		if (journal_run(&C.j, &q, &rp->r) < 0)
			return -ENOMEM;
		size_t n = rp->r.n;
		if (n) {
			rp->items = calloc(n, sizeof(*rp->items));
			rp->ptrs = calloc(n, sizeof(*rp->ptrs));
			rp->evs = calloc(n * JK_N, sizeof(*rp->evs));
			rp->ts = calloc(n, sizeof(*rp->ts));
			if (!rp->items || !rp->ptrs || !rp->evs || !rp->ts)
				return -ENOMEM;
			to_wire(rp->r.changes, n, rp->items, rp->ptrs, rp->evs, rp->ts, false);
		}
		rp->resp.changes = rp->ptrs;
		rp->resp.n_changes = n;
		rp->resp.resync = rp->r.resync;
		rp->resp.more = rp->r.more;
		journal_token(&C.j, rp->r.next_base, rp->r.next_cursor, rp->next);
		rp->resp.next = rp->next;
	}
	pthread_mutex_lock(&C.mu);
	rp->nt = calloc(C.n_not_tracked + 1, sizeof(*rp->nt));
	for (size_t i = 0; rp->nt && i < C.n_not_tracked; i++) {
		/* a mount under the prefix, or the one the prefix lies in */
		if (under(C.not_tracked[i], a->prefix) || under(a->prefix, C.not_tracked[i]))
			if ((rp->nt[rp->resp.n_not_tracked] = strdup(C.not_tracked[i])))
				rp->resp.n_not_tracked++;
	}
	rp->ir = calloc(C.n_ino_roots + 1, sizeof(*rp->ir));
	for (size_t i = 0; rp->ir && i < C.n_ino_roots; i++) {
		if (under(C.ino_roots[i], a->prefix) || under(a->prefix, C.ino_roots[i]))
			if ((rp->ir[rp->resp.n_inotify_roots] = strdup(C.ino_roots[i])))
				rp->resp.n_inotify_roots++;
	}
	pthread_mutex_unlock(&C.mu);
	rp->resp.not_tracked = rp->nt;
	rp->resp.inotify_roots = rp->ir;
	return 0;
}

static int ask_parse_since(struct ask *a, const char *since, char *err, size_t errlen)
{
	if (!since || !*since)
		return 0;
	a->has_since = true;
	int rc = journal_parse_token(&C.j, since, &a->base, &a->cursor);
	if (rc < 0) {
		snprintf(err, errlen, "invalid change token '%.64s': not one this envd handed out", since);
		return rc;
	}
	a->other_epoch = rc == 1;
	return 0;
}

static int ask_add(char ***v, size_t *n, const char *s)
{
	char **nv = realloc(*v, (*n + 1) * sizeof(*nv));
	if (!nv)
		return -ENOMEM;
	*v = nv;
	if (!(nv[*n] = strdup(s)))
		return -ENOMEM;
	(*n)++;
	return 0;
}

static int ask_prefix(struct ask *a, const struct user *u, const char *path, char *err, size_t errlen)
{
	if (!path || !*path) {
		a->prefix[0] = '\0';
		return 0;
	}
	return path_resolve(u, path, state_default_workdir(), a->prefix, sizeof(a->prefix), err, errlen) < 0
		       ? -EINVAL
		       : 0;
}

/* RPC */

static void rpc_ask_cancel(struct rpc_call *call, enum rpc_code why)
{
	struct ask *a = rpc_call_ud(call);
	a->call = NULL;
}

static const struct rpc_call_hooks ask_hooks = { .on_cancel = rpc_ask_cancel };

static void rpc_ask_done(void *ud, bool caught_up)
{
	struct ask *a = ud;
	struct reply rp;

	if (a->call) {
		if (build_reply(a, &rp) < 0)
			rpc_fail(a->call, RPC_RESOURCE_EXHAUSTED, "out of memory listing changes");
		else
			rpc_reply(a->call, &rp.resp.base);
		reply_free(&rp);
	}
	ask_free(a);
}

void changes_rpc(struct rpc_call *call, const ProtobufCMessage *msg)
{
	const Filesystem__ChangesRequest *req = (const Filesystem__ChangesRequest *)msg;
	char err[PATH_MAX + 256];
	struct user u;
	struct ask *a;
	int rc;

	if (!C.on) {
		rpc_fail(call, RPC_FAILED_PRECONDITION, "the change journal is off (-changes-max-paths 0)");
		return;
	}
	if (!(a = calloc(1, sizeof(*a)))) {
		rpc_fail(call, RPC_RESOURCE_EXHAUSTED, "out of memory");
		return;
	}
	if ((rc = rpc_call_user(call, &u, err, sizeof(err)))) {
		rpc_fail(call, (enum rpc_code)rc, "%s", err);
		ask_free(a);
		return;
	}
	if (ask_prefix(a, &u, req->path, err, sizeof(err)) < 0 ||
	    ask_parse_since(a, req->since, err, sizeof(err)) < 0) {
		rpc_fail(call, RPC_INVALID_ARGUMENT, "%s", err);
		ask_free(a);
		return;
	}
	a->limit = req->limit;
	for (size_t i = 0; i < req->n_include; i++)
		if (ask_add(&a->inc, &a->n_inc, req->include[i]) < 0)
			goto oom;
	for (size_t i = 0; i < req->n_exclude; i++)
		if (ask_add(&a->exc, &a->n_exc, req->exclude[i]) < 0)
			goto oom;
	a->call = call;
	rpc_call_set_hooks(call, &ask_hooks, a);
	atomic_store(&C.rescan, true);
	if (barrier(rpc_ask_done, a) < 0)
		rpc_ask_done(a, false);
	return;
oom:
	rpc_fail(call, RPC_RESOURCE_EXHAUSTED, "out of memory");
	ask_free(a);
}

/* HTTP */

static void http_ask_close(struct http_req *r, bool completed)
{
	struct ask *a = r->ud;

	if (a->waiting)
		a->r = NULL;
	else
		ask_free(a);
}

static void http_ask_done(void *ud, bool caught_up)
{
	struct ask *a = ud;
	struct reply rp;

	a->waiting = false;
	if (!a->r) {
		ask_free(a);
		return;
	}
	if (build_reply(a, &rp) < 0) {
		http_respond_json_error(a->r, 500, "out of memory listing changes");
	} else {
		size_t len;
		char *json = pbjson_encode(&rp.resp.base, &len);
		if (json)
			http_respond(a->r, 200, "application/json", json, len, NULL, 0);
		else
			http_respond_json_error(a->r, 500, "out of memory listing changes");
		free(json);
	}
	reply_free(&rp);
	/* http_ask_close frees a */
}

/* Every value of `name` in a query string, decoded. */
static int query_all(const char *query, const char *name, char ***v, size_t *n)
{
	size_t nl = strlen(name);

	for (const char *p = query; p && *p;) {
		const char *amp = strchr(p, '&');
		size_t len = amp ? (size_t)(amp - p) : strlen(p);
		if (len > nl && strncmp(p, name, nl) == 0 && p[nl] == '=') {
			char val[4096];
			if (http_form_decode(p + nl + 1, len - nl - 1, val, sizeof(val)) >= 0 &&
			    ask_add(v, n, val) < 0)
				return -ENOMEM;
		}
		p = amp ? amp + 1 : NULL;
	}
	return 0;
}

void changes_http_get(struct http_req *r)
{
	char since[256], path[PATH_MAX], lim[32], name[256], err[PATH_MAX + 256];
	struct user own, *u = r->user;
	struct ask *a;

	if (!C.on) {
		http_respond_json_error(r, 412, "the change journal is off (-changes-max-paths 0)");
		return;
	}
	if (!(a = calloc(1, sizeof(*a)))) {
		http_respond_json_error(r, 500, "out of memory");
		return;
	}
	if (!u) {
		if (http_query_get(r->query, "username", name, sizeof(name)) <= 0)
			snprintf(name, sizeof(name), "%s", state_default_user());
		if (user_lookup(name, &own, err, sizeof(err)) < 0) {
			char msg[sizeof(err) + 300];
			snprintf(msg, sizeof(msg), "error looking up user '%s': %s", name, err);
			http_respond_json_error(r, 401, msg);
			ask_free(a);
			return;
		}
		u = &own;
	}
	if (http_query_get(r->query, "since", since, sizeof(since)) <= 0)
		since[0] = '\0';
	if (http_query_get(r->query, "path", path, sizeof(path)) <= 0)
		path[0] = '\0';
	if (http_query_get(r->query, "limit", lim, sizeof(lim)) > 0) {
		char *end;
		unsigned long v = strtoul(lim, &end, 10);
		if (*end || v > UINT32_MAX) {
			http_respond_json_error(r, 400, "invalid limit");
			ask_free(a);
			return;
		}
		a->limit = (uint32_t)v;
	}
	if (ask_prefix(a, u, path, err, sizeof(err)) < 0 || ask_parse_since(a, since, err, sizeof(err)) < 0) {
		http_respond_json_error(r, 400, err);
		ask_free(a);
		return;
	}
	if (query_all(r->query, "include", &a->inc, &a->n_inc) < 0 ||
	    query_all(r->query, "exclude", &a->exc, &a->n_exc) < 0) {
		http_respond_json_error(r, 500, "out of memory");
		ask_free(a);
		return;
	}
	a->r = r;
	a->waiting = true;
	r->ud = a;
	r->on_close = http_ask_close;
	atomic_store(&C.rescan, true);
	if (barrier(http_ask_done, a) < 0)
		http_ask_done(a, false);
}

/* ---- start, stop, hand-over ---- */

size_t changes_paths(void)
{
	return C.j.n;
}

static void restore(const Upgrade__ChangeJournal *in);

int changes_adopt(const Upgrade__ChangeJournal *in)
{
	int rc;

	if (!changes_max_paths || !in->epoch) {
		if (in->fanotify_fd >= 0)
			close(in->fanotify_fd);
		return 0;
	}
	if ((rc = journal_init(&C.j, in->epoch, changes_max_paths)) < 0)
		return rc;
	restore(in);
	/* Before close_leftovers sees it as not taken over. */
	int fd = in->fanotify_fd;
	if (fd >= 0 && fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
		fd = -1;
	C.adopted = true;
	C.adopt_fd = fd;
	return 0;
}

static void restore(const Upgrade__ChangeJournal *in)
{
	struct journal_entry *e = NULL;
	size_t cap = 0;

	for (size_t i = 0; i < in->n_entries; i++) {
		const Upgrade__JournalEntry *s = in->entries[i];
		size_t l = strlen(s->path ? s->path : "");
		if (l + 1 > cap) {
			free(e);
			cap = l + 1;
			if (!(e = calloc(1, sizeof(*e) + cap)))
				break;
		}
		memset(e, 0, sizeof(*e));
		memcpy(e->path, s->path ? s->path : "", l + 1);
		e->seq = s->seq;
		e->first_seq = s->first_seq;
		e->seg_seq = s->seg_seq;
		for (size_t k = 0; k < JK_N && k < s->n_kseq; k++)
			e->kseq[k] = s->kseq[k];
		e->size = s->size;
		e->time_ns = s->time_ns;
		e->cmd = 0; /* serials do not survive: the commands are re-registered */
		e->attr = s->attr == JA_BY ? JA_UNKNOWN : (uint8_t)s->attr;
		e->ftype = (uint8_t)s->ftype;
		e->exists = s->exists;
		e->first_existed = s->first_existed;
		e->seg_existed = s->seg_existed;
		journal_restore(&C.j, e);
	}
	free(e);
	if (in->seq > C.j.seq)
		C.j.seq = in->seq;
	C.j.floor = in->floor;
	C.j.issued = in->issued;
}

static int start_thread(void)
{
	int rc = pthread_create(&C.thread, NULL, reader_main, NULL);

	if (rc != 0) {
		log_msg("warn", "changes", "change journal: cannot start its thread: %s", strerror(rc));
		return -rc;
	}
	C.thread_started = true;
	return 0;
}

int changes_start(void)
{
	uint64_t epoch = 0;
	int rc;

	if (!changes_max_paths)
		return 0;
	if (!C.adopted) {
		if (getrandom(&epoch, sizeof(epoch), 0) != sizeof(epoch))
			epoch = (uint64_t)wall_ns() ^ (uint64_t)getpid() << 32;
		if ((rc = journal_init(&C.j, epoch, changes_max_paths)) < 0)
			return rc;
	}
	C.on = true;
	process_tracker = &tracker;
	ev_async_init(&C.async, on_async);
	ev_async_start(envd_loop, &C.async);
	ev_unref(envd_loop);
	ev_init(&C.barrier_timer, barrier_timer_cb);

	int fan_err = 0;
	if (C.adopted && C.adopt_fd >= 0 && changes_source != CHANGES_SOURCE_INOTIFY) {
		C.fan_fd = C.adopt_fd;
		fcntl(C.fan_fd, F_SETFD, FD_CLOEXEC);
		/* The marks live on in the group; the mount table is rebuilt. */
	} else {
		if (C.adopt_fd >= 0)
			close(C.adopt_fd);
		if (C.adopted)
			journal_gap(&C.j); /* changes during the exec were not seen */
		if (changes_source != CHANGES_SOURCE_INOTIFY) {
			C.fan_fd = (int)syscall(SYS_fanotify_init,
						FAN_CLASS_NOTIF | FAN_REPORT_DFID_NAME | FAN_CLOEXEC | FAN_NONBLOCK,
						O_RDONLY | O_LARGEFILE | O_CLOEXEC);
			fan_err = errno;
		}
	}
	C.adopted = false;
	C.adopt_fd = -1;
	if (C.fan_fd < 0 && changes_source == CHANGES_SOURCE_FANOTIFY) {
		/* Without fanotify (no CAP_SYS_ADMIN, an old kernel), and no
		 * fallback asked for, nothing is seen: every checkpoint is
		 * answered, but with no changes. */
		log_msg("warn", "changes", "change journal: fanotify unavailable (%s); changes are not tracked",
			strerror(fan_err));
		return 0;
	}
	if (C.fan_fd < 0)
		log_msg("warn", "changes",
			"change journal: %s%s; inotify watches the home directories, /tmp and the working "
			"directories of tracked commands",
			changes_source == CHANGES_SOURCE_INOTIFY ? "-changes-source inotify" : "fanotify unavailable: ",
			changes_source == CHANGES_SOURCE_INOTIFY ? "" : strerror(fan_err));
	else
		fcntl(C.fan_fd, F_SETFL, fcntl(C.fan_fd, F_GETFL) | O_NONBLOCK);
	C.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (C.wake_fd < 0)
		return -errno;
	return start_thread();
}

void changes_resume(void)
{
	if (C.on && C.fan_fd >= 0 && !C.thread_started && start_thread() == 0)
		fcntl(C.fan_fd, F_SETFD, FD_CLOEXEC);
}

static void stop_thread(void)
{
	if (!C.thread_started)
		return;
	pthread_mutex_lock(&C.mu);
	C.stop = true;
	pthread_mutex_unlock(&C.mu);
	wake_thread();
	pthread_join(C.thread, NULL);
	C.thread_started = false;
	C.stop = false;
	on_async(envd_loop, &C.async, 0);
}

static Upgrade__JournalEntry *snap_items;
static Upgrade__JournalEntry **snap_ptrs;
static uint64_t *snap_kseq;

int changes_snapshot(Upgrade__ChangeJournal *out)
{
	size_t n, i = 0;

	upgrade__change_journal__init(out);
	out->fanotify_fd = -1;
	if (!C.on)
		return 0;
	stop_thread();
	fire_waiters(true);
	if (C.ino) {
		/* inotify watches do not cross the exec (the descriptor is
		 * close-on-exec): the new image watches anew and misses what
		 * changes meanwhile, so checkpoints from before answer resync. */
		journal_gap(&C.j);
		log_msg("info", "changes", "inotify watches are not handed over: earlier checkpoints will answer resync");
	}
	n = C.j.n;
	free(snap_items);
	free(snap_ptrs);
	free(snap_kseq);
	snap_items = calloc(n ? n : 1, sizeof(*snap_items));
	snap_ptrs = calloc(n ? n : 1, sizeof(*snap_ptrs));
	snap_kseq = calloc((n ? n : 1) * JK_N, sizeof(*snap_kseq));
	if (!snap_items || !snap_ptrs || !snap_kseq)
		return -ENOMEM;
	for (const struct journal_entry *e = C.j.head; e; e = e->next, i++) {
		Upgrade__JournalEntry *s = &snap_items[i];
		upgrade__journal_entry__init(s);
		s->path = (char *)e->path;
		s->seq = e->seq;
		s->first_seq = e->first_seq;
		s->seg_seq = e->seg_seq;
		s->kseq = &snap_kseq[i * JK_N];
		s->n_kseq = JK_N;
		memcpy(s->kseq, e->kseq, sizeof(e->kseq));
		s->size = e->size;
		s->time_ns = e->time_ns;
		s->cmd = e->cmd;
		s->attr = e->attr;
		s->ftype = e->ftype;
		s->exists = e->exists;
		s->first_existed = e->first_existed;
		s->seg_existed = e->seg_existed;
		snap_ptrs[i] = s;
	}
	out->epoch = C.j.epoch;
	out->seq = C.j.seq;
	out->floor = C.j.floor;
	out->issued = C.j.issued;
	out->entries = snap_ptrs;
	out->n_entries = n;
	out->fanotify_fd = C.fan_fd;
	return 0;
}

void changes_stop(void)
{
	stop_thread();
	fire_waiters(true);
	if (C.fan_fd >= 0)
		close(C.fan_fd);
	if (C.wake_fd >= 0)
		close(C.wake_fd);
	C.fan_fd = C.wake_fd = -1;
	inotree_free(C.ino);
	C.ino = NULL;
	if (C.ino_fd >= 0)
		close(C.ino_fd);
	C.ino_fd = -1;
	C.n_cwd_roots = 0;
	pthread_mutex_lock(&C.mu);
	while (C.root_reqs) {
		struct rootreq *r = C.root_reqs;
		C.root_reqs = r->next;
		free(r);
	}
	for (size_t i = 0; i < C.n_ino_roots; i++)
		free(C.ino_roots[i]);
	free(C.ino_roots);
	C.ino_roots = NULL;
	C.n_ino_roots = 0;
	while (C.spare) {
		struct batch *b = C.spare;
		C.spare = b->next;
		batch_free(b);
	}
	C.n_spare = 0;
	pthread_mutex_unlock(&C.mu);
	for (size_t i = 0; i < C.n_mnts; i++) {
		if (C.mnts[i].fd >= 0)
			close(C.mnts[i].fd);
		free(C.mnts[i].point);
		free(C.mnts[i].why);
	}
	C.n_mnts = 0;
	journal_free(&C.j);
	C.on = false;
}
