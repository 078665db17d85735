/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "base/pgzip.h"

/* Deterministic inputs: xorshift noise and line-structured text. */
static uint8_t *make_random(size_t n, uint64_t seed)
{
	uint8_t *p = malloc(n ? n : 1);
	uint64_t x = seed | 1;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = (uint8_t)(x >> 24);
	}
	return p;
}

static uint8_t *make_text(size_t n)
{
	static const char *words[] = { "envd", "sandbox", "process", "stream", "gzip", "block", "file", "read",
				       "write", "the", "of", "and", "a", "to", "in", "is" };
	uint8_t *p = malloc(n ? n : 1);
	uint64_t x = 88172645463325252ull;
	size_t i = 0, line = 0;
	while (i < n) {
		char buf[64];
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		int l = snprintf(buf, sizeof(buf), "%s%s", words[x % 16], (++line % 12) ? " " : "\n");
		for (int k = 0; k < l && i < n; k++)
			p[i++] = (uint8_t)buf[k];
	}
	return p;
}

/*
 * Build a whole gzip stream from blocks of `bs` bytes, each primed with
 * the input before it, the way a download does. Returns the length.
 */
static size_t build(const uint8_t *in, size_t n, size_t bs, uint8_t **outp, size_t *stored_blocks)
{
	struct pgz_block b;
	struct pgz_sum sum;
	size_t cap = PGZ_HEADER_LEN + PGZ_TRAILER_LEN + (n / bs + 1) * pgz_block_bound(bs);
	uint8_t *out = malloc(cap), *o = out;

	pgz_block_init(&b, 0);
	pgz_sum_init(&sum);
	pgz_header(o);
	o += PGZ_HEADER_LEN;
	*stored_blocks = 0;
	for (size_t off = 0; off < n; off += bs) {
		size_t k = n - off < bs ? n - off : bs;
		uint32_t crc;
		size_t dl = off < PGZ_DICT_MAX ? off : PGZ_DICT_MAX;
		o += pgz_block_compress(&b, in + off - dl, dl, in + off, k, o, &crc);
		*stored_blocks += b.stored;
		pgz_sum_add(&sum, crc, k);
	}
	pgz_trailer(o, sum.crc, sum.total);
	o += PGZ_TRAILER_LEN;
	pgz_block_end(&b);
	cr_assert_leq((size_t)(o - out), cap);
	*outp = out;
	return (size_t)(o - out);
}

/* zlib's own gzip decoder must give back exactly the input. */
static void check_inflate(const uint8_t *gz, size_t gzlen, const uint8_t *in, size_t n)
{
	z_stream zs;
	uint8_t *back = malloc(n + 1);
	memset(&zs, 0, sizeof(zs));
	cr_assert_eq(inflateInit2(&zs, 16 + MAX_WBITS), Z_OK);
	zs.next_in = (Bytef *)gz;
	zs.avail_in = (uInt)gzlen;
	zs.next_out = back;
	zs.avail_out = (uInt)(n + 1);
	int rc = inflate(&zs, Z_FINISH);
	cr_assert_eq(rc, Z_STREAM_END, "inflate: %d (%s)", rc, zs.msg ? zs.msg : "");
	cr_assert_eq(zs.total_out, n);
	cr_assert_eq(zs.avail_in, 0, "trailing bytes after the gzip member");
	cr_assert(n == 0 || memcmp(back, in, n) == 0);
	inflateEnd(&zs);
	free(back);
}

/* And so must gzip(1), which also checks the CRC and length. */
static void check_gzip_t(const uint8_t *gz, size_t gzlen)
{
	char path[] = "/tmp/pgzip_test.XXXXXX";
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, gz, gzlen), (ssize_t)gzlen);
	close(fd);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "gzip -t < %s", path);
	int st = system(cmd);
	unlink(path);
	cr_assert_eq(st, 0, "gzip -t rejected the stream");
}

static void roundtrip(const uint8_t *in, size_t n, size_t bs, size_t *gzlen, size_t *stored)
{
	uint8_t *gz;
	*gzlen = build(in, n, bs, &gz, stored);
	check_inflate(gz, *gzlen, in, n);
	check_gzip_t(gz, *gzlen);
	free(gz);
}

Test(pgzip, empty_input)
{
	size_t len, stored;
	roundtrip((const uint8_t *)"", 0, 65536, &len, &stored);
	cr_assert_eq(len, PGZ_HEADER_LEN + PGZ_TRAILER_LEN);
}

