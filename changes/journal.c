/* SPDX-License-Identifier: Apache-2.0 */
/*
 * journal.c - the change journal's core: a hash table of paths threaded
 * on a list ordered by last change, so "since T" walks back from the
 * newest entry only as far as T, and forgetting takes the oldest.
 */
#include "changes/journal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint32_t path_hash(const char *s)
{
	uint32_t h = 2166136261u; /* FNV-1a */

	while (*s) {
		h ^= (uint8_t)*s++;
		h *= 16777619u;
	}
	return h;
}

int journal_init(struct journal *j, uint64_t epoch, size_t max_paths)
{
	memset(j, 0, sizeof(*j));
	j->max_paths = max_paths ? max_paths : 1;
	j->tab_n = 1024;
	j->tab = calloc(j->tab_n, sizeof(*j->tab));
	if (!j->tab)
		return -ENOMEM;
	j->epoch = epoch;
	j->bytes = j->tab_n * sizeof(*j->tab);
	return 0;
}

void journal_free(struct journal *j)
{
	struct journal_entry *e = j->head;

	while (e) {
		struct journal_entry *n = e->next;
		free(e);
		e = n;
	}
	free(j->tab);
	memset(j, 0, sizeof(*j));
}

static void list_unlink(struct journal *j, struct journal_entry *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else
		j->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		j->tail = e->prev;
	e->prev = e->next = NULL;
}

static void list_append(struct journal *j, struct journal_entry *e)
{
	e->prev = j->tail;
	e->next = NULL;
	if (j->tail)
		j->tail->next = e;
	else
		j->head = e;
	j->tail = e;
}

static struct journal_entry *find(const struct journal *j, const char *path, uint32_t h)
{
	for (struct journal_entry *e = j->tab[h & (j->tab_n - 1)]; e; e = e->hnext)
		if (e->hash == h && strcmp(e->path, path) == 0)
			return e;
	return NULL;
}

static void tab_remove(struct journal *j, struct journal_entry *e)
{
	struct journal_entry **pp = &j->tab[e->hash & (j->tab_n - 1)];

	while (*pp && *pp != e)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = e->hnext;
}

/* Grow the table at a load of 1; on failure keep the old (longer chains). */
static void tab_grow(struct journal *j)
{
	size_t nn = j->tab_n * 2;
	struct journal_entry **nt;

	if (j->n < j->tab_n)
		return;
	nt = calloc(nn, sizeof(*nt));
	if (!nt)
		return;
	for (size_t i = 0; i < j->tab_n; i++) {
		struct journal_entry *e = j->tab[i];
		while (e) {
			struct journal_entry *n = e->hnext;
			e->hnext = nt[e->hash & (nn - 1)];
			nt[e->hash & (nn - 1)] = e;
			e = n;
		}
	}
	free(j->tab);
	j->bytes += (nn - j->tab_n) * sizeof(*nt);
	j->tab = nt;
	j->tab_n = nn;
}

static void forget_oldest(struct journal *j)
{
	struct journal_entry *e = j->head;

	if (!e)
		return;
	if (e->seq > j->floor)
		j->floor = e->seq;
	list_unlink(j, e);
	tab_remove(j, e);
	j->n--;
	j->bytes -= sizeof(*e) + strlen(e->path) + 1;
	free(e);
}

void journal_gap(struct journal *j)
{
	/* The lost events happened before the next number. */
	j->floor = ++j->seq;
}

uint64_t journal_checkpoint(struct journal *j)
{
	if (j->seq > j->issued)
		j->issued = j->seq;
	return j->seq;
}

static struct journal_entry *entry_new(struct journal *j, const char *path, uint32_t h)
{
	size_t len = strlen(path);
	struct journal_entry *e = calloc(1, sizeof(*e) + len + 1);

	if (!e)
		return NULL;
	memcpy(e->path, path, len + 1);
	e->hash = h;
	e->hnext = j->tab[h & (j->tab_n - 1)];
	j->tab[h & (j->tab_n - 1)] = e;
	j->n++;
	j->bytes += sizeof(*e) + len + 1;
	return e;
}

