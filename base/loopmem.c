/* SPDX-License-Identifier: Apache-2.0 */
/*
 * loopmem.c - size-class free lists for the loop thread (see loopmem.h).
 *
 * Each block carries a 16-byte header (keeping malloc's alignment): its
 * class in the first byte (0xff for a block passed on to malloc), the
 * free list's link in the second word. Under AddressSanitizer a block on
 * a free list is poisoned, and one handed out is open for exactly the
 * bytes asked for: a use after loopmem_free, or past the size asked for,
 * is reported as it would be with malloc.
 */
#include "base/loopmem.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define CLASSES 8 /* 32 << 0 .. 32 << 7 = 4096 */
#define HDR 16
#define BIG 0xff

/* The free list's link, in the header. */
#define LINK(p) (*(void **)((unsigned char *)(p) + 8))

static void *free_list[CLASSES];
static size_t cached;

static int size_class(size_t n)
{
	for (int c = 0; c < CLASSES; c++)
		if (n <= ((size_t)32 << c))
			return c;
	return -1;
}

void *loopmem_malloc(size_t n)
{
	int c = size_class(n);
	unsigned char *p;

	if (c >= 0 && free_list[c]) {
		p = free_list[c];
		free_list[c] = LINK(p);
		cached -= (size_t)32 << c;
		UNPOISON(p + HDR, n);
		return p + HDR;
	}
	if (c < 0 && n > SIZE_MAX - HDR)
		return NULL;
	p = malloc(HDR + (c >= 0 ? (size_t)32 << c : n));
	if (!p)
		return NULL;
	p[0] = (unsigned char)(c >= 0 ? c : BIG);
	return p + HDR;
}

void loopmem_free(void *q)
{
	unsigned char *p;

	if (!q)
		return;
	p = (unsigned char *)q - HDR;
	if (p[0] != BIG && cached + ((size_t)32 << p[0]) <= LOOPMEM_CACHE_BYTES) {
		LINK(p) = free_list[p[0]];
		free_list[p[0]] = p;
		cached += (size_t)32 << p[0];
		POISON(q, (size_t)32 << p[0]);
		return;
	}
	free(p);
}

void *loopmem_calloc(size_t k, size_t n)
{
	void *q;

	if (n && k > SIZE_MAX / n)
		return NULL;
	q = loopmem_malloc(k * n);
	if (q)
		memset(q, 0, k * n);
	return q;
}

void *loopmem_realloc(void *q, size_t n)
{
	unsigned char *p;
	size_t have;
	void *r;

	if (!q)
		return loopmem_malloc(n);
	p = (unsigned char *)q - HDR;
	if (p[0] != BIG) {
		have = (size_t)32 << p[0];
		if (n <= have) {
			UNPOISON(q, have);
			return q;
		}
		if (!(r = loopmem_malloc(n)))
			return NULL;
		UNPOISON(q, have); /* a block from the list was opened for less */
		memcpy(r, q, have);
		loopmem_free(q);
		return r;
	}
	if (size_class(n) >= 0)
		return q; /* shrinking below the classes' top: keep the big block */
	if (n > SIZE_MAX - HDR)
		return NULL;
	r = realloc(p, HDR + n);
	return r ? (unsigned char *)r + HDR : NULL;
}

static void *pb_alloc(void *ud, size_t n)
{
	return loopmem_malloc(n);
}

static void pb_free(void *ud, void *q)
{
	loopmem_free(q);
}

ProtobufCAllocator loopmem_pb_allocator = { pb_alloc, pb_free, NULL };

size_t loopmem_cached(void)
{
	return cached;
}
