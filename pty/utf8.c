/* SPDX-License-Identifier: Apache-2.0 */
/*
 * utf8.c - character-boundary cuts for output chunks (see utf8.h).
 */
#include "pty/utf8.h"

/* Sequence length announced by a lead byte; 0 for a continuation or an
   invalid byte. Same ranges as RFC 3629 (no 5/6-byte forms, no C0/C1/F5+). */
static size_t lead_len(uint8_t b)
{
	if (b < 0x80)
		return 1;
	if (b >= 0xc2 && b <= 0xdf)
		return 2;
	if (b >= 0xe0 && b <= 0xef)
		return 3;
	if (b >= 0xf0 && b <= 0xf4)
		return 4;
	return 0;
}

/* Whether the second byte is allowed after lead `b` (overlongs, surrogates
   and code points above U+10FFFF excluded, as decoders reject them). */
static int second_ok(uint8_t lead, uint8_t b)
{
	if ((b & 0xc0) != 0x80)
		return 0;
	switch (lead) {
	case 0xe0: return b >= 0xa0;
	case 0xed: return b <= 0x9f;
	case 0xf0: return b >= 0x90;
	case 0xf4: return b <= 0x8f;
	default: return 1;
	}
}

size_t utf8_complete_len(const uint8_t *p, size_t n)
{
	size_t back, start, need;

	/* Find the last lead byte among the final UTF8_MAX_TAIL bytes. */
	for (back = 1; back <= UTF8_MAX_TAIL && back <= n; back++) {
		uint8_t b = p[n - back];

		if ((b & 0xc0) != 0x80)
			break;
	}
	if (back > UTF8_MAX_TAIL || back > n)
		return n; /* only continuation bytes: nothing that can complete */
	start = n - back;
	need = lead_len(p[start]);
	if (need <= back)
		return n; /* ASCII, complete, or invalid lead: nothing to wait for */
	/* An incomplete sequence; hold it back only if what is there is valid. */
	if (back >= 2 && !second_ok(p[start], p[start + 1]))
		return n;
	return start;
}
