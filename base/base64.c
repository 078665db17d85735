/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base64.c - RFC 4648 base64. The encoder is a plain 3-bytes-to-4-chars
 * loop because it runs over every chunk of process output sent as JSON.
 */
#include "base/base64.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

static const char b64_std[64] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/*
 * Decoding table entries: the 6-bit value in the low bits plus flags; 0 for
 * characters outside both alphabets. An AND over all entries of a string
 * tells whether every character was valid, an OR whether both the `+/` and
 * the `-_` alphabets were used.
 */
#define B64_OK 0x100
#define B64_STD 0x200 /* `+` or `/` */
#define B64_URL 0x400 /* `-` or `_` */

static const uint16_t b64_dec[256] = {
	['A'] = 0 | B64_OK, ['B'] = 1 | B64_OK, ['C'] = 2 | B64_OK, ['D'] = 3 | B64_OK,
	['E'] = 4 | B64_OK, ['F'] = 5 | B64_OK, ['G'] = 6 | B64_OK, ['H'] = 7 | B64_OK,
	['I'] = 8 | B64_OK, ['J'] = 9 | B64_OK, ['K'] = 10 | B64_OK, ['L'] = 11 | B64_OK,
	['M'] = 12 | B64_OK, ['N'] = 13 | B64_OK, ['O'] = 14 | B64_OK, ['P'] = 15 | B64_OK,
	['Q'] = 16 | B64_OK, ['R'] = 17 | B64_OK, ['S'] = 18 | B64_OK, ['T'] = 19 | B64_OK,
	['U'] = 20 | B64_OK, ['V'] = 21 | B64_OK, ['W'] = 22 | B64_OK, ['X'] = 23 | B64_OK,
	['Y'] = 24 | B64_OK, ['Z'] = 25 | B64_OK, ['a'] = 26 | B64_OK, ['b'] = 27 | B64_OK,
	['c'] = 28 | B64_OK, ['d'] = 29 | B64_OK, ['e'] = 30 | B64_OK, ['f'] = 31 | B64_OK,
	['g'] = 32 | B64_OK, ['h'] = 33 | B64_OK, ['i'] = 34 | B64_OK, ['j'] = 35 | B64_OK,
	['k'] = 36 | B64_OK, ['l'] = 37 | B64_OK, ['m'] = 38 | B64_OK, ['n'] = 39 | B64_OK,
	['o'] = 40 | B64_OK, ['p'] = 41 | B64_OK, ['q'] = 42 | B64_OK, ['r'] = 43 | B64_OK,
	['s'] = 44 | B64_OK, ['t'] = 45 | B64_OK, ['u'] = 46 | B64_OK, ['v'] = 47 | B64_OK,
	['w'] = 48 | B64_OK, ['x'] = 49 | B64_OK, ['y'] = 50 | B64_OK, ['z'] = 51 | B64_OK,
	['0'] = 52 | B64_OK, ['1'] = 53 | B64_OK, ['2'] = 54 | B64_OK, ['3'] = 55 | B64_OK,
	['4'] = 56 | B64_OK, ['5'] = 57 | B64_OK, ['6'] = 58 | B64_OK, ['7'] = 59 | B64_OK,
	['8'] = 60 | B64_OK, ['9'] = 61 | B64_OK,
	['+'] = 62 | B64_OK | B64_STD, ['/'] = 63 | B64_OK | B64_STD,
	['-'] = 62 | B64_OK | B64_URL, ['_'] = 63 | B64_OK | B64_URL,
};

