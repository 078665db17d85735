/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pattern.c - Grep's pattern (pattern.h): PCRE2 with a literal prefilter.
 */
#include "search/pattern.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

struct pattern {
	enum pattern_plan plan;
	bool ci;            /* the literal is matched ignoring ASCII case */
	char *lit;          /* PLAN_LITERAL, PLAN_PREFILTER */
	size_t litlen;
	pcre2_code *code;   /* every plan but PLAN_LITERAL and PLAN_NEVER */
};

struct pattern_matcher {
	const struct pattern *p;
	pcre2_match_data *md;
	pcre2_match_context *mctx;
	pcre2_jit_stack *stack;
};

/* --- the required literal of a regex --- */

struct analysis {
	bool pure;        /* the whole pattern is this literal */
	bool lines;       /* needs a line at a time: \A \z \Z \G, lookbehind */
	bool bail;        /* inline options, \Q..\E: no literal can be trusted */
	char best[256];
	size_t bestlen;
	char cur[256];
	size_t curlen;
	bool cur_ok;      /* cur still fits (a run longer than cur is cut off) */
};

static void run_end(struct analysis *a)
{
	if (a->curlen > a->bestlen) {
		memcpy(a->best, a->cur, a->curlen);
		a->bestlen = a->curlen;
	}
	a->curlen = 0;
}

static void run_add(struct analysis *a, const char *s, size_t n)
{
	if (a->curlen + n > sizeof(a->cur)) {
		/* keep what we have as a candidate and start over */
		run_end(a);
	}
	memcpy(a->cur + a->curlen, s, n);
	a->curlen += n;
}

static size_t utf8_len(unsigned char c)
{
	if (c < 0xc0)
		return 1;
	if (c < 0xe0)
		return 2;
	if (c < 0xf0)
		return 3;
	return 4;
}

/* A quantifier at s[i]: its length (0 if none) and minimum count. */
static size_t quantifier(const char *s, size_t len, size_t i, unsigned *min)
{
	size_t j = i;

	*min = 1;
	if (i >= len)
		return 0;
	if (s[i] == '*' || s[i] == '?') {
		*min = 0;
		j++;
	} else if (s[i] == '+') {
		j++;
	} else if (s[i] == '{') {
		unsigned n = 0;
		bool digits = false;
		j++;
		while (j < len && s[j] >= '0' && s[j] <= '9') {
			n = n * 10 + (unsigned)(s[j] - '0');
			if (n > 100000)
				n = 100000;
			j++;
			digits = true;
		}
		if (!digits)
			return 0;
		if (j < len && s[j] == ',') {
			j++;
			while (j < len && s[j] >= '0' && s[j] <= '9')
				j++;
		}
		if (j >= len || s[j] != '}')
			return 0;
		j++;
		*min = n;
	} else {
		return 0;
	}
	if (j < len && (s[j] == '?' || s[j] == '+'))
		j++; /* lazy or possessive */
	return j - i;
}

/* Index after the group opened at s[i] == '(' (or len). */
static size_t skip_group(const char *s, size_t len, size_t i);

/* Index after the class opened at s[i] == '[' (empty classes allowed). */
static size_t skip_class(const char *s, size_t len, size_t i)
{
	size_t j = i + 1;

	if (j < len && s[j] == '^')
		j++;
	if (j < len && s[j] == ']')
		return j + 1; /* [] or [^]: PCRE2_ALLOW_EMPTY_CLASS */
	while (j < len && s[j] != ']') {
		if (s[j] == '\\')
			j++;
		else if (s[j] == '[' && j + 1 < len && s[j + 1] == ':') {
			const char *e = j + 2 < len ? memmem(s + j + 2, len - j - 2, ":]", 2) : NULL;
			if (e)
				j = (size_t)(e - s) + 1;
		}
		j++;
	}
	return j < len ? j + 1 : len;
}

