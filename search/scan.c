/* SPDX-License-Identifier: Apache-2.0 */
/*
 * scan.c - a file searched or read by lines in bounded windows (scan.h).
 *
 * The scanner's loop (scanner_run) keeps all of its state in the struct,
 * so it can stop after any step and go on later: find the next matching
 * line among the window's whole lines, hand the lines before it to the
 * context (the matches still waiting for their "after" lines, and the
 * ring of the last "before" lines), report the match; or, with no match,
 * hand on the whole window and read the next one.
 */
#include "search/scan.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

/* A line copied out of the window (context, a long line's start). */
struct ctx_line {
	uint64_t no;
	char *text;
	size_t len, cap;
	bool cut;
};

struct pending {
	uint64_t column;
	struct ctx_line line;
	struct ctx_line before[SCAN_CONTEXT_MAX];
	size_t n_before;
	struct ctx_line after[SCAN_CONTEXT_MAX];
	size_t n_after;
};

struct scanner {
	const struct pattern *p;
	struct pattern_matcher *m;
	struct scan_opts o;
	char *buf;
	size_t len, pos;
	uint64_t file_off;  /* file offset of buf[0] */
	size_t end;         /* after the window's last newline (all of it at EOF) */
	bool end_stale;     /* the window changed since end was found */
	int fd;
	bool short_read_ends; /* a short read is the end (scanner_start) */
	bool eof, done, stopping, pause, oom;
	uint64_t lineno;    /* number of the line at pos (SCAN_CONTENT) */
	bool notbol;        /* buf[pos] is inside a line that began earlier */
	bool in_long;       /* the line at pos is longer than the window */
	bool skip_line;     /* drop the rest of the current line */
	uint64_t long_off;  /* file offset where that line began */
	struct ctx_line long_prefix;
	struct ctx_line ring[SCAN_CONTEXT_MAX]; /* the last lines, oldest at ring_head */
	size_t ring_n, ring_head;
	struct pending pend[SCAN_CONTEXT_MAX + 1]; /* waiting for after lines, in order */
	size_t pend_head, n_pend;
	scan_emit_fn emit;
	void *ud;
	struct scan_result res;
	/* views handed to emit */
	struct scan_line v_before[SCAN_CONTEXT_MAX], v_after[SCAN_CONTEXT_MAX];
};

/* --- text --- */

size_t scan_utf8_copy(char *dst, const char *src, size_t n, size_t max, bool *cut)
{
	const unsigned char *s = (const unsigned char *)src;
	size_t i = 0, w = 0;

	*cut = false;
	while (i < n) {
		unsigned c = s[i];
		size_t k = 0;
		unsigned cp = c, min = 0;

		if (c < 0x80 && c) {
			if (w + 1 > max)
				break;
			dst[w++] = (char)c;
			i++;
			continue;
		}
		if ((c & 0xe0) == 0xc0) {
			k = 1; cp = c & 0x1f; min = 0x80;
		} else if ((c & 0xf0) == 0xe0) {
			k = 2; cp = c & 0x0f; min = 0x800;
		} else if ((c & 0xf8) == 0xf0) {
			k = 3; cp = c & 0x07; min = 0x10000;
		}
		bool ok = k && i + k < n;
		for (size_t j = 1; ok && j <= k; j++) {
			if ((s[i + j] & 0xc0) != 0x80)
				ok = false;
			else
				cp = cp << 6 | (s[i + j] & 0x3f);
		}
		if (ok && (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)))
			ok = false;
		if (ok) {
			if (w + k + 1 > max)
				break;
			memcpy(dst + w, s + i, k + 1);
			w += k + 1;
			i += k + 1;
		} else {
			if (w + 3 > max)
				break;
			memcpy(dst + w, "\xef\xbf\xbd", 3); /* U+FFFD */
			w += 3;
			i++;
		}
	}
	if (i < n)
		*cut = true;
	return w;
}

