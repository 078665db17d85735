/* SPDX-License-Identifier: Apache-2.0 */
/*
 * listdir.c - ListDir walk (pre-order, byte-wise sorted children, symlinks
 * listed but not descended) and recursive remove. Blocking; run these on
 * the worker pool.
 */
#include "fs/listdir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <pthread.h>
#include <stdalign.h>
#include <stddef.h>
#include <unistd.h>

#include "fs/entry.h"
#include "fs/wpath.h"
#include "base/buf.h"
#include "base/errstr.h"
#include "base/users.h"
#include "base/worker.h"

void fs_listing_free(struct fs_listing *l)
{
	for (size_t i = 0; i < l->n; i++)
		fs_entry_free(l->entries[i]);
	free(l->entries);
	l->entries = NULL;
	l->n = l->cap = 0;
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void fs_names_free(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

int fs_read_names(const char *dir, char ***names_out, size_t *n_out)
{
	struct buf b = BUF_INIT(BUF_UNBOUNDED); /* an array of char * */
	struct dirent *de;
	char **names;
	size_t n;
	DIR *d = opendir(dir);

	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		char *s;

		worker_progress(); /* a huge directory keeps its request alive */

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		s = strdup(de->d_name);
		if (!s || buf_append(&b, &s, sizeof(s)) < 0) {
			free(s);
			closedir(d);
			fs_names_free((char **)b.p, b.len / sizeof(char *));
			return -ENOMEM;
		}
	}
	closedir(d);
	n = b.len / sizeof(char *);
	names = (char **)buf_steal(&b, NULL);
	if (!names) {
		/* only possible for an empty directory: nothing to free */
		return -ENOMEM;
	}
	if (n)
		qsort(names, n, sizeof(*names), cmp_name);
	*names_out = names;
	*n_out = n;
	return 0;
}

/* ---- the walk, one entry at a time ---- */

/*
 * One directory being listed: its names, read whole and sorted (as `ls`
 * does: children come in byte order), in one block, and the next to
 * visit. Memory follows the tree's width and depth, not the reply.
 */
struct wframe {
	char *names;    /* NUL-separated */
	char **sorted;  /* into names */
	size_t n, i;
	size_t rel_len; /* length of this directory's path under S */
};

struct fs_walk {
	char *real;             /* S, resolved */
	char req[PATH_MAX];     /* R, as requested */
	uint32_t depth;
	struct wframe *st;
	size_t nst, capst;
	size_t count;           /* entries handed out */
	Filesystem__EntryInfo *cur; /* the last one, until the next call */
	bool descend;           /* cur is a directory to walk into next */
	char rel[PATH_MAX];     /* the path under S of cur */
	char child_real[PATH_MAX];
	char tmp[PATH_MAX * 2], cleaned[PATH_MAX * 2];
	char ebuf[PATH_MAX + 128];
	/* cur is built here when it fits (fs_entry_info_in): no allocation
	   per entry. */
	_Alignas(max_align_t) unsigned char entbuf[2048];
	/* getdents64's buffer, as large as glibc's readdir takes: musl's 2 KiB
	   made 30 calls for a directory `ls` reads in two. */
	_Alignas(8) char dents[32768];
};

/* Stable merge sort of n names by byte order (musl's qsort, a smoothsort,
   took a quarter of a 100 000-entry listing's instructions). */
static void names_sort(char **v, char **tmp, size_t n)
{
	size_t mid, i, j, k;

	if (n < 2)
		return;
	if (n <= 8) {
		for (i = 1; i < n; i++) {
			char *x = v[i];

			for (j = i; j > 0 && strcmp(v[j - 1], x) > 0; j--)
				v[j] = v[j - 1];
			v[j] = x;
		}
		return;
	}
	mid = n / 2;
	names_sort(v, tmp, mid);
	names_sort(v + mid, tmp, n - mid);
	if (strcmp(v[mid - 1], v[mid]) <= 0)
		return;
	for (i = 0, j = mid, k = 0; i < mid || j < n; k++) {
		if (j >= n || (i < mid && strcmp(v[i], v[j]) <= 0))
			tmp[k] = v[i++];
		else
			tmp[k] = v[j++];
	}
	memcpy(v, tmp, n * sizeof(*v));
}

struct linux_dirent64 {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

/* Read the names of `dir` into frame f, with db (dblen bytes) for
   getdents64. 0 or -errno (open's, getdents'), -ENOMEM. */
static int frame_read(struct wframe *f, const char *dir, char *db, size_t dblen)
{
	struct buf names = BUF_INIT(BUF_UNBOUNDED), offs = BUF_INIT(BUF_UNBOUNDED);
	char **sorted = NULL, **tmp = NULL;
	size_t n;
	int fd, rc = 0;

	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	for (;;) {
		long got = syscall(SYS_getdents64, fd, db, dblen);

		if (got < 0) {
			rc = -errno;
			goto out;
		}
		if (got == 0)
			break;
		worker_progress(); /* a huge directory keeps its request alive */
		for (long o = 0; o < got;) {
			struct linux_dirent64 *de = (struct linux_dirent64 *)(db + o);
			const char *nm = de->d_name;
			size_t at = names.len;

			o += de->d_reclen;
			if (nm[0] == '.' && (nm[1] == '\0' || (nm[1] == '.' && nm[2] == '\0')))
				continue;
			if (buf_append_str0(&names, nm, strlen(nm)) < 0 || buf_append(&offs, &at, sizeof(at)) < 0) {
				rc = -ENOMEM;
				goto out;
			}
		}
	}
	n = offs.len / sizeof(size_t);
	if (n) {
		sorted = malloc(n * sizeof(*sorted));
		tmp = malloc(n * sizeof(*tmp));
		if (!sorted || !tmp) {
			rc = -ENOMEM;
			goto out;
		}
		for (size_t i = 0; i < n; i++)
			sorted[i] = (char *)names.p + ((size_t *)offs.p)[i];
		names_sort(sorted, tmp, n);
	}
	f->names = (char *)names.p;
	names.p = NULL;
	f->sorted = sorted;
	sorted = NULL;
	f->n = n;
	f->i = 0;
out:
	close(fd);
	free(sorted);
	free(tmp);
	buf_free(&names);
	buf_free(&offs);
	return rc;
}

static void frame_free(struct wframe *f)
{
	free(f->names);
	free(f->sorted);
	f->names = NULL;
	f->sorted = NULL;
}

/* Walk into S/rel (the length of rel given): push its frame. */
static int walk_push(struct fs_walk *w, size_t rel_len)
{
	struct wframe f = { .rel_len = rel_len };
	char *dir = w->child_real;
	int rc;

	if (w->nst == w->capst) {
		size_t nc = w->capst ? w->capst * 2 : 8;
		struct wframe *ns = realloc(w->st, nc * sizeof(*ns));

		if (!ns) {
			snprintf(w->ebuf, sizeof(w->ebuf), "error reading directory %s: %s", w->real,
				 go_strerror(ENOMEM));
			return -ENOMEM;
		}
		w->st = ns;
		w->capst = nc;
	}
	if (rel_len)
		fs_join(dir, PATH_MAX, w->real, w->rel);
	else
		snprintf(dir, PATH_MAX, "%s", w->real);
	rc = frame_read(&f, dir, w->dents, sizeof(w->dents));
	if (rc < 0) {
		if (rc == -ENOENT && rel_len)
			return 0; /* vanished during the walk */
		snprintf(w->ebuf, sizeof(w->ebuf), "error reading directory %s: open %s: %s", w->real, dir,
			 go_strerror(-rc));
		return rc == -ENOMEM ? -ENOMEM : -EIO; /* anything but memory is internal */
	}
	w->st[w->nst++] = f;
	return 0;
}

/*
 * One walk struct (some 60 KiB) is kept per thread for the next walk:
 * musl's allocator maps a block that size afresh and unmaps it when it is
 * freed, an mmap and a munmap (a TLB shoot-down on every processor) per
 * ListDir. A thread's spare is freed when the thread ends.
 */
static pthread_key_t spare_key;
static pthread_once_t spare_once = PTHREAD_ONCE_INIT;

static void spare_init(void)
{
	if (pthread_key_create(&spare_key, free) != 0)
		spare_key = (pthread_key_t)-1;
}

static struct fs_walk *walk_alloc(void)
{
	struct fs_walk *w = NULL;

	pthread_once(&spare_once, spare_init);
	if (spare_key != (pthread_key_t)-1 && (w = pthread_getspecific(spare_key)))
		pthread_setspecific(spare_key, NULL);
	return w ? w : malloc(sizeof(*w));
}

void fs_walk_close(struct fs_walk *w)
{
	if (!w)
		return;
	fs_entry_free(w->cur);
	while (w->nst)
		frame_free(&w->st[--w->nst]);
	free(w->st);
	free(w->real);
	pthread_once(&spare_once, spare_init);
	if (spare_key != (pthread_key_t)-1 && !pthread_getspecific(spare_key) &&
	    pthread_setspecific(spare_key, w) == 0)
		return;
	free(w);
}

/* "lstat <first missing prefix>" for the not-found message. */
static void first_missing(const char *path, char *out, size_t outlen)
{
	char prefix[PATH_MAX];
	size_t n = strlen(path), i = 0;
	struct stat st;

	snprintf(out, outlen, "%s", path);
	if (n >= sizeof(prefix))
		return;
	while (i < n) {
		while (i < n && path[i] == '/')
			i++;
		while (i < n && path[i] != '/')
			i++;
		memcpy(prefix, path, i);
		prefix[i] = '\0';
		if (lstat(prefix, &st) < 0 && errno == ENOENT) {
			snprintf(out, outlen, "%s", prefix);
			return;
		}
	}
}

int fs_walk_open(const char *requested, uint32_t depth, struct fs_walk **out, char *err, size_t errlen)
{
	struct fs_walk *w;
	struct stat st;
	char *real;
	int rc;

	*out = NULL;
	real = realpath(requested, NULL);
	if (!real) {
		int e = errno;
		char missing[PATH_MAX];
		if (e == ENOENT) {
			first_missing(requested, missing, sizeof(missing));
			snprintf(err, errlen, "path not found: lstat %s: %s", missing, go_strerror(e));
			return -ENOENT;
		}
		if (e == ELOOP) {
			snprintf(err, errlen, "cyclic symlink or chain >255 links at \"%s\"", requested);
			return -ELOOP;
		}
		if (e == ENOTDIR) {
			snprintf(err, errlen, "path is not a directory: %s", requested);
			return -ENOTDIR;
		}
		if (e == ENOMEM) {
			snprintf(err, errlen, "error resolving symlink: %s", go_strerror(e));
			return -ENOMEM;
		}
		snprintf(err, errlen, "error resolving symlink: lstat %s: %s", requested, go_strerror(e));
		return -EIO;
	}
	if (stat(real, &st) < 0) {
		int e = errno;
		snprintf(err, errlen, "%s: stat %s: %s", e == ENOENT ? "directory not found" : "error getting file info",
			 real, go_strerror(e));
		free(real);
		return e == ENOENT ? -ENOENT : -EIO;
	}
	if (!S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "path is not a directory: %s", real);
		free(real);
		return -ENOTDIR;
	}
	/* Not zeroed: some 60 KiB, nearly all buffers written before read. */
	w = walk_alloc();
	if (!w) {
		free(real);
		snprintf(err, errlen, "error reading directory %s: %s", requested, go_strerror(ENOMEM));
		return -ENOMEM;
	}
	w->real = real;
	w->st = NULL;
	w->nst = w->capst = 0;
	w->count = 0;
	w->cur = NULL;
	w->descend = false;
	w->depth = depth ? depth : 1;
	snprintf(w->req, sizeof(w->req), "%s", requested);
	rc = walk_push(w, 0);
	if (rc < 0) {
		snprintf(err, errlen, "%s", w->ebuf);
		fs_walk_close(w);
		return rc;
	}
	*out = w;
	return 0;
}

int fs_walk_next(struct fs_walk *w, Filesystem__EntryInfo **out, char *err, size_t errlen)
{
	*out = NULL;
	fs_entry_free(w->cur);
	w->cur = NULL;
	if (w->descend) {
		int rc;

		w->descend = false;
		rc = walk_push(w, strlen(w->rel));
		if (rc < 0) {
			snprintf(err, errlen, "%s", w->ebuf);
			return rc;
		}
	}
	while (w->nst) {
		struct wframe *f = &w->st[w->nst - 1];
		Filesystem__EntryInfo *e;
		const char *name;
		size_t nl;
		int rc;

		if (f->i == f->n) {
			frame_free(f);
			w->nst--;
			continue;
		}
		name = f->sorted[f->i++];
		worker_progress();
		nl = strlen(name);
		if (f->rel_len + 1 + nl >= PATH_MAX)
			continue; /* deeper than PATH_MAX: unreachable by path */
		if (f->rel_len) {
			w->rel[f->rel_len] = '/';
			memcpy(w->rel + f->rel_len + 1, name, nl + 1);
		} else {
			memcpy(w->rel, name, nl + 1);
		}
		if (fs_join(w->child_real, PATH_MAX, w->real, w->rel))
			continue;
		rc = fs_entry_info_in(w->child_real, w->entbuf, sizeof(w->entbuf), &e, w->ebuf, sizeof(w->ebuf));
		if (rc == -ENOENT)
			continue;
		if (rc < 0) {
			snprintf(err, errlen, "error reading directory %s: %s", w->real, w->ebuf);
			return rc == -ENOMEM ? -ENOMEM : -EIO;
		}
		if (++w->count > FS_LISTDIR_MAX_ENTRIES) {
			fs_entry_free(e);
			snprintf(err, errlen, "error reading directory %s: too many entries", w->real);
			return -E2BIG;
		}
		fs_join(w->tmp, sizeof(w->tmp), w->req, w->rel);
		path_clean(w->tmp, w->cleaned, sizeof(w->cleaned));
		/* Reported under the requested path. The entry's own copy of
		   the real path is not freed by fs_entry_free either way:
		   pointing it at the walk's buffer saves a copy per entry. */
		e->path = w->cleaned;
		/* A directory (not a symlink to one) below the depth asked
		   for is walked into, at the next call. */
		if (w->nst < w->depth && e->type == FILESYSTEM__FILE_TYPE__FILE_TYPE_DIRECTORY &&
		    e->optional_symlink_target_case != FILESYSTEM__ENTRY_INFO__OPTIONAL_SYMLINK_TARGET_SYMLINK_TARGET)
			w->descend = true;
		w->cur = e;
		*out = e;
		return 1;
	}
	return 0;
}

int fs_listdir(const char *requested, uint32_t depth, struct fs_listing *out, char *err, size_t errlen)
{
	struct fs_walk *w;
	Filesystem__EntryInfo *e;
	int rc;

	out->entries = NULL;
	out->n = out->cap = 0;
	rc = fs_walk_open(requested, depth, &w, err, errlen);
	if (rc < 0)
		return rc;
	while ((rc = fs_walk_next(w, &e, err, errlen)) > 0) {
		Filesystem__EntryInfo *copy;

		if (out->n == out->cap) {
			size_t nc = out->cap ? out->cap * 2 : 64;
			Filesystem__EntryInfo **ne = realloc(out->entries, nc * sizeof(*ne));

			if (!ne)
				goto nomem;
			out->entries = ne;
			out->cap = nc;
		}
		copy = fs_entry_dup(e);
		if (!copy)
			goto nomem;
		out->entries[out->n++] = copy;
	}
	fs_walk_close(w);
	if (rc < 0)
		fs_listing_free(out);
	return rc;
nomem:
	snprintf(err, errlen, "error reading directory %s: %s", requested, go_strerror(ENOMEM));
	fs_walk_close(w);
	fs_listing_free(out);
	return -ENOMEM;
}

/* Remove everything inside the directory `dfd` (consumed), path for messages. */
static int remove_contents(int dfd, const char *path, char *err, size_t errlen, int depth)
{
	DIR *d = fdopendir(dfd);
	struct dirent *de;
	int rc = 0;
	/* Heap, not stack: this recurses once per directory level. */
	char *child = malloc(PATH_MAX);

	if (!d || !child) {
		rc = d ? -ENOMEM : -errno;
		if (d)
			closedir(d);
		else
			close(dfd);
		free(child);
		snprintf(err, errlen, "open %s: %s", path, go_strerror(-rc));
		return rc;
	}
	/* Deleting while iterating can make readdir skip entries; loop until
	 * a pass finds nothing left. */
	for (bool again = true; again && !rc;) {
		again = false;
		rewinddir(d);
		while (!rc && (de = readdir(d))) {
			if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
				continue;
			fs_join(child, PATH_MAX, path, de->d_name);
			worker_progress();
			if (unlinkat(dirfd(d), de->d_name, 0) == 0) {
				again = true;
				continue;
			}
			if (errno == ENOENT)
				continue;
			if (errno != EISDIR && errno != EPERM) {
				rc = -errno;
				snprintf(err, errlen, "unlinkat %s: %s", child, go_strerror(-rc));
				break;
			}
			if (depth > 4096) {
				rc = -ELOOP;
				snprintf(err, errlen, "unlinkat %s: %s", child, go_strerror(ELOOP));
				break;
			}
			int cfd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (cfd < 0) {
				if (errno == ENOENT)
					continue;
				rc = -errno;
				snprintf(err, errlen, "unlinkat %s: %s", child, go_strerror(-rc));
				break;
			}
			rc = remove_contents(cfd, child, err, errlen, depth + 1);
			if (rc)
				break;
			if (unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR) < 0 && errno != ENOENT) {
				rc = -errno;
				snprintf(err, errlen, "unlinkat %s: %s", child, go_strerror(-rc));
				break;
			}
			again = true;
		}
	}
	closedir(d);
	free(child);
	return rc;
}

