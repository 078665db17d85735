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

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pty/utf8.h"

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
	bool fixed;        /* buf is lent (ring_use): never grown nor freed */
};

/* Empty ring with budget `max` bytes (headers included). Allocates nothing. */
void ring_init(struct ring *r, size_t max);
void ring_free(struct ring *r);

/*
 * Move the ring's records into `buf` (cap bytes, at least its budget,
 * which becomes cap) and use it as storage from now on: the ring never
 * grows, frees or moves it; ring_free and ring_clear only forget it. For
 * storage that outlives envd (process/keep.c). Returns 0, or -ENOSPC when
 * cap is below the budget.
 */
int ring_use(struct ring *r, uint8_t *buf, size_t cap);

/*
 * Take over a ring whose records already are in `buf` (cap bytes, lent
 * as by ring_use), described by head, used, n_rec and start as a previous
 * ring left them. The records are walked: a header that is out of bounds
 * ends the walk, and what follows is dropped (offsets then restart after
 * the last good record). Returns the number of bytes kept.
 */
size_t ring_restore(struct ring *r, uint8_t *buf, size_t cap, size_t head, size_t n_rec, uint64_t start);

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

/* Scratch space ring_peek_text() may need: one whole UTF-8 character. */
#define RING_TEXT_TMP (UTF8_MAX_TAIL + 1)

/*
 * ring_peek() for sending: PTY output comes out in whole UTF-8 characters
 * (pty/utf8.h), so a client that decodes each event on its own never sees a
 * character cut in two. A run that ends inside a character is shortened
 * (the character leads the next run); a run that is only the start of a
 * character cut by a record or wrap boundary is completed into `tmp`, and
 * *p points there. Bytes up to `limit` may be sent; `final` says no more
 * will follow it (the process's output ended), so a character still
 * incomplete there goes out as it is. Returns the length to send, 0 when
 * the rest of the character is not written yet (or off >= end), or
 * -ERANGE as ring_peek(). Other kinds are returned as ring_peek() does.
 */
long ring_peek_text(const struct ring *r, uint64_t off, uint64_t limit, bool final,
		    enum ring_kind *kind, const uint8_t **p, size_t len, uint8_t tmp[RING_TEXT_TMP]);

#endif
