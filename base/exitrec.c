/* SPDX-License-Identifier: Apache-2.0 */
/*
 * exitrec.c - exit statuses kept for the next envd (exitrec.h).
 */
#include "base/exitrec.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>

size_t exitrec_size(uint32_t cap)
{
	return sizeof(struct exitrec_hdr) + (size_t)cap * sizeof(struct exitrec);
}

void exitrec_init(void *map, uint32_t cap)
{
	struct exitrec_hdr *h = map;

	h->cap = cap;
	__atomic_store_n(&h->count, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&h->magic, EXITREC_MAGIC, __ATOMIC_RELEASE);
}

void exitrec_put(void *map, const struct exitrec *r)
{
	struct exitrec_hdr *h = map;
	struct exitrec *recs = (struct exitrec *)(h + 1);
	uint64_t n = __atomic_load_n(&h->count, __ATOMIC_RELAXED);

	if (!h->cap)
		return;
	memcpy(&recs[n % h->cap], r, sizeof(*r));
	__atomic_store_n(&h->count, n + 1, __ATOMIC_RELEASE);
}

int64_t exitrec_clock_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int exitrec_find(const void *map, size_t len, pid_t pid, int64_t after_ns, struct exitrec *out)
{
	const struct exitrec_hdr *h = map;
	const struct exitrec *recs;
	uint64_t n, lo;
	uint32_t cap;
	bool found = false;

	if (!map || len < sizeof(*h) || __atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != EXITREC_MAGIC ||
	    after_ns <= 0)
		return -EINVAL;
	cap = h->cap;
	if (!cap || exitrec_size(cap) > len)
		return -EINVAL;
	recs = (const struct exitrec *)(h + 1);
	n = __atomic_load_n(&h->count, __ATOMIC_ACQUIRE);
	lo = n > cap ? n - cap : 0;
	/* Newest first; the last match is the oldest one after after_ns. */
	for (uint64_t i = n; i > lo; i--) {
		struct exitrec r;
		memcpy(&r, &recs[(i - 1) % cap], sizeof(r));
		if (r.pid != (int32_t)pid || r.time_ns < after_ns)
			continue;
		/* Still one of the last cap exits after the copy: not torn. */
		uint64_t now = __atomic_load_n(&h->count, __ATOMIC_ACQUIRE);
		if (now - (i - 1) > cap)
			return -ENOENT; /* the oldest ones went meanwhile */
		*out = r;
		found = true;
	}
	return found ? 0 : -ENOENT;
}
