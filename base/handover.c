/* SPDX-License-Identifier: Apache-2.0 */
/* handover.c - see handover.h. */
#include "base/handover.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

void handover_init(struct handover *h, Upgrade__HandoverState *st)
{
	memset(h, 0, sizeof(*h));
	h->st = st;
}

void handover_free(struct handover *h)
{
	arena_free(&h->arena);
	free(h->kept);
	h->kept = NULL;
	h->n_kept = 0;
}

void *handover_alloc(struct handover *h, size_t n)
{
	return arena_alloc(&h->arena, n);
}

char *handover_strdup(struct handover *h, const char *s)
{
	size_t n = strlen(s ? s : "") + 1;
	char *o = handover_alloc(h, n);

	if (o)
		memcpy(o, s ? s : "", n);
	return o;
}

void handover_keep_fd(struct handover *h, int fd)
{
	if (fd < 0 || h->n_kept >= HANDOVER_FDS_MAX)
		return;
	for (size_t i = 0; i < h->n_kept; i++)
		if (h->kept[i] == fd)
			return;
	if (!h->kept && !(h->kept = malloc(HANDOVER_FDS_MAX * sizeof(*h->kept)))) {
		/* Not kept: the descriptor stays close-on-exec and the next
		 * image finds it closed, as for one over the bound. */
		h->arena.oom = true;
		return;
	}
	if (fcntl(fd, F_SETFD, 0) == 0)
		h->kept[h->n_kept++] = fd;
}

void handover_keep_undo(struct handover *h)
{
	for (size_t i = 0; i < h->n_kept; i++)
		fcntl(h->kept[i], F_SETFD, FD_CLOEXEC);
}

bool handover_fd_open(int fd)
{
	return fd > 0 && fcntl(fd, F_GETFD) >= 0;
}
