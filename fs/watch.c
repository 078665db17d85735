/* SPDX-License-Identifier: Apache-2.0 */
/*
 * watch.c - inotify with recursive directories, as the reference's
 * fsnotify fork behaves, plus an explicit overflow event (docs/protocol.md,
 * "Watching").
 *
 * The loop reads the inotify descriptor (that never reaches the watched
 * filesystem), but an event may need the filesystem itself: a new directory
 * under a recursive watch is added and walked, and with entries on, the
 * entry of a CREATE, WRITE or CHMOD is stat'ed. On a hung mount either
 * would stop the loop, so such an event, and every event of the same watch
 * after it, is queued and handled in a worker job (base/worker.h) with the
 * mount's key; the job's events are delivered on the loop when it is done,
 * in inotify's order. One job per watch at a time, so the watch table is
 * changed by one thread at a time; the lock only lets the loop read it
 * meanwhile. A hung job holds back that watch's events only, and the queue
 * behind it is bounded: past WATCH_QUEUE_MAX an overflow event takes the
 * place of what is dropped.
 */
#include "fs/watch.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "fs/entry.h"
#include "fs/listdir.h"
#include "base/uptmp.h"
#include "base/errstr.h"
#include "base/loop.h"
#include "base/users.h"
#include "base/worker.h"

#define WATCH_MASK \
	(IN_CREATE | IN_MODIFY | IN_DELETE | IN_DELETE_SELF | IN_MOVED_FROM | IN_MOVED_TO | IN_MOVE_SELF | \
	 IN_ATTRIB)

/* Raw inotify events waiting for a watch's job, in bytes (~16k events). */
#define WATCH_QUEUE_MAX (256 * 1024)
/* Events one job may hand back (a new tree of many entries); past it, an
 * overflow event. */
#define WATCH_JOB_EVENTS_MAX 65536

struct wentry {
	int wd;
	char *rel; /* relative to the root; "" for the root */
};

/* An event a job made, delivered on the loop. */
struct wevent {
	Filesystem__EventType type;
	Filesystem__EntryInfo *entry; /* or NULL */
	char *name;                   /* name, NUL, path, NUL: one allocation */
	const char *path;
};

struct watch_job {
	struct fs_watch *w;
	char *raw;            /* raw inotify events taken from the queue */
	size_t raw_len;
	bool lost_after;      /* the queue dropped events after raw: overflow */
	bool ran;             /* work ran (not dropped at its deadline) */
	bool full;            /* out reached WATCH_JOB_EVENTS_MAX */
	struct wevent *out;
	size_t n_out, cap_out;
	/* Labels the job took out of the table: the loop may hold them (an
	 * upgrade's record), so they are freed in done, on the loop. */
	char **grave;
	size_t n_grave, cap_grave;
};

struct fs_watch {
	int fd;
	ev_io io;
	bool recursive;
	bool entries;         /* stat the entry of CREATE, WRITE, CHMOD */
	char *root;
	uint64_t key;         /* worker_path_key(root) */
	fs_watch_cb cb;
	fs_watch_idle_cb idle;
	void *ud;
	/* The table; a job changes it under the lock, the loop reads it under
	 * the lock while a job is in flight. */
	pthread_mutex_t lock;
	struct wentry *w;
	size_t n, cap;
	/* A directory moved away inside the tree, waiting for its MOVED_TO. */
	uint32_t pending_cookie;
	char *pending_rel;
	/* An upload's temporary file renamed away, waiting for its MOVED_TO. */
	uint32_t up_cookie;
	bool up_pending;
	bool up_replaces;     /* ... over a file that existed */
	/* Loop side: raw events read and not yet handled, the job in flight. */
	char *q;
	size_t qlen, qcap;
	bool qlost;           /* events dropped since the queue was last taken */
	struct watch_job *job;
	bool orphan;          /* freed while a job was in flight: its done frees */
};

