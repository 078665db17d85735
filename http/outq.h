/* SPDX-License-Identifier: Apache-2.0 */
/*
 * outq.h - a queue of output segments: bytes in memory or a range of a file.
 *
 * Protocols append; the connection (or an HTTP/2 stream's data source)
 * drains. Memory segments are recycled through a small cache so a stream of
 * large messages reuses the same blocks.
 *
 * Errors: functions return 0 or a negative errno value (-ENOMEM, or the
 * errno of a failed dup for outq_append_file_dup). Nothing here does I/O.
 */
#ifndef ENVD_HTTP_OUTQ_H
#define ENVD_HTTP_OUTQ_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* One piece of output: bytes in memory, or a range of a file. */
struct outseg {
	struct outseg *next;
	int fd;          /* -1 for memory */
	off_t foff;      /* file: next offset */
	size_t len;      /* bytes left to send */
	size_t cap;      /* memory: capacity of data[] */
	size_t off;      /* memory: first unsent byte */
	void (*on_sent)(void *arg); /* called once the segment is written */
	void *arg;
	uint8_t *ext;    /* memory: bytes owned by the producer (released by
			  * on_sent), or NULL for data[] */
	uint8_t data[];
};

/* The bytes of a memory segment. */
static inline uint8_t *outseg_mem(struct outseg *s)
{
	return s->ext ? s->ext : s->data;
}

struct outq {
	struct outseg *head, *tail;
	size_t bytes;    /* total unsent bytes */
};

/* Bytes a connection may queue before producers wait. */
#define OUTQ_HIGH (512 * 1024)

/* Append a copy of p[0..n) (coalesced into the tail when it fits). */
int outq_append(struct outq *q, const void *p, size_t n);
/*
 * Append mem[0..n) without copying: the queue reads it in place until it
 * is written or dropped, then calls release(arg).
 */
int outq_append_owned(struct outq *q, void *mem, size_t n, void (*release)(void *), void *arg);
/* Append a file range; on_sent(arg) runs when it has gone out or is dropped. */
int outq_append_file(struct outq *q, int fd, off_t off, size_t len, void (*on_sent)(void *),
		     void *arg);
/* Append a file range from a private duplicate of fd (closed when sent). */
int outq_append_file_dup(struct outq *q, int fd, off_t off, size_t len);
/* Drop the head segment (sent or abandoned): runs its on_sent. */
void outq_pop(struct outq *q);
/* Release a segment taken off a queue: runs on_sent, recycles memory. */
void outseg_free(struct outseg *s);
/* Run every callback and free everything. */
void outq_clear(struct outq *q);

#endif