static size_t skip_group(const char *s, size_t len, size_t i)
{
	size_t j = i + 1;
	int depth = 1;

	while (j < len && depth) {
		if (s[j] == '\\')
			j += 2;
		else if (s[j] == '[')
			j = skip_class(s, len, j);
		else {
			if (s[j] == '(')
				depth++;
			else if (s[j] == ')')
				depth--;
			j++;
		}
	}
	return j < len ? j : len;
}

static void analyse(const char *s, size_t len, struct analysis *a)
{
	size_t i = 0;
	unsigned min;

	memset(a, 0, sizeof(*a));
	a->pure = true;
	while (i < len && !a->bail) {
		unsigned char c = (unsigned char)s[i];
		size_t q;

		if (c == '|') {
			/* an alternative at the top: nothing is required */
			a->bestlen = a->curlen = 0;
			a->pure = false;
			a->bail = true; /* no literal, but \A etc. still need scanning */
			for (size_t k = 0; k + 1 < len; k++) {
				if (s[k] == '\\' && strchr("AzZG", s[k + 1]) && s[k + 1])
					a->lines = true;
				if (s[k] == '\\')
					k++;
				else if (s[k] == '(' && k + 2 < len && s[k + 1] == '?' && s[k + 2] == '<' && k + 3 < len &&
					 (s[k + 3] == '=' || s[k + 3] == '!'))
					a->lines = true;
			}
			return;
		}
		if (c == '(') {
			a->pure = false;
			if (i + 2 < len && s[i + 1] == '?') {
				char k = s[i + 2];
				if (k == '<' && i + 3 < len && (s[i + 3] == '=' || s[i + 3] == '!'))
					a->lines = true;
				else if (k != ':' && k != '=' && k != '!' && k != '<' && k != '>' && k != 'P' && k != '\'') {
					/* (?i) (?x) (?-i) (?^) (?#..) ...: options that change what
					 * the rest means */
					a->bail = true;
					break;
				}
			}
			/* look inside for what forces line mode or options */
			size_t e = skip_group(s, len, i);
			for (size_t k = i + 1; k + 1 < e; k++) {
				if (s[k] == '\\') {
					if (strchr("AzZG", s[k + 1]) && s[k + 1])
						a->lines = true;
					if (s[k + 1] == 'Q')
						a->bail = true;
					k++;
				} else if (s[k] == '(' && s[k + 1] == '?' && k + 2 < e) {
					char o = s[k + 2];
					if (o == '<' && k + 3 < e && (s[k + 3] == '=' || s[k + 3] == '!'))
						a->lines = true;
					else if (o != ':' && o != '=' && o != '!' && o != '<' && o != '>' && o != 'P' && o != '\'')
						a->bail = true;
				}
			}
			run_end(a);
			i = e;
			i += quantifier(s, len, i, &min);
			continue;
		}
		if (c == '[' || c == '.' || c == '^' || c == '$') {
			a->pure = false;
			run_end(a);
			i = c == '[' ? skip_class(s, len, i) : i + 1;
			i += quantifier(s, len, i, &min);
			continue;
		}
		if (c == ')' || c == '*' || c == '+' || c == '?') {
			/* a stray one: PCRE2 will say what is wrong */
			a->pure = false;
			a->bail = true;
			break;
		}
		if (c == '\\') {
			unsigned char e = i + 1 < len ? (unsigned char)s[i + 1] : 0;
			if (!e) {
				a->bail = true;
				break;
			}
			if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9')) {
				a->pure = false;
				if (strchr("AzZG", e))
					a->lines = true;
				if (e == 'Q' || e == 'E' || e == 'K') {
					a->bail = true;
					break;
				}
				run_end(a);
				i += 2;
				/* what the escape takes after its letter */
				if (e == 'x' || e == 'u') {
					size_t max = e == 'x' ? 2 : 4, k = 0;
					if (i < len && s[i] != '{')
						while (k < max && i < len && strchr("0123456789abcdefABCDEF", s[i]) && s[i])
							i++, k++;
				} else if (e == 'c' || ((e == 'p' || e == 'P') && i < len && s[i] != '{')) {
					i += i < len;
				} else if (e >= '0' && e <= '9') {
					while (i < len && s[i] >= '0' && s[i] <= '9')
						i++;
				}
				if (i < len && s[i] == '{') {
					const char *close = memchr(s + i, '}', len - i);
					if (close)
						i = (size_t)(close - s) + 1;
				} else if (i < len && (e == 'k' || e == 'g') && (s[i] == '<' || s[i] == '\'')) {
					const char *close = memchr(s + i, s[i] == '<' ? '>' : '\'', len - i);
					if (close)
						i = (size_t)(close - s) + 1;
				}
				i += quantifier(s, len, i, &min);
				continue;
			}
			/* an escaped punctuation or non-ASCII character: itself */
			size_t n = utf8_len(e);
			if (i + 1 + n > len)
				n = len - i - 1;
			q = quantifier(s, len, i + 1 + n, &min);
			if (q) {
				a->pure = false;
				if (min)
					run_add(a, s + i + 1, n);
				run_end(a);
			} else {
				run_add(a, s + i + 1, n);
			}
			i += 1 + n + q;
			continue;
		}
		/* a literal character (a '{' that is no quantifier included) */
		size_t n = utf8_len(c);
		if (i + n > len)
			n = len - i;
		q = quantifier(s, len, i + n, &min);
		if (q) {
			a->pure = false;
			if (min)
				run_add(a, s + i, n);
			run_end(a);
		} else {
			run_add(a, s + i, n);
		}
		i += n + q;
	}
	run_end(a);
	if (a->bail)
		a->pure = false;
}

