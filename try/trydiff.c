/* SPDX-License-Identifier: Apache-2.0 */
/*
 * trydiff.c - a try's layer compared with the real directory (trydiff.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "try/trydiff.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "base/errstr.h"
#include "base/worker.h"

#define CMP_CHUNK (64 * 1024)

void trydiff_init(struct trydiff *d, size_t limit)
{
	memset(d, 0, sizeof(*d));
	d->limit = limit ? limit : (size_t)-1;
}

void trydiff_free(struct trydiff *d)
{
	free(d->v);
	arena_free(&d->arena);
	memset(d, 0, sizeof(*d));
}

const char *trydiff_kind_name(enum trydiff_kind k)
{
	switch (k) {
	case TRYDIFF_CREATED:
		return "created";
	case TRYDIFF_MODIFIED:
		return "modified";
	case TRYDIFF_DELETED:
		return "deleted";
	case TRYDIFF_RENAMED:
		return "renamed";
	case TRYDIFF_MODE:
		return "mode";
	}
	return "?";
}

struct scan {
	struct trydiff *d;
	const char *lower;       /* the real directory */
	int upper_root;          /* the layer's upper directory */
	char x_opaque[64], x_origin[64], x_whiteout[64];
	unsigned root;
	char *err;
	size_t errlen;
};

static int fail(struct scan *s, int rc, const char *what, const char *rel, int e)
{
	snprintf(s->err, s->errlen, "comparing the try's layer with %s: %s %s%s%s: %s", s->lower, what, s->lower,
		 *rel ? "/" : "", rel, go_strerror(e));
	return rc;
}

/* A full path for the calls that take none relative to a directory fd. */
static void fd_path(char *out, size_t len, int dirfd, const char *name)
{
	snprintf(out, len, "/proc/self/fd/%d/%s", dirfd, name);
}

static ssize_t xattr_at(int dirfd, const char *name, const char *key, void *buf, size_t len)
{
	char p[PATH_MAX];

	fd_path(p, sizeof(p), dirfd, name);
	return lgetxattr(p, key, buf, len);
}

/* overlay.origin holds struct ovl_fb: version, 0xfb, length, flags, the
 * handle's type, the filesystem's uuid (16), then the handle's bytes. */
static void origin_of(struct scan *s, int dirfd, const char *name, struct trydiff_handle *h)
{
	uint8_t fb[5 + 16 + TRYDIFF_HANDLE_MAX];
	ssize_t n = xattr_at(dirfd, name, s->x_origin, fb, sizeof(fb));

	h->len = 0;
	if (n < 21 || fb[1] != 0xfb || fb[2] != n)
		return;
	h->type = fb[4];
	h->len = (uint8_t)(n - 21);
	memcpy(h->bytes, fb + 21, h->len);
}

int trydiff_handle_of(const char *path, struct trydiff_handle *h)
{
	union {
		struct file_handle fh;
		uint8_t room[sizeof(struct file_handle) + MAX_HANDLE_SZ];
	} u;
	int mount_id;

	h->len = 0;
	u.fh.handle_bytes = MAX_HANDLE_SZ;
	if (name_to_handle_at(AT_FDCWD, path, &u.fh, &mount_id, 0) < 0)
		return -errno;
	if (u.fh.handle_bytes > TRYDIFF_HANDLE_MAX)
		return -EOVERFLOW;
	h->type = u.fh.handle_type;
	h->len = (uint8_t)u.fh.handle_bytes;
	memcpy(h->bytes, u.fh.f_handle, h->len);
	return 0;
}

bool trydiff_handle_eq(const struct trydiff_handle *a, const struct trydiff_handle *b)
{
	return a->len && a->len == b->len && a->type == b->type && memcmp(a->bytes, b->bytes, a->len) == 0;
}

