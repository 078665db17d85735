/* SPDX-License-Identifier: Apache-2.0 */
/*
 * buf.h - a bounded, growable byte buffer.
 *
 * One type for every "collect bytes until done" site (request bodies,
 * encoder output, input queues): the owner embeds a struct buf, appends,
 * reads b.p[0..len) and frees it. Growth doubles (from 64 bytes) and never
 * lets len exceed `max`, so a peer cannot make the daemon allocate more than
 * the bound chosen at the call site.
 *
 * Errors: 0 or a negative errno. -ENOMEM when an allocation fails, -E2BIG
 * when the bytes would pass `max`; the buffer is unchanged by a failed call.
 * Ownership: the buffer owns p; buf_free() releases it, buf_steal() hands it
 * to the caller. Once allocated, p is always NUL-terminated at p[len] (the
 * NUL is not counted in len), so text bodies can be used as C strings.
 */
#ifndef ENVD_BUF_H
#define ENVD_BUF_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct buf {
	uint8_t *p;  /* NULL until the first byte is reserved */
	size_t len;  /* bytes in use */
	size_t cap;  /* bytes allocated; > len once allocated (the NUL) */
	size_t max;  /* bound on len */
	bool loop;   /* memory from base/loopmem: the loop thread's own */
};

/* Initialiser: struct buf b = BUF_INIT(1 << 20); */
#define BUF_INIT(bound) { NULL, 0, 0, (bound) }
/* No bound beyond what size_t arithmetic allows. */
#define BUF_UNBOUNDED ((size_t)-1 / 4)

void buf_init(struct buf *b, size_t max);
/* The same, with memory from base/loopmem's size classes: for a buffer
 * that lives and dies on the loop thread within a request or two (no
 * malloc, no page of musl's given back per request). buf_steal() of it
 * copies to malloc'd memory. */
void buf_init_loop(struct buf *b, size_t max);

/* Room for n more bytes (and the NUL) after len. 0, -ENOMEM or -E2BIG. */
int buf_reserve(struct buf *b, size_t n);

/* Append n bytes (n may be 0: allocates so that p is a valid ""). */
int buf_append(struct buf *b, const void *data, size_t n);

/* Append n bytes and a NUL that counts in len (a string of a NUL-separated
 * list). */
int buf_append_str0(struct buf *b, const void *data, size_t n);

/* Append one byte. */
int buf_append_byte(struct buf *b, uint8_t c);

/* Append printf output. -EINVAL on a format error. */
int buf_append_fmt(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int buf_append_vfmt(struct buf *b, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

/* Drop the first n bytes (all of them when n >= len); keeps the memory. */
void buf_consume(struct buf *b, size_t n);

/* len = 0; keeps the memory and the bound. */
void buf_reset(struct buf *b);

/* Release the memory; the buffer is empty and reusable with the same bound. */
void buf_free(struct buf *b);

/*
 * Hand the bytes to the caller (free() them), NUL-terminated; *len (if not
 * NULL) gets their length. An empty, never-allocated buffer yields a
 * malloc'd "" (NULL only if that allocation fails). The buffer is left empty.
 */
char *buf_steal(struct buf *b, size_t *len);

#endif
