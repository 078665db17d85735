/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "process/ring.h"

/* Read everything in [off, end) into out; returns the bytes and checks kinds. */
static size_t drain(const struct ring *r, uint64_t off, uint8_t *out, size_t len,
		    enum ring_kind *kinds)
{
	size_t got = 0;

	for (;;) {
		enum ring_kind k;
		long n = ring_read(r, off, &k, out + got, len - got);

		if (n <= 0)
			break;
		for (long i = 0; i < n && kinds; i++)
			kinds[got + (size_t)i] = k;
		got += (size_t)n;
		off += (uint64_t)n;
	}
	return got;
}

Test(ring, empty_ring_reads_nothing)
{
	struct ring r;
	enum ring_kind k;
	uint8_t b[8];

	ring_init(&r, 0);
	cr_expect_eq(r.max, RING_MIN_SIZE, "budget is raised to the minimum");
	cr_expect_eq(ring_start(&r), 0);
	cr_expect_eq(ring_end(&r), 0);
	cr_expect_eq(ring_read(&r, 0, &k, b, sizeof(b)), 0);
	cr_expect_null(r.buf, "no storage before the first append");
	ring_free(&r);
}

Test(ring, offsets_and_kinds_are_kept)
{
	struct ring r;
	uint8_t out[64];
	enum ring_kind kinds[64];
	enum ring_kind k;

	ring_init(&r, 1 << 20);
	cr_assert_eq(ring_append(&r, RING_STDOUT, "hello ", 6), 0);
	cr_assert_eq(ring_append(&r, RING_STDERR, "oops", 4), 0);
	cr_assert_eq(ring_append(&r, RING_STDOUT, "world", 5), 0);
	cr_expect_eq(ring_end(&r), 15);
	cr_expect_eq(ring_start(&r), 0);
	cr_expect_eq(r.n_rec, 3);

	cr_assert_eq(drain(&r, 0, out, sizeof(out), kinds), 15);
	cr_expect_eq(memcmp(out, "hello oopsworld", 15), 0);
	cr_expect_eq(kinds[0], RING_STDOUT);
	cr_expect_eq(kinds[6], RING_STDERR);
	cr_expect_eq(kinds[9], RING_STDERR);
	cr_expect_eq(kinds[10], RING_STDOUT);

	/* A read never crosses a record, so one read has one kind. */
	cr_expect_eq(ring_read(&r, 3, &k, out, sizeof(out)), 3);
	cr_expect_eq(memcmp(out, "lo ", 3), 0);
	cr_expect_eq(ring_read(&r, 7, &k, out, 2), 2);
	cr_expect_eq(k, RING_STDERR);
	cr_expect_eq(memcmp(out, "op", 2), 0);
	cr_expect_eq(ring_read(&r, 15, &k, out, sizeof(out)), 0, "end offset reads nothing");
	ring_free(&r);
}

Test(ring, same_kind_appends_merge)
{
	struct ring r;

	ring_init(&r, 1 << 20);
	for (int i = 0; i < 100; i++)
		ring_append(&r, RING_PTY, "x", 1);
	cr_expect_eq(r.n_rec, 1);
	cr_expect_eq(ring_end(&r), 100);
	ring_free(&r);
}

Test(ring, big_append_is_split_into_records)
{
	struct ring r;
	static uint8_t big[3 * RING_REC_MAX + 10];
	static uint8_t out[sizeof(big)];

	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)(i * 7);
	ring_init(&r, 1 << 20);
	cr_assert_eq(ring_append(&r, RING_STDOUT, big, sizeof(big)), 0);
	cr_expect_eq(r.n_rec, 4);
	cr_assert_eq(drain(&r, 0, out, sizeof(out), NULL), sizeof(big));
	cr_expect_eq(memcmp(out, big, sizeof(big)), 0);
	ring_free(&r);
}

