/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "search/pattern.h"

static struct pattern *comp(const char *src, bool fixed, bool ci)
{
	struct pattern_opts o = { .fixed = fixed, .ignore_case = ci };
	struct pattern *p;
	char err[256];

	cr_assert_eq(pattern_compile(src, strlen(src), &o, &p, err, sizeof(err)), 0, "%s: %s", src, err);
	return p;
}

/* The matching lines of text, as "line:col" joined by ',' (1-based). */
static void lines(const char *src, bool fixed, bool ci, const char *text, char *out, size_t outlen)
{
	struct pattern *p = comp(src, fixed, ci);
	struct pattern_matcher *m = pattern_matcher_new(p);
	struct pattern_hit h;
	size_t at = 0, len = strlen(text), w = 0;

	out[0] = '\0';
	while (at < len && pattern_next(m, text, len, at, false, false, &h) == 1) {
		size_t line = 1;
		for (size_t i = 0; i < h.line_start; i++)
			line += text[i] == '\n';
		w += (size_t)snprintf(out + w, outlen - w, "%s%zu:%zu", w ? "," : "", line, h.match_start - h.line_start + 1);
		at = h.line_end + 1;
	}
	pattern_matcher_free(m);
	pattern_free(p);
}

#define LINES(src, fixed, ci, text, want)                                              \
	do {                                                                           \
		char got_[256];                                                        \
		lines(src, fixed, ci, text, got_, sizeof(got_));                       \
		cr_expect_str_eq(got_, want, "pattern %s", src);                      \
	} while (0)

static const char *text = "alpha beta\nGamma delta\n\nfoo(bar) 42\nend\xff\xfe line\nlast";

Test(pattern, plans)
{
	struct { const char *src; bool fixed, ci; enum pattern_plan plan; const char *lit; } c[] = {
		{ "beta", false, false, PLAN_LITERAL, "beta" },
		{ "a.b", true, false, PLAN_LITERAL, "a.b" },
		{ "foo\\(bar\\)", false, false, PLAN_LITERAL, "foo(bar)" },
		{ "beta", false, true, PLAN_LITERAL, "beta" },
		{ "\\bdelta\\b", false, false, PLAN_PREFILTER, "delta" },
		{ "fo+\\(", false, false, PLAN_PREFILTER, "fo" },
		{ "err(or)?: \\d+", false, false, PLAN_PREFILTER, "err" },
		{ "\\u0041bc\\x41de", false, false, PLAN_PREFILTER, "bc" },
		{ "colou?r", false, false, PLAN_PREFILTER, "colo" },
		{ "[a-z]+\\d", false, false, PLAN_REGEX, NULL },
		{ "a|b", false, false, PLAN_REGEX, NULL },
		{ "(?i)beta", false, false, PLAN_REGEX, NULL },
		{ "\\Aalpha", false, false, PLAN_PREFILTER, "alpha" },
		{ "\\A\\w", false, false, PLAN_LINES, NULL },
		{ "(?<=x)y", false, false, PLAN_PREFILTER, "y" },
		{ "(?<=x)\\w", false, false, PLAN_LINES, NULL },
		{ "a\nb", true, false, PLAN_NEVER, NULL },
	};
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		struct pattern *p = comp(c[i].src, c[i].fixed, c[i].ci);
		size_t n;
		const char *lit = pattern_literal(p, &n);
		cr_expect_eq(pattern_plan(p), c[i].plan, "%s: plan %d", c[i].src, pattern_plan(p));
		if (c[i].lit)
			cr_expect(lit && n == strlen(c[i].lit) && memcmp(lit, c[i].lit, n) == 0, "%s: literal %.*s", c[i].src,
				  (int)n, lit ? lit : "");
		pattern_free(p);
	}
}

Test(pattern, matches_by_line)
{
	LINES("beta", false, false, text, "1:7");
	LINES("BETA", false, true, text, "1:7");
	LINES("a", false, false, text, "1:1,2:2,4:6,6:2");
	LINES("\\bdelta\\b", false, false, text, "2:7");
	LINES("^$", false, false, text, "3:1");
	LINES("\\d+$", false, false, text, "4:10");
	LINES("^[A-Z]", false, false, text, "2:1");
	LINES("a\\s+G", false, false, text, "");       /* \s cannot span a line */
	LINES("a\\s*", false, false, "x\na\nb", "2:1");
	LINES("foo(bar)", true, false, text, "4:1");
	LINES("line$", false, false, text, "5:7");     /* invalid UTF-8 before it */
	LINES("\\Alast", false, false, text, "6:1");    /* \A: each line's start */
	LINES("\\u0047amma", false, false, text, "2:1"); /* JavaScript's \uhhhh */
	LINES("\\u{47}amma", false, false, text, "2:1");
	LINES("[^]", false, false, "a\n\nb", "1:1,3:1");
	LINES("d.lta", false, false, "d\xc3\xa9lta", "1:1"); /* . is a character */
}