size_t fs_watch_map(uint32_t mask, Filesystem__EventType out[5])
{
	size_t n = 0;

	if (mask & (IN_CREATE | IN_MOVED_TO))
		out[n++] = FILESYSTEM__EVENT_TYPE__EVENT_TYPE_CREATE;
	if (mask & (IN_MOVED_FROM | IN_MOVE_SELF))
		out[n++] = FILESYSTEM__EVENT_TYPE__EVENT_TYPE_RENAME;
	if (mask & IN_ATTRIB)
		out[n++] = FILESYSTEM__EVENT_TYPE__EVENT_TYPE_CHMOD;
	if (mask & IN_MODIFY)
		out[n++] = FILESYSTEM__EVENT_TYPE__EVENT_TYPE_WRITE;
	if (mask & (IN_DELETE | IN_DELETE_SELF))
		out[n++] = FILESYSTEM__EVENT_TYPE__EVENT_TYPE_REMOVE;
	return n;
}

int fs_watch_check(const char *root, bool allow_network_mounts, char *err, size_t errlen)
{
	struct stat st;
	struct statfs sf;

	if (stat(root, &st) < 0) {
		int e = errno;
		if (e == ENOENT) {
			snprintf(err, errlen, "path %s not found: stat %s: %s", root, root, go_strerror(e));
			return -ENOENT;
		}
		snprintf(err, errlen, "error statting path %s: stat %s: %s", root, root, go_strerror(e));
		return -EIO;
	}
	if (!S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "path %s not a directory", root);
		return -ENOTDIR;
	}
	if (allow_network_mounts)
		return 0;
	if (statfs(root, &sf) < 0) {
		int e = errno;
		snprintf(err, errlen, "error checking mount status: failed to statfs %s: %s", root, go_strerror(e));
		return -EIO;
	}
	switch ((unsigned long)sf.f_type) {
	case 0x6969UL:       /* NFS */
	case 0xFF534D42UL:   /* CIFS */
	case 0x517BUL:       /* SMB */
	case 0xFE534D42UL:   /* SMB2 */
	case 0x65735546UL:   /* FUSE */
		snprintf(err, errlen, "cannot watch path on network filesystem: %s", root);
		return -EREMOTE;
	default:
		return 0;
	}
}

/* rel + "/" + name, cleaned, relative ("." for the root). */
static void join_rel(const char *rel, const char *name, char *out, size_t outlen)
{
	char tmp[PATH_MAX * 2];

	if (!*rel && !*name) {
		snprintf(out, outlen, ".");
		return;
	}
	if (!*rel)
		fs_join(tmp, sizeof(tmp), name, "");
	else
		fs_join(tmp, sizeof(tmp), rel, name);
	path_clean(tmp, out, outlen);
}

static void full_path(const struct fs_watch *w, const char *relname, char *out, size_t outlen)
{
	fs_join(out, outlen, w->root, strcmp(relname, ".") == 0 ? "" : relname);
}

static struct wentry *find_wd(struct fs_watch *w, int wd)
{
	for (size_t i = 0; i < w->n; i++)
		if (w->w[i].wd == wd)
			return &w->w[i];
	return NULL;
}

/* A label out of the table: at once on the loop, in done from a job. */
static void rel_free(struct watch_job *j, char *rel)
{
	if (j && j->n_grave == j->cap_grave) {
		size_t nc = j->cap_grave ? j->cap_grave * 2 : 8;
		char **ng = realloc(j->grave, nc * sizeof(*ng));
		if (!ng) {
			/* Keep it rather than free it under a reader: a leak
			 * only when out of memory. */
			return;
		}
		j->grave = ng;
		j->cap_grave = nc;
	}
	if (j)
		j->grave[j->n_grave++] = rel;
	else
		free(rel);
}

static void drop_index(struct fs_watch *w, struct watch_job *j, size_t i)
{
	pthread_mutex_lock(&w->lock);
	rel_free(j, w->w[i].rel);
	w->w[i] = w->w[--w->n];
	pthread_mutex_unlock(&w->lock);
}

