/* SPDX-License-Identifier: Apache-2.0 */
/*
 * uptmp.c - temporary files of atomic uploads, and their removal after a
 * crash (uptmp.h).
 */
#include "base/uptmp.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "base/fsid.h"
#include "base/log.h"
#include "base/worker.h"

char uptmp_registry[256] = "/run/e2b/uploads";

/* Random hex for the name; the clock when the entropy pool is not ready
 * (O_EXCL still makes a collision an error, never a shared file). */
static void rand_hex(char *out, size_t n)
{
	static const char hx[] = "0123456789abcdef";
	unsigned char b[16];

	if (n > 2 * sizeof(b))
		n = 2 * sizeof(b);
	if (getrandom(b, sizeof(b), GRND_NONBLOCK) != (ssize_t)sizeof(b)) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		for (size_t i = 0; i < sizeof(b); i++)
			b[i] = (unsigned char)((ts.tv_nsec >> (i % 4 * 8)) ^ (i * 131) ^ getpid());
	}
	for (size_t i = 0; i < n; i++)
		out[i] = hx[(b[i / 2] >> (i % 2 ? 0 : 4)) & 15];
	out[n] = '\0';
}

/* The temporary's path in tmp: -ENAMETOOLONG when it does not fit. */
static int tmp_name(const char *dir, bool replaces, char *tmp, size_t tmplen)
{
	char sfx[17];

	rand_hex(sfx, 16);
	if (snprintf(tmp, tmplen, "%s/%s%c%s", strcmp(dir, "/") ? dir : "", UPTMP_PREFIX, replaces ? 'r' : 'n', sfx) >=
	    (int)tmplen) {
		tmp[0] = '\0';
		return -ENAMETOOLONG;
	}
	return 0;
}

static int tmp_open(int dirfd, const char *tmp, mode_t mode)
{
	const char *name = strrchr(tmp, '/') + 1;
	int fd = openat(dirfd, dirfd == AT_FDCWD ? tmp : name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);

	return fd < 0 ? -errno : fd;
}

/* envd's pid, asked once: musl's getpid() is a system call each time,
 * and envd never forks a copy of itself that would register files. */
static long self_pid(void)
{
	static long pid;
	long p = __atomic_load_n(&pid, __ATOMIC_RELAXED);

	if (!p) {
		p = (long)getpid();
		__atomic_store_n(&pid, p, __ATOMIC_RELAXED);
	}
	return p;
}

/* --- the slot file --- */

#define SLOT_FILE_PREFIX "slots."
#define SLOT_MAGIC 0x31535545u /* "EUS1" */

/* A record's head; the path follows it, NUL-terminated. */
struct slot_head {
	uint32_t magic;
	uint32_t len; /* of the path, without its NUL */
	uint64_t sum; /* slot_sum() of the path */
};

_Static_assert(sizeof(struct slot_head) == 16, "the record's head is 16 bytes");
_Static_assert(UPTMP_SLOT_PATH_MAX == UPTMP_SLOT_SIZE - sizeof(struct slot_head) - 1, "path and head fill a record");
_Static_assert(4096 % UPTMP_SLOT_SIZE == 0, "a record never straddles a page");

/* This instance's slot file: opened once (slots_fd), as root, and held;
 * its path never changes once slot_fd is set. */
static pthread_mutex_t slot_lock = PTHREAD_MUTEX_INITIALIZER;
static int slot_fd = -1;
static char slot_path[sizeof(uptmp_registry) + 64];
static size_t slot_path_len;
/* Slots in use, a bit each: taken and given back without a lock. */
static uint64_t slot_used[UPTMP_SLOTS / 64];

/* FNV-1a over the length and the path: a record cut short by a kill in
 * the middle of its write (the head written, the path not all) does not
 * match its sum. */
