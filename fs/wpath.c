/* SPDX-License-Identifier: Apache-2.0 */
/*
 * wpath.c - the directory a write lands in, walked under the link-owner
 * rule (wpath.h).
 */
#include "fs/wpath.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/errstr.h"
#include "base/users.h"

/* The identity of a link whose maker cannot be told, and the group of a
 * uid without a passwd entry. */
#define WPATH_NOBODY 65534

/* Set once openat2 answered ENOSYS: every walk is component-wise then. */
static atomic_bool no_openat2;

static int wfail(int rc, char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int wfail(int rc, char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return rc;
}

void wpath_init(struct wpath *p)
{
	p->dirfd = -1;
	p->name[0] = '\0';
	p->slash = false;
	p->followed = false;
	p->links = 0;
	p->as.set = false;
}

void wpath_close(struct wpath *p)
{
	if (p->dirfd >= 0)
		close(p->dirfd);
	wpath_init(p);
}

int wpath_enter(const struct wpath *p, struct fsid_saved *saved)
{
	struct fsid id;

	saved->active = false;
	if (!p->as.set)
		return 0;
	id.uid = p->as.uid;
	id.gid = p->as.gid;
	id.groups = p->as.groups;
	id.n_groups = p->as.n_groups;
	return fsid_enter(&id, saved);
}

void wpath_leave(struct fsid_saved *saved)
{
	fsid_leave(saved);
}

bool wpath_as_root(const struct wpath *p)
{
	return !p->as.set && fsid_current_uid() == 0;
}

static bool dir_private_fd(int fd, uid_t owner)
{
	struct stat d;

	if (fstat(fd, &d) < 0)
		return false;
	return (d.st_uid == 0 || d.st_uid == owner) && !(d.st_mode & (S_IWGRP | S_IWOTH));
}

bool wpath_dir_private(const struct wpath *p, uid_t owner)
{
	return p->dirfd >= 0 && dir_private_fd(p->dirfd, owner);
}

/* The identity of uid: its passwd entry's group and groups. */
static void as_of(struct wpath_as *as, uid_t uid)
{
	char name[256];
	struct user u;

	as->set = true;
	as->uid = uid;
	as->gid = WPATH_NOBODY;
	as->n_groups = 0;
	user_name_of(uid, name, sizeof(name));
	if (user_lookup(name, &u, NULL, 0) == 0 && u.uid == uid) {
		as->gid = u.gid;
		as->n_groups = u.n_groups < FSID_GROUPS_MAX ? u.n_groups : FSID_GROUPS_MAX;
		memcpy(as->groups, u.groups, (size_t)as->n_groups * sizeof(gid_t));
	}
}

/*
 * The link `lst` in directory `dirfd` is about to be followed: a walk with
 * root's rights goes on as its owner (as nobody when a root-owned name
 * could be another user's hard link). Returns whether p->as was set now.
 */
static bool link_rule(struct wpath *p, int dirfd, const struct stat *lst)
{
	uid_t who;

	if (p->as.set || fsid_current_uid() != 0)
		return false;
	if (lst->st_uid != 0)
		who = lst->st_uid;
	else if (lst->st_nlink > 1 && !dir_private_fd(dirfd, 0))
		who = WPATH_NOBODY;
	else
		return false;
	as_of(&p->as, who);
	return true;
}

/* The common case: no link on the path, every component there. */
static int walk_fast(int from, const char *path)
{
	struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_CLOEXEC, .resolve = RESOLVE_NO_SYMLINKS };
	long fd;

	if (atomic_load_explicit(&no_openat2, memory_order_relaxed))
		return -ENOSYS;
	fd = syscall(SYS_openat2, from, path, &how, sizeof(how));
	if (fd >= 0)
		return (int)fd;
	if (errno == ENOSYS)
		atomic_store_explicit(&no_openat2, true, memory_order_relaxed);
	return -errno;
}

static int open_root(int from, const char *path)
{
	return path[0] == '/' ? open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)
			      : openat(from, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
}

/* Directories a walk made, given away together at its end. */
#define WPATH_MADE_MAX 16

/*
 * Give the directories made[0..*n) to mk's uid/gid, with the caller's own
 * identity (the walk's is left meanwhile), and close them. 0, or the
 * first failure (its path moved to made_at[0]).
 */
static int flush_made(int *made, char (*made_at)[PATH_MAX], int *n, const struct wpath_mk *mk, struct fsid_saved *sv,
		      const struct wpath *p)
{
	bool was = sv->active;
	int rc = 0;

	if (!*n)
		return 0;
	wpath_leave(sv);
	for (int i = 0; i < *n; i++) {
		if (fchownat(made[i], "", mk->uid, mk->gid, AT_EMPTY_PATH) < 0 && rc == 0) {
			rc = -errno;
			if (i)
				memcpy(made_at[0], made_at[i], sizeof(made_at[0]));
		}
		close(made[i]);
	}
	*n = 0;
	if (was && wpath_enter(p, sv) < 0 && rc == 0)
		rc = -EPERM;
	return rc;
}

