/* SPDX-License-Identifier: Apache-2.0 */
/* arena.c - see arena.h. */
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"

void *arena_alloc(struct arena *a, size_t n)
{
	if (a->n == a->cap) {
		size_t cap = a->cap ? a->cap * 2 : 16;
		void **np = realloc(a->p, cap * sizeof(*np));
		if (!np) {
			a->oom = true;
			return NULL;
		}
		a->p = np;
		a->cap = cap;
	}
	void *m = calloc(1, n ? n : 1);
	if (!m) {
		a->oom = true;
		return NULL;
	}
	a->p[a->n++] = m;
	return m;
}

void arena_free(struct arena *a)
{
	for (size_t i = 0; i < a->n; i++)
		free(a->p[i]);
	free(a->p);
	memset(a, 0, sizeof(*a));
}
