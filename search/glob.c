/* SPDX-License-Identifier: Apache-2.0 */
/*
 * glob.c - glob patterns (glob.h).
 *
 * A pattern is expanded into its {} alternatives, and each alternative
 * into a list of tokens over code points. Matching steps a set of token
 * positions through the path (a bitset; the tokens are an NFA whose only
 * loops are * and **), so no pattern can make a match take more than
 * path length x pattern length steps. Alternatives of a common shape are
 * recognised at compile time and matched with a compare instead.
 */
#include "search/glob.h"

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum tok_kind {
	T_LIT,    /* one code point */
	T_ANY,    /* ? */
	T_CLASS,  /* [...] */
	T_STAR,   /* * : any run without '/' */
	T_ALL,    /* ** at the end, or alone: anything */
	T_SEG_A,  /* "**" + "/": at a component boundary; may be skipped */
	T_SEG_B,  /*       inside a component it consumes */
};

struct range {
	uint32_t lo, hi;
};

struct cls {
	bool neg;
	unsigned posix; /* bit per POSIX class name */
	size_t n;
	struct range *r;
};

struct tok {
	enum tok_kind kind;
	uint32_t cp;     /* T_LIT */
	struct cls *cls; /* T_CLASS */
};

enum alt_kind {
	A_NFA,
	A_LIT,      /* the whole path */
	A_SUFFIX,   /* "*" + lit: no '/' before the suffix */
	A_PREFIX,   /* lit + "/" + "**": starts with lit/ */
	A_ALL,      /* anything */
};

struct alt {
	enum alt_kind kind;
	bool basename;  /* match the last component only */
	struct tok *t;
	size_t n;
	char *lit;      /* A_LIT, A_SUFFIX, A_PREFIX */
	size_t litlen;
	char *fixed;    /* leading literal components, for pruning */
	size_t fixedlen;
	int depth;      /* components of a match; -1 for any number */
};

struct glob {
	struct alt *alts;
	size_t n;
	bool literal;
};

/* --- UTF-8 --- */

/* The code point at s (n > 0 bytes), or the lone byte with the top bit
 * set for bytes that are not valid UTF-8 (so they only match
 * themselves). */
static uint32_t decode(const unsigned char *s, size_t n, size_t *adv)
{
	unsigned c = s[0];
	size_t k;
	uint32_t cp, min;

	if (c < 0x80) {
		*adv = 1;
		return c;
	}
	if ((c & 0xe0) == 0xc0) {
		k = 1; cp = c & 0x1f; min = 0x80;
	} else if ((c & 0xf0) == 0xe0) {
		k = 2; cp = c & 0x0f; min = 0x800;
	} else if ((c & 0xf8) == 0xf0) {
		k = 3; cp = c & 0x07; min = 0x10000;
	} else {
		goto bad;
	}
	if (k >= n)
		goto bad;
	for (size_t i = 1; i <= k; i++) {
		if ((s[i] & 0xc0) != 0x80)
			goto bad;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		goto bad;
	*adv = k + 1;
	return cp;
bad:
	*adv = 1;
	return 0x80000000u | c;
}

/* --- errors --- */

static int fail(char *err, size_t errlen, size_t pos, const char *what)
{
	if (err && errlen)
		snprintf(err, errlen, "%s at offset %zu", what, pos);
	return -EINVAL;
}

/* --- {} expansion --- */

struct strs {
	char **v;
	size_t *len;
	size_t n, cap;
};

static int strs_push(struct strs *s, const char *a, size_t alen, const char *b, size_t blen, const char *c,
		     size_t clen)
{
	char *p;

	if (s->n == GLOB_ALTS_MAX)
		return -E2BIG;
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 4;
		char **v = realloc(s->v, cap * sizeof(*v));
		size_t *l;
		if (!v)
			return -ENOMEM;
		s->v = v;
		l = realloc(s->len, cap * sizeof(*l));
		if (!l)
			return -ENOMEM;
		s->len = l;
		s->cap = cap;
	}
	p = malloc(alen + blen + clen + 1);
	if (!p)
		return -ENOMEM;
	memcpy(p, a, alen);
	memcpy(p + alen, b, blen);
	memcpy(p + alen + blen, c, clen);
	p[alen + blen + clen] = '\0';
	s->v[s->n] = p;
	s->len[s->n++] = alen + blen + clen;
	return 0;
}

