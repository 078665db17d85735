/* SPDX-License-Identifier: Apache-2.0 */
/*
 * arena.h - allocations made for one task and freed together.
 *
 * Used to build message trees (a protobuf-c record, a rewritten view of a
 * response) whose pieces have no owner of their own: every piece comes
 * from the arena and arena_free() releases them all at once.
 *
 * Errors: arena_alloc returns NULL on allocation failure and sets oom, so
 * a builder can allocate freely and check once at the end.
 */
#ifndef ENVD_BASE_ARENA_H
#define ENVD_BASE_ARENA_H

#include <stdbool.h>
#include <stddef.h>

struct arena {
	void **p;
	size_t n, cap;
	bool oom;
};

/* n zeroed bytes (at least one), owned by the arena; NULL and oom set on failure. */
void *arena_alloc(struct arena *a, size_t n);
/* Free everything; the arena is empty and reusable. */
void arena_free(struct arena *a);

#endif