static uint64_t slot_sum(const char *path, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull ^ (uint64_t)len;

	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)path[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

/* The slot file's descriptor, opened (as root: the registry is envd's,
 * and the first registration may come from a user's job) at the first
 * call; -1 when it cannot be made. */
static int slots_fd(void)
{
	int fd = __atomic_load_n(&slot_fd, __ATOMIC_ACQUIRE);
	char hex[17], path[sizeof(slot_path)];

	if (fd >= 0)
		return fd;
	pthread_mutex_lock(&slot_lock);
	if ((fd = slot_fd) < 0) {
		/* A name of its own per instance: after a live upgrade the new
		 * image has the old one's pid, and its sweep must tell the old
		 * image's file (to be swept) from its own. */
		rand_hex(hex, 16);
		if (snprintf(path, sizeof(path), "%s/" SLOT_FILE_PREFIX "%ld.%s", uptmp_registry, self_pid(), hex) <
		    (int)sizeof(path)) {
			uid_t as = fsid_root_begin();
			fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
			if (fd < 0 && errno == ENOENT && (mkdir(uptmp_registry, 0700) == 0 || errno == EEXIST))
				fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
			fsid_root_end(as);
		}
		if (fd >= 0) {
			memcpy(slot_path, path, sizeof(path));
			slot_path_len = strlen(path);
			__atomic_store_n(&slot_fd, fd, __ATOMIC_RELEASE);
		}
	}
	pthread_mutex_unlock(&slot_lock);
	return fd;
}

/* A free slot, now ours; -1 when all are in use. The fetch-or is what
 * hands a slot out: of two threads that saw it free, one finds its bit
 * already set and looks further. */
static int slot_take(void)
{
	for (size_t w = 0; w < UPTMP_SLOTS / 64; w++) {
		uint64_t v = __atomic_load_n(&slot_used[w], __ATOMIC_RELAXED);
		while (~v) {
			uint64_t bit = ~v & (v + 1); /* the lowest free one */
			uint64_t old = __atomic_fetch_or(&slot_used[w], bit, __ATOMIC_ACQUIRE);
			if (!(old & bit))
				return (int)(w * 64 + (size_t)__builtin_ctzll(bit));
			v = old | bit;
		}
	}
	return -1;
}

/* Give slot s back, once its record is cleared (a thread that takes it
 * next writes after our clearing write, never before it). */
static void slot_give(int s)
{
	__atomic_fetch_and(&slot_used[s / 64], ~(1ull << (s % 64)), __ATOMIC_RELEASE);
}

/* Clear slot s's record: its head is enough to make it no record. */
static int slot_clear(int fd, int s)
{
	static const char zero[sizeof(struct slot_head)];

	return pwrite(fd, zero, sizeof(zero), (off_t)s * UPTMP_SLOT_SIZE) == (ssize_t)sizeof(zero) ? 0 : -1;
}

/* Register tmp (absolute, len bytes, at most UPTMP_SLOT_PATH_MAX) in a
 * slot: one write. False when there is no slot file or no free slot, or
 * the entry's name does not fit reg. */
static bool slot_register(const char *tmp, size_t len, char *reg, size_t reglen)
{
	char rec[UPTMP_SLOT_SIZE];
	struct slot_head h = { .magic = SLOT_MAGIC, .len = (uint32_t)len, .sum = slot_sum(tmp, len) };
	size_t n = sizeof(h) + len + 1;
	int fd = slots_fd(), s;

	if (fd < 0 || (s = slot_take()) < 0)
		return false;
	if (snprintf(reg, reglen, "%s#%d", slot_path, s) >= (int)reglen) {
		slot_give(s);
		return false;
	}
	memcpy(rec, &h, sizeof(h));
	memcpy(rec + sizeof(h), tmp, len + 1);
	if (pwrite(fd, rec, n, (off_t)s * UPTMP_SLOT_SIZE) != (ssize_t)n) {
		/* Out of space mid-record: what got written does not match
		 * its sum; clear it all the same before another takes the
		 * slot. A slot that cannot be cleared stays taken. */
		if (slot_clear(fd, s) == 0)
			slot_give(s);
		return false;
	}
	return true;
}

/* The slot an entry names, or -1 when it is not one of our slots. */
static int slot_of(const char *reg)
{
	char *end;
	long s;

	if (__atomic_load_n(&slot_fd, __ATOMIC_ACQUIRE) < 0 || strncmp(reg, slot_path, slot_path_len) != 0 ||
	    reg[slot_path_len] != '#')
		return -1;
	s = strtol(reg + slot_path_len + 1, &end, 10);
	return *end || s < 0 || s >= UPTMP_SLOTS ? -1 : (int)s;
}

/* The path a record holds, in out (UPTMP_SLOT_PATH_MAX + 1 bytes), when it
 * is whole and names a temporary by its path's last component; false
 * for a cleared slot, a torn record or garbage. */
static bool slot_record_path(const unsigned char *rec, char *out)
{
	struct slot_head h;
	const char *p = (const char *)rec + sizeof(h), *base;

	memcpy(&h, rec, sizeof(h));
	if (h.magic != SLOT_MAGIC || h.len == 0 || h.len > UPTMP_SLOT_PATH_MAX || p[h.len] != '\0' ||
	    memchr(p, '\0', h.len) || p[0] != '/' || slot_sum(p, h.len) != h.sum)
		return false;
	base = strrchr(p, '/') + 1;
	if (!uptmp_name_is(base, strlen(base), NULL))
		return false;
	memcpy(out, p, h.len + 1);
	return true;
}

/* --- the symlink entry: when there is no slot --- */

static void link_register(const char *tmp, const char *base, size_t bl, char *reg, size_t reglen)
{
	/* The entry is named by the pid and the name's random part. */
	if (snprintf(reg, reglen, "%s/%ld.%s", uptmp_registry, self_pid(), base + bl - 16) >= (int)reglen) {
		reg[0] = '\0';
		return;
	}
	/* The registry is envd's: a job running as a user (Edit) writes it
	 * as root, or its temporaries would go unregistered. */
	uid_t as = fsid_root_begin();
	if (symlink(tmp, reg) < 0 &&
	    !(errno == ENOENT && (mkdir(uptmp_registry, 0700) == 0 || errno == EEXIST) && symlink(tmp, reg) == 0))
		reg[0] = '\0';
	fsid_root_end(as);
}

void uptmp_register(const char *tmp, char *reg, size_t reglen)
{
	const char *base = strrchr(tmp, '/');
	size_t bl, len;

	reg[0] = '\0';
	base = base ? base + 1 : tmp;
	bl = strlen(base);
	if (!uptmp_registry[0] || !uptmp_name_is(base, bl, NULL))
		return;
	len = (size_t)(base - tmp) + bl;
	if (tmp[0] == '/' && len <= UPTMP_SLOT_PATH_MAX && slot_register(tmp, len, reg, reglen))
		return;
	link_register(tmp, base, bl, reg, reglen);
}

int uptmp_create_registered(int dirfd, const char *dir, bool replaces, mode_t mode, char *tmp, size_t tmplen,
			    char *reg, size_t reglen)
{
	int fd = tmp_name(dir, replaces, tmp, tmplen);

	reg[0] = '\0';
	if (fd < 0)
		return fd;
	/* The entry first: a kill between the two leaves an entry for no
	 * file (the sweep finds nothing to remove), never a file no entry
	 * names. */
	uptmp_register(tmp, reg, reglen);
	if ((fd = tmp_open(dirfd, tmp, mode)) < 0) {
		uptmp_forget(reg);
		reg[0] = '\0';
		tmp[0] = '\0';
	}
	return fd;
}

int uptmp_open(const char *dir, bool replaces, char *tmp, size_t tmplen, char *reg, size_t reglen)
{
	return uptmp_create_registered(AT_FDCWD, dir, replaces, 0666, tmp, tmplen, reg, reglen);
}

void uptmp_forget(const char *reg)
{
	int s;

	if (!reg || !reg[0])
		return;
	if ((s = slot_of(reg)) >= 0) {
		/* A record that could not be cleared keeps its slot taken,
		 * as in slot_register. */
		if (slot_clear(__atomic_load_n(&slot_fd, __ATOMIC_ACQUIRE), s) == 0)
			slot_give(s);
		return;
	}
	uid_t as = fsid_root_begin(); /* as link_register */
	unlink(reg);
	fsid_root_end(as);
}

bool uptmp_name_is(const char *name, size_t len, bool *replaces)
{
	const size_t pl = sizeof(UPTMP_PREFIX) - 1;

	if (len != pl + 17 || memcmp(name, UPTMP_PREFIX, pl) != 0)
		return false;
	if (name[pl] != 'r' && name[pl] != 'n')
		return false;
	for (size_t i = pl + 1; i < len; i++)
		if (!((name[i] >= '0' && name[i] <= '9') || (name[i] >= 'a' && name[i] <= 'f')))
			return false;
	if (replaces)
		*replaces = name[pl] == 'r';
	return true;
}

/* Whether attribute `k` may pass from a replaced file to its replacement
 * (uptmp.h, uptmp_copy_attrs_fd). */
static bool attr_inherited(const char *k)
{
	return strncmp(k, "user.", 5) == 0 ? strncmp(k, "user.e2b.", 9) != 0 : strncmp(k, "system.", 7) == 0;
}

/* The copy, from a descriptor (fd >= 0) or else a name (not followed). */
static int copy_attrs(int from, const char *target, int to)
{
	char stack[1024], *names = stack;
	ssize_t n = from >= 0 ? flistxattr(from, stack, sizeof(stack)) : llistxattr(target, stack, sizeof(stack));
	int rc = 0;

	if (n < 0 && errno == ERANGE) {
		ssize_t want = from >= 0 ? flistxattr(from, NULL, 0) : llistxattr(target, NULL, 0);
		if (want <= 0 || want > 64 * 1024 || !(names = malloc((size_t)want)))
			return 0;
		n = from >= 0 ? flistxattr(from, names, (size_t)want) : llistxattr(target, names, (size_t)want);
	}
	for (ssize_t i = 0; n > 0 && i < n;) {
		const char *k = names + i;
		char vbuf[4096];
		i += (ssize_t)strlen(k) + 1;
		if (!attr_inherited(k))
			continue;
		ssize_t vl = from >= 0 ? fgetxattr(from, k, vbuf, sizeof(vbuf)) : lgetxattr(target, k, vbuf, sizeof(vbuf));
		if (vl < 0)
			continue; /* larger than any we keep, or gone meanwhile */
		if (fsetxattr(to, k, vbuf, (size_t)vl, 0) < 0 && (errno == ENOSPC || errno == EDQUOT)) {
			rc = -errno;
			break;
		}
	}
	if (names != stack)
		free(names);
	return rc;
}

int uptmp_copy_attrs_fd(int from, int to)
{
	return copy_attrs(from, NULL, to);
}

int uptmp_copy_attrs(const char *target, int fd)
{
	return copy_attrs(-1, target, fd);
}

/* --- the sweep --- */

/* A dead envd's slot file, removed once every temporary it names is. */
struct sweep_file {
	char path[PATH_MAX];
	size_t jobs;   /* handed to the pool and not done */
	bool listed;   /* every job is handed over */
	bool keep;     /* a record could not be handed over: the next start tries again */
};

struct sweep_job {
	struct sweep_file *file; /* a slot's record, or NULL for a symlink entry */
	char reg[PATH_MAX];      /* the symlink entry */
	char tmp[PATH_MAX];
};

static void sweep_work(void *arg)
{
	struct sweep_job *j = arg;
	const char *base = strrchr(j->tmp, '/');

	/* Only ever a file that looks like ours: an entry or a record
	 * anyone with access to the registry could have planted. unlink
	 * does not follow a link the name is. */
	base = base ? base + 1 : j->tmp;
	if (uptmp_name_is(base, strlen(base), NULL) && unlink(j->tmp) == 0)
		log_info("uptmp", "removed %s, left by an envd that stopped mid-upload", j->tmp);
	if (!j->file)
		unlink(j->reg);
}

/* The slot file goes once the files it names are gone (a kill before
 * leaves it for the next start). On the loop. */
static void sweep_file_end(struct sweep_file *f)
{
	if (!f->keep)
		unlink(f->path);
	free(f);
}

static void sweep_done(void *arg)
{
	struct sweep_job *j = arg;

	if (j->file && --j->file->jobs == 0 && j->file->listed)
		sweep_file_end(j->file);
	free(j);
}

/*
 * Whether the registering process may still run: any process with that
 * pid but us. A pid reused by another program keeps a leftover until a
 * later start, which is better than removing the file of an upload in
 * progress (an envd under an emulator does not even call itself envd).
 * Our own pid is an earlier image of ours, before a live upgrade.
 */
static bool owner_alive(long pid)
{
	if (pid <= 0 || pid == (long)getpid() || pid > INT32_MAX)
		return false;
	return kill((pid_t)pid, 0) == 0 || errno == EPERM;
}

/* The pid a slot file's name `slots.<pid>.<16 hex>` gives, or -1. */
static long slot_file_pid(const char *name)
{
	const size_t pl = sizeof(SLOT_FILE_PREFIX) - 1;
	char *end;
	long pid;

	if (strncmp(name, SLOT_FILE_PREFIX, pl) != 0 || !(name[pl] >= '0' && name[pl] <= '9'))
		return -1;
	pid = strtol(name + pl, &end, 10);
	if (*end != '.' || strlen(end + 1) != 16)
		return -1;
	for (const char *c = end + 1; *c; c++)
		if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f')))
			return -1;
	return pid;
}

/* Read a slot file whole (at most UPTMP_SLOTS records): a malloc'd
 * buffer and its length in *len, or NULL (*len 0 for a file that is not a
 * regular one, or a link: an entry to drop). */
static unsigned char *slot_file_read(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	unsigned char *buf = NULL;
	struct stat st;
	ssize_t n;

	*len = 0;
	if (fd < 0) {
		if (errno != ELOOP)
			*len = 1; /* kept: it may be readable later */
		return NULL;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return NULL;
	}
	size_t want = st.st_size < (off_t)UPTMP_SLOTS * UPTMP_SLOT_SIZE ? (size_t)st.st_size : UPTMP_SLOTS * UPTMP_SLOT_SIZE;
	if (want && (buf = malloc(want)) && (n = pread(fd, buf, want, 0)) >= 0) {
		*len = (size_t)n;
	} else if (want) {
		free(buf);
		buf = NULL;
		*len = 1;
	}
	close(fd);
	return buf;
}

/* Hand over the removal of what a dead envd's slot file `name` records;
 * returns the number of files handed over. */
static size_t sweep_slot_file(const char *name)
{
	struct sweep_file *f = calloc(1, sizeof(*f));
	unsigned char *buf;
	size_t len, n = 0;

	if (!f)
		return 0;
	snprintf(f->path, sizeof(f->path), "%s/%s", uptmp_registry, name);
	if (!(buf = slot_file_read(f->path, &len)) && len) {
		free(f); /* unreadable now: left for the next start */
		return 0;
	}
	/* The last record is short: a write covers the head and the path. */
	for (size_t off = 0; off < len; off += UPTMP_SLOT_SIZE) {
		unsigned char rec[UPTMP_SLOT_SIZE] = { 0 };
		struct sweep_job *j;

		memcpy(rec, buf + off, len - off < UPTMP_SLOT_SIZE ? len - off : UPTMP_SLOT_SIZE);
		if (!(j = calloc(1, sizeof(*j)))) {
			f->keep = true;
			break;
		}
		if (!slot_record_path(rec, j->tmp)) {
			free(j);
			continue;
		}
		j->file = f;
		struct worker_req req = { .work = sweep_work, .done = sweep_done, .arg = j,
					  .key = worker_path_key(j->tmp) };
		f->jobs++;
		if (worker_run(&req) < 0) {
			f->jobs--;
			f->keep = true;
			free(j);
			continue;
		}
		n++;
	}
	free(buf);
	f->listed = true;
	if (!f->jobs)
		sweep_file_end(f);
	return n;
}

/* Hand over the removal of what a symlink entry `name` names. */
static size_t sweep_link(const char *name)
{
	struct sweep_job *j = calloc(1, sizeof(*j));
	ssize_t l;

	if (!j)
		return 0;
	snprintf(j->reg, sizeof(j->reg), "%s/%s", uptmp_registry, name);
	l = readlink(j->reg, j->tmp, sizeof(j->tmp) - 1);
	if (l <= 0) {
		unlink(j->reg);
		free(j);
		return 0;
	}
	j->tmp[l] = '\0';
	struct worker_req req = { .work = sweep_work, .done = sweep_done, .arg = j, .key = worker_path_key(j->tmp) };
	if (worker_run(&req) < 0) {
		free(j);
		return 0;
	}
	return 1;
}

size_t uptmp_sweep(void)
{
	const char *own = NULL;
	DIR *d;
	struct dirent *de;
	size_t n = 0;

	if (!uptmp_registry[0] || !(d = opendir(uptmp_registry)))
		return 0;
	if (__atomic_load_n(&slot_fd, __ATOMIC_ACQUIRE) >= 0)
		own = strrchr(slot_path, '/') + 1;
	while ((de = readdir(d))) {
		char *end;
		long pid;

		if (de->d_name[0] == '.' || (own && strcmp(de->d_name, own) == 0))
			continue;
		if ((pid = slot_file_pid(de->d_name)) >= 0) {
			if (!owner_alive(pid))
				n += sweep_slot_file(de->d_name);
			continue;
		}
		/* `<pid>.<hex>` symlinks: an older envd's entries, or ours
		 * when no slot was free. */
		pid = strtol(de->d_name, &end, 10);
		if (*end != '.' || owner_alive(pid))
			continue;
		n += sweep_link(de->d_name);
	}
	closedir(d);
	return n;
}

size_t uptmp_registered(void)
{
	DIR *d;
	struct dirent *de;
	size_t n = 0;

	if (!uptmp_registry[0] || !(d = opendir(uptmp_registry)))
		return 0;
	while ((de = readdir(d))) {
		char path[PATH_MAX], *end;
		unsigned char *buf;
		size_t len;

		if (de->d_name[0] == '.')
			continue;
		if (slot_file_pid(de->d_name) < 0) {
			n += strtol(de->d_name, &end, 10) > 0 && *end == '.';
			continue;
		}
		snprintf(path, sizeof(path), "%s/%s", uptmp_registry, de->d_name);
		if (!(buf = slot_file_read(path, &len)))
			continue;
		for (size_t off = 0; off < len; off += UPTMP_SLOT_SIZE) {
			unsigned char rec[UPTMP_SLOT_SIZE] = { 0 };
			char tmp[UPTMP_SLOT_PATH_MAX + 1];

			memcpy(rec, buf + off, len - off < UPTMP_SLOT_SIZE ? len - off : UPTMP_SLOT_SIZE);
			n += slot_record_path(rec, tmp);
		}
		free(buf);
	}
	closedir(d);
	return n;
}
