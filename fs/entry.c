/* SPDX-License-Identifier: Apache-2.0 */
/*
 * entry.c - EntryInfo, metadata xattrs and EnsureDirs.
 *
 * An EntryInfo is one allocation (struct entry_block: the message, its
 * timestamp and its short strings) plus the pieces that vary in number or
 * come from elsewhere (symlink target, metadata, a path set later), so
 * building and freeing one costs an allocation or two, not a dozen.
 * Release it with fs_entry_free() only.
 */
#include "fs/entry.h"
#include "fs/wpath.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "base/errstr.h"
#include "base/sha2.h"
#include "base/users.h"

void fs_perm_string(mode_t mode, char *buf, size_t len)
{
	/* Go's os.FileMode bit letters, most significant bit first. */
	static const char letters[] = "dalTLDpSugct?";
	bool set[13] = { false };
	char tmp[24];
	size_t w = 0;

	switch (mode & S_IFMT) {
	case S_IFDIR: set[0] = true; break;
	case S_IFLNK: set[4] = true; break;
	case S_IFBLK: set[5] = true; break;
	case S_IFCHR: set[5] = true; set[10] = true; break;
	case S_IFIFO: set[6] = true; break;
	case S_IFSOCK: set[7] = true; break;
	default: break;
	}
	if (mode & S_ISUID)
		set[8] = true;
	if (mode & S_ISGID)
		set[9] = true;
	if (mode & S_ISVTX)
		set[11] = true;
	for (int i = 0; i < 13; i++)
		if (set[i])
			tmp[w++] = letters[i];
	if (!w)
		tmp[w++] = '-';
	for (int i = 0; i < 9; i++)
		tmp[w++] = (mode & (1u << (8 - i))) ? "rwxrwxrwx"[i] : '-';
	tmp[w] = '\0';
	if (!len)
		return;
	if (w >= len)
		w = len - 1;
	memcpy(buf, tmp, w);
	buf[w] = '\0';
}

Filesystem__FileType fs_file_type(mode_t mode)
{
	if (S_ISREG(mode))
		return FILESYSTEM__FILE_TYPE__FILE_TYPE_FILE;
	if (S_ISDIR(mode))
		return FILESYSTEM__FILE_TYPE__FILE_TYPE_DIRECTORY;
	return FILESYSTEM__FILE_TYPE__FILE_TYPE_UNSPECIFIED;
}

bool fs_utf8_valid(const char *str, size_t n)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t i = 0;

	while (i < n) {
		unsigned c = s[i];
		size_t k;
		unsigned min;
		if (c < 0x80) {
			i++;
			continue;
		} else if ((c & 0xe0) == 0xc0) {
			k = 1; min = 0x80; c &= 0x1f;
		} else if ((c & 0xf0) == 0xe0) {
			k = 2; min = 0x800; c &= 0x0f;
		} else if ((c & 0xf8) == 0xf0) {
			k = 3; min = 0x10000; c &= 0x07;
		} else {
			return false;
		}
		if (i + k >= n)
			return false;
		for (size_t j = 1; j <= k; j++) {
			if ((s[i + j] & 0xc0) != 0x80)
				return false;
			c = c << 6 | (s[i + j] & 0x3f);
		}
		if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
			return false;
		i += k + 1;
	}
	return true;
}

/*
 * uid/gid -> name with a small per-thread cache: a deep ListDir would
 * otherwise re-read /etc/passwd for every entry. Entries expire when the
 * file changes (mtime/size/inode) so renamed users show up. The file is
 * looked at no more than every NAME_RECHECK_MS: two stat() calls were a
 * fifth of a unary Stat's system calls, so a renamed user may show under
 * the old name for that long.
 */
#define NAME_RECHECK_MS 100
struct name_cache {
	unsigned long id;
	char name[64];
	bool used;
};

struct name_cache_set {
	struct name_cache e[8];
	unsigned next;
	struct timespec mtime;
	off_t size;
	ino_t ino;
	int64_t checked_ms; /* when the file was last compared, 0 never */
	bool file_ok;       /* the file could be stat()ed then */
};

static _Thread_local struct name_cache_set users_cache, groups_cache;

