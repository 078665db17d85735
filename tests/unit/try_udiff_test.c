/* SPDX-License-Identifier: Apache-2.0 */
/*
 * try_udiff_test.c - the unified diff of two texts (try/udiff.h): exact
 * output for known cases, and for random texts a diff that turns the old
 * text into the new one when applied, with as few removed and added lines
 * as `diff --minimal` finds; a cut at the byte budget on a line boundary;
 * the work bound still giving a correct diff.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "try/udiff.h"

static char *diff_of(const char *a, const char *b, size_t cap, bool *cut)
{
	char *out = NULL;
	size_t len = 0;
	bool t = false;

	cr_assert_eq(udiff_text(a, strlen(a), b, strlen(b), "a/f", "b/f", cap, &out, &len, &t), 0);
	cr_assert_eq(strlen(out), len);
	if (cut)
		*cut = t;
	return out;
}

Test(udiff, equal_texts_give_nothing)
{
	char *d = diff_of("one\ntwo\n", "one\ntwo\n", 1 << 20, NULL);

	cr_assert_str_eq(d, "");
	free(d);
}

Test(udiff, one_changed_line_with_context)
{
	char *d = diff_of("1\n2\n3\n4\n5\n6\n7\n8\n9\n", "1\n2\n3\n4\nfive\n6\n7\n8\n9\n", 1 << 20, NULL);

	cr_assert_str_eq(d, "--- a/f\n+++ b/f\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n");
	free(d);
}

Test(udiff, created_and_deleted_files)
{
	char *d = diff_of("", "x\ny\n", 1 << 20, NULL);

	cr_assert_str_eq(d, "--- a/f\n+++ b/f\n@@ -0,0 +1,2 @@\n+x\n+y\n");
	free(d);
	d = diff_of("x\n", "", 1 << 20, NULL);
	cr_assert_str_eq(d, "--- a/f\n+++ b/f\n@@ -1 +0,0 @@\n-x\n");
	free(d);
}

Test(udiff, a_last_line_without_newline_is_marked)
{
	char *d = diff_of("a\nb", "a\nc", 1 << 20, NULL);

	cr_assert_str_eq(d, "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n"
			    "\\ No newline at end of file\n");
	free(d);
	d = diff_of("a\nb", "a\nb\n", 1 << 20, NULL);
	cr_assert_str_eq(d, "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n");
	free(d);
}

Test(udiff, two_hunks_far_apart)
{
	char a[4096] = "", b[4096] = "";

	for (int i = 0; i < 30; i++) {
		char l[16];
		snprintf(l, sizeof(l), "%d\n", i);
		strcat(a, l);
		strcat(b, i == 3 ? "three\n" : i == 25 ? "" : l);
	}
	char *d = diff_of(a, b, 1 << 20, NULL);
	cr_assert_str_eq(d, "--- a/f\n+++ b/f\n@@ -1,7 +1,7 @@\n 0\n 1\n 2\n-3\n+three\n 4\n 5\n 6\n"
			    "@@ -23,7 +23,6 @@\n 22\n 23\n 24\n-25\n 26\n 27\n 28\n");
	free(d);
}

Test(udiff, cut_at_the_budget_on_a_whole_line)
{
	bool cut = false;
	char *d = diff_of("a\nb\nc\n", "x\ny\nz\n", 40, &cut);

	cr_assert(cut);
	cr_assert_leq(strlen(d), 40);
	cr_assert_eq(d[strlen(d) - 1], '\n', "whole lines only: [%s]", d);
	free(d);
}

/* ---- random texts against diff --minimal ---- */

