/* SPDX-License-Identifier: Apache-2.0 */
/*
 * udiff.c - the unified diff of two texts (udiff.h).
 */
#include "try/udiff.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct line {
	const char *p;
	size_t len;      /* without the newline */
	uint64_t hash;
	bool noeol;      /* the last line, with no newline: not equal to the same text with one */
};

struct side {
	struct line *v;
	size_t n;
	bool no_eol;     /* the last line has no newline */
	uint8_t *changed; /* per line: removed (a) or added (b) */
};

struct ctx {
	struct side a, b;
	long *vf, *vb;   /* the snake searches' rows, 2 * max_d + 2 each */
	size_t work;     /* steps left */
};

static uint64_t line_hash(const char *p, size_t n)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */

	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)p[i]) * 1099511628211ull;
	return h;
}

static int split_lines(const char *t, size_t n, struct side *s)
{
	size_t cap = 1;

	for (size_t i = 0; i < n; i++)
		cap += t[i] == '\n';
	s->v = malloc(cap * sizeof(*s->v));
	s->changed = calloc(cap, 1);
	if (!s->v || !s->changed)
		return -ENOMEM;
	s->n = 0;
	for (size_t i = 0; i < n;) {
		const char *nl = memchr(t + i, '\n', n - i);
		size_t e = nl ? (size_t)(nl - t) : n;

		s->v[s->n].p = t + i;
		s->v[s->n].len = e - i;
		s->v[s->n].hash = line_hash(t + i, e - i);
		s->v[s->n].noeol = !nl;
		s->n++;
		s->no_eol = !nl;
		i = nl ? e + 1 : n;
	}
	return 0;
}

static bool eq(const struct ctx *c, long i, long j)
{
	const struct line *x = &c->a.v[i], *y = &c->b.v[j];

	return x->hash == y->hash && x->len == y->len && x->noeol == y->noeol && memcmp(x->p, y->p, x->len) == 0;
}

/*
 * Where to split a[a0, a1) against b[b0, b1): a point of the middle snake
 * of the shortest edit script (Myers 1986, section 4b). False when the
 * work budget ran out first.
 */
static bool middle_snake(struct ctx *c, long a0, long a1, long b0, long b1, long *sx, long *sy)
{
	long n = a1 - a0, m = b1 - b0, delta = n - m, max_d = (n + m + 1) / 2, off = max_d;
	long vlen = 2 * max_d + 2;
	bool front = delta & 1;
	long k1s = 0, k1e = 0, k2s = 0, k2e = 0;
	long *v1 = c->vf, *v2 = c->vb;

	for (long i = 0; i < vlen; i++)
		v1[i] = v2[i] = -1;
	v1[off + 1] = 0;
	v2[off + 1] = 0;
	for (long d = 0; d < max_d; d++) {
		for (long k1 = -d + k1s; k1 <= d - k1e; k1 += 2) {
			long ko = off + k1, x1, y1;

			if (k1 == -d || (k1 != d && v1[ko - 1] < v1[ko + 1]))
				x1 = v1[ko + 1];
			else
				x1 = v1[ko - 1] + 1;
			y1 = x1 - k1;
			while (x1 < n && y1 < m && eq(c, a0 + x1, b0 + y1)) {
				x1++;
				y1++;
			}
			v1[ko] = x1;
			if (c->work-- == 0)
				return false;
			if (x1 > n) {
				k1e += 2;
			} else if (y1 > m) {
				k1s += 2;
			} else if (front) {
				long k2o = off + delta - k1;

				if (k2o >= 0 && k2o < vlen && v2[k2o] != -1 && x1 >= n - v2[k2o]) {
					*sx = a0 + x1;
					*sy = b0 + y1;
					return true;
				}
			}
		}
		for (long k2 = -d + k2s; k2 <= d - k2e; k2 += 2) {
			long ko = off + k2, x2, y2;

			if (k2 == -d || (k2 != d && v2[ko - 1] < v2[ko + 1]))
				x2 = v2[ko + 1];
			else
				x2 = v2[ko - 1] + 1;
			y2 = x2 - k2;
			while (x2 < n && y2 < m && eq(c, a1 - x2 - 1, b1 - y2 - 1)) {
				x2++;
				y2++;
			}
			v2[ko] = x2;
			if (c->work-- == 0)
				return false;
			if (x2 > n) {
				k2e += 2;
			} else if (y2 > m) {
				k2s += 2;
			} else if (!front) {
				long k1o = off + delta - k2;

				if (k1o >= 0 && k1o < vlen && v1[k1o] != -1) {
					long x1 = v1[k1o], y1 = off + x1 - k1o;

					if (x1 >= n - x2) {
						*sx = a0 + x1;
						*sy = b0 + y1;
						return true;
					}
				}
			}
		}
	}
	return false;
}

