/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tryapply.c - a try's commit: the check, then the plan applied
 * (tryapply.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "try/tryapply.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/errstr.h"
#include "base/log.h"
#include "base/worker.h"
#include "fs/fwrite.h"
#include "fs/wpath.h"

char tryapply_registry[256] = "/run/e2b/try-staging";

#define DEPTH_MAX 256

bool tryapply_name_is(const char *name)
{
	size_t pl = sizeof(TRYAPPLY_PREFIX) - 1;

	if (strncmp(name, TRYAPPLY_PREFIX, pl) != 0 || strlen(name) != pl + 16)
		return false;
	for (size_t i = pl; name[i]; i++)
		if (!((name[i] >= '0' && name[i] <= '9') || (name[i] >= 'a' && name[i] <= 'f')))
			return false;
	return true;
}

static int say(char *err, size_t errlen, int rc, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int say(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return rc;
}

/* The real path of change c (its `from` when asked). */
static int real_path(const struct tryapply_root *roots, const struct trydiff_change *c, bool from, char *out,
		     size_t len)
{
	const char *rel = from ? c->from : c->path;
	const char *base = roots[c->root].real;
	int n = *rel ? snprintf(out, len, "%s%s%s", strcmp(base, "/") ? base : "", "/", rel)
		     : snprintf(out, len, "%s", base);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static bool after(const struct timespec *a, const struct timespec *t0)
{
	return a->tv_sec > t0->tv_sec || (a->tv_sec == t0->tv_sec && a->tv_nsec > t0->tv_nsec);
}

/* ---- a set of strings (the directories checked, the new ones) ---- */

struct sset {
	char **slot;
	size_t cap, n;
};

static uint64_t str_hash(const char *s, size_t n)
{
	uint64_t h = 1469598103934665603ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
	return h;
}

static bool sset_has(const struct sset *s, const char *p, size_t n)
{
	if (!s->cap)
		return false;
	for (size_t i = str_hash(p, n) & (s->cap - 1); s->slot[i]; i = (i + 1) & (s->cap - 1))
		if (strlen(s->slot[i]) == n && memcmp(s->slot[i], p, n) == 0)
			return true;
	return false;
}

static int sset_add(struct sset *s, const char *p, size_t n)
{
	if ((s->n + 1) * 2 > s->cap) {
		struct sset g = { .cap = s->cap ? s->cap * 2 : 64 };

		if (!(g.slot = calloc(g.cap, sizeof(*g.slot))))
			return -ENOMEM;
		for (size_t i = 0; i < s->cap; i++) {
			if (!s->slot[i])
				continue;
			size_t j = str_hash(s->slot[i], strlen(s->slot[i])) & (g.cap - 1);
			while (g.slot[j])
				j = (j + 1) & (g.cap - 1);
			g.slot[j] = s->slot[i];
		}
		free(s->slot);
		g.n = s->n;
		*s = g;
	}
	size_t i = str_hash(p, n) & (s->cap - 1);
	while (s->slot[i])
		i = (i + 1) & (s->cap - 1);
	if (!(s->slot[i] = strndup(p, n)))
		return -ENOMEM;
	s->n++;
	return 0;
}

static void sset_free(struct sset *s)
{
	for (size_t i = 0; i < s->cap; i++)
		free(s->slot[i]);
	free(s->slot);
	memset(s, 0, sizeof(*s));
}

/* ---- the check ---- */

struct check {
	const struct trydiff *d;
	const struct tryapply_root *roots;
	const struct timespec *t0;
	struct sset dirs_ok;   /* real directories seen to be directories */
	struct sset fresh;     /* "<root>:<path>" of directories the try creates */
	char *err;
	size_t errlen;
};

static int conflict(struct check *k, const char *path, const char *why)
{
	return say(k->err, k->errlen, -ESTALE,
		   "the try cannot be committed: %s %s since it began; nothing was applied (commit again once "
		   "the try is what you want, or discard it)",
		   path, why);
}

/* Every directory between the root and path's parent is still one. */
static int check_parents(struct check *k, const struct trydiff_change *c, const char *rel)
{
	const char *base = k->roots[c->root].real;
	char key[PATH_MAX + 16], p[PATH_MAX];
	struct stat st;

	for (const char *s = strchr(rel, '/'); s; s = strchr(s + 1, '/')) {
		size_t n = (size_t)(s - rel);
		int kl = snprintf(key, sizeof(key), "%u:%.*s", c->root, (int)n, rel);

		/* Below a directory the try makes, everything is staged. */
		if (kl > 0 && sset_has(&k->fresh, key, (size_t)kl))
			return 0;
		if (snprintf(p, sizeof(p), "%s/%.*s", strcmp(base, "/") ? base : "", (int)n, rel) >= (int)sizeof(p))
			return say(k->err, k->errlen, -EIO, "path too long: %s/%s", base, rel);
		if (sset_has(&k->dirs_ok, p, strlen(p)))
			continue;
		if (lstat(p, &st) < 0 || !S_ISDIR(st.st_mode))
			return conflict(k, p, errno == ENOENT ? "was deleted in the real directory"
							     : "is no longer a directory in the real directory");
		if (sset_add(&k->dirs_ok, p, strlen(p)) < 0)
			return -ENOMEM;
	}
	return 0;
}

/* Nothing in the real tree at path changed since t0. */
static int check_tree(struct check *k, int at, const char *name, const char *path, int depth)
{
	struct stat st;
	DIR *dir;
	struct dirent *de;
	int fd, rc = 0;

	worker_progress();
	if (fstatat(at, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return conflict(k, path, "was deleted in the real directory");
	if (after(&st.st_ctim, k->t0))
		return conflict(k, path, "was changed in the real directory");
	if (!S_ISDIR(st.st_mode))
		return 0;
	if (depth > DEPTH_MAX)
		return say(k->err, k->errlen, -EIO, "%s: too deep", path);
	fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || !(dir = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return say(k->err, k->errlen, -EIO, "reading %s: %s", path, go_strerror(errno));
	}
	while (rc == 0 && (de = readdir(dir))) {
		char sub[PATH_MAX];

		if (de->d_name[0] == '.' && (!de->d_name[1] || (de->d_name[1] == '.' && !de->d_name[2])))
			continue;
		if (snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name) >= (int)sizeof(sub))
			continue;
		rc = check_tree(k, dirfd(dir), de->d_name, sub, depth + 1);
	}
	closedir(dir);
	return rc;
}

/* The real entry the change replaces, chmods or removes is as it was. */
static int check_existing(struct check *k, const struct trydiff_change *c, const char *path, bool whole_tree,
			  bool check_origin)
{
	struct stat st;
	struct trydiff_handle h;

	if (lstat(path, &st) < 0)
		return conflict(k, path, "was deleted in the real directory");
	if (whole_tree && S_ISDIR(st.st_mode))
		return check_tree(k, AT_FDCWD, path, path, 0);
	if (after(&st.st_ctim, k->t0))
		return conflict(k, path, "was changed in the real directory");
	if (check_origin && c->handle.len && trydiff_handle_of(path, &h) == 0 && !trydiff_handle_eq(&h, &c->handle))
		return conflict(k, path, "was replaced in the real directory");
	return 0;
}

/* A file the layer copied up from a real one (its origin) whose real file
   is gone since: deleted under the try. */
static int check_origin_alive(struct check *k, const struct trydiff_change *c, const char *path)
{
	union {
		struct file_handle fh;
		uint8_t room[sizeof(struct file_handle) + TRYDIFF_HANDLE_MAX];
	} u;
	int mfd, fd;

	if (!c->handle.len || S_ISDIR(c->mode))
		return 0;
	mfd = open(k->roots[c->root].real, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (mfd < 0)
		return 0;
	u.fh.handle_bytes = c->handle.len;
	u.fh.handle_type = c->handle.type;
	memcpy(u.fh.f_handle, c->handle.bytes, c->handle.len);
	fd = open_by_handle_at(mfd, &u.fh, O_PATH | O_CLOEXEC);
	close(mfd);
	if (fd >= 0) {
		close(fd);
		return 0;
	}
	return errno == ESTALE ? conflict(k, path, "was made from a file that was deleted in the real directory") : 0;
}

int tryapply_check(const struct trydiff *d, const struct tryapply_root *roots, const struct timespec *t0,
		   char *err, size_t errlen)
{
	struct check k = { .d = d, .roots = roots, .t0 = t0, .err = err, .errlen = errlen };
	char path[PATH_MAX], from[PATH_MAX], key[PATH_MAX + 16];
	int rc = 0;

	for (size_t i = 0; i < d->n && rc == 0; i++) {
		const struct trydiff_change *c = &d->v[i];

		if (S_ISDIR(c->mode) && (c->kind == TRYDIFF_CREATED || c->kind == TRYDIFF_RENAMED ||
					 (c->kind == TRYDIFF_MODIFIED && !S_ISDIR(c->old_mode)))) {
			int kl = snprintf(key, sizeof(key), "%u:%s", c->root, c->path);
			if (kl > 0 && (size_t)kl < sizeof(key) && sset_add(&k.fresh, key, (size_t)kl) < 0)
				rc = -ENOMEM;
		}
	}
	for (size_t i = 0; i < d->n && rc == 0; i++) {
		const struct trydiff_change *c = &d->v[i];
		struct stat st;

		worker_progress();
		if (real_path(roots, c, false, path, sizeof(path)) < 0 ||
		    (c->from && real_path(roots, c, true, from, sizeof(from)) < 0)) {
			rc = say(err, errlen, -EIO, "path too long below %s", roots[c->root].real);
			break;
		}
		if ((rc = check_parents(&k, c, c->path)) < 0)
			break;
		switch (c->kind) {
		case TRYDIFF_CREATED:
		case TRYDIFF_RENAMED: {
			/* Below a new directory, the place is the staged tree's. */
			const char *slash = strrchr(c->path, '/');
			int kl = slash ? snprintf(key, sizeof(key), "%u:%.*s", c->root, (int)(slash - c->path), c->path)
				       : -1;
			if (kl > 0 && sset_has(&k.fresh, key, (size_t)kl))
				break;
			if (lstat(path, &st) == 0) {
				rc = conflict(&k, path, "was created in the real directory");
				break;
			}
			if (c->kind == TRYDIFF_RENAMED) {
				if ((rc = check_parents(&k, c, c->from)) < 0 ||
				    (rc = check_existing(&k, c, from, false, true)) < 0)
					break;
			} else if ((rc = check_origin_alive(&k, c, path)) < 0) {
				break;
			}
			break;
		}
		case TRYDIFF_MODIFIED:
			rc = check_existing(&k, c, path, !S_ISDIR(c->mode) || !S_ISDIR(c->old_mode), true);
			break;
		case TRYDIFF_MODE:
			rc = check_existing(&k, c, path, false, true);
			break;
		case TRYDIFF_DELETED:
			rc = check_existing(&k, c, path, true, false);
			break;
		}
	}
	sset_free(&k.dirs_ok);
	sset_free(&k.fresh);
	if (rc == -ENOMEM && !err[0])
		say(err, errlen, rc, "checking the try's changes: %s", go_strerror(ENOMEM));
	return rc;
}

/* ---- hidden names and their registry ---- */

static void rand_hex(char out[17])
{
	static const char hx[] = "0123456789abcdef";
	unsigned char b[8];

	if (getrandom(b, sizeof(b), GRND_NONBLOCK) != (ssize_t)sizeof(b)) {
		struct timespec ts;
		static _Atomic unsigned long ctr;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		unsigned long v = (unsigned long)ts.tv_nsec ^ ((unsigned long)getpid() << 20) ^ ++ctr;
		memcpy(b, &v, sizeof(b));
	}
	for (int i = 0; i < 16; i++)
		out[i] = hx[(b[i / 2] >> (i % 2 ? 0 : 4)) & 15];
	out[16] = '\0';
}

/* A hidden name beside `path` (in its directory). */
static int hidden_beside(const char *path, char *out, size_t len)
{
	const char *slash = strrchr(path, '/');
	char hex[17];

	rand_hex(hex);
	if (!slash || snprintf(out, len, "%.*s/%s%s", (int)(slash - path), path, TRYAPPLY_PREFIX, hex) >= (int)len)
		return -ENAMETOOLONG;
	return 0;
}

static void reg_name(const char *hidden, char *out, size_t len)
{
	const char *base = strrchr(hidden, '/');

	snprintf(out, len, "%s/%ld.%s", tryapply_registry, (long)getpid(),
		 base ? base + 1 + sizeof(TRYAPPLY_PREFIX) - 1 : hidden);
}

/* Best effort: without the entry only a crash's leftover stays. */
static void reg_add(const char *hidden)
{
	char r[PATH_MAX];

	if (!tryapply_registry[0])
		return;
	reg_name(hidden, r, sizeof(r));
	if (symlink(hidden, r) < 0 && errno == ENOENT && (mkdir(tryapply_registry, 0700) == 0 || errno == EEXIST))
		(void)!symlink(hidden, r);
}

static void reg_forget(const char *hidden)
{
	char r[PATH_MAX];

	if (!tryapply_registry[0])
		return;
	reg_name(hidden, r, sizeof(r));
	unlink(r);
}

/* rm -rf of a hidden tree (never following a symlink). */
static int remove_tree(int at, const char *name, int depth)
{
	struct stat st;
	DIR *dir;
	struct dirent *de;
	int fd;

	worker_progress();
	if (fstatat(at, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISDIR(st.st_mode))
		return unlinkat(at, name, 0) < 0 && errno != ENOENT ? -errno : 0;
	if (depth > DEPTH_MAX)
		return -ELOOP;
	fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || !(dir = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	while ((de = readdir(dir))) {
		if (de->d_name[0] == '.' && (!de->d_name[1] || (de->d_name[1] == '.' && !de->d_name[2])))
			continue;
		remove_tree(dirfd(dir), de->d_name, depth + 1);
	}
	closedir(dir);
	return unlinkat(at, name, AT_REMOVEDIR) < 0 && errno != ENOENT ? -errno : 0;
}

/* ---- applying ---- */

/* What each change became while staging and publishing. */
struct slot {
	char *hidden;            /* a hidden name of ours (tree root, other, file, aside) */
	char *tmp, *reg;         /* a staged file's temporary and registry entry (fs/fwrite.h) */
	bool published;          /* the staged entry took its place */
	bool aside_done;         /* the real entry is at `hidden` */
	char *aside;
};

struct apply {
	const struct trydiff *d;
	const struct tryapply_root *roots;
	struct slot *s;
	struct tryapply_stats *st;
	char *err;
	size_t errlen;
};

static char *dup_or(const char *p, bool *oom)
{
	char *r = strdup(p);

	if (!r)
		*oom = true;
	return r;
}

/* Where a staged entry inside tree `t` goes: the tree's hidden root plus
   the rest of its path. */
static int tree_target(struct apply *a, size_t c, size_t t, char *out, size_t len)
{
	const char *cp = a->d->v[c].path, *tp = a->d->v[t].path;
	size_t tl = strlen(tp);

	if (!a->s[t].hidden || strncmp(cp, tp, tl) != 0 || cp[tl] != '/')
		return -EINVAL;
	return snprintf(out, len, "%s%s", a->s[t].hidden, cp + tl) >= (int)len ? -ENAMETOOLONG : 0;
}

/*
 * The directory `path` names its last component in, reached by the write
 * walk (fs/wpath.h), for the *at() call that follows: the commit acts on
 * names in directories it holds, never by a path that a swapped link
 * could send elsewhere between two calls. Everything on the way was
 * checked to be a real directory or is a tree the commit made, so a link
 * of another user's found there now was put there meanwhile: refused,
 * not followed with their rights. 0, or the error said into a->err.
 */
static int at_parent(struct apply *a, const char *path, struct wpath *w)
{
	char werr[2 * PATH_MAX + 512];
	int rc;

	wpath_init(w);
	rc = wpath_parent(w, path, NULL, werr, sizeof(werr));
	if (rc == 0 && (w->as.set || !w->name[0])) {
		wpath_close(w);
		return say(a->err, a->errlen, -EIO, "%s: a symbolic link of another user's is on its way (made during the commit)",
			   path);
	}
	if (rc < 0)
		return say(a->err, a->errlen, rc == -ENOSPC ? -ENOSPC : -EIO, "%s", werr);
	return 0;
}

/* The last component of path (a name beside another one of the same directory). */
static const char *base_of(const char *path)
{
	const char *sl = strrchr(path, '/');

	return sl ? sl + 1 : path;
}

/* Owner and mode of name in dirfd, never through a link: 0 or -errno. */
static int set_attrs_at(int dirfd, const char *name, const struct trydiff_change *c)
{
	/* chown first: it clears set-id bits, which the chmod puts back. */
	if (fchownat(dirfd, name, c->uid, c->gid, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (!S_ISLNK(c->mode) && fchmodat(dirfd, name, c->mode & 07777, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	return 0;
}

static int stage_file(struct apply *a, const struct tryplan_step *stp, const char *target, bool in_place)
{
	const struct trydiff_change *c = &a->d->v[stp->change];
	struct slot *sl = &a->s[stp->change];
	struct fwrite w;
	struct stat st;
	char werr[1024];
	bool oom = false;
	int in, rc;

	in = openat(a->roots[c->root].upper_fd, c->path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (in < 0)
		return say(a->err, a->errlen, -EIO, "reading the try's %s: %s", c->path, go_strerror(errno));
	fwrite_init(&w);
	rc = fwrite_begin(&w, target, c->uid, c->gid, !in_place, werr, sizeof(werr));
	if (rc == 0 && fchmod(w.fd, c->mode & 07777) < 0)
		rc = say(werr, sizeof(werr), -EIO, "chmod %s: %s", target, go_strerror(errno));
	if (rc == 0)
		rc = fwrite_copy(&w, in, werr, sizeof(werr));
	if (rc == 0 && fstat(in, &st) == 0)
		a->st->bytes += (size_t)st.st_size;
	close(in);
	if (rc == 0)
		rc = in_place ? fwrite_commit(&w, NULL, werr, sizeof(werr)) : fwrite_stage(&w, NULL, werr, sizeof(werr));
	else
		fwrite_discard(&w);
	if (rc < 0)
		return say(a->err, a->errlen, rc, "%s", werr);
	a->st->files++;
	if (!in_place && w.tmp[0]) {
		sl->tmp = dup_or(w.tmp, &oom);
		sl->reg = dup_or(w.reg, &oom);
	} else if (!in_place) {
		/* The write path chose to write in place (a hard-linked target):
		   it is done already. */
		sl->published = true;
	}
	return oom ? -ENOMEM : 0;
}

static int stage_other(struct apply *a, const struct trydiff_change *c, const char *target)
{
	int ufd = a->roots[c->root].upper_fd, rc;
	struct wpath w;

	if (S_ISLNK(c->mode)) {
		char t[PATH_MAX];
		ssize_t n = readlinkat(ufd, c->path, t, sizeof(t) - 1);

		if (n < 0)
			return say(a->err, a->errlen, -EIO, "reading the try's %s: %s", c->path, go_strerror(errno));
		t[n] = '\0';
		if ((rc = at_parent(a, target, &w)) < 0)
			return rc;
		if (symlinkat(t, w.dirfd, w.name) < 0)
			goto failed;
	} else {
		struct stat st;

		if (fstatat(ufd, c->path, &st, AT_SYMLINK_NOFOLLOW) < 0)
			return say(a->err, a->errlen, -EIO, "reading the try's %s: %s", c->path, go_strerror(errno));
		if ((rc = at_parent(a, target, &w)) < 0)
			return rc;
		if (mknodat(w.dirfd, w.name, (st.st_mode & S_IFMT) | 0600, st.st_rdev) < 0)
			goto failed;
	}
	if ((rc = set_attrs_at(w.dirfd, w.name, c)) < 0) {
		wpath_close(&w);
		return say(a->err, a->errlen, -EIO, "setting the owner and mode of %s: %s", target, go_strerror(-rc));
	}
	wpath_close(&w);
	return 0;
failed:
	rc = errno;
	wpath_close(&w);
	return say(a->err, a->errlen, rc == ENOSPC ? -ENOSPC : -EIO, "%s %s: %s", S_ISLNK(c->mode) ? "symlink" : "mknod",
		   target, go_strerror(rc));
}

static int stage_dir(struct apply *a, const struct trydiff_change *c, const char *target)
{
	struct wpath w;
	int rc;

	if ((rc = at_parent(a, target, &w)) < 0)
		return rc;
	if (mkdirat(w.dirfd, w.name, 0700) < 0) {
		rc = errno;
		wpath_close(&w);
		return say(a->err, a->errlen, rc == ENOSPC ? -ENOSPC : -EIO, "mkdir %s: %s", target, go_strerror(rc));
	}
	rc = set_attrs_at(w.dirfd, w.name, c);
	wpath_close(&w);
	if (rc < 0)
		return say(a->err, a->errlen, -EIO, "setting the owner and mode of %s: %s", target, go_strerror(-rc));
	a->st->dirs++;
	return 0;
}

/* rm -rf of the hidden tree at path (ours: made or put aside by the commit). */
static int remove_hidden(struct apply *a, const char *path)
{
	struct wpath w;
	int rc;

	if ((rc = at_parent(a, path, &w)) < 0)
		return rc;
	rc = remove_tree(w.dirfd, w.name, 0);
	wpath_close(&w);
	return rc;
}

/* Rename name `from` of path's directory to path's own name there (or,
   `back`, path's name to `from`): 0 or the error said into a->err. */
static int rename_beside(struct apply *a, const char *path, const char *from, bool back)
{
	struct wpath w;
	int rc;

	if ((rc = at_parent(a, path, &w)) < 0)
		return rc;
	rc = back ? renameat(w.dirfd, w.name, w.dirfd, base_of(from)) : renameat(w.dirfd, base_of(from), w.dirfd, w.name);
	rc = rc < 0 ? errno : 0;
	wpath_close(&w);
	if (rc)
		return say(a->err, a->errlen, -EIO, "rename %s %s: %s", back ? path : from, back ? from : path,
			   go_strerror(rc));
	return 0;
}

static int do_stage(struct apply *a, const struct tryplan_step *stp)
{
	const struct trydiff_change *c = &a->d->v[stp->change];
	struct slot *sl = &a->s[stp->change];
	char path[PATH_MAX], target[PATH_MAX];
	bool oom = false;
	int rc;

	if (real_path(a->roots, c, false, path, sizeof(path)) < 0)
		return say(a->err, a->errlen, -EIO, "path too long: %s", c->path);
	if (stp->tree != TRYPLAN_NONE && stp->op != TRYPLAN_STAGE_ROOT) {
		if (tree_target(a, stp->change, stp->tree, target, sizeof(target)) < 0)
			return say(a->err, a->errlen, -EIO, "path too long: %s", c->path);
	} else if (stp->hidden) {
		if (hidden_beside(path, target, sizeof(target)) < 0)
			return say(a->err, a->errlen, -EIO, "path too long: %s", path);
		if (!(sl->hidden = dup_or(target, &oom)))
			return -ENOMEM;
		reg_add(target);
	}
	switch (stp->op) {
	case TRYPLAN_STAGE_ROOT:
	case TRYPLAN_STAGE_DIR:
		rc = stage_dir(a, c, target);
		break;
	case TRYPLAN_STAGE_FILE:
		rc = stage_file(a, stp, stp->tree != TRYPLAN_NONE || stp->hidden ? target : path,
				stp->tree != TRYPLAN_NONE || stp->hidden);
		break;
	case TRYPLAN_STAGE_OTHER:
		rc = stage_other(a, c, target);
		break;
	default:
		rc = -EINVAL;
	}
	return rc;
}

/* Drop whatever was staged and not published (staging failed or stopped). */
static void unstage(struct apply *a)
{
	for (size_t i = 0; i < a->d->n; i++) {
		struct slot *sl = &a->s[i];

		if (sl->published)
			continue;
		if (sl->tmp) {
			struct fwrite w;

			fwrite_init(&w);
			snprintf(w.tmp, sizeof(w.tmp), "%s", sl->tmp);
			snprintf(w.reg, sizeof(w.reg), "%s", sl->reg ? sl->reg : "");
			fwrite_discard(&w);
		}
		if (sl->hidden) {
			char why[PATH_MAX + 256];
			struct apply quiet = *a;

			/* A failure to look is said nowhere: the commit already
			   failed, and the registry keeps the name for the sweep. */
			quiet.err = why;
			quiet.errlen = sizeof(why);
			if (remove_hidden(&quiet, sl->hidden) == 0)
				reg_forget(sl->hidden);
		}
	}
}

static int do_publish_step(struct apply *a, const struct tryplan_step *stp)
{
	const struct trydiff_change *c = &a->d->v[stp->change];
	struct slot *sl = &a->s[stp->change];
	char path[PATH_MAX], ferr[1024];
	int rc = 0;

	if (real_path(a->roots, c, stp->op == TRYPLAN_UNLINK && stp->from, path, sizeof(path)) < 0)
		return say(a->err, a->errlen, -EIO, "path too long: %s", c->path);
	switch (stp->op) {
	case TRYPLAN_ASIDE:
		if (hidden_beside(path, ferr, sizeof(ferr)) < 0 || !(sl->aside = strdup(ferr)))
			return say(a->err, a->errlen, -EIO, "no room for a name beside %s", path);
		reg_add(sl->aside);
		if ((rc = rename_beside(a, path, sl->aside, true)) < 0)
			return rc;
		sl->aside_done = true;
		return 0;
	case TRYPLAN_PUBLISH:
		if (sl->published)
			return 0;
		if (sl->tmp) {
			struct fwrite w;
			struct wpath at;

			/* The commit's own rule first (at_parent); the write
			   path walks again under its rule to rename. */
			if ((rc = at_parent(a, path, &at)) < 0)
				return rc;
			wpath_close(&at);
			fwrite_init(&w);
			snprintf(w.target, sizeof(w.target), "%s", path);
			snprintf(w.tmp, sizeof(w.tmp), "%s", sl->tmp);
			snprintf(w.reg, sizeof(w.reg), "%s", sl->reg ? sl->reg : "");
			rc = fwrite_publish(&w, ferr, sizeof(ferr));
			if (rc < 0)
				return say(a->err, a->errlen, rc, "%s", ferr);
		} else if (sl->hidden) {
			if ((rc = rename_beside(a, path, sl->hidden, false)) < 0)
				return rc;
			reg_forget(sl->hidden);
		}
		sl->published = true;
		return 0;
	case TRYPLAN_UNLINK: {
		struct wpath w;

		if ((rc = at_parent(a, path, &w)) < 0)
			return rc;
		rc = unlinkat(w.dirfd, w.name, 0) < 0 && errno != ENOENT ? errno : 0;
		wpath_close(&w);
		if (rc)
			return say(a->err, a->errlen, -EIO, "unlink %s: %s", path, go_strerror(rc));
		a->st->removed++;
		return 0;
	}
	case TRYPLAN_ATTRS: {
		struct wpath w;

		if ((rc = at_parent(a, path, &w)) < 0)
			return rc;
		rc = set_attrs_at(w.dirfd, w.name, c);
		wpath_close(&w);
		if (rc < 0)
			return say(a->err, a->errlen, -EIO, "setting the owner and mode of %s: %s", path,
				   go_strerror(-rc));
		a->st->attrs++;
		return 0;
	}
	case TRYPLAN_REMOVE:
		if (sl->aside && sl->aside_done) {
			if ((rc = remove_hidden(a, sl->aside)) < 0)
				log_msg("warn", "try", "removing %s (was %s): %s", sl->aside, path, a->err);
			reg_forget(sl->aside);
			sl->aside_done = false;
			a->st->removed++;
		}
		return 0;
	default:
		return -EINVAL;
	}
}

/* A publish step failed: what was put aside goes back where its place is free. */
static void undo_asides(struct apply *a)
{
	char path[PATH_MAX];
	struct stat st;

	for (size_t i = 0; i < a->d->n; i++) {
		struct slot *sl = &a->s[i];

		struct wpath w;
		bool back;

		if (!sl->aside_done || real_path(a->roots, &a->d->v[i], false, path, sizeof(path)) < 0 ||
		    at_parent(a, path, &w) < 0)
			continue;
		back = fstatat(w.dirfd, w.name, &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT &&
		       renameat(w.dirfd, base_of(sl->aside), w.dirfd, w.name) == 0;
		wpath_close(&w);
		if (back) {
			reg_forget(sl->aside);
			sl->aside_done = false;
		}
	}
}

struct tryapply {
	struct apply a;          /* shared: each call works on a copy with its own stats and message */
	const struct tryplan *p;
	size_t stage_end;        /* the first step that is not a stage */
	size_t *files;           /* the STAGE_FILE and STAGE_OTHER steps */
	size_t n_files;
};

int tryapply_new(const struct trydiff *d, const struct tryplan *p, const struct tryapply_root *roots,
		 struct tryapply **out)
{
	struct tryapply *t = calloc(1, sizeof(*t));

	*out = NULL;
	if (!t || !(t->a.s = calloc(d->n + 1, sizeof(*t->a.s))) || !(t->files = calloc(p->n + 1, sizeof(*t->files)))) {
		if (t)
			free(t->a.s);
		free(t);
		return -ENOMEM;
	}
	t->a.d = d;
	t->a.roots = roots;
	t->p = p;
	while (t->stage_end < p->n && p->v[t->stage_end].op <= TRYPLAN_STAGE_OTHER) {
		if (p->v[t->stage_end].op >= TRYPLAN_STAGE_FILE)
			t->files[t->n_files++] = t->stage_end;
		t->stage_end++;
	}
	*out = t;
	return 0;
}

size_t tryapply_files(const struct tryapply *t)
{
	return t->n_files;
}

static struct apply view(struct tryapply *t, struct tryapply_stats *st, char *err, size_t errlen)
{
	struct apply a = t->a;

	a.st = st;
	a.err = err;
	a.errlen = errlen;
	return a;
}

static int stopped(const volatile bool *stop, char *err, size_t errlen)
{
	if (stop && *stop)
		return say(err, errlen, -ECANCELED, "the commit was stopped before anything was applied");
	return 0;
}

int tryapply_stage_dirs(struct tryapply *t, const volatile bool *stop, struct tryapply_stats *st, char *err,
			size_t errlen)
{
	struct apply a = view(t, st, err, errlen);
	int rc = 0;

	for (size_t i = 0; i < t->stage_end && rc == 0; i++)
		if (t->p->v[i].op <= TRYPLAN_STAGE_DIR && (rc = stopped(stop, err, errlen)) == 0)
			rc = do_stage(&a, &t->p->v[i]);
	if (rc == -ENOMEM && !err[0])
		say(err, errlen, rc, "committing: %s", go_strerror(ENOMEM));
	return rc;
}

int tryapply_stage_files(struct tryapply *t, size_t from, size_t to, const volatile bool *stop,
			 struct tryapply_stats *st, char *err, size_t errlen)
{
	struct apply a = view(t, st, err, errlen);
	int rc = 0;

	for (size_t k = from; k < to && k < t->n_files && rc == 0; k++)
		if ((rc = stopped(stop, err, errlen)) == 0)
			rc = do_stage(&a, &t->p->v[t->files[k]]);
	if (rc == -ENOMEM && !err[0])
		say(err, errlen, rc, "committing: %s", go_strerror(ENOMEM));
	return rc;
}

void tryapply_unstage(struct tryapply *t)
{
	unstage(&t->a);
}

int tryapply_publish(struct tryapply *t, struct tryapply_stats *st, char *err, size_t errlen)
{
	struct apply a = view(t, st, err, errlen);
	const struct tryplan *p = t->p;
	size_t i = t->stage_end;
	int rc = 0;

	/* From here on the real directories change; no stop is heard. */
	for (; i < p->n; i++)
		if ((rc = do_publish_step(&a, &p->v[i])) < 0)
			break;
	if (rc < 0) {
		char why[1024];

		snprintf(why, sizeof(why), "%s", err);
		undo_asides(&a);
		unstage(&a);
		say(err, errlen, -EIO, "the commit stopped after %zu of its %zu steps that change the real directories: "
			       "%s; the try is kept (commit again to apply the rest)",
		    i - t->stage_end, p->n - t->stage_end, why);
		rc = -EIO;
	}
	return rc;
}

void tryapply_free(struct tryapply *t)
{
	if (!t)
		return;
	for (size_t j = 0; j < t->a.d->n; j++) {
		free(t->a.s[j].hidden);
		free(t->a.s[j].tmp);
		free(t->a.s[j].reg);
		free(t->a.s[j].aside);
	}
	free(t->a.s);
	free(t->files);
	free(t);
}

static void add_stats(struct tryapply_stats *to, const struct tryapply_stats *from)
{
	to->files += from->files;
	to->bytes += from->bytes;
	to->dirs += from->dirs;
	to->removed += from->removed;
	to->attrs += from->attrs;
}

int tryapply_run(const struct trydiff *d, const struct tryplan *p, const struct tryapply_root *roots,
		 const volatile bool *stop, struct tryapply_stats *st, char *err, size_t errlen)
{
	struct tryapply *t;
	struct tryapply_stats part = { 0 };
	int rc;

	memset(st, 0, sizeof(*st));
	if (tryapply_new(d, p, roots, &t) < 0)
		return say(err, errlen, -ENOMEM, "committing: %s", go_strerror(ENOMEM));
	rc = tryapply_stage_dirs(t, stop, st, err, errlen);
	if (rc == 0)
		rc = tryapply_stage_files(t, 0, t->n_files, stop, &part, err, errlen);
	add_stats(st, &part);
	if (rc < 0)
		tryapply_unstage(t);
	else
		rc = tryapply_publish(t, st, err, errlen);
	tryapply_free(t);
	return rc;
}

/* ---- the sweep after a crash ---- */

struct sweep_job {
	char reg[PATH_MAX];
	char target[PATH_MAX];
};

static void sweep_work(void *arg)
{
	struct sweep_job *j = arg;
	struct apply quiet = { 0 };
	char why[PATH_MAX + 256] = "";
	const char *base = strrchr(j->target, '/');

	quiet.err = why;
	quiet.errlen = sizeof(why);
	if (base && tryapply_name_is(base + 1) && remove_hidden(&quiet, j->target) < 0 && why[0])
		log_msg("warn", "try", "left %s: %s", j->target, why);
	unlink(j->reg);
}

static void sweep_done(void *arg)
{
	free(arg);
}

size_t tryapply_sweep(void)
{
	DIR *d;
	struct dirent *de;
	size_t n = 0;

	if (!tryapply_registry[0] || !(d = opendir(tryapply_registry)))
		return 0;
	while ((de = readdir(d))) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);
		struct sweep_job *j;
		ssize_t l;

		if (pid <= 0 || *end != '.' || (kill((pid_t)pid, 0) == 0 || errno != ESRCH))
			continue;
		if (!(j = calloc(1, sizeof(*j))))
			break;
		snprintf(j->reg, sizeof(j->reg), "%s/%s", tryapply_registry, de->d_name);
		l = readlink(j->reg, j->target, sizeof(j->target) - 1);
		if (l <= 0) {
			unlink(j->reg);
			free(j);
			continue;
		}
		j->target[l] = '\0';
		if (worker_submit(sweep_work, sweep_done, j) < 0) {
			free(j);
			break;
		}
		n++;
	}
	closedir(d);
	return n;
}