static bool ctx_set(struct scanner *s, struct ctx_line *c, uint64_t no, const char *src, size_t n)
{
	/* A kept scanner rebound with a larger max_line (scanner_rebind)
	 * has lines made for the smaller one: they grow. */
	if (!c->text || c->cap < s->o.max_line + 4) {
		free(c->text);
		c->cap = s->o.max_line + 4;
		c->text = malloc(c->cap);
		if (!c->text) {
			c->cap = 0;
			s->oom = true;
			c->len = 0;
			return false;
		}
	}
	c->no = no;
	c->len = scan_utf8_copy(c->text, src, n, s->o.max_line, &c->cut);
	c->text[c->len] = '\0';
	return true;
}

static bool ctx_copy(struct scanner *s, struct ctx_line *dst, const struct ctx_line *src)
{
	if (!ctx_set(s, dst, src->no, src->text, src->len))
		return false;
	dst->cut = src->cut;
	return true;
}

static void ctx_free(struct ctx_line *c)
{
	free(c->text);
	memset(c, 0, sizeof(*c));
}

/* --- newlines --- */

typedef unsigned char v16 __attribute__((vector_size(16)));
typedef signed char v16s __attribute__((vector_size(16)));

size_t scan_count_lines(const char *s, size_t n)
{
	size_t count = 0, i = 0;
	const v16 nl = { '\n', '\n', '\n', '\n', '\n', '\n', '\n', '\n',
			 '\n', '\n', '\n', '\n', '\n', '\n', '\n', '\n' };

	while (n - i >= 16) {
		/* up to 255 blocks per lane before the byte counters overflow */
		v16s acc = { 0 };
		size_t blocks = (n - i) / 16;
		if (blocks > 255)
			blocks = 255;
		for (size_t b = 0; b < blocks; b++, i += 16) {
			v16 x;
			memcpy(&x, s + i, 16);
			acc += (v16s)(x == nl); /* -1 per newline */
		}
		for (int k = 0; k < 16; k++)
			count += (unsigned char)-acc[k];
	}
	for (; i < n; i++)
		count += s[i] == '\n';
	return count;
}

/* Whether s[0, n) holds a NUL byte: every byte read is looked at for
 * one, so 64 bytes a step (the least of four vectors is 0 when one of
 * them holds a 0), about 5x musl's word-at-a-time memchr. */
static bool has_nul(const char *s, size_t n)
{
	size_t i = 0;

#if defined(__SSE2__)
	const __m128i zero = _mm_setzero_si128();
	for (; n - i >= 64; i += 64) {
		__m128i a = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
		__m128i b = _mm_loadu_si128((const __m128i *)(const void *)(s + i + 16));
		__m128i c = _mm_loadu_si128((const __m128i *)(const void *)(s + i + 32));
		__m128i d = _mm_loadu_si128((const __m128i *)(const void *)(s + i + 48));
		__m128i least = _mm_min_epu8(_mm_min_epu8(a, b), _mm_min_epu8(c, d));
		if (_mm_movemask_epi8(_mm_cmpeq_epi8(least, zero)))
			return true;
	}
#elif defined(__aarch64__)
	for (; n - i >= 64; i += 64) {
		const uint8_t *p = (const uint8_t *)s + i;
		uint8x16_t least = vminq_u8(vminq_u8(vld1q_u8(p), vld1q_u8(p + 16)),
					    vminq_u8(vld1q_u8(p + 32), vld1q_u8(p + 48)));
		if (vminvq_u8(least) == 0)
			return true;
	}
#endif
	return i < n && memchr(s + i, '\0', n - i) != NULL;
}

/* --- scanner --- */

/* The pattern, the options within their bounds, a matcher of its own. */
static int scanner_bind(struct scanner *s, const struct pattern *p, const struct scan_opts *o)
{
	s->p = p;
	s->o = *o;
	if (s->o.before > SCAN_CONTEXT_MAX)
		s->o.before = SCAN_CONTEXT_MAX;
	if (s->o.after > SCAN_CONTEXT_MAX)
		s->o.after = SCAN_CONTEXT_MAX;
	if (!s->o.max_line || s->o.max_line > SCAN_LINE_MAX)
		s->o.max_line = SCAN_LINE_MAX;
	if (s->o.mode != SCAN_CONTENT)
		s->o.before = s->o.after = 0;
	pattern_matcher_free(s->m);
	s->m = pattern_matcher_new(p);
	s->fd = -1;
	return s->m ? 0 : -ENOMEM;
}