static void cached_name(struct name_cache_set *c, const char *file, unsigned long id, bool user,
			char *buf, size_t len)
{
	struct stat st;
	struct timespec now;
	int64_t now_ms;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
	now_ms = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000 + 1;
	if (!c->checked_ms || now_ms - c->checked_ms >= NAME_RECHECK_MS) {
		c->file_ok = stat(file, &st) == 0;
		if (c->file_ok && (st.st_mtim.tv_sec != c->mtime.tv_sec || st.st_mtim.tv_nsec != c->mtime.tv_nsec ||
				   st.st_size != c->size || st.st_ino != c->ino)) {
			memset(c->e, 0, sizeof(c->e));
			c->next = 0;
			c->mtime = st.st_mtim;
			c->size = st.st_size;
			c->ino = st.st_ino;
		}
		c->checked_ms = now_ms;
	}
	if (c->file_ok) {
		for (int i = 0; i < 8; i++) {
			if (c->e[i].used && c->e[i].id == id) {
				size_t n = strlen(c->e[i].name);
				if (n < len) {
					memcpy(buf, c->e[i].name, n + 1);
					return;
				}
			}
		}
	}
	if (user)
		user_name_of((uid_t)id, buf, len);
	else
		group_name_of((gid_t)id, buf, len);
	if (strlen(buf) < sizeof(c->e[0].name)) {
		struct name_cache *e = &c->e[c->next++ % 8];
		e->id = id;
		e->used = true;
		snprintf(e->name, sizeof(e->name), "%s", buf);
	}
}

struct entry_block {
	Filesystem__EntryInfo e; /* first: the block is freed through it */
	Google__Protobuf__Timestamp mtime;
	char version[FS_VERSION_LEN + 1];
	bool path_heap;          /* e.path was replaced by fs_entry_set_path */
	bool in_caller;          /* in the caller's storage (fs_entry_info_in) */
	char str[];              /* name, path, permissions, owner, group */
};

static char *put_str(char **at, const char *s, size_t n)
{
	char *d = *at;
	memcpy(d, s, n);
	d[n] = '\0';
	*at += n + 1;
	return d;
}

int fs_entry_set_path(Filesystem__EntryInfo *e, const char *path)
{
	struct entry_block *b = (struct entry_block *)e;
	char *d = strdup(path);
	if (!d)
		return -ENOMEM;
	if (b->path_heap)
		free(e->path);
	e->path = d;
	b->path_heap = true;
	return 0;
}

/* A block holding the five strings, every other field unset: in `buf`
 * when it fits there, else on the heap. */
static struct entry_block *entry_new_in(const char *name, const char *path, const char *perm, const char *owner,
					const char *group, void *buf, size_t len)
{
	size_t nl = strlen(name), pl = strlen(path), perml = strlen(perm), ol = strlen(owner), gl = strlen(group);
	size_t need = sizeof(struct entry_block) + nl + pl + perml + ol + gl + 5;
	bool in_caller = buf && need <= len;
	struct entry_block *b = in_caller ? buf : malloc(need);
	char *at;

	if (!b)
		return NULL;
	filesystem__entry_info__init(&b->e);
	b->path_heap = false;
	b->in_caller = in_caller;
	at = b->str;
	b->e.name = put_str(&at, name, nl);
	b->e.path = put_str(&at, path, pl);
	b->e.permissions = put_str(&at, perm, perml);
	b->e.owner = put_str(&at, owner, ol);
	b->e.group = put_str(&at, group, gl);
	return b;
}

static struct entry_block *entry_new(const char *name, const char *path, const char *perm, const char *owner,
				     const char *group)
{
	return entry_new_in(name, path, perm, owner, group, NULL, 0);
}

