/* SPDX-License-Identifier: Apache-2.0 */
/*
 * archive.c - directory trees to and from tar, tar.gz and zip (libarchive).
 *
 * Safety of extraction does not rest on libarchive's disk writer: that one
 * resolves names against the process's working directory, which threads
 * cannot have their own of. Instead every entry is created here with the
 * *at() calls relative to an open temporary directory, each component
 * opened with O_NOFOLLOW, so no name can reach outside that directory
 * whatever symlinks exist or were created earlier by the same archive.
 */
#include "transfer/archive.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/errstr.h"
#include "base/log.h"
#include "base/users.h"

struct arch_limits arch_limits = {
	.max_entries = 200000,
	.max_bytes = 10ull << 30,
	.max_ratio = 200,
};

int arch_format_parse(const char *s)
{
	if (!strcmp(s, "tar"))
		return ARCH_TAR;
	if (!strcmp(s, "tgz") || !strcmp(s, "tar.gz"))
		return ARCH_TGZ;
	if (!strcmp(s, "zip"))
		return ARCH_ZIP;
	return -EINVAL;
}

const char *arch_format_ext(enum arch_format f)
{
	return f == ARCH_TGZ ? "tar.gz" : f == ARCH_ZIP ? "zip" : "tar";
}

const char *arch_format_mime(enum arch_format f)
{
	return f == ARCH_TGZ ? "application/gzip" : f == ARCH_ZIP ? "application/zip" : "application/x-tar";
}

int arch_name_normalize(const char *name, char *out, size_t outlen)
{
	size_t k = 0;
	const char *p = name;

	if (!outlen)
		return -ENAMETOOLONG;
	out[0] = '\0';
	if (!name || !*name)
		return -EINVAL;
	if (name[0] == '/')
		return -EPERM;
	while (*p) {
		size_t l = strcspn(p, "/");
		if (l == 2 && p[0] == '.' && p[1] == '.')
			return -EXDEV;
		if (l == 0 || (l == 1 && p[0] == '.')) {
			p += l + (p[l] == '/');
			continue;
		}
		if (k + (k ? 1 : 0) + l + 1 > outlen) {
			out[0] = '\0';
			return -ENAMETOOLONG;
		}
		if (k)
			out[k++] = '/';
		memcpy(out + k, p, l);
		k += l;
		out[k] = '\0';
		p += l + (p[l] == '/');
	}
	return k ? 0 : -EINVAL;
}

const char *arch_name_error(int rc)
{
	switch (rc) {
	case -EPERM:
		return "absolute path";
	case -EXDEV:
		return "'..' component";
	case -ENAMETOOLONG:
		return "name too long";
	default:
		return "empty name";
	}
}

/*
 * libarchive converts names between UTF-8 (zip's flag, pax headers) and
 * the locale's charset. envd never calls setlocale, so in the C locale
 * every non-ASCII name would fail that conversion (pax then marks it
 * hdrcharset=BINARY, zip entries flagged UTF-8 lose their name). The
 * threads that run archive work use C.UTF-8 instead; uselocale() is per
 * thread, so nothing else in the process changes.
 */
static locale_t utf8_locale;
static pthread_once_t utf8_once = PTHREAD_ONCE_INIT;

static void utf8_init(void)
{
	utf8_locale = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
}

/* One locale object for every thread: pool threads come and go (idle
 * ones exit), and one each would be lost with every exit. */
static void thread_utf8(void)
{
	static _Thread_local bool done;
	if (done)
		return;
	done = true;
	pthread_once(&utf8_once, utf8_init);
	if (utf8_locale)
		uselocale(utf8_locale);
}

/* ======================= creating ======================= */

struct frame {
	DIR *d;
	size_t rel_len;     /* length of rel[] for entries of this directory */
};

/* Files at least this big go out as file pieces (zero copy). */
#define ZC_MIN (64 * 1024)
#define RD_CHUNK (64 * 1024)

struct arch_writer {
	struct archive *a;
	struct archive_entry *e;
	enum arch_format f;
	bool zero_copy;
	dev_t root_dev;     /* zero copy only for files on the root's device */
	bool closed;
	struct frame *st;
	size_t depth, cap;
	char rel[PATH_MAX];
	/* output collected by the write callback */
	uint8_t *buf;
	size_t len, bcap;
	bool discard;       /* count, don't keep (zero-copy file bodies) */
	uint64_t discarded;
	bool oom;
	/* the copied file in progress */
	int cur_fd;
	uint64_t cur_left, cur_off;
	bool cur_short;     /* it shrank: the rest is zeros */
	/* the file handed out as a piece, closed on the next fill */
	int zc_fd;
	uint8_t *rd;
	uint64_t entries, skipped;
};

static la_ssize_t aw_write(struct archive *a, void *ud, const void *p, size_t n)
{
	struct arch_writer *w = ud;

	if (w->discard) {
		w->discarded += n;
		return (la_ssize_t)n;
	}
	if (w->len + n > w->bcap) {
		size_t nc = w->bcap ? w->bcap : 256 * 1024;
		while (nc < w->len + n)
			nc *= 2;
		uint8_t *nb = realloc(w->buf, nc);
		if (!nb) {
			w->oom = true;
			archive_set_error(a, ENOMEM, "out of memory");
			return -1;
		}
		w->buf = nb;
		w->bcap = nc;
	}
	memcpy(w->buf + w->len, p, n);
	w->len += n;
	return (la_ssize_t)n;
}

static int aw_open(struct archive *a, void *ud)
{
	return ARCHIVE_OK;
}

static int aw_close(struct archive *a, void *ud)
{
	return ARCHIVE_OK;
}