int journal_record(struct journal *j, const struct journal_event *ev)
{
	uint32_t h = path_hash(ev->path);
	struct journal_entry *e = find(j, ev->path, h);
	uint64_t seq = j->seq + 1;

	if (!e) {
		if (j->n >= j->max_paths)
			forget_oldest(j);
		e = entry_new(j, ev->path, h);
		if (!e) {
			journal_gap(j);
			return -ENOMEM;
		}
		e->first_seq = e->seg_seq = seq;
		e->first_existed = e->seg_existed = !ev->was_absent;
		tab_grow(j);
	} else {
		list_unlink(j, e);
		/* A checkpoint was handed out since the last change: what the
		 * path was like then is what "since" that checkpoint compares to. */
		if (j->issued >= e->seq) {
			e->seg_seq = seq;
			e->seg_existed = ev->was_absent ? false : e->exists;
		}
	}
	j->seq = seq;
	e->seq = seq;
	for (unsigned k = 0; k < JK_N; k++)
		if (ev->kinds & (1u << k))
			e->kseq[k] = seq;
	e->exists = ev->exists;
	if (ev->ftype != JF_UNKNOWN || !e->ftype)
		e->ftype = ev->ftype;
	e->size = ev->exists ? ev->size : -1;
	e->time_ns = ev->time_ns;
	/* The latest change names who made it; an unattributed event does not
	 * erase a known author of the same path. */
	if (ev->attr != JA_UNKNOWN || e->attr == JA_UNKNOWN) {
		e->attr = ev->attr;
		e->cmd = ev->cmd;
	}
	list_append(j, e);
	return 0;
}

void journal_token(const struct journal *j, uint64_t base, uint64_t cursor, char *out)
{
	snprintf(out, JOURNAL_TOKEN_LEN, "c1-%016" PRIx64 "-%" PRIx64 "-%" PRIx64, j->epoch, base, cursor);
}

