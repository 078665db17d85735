/* SPDX-License-Identifier: Apache-2.0 */
/*
 * exitrec.h - exit statuses kept for the next envd (docs/crash.md).
 *
 * A command that ends while envd is down is reaped by the subreaper that
 * adopted it (our init), not by envd; the next envd, which is not its
 * parent, cannot wait for it. init therefore writes each orphan's wait
 * status and usage into a shared memory ring (a memfd it keeps in the fd
 * store as "init.exits") and envd, which gets the memfd on start, looks
 * the pid up once the process's pidfd says it ended.
 *
 * The layout is fixed and versioned by the magic: a header, then `cap`
 * records; the record of the n-th exit (from 0) is at n % cap. One writer
 * (init); readers may run at the same time: a record is complete before
 * `count` moves past it, and a reader checks the count again after the
 * copy (a record overwritten meanwhile is dropped). Plain libc only: init
 * links this file.
 */
#ifndef ENVD_EXITREC_H
#define ENVD_EXITREC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define EXITREC_MAGIC 0x31544958u /* "XIT1" */
#define EXITREC_NAME "init.exits"

struct exitrec {
	int32_t pid;
	int32_t status;      /* as waitpid() gives it */
	int64_t utime_us;    /* user CPU time */
	int64_t stime_us;    /* system CPU time */
	int64_t maxrss_kb;
	int64_t time_ns;     /* CLOCK_REALTIME of the reaping */
};

struct exitrec_hdr {
	uint32_t magic;
	uint32_t cap;
	uint64_t count;      /* exits written; atomic (release on write) */
};

/* Bytes of a ring of `cap` records. */
size_t exitrec_size(uint32_t cap);

/* Lay out an empty ring in `map` (exitrec_size(cap) zeroed bytes). */
void exitrec_init(void *map, uint32_t cap);

/* Append a record (the single writer). */
void exitrec_put(void *map, const struct exitrec *r);

/*
 * The newest record of `pid` among the last `cap` exits. Returns 0, or
 * -ENOENT when there is none, -EINVAL when map is no ring of `len` bytes.
 */
int exitrec_find(const void *map, size_t len, pid_t pid, struct exitrec *out);

#endif
