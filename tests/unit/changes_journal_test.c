/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "changes/journal.h"

static void rec(struct journal *j, const char *path, unsigned kinds, bool exists)
{
	struct journal_event ev = { 0 };

	ev.path = path;
	ev.kinds = kinds;
	ev.exists = exists;
	ev.was_absent = (kinds & JK_CREATE) != 0;
	ev.ftype = JF_FILE;
	ev.size = exists ? 1 : -1;
	cr_assert_eq(journal_record(j, &ev), 0);
}

static void since(struct journal *j, uint64_t t, struct journal_result *r)
{
	struct journal_query q;

	journal_query_init(&q);
	q.base = q.cursor = t;
	cr_assert_eq(journal_run(j, &q, r), 0);
}

static const struct journal_change *find_change(const struct journal_result *r, const char *path)
{
	for (size_t i = 0; i < r->n; i++)
		if (strcmp(r->changes[i].e->path, path) == 0)
			return &r->changes[i];
	return NULL;
}

Test(journal, rewrites_coalesce_to_one_entry)
{
	struct journal j;
	struct journal_result r;

	cr_assert_eq(journal_init(&j, 7, 100), 0);
	uint64_t t = journal_checkpoint(&j);
	rec(&j, "/a", JK_CREATE | JK_WRITE, true);
	for (int i = 0; i < 10000; i++)
		rec(&j, "/a", JK_WRITE, true);
	since(&j, t, &r);
	cr_assert_eq(r.n, 1);
	cr_expect_eq(r.changes[0].type, JT_CREATED);
	cr_expect_eq(r.changes[0].kinds, JK_CREATE | JK_WRITE);
	cr_expect_not(r.resync);
	journal_result_free(&r);
	cr_expect_eq(j.n, 1);
	journal_free(&j);
}

Test(journal, types_are_relative_to_the_checkpoint)
{
	struct journal j;
	struct journal_result r;

	cr_assert_eq(journal_init(&j, 7, 100), 0);
	rec(&j, "/old", JK_CREATE, true);
	rec(&j, "/gone", JK_CREATE, true);
	rec(&j, "/again", JK_CREATE, true);
	uint64_t t = journal_checkpoint(&j);
	rec(&j, "/old", JK_WRITE, true);
	rec(&j, "/gone", JK_REMOVE, false);
	rec(&j, "/again", JK_REMOVE, false);
	rec(&j, "/again", JK_CREATE, true);
	rec(&j, "/tmp1", JK_CREATE, true);
	rec(&j, "/tmp1", JK_REMOVE, false);
	rec(&j, "/new", JK_CREATE, true);
	since(&j, t, &r);
	cr_assert_eq(r.n, 4, "the created-then-deleted path is left out");
	cr_expect_eq(find_change(&r, "/old")->type, JT_MODIFIED);
	cr_expect_eq(find_change(&r, "/gone")->type, JT_DELETED);
	cr_expect_eq(find_change(&r, "/again")->type, JT_MODIFIED);
	cr_expect_eq(find_change(&r, "/again")->kinds, JK_CREATE | JK_REMOVE);
	cr_expect_eq(find_change(&r, "/new")->type, JT_CREATED);
	cr_expect_null(find_change(&r, "/tmp1"));
	/* Order is by last change. */
	cr_expect_str_eq(r.changes[3].e->path, "/new");
	journal_result_free(&r);

	/* From the very beginning, /old was created. */
	since(&j, 0, &r);
	cr_expect_eq(find_change(&r, "/old")->type, JT_CREATED);
	cr_expect_null(find_change(&r, "/gone"));
	journal_result_free(&r);
	journal_free(&j);
}

Test(journal, nothing_since_now)
{
	struct journal j;
	struct journal_result r;

	cr_assert_eq(journal_init(&j, 7, 100), 0);
	rec(&j, "/a", JK_CREATE, true);
	uint64_t t = journal_checkpoint(&j);
	since(&j, t, &r);
	cr_expect_eq(r.n, 0);
	cr_expect_eq(r.next_base, t);
	journal_result_free(&r);
	journal_free(&j);
}

