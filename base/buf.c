/* SPDX-License-Identifier: Apache-2.0 */
/*
 * buf.c - bounded growable byte buffer (see buf.h).
 */
#include "base/buf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/loopmem.h"

#define BUF_MIN_CAP 64

void buf_init(struct buf *b, size_t max)
{
	b->p = NULL;
	b->len = 0;
	b->cap = 0;
	b->max = max;
	b->loop = false;
}

void buf_init_loop(struct buf *b, size_t max)
{
	buf_init(b, max);
	b->loop = true;
}

int buf_reserve(struct buf *b, size_t n)
{
	size_t want, ncap, max = b->max;
	uint8_t *np;

	if (max > BUF_UNBOUNDED)
		max = BUF_UNBOUNDED;
	if (n > max || b->len > max - n)
		return -E2BIG;
	if (b->p && b->cap - b->len > n)
		return 0;
	want = b->len + n + 1; /* cannot overflow: both are <= SIZE_MAX / 4 */
	ncap = b->cap > BUF_MIN_CAP ? b->cap : BUF_MIN_CAP;
	while (ncap < want)
		ncap *= 2;
	/* Never allocate far beyond the bound: the last step may be short. */
	if (ncap > max + 1)
		ncap = max + 1 > want ? max + 1 : want;
	np = b->loop ? loopmem_realloc(b->p, ncap) : realloc(b->p, ncap);
	if (!np)
		return -ENOMEM;
	if (!b->p)
		np[0] = '\0';
	b->p = np;
	b->cap = ncap;
	return 0;
}

int buf_append(struct buf *b, const void *data, size_t n)
{
	int rc = buf_reserve(b, n);

	if (rc < 0)
		return rc;
	if (n)
		memcpy(b->p + b->len, data, n);
	b->len += n;
	b->p[b->len] = '\0';
	return 0;
}

int buf_append_str0(struct buf *b, const void *data, size_t n)
{
	int rc = buf_reserve(b, n + 1);

	if (rc < 0)
		return rc;
	if (n)
		memcpy(b->p + b->len, data, n);
	b->p[b->len + n] = '\0';
	b->len += n + 1;
	b->p[b->len] = '\0';
	return 0;
}

int buf_append_byte(struct buf *b, uint8_t c)
{
	return buf_append(b, &c, 1);
}

int buf_append_vfmt(struct buf *b, const char *fmt, va_list ap)
{
	va_list aq;
	int n, rc;

	va_copy(aq, ap);
	n = vsnprintf(NULL, 0, fmt, aq);
	va_end(aq);
	if (n < 0)
		return -EINVAL;
	rc = buf_reserve(b, (size_t)n);
	if (rc < 0)
		return rc;
	vsnprintf((char *)b->p + b->len, (size_t)n + 1, fmt, ap);
	b->len += (size_t)n;
	return 0;
}

int buf_append_fmt(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = buf_append_vfmt(b, fmt, ap);
	va_end(ap);
	return rc;
}

void buf_consume(struct buf *b, size_t n)
{
	if (n >= b->len) {
		buf_reset(b);
		return;
	}
	memmove(b->p, b->p + n, b->len - n);
	b->len -= n;
	b->p[b->len] = '\0';
}

void buf_reset(struct buf *b)
{
	b->len = 0;
	if (b->p)
		b->p[0] = '\0';
}

void buf_free(struct buf *b)
{
	if (b->loop)
		loopmem_free(b->p);
	else
		free(b->p);
	b->p = NULL;
	b->len = 0;
	b->cap = 0;
}

char *buf_steal(struct buf *b, size_t *len)
{
	char *s = (char *)b->p;

	if (s && b->loop) {
		/* The caller frees with free(): hand over a malloc'd copy. */
		char *m = malloc(b->len + 1);
		if (!m)
			return NULL;
		memcpy(m, s, b->len + 1);
		loopmem_free(s);
		s = m;
	}
	if (!s) {
		s = malloc(1);
		if (!s)
			return NULL;
		s[0] = '\0';
	}
	if (len)
		*len = b->len;
	b->p = NULL;
	b->len = 0;
	b->cap = 0;
	return s;
}
