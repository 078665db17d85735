/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ignore.h - ignore files as ripgrep reads them by default: .gitignore,
 * .git/info/exclude, .ignore and .rgignore (docs/protocol.md, "Ignore
 * rules").
 *
 * One file is parsed into rules (gitignore syntax: '#' comments, '!'
 * negation, a trailing '/' for directories only, a '/' at the start or in
 * the middle anchoring the pattern at the file's directory, otherwise a
 * match at any depth below it; globs as search/glob.h). Within a file the
 * last rule that matches decides.
 *
 * A walk keeps a chain of levels, one per directory that holds ignore
 * files or a .git, each pointing at its parent's; a path is judged as
 * ripgrep judges it:
 *   - per kind of file, the deepest level with a matching rule decides;
 *   - .rgignore before .ignore before .gitignore before .git/info/exclude;
 *   - .gitignore and exclude apply only inside a git repository (a level
 *     at or above the path has .git) unless the walk says otherwise, and
 *     never from levels above the repository's top;
 *   - a directory that is ignored is not entered, so nothing below it can
 *     be re-included ("dist/" then "!dist/keep.js" keeps it ignored;
 *     a rule for dist's contents, "dist/" and a star, then "!dist/keep.js"
 *     lets it through), as in git.
 *
 * Ownership: rules belong to the level they are given to; levels are
 * reference counted (atomically: walker threads share them) and freed
 * with their last reference, which also releases the parent's.
 *
 * Errors: ignore_parse() returns 0 or -ENOMEM; a line that is not a valid
 * glob is skipped (as git and ripgrep do).
 */
#ifndef SEARCH_IGNORE_H
#define SEARCH_IGNORE_H

#include <stdbool.h>
#include <stddef.h>

/* Ignore files are read up to this many bytes. */
#define IGNORE_FILE_MAX (1024 * 1024)

enum ignore_match {
	IGNORE_NONE,      /* no rule says anything */
	IGNORE_IGNORED,
	IGNORE_WHITELIST, /* a '!' rule matched last */
};

struct ignore_rules;

/* Parse an ignore file's bytes; *out is NULL for a file without rules. */
int ignore_parse(const char *text, size_t len, struct ignore_rules **out);
void ignore_rules_free(struct ignore_rules *r);
/* Rules in the set (for tests). */
size_t ignore_rules_count(const struct ignore_rules *r);

/* Match a path relative to the rules' directory. */
enum ignore_match ignore_rules_match(const struct ignore_rules *r, const char *rel, size_t len, bool is_dir);

enum ignore_kind {
	IGNORE_RG,      /* .rgignore */
	IGNORE_IGNORE,  /* .ignore */
	IGNORE_GIT,     /* .gitignore */
	IGNORE_EXCLUDE, /* .git/info/exclude */
	IGNORE_KINDS,
};

struct ignore_level {
	struct ignore_level *parent;
	unsigned refs;          /* atomic */
	size_t dirlen;          /* bytes of the directory's path ("/a/b": 4; "/": 0) */
	struct ignore_rules *rules[IGNORE_KINDS];
	bool has_git;           /* the directory holds .git */
	bool in_repo;           /* it or an ancestor level holds .git */
};

/*
 * A level for the directory whose path is dirlen bytes long (rules taken
 * over, NULL where absent; the parent's reference is taken). NULL when out
 * of memory, with the rules freed.
 */
struct ignore_level *ignore_level_new(struct ignore_level *parent, size_t dirlen, bool has_git,
				      struct ignore_rules *rules[IGNORE_KINDS]);
struct ignore_level *ignore_level_ref(struct ignore_level *lv);
void ignore_level_unref(struct ignore_level *lv);

/*
 * Judge `path` (absolute, as the levels' dirlen counts it; len bytes) by
 * the chain from `lv` up. git_anywhere: apply .gitignore and exclude even
 * outside a repository (ripgrep's --no-require-git).
 */
enum ignore_match ignore_judge(const struct ignore_level *lv, const char *path, size_t len, bool is_dir,
			       bool git_anywhere);

#endif