static void strs_free(struct strs *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i]);
	free(s->v);
	free(s->len);
	memset(s, 0, sizeof(*s));
}

/* Index of the ']' closing a class that starts at p[i] == '[', or len. */
static size_t class_end(const char *p, size_t len, size_t i)
{
	size_t j = i + 1;

	if (j < len && (p[j] == '!' || p[j] == '^'))
		j++;
	if (j < len && p[j] == ']')
		j++;
	while (j < len && p[j] != ']') {
		if (p[j] == '\\' && j + 1 < len)
			j++;
		else if (p[j] == '[' && j + 1 < len && p[j + 1] == ':') {
			const char *e = memchr(p + j + 2, ']', len - j - 2);
			if (e && e > p + j + 2 && e[-1] == ':')
				j = (size_t)(e - p);
		}
		j++;
	}
	return j;
}

/*
 * Expand the first top-level {...} of p (offset `base` into the original
 * pattern, for error positions) and recurse on each result.
 */
static int expand(const char *p, size_t len, size_t base, struct strs *out, char *err, size_t errlen)
{
	size_t i, open = len, depth = 0, start;

	for (i = 0; i < len; i++) {
		if (p[i] == '\\') {
			i++;
			continue;
		}
		if (p[i] == '[') {
			size_t e = class_end(p, len, i);
			if (e < len)
				i = e;
			continue;
		}
		if (p[i] == '{') {
			open = i;
			break;
		}
	}
	if (open == len)
		return strs_push(out, p, len, "", 0, "", 0);
	/* Find the matching '}' and the top-level commas. */
	start = open + 1;
	for (i = open; i < len; i++) {
		if (p[i] == '\\') {
			i++;
			continue;
		}
		if (p[i] == '[') {
			size_t e = class_end(p, len, i);
			if (e < len)
				i = e;
			continue;
		}
		if (p[i] == '{')
			depth++;
		else if (p[i] == '}' && --depth == 0)
			break;
	}
	if (i >= len)
		return fail(err, errlen, base + open, "unclosed '{'");
	{
		size_t close = i, j, d = 0;
		for (j = open + 1; j <= close; j++) {
			if (j < close && p[j] == '\\') {
				j++;
				continue;
			}
			if (j < close && p[j] == '[') {
				size_t e = class_end(p, len, j);
				if (e < close)
					j = e;
				continue;
			}
			if (j < close && p[j] == '{')
				d++;
			else if (j < close && p[j] == '}')
				d--;
			if (j == close || (d == 0 && p[j] == ',')) {
				/* alternative p[start, j): prefix + it + suffix, expanded again */
				struct strs one = { 0 };
				int rc = strs_push(&one, p, open, p + start, j - start, p + close + 1, len - close - 1);
				if (rc == 0)
					rc = expand(one.v[0], one.len[0], base, out, err, errlen);
				strs_free(&one);
				if (rc == -E2BIG)
					return fail(err, errlen, base + open, "too many {} alternatives");
				if (rc)
					return rc;
				start = j + 1;
			}
		}
	}
	return 0;
}

/* --- classes --- */

static const char *const posix_names[] = { "alnum", "alpha", "blank", "cntrl", "digit", "graph",
					   "lower", "print", "punct", "space", "upper", "xdigit" };

