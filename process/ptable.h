/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ptable.h - the process table and the retention cache (docs/protocol.md,
 * "Output, subscribers and the end", "Connect").
 *
 * One intrusive list, in start order, of every process envd knows about.
 * An entry is either `listed` (running, or exited with output not yet at
 * EOF: what List shows and what SendInput/SendSignal/Update act on) or
 * `retained` (finished; kept for a while so a late Connect still gets the
 * end event). The entries are embedded in their owners; the table owns
 * nothing.
 *
 * Errors: none; lookups return NULL.
 */
#ifndef PROCESS_PTABLE_H
#define PROCESS_PTABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ptable_entry {
	struct ptable_entry *prev, *next;
	struct ptable_entry *pid_next, *pid_prev; /* same pid bucket, newest first */
	uint32_t pid;
	const char *tag;  /* NULL when untagged; owned by the embedding object */
	bool listed;
	bool retained;
};

#define PTABLE_PID_BUCKETS 256

struct ptable {
	struct ptable_entry *head, *tail;
	size_t n;
	/* By pid, so that pid lookups and the eviction done at every start do
	 * not walk thousands of retained entries. */
	struct ptable_entry *by_pid[PTABLE_PID_BUCKETS];
};

/* Append (newest last). The entry's flags are left as set by the caller. */
void ptable_add(struct ptable *t, struct ptable_entry *e);
void ptable_remove(struct ptable *t, struct ptable_entry *e);

/*
 * Lookups return a listed entry that matches (by tag: the oldest; by pid:
 * the newest, as a pid can be reused while an exited leader's output is
 * still open); when `retained_too` and no listed entry matches, the oldest
 * retained one. NULL when nothing matches.
 */
struct ptable_entry *ptable_find_pid(const struct ptable *t, uint32_t pid, bool retained_too);
struct ptable_entry *ptable_find_tag(const struct ptable *t, const char *tag, bool retained_too);

/*
 * Entries whose pid hashes like `pid` (newest first): walk with
 * e->pid_next and compare e->pid. The pid must not change while the entry
 * is in the table.
 */
struct ptable_entry *ptable_pid_chain(const struct ptable *t, uint32_t pid);

/* Number of listed entries. */
size_t ptable_count_listed(const struct ptable *t);

#endif
