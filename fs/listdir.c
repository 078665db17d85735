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
#include <unistd.h>

#include "fs/entry.h"
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

struct walk {
	const char *req;   /* requested path R */
	const char *real;  /* resolved path S */
	uint32_t depth;
	struct fs_listing *out;
	char *err;
	size_t errlen;
};

/* Walk S/rel at `level` (1 = children of S). */
static int walk_dir(struct walk *w, const char *rel, uint32_t level)
{
	/* Path buffers live on the heap: the walk recurses once per level. */
	struct bufs {
		char dir[PATH_MAX], child_rel[PATH_MAX], child_real[PATH_MAX], tmp[PATH_MAX * 2],
			cleaned[PATH_MAX * 2], ebuf[PATH_MAX + 128];
	} *b = malloc(sizeof(*b));
	char *dir, *child_rel, *child_real, *tmp, *cleaned;
	char **names = NULL;
	size_t n = 0;
	int rc;

	if (!b) {
		snprintf(w->err, w->errlen, "error reading directory %s: %s", w->real, go_strerror(ENOMEM));
		return -ENOMEM;
	}
	dir = b->dir;
	child_rel = b->child_rel;
	child_real = b->child_real;
	tmp = b->tmp;
	cleaned = b->cleaned;
	fs_join(dir, PATH_MAX, w->real, rel);
	rc = fs_read_names(dir, &names, &n);
	if (rc < 0) {
		if (rc == -ENOENT && *rel) {
			free(b);
			return 0; /* vanished during the walk */
		}
		snprintf(w->err, w->errlen, "error reading directory %s: open %s: %s", w->real, dir,
			 go_strerror(-rc));
		free(b);
		return rc == -ENOMEM ? -ENOMEM : -EIO; /* anything but memory is internal */
	}
	rc = 0;
	for (size_t i = 0; i < n; i++) {
		Filesystem__EntryInfo *e;
		char *ebuf = b->ebuf;
		struct stat st;

		if (rc)
			goto next;
		worker_progress();
		if (*rel ? fs_join(child_rel, PATH_MAX, rel, names[i])
			 : fs_join(child_rel, PATH_MAX, names[i], ""))
			goto next; /* deeper than PATH_MAX: unreachable by path */
		if (fs_join(child_real, PATH_MAX, w->real, child_rel))
			goto next;
		int erc = fs_entry_info(child_real, &e, ebuf, sizeof(b->ebuf));
		if (erc == -ENOENT)
			goto next;
		if (erc < 0) {
			snprintf(w->err, w->errlen, "error reading directory %s: %s", w->real, ebuf);
			rc = -EIO;
			goto next;
		}
		fs_join(tmp, sizeof(b->tmp), w->req, child_rel);
		path_clean(tmp, cleaned, sizeof(b->cleaned));
		if (fs_entry_set_path(e, cleaned) < 0) {
			fs_entry_free(e);
			snprintf(w->err, w->errlen, "error reading directory %s: %s", w->real, go_strerror(ENOMEM));
			rc = -ENOMEM;
			goto next;
		}
		if (w->out->n == w->out->cap) {
			size_t nc = w->out->cap ? w->out->cap * 2 : 64;
			Filesystem__EntryInfo **ne = NULL;
			if (w->out->n < FS_LISTDIR_MAX_ENTRIES)
				ne = realloc(w->out->entries, nc * sizeof(*ne));
			if (!ne) {
				fs_entry_free(e);
				snprintf(w->err, w->errlen, "error reading directory %s: too many entries", w->real);
				rc = -E2BIG;
				goto next;
			}
			w->out->entries = ne;
			w->out->cap = nc;
		}
		w->out->entries[w->out->n++] = e;
		if (level < w->depth && lstat(child_real, &st) == 0 && S_ISDIR(st.st_mode))
			rc = walk_dir(w, child_rel, level + 1);
next:
		free(names[i]);
	}
	free(names);
	free(b);
	return rc;
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

int fs_listdir(const char *requested, uint32_t depth, struct fs_listing *out, char *err, size_t errlen)
{
	struct walk w = { .req = requested, .depth = depth ? depth : 1, .out = out, .err = err,
			  .errlen = errlen };
	struct stat st;
	char *real;
	int rc;

	out->entries = NULL;
	out->n = out->cap = 0;
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
	w.real = real;
	rc = walk_dir(&w, "", 1);
	free(real);
	if (rc)
		fs_listing_free(out);
	return rc;
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
	char base[PATH_MAX];
	struct stat st;
	int rc;

	path_base(path, base, sizeof(base));
	if (strcmp(base, ".") == 0) {
		snprintf(err, errlen, "RemoveAll %s: %s", path, go_strerror(EINVAL));
		return -EINVAL;
	}
	if (lstat(path, &st) < 0) {
		if (errno == ENOENT)
			return 0;
		rc = -errno;
		snprintf(err, errlen, "lstat %s: %s", path, go_strerror(-rc));
		return rc;
	}
	if (!S_ISDIR(st.st_mode)) {
		if (unlink(path) < 0 && errno != ENOENT) {
			rc = -errno;
			snprintf(err, errlen, "unlinkat %s: %s", path, go_strerror(-rc));
			return rc;
		}
		return 0;
	}
	int dfd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0) {
		rc = -errno;
		snprintf(err, errlen, "open %s: %s", path, go_strerror(-rc));
		return rc;
	}
	rc = remove_contents(dfd, path, err, errlen, 0);
	if (rc)
		return rc;
	if (rmdir(path) < 0 && errno != ENOENT) {
		rc = -errno;
		snprintf(err, errlen, "unlinkat %s: %s", path, go_strerror(-rc));
		return rc;
	}
	return 0;
}