struct scanner *scanner_new(const struct pattern *p, const struct scan_opts *o)
{
	struct scanner *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->buf = malloc(SCAN_WINDOW);
	if (!s->buf || scanner_bind(s, p, o) < 0) {
		scanner_free(s);
		return NULL;
	}
	return s;
}

int scanner_rebind(struct scanner *s, const struct pattern *p, const struct scan_opts *o)
{
	return scanner_bind(s, p, o);
}

void scanner_free(struct scanner *s)
{
	if (!s)
		return;
	pattern_matcher_free(s->m);
	free(s->buf);
	ctx_free(&s->long_prefix);
	for (size_t i = 0; i < SCAN_CONTEXT_MAX; i++)
		ctx_free(&s->ring[i]);
	for (size_t i = 0; i < SCAN_CONTEXT_MAX + 1; i++) {
		ctx_free(&s->pend[i].line);
		for (size_t k = 0; k < SCAN_CONTEXT_MAX; k++) {
			ctx_free(&s->pend[i].before[k]);
			ctx_free(&s->pend[i].after[k]);
		}
	}
	free(s);
}

void scanner_start(struct scanner *s, int fd, bool short_read_ends)
{
	s->fd = fd;
	s->short_read_ends = short_read_ends;
	s->len = s->pos = s->end = 0;
	s->end_stale = true;
	s->file_off = 0;
	s->eof = s->done = s->stopping = s->pause = s->oom = false;
	s->lineno = 1;
	s->notbol = s->in_long = s->skip_line = false;
	s->ring_n = s->ring_head = 0;
	s->pend_head = s->n_pend = 0;
	memset(&s->res, 0, sizeof(s->res));
}

const struct scan_result *scanner_result(const struct scanner *s)
{
	return &s->res;
}

static void view(struct scan_line *v, const struct ctx_line *c)
{
	v->no = c->no;
	v->text = c->text;
	v->len = c->len;
	v->cut = c->cut;
}

static void emit_front(struct scanner *s)
{
	struct pending *p = &s->pend[s->pend_head];
	struct scan_match m;

	view(&m.line, &p->line);
	m.column = p->column;
	for (size_t i = 0; i < p->n_before; i++)
		view(&s->v_before[i], &p->before[i]);
	for (size_t i = 0; i < p->n_after; i++)
		view(&s->v_after[i], &p->after[i]);
	m.before = s->v_before;
	m.n_before = p->n_before;
	m.after = s->v_after;
	m.n_after = p->n_after;
	if (s->emit(s->ud, &m))
		s->pause = true;
	s->pend_head = (s->pend_head + 1) % (SCAN_CONTEXT_MAX + 1);
	s->n_pend--;
}

/* One more line after the waiting matches; those complete are emitted. */
static void give_after(struct scanner *s, uint64_t no, const char *text, size_t n, const struct ctx_line *copy)
{
	for (size_t i = 0; i < s->n_pend; i++) {
		struct pending *p = &s->pend[(s->pend_head + i) % (SCAN_CONTEXT_MAX + 1)];
		if (p->n_after < s->o.after) {
			struct ctx_line *c = &p->after[p->n_after++];
			if (copy)
				ctx_copy(s, c, copy);
			else
				ctx_set(s, c, no, text, n);
		}
	}
	while (s->n_pend && s->pend[s->pend_head].n_after >= s->o.after)
		emit_front(s);
}

static void ring_push(struct scanner *s, uint64_t no, const char *text, size_t n, const struct ctx_line *copy)
{
	struct ctx_line *c;

	if (!s->o.before)
		return;
	if (s->ring_n < s->o.before) {
		c = &s->ring[(s->ring_head + s->ring_n++) % s->o.before];
	} else {
		c = &s->ring[s->ring_head];
		s->ring_head = (s->ring_head + 1) % s->o.before;
	}
	if (copy)
		ctx_copy(s, c, copy);
	else
		ctx_set(s, c, no, text, n);
}

/* The lines of buf[a, b) (b after a '\n', or the end at EOF) go by
 * without a match: context and line numbers. */
