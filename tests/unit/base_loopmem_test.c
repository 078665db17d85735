/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "base/buf.h"
#include "base/loopmem.h"
#include "filesystem.pb-c.h"

/* A freed block is handed out again for a request of its class, and the
 * free lists hold what was freed. */
Test(loopmem, reuses_by_class)
{
	size_t before = loopmem_cached();
	char *a = loopmem_malloc(100); /* class 128 */

	cr_assert_not_null(a);
	memset(a, 'x', 100);
	loopmem_free(a);
	cr_assert_eq(loopmem_cached(), before + 128);
	char *b = loopmem_malloc(120);
	cr_assert_eq(b, a, "the same class takes the block back");
	cr_assert_eq(loopmem_cached(), before);
	char *c = loopmem_malloc(20); /* class 32: another list */
	cr_assert_neq(c, a);
	loopmem_free(b);
	loopmem_free(c);
}

Test(loopmem, alignment_and_zeroing)
{
	for (size_t n = 1; n <= 8192; n = n * 3 + 1) {
		unsigned char *p = loopmem_calloc(1, n);
		cr_assert_not_null(p);
		cr_assert_eq((uintptr_t)p % 16, 0, "16-byte aligned at %zu", n);
		for (size_t i = 0; i < n; i++)
			cr_assert_eq(p[i], 0);
		memset(p, 0xab, n);
		loopmem_free(p);
	}
	/* A block that came back dirty is zeroed by calloc all the same. */
	unsigned char *p = loopmem_calloc(4, 16);
	for (size_t i = 0; i < 64; i++)
		cr_assert_eq(p[i], 0);
	loopmem_free(p);
	cr_assert_null(loopmem_calloc(SIZE_MAX / 2, 4), "overflow refused");
}

/* realloc keeps the bytes across classes and into a big block, and back. */
Test(loopmem, realloc_keeps_bytes)
{
	unsigned char *p = loopmem_malloc(10);

	for (int i = 0; i < 10; i++)
		p[i] = (unsigned char)i;
	for (size_t n = 40; n <= 64 * 1024; n *= 2) {
		p = loopmem_realloc(p, n);
		cr_assert_not_null(p);
		for (int i = 0; i < 10; i++)
			cr_assert_eq(p[i], i, "byte %d after growing to %zu", i, n);
		memset(p + 10, 0x55, n - 10);
	}
	p = loopmem_realloc(p, 100); /* shrinking keeps the big block */
	for (int i = 0; i < 10; i++)
		cr_assert_eq(p[i], i);
	loopmem_free(p);
	loopmem_free(NULL);
	p = loopmem_realloc(NULL, 50);
	cr_assert_not_null(p);
	loopmem_free(p);
}

/* What the lists hold is bounded: frees past the bound go to the system. */
Test(loopmem, cache_is_bounded)
{
	enum { N = 2 * LOOPMEM_CACHE_BYTES / 4096 };
	static void *v[N];

	for (int i = 0; i < N; i++)
		cr_assert_not_null(v[i] = loopmem_malloc(4000));
	for (int i = 0; i < N; i++)
		loopmem_free(v[i]);
	cr_assert_leq(loopmem_cached(), LOOPMEM_CACHE_BYTES);
	cr_assert_geq(loopmem_cached(), LOOPMEM_CACHE_BYTES - 4096);
}

/* protobuf-c unpacks into it and frees through it. */
Test(loopmem, protobuf_allocator)
{
	Filesystem__StatRequest req = FILESYSTEM__STAT_REQUEST__INIT;
	uint8_t wire[64];

	req.path = "/tmp/some/path";
	size_t n = filesystem__stat_request__pack(&req, wire);
	for (int round = 0; round < 3; round++) {
		Filesystem__StatRequest *m = filesystem__stat_request__unpack(&loopmem_pb_allocator, n, wire);
		cr_assert_not_null(m);
		cr_assert_str_eq(m->path, "/tmp/some/path");
		filesystem__stat_request__free_unpacked(m, &loopmem_pb_allocator);
	}
}

/* A buffer on the loop's memory grows, and what buf_steal gives is plain
 * malloc memory. */
Test(loopmem, loop_buffer)
{
	struct buf b;
	char chunk[300];

	buf_init_loop(&b, 1 << 20);
	memset(chunk, 'q', sizeof(chunk));
	for (int i = 0; i < 50; i++)
		cr_assert_eq(buf_append(&b, chunk, sizeof(chunk)), 0);
	cr_assert_eq(b.len, 50 * sizeof(chunk));
	cr_assert_eq(b.p[b.len], 0);
	size_t len = 0;
	char *s = buf_steal(&b, &len);
	cr_assert_eq(len, 50 * sizeof(chunk));
	cr_assert_eq(s[0], 'q');
	cr_assert_eq(s[len - 1], 'q');
	cr_assert_eq(s[len], 0);
	free(s);
	cr_assert_null(b.p);
	cr_assert_eq(buf_append(&b, "ab", 2), 0, "reusable after the steal");
	cr_assert_str_eq((char *)b.p, "ab");
	buf_free(&b);
	cr_assert_null(b.p);
}

#if defined(__SANITIZE_ADDRESS__)
/* Under ASan a block on a free list is poisoned: a use after free is
 * reported (ASan's exit status, 1) as with malloc. */
Test(loopmem, use_after_free_is_reported, .exit_code = 1)
{
	volatile char *p = loopmem_malloc(64);

	p[0] = 1;
	loopmem_free((void *)p);
	p[1] = 2;
}

/* ... and so is a write past the size asked for, in a reused block. */
Test(loopmem, overflow_of_a_reused_block_is_reported, .exit_code = 1)
{
	char *a = loopmem_malloc(100);
	loopmem_free(a);
	volatile char *p = loopmem_malloc(100);
	cr_assert_eq((void *)p, (void *)a);
	p[110] = 1; /* within the class's 128 bytes, past the 100 asked */
}
#endif