static void mark(uint8_t *changed, long from, long to)
{
	for (long i = from; i < to; i++)
		changed[i] = 1;
}

static void compare(struct ctx *c, long a0, long a1, long b0, long b1)
{
	long x, y;

	while (a0 < a1 && b0 < b1 && eq(c, a0, b0)) {
		a0++;
		b0++;
	}
	while (a0 < a1 && b0 < b1 && eq(c, a1 - 1, b1 - 1)) {
		a1--;
		b1--;
	}
	if (a0 == a1) {
		mark(c->b.changed, b0, b1);
		return;
	}
	if (b0 == b1) {
		mark(c->a.changed, a0, a1);
		return;
	}
	/* No split (out of work, or none found): all of it changed. */
	if (!c->work || !middle_snake(c, a0, a1, b0, b1, &x, &y) || (x == a0 && y == b0) ||
	    (x == a1 && y == b1)) {
		mark(c->a.changed, a0, a1);
		mark(c->b.changed, b0, b1);
		return;
	}
	compare(c, a0, x, b0, y);
	compare(c, x, a1, y, b1);
}

/* ---- output ---- */

struct out {
	char *buf;
	size_t len, cap, limit;
	bool full;
};

static int out_put(struct out *o, const char *p, size_t n)
{
	if (o->full)
		return 0;
	if (o->len + n > o->limit) {
		o->full = true;
		return 0;
	}
	if (o->len + n + 1 > o->cap) {
		size_t nc = o->cap ? o->cap * 2 : 4096;
		char *nb;

		while (nc < o->len + n + 1)
			nc *= 2;
		nb = realloc(o->buf, nc);
		if (!nb)
			return -ENOMEM;
		o->buf = nb;
		o->cap = nc;
	}
	memcpy(o->buf + o->len, p, n);
	o->len += n;
	o->buf[o->len] = '\0';
	return 0;
}

/* One line of a hunk: the mark, the text, the newline, and GNU's note
   for a last line without one. Whole or not at all. */
static int out_line(struct out *o, char mark, const struct side *s, long i)
{
	static const char noeol[] = "\n\\ No newline at end of file\n";
	const struct line *l = &s->v[i];
	bool last_no_eol = s->no_eol && (size_t)i == s->n - 1;
	size_t need = 1 + l->len + (last_no_eol ? sizeof(noeol) - 1 : 1);
	int rc;

	if (o->full || o->len + need > o->limit) {
		o->full = true;
		return 0;
	}
	if ((rc = out_put(o, &mark, 1)) < 0 || (rc = out_put(o, l->p, l->len)) < 0)
		return rc;
	return last_no_eol ? out_put(o, noeol, sizeof(noeol) - 1) : out_put(o, "\n", 1);
}

/* GNU's range: "start,count", "start" for one line, the line before for none. */
static int range(char *buf, size_t len, long start, long count)
{
	if (count == 1)
		return snprintf(buf, len, "%ld", start + 1);
	return snprintf(buf, len, "%ld,%ld", count ? start + 1 : start, count);
}

