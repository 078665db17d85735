/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pgzip.c - gzip from independently compressed blocks (see pgzip.h).
 */
#include "base/pgzip.h"

#include <math.h>
#include <string.h>

/* Largest stored block deflate allows (LEN is 16 bits). */
#define STORED_MAX 65535u
/*
 * Estimated order-0 entropy below which a block is deflated, in bits per
 * byte. Random and already-compressed data measure 7.9-8.0; text and
 * code 4-6; executables 5-7. Above 7.5 a match search would cost far
 * more than the few percent it could save.
 */
#define ENTROPY_DEFLATE_MAX 7.5
/* Inputs above this are sampled: SAMPLES windows of SAMPLE_LEN bytes. */
#define SAMPLE_ALL 16384
#define SAMPLES 8
#define SAMPLE_LEN 2048
/* pgz_sample_ratio deflates at most this much. */
#define SAMPLE_RATIO_MAX 65536

void pgz_header(uint8_t out[PGZ_HEADER_LEN])
{
	static const uint8_t h[PGZ_HEADER_LEN] = { 0x1f, 0x8b, 8 /* deflate */, 0 /* flags */, 0, 0, 0, 0 /* mtime */,
						   0 /* xfl */, 255 /* OS unknown */ };
	memcpy(out, h, sizeof(h));
}

static void put_le32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

void pgz_trailer(uint8_t out[PGZ_TRAILER_LEN], uint32_t crc, uint64_t total)
{
	/* BFINAL=1, BTYPE=00 (stored), padding; LEN 0, NLEN 0xffff. */
	out[0] = 1;
	out[1] = 0;
	out[2] = 0;
	out[3] = 0xff;
	out[4] = 0xff;
	put_le32(out + 5, crc);
	put_le32(out + 9, (uint32_t)total);
}

static size_t stored_len(size_t n)
{
	return n + 5 * ((n + STORED_MAX - 1) / STORED_MAX);
}

size_t pgz_block_bound(size_t n)
{
	return stored_len(n);
}

void pgz_block_init(struct pgz_block *b, int level)
{
	memset(b, 0, sizeof(*b));
	b->level = level >= 1 && level <= 9 ? level : PGZ_LEVEL_DEFAULT;
}

void pgz_block_set_level(struct pgz_block *b, int level)
{
	b->level = level < 0 ? 0 : level > 9 ? 9 : level;
}

void pgz_block_end(struct pgz_block *b)
{
	if (b->zinit)
		deflateEnd(&b->zs);
	b->zinit = false;
}

static void count(uint32_t hist[4][256], const uint8_t *p, size_t n)
{
	size_t i = 0;

	/* Four tables: consecutive equal bytes do not serialise on one counter. */
	for (; i + 4 <= n; i += 4) {
		hist[0][p[i]]++;
		hist[1][p[i + 1]]++;
		hist[2][p[i + 2]]++;
		hist[3][p[i + 3]]++;
	}
	for (; i < n; i++)
		hist[0][p[i]]++;
}

bool pgz_worth_deflating(const uint8_t *in, size_t n)
{
	uint32_t hist[4][256];
	size_t total;
	double bits = 0;

	if (n == 0)
		return false;
	memset(hist, 0, sizeof(hist));
	if (n <= SAMPLE_ALL) {
		count(hist, in, n);
		total = n;
	} else {
		size_t step = (n - SAMPLE_LEN) / (SAMPLES - 1);
		for (size_t i = 0; i < SAMPLES; i++)
			count(hist, in + i * step, SAMPLE_LEN);
		total = (size_t)SAMPLES * SAMPLE_LEN;
	}
	for (int c = 0; c < 256; c++) {
		uint32_t k = hist[0][c] + hist[1][c] + hist[2][c] + hist[3][c];
		if (k)
			bits -= (double)k * log2((double)k / (double)total);
	}
	/*
	 * Small samples under-state entropy (a 256-symbol alphabet cannot be
	 * filled by a few hundred bytes), so tiny inputs look compressible;
	 * the size check after deflating catches those.
	 */
	return bits / (double)total < ENTROPY_DEFLATE_MAX;
}

double pgz_sample_ratio(const uint8_t *in, size_t n)
{
	uint8_t out[4096]; /* output is only counted */
	size_t got = 0;
	z_stream zs;
	int rc;

	if (n == 0 || !pgz_worth_deflating(in, n))
		return 1.0;
	if (n > SAMPLE_RATIO_MAX)
		n = SAMPLE_RATIO_MAX;
	memset(&zs, 0, sizeof(zs));
	/* A small window and hash keep the state near 20 KiB. */
	if (deflateInit2(&zs, 1, Z_DEFLATED, -12, 5, Z_DEFAULT_STRATEGY) != Z_OK)
		return 1.0;
	zs.next_in = (Bytef *)in;
	zs.avail_in = (uInt)n;
	do {
		zs.next_out = out;
		zs.avail_out = sizeof(out);
		rc = deflate(&zs, Z_FINISH);
		got += sizeof(out) - zs.avail_out;
	} while (rc == Z_OK);
	deflateEnd(&zs);
	return rc == Z_STREAM_END ? (double)got / (double)n : 1.0;
}

