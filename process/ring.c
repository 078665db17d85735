/* SPDX-License-Identifier: Apache-2.0 */
#include "process/ring.h"

#include "pty/utf8.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Record header: 4-byte little-endian payload length, 1-byte kind. */
#define HDR 5
#define FIRST_CAP (16 * 1024)

void ring_init(struct ring *r, size_t max)
{
	memset(r, 0, sizeof(*r));
	r->max = max < RING_MIN_SIZE ? RING_MIN_SIZE : max;
}

void ring_free(struct ring *r)
{
	if (!r->fixed)
		free(r->buf);
	r->buf = NULL;
	r->fixed = false;
	r->cap = r->used = r->head = r->n_rec = 0;
}

void ring_clear(struct ring *r)
{
	ring_free(r);
	r->start = r->end;
}

static void put(struct ring *r, size_t pos, const void *p, size_t n)
{
	size_t first = r->cap - pos;

	if (first >= n) {
		memcpy(r->buf + pos, p, n);
	} else {
		memcpy(r->buf + pos, p, first);
		memcpy(r->buf, (const uint8_t *)p + first, n - first);
	}
}

static void get(const struct ring *r, size_t pos, void *p, size_t n)
{
	size_t first = r->cap - pos;

	if (first >= n) {
		memcpy(p, r->buf + pos, n);
	} else {
		memcpy(p, r->buf + pos, first);
		memcpy((uint8_t *)p + first, r->buf, n - first);
	}
}

static uint32_t rec_len(const struct ring *r, size_t pos)
{
	uint8_t h[HDR];

	get(r, pos, h, HDR);
	return (uint32_t)h[0] | (uint32_t)h[1] << 8 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 24;
}

static uint8_t rec_kind(const struct ring *r, size_t pos)
{
	return r->buf[(pos + 4) % r->cap];
}

static void set_hdr(struct ring *r, size_t pos, uint32_t len, uint8_t kind)
{
	uint8_t h[HDR] = { len & 0xff, (len >> 8) & 0xff, (len >> 16) & 0xff, len >> 24, kind };

	put(r, pos, h, HDR);
}

static void evict_one(struct ring *r)
{
	uint32_t len = rec_len(r, r->head);

	r->head = (r->head + HDR + len) % r->cap;
	r->used -= HDR + len;
	r->start += len;
	r->n_rec--;
	if (r->n_rec == 0)
		r->head = r->used = 0;
}

/* Re-lay the records at the start of a bigger buffer. */
static int grow(struct ring *r, size_t need)
{
	size_t ncap = r->cap ? r->cap * 2 : FIRST_CAP;
	uint8_t *nb;

	while (ncap < need)
		ncap *= 2;
	if (ncap > r->max)
		ncap = r->max;
	nb = malloc(ncap);
	if (!nb)
		return -ENOMEM;
	if (r->used)
		get(r, r->head, nb, r->used);
	r->last_hdr = r->cap ? (r->last_hdr + r->cap - r->head) % r->cap : 0;
	free(r->buf);
	r->buf = nb;
	r->cap = ncap;
	r->head = 0;
	return 0;
}

int ring_use(struct ring *r, uint8_t *buf, size_t cap)
{
	if (cap < r->max)
		return -ENOSPC;
	if (r->used)
		get(r, r->head, buf, r->used);
	r->last_hdr = r->cap ? (r->last_hdr + r->cap - r->head) % r->cap : 0;
	if (!r->fixed)
		free(r->buf);
	r->buf = buf;
	r->cap = r->max = cap;
	r->head = 0;
	r->fixed = true;
	return 0;
}

size_t ring_restore(struct ring *r, uint8_t *buf, size_t cap, size_t head, size_t n_rec, uint64_t start)
{
	size_t at, used = 0, kept = 0, last = 0;
	uint64_t bytes = 0;

	memset(r, 0, sizeof(*r));
	r->buf = buf;
	r->cap = r->max = cap;
	r->fixed = true;
	r->start = r->end = start;
	if (cap < RING_MIN_SIZE || head >= cap)
		return 0;
	at = head;
	for (size_t i = 0; i < n_rec; i++) {
		uint32_t len = rec_len(r, at);
		uint8_t kind = rec_kind(r, at);
		if (len == 0 || len > RING_REC_MAX || kind < RING_STDOUT || kind > RING_PTY || used + HDR + len > cap)
			break;
		last = at;
		used += HDR + len;
		bytes += len;
		kept++;
		at = (at + HDR + len) % cap;
	}
	r->head = kept ? head : 0;
	r->used = used;
	r->n_rec = kept;
	r->last_hdr = last;
	r->end = start + bytes;
	return (size_t)bytes;
}

