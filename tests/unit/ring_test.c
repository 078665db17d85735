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