int fs_remove_all(const char *path, char *err, size_t errlen)
{
	char base[PATH_MAX], werr[PATH_MAX + 256];
	struct fsid_saved sv;
	struct wpath p;
	struct stat st;
	int rc;

	path_base(path, base, sizeof(base));
	if (strcmp(base, ".") == 0) {
		snprintf(err, errlen, "RemoveAll %s: %s", path, go_strerror(EINVAL));
		return -EINVAL;
	}
	/* The name is removed from its directory (fs/wpath.h): past a link
	 * of another user's, as that user could. */
	wpath_init(&p);
	rc = wpath_parent(&p, path, NULL, werr, sizeof(werr));
	if (rc == -ENOENT || (rc == 0 && !p.name[0]))
		rc = rc == -ENOENT ? 0 : -EBUSY;
	if (rc < 0 || !p.name[0]) {
		if (rc < 0)
			snprintf(err, errlen, "lstat %s: %s", path, go_strerror(-rc));
		wpath_close(&p);
		return rc;
	}
	if ((rc = wpath_enter(&p, &sv)) < 0) {
		snprintf(err, errlen, "lstat %s: %s", path, go_strerror(-rc));
		wpath_close(&p);
		return rc;
	}
	if (fstatat(p.dirfd, p.name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		rc = errno == ENOENT ? 0 : -errno;
		if (rc)
			snprintf(err, errlen, "lstat %s: %s", path, go_strerror(-rc));
		goto out;
	}
	if (!S_ISDIR(st.st_mode)) {
		if (unlinkat(p.dirfd, p.name, 0) < 0 && errno != ENOENT) {
			rc = -errno;
			snprintf(err, errlen, "unlinkat %s: %s", path, go_strerror(-rc));
		}
		goto out;
	}
	int dfd = openat(p.dirfd, p.name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0) {
		rc = -errno;
		snprintf(err, errlen, "open %s: %s", path, go_strerror(-rc));
		goto out;
	}
	rc = remove_contents(dfd, path, err, errlen, 0);
	if (rc == 0 && unlinkat(p.dirfd, p.name, AT_REMOVEDIR) < 0 && errno != ENOENT) {
		rc = -errno;
		snprintf(err, errlen, "unlinkat %s: %s", path, go_strerror(-rc));
	}
out:
	wpath_leave(&sv);
	wpath_close(&p);
	return rc;
}
