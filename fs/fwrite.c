/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fwrite.c - a file written whole, atomically or in place (fwrite.h).
 */
#include "fs/fwrite.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "base/errstr.h"
#include "base/uptmp.h"
#include "fs/wpath.h"

/* The copy's buffer where the kernel cannot copy by itself. */
#define FWRITE_CHUNK (64 * 1024)

static int fw_fail(int rc, char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fw_fail(int rc, char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return rc;
}

void fwrite_init(struct fwrite *w)
{
	w->fd = -1;
	w->created = false;
	w->target[0] = w->tmp[0] = w->reg[0] = '\0';
	w->before_replace = NULL;
	w->before_arg = NULL;
	wpath_init(&w->at);
	w->uid = (uid_t)-1;
	w->gid = (gid_t)-1;
	w->replaces = false;
	w->src_checked = false;
}

/* Opening the target met another file than it looked at: look again, this
 * many times at most (a racer swapping names makes the write fail). */
#define FW_TRIES 8
#define FW_FOLLOWED 1 /* the name was a link, now followed: look again */

/* The message's errno: EACCES is the caller's to tell (403). */
static int fw_code(int e)
{
	return e == EACCES ? -EACCES : e == ENOSPC ? -ENOSPC : -EIO;
}

/*
 * The mode a replacement takes from the target: what chown(2) leaves of
 * it (set-user-ID cleared; set-group-ID too on a group-executable file),
 * since an in-place write chowns the file to the user. Without this, the
 * owner of a target could choose set-ID bits for the content of another,
 * root among them.
 */
static mode_t fw_mode(mode_t m)
{
	m &= 07777 & ~(mode_t)S_ISUID;
	if (m & S_IXGRP)
		m &= ~(mode_t)S_ISGID;
	return m;
}

/* The base name of the temporary, which is in the target's directory. */
static const char *fw_tmp_name(const struct fwrite *w)
{
	return strrchr(w->tmp, '/') + 1;
}

/* The directory the temporary goes to, as a path (for its registry entry
 * and messages): the target's as given, or where a link led. */
static void fw_dir_path(const struct fwrite *w, char *out, size_t len)
{
	const char *sl = strrchr(w->target, '/');

	if (w->at.followed) {
		char proc[64];
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", w->at.dirfd);
		ssize_t n = readlink(proc, out, len - 1);
		if (n > 0) {
			out[n] = '\0';
			return;
		}
	}
	if (!sl)
		snprintf(out, len, ".");
	else if (sl == w->target)
		snprintf(out, len, "/");
	else
		snprintf(out, len, "%.*s", (int)(sl - w->target), w->target);
}

/* Create the temporary (mode before umask), registered first. */
static int fw_tmp(struct fwrite *w, bool replaces, mode_t mode, char *err, size_t errlen)
{
	char dir[PATH_MAX];
	struct fsid_saved sv;
	int fd;

	fw_dir_path(w, dir, sizeof(dir));
	if ((fd = wpath_enter(&w->at, &sv)) == 0)
		fd = uptmp_create_registered(w->at.dirfd, dir, replaces, mode, w->tmp, sizeof(w->tmp), w->reg,
					     sizeof(w->reg));
	wpath_leave(&sv);
	if (fd == -ENAMETOOLONG)
		return fw_fail(-ENAMETOOLONG, err, errlen, "error resolving path: %s", go_strerror(ENAMETOOLONG));
	if (fd < 0) {
		w->tmp[0] = '\0';
		if (fd == -ENOSPC)
			return fw_fail(-ENOSPC, err, errlen, "not enough inodes available: open %s: %s", w->target,
				       go_strerror(ENOSPC));
		return fw_fail(fw_code(-fd), err, errlen, "error opening file: open %s: %s", w->target, go_strerror(-fd));
	}
	w->fd = fd;
	return 0;
}

/* Give w->fd to the user. */
static int fw_chown(struct fwrite *w, char *err, size_t errlen)
{
	if (fchown(w->fd, w->uid, w->gid) < 0)
		return fw_fail(-EIO, err, errlen, "error changing file ownership: chown %s: %s", w->target,
			       go_strerror(errno));
	return 0;
}

/*
 * The temporary takes the replaced file's attributes (st; src an fd of it,
 * or -1 when it could not be read: mode and owner only), before any byte.
 */
static int fw_take_attrs(struct fwrite *w, int src, const struct stat *st, char *err, size_t errlen)
{
	int rc = fw_chown(w, err, errlen);

	if (rc < 0)
		return rc;
	/* After fchown; a failure leaves 0600, the safe side. */
	fchmod(w->fd, fw_mode(st->st_mode));
	if (src >= 0 && (rc = uptmp_copy_attrs_fd(src, w->fd)) < 0)
		return fw_fail(-ENOSPC, err, errlen, "not enough space for file metadata: %s", go_strerror(-rc));
	return 0;
}

/* Open the name for reading its attributes: an fd of the file `st` is, -1
 * when it may not be read, or -EAGAIN when another file is there now. */
static int fw_open_source(struct fwrite *w, const struct stat *st)
{
	struct fsid_saved sv;
	struct stat s2;
	int fd, e;

	if ((fd = wpath_enter(&w->at, &sv)) == 0)
		fd = openat(w->at.dirfd, w->at.name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	e = errno;
	wpath_leave(&sv);
	if (fd < 0)
		return e == EACCES || e == EPERM ? -1 : -EAGAIN;
	if (fstat(fd, &s2) < 0 || s2.st_dev != st->st_dev || s2.st_ino != st->st_ino) {
		close(fd);
		return -EAGAIN;
	}
	return fd;
}

/* fw_replace's `given` when the caller has no descriptor of the file. */
#define FW_SRC_OPEN (-2)

/* Atomic over the existing file st: the attributes' source is `given`
 * (an fd of st's file, borrowed) or, FW_SRC_OPEN, opened here. */
static int fw_replace(struct fwrite *w, const struct stat *st, int given, char *err, size_t errlen)
{
	int src = given, rc;

	/* Only a regular file is opened: opening a device can act on it. */
	if (given == FW_SRC_OPEN && (src = S_ISREG(st->st_mode) ? fw_open_source(w, st) : -1) == -EAGAIN)
		return -EAGAIN;
	rc = fw_tmp(w, true, 0600, err, errlen);
	if (rc == 0)
		rc = fw_take_attrs(w, src, st, err, errlen);
	if (src >= 0 && given == FW_SRC_OPEN)
		close(src);
	w->replaces = rc == 0;
	w->dev = st->st_dev;
	w->ino = st->st_ino;
	return rc;
}

/* In place over the existing file st. */
static int fw_in_place(struct fwrite *w, const struct stat *st, char *err, size_t errlen)
{
	struct fsid_saved sv;
	struct stat s2;
	int fd, e;

	/* O_NONBLOCK only matters for FIFOs: fail (ENXIO) instead of
	 * blocking until some reader shows up. */
	if ((fd = wpath_enter(&w->at, &sv)) == 0)
		fd = openat(w->at.dirfd, w->at.name, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	e = errno;
	wpath_leave(&sv);
	if (fd < 0) {
		if (e == ENOENT || e == ELOOP)
			return -EAGAIN;
		return fw_fail(fw_code(e), err, errlen, "error opening file: open %s: %s", w->target, go_strerror(e));
	}
	if (fstat(fd, &s2) < 0 || s2.st_dev != st->st_dev || s2.st_ino != st->st_ino) {
		close(fd);
		return -EAGAIN;
	}
	w->fd = fd;
	/* Given to the user before it is truncated, as the reference does. */
	if ((e = fw_chown(w, err, errlen)) < 0)
		return e;
	if (S_ISREG(s2.st_mode) && ftruncate(fd, 0) < 0)
		return fw_fail(-EIO, err, errlen, "error opening file: truncate %s: %s", w->target, go_strerror(errno));
	return 0;
}

/* In place, a new file. */
static int fw_create(struct fwrite *w, char *err, size_t errlen)
{
	struct fsid_saved sv;
	int fd, e;

	if ((fd = wpath_enter(&w->at, &sv)) == 0)
		fd = openat(w->at.dirfd, w->at.name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
	e = errno;
	wpath_leave(&sv);
	if (fd < 0) {
		if (e == EEXIST)
			return -EAGAIN;
		if (e == ENOSPC)
			return fw_fail(-ENOSPC, err, errlen, "not enough inodes available: open %s: %s", w->target,
				       go_strerror(e));
		return fw_fail(fw_code(e), err, errlen, "error opening file: open %s: %s", w->target, go_strerror(e));
	}
	w->fd = fd;
	w->created = true;
	return fw_chown(w, err, errlen);
}

/* The name holds the file st (neither a link nor a directory): replace
 * it or write it in place. src as fw_replace's `given`. */
static int fw_open_file(struct fwrite *w, const struct stat *st, int src, bool atomic, char *err, size_t errlen)
{
	bool replace = atomic && S_ISREG(st->st_mode) && st->st_nlink == 1;

	/* Another name of a file that someone else may have linked into
	 * the directory: root's rights do not write through it. */
	if (!replace && st->st_nlink > 1 && wpath_as_root(&w->at) && !wpath_dir_private(&w->at, st->st_uid))
		replace = true;
	return replace ? fw_replace(w, st, src, err, errlen) : fw_in_place(w, st, err, errlen);
}

/* Look at the target's name once and open what it is: 0, an error,
 * FW_FOLLOWED or -EAGAIN. */
static int fw_open_name(struct fwrite *w, bool *atomic, char *err, size_t errlen)
{
	struct fsid_saved sv;
	struct stat st;
	int r, e;

	if ((r = wpath_enter(&w->at, &sv)) == 0)
		r = w->at.name[0] ? fstatat(w->at.dirfd, w->at.name, &st, AT_SYMLINK_NOFOLLOW) : fstat(w->at.dirfd, &st);
	e = errno;
	wpath_leave(&sv);
	if (r < 0 && e != ENOENT)
		return fw_fail(fw_code(e), err, errlen, "error getting file info: stat %s: %s", w->target, go_strerror(e));
	if (r == 0 && S_ISLNK(st.st_mode)) {
		char ferr[PATH_MAX + 256];
		int rc = wpath_follow(&w->at, ferr, sizeof(ferr));
		if (rc < 0)
			return fw_fail(fw_code(-rc), err, errlen, "error opening file: open %s: %s", w->target,
				       go_strerror(-rc));
		*atomic = false;
		return FW_FOLLOWED;
	}
	if (r == 0 && S_ISDIR(st.st_mode))
		return fw_fail(-EISDIR, err, errlen, "path is a directory: %s", w->target);
	if (w->at.slash) /* "f/": what open(2) says of a file or of nothing there */
		return fw_fail(-EIO, err, errlen, "error opening file: open %s: %s", w->target,
			       go_strerror(r == 0 ? ENOTDIR : EISDIR));
	if (r < 0) {
		if (!*atomic)
			return fw_create(w, err, errlen);
		if ((r = fw_tmp(w, false, 0666, err, errlen)) < 0)
			return r;
		return fw_chown(w, err, errlen);
	}
	return fw_open_file(w, &st, FW_SRC_OPEN, *atomic, err, errlen);
}

/* fw_open_name until it opens a file or fails. */
static int fw_open_loop(struct fwrite *w, const char *target, bool atomic, char *err, size_t errlen)
{
	int rc, tries = 0;

	while ((rc = fw_open_name(w, &atomic, err, errlen)) == FW_FOLLOWED || rc == -EAGAIN) {
		if (rc == -EAGAIN && ++tries == FW_TRIES)
			return fw_fail(-EIO, err, errlen, "error opening file: %s kept changing while it was opened",
				       target);
	}
	return rc;
}

int fwrite_begin(struct fwrite *w, const char *target, uid_t uid, gid_t gid, bool atomic, char *err, size_t errlen)
{
	struct wpath_mk mk = { .uid = uid, .gid = gid };
	char derr[2 * PATH_MAX + 512];
	int rc;

	snprintf(w->target, sizeof(w->target), "%s", target);
	w->uid = uid;
	w->gid = gid;
	wpath_close(&w->at);
	rc = wpath_parent(&w->at, target, &mk, derr, sizeof(derr));
	if (rc < 0)
		return fw_fail(rc == -EACCES ? -EACCES : -EIO, err, errlen, "error ensuring directories: %s", derr);
	return fw_open_loop(w, target, atomic, err, errlen);
}

int fwrite_begin_from(struct fwrite *w, const char *target, struct wpath *at, int src, const struct stat *st, uid_t uid,
		      gid_t gid, bool atomic, char *err, size_t errlen)
{
	int rc;

	snprintf(w->target, sizeof(w->target), "%s", target);
	w->uid = uid;
	w->gid = gid;
	wpath_close(&w->at);
	w->at = *at;
	at->dirfd = -1; /* w's now */
	if (!S_ISREG(st->st_mode) || !w->at.name[0] || w->at.slash)
		return fw_fail(-EIO, err, errlen, "error opening file: %s is not a regular file", w->target);
	rc = fw_open_file(w, st, src, atomic, err, errlen);
	if (rc == -EAGAIN) /* not the file st any more: as fwrite_begin from here */
		return fw_open_loop(w, w->target, atomic, err, errlen);
	/* The hook holds the name to src's file until the rename. */
	w->src_checked = rc == 0 && w->replaces && w->before_replace;
	return rc;
}
static int fw_write_error(struct fwrite *w, int e, char *err, size_t errlen)
{
	if (e == ENOSPC || e == EDQUOT)
		return fw_fail(-ENOSPC, err, errlen, "not enough disk space available");
	return fw_fail(-EIO, err, errlen, "error writing file: write %s: %s", w->target, go_strerror(e));
}

int fwrite_write(struct fwrite *w, const void *p, size_t n, char *err, size_t errlen)
{
	const char *b = p;

	while (n) {
		ssize_t k = write(w->fd, b, n);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return fw_write_error(w, errno, err, errlen);
		}
		b += k;
		n -= (size_t)k;
	}
	return 0;
}

int fwrite_copy_fds(int in, int out)
{
	for (;;) {
		ssize_t n = copy_file_range(in, NULL, out, NULL, 1 << 30, 0);
		if (n == 0)
			return 0;
		if (n > 0)
			continue;
		if (errno == EINTR)
			continue;
		if (errno != EXDEV && errno != ENOSYS && errno != EINVAL && errno != EOPNOTSUPP)
			return -errno;
		break;
	}
	/* Fallback for filesystems without copy_file_range. */
	static _Thread_local char buf[FWRITE_CHUNK];
	for (;;) {
		ssize_t n = read(in, buf, sizeof(buf));
		if (n == 0)
			return 0;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		for (ssize_t o = 0; o < n;) {
			ssize_t k = write(out, buf + o, (size_t)(n - o));
			if (k < 0) {
				if (errno == EINTR)
					continue;
				return -errno;
			}
			o += k;
		}
	}
}

int fwrite_copy(struct fwrite *w, int in, char *err, size_t errlen)
{
	int rc = fwrite_copy_fds(in, w->fd);

	return rc < 0 ? fw_write_error(w, -rc, err, errlen) : 0;
}

/* Remove the temporary, or the new target, by its name in the directory. */
static void fw_unlink(struct fwrite *w, bool tmp)
{
	struct fsid_saved sv;

	if (w->at.dirfd < 0) {
		unlink(tmp ? w->tmp : w->target);
		return;
	}
	if (wpath_enter(&w->at, &sv) == 0)
		unlinkat(w->at.dirfd, tmp ? fw_tmp_name(w) : w->at.name, 0);
	wpath_leave(&sv);
}

/* After a failed close or rename: the temporary (or a new target) goes. */
static void fw_unlink_left(struct fwrite *w)
{
	if (w->tmp[0]) {
		fw_unlink(w, true);
		uptmp_forget(w->reg);
		w->tmp[0] = '\0';
	} else if (w->created) {
		fw_unlink(w, false);
	}
	w->created = false;
}

/* Every extended attribute of fd goes (before it takes another file's). */
static void fw_clear_attrs(int fd)
{
	char names[4096];
	ssize_t n = flistxattr(fd, names, sizeof(names));

	for (ssize_t i = 0; n > 0 && i < n; i += (ssize_t)strlen(names + i) + 1)
		fremovexattr(fd, names + i);
}

/*
 * Before the rename: the name still leads to the file whose attributes
 * the temporary took. If another writer replaced it meanwhile, the
 * temporary takes the new one's; if it is gone, or no longer a regular
 * file, the rename replaces the name with what the temporary has.
 */
static int fw_recheck(struct fwrite *w, char *err, size_t errlen)
{
	struct fsid_saved sv;
	struct stat st;
	int r, src, rc;

	if ((r = wpath_enter(&w->at, &sv)) == 0)
		r = fstatat(w->at.dirfd, w->at.name, &st, AT_SYMLINK_NOFOLLOW);
	wpath_leave(&sv);
	if (r < 0 || (st.st_dev == w->dev && st.st_ino == w->ino) || !S_ISREG(st.st_mode))
		return 0;
	if ((src = fw_open_source(w, &st)) == -EAGAIN)
		return 0;
	fw_clear_attrs(w->fd);
	rc = fw_take_attrs(w, src, &st, err, errlen);
	if (src >= 0)
		close(src);
	w->dev = st.st_dev;
	w->ino = st.st_ino;
	return rc;
}

/* The temporary over the target: 0 or -errno. */
static int fw_rename(struct fwrite *w)
{
	struct fsid_saved sv;
	int r;

	if (w->at.dirfd < 0) {
		/* Staged: known by its names. The temporary is beside the
		   target; walk to their directory again, under the rule. */
		const char *ts = strrchr(w->tmp, '/'), *gs = strrchr(w->target, '/');
		char werr[2 * PATH_MAX + 512];

		if (!ts || !gs || ts - w->tmp != gs - w->target || strncmp(w->tmp, w->target, (size_t)(ts - w->tmp)))
			return rename(w->tmp, w->target) < 0 ? -errno : 0;
		if ((r = wpath_parent(&w->at, w->target, NULL, werr, sizeof(werr))) < 0)
			return r;
		if ((r = wpath_enter(&w->at, &sv)) == 0)
			r = renameat(w->at.dirfd, ts + 1, w->at.dirfd, w->at.name) < 0 ? -errno : 0;
		wpath_leave(&sv);
		wpath_close(&w->at);
		return r;
	}
	if ((r = wpath_enter(&w->at, &sv)) == 0)
		r = renameat(w->at.dirfd, fw_tmp_name(w), w->at.dirfd, w->at.name) < 0 ? -errno : 0;
	wpath_leave(&sv);
	return r;
}

/* fwrite_stage, keeping the directory walked (fwrite_commit renames there). */
static int fw_stage(struct fwrite *w, const struct fs_meta *meta, char *err, size_t errlen)
{
	int rc = w->replaces && !w->src_checked ? fw_recheck(w, err, errlen) : 0;

	if (rc < 0) {
		fwrite_discard(w);
		return rc;
	}
	/* A temporary has no user.e2b.* of its own (the attributes it took
	 * leave them out): with none to set there is nothing to do. */
	rc = meta && (meta->n || !w->tmp[0]) ? fs_meta_replace_fd(w->fd, meta) : 0;
	if (rc < 0) {
		fwrite_discard(w);
		if (rc == -ENOSPC || rc == -EDQUOT)
			return fw_fail(-ENOSPC, err, errlen, "not enough space for file metadata: %s", go_strerror(-rc));
		return fw_fail(-EIO, err, errlen, "error writing file metadata: %s", go_strerror(-rc));
	}
	if (close(w->fd) < 0) {
		int e = errno;
		w->fd = -1;
		fw_unlink_left(w);
		wpath_close(&w->at);
		if (e == ENOSPC || e == EDQUOT)
			return fw_fail(-ENOSPC, err, errlen, "not enough disk space available");
		return fw_fail(-EIO, err, errlen, "error writing file: close %s: %s", w->target, go_strerror(e));
	}
	w->fd = -1;
	return 0;
}

int fwrite_stage(struct fwrite *w, const struct fs_meta *meta, char *err, size_t errlen)
{
	int rc = fw_stage(w, meta, err, errlen);

	/* From here on the staged file is known by its names (fwrite.h). */
	wpath_close(&w->at);
	return rc;
}

int fwrite_publish(struct fwrite *w, char *err, size_t errlen)
{
	int rc;

	if (w->tmp[0] && w->before_replace && (rc = w->before_replace(w->before_arg, w->target, err, errlen)) < 0) {
		fw_unlink_left(w);
		w->replaces = false;
		wpath_close(&w->at);
		return rc;
	}
	if (w->tmp[0] && (rc = fw_rename(w)) < 0) {
		char tmp[PATH_MAX];
		snprintf(tmp, sizeof(tmp), "%s", w->tmp);
		fw_unlink_left(w);
		wpath_close(&w->at);
		return fw_fail(fw_code(-rc), err, errlen, "error writing file: rename %s %s: %s", tmp, w->target,
			       go_strerror(-rc));
	}
	if (w->tmp[0])
		uptmp_forget(w->reg);
	w->tmp[0] = '\0';
	w->reg[0] = '\0';
	w->created = false;
	w->replaces = false;
	w->src_checked = false;
	wpath_close(&w->at);
	return 0;
}

int fwrite_commit(struct fwrite *w, const struct fs_meta *meta, char *err, size_t errlen)
{
	int rc = fw_stage(w, meta, err, errlen);

	return rc < 0 ? rc : fwrite_publish(w, err, errlen);
}

void fwrite_discard(struct fwrite *w)
{
	if (w->fd >= 0) {
		close(w->fd);
		w->fd = -1;
		/* Nothing half-written stays behind that was not there before. */
		if (w->tmp[0])
			fw_unlink(w, true);
		else if (w->created)
			fw_unlink(w, false);
	} else if (w->tmp[0]) {
		fw_unlink(w, true); /* staged, not published */
	}
	if (w->tmp[0])
		uptmp_forget(w->reg);
	w->tmp[0] = '\0';
	w->reg[0] = '\0';
	w->created = false;
	w->replaces = false;
	w->src_checked = false;
	wpath_close(&w->at);
}

int fwrite_buffer(const char *target, const void *p, size_t n, uid_t uid, gid_t gid, bool atomic,
		  const struct fs_meta *meta, char *err, size_t errlen)
{
	struct fwrite w;
	int rc;

	fwrite_init(&w);
	rc = fwrite_begin(&w, target, uid, gid, atomic, err, errlen);
	if (rc == 0)
		rc = fwrite_write(&w, p, n, err, errlen);
	if (rc == 0)
		return fwrite_commit(&w, meta, err, errlen);
	fwrite_discard(&w);
	return rc;
}