/* Add (or re-label) a watch for root/rel. Returns 0 or -errno. */
static int add_watch(struct fs_watch *w, struct watch_job *j, const char *rel)
{
	char path[PATH_MAX];
	int wd;

	if (fs_join(path, sizeof(path), w->root, rel))
		return -ENAMETOOLONG;
	wd = inotify_add_watch(w->fd, path, WATCH_MASK | IN_ONLYDIR | IN_DONT_FOLLOW * (*rel != 0));
	if (wd < 0)
		return -errno;
	struct wentry *e = find_wd(w, wd);
	char *copy = strdup(rel);
	if (!copy)
		return -ENOMEM;
	pthread_mutex_lock(&w->lock);
	if (e) {
		rel_free(j, e->rel);
		e->rel = copy;
		pthread_mutex_unlock(&w->lock);
		return 0;
	}
	if (w->n == w->cap) {
		size_t nc = w->cap ? w->cap * 2 : 16;
		struct wentry *nw = realloc(w->w, nc * sizeof(*nw));
		if (!nw) {
			pthread_mutex_unlock(&w->lock);
			free(copy);
			inotify_rm_watch(w->fd, wd);
			return -ENOMEM;
		}
		w->w = nw;
		w->cap = nc;
	}
	w->w[w->n].wd = wd;
	w->w[w->n].rel = copy;
	w->n++;
	pthread_mutex_unlock(&w->lock);
	return 0;
}

static bool is_entry_type(Filesystem__EventType t)
{
	return t == FILESYSTEM__EVENT_TYPE__EVENT_TYPE_CREATE || t == FILESYSTEM__EVENT_TYPE__EVENT_TYPE_WRITE ||
	       t == FILESYSTEM__EVENT_TYPE__EVENT_TYPE_CHMOD;
}

/*
 * Hand on one event: on the loop (j NULL) straight to the callback; in a
 * job into its list, with the entry stat'ed when asked for.
 */
static void emit(struct fs_watch *w, struct watch_job *j, const char *name, const char *path,
		 Filesystem__EventType type)
{
	struct wevent *e;
	size_t nl, pl;

	if (!j) {
		w->cb(w->ud, name, path, type, NULL);
		return;
	}
	if (j->full)
		return;
	if (j->n_out == j->cap_out) {
		size_t nc = j->cap_out ? j->cap_out * 2 : 16;
		struct wevent *no = realloc(j->out, nc * sizeof(*no));
		if (!no) {
			j->full = true; /* the overflow goes on the last slot */
			if (!j->n_out)
				return;
			e = &j->out[j->n_out - 1];
			fs_entry_free(e->entry);
			e->entry = NULL;
			e->type = FILESYSTEM__EVENT_TYPE__EVENT_TYPE_OVERFLOW;
			return;
		}
		j->out = no;
		j->cap_out = nc;
	}
	if (j->n_out == WATCH_JOB_EVENTS_MAX - 1) {
		j->full = true;
		name = ".";
		path = w->root;
		type = FILESYSTEM__EVENT_TYPE__EVENT_TYPE_OVERFLOW;
	}
	e = &j->out[j->n_out];
	nl = strlen(name);
	pl = strlen(path);
	e->name = malloc(nl + pl + 2);
	if (!e->name) {
		j->full = true;
		if (j->n_out) {
			e = &j->out[j->n_out - 1];
			fs_entry_free(e->entry);
			e->entry = NULL;
			e->type = FILESYSTEM__EVENT_TYPE__EVENT_TYPE_OVERFLOW;
		}
		return;
	}
	memcpy(e->name, name, nl + 1);
	memcpy(e->name + nl + 1, path, pl + 1);
	e->path = e->name + nl + 1;
	e->type = type;
	e->entry = NULL;
	if (w->entries && is_entry_type(type)) {
		char err[PATH_MAX + 128];
		if (fs_entry_info(path, &e->entry, err, sizeof(err)) < 0)
			e->entry = NULL; /* gone already: the event goes without it */
	}
	j->n_out++;
}

/*
 * Watch every directory below root/rel (not following symlinks). When
 * `announce`, emit a synthetic CREATE for every entry found (the contents
 * of a directory that appeared before its watch existed; the reference does
 * the same, so `mkdir -p a/b/c` reports all three).
 * Unreadable directories are skipped.
 */