struct arch_writer *arch_writer_new(const char *dir, enum arch_format f, bool zero_copy, char *err, size_t errlen)
{
	struct arch_writer *w = calloc(1, sizeof(*w));
	int fd = -1;

	if (!w)
		goto nomem;
	w->f = f;
	w->zero_copy = zero_copy && f == ARCH_TAR;
	w->cur_fd = -1;
	w->zc_fd = -1;
	w->cap = 16;
	w->st = calloc(w->cap, sizeof(*w->st));
	w->rd = malloc(RD_CHUNK + 1);
	w->a = archive_write_new();
	w->e = archive_entry_new();
	if (!w->st || !w->rd || !w->a || !w->e)
		goto nomem;
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errlen, "error opening directory '%s': %s", dir, go_strerror(errno));
		goto fail;
	}
	struct stat rst;
	if (fstat(fd, &rst) == 0)
		w->root_dev = rst.st_dev;
	else
		w->zero_copy = false;
	if (!(w->st[0].d = fdopendir(fd)))
		goto nomem;
	fd = -1;
	w->depth = 1;
	w->st[0].rel_len = 0;
	/* Unblocked output: every byte goes straight to aw_write, so file
	 * bodies can be skipped there (zero copy) and nothing pads to 10 KiB. */
	archive_write_set_bytes_per_block(w->a, 0);
	int rc;
	if (f == ARCH_ZIP) {
		rc = archive_write_set_format_zip(w->a);
	} else {
		rc = archive_write_set_format_pax_restricted(w->a);
		if (rc == ARCHIVE_OK && f == ARCH_TGZ)
			rc = archive_write_add_filter_gzip(w->a);
	}
	if (rc == ARCHIVE_OK)
		rc = archive_write_open(w->a, w, aw_open, aw_write, aw_close);
	if (rc != ARCHIVE_OK) {
		snprintf(err, errlen, "error creating archive: %s", archive_error_string(w->a));
		goto fail;
	}
	return w;
nomem:
	snprintf(err, errlen, "out of memory");
fail:
	if (fd >= 0)
		close(fd);
	arch_writer_free(w);
	return NULL;
}

void arch_writer_counts(const struct arch_writer *w, uint64_t *entries, uint64_t *skipped)
{
	*entries = w->entries;
	*skipped = w->skipped;
}

void arch_writer_free(struct arch_writer *w)
{
	if (!w)
		return;
	for (size_t i = 0; i < w->depth; i++)
		closedir(w->st[i].d);
	if (w->cur_fd >= 0)
		close(w->cur_fd);
	if (w->zc_fd >= 0)
		close(w->zc_fd);
	if (w->a)
		archive_write_free(w->a); /* never reached the end: no trailer */
	if (w->e)
		archive_entry_free(w->e);
	free(w->st);
	free(w->rd);
	free(w->buf);
	free(w);
}

static int aw_fail(struct arch_writer *w, char *err, size_t errlen)
{
	snprintf(err, errlen, "%s", w->oom ? "out of memory" : archive_error_string(w->a));
	return w->oom ? -ENOMEM : -EIO;
}

/* Copy up to RD_CHUNK of the current file into the archive. */
static int aw_copy_some(struct arch_writer *w, char *err, size_t errlen)
{
	size_t want = w->cur_left > RD_CHUNK ? RD_CHUNK : (size_t)w->cur_left;
	ssize_t n = 0;
	bool grew = false;

	if (!w->cur_short) {
		/* The last read asks for a byte more: a file that grew says so
		 * there, without an fstat after it (rd has the room). */
		bool last = want == w->cur_left;

		n = pread(w->cur_fd, w->rd, want + last, (off_t)w->cur_off);
		if (n < 0 && errno == EINTR)
			return 0;
		if (n > (ssize_t)want) {
			grew = true;
			n = (ssize_t)want;
		}
		if (n <= 0) {
			/* The header promised more: keep the archive valid with
			 * zeros up to the size it announced. */
			log_warn("files", "archive: '%s' shrank while being read (%s); padded with zeros", w->rel,
				 n < 0 ? go_strerror(errno) : "end of file");
			w->cur_short = true;
		}
	}
	if (w->cur_short) {
		memset(w->rd, 0, want);
		n = (ssize_t)want;
	}
	if (archive_write_data(w->a, w->rd, (size_t)n) < 0)
		return aw_fail(w, err, errlen);
	w->cur_off += (uint64_t)n;
	w->cur_left -= (uint64_t)n;
	if (w->cur_left == 0) {
		if (grew)
			log_warn("files", "archive: '%s' grew while being read; the first %llu bytes were stored", w->rel,
				 (unsigned long long)w->cur_off);
		close(w->cur_fd);
		w->cur_fd = -1;
		if (archive_write_finish_entry(w->a) != ARCHIVE_OK)
			return aw_fail(w, err, errlen);
	}
	return 0;
}

static int aw_push(struct arch_writer *w, int fd, size_t rel_len)
{
	if (w->depth == w->cap) {
		struct frame *n = realloc(w->st, w->cap * 2 * sizeof(*n));
		if (!n)
			return -ENOMEM;
		w->st = n;
		w->cap *= 2;
	}
	DIR *d = fdopendir(fd);
	if (!d)
		return -errno;
	w->st[w->depth++] = (struct frame){ d, rel_len };
	return 0;
}

/*
 * Write the header of the next entry of the walk. Returns 1 when an entry
 * was started, 0 when the walk is over, -errno on archive failure. A large
 * regular file in zero-copy mode sets *zc_fd and *zc_len instead of copying.
 */