Filesystem__EntryInfo *fs_entry_dup(const Filesystem__EntryInfo *src)
{
	struct entry_block *b = entry_new(src->name, src->path, src->permissions, src->owner, src->group);
	Filesystem__EntryInfo *e;

	if (!b)
		return NULL;
	e = &b->e;
	e->type = src->type;
	e->size = src->size;
	e->mode = src->mode;
	if (src->version && src->version[0]) {
		snprintf(b->version, sizeof(b->version), "%s", src->version);
		e->version = b->version;
	}
	if (src->modified_time) {
		b->mtime = *src->modified_time;
		e->modified_time = &b->mtime;
	}
	if (src->optional_symlink_target_case == FILESYSTEM__ENTRY_INFO__OPTIONAL_SYMLINK_TARGET_SYMLINK_TARGET) {
		e->optional_symlink_target_case = src->optional_symlink_target_case;
		if (!(e->symlink_target = strdup(src->symlink_target ? src->symlink_target : "")))
			goto fail;
	}
	if (src->n_metadata) {
		if (!(e->metadata = calloc(src->n_metadata, sizeof(*e->metadata))))
			goto fail;
		for (size_t i = 0; i < src->n_metadata; i++) {
			Filesystem__EntryInfo__MetadataEntry *kv = malloc(sizeof(*kv));
			if (!kv)
				goto fail;
			filesystem__entry_info__metadata_entry__init(kv);
			e->metadata[e->n_metadata++] = kv;
			kv->key = strdup(src->metadata[i]->key);
			kv->value = strdup(src->metadata[i]->value);
			if (!kv->key || !kv->value)
				goto fail;
		}
	}
	return e;
fail:
	fs_entry_free(e);
	return NULL;
}

void fs_entry_free(Filesystem__EntryInfo *e)
{
	struct entry_block *b = (struct entry_block *)e;

	if (!e)
		return;
	if (b->path_heap)
		free(e->path);
	if (e->optional_symlink_target_case == FILESYSTEM__ENTRY_INFO__OPTIONAL_SYMLINK_TARGET_SYMLINK_TARGET)
		free(e->symlink_target);
	for (size_t i = 0; i < e->n_metadata; i++) {
		free(e->metadata[i]->key);
		free(e->metadata[i]->value);
		free(e->metadata[i]);
	}
	free(e->metadata);
	if (!b->in_caller)
		free(b);
}

static int entry_add_metadata(Filesystem__EntryInfo *e, const char *path)
{
	struct fs_meta m;

	fs_meta_read(path, &m);
	if (!m.n)
		return 0;
	e->metadata = calloc(m.n, sizeof(*e->metadata));
	if (!e->metadata)
		goto fail;
	for (size_t i = 0; i < m.n; i++) {
		Filesystem__EntryInfo__MetadataEntry *kv = malloc(sizeof(*kv));
		if (!kv)
			goto fail;
		filesystem__entry_info__metadata_entry__init(kv);
		kv->key = m.kv[i].key;
		kv->value = m.kv[i].value;
		m.kv[i].key = m.kv[i].value = NULL;
		e->metadata[e->n_metadata++] = kv;
	}
	fs_meta_clear(&m);
	return 0;
fail:
	fs_meta_clear(&m);
	return -ENOMEM;
}

int fs_entry_info(const char *path, Filesystem__EntryInfo **out, char *err, size_t errlen)
{
	return fs_entry_info_in(path, NULL, 0, out, err, errlen);
}