static bool posix_has(unsigned bits, uint32_t c)
{
	if (c > 127)
		return false;
	for (unsigned i = 0; i < 12; i++) {
		if (!(bits & (1u << i)))
			continue;
		switch (i) {
		case 0: if (isalnum((int)c)) return true; break;
		case 1: if (isalpha((int)c)) return true; break;
		case 2: if (c == ' ' || c == '\t') return true; break;
		case 3: if (iscntrl((int)c)) return true; break;
		case 4: if (isdigit((int)c)) return true; break;
		case 5: if (isgraph((int)c)) return true; break;
		case 6: if (islower((int)c)) return true; break;
		case 7: if (isprint((int)c)) return true; break;
		case 8: if (ispunct((int)c)) return true; break;
		case 9: if (isspace((int)c)) return true; break;
		case 10: if (isupper((int)c)) return true; break;
		case 11: if (isxdigit((int)c)) return true; break;
		}
	}
	return false;
}

static bool cls_has(const struct cls *c, uint32_t cp)
{
	bool in = posix_has(c->posix, cp);

	for (size_t i = 0; !in && i < c->n; i++)
		in = cp >= c->r[i].lo && cp <= c->r[i].hi;
	return in != c->neg;
}

static void cls_free(struct cls *c)
{
	if (c) {
		free(c->r);
		free(c);
	}
}

/* Parse the class at p[*i] == '['; *i is left after the ']'. */
static int parse_class(const char *p, size_t len, size_t *i, size_t pos0, struct cls **out, char *err,
		       size_t errlen)
{
	size_t j = *i + 1, start = *i;
	struct cls *c = calloc(1, sizeof(*c));
	size_t cap = 0;
	bool first = true;

	if (!c)
		return -ENOMEM;
	if (j < len && (p[j] == '!' || p[j] == '^')) {
		c->neg = true;
		j++;
	}
	for (;;) {
		uint32_t lo, hi;
		size_t adv;

		if (j >= len) {
			cls_free(c);
			return fail(err, errlen, pos0 + start, "unclosed '['");
		}
		if (p[j] == ']' && !first)
			break;
		first = false;
		if (p[j] == '[' && j + 1 < len && p[j + 1] == ':') {
			const char *e = memchr(p + j + 2, ']', len - j - 2);
			if (e && e > p + j + 2 && e[-1] == ':') {
				size_t nl = (size_t)(e - 1 - (p + j + 2));
				unsigned k;
				for (k = 0; k < 12; k++)
					if (strlen(posix_names[k]) == nl && memcmp(posix_names[k], p + j + 2, nl) == 0)
						break;
				if (k == 12) {
					cls_free(c);
					return fail(err, errlen, pos0 + j, "unknown character class name");
				}
				c->posix |= 1u << k;
				j = (size_t)(e - p) + 1;
				continue;
			}
		}
		if (p[j] == '\\') {
			if (++j >= len) {
				cls_free(c);
				return fail(err, errlen, pos0 + j - 1, "trailing '\\'");
			}
		}
		lo = decode((const unsigned char *)p + j, len - j, &adv);
		j += adv;
		hi = lo;
		if (j + 1 < len && p[j] == '-' && p[j + 1] != ']') {
			j++;
			if (p[j] == '\\' && j + 1 < len)
				j++;
			hi = decode((const unsigned char *)p + j, len - j, &adv);
			j += adv;
			if (hi < lo) {
				cls_free(c);
				return fail(err, errlen, pos0 + j - adv, "character range out of order");
			}
		}
		if (c->n == cap) {
			struct range *r = realloc(c->r, (cap = cap ? cap * 2 : 4) * sizeof(*r));
			if (!r) {
				cls_free(c);
				return -ENOMEM;
			}
			c->r = r;
		}
		c->r[c->n++] = (struct range){ lo, hi };
	}
	*i = j + 1;
	*out = c;
	return 0;
}

/* --- alternatives --- */

static void alt_clear(struct alt *a)
{
	for (size_t i = 0; i < a->n; i++)
		if (a->t[i].kind == T_CLASS)
			cls_free(a->t[i].cls);
	free(a->t);
	free(a->lit);
	free(a->fixed);
}

static int push_tok(struct alt *a, size_t *cap, struct tok t)
{
	if (a->n == *cap) {
		struct tok *v = realloc(a->t, (*cap = *cap ? *cap * 2 : 16) * sizeof(*v));
		if (!v)
			return -ENOMEM;
		a->t = v;
	}
	a->t[a->n++] = t;
	return 0;
}

