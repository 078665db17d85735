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
	char s[65536];
	size_t w;
	int pause_every;
	int n;
};

static bool collect(void *ud, const struct scan_match *m)
{
	struct got *g = ud;

	cr_assert_lt(g->w, sizeof(g->s) - 2048, "too many matches for the test's buffer");

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

static struct scan_result run_once(const char *pat, const struct scan_opts *o, const char *text, size_t n,
				   struct got *g, bool short_read_ends)
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
	scanner_start(s, fd, short_read_ends);
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

/* Every search twice: reading to the read that returns 0, and ending at
 * the first short read (a file of a local filesystem): the same lines,
 * counts and bytes either way. */
static struct scan_result run(const char *pat, const struct scan_opts *o, const char *text, size_t n, struct got *g)
{
	struct got *g2 = calloc(1, sizeof(*g2));
	struct scan_result r, r2;

	cr_assert_not_null(g2);
	g2->pause_every = g->pause_every;
	r = run_once(pat, o, text, n, g, false);
	r2 = run_once(pat, o, text, n, g2, true);
	cr_assert_str_eq(g2->s, g->s);
	cr_assert_eq(r2.matches, r.matches);
	cr_assert_eq(r2.bytes, r.bytes);
	cr_assert_eq(r2.binary, r.binary);
	cr_assert_eq(r2.quit, r.quit);
	free(g2);
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

/*
 * Random files, some with lines longer than the window, against a naive
 * line-by-line search of the same bytes in memory: the same lines, the
 * same columns, the same context, whatever the windows cut.
 */
static unsigned rnd_state = 12345;
static unsigned rnd(unsigned n)
{
	rnd_state = rnd_state * 1103515245 + 12345;
	return (rnd_state >> 8) % n;
}

struct naive_hit {
	uint64_t line, col;
};

static size_t naive_hits(const char *t, size_t n, const char *needle, struct naive_hit *out, size_t max)
{
	size_t k = 0, ls = 0, nl = strlen(needle);
	uint64_t line = 1;

	while (ls <= n && k < max) {
		const char *e = memchr(t + ls, '\n', n - ls);
		size_t le = e ? (size_t)(e - t) : n;
		if (le == n && ls == n)
			break;
		const char *f = memmem(t + ls, le - ls, needle, nl);
		if (f)
			out[k++] = (struct naive_hit){ line, (uint64_t)(f - (t + ls)) + 1 };
		line++;
		ls = le + 1;
	}
	return k;
}

Test(scan, windows_against_a_naive_search, .timeout = 120)
{
	for (int round = 0; round < 12; round++) {
		size_t cap = 3 * SCAN_WINDOW, n = 0;
		char *t = malloc(cap);
		/* lines: mostly short, some empty, now and then one longer than a window */
		while (n < cap - 64) {
			size_t len = rnd(10) == 0 ? rnd(2 * SCAN_WINDOW) : rnd(120);
			if (n + len + 1 > cap)
				len = cap - n - 1;
			for (size_t i = 0; i < len; i++)
				t[n + i] = "abcdefgh "[rnd(9)];
			if (len >= 6 && rnd(3) == 0)
				memcpy(t + n + rnd((unsigned)(len - 5)), "NEEDLE", 6);
			n += len;
			t[n++] = '\n';
		}
		if (round % 2)
			n--; /* no newline at the end */
		static struct naive_hit want[4096];
		size_t nw = naive_hits(t, n, "NEEDLE", want, 4096);
		struct scan_opts o = { .mode = SCAN_CONTENT, .max_line = 50 };
		static struct got g;
		memset(&g, 0, sizeof(g));
		struct scan_result r = run("NEEDLE", &o, t, n, &g);
		static char exp[65536];
		size_t w = 0;
		for (size_t i = 0; i < nw && w < sizeof(exp) - 64; i++)
			w += (size_t)snprintf(exp + w, sizeof(exp) - w, "%llu:%llu;", (unsigned long long)want[i].line,
					      (unsigned long long)want[i].col);
		/* the collected text has "line:col:text;" entries: compare line:col only */
		static char gotlc[65536];
		size_t gw = 0;
		for (char *p = g.s; *p && gw < sizeof(gotlc) - 64;) {
			char *c1 = strchr(p, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL, *semi = c2 ? strchr(c2, ';') : NULL;
			if (!semi)
				break;
			gw += (size_t)snprintf(gotlc + gw, sizeof(gotlc) - gw, "%.*s;", (int)(c2 - p), p);
			p = semi + 1;
		}
		gotlc[gw] = '\0';
		cr_expect_eq(r.matches, nw, "round %d: %llu matches, %zu expected", round, (unsigned long long)r.matches, nw);
		cr_expect_str_eq(gotlc, exp, "round %d", round);
		free(t);
	}
}

/* Context lines against the naive answer, across window edges. */
Test(scan, context_against_a_naive_search, .timeout = 120)
{
	for (int round = 0; round < 6; round++) {
		size_t cap = SCAN_WINDOW + 50000, n = 0, nlines = 0;
		char *t = malloc(cap);
		static size_t starts[1 << 16];
		while (n < cap - 200 && nlines < (1 << 16) - 1) {
			size_t len = rnd(150);
			starts[nlines++] = n;
			for (size_t i = 0; i < len; i++)
				t[n + i] = "xyz "[rnd(4)];
			if (len >= 6 && rnd(40) == 0)
				memcpy(t + n + rnd((unsigned)(len - 5)), "NEEDLE", 6);
			n += len;
			t[n++] = '\n';
		}
		unsigned B = 1 + rnd(3), A = 1 + rnd(3);
		static char exp[1 << 20];
		size_t w = 0;
		for (size_t i = 0; i < nlines; i++) {
			size_t le = (i + 1 < nlines ? starts[i + 1] : n) - 1;
			const char *f = memmem(t + starts[i], le - starts[i], "NEEDLE", 6);
			if (!f)
				continue;
			w += (size_t)snprintf(exp + w, sizeof(exp) - w, "%zu:%zu:", i + 1, (size_t)(f - (t + starts[i])) + 1);
			size_t tl = le - starts[i] > 40 ? 40 : le - starts[i];
			w += (size_t)snprintf(exp + w, sizeof(exp) - w, "%.*s%s", (int)tl, t + starts[i], "");
			for (size_t b = i >= B ? i - B : 0; b < i; b++)
				w += (size_t)snprintf(exp + w, sizeof(exp) - w, " b%zu", b + 1);
			for (size_t a = i + 1; a <= i + A && a < nlines; a++)
				w += (size_t)snprintf(exp + w, sizeof(exp) - w, " a%zu", a + 1);
			w += (size_t)snprintf(exp + w, sizeof(exp) - w, ";");
		}
		struct scan_opts o = { .mode = SCAN_CONTENT, .max_line = 1000, .before = B, .after = A };
		static struct got g;
		memset(&g, 0, sizeof(g));
		g.pause_every = 1 + (int)rnd(4); /* and resumed between matches */
		run("NEEDLE", &o, t, n, &g);
		cr_expect_str_eq(g.s, exp, "round %d (B %u A %u)", round, B, A);
		free(t);
	}
}

/* A scanner kept for another search (scanner_rebind): the new pattern
 * and options, nothing of the last file. */
/* fd scanned by s from its start into a fresh g: the last run's result. */
static int scan_again(struct scanner *s, int fd, struct got *g)
{
	int rc;

	lseek(fd, 0, SEEK_SET);
	g->w = 0;
	g->s[0] = '\0';
	scanner_start(s, fd, false);
	while ((rc = scanner_run(s, collect, g)) == SCAN_PAUSED)
		;
	return rc;
}

Test(scan, rebound_to_another_pattern)
{
	struct pattern_opts po = { 0 };
	struct pattern *a, *b;
	char err[128];
	struct scan_opts o = { .mode = SCAN_CONTENT };
	struct got g = { .w = 0 };
	int fd = file_with(T, strlen(T));

	cr_assert_eq(pattern_compile("x", 1, &po, &a, err, sizeof(err)), 0);
	cr_assert_eq(pattern_compile("sun", 3, &po, &b, err, sizeof(err)), 0);
	struct scanner *s = scanner_new(a, &o);
	cr_assert_eq(scan_again(s, fd, &g), SCAN_DONE);
	cr_assert_eq(scanner_result(s)->matches, 3);
	o.before = 1;
	cr_assert_eq(scanner_rebind(s, b, &o), 0);
	cr_assert_eq(scan_again(s, fd, &g), SCAN_DONE);
	cr_assert_eq(scanner_result(s)->matches, 1);
	cr_assert_str_eq(g.s, "6:1:sun b5;");
	scanner_free(s);
	pattern_free(a);
	pattern_free(b);
	close(fd);
}

/* Rebound with a larger maxLineBytes, a kept scanner's context lines
 * (made for the smaller one) grow: a long context line is copied whole,
 * within bounds (ASan in the unit build). */
Test(scan, rebound_to_longer_lines)
{
	struct pattern_opts po = { 0 };
	struct pattern *p;
	char err[128], text[4096];
	struct scan_opts o = { .mode = SCAN_CONTENT, .before = 1, .after = 1, .max_line = 8 };
	struct got g = { .w = 0 };
	int fd;

	memset(text, 'y', 1500);
	memcpy(text + 1500, "\nmatch\n", 7);
	memset(text + 1507, 'z', 1500);
	text[3007] = '\n';
	fd = file_with(text, 3008);
	cr_assert_eq(pattern_compile("match", 5, &po, &p, err, sizeof(err)), 0);
	struct scanner *s = scanner_new(p, &o);
	cr_assert_eq(scan_again(s, fd, &g), SCAN_DONE);
	cr_assert_eq(scanner_result(s)->matches, 1);
	o.max_line = 2000;
	cr_assert_eq(scanner_rebind(s, p, &o), 0);
	cr_assert_eq(scan_again(s, fd, &g), SCAN_DONE);
	cr_assert_str_eq(g.s, "2:1:match b1 a3;");
	scanner_free(s);
	pattern_free(p);
	close(fd);
}

/* A line of bytes that are not UTF-8, shorter than maxBytes: each byte
 * becomes U+FFFD (three bytes), all of them kept. */
Test(scan, read_lines_of_invalid_bytes)
{
	char text[] = "\xff\xfe\xfd\xfc\xfb\xfa\xf9\xf8\xff\xfe\nok\n";
	struct scan_lines l = rl(text, strlen(text), 1, 10, 1000);
	char want[64] = "";

	for (int i = 0; i < 10; i++)
		strcat(want, "\xef\xbf\xbd");
	cr_assert_eq(l.n, 2);
	cr_expect_str_eq(l.lines[0], want);
	cr_expect_str_eq(l.lines[1], "ok");
	scan_lines_free(&l);
}

/* A short read ends the file only when the caller says so. A pipe that
 * holds two lines and whose writer stays open: told, the scan ends after
 * the first read; not told, it reads again (and, the pipe being
 * non-blocking, fails with EAGAIN instead of waiting for more). */
Test(scan, short_read_ends_only_when_told)
{
	struct pattern_opts po = { 0 };
	struct pattern *p;
	char err[128];
	struct scan_opts o = { .mode = SCAN_COUNT };

	cr_assert_eq(pattern_compile("x", 1, &po, &p, err, sizeof(err)), 0);
	for (int told = 0; told < 2; told++) {
		int fds[2];
		cr_assert_eq(pipe2(fds, O_NONBLOCK), 0);
		cr_assert_eq(write(fds[1], "x\ny x\n", 6), 6);
		struct scanner *s = scanner_new(p, &o);
		cr_assert_not_null(s);
		scanner_start(s, fds[0], told);
		int rc = scanner_run(s, collect, NULL);
		if (told) {
			cr_assert_eq(rc, SCAN_DONE);
			cr_assert_eq(scanner_result(s)->matches, 2);
			cr_assert_eq(scanner_result(s)->bytes, 6);
		} else {
			cr_assert_eq(rc, -EAGAIN);
		}
		scanner_free(s);
		close(fds[0]);
		close(fds[1]);
	}
	pattern_free(p);
}

/* A NUL byte anywhere (in the 64-byte steps of the vector look or in
 * the tail after them) makes the file binary; none, and it is text. */
Test(scan, nul_found_at_every_offset)
{
	struct scan_opts o = { .mode = SCAN_COUNT, .quit_on_binary = true };
	char text[300];

	for (size_t at = 0; at <= sizeof(text); at++) {
		struct got g = { .w = 0 };
		memset(text, 'a', sizeof(text));
		for (size_t k = 50; k < sizeof(text); k += 51)
			text[k] = '\n';
		if (at < sizeof(text))
			text[at] = '\0';
		struct scan_result r = run("zz", &o, text, sizeof(text), &g);
		cr_assert_eq(r.binary, at < sizeof(text), "NUL at %zu", at);
	}
}

/* A literal is found at every offset of a line, as its first and only
 * match: the vector look over 16 positions at a time and the tail. */
Test(scan, literal_at_every_offset)
{
	struct scan_opts o = { .mode = SCAN_CONTENT, .max_line = 500 };
	char text[120], want[32];

	for (size_t at = 0; at + 9 <= 100; at++) {
		struct got g = { .w = 0 };
		memset(text, 'z', 100);
		memcpy(text + at, "zqxjTOKEN", 9);
		text[100] = '\n';
		struct scan_result r = run("zqxjTOKEN", &o, text, 101, &g);
		cr_assert_eq(r.matches, 1, "at %zu", at);
		snprintf(want, sizeof(want), "1:%zu:", at + 1);
		cr_assert_eq(strncmp(g.s, want, strlen(want)), 0, "at %zu: %s", at, g.s);
	}
}