static bool is_whiteout(struct scan *s, int dirfd, const char *name, const struct stat *st)
{
	if (S_ISCHR(st->st_mode))
		return st->st_rdev == makedev(0, 0);
	/* Newer kernels may mark a whiteout with an attribute on an empty file. */
	return S_ISREG(st->st_mode) && st->st_size == 0 && xattr_at(dirfd, name, s->x_whiteout, NULL, 0) >= 0;
}

static bool is_opaque(struct scan *s, int dirfd, const char *name)
{
	char v[4];
	ssize_t n = xattr_at(dirfd, name, s->x_opaque, v, sizeof(v));

	/* "y": opaque; "x" only says the directory holds attribute whiteouts. */
	return n == 1 && v[0] == 'y';
}

int trydiff_same_bytes(int dirfd_a, const char *a, int dirfd_b, const char *b)
{
	static _Thread_local char ba[CMP_CHUNK], bb[CMP_CHUNK];
	struct stat sa, sb;
	int fa = openat(dirfd_a, a, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
	int fb = fa < 0 ? -1 : openat(dirfd_b, b, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
	int rc = -errno;

	if (fa < 0 || fb < 0)
		goto out;
	if (fstat(fa, &sa) < 0 || fstat(fb, &sb) < 0) {
		rc = -errno;
		goto out;
	}
	rc = sa.st_size == sb.st_size;
	while (rc == 1) {
		ssize_t na = read(fa, ba, sizeof(ba)), nb;
		size_t got = 0;

		if (na < 0) {
			rc = -errno;
			break;
		}
		if (na == 0)
			break;
		/* b in the same amount (a short read of b is read on). */
		while (got < (size_t)na) {
			nb = read(fb, bb + got, (size_t)na - got);
			if (nb < 0) {
				rc = -errno;
				goto out;
			}
			if (nb == 0) {
				rc = 0;
				goto out;
			}
			got += (size_t)nb;
		}
		if (memcmp(ba, bb, (size_t)na) != 0)
			rc = 0;
		worker_progress();
	}
out:
	if (fa >= 0)
		close(fa);
	if (fb >= 0)
		close(fb);
	return rc;
}

/* Whether the entries' contents differ (same type): 1, 0, or -errno. */
static int differs(int ufd, int lfd, const char *name, const struct stat *us, const struct stat *ls)
{
	if (S_ISREG(us->st_mode)) {
		int r = trydiff_same_bytes(ufd, name, lfd, name);
		return r < 0 ? r : !r;
	}
	if (S_ISLNK(us->st_mode)) {
		char a[PATH_MAX], b[PATH_MAX];
		ssize_t na = readlinkat(ufd, name, a, sizeof(a)), nb = readlinkat(lfd, name, b, sizeof(b));

		if (na < 0 || nb < 0)
			return -errno;
		return na != nb || memcmp(a, b, (size_t)na) != 0;
	}
	if (S_ISCHR(us->st_mode) || S_ISBLK(us->st_mode))
		return us->st_rdev != ls->st_rdev;
	return 0;
}

static int64_t size_of(const struct stat *st)
{
	return S_ISDIR(st->st_mode) ? 0 : (int64_t)st->st_size;
}

/* Append a change (path: rel/name); NULL at the limit or out of memory. */
static struct trydiff_change *add(struct scan *s, const char *rel, const char *name, enum trydiff_kind kind)
{
	struct trydiff *d = s->d;
	struct trydiff_change *c;
	size_t rl = strlen(rel), nl = strlen(name);
	char *path;

	if (d->n >= d->limit) {
		d->truncated = true;
		return NULL;
	}
	if (d->n == d->cap) {
		size_t nc = d->cap ? d->cap * 2 : 64;
		struct trydiff_change *nv = realloc(d->v, nc * sizeof(*nv));

		if (!nv)
			return NULL;
		d->v = nv;
		d->cap = nc;
	}
	path = arena_alloc(&d->arena, rl + nl + 2);
	if (!path)
		return NULL;
	if (rl) {
		memcpy(path, rel, rl);
		path[rl] = '/';
		memcpy(path + rl + 1, name, nl + 1);
	} else {
		memcpy(path, name, nl + 1);
	}
	c = &d->v[d->n++];
	memset(c, 0, sizeof(*c));
	c->path = path;
	c->kind = kind;
	c->size = c->old_size = -1;
	c->root = s->root;
	return c;
}

static void set_new(struct trydiff_change *c, const struct stat *st)
{
	c->mode = st->st_mode;
	c->uid = st->st_uid;
	c->gid = st->st_gid;
	c->size = size_of(st);
}

static void set_old(struct trydiff_change *c, const struct stat *st)
{
	c->old_mode = st->st_mode;
	c->old_uid = st->st_uid;
	c->old_gid = st->st_gid;
	c->old_size = size_of(st);
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in directory fd (sorted; "." and ".." left out), malloc'ed. */
static int list_names(int fd, char ***names, size_t *n)
{
	int dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *dir = dfd < 0 ? NULL : fdopendir(dfd);
	struct dirent *de;
	size_t cap = 0;
	int rc = 0;

	*names = NULL;
	*n = 0;
	if (!dir) {
		rc = -errno;
		if (dfd >= 0)
			close(dfd);
		return rc;
	}
	while ((errno = 0, de = readdir(dir))) {
		if (de->d_name[0] == '.' && (!de->d_name[1] || (de->d_name[1] == '.' && !de->d_name[2])))
			continue;
		if (*n == cap) {
			size_t nc = cap ? cap * 2 : 32;
			char **nv = realloc(*names, nc * sizeof(*nv));
			if (!nv) {
				rc = -ENOMEM;
				break;
			}
			*names = nv;
			cap = nc;
		}
		if (!((*names)[*n] = strdup(de->d_name))) {
			rc = -ENOMEM;
			break;
		}
		(*n)++;
	}
	if (!rc && errno)
		rc = -errno;
	closedir(dir);
	if (rc == 0 && *n > 1)
		qsort(*names, *n, sizeof(**names), cmp_names);
	return rc;
}

static void free_names(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

static bool listed(char **names, size_t n, const char *name)
{
	return bsearch(&name, names, n, sizeof(*names), cmp_names) != NULL;
}

static int scan_dir(struct scan *s, int ufd, int lfd, const char *rel, int depth, bool opaque);

/* An entry of a real directory that the layer hides: DELETED, with its handle. */
static int add_deleted(struct scan *s, int lfd, const char *rel, const char *name, const struct stat *ls)
{
	struct trydiff_change *c = add(s, rel, name, TRYDIFF_DELETED);
	char p[PATH_MAX];

	if (!c)
		return s->d->truncated ? 0 : -ENOMEM;
	set_old(c, ls);
	if (!S_ISDIR(ls->st_mode)) {
		fd_path(p, sizeof(p), lfd, name);
		trydiff_handle_of(p, &c->handle);
	}
	return 0;
}

static int scan_entry(struct scan *s, int ufd, int lfd, const char *rel, const char *name, int depth)
{
	struct stat us, ls;
	bool lower = false;
	struct trydiff_change *c;
	char sub[PATH_MAX];
	int rc;

	worker_progress();
	if (fstatat(ufd, name, &us, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : fail(s, -EIO, "stat (layer)", rel, errno);
	if (lfd >= 0) {
		if (fstatat(lfd, name, &ls, AT_SYMLINK_NOFOLLOW) == 0)
			lower = true;
		else if (errno != ENOENT && errno != ENOTDIR)
			return fail(s, -EIO, "lstat", rel, errno);
	}
	if (is_whiteout(s, ufd, name, &us))
		return lower ? add_deleted(s, lfd, rel, name, &ls) : 0;
	if ((size_t)snprintf(sub, sizeof(sub), "%s%s%s", rel, *rel ? "/" : "", name) >= sizeof(sub))
		return fail(s, -ENAMETOOLONG, "path", rel, ENAMETOOLONG);

	if (S_ISDIR(us.st_mode)) {
		bool op = is_opaque(s, ufd, name);
		bool both = lower && S_ISDIR(ls.st_mode);
		int cu, cl = -1;

		bool attrs = both && ((us.st_mode & 07777) != (ls.st_mode & 07777) || us.st_uid != ls.st_uid ||
				      us.st_gid != ls.st_gid);

		c = NULL;
		if (!lower)
			c = add(s, rel, name, TRYDIFF_CREATED);
		else if (!both)
			c = add(s, rel, name, TRYDIFF_MODIFIED);
		else if (attrs)
			c = add(s, rel, name, TRYDIFF_MODE);
		if (!c && (!both || attrs))
			return s->d->truncated ? 0 : -ENOMEM;
		if (c) {
			set_new(c, &us);
			if (lower)
				set_old(c, &ls);
			c->content = lower && !both;
			c->opaque = op && both;
			origin_of(s, ufd, name, &c->handle);
		}
		if (depth >= TRYDIFF_DEPTH_MAX)
			return fail(s, -ELOOP, "descend into", sub, ELOOP);
		cu = openat(ufd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (cu < 0)
			return fail(s, -EIO, "open (layer)", sub, errno);
		if (both && (cl = openat(lfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
			close(cu);
			return fail(s, -EIO, "open", sub, errno);
		}
		rc = scan_dir(s, cu, cl, sub, depth + 1, op);
		close(cu);
		if (cl >= 0)
			close(cl);
		return rc;
	}

	if (!lower) {
		c = add(s, rel, name, TRYDIFF_CREATED);
		if (!c)
			return s->d->truncated ? 0 : -ENOMEM;
		set_new(c, &us);
		origin_of(s, ufd, name, &c->handle);
		return 0;
	}
	bool same_type = (us.st_mode & S_IFMT) == (ls.st_mode & S_IFMT);
	bool attrs = (us.st_mode & 07777) != (ls.st_mode & 07777) || us.st_uid != ls.st_uid || us.st_gid != ls.st_gid;
	int diff = 1;

	if (same_type) {
		diff = differs(ufd, lfd, name, &us, &ls);
		if (diff < 0)
			return fail(s, -EIO, "compare", sub, -diff);
	}
	if (!diff && !attrs)
		return 0; /* copied up, not changed (touch, an open for writing) */
	c = add(s, rel, name, diff ? TRYDIFF_MODIFIED : TRYDIFF_MODE);
	if (!c)
		return s->d->truncated ? 0 : -ENOMEM;
	set_new(c, &us);
	set_old(c, &ls);
	c->content = diff;
	origin_of(s, ufd, name, &c->handle);
	return 0;
}

static int scan_dir(struct scan *s, int ufd, int lfd, const char *rel, int depth, bool opaque)
{
	char **names = NULL, **lnames = NULL;
	size_t n = 0, ln = 0;
	int rc = list_names(ufd, &names, &n);

	if (rc < 0)
		return fail(s, rc, "list (layer)", rel, -rc);
	for (size_t i = 0; i < n && rc == 0 && !s->d->truncated; i++)
		rc = scan_entry(s, ufd, lfd, rel, names[i], depth);
	/* What the real directory has below an opaque one and the layer does
	   not list is gone in the try. */
	if (rc == 0 && opaque && lfd >= 0 && !s->d->truncated) {
		rc = list_names(lfd, &lnames, &ln);
		if (rc < 0)
			rc = fail(s, rc, "list", rel, -rc);
		for (size_t i = 0; i < ln && rc == 0 && !s->d->truncated; i++) {
			struct stat ls;

			if (listed(names, n, lnames[i]))
				continue;
			if (fstatat(lfd, lnames[i], &ls, AT_SYMLINK_NOFOLLOW) < 0)
				continue;
			rc = add_deleted(s, lfd, rel, lnames[i], &ls);
		}
	}
	free_names(names, n);
	free_names(lnames, ln);
	return rc;
}

/* Created files that came from a deleted one: renames. */
static int pair_renames(struct scan *s, size_t first)
{
	struct trydiff *d = s->d;
	size_t created = 0, deleted = 0, w;
	int lower_fd;
	bool *gone;

	for (size_t i = first; i < d->n; i++) {
		if (d->v[i].kind == TRYDIFF_CREATED && d->v[i].handle.len && !S_ISDIR(d->v[i].mode))
			created++;
		if (d->v[i].kind == TRYDIFF_DELETED && d->v[i].handle.len)
			deleted++;
	}
	if (!created || !deleted)
		return 0;
	lower_fd = open(s->lower, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (lower_fd < 0)
		return fail(s, -EIO, "open", "", errno);
	gone = calloc(d->n, sizeof(*gone));
	if (!gone) {
		close(lower_fd);
		return -ENOMEM;
	}
	for (size_t i = first; i < d->n; i++) {
		struct trydiff_change *c = &d->v[i];

		if (c->kind != TRYDIFF_CREATED || !c->handle.len || S_ISDIR(c->mode))
			continue;
		for (size_t j = first; j < d->n; j++) {
			struct trydiff_change *o = &d->v[j];
			int same;

			if (gone[j] || o->kind != TRYDIFF_DELETED || !trydiff_handle_eq(&c->handle, &o->handle) ||
			    (o->old_mode & S_IFMT) != (c->mode & S_IFMT))
				continue;
			c->kind = TRYDIFF_RENAMED;
			c->from = o->path;
			c->old_mode = o->old_mode;
			c->old_uid = o->old_uid;
			c->old_gid = o->old_gid;
			c->old_size = o->old_size;
			same = S_ISREG(c->mode) ? trydiff_same_bytes(s->upper_root, c->path, lower_fd, o->path) : 1;
			c->content = same == 0;
			gone[j] = true;
			break;
		}
	}
	w = first;
	for (size_t i = first; i < d->n; i++)
		if (!gone[i])
			d->v[w++] = d->v[i];
	d->n = w;
	free(gone);
	close(lower_fd);
	return 0;
}

int trydiff_scan(int upper_fd, const char *lower, const char *xattr_prefix, unsigned root, struct trydiff *d,
		 char *err, size_t errlen)
{
	struct scan s = { .d = d, .lower = lower, .upper_root = upper_fd, .root = root, .err = err, .errlen = errlen };
	size_t first = d->n;
	int lfd, rc;

	snprintf(s.x_opaque, sizeof(s.x_opaque), "%soverlay.opaque", xattr_prefix);
	snprintf(s.x_origin, sizeof(s.x_origin), "%soverlay.origin", xattr_prefix);
	snprintf(s.x_whiteout, sizeof(s.x_whiteout), "%soverlay.whiteout", xattr_prefix);
	lfd = open(lower, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (lfd < 0)
		return fail(&s, errno == ENOENT ? -ENOENT : -EIO, "open", "", errno);
	/* The directory itself: its layer copy took the real one's mode and
	   owner when the try began. */
	struct stat us, ls;
	if (fstat(upper_fd, &us) == 0 && fstat(lfd, &ls) == 0 &&
	    ((us.st_mode & 07777) != (ls.st_mode & 07777) || us.st_uid != ls.st_uid || us.st_gid != ls.st_gid)) {
		struct trydiff_change *c = add(&s, "", "", TRYDIFF_MODE);
		if (c) {
			set_new(c, &us);
			set_old(c, &ls);
		}
	}
	rc = scan_dir(&s, upper_fd, lfd, "", 0, is_opaque(&s, upper_fd, "."));
	close(lfd);
	if (rc == 0)
		rc = pair_renames(&s, first);
	if (rc == -ENOMEM && !err[0])
		snprintf(err, errlen, "comparing the try's layer with %s: %s", lower, go_strerror(ENOMEM));
	return rc;
}