int fs_entry_info_in(const char *path, void *buf, size_t len, Filesystem__EntryInfo **out, char *err,
		     size_t errlen)
{
	Filesystem__EntryInfo *e = NULL;
	struct entry_block *b;
	struct stat st, tst;
	char name[PATH_MAX], perm[32], owner[256], group[256];
	int rc;

	*out = NULL;
	if (lstat(path, &st) < 0) {
		rc = -errno;
		if (rc == -ENOENT)
			snprintf(err, errlen, "file not found: lstat %s: %s", path, go_strerror(-rc));
		else
			snprintf(err, errlen, "error getting file info: lstat %s: %s", path, go_strerror(-rc));
		return rc;
	}
	path_base(path, name, sizeof(name));
	fs_perm_string(st.st_mode, perm, sizeof(perm));
	cached_name(&users_cache, users_passwd_path, st.st_uid, true, owner, sizeof(owner));
	cached_name(&groups_cache, users_group_path, st.st_gid, false, group, sizeof(group));
	b = entry_new_in(name, path, perm, owner, group, buf, len);
	if (!b)
		goto nomem;
	e = &b->e;
	e->size = st.st_size;
	if (S_ISLNK(st.st_mode)) {
		char *real = realpath(path, NULL);
		e->optional_symlink_target_case = FILESYSTEM__ENTRY_INFO__OPTIONAL_SYMLINK_TARGET_SYMLINK_TARGET;
		e->symlink_target = real ? real : strdup(path);
		if (!e->symlink_target)
			goto nomem;
		if (stat(e->symlink_target, &tst) == 0) {
			e->type = fs_file_type(tst.st_mode);
			e->mode = tst.st_mode & 0777;
		}
	} else {
		e->type = fs_file_type(st.st_mode);
		e->mode = st.st_mode & 0777;
		if (S_ISREG(st.st_mode)) {
			/* A file changed within the clock's current tick is
			 * looked at again once the tick is over (fs_version). */
			if (fs_version_settle(&st, -1, path) && lstat(path, &tst) == 0 && S_ISREG(tst.st_mode)) {
				st = tst;
				e->size = st.st_size;
			}
			fs_version(&st, b->version);
			e->version = b->version;
		}
	}
	if (st.st_mtim.tv_sec || st.st_mtim.tv_nsec) {
		e->modified_time = &b->mtime;
		google__protobuf__timestamp__init(e->modified_time);
		e->modified_time->seconds = st.st_mtim.tv_sec;
		e->modified_time->nanos = (int32_t)st.st_mtim.tv_nsec;
	}
	if (entry_add_metadata(e, path))
		goto nomem;
	*out = e;
	return 0;
nomem:
	fs_entry_free(e);
	snprintf(err, errlen, "error getting file info: %s", go_strerror(ENOMEM));
	return -ENOMEM;
}

/* --- versions --- */

/*
 * File timestamps come from the kernel's coarse clock (one tick: 1 to
 * 10 ms), so two writes within one tick that keep the size leave stat()
 * unchanged. A version handed out while the clock is still in the tick
 * of the file's last change could thus stay the same across a later
 * write in that tick. Once the coarse clock has moved past the ctime,
 * every later change gets a later ctime: waiting out the tick (only for
 * a file changed that recently) makes the version strong.
 *
 * Two cases need no wait, which is what keeps a Stat right after a write
 * as cheap as any other:
 *   - mtime is later than ctime. A write sets both to one value, the
 *     current coarse time, so any later write changes mtime (files envd
 *     writes itself are stamped so: fs_version_stamp). Only later: a
 *     program may set an mtime in the past back after writing in place
 *     (touch -r), but hardly one ahead of the change it made;
 *   - the filesystem has multigrain timestamps (Linux 6.13 and later:
 *     ext4, xfs, btrfs, tmpfs). Once stat() has looked at a file, the
 *     kernel gives its next change a fine-grained ctime, later than the
 *     one seen: exactly the guarantee the wait buys.
 */
#define SETTLE_MAX_NS (20 * 1000000L)

#define MAGIC_EXT4 0xEF53        /* ext2, ext3 and ext4 share it */
#define MAGIC_XFS 0x58465342
#define MAGIC_BTRFS 0x9123683E
#define MAGIC_TMPFS 0x01021994

static int64_t ts_ns(const struct timespec *t)
{
	return (int64_t)t->tv_sec * 1000000000 + t->tv_nsec;
}

/* Whether the running kernel is 6.13 or later; asked once. */
static bool kernel_has_mgtime(void)
{
	static int known = -1; /* -1: not asked yet; a race asks twice, harmlessly */
	int k = __atomic_load_n(&known, __ATOMIC_RELAXED);

	if (k < 0) {
		struct utsname u;
		unsigned maj = 0, min = 0;
		k = uname(&u) == 0 && sscanf(u.release, "%u.%u", &maj, &min) == 2 && (maj > 6 || (maj == 6 && min >= 13));
		__atomic_store_n(&known, k, __ATOMIC_RELAXED);
	}
	return k;
}

/*
 * The ext4 magic is also ext2's and ext3's, which the ext4 driver serves
 * under their own names without multigrain timestamps: the mount table
 * tells them apart. Remembered per device (a device's filesystem changes
 * only with a new mount, and then rarely into another of the three).
 */
#define MG_MEMO 8
static struct {
	dev_t dev;
	bool used, mg;
} mg_memo[MG_MEMO];
static unsigned mg_memo_next;
static pthread_mutex_t mg_mu = PTHREAD_MUTEX_INITIALIZER;