static void feed_lines(struct scanner *s, size_t a, size_t b)
{
	uint64_t L = s->lineno, total;
	bool long_first = s->in_long && a == s->pos;

	if (s->o.mode != SCAN_CONTENT || a >= b) {
		s->in_long = false;
		return;
	}
	total = scan_count_lines(s->buf + a, b - a);
	if (s->buf[b - 1] != '\n')
		total++; /* the file's last line, without a newline */
	/* the first lines complete the waiting matches */
	for (size_t k = a, no = L; s->n_pend && k < b; no++) {
		const char *nl = memchr(s->buf + k, '\n', b - k);
		size_t le = nl ? (size_t)(nl - s->buf) : b;
		if (long_first && k == a)
			give_after(s, no, NULL, 0, &s->long_prefix);
		else
			give_after(s, no, s->buf + k, le - k, NULL);
		k = le + 1;
	}
	/* the last lines are the next match's "before" */
	if (s->o.before) {
		size_t spans[SCAN_CONTEXT_MAX][2], n = 0, end = b;
		if (s->buf[end - 1] == '\n')
			end--;
		while (n < s->o.before) {
			const char *nl = end > a ? memrchr(s->buf + a, '\n', end - a) : NULL;
			size_t start = nl ? (size_t)(nl - s->buf) + 1 : a;
			spans[n][0] = start;
			spans[n][1] = end;
			n++;
			if (!nl)
				break;
			end = (size_t)(nl - s->buf);
		}
		for (size_t i = n; i-- > 0;) {
			uint64_t no = L + total - 1 - i;
			if (long_first && spans[i][0] == a)
				ring_push(s, no, NULL, 0, &s->long_prefix);
			else
				ring_push(s, no, s->buf + spans[i][0], spans[i][1] - spans[i][0], NULL);
		}
	}
	s->lineno = L + total;
	s->in_long = false;
}

/* A matching line: its text (from the window, or a long line's saved
 * start) and the column of the match. */
static void on_hit(struct scanner *s, const char *text, size_t n, const struct ctx_line *copy, uint64_t column)
{
	struct pending *p;

	s->res.matches++;
	if (s->o.mode == SCAN_FILES) {
		s->done = true;
		return;
	}
	if (s->o.max_count && s->res.matches >= s->o.max_count)
		s->stopping = true;
	if (s->o.mode == SCAN_COUNT) {
		if (s->stopping)
			s->done = true;
		return;
	}
	/* it is an after line of the matches before it */
	if (s->n_pend) {
		if (copy)
			give_after(s, s->lineno, NULL, 0, copy);
		else
			give_after(s, s->lineno, text, n, NULL);
	}
	p = &s->pend[(s->pend_head + s->n_pend) % (SCAN_CONTEXT_MAX + 1)];
	s->n_pend++;
	p->column = column;
	if (copy)
		ctx_copy(s, &p->line, copy);
	else
		ctx_set(s, &p->line, s->lineno, text, n);
	p->n_before = 0;
	for (size_t i = 0; i < s->ring_n; i++)
		ctx_copy(s, &p->before[p->n_before++], &s->ring[(s->ring_head + i) % s->o.before]);
	p->n_after = 0;
	if (copy)
		ring_push(s, s->lineno, NULL, 0, copy);
	else
		ring_push(s, s->lineno, text, n, NULL);
	if (!s->o.after)
		emit_front(s);
	if (s->stopping && !s->n_pend)
		s->done = true;
}

/* Read more after moving what is left to the front. */
static int fill(struct scanner *s)
{
	ssize_t n;

	if (s->pos) {
		memmove(s->buf, s->buf + s->pos, s->len - s->pos);
		s->file_off += s->pos;
		s->len -= s->pos;
		s->pos = 0;
	}
	do
		n = read(s->fd, s->buf + s->len, SCAN_WINDOW - s->len);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	s->end_stale = true;
	if (n == 0) {
		s->eof = true;
		return 0;
	}
	s->res.bytes += (uint64_t)n;
	if (has_nul(s->buf + s->len, (size_t)n)) {
		s->res.binary = true;
		if (s->o.quit_on_binary) {
			s->res.quit = true;
			s->done = true;
		}
	}
	/* The read that would see the end costs as much as the file's
	 * open: left out where a short read already says it. */
	if (s->short_read_ends && (size_t)n < SCAN_WINDOW - s->len)
		s->eof = true;
	s->len += (size_t)n;
	s->end_stale = true;
	return 0;
}

