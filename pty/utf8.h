/* SPDX-License-Identifier: Apache-2.0 */
/*
 * utf8.h - cut terminal output on character boundaries.
 *
 * A read from a PTY (or a pipe) ends wherever the kernel's buffer did, often
 * inside a multi-byte UTF-8 character; SDKs that decode each data event on
 * its own then print replacement characters. utf8_complete_len() says how
 * much of a chunk can go out now; the rest (at most 3 bytes) waits for the
 * next read, and goes out as it is at EOF.
 *
 * Pure function: no I/O, no allocation. Errors: none.
 */
#ifndef PTY_UTF8_H
#define PTY_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Longest incomplete tail utf8_complete_len() can hold back. */
#define UTF8_MAX_TAIL 3

/*
 * Length of the longest prefix of p[0..n) that does not end inside a UTF-8
 * sequence: n, unless the last 1-3 bytes are the start of a well-formed
 * sequence that needs more bytes, in which case the length before that
 * start. Malformed bytes are never held back (they cannot complete), so
 * binary output passes through unchanged.
 */
size_t utf8_complete_len(const uint8_t *p, size_t n);

#endif
