/* SPDX-License-Identifier: Apache-2.0 */
/*
 * udiff.h - the unified diff of two texts (docs/try.md, "Unified diffs"):
 * what `diff -u` prints, from two buffers, with no process and no file.
 *
 * Lines are compared whole (a hash, then the bytes). The edit script is
 * Myers' O(ND) algorithm in linear space (the middle snake, split and
 * recursion) on what is left between the common head and tail. Its work is
 * bounded (UDIFF_WORK steps of the snake searches in all): past that the
 * rest of a region is given as removed then added, a correct diff that is
 * not the shortest. Hunks carry three lines of context and are numbered
 * as GNU diff numbers them; a last line without a newline is followed by
 * "\ No newline at end of file".
 *
 * Pure: no I/O, any thread. Errors: -ENOMEM.
 */
#ifndef TRY_UDIFF_H
#define TRY_UDIFF_H

#include <stdbool.h>
#include <stddef.h>

/* Snake steps one diff may take before it settles for a longer script. */
#define UDIFF_WORK (8u * 1000 * 1000)
#define UDIFF_CONTEXT 3

/*
 * The diff of a (old) and b (new) under the header lines "--- <a_name>" and
 * "+++ <b_name>", into *out (malloc'ed, NUL-terminated, *out_len bytes; an
 * empty string when the texts are equal). At most `cap` bytes: a diff that
 * does not fit is cut after its last whole line that does, and *truncated
 * is set. 0, or -ENOMEM (nothing to free then).
 */
int udiff_text(const char *a, size_t alen, const char *b, size_t blen, const char *a_name, const char *b_name,
	       size_t cap, char **out, size_t *out_len, bool *truncated);

#endif