Test(pgzip, one_byte)
{
	size_t len, stored;
	roundtrip((const uint8_t *)"x", 1, 65536, &len, &stored);
}

Test(pgzip, random_goes_out_stored)
{
	size_t n = 3 * 131072 + 777, len, stored;
	uint8_t *in = make_random(n, 42);
	roundtrip(in, n, 131072, &len, &stored);
	cr_assert_eq(stored, 4, "every random block stored");
	/* A copy plus 5 bytes per 64 KiB: never more than ~0.01 % bigger. */
	cr_assert_leq(len, n + PGZ_HEADER_LEN + PGZ_TRAILER_LEN + 5 * (n / 65535 + 4));
	free(in);
}

Test(pgzip, text_shrinks_across_blocks)
{
	size_t n = 1 << 20, len, stored;
	uint8_t *in = make_text(n);
	roundtrip(in, n, 131072, &len, &stored);
	cr_assert_eq(stored, 0);
	cr_assert_lt(len, n / 3, "text compressed only to %zu of %zu", len, n);
	free(in);
}

/* The dictionary is what keeps cutting cheap: within 2 % of one stream. */
Test(pgzip, dictionary_keeps_ratio)
{
	size_t n = 1 << 20, len, stored;
	uint8_t *in = make_text(n);
	roundtrip(in, n, 131072, &len, &stored);
	uLongf whole = compressBound(n);
	uint8_t *ref = malloc(whole);
	cr_assert_eq(compress2(ref, &whole, in, n, PGZ_LEVEL_DEFAULT), Z_OK);
	cr_assert_leq((double)len, whole * 1.02, "blocks %zu vs one stream %lu", len, (unsigned long)whole);
	free(ref);
	free(in);
}

/* Mixed: random and text blocks alternate; small and odd block sizes. */
Test(pgzip, mixed_and_odd_sizes)
{
	size_t n = 300000, len, stored;
	uint8_t *in = make_text(n), *rnd = make_random(n, 7);
	for (size_t off = 0; off < n; off += 100000)
		memcpy(in + off, rnd + off, n - off < 50000 ? n - off : 50000);
	size_t sizes[] = { 1, 3, 4096, 65535, 65536, 65537, 100000, 299999, 300000, 1 << 20 };
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t m = sizes[i] < 4096 ? 20000 : n; /* 1-byte blocks on a smaller input */
		roundtrip(in, m, sizes[i], &len, &stored);
	}
	free(rnd);
	free(in);
}

Test(pgzip, entropy_probe)
{
	uint8_t *r = make_random(131072, 1), *t = make_text(131072);
	cr_assert(!pgz_worth_deflating(r, 131072));
	cr_assert(pgz_worth_deflating(t, 131072));
	uint8_t zeros[4096] = { 0 };
	cr_assert(pgz_worth_deflating(zeros, sizeof(zeros)));
	cr_assert(!pgz_worth_deflating(zeros, 0));
	free(r);
	free(t);
}

/* A compressor reused across blocks and levels keeps producing valid output. */
Test(pgzip, levels)
{
	size_t n = 200000, len, stored;
	uint8_t *in = make_text(n);
	for (int lvl = 1; lvl <= 9; lvl++) {
		struct pgz_block b;
		struct pgz_sum s;
		uint8_t *out = malloc(PGZ_HEADER_LEN + PGZ_TRAILER_LEN + pgz_block_bound(n)), *o = out;
		uint32_t crc;
		pgz_block_init(&b, lvl);
		pgz_sum_init(&s);
		pgz_header(o);
		o += PGZ_HEADER_LEN;
		o += pgz_block_compress(&b, NULL, 0, in, n, o, &crc);
		pgz_sum_add(&s, crc, n);
		pgz_trailer(o, s.crc, s.total);
		o += PGZ_TRAILER_LEN;
		check_inflate(out, (size_t)(o - out), in, n);
		pgz_block_end(&b);
		free(out);
	}
	(void)len;
	(void)stored;
	free(in);
}

/* One compressor retuned before every block, across stored and all
 * levels, still builds one valid stream (the adaptive download's path). */