static void walk_add(struct fs_watch *w, struct watch_job *j, const char *rel, bool announce, int depth)
{
	char dirpath[PATH_MAX], child[PATH_MAX], abs[PATH_MAX];
	char **names;
	size_t n;

	if (depth > 256)
		return;
	full_path(w, *rel ? rel : ".", dirpath, sizeof(dirpath));
	if (fs_read_names(dirpath, &names, &n) < 0)
		return; /* unreadable (or out of memory): skipped */
	for (size_t i = 0; i < n; i++) {
		struct stat st;
		join_rel(rel, names[i], child, sizeof(child));
		full_path(w, child, abs, sizeof(abs));
		if (announce)
			emit(w, j, child, abs, FILESYSTEM__EVENT_TYPE__EVENT_TYPE_CREATE);
		if (lstat(abs, &st) == 0 && S_ISDIR(st.st_mode)) {
			if (add_watch(w, j, child) == 0)
				walk_add(w, j, child, announce, depth + 1);
		}
		free(names[i]);
	}
	free(names);
}

static bool rel_under(const char *rel, const char *prefix)
{
	size_t l = strlen(prefix);
	return strncmp(rel, prefix, l) == 0 && (rel[l] == '\0' || rel[l] == '/');
}

/* Stop watching prefix and everything under it. */
static void drop_subtree(struct fs_watch *w, struct watch_job *j, const char *prefix)
{
	for (size_t i = 0; i < w->n;) {
		if (rel_under(w->w[i].rel, prefix)) {
			inotify_rm_watch(w->fd, w->w[i].wd);
			drop_index(w, j, i);
		} else {
			i++;
		}
	}
}

static void rename_subtree(struct fs_watch *w, struct watch_job *j, const char *from, const char *to)
{
	size_t fl = strlen(from);

	pthread_mutex_lock(&w->lock);
	for (size_t i = 0; i < w->n; i++) {
		if (!rel_under(w->w[i].rel, from))
			continue;
		size_t tl = strlen(to), rl = strlen(w->w[i].rel + fl);
		char *c = malloc(tl + rl + 1);
		if (c) {
			memcpy(c, to, tl);
			memcpy(c + tl, w->w[i].rel + fl, rl + 1);
		}
		if (c) {
			rel_free(j, w->w[i].rel);
			w->w[i].rel = c;
		}
	}
	pthread_mutex_unlock(&w->lock);
}

static void flush_pending(struct fs_watch *w, struct watch_job *j)
{
	if (w->pending_rel) {
		drop_subtree(w, j, w->pending_rel);
		free(w->pending_rel);
		w->pending_rel = NULL;
	}
}

/*
 * Whether handling ev may touch the watched filesystem: a directory that
 * appeared under a recursive watch (not the end of a rename inside the
 * tree), or an event whose entry is to be stat'ed.
 */
static bool needs_fs(const struct fs_watch *w, const struct inotify_event *ev)
{
	if (w->entries && (ev->mask & (IN_CREATE | IN_MOVED_TO | IN_ATTRIB | IN_MODIFY)))
		return true;
	if (!w->recursive || !(ev->mask & IN_ISDIR) || !(ev->mask & (IN_CREATE | IN_MOVED_TO)))
		return false;
	return !((ev->mask & IN_MOVED_TO) && w->pending_rel && ev->cookie == w->pending_cookie);
}

/* On the loop when j is NULL (then it never needs the filesystem), else in
 * the watch's job. */
