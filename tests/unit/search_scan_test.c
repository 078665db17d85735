/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "search/scan.h"

static int file_with(const char *text, size_t n)
{
	char path[] = "/tmp/scan_test.XXXXXX";
	int fd = mkstemp(path);

	cr_assert_geq(fd, 0);
	unlink(path);
	cr_assert_eq(write(fd, text, n), (ssize_t)n);
	lseek(fd, 0, SEEK_SET);
	return fd;
}

struct got {
	char s[8192];
	size_t w;
	int pause_every;
	int n;
};

static bool collect(void *ud, const struct scan_match *m)
{
	struct got *g = ud;

	g->w += (size_t)snprintf(g->s + g->w, sizeof(g->s) - g->w, "%llu:%llu:%.*s%s", (unsigned long long)m->line.no,
				 (unsigned long long)m->column, (int)(m->line.len > 40 ? 40 : m->line.len), m->line.text,
				 m->line.cut ? "+" : "");
	for (size_t i = 0; i < m->n_before; i++)
		g->w += (size_t)snprintf(g->s + g->w, sizeof(g->s) - g->w, " b%llu", (unsigned long long)m->before[i].no);
	for (size_t i = 0; i < m->n_after; i++)
		g->w += (size_t)snprintf(g->s + g->w, sizeof(g->s) - g->w, " a%llu", (unsigned long long)m->after[i].no);
	g->w += (size_t)snprintf(g->s + g->w, sizeof(g->s) - g->w, ";");
	g->n++;
	return g->pause_every && g->n % g->pause_every == 0;
}

static struct scan_result run(const char *pat, const struct scan_opts *o, const char *text, size_t n, struct got *g)
{
	struct pattern_opts po = { 0 };
	struct pattern *p;
	char err[128];
	int fd = file_with(text, n), rc, pauses = 0;
	struct scanner *s;
	struct scan_result r;

	cr_assert_eq(pattern_compile(pat, strlen(pat), &po, &p, err, sizeof(err)), 0);
	s = scanner_new(p, o);
	cr_assert_not_null(s);
	scanner_start(s, fd);
	while ((rc = scanner_run(s, collect, g)) == SCAN_PAUSED)
		pauses++;
	cr_assert_eq(rc, SCAN_DONE, "rc %d", rc);
	if (g->pause_every)
		cr_expect_geq(pauses, 1);
	r = *scanner_result(s);
	scanner_free(s);
	pattern_free(p);
	close(fd);
	return r;
}

static const char *T = "one\ntwo x\nthree\nfour x\nfive\nsun\nseven x\neight";

Test(scan, content_with_context)
{
	struct scan_opts o = { .mode = SCAN_CONTENT, .before = 1, .after = 2, .max_line = 100 };
	struct got g = { 0 };
	struct scan_result r = run("x$", &o, T, strlen(T), &g);

	cr_expect_eq(r.matches, 3);
	cr_expect_str_eq(g.s, "2:5:two x b1 a3 a4;4:6:four x b3 a5 a6;7:7:seven x b6 a8;");
}

Test(scan, pauses_and_resumes)
{
	struct scan_opts o = { .mode = SCAN_CONTENT, .max_line = 100 };
	struct got g = { .pause_every = 1 };
	run("x", &o, T, strlen(T), &g);
	cr_expect_str_eq(g.s, "2:5:two x;4:6:four x;7:7:seven x;");
}

Test(scan, max_count_and_modes)
{
	struct scan_opts o = { .mode = SCAN_CONTENT, .max_line = 100, .max_count = 2, .after = 1 };
	struct got g = { 0 };
	struct scan_result r = run("x", &o, T, strlen(T), &g);

	cr_expect_eq(r.matches, 2);
	cr_expect_str_eq(g.s, "2:5:two x a3;4:6:four x a5;");
	o = (struct scan_opts){ .mode = SCAN_COUNT, .max_line = 100 };
	memset(&g, 0, sizeof(g));
	cr_expect_eq(run("x", &o, T, strlen(T), &g).matches, 3);
	cr_expect_eq(g.n, 0);
	o.mode = SCAN_FILES;
	cr_expect_eq(run("x", &o, T, strlen(T), &g).matches, 1);
}

Test(scan, cut_lines_stay_utf8)
{
	struct scan_opts o = { .mode = SCAN_CONTENT, .max_line = 5 };
	struct got g = { 0 };
	/* "ab" + e-acute (2 bytes) + "cd": 5 bytes end inside nothing; 4 would */
	run("cd", &o, "ab\xc3\xa9\xc3\xa9" "cd\nx\xff" "cd\n", 14, &g);
	cr_expect_str_eq(g.s, "1:7:ab\xc3\xa9+;2:3:x\xef\xbf\xbd" "c+;");
}