static bool ext4_named(dev_t dev)
{
	char line[1024], want[32];
	bool mg = false, found = false;
	FILE *f;

	pthread_mutex_lock(&mg_mu);
	for (unsigned i = 0; i < MG_MEMO; i++) {
		if (mg_memo[i].used && mg_memo[i].dev == dev) {
			mg = mg_memo[i].mg;
			pthread_mutex_unlock(&mg_mu);
			return mg;
		}
	}
	pthread_mutex_unlock(&mg_mu);
	snprintf(want, sizeof(want), " %u:%u ", major(dev), minor(dev));
	f = fopen("/proc/self/mountinfo", "re");
	while (f && !found && fgets(line, sizeof(line), f)) {
		char *sep = strstr(line, " - ");
		if (!sep || !strstr(line, want) || strstr(line, want) > sep)
			continue;
		found = true;
		mg = strncmp(sep + 3, "ext4 ", 5) == 0;
	}
	if (f)
		fclose(f);
	if (!found)
		return false;
	pthread_mutex_lock(&mg_mu);
	unsigned i = mg_memo_next++ % MG_MEMO;
	mg_memo[i].dev = dev;
	mg_memo[i].used = true;
	mg_memo[i].mg = mg;
	pthread_mutex_unlock(&mg_mu);
	return mg;
}

/* Whether the file (fd, or else path) is on a filesystem with multigrain
 * timestamps. */
static bool file_has_mgtime(const struct stat *st, int fd, const char *path)
{
	struct statfs sf;

	if (!kernel_has_mgtime())
		return false;
	if ((fd >= 0 ? fstatfs(fd, &sf) : path ? statfs(path, &sf) : -1) < 0)
		return false;
	switch ((unsigned long)sf.f_type) {
	case MAGIC_XFS:
	case MAGIC_BTRFS:
	case MAGIC_TMPFS:
		return true;
	case MAGIC_EXT4:
		return ext4_named(st->st_dev);
	default:
		return false;
	}
}

bool fs_version_mgtime(const struct stat *st, int fd)
{
	return file_has_mgtime(st, fd, NULL);
}

bool fs_version_settle(const struct stat *st, int fd, const char *path)
{
	struct timespec now;
	int64_t c = ts_ns(&st->st_ctim), waited = 0;
	bool slept = false;

	clock_gettime(CLOCK_REALTIME_COARSE, &now);
	if (ts_ns(&now) > c || ts_ns(&st->st_mtim) > c || file_has_mgtime(st, fd, path))
		return false;
	for (;;) {
		clock_gettime(CLOCK_REALTIME_COARSE, &now);
		if (ts_ns(&now) > c || waited >= SETTLE_MAX_NS)
			return slept;
		/* a tick is at least a millisecond: sleep in steps of one */
		struct timespec d = { 0, 1000000 };
		nanosleep(&d, NULL);
		waited += 1000000;
		slept = true;
	}
}

int fs_version_stamp(int fd)
{
	struct timespec t[2] = { { 0, UTIME_OMIT }, { 0, 0 } };
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (file_has_mgtime(&st, fd, NULL))
		return 0;
	/* The precise time, later than the coarse one the futimens itself
	 * sets as ctime; should the tick turn in between, once more with a
	 * fresh time a nanosecond on. */
	for (int i = 0; i < 2; i++) {
		clock_gettime(CLOCK_REALTIME, &t[1]);
		t[1].tv_nsec += i;
		if (t[1].tv_nsec >= 1000000000) {
			t[1].tv_sec++;
			t[1].tv_nsec -= 1000000000;
		}
		if (futimens(fd, t) < 0)
			return -errno;
		if (fstat(fd, &st) < 0)
			return -errno;
		if (ts_ns(&st.st_mtim) > ts_ns(&st.st_ctim))
			return 0;
	}
	return 0;
}

void fs_version(const struct stat *st, char out[FS_VERSION_LEN + 1])
{
	uint64_t v[6] = { (uint64_t)st->st_dev, (uint64_t)st->st_ino, (uint64_t)st->st_size,
			  (uint64_t)ts_ns(&st->st_mtim), (uint64_t)ts_ns(&st->st_ctim), (uint64_t)st->st_mode };
	uint8_t d[SHA256_DIGEST_LEN];

	sha256(v, sizeof(v), d);
	sha2_hex(d, FS_VERSION_LEN / 2, out);
	out[FS_VERSION_LEN] = '\0';
}

