/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fguard.c - the replacement locks and the target's state (fguard.h).
 *
 * The locks are a small table of held path hashes under one mutex; a
 * writer that finds its hash held (or the table full) waits on one
 * condition variable with its deadline. Writers are worker threads, a
 * few at a time, so one mutex and a broadcast on release cost nothing
 * next to the rename they guard.
 */
#include "fs/fguard.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

static struct {
	uint64_t h; /* 0: free */
} held[FGUARD_SLOTS];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv;
static pthread_once_t cv_once = PTHREAD_ONCE_INIT;

/* The deadlines are on the monotonic clock: a clock set back while a
 * writer waits must not stretch its wait. */
static void cv_init(void)
{
	pthread_condattr_t a;

	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&cv, &a);
	pthread_condattr_destroy(&a);
}

/* FNV-1a, never 0 (a free slot). */
static uint64_t path_hash(const char *p)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (; *p; p++)
		h = (h ^ (uint8_t)*p) * 0x100000001b3ull;
	return h | 1;
}

/* Under mu: the slot holding h, the first free one (*free_at), or -1. */
static int find(uint64_t h, int *free_at)
{
	*free_at = -1;
	for (int i = 0; i < FGUARD_SLOTS; i++) {
		if (held[i].h == h)
			return i;
		if (!held[i].h && *free_at < 0)
			*free_at = i;
	}
	return -1;
}

int fguard_lock(const char *path, double timeout_s)
{
	uint64_t h = path_hash(path);
	struct timespec dl;
	int free_at, rc = 0;

	pthread_once(&cv_once, cv_init);
	clock_gettime(CLOCK_MONOTONIC, &dl);
	if (timeout_s > 0) {
		double s = (double)dl.tv_sec + (double)dl.tv_nsec / 1e9 + timeout_s;
		dl.tv_sec = (time_t)s;
		dl.tv_nsec = (long)((s - (double)dl.tv_sec) * 1e9);
	}
	pthread_mutex_lock(&mu);
	while (find(h, &free_at) >= 0 || free_at < 0) {
		int w = timeout_s > 0 ? pthread_cond_timedwait(&cv, &mu, &dl) : pthread_cond_wait(&cv, &mu);
		if (w == ETIMEDOUT) {
			rc = -ETIMEDOUT;
			break;
		}
	}
	if (rc == 0)
		held[free_at].h = h;
	pthread_mutex_unlock(&mu);
	return rc;
}

void fguard_unlock(const char *path)
{
	uint64_t h = path_hash(path);
	int free_at, i;

	pthread_once(&cv_once, cv_init);
	pthread_mutex_lock(&mu);
	if ((i = find(h, &free_at)) >= 0)
		held[i].h = 0;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
}

/* The state from a stat's result r (0 or -1 with errno). */
static int state_of(int r, const struct stat *st, bool *exists, char version[FS_VERSION_LEN + 1])
{
	version[0] = '\0';
	if (r < 0) {
		*exists = false;
		return errno == ENOENT ? 0 : -errno;
	}
	*exists = true;
	if (S_ISREG(st->st_mode))
		fs_version(st, version);
	return 0;
}

int fguard_state(const char *path, bool *exists, char version[FS_VERSION_LEN + 1])
{
	struct stat st;

	return state_of(stat(path, &st), &st, exists, version);
}

int fguard_state_at(int dirfd, const char *name, bool *exists, char version[FS_VERSION_LEN + 1])
{
	struct stat st;

	return state_of(fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW), &st, exists, version);
}
