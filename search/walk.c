/* SPDX-License-Identifier: Apache-2.0 */
/*
 * walk.c - the parallel filtered walk (walk.h).
 */
#include "search/walk.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "search/ignore.h"

struct dirent64_ {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

#ifndef DT_UNKNOWN
#define DT_UNKNOWN 0
#define DT_DIR 4
#define DT_REG 8
#define DT_LNK 10
#endif

struct dir_item {
	struct dir_item *next;
	struct ignore_level *level; /* what applies to the directory's entries, before its own files */
	size_t len;
	char path[];
};

struct walk {
	char *root;
	size_t rootlen;
	size_t relbase;  /* where a path relative to the root starts */
	struct walk_opts o;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct dir_item *stack;
	unsigned active;    /* cursors holding a directory */
	bool started, root_file, root_given;
	int root_err;
	struct ignore_level *base; /* the root's ancestors */
	bool stop;          /* atomic */
	struct walk_stats st;
};

struct walk_cursor {
	struct walk *w;
	int fd;
	struct dir_item *dir;
	struct ignore_level *level;
	char *buf;
	size_t buflen, bufpos;
	bool more;          /* the directory did not fit in buf */
	bool holds;
	bool local;         /* the directory is on a local filesystem (walk_entry.local) */
	char path[PATH_MAX];
	struct walk_stats st;
};

struct walk *walk_new(const char *root, const struct walk_opts *o)
{
	struct walk *w = calloc(1, sizeof(*w));