/* Apply a unified diff (ours: one file) to a, into a malloc'ed text. */
static char *apply(const char *a, const char *d)
{
	size_t cap = strlen(a) + strlen(d) + 1, o = 0;
	char *out = calloc(1, cap);
	const char *ap = a, *p = strchr(d, '\n');
	long aline = 1;

	cr_assert(out);
	if (!*d) {
		strcpy(out, a);
		return out;
	}
	p = strchr(p + 1, '\n') + 1; /* past both headers */
	while (*p) {
		long s1, l1 = 1;
		const char *nl;

		cr_assert(strncmp(p, "@@ -", 4) == 0, "a hunk header: %.40s", p);
		s1 = strtol(p + 4, (char **)&nl, 10);
		if (*nl == ',')
			l1 = strtol(nl + 1, (char **)&nl, 10);
		if (l1 == 0)
			s1++;
		/* copy up to the hunk's first old line */
		while (aline < s1) {
			const char *e = strchr(ap, '\n');
			size_t n = e ? (size_t)(e - ap + 1) : strlen(ap);
			memcpy(out + o, ap, n);
			o += n;
			ap += n;
			aline++;
		}
		p = strchr(p, '\n') + 1;
		while (*p && *p != '@') {
			const char *e = strchr(p, '\n');
			size_t n = (size_t)(e - p);
			bool noeol = strncmp(e + 1, "\\ No newline", 12) == 0;

			if (*p == ' ' || *p == '-') {
				const char *ae = strchr(ap, '\n');
				ap = ae ? ae + 1 : ap + strlen(ap);
				aline++;
			}
			if (*p == ' ' || *p == '+') {
				memcpy(out + o, p + 1, n - 1);
				o += n - 1;
				if (!noeol)
					out[o++] = '\n';
			}
			p = e + 1;
			if (noeol)
				p = strchr(p, '\n') + 1;
		}
	}
	strcpy(out + o, ap);
	return out;
}

/* Removed and added lines of a unified diff. */
static long edits(const char *d)
{
	long n = 0;

	for (const char *p = d; *p; p = strchr(p, '\n') + 1) {
		if ((*p == '-' && strncmp(p, "---", 3) != 0) || (*p == '+' && strncmp(p, "+++", 3) != 0))
			n++;
		if (!strchr(p, '\n'))
			break;
	}
	return n;
}

static long gnu_edits(const char *a, const char *b)
{
	char fa[] = "/tmp/udiff-a.XXXXXX", fb[] = "/tmp/udiff-b.XXXXXX", cmd[256];
	int da = mkstemp(fa), db = mkstemp(fb);
	FILE *f;
	long n = 0;
	char line[4096];

	cr_assert(da >= 0 && db >= 0);
	cr_assert_eq(write(da, a, strlen(a)), (ssize_t)strlen(a));
	cr_assert_eq(write(db, b, strlen(b)), (ssize_t)strlen(b));
	close(da);
	close(db);
	snprintf(cmd, sizeof(cmd), "diff --minimal -u %s %s", fa, fb);
	f = popen(cmd, "r");
	cr_assert(f);
	while (fgets(line, sizeof(line), f))
		if ((line[0] == '-' && strncmp(line, "---", 3) != 0) || (line[0] == '+' && strncmp(line, "+++", 3) != 0))
			n++;
	pclose(f);
	unlink(fa);
	unlink(fb);
	return n;
}

static char *random_text(unsigned *seed, int lines, int alphabet, bool eol)
{
	char *t = calloc(1, (size_t)lines * 8 + 8);

	cr_assert(t);
	for (int i = 0; i < lines; i++) {
		char l[16];
		snprintf(l, sizeof(l), "l%d\n", rand_r(seed) % alphabet);
		strcat(t, l);
	}
	if (!eol && *t)
		t[strlen(t) - 1] = '\0';
	return t;
}

Test(udiff, random_texts_apply_and_are_minimal)
{
	unsigned seed = 4242;

	if (access("/usr/bin/diff", X_OK) != 0)
		cr_skip_test("no /usr/bin/diff to compare with");
	for (int round = 0; round < 200; round++) {
		int la = rand_r(&seed) % 40, lb = rand_r(&seed) % 40, alpha = 2 + rand_r(&seed) % 8;
		char *a = random_text(&seed, la, alpha, rand_r(&seed) % 4 != 0);
		char *b = random_text(&seed, lb, alpha, rand_r(&seed) % 4 != 0);
		char *d = diff_of(a, b, 1 << 20, NULL), *got = apply(a, d);

		bool same = strcmp(got, b) == 0;
		long ours = edits(d), gnu = gnu_edits(a, b);

		if (!same || ours != gnu)
			cr_log_error("round %d\na=[%s]\nb=[%s]\n%s", round, a, b, d);
		free(a);
		free(b);
		free(d);
		free(got);
		cr_assert(same, "round %d: the diff applied to a is b", round);
		cr_assert_eq(ours, gnu, "round %d: as few edits as diff --minimal", round);
	}
}

Test(udiff, past_the_work_bound_still_a_correct_diff)
{
	unsigned seed = 7;
	/* Two long texts with little in common: the snake search runs out. */
	char *a = random_text(&seed, 30000, 50000, true), *b = random_text(&seed, 30000, 50000, true);
	char *d = diff_of(a, b, (size_t)1 << 30, NULL), *got = apply(a, d);

	cr_assert_str_eq(got, b);
	free(a);
	free(b);
	free(d);
	free(got);
}