static int aw_next(struct arch_writer *w, int *zc_fd, uint64_t *zc_len, char *err, size_t errlen)
{
	for (;;) {
		if (w->depth == 0)
			return 0;
		struct frame *fr = &w->st[w->depth - 1];
		errno = 0;
		struct dirent *de = readdir(fr->d);
		if (!de) {
			if (errno)
				log_warn("files", "archive: reading directory '%.*s': %s", (int)fr->rel_len, w->rel,
					 go_strerror(errno));
			closedir(fr->d);
			w->depth--;
			continue;
		}
		const char *nm = de->d_name;
		if (!strcmp(nm, ".") || !strcmp(nm, ".."))
			continue;
		size_t nl = strlen(nm);
		if (fr->rel_len + nl + 2 > sizeof(w->rel)) {
			log_warn("files", "archive: skipping '%.*s%s': path too long", (int)fr->rel_len, w->rel, nm);
			w->skipped++;
			continue;
		}
		memcpy(w->rel + fr->rel_len, nm, nl + 1);
		int dfd = dirfd(fr->d);
		struct stat st;
		int fd = -1;
		char target[PATH_MAX];
		/* A file or directory the directory says it is gets opened
		 * (without following a symlink) and asked with fstat: one stat
		 * per entry, as GNU tar, instead of a stat by name first. */
		if (de->d_type == DT_REG || de->d_type == DT_DIR) {
			fd = openat(dfd, nm, (de->d_type == DT_DIR ? O_DIRECTORY : O_NONBLOCK) | O_RDONLY | O_NOFOLLOW |
						     O_CLOEXEC);
			if (fd >= 0 && (fstat(fd, &st) < 0 || (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)))) {
				close(fd);
				fd = -1;
			}
		}
		if (fd >= 0) {
			/* opened and known */
		} else if (fstatat(dfd, nm, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			log_warn("files", "archive: skipping '%s': %s", w->rel, go_strerror(errno));
			w->skipped++;
			continue;
		} else if (S_ISDIR(st.st_mode)) {
			fd = openat(dfd, nm, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		} else if (S_ISREG(st.st_mode)) {
			fd = openat(dfd, nm, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
			if (fd >= 0 && fstat(fd, &st) < 0) {
				close(fd);
				fd = -1;
			}
		} else if (S_ISLNK(st.st_mode)) {
			ssize_t tl = readlinkat(dfd, nm, target, sizeof(target) - 1);
			if (tl < 0) {
				log_warn("files", "archive: skipping symlink '%s': %s", w->rel, go_strerror(errno));
				w->skipped++;
				continue;
			}
			target[tl] = '\0';
		} else {
			log_info("files", "archive: skipping '%s': not a file, directory or symlink", w->rel);
			w->skipped++;
			continue;
		}
		if (!S_ISLNK(st.st_mode) && fd < 0) {
			log_warn("files", "archive: skipping '%s': %s", w->rel, go_strerror(errno));
			w->skipped++;
			continue;
		}

		char uname[64], gname[64];
		user_name_of(st.st_uid, uname, sizeof(uname));
		group_name_of(st.st_gid, gname, sizeof(gname));
		archive_entry_clear(w->e);
		archive_entry_set_pathname(w->e, w->rel);
		archive_entry_set_mode(w->e, st.st_mode);
		archive_entry_set_uid(w->e, st.st_uid);
		archive_entry_set_gid(w->e, st.st_gid);
		archive_entry_set_uname(w->e, uname);
		archive_entry_set_gname(w->e, gname);
		archive_entry_set_mtime(w->e, st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
		if (S_ISLNK(st.st_mode))
			archive_entry_set_symlink(w->e, target);
		archive_entry_set_size(w->e, S_ISREG(st.st_mode) ? st.st_size : 0);
		if (archive_write_header(w->a, w->e) < ARCHIVE_WARN) {
			if (fd >= 0)
				close(fd);
			return aw_fail(w, err, errlen);
		}
		w->entries++;
		if (S_ISDIR(st.st_mode)) {
			if (archive_write_finish_entry(w->a) != ARCHIVE_OK) {
				close(fd);
				return aw_fail(w, err, errlen);
			}
			size_t rl = fr->rel_len + nl;
			w->rel[rl] = '/';
			w->rel[rl + 1] = '\0';
			int rc = aw_push(w, fd, rl + 1); /* fr is stale after this */
			if (rc < 0) {
				close(fd);
				log_warn("files", "archive: not descending into '%s': %s", w->rel, go_strerror(-rc));
			}
			return 1;
		}
		if (S_ISLNK(st.st_mode)) {
			if (archive_write_finish_entry(w->a) != ARCHIVE_OK)
				return aw_fail(w, err, errlen);
			return 1;
		}
		/* A file below on another mount (maybe one that can hang) is
		 * copied on the worker like small ones, never handed out. */
		if (w->zero_copy && st.st_size >= ZC_MIN && st.st_dev == w->root_dev) {
			*zc_fd = fd;
			*zc_len = (uint64_t)st.st_size;
			return 1;
		}
		w->cur_fd = fd;
		w->cur_left = (uint64_t)st.st_size;
		w->cur_off = 0;
		w->cur_short = false;
		if (w->cur_left == 0) {
			close(fd);
			w->cur_fd = -1;
			if (archive_write_finish_entry(w->a) != ARCHIVE_OK)
				return aw_fail(w, err, errlen);
		}
		return 1;
	}
}

int arch_writer_fill(struct arch_writer *w, size_t want, struct arch_piece *pieces, size_t *n, char *err,
		     size_t errlen)
{
	size_t np = 0, mem_start = 0;
	/* offsets into buf until the end: buf may move while it grows */
	size_t moff[ARCH_MAX_PIECES];
	int rc;

	*n = 0;
	thread_utf8();
	if (w->zc_fd >= 0) {
		close(w->zc_fd);
		w->zc_fd = -1;
	}
	w->len = 0;
	if (w->closed)
		return 0;
	while (w->len < want) {
		if (w->cur_fd >= 0) {
			if ((rc = aw_copy_some(w, err, errlen)) < 0)
				return rc;
			continue;
		}
		int zc_fd = -1;
		uint64_t zc_len = 0;
		rc = aw_next(w, &zc_fd, &zc_len, err, errlen);
		if (rc < 0)
			return rc;
		if (rc == 0) {
			if (archive_write_close(w->a) != ARCHIVE_OK)
				return aw_fail(w, err, errlen);
			w->closed = true;
			break;
		}
		if (zc_fd < 0)
			continue;
		/* Header bytes so far, then the file itself, then the padding
		 * libarchive would have written after it. */
		if (w->len > mem_start) {
			moff[np] = mem_start;
			pieces[np++] = (struct arch_piece){ .n = w->len - mem_start, .fd = -1 };
		}
		pieces[np++] = (struct arch_piece){ .fd = zc_fd, .off = 0, .len = zc_len };
		moff[np - 1] = 0;
		w->zc_fd = zc_fd;
		w->discard = true;
		w->discarded = 0;
		rc = archive_write_finish_entry(w->a); /* "writes" body + padding as zeros */
		w->discard = false;
		if (rc != ARCHIVE_OK)
			return aw_fail(w, err, errlen);
		mem_start = w->len;
		size_t pad = (size_t)(w->discarded - zc_len);
		static const uint8_t zeros[512];
		if (pad && aw_write(w->a, w, zeros, pad) < 0)
			return aw_fail(w, err, errlen);
		break; /* one file piece per fill: its fd lives until the next */
	}
	if (w->len > mem_start) {
		moff[np] = mem_start;
		pieces[np++] = (struct arch_piece){ .n = w->len - mem_start, .fd = -1 };
	}
	for (size_t i = 0; i < np; i++)
		if (pieces[i].fd < 0)
			pieces[i].p = w->buf + moff[i];
	*n = np;
	return w->closed ? 0 : 1;
}

/* ======================= extracting ======================= */

struct xdir {
	char *rel;
	mode_t mode;
	struct timespec mtime;
};

struct xstate {
	struct arch_extract *x;
	struct archive *a;
	uint64_t allowed;   /* bytes the archive may expand to */
	struct xdir *dirs;
	size_t ndirs, capdirs;
	char listbuf[64 * 1024];
	size_t listlen;
	bool list_first;
	/* The parent directory of the last entry, kept open: an archive lists
	 * a directory's entries together, and opening every component of
	 * every entry's path again was two opens and two closes per file.
	 * Safe to keep: a directory of the extraction is never replaced
	 * (x_clear_name refuses), so the fd stays what the path names. */
	int pfd;
	char prel[PATH_MAX];
	size_t prel_len;
};

static int x_fail(struct arch_extract *x, int status, int rc, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int x_fail(struct arch_extract *x, int status, int rc, const char *fmt, ...)
{
	va_list ap;

	x->status = status;
	va_start(ap, fmt);
	vsnprintf(x->msg, sizeof(x->msg), fmt, ap);
	va_end(ap);
	return rc;
}

static bool is_nospace(int e)
{
	return e == ENOSPC || e == EDQUOT;
}

static int x_io_fail(struct arch_extract *x, int e, const char *what, const char *name)
{
	if (is_nospace(e))
		return x_fail(x, 507, -e, "not enough disk space available");
	return x_fail(x, 500, -e, "error extracting '%s': %s: %s", name, what, go_strerror(e));
}

/*
 * Open the directory that holds the last component of `rel` (normalised),
 * walking from root without following any symlink. Missing directories
 * are created when `create`. Returns an fd (or root itself, not to be
 * closed: compare) with *last pointing into rel; or -errno with x's
 * status and message naming `entry`.
 */
static int x_open_parent(struct arch_extract *x, const char *rel, bool create, const char *entry, const char **last)
{
	char comp[NAME_MAX + 1];
	const char *p = rel;
	int cur = x->root_fd;

	for (;;) {
		size_t l = strcspn(p, "/");
		if (!p[l]) {
			*last = p;
			return cur;
		}
		if (l > NAME_MAX) {
			if (cur != x->root_fd)
				close(cur);
			return x_fail(x, 400, -ENAMETOOLONG, "archive entry '%s': name too long", entry);
		}
		memcpy(comp, p, l);
		comp[l] = '\0';
		int fd = openat(cur, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0 && errno == ENOENT && create) {
			if (mkdirat(cur, comp, 0755) < 0 && errno != EEXIST) {
				int e = errno;
				if (cur != x->root_fd)
					close(cur);
				return x_io_fail(x, e, "mkdir", entry);
			}
			fchownat(cur, comp, x->uid, x->gid, AT_SYMLINK_NOFOLLOW);
			fd = openat(cur, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		}
		if (fd < 0) {
			int e = errno;
			struct stat st;
			bool link = fstatat(cur, comp, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode);
			if (cur != x->root_fd)
				close(cur);
			size_t pl = (size_t)(p - rel) + l;
			if (link || e == ELOOP)
				return x_fail(x, 400, -ELOOP, "archive entry '%s' would pass through the symlink '%.*s'", entry,
					      (int)pl, rel);
			if (e == ENOTDIR)
				return x_fail(x, 400, -ENOTDIR, "archive entry '%s': '%.*s' is not a directory", entry,
					      (int)pl, rel);
			if (e == ENOENT)
				return x_fail(x, 400, -ENOENT, "archive entry '%s': '%.*s' does not exist in the archive",
					      entry, (int)pl, rel);
			return x_io_fail(x, e, "open", entry);
		}
		if (cur != x->root_fd)
			close(cur);
		cur = fd;
		p += l + 1;
	}
}

static void x_close_parent(struct arch_extract *x, int fd)
{
	if (fd >= 0 && fd != x->root_fd)
		close(fd);
}

/* x_open_parent(create) of an entry through the one-directory cache; the
   fd is the cache's (never closed by the caller). */
static int x_entry_parent(struct xstate *s, const char *rel, const char **last)
{
	const char *slash = strrchr(rel, '/');
	size_t pl = slash ? (size_t)(slash - rel) : 0;
	int fd;

	if (s->pfd >= 0 && pl == s->prel_len && memcmp(rel, s->prel, pl) == 0) {
		*last = slash ? slash + 1 : rel;
		return s->pfd;
	}
	fd = x_open_parent(s->x, rel, true, rel, last);
	if (fd < 0)
		return fd;
	if (s->pfd >= 0)
		x_close_parent(s->x, s->pfd);
	s->pfd = fd;
	memcpy(s->prel, rel, pl);
	s->prel_len = pl;
	return fd;
}

static int x_list_flush(struct xstate *s)
{
	size_t o = 0;
	while (o < s->listlen) {
		ssize_t w = write(s->x->list_fd, s->listbuf + o, s->listlen - o);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return x_io_fail(s->x, errno, "write entry list", "");
		}
		o += (size_t)w;
	}
	s->x->list_len += s->listlen;
	s->listlen = 0;
	return 0;
}

static int x_list_add(struct xstate *s, const char *rel, const char *type, uint64_t size)
{
	char path[PATH_MAX * 2];
	const char *base = strrchr(rel, '/');

	snprintf(path, sizeof(path), "%s/%s", s->x->final_dir, rel);
	json_t *o = json_pack("{s:s, s:s, s:s, s:I}", "name", base ? base + 1 : rel, "type", type, "path", path,
			      "size", (json_int_t)size);
	char *js = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (!js)
		return x_fail(s->x, 500, -ENOMEM, "out of memory");
	size_t l = strlen(js);
	if (s->listlen + l + 2 > sizeof(s->listbuf)) {
		int rc = x_list_flush(s);
		if (rc < 0) {
			free(js);
			return rc;
		}
	}
	if (!s->list_first)
		s->listbuf[s->listlen++] = ',';
	s->list_first = false;
	if (l + 1 > sizeof(s->listbuf)) {
		free(js);
		return x_fail(s->x, 500, -ENAMETOOLONG, "entry too long");
	}
	memcpy(s->listbuf + s->listlen, js, l);
	s->listlen += l;
	free(js);
	return 0;
}

/* Make room for `name` in dir `pfd`: anything but a directory is removed. */
static int x_clear_name(struct arch_extract *x, int pfd, const char *name, const char *entry, bool want_dir,
			bool *is_dir)
{
	struct stat st;

	*is_dir = false;
	if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return 0;
	if (S_ISDIR(st.st_mode)) {
		if (want_dir) {
			*is_dir = true;
			return 0;
		}
		return x_fail(x, 400, -EISDIR, "archive entry '%s' would replace a directory of the same archive", entry);
	}
	if (unlinkat(pfd, name, 0) < 0)
		return x_io_fail(x, errno, "unlink", entry);
	return 0;
}

static int x_file(struct xstate *s, struct archive_entry *e, int pfd, const char *name, const char *rel,
		  uint64_t *written)
{
	struct arch_extract *x = s->x;
	bool isdir;
	int rc;
	/* Created first (the usual case: a new name in the empty directory),
	 * looked at only when the name is taken. */
	int fd = openat(pfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 && errno == EEXIST) {
		if ((rc = x_clear_name(x, pfd, name, rel, false, &isdir)) < 0)
			return rc;
		fd = openat(pfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	}
	if (fd < 0)
		return x_io_fail(x, errno, "open", rel);
	if (fchown(fd, x->uid, x->gid) < 0) {
		rc = x_io_fail(x, errno, "chown", rel);
		goto out;
	}
	const void *buf;
	size_t n;
	la_int64_t off;
	uint64_t end = 0;
	for (;;) {
		int r = archive_read_data_block(s->a, &buf, &n, &off);
		if (r == ARCHIVE_EOF)
			break;
		if (r < ARCHIVE_WARN) {
			rc = x_fail(x, 400, -EBADMSG, "invalid %s archive at entry '%s': %s", arch_format_ext(x->format), rel,
				    archive_error_string(s->a));
			goto out;
		}
		if (x->bytes + n > s->allowed) {
			rc = x_fail(x, 413, -EFBIG,
				    "archive expands beyond %llu bytes at entry '%s' (limits: %llu bytes, ratio %llu)",
				    (unsigned long long)s->allowed, rel, (unsigned long long)arch_limits.max_bytes,
				    (unsigned long long)arch_limits.max_ratio);
			goto out;
		}
		for (size_t o = 0; o < n;) {
			ssize_t w = pwrite(fd, (const char *)buf + o, n - o, off + (off_t)o);
			if (w < 0) {
				if (errno == EINTR)
					continue;
				rc = x_io_fail(x, errno, "write", rel);
				goto out;
			}
			o += (size_t)w;
		}
		x->bytes += n;
		*written += n;
		if ((uint64_t)off + n > end)
			end = (uint64_t)off + n;
	}
	/* A sparse entry may end in a hole. */
	if (archive_entry_size_is_set(e) && (uint64_t)archive_entry_size(e) > end) {
		if (ftruncate(fd, archive_entry_size(e)) < 0) {
			rc = x_io_fail(x, errno, "truncate", rel);
			goto out;
		}
		*written = (uint64_t)archive_entry_size(e);
	}
	mode_t m = archive_entry_perm(e) & (x->keep_setid ? 07777 : 01777);
	fchmod(fd, m);
	struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT },
				  { archive_entry_mtime(e), archive_entry_mtime_nsec(e) } };
	if (archive_entry_mtime_is_set(e))
		futimens(fd, ts);
	if (close(fd) < 0) {
		fd = -1;
		return x_io_fail(x, errno, "close", rel);
	}
	return 0;
out:
	close(fd);
	return rc;
}

static int x_entry(struct xstate *s, struct archive_entry *e)
{
	struct arch_extract *x = s->x;
	char rel[PATH_MAX], trel[PATH_MAX];
	/* Without iconv the locale-dependent accessors fail on non-ASCII
	 * names flagged as UTF-8 (zip bit 11, pax hdrcharset): ask for UTF-8
	 * first. */
	const char *raw = archive_entry_pathname_utf8(e);
	const char *hl = archive_entry_hardlink_utf8(e);
	if (!raw)
		raw = archive_entry_pathname(e);
	if (!hl)
		hl = archive_entry_hardlink(e);
	mode_t type = archive_entry_filetype(e);
	int rc;

	if (!raw)
		raw = "";
	if ((rc = arch_name_normalize(raw, rel, sizeof(rel))) < 0) {
		if (rc == -EINVAL && type == AE_IFDIR && !hl)
			return 0; /* "./": the root itself */
		return x_fail(x, 400, rc, "archive entry '%s': %s", raw, arch_name_error(rc));
	}
	if (++x->entries > arch_limits.max_entries && arch_limits.max_entries)
		return x_fail(x, 413, -EFBIG, "archive has more than %llu entries", (unsigned long long)arch_limits.max_entries);
	if (!hl && type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK) {
		log_info("files", "extract: skipping '%s': not a file, directory or symlink", rel);
		return 0;
	}
	if (hl) {
		if ((rc = arch_name_normalize(hl, trel, sizeof(trel))) < 0)
			return x_fail(x, 400, rc, "archive entry '%s': hard link target '%s': %s", rel, hl,
				      arch_name_error(rc));
	}
	if (!hl && type == AE_IFREG && archive_entry_size_is_set(e) &&
	    x->bytes + (uint64_t)archive_entry_size(e) > s->allowed)
		return x_fail(x, 413, -EFBIG, "archive expands beyond %llu bytes at entry '%s' (limits: %llu bytes, ratio %llu)",
			      (unsigned long long)s->allowed, rel, (unsigned long long)arch_limits.max_bytes,
			      (unsigned long long)arch_limits.max_ratio);

	const char *name;
	int pfd = x_entry_parent(s, rel, &name);
	if (pfd < 0)
		return pfd;
	bool isdir;
	uint64_t size = 0;
	const char *tname = "file";
	if (hl) {
		const char *tl;
		int tfd = x_open_parent(x, trel, false, rel, &tl);
		if (tfd < 0)
			return tfd;
		struct stat st;
		if (fstatat(tfd, tl, &st, AT_SYMLINK_NOFOLLOW) < 0 || S_ISDIR(st.st_mode)) {
			x_close_parent(x, tfd);
			return x_fail(x, 400, -ENOENT, "archive entry '%s': hard link target '%s' is not an earlier file of the archive",
				      rel, trel);
		}
		rc = x_clear_name(x, pfd, name, rel, false, &isdir);
		if (rc == 0 && linkat(tfd, tl, pfd, name, 0) < 0)
			rc = x_io_fail(x, errno, "link", rel);
		x_close_parent(x, tfd);
		size = S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
		if (S_ISLNK(st.st_mode))
			tname = "symlink";
	} else if (type == AE_IFDIR) {
		tname = "dir";
		/* Made first, looked at only when the name is taken. */
		rc = 0;
		if (mkdirat(pfd, name, 0700) < 0) {
			rc = errno == EEXIST ? x_clear_name(x, pfd, name, rel, true, &isdir) : x_io_fail(x, errno, "mkdir", rel);
			if (rc == 0 && !isdir && mkdirat(pfd, name, 0700) < 0)
				rc = x_io_fail(x, errno, "mkdir", rel);
		}
		if (rc == 0) {
			fchownat(pfd, name, x->uid, x->gid, AT_SYMLINK_NOFOLLOW);
			/* Mode and mtime at the end: a read-only directory must
			 * still take its children, and they change its mtime. */
			if (s->ndirs == s->capdirs) {
				size_t nc = s->capdirs ? s->capdirs * 2 : 64;
				struct xdir *nd = realloc(s->dirs, nc * sizeof(*nd));
				if (!nd)
					rc = x_fail(x, 500, -ENOMEM, "out of memory");
				else {
					s->dirs = nd;
					s->capdirs = nc;
				}
			}
			if (rc == 0) {
				struct xdir *d = &s->dirs[s->ndirs];
				d->rel = strdup(rel);
				d->mode = archive_entry_perm(e) & (x->keep_setid ? 07777 : 01777);
				d->mtime = (struct timespec){ archive_entry_mtime(e), archive_entry_mtime_nsec(e) };
				if (!archive_entry_mtime_is_set(e))
					d->mtime.tv_nsec = UTIME_OMIT;
				if (!d->rel)
					rc = x_fail(x, 500, -ENOMEM, "out of memory");
				else
					s->ndirs++;
			}
		}
	} else if (type == AE_IFLNK) {
		tname = "symlink";
		const char *target = archive_entry_symlink_utf8(e);
		if (!target)
			target = archive_entry_symlink(e);
		rc = x_clear_name(x, pfd, name, rel, false, &isdir);
		if (rc == 0 && symlinkat(target ? target : "", pfd, name) < 0)
			rc = x_io_fail(x, errno, "symlink", rel);
		if (rc == 0) {
			fchownat(pfd, name, x->uid, x->gid, AT_SYMLINK_NOFOLLOW);
			struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT },
						  { archive_entry_mtime(e), archive_entry_mtime_nsec(e) } };
			if (archive_entry_mtime_is_set(e))
				utimensat(pfd, name, ts, AT_SYMLINK_NOFOLLOW);
		}
	} else {
		rc = x_file(s, e, pfd, name, rel, &size);
	}
	if (rc < 0)
		return rc;
	return x_list_add(s, rel, tname, size);
}

/* Directory modes and mtimes, once nothing more is created inside. */
static void x_finish_dirs(struct xstate *s)
{
	struct arch_extract *x = s->x;

	for (size_t i = s->ndirs; i-- > 0;) {
		const char *name;
		int pfd = x_open_parent(x, s->dirs[i].rel, false, s->dirs[i].rel, &name);
		if (pfd < 0)
			continue;
		int fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0) {
			struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT }, s->dirs[i].mtime };
			fchmod(fd, s->dirs[i].mode);
			futimens(fd, ts);
			close(fd);
		}
		x_close_parent(x, pfd);
	}
	x->status = 0;
}