/* Literal text of tokens [from, to) (all T_LIT) as UTF-8 bytes. */
static char *lit_text(const struct alt *a, size_t from, size_t to, size_t *outlen)
{
	char *s = malloc(4 * (to - from) + 1);
	size_t w = 0;

	if (!s)
		return NULL;
	for (size_t i = from; i < to; i++) {
		uint32_t c = a->t[i].cp;
		if (c & 0x80000000u)
			s[w++] = (char)(c & 0xff);
		else if (c < 0x80)
			s[w++] = (char)c;
		else if (c < 0x800) {
			s[w++] = (char)(0xc0 | c >> 6);
			s[w++] = (char)(0x80 | (c & 0x3f));
		} else if (c < 0x10000) {
			s[w++] = (char)(0xe0 | c >> 12);
			s[w++] = (char)(0x80 | ((c >> 6) & 0x3f));
			s[w++] = (char)(0x80 | (c & 0x3f));
		} else {
			s[w++] = (char)(0xf0 | c >> 18);
			s[w++] = (char)(0x80 | ((c >> 12) & 0x3f));
			s[w++] = (char)(0x80 | ((c >> 6) & 0x3f));
			s[w++] = (char)(0x80 | (c & 0x3f));
		}
	}
	s[w] = '\0';
	*outlen = w;
	return s;
}

static bool all_lit(const struct alt *a, size_t from, size_t to, bool allow_slash)
{
	for (size_t i = from; i < to; i++)
		if (a->t[i].kind != T_LIT || (!allow_slash && a->t[i].cp == '/'))
			return false;
	return true;
}

/* Tokenise one alternative (no braces left) and classify it. */
static int compile_alt(const char *p, size_t len, size_t pos0, unsigned flags, bool anchored, struct alt *a,
		       char *err, size_t errlen)
{
	size_t i = 0, cap = 0, lead;
	int rc;

	memset(a, 0, sizeof(*a));
	a->basename = (flags & GLOB_BASENAME) && !anchored && !memchr(p, '/', len);
	while (i < len) {
		struct tok t = { 0 };
		size_t adv;

		if (p[i] == '*') {
			size_t j = i;
			while (j < len && p[j] == '*')
				j++;
			bool at_start = i == 0 || p[i - 1] == '/';
			if (j - i >= 2 && at_start && j < len && p[j] == '/') {
				/* "**" + "/": directories, also none; the slash is eaten */
				if ((rc = push_tok(a, &cap, (struct tok){ .kind = T_SEG_A })) ||
				    (rc = push_tok(a, &cap, (struct tok){ .kind = T_SEG_B })))
					return rc;
				i = j + 1;
				continue;
			}
			t.kind = (j - i >= 2 && at_start && j == len) ? T_ALL : T_STAR;
			i = j;
		} else if (p[i] == '?') {
			t.kind = T_ANY;
			i++;
		} else if (p[i] == '[') {
			t.kind = T_CLASS;
			if ((rc = parse_class(p, len, &i, pos0, &t.cls, err, errlen)))
				return rc;
		} else {
			if (p[i] == '\\') {
				if (i + 1 >= len)
					return fail(err, errlen, pos0 + i, "trailing '\\'");
				i++;
			}
			t.kind = T_LIT;
			t.cp = decode((const unsigned char *)p + i, len - i, &adv);
			i += adv;
		}
		if ((rc = push_tok(a, &cap, t))) {
			if (t.kind == T_CLASS)
				cls_free(t.cls);
			return rc;
		}
	}
	/* Shapes matched with a compare. */
	if (all_lit(a, 0, a->n, true)) {
		a->kind = A_LIT;
		a->lit = lit_text(a, 0, a->n, &a->litlen);
	} else if (a->n >= 1 && a->t[0].kind == T_STAR && all_lit(a, 1, a->n, false)) {
		a->kind = A_SUFFIX;
		a->lit = lit_text(a, 1, a->n, &a->litlen);
	} else if (a->n >= 3 && a->t[0].kind == T_SEG_A && a->t[2].kind == T_STAR && all_lit(a, 3, a->n, false)) {
		/* any depth, last component ends with lit: a basename suffix */
		a->kind = A_SUFFIX;
		a->basename = true;
		a->lit = lit_text(a, 3, a->n, &a->litlen);
	} else if (a->n == 1 && a->t[0].kind == T_ALL) {
		a->kind = A_ALL;
	} else if (a->n >= 2 && a->t[a->n - 1].kind == T_ALL && a->t[a->n - 2].kind == T_LIT &&
		   a->t[a->n - 2].cp == '/' && all_lit(a, 0, a->n - 1, true)) {
		a->kind = A_PREFIX;
		a->lit = lit_text(a, 0, a->n - 1, &a->litlen);
	} else {
		a->kind = A_NFA;
	}
	if (a->kind != A_NFA && a->kind != A_ALL && !a->lit)
		return -ENOMEM;
	/* Pruning: the leading literal components and the depth. */
	a->depth = 1;
	for (size_t k = 0; k < a->n; k++) {
		if (a->t[k].kind == T_ALL || a->t[k].kind == T_SEG_A)
			a->depth = -1;
		if (a->depth > 0 && a->t[k].kind == T_LIT && a->t[k].cp == '/')
			a->depth++;
	}
	lead = 0;
	for (size_t k = 0; k < a->n && a->t[k].kind == T_LIT; k++)
		if (a->t[k].cp == '/')
			lead = k; /* up to the last '/' before a special token */
	if (all_lit(a, 0, a->n, true))
		lead = a->n;
	a->fixed = lit_text(a, 0, lead, &a->fixedlen);
	return a->fixed ? 0 : -ENOMEM;
}

