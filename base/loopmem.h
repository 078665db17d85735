/* SPDX-License-Identifier: Apache-2.0 */
/*
 * loopmem.h - small short-lived blocks for the event loop thread.
 *
 * What the loop allocates and frees a few times per request (nghttp2's
 * frames and header copies, decoded request messages) comes from free
 * lists by size class (32 B to 4 KiB, powers of two), bounded in all
 * (LOOPMEM_CACHE_BYTES). From musl's allocator directly, the groups
 * holding such blocks were unmapped whenever a burst of requests ended and
 * mapped again by the next: an mmap, a munmap (with a TLB shoot-down on
 * every CPU the process runs on) and page faults for a handful of small
 * blocks; and every call takes the allocator's one lock, which worker
 * threads contend for.
 *
 * Loop thread only: the lists have no lock. A block from loopmem_malloc
 * goes back through loopmem_free (or loopmem_realloc), never free().
 * Larger blocks are passed on to malloc, with the same header.
 *
 * Errors: NULL when out of memory, as malloc.
 */
#ifndef ENVD_BASE_LOOPMEM_H
#define ENVD_BASE_LOOPMEM_H

#include <stddef.h>

#include <protobuf-c/protobuf-c.h>

#define LOOPMEM_CACHE_BYTES (1024 * 1024)

void *loopmem_malloc(size_t n);
void *loopmem_calloc(size_t k, size_t n);
void *loopmem_realloc(void *q, size_t n);
void loopmem_free(void *q);

/* For protobuf-c's unpack and free_unpacked on the loop. */
extern ProtobufCAllocator loopmem_pb_allocator;

/* Bytes held in the free lists (tests). */
size_t loopmem_cached(void);

#endif