Test(ring, grows_on_demand_up_to_budget)
{
	struct ring r;
	static uint8_t chunk[50000];

	ring_init(&r, RING_MIN_SIZE);
	ring_append(&r, RING_STDOUT, "a", 1);
	cr_expect_lt(r.cap, 64 * 1024, "a small output costs little");
	for (int i = 0; i < 40; i++)
		ring_append(&r, i % 2 ? RING_STDOUT : RING_STDERR, chunk, sizeof(chunk));
	cr_expect_eq(r.cap, RING_MIN_SIZE);
	cr_expect_leq(r.used, r.max);
	ring_free(&r);
}

Test(ring, wrap_and_eviction_report_gaps)
{
	struct ring r;
	static uint8_t chunk[10000];
	static uint8_t out[RING_MIN_SIZE];
	enum ring_kind k;
	uint64_t total = 0;

	ring_init(&r, RING_MIN_SIZE);
	/* Write ~10x the budget with a byte pattern that encodes the offset. */
	for (int i = 0; i < 270; i++) {
		for (size_t j = 0; j < sizeof(chunk); j++)
			chunk[j] = (uint8_t)((total + j) % 251);
		cr_assert_eq(ring_append(&r, i % 3 ? RING_STDOUT : RING_STDERR, chunk,
					 sizeof(chunk)), 0);
		total += sizeof(chunk);
	}
	cr_expect_eq(ring_end(&r), total);
	cr_expect_gt(ring_start(&r), 0, "old data was evicted");
	cr_expect_geq(ring_end(&r) - ring_start(&r), RING_MIN_SIZE / 2, "recent data kept");
	cr_expect_leq(r.used, r.max);

	/* Evicted offsets are reported as such. */
	cr_expect_eq(ring_read(&r, 0, &k, out, 10), -ERANGE);
	cr_expect_eq(ring_read(&r, ring_start(&r) - 1, &k, out, 10), -ERANGE);

	/* What is retained is byte-exact across the wrap. */
	size_t n = drain(&r, ring_start(&r), out, sizeof(out), NULL);
	cr_assert_eq(n, ring_end(&r) - ring_start(&r));
	for (size_t j = 0; j < n; j++)
		cr_assert_eq(out[j], (uint8_t)((ring_start(&r) + j) % 251), "byte %zu", j);

	/* Reading from the middle of a record works too. */
	uint64_t mid = ring_start(&r) + 12345;
	cr_assert_gt(ring_read(&r, mid, &k, out, 1), 0);
	cr_expect_eq(out[0], (uint8_t)(mid % 251));
	ring_free(&r);
}

Test(ring, peek_gives_contiguous_runs_without_copying)
{
	struct ring r;
	static uint8_t chunk[10000];
	uint64_t total = 0;
	enum ring_kind k;
	const uint8_t *p;

	ring_init(&r, RING_MIN_SIZE);
	for (int i = 0; i < 100; i++) {
		for (size_t j = 0; j < sizeof(chunk); j++)
			chunk[j] = (uint8_t)((total + j) % 251);
		ring_append(&r, RING_STDOUT, chunk, sizeof(chunk));
		total += sizeof(chunk);
	}
	/* Walking the retained range with peek sees every byte once, in order. */
	uint64_t off = ring_start(&r);
	while (off < ring_end(&r)) {
		long n = ring_peek(&r, off, &k, &p, 70000);

		cr_assert_gt(n, 0);
		cr_assert_leq(n, RING_REC_MAX);
		cr_assert_geq(p, r.buf);
		cr_assert_leq(p + n, r.buf + r.cap, "never across the wrap");
		for (long j = 0; j < n; j++)
			cr_assert_eq(p[j], (uint8_t)((off + (uint64_t)j) % 251));
		off += (uint64_t)n;
	}
	cr_expect_eq(ring_peek(&r, 0, &k, &p, 10), -ERANGE);
	cr_expect_eq(ring_peek(&r, ring_end(&r), &k, &p, 10), 0);
	ring_free(&r);
}