/*
 * Resolve directory `path` from `from` (absolute paths from "/") into
 * *out, under p's identity and the link rule, creating what is missing
 * with mk. `given` names the path in messages.
 */
static int walk(struct wpath *p, int from, const char *path, const struct wpath_mk *mk, const char *given, int *out,
		char *err, size_t errlen)
{
	char buf[PATH_MAX], lnk[PATH_MAX], shown[PATH_MAX];
	struct fsid_saved sv;
	size_t r = 0, plen = strlen(path);
	bool crossed = false;
	int cur = -1, rc, k, n_made = 0;
	int made_fd[WPATH_MADE_MAX];
	char made_at[WPATH_MADE_MAX][PATH_MAX];

	if (plen >= sizeof(buf))
		return wfail(-ENAMETOOLONG, err, errlen, "failed to create directory: %s", go_strerror(ENAMETOOLONG));
	memcpy(buf, path, plen + 1);
	if ((rc = wpath_enter(p, &sv)) < 0)
		return wfail(rc, err, errlen, "cannot act as uid %u: %s", (unsigned)p->as.uid, go_strerror(-rc));
	rc = walk_fast(from, plen ? path : ".");
	if (rc >= 0) {
		*out = rc;
		wpath_leave(&sv);
		return 0;
	}
	snprintf(shown, sizeof(shown), "%s", given);
	cur = open_root(from, buf);
	if (cur < 0) {
		rc = -errno;
		wfail(rc, err, errlen, "failed to stat directory: stat %s: %s", given, go_strerror(-rc));
		goto out;
	}
	for (;;) {
		struct stat st;
		bool made = false;
		size_t s;
		char c;
		int fd;

		while (buf[r] == '/')
			r++;
		if (!buf[r])
			break;
		s = r;
		while (buf[r] && buf[r] != '/')
			r++;
		c = buf[r];
		buf[r] = '\0';
		/* Until a link is crossed, buf is the path as given. */
		if (!crossed)
			snprintf(shown, sizeof(shown), "%s", buf);
		if (strcmp(buf + s, ".") == 0) {
			buf[r] = c;
			continue;
		}
		fd = openat(cur, buf + s, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0 && errno == ENOENT && mk) {
			if (mkdirat(cur, buf + s, 0755) < 0 && errno != EEXIST) {
				rc = -errno;
				wfail(rc, err, errlen, "failed to create directory: mkdir %s: %s", shown, go_strerror(-rc));
				goto out;
			}
			made = true;
			fd = openat(cur, buf + s, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		}
		if (fd < 0 || fstat(fd, &st) < 0) {
			rc = -errno;
			if (fd >= 0)
				close(fd);
			wfail(rc, err, errlen, "failed to stat directory: stat %s: %s", shown, go_strerror(-rc));
			goto out;
		}
		buf[r] = c;
		if (S_ISDIR(st.st_mode)) {
			/* Given away on the descriptor, and only a directory of
			 * the walk's own identity: never one that someone else
			 * swapped in after the mkdir. At the end: a user whose
			 * link the walk went through creates the next level in
			 * it before it is given away. */
			if (made && st.st_uid == fsid_current_uid() && (mk->uid != (uid_t)-1 || mk->gid != (gid_t)-1)) {
				if (n_made == WPATH_MADE_MAX && (k = flush_made(made_fd, made_at, &n_made, mk, &sv, p)) < 0) {
					close(fd);
					rc = wfail(k, err, errlen, "failed to chown directory: chown %s: %s", made_at[0],
						   go_strerror(-k));
					goto out;
				}
				made_fd[n_made] = fcntl(fd, F_DUPFD_CLOEXEC, 0);
				snprintf(made_at[n_made], sizeof(made_at[0]), "%s", shown);
				if (made_fd[n_made] >= 0)
					n_made++;
			}
			close(cur);
			cur = fd;
			continue;
		}
		if (!S_ISLNK(st.st_mode)) {
			close(fd);
			rc = wfail(-ENOTDIR, err, errlen, "path is a file: %s", shown);
			goto out;
		}
		ssize_t n = ++p->links > WPATH_MAX_LINKS ? -2 : readlinkat(fd, "", lnk, sizeof(lnk) - 1);
		int e = errno;
		bool switched = n > 0 && link_rule(p, cur, &st);
		close(fd);
		if (n <= 0) {
			rc = n == -2 ? -ELOOP : n == 0 ? -ENOENT : -e;
			wfail(rc, err, errlen, "failed to stat directory: stat %s: %s", shown, go_strerror(-rc));
			goto out;
		}
		size_t rest = strlen(buf + r);
		if ((size_t)n + rest >= sizeof(lnk)) {
			rc = wfail(-ENAMETOOLONG, err, errlen, "failed to stat directory: stat %s: %s", shown,
				   go_strerror(ENAMETOOLONG));
			goto out;
		}
		memcpy(lnk + n, buf + r, rest + 1);
		memcpy(buf, lnk, (size_t)n + rest + 1);
		r = 0;
		crossed = true;
		if (switched && (rc = wpath_enter(p, &sv)) < 0) {
			wfail(rc, err, errlen, "cannot act as uid %u: %s", (unsigned)p->as.uid, go_strerror(-rc));
			goto out;
		}
		if (buf[0] == '/') {
			close(cur);
			if ((cur = open_root(from, buf)) < 0) {
				rc = -errno;
				wfail(rc, err, errlen, "failed to stat directory: stat %s: %s", shown, go_strerror(-rc));
				goto out;
			}
		}
	}
	*out = cur;
	cur = -1;
	rc = 0;
out:
	if (cur >= 0)
		close(cur);
	if ((k = flush_made(made_fd, made_at, &n_made, mk, &sv, p)) < 0 && rc == 0) {
		close(*out);
		rc = wfail(k, err, errlen, "failed to chown directory: chown %s: %s", made_at[0], go_strerror(-k));
	}
	wpath_leave(&sv);
	return rc;
}

int wpath_dir(struct wpath *p, const char *dir, const struct wpath_mk *mk, char *err, size_t errlen)
{
	int fd, rc = walk(p, AT_FDCWD, dir, mk, dir, &fd, err, errlen);

	if (rc < 0)
		return rc;
	if (p->dirfd >= 0)
		close(p->dirfd);
	p->dirfd = fd;
	p->name[0] = '\0';
	return 0;
}

/*
 * Split path[0..n) into its directory part (into dir) and last component
 * (into name), trailing slashes dropped (*slash set). 0 or -ENAMETOOLONG.
 */
static int split(const char *path, size_t n, char *dir, size_t dirlen, char *name, bool *slash)
{
	const char *sl;
	size_t k;

	*slash = false;
	while (n > 1 && path[n - 1] == '/') {
		n--;
		*slash = true;
	}
	if (n == 1 && path[0] == '/') {
		snprintf(dir, dirlen, "/");
		name[0] = '\0';
		*slash = false;
		return 0;
	}
	sl = memrchr(path, '/', n);
	k = sl ? (size_t)(sl - path) : 0;
	if (n - (sl ? k + 1 : 0) > NAME_MAX || k >= dirlen)
		return -ENAMETOOLONG;
	memcpy(name, sl ? sl + 1 : path, n - (sl ? k + 1 : 0));
	name[n - (sl ? k + 1 : 0)] = '\0';
	if (!sl)
		snprintf(dir, dirlen, ".");
	else if (k == 0)
		snprintf(dir, dirlen, "/");
	else {
		memcpy(dir, path, k);
		dir[k] = '\0';
	}
	return 0;
}

int wpath_parent(struct wpath *p, const char *path, const struct wpath_mk *mk, char *err, size_t errlen)
{
	char dir[PATH_MAX], name[NAME_MAX + 1];
	bool slash;
	int fd, rc;

	if (split(path, strlen(path), dir, sizeof(dir), name, &slash) < 0)
		return wfail(-ENAMETOOLONG, err, errlen, "path too long: %s", path);
	rc = walk(p, AT_FDCWD, dir, mk, dir, &fd, err, errlen);
	if (rc < 0)
		return rc;
	if (p->dirfd >= 0)
		close(p->dirfd);
	p->dirfd = fd;
	memcpy(p->name, name, strlen(name) + 1);
	p->slash = slash;
	return 0;
}

int wpath_follow(struct wpath *p, char *err, size_t errlen)
{
	char lnk[PATH_MAX], dir[PATH_MAX], name[NAME_MAX + 1];
	struct fsid_saved sv;
	struct stat st;
	ssize_t n = -1;
	bool slash;
	int fd, e, rc;

	if (++p->links > WPATH_MAX_LINKS)
		return wfail(-ELOOP, err, errlen, "open %s: %s", p->name, go_strerror(ELOOP));
	if ((rc = wpath_enter(p, &sv)) < 0)
		return wfail(rc, err, errlen, "cannot act as uid %u: %s", (unsigned)p->as.uid, go_strerror(-rc));
	fd = openat(p->dirfd, p->name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0 && fstat(fd, &st) == 0) {
		if (S_ISLNK(st.st_mode))
			n = readlinkat(fd, "", lnk, sizeof(lnk) - 1);
		else
			errno = EINVAL;
	}
	e = errno;
	if (fd >= 0)
		close(fd);
	wpath_leave(&sv);
	if (n <= 0) {
		rc = n == 0 ? -ENOENT : -e;
		return wfail(rc, err, errlen, "open %s: %s", p->name, go_strerror(-rc));
	}
	lnk[n] = '\0';
	link_rule(p, p->dirfd, &st);
	if (split(lnk, (size_t)n, dir, sizeof(dir), name, &slash) < 0)
		return wfail(-ENAMETOOLONG, err, errlen, "open %s: %s", p->name, go_strerror(ENAMETOOLONG));
	rc = walk(p, p->dirfd, dir, NULL, lnk, &fd, err, errlen);
	if (rc < 0)
		return rc;
	close(p->dirfd);
	p->dirfd = fd;
	memcpy(p->name, name, strlen(name) + 1);
	p->slash = slash;
	p->followed = true;
	return 0;
}