int glob_compile(const char *pat, size_t len, unsigned flags, struct glob **out, char *err, size_t errlen)
{
	struct strs alts = { 0 };
	struct glob *g;
	bool anchored = false;
	size_t off = 0;
	int rc;

	*out = NULL;
	if (len > GLOB_MAX)
		return fail(err, errlen, GLOB_MAX, "pattern longer than 4096 bytes");
	if ((flags & GLOB_LEADING_SLASH) && len && pat[0] == '/') {
		anchored = true;
		off = 1;
	}
	rc = expand(pat + off, len - off, off, &alts, err, errlen);
	if (rc == -E2BIG)
		rc = fail(err, errlen, 0, "too many {} alternatives");
	if (rc) {
		strs_free(&alts);
		return rc;
	}
	g = calloc(1, sizeof(*g));
	if (!g || !(g->alts = calloc(alts.n ? alts.n : 1, sizeof(*g->alts)))) {
		free(g);
		strs_free(&alts);
		return -ENOMEM;
	}
	for (size_t i = 0; i < alts.n; i++) {
		rc = compile_alt(alts.v[i], alts.len[i], off, flags, anchored, &g->alts[i], err, errlen);
		g->n++;
		if (rc) {
			strs_free(&alts);
			glob_free(g);
			return rc;
		}
	}
	strs_free(&alts);
	g->literal = g->n == 1 && g->alts[0].kind == A_LIT;
	*out = g;
	return 0;
}

void glob_free(struct glob *g)
{
	if (!g)
		return;
	for (size_t i = 0; i < g->n; i++)
		alt_clear(&g->alts[i]);
	free(g->alts);
	free(g);
}

bool glob_is_literal(const struct glob *g)
{
	return g->literal;
}

/* --- matching --- */

#define WORDS(n) (((n) + 64) / 64)

static inline void set_bit(uint64_t *s, size_t i)
{
	s[i / 64] |= 1ull << (i % 64);
}

static inline bool has_bit(const uint64_t *s, size_t i)
{
	return s[i / 64] >> (i % 64) & 1;
}

