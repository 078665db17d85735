/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ignore.c - ignore files and the chain of levels of a walk (ignore.h).
 */
#include "search/ignore.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "search/glob.h"

struct rule {
	struct glob *g;
	bool negate;
	bool dir_only;
};

struct ignore_rules {
	struct rule *r;
	size_t n;
};

void ignore_rules_free(struct ignore_rules *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n; i++)
		glob_free(r->r[i].g);
	free(r->r);
	free(r);
}

size_t ignore_rules_count(const struct ignore_rules *r)
{
	return r ? r->n : 0;
}

/* One line (no newline) into a rule; false for blanks, comments and
 * invalid globs. */
static int parse_line(const char *s, size_t len, struct rule *out)
{
	char err[128];
	bool negate = false, dir_only = false;

	if (len && s[len - 1] == '\r')
		len--;
	/* Trailing spaces go, unless escaped with a backslash. */
	while (len && s[len - 1] == ' ' && !(len >= 2 && s[len - 2] == '\\'))
		len--;
	if (!len || s[0] == '#')
		return 0;
	if (s[0] == '!') {
		negate = true;
		s++;
		len--;
	} else if (s[0] == '\\' && len > 1 && (s[1] == '#' || s[1] == '!')) {
		s++;
		len--;
	}
	if (len && s[len - 1] == '/') {
		dir_only = true;
		len--;
	}
	if (!len)
		return 0;
	/* "/" + "**" anchors nothing more than "**" does. */
	int rc = glob_compile(s, len, GLOB_BASENAME | GLOB_LEADING_SLASH, &out->g, err, sizeof(err));
	if (rc == -ENOMEM)
		return rc;
	if (rc)
		return 0;
	out->negate = negate;
	out->dir_only = dir_only;
	return 1;
}

int ignore_parse(const char *text, size_t len, struct ignore_rules **out)
{
	struct ignore_rules *r;
	size_t cap = 0, i = 0;

	*out = NULL;
	if (len > IGNORE_FILE_MAX)
		len = IGNORE_FILE_MAX;
	/* A UTF-8 byte order mark is not part of the first pattern. */
	if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0)
		i = 3;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	while (i < len) {
		const char *nl = memchr(text + i, '\n', len - i);
		size_t end = nl ? (size_t)(nl - text) : len;
		struct rule rule;
		int rc = parse_line(text + i, end - i, &rule);

		i = end + 1;
		if (rc < 0) {
			ignore_rules_free(r);
			return rc;
		}
		if (!rc)
			continue;
		if (r->n == cap) {
			struct rule *v = realloc(r->r, (cap = cap ? cap * 2 : 8) * sizeof(*v));
			if (!v) {
				glob_free(rule.g);
				ignore_rules_free(r);
				return -ENOMEM;
			}
			r->r = v;
		}
		r->r[r->n++] = rule;
	}
	if (!r->n) {
		ignore_rules_free(r);
		return 0;
	}
	*out = r;
	return 0;
}

enum ignore_match ignore_rules_match(const struct ignore_rules *r, const char *rel, size_t len, bool is_dir)
{
	if (!r)
		return IGNORE_NONE;
	for (size_t i = r->n; i-- > 0;) {
		const struct rule *ru = &r->r[i];
		if (ru->dir_only && !is_dir)
			continue;
		if (glob_match(ru->g, rel, len))
			return ru->negate ? IGNORE_WHITELIST : IGNORE_IGNORED;
	}
	return IGNORE_NONE;
}

struct ignore_level *ignore_level_new(struct ignore_level *parent, size_t dirlen, bool has_git,
				      struct ignore_rules *rules[IGNORE_KINDS])
{
	struct ignore_level *lv = calloc(1, sizeof(*lv));

	if (!lv) {
		for (int k = 0; k < IGNORE_KINDS; k++)
			ignore_rules_free(rules[k]);
		return NULL;
	}
	lv->parent = parent ? ignore_level_ref(parent) : NULL;
	lv->refs = 1;
	lv->dirlen = dirlen;
	lv->has_git = has_git;
	lv->in_repo = has_git || (parent && parent->in_repo);
	for (int k = 0; k < IGNORE_KINDS; k++)
		lv->rules[k] = rules[k];
	return lv;
}

struct ignore_level *ignore_level_ref(struct ignore_level *lv)
{
	if (lv)
		__atomic_add_fetch(&lv->refs, 1, __ATOMIC_RELAXED);
	return lv;
}

void ignore_level_unref(struct ignore_level *lv)
{
	while (lv && __atomic_sub_fetch(&lv->refs, 1, __ATOMIC_ACQ_REL) == 0) {
		struct ignore_level *parent = lv->parent;
		for (int k = 0; k < IGNORE_KINDS; k++)
			ignore_rules_free(lv->rules[k]);
		free(lv);
		lv = parent;
	}
}

static enum ignore_match level_match(const struct ignore_level *lv, int kind, const char *path, size_t len,
				     bool is_dir)
{
	size_t skip;

	if (!lv->rules[kind])
		return IGNORE_NONE;
	/* The path relative to the level's directory. */
	skip = lv->dirlen + 1;
	if (skip > len)
		return IGNORE_NONE;
	return ignore_rules_match(lv->rules[kind], path + skip, len - skip, is_dir);
}

enum ignore_match ignore_judge(const struct ignore_level *lv, const char *path, size_t len, bool is_dir,
			       bool git_anywhere)
{
	enum ignore_match m[IGNORE_KINDS] = { IGNORE_NONE };
	bool git = git_anywhere || (lv && lv->in_repo);
	bool above_repo = false;

	for (const struct ignore_level *l = lv; l; l = l->parent) {
		if (m[IGNORE_RG] == IGNORE_NONE)
			m[IGNORE_RG] = level_match(l, IGNORE_RG, path, len, is_dir);
		if (m[IGNORE_IGNORE] == IGNORE_NONE)
			m[IGNORE_IGNORE] = level_match(l, IGNORE_IGNORE, path, len, is_dir);
		if (git && !above_repo) {
			if (m[IGNORE_GIT] == IGNORE_NONE)
				m[IGNORE_GIT] = level_match(l, IGNORE_GIT, path, len, is_dir);
			if (m[IGNORE_EXCLUDE] == IGNORE_NONE)
				m[IGNORE_EXCLUDE] = level_match(l, IGNORE_EXCLUDE, path, len, is_dir);
		}
		/* Levels above the repository's top are not the repository's. */
		above_repo = above_repo || l->has_git;
	}
	for (int k = 0; k < IGNORE_KINDS; k++)
		if (m[k] != IGNORE_NONE)
			return m[k];
	return IGNORE_NONE;
}
