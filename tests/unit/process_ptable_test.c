/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>

#include "process/ptable.h"

static struct ptable_entry mk(uint32_t pid, const char *tag, bool listed)
{
	struct ptable_entry e = { .pid = pid, .tag = tag, .listed = listed, .retained = !listed };

	return e;
}

Test(ptable, lookup_by_pid)
{
	struct ptable t = { 0 };
	struct ptable_entry a = mk(10, NULL, true), b = mk(11, "x", true);

	ptable_add(&t, &a);
	ptable_add(&t, &b);
	cr_expect_eq(ptable_find_pid(&t, 10, false), &a);
	cr_expect_eq(ptable_find_pid(&t, 11, false), &b);
	cr_expect_null(ptable_find_pid(&t, 12, true));
	cr_expect_eq(ptable_count_listed(&t), 2);
}

/* The reference stops at the first tagged entry with another tag. */
Test(ptable, tag_lookup_is_first_match_past_other_tags)
{
	struct ptable t = { 0 };
	struct ptable_entry a = mk(1, "alpha", true), b = mk(2, NULL, true), c = mk(3, "beta", true),
			    d = mk(4, "beta", true);

	ptable_add(&t, &a);
	ptable_add(&t, &b);
	ptable_add(&t, &c);
	ptable_add(&t, &d);
	cr_expect_eq(ptable_find_tag(&t, "beta", false), &c, "first match wins");
	cr_expect_eq(ptable_find_tag(&t, "alpha", false), &a);
	cr_expect_null(ptable_find_tag(&t, "gamma", true));
	cr_expect_null(ptable_find_tag(&t, "", true), "untagged entries have no tag");
}

Test(ptable, retained_only_when_asked_and_after_listed)
{
	struct ptable t = { 0 };
	struct ptable_entry old = mk(5, "job", false), live = mk(6, "job", true),
			    gone = mk(7, NULL, false);

	ptable_add(&t, &old);
	ptable_add(&t, &gone);
	cr_expect_null(ptable_find_pid(&t, 5, false));
	cr_expect_eq(ptable_find_pid(&t, 5, true), &old);
	cr_expect_eq(ptable_find_tag(&t, "job", true), &old);
	ptable_add(&t, &live);
	/* A listed process wins over an older retained one with the same tag. */
	cr_expect_eq(ptable_find_tag(&t, "job", true), &live);
	cr_expect_eq(ptable_find_tag(&t, "job", false), &live);
	gone.retained = false; /* expired: invisible */
	cr_expect_null(ptable_find_pid(&t, 7, true));
	cr_expect_eq(ptable_count_listed(&t), 1);
}

Test(ptable, remove_keeps_order)
{
	struct ptable t = { 0 };
	struct ptable_entry e[4];

	for (int i = 0; i < 4; i++) {
		e[i] = mk((uint32_t)i + 100, "t", true);
		ptable_add(&t, &e[i]);
	}
	ptable_remove(&t, &e[0]);
	cr_expect_eq(ptable_find_tag(&t, "t", false), &e[1]);
	ptable_remove(&t, &e[3]);
	ptable_remove(&t, &e[1]);
	cr_expect_eq(t.head, &e[2]);
	cr_expect_eq(t.tail, &e[2]);
	cr_expect_eq(t.n, 1);
	ptable_remove(&t, &e[2]);
	cr_expect_null(t.head);
	cr_expect_null(t.tail);
}

Test(ptable, reused_pid_finds_the_newest_listed_process)
{
	struct ptable t = { 0 };
	struct ptable_entry leader = mk(42, NULL, true), reused = mk(42, NULL, true),
			    gone = mk(42, NULL, false);

	ptable_add(&t, &gone);
	ptable_add(&t, &leader);
	ptable_add(&t, &reused);
	cr_expect_eq(ptable_find_pid(&t, 42, false), &reused);
	cr_expect_eq(ptable_find_pid(&t, 42, true), &reused);
	reused.listed = false;
	reused.retained = true;
	cr_expect_eq(ptable_find_pid(&t, 42, true), &leader, "listed beats retained");
}

Test(ptable, pid_buckets_follow_add_and_remove)
{
	struct ptable t = {0};
	struct ptable_entry e[600] = {{0}};

	/* Many entries, several per bucket and several per pid. */
	for (int i = 0; i < 600; i++) {
		e[i].pid = (uint32_t)(1000 + i % 300);
		e[i].listed = i >= 300; /* the older half finished */
		e[i].retained = i < 300;
		ptable_add(&t, &e[i]);
	}
	for (uint32_t pid = 1000; pid < 1300; pid++) {
		struct ptable_entry *f = ptable_find_pid(&t, pid, true);
		cr_assert_not_null(f);
		cr_assert_eq(f->pid, pid);
		cr_assert(f->listed, "the listed (newer) entry wins");
	}
	for (int i = 300; i < 600; i++)
		ptable_remove(&t, &e[i]);
	for (uint32_t pid = 1000; pid < 1300; pid++) {
		struct ptable_entry *f = ptable_find_pid(&t, pid, true);
		cr_assert_eq(f, &e[pid - 1000], "then the retained one");
		cr_assert_null(ptable_find_pid(&t, pid, false));
	}
	for (int i = 0; i < 300; i++)
		ptable_remove(&t, &e[i]);
	for (size_t b = 0; b < PTABLE_PID_BUCKETS; b++)
		cr_assert_null(t.by_pid[b], "every bucket empty again");
	cr_assert_eq(t.n, 0);
}