static size_t b64_encode_body(char *dst, const unsigned char *s, size_t n)
{
	char *d = dst;
	size_t i = 0;

	for (; i + 3 <= n; i += 3) {
		uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
		d[0] = b64_std[v >> 18];
		d[1] = b64_std[(v >> 12) & 63];
		d[2] = b64_std[(v >> 6) & 63];
		d[3] = b64_std[v & 63];
		d += 4;
	}
	if (n - i == 1) {
		uint32_t v = (uint32_t)s[i] << 16;
		*d++ = b64_std[v >> 18];
		*d++ = b64_std[(v >> 12) & 63];
	} else if (n - i == 2) {
		uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8;
		*d++ = b64_std[v >> 18];
		*d++ = b64_std[(v >> 12) & 63];
		*d++ = b64_std[(v >> 6) & 63];
	}
	return (size_t)(d - dst);
}

size_t base64_encode(char *dst, const void *src, size_t n)
{
	size_t w = b64_encode_body(dst, src, n);

	while (w % 4)
		dst[w++] = '=';
	dst[w] = '\0';
	return w;
}

size_t base64_encode_unpadded(char *dst, const void *src, size_t n)
{
	size_t w = b64_encode_body(dst, src, n);

	dst[w] = '\0';
	return w;
}

/*
 * Decode `n` characters that carry no padding. Returns bytes written, or
 * -EINVAL. `lenient` accepts the URL-safe alphabet too (but not mixed with
 * the standard one, as protojson picks one alphabet per string).
 */
static ssize_t b64_decode_body(unsigned char *dst, const char *src, size_t n,
			       bool lenient)
{
	const unsigned char *s = (const unsigned char *)src;
	unsigned char *d = dst;
	unsigned all = B64_OK, any = 0;
	size_t i = 0;

	if (n % 4 == 1)
		return -EINVAL;
	/* Reads a whole group before writing it, so dst == src is safe. */
	for (; i + 4 <= n; i += 4) {
		unsigned a = b64_dec[s[i]], b = b64_dec[s[i + 1]];
		unsigned c = b64_dec[s[i + 2]], e = b64_dec[s[i + 3]];
		uint32_t v;

		all &= a & b & c & e;
		any |= a | b | c | e;
		v = (a & 63) << 18 | (b & 63) << 12 | (c & 63) << 6 | (e & 63);
		d[0] = (unsigned char)(v >> 16);
		d[1] = (unsigned char)(v >> 8);
		d[2] = (unsigned char)v;
		d += 3;
	}
	if (n - i >= 2) {
		unsigned a = b64_dec[s[i]], b = b64_dec[s[i + 1]];
		unsigned c = n - i == 3 ? b64_dec[s[i + 2]] : B64_OK;
		uint32_t v;

		all &= a & b & c;
		any |= a | b | c;
		v = (a & 63) << 18 | (b & 63) << 12 | (c & 63) << 6;
		*d++ = (unsigned char)(v >> 16);
		if (n - i == 3)
			*d++ = (unsigned char)(v >> 8);
	}
	if (!(all & B64_OK))
		return -EINVAL;
	if (lenient ? (any & B64_STD) && (any & B64_URL) : (any & B64_URL) != 0)
		return -EINVAL;
	return (ssize_t)(d - dst);
}

/* Number of trailing '=' (0-2), or -1 if there are more. */
static int b64_padding(const char *src, size_t n)
{
	int pad = 0;

	while (n > 0 && src[n - 1] == '=') {
		if (++pad > 2)
			return -1;
		n--;
	}
	return pad;
}

ssize_t base64_decode(void *dst, const char *src, size_t n)
{
	int pad = b64_padding(src, n);

	if (pad < 0)
		return -EINVAL;
	/* Padding, when present, must complete the last group exactly:
	   "QQ==" or "QQ" but not "QQ=" or "QQ===". */
	if (pad > 0 && n % 4 != 0)
		return -EINVAL;
	return b64_decode_body(dst, src, n - (size_t)pad, true);
}

ssize_t base64_decode_strict(void *dst, const char *src, size_t n)
{
	int pad = b64_padding(src, n);

	if (pad < 0 || n % 4 != 0)
		return -EINVAL;
	return b64_decode_body(dst, src, n - (size_t)pad, false);
}