Test(journal, bound_forgets_oldest_and_old_tokens_resync)
{
	struct journal j;
	struct journal_result r;
	char p[32];

	cr_assert_eq(journal_init(&j, 7, 10), 0);
	uint64_t t0 = journal_checkpoint(&j);
	for (int i = 0; i < 5; i++) {
		snprintf(p, sizeof(p), "/f%d", i);
		rec(&j, p, JK_CREATE, true);
	}
	uint64_t t1 = journal_checkpoint(&j);
	for (int i = 5; i < 12; i++) {
		snprintf(p, sizeof(p), "/f%d", i);
		rec(&j, p, JK_CREATE, true);
	}
	cr_expect_eq(j.n, 10);
	since(&j, t0, &r);
	cr_expect(r.resync, "a checkpoint older than the oldest entry answers resync");
	cr_expect_eq(r.n, 0);
	journal_result_free(&r);
	since(&j, t1, &r);
	cr_expect_not(r.resync);
	cr_expect_eq(r.n, 7);
	journal_result_free(&r);
	journal_free(&j);
}

Test(journal, gap_resyncs_everything_before_it)
{
	struct journal j;
	struct journal_result r;

	cr_assert_eq(journal_init(&j, 7, 10), 0);
	uint64_t t0 = journal_checkpoint(&j);
	rec(&j, "/a", JK_CREATE, true);
	journal_gap(&j);
	uint64_t t1 = journal_checkpoint(&j);
	rec(&j, "/b", JK_CREATE, true);
	since(&j, t0, &r);
	cr_expect(r.resync);
	journal_result_free(&r);
	since(&j, t1, &r);
	cr_expect_not(r.resync);
	cr_expect_eq(r.n, 1);
	journal_result_free(&r);
	journal_free(&j);
}

Test(journal, tokens_round_trip_and_bad_ones_are_refused)
{
	struct journal j, other;
	char tok[JOURNAL_TOKEN_LEN];
	uint64_t b, c;

	cr_assert_eq(journal_init(&j, 0xabcdef, 10), 0);
	cr_assert_eq(journal_init(&other, 0x1234, 10), 0);
	rec(&j, "/a", JK_CREATE, true);
	rec(&j, "/b", JK_CREATE, true);
	journal_token(&j, 1, 2, tok);
	cr_expect_eq(journal_parse_token(&j, tok, &b, &c), 0);
	cr_expect_eq(b, 1);
	cr_expect_eq(c, 2);
	cr_expect_eq(journal_parse_token(&other, tok, &b, &c), 1, "another journal's token: resync");
	const char *bad[] = { "", "x", "c1-", "c1-abcdef", "c1-abcdef-1", "c1-abcdef-1-", "c1-abcdef-1-2-3",
			      "c1-ABCDEF-1-2", "c1-abcdef-2-1", "c1-abcdef-0-99", "c2-abcdef-0-0",
			      "c1-00000000000000000abcdef-0-0", "c1-abcdef-0-0 " };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_expect_eq(journal_parse_token(&j, bad[i], &b, &c), -EINVAL, "%s", bad[i]);
	cr_expect_eq(journal_parse_token(&j, NULL, &b, &c), -EINVAL);
	journal_free(&j);
	journal_free(&other);
}

Test(journal, prefix_globs_and_limit)
{
	struct journal j;
	struct journal_result r;
	struct journal_query q;
	const char *ex[] = { "node_modules/**", ".git/**" };
	const char *in[] = { "*.c" };

	cr_assert_eq(journal_init(&j, 7, 100), 0);
	rec(&j, "/p/a.c", JK_CREATE, true);
	rec(&j, "/p/node_modules/x/y.js", JK_CREATE, true);
	rec(&j, "/p/node_modules", JK_CREATE, true);
	rec(&j, "/p/.git/HEAD", JK_CREATE, true);
	rec(&j, "/p/src/b.c", JK_CREATE, true);
	rec(&j, "/px/c.c", JK_CREATE, true);
	rec(&j, "/p", JK_ATTRIB, true);

	journal_query_init(&q);
	q.prefix = "/p";
	q.exclude = ex;
	q.n_exclude = 2;
	cr_assert_eq(journal_run(&j, &q, &r), 0);
	cr_assert_eq(r.n, 3);
	cr_expect_str_eq(r.changes[0].e->path, "/p/a.c");
	cr_expect_str_eq(r.changes[1].e->path, "/p/src/b.c");
	cr_expect_str_eq(r.changes[2].e->path, "/p");
	journal_result_free(&r);

	q.include = in;
	q.n_include = 1;
	cr_assert_eq(journal_run(&j, &q, &r), 0);
	cr_expect_eq(r.n, 2);
	journal_result_free(&r);

	/* Paging: one at a time, the types stay relative to the first base. */
	q.include = NULL;
	q.n_include = 0;
	q.limit = 1;
	size_t seen = 0;
	for (int round = 0; round < 10; round++) {
		cr_assert_eq(journal_run(&j, &q, &r), 0);
		seen += r.n;
		bool more = r.more;
		if (more) {
			cr_expect_eq(r.next_base, 0);
			q.base = r.next_base;
			q.cursor = r.next_cursor;
		}
		journal_result_free(&r);
		if (!more)
			break;
	}
	cr_expect_eq(seen, 3);
	journal_free(&j);
}

