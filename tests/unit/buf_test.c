/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"

Test(buf, append_keeps_bytes_and_nul)
{
	struct buf b = BUF_INIT(1024);

	cr_assert_eq(buf_append(&b, "hello", 5), 0);
	cr_assert_eq(buf_append_byte(&b, ' '), 0);
	cr_assert_eq(buf_append(&b, "world", 5), 0);
	cr_assert_eq(b.len, 11);
	cr_assert_str_eq((char *)b.p, "hello world");
	cr_assert_gt(b.cap, b.len);
	buf_free(&b);
	cr_assert_null(b.p);
	cr_assert_eq(b.len, 0);
	cr_assert_eq(b.max, 1024);
}

Test(buf, empty_append_allocates_empty_string)
{
	struct buf b = BUF_INIT(16);

	cr_assert_eq(buf_append(&b, NULL, 0), 0);
	cr_assert_not_null(b.p);
	cr_assert_str_eq((char *)b.p, "");
	buf_free(&b);
}

Test(buf, grows_across_many_appends)
{
	struct buf b = BUF_INIT(BUF_UNBOUNDED);
	char chunk[100];

	for (int i = 0; i < 1000; i++) {
		memset(chunk, 'a' + i % 26, sizeof(chunk));
		cr_assert_eq(buf_append(&b, chunk, sizeof(chunk)), 0);
	}
	cr_assert_eq(b.len, 100000);
	for (int i = 0; i < 1000; i++)
		cr_assert_eq(b.p[i * 100 + 99], 'a' + i % 26);
	cr_assert_eq(b.p[b.len], '\0');
	buf_free(&b);
}

Test(buf, bound_is_exact_and_failure_leaves_buffer_unchanged)
{
	struct buf b = BUF_INIT(10);

	cr_assert_eq(buf_append(&b, "0123456789", 10), 0);
	cr_assert_eq(b.len, 10);
	cr_assert_leq(b.cap, 11, "never allocates beyond max + NUL (cap %zu)", b.cap);
	cr_assert_eq(buf_append_byte(&b, 'x'), -E2BIG);
	cr_assert_eq(b.len, 10);
	cr_assert_str_eq((char *)b.p, "0123456789");
	cr_assert_eq(buf_append(&b, "", 0), 0);
	cr_assert_eq(buf_reserve(&b, (size_t)-1), -E2BIG);
	cr_assert_eq(buf_append_fmt(&b, "%d", 1), -E2BIG);
	buf_free(&b);
}

Test(buf, huge_reserve_is_e2big_not_overflow)
{
	struct buf b = BUF_INIT((size_t)-1);

	cr_assert_eq(buf_append(&b, "ab", 2), 0);
	cr_assert_eq(buf_reserve(&b, (size_t)-1), -E2BIG);
	cr_assert_eq(buf_reserve(&b, (size_t)-1 - 1), -E2BIG);
	cr_assert_eq(b.len, 2);
	buf_free(&b);
}

Test(buf, append_fmt)
{
	struct buf b = BUF_INIT(4096);
	char big[300];

	cr_assert_eq(buf_append_fmt(&b, "%s=%d;", "a", 1), 0);
	memset(big, 'z', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	cr_assert_eq(buf_append_fmt(&b, "%s", big), 0); /* forces growth */
	cr_assert_eq(b.len, 4 + 299);
	cr_assert_eq(strncmp((char *)b.p, "a=1;zzz", 7), 0);
	cr_assert_eq(strlen((char *)b.p), b.len);
	buf_free(&b);
}

Test(buf, consume_and_reset)
{
	struct buf b = BUF_INIT(64);

	cr_assert_eq(buf_append(&b, "abcdef", 6), 0);
	buf_consume(&b, 2);
	cr_assert_eq(b.len, 4);
	cr_assert_str_eq((char *)b.p, "cdef");
	buf_consume(&b, 100);
	cr_assert_eq(b.len, 0);
	cr_assert_str_eq((char *)b.p, "");
	cr_assert_eq(buf_append(&b, "xy", 2), 0);
	buf_reset(&b);
	cr_assert_eq(b.len, 0);
	cr_assert_not_null(b.p, "reset keeps the memory");
	buf_free(&b);
	buf_consume(&b, 1); /* on an empty, unallocated buffer: no crash */
	buf_reset(&b);
}

Test(buf, steal_hands_over_ownership)
{
	struct buf b;
	size_t n = 99;
	char *s;

	buf_init(&b, 100);
	s = buf_steal(&b, &n);
	cr_assert_not_null(s);
	cr_assert_str_eq(s, "");
	cr_assert_eq(n, 0);
	free(s);

	cr_assert_eq(buf_append(&b, "body", 4), 0);
	s = buf_steal(&b, &n);
	cr_assert_str_eq(s, "body");
	cr_assert_eq(n, 4);
	cr_assert_null(b.p);
	cr_assert_eq(b.len, 0);
	free(s);
}

Test(buf, str0_appends_a_nul_separated_list)
{
	struct buf b = BUF_INIT(10);

	cr_assert_eq(buf_append_str0(&b, "ab", 2), 0);
	cr_assert_eq(buf_append_str0(&b, "", 0), 0);
	cr_assert_eq(buf_append_str0(&b, "cde", 3), 0);
	cr_assert_eq(b.len, 8, "each string and its NUL count (len %zu)", b.len);
	cr_assert_eq(memcmp(b.p, "ab\0\0cde\0\0", 9), 0, "separators, and a NUL after len");
	cr_assert_eq(buf_append_str0(&b, "fg", 2), -E2BIG, "8 + 3 > 10");
	cr_assert_eq(b.len, 8);
	cr_assert_eq(buf_append_str0(&b, "f", 1), 0);
	cr_assert_eq(b.len, 10);
	cr_assert_str_eq((char *)b.p + 8, "f");
	buf_free(&b);
}
