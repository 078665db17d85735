/* SPDX-License-Identifier: Apache-2.0 */
/*
 * exitrec.h - exit statuses kept for the next envd (docs/crash.md).
 *
 * A command that ends while envd is down is reaped by the subreaper that
 * adopted it (our init), not by envd; the next envd, which is not its
 * parent, cannot wait for it. init therefore writes the wait status and
 * usage of such a process into a shared memory ring (a memfd it keeps in
 * the fd store as "init.exits") and envd, which gets the memfd on start,
 * looks the process up once its pidfd says it ended.
 *
 * Which exits, and whose: init records only processes whose pidfd envd
 * stored (sdnotify_store_watches), so other orphans (anyone's double
 * forks) can neither fill the ring nor plant a status; and it writes the
 * record before it reaps the process, stamped with exitrec_clock_ns().
 * A pid is not reused before its process is reaped, so a record of that
 * pid stamped after envd started the process (exitrec_find's `after_ns`)
 * is that process's, never an earlier one's of the same number.
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

/* "XIT2": records of watched processes, written before the reap, stamped
 * with CLOCK_MONOTONIC ("XIT1", any orphan after the reap, is not read). */
#define EXITREC_MAGIC 0x32544958u
#define EXITREC_NAME "init.exits"

struct exitrec {
	int32_t pid;
	int32_t status;      /* as waitpid() gives it */
	int64_t utime_us;    /* user CPU time */
	int64_t stime_us;    /* system CPU time */
	int64_t maxrss_kb;
	int64_t time_ns;     /* exitrec_clock_ns() when recorded, before the reap */
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

/* The clock of time_ns (CLOCK_MONOTONIC: machine-wide, never set back). */
int64_t exitrec_clock_ns(void);

/*
 * The record of `pid` among the last `cap` exits that was stamped at or
 * after `after_ns` (the oldest such: the process that had the pid at
 * after_ns; later ones are of processes that got the number after it).
 * `after_ns` is exitrec_clock_ns() taken after the process was started.
 * Returns 0, or -ENOENT when there is none, -EINVAL when map is no ring
 * of `len` bytes (or of another version) or after_ns is not positive.
 */
int exitrec_find(const void *map, size_t len, pid_t pid, int64_t after_ns, struct exitrec *out);

#endif
