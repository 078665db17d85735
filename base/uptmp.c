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

void uptmp_register(const char *tmp, char *reg, size_t reglen)
{
	const char *base = strrchr(tmp, '/');
	size_t bl;

	reg[0] = '\0';
	base = base ? base + 1 : tmp;
	bl = strlen(base);
	if (!uptmp_registry[0] || !uptmp_name_is(base, bl, NULL))
		return;
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
	if (reg && reg[0]) {
		uid_t as = fsid_root_begin(); /* as uptmp_register */
		unlink(reg);
		fsid_root_end(as);
	}
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

struct sweep_job {
	char reg[PATH_MAX];
	char tmp[PATH_MAX];
};

static void sweep_work(void *arg)
{
	struct sweep_job *j = arg;
	const char *base = strrchr(j->tmp, '/');

	/* Only ever a file that looks like ours: the entry is a symlink
	 * anyone with access to the registry could have planted. */
	base = base ? base + 1 : j->tmp;
	if (uptmp_name_is(base, strlen(base), NULL) && unlink(j->tmp) == 0)
		log_info("uptmp", "removed %s, left by an envd that stopped mid-upload", j->tmp);
	unlink(j->reg);
}

static void sweep_done(void *arg)
{
	free(arg);
}

/*
 * Whether the registering process may still run: any process with that
 * pid but us. A pid reused by another program keeps a leftover until a
 * later start, which is better than removing the file of an upload in
 * progress (an envd under an emulator does not even call itself envd).
 */
static bool owner_alive(long pid)
{
	if (pid <= 0 || pid == (long)getpid() || pid > INT32_MAX)
		return false;
	return kill((pid_t)pid, 0) == 0 || errno == EPERM;
}

size_t uptmp_sweep(void)
{
	DIR *d;
	struct dirent *de;
	size_t n = 0;

	if (!uptmp_registry[0] || !(d = opendir(uptmp_registry)))
		return 0;
	while ((de = readdir(d))) {
		char *end;
		long pid;
		struct sweep_job *j;
		ssize_t l;

		if (de->d_name[0] == '.')
			continue;
		pid = strtol(de->d_name, &end, 10);
		if (*end != '.' || owner_alive(pid))
			continue;
		if (!(j = calloc(1, sizeof(*j))))
			break;
		snprintf(j->reg, sizeof(j->reg), "%s/%s", uptmp_registry, de->d_name);
		l = readlink(j->reg, j->tmp, sizeof(j->tmp) - 1);
		if (l <= 0) {
			unlink(j->reg);
			free(j);
			continue;
		}
		j->tmp[l] = '\0';
		struct worker_req req = { .work = sweep_work, .done = sweep_done, .arg = j,
					  .key = worker_path_key(j->tmp) };
		if (worker_run(&req) < 0) {
			free(j);
			continue;
		}
		n++;
	}
	closedir(d);
	return n;
}