Test(pgzip, level_changes_between_blocks)
{
	size_t n = 12 * 65536 + 77, bs = 65536;
	uint8_t *in = make_text(n);
	size_t cap = PGZ_HEADER_LEN + PGZ_TRAILER_LEN + (n / bs + 1) * pgz_block_bound(bs);
	uint8_t *out = malloc(cap), *o = out;
	static const int order[] = { 5, 9, 0, 1, 6, 0, 0, 3, 9, 2, 7, 4, 8 };
	struct pgz_block b;
	struct pgz_sum sum;
	size_t i = 0;

	pgz_block_init(&b, 5);
	pgz_sum_init(&sum);
	pgz_header(o);
	o += PGZ_HEADER_LEN;
	for (size_t off = 0; off < n; off += bs, i++) {
		size_t k = n - off < bs ? n - off : bs;
		size_t dl = off < PGZ_DICT_MAX ? off : PGZ_DICT_MAX;
		uint32_t crc;
		pgz_block_set_level(&b, order[i % (sizeof(order) / sizeof(order[0]))]);
		o += pgz_block_compress(&b, in + off - dl, dl, in + off, k, o, &crc);
		cr_assert_eq(b.stored, b.level == 0, "block %zu at level %d", i, b.level);
		pgz_sum_add(&sum, crc, k);
	}
	pgz_trailer(o, sum.crc, sum.total);
	o += PGZ_TRAILER_LEN;
	cr_assert_leq((size_t)(o - out), cap);
	check_inflate(out, (size_t)(o - out), in, n);
	check_gzip_t(out, (size_t)(o - out));
	pgz_block_end(&b);
	pgz_block_set_level(&b, 42);
	cr_assert_eq(b.level, 9);
	pgz_block_set_level(&b, -1);
	cr_assert_eq(b.level, 0);
	free(out);
	free(in);
}

/* The sample that decides identity or gzip for a download. */
Test(pgzip, sample_ratio)
{
	uint8_t *r = make_random(32768, 3), *t = make_text(32768);
	cr_assert_eq(pgz_sample_ratio(r, 32768), 1.0);
	double tr = pgz_sample_ratio(t, 32768);
	cr_assert(tr > 0.0 && tr < 0.5, "text ratio %f", tr);
	cr_assert_eq(pgz_sample_ratio(t, 0), 1.0);
	uint8_t *big = make_text(200000); /* only the first 64 KiB are deflated */
	double br = pgz_sample_ratio(big, 200000);
	cr_assert(br > 0.0 && br < 0.5, "big text ratio %f", br);
	free(big);
	free(r);
	free(t);
}

/*
 * The level for a link, from the model's inputs: level 6 takes t6_us per
 * 128 KiB block and makes 19 % of text; links in bytes/s.
 */
static int level_for(uint64_t t6_us, int parallel, uint64_t bps, bool bound)
{
	struct pgz_link_model m = { .t6_us = t6_us, .r6_ppm = 190000, .block = 128 * 1024,
				    .parallel = parallel, .link_bps = bps, .bound = bound };
	return pgz_level_for_link(&m);
}

Test(pgzip, level_for_a_slow_link_is_the_hardest_that_keeps_up)
{
	/* 20 Mbit/s takes 13 MB/s of text; level 9 at 4 ms per block for
	 * level 6 compresses 15 MB/s: more than 5 % ahead. */
	cr_assert_eq(level_for(4000, 1, 2500000, true), 9);
	/* Slower compressor (6 ms): 9 and 8 fall behind the link, 7 keeps
	 * 5 % ahead of it. */
	cr_assert_eq(level_for(6000, 1, 2500000, true), 7);
	/* Two blocks at once: 9 again. */
	cr_assert_eq(level_for(6000, 2, 2500000, true), 9);
}

Test(pgzip, level_for_a_link_known_only_as_a_floor_is_not_pushed_harder)
{
	/* A floor may hide a faster link: no step past the peak. */
	int floor = level_for(6000, 1, 2500000, false);
	cr_assert_lt(floor, 7, "a floor picks the fastest level near the peak (got %d)", floor);
}

Test(pgzip, level_for_a_link_faster_than_the_compressor)
{
	/* 100 Mbit/s: the compressor sets the pace at every level but
	 * stored; the peak is the same whether the rate was bound or not. */
	int bound = level_for(4000, 1, 12500000, true), floor = level_for(4000, 1, 12500000, false);
	cr_assert_eq(bound, floor);
	cr_assert(bound >= 1 && bound <= 5, "a fast level that still shrinks text (got %d)", bound);
	/* 1 Gbit/s: nothing deflates faster than the link takes stored. */
	cr_assert_eq(level_for(4000, 1, 125000000, true), 0);
}
