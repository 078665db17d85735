/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "search/glob.h"

static bool m(const char *pat, unsigned flags, const char *path)
{
	struct glob *g;
	char err[128];
	bool r;

	cr_assert_eq(glob_compile(pat, strlen(pat), flags, &g, err, sizeof(err)), 0, "%s: %s", pat, err);
	r = glob_match(g, path, strlen(path));
	glob_free(g);
	return r;
}

#define YES(p, s) cr_expect(m(p, 0, s), "%s should match %s", p, s)
#define NO(p, s) cr_expect_not(m(p, 0, s), "%s should not match %s", p, s)

Test(glob, star_and_question)
{
	YES("*.ts", "a.ts");
	NO("*.ts", "src/a.ts");
	YES("*", ".hidden");
	NO("*.ts", "a.tsx");
	YES("a?c", "abc");
	NO("a?c", "a/c");
	YES("a?c", "a\xc3\xa9" "c"); /* ? is one character, not one byte */
	YES("src/*.c", "src/x.c");
	NO("src/*.c", "src/y/x.c");
	YES("*a*b*c*", "xxaxxbxxcxx");
	NO("*a*b*c*", "xxaxxcxxbxx");
	YES("a*", "a");
}

Test(glob, classes)
{
	YES("[abc].txt", "b.txt");
	NO("[abc].txt", "d.txt");
	YES("[a-c]x", "bx");
	YES("[!a-c]x", "dx");
	YES("[^a-c]x", "dx");
	NO("[!a-c]x", "ax");
	YES("[]]", "]");
	YES("[[:digit:]][[:alpha:]]", "1a");
	NO("[[:digit:]]", "a");
	NO("[!x]", "/"); /* never a separator */
	YES("[\\]]", "]");
	YES("[\xc3\xa0-\xc3\xbf]", "\xc3\xa9");
}

Test(glob, braces_nest)
{
	YES("*.{ts,tsx}", "a.tsx");
	YES("*.{ts,tsx}", "a.ts");
	NO("*.{ts,tsx}", "a.js");
	YES("{src,lib}/**/*.{c,h}", "lib/x/y.h");
	YES("a{b,{c,d}e}f", "adef");
	YES("a{b,{c,d}e}f", "abf");
	NO("a{b,{c,d}e}f", "adf");
	YES("[{]", "{");
	YES("\\{a,b\\}", "{a,b}");
}

Test(glob, globstar)
{
	YES("**/*.ts", "a.ts");
	YES("**/*.ts", "x/y/a.ts");
	NO("**/*.ts", "x/y/a.js");
	YES("src/**/*.ts", "src/a.ts");
	YES("src/**/*.ts", "src/x/y/a.ts");
	NO("src/**/*.ts", "lib/a.ts");
	YES("a/**/b", "a/b");
	YES("a/**/b", "a/x/y/b");
	NO("a/**/b", "a/xb");
	YES("a/**", "a/x/y");
	NO("a/**", "a");
	YES("**", "any/thing/at/all");
	YES("**/x", "x");
	YES("a**b", "axxb");
	NO("a**b", "ax/xb"); /* not a whole component: one star */
	YES("**/node_modules/**", "a/node_modules/b/c.js");
}

Test(glob, basename_mode)
{
	cr_expect(m("*.log", GLOB_BASENAME, "a/b/c.log"));
	cr_expect(m("build", GLOB_BASENAME, "x/build"));
	cr_expect_not(m("a/*.log", GLOB_BASENAME, "x/a/c.log"), "a slash anchors");
	cr_expect(m("/build", GLOB_BASENAME | GLOB_LEADING_SLASH, "build"));
	cr_expect_not(m("/build", GLOB_BASENAME | GLOB_LEADING_SLASH, "x/build"));
}

Test(glob, errors_name_the_offset)
{
	struct glob *g;
	char err[128];

	cr_expect_eq(glob_compile("a[bc", 4, 0, &g, err, sizeof(err)), -EINVAL);
	cr_expect(strstr(err, "unclosed '['") && strstr(err, "offset 1"), "%s", err);
	cr_expect_eq(glob_compile("x{a,b", 5, 0, &g, err, sizeof(err)), -EINVAL);
	cr_expect(strstr(err, "unclosed '{'") && strstr(err, "offset 1"), "%s", err);
	cr_expect_eq(glob_compile("ab\\", 3, 0, &g, err, sizeof(err)), -EINVAL);
	cr_expect(strstr(err, "offset 2"), "%s", err);
	cr_expect_eq(glob_compile("[z-a]", 5, 0, &g, err, sizeof(err)), -EINVAL);
	/* 2^9 alternatives is over the bound */
	const char *many = "{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}";
	cr_expect_eq(glob_compile(many, strlen(many), 0, &g, err, sizeof(err)), -EINVAL);
	cr_expect(strstr(err, "alternatives"), "%s", err);
}

Test(glob, pruning)
{
	struct glob *g;
	char err[64];

	cr_assert_eq(glob_compile("src/lib/*.ts", 12, 0, &g, err, sizeof(err)), 0);
	cr_expect(glob_may_match_under(g, "", 0));
	cr_expect(glob_may_match_under(g, "src", 3));
	cr_expect(glob_may_match_under(g, "src/lib", 7));
	cr_expect_not(glob_may_match_under(g, "src/lib/x", 9), "too deep");
	cr_expect_not(glob_may_match_under(g, "test", 4));
	cr_expect_not(glob_may_match_under(g, "srcx", 4));
	glob_free(g);
	cr_assert_eq(glob_compile("*.ts", 4, 0, &g, err, sizeof(err)), 0);
	cr_expect(glob_may_match_under(g, "", 0));
	cr_expect_not(glob_may_match_under(g, "a", 1));
	glob_free(g);
	cr_assert_eq(glob_compile("**/*.ts", 7, 0, &g, err, sizeof(err)), 0);
	cr_expect(glob_may_match_under(g, "a/b/c", 5));
	glob_free(g);
}

/* Many stars against a long path that almost matches: bounded work. */
Test(glob, no_catastrophe, .timeout = 60)
{
	char pat[200], path[4000];
	size_t n = 0;

	for (int i = 0; i < 30; i++)
		n += (size_t)snprintf(pat + n, sizeof(pat) - n, "*a");
	pat[n++] = 'b';
	pat[n] = '\0';
	memset(path, 'a', sizeof(path) - 1);
	path[sizeof(path) - 1] = '\0';
	for (int i = 0; i < 100; i++)
		cr_expect_not(m(pat, 0, path));
}