static size_t store(const uint8_t *in, size_t n, uint8_t *out)
{
	uint8_t *o = out;

	while (n) {
		size_t k = n > STORED_MAX ? STORED_MAX : n;
		/* BFINAL=0, BTYPE=00; we are byte-aligned, so the rest of the
		 * byte is padding. */
		o[0] = 0;
		o[1] = (uint8_t)k;
		o[2] = (uint8_t)(k >> 8);
		o[3] = (uint8_t)~k;
		o[4] = (uint8_t)(~k >> 8);
		memcpy(o + 5, in, k);
		o += 5 + k;
		in += k;
		n -= k;
	}
	return (size_t)(o - out);
}

/* Deflate into out[0..cap); 0 when it did not fit (then store instead). */
static size_t deflate_block(struct pgz_block *b, const uint8_t *dict, size_t dictlen, const uint8_t *in, size_t n,
			    uint8_t *out, size_t cap)
{
	if (!b->zinit) {
		memset(&b->zs, 0, sizeof(b->zs));
		/* Raw deflate (negative window bits): the gzip framing is ours. */
		if (deflateInit2(&b->zs, b->level, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
			return 0;
		b->zinit = true;
		b->zlevel = b->level;
	} else if (deflateReset(&b->zs) != Z_OK) {
		return 0;
	}
	/* Retuned on a freshly reset stream: nothing is pending to flush. */
	if (b->zlevel != b->level) {
		if (deflateParams(&b->zs, b->level, Z_DEFAULT_STRATEGY) != Z_OK)
			return 0;
		b->zlevel = b->level;
	}
	if (dictlen > PGZ_DICT_MAX) {
		dict += dictlen - PGZ_DICT_MAX;
		dictlen = PGZ_DICT_MAX;
	}
	if (dictlen && deflateSetDictionary(&b->zs, dict, (uInt)dictlen) != Z_OK)
		return 0;
	b->zs.next_in = (Bytef *)in;
	b->zs.avail_in = (uInt)n;
	b->zs.next_out = out;
	b->zs.avail_out = (uInt)cap;
	/* Z_SYNC_FLUSH ends on a byte boundary without the final bit. A full
	 * buffer means the output would be no smaller than storing. */
	int rc = deflate(&b->zs, Z_SYNC_FLUSH);
	if (rc != Z_OK || b->zs.avail_in != 0 || b->zs.avail_out == 0)
		return 0;
	return cap - b->zs.avail_out;
}

size_t pgz_block_compress(struct pgz_block *b, const uint8_t *dict, size_t dictlen, const uint8_t *in, size_t n,
			  uint8_t *out, uint32_t *crc)
{
	size_t len = 0;

	*crc = (uint32_t)crc32_z(0, in, n);
	b->stored = true;
	if (n == 0)
		return 0;
	/* zlib counts in uInt: one call handles at most 4 GiB - 1; blocks are
	 * far smaller, but a caller that passes more gets stored output. */
	if (b->level > 0 && n <= UINT32_MAX / 2 && pgz_worth_deflating(in, n))
		len = deflate_block(b, dict, dictlen, in, n, out, stored_len(n));
	if (len) {
		b->stored = false;
		return len;
	}
	return store(in, n, out);
}

/*
 * Measured on 64 MiB of C headers and on logs with gzip -N: level 1 is
 * 2.7x as fast as level 6 at 1.25x the size, level 5 1.65x as fast at
 * 1.016x, level 9 2.2x as slow at 0.993x.
 */
const uint16_t pgz_level_time_pct[10] = { 4, 37, 40, 45, 53, 61, 100, 125, 180, 217 };
const uint16_t pgz_level_size_pmil[10] = { 0, 1253, 1210, 1170, 1060, 1016, 1000, 997, 994, 993 };

/* Input bytes/s that level l's compressor delivers, on all its threads. */
static double comp_rate(const struct pgz_link_model *m, int l)
{
	int par = m->parallel > 0 ? m->parallel : 1;
	double t = (double)m->t6_us * pgz_level_time_pct[l] / 100 / par + 1;

	return (double)m->block * 1e6 / t;
}

/* Input bytes/s the link takes at level l's ratio. */
static double wire_rate(const struct pgz_link_model *m, int l)
{
	double ratio = l ? (double)m->r6_ppm * pgz_level_size_pmil[l] / 1e9 : 1.0;

	return (double)m->link_bps / (ratio > 0 ? ratio : 1e-6);
}

int pgz_level_for_link(const struct pgz_link_model *m)
{
	double best = 0;
	int pick = 0;

	for (int l = 0; l <= 9; l++) {
		double c = comp_rate(m, l), w = wire_rate(m, l);
		double rate = c < w ? c : w;
		if (rate >= best * 1.02) {
			best = rate;
			pick = l;
		}
	}
	/*
	 * The peak favours speed: where the link is the limit, every level
	 * that keeps up delivers within a percent or two of the others, and
	 * the fastest of them was taken. Fewer bytes are then free, as long
	 * as the compressor stays ahead; only a measured (bound) rate is
	 * trusted for that, a lower bound could hide a faster link.
	 */
	if (m->bound && pick > 0 && comp_rate(m, pick) >= wire_rate(m, pick))
		while (pick < 9 && comp_rate(m, pick + 1) >= PGZ_HEADROOM * wire_rate(m, pick + 1))
			pick++;
	return pick;
}

void pgz_sum_add(struct pgz_sum *s, uint32_t crc, size_t n)
{
	s->crc = (uint32_t)crc32_combine(s->crc, crc, (z_off_t)n);
	s->total += n;
}