static int parse_hex(const char **p, uint64_t *out, size_t maxdig)
{
	uint64_t v = 0;
	size_t n = 0;

	while (**p) {
		char c = **p;
		unsigned d;
		if (c >= '0' && c <= '9')
			d = (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			d = (unsigned)(c - 'a' + 10);
		else
			break;
		if (++n > maxdig)
			return -EINVAL;
		v = v << 4 | d;
		(*p)++;
	}
	if (!n)
		return -EINVAL;
	*out = v;
	return 0;
}

int journal_parse_token(const struct journal *j, const char *tok, uint64_t *base, uint64_t *cursor)
{
	const char *p = tok;
	uint64_t epoch, b, c;

	if (!tok || strncmp(p, "c1-", 3) != 0)
		return -EINVAL;
	p += 3;
	if (parse_hex(&p, &epoch, 16) || *p++ != '-' || parse_hex(&p, &b, 16) || *p++ != '-' ||
	    parse_hex(&p, &c, 16) || *p)
		return -EINVAL;
	if (c < b)
		return -EINVAL;
	if (epoch != j->epoch)
		return 1;
	if (c > j->seq)
		return -EINVAL;
	*base = b;
	*cursor = c;
	return 0;
}

void journal_query_init(struct journal_query *q)
{
	memset(q, 0, sizeof(*q));
	q->skip_transient = true;
}

/* ---- globs ---- */

static bool glob_at(const char *p, const char *s)
{
	for (;;) {
		if (*p == '\0')
			return *s == '\0';
		if (p[0] == '*' && p[1] == '*') {
			const char *rest = p + 2;
			/* a trailing "**" after a slash also matches the directory itself */
			if (*rest == '\0')
				return true;
			if (*rest == '/' && glob_at(rest + 1, s))
				return true; /* zero components */
			for (const char *t = s;; t++) {
				if (glob_at(rest, t))
					return true;
				if (*t == '\0')
					return false;
			}
		}
		if (*p == '*') {
			for (const char *t = s;; t++) {
				if (glob_at(p + 1, t))
					return true;
				if (*t == '\0' || *t == '/')
					return false;
			}
		}
		if (*s == '\0')
			return false;
		if (*p == '?') {
			if (*s == '/')
				return false;
		} else if (*p != *s) {
			return false;
		}
		p++;
		s++;
	}
}

bool journal_glob(const char *pattern, const char *rel)
{
	size_t pl = strlen(pattern);

	if (pl >= 3 && strcmp(pattern + pl - 3, "/**") == 0) {
		/* "dir" + "/" + "**": the directory and everything below it */
		char tmp[4096];
		if (pl - 3 < sizeof(tmp)) {
			memcpy(tmp, pattern, pl - 3);
			tmp[pl - 3] = '\0';
			if (journal_glob(tmp, rel))
				return true;
		}
	}
	if (*pattern == '/')
		return glob_at(pattern + 1, rel);
	/* Unanchored: try at every directory boundary. */
	for (const char *s = rel;;) {
		if (glob_at(pattern, s))
			return true;
		s = strchr(s, '/');
		if (!s)
			return false;
		s++;
	}
}

/* ---- queries ---- */

static bool existed_at(const struct journal_entry *e, uint64_t base)
{
	if (base < e->first_seq)
		return e->first_existed;
	return e->seg_existed;
}

static bool under_prefix(const char *path, const char *prefix, const char **rel)
{
	size_t l;

	if (!prefix || !*prefix || strcmp(prefix, "/") == 0) {
		*rel = path[0] == '/' ? path + 1 : path;
		return true;
	}
	l = strlen(prefix);
	while (l > 1 && prefix[l - 1] == '/')
		l--;
	if (strncmp(path, prefix, l) != 0)
		return false;
	if (path[l] == '\0') {
		*rel = "";
		return true;
	}
	if (path[l] != '/')
		return false;
	*rel = path + l + 1;
	return true;
}

static bool wanted(const struct journal_query *q, const struct journal_entry *e)
{
	const char *rel;

	if (q->by_cmd) {
		bool by = e->attr == JA_BY && e->cmd == q->by_cmd;
		bool during = q->with_during && (e->attr == JA_GONE || e->attr == JA_UNKNOWN);
		if (!by && !during)
			return false;
	}
	if (!under_prefix(e->path, q->prefix, &rel))
		return false;
	for (size_t i = 0; i < q->n_exclude; i++)
		if (journal_glob(q->exclude[i], rel))
			return false;
	if (!q->n_include)
		return true;
	for (size_t i = 0; i < q->n_include; i++)
		if (journal_glob(q->include[i], rel))
			return true;
	return false;
}

/*
 * A directory above e was removed or moved away after e's last change:
 * e went with it (the kernel's events for what was inside come from a
 * directory that no longer resolves, so they never reach the journal).
 */
static bool gone_with_parent(const struct journal *j, const struct journal_entry *e)
{
	char tmp[4096];
	size_t l = strlen(e->path);

	if (l >= sizeof(tmp))
		return false;
	memcpy(tmp, e->path, l + 1);
	for (char *s = tmp + l; s > tmp;) {
		while (s > tmp && *s != '/')
			s--;
		if (s == tmp)
			break;
		*s = '\0';
		const struct journal_entry *a = find(j, tmp, path_hash(tmp));
		if (a && a->kseq[2] > e->seq) /* JK_REMOVE */
			return true;
	}
	return false;
}

int journal_run(struct journal *j, const struct journal_query *q, struct journal_result *out)
{
	const struct journal_entry *first = NULL;
	size_t cap = 0;

	memset(out, 0, sizeof(*out));
	if (q->cursor < j->floor || q->base < j->floor) {
		out->resync = true;
		out->next_base = out->next_cursor = journal_checkpoint(j);
		return 0;
	}
	/* Walk back to the first entry after the cursor. */
	for (const struct journal_entry *e = j->tail; e && e->seq > q->cursor; e = e->prev) {
		first = e;
		cap++;
	}
	if (q->limit && cap > q->limit)
		cap = q->limit;
	if (cap && !(out->changes = calloc(cap, sizeof(*out->changes))))
		return -ENOMEM;
	uint64_t now = journal_checkpoint(j);
	out->next_base = out->next_cursor = now;
	for (const struct journal_entry *e = first; e; e = e->next) {
		bool was = existed_at(e, q->base);
		unsigned kinds = 0;

		for (unsigned k = 0; k < JK_N; k++)
			if (e->kseq[k] > q->base)
				kinds |= 1u << k;
		bool now = e->exists && !gone_with_parent(j, e);
		if (!was && !now && q->skip_transient)
			continue;
		if (!wanted(q, e))
			continue;
		if (q->limit && out->n == q->limit) {
			/* Resume after the last one given, types still relative to base. */
			out->more = true;
			out->next_base = q->base;
			out->next_cursor = out->changes[out->n - 1].e->seq;
			break;
		}
		struct journal_change *c = &out->changes[out->n++];
		c->e = e;
		c->kinds = kinds;
		c->exists = now;
		c->type = !was ? JT_CREATED : now ? JT_MODIFIED : JT_DELETED;
	}
	return 0;
}

void journal_result_free(struct journal_result *r)
{
	free(r->changes);
	memset(r, 0, sizeof(*r));
}

void journal_each(const struct journal *j, journal_each_fn fn, void *ud)
{
	for (const struct journal_entry *e = j->head; e; e = e->next)
		fn(ud, e);
}

int journal_restore(struct journal *j, const struct journal_entry *src)
{
	uint32_t h = path_hash(src->path);
	struct journal_entry *e = find(j, src->path, h);

	if (e) {
		list_unlink(j, e);
	} else {
		if (j->n >= j->max_paths)
			forget_oldest(j);
		if (!(e = entry_new(j, src->path, h)))
			return -ENOMEM;
		tab_grow(j);
	}
	e->seq = src->seq;
	e->first_seq = src->first_seq;
	e->seg_seq = src->seg_seq;
	memcpy(e->kseq, src->kseq, sizeof(e->kseq));
	e->size = src->size;
	e->time_ns = src->time_ns;
	e->cmd = src->cmd;
	e->attr = src->attr;
	e->ftype = src->ftype;
	e->exists = src->exists;
	e->first_existed = src->first_existed;
	e->seg_existed = src->seg_existed;
	list_append(j, e);
	if (e->seq > j->seq)
		j->seq = e->seq;
	return 0;
}