/* The window is full and holds no newline: a piece of a long line. */
static int long_piece(struct scanner *s)
{
	struct pattern_hit h;
	int rc;

	if (!s->in_long) {
		s->in_long = true;
		s->long_off = s->file_off;
		if (s->o.mode == SCAN_CONTENT)
			ctx_set(s, &s->long_prefix, s->lineno, s->buf, s->len);
	}
	if (s->stopping) {
		/* only after lines are wanted: the long one is the last */
		s->done = true;
		return 0;
	}
	rc = pattern_line(s->m, s->buf, s->len, s->notbol, true, &h);
	if (rc < 0) {
		s->res.limit_line = s->lineno;
		return rc;
	}
	if (rc == 1) {
		on_hit(s, NULL, 0, &s->long_prefix, s->file_off + h.match_start - s->long_off + 1);
		s->pos = s->len;
		s->skip_line = true;
		return 0;
	}
	/* keep the end, so a match across the edge is still found */
	s->pos = s->len - SCAN_OVERLAP;
	s->notbol = true;
	return fill(s);
}

int scanner_run(struct scanner *s, scan_emit_fn emit, void *ud)
{
	struct pattern_hit h;
	int rc;

	s->emit = emit;
	s->ud = ud;
	for (;;) {
		if (s->oom)
			return -ENOMEM;
		if (s->pause) {
			s->pause = false;
			return SCAN_PAUSED;
		}
		if (s->done) {
			if (s->n_pend) {
				emit_front(s);
				continue;
			}
			return SCAN_DONE;
		}
		if (s->skip_line) {
			const char *nl = memchr(s->buf + s->pos, '\n', s->len - s->pos);
			if (nl) {
				s->pos = (size_t)(nl - s->buf) + 1;
				s->skip_line = s->in_long = s->notbol = false;
				s->lineno++;
				continue;
			}
			s->pos = s->len;
			if (s->eof)
				s->done = true;
			else if ((rc = fill(s)) < 0)
				return rc;
			continue;
		}
		if (s->end_stale) {
			/* once per read: the search stops at the last whole line */
			s->end = s->pos;
			if (s->eof) {
				s->end = s->len;
			} else if (s->len > s->pos) {
				const char *nl = memrchr(s->buf + s->pos, '\n', s->len - s->pos);
				if (nl)
					s->end = (size_t)(nl - s->buf) + 1;
			}
			s->end_stale = false;
		}
		size_t end = s->end > s->pos ? s->end : s->pos;
		if (end > s->pos) {
			if (s->stopping) {
				feed_lines(s, s->pos, end);
				s->pos = end;
				s->notbol = false;
				if (!s->n_pend)
					s->done = true;
				continue;
			}
			rc = pattern_next(s->m, s->buf, end, s->pos, s->notbol, false, &h);
			if (rc < 0) {
				s->res.limit_line = s->lineno;
				return rc;
			}
			if (rc == 0) {
				feed_lines(s, s->pos, end);
				s->pos = end;
				s->notbol = false;
				continue;
			}
			if (h.line_start > s->pos)
				feed_lines(s, s->pos, h.line_start);
			if (s->in_long && h.line_start == s->pos)
				on_hit(s, NULL, 0, &s->long_prefix, s->file_off + h.match_start - s->long_off + 1);
			else
				on_hit(s, s->buf + h.line_start, h.line_end - h.line_start, NULL,
				       h.match_start - h.line_start + 1);
			s->pos = h.line_end < end ? h.line_end + 1 : end;
			s->lineno++;
			s->notbol = s->in_long = false;
			continue;
		}
		if (s->eof) {
			s->done = true;
			continue;
		}
		if (s->pos == 0 && s->len == SCAN_WINDOW)
			rc = long_piece(s);
		else
			rc = fill(s);
		if (rc < 0)
			return rc;
	}
}