/* Make room for `need` more bytes: grow while allowed, else evict. */
static int make_room(struct ring *r, size_t need)
{
	while (r->used + need > r->cap) {
		if (r->cap < r->max && grow(r, r->used + need) == 0)
			continue;
		if (r->n_rec == 0)
			return -ENOMEM;
		evict_one(r);
	}
	return 0;
}

int ring_append(struct ring *r, enum ring_kind kind, const void *p, size_t n)
{
	const uint8_t *s = p;
	int rc = 0;

	while (n > 0) {
		size_t take;

		if (r->n_rec > 0 && rec_kind(r, r->last_hdr) == kind &&
		    rec_len(r, r->last_hdr) < RING_REC_MAX) {
			uint32_t len = rec_len(r, r->last_hdr);

			take = RING_REC_MAX - len;
			if (take > n)
				take = n;
			/* With max >= 4 records the newest one is never evicted here. */
			if (make_room(r, take) < 0)
				goto drop;
			put(r, (r->last_hdr + HDR + len) % r->cap, s, take);
			set_hdr(r, r->last_hdr, len + (uint32_t)take, kind);
			r->used += take;
		} else {
			size_t pos;

			take = n < RING_REC_MAX ? n : RING_REC_MAX;
			if (make_room(r, HDR + take) < 0)
				goto drop;
			pos = (r->head + r->used) % r->cap;
			set_hdr(r, pos, (uint32_t)take, kind);
			put(r, (pos + HDR) % r->cap, s, take);
			r->last_hdr = pos;
			r->n_rec++;
			r->used += HDR + take;
		}
		r->end += take;
		s += take;
		n -= take;
		continue;
drop:
		/* No memory at all: account the bytes as already evicted. */
		r->n_rec = r->used = r->head = 0;
		r->end += n;
		r->start = r->end;
		rc = -ENOMEM;
		break;
	}
	return rc;
}

/* Physical position and remaining record length for `off`, or -ERANGE / 0. */
static long locate(const struct ring *r, uint64_t off, enum ring_kind *kind, size_t *pos)
{
	uint64_t o = r->start;
	size_t at = r->head;

	if (off < r->start)
		return -ERANGE;
	if (off >= r->end)
		return 0;
	for (size_t i = 0; i < r->n_rec; i++) {
		uint32_t rl = rec_len(r, at);

		if (off < o + rl) {
			size_t skip = (size_t)(off - o);

			*kind = (enum ring_kind)rec_kind(r, at);
			*pos = (at + HDR + skip) % r->cap;
			return (long)(rl - skip);
		}
		o += rl;
		at = (at + HDR + rl) % r->cap;
	}
	return 0;
}

long ring_read(const struct ring *r, uint64_t off, enum ring_kind *kind, void *out, size_t len)
{
	size_t pos = 0;
	long n = locate(r, off, kind, &pos);

	if (n <= 0)
		return n;
	if ((size_t)n > len)
		n = (long)len;
	get(r, pos, out, (size_t)n);
	return n;
}

long ring_peek(const struct ring *r, uint64_t off, enum ring_kind *kind, const uint8_t **p,
	       size_t len)
{
	size_t pos = 0;
	long n = locate(r, off, kind, &pos);

	if (n <= 0)
		return n;
	if ((size_t)n > len)
		n = (long)len;
	if ((size_t)n > r->cap - pos)
		n = (long)(r->cap - pos);
	*p = r->buf + pos;
	return n;
}

long ring_peek_text(const struct ring *r, uint64_t off, uint64_t limit, bool final,
		    enum ring_kind *kind, const uint8_t **p, size_t len, uint8_t tmp[RING_TEXT_TMP])
{
	long n = ring_peek(r, off, kind, p, len);
	size_t ok, have;
	enum ring_kind k;

	if (n <= 0 || *kind != RING_PTY)
		return n;
	ok = utf8_complete_len(*p, (size_t)n);
	if (ok > 0)
		return (long)ok;
	/* The run is only the first bytes of a character. */
	if (off + (uint64_t)n >= limit)
		return final ? n : 0; /* the rest is not written yet */
	/* Cut by a record or wrap boundary: complete it from what follows. */
	have = (size_t)n;
	memcpy(tmp, *p, have);
	while (have < RING_TEXT_TMP && off + have < limit) {
		long m = ring_read(r, off + have, &k, tmp + have, RING_TEXT_TMP - have);

		if (m <= 0)
			break;
		have += (size_t)m;
	}
	if (off + have > limit)
		have = (size_t)(limit - off);
	*p = tmp;
	ok = utf8_complete_len(tmp, have);
	if (ok > 0)
		return (long)ok;
	return final && off + have >= limit ? (long)have : 0;
}
