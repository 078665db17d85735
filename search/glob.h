/* SPDX-License-Identifier: Apache-2.0 */
/*
 * glob.h - shell-style glob patterns matched against relative paths: the
 * Glob RPC's pattern, Grep's include/exclude globs and the lines of ignore
 * files (search/ignore.h).
 *
 * Syntax (gitignore's, as git and ripgrep read it):
 *   *        any run of characters except '/'
 *   ?        one character except '/'
 *   [...]    one character of a set: ranges (a-z), negation ([!..] or
 *            [^..]), POSIX classes ([:alpha:] ...), ']' first is literal
 *   {a,b}    one of the alternatives, which may nest ({a,{b,c}d})
 *   **       as a whole path component: "**" + "/" at the start is any
 *            number of leading directories (also none), "/" + "**" at the
 *            end is everything inside, "/" + "**" + "/" in the middle is
 *            one or more directories' worth of separators (also "/" alone);
 *            elsewhere ** is *
 *   \c       the character c itself
 * Characters are UTF-8 code points ('?' matches one of them, not a byte);
 * a byte that is not valid UTF-8 stands for itself.
 *
 * Matching costs O(path length x pattern length) at worst (a set of
 * positions is stepped through the path, never backtracking), and the
 * common shapes (a literal, "*.ext", "**" + "/" + "*.ext", "dir/" + "**")
 * take a compare or two.
 *
 * Ownership: a compiled glob is the caller's, freed with glob_free(); it
 * is read-only after glob_compile() and may be matched from many threads.
 *
 * Errors: glob_compile() returns 0 or -EINVAL (with the reason and its
 * byte offset in the pattern, from 0, in err: an unclosed [ or {, a trailing \,
 * too many {} alternatives or a pattern over GLOB_MAX bytes), -ENOMEM.
 */
#ifndef SEARCH_GLOB_H
#define SEARCH_GLOB_H

#include <stdbool.h>
#include <stddef.h>

#define GLOB_MAX 4096     /* bytes of one pattern */
#define GLOB_ALTS_MAX 256 /* alternatives after {} expansion */

/* A pattern without a '/' (other than a trailing one, which the caller
 * strips) is matched against the last component of the path only, at any
 * depth: gitignore's rule and ripgrep's -g. Without the flag the pattern
 * is matched against the whole relative path. */
#define GLOB_BASENAME 1u
/* A leading '/' anchors the pattern at the root and is dropped (ignore
 * files); without it a leading '/' is part of the pattern. */
#define GLOB_LEADING_SLASH 2u

struct glob;

int glob_compile(const char *pat, size_t len, unsigned flags, struct glob **out, char *err, size_t errlen);
void glob_free(struct glob *g);

/* Does the relative path (components separated by '/', no leading or
 * trailing '/') match? */
bool glob_match(const struct glob *g, const char *path, size_t len);

/*
 * For pruning a walk: may a path below the relative directory `dir`
 * ("" for the root) match? False only when no alternative can match
 * anything under it (its leading literal components differ, or the
 * pattern has fewer components than the path would); true when unsure.
 */
bool glob_may_match_under(const struct glob *g, const char *dir, size_t len);

/* True if the pattern has no special characters at all (it names one
 * path). */
bool glob_is_literal(const struct glob *g);

#endif