	if (!w)
		return NULL;
	w->root = strdup(root);
	if (!w->root) {
		free(w);
		return NULL;
	}
	/* "/a/b/" walks as "/a/b" */
	w->rootlen = strlen(w->root);
	while (w->rootlen > 1 && w->root[w->rootlen - 1] == '/')
		w->root[--w->rootlen] = '\0';
	w->relbase = w->rootlen == 1 ? 1 : w->rootlen + 1;
	w->o = *o;
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	return w;
}

void walk_free(struct walk *w)
{
	if (!w)
		return;
	while (w->stack) {
		struct dir_item *d = w->stack;
		w->stack = d->next;
		ignore_level_unref(d->level);
		free(d);
	}
	ignore_level_unref(w->base);
	pthread_mutex_destroy(&w->mu);
	pthread_cond_destroy(&w->cv);
	free(w->root);
	free(w);
}

void walk_stop(struct walk *w)
{
	pthread_mutex_lock(&w->mu);
	__atomic_store_n(&w->stop, true, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

bool walk_stopped(const struct walk *w)
{
	return __atomic_load_n(&w->stop, __ATOMIC_ACQUIRE);
}

struct walk_cursor *walk_cursor_new(struct walk *w)
{
	struct walk_cursor *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->buf = malloc(WALK_DIR_BUF);
	if (!c->buf) {
		free(c);
		return NULL;
	}
	c->w = w;
	c->fd = -1;
	return c;
}

/* The cursor is done with its directory. */
static void release_dir(struct walk_cursor *c)
{
	struct walk *w = c->w;

	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	ignore_level_unref(c->level);
	c->level = NULL;
	if (c->dir) {
		ignore_level_unref(c->dir->level);
		free(c->dir);
		c->dir = NULL;
	}
	if (c->holds) {
		c->holds = false;
		pthread_mutex_lock(&w->mu);
		if (--w->active == 0 && !w->stack)
			pthread_cond_broadcast(&w->cv);
		pthread_mutex_unlock(&w->mu);
	}
}

/* The cursor's counts into the walk's. */
static void flush_stats(struct walk_cursor *c)
{
	if (!c->w)
		return;
	pthread_mutex_lock(&c->w->mu);
	c->w->st.dirs += c->st.dirs;
	c->w->st.dirs_denied += c->st.dirs_denied;
	c->w->st.dirs_failed += c->st.dirs_failed;
	c->w->st.entries += c->st.entries;
	c->w->st.dirs_pseudo += c->st.dirs_pseudo;
	pthread_mutex_unlock(&c->w->mu);
	memset(&c->st, 0, sizeof(c->st));
}

void walk_cursor_free(struct walk_cursor *c)
{
	if (!c)
		return;
	walk_cursor_detach(c);
	free(c->buf);
	free(c);
}

void walk_cursor_detach(struct walk_cursor *c)
{
	if (!c->w)
		return;
	release_dir(c);
	flush_stats(c);
	c->w = NULL;
	c->buflen = c->bufpos = 0;
	c->more = false;
}

void walk_cursor_attach(struct walk_cursor *c, struct walk *w)
{
	c->w = w;
	c->fd = -1;
}

void walk_get_stats(struct walk *w, struct walk_stats *st)
{
	pthread_mutex_lock(&w->mu);
	*st = w->st;
	pthread_mutex_unlock(&w->mu);
}

/* --- ignore files --- */

/* Read and parse dirfd/name; NULL rules when absent or empty. */
static int read_rules(int dirfd, const char *name, struct ignore_rules **out)
{
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
	char *text = NULL;
	size_t len = 0, cap = 0;
	int rc;

	*out = NULL;
	if (fd < 0)
		return 0; /* absent or unreadable: no rules, as ripgrep */
	for (;;) {
		ssize_t n;
		if (len == cap) {
			if (cap >= IGNORE_FILE_MAX)
				break;
			char *t = realloc(text, cap = cap ? cap * 4 : 4096);
			if (!t) {
				free(text);
				close(fd);
				return -ENOMEM;
			}
			text = t;
		}
		n = read(fd, text + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	rc = ignore_parse(text ? text : "", len, out);
	free(text);
	return rc;
}

/*
 * The level of a directory (fd open on it, `len` bytes of path), given
 * what its listing showed: NULL when it adds nothing (the caller keeps
 * the parent's). *made says whether a level was made.
 */
static int dir_level(const struct walk *w, int fd, size_t len, bool has_gi, bool has_ig, bool has_rg, bool has_git,
		     bool git_is_dir, struct ignore_level *parent, struct ignore_level **out)
{
	struct ignore_rules *rules[IGNORE_KINDS] = { 0 };
	int rc = 0;

	*out = NULL;
	if (w->o.no_ignore)
		return 0;
	if (has_gi)
		rc = read_rules(fd, ".gitignore", &rules[IGNORE_GIT]);
	if (!rc && has_ig)
		rc = read_rules(fd, ".ignore", &rules[IGNORE_IGNORE]);
	if (!rc && has_rg)
		rc = read_rules(fd, ".rgignore", &rules[IGNORE_RG]);
	if (!rc && has_git && git_is_dir)
		rc = read_rules(fd, ".git/info/exclude", &rules[IGNORE_EXCLUDE]);
	if (rc) {
		for (int k = 0; k < IGNORE_KINDS; k++)
			ignore_rules_free(rules[k]);
		return rc;
	}
	if (!has_git && !rules[0] && !rules[1] && !rules[2] && !rules[3])
		return 0;
	*out = ignore_level_new(parent, len == 1 ? 0 : len, has_git, rules);
	return *out ? 0 : -ENOMEM;
}

/* --- the root's ancestors, kept --- */

/*
 * The levels of a root's ancestors are read again by every walk of that
 * root (an agent greps the same checkout over and over): per ancestor an
 * open, four probes and a close, and the ignore files found parsed again.
 * The last ANC_KEPT results are kept with what they were read from, and
 * taken again after one stat per ancestor directory and per ignore file
 * found (and per repository's .git/info/exclude, present or not) shows
 * all of it unchanged: an entry made or removed changes its directory's
 * times, a rewritten file its own. A result read while any of that was
 * touched within the last ANC_SETTLE_S seconds is not kept: a change in
 * the same tick of the clock would keep the same times.
 *
 * Keyed by the root and the filesystem identity the walk runs as (what
 * that user may read of the ancestors is part of the result).
 */
#define ANC_KEPT 8
#define ANC_SETTLE_S 1

struct anc_check {
	char *path;
	bool present;
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime, ctime;
};

struct anc_entry {
	char *root;
	uid_t uid;
	gid_t gid;
	struct ignore_level *base;
	struct anc_check *checks;
	size_t n, cap;
	uint64_t used;
};

static pthread_mutex_t anc_mu = PTHREAD_MUTEX_INITIALIZER;
static struct anc_entry anc_kept[ANC_KEPT];
static uint64_t anc_clock;

static void anc_entry_clear(struct anc_entry *e)
{
	for (size_t i = 0; i < e->n; i++)
		free(e->checks[i].path);
	free(e->checks);
	free(e->root);
	ignore_level_unref(e->base);
	memset(e, 0, sizeof(*e));
}

/* Stat `path` into c (present or not); false on another error. */
static bool anc_stat(const char *path, struct anc_check *c)
{
	struct stat st;

	if (stat(path, &st) < 0) {
		c->present = false;
		return errno == ENOENT || errno == ENOTDIR;
	}
	c->present = true;
	c->dev = st.st_dev;
	c->ino = st.st_ino;
	c->size = st.st_size;
	c->mtime = st.st_mtim;
	c->ctime = st.st_ctim;
	return true;
}

static bool anc_same(const struct anc_check *a, const struct anc_check *b)
{
	if (a->present != b->present)
		return false;
	return !a->present || (a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
			       a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec &&
			       a->ctime.tv_sec == b->ctime.tv_sec && a->ctime.tv_nsec == b->ctime.tv_nsec);
}

/* Add a check of dir/name (name NULL: dir itself), stat'ed now; false
 * when it cannot be (out of memory, or a stat error: then not kept). */
static bool anc_add(struct anc_entry *e, const char *dir, const char *name)
{
	char path[PATH_MAX];
	struct anc_check c = { 0 };

	if (!e)
		return true;
	if (snprintf(path, sizeof(path), "%s%s%s", dir, name && strcmp(dir, "/") ? "/" : "", name ? name : "") >=
	    (int)sizeof(path))
		return false;
	if (!anc_stat(path, &c))
		return false;
	if (e->n == e->cap) {
		size_t cap = e->cap ? e->cap * 2 : 16;
		struct anc_check *t = realloc(e->checks, cap * sizeof(*t));
		if (!t)
			return false;
		e->checks = t;
		e->cap = cap;
	}
	if (!(c.path = strdup(path)))
		return false;
	e->checks[e->n++] = c;
	return true;
}

/* Levels for the ancestors of the root (not the root itself), with what
 * they are read from noted in e (NULL: not noted). */
static int ancestors(struct walk *w, struct anc_entry *e, bool *keep)
{
	char dir[PATH_MAX];
	size_t end = 0;

	for (;;) {
		/* the next ancestor: "/" then "/a", "/a/b", ... short of the root */
		size_t next;
		if (end == 0) {
			next = 1;
		} else {
			const char *slash = memchr(w->root + end + (end > 1), '/', w->rootlen - end - (end > 1));
			if (!slash)
				break;
			next = (size_t)(slash - w->root);
		}
		if (next >= w->rootlen)
			break;
		memcpy(dir, w->root, next);
		dir[next] = '\0';
		/* The directory's times before its entries are looked at: a
		 * change after this shows. */
		*keep = *keep && anc_add(e, dir, NULL);
		/* openat: musl's open() follows O_CLOEXEC with an fcntl */
		int fd = openat(AT_FDCWD, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd >= 0) {
			struct stat st;
			bool has_git = fstatat(fd, ".git", &st, 0) == 0;
			bool git_dir = has_git && S_ISDIR(st.st_mode);
			/* fstatat, not faccessat: that one checks as the real
			 * user, with credentials made and dropped per call */
			bool gi = fstatat(fd, ".gitignore", &st, 0) == 0;
			bool ig = fstatat(fd, ".ignore", &st, 0) == 0;
			bool rg = fstatat(fd, ".rgignore", &st, 0) == 0;
			struct ignore_level *lv;
			if (gi)
				*keep = *keep && anc_add(e, dir, ".gitignore");
			if (ig)
				*keep = *keep && anc_add(e, dir, ".ignore");
			if (rg)
				*keep = *keep && anc_add(e, dir, ".rgignore");
			if (git_dir)
				*keep = *keep && anc_add(e, dir, ".git/info/exclude");
			int rc = dir_level(w, fd, next, gi, ig, rg, has_git, git_dir, w->base, &lv);
			close(fd);
			if (rc)
				return rc;
			if (lv) {
				ignore_level_unref(w->base);
				w->base = lv;
			}
		}
		end = next;
	}
	return 0;
}

/* Whether every check still holds, and none was touched too lately to
 * tell a later change from it (then nothing is kept). */
static bool anc_settled(const struct anc_entry *e)
{
	struct timespec now;

	clock_gettime(CLOCK_REALTIME, &now);
	for (size_t i = 0; i < e->n; i++) {
		const struct anc_check *c = &e->checks[i];
		if (c->present && (c->mtime.tv_sec >= now.tv_sec - ANC_SETTLE_S ||
				   c->ctime.tv_sec >= now.tv_sec - ANC_SETTLE_S))
			return false;
	}
	return true;
}

/* The kept levels of w's root for this identity, if still good: taken
 * (a reference) into w->base; false otherwise. */
static bool anc_take(struct walk *w, uid_t uid, gid_t gid)
{
	struct anc_check *checks = NULL;
	struct ignore_level *base = NULL;
	size_t n = 0, want = 0;
	int slot = -1;

	pthread_mutex_lock(&anc_mu);
	for (int i = 0; i < ANC_KEPT; i++) {
		struct anc_entry *e = &anc_kept[i];
		if (e->root && e->uid == uid && e->gid == gid && !strcmp(e->root, w->root)) {
			slot = i;
			base = ignore_level_ref(e->base);
			e->used = ++anc_clock;
			want = e->n;
			/* a copy, checked outside the lock: stat may wait on a mount */
			if ((checks = calloc(e->n + 1, sizeof(*checks))))
				for (n = 0; n < e->n; n++) {
					checks[n] = e->checks[n];
					if (!(checks[n].path = strdup(e->checks[n].path)))
						break;
				}
			break;
		}
	}
	pthread_mutex_unlock(&anc_mu);
	if (slot < 0)
		return false;
	bool good = checks && n == want; /* else out of memory midway */
	for (size_t i = 0; good && i < n; i++) {
		struct anc_check now = { 0 };
		good = anc_stat(checks[i].path, &now) && anc_same(&checks[i], &now);
	}
	for (size_t i = 0; checks && i < n; i++)
		free(checks[i].path);
	free(checks);
	if (!good) {
		ignore_level_unref(base);
		return false;
	}
	ignore_level_unref(w->base);
	w->base = base;
	return true;
}

/* Keep e (taken over) for w's root, in place of the least recently used. */
static void anc_keep(struct anc_entry *e)
{
	int victim = -1;

	pthread_mutex_lock(&anc_mu);
	for (int i = 0; i < ANC_KEPT && victim < 0; i++)
		if (anc_kept[i].root && anc_kept[i].uid == e->uid && anc_kept[i].gid == e->gid &&
		    !strcmp(anc_kept[i].root, e->root))
			victim = i; /* the same, read again */
	for (int i = 0; i < ANC_KEPT && victim < 0; i++)
		if (!anc_kept[i].root)
			victim = i;
	if (victim < 0) {
		victim = 0;
		for (int i = 1; i < ANC_KEPT; i++)
			if (anc_kept[i].used < anc_kept[victim].used)
				victim = i;
	}
	anc_entry_clear(&anc_kept[victim]);
	anc_kept[victim] = *e;
	anc_kept[victim].used = ++anc_clock;
	pthread_mutex_unlock(&anc_mu);
	memset(e, 0, sizeof(*e));
}

/* w->base: kept, or read (and kept when settled). */
static int ancestors_of(struct walk *w)
{
	uid_t uid = (uid_t)setfsuid((uid_t)-1); /* asks, changes nothing */
	gid_t gid = (gid_t)setfsgid((gid_t)-1);
	struct anc_entry e = { 0 };
	bool keep = true;
	int rc;

	if (anc_take(w, uid, gid)) {
		w->st.ancestors_kept = true;
		return 0;
	}
	e.uid = uid;
	e.gid = gid;
	rc = ancestors(w, &e, &keep);
	if (rc == 0 && keep && anc_settled(&e) && (e.root = strdup(w->root))) {
		e.base = ignore_level_ref(w->base);
		anc_keep(&e);
	}
	anc_entry_clear(&e);
	return rc;
}

static int push_dir(struct walk *w, const char *path, size_t len, struct ignore_level *level)
{
	struct dir_item *d = malloc(sizeof(*d) + len + 1);

	if (!d)
		return -ENOMEM;
	memcpy(d->path, path, len);
	d->path[len] = '\0';
	d->len = len;
	d->level = ignore_level_ref(level);
	pthread_mutex_lock(&w->mu);
	d->next = w->stack;
	w->stack = d;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
	return 0;
}

/* Under w->mu: the first cursor looks at the root. */
static void start(struct walk *w)
{
	struct stat st;
	int rc;

	w->started = true;
	if (stat(w->root, &st) < 0) {
		w->root_err = -errno;
		return;
	}
	if (S_ISREG(st.st_mode)) {
		w->root_file = true;
		return;
	}
	if (!S_ISDIR(st.st_mode)) {
		/* a device or a FIFO could be read forever */
		w->root_err = -EINVAL;
		return;
	}
	if (!w->o.no_ignore && (rc = ancestors_of(w)) < 0) {
		w->root_err = rc;
		return;
	}
	struct dir_item *d = malloc(sizeof(*d) + w->rootlen + 1);
	if (!d) {
		w->root_err = -ENOMEM;
		return;
	}
	memcpy(d->path, w->root, w->rootlen + 1);
	d->len = w->rootlen;
	d->level = ignore_level_ref(w->base);
	d->next = NULL;
	w->stack = d;
}

/* The kernel's own filesystems (their magic numbers, linux/magic.h). */
static const unsigned long pseudo_magic[] = {
	0x9fa0,     /* proc */
	0x62656572, /* sysfs */
	0x1cd1,     /* devpts */
	0x64626720, /* debugfs */
	0x74726163, /* tracefs */
	0x73636673, /* securityfs */
	0x63677270, /* cgroup2 */
	0x27e0eb,   /* cgroup */
	0xcafe4a11, /* bpf */
	0x6e736673, /* nsfs */
	0x42494e4d, /* binfmt_misc */
	0x67596969, /* rpc_pipefs */
	0x19800202, /* mqueue */
	0x50495045, /* pipefs */
	0x65735543, /* fusectl */
	0xf97cff8c, /* selinuxfs */
	0x6e667364, /* nfsd */
	0x62656570, /* configfs */
	0x5a3c69f0, /* aafs (apparmor) */
};

/* Filesystems on a local disk or in memory: their regular files are read
 * through the page cache, where a read shorter than asked means the end
 * of the file. (FUSE and network filesystems may answer short reads
 * before the end; they are not here.) */
static const unsigned long local_magic[] = {
	0xef53,     /* ext2, ext3, ext4 */
	0x58465342, /* xfs */
	0x9123683e, /* btrfs */
	0xf2f52010, /* f2fs */
	0x01021994, /* tmpfs */
	0x858458f6, /* ramfs */
	0x73717368, /* squashfs */
	0x794c7630, /* overlay */
};

enum fs_class { FS_OTHER, FS_PSEUDO, FS_LOCAL };

static bool magic_in(unsigned long m, const unsigned long *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (m == v[i])
			return true;
	return false;
}

static enum fs_class fs_class(int fd)
{
	struct statfs sf;

	if (fstatfs(fd, &sf) < 0)
		return FS_OTHER;
	if (magic_in((unsigned long)sf.f_type, pseudo_magic, sizeof(pseudo_magic) / sizeof(pseudo_magic[0])))
		return FS_PSEUDO;
	if (magic_in((unsigned long)sf.f_type, local_magic, sizeof(local_magic) / sizeof(local_magic[0])))
		return FS_LOCAL;
	return FS_OTHER;
}

static long getdents(int fd, char *buf, size_t n)
{
	return syscall(SYS_getdents64, fd, buf, n);
}

/* Open the directory and read its listing; false when it cannot be read. */
static int open_dir(struct walk_cursor *c)
{
	struct walk *w = c->w;
	struct dir_item *d = c->dir;
	bool gi = false, ig = false, rg = false, git = false, git_dir = false;
	long n;
	int rc;

	bool is_root = d->len == w->rootlen && memcmp(d->path, w->root, d->len) == 0;

	/* the root may be a symbolic link to a directory (a path named
	 * explicitly is followed, as ripgrep does); nothing below it is */
	c->fd = openat(AT_FDCWD, d->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | (is_root ? 0 : O_NOFOLLOW));
	if (c->fd < 0) {
		rc = -errno;
		if (rc == -EACCES || rc == -EPERM)
			c->st.dirs_denied++;
		else
			c->st.dirs_failed++;
		/* the root itself: the caller is told */
		return is_root ? rc : 1;
	}
	enum fs_class fc = fs_class(c->fd);
	if (!is_root && fc == FS_PSEUDO) {
		/* /proc, /sys and their kind: files that never end or block
		 * (/proc/kmsg), and nothing a search of files wants */
		c->st.dirs_pseudo++;
		return 1;
	}
	c->local = fc == FS_LOCAL;
	c->st.dirs++;
	c->buflen = c->bufpos = 0;
	c->more = false;
	for (;;) {
		n = getdents(c->fd, c->buf + c->buflen, WALK_DIR_BUF - c->buflen);
		if (n < 0 && errno == EINVAL && c->buflen) {
			c->more = true; /* the next entry does not fit */
			break;
		}
		if (n < 0) {
			c->st.dirs_failed++;
			return 1;
		}
		if (n == 0)
			break;
		c->buflen += (size_t)n;
		if (WALK_DIR_BUF - c->buflen < 512) {
			c->more = true;
			break;
		}
	}
	if (w->o.no_ignore) {
		c->level = ignore_level_ref(d->level);
		return 0;
	}
	if (!c->more) {
		for (size_t off = 0; off < c->buflen;) {
			const struct dirent64_ *e = (const struct dirent64_ *)(c->buf + off);
			off += e->d_reclen;
			if (e->d_name[0] != '.')
				continue;
			if (!strcmp(e->d_name, ".gitignore"))
				gi = true;
			else if (!strcmp(e->d_name, ".ignore"))
				ig = true;
			else if (!strcmp(e->d_name, ".rgignore"))
				rg = true;
			else if (!strcmp(e->d_name, ".git")) {
				git = true;
				git_dir = e->d_type == DT_DIR || e->d_type == DT_UNKNOWN;
			}
		}
	} else {
		/* too many entries to hold: ask for the files by name */
		struct stat st;
		gi = fstatat(c->fd, ".gitignore", &st, 0) == 0;
		ig = fstatat(c->fd, ".ignore", &st, 0) == 0;
		rg = fstatat(c->fd, ".rgignore", &st, 0) == 0;
		git = fstatat(c->fd, ".git", &st, AT_SYMLINK_NOFOLLOW) == 0;
		git_dir = git && S_ISDIR(st.st_mode);
	}
	rc = dir_level(w, c->fd, d->len, gi, ig, rg, git, git_dir, d->level, &c->level);
	if (rc)
		return rc;
	if (!c->level)
		c->level = ignore_level_ref(d->level);
	return 0;
}

static bool any_match(const struct glob *const *g, size_t n, const char *s, size_t len)
{
	for (size_t i = 0; i < n; i++)
		if (glob_match(g[i], s, len))
			return true;
	return false;
}

/* One directory entry: 1 to hand it out, 0 to skip it, < 0 an error. */
static int consider(struct walk_cursor *c, const struct dirent64_ *de, struct walk_entry *e)
{
	struct walk *w = c->w;
	struct dir_item *d = c->dir;
	const char *name = de->d_name;
	size_t nl = strlen(name), len, dl = d->len == 1 ? 0 : d->len;
	unsigned type = de->d_type;
	bool is_dir;

	if (name[0] == '.' && (!name[1] || (name[1] == '.' && !name[2])))
		return 0;
	if (w->o.progress)
		w->o.progress();
	c->st.entries++;
	if (type == DT_UNKNOWN) {
		struct stat st;
		if (fstatat(c->fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			return 0;
		type = S_ISDIR(st.st_mode) ? DT_DIR : S_ISREG(st.st_mode) ? DT_REG : S_ISLNK(st.st_mode) ? DT_LNK : 1;
	}
	if (type != DT_DIR && type != DT_REG)
		return 0; /* symbolic links are not followed; sockets, devices... are not files */
	is_dir = type == DT_DIR;
	if (dl + 1 + nl >= sizeof(c->path))
		return 0;
	memcpy(c->path, d->path, dl);
	c->path[dl] = '/';
	memcpy(c->path + dl + 1, name, nl + 1);
	len = dl + 1 + nl;
	const char *rel = c->path + w->relbase;
	size_t rel_len = len - w->relbase;
	/* The include and exclude globs come first and, when one matches,
	 * decide alone (ripgrep's -g): an exclude leaves the entry out, an
	 * include takes it whatever ignore files and hidden say. A file that
	 * matches no include is left out; a directory goes on to the rest. */
	bool whitelisted = false;
	if (w->o.n_exclude && any_match(w->o.exclude, w->o.n_exclude, rel, rel_len))
		return 0;
	if (w->o.n_include) {
		whitelisted = any_match(w->o.include, w->o.n_include, rel, rel_len);
		if (!whitelisted && !is_dir)
			return 0;
	}
	if (!whitelisted) {
		enum ignore_match m = w->o.no_ignore ? IGNORE_NONE
						     : ignore_judge(c->level, c->path, len, is_dir, w->o.git_anywhere);
		if (m == IGNORE_IGNORED)
			return 0;
		if (m == IGNORE_NONE && name[0] == '.' && !w->o.hidden)
			return 0;
	}
	if (is_dir) {
		if (w->o.prune && !glob_may_match_under(w->o.prune, rel, rel_len))
			return 0;
		int rc = push_dir(w, c->path, len, c->level);
		if (rc)
			return rc;
		if (!w->o.dirs)
			return 0;
	}
	e->path = c->path;
	e->len = len;
	e->rel = rel;
	e->rel_len = rel_len;
	e->dirfd = c->fd;
	e->name = c->path + dl + 1;
	e->is_dir = is_dir;
	e->explicit_file = false;
	e->local = c->local;
	return 1;
}

int walk_next(struct walk_cursor *c, struct walk_entry *e)
{
	struct walk *w = c->w;
	int rc;

	for (;;) {
		if (walk_stopped(w))
			return -ECANCELED;
		if (c->fd >= 0) {
			while (c->bufpos < c->buflen) {
				const struct dirent64_ *de = (const struct dirent64_ *)(c->buf + c->bufpos);
				c->bufpos += de->d_reclen;
				rc = consider(c, de, e);
				if (rc)
					return rc;
				if (walk_stopped(w))
					return -ECANCELED;
			}
			if (c->more) {
				long n = getdents(c->fd, c->buf, WALK_DIR_BUF);
				if (n > 0) {
					c->buflen = (size_t)n;
					c->bufpos = 0;
					continue;
				}
				if (n < 0)
					c->st.dirs_failed++;
			}
			release_dir(c);
		}
		pthread_mutex_lock(&w->mu);
		if (!w->started)
			start(w);
		if (w->root_err) {
			rc = w->root_err;
			pthread_mutex_unlock(&w->mu);
			return rc;
		}
		if (w->root_file) {
			bool mine = !w->root_given;
			w->root_given = true;
			pthread_mutex_unlock(&w->mu);
			if (!mine)
				return 0;
			const char *slash = strrchr(w->root, '/');
			e->path = w->root;
			e->len = w->rootlen;
			e->rel = slash ? slash + 1 : w->root;
			e->rel_len = strlen(e->rel);
			e->dirfd = AT_FDCWD;
			e->name = w->root;
			e->is_dir = false;
			e->explicit_file = true;
			e->local = false;
			return 1;
		}
		while (!w->stack && w->active && !walk_stopped(w))
			pthread_cond_wait(&w->cv, &w->mu);
		if (walk_stopped(w)) {
			pthread_mutex_unlock(&w->mu);
			return -ECANCELED;
		}
		if (!w->stack) {
			pthread_cond_broadcast(&w->cv);
			pthread_mutex_unlock(&w->mu);
			flush_stats(c);
			return 0;
		}
		c->dir = w->stack;
		w->stack = c->dir->next;
		w->active++;
		c->holds = true;
		pthread_mutex_unlock(&w->mu);
		rc = open_dir(c);
		if (rc < 0) {
			release_dir(c);
			return rc;
		}
		if (rc > 0)
			release_dir(c);
	}
}
