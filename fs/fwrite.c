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
#include <unistd.h>

#include "base/errstr.h"
#include "base/uptmp.h"

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
}

/*
 * Whether a write to `target` may replace it by rename: it is absent or a
 * regular file with no other name. A symlink (even a dangling one), a
 * device, a FIFO or a hard-linked file is written in place, as the client
 * meant the object behind that name.
 */
static bool fw_can_rename(const char *target)
{
	struct stat lst;

	if (lstat(target, &lst) < 0)
		return errno == ENOENT;
	return S_ISREG(lst.st_mode) && lst.st_nlink == 1;
}

/* Open the temporary beside the target, or the target itself. */
static int fw_open(struct fwrite *w, const char *parent, bool existed, bool atomic, char *err, size_t errlen)
{
	if (atomic) {
		int fd = uptmp_open(parent, existed, w->tmp, sizeof(w->tmp), w->reg, sizeof(w->reg));
		if (fd == -ENAMETOOLONG)
			return fw_fail(-ENAMETOOLONG, err, errlen, "error resolving path: %s", go_strerror(ENAMETOOLONG));
		errno = fd < 0 ? -fd : 0;
		w->fd = fd < 0 ? -1 : fd;
	} else {
		/* O_NONBLOCK only matters for FIFOs: fail (ENXIO) instead of
		 * blocking until some reader shows up. */
		w->fd = open(w->target, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NONBLOCK, 0666);
		w->created = !existed;
	}
	if (w->fd < 0) {
		int e = errno;
		w->tmp[0] = '\0';
		w->created = false;
		if (e == ENOSPC)
			return fw_fail(-ENOSPC, err, errlen, "not enough inodes available: open %s: %s", w->target,
				       go_strerror(e));
		return fw_fail(-EIO, err, errlen, "error opening file: open %s: %s", w->target, go_strerror(e));
	}
	return 0;
}

int fwrite_begin(struct fwrite *w, const char *target, uid_t uid, gid_t gid, bool atomic, char *err, size_t errlen)
{
	char parent[PATH_MAX], derr[2 * PATH_MAX + 512];
	struct stat st;
	bool existed;
	int rc;

	snprintf(w->target, sizeof(w->target), "%s", target);
	fs_path_dir(target, parent, sizeof(parent));
	if (fs_ensure_dirs(parent, uid, gid, derr, sizeof(derr)) < 0)
		return fw_fail(-EIO, err, errlen, "error ensuring directories: %s", derr);
	if (stat(target, &st) == 0) {
		if (S_ISDIR(st.st_mode))
			return fw_fail(-EISDIR, err, errlen, "path is a directory: %s", target);
		existed = true;
		atomic = atomic && fw_can_rename(target);
		if (!atomic && chown(target, uid, gid) < 0 && errno != ENOENT)
			return fw_fail(-EIO, err, errlen, "error changing file ownership: chown %s: %s", target,
				       go_strerror(errno));
	} else if (errno == ENOENT) {
		existed = false;
		atomic = atomic && fw_can_rename(target);
	} else {
		return fw_fail(-EIO, err, errlen, "error getting file info: stat %s: %s", target, go_strerror(errno));
	}
	if ((rc = fw_open(w, parent, existed, atomic, err, errlen)) < 0)
		return rc;
	/* The replacement ends as an in-place write would leave the file:
	 * chowned to the user, the target's mode (after fchown, which clears
	 * set-id bits) and its other extended attributes (ACLs among them). */
	if ((!existed || atomic) && fchown(w->fd, uid, gid) < 0)
		return fw_fail(-EIO, err, errlen, "error changing file ownership: chown %s: %s", target,
			       go_strerror(errno));
	if (atomic && existed) {
		fchmod(w->fd, st.st_mode & 07777);
		if ((rc = uptmp_copy_attrs(target, w->fd)) < 0)
			return fw_fail(-ENOSPC, err, errlen, "not enough space for file metadata: %s", go_strerror(-rc));
	}
	return 0;
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

/* After a failed close or rename: the temporary (or a new target) goes. */
static void fw_unlink_left(struct fwrite *w)
{
	if (w->tmp[0]) {
		unlink(w->tmp);
		uptmp_forget(w->reg);
		w->tmp[0] = '\0';
	} else if (w->created) {
		unlink(w->target);
	}
	w->created = false;
}

int fwrite_stage(struct fwrite *w, const struct fs_meta *meta, char *err, size_t errlen)
{
	int rc = meta ? fs_meta_replace_fd(w->fd, meta) : 0;

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
		if (e == ENOSPC || e == EDQUOT)
			return fw_fail(-ENOSPC, err, errlen, "not enough disk space available");
		return fw_fail(-EIO, err, errlen, "error writing file: close %s: %s", w->target, go_strerror(e));
	}
	w->fd = -1;
	return 0;
}

int fwrite_publish(struct fwrite *w, char *err, size_t errlen)
{
	int rc;

	if (w->tmp[0] && w->before_replace && (rc = w->before_replace(w->before_arg, w->target, err, errlen)) < 0) {
		fw_unlink_left(w);
		return rc;
	}
	if (w->tmp[0] && rename(w->tmp, w->target) < 0) {
		int e = errno;
		char tmp[PATH_MAX];
		snprintf(tmp, sizeof(tmp), "%s", w->tmp);
		fw_unlink_left(w);
		return fw_fail(-EIO, err, errlen, "error writing file: rename %s %s: %s", tmp, w->target, go_strerror(e));
	}
	if (w->tmp[0])
		uptmp_forget(w->reg);
	w->tmp[0] = '\0';
	w->reg[0] = '\0';
	w->created = false;
	return 0;
}

int fwrite_commit(struct fwrite *w, const struct fs_meta *meta, char *err, size_t errlen)
{
	int rc = fwrite_stage(w, meta, err, errlen);

	return rc < 0 ? rc : fwrite_publish(w, err, errlen);
}

void fwrite_discard(struct fwrite *w)
{
	if (w->fd >= 0) {
		close(w->fd);
		w->fd = -1;
		/* Nothing half-written stays behind that was not there before. */
		if (w->tmp[0])
			unlink(w->tmp);
		else if (w->created)
			unlink(w->target);
	} else if (w->tmp[0]) {
		unlink(w->tmp); /* staged, not published */
	}
	if (w->tmp[0])
		uptmp_forget(w->reg);
	w->tmp[0] = '\0';
	w->reg[0] = '\0';
	w->created = false;
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
