/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <string.h>

#include "pty/utf8.h"

static size_t cut(const char *s, size_t n)
{
	return utf8_complete_len((const uint8_t *)s, n);
}

Test(pty_utf8, complete_text_goes_out_whole)
{
	cr_assert_eq(cut("", 0), 0);
	cr_assert_eq(cut("hello\r\n", 7), 7);
	cr_assert_eq(cut("\xc3\xa9", 2), 2);             /* é */
	cr_assert_eq(cut("a\xe2\x82\xac", 4), 4);        /* a€ */
	cr_assert_eq(cut("\xf0\x9f\x98\x80", 4), 4);     /* 😀 */
}

Test(pty_utf8, an_incomplete_tail_is_held_back)
{
	cr_assert_eq(cut("ab\xc3", 3), 2);
	cr_assert_eq(cut("ab\xe2", 3), 2);
	cr_assert_eq(cut("ab\xe2\x82", 4), 2);
	cr_assert_eq(cut("ab\xf0", 3), 2);
	cr_assert_eq(cut("ab\xf0\x9f", 4), 2);
	cr_assert_eq(cut("ab\xf0\x9f\x98", 5), 2);
	cr_assert_eq(cut("\xf0\x9f\x98", 3), 0, "a chunk may be all tail");
}

Test(pty_utf8, every_split_of_mixed_text_rejoins_into_whole_characters)
{
	/* Cut the text at every position, carry the held-back bytes to the
	   next chunk, and check that every emitted chunk is whole characters
	   and that the chunks rejoin to the input. */
	const char *text = "x\xc3\xa9y\xe2\x82\xac z\xf0\x9f\x98\x80!\xe4\xb8\xad\xe6\x96\x87";
	size_t n = strlen(text);

	for (size_t split = 0; split <= n; split++) {
		char out[64];
		size_t out_n = 0, carry = 0, pos = 0;
		const size_t parts[2] = { split, n - split };

		for (int k = 0; k < 2; k++) {
			uint8_t chunk[64];
			size_t len = carry, ok;

			memcpy(chunk, text + pos - carry, carry);
			memcpy(chunk + carry, text + pos, parts[k]);
			pos += parts[k];
			len += parts[k];
			ok = utf8_complete_len(chunk, len);
			cr_assert_eq(utf8_complete_len(chunk, ok), ok, "an emitted chunk is whole");
			memcpy(out + out_n, chunk, ok);
			out_n += ok;
			carry = len - ok;
			cr_assert_leq(carry, UTF8_MAX_TAIL);
		}
		cr_assert_eq(carry, 0, "split %zu: the whole text ends complete", split);
		cr_assert_eq(out_n, n);
		cr_assert_eq(memcmp(out, text, n), 0);
	}
}

Test(pty_utf8, malformed_bytes_are_never_held)
{
	cr_assert_eq(cut("ab\x80", 3), 3, "a stray continuation byte");
	cr_assert_eq(cut("ab\x80\x80\x80\x80", 6), 6, "only continuation bytes");
	cr_assert_eq(cut("ab\xff", 3), 3, "not a lead byte");
	cr_assert_eq(cut("ab\xc0", 3), 3, "overlong lead");
	cr_assert_eq(cut("ab\xf5", 3), 3, "above U+10FFFF");
	cr_assert_eq(cut("ab\xe0\x80", 4), 4, "overlong three-byte form");
	cr_assert_eq(cut("ab\xed\xa0", 4), 4, "surrogate");
	cr_assert_eq(cut("ab\xf4\x90", 4), 4, "above U+10FFFF, four-byte");
	cr_assert_eq(cut("ab\xe2" "A", 4), 4, "a lead followed by ASCII");
	cr_assert_eq(cut("\xc3\xa9\xa9", 3), 3, "complete then stray");
}
