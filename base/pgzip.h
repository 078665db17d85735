/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pgzip.h - one gzip stream built from independently compressed blocks.
 *
 * A gzip download used to be one deflate() call chain on one thread at
 * level 6: ~40 MiB/s, and no faster on data that does not compress at
 * all. Here the input is cut into blocks that can be compressed on any
 * thread in any order and then joined, the way pigz does it:
 *
 *   - every block is raw deflate that starts and ends on a byte boundary
 *     and never carries the final bit (deflate with Z_SYNC_FLUSH), so
 *     blocks concatenate into one valid deflate stream;
 *   - a block is primed with up to 32 KiB of the input that precedes it
 *     (deflateSetDictionary), so cutting costs almost no ratio;
 *   - a block whose bytes look incompressible (order-0 entropy close to
 *     8 bits a byte) or whose deflate output would not be smaller is
 *     written as stored blocks: a CRC and a copy, no match search;
 *   - the stream ends with an empty final stored block and the trailer;
 *     the CRC-32 of the whole input is combined from the block CRCs
 *     (crc32_combine), so it also never needs a second pass.
 *
 * Pure: bytes in, bytes out, no I/O, no threads of its own. A pgz_block
 * is used by one thread at a time; distinct ones may run in parallel.
 */
#ifndef ENVD_PGZIP_H
#define ENVD_PGZIP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <zlib.h>

#define PGZ_HEADER_LEN 10
/* Empty final stored block (5) + CRC-32 and ISIZE (8). */
#define PGZ_TRAILER_LEN 13
/* The dictionary deflate can use: its whole window. */
#define PGZ_DICT_MAX 32768
/*
 * Default level, measured on log-like text in 128 KiB blocks: zlib level
 * 5 output is 1.05x the size of level 6's at 1.65x its speed on one core;
 * level 4 is faster still but 1.12x the size; levels 1-3 are worse again.
 * Splitting into primed blocks costs < 0.2 % of size at any level.
 */
#define PGZ_LEVEL_DEFAULT 5

/* Per-thread compressor state; zero-initialise, then pgz_block_init(). */
struct pgz_block {
	z_stream zs;
	bool zinit; /* zs allocated (lazily, on the first compressible block) */
	int level;  /* for the next block: 0 (stored) to 9 */
	int zlevel; /* the level zs is set to */
	/* Result of the last pgz_block_compress() call, for the caller. */
	bool stored;
};

/* The 10-byte gzip member header (no name, no mtime, OS unknown). */
void pgz_header(uint8_t out[PGZ_HEADER_LEN]);

/*
 * The end of the stream: an empty final stored block, then the CRC-32
 * and the length (mod 2^32) of all input, little-endian.
 */
void pgz_trailer(uint8_t out[PGZ_TRAILER_LEN], uint32_t crc, uint64_t total);

/* Output bytes pgz_block_compress() may write for n input bytes. */
size_t pgz_block_bound(size_t n);

/* level 1..9 (0 or out of range: PGZ_LEVEL_DEFAULT). Never fails. */
void pgz_block_init(struct pgz_block *b, int level);

/*
 * The level for the next block: 0 stores it (a CRC and a copy), 1..9 are
 * zlib's levels; out of range is clamped. Cheap: the deflate state is
 * kept and retuned.
 */
void pgz_block_set_level(struct pgz_block *b, int level);

/* Free the deflate state, if any. The struct may be initialised again. */
void pgz_block_end(struct pgz_block *b);

/*
 * True when in[0..n) looks worth deflating: its byte histogram (sampled
 * on large inputs) says it would shrink by a useful margin. Cheap: a
 * fraction of the cost of a copy.
 */
bool pgz_worth_deflating(const uint8_t *in, size_t n);

/*
 * Expected compressed size / n of data like in[0..n): 1.0 for data that
 * does not look worth deflating, else what a quick deflate (level 1,
 * 4 KiB window) makes of the sample, which slightly over-states what the
 * block compressor achieves. 1.0 also when n is 0 or memory is short.
 */
double pgz_sample_ratio(const uint8_t *in, size_t n);

/*
 * Compress in[0..n) as a byte-aligned, non-final run of deflate blocks
 * into out (at least pgz_block_bound(n) bytes). dict[0..dictlen) is the
 * input that precedes this block in the stream (only its last
 * PGZ_DICT_MAX bytes count; may be NULL when dictlen is 0). Sets *crc to
 * the CRC-32 of in[0..n) and b->stored to whether the block went out
 * stored. n = 0 writes nothing.
 *
 * Returns the bytes written. Never fails: when the deflate state cannot
 * be allocated the block goes out stored, which is always valid.
 */
size_t pgz_block_compress(struct pgz_block *b, const uint8_t *dict, size_t dictlen, const uint8_t *in, size_t n,
			  uint8_t *out, uint32_t *crc);

/*
 * What a download knows when it picks the level of its next block: what
 * level 6 costs and makes of a block (from the blocks so far), how many
 * blocks it compresses at once, and the link's rate.
 */
struct pgz_link_model {
	uint64_t t6_us;    /* time level 6 takes for one block on one thread */
	uint64_t r6_ppm;   /* compressed/original size level 6 reaches, ppm */
	size_t block;      /* block size, bytes */
	int parallel;      /* blocks compressed at once, at least 1 */
	uint64_t link_bps; /* the link's rate, bytes/s */
	bool bound;        /* link_bps was measured with the link as the
			    * bottleneck; else it is only a lower bound */
};

/*
 * zlib's levels on text relative to level 6 (index 0: a stored copy):
 * time per input byte in percent and output size in per mille.
 */
extern const uint16_t pgz_level_time_pct[10];
extern const uint16_t pgz_level_size_pmil[10];

/* Extra compressor speed, over what the link takes, that a harder level
 * must keep before it is chosen for a link-bound download. */
#define PGZ_HEADROOM 1.05

/*
 * The level (0 stored .. 9) that delivers input fastest over the link:
 * the one where min(compressor rate, link rate / ratio) peaks, the
 * fastest of those within 2 % of the peak. When the link sets that pace
 * and its rate was measured as the bottleneck, harder levels follow as
 * long as the compressor stays PGZ_HEADROOM ahead of the link: they cost
 * no time and put fewer bytes on it. Pure: the per-level speeds and sizes
 * are zlib's on text, relative to level 6.
 */
int pgz_level_for_link(const struct pgz_link_model *m);

/* Running CRC and length of the blocks emitted so far, in order. */
struct pgz_sum {
	uint32_t crc;
	uint64_t total;
};

static inline void pgz_sum_init(struct pgz_sum *s)
{
	s->crc = 0; /* crc32 of nothing */
	s->total = 0;
}

/* Append a block of n bytes whose CRC-32 is crc. */
void pgz_sum_add(struct pgz_sum *s, uint32_t crc, size_t n);

#endif
