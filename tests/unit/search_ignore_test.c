/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <string.h>

#include "search/ignore.h"

static struct ignore_rules *parse(const char *text)
{
	struct ignore_rules *r;

	cr_assert_eq(ignore_parse(text, strlen(text), &r), 0);
	return r;
}

static enum ignore_match judge(const struct ignore_rules *r, const char *rel, bool dir)
{
	return ignore_rules_match(r, rel, strlen(rel), dir);
}

Test(ignore, syntax)
{
	struct ignore_rules *r = parse("# comment\n\n*.log\n!keep.log\nbuild/\n/root.txt\ndoc/*.md\n\\#hash\n\\!bang\ntrail \\ \n");

	cr_expect_eq(ignore_rules_count(r), 8);
	cr_expect_eq(judge(r, "a.log", false), IGNORE_IGNORED);
	cr_expect_eq(judge(r, "x/y/a.log", false), IGNORE_IGNORED, "no slash: any depth");
	cr_expect_eq(judge(r, "keep.log", false), IGNORE_WHITELIST, "last rule wins");
	cr_expect_eq(judge(r, "build", true), IGNORE_IGNORED);
	cr_expect_eq(judge(r, "build", false), IGNORE_NONE, "dir-only rule, a file");
	cr_expect_eq(judge(r, "x/build", true), IGNORE_IGNORED);
	cr_expect_eq(judge(r, "root.txt", false), IGNORE_IGNORED);
	cr_expect_eq(judge(r, "x/root.txt", false), IGNORE_NONE, "anchored by the leading slash");
	cr_expect_eq(judge(r, "doc/a.md", false), IGNORE_IGNORED);
	cr_expect_eq(judge(r, "x/doc/a.md", false), IGNORE_NONE, "anchored by the middle slash");
	cr_expect_eq(judge(r, "#hash", false), IGNORE_IGNORED);
	cr_expect_eq(judge(r, "!bang", false), IGNORE_IGNORED);
	cr_expect_eq(judge(r, "trail  ", false), IGNORE_IGNORED, "escaped trailing space kept");
	ignore_rules_free(r);
}

Test(ignore, empty_and_comments_only_give_no_rules)
{
	struct ignore_rules *r;

	cr_assert_eq(ignore_parse("# x\n\n   \n", 9, &r), 0);
	cr_expect_null(r);
	cr_assert_eq(ignore_parse("", 0, &r), 0);
	cr_expect_null(r);
}

Test(ignore, invalid_lines_are_skipped)
{
	struct ignore_rules *r = parse("a[bc\n*.o\n");

	cr_expect_eq(ignore_rules_count(r), 1);
	cr_expect_eq(judge(r, "x.o", false), IGNORE_IGNORED);
	ignore_rules_free(r);
}

Test(ignore, crlf_and_bom)
{
	struct ignore_rules *r = parse("\xef\xbb\xbf*.tmp\r\nfoo\r\n");

	cr_expect_eq(judge(r, "a.tmp", false), IGNORE_IGNORED);
	cr_expect_eq(judge(r, "foo", false), IGNORE_IGNORED);
	ignore_rules_free(r);
}

/* A chain of levels: /repo (with .git) and /repo/sub. */
static struct ignore_level *level(struct ignore_level *parent, const char *dir, bool git, const char *gi,
				  const char *ig, const char *rg, const char *ex)
{
	struct ignore_rules *rules[IGNORE_KINDS] = { 0 };

	if (gi)
		rules[IGNORE_GIT] = parse(gi);
	if (ig)
		rules[IGNORE_IGNORE] = parse(ig);
	if (rg)
		rules[IGNORE_RG] = parse(rg);
	if (ex)
		rules[IGNORE_EXCLUDE] = parse(ex);
	return ignore_level_new(parent, strlen(dir), git, rules);
}

static enum ignore_match J(struct ignore_level *lv, const char *path, bool dir, bool anywhere)
{
	return ignore_judge(lv, path, strlen(path), dir, anywhere);
}

Test(ignore, levels_like_ripgrep)
{
	struct ignore_level *top = level(NULL, "/work", false, "*.top\n", NULL, NULL, NULL);
	struct ignore_level *repo = level(top, "/work/repo", true, "*.log\n/dist\n", NULL, NULL, "*.ex\n");
	struct ignore_level *sub = level(repo, "/work/repo/sub", false, "!keep.log\n", "*.ig\n", "!x.ig\n", NULL);

	cr_expect_eq(J(sub, "/work/repo/sub/a.log", false, false), IGNORE_IGNORED);
	cr_expect_eq(J(sub, "/work/repo/sub/keep.log", false, false), IGNORE_WHITELIST, "deeper level wins");
	cr_expect_eq(J(repo, "/work/repo/dist", true, false), IGNORE_IGNORED);
	cr_expect_eq(J(sub, "/work/repo/sub/dist", true, false), IGNORE_NONE, "anchored at its own level");
	cr_expect_eq(J(sub, "/work/repo/sub/a.ex", false, false), IGNORE_IGNORED, "info/exclude");
	cr_expect_eq(J(sub, "/work/repo/sub/a.ig", false, false), IGNORE_IGNORED, ".ignore");
	cr_expect_eq(J(sub, "/work/repo/sub/x.ig", false, false), IGNORE_WHITELIST, ".rgignore over .ignore");
	cr_expect_eq(J(sub, "/work/repo/sub/a.top", false, false), IGNORE_NONE,
		     "a .gitignore above the repository's top is not the repository's");
	ignore_level_unref(sub);
	ignore_level_unref(repo);
	ignore_level_unref(top);
}

Test(ignore, gitignore_needs_a_repository)
{
	struct ignore_level *plain = level(NULL, "/plain", false, "x.txt\n", "y.txt\n", NULL, NULL);

	cr_expect_eq(J(plain, "/plain/x.txt", false, false), IGNORE_NONE, ".gitignore outside a repository");
	cr_expect_eq(J(plain, "/plain/x.txt", false, true), IGNORE_IGNORED, "unless asked to anyway");
	cr_expect_eq(J(plain, "/plain/y.txt", false, false), IGNORE_IGNORED, ".ignore applies everywhere");
	ignore_level_unref(plain);
}

Test(ignore, root_level)
{
	struct ignore_level *root = level(NULL, "", true, "tmp/\n", NULL, NULL, NULL);

	cr_expect_eq(J(root, "/tmp", true, false), IGNORE_IGNORED);
	cr_expect_eq(J(root, "/a/tmp", true, false), IGNORE_IGNORED);
	ignore_level_unref(root);
}
