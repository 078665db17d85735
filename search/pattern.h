/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pattern.h - Grep's pattern: compiled once, then asked for the next
 * matching line in a buffer of whole lines.
 *
 * Syntax: PCRE2's (Perl-compatible: \d \w \s \b, lookaround, lazy and
 * possessive quantifiers, named groups, \p{..}), with JavaScript's escapes
 * (\uhhhh, \u{h..}, \xhh) and its empty classes ([] never matches, [^]
 * matches anything), so the JS regex source agent frameworks hand over
 * runs as it is. The subject is UTF-8 ('.' is one character); bytes that
 * are not valid UTF-8 never match a character class or '.', and do not
 * stop the search. A line is matched without its '\n' (so '$' is the end
 * of the line and no match spans two lines).
 *
 * Speed: a pattern that is a plain string (or a fixed string) is found
 * with memmem, or a case-folding scan; any other pattern with a string it
 * cannot match without (its required literal) is searched for that
 * string first, and the regex runs only on the lines that have it. The
 * rest run PCRE2's JIT over the whole buffer at once.
 *
 * Bounded: every PCRE2 call has a match limit (PATTERN_MATCH_LIMIT steps),
 * a depth limit and a heap limit, so a pattern that backtracks
 * catastrophically costs at most that much per line and is reported
 * (-E2BIG) rather than pinning a CPU.
 *
 * Ownership: a compiled pattern is read-only and shared by threads; each
 * thread has its own matcher (pattern_matcher_new), which holds PCRE2's
 * per-call state.
 *
 * Errors: pattern_compile() returns 0, -EINVAL (a message with PCRE2's
 * reason and the byte offset in the pattern where it was found, from 0),
 * -ENOMEM. pattern_next() returns 1 (found), 0 (none), -E2BIG (a limit was
 * hit; *hit has the line), -ENOMEM.
 */
#ifndef SEARCH_PATTERN_H
#define SEARCH_PATTERN_H

#include <stdbool.h>
#include <stddef.h>

#define PATTERN_MAX 65536                /* bytes of a pattern */
#define PATTERN_MATCH_LIMIT 5000000u     /* PCRE2 match limit per call */
#define PATTERN_DEPTH_LIMIT 20000u       /* PCRE2 depth limit per call (interpreter) */
#define PATTERN_HEAP_LIMIT_KIB 2048u     /* PCRE2 heap limit per call (interpreter) */
#define PATTERN_JIT_STACK_MAX (512 * 1024)

struct pattern_opts {
	bool fixed;       /* the pattern is a plain string */
	bool ignore_case;
};

struct pattern;
struct pattern_matcher;

int pattern_compile(const char *src, size_t len, const struct pattern_opts *o, struct pattern **out, char *err,
		    size_t errlen);
void pattern_free(struct pattern *p);

/* How the pattern is searched (for tests and the docs): */
enum pattern_plan {
	PLAN_LITERAL,     /* memmem / case-folding scan, no regex */
	PLAN_PREFILTER,   /* required literal first, regex on its lines */
	PLAN_REGEX,       /* the regex over the buffer */
	PLAN_LINES,       /* the regex line by line (\A, \z, \G, lookbehind) */
	PLAN_NEVER,       /* cannot match a line (a fixed string with '\n') */
};
enum pattern_plan pattern_plan(const struct pattern *p);
/* The literal searched for first (PLAN_LITERAL, PLAN_PREFILTER); NULL
 * otherwise. */
const char *pattern_literal(const struct pattern *p, size_t *len);

/* Per-thread state; NULL when out of memory. */
struct pattern_matcher *pattern_matcher_new(const struct pattern *p);
void pattern_matcher_free(struct pattern_matcher *m);

struct pattern_hit {
	size_t line_start;  /* offset of the line in the buffer */
	size_t line_end;    /* offset of its '\n' (or the buffer's end) */
	size_t match_start; /* offset of the first match in the line */
	size_t match_end;
};

/*
 * The first line at or after `from` in buf[0, len) that has a match.
 * buf[from] starts a line unless `notbol` (the buffer begins inside a
 * line too long for it); the last line ends at len, whether or not that
 * is the line's real end (`noteol`: it is not). Lines may contain any
 * bytes.
 */
int pattern_next(struct pattern_matcher *m, const char *buf, size_t len, size_t from, bool notbol, bool noteol,
		 struct pattern_hit *hit);

/* Does the single line buf[0, len) match? Same returns as pattern_next. */
int pattern_line(struct pattern_matcher *m, const char *buf, size_t len, bool notbol, bool noteol,
		 struct pattern_hit *hit);

#endif