int arch_extract_run(struct arch_extract *x)
{
	struct xstate *s = calloc(1, sizeof(*s));
	int rc = 0;

	thread_utf8();
	x->status = 0;
	x->msg[0] = '\0';
	x->entries = x->bytes = x->list_len = 0;
	if (!s)
		return x_fail(x, 500, -ENOMEM, "out of memory");
	s->x = x;
	s->list_first = true;
	s->pfd = -1;
	uint64_t by_ratio = arch_limits.max_ratio && x->archive_size < UINT64_MAX / arch_limits.max_ratio
				    ? x->archive_size * arch_limits.max_ratio
				    : UINT64_MAX;
	if (!arch_limits.max_ratio)
		by_ratio = UINT64_MAX;
	if (by_ratio < ARCH_RATIO_FLOOR)
		by_ratio = ARCH_RATIO_FLOOR;
	uint64_t max_bytes = arch_limits.max_bytes ? arch_limits.max_bytes : UINT64_MAX;
	s->allowed = max_bytes < by_ratio ? max_bytes : by_ratio;

	s->a = archive_read_new();
	if (!s->a) {
		rc = x_fail(x, 500, -ENOMEM, "out of memory");
		goto out;
	}
	if (x->format == ARCH_ZIP) {
		archive_read_support_format_zip(s->a);
	} else {
		archive_read_support_format_tar(s->a);
		if (x->format == ARCH_TGZ)
			archive_read_support_filter_gzip(s->a);
	}
	if (lseek(x->archive_fd, 0, SEEK_SET) < 0 || archive_read_open_fd(s->a, x->archive_fd, 64 * 1024) != ARCHIVE_OK) {
		rc = x_fail(x, 400, -EBADMSG, "invalid %s archive: %s", arch_format_ext(x->format),
			    archive_error_string(s->a) ? archive_error_string(s->a) : "cannot read");
		goto out;
	}
	for (;;) {
		struct archive_entry *e;
		int r = archive_read_next_header(s->a, &e);
		if (r == ARCHIVE_EOF)
			break;
		if (r < ARCHIVE_WARN) {
			rc = x_fail(x, 400, -EBADMSG, "invalid %s archive after %llu entries: %s", arch_format_ext(x->format),
				    (unsigned long long)x->entries,
				    archive_error_string(s->a) ? archive_error_string(s->a) : "unreadable");
			goto out;
		}
		if ((rc = x_entry(s, e)) < 0)
			goto out;
	}
	/* libarchive reads a tar too short for one header as an empty archive;
	 * an empty archive is all zeros (or nothing), anything else is not one. */
	if (x->entries == 0 && x->archive_size > 0 && x->format != ARCH_ZIP) {
		uint8_t head[1024];
		ssize_t n = pread(x->archive_fd, head, sizeof(head), 0);
		bool zeros = n >= 0;
		for (ssize_t i = 0; i < n && zeros; i++)
			zeros = head[i] == 0;
		if ((x->format == ARCH_TAR && !zeros) ||
		    (x->format == ARCH_TGZ && archive_filter_code(s->a, 0) != ARCHIVE_FILTER_GZIP)) {
			rc = x_fail(x, 400, -EBADMSG, "invalid %s archive: no entries found in %llu bytes",
				    arch_format_ext(x->format), (unsigned long long)x->archive_size);
			goto out;
		}
	}
	if ((rc = x_list_flush(s)) < 0)
		goto out;
	x_finish_dirs(s);
out:
	if (s->pfd >= 0)
		x_close_parent(x, s->pfd);
	if (s->a)
		archive_read_free(s->a);
	for (size_t i = 0; i < s->ndirs; i++)
		free(s->dirs[i].rel);
	free(s->dirs);
	free(s);
	return rc;
}

