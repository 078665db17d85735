/* SPDX-License-Identifier: Apache-2.0 */
/*
 * endreason.h - why a command ended, when the kernel or envd ended it
 * (EndEvent.reason; docs/protocol.md, "Why a command ended"): the kernel's
 * OOM killer (memory.events of the command's cgroup counts an oom_kill),
 * envd's kill at the Start's deadline, CloseSession, or a client's
 * SendSignal. A wait status alone says "signal: killed" for all four.
 *
 * Pure: decided from what the table knows at the end (the signal the
 * leader died of, the kill envd sent last, the cgroup's OOM count and
 * memory figures) and put in words.
 *
 * Errors: none.
 */
#ifndef PROCESS_ENDREASON_H
#define PROCESS_ENDREASON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The kinds, numbered as process.proto's EndReason.Kind. */
enum endreason_kind {
	ENDREASON_NONE = 0,
	ENDREASON_OOM = 1,
	ENDREASON_TIMEOUT = 2,
	ENDREASON_SIGNAL = 3,
	ENDREASON_SESSION = 4,
};

/* Who sent the last signal envd delivered to a command (handover.proto's
 * KillNote.by). */
enum endreason_by {
	ENDREASON_BY_NONE = 0,
	ENDREASON_BY_CLIENT = 1,  /* SendSignal */
	ENDREASON_BY_TIMEOUT = 2, /* the Start's deadline */
	ENDREASON_BY_SESSION = 3, /* CloseSession */
};

#define ENDREASON_SESSION_MAX 65 /* a session's name (64) and the NUL */

/* The last kill envd sent a command. */
struct endreason_kill {
	enum endreason_by by;
	int sig;
	uint64_t timeout_ms;                  /* BY_TIMEOUT: the deadline */
	char session[ENDREASON_SESSION_MAX];  /* BY_SESSION: its name */
};

struct endreason {
	enum endreason_kind kind;
	int sig;                  /* the signal the command died of (0: it exited) */
	uint64_t memory_max;      /* OOM: its memory.max, 0 for none of its own */
	uint64_t memory_peak;     /* OOM: memory.peak, 0 when unknown */
	uint64_t timeout_ms;
	char session[ENDREASON_SESSION_MAX];
};

/*
 * Why it ended. `termsig` is the signal the leader died of (0 when it
 * exited); `k` the last kill envd sent (NULL: none); `oom_killed` whether
 * its cgroup counts an OOM kill. envd's own kill is the reason when the
 * leader died of the signal envd sent; otherwise an OOM kill in its cgroup
 * is (the leader, or a process of it that the leader reports as it will);
 * otherwise there is none (kind ENDREASON_NONE).
 */
void endreason_decide(const struct endreason_kill *k, int termsig, bool oom_killed,
		      uint64_t memory_max, uint64_t memory_peak, struct endreason *out);

/*
 * The reason in words into buf, e.g. "out of memory: killed by the kernel
 * OOM killer (memory.max 512 MiB, peak 511 MiB)"; `status` is the wait
 * status as text ("signal: killed", "exit status 1"). "" for none.
 */
void endreason_describe(const struct endreason *r, const char *status, char *buf, size_t len);

/*
 * Whether EndEvent.error carries the words. Not for a client's own
 * SendSignal: it knows why, and code written for the reference compares
 * error with "signal: killed"; reason says it all the same.
 */
bool endreason_in_error(const struct endreason *r);

#endif
