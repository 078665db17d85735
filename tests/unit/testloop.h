/* SPDX-License-Identifier: Apache-2.0 */
/*
 * testloop.h - what the unit tests share around envd's loop and their
 * temporary trees: turning the loop until a condition holds (with the
 * hang deadline, never a guess at how fast the machine is), the worker
 * pool gone idle, and removing a test's tree.
 *
 * Header-only (static inline): each test is one program.
 */
#ifndef TESTS_UNIT_TESTLOOP_H
#define TESTS_UNIT_TESTLOOP_H

#include <ftw.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/loop.h"
#include "base/worker.h"

/* How long a wait may take before the test calls it a hang. */
#ifndef HANG_S
#define HANG_S 300.0
#endif

/* Turn the loop until cond(arg) holds; false after HANG_S seconds. */
static inline bool spin_until(bool (*cond)(void *), void *arg)
{
	for (double t = 0; t < HANG_S; t += 0.002) {
		if (cond(arg))
			return true;
		ev_run(envd_loop, EVRUN_ONCE | EVRUN_NOWAIT);
		usleep(2000);
	}
	return cond(arg);
}

/* A condition for spin_until: no job queued or running on the pool. */
static inline bool pool_idle(void *arg)
{
	(void)arg;
	return worker_pending() == 0;
}

static inline int testloop_rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st, (void)flag, (void)f;
	return remove(p);
}

/* rm -rf dir, never through a symbolic link. */
static inline void rm_tree(const char *dir)
{
	nftw(dir, testloop_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

#endif