static void handle_event(struct fs_watch *w, struct watch_job *j, const struct inotify_event *ev)
{
	char relname[PATH_MAX], abs[PATH_MAX];
	Filesystem__EventType types[5];
	struct wentry *e;
	size_t nt;

	if (ev->mask & IN_Q_OVERFLOW) {
		emit(w, j, ".", w->root, FILESYSTEM__EVENT_TYPE__EVENT_TYPE_OVERFLOW);
		return;
	}
	e = find_wd(w, ev->wd);
	if (!e)
		return;
	if (ev->mask & IN_IGNORED) {
		drop_index(w, j, (size_t)(e - w->w));
		return;
	}
	if (ev->mask & IN_UNMOUNT)
		return;
	bool is_root = e->rel[0] == '\0';
	join_rel(e->rel, ev->len ? ev->name : "", relname, sizeof(relname));
	full_path(w, relname, abs, sizeof(abs));

	if (w->pending_rel && !((ev->mask & IN_MOVED_TO) && ev->cookie == w->pending_cookie))
		flush_pending(w, j);

	/* An atomic upload (base/uptmp.h): its temporary file stays hidden and
	 * its rename over the target reads as the in-place write it stands
	 * for, as the reference (which writes in place) reports it. */
	if (ev->len && !(ev->mask & IN_ISDIR)) {
		bool replaces;
		if (uptmp_name_is(ev->name, strnlen(ev->name, ev->len), &replaces)) {
			if (ev->mask & IN_MOVED_FROM) {
				w->up_cookie = ev->cookie;
				w->up_pending = true;
				w->up_replaces = replaces;
			}
			return;
		}
		if ((ev->mask & IN_MOVED_TO) && w->up_pending && ev->cookie == w->up_cookie) {
			w->up_pending = false;
			if (!w->up_replaces)
				emit(w, j, relname, abs, FILESYSTEM__EVENT_TYPE__EVENT_TYPE_CREATE);
			emit(w, j, relname, abs, FILESYSTEM__EVENT_TYPE__EVENT_TYPE_WRITE);
			return;
		}
	}

	if (ev->mask & IN_DELETE_SELF) {
		/* The parent's IN_DELETE already reported a watched subdirectory. */
		if (!is_root)
			return;
		emit(w, j, ".", w->root, FILESYSTEM__EVENT_TYPE__EVENT_TYPE_REMOVE);
		return;
	}
	if (ev->mask & IN_MOVE_SELF) {
		if (!is_root)
			return;
		/* The root moved: drop every watch; the stream goes quiet. */
		while (w->n) {
			inotify_rm_watch(w->fd, w->w[0].wd);
			drop_index(w, j, 0);
		}
		emit(w, j, ".", w->root, FILESYSTEM__EVENT_TYPE__EVENT_TYPE_RENAME);
		return;
	}

	nt = fs_watch_map(ev->mask, types);
	/* The callback may not free us, but copy what we need after it anyway. */
	for (size_t i = 0; i < nt; i++)
		emit(w, j, relname, abs, types[i]);

	if (!w->recursive || !(ev->mask & IN_ISDIR))
		return;
	if (ev->mask & IN_MOVED_FROM) {
		free(w->pending_rel);
		w->pending_rel = strdup(relname);
		w->pending_cookie = ev->cookie;
	} else if ((ev->mask & IN_MOVED_TO) && w->pending_rel && ev->cookie == w->pending_cookie) {
		rename_subtree(w, j, w->pending_rel, relname);
		free(w->pending_rel);
		w->pending_rel = NULL;
	} else if (ev->mask & (IN_CREATE | IN_MOVED_TO)) {
		if (add_watch(w, j, relname) == 0)
			walk_add(w, j, relname, true, 0);
	}
}

/* --- the job of a watch: events that need the filesystem, and those after them --- */

static void watch_destroy(struct fs_watch *w);
static void job_submit(struct fs_watch *w);

static void job_free(struct watch_job *j)
{
	for (size_t i = 0; i < j->n_out; i++) {
		fs_entry_free(j->out[i].entry);
		free(j->out[i].name);
	}
	free(j->out);
	for (size_t i = 0; i < j->n_grave; i++)
		free(j->grave[i]);
	free(j->grave);
	free(j->raw);
	free(j);
}

static void job_work(void *arg)
{
	struct watch_job *j = arg;

	for (char *p = j->raw; p < j->raw + j->raw_len;) {
		const struct inotify_event *ev = (const struct inotify_event *)p;
		handle_event(j->w, j, ev);
		worker_progress();
		p += sizeof(*ev) + ev->len;
	}
	if (j->lost_after)
		emit(j->w, j, ".", j->w->root, FILESYSTEM__EVENT_TYPE__EVENT_TYPE_OVERFLOW);
	j->ran = true;
}