Test(scan, binary_quits_when_asked)
{
	struct scan_opts o = { .mode = SCAN_CONTENT, .max_line = 100, .quit_on_binary = true };
	struct got g = { 0 };
	struct scan_result r = run("x", &o, "x\n\0x\n", 5, &g);

	cr_expect(r.binary && r.quit);
	cr_expect_eq(r.matches, 0);
	o.quit_on_binary = false;
	memset(&g, 0, sizeof(g));
	r = run("x", &o, "x\n\0x\n", 5, &g);
	cr_expect(r.binary && !r.quit);
	cr_expect_eq(r.matches, 2);
}

/* A line of 3 windows: a match at its end, one across a window edge, and
 * the lines after it still numbered right. */
Test(scan, long_line_in_pieces)
{
	size_t n = 3 * SCAN_WINDOW + 100;
	char *t = malloc(n);
	struct scan_opts o = { .mode = SCAN_CONTENT, .max_line = 10, .before = 1 };
	struct got g = { 0 };
	char want[256];

	memset(t, 'a', n);
	memcpy(t, "start\n", 6);
	memcpy(t + n - 20, "NEEDLE", 6);
	t[n - 2] = '\n';
	t[n - 1] = 'z';
	run("NEEDLE", &o, t, n, &g);
	snprintf(want, sizeof(want), "2:%zu:aaaaaaaaaa+ b1;", n - 20 - 6 + 1);
	cr_expect_str_eq(g.s, want);
	/* across the edge between two pieces */
	memset(t + n - 20, 'a', 6);
	memcpy(t + SCAN_WINDOW - 3, "EDGE", 4);
	memset(&g, 0, sizeof(g));
	run("EDGE", &o, t, n, &g);
	snprintf(want, sizeof(want), "2:%d:aaaaaaaaaa+ b1;", SCAN_WINDOW - 3 - 6 + 1);
	cr_expect_str_eq(g.s, want);
	memset(&g, 0, sizeof(g));
	run("z", &o, t, n, &g);
	cr_expect_str_eq(g.s, "3:1:z b2;");
	free(t);
}

Test(scan, count_lines)
{
	char big[1000];

	memset(big, 'x', sizeof(big));
	for (int i = 0; i < 1000; i += 7)
		big[i] = '\n';
	size_t want = 0;
	for (int i = 0; i < 1000; i++)
		want += big[i] == '\n';
	cr_expect_eq(scan_count_lines(big, sizeof(big)), want);
	cr_expect_eq(scan_count_lines(big + 3, 500), scan_count_lines(big + 3, 500));
}

static struct scan_lines rl(const char *text, size_t n, uint64_t off, uint64_t limit, size_t maxb)
{
	char *buf = malloc(SCAN_WINDOW);
	struct scan_lines l;
	int fd = file_with(text, n);

	cr_assert_eq(scan_read_lines(fd, off, limit, maxb, buf, &l), 0);
	close(fd);
	free(buf);
	return l;
}

Test(scan, read_lines)
{
	struct scan_lines l = rl(T, strlen(T), 2, 3, 1000);

	cr_expect_eq(l.n, 3);
	cr_expect_str_eq(l.lines[0], "two x");
	cr_expect_str_eq(l.lines[2], "four x");
	cr_expect_eq(l.first, 2);
	cr_expect_eq(l.total, 8);
	cr_expect(l.truncated);
	scan_lines_free(&l);
	l = rl(T, strlen(T), 7, 10, 1000);
	cr_expect_eq(l.n, 2);
	cr_expect_str_eq(l.lines[1], "eight");
	cr_expect_not(l.truncated);
	scan_lines_free(&l);
	l = rl(T, strlen(T), 1, 10, 8);
	cr_expect_eq(l.n, 2, "max bytes");
	cr_expect(l.truncated);
	scan_lines_free(&l);
	l = rl("a\n\0b\n", 5, 1, 10, 100);
	cr_expect(l.binary);
	cr_expect_eq(l.n, 0);
	cr_expect_eq(l.total, 2);
	scan_lines_free(&l);
	l = rl("", 0, 1, 10, 100);
	cr_expect_eq(l.total, 0);
	cr_expect_eq(l.n, 0);
	scan_lines_free(&l);
	l = rl("x\n", 2, 1, 10, 100);
	cr_expect_eq(l.total, 1);
	cr_expect_eq(l.n, 1);
	scan_lines_free(&l);
}