Test(ring, clear_drops_storage_and_keeps_offsets)
{
	struct ring r;
	enum ring_kind k;
	uint8_t b[8];

	ring_init(&r, 0);
	ring_append(&r, RING_STDOUT, "abcdef", 6);
	ring_clear(&r);
	cr_expect_null(r.buf);
	cr_expect_eq(ring_start(&r), 6);
	cr_expect_eq(ring_end(&r), 6);
	cr_expect_eq(ring_read(&r, 0, &k, b, sizeof(b)), -ERANGE);
	ring_append(&r, RING_STDERR, "gh", 2);
	cr_expect_eq(ring_read(&r, 6, &k, b, sizeof(b)), 2);
	cr_expect_eq(k, RING_STDERR);
	ring_free(&r);
}

/* Send everything like sub_pump: returns the events' bytes joined, checks
   that each event is whole UTF-8 characters. */
static size_t send_all(const struct ring *r, bool final, uint8_t *out, size_t cap, int *events)
{
	uint64_t off = ring_start(r);
	size_t got = 0;

	*events = 0;
	for (;;) {
		enum ring_kind k;
		const uint8_t *p;
		uint8_t tmp[RING_TEXT_TMP];
		long n = ring_peek_text(r, off, ring_end(r), final, &k, &p, RING_REC_MAX, tmp);

		if (n <= 0)
			break;
		cr_assert_leq(got + (size_t)n, cap);
		if (k == RING_PTY)
			cr_assert_eq(utf8_complete_len(p, (size_t)n), (size_t)n,
				     "event at offset %llu (+%ld, start %llu) ends inside a character: ...%02x %02x %02x",
				     (unsigned long long)off, n, (unsigned long long)ring_start(r),
				     n > 2 ? p[n - 3] : 0, n > 1 ? p[n - 2] : 0, p[n - 1]);
		memcpy(out + got, p, (size_t)n);
		got += (size_t)n;
		off += (uint64_t)n;
		(*events)++;
	}
	return got;
}

Test(ring, pty_text_comes_out_in_whole_characters_across_records_and_wraps)
{
	static uint8_t in[3 * RING_MIN_SIZE], out[3 * RING_MIN_SIZE];
	const char *unit = "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80x"; /* é € 😀 x: 10 bytes */
	struct ring r;
	size_t n = 0, got;
	int events;

	ring_init(&r, RING_MIN_SIZE);
	/* Odd-sized appends: records fill to RING_REC_MAX at arbitrary byte
	   positions, and eviction makes the storage wrap. */
	while (n + 1000 <= sizeof(in)) {
		for (size_t i = 0; i < 1000; i++)
			in[n + i] = (uint8_t)unit[(n + i) % 10];
		cr_assert_eq(ring_append(&r, RING_PTY, in + n, 999), 0);
		n += 999;
	}
	/* End on a whole unit, so the output ends on a whole character. */
	size_t pad = (10 - n % 10) % 10;
	for (size_t i = 0; i < pad; i++)
		in[n + i] = (uint8_t)unit[(n + i) % 10];
	cr_assert_eq(ring_append(&r, RING_PTY, in + n, pad), 0);
	n += pad;
	got = send_all(&r, true, out, sizeof(out), &events);
	cr_assert_eq(got, ring_end(&r) - ring_start(&r), "every retained byte is sent");
	cr_assert_eq(memcmp(out, in + (n - got), got), 0, "in order, unchanged");
	cr_assert_gt(events, 4);
	ring_free(&r);
}

Test(ring, an_unfinished_character_waits_unless_final)
{
	struct ring r;
	enum ring_kind k;
	const uint8_t *p;
	uint8_t tmp[RING_TEXT_TMP];

	ring_init(&r, 0);
	cr_assert_eq(ring_append(&r, RING_PTY, "ab\xe2\x82", 4), 0);
	cr_assert_eq(ring_peek_text(&r, 0, ring_end(&r), false, &k, &p, 64, tmp), 2);
	cr_assert_eq(ring_peek_text(&r, 2, ring_end(&r), false, &k, &p, 64, tmp), 0,
		     "the rest of the character is not written yet");
	cr_assert_eq(ring_peek_text(&r, 2, ring_end(&r), true, &k, &p, 64, tmp), 2,
		     "at the end of the output it goes out as it is");
	cr_assert_eq(ring_append(&r, RING_PTY, "\xac", 1), 0);
	cr_assert_eq(ring_peek_text(&r, 2, ring_end(&r), false, &k, &p, 64, tmp), 3);
	cr_assert_eq(memcmp(p, "\xe2\x82\xac", 3), 0);
	ring_free(&r);
}