static void job_done(void *arg)
{
	struct watch_job *j = arg;
	struct fs_watch *w = j->w;

	/* w->job stays set while the events go out: a callback that frees
	 * the watch only marks it (fs_watch_free), and delivery stops. */
	if (!w->orphan) {
		/* Dropped at its deadline before a thread took it (a hung
		 * mount holds the threads of its key): the events are lost. */
		if (!j->ran || (j->full && !j->n_out))
			w->cb(w->ud, ".", w->root, FILESYSTEM__EVENT_TYPE__EVENT_TYPE_OVERFLOW, NULL);
		for (size_t i = 0; i < j->n_out && !w->orphan; i++) {
			struct wevent *e = &j->out[i];
			w->cb(w->ud, e->name, e->path, e->type, e->entry);
			e->entry = NULL; /* the callback's now */
		}
	}
	w->job = NULL;
	job_free(j);
	if (w->orphan) {
		watch_destroy(w);
		return;
	}
	if (w->qlen || w->qlost)
		job_submit(w);
	else if (w->idle)
		w->idle(w->ud);
}

/* Hand the queue to a new job. Without one, the queued events are lost:
 * reported as an overflow. */
static void job_submit(struct fs_watch *w)
{
	struct watch_job *j = calloc(1, sizeof(*j));
	int rc = -ENOMEM;

	if (j) {
		j->w = w;
		j->raw = w->q;
		j->raw_len = w->qlen;
		j->lost_after = w->qlost;
		rc = worker_run(&(struct worker_req){ .work = job_work, .done = job_done, .arg = j,
						      .key = w->key, .timeout = worker_fs_timeout,
						      .stall = true });
	}
	if (rc < 0) {
		free(j);
		free(w->q);
	}
	w->q = NULL;
	w->qlen = w->qcap = 0;
	w->qlost = false;
	if (rc < 0) {
		w->cb(w->ud, ".", w->root, FILESYSTEM__EVENT_TYPE__EVENT_TYPE_OVERFLOW, NULL);
		return;
	}
	w->job = j;
}

/* Queue a raw event for the job; past the bound it is dropped and an
 * overflow event owed. */
static void queue_push(struct fs_watch *w, const struct inotify_event *ev)
{
	size_t sz = sizeof(*ev) + ev->len;

	if (w->qlost)
		return;
	if (w->qlen + sz > WATCH_QUEUE_MAX) {
		w->qlost = true;
		return;
	}
	if (w->qlen + sz > w->qcap) {
		size_t nc = w->qcap ? w->qcap : 4096;
		while (nc < w->qlen + sz)
			nc *= 2;
		char *nq = realloc(w->q, nc);
		if (!nq) {
			w->qlost = true;
			return;
		}
		w->q = nq;
		w->qcap = nc;
	}
	memcpy(w->q + w->qlen, ev, sz);
	w->qlen += sz;
}

/* Shared read buffer: everything runs on the loop thread. */
static char watch_buf[64 * 1024] __attribute__((aligned(__alignof__(struct inotify_event))));

void fs_watch_drain(struct fs_watch *w)
{
	for (;;) {
		ssize_t n = read(w->fd, watch_buf, sizeof(watch_buf));
		if (n <= 0)
			break;
		for (char *p = watch_buf; p < watch_buf + n;) {
			const struct inotify_event *ev = (const struct inotify_event *)p;
			/* Nothing may overtake an event that waits for the job. */
			if (!w->job && !w->qlen && !needs_fs(w, ev))
				handle_event(w, NULL, ev);
			else
				queue_push(w, ev);
			p += sizeof(*ev) + ev->len;
		}
	}
	if ((w->qlen || w->qlost) && !w->job)
		job_submit(w);
}

bool fs_watch_busy(const struct fs_watch *w)
{
	return w->job || w->qlen || w->qlost;
}

static void on_io(struct ev_loop *loop, ev_io *io, int revents)
{
	fs_watch_drain(io->data);
}