static bool ascii(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] >= 0x80)
			return false;
	return true;
}

static int set_literal(struct pattern *p, const char *s, size_t n)
{
	p->lit = malloc(n + 1);
	if (!p->lit)
		return -ENOMEM;
	memcpy(p->lit, s, n);
	p->lit[n] = '\0';
	p->litlen = n;
	return 0;
}

int pattern_compile(const char *src, size_t len, const struct pattern_opts *o, struct pattern **out, char *err,
		    size_t errlen)
{
	struct pattern *p;
	struct analysis a;
	uint32_t opts = PCRE2_UTF | PCRE2_MATCH_INVALID_UTF | PCRE2_NEVER_BACKSLASH_C;
	pcre2_compile_context *cctx = NULL;
	int ecode, rc = -ENOMEM;
	PCRE2_SIZE eoff;

	*out = NULL;
	if (len > PATTERN_MAX) {
		snprintf(err, errlen, "pattern longer than %d bytes", PATTERN_MAX);
		return -EINVAL;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	if (o->ignore_case)
		opts |= PCRE2_CASELESS;
	if (o->fixed) {
		if (memchr(src, '\n', len)) {
			p->plan = PLAN_NEVER;
			*out = p;
			return 0;
		}
		if (len && (!o->ignore_case || ascii(src, len))) {
			p->plan = PLAN_LITERAL;
			p->ci = o->ignore_case;
			if (set_literal(p, src, len))
				goto fail;
			*out = p;
			return 0;
		}
		/* PCRE2_LITERAL refuses the options that concern syntax */
		opts = (opts & ~(uint32_t)PCRE2_NEVER_BACKSLASH_C) | PCRE2_LITERAL;
		p->plan = PLAN_REGEX;
	} else {
		analyse(src, len, &a);
		if (memchr(a.best, '\n', a.bestlen)) {
			p->plan = PLAN_NEVER;
		} else if (a.pure && a.bestlen && (!o->ignore_case || ascii(a.best, a.bestlen))) {
			p->plan = PLAN_LITERAL;
		} else if (!a.bail && a.bestlen && (!o->ignore_case || ascii(a.best, a.bestlen))) {
			p->plan = PLAN_PREFILTER;
		} else {
			p->plan = a.lines ? PLAN_LINES : PLAN_REGEX;
		}
		if (p->plan == PLAN_LITERAL || p->plan == PLAN_PREFILTER) {
			p->ci = o->ignore_case;
			if (set_literal(p, a.best, a.bestlen))
				goto fail;
		}
		/* JavaScript's escapes and empty classes; ^ and $ at lines. */
		opts |= PCRE2_ALT_BSUX | PCRE2_ALLOW_EMPTY_CLASS | PCRE2_MULTILINE;
		cctx = pcre2_compile_context_create(NULL);
		if (!cctx)
			goto fail;
		pcre2_set_compile_extra_options(cctx, PCRE2_EXTRA_ALT_BSUX);
	}
	/* Compiled even for PLAN_LITERAL: the pattern is checked for errors
	 * the same way whatever plan runs it. */
	p->code = pcre2_compile((PCRE2_SPTR)src, len, opts, &ecode, &eoff, cctx);
	pcre2_compile_context_free(cctx);
	if (!p->code) {
		char msg[256];
		if (ecode == PCRE2_ERROR_NOMEMORY)
			goto fail;
		pcre2_get_error_message(ecode, (PCRE2_UCHAR *)msg, sizeof(msg));
		snprintf(err, errlen, "invalid regular expression: %s at offset %zu", msg, (size_t)eoff);
		rc = -EINVAL;
		goto fail;
	}
	if (p->plan == PLAN_LITERAL || p->plan == PLAN_NEVER) {
		pcre2_code_free(p->code);
		p->code = NULL;
	} else {
		/* Without the JIT (no executable memory) the interpreter runs,
		 * under the same limits. */
		pcre2_jit_compile(p->code, PCRE2_JIT_COMPLETE);
	}
	*out = p;
	return 0;
fail:
	pattern_free(p);
	if (rc == -ENOMEM)
		snprintf(err, errlen, "out of memory");
	return rc;
}

void pattern_free(struct pattern *p)
{
	if (!p)
		return;
	pcre2_code_free(p->code);
	free(p->lit);
	free(p);
}

enum pattern_plan pattern_plan(const struct pattern *p)
{
	return p->plan;
}

const char *pattern_literal(const struct pattern *p, size_t *len)
{
	*len = p->litlen;
	return p->lit;
}

struct pattern_matcher *pattern_matcher_new(const struct pattern *p)
{
	struct pattern_matcher *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	m->p = p;
	if (!p->code)
		return m;
	m->md = pcre2_match_data_create(1, NULL);
	m->mctx = pcre2_match_context_create(NULL);
	if (!m->md || !m->mctx)
		goto fail;
	pcre2_set_match_limit(m->mctx, PATTERN_MATCH_LIMIT);
	pcre2_set_depth_limit(m->mctx, PATTERN_DEPTH_LIMIT);
	pcre2_set_heap_limit(m->mctx, PATTERN_HEAP_LIMIT_KIB);
	m->stack = pcre2_jit_stack_create(32 * 1024, PATTERN_JIT_STACK_MAX, NULL);
	if (m->stack)
		pcre2_jit_stack_assign(m->mctx, NULL, m->stack);
	return m;
fail:
	pattern_matcher_free(m);
	return NULL;
}

void pattern_matcher_free(struct pattern_matcher *m)
{
	if (!m)
		return;
	pcre2_match_data_free(m->md);
	pcre2_match_context_free(m->mctx);
	pcre2_jit_stack_free(m->stack);
	free(m);
}

/* --- literal search --- */

static inline unsigned char lower(unsigned char c)
{
	return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

/*
 * The literal search: a 16-byte vector compares each position's byte with
 * the needle's first byte and the byte m-1 further with its last (either
 * case of an ASCII letter when ignoring case), and only where both agree
 * is the rest compared. GCC's generic vectors become SSE2 on x86-64 and
 * NEON on aarch64; this carries most agent searches, which are plain
 * words.
 */
typedef unsigned char v16u __attribute__((vector_size(16)));

static inline v16u splat(unsigned char c)
{
	v16u v;
	memset(&v, c, sizeof(v));
	return v;
}

static inline unsigned char upper(unsigned char c)
{
	return c >= 'a' && c <= 'z' ? c - 32 : c;
}

static bool same_ci(const char *a, const char *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (lower((unsigned char)a[i]) != lower((unsigned char)b[i]))
			return false;
	return true;
}

static const char *find_vec(const char *hay, size_t n, const char *nd, size_t m, bool ci)
{
	unsigned char f = (unsigned char)nd[0], l = (unsigned char)nd[m - 1];
	size_t i = 0;

	if (m > n)
		return NULL;
	if (m == 1 && !ci)
		return memchr(hay, f, n);
	if (ci) {
		f = lower(f);
		l = lower(l);
	}
	const v16u f1 = splat(f), f2 = splat(ci ? upper(f) : f);
	const v16u l1 = splat(l), l2 = splat(ci ? upper(l) : l);
	for (; i + (m - 1) + 16 <= n; i += 16) {
		v16u a, b, eq;
		memcpy(&a, hay + i, 16);
		memcpy(&b, hay + i + m - 1, 16);
		eq = ((a == f1) | (a == f2)) & ((b == l1) | (b == l2));
#if defined(__SSE2__)
		/* one bit per position (pmovmskb): 2.3x the speed of walking
		 * the two 64-bit halves a byte at a time */
		unsigned bits = (unsigned)_mm_movemask_epi8((__m128i)eq);
		while (bits) {
			const char *c = hay + i + (size_t)__builtin_ctz(bits);
			bits &= bits - 1;
			if (ci ? same_ci(c + 1, nd + 1, m - 2 + (m < 2)) : memcmp(c + 1, nd + 1, m - 2 + (m < 2)) == 0)
				return c;
		}
#else
		uint64_t w[2];
		memcpy(w, &eq, 16);
		for (int h = 0; h < 2; h++) {
			while (w[h]) {
				size_t j = i + (size_t)h * 8 + (size_t)__builtin_ctzll(w[h]) / 8;
				w[h] &= ~(0xffull << (((j - i) % 8) * 8));
				const char *c = hay + j;
				if (ci ? same_ci(c + 1, nd + 1, m - 2 + (m < 2)) : memcmp(c + 1, nd + 1, m - 2 + (m < 2)) == 0)
					return c;
			}
		}
#endif
	}
	for (; i + m <= n; i++) {
		const char *c = hay + i;
		if (ci ? same_ci(c, nd, m) : memcmp(c, nd, m) == 0)
			return c;
	}
	return NULL;
}

static const char *find_lit(const struct pattern *p, const char *hay, size_t n)
{
	return find_vec(hay, n, p->lit, p->litlen, p->ci);
}

static void line_of(const char *buf, size_t len, size_t from, size_t at, struct pattern_hit *hit)
{
	const char *s = at > from ? memrchr(buf + from, '\n', at - from) : NULL;
	const char *e = memchr(buf + at, '\n', len - at);

	hit->line_start = s ? (size_t)(s - buf) + 1 : from;
	hit->line_end = e ? (size_t)(e - buf) : len;
}

static int run(struct pattern_matcher *m, const char *s, size_t n, bool notbol, bool noteol, size_t *ms,
	       size_t *me)
{
	uint32_t flags = (notbol ? PCRE2_NOTBOL : 0) | (noteol ? PCRE2_NOTEOL : 0);
	int rc = pcre2_match(m->p->code, (PCRE2_SPTR)s, n, 0, flags, m->md, m->mctx);
	PCRE2_SIZE *ov;

	if (rc >= 0) {
		ov = pcre2_get_ovector_pointer(m->md);
		*ms = ov[0];
		*me = ov[1] < ov[0] ? ov[0] : ov[1]; /* \K can set the end before the start */
		return 1;
	}
	switch (rc) {
	case PCRE2_ERROR_NOMATCH:
	case PCRE2_ERROR_PARTIAL:
		return 0;
	case PCRE2_ERROR_MATCHLIMIT:
	case PCRE2_ERROR_DEPTHLIMIT:
	case PCRE2_ERROR_HEAPLIMIT:
	case PCRE2_ERROR_JIT_STACKLIMIT:
		return -E2BIG;
	case PCRE2_ERROR_NOMEMORY:
		return -ENOMEM;
	default:
		return 0;
	}
}

int pattern_line(struct pattern_matcher *m, const char *buf, size_t len, bool notbol, bool noteol,
		 struct pattern_hit *hit)
{
	size_t ms, me;
	int rc;

	hit->line_start = 0;
	hit->line_end = len;
	switch (m->p->plan) {
	case PLAN_NEVER:
		return 0;
	case PLAN_LITERAL: {
		const char *at = find_lit(m->p, buf, len);
		if (!at)
			return 0;
		hit->match_start = (size_t)(at - buf);
		hit->match_end = hit->match_start + m->p->litlen;
		return 1;
	}
	case PLAN_PREFILTER:
		if (!find_lit(m->p, buf, len))
			return 0;
		break;
	default:
		break;
	}
	rc = run(m, buf, len, notbol, noteol, &ms, &me);
	if (rc == 1) {
		hit->match_start = ms;
		hit->match_end = me;
	}
	return rc;
}

/* The line [ls, le) of buf, alone. */
static int check_line(struct pattern_matcher *m, const char *buf, size_t len, size_t from, bool notbol,
		      bool noteol, struct pattern_hit *hit)
{
	size_t ls = hit->line_start, le = hit->line_end, ms, me;
	int rc = run(m, buf + ls, le - ls, notbol && ls == from, noteol && le == len, &ms, &me);

	if (rc == 1) {
		hit->match_start = ls + ms;
		hit->match_end = ls + me;
	}
	return rc;
}

int pattern_next(struct pattern_matcher *m, const char *buf, size_t len, size_t from, bool notbol, bool noteol,
		 struct pattern_hit *hit)
{
	const struct pattern *p = m->p;
	size_t at = from;
	int rc;

	while (at < len) {
		switch (p->plan) {
		case PLAN_NEVER:
			return 0;
		case PLAN_LITERAL: {
			const char *f = find_lit(p, buf + at, len - at);
			if (!f)
				return 0;
			line_of(buf, len, from, (size_t)(f - buf), hit);
			hit->match_start = (size_t)(f - buf);
			hit->match_end = hit->match_start + p->litlen;
			return 1;
		}
		case PLAN_PREFILTER: {
			const char *f = find_lit(p, buf + at, len - at);
			if (!f)
				return 0;
			line_of(buf, len, at, (size_t)(f - buf), hit);
			rc = check_line(m, buf, len, from, notbol, noteol, hit);
			if (rc)
				return rc;
			break;
		}
		case PLAN_LINES: {
			const char *e = memchr(buf + at, '\n', len - at);
			hit->line_start = at;
			hit->line_end = e ? (size_t)(e - buf) : len;
			rc = check_line(m, buf, len, from, notbol, noteol, hit);
			if (rc)
				return rc;
			break;
		}
		case PLAN_REGEX: {
			size_t ms, me;
			rc = run(m, buf + at, len - at, notbol && at == from, noteol, &ms, &me);
			if (rc <= 0)
				return rc;
			line_of(buf, len, at, at + ms, hit);
			if (at + me <= hit->line_end) {
				hit->match_start = at + ms;
				hit->match_end = at + me;
				return 1;
			}
			/* the match ran past the line's end: the line alone decides */
			rc = check_line(m, buf, len, from, notbol, noteol, hit);
			if (rc)
				return rc;
			break;
		}
		}
		if (hit->line_end >= len)
			return 0;
		at = hit->line_end + 1;
	}
	return 0;
}