/* --- metadata --- */

void fs_meta_clear(struct fs_meta *m)
{
	for (size_t i = 0; i < m->n; i++) {
		free(m->kv[i].key);
		free(m->kv[i].value);
	}
	free(m->kv);
	m->kv = NULL;
	m->n = 0;
}

int fs_meta_add(struct fs_meta *m, const char *key, size_t klen, const char *value, size_t vlen)
{
	struct fs_meta_kv *kv;

	for (size_t i = 0; i < m->n; i++)
		if (strlen(m->kv[i].key) == klen && memcmp(m->kv[i].key, key, klen) == 0)
			return 0;
	kv = realloc(m->kv, (m->n + 1) * sizeof(*kv));
	if (!kv)
		return -ENOMEM;
	m->kv = kv;
	kv[m->n].key = strndup(key, klen);
	kv[m->n].value = strndup(value, vlen);
	if (!kv[m->n].key || !kv[m->n].value) {
		free(kv[m->n].key);
		free(kv[m->n].value);
		return -ENOMEM;
	}
	m->n++;
	return 0;
}

/* xattr name lists are at most 64 KiB (XATTR_LIST_MAX). */
#define META_LIST_MAX 65536

/*
 * user.e2b.* of fd (>= 0) or else path (followed). The list is read into
 * a buffer on the stack first: a file with a short list, or none, costs
 * one call; a longer one is asked its size and read again.
 */
static ssize_t meta_read(int fd, const char *path, struct fs_meta *m)
{
	char stack[1024], *names = stack, *val = NULL;
	ssize_t n;
	const size_t plen = strlen(FS_META_PREFIX);

	m->kv = NULL;
	m->n = 0;
	n = fd >= 0 ? flistxattr(fd, stack, sizeof(stack)) : listxattr(path, stack, sizeof(stack));
	if (n < 0 && errno == ERANGE) {
		n = fd >= 0 ? flistxattr(fd, NULL, 0) : listxattr(path, NULL, 0);
		if (n <= 0)
			return n < 0 ? -1 : 0;
		if (n > META_LIST_MAX)
			n = META_LIST_MAX;
		if (!(names = malloc((size_t)n)))
			return -1;
		n = fd >= 0 ? flistxattr(fd, names, (size_t)n) : listxattr(path, names, (size_t)n);
	}
	for (char *p = names; n > 0 && p < names + n; p += strlen(p) + 1) {
		if (strncmp(p, FS_META_PREFIX, plen) != 0)
			continue;
		/* the value buffer only once a key of ours is there: most files have none */
		if (!val && !(val = malloc(65536)))
			break;
		const char *key = p + plen;
		ssize_t vl = fd >= 0 ? fgetxattr(fd, p, val, 65536) : getxattr(path, p, val, 65536);
		if (vl < 0)
			continue; /* ENOATTR race or oversized: skip it */
		if (!fs_utf8_valid(key, strlen(key)) || !fs_utf8_valid(val, (size_t)vl))
			continue;
		if (fs_meta_add(m, key, strlen(key), val, (size_t)vl) < 0)
			break;
	}
	if (names != stack)
		free(names);
	free(val);
	return n < 0 ? -1 : n;
}

void fs_meta_read(const char *path, struct fs_meta *m)
{
	meta_read(-1, path, m);
}

ssize_t fs_meta_read_fd(int fd, struct fs_meta *m)
{
	return meta_read(fd, NULL, m);
}