int fs_watch_prepare(const char *root, bool recursive, struct fs_watch **out, char *err, size_t errlen)
{
	struct fs_watch *w = calloc(1, sizeof(*w));
	int rc;

	*out = NULL;
	if (!w || !(w->root = strdup(root))) {
		free(w);
		snprintf(err, errlen, "error creating watcher: %s", go_strerror(ENOMEM));
		return -ENOMEM;
	}
	w->recursive = recursive;
	pthread_mutex_init(&w->lock, NULL);
	w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (w->fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "error creating watcher: %s", go_strerror(-rc));
		pthread_mutex_destroy(&w->lock);
		free(w->root);
		free(w);
		return rc;
	}
	rc = add_watch(w, NULL, "");
	if (rc < 0) {
		snprintf(err, errlen, "error adding path %s to watcher: %s", root, go_strerror(-rc));
		fs_watch_free(w);
		return rc;
	}
	if (recursive)
		walk_add(w, NULL, "", false, 0);
	*out = w;
	return 0;
}

void fs_watch_start(struct fs_watch *w, bool entries, fs_watch_cb cb, fs_watch_idle_cb idle, void *ud)
{
	w->entries = entries;
	w->cb = cb;
	w->idle = idle;
	w->ud = ud;
	w->key = worker_path_key(w->root);
	ev_io_init(&w->io, on_io, w->fd, EV_READ);
	w->io.data = w;
	ev_io_start(envd_loop, &w->io);
}

int fs_watch_new(const char *root, bool recursive, bool entries, fs_watch_cb cb, fs_watch_idle_cb idle, void *ud,
		 struct fs_watch **out, char *err, size_t errlen)
{
	int rc = fs_watch_prepare(root, recursive, out, err, errlen);

	if (rc == 0)
		fs_watch_start(*out, entries, cb, idle, ud);
	return rc;
}

static void watch_destroy(struct fs_watch *w)
{
	if (w->fd >= 0)
		close(w->fd);
	for (size_t i = 0; i < w->n; i++)
		free(w->w[i].rel);
	free(w->w);
	free(w->q);
	free(w->pending_rel);
	free(w->root);
	pthread_mutex_destroy(&w->lock);
	free(w);
}

void fs_watch_free(struct fs_watch *w)
{
	if (!w)
		return;
	if (ev_is_active(&w->io))
		ev_io_stop(envd_loop, &w->io);
	/* The job adds watches on the descriptor: it must stay open (and
	 * its number taken) until the job is done. */
	if (w->job) {
		w->orphan = true;
		return;
	}
	watch_destroy(w);
}

size_t fs_watch_count(const struct fs_watch *w)
{
	struct fs_watch *mw = (struct fs_watch *)w;
	size_t n;

	pthread_mutex_lock(&mw->lock);
	n = w->n;
	pthread_mutex_unlock(&mw->lock);
	return n;
}

/* ---- live upgrade: the inotify instance itself crosses the exec ---- */

int fs_watch_fd(const struct fs_watch *w)
{
	return w->fd;
}

size_t fs_watch_wd(const struct fs_watch *w, size_t i, int *wd, const char **rel)
{
	struct fs_watch *mw = (struct fs_watch *)w;
	size_t found = 0;

	pthread_mutex_lock(&mw->lock);
	if (i < w->n) {
		*wd = w->w[i].wd;
		*rel = w->w[i].rel;
		found = 1;
	}
	pthread_mutex_unlock(&mw->lock);
	return found;
}

int fs_watch_adopt(int fd, const char *root, bool recursive, const int *wds, const char *const *rels, size_t n,
		   struct fs_watch **out)
{
	struct fs_watch *w = calloc(1, sizeof(*w));

	*out = NULL;
	if (!w || !(w->root = strdup(root)) || (n && !(w->w = calloc(n, sizeof(*w->w))))) {
		if (w)
			free(w->root);
		free(w);
		return -ENOMEM;
	}
	pthread_mutex_init(&w->lock, NULL);
	w->fd = fd;
	w->recursive = recursive;
	w->cap = n;
	for (size_t i = 0; i < n; i++) {
		w->w[i].wd = wds[i];
		w->w[i].rel = strdup(rels[i] ? rels[i] : "");
		if (!w->w[i].rel) {
			w->n = i;
			w->fd = -1; /* the caller keeps the descriptor on failure */
			fs_watch_free(w);
			return -ENOMEM;
		}
	}
	w->n = n;
	fcntl(fd, F_SETFD, FD_CLOEXEC);
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	*out = w;
	return 0;
}