static int hunks(const struct ctx *c, struct out *o)
{
	long na = (long)c->a.n, nb = (long)c->b.n, i = 0, j = 0;
	const uint8_t *da = c->a.changed, *db = c->b.changed;

	while (i < na || j < nb) {
		long hi, hj, ei, ej, gap = 0;
		char head[96], ra[40], rb[40];
		int rc;

		/* To the next change, together in both. */
		while (i < na && j < nb && !da[i] && !db[j]) {
			i++;
			j++;
		}
		if (i >= na && j >= nb)
			break;
		/* The hunk: context before, then changes and the equal runs
		   between them as long as they stay within twice the context. */
		hi = i - UDIFF_CONTEXT > 0 ? i - UDIFF_CONTEXT : 0;
		hj = j - (i - hi);
		ei = i;
		ej = j;
		for (;;) {
			while (ei < na && da[ei])
				ei++;
			while (ej < nb && db[ej])
				ej++;
			gap = 0;
			while (ei + gap < na && ej + gap < nb && !da[ei + gap] && !db[ej + gap])
				gap++;
			if ((ei + gap < na || ej + gap < nb) && gap <= 2 * UDIFF_CONTEXT) {
				ei += gap;
				ej += gap;
				continue;
			}
			break;
		}
		gap = gap < UDIFF_CONTEXT ? gap : UDIFF_CONTEXT;
		range(ra, sizeof(ra), hi, ei + gap - hi);
		range(rb, sizeof(rb), hj, ej + gap - hj);
		snprintf(head, sizeof(head), "@@ -%s +%s @@\n", ra, rb);
		if ((rc = out_put(o, head, strlen(head))) < 0)
			return rc;
		/* The lines, in diff's order: removals of a run before its additions. */
		long x = hi, y = hj;
		while (x < ei + gap || y < ej + gap) {
			if (x < ei + gap && y < ej + gap && !da[x] && !db[y]) {
				if ((rc = out_line(o, ' ', &c->a, x)) < 0)
					return rc;
				x++;
				y++;
				continue;
			}
			while (x < ei + gap && da[x])
				if ((rc = out_line(o, '-', &c->a, x++)) < 0)
					return rc;
			while (y < ej + gap && db[y])
				if ((rc = out_line(o, '+', &c->b, y++)) < 0)
					return rc;
		}
		if (o->full)
			return 0;
		i = ei + gap;
		j = ej + gap;
	}
	return 0;
}

int udiff_text(const char *a, size_t alen, const char *b, size_t blen, const char *a_name, const char *b_name,
	       size_t cap, char **out, size_t *out_len, bool *truncated)
{
	struct ctx c = { .work = UDIFF_WORK };
	struct out o = { .limit = cap };
	long max_d;
	int rc;

	*out = NULL;
	*out_len = 0;
	*truncated = false;
	if ((rc = split_lines(a, alen, &c.a)) < 0 || (rc = split_lines(b, blen, &c.b)) < 0)
		goto done;
	max_d = ((long)c.a.n + (long)c.b.n + 1) / 2;
	c.vf = malloc((size_t)(2 * max_d + 2) * sizeof(long));
	c.vb = malloc((size_t)(2 * max_d + 2) * sizeof(long));
	if (!c.vf || !c.vb) {
		rc = -ENOMEM;
		goto done;
	}
	compare(&c, 0, (long)c.a.n, 0, (long)c.b.n);
	bool any = false;
	for (size_t i = 0; i < c.a.n && !any; i++)
		any = c.a.changed[i];
	for (size_t i = 0; i < c.b.n && !any; i++)
		any = c.b.changed[i];
	if (any) {
		char h[2 * 4096 + 16];
		int hl = snprintf(h, sizeof(h), "--- %s\n+++ %s\n", a_name, b_name);

		if (hl < 0 || (size_t)hl >= sizeof(h))
			hl = 0;
		if ((rc = out_put(&o, h, (size_t)hl)) < 0 || (rc = hunks(&c, &o)) < 0)
			goto done;
	}
	rc = 0;
	if (!o.buf && !(o.buf = calloc(1, 1)))
		rc = -ENOMEM;
done:
	free(c.a.v);
	free(c.a.changed);
	free(c.b.v);
	free(c.b.changed);
	free(c.vf);
	free(c.vb);
	if (rc < 0) {
		free(o.buf);
		return rc;
	}
	*out = o.buf;
	*out_len = o.len;
	*truncated = o.full;
	return 0;
}