/* ======================= moving into place ======================= */

static int m_fail(int *status, char *msg, size_t msglen, int st, int rc, const char *fmt, ...)
	__attribute__((format(printf, 6, 7)));
static int m_fail(int *status, char *msg, size_t msglen, int st, int rc, const char *fmt, ...)
{
	va_list ap;

	if (status)
		*status = st;
	va_start(ap, fmt);
	vsnprintf(msg, msglen, fmt, ap);
	va_end(ap);
	return rc;
}

static DIR *open_dir_dup(int fd)
{
	int d = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (d < 0)
		return NULL;
	DIR *dp = fdopendir(d);
	if (!dp)
		close(d);
	return dp;
}

static int merge_check_rec(int src, int dst, char *rel, size_t rl, int *status, char *msg, size_t msglen)
{
	DIR *d = open_dir_dup(src);
	struct dirent *de;
	int rc = 0;

	if (!d)
		return m_fail(status, msg, msglen, 500, -errno, "error reading extracted tree: %s", go_strerror(errno));
	/* Renames cannot cross filesystems: a mount point in the target
	 * would fail halfway through the move, so refuse it up front. */
	struct stat sst, dst_st;
	if (fstat(src, &sst) == 0 && fstat(dst, &dst_st) == 0 && sst.st_dev != dst_st.st_dev) {
		closedir(d);
		return m_fail(status, msg, msglen, 409, -EXDEV,
			      "target directory '%s' is on another filesystem (a mount point): extract into it directly",
			      rl ? rel : ".");
	}
	while (rc == 0 && (de = readdir(d))) {
		const char *nm = de->d_name;
		struct stat ss, ds;
		if (!strcmp(nm, ".") || !strcmp(nm, ".."))
			continue;
		size_t nl = strlen(nm);
		if (rl + nl + 2 > PATH_MAX)
			continue;
		memcpy(rel + rl, nm, nl + 1);
		if (fstatat(dst, nm, &ds, AT_SYMLINK_NOFOLLOW) < 0 || fstatat(src, nm, &ss, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (S_ISDIR(ss.st_mode) && S_ISLNK(ds.st_mode))
			rc = m_fail(status, msg, msglen, 400, -ELOOP,
				    "archive entry '%s' would pass through the existing symlink '%s' in the target directory",
				    rel, rel);
		else if (S_ISDIR(ss.st_mode) && !S_ISDIR(ds.st_mode))
			rc = m_fail(status, msg, msglen, 409, -ENOTDIR,
				    "archive directory '%s' would replace an existing file", rel);
		else if (!S_ISDIR(ss.st_mode) && S_ISDIR(ds.st_mode))
			rc = m_fail(status, msg, msglen, 409, -EISDIR,
				    "archive entry '%s' would replace an existing directory", rel);
		else if (S_ISDIR(ss.st_mode)) {
			int s2 = openat(src, nm, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			int d2 = openat(dst, nm, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (s2 < 0 || d2 < 0)
				rc = m_fail(status, msg, msglen, 500, -errno, "error opening '%s': %s", rel,
					    go_strerror(errno));
			else {
				rel[rl + nl] = '/';
				rc = merge_check_rec(s2, d2, rel, rl + nl + 1, status, msg, msglen);
			}
			if (s2 >= 0)
				close(s2);
			if (d2 >= 0)
				close(d2);
		}
	}
	closedir(d);
	return rc;
}

int arch_merge_check(int src_fd, int dst_fd, int *status, char *msg, size_t msglen)
{
	char rel[PATH_MAX];
	rel[0] = '\0';
	return merge_check_rec(src_fd, dst_fd, rel, 0, status, msg, msglen);
}

static int merge_rec(int src, int dst, char *msg, size_t msglen)
{
	DIR *d = open_dir_dup(src);
	struct dirent *de;
	int rc = 0;

	if (!d)
		return m_fail(NULL, msg, msglen, 500, -errno, "error reading extracted tree: %s", go_strerror(errno));
	while (rc == 0 && (de = readdir(d))) {
		const char *nm = de->d_name;
		struct stat ss, ds;
		if (!strcmp(nm, ".") || !strcmp(nm, ".."))
			continue;
		if (fstatat(src, nm, &ss, AT_SYMLINK_NOFOLLOW) < 0)
			continue; /* already moved: readdir may list it again */
		if (fstatat(dst, nm, &ds, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(ds.st_mode) && S_ISDIR(ss.st_mode)) {
			int s2 = openat(src, nm, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			int d2 = openat(dst, nm, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (s2 < 0 || d2 < 0)
				rc = m_fail(NULL, msg, msglen, 500, -errno, "error opening '%s': %s", nm, go_strerror(errno));
			else
				rc = merge_rec(s2, d2, msg, msglen); /* the existing directory keeps its mode and owner */
			if (s2 >= 0)
				close(s2);
			if (d2 >= 0)
				close(d2);
			continue;
		}
		if (renameat(src, nm, dst, nm) < 0)
			rc = m_fail(NULL, msg, msglen, 500, -errno, "error moving '%s' into place: %s", nm,
				    go_strerror(errno));
	}
	closedir(d);
	return rc;
}

int arch_merge(int src_fd, int dst_fd, char *msg, size_t msglen)
{
	return merge_rec(src_fd, dst_fd, msg, msglen);
}

int arch_remove_tree(int dirfd, const char *name)
{
	struct stat st;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISDIR(st.st_mode))
		return unlinkat(dirfd, name, 0) < 0 ? -errno : 0;
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -errno;
	}
	struct dirent *de;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			arch_remove_tree(fd, de->d_name);
	closedir(d);
	return unlinkat(dirfd, name, AT_REMOVEDIR) < 0 ? -errno : 0;
}
