/* SPDX-License-Identifier: Apache-2.0 */
/*
 * scan.h - one file searched for Grep, or read by lines for ReadLines, in
 * bounded windows.
 *
 * A file is read SCAN_WINDOW bytes at a time; only whole lines are
 * searched, the unfinished last line moves to the front of the window
 * with the next read. A line longer than the window is searched in
 * pieces: each piece keeps the last SCAN_OVERLAP bytes of the one before,
 * so a match up to that long is found wherever it lies; a longer match
 * that crosses the edge between two pieces is not. Such a line is
 * reported with its first max_line bytes. Memory per scanner is the
 * window plus the context lines it holds (at most
 * (2 * SCAN_CONTEXT_MAX + 1) lines of SCAN_LINE_MAX bytes per pending
 * match, SCAN_CONTEXT_MAX + 1 of them), whatever the file's size.
 *
 * Text handed out is valid UTF-8 without NUL bytes: a line is cut at
 * max_line bytes on a character boundary, and NULs and bytes that are not
 * UTF-8 become U+FFFD.
 *
 * A scanner belongs to one thread at a time; it can be paused between two
 * matches (the emit callback asks) and resumed with scanner_run(), so a
 * caller whose output is full can give its thread back and come back
 * later.
 *
 * Errors: scanner_new() returns NULL when out of memory. scanner_run()
 * returns SCAN_DONE, SCAN_PAUSED, or a negative errno: the read's, -E2BIG
 * (the pattern hit its match limit: the message names the line), -ENOMEM.
 * scan_read_lines() returns 0 or a negative errno of the read, -ENOMEM.
 */
#ifndef SEARCH_SCAN_H
#define SEARCH_SCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "search/pattern.h"

#define SCAN_WINDOW (256 * 1024)
#define SCAN_OVERLAP 4096
#define SCAN_CONTEXT_MAX 10
#define SCAN_LINE_MAX 16384

enum scan_mode {
	SCAN_CONTENT, /* each matching line, with context */
	SCAN_FILES,   /* stop at the first match */
	SCAN_COUNT,   /* count matching lines */
};

struct scan_opts {
	enum scan_mode mode;
	unsigned before, after;  /* context lines, <= SCAN_CONTEXT_MAX */
	size_t max_line;         /* bytes of a line's text, 1..SCAN_LINE_MAX */
	uint64_t max_count;      /* matching lines per file; 0: no limit */
	bool quit_on_binary;     /* stop at a NUL byte (a file found by a walk) */
};

struct scan_line {
	uint64_t no;      /* 1-based */
	const char *text; /* valid UTF-8, len bytes and a NUL */
	size_t len;
	bool cut;         /* the line was longer than max_line */
};

struct scan_match {
	struct scan_line line;
	uint64_t column;            /* 1-based byte offset of the match in the line */
	const struct scan_line *before;
	size_t n_before;
	const struct scan_line *after;
	size_t n_after;
};

/* Called per matching line in SCAN_CONTENT mode; the match is valid
 * during the call. Return true to pause the scan after this call. */
typedef bool (*scan_emit_fn)(void *ud, const struct scan_match *m);

struct scan_result {
	uint64_t matches;   /* matching lines */
	uint64_t bytes;     /* bytes read */
	bool binary;        /* a NUL byte was seen */
	bool quit;          /* stopped at it (quit_on_binary) */
	uint64_t limit_line; /* with -E2BIG: the line the pattern gave up on */
};

enum { SCAN_DONE = 0, SCAN_PAUSED = 1 };

struct scanner;

struct scanner *scanner_new(const struct pattern *p, const struct scan_opts *o);
void scanner_free(struct scanner *s);
/*
 * A scanner kept for another search (its window and line buffers are
 * allocated once): bound to pattern p and options o anew. Not in the
 * middle of a file. 0, or -ENOMEM (then only scanner_free may follow).
 */
int scanner_rebind(struct scanner *s, const struct pattern *p, const struct scan_opts *o);
/* Begin a file (fd is borrowed until scanner_run() says SCAN_DONE or an
 * error). short_read_ends: fd is a regular file of a filesystem where a
 * read that returns less than asked has met the end of the file
 * (walk_entry.local); the file is then read without the last read that
 * would return 0, one system call less per small file. */
void scanner_start(struct scanner *s, int fd, bool short_read_ends);
int scanner_run(struct scanner *s, scan_emit_fn emit, void *ud);
const struct scan_result *scanner_result(const struct scanner *s);

/* --- ReadLines --- */

struct scan_lines {
	char **lines;      /* valid UTF-8, NUL-terminated, heap */
	size_t n;
	uint64_t first;    /* number of lines[0] (= the offset asked for) */
	uint64_t total;    /* lines in the file */
	bool truncated;    /* cut by limit or max_bytes, or a line cut */
	bool binary;       /* a NUL in the first window: no lines given */
};

/*
 * Lines offset.. (1-based) of the file at fd, at most `limit` of them
 * and max_bytes of text in all (a line is cut to what is left; the first
 * one always gets at least part), then the rest of the file is counted.
 * buf: a window of SCAN_WINDOW bytes of the caller's.
 */
int scan_read_lines(int fd, uint64_t offset, uint64_t limit, size_t max_bytes, char *buf, struct scan_lines *out);
void scan_lines_free(struct scan_lines *l);

/* Newlines in s[0, n) (vectorised). */
size_t scan_count_lines(const char *s, size_t n);

/* Copy up to max bytes of src into dst (room for max bytes) as valid
 * UTF-8 without NULs (U+FFFD for a NUL or a byte that is not UTF-8), cut
 * on a character boundary; returns the length; *cut when src did not
 * fit. */
size_t scan_utf8_copy(char *dst, const char *src, size_t n, size_t max, bool *cut);

#endif
