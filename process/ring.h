/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ring.h - bounded ring of a process's recent output, addressed by offset.
 *
 * Every byte a process writes (stdout, stderr or pty) gets the next value
 * of one 64-bit offset counter, starting at 0. The ring keeps the most
 * recent bytes, up to a byte budget, as records {kind, length, bytes}, so a
 * reader can replay "everything from offset N" with the stream each byte
 * came from. When the budget is exceeded the oldest records are evicted;
 * ring_start() then tells a reader which offsets are gone.
 *
 * Storage grows on demand (doubling, up to the budget), so a process that
 * writes little costs little. No I/O, no event loop: unit-testable.
 *
 * Errors: 0 or -ENOMEM.
 */
#ifndef PROCESS_RING_H
#define PROCESS_RING_H

#include <stddef.h>
#include <stdint.h>

enum ring_kind {
	RING_STDOUT = 1,
	RING_STDERR = 2,
	RING_PTY = 3,
};

/* Largest single record payload; bigger appends are split. */
#define RING_REC_MAX (64 * 1024)
/* Smallest budget accepted; ring_init raises smaller ones to this. */
#define RING_MIN_SIZE (4 * RING_REC_MAX)

struct ring {
	uint8_t *buf;
	size_t cap;        /* allocated bytes */
	size_t max;        /* budget: cap never grows beyond this */
	size_t head;       /* physical index of the oldest record header */
	size_t used;       /* bytes in use, headers included */
	size_t last_hdr;   /* physical index of the newest record header */
	size_t n_rec;
	uint64_t start;    /* offset of the oldest retained byte */
	uint64_t end;      /* offset the next appended byte will get */
};

/* Empty ring with budget `max` bytes (headers included). Allocates nothing. */
void ring_init(struct ring *r, size_t max);
void ring_free(struct ring *r);

/* Drop every retained byte and the storage; offsets keep counting. */
void ring_clear(struct ring *r);

/*
 * Append n bytes of `kind`, evicting old records as needed. Consecutive
 * appends of the same kind are merged into one record while it stays
 * below RING_REC_MAX. Returns 0 or -ENOMEM (the offsets still advance, the
 * bytes are then recorded as evicted).
 */
int ring_append(struct ring *r, enum ring_kind kind, const void *p, size_t n);

static inline uint64_t ring_start(const struct ring *r) { return r->start; }
static inline uint64_t ring_end(const struct ring *r) { return r->end; }

/*
 * Copy up to `len` bytes starting at offset `off` from the record that
 * contains it (never across records, so all copied bytes share one kind).
 * Returns the number of bytes copied and sets *kind; 0 when off >= end;
 * -ERANGE when off < start (evicted).
 */
long ring_read(const struct ring *r, uint64_t off, enum ring_kind *kind, void *out, size_t len);

/*
 * Like ring_read without the copy: *p points into the ring at `off`, and
 * the return value is the length of the contiguous run there (at most
 * `len`, never across a record or the wrap). Valid until the next append.
 */
long ring_peek(const struct ring *r, uint64_t off, enum ring_kind *kind, const uint8_t **p,
	       size_t len);

#endif