Test(ring, pipe_output_is_not_cut)
{
	struct ring r;
	enum ring_kind k;
	const uint8_t *p;
	uint8_t tmp[RING_TEXT_TMP];

	ring_init(&r, 0);
	cr_assert_eq(ring_append(&r, RING_STDOUT, "ab\xe2\x82", 4), 0);
	cr_assert_eq(ring_peek_text(&r, 0, ring_end(&r), false, &k, &p, 64, tmp), 4);
	cr_assert_eq(k, RING_STDOUT);
	ring_free(&r);
}

/* A ring moved into lent storage keeps its records and offsets, never
 * frees it, and a second ring restored from that storage (what the next
 * envd does after a crash) reads the same bytes. */
Test(ring, use_and_restore)
{
	static uint8_t store[RING_MIN_SIZE];
	uint8_t out[3 * RING_MIN_SIZE];
	enum ring_kind kinds[3 * RING_MIN_SIZE];
	struct ring r, back;

	ring_init(&r, RING_MIN_SIZE);
	cr_assert_eq(ring_append(&r, RING_STDOUT, "abc", 3), 0);
	cr_assert_eq(ring_use(&r, store, RING_MIN_SIZE - 1), -ENOSPC, "smaller than the budget");
	cr_assert_eq(ring_use(&r, store, RING_MIN_SIZE), 0);
	cr_assert(r.fixed);
	cr_assert_eq(ring_append(&r, RING_STDERR, "de", 2), 0);
	cr_assert_eq(drain(&r, 0, out, sizeof(out), kinds), 5);
	cr_assert_eq(memcmp(out, "abcde", 5), 0);
	cr_assert_eq(kinds[3], RING_STDERR);

	/* wrap it: offsets go past the storage many times */
	static uint8_t big[RING_REC_MAX];
	for (int i = 0; i < 9; i++) {
		memset(big, 'a' + i, sizeof(big));
		cr_assert_eq(ring_append(&r, RING_STDOUT, big, sizeof(big)), 0);
	}
	cr_assert_gt(ring_start(&r), 0);

	size_t kept = ring_restore(&back, store, RING_MIN_SIZE, r.head, r.n_rec, r.start);
	cr_assert_eq(kept, ring_end(&r) - ring_start(&r));
	cr_assert_eq(ring_start(&back), ring_start(&r));
	cr_assert_eq(ring_end(&back), ring_end(&r));
	size_t n1 = drain(&r, ring_start(&r), out, sizeof(out), NULL);
	static uint8_t out2[3 * RING_MIN_SIZE];
	size_t n2 = drain(&back, ring_start(&back), out2, sizeof(out2), NULL);
	cr_assert_eq(n1, n2);
	cr_assert_eq(memcmp(out, out2, n1), 0);
	/* the restored ring goes on appending where the other stopped */
	cr_assert_eq(ring_append(&back, RING_STDOUT, "z", 1), 0);
	cr_assert_eq(ring_end(&back), ring_end(&r) + 1);

	/* a damaged header ends the walk: what precedes it is kept */
	struct ring dmg;
	store[(back.head + 4) % RING_MIN_SIZE] = 9; /* the first record's kind */
	cr_assert_eq(ring_restore(&dmg, store, RING_MIN_SIZE, back.head, back.n_rec, back.start), 0);
	cr_assert_eq(ring_start(&dmg), ring_end(&dmg));

	ring_free(&r);    /* forgets the lent storage */
	cr_assert_null(r.buf);
	ring_free(&back);
	ring_free(&dmg);
}
