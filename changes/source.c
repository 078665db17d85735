/* SPDX-License-Identifier: Apache-2.0 */
/*
 * source.c - the change journal fed by fanotify, or by recursive inotify
 * where fanotify is unavailable (source.h).
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
#include "changes/source.h"

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
#include "base/procstat.h"
#include "changes/inotree.h"
#include "changes/journal.h"
#include "base/uptmp.h"

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
	struct source_config cfg;
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
		struct procstat st;
		if (procstat_read(p, &st) < 0)
			break;
		p = st.ppid;
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
	if (C.cfg.inotify_watches)
		return C.cfg.inotify_watches < (size_t)sys ? C.cfg.inotify_watches : (size_t)sys;
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

/* The home directories and /tmp, or the roots the configuration names. */
static void ino_default_roots(void)
{
	DIR *d;
	struct dirent *de;
	char path[PATH_MAX];

	if (C.cfg.roots) {
		for (const char *const *r = C.cfg.roots; *r; r++)
			ino_add(*r, 0);
		return;
	}
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
	if (C.cfg.inotify)
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
		if (C.cfg.inotify)
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

int source_barrier(void (*fn)(void *ud, bool caught_up), void *ud)
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

void source_rescan(void)
{
	atomic_store(&C.rescan, true);
}

/* ---- the command registry (loop, read by the thread) ---- */

void source_register(uint32_t serial, pid_t pid, const char *cgroup, const char *cwd)
{
	struct rootreq *rq = NULL;
	struct reg *nr;

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
		C.regs[C.n_regs++] = (struct reg){ serial, pid, cgroup ? strdup(cgroup) : NULL, wall_ns() };
	/* Where fanotify does not see, the thread watches the cwd with inotify
	 * (a no-op when it is below a root already, or fanotify sees it). */
	if (cwd && *cwd && C.cfg.inotify && (rq = malloc(sizeof(*rq) + strlen(cwd) + 1))) {
		strcpy(rq->path, cwd);
		rq->since_ns = wall_ns() - CWD_SLACK_NS;
		rq->next = C.root_reqs;
		C.root_reqs = rq;
	}
	pthread_mutex_unlock(&C.mu);
	if (rq)
		wake_thread();
}

void source_set_pid(uint32_t serial, pid_t pid)
{
	pthread_mutex_lock(&C.mu);
	for (size_t i = 0; i < C.n_regs; i++)
		if (C.regs[i].serial == serial) {
			C.regs[i].pid = pid;
			break;
		}
	pthread_cond_broadcast(&C.pid_cv);
	pthread_mutex_unlock(&C.mu);
}

void source_unregister(uint32_t serial)
{
	pthread_mutex_lock(&C.mu);
	for (size_t i = 0; i < C.n_regs; i++)
		if (C.regs[i].serial == serial) {
			free(C.regs[i].cg);
			C.regs[i] = C.regs[--C.n_regs];
			break;
		}
	pthread_cond_broadcast(&C.pid_cv);
	pthread_mutex_unlock(&C.mu);
}

/* ---- what the thread watches, for replies ---- */

static bool under(const char *path, const char *prefix)
{
	size_t l = strlen(prefix);
	if (!*prefix || strcmp(prefix, "/") == 0)
		return true;
	return strncmp(path, prefix, l) == 0 && (path[l] == '\0' || path[l] == '/');
}

void source_roots_under(const char *prefix, char ***not_tracked, size_t *n_not_tracked, char ***inotify_roots,
			size_t *n_inotify_roots)
{
	char **nt, **ir;

	*n_not_tracked = *n_inotify_roots = 0;
	pthread_mutex_lock(&C.mu);
	nt = calloc(C.n_not_tracked + 1, sizeof(*nt));
	for (size_t i = 0; nt && i < C.n_not_tracked; i++) {
		/* a mount under the prefix, or the one the prefix lies in */
		if (under(C.not_tracked[i], prefix) || under(prefix, C.not_tracked[i]))
			if ((nt[*n_not_tracked] = strdup(C.not_tracked[i])))
				(*n_not_tracked)++;
	}
	ir = calloc(C.n_ino_roots + 1, sizeof(*ir));
	for (size_t i = 0; ir && i < C.n_ino_roots; i++) {
		if (under(C.ino_roots[i], prefix) || under(prefix, C.ino_roots[i]))
			if ((ir[*n_inotify_roots] = strdup(C.ino_roots[i])))
				(*n_inotify_roots)++;
	}
	pthread_mutex_unlock(&C.mu);
	*not_tracked = nt;
	*inotify_roots = ir;
}

/* ---- start, stop, hand-over ---- */

bool source_on(void)
{
	return C.on;
}

struct journal *source_journal(void)
{
	return &C.j;
}

static void restore(const Upgrade__ChangeJournal *in);

int source_adopt(const Upgrade__ChangeJournal *in, size_t max_paths)
{
	int rc;

	if (!max_paths || !in->epoch) {
		if (in->fanotify_fd >= 0)
			close(in->fanotify_fd);
		return 0;
	}
	if ((rc = journal_init(&C.j, in->epoch, max_paths)) < 0)
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

int source_start(const struct source_config *cfg)
{
	uint64_t epoch = 0;
	int rc;

	C.cfg = *cfg;
	if (!C.adopted) {
		if (getrandom(&epoch, sizeof(epoch), 0) != sizeof(epoch))
			epoch = (uint64_t)wall_ns() ^ (uint64_t)getpid() << 32;
		if ((rc = journal_init(&C.j, epoch, cfg->max_paths)) < 0)
			return rc;
	}
	C.on = true;
	ev_async_init(&C.async, on_async);
	ev_async_start(envd_loop, &C.async);
	ev_unref(envd_loop);
	ev_init(&C.barrier_timer, barrier_timer_cb);

	int fan_err = 0;
	if (C.adopted && C.adopt_fd >= 0 && C.cfg.fanotify) {
		C.fan_fd = C.adopt_fd;
		fcntl(C.fan_fd, F_SETFD, FD_CLOEXEC);
		/* The marks live on in the group; the mount table is rebuilt. */
	} else {
		if (C.adopt_fd >= 0)
			close(C.adopt_fd);
		if (C.adopted)
			journal_gap(&C.j); /* changes during the exec were not seen */
		if (C.cfg.fanotify) {
			C.fan_fd = (int)syscall(SYS_fanotify_init,
						FAN_CLASS_NOTIF | FAN_REPORT_DFID_NAME | FAN_CLOEXEC | FAN_NONBLOCK,
						O_RDONLY | O_LARGEFILE | O_CLOEXEC);
			fan_err = errno;
		}
	}
	C.adopted = false;
	C.adopt_fd = -1;
	if (C.fan_fd < 0 && !C.cfg.inotify) {
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
			!C.cfg.fanotify ? "-changes-source inotify" : "fanotify unavailable: ",
			!C.cfg.fanotify ? "" : strerror(fan_err));
	else
		fcntl(C.fan_fd, F_SETFL, fcntl(C.fan_fd, F_GETFL) | O_NONBLOCK);
	C.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (C.wake_fd < 0)
		return -errno;
	return start_thread();
}

void source_resume(void)
{
	/* The thread the snapshot stopped (not one that never started: with
	 * no source at all there is nothing to read). inotify alone counts:
	 * without it a failed upgrade left the journal unfed for good. */
	if (!C.on || C.wake_fd < 0 || C.thread_started || start_thread() < 0)
		return;
	if (C.fan_fd >= 0)
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

int source_snapshot(Upgrade__ChangeJournal *out)
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

void source_stop(void)
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
