/* SPDX-License-Identifier: Apache-2.0 */
/*
 * watch.c - inotify with recursive directories, as the reference's
 * fsnotify fork behaves, plus an explicit overflow event (docs/protocol.md,
 * "Watching").
 */
#include "fs/watch.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "fs/entry.h"
#include "fs/listdir.h"
#include "base/errstr.h"
#include "base/loop.h"
#include "base/users.h"

#define WATCH_MASK \
	(IN_CREATE | IN_MODIFY | IN_DELETE | IN_DELETE_SELF | IN_MOVED_FROM | IN_MOVED_TO | IN_MOVE_SELF | \
	 IN_ATTRIB)

struct wentry {
	int wd;
	char *rel; /* relative to the root; "" for the root */
};

struct fs_watch {
	int fd;
	ev_io io;
	bool recursive;
	char *root;
	fs_watch_cb cb;
	void *ud;
	struct wentry *w;
	size_t n, cap;
	/* A directory moved away inside the tree, waiting for its MOVED_TO. */
	uint32_t pending_cookie;
	char *pending_rel;
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

static void drop_index(struct fs_watch *w, size_t i)
{
	free(w->w[i].rel);
	w->w[i] = w->w[--w->n];
}

/* Add (or re-label) a watch for root/rel. Returns 0 or -errno. */
static int add_watch(struct fs_watch *w, const char *rel)
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
	if (e) {
		free(e->rel);
		e->rel = copy;
		return 0;
	}
	if (w->n == w->cap) {
		size_t nc = w->cap ? w->cap * 2 : 16;
		struct wentry *nw = realloc(w->w, nc * sizeof(*nw));
		if (!nw) {
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
	return 0;
}

/*
 * Watch every directory below root/rel (not following symlinks). When
 * `announce`, emit a synthetic CREATE for every entry found (the contents
 * of a directory that appeared before its watch existed; the reference does
 * the same, so `mkdir -p a/b/c` reports all three).
 * Unreadable directories are skipped.
 */
static void walk_add(struct fs_watch *w, const char *rel, bool announce, int depth)
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
			w->cb(w->ud, child, abs, FILESYSTEM__EVENT_TYPE__EVENT_TYPE_CREATE);
		if (lstat(abs, &st) == 0 && S_ISDIR(st.st_mode)) {
			if (add_watch(w, child) == 0)
				walk_add(w, child, announce, depth + 1);
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
static void drop_subtree(struct fs_watch *w, const char *prefix)
{
	for (size_t i = 0; i < w->n;) {
		if (rel_under(w->w[i].rel, prefix)) {
			inotify_rm_watch(w->fd, w->w[i].wd);
			drop_index(w, i);
		} else {
			i++;
		}
	}
}

static void rename_subtree(struct fs_watch *w, const char *from, const char *to)
{
	size_t fl = strlen(from);

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
			free(w->w[i].rel);
			w->w[i].rel = c;
		}
	}
}

static void flush_pending(struct fs_watch *w)
{
	if (w->pending_rel) {
		drop_subtree(w, w->pending_rel);
		free(w->pending_rel);
		w->pending_rel = NULL;
	}
}

static void handle_event(struct fs_watch *w, const struct inotify_event *ev)
{
	char relname[PATH_MAX], abs[PATH_MAX];
	Filesystem__EventType types[5];
	struct wentry *e;
	size_t nt;

	if (ev->mask & IN_Q_OVERFLOW) {
		w->cb(w->ud, ".", w->root, FILESYSTEM__EVENT_TYPE__EVENT_TYPE_OVERFLOW);
		return;
	}
	e = find_wd(w, ev->wd);
	if (!e)
		return;
	if (ev->mask & IN_IGNORED) {
		drop_index(w, (size_t)(e - w->w));
		return;
	}
	if (ev->mask & IN_UNMOUNT)
		return;
	bool is_root = e->rel[0] == '\0';
	join_rel(e->rel, ev->len ? ev->name : "", relname, sizeof(relname));
	full_path(w, relname, abs, sizeof(abs));

	if (w->pending_rel && !((ev->mask & IN_MOVED_TO) && ev->cookie == w->pending_cookie))
		flush_pending(w);

	if (ev->mask & IN_DELETE_SELF) {
		/* The parent's IN_DELETE already reported a watched subdirectory. */
		if (!is_root)
			return;
		w->cb(w->ud, ".", w->root, FILESYSTEM__EVENT_TYPE__EVENT_TYPE_REMOVE);
		return;
	}
	if (ev->mask & IN_MOVE_SELF) {
		if (!is_root)
			return;
		/* The root moved: drop every watch; the stream goes quiet. */
		while (w->n) {
			inotify_rm_watch(w->fd, w->w[0].wd);
			drop_index(w, 0);
		}
		w->cb(w->ud, ".", w->root, FILESYSTEM__EVENT_TYPE__EVENT_TYPE_RENAME);
		return;
	}

	nt = fs_watch_map(ev->mask, types);
	/* The callback may not free us, but copy what we need after it anyway. */
	for (size_t i = 0; i < nt; i++)
		w->cb(w->ud, relname, abs, types[i]);

	if (!w->recursive || !(ev->mask & IN_ISDIR))
		return;
	if (ev->mask & IN_MOVED_FROM) {
		free(w->pending_rel);
		w->pending_rel = strdup(relname);
		w->pending_cookie = ev->cookie;
	} else if ((ev->mask & IN_MOVED_TO) && w->pending_rel && ev->cookie == w->pending_cookie) {
		rename_subtree(w, w->pending_rel, relname);
		free(w->pending_rel);
		w->pending_rel = NULL;
	} else if (ev->mask & (IN_CREATE | IN_MOVED_TO)) {
		if (add_watch(w, relname) == 0)
			walk_add(w, relname, true, 0);
	}
}

/* Shared read buffer: everything runs on the loop thread. */
static char watch_buf[64 * 1024] __attribute__((aligned(__alignof__(struct inotify_event))));

void fs_watch_drain(struct fs_watch *w)
{
	for (;;) {
		ssize_t n = read(w->fd, watch_buf, sizeof(watch_buf));
		if (n <= 0)
			return;
		for (char *p = watch_buf; p < watch_buf + n;) {
			const struct inotify_event *ev = (const struct inotify_event *)p;
			handle_event(w, ev);
			p += sizeof(*ev) + ev->len;
		}
	}
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
	w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (w->fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "error creating watcher: %s", go_strerror(-rc));
		free(w->root);
		free(w);
		return rc;
	}
	rc = add_watch(w, "");
	if (rc < 0) {
		snprintf(err, errlen, "error adding path %s to watcher: %s", root, go_strerror(-rc));
		fs_watch_free(w);
		return rc;
	}
	if (recursive)
		walk_add(w, "", false, 0);
	*out = w;
	return 0;
}

void fs_watch_start(struct fs_watch *w, fs_watch_cb cb, void *ud)
{
	w->cb = cb;
	w->ud = ud;
	ev_io_init(&w->io, on_io, w->fd, EV_READ);
	w->io.data = w;
	ev_io_start(envd_loop, &w->io);
}

int fs_watch_new(const char *root, bool recursive, fs_watch_cb cb, void *ud, struct fs_watch **out,
		 char *err, size_t errlen)
{
	int rc = fs_watch_prepare(root, recursive, out, err, errlen);

	if (rc == 0)
		fs_watch_start(*out, cb, ud);
	return rc;
}

void fs_watch_free(struct fs_watch *w)
{
	if (!w)
		return;
	if (ev_is_active(&w->io))
		ev_io_stop(envd_loop, &w->io);
	close(w->fd);
	for (size_t i = 0; i < w->n; i++)
		free(w->w[i].rel);
	free(w->w);
	free(w->pending_rel);
	free(w->root);
	free(w);
}

size_t fs_watch_count(const struct fs_watch *w)
{
	return w->n;
}