Test(pattern, ignore_case_unicode_falls_back_to_the_regex)
{
	LINES("\xc3\x89T\xc3\x89", false, true, "un \xc3\xa9t\xc3\xa9 chaud", "1:4");
	LINES("\xc3\x89T\xc3\x89", true, true, "un \xc3\xa9t\xc3\xa9 chaud", "1:4");
}

Test(pattern, bad_pattern_names_the_offset)
{
	struct pattern_opts o = { 0 };
	struct pattern *p;
	char err[256];

	cr_expect_eq(pattern_compile("ab(cd", 5, &o, &p, err, sizeof(err)), -EINVAL);
	cr_expect(strstr(err, "missing closing parenthesis") && strstr(err, "offset 5"), "%s", err);
	cr_expect_eq(pattern_compile("a[b", 3, &o, &p, err, sizeof(err)), -EINVAL);
	cr_expect(strstr(err, "offset"), "%s", err);
	cr_expect_eq(pattern_compile("x{2,1}", 6, &o, &p, err, sizeof(err)), -EINVAL);
}

/* Catastrophic backtracking is cut by the match limit: -E2BIG, quickly. */
Test(pattern, backtracking_is_bounded, .timeout = 60)
{
	struct pattern *p = comp("(a+)+$", false, false);
	struct pattern_matcher *m = pattern_matcher_new(p);
	struct pattern_hit h;
	char line[64];

	memset(line, 'a', sizeof(line));
	line[sizeof(line) - 1] = 'b';
	cr_expect_eq(pattern_next(m, line, sizeof(line), 0, false, false, &h), -E2BIG);
	pattern_matcher_free(m);
	pattern_free(p);
}

Test(pattern, window_flags)
{
	struct pattern *p = comp("^abc$", false, false);
	struct pattern_matcher *m = pattern_matcher_new(p);
	struct pattern_hit h;

	cr_expect_eq(pattern_next(m, "abc", 3, 0, false, false, &h), 1);
	cr_expect_eq(pattern_next(m, "abc", 3, 0, true, false, &h), 0, "not at a line start");
	cr_expect_eq(pattern_next(m, "abc", 3, 0, false, true, &h), 0, "not at a line end");
	pattern_matcher_free(m);
	pattern_free(p);
}

/* The vectorised literal search against a naive one, at every alignment. */
static long naive(const char *h, size_t n, const char *nd, size_t m, bool ci)
{
	for (size_t i = 0; i + m <= n; i++) {
		size_t k = 0;
		while (k < m && (ci ? (h[i + k] | 32) == (nd[k] | 32) || h[i + k] == nd[k] : h[i + k] == nd[k]))
			k++;
		if (k == m)
			return (long)i;
	}
	return -1;
}

Test(pattern, literal_search_matches_a_naive_one)
{
	char hay[300], needle[24];
	unsigned seed = 7;

	for (int round = 0; round < 3000; round++) {
		size_t n = 1 + (seed = seed * 1103515245 + 12345) % sizeof(hay);
		size_t m = 1 + (seed = seed * 1103515245 + 12345) % 20;
		bool ci = round % 2;
		for (size_t i = 0; i < n; i++)
			hay[i] = "abAB\n"[(seed = seed * 1103515245 + 12345) >> 16 & 3];
		for (size_t i = 0; i < m; i++)
			needle[i] = "abAB"[(seed = seed * 1103515245 + 12345) >> 16 & 3];
		if (round % 3 == 0 && m <= n) /* plant it */
			memcpy(hay + (seed >> 8) % (n - m + 1), needle, m);
		needle[m] = '\0';
		struct pattern_opts o = { .fixed = true, .ignore_case = ci };
		struct pattern *p;
		char err[64];
		cr_assert_eq(pattern_compile(needle, m, &o, &p, err, sizeof(err)), 0);
		struct pattern_matcher *mt = pattern_matcher_new(p);
		struct pattern_hit h;
		/* one line: the haystack without newlines */
		for (size_t i = 0; i < n; i++)
			if (hay[i] == '\n')
				hay[i] = 'x';
		long want = naive(hay, n, needle, m, ci);
		int rc = pattern_line(mt, hay, n, false, false, &h);
		cr_assert_eq(rc, want >= 0, "round %d: %.*s in %.*s", round, (int)m, needle, (int)n, hay);
		if (rc == 1)
			cr_assert_eq((long)h.match_start, want, "round %d", round);
		pattern_matcher_free(mt);
		pattern_free(p);
	}
}
