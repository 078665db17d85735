/* SPDX-License-Identifier: Apache-2.0 */
/*
 * handover.h - the live-upgrade record (proto/handover.proto,
 * docs/upgrade.md) as the modules that own its parts write and read it.
 *
 * Each owner of state that crosses the exec has a pair,
 * `<module>_handover_save(struct handover *)` and
 * `<module>_handover_restore(struct handover *)`: the save fills its fields
 * of the record being built, the restore takes them over from the record
 * read. sandbox/upgrade.c only orders the pairs, packs, writes and reads.
 *
 * Saving: what a save adds to the record is allocated here (freed by
 * handover_free) or borrowed from the owner, unchanged until the record is
 * packed. A descriptor that must cross the exec is named to
 * handover_keep_fd, which clears its close-on-exec flag;
 * handover_keep_undo sets the flags again when the exec fails.
 *
 * Restoring: the record is read-only; descriptors it names are open in
 * this process (inherited) or not at all (handover_fd_open). An owner that
 * takes a descriptor over sets close-on-exec on it again; whatever is
 * still inheritable at the end was not taken over and is closed. Counts of
 * what was taken over go into `taken`, for the X-Envd-Handover header.
 *
 * Loop thread only. Errors: allocation failures set `oom` (arena), for the
 * builder to check once at the end.
 */
#ifndef ENVD_BASE_HANDOVER_H
#define ENVD_BASE_HANDOVER_H

#include <stdbool.h>
#include <stddef.h>

#include "base/arena.h"
#include "handover.pb-c.h"

/* Descriptors one record can carry (the rest stay close-on-exec). */
#define HANDOVER_FDS_MAX 4096

/* What a restore took over and what it could not. */
struct handover_taken {
	unsigned procs, procs_failed;       /* running processes */
	unsigned retained, retained_failed; /* finished ones still retained */
	unsigned watchers, watchers_failed; /* polled watchers */
};

struct handover {
	Upgrade__HandoverState *st; /* the record: being built, or read */
	struct arena arena;         /* what the saves allocated */
	int *kept;                  /* descriptors whose close-on-exec was cleared */
	size_t n_kept;
	struct handover_taken taken;
};

/* Begin with record st (initialised by the caller; borrowed). */
void handover_init(struct handover *h, Upgrade__HandoverState *st);
/* Free what the saves allocated, and the list of kept descriptors. */
void handover_free(struct handover *h);

/* n zeroed bytes that live until handover_free; NULL (and arena.oom) on failure. */
void *handover_alloc(struct handover *h, size_t n);
/* A copy of s (NULL: "") that lives until handover_free. */
char *handover_strdup(struct handover *h, const char *s);

/*
 * Append item to the repeated field arr[n] of a record being built (arrays
 * from the arena; on failure the item is left out and arena.oom set).
 */
#define HANDOVER_PUSH(h, arr, n, item)                                                     \
	do {                                                                               \
		void *_np = handover_alloc((h), ((n) + 1) * sizeof(*(arr)));               \
		if (_np) {                                                                 \
			if (n)                                                             \
				memcpy(_np, (arr), (n) * sizeof(*(arr)));                  \
			(arr) = _np;                                                       \
			(arr)[(n)++] = (item);                                             \
		}                                                                          \
	} while (0)

/* fd crosses the exec: clear its close-on-exec flag (once per fd; fd < 0,
 * or more than HANDOVER_FDS_MAX: nothing). */
void handover_keep_fd(struct handover *h, int fd);
/* The exec failed: every kept descriptor is close-on-exec again. */
void handover_keep_undo(struct handover *h);

/* A descriptor the record names is open in this process (fd > 0). */
bool handover_fd_open(int fd);

#endif