/* --- ReadLines --- */

void scan_lines_free(struct scan_lines *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->lines[i]);
	free(l->lines);
	memset(l, 0, sizeof(*l));
}

struct rl {
	struct scan_lines *out;
	uint64_t offset, limit;
	size_t left;       /* bytes of text still allowed */
	size_t cap;
	uint64_t no;       /* number of the line being read */
	bool cut;          /* a line was cut */
};

static bool rl_full(const struct rl *r)
{
	return r->out->n >= r->limit || (!r->left && r->out->n);
}

/* Keep line `no` (its first n bytes; complete: that is the whole line). */
static int rl_take(struct rl *r, const char *text, size_t n, bool complete)
{
	struct scan_lines *o = r->out;
	char *line;
	bool cut;
	size_t w, max;

	if (r->no < r->offset || rl_full(r))
		return 0;
	if (o->n && n > r->left) {
		/* only the first line is ever given in part */
		r->left = 0;
		return 0;
	}
	if (o->n == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 64;
		char **v = realloc(o->lines, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		o->lines = v;
		r->cap = cap;
	}
	/* the first line gets something even when max_bytes is tiny; a
	 * byte that is not UTF-8 becomes U+FFFD, three bytes */
	max = r->left ? r->left : 4;
	line = malloc((n <= max / 3 ? n * 3 : max) + 4);
	if (!line)
		return -ENOMEM;
	w = scan_utf8_copy(line, text, n, max, &cut);
	line[w] = '\0';
	if (cut || !complete)
		r->cut = true;
	r->left = w < r->left ? r->left - w : 0;
	o->lines[o->n++] = line;
	return 0;
}

int scan_read_lines(int fd, uint64_t offset, uint64_t limit, size_t max_bytes, char *buf, struct scan_lines *out)
{
	struct rl r = { .out = out, .offset = offset ? offset : 1, .limit = limit, .left = max_bytes, .no = 1 };
	uint64_t newlines = 0, size = 0;
	size_t len = 0;
	bool first = true, skip = false, collecting = limit > 0;
	char last = '\n';
	int rc;

	memset(out, 0, sizeof(*out));
	out->first = r.offset;
	for (;;) {
		ssize_t n;
		size_t pos = 0;

		do
			n = read(fd, buf + len, SCAN_WINDOW - len);
		while (n < 0 && errno == EINTR);
		if (n < 0) {
			rc = -errno;
			goto fail;
		}
		if (n > 0) {
			newlines += scan_count_lines(buf + len, (size_t)n);
			size += (uint64_t)n;
			last = buf[len + (size_t)n - 1];
			if (first && has_nul(buf + len, (size_t)n)) {
				out->binary = true;
				collecting = false;
			}
			first = false;
		}
		len += (size_t)n;
		while (collecting) {
			const char *nl = memchr(buf + pos, '\n', len - pos);
			if (!nl)
				break;
			size_t le = (size_t)(nl - buf);
			if (!skip && (rc = rl_take(&r, buf + pos, le - pos, true)) < 0)
				goto fail;
			skip = false;
			r.no++;
			pos = le + 1;
			if (rl_full(&r))
				collecting = false;
		}
		if (n == 0) {
			/* a last line without a newline */
			if (collecting && pos < len && !skip && (rc = rl_take(&r, buf + pos, len - pos, true)) < 0)
				goto fail;
			break;
		}
		if (!collecting) {
			len = 0; /* only counting from here on */
			continue;
		}
		if (pos == 0 && len == SCAN_WINDOW) {
			/* a line longer than the window: its start, then skip it */
			if (!skip && (rc = rl_take(&r, buf, len, false)) < 0)
				goto fail;
			skip = true;
			len = 0;
			continue;
		}
		memmove(buf, buf + pos, len - pos);
		len -= pos;
	}
	out->total = newlines + (size && last != '\n');
	{
		uint64_t avail = out->total >= r.offset ? out->total - r.offset + 1 : 0;
		out->truncated = r.cut || out->n < avail;
	}
	if (out->binary)
		out->truncated = false;
	return 0;
fail:
	scan_lines_free(out);
	return rc;
}