Test(journal, globs)
{
	cr_expect(journal_glob("node_modules/**", "node_modules"));
	cr_expect(journal_glob("node_modules/**", "node_modules/a/b"));
	cr_expect(journal_glob("node_modules/**", "x/node_modules/a"));
	cr_expect_not(journal_glob("node_modules/**", "node_modulesx/a"));
	cr_expect_not(journal_glob("/node_modules/**", "x/node_modules/a"));
	cr_expect(journal_glob("*.o", "a/b/c.o"));
	cr_expect_not(journal_glob("*.o", "a/b/c.oo"));
	cr_expect(journal_glob("src/*.c", "src/a.c"));
	cr_expect_not(journal_glob("src/*.c", "src/x/a.c"));
	cr_expect(journal_glob("src/**/*.c", "src/a.c"));
	cr_expect(journal_glob("src/**/*.c", "src/x/y/a.c"));
	cr_expect(journal_glob("a?c", "abc"));
	cr_expect_not(journal_glob("a?c", "a/c"));
	cr_expect(journal_glob("**", "anything/at/all"));
}

Test(journal, attribution_filter)
{
	struct journal j;
	struct journal_result r;
	struct journal_query q;
	struct journal_event ev = { .kinds = JK_CREATE, .exists = true, .was_absent = true, .ftype = JF_FILE };

	cr_assert_eq(journal_init(&j, 7, 100), 0);
	ev.path = "/one/a";
	ev.attr = JA_BY;
	ev.cmd = 1;
	journal_record(&j, &ev);
	ev.path = "/two/a";
	ev.cmd = 2;
	journal_record(&j, &ev);
	ev.path = "/lost";
	ev.attr = JA_GONE;
	ev.cmd = 0;
	journal_record(&j, &ev);
	ev.path = "/daemon";
	ev.attr = JA_OTHER;
	journal_record(&j, &ev);

	journal_query_init(&q);
	q.by_cmd = 1;
	cr_assert_eq(journal_run(&j, &q, &r), 0);
	cr_assert_eq(r.n, 1);
	cr_expect_str_eq(r.changes[0].e->path, "/one/a");
	journal_result_free(&r);
	q.with_during = true;
	cr_assert_eq(journal_run(&j, &q, &r), 0);
	cr_expect_eq(r.n, 2);
	journal_result_free(&r);

	/* An unattributed later event keeps the known author. */
	ev.path = "/one/a";
	ev.attr = JA_UNKNOWN;
	ev.kinds = JK_WRITE;
	ev.was_absent = false;
	journal_record(&j, &ev);
	q.with_during = false;
	cr_assert_eq(journal_run(&j, &q, &r), 0);
	cr_expect_eq(r.n, 1);
	journal_result_free(&r);
	journal_free(&j);
}

Test(journal, restore_keeps_order_and_numbers)
{
	struct journal j, k;
	struct journal_result r;

	cr_assert_eq(journal_init(&j, 9, 100), 0);
	rec(&j, "/a", JK_CREATE, true);
	uint64_t t = journal_checkpoint(&j);
	rec(&j, "/b", JK_CREATE, true);
	rec(&j, "/a", JK_WRITE, true);
	cr_assert_eq(journal_init(&k, 9, 100), 0);
	for (const struct journal_entry *e = j.head; e; e = e->next)
		cr_assert_eq(journal_restore(&k, e), 0);
	k.floor = j.floor;
	k.issued = j.issued;
	since(&k, t, &r);
	cr_assert_eq(r.n, 2);
	cr_expect_str_eq(r.changes[0].e->path, "/b");
	cr_expect_eq(r.changes[1].type, JT_MODIFIED);
	cr_expect_eq(k.seq, j.seq);
	journal_result_free(&r);
	journal_free(&j);
	journal_free(&k);
}

Test(journal, many_paths_grow_the_table)
{
	struct journal j;
	char p[32];

	cr_assert_eq(journal_init(&j, 1, 200000), 0);
	for (int i = 0; i < 100000; i++) {
		snprintf(p, sizeof(p), "/d/%d", i);
		rec(&j, p, JK_CREATE, true);
	}
	cr_expect_eq(j.n, 100000);
	cr_expect_geq(j.tab_n, 100000);
	journal_free(&j);
}