int fs_meta_validate(const struct fs_meta *m, char *err, size_t errlen)
{
	size_t total = 0;

	for (size_t i = 0; i < m->n; i++) {
		const unsigned char *k = (const unsigned char *)m->kv[i].key;
		const unsigned char *v = (const unsigned char *)m->kv[i].value;
		size_t kl = strlen((const char *)k), vl = strlen((const char *)v);

		if (!kl) {
			snprintf(err, errlen, "metadata key must not be empty");
			return -EINVAL;
		}
		for (size_t j = 0; j < kl; j++) {
			if (k[j] < 0x20 || k[j] > 0x7e) {
				snprintf(err, errlen,
					 "metadata key contains non-printable-ASCII byte 0x%02x at offset %zu", k[j], j);
				return -EINVAL;
			}
		}
		if (kl > FS_META_KEY_MAX) {
			snprintf(err, errlen, "metadata key \"%s\" exceeds %d bytes", (const char *)k,
				 FS_META_KEY_MAX);
			return -EINVAL;
		}
		for (size_t j = 0; j < vl; j++) {
			if (v[j] < 0x20 || v[j] > 0x7e) {
				snprintf(err, errlen,
					 "metadata value for key \"%s\" contains non-printable-ASCII byte 0x%02x at offset %zu",
					 (const char *)k, v[j], j);
				return -EINVAL;
			}
		}
		total += 9 + kl + vl;
	}
	if (total > FS_META_TOTAL_MAX) {
		snprintf(err, errlen, "total metadata size %zu exceeds %d bytes", total, FS_META_TOTAL_MAX);
		return -EINVAL;
	}
	return 0;
}

static bool xattr_unsupported(int e)
{
	return e == ENOTSUP || e == EOPNOTSUPP;
}

int fs_meta_replace_fd(int fd, const struct fs_meta *m)
{
	char *names = NULL, name[FS_META_KEY_MAX + 16];
	ssize_t n;
	const size_t plen = strlen(FS_META_PREFIX);
	int rc = 0;

	n = flistxattr(fd, NULL, 0);
	if (n < 0) {
		if (xattr_unsupported(errno))
			return 0;
		return -errno;
	}
	if (n > 0) {
		names = malloc((size_t)n);
		if (!names)
			return -ENOMEM;
		n = flistxattr(fd, names, (size_t)n);
		if (n < 0) {
			rc = xattr_unsupported(errno) ? 0 : -errno;
			goto out;
		}
		for (char *p = names; p < names + n; p += strlen(p) + 1) {
			bool keep = false;
			if (strncmp(p, FS_META_PREFIX, plen) != 0)
				continue;
			for (size_t i = 0; i < m->n && !keep; i++)
				keep = strcmp(p + plen, m->kv[i].key) == 0;
			if (!keep && fremovexattr(fd, p) < 0 && errno != ENODATA) {
				rc = xattr_unsupported(errno) ? 0 : -errno;
				goto out;
			}
		}
	}
	for (size_t i = 0; i < m->n; i++) {
		snprintf(name, sizeof(name), "%s%s", FS_META_PREFIX, m->kv[i].key);
		if (fsetxattr(fd, name, m->kv[i].value, strlen(m->kv[i].value), 0) < 0) {
			rc = xattr_unsupported(errno) ? 0 : -errno;
			goto out;
		}
	}
out:
	free(names);
	return rc;
}

/* --- directories --- */

int fs_join(char *out, size_t outlen, const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	size_t need = la + (lb ? 1 + lb : 0);

	if (need >= outlen) {
		if (outlen)
			out[0] = '\0';
		return -ENAMETOOLONG;
	}
	memmove(out, a, la);
	if (lb) {
		out[la] = '/';
		memcpy(out + la + 1, b, lb);
	}
	out[need] = '\0';
	return 0;
}

void fs_path_dir(const char *path, char *out, size_t outlen)
{
	const char *slash = strrchr(path, '/');
	char *tmp;

	if (!slash) {
		snprintf(out, outlen, ".");
		return;
	}
	tmp = strndup(path, (size_t)(slash - path) + 1);
	if (!tmp) {
		snprintf(out, outlen, ".");
		return;
	}
	path_clean(tmp, out, outlen);
	free(tmp);
}

int fs_ensure_dirs(const char *dir, uid_t uid, gid_t gid, char *err, size_t errlen)
{
	struct wpath_mk mk = { .uid = uid, .gid = gid };
	struct wpath p;
	struct stat st;
	int rc;

	/* The usual case, one look: every prefix of a directory that exists
	   is one (a write of many files into one tree paid a walk per file).
	   Nothing is made or given away then, so following links is
	   harmless; the walk below holds root's rights back when it creates. */
	if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode))
		return 0;
	wpath_init(&p);
	rc = wpath_dir(&p, dir, &mk, err, errlen);
	wpath_close(&p);
	return rc;
}
