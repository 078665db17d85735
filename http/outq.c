/* SPDX-License-Identifier: Apache-2.0 */
/*
 * outq.c - output queues of memory and file segments.
 *
 * A queue is filled by a protocol (h1, h2) and drained by the connection
 * (writev/sendfile) or, for an HTTP/2 stream, by nghttp2's data callback.
 * The module does no I/O itself.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "http/outq.h"

#define SEG_MIN 16384


/*
 * Freed memory segments are kept (up to SEG_CACHE_BYTES in all) for the
 * next large write: a stream of 64 KiB messages then reuses the same few
 * blocks instead of allocating, and faulting in, fresh memory each time.
 */
#define SEG_CACHE_BYTES (512 * 1024)
static struct outseg *seg_cache;
static size_t seg_cache_bytes;

/*
 * A queue's first write, when small (a unary reply, a header block), gets
 * a segment of SEG_SMALL rather than SEG_MIN: with many streams each
 * holding one short reply, 16 KiB blocks would outgrow the cache above and
 * go back to the kernel page by page. Small ones have a cache of their own.
 */
#define SEG_SMALL 2048
#define SMALL_CACHE_MAX 256
static struct outseg *small_cache;
static size_t small_cache_n;

static struct outseg *seg_new(size_t cap)
{
	struct outseg *s;

	if (cap == SEG_SMALL && small_cache) {
		s = small_cache;
		small_cache = s->next;
		small_cache_n--;
		memset(s, 0, sizeof(*s));
		s->fd = -1;
		s->cap = SEG_SMALL;
		return s;
	}
	if (cap > SEG_MIN)
		cap = (cap + SEG_MIN - 1) / SEG_MIN * SEG_MIN;
	for (struct outseg **pp = &seg_cache; *pp; pp = &(*pp)->next) {
		s = *pp;
		if (s->cap >= cap && s->cap <= 2 * cap) {
			*pp = s->next;
			seg_cache_bytes -= s->cap;
			size_t c = s->cap;
			memset(s, 0, sizeof(*s));
			s->fd = -1;
			s->cap = c;
			return s;
		}
	}
	s = malloc(sizeof(*s) + cap);
	if (!s)
		return NULL;
	memset(s, 0, sizeof(*s));
	s->fd = -1;
	s->cap = cap;
	return s;
}

void outseg_free(struct outseg *s)
{
	if (s->on_sent)
		s->on_sent(s->arg);
	if (s->fd < 0 && s->cap == SEG_SMALL && small_cache_n < SMALL_CACHE_MAX) {
		s->next = small_cache;
		small_cache = s;
		small_cache_n++;
		return;
	}
	if (s->fd < 0 && s->cap >= SEG_MIN && seg_cache_bytes + s->cap <= SEG_CACHE_BYTES) {
		s->next = seg_cache;
		seg_cache = s;
		seg_cache_bytes += s->cap;
		return;
	}
	free(s);
}

static void seg_link(struct outq *q, struct outseg *s)
{
	if (q->tail)
		q->tail->next = s;
	else
		q->head = s;
	q->tail = s;
}

int outq_append(struct outq *q, const void *p, size_t n)
{
	const uint8_t *src = p;
	struct outseg *t = q->tail;

	if (n == 0)
		return 0;
	/* Coalesce small writes into the tail segment: one writev entry, one
	 * allocation per 16 KiB rather than per message. */
	if (t && t->fd < 0 && !t->on_sent && !t->ext) {
		size_t room = t->cap - (t->off + t->len);
		size_t k = n < room ? n : room;
		memcpy(t->data + t->off + t->len, src, k);
		t->len += k;
		q->bytes += k;
		src += k;
		n -= k;
	}
	if (n == 0)
		return 0;
	t = seg_new(!q->head && n <= SEG_SMALL ? SEG_SMALL : n > SEG_MIN ? n : SEG_MIN);
	if (!t)
		return -ENOMEM;
	memcpy(t->data, src, n);
	t->len = n;
	q->bytes += n;
	seg_link(q, t);
	return 0;
}

static void close_dup(void *arg)
{
	close((int)(intptr_t)arg);
}

int outq_append_file_dup(struct outq *q, int fd, off_t off, size_t len)
{
	/* The queue owns a duplicate, so the handler may close its fd (or
	 * finish) while the bytes are still waiting for the socket. */
	int d = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (d < 0)
		return -errno;
	int rc = outq_append_file(q, d, off, len, close_dup, (void *)(intptr_t)d);
	if (rc < 0)
		close(d);
	return rc;
}

/* A segment whose bytes live elsewhere (producer memory or a file). */
static struct outseg *seg_external(struct outq *q, size_t len, void (*on_sent)(void *), void *arg)
{
	struct outseg *s = seg_new(0);
	if (!s)
		return NULL;
	s->len = len;
	s->on_sent = on_sent;
	s->arg = arg;
	q->bytes += len;
	seg_link(q, s);
	return s;
}

int outq_append_owned(struct outq *q, void *mem, size_t n, void (*release)(void *), void *arg)
{
	struct outseg *s = seg_external(q, n, release, arg);
	if (!s)
		return -ENOMEM;
	s->ext = mem;
	return 0;
}

int outq_append_file(struct outq *q, int fd, off_t off, size_t len, void (*on_sent)(void *),
		     void *arg)
{
	struct outseg *s = seg_external(q, len, on_sent, arg);
	if (!s)
		return -ENOMEM;
	s->fd = fd;
	s->foff = off;
	return 0;
}

void outq_pop(struct outq *q)
{
	struct outseg *s = q->head;
	q->head = s->next;
	if (!q->head)
		q->tail = NULL;
	q->bytes -= s->len;
	outseg_free(s);
}

void outq_clear(struct outq *q)
{
	while (q->head)
		outq_pop(q);
	q->bytes = 0;
}