/* Follow the skip edges (all forward), in one ascending pass. */
static void closure(const struct alt *a, uint64_t *s)
{
	for (size_t i = 0; i < a->n; i++) {
		if (!has_bit(s, i))
			continue;
		switch (a->t[i].kind) {
		case T_STAR:
		case T_ALL:
			set_bit(s, i + 1);
			break;
		case T_SEG_A:
			set_bit(s, i + 2);
			break;
		default:
			break;
		}
	}
}

static bool nfa_match(const struct alt *a, const char *path, size_t len)
{
	size_t w = WORDS(a->n), i = 0;
	uint64_t buf[2 * WORDS(GLOB_MAX * 2)];
	uint64_t *cur = buf, *next = buf + w;

	if (w > WORDS(GLOB_MAX * 2))
		return false;
	memset(cur, 0, w * sizeof(*cur));
	set_bit(cur, 0);
	closure(a, cur);
	while (i < len) {
		size_t adv;
		uint32_t c = decode((const unsigned char *)path + i, len - i, &adv);
		bool any = false;

		i += adv;
		memset(next, 0, w * sizeof(*next));
		for (size_t k = 0; k < a->n; k++) {
			if (!has_bit(cur, k))
				continue;
			const struct tok *t = &a->t[k];
			switch (t->kind) {
			case T_LIT:
				if (c == t->cp)
					set_bit(next, k + 1);
				break;
			case T_ANY:
				if (c != '/')
					set_bit(next, k + 1);
				break;
			case T_CLASS:
				if (c != '/' && cls_has(t->cls, c))
					set_bit(next, k + 1);
				break;
			case T_STAR:
				if (c != '/')
					set_bit(next, k);
				break;
			case T_ALL:
				set_bit(next, k);
				break;
			case T_SEG_A:
				set_bit(next, c == '/' ? k : k + 1);
				break;
			case T_SEG_B:
				set_bit(next, c == '/' ? k - 1 : k);
				break;
			}
		}
		closure(a, next);
		for (size_t k = 0; k < w && !any; k++)
			any = next[k] != 0;
		if (!any)
			return false;
		uint64_t *tmp = cur;
		cur = next;
		next = tmp;
	}
	return has_bit(cur, a->n);
}

static bool alt_match(const struct alt *a, const char *path, size_t len)
{
	if (a->basename) {
		const char *slash = memrchr(path, '/', len);
		if (slash) {
			len -= (size_t)(slash + 1 - path);
			path = slash + 1;
		}
	}
	switch (a->kind) {
	case A_LIT:
		return len == a->litlen && memcmp(path, a->lit, len) == 0;
	case A_SUFFIX:
		return len >= a->litlen && memcmp(path + len - a->litlen, a->lit, a->litlen) == 0 &&
		       !memchr(path, '/', len - a->litlen);
	case A_PREFIX:
		return len > a->litlen && memcmp(path, a->lit, a->litlen) == 0;
	case A_ALL:
		return true;
	case A_NFA:
		return nfa_match(a, path, len);
	}
	return false;
}

bool glob_match(const struct glob *g, const char *path, size_t len)
{
	for (size_t i = 0; i < g->n; i++)
		if (alt_match(&g->alts[i], path, len))
			return true;
	return false;
}

bool glob_may_match_under(const struct glob *g, const char *dir, size_t len)
{
	for (size_t i = 0; i < g->n; i++) {
		const struct alt *a = &g->alts[i];
		size_t k, comps = 1;

		if (a->basename || a->kind == A_ALL)
			return true;
		for (k = 0; k < len; k++)
			comps += dir[k] == '/';
		if (!len)
			comps = 0;
		/* a path under dir has comps + 1 components at least */
		if (a->depth >= 0 && (int)comps + 1 > a->depth)
			continue;
		k = len < a->fixedlen ? len : a->fixedlen;
		if (memcmp(dir, a->fixed, k) != 0)
			continue;
		if (len == a->fixedlen || !len || !a->fixedlen || (len < a->fixedlen ? a->fixed[len] == '/' : dir[a->fixedlen] == '/'))
			return true;
	}
	return false;
}
