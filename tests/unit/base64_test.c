/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/base64.h"

static const struct {
	const char *raw, *padded, *unpadded;
} rfc4648[] = {
	{ "", "", "" },
	{ "f", "Zg==", "Zg" },
	{ "fo", "Zm8=", "Zm8" },
	{ "foo", "Zm9v", "Zm9v" },
	{ "foob", "Zm9vYg==", "Zm9vYg" },
	{ "fooba", "Zm9vYmE=", "Zm9vYmE" },
	{ "foobar", "Zm9vYmFy", "Zm9vYmFy" },
};

static ssize_t dec(const char *s, char *out, size_t outlen, bool strict)
{
	size_t n = strlen(s);

	cr_assert_geq(outlen, base64_decoded_maxlen(n));
	return strict ? base64_decode_strict(out, s, n) : base64_decode(out, s, n);
}

Test(base64, rfc4648_vectors)
{
	for (size_t i = 0; i < sizeof(rfc4648) / sizeof(rfc4648[0]); i++) {
		const char *raw = rfc4648[i].raw;
		size_t n = strlen(raw);
		char out[32];
		ssize_t got;

		cr_assert_eq(base64_encode(out, raw, n), strlen(rfc4648[i].padded));
		cr_assert_str_eq(out, rfc4648[i].padded);
		cr_assert_eq(base64_encoded_len(n), strlen(rfc4648[i].padded));

		cr_assert_eq(base64_encode_unpadded(out, raw, n), strlen(rfc4648[i].unpadded));
		cr_assert_str_eq(out, rfc4648[i].unpadded);
		cr_assert_eq(base64_encoded_len_unpadded(n), strlen(rfc4648[i].unpadded));

		got = dec(rfc4648[i].padded, out, sizeof(out), false);
		cr_assert_eq(got, (ssize_t)n, "%s", rfc4648[i].padded);
		cr_assert(memcmp(out, raw, n) == 0);
		got = dec(rfc4648[i].unpadded, out, sizeof(out), false);
		cr_assert_eq(got, (ssize_t)n, "%s", rfc4648[i].unpadded);
		cr_assert(memcmp(out, raw, n) == 0);
		got = dec(rfc4648[i].padded, out, sizeof(out), true);
		cr_assert_eq(got, (ssize_t)n);
		cr_assert(memcmp(out, raw, n) == 0);
	}
}

Test(base64, null_source_with_zero_length)
{
	char out[4];

	cr_assert_eq(base64_encode(out, NULL, 0), 0);
	cr_assert_str_eq(out, "");
	cr_assert_eq(base64_decode(out, "", 0), 0);
	cr_assert_eq(base64_decode_strict(out, "", 0), 0);
}

Test(base64, lenient_accepts_url_alphabet)
{
	const unsigned char raw[] = { 0xfb, 0xff, 0xbf, 0xfb };
	char out[16];

	/* 0xfb 0xff 0xbf is "+/+/" in the standard alphabet, "-_-_" in URL-safe. */
	cr_assert_eq(dec("+/+/", out, sizeof(out), false), 3);
	cr_assert(memcmp(out, raw, 3) == 0);
	cr_assert_eq(dec("-_-_", out, sizeof(out), false), 3);
	cr_assert(memcmp(out, raw, 3) == 0);
	cr_assert_eq(dec("-_-_-w==", out, sizeof(out), false), 4);
	cr_assert(memcmp(out, raw, 4) == 0);
	cr_assert_eq(dec("-_-_-w", out, sizeof(out), false), 4);
	cr_assert(memcmp(out, raw, 4) == 0);
}

Test(base64, lenient_rejects_bad_input)
{
	static const char *const bad[] = {
		"a",        /* one char cannot encode a byte */
		"abcde",    /* same, after a full group */
		"QQ=",      /* padding must complete the group */
		"Q===",     /* three padding chars */
		"QQ===",    /* too much padding */
		"=",        /* only padding */
		"====",
		"QQ=A",     /* padding inside */
		"Q=Q=",
		"+-AA",     /* both alphabets */
		"ab/_",
		"ab c",     /* whitespace */
		"ab\ncd",
		"ab*d",
		"\xc3\xa9" "AA",
	};
	char out[32];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_eq(dec(bad[i], out, sizeof(out), false), -EINVAL, "accepted \"%s\"", bad[i]);
}

Test(base64, strict_decode_as_go_stdencoding)
{
	char out[32];

	cr_assert_eq(dec("cm9vdDo=", out, sizeof(out), true), 5);
	cr_assert(memcmp(out, "root:", 5) == 0);
	cr_assert_eq(dec("Og==", out, sizeof(out), true), 1);
	cr_assert_eq(out[0], ':');
	/* Unpadded, URL alphabet, stray padding: all refused. */
	cr_assert_eq(dec("cm9vdDo", out, sizeof(out), true), -EINVAL);
	cr_assert_eq(dec("Og", out, sizeof(out), true), -EINVAL);
	cr_assert_eq(dec("-_-_", out, sizeof(out), true), -EINVAL);
	cr_assert_eq(dec("Og=", out, sizeof(out), true), -EINVAL);
	cr_assert_eq(dec("O===", out, sizeof(out), true), -EINVAL);
	cr_assert_eq(dec("cm9v dDo=", out, sizeof(out), true), -EINVAL);
	/* Non-zero trailing bits are tolerated, as by Go's non-Strict() decoder. */
	cr_assert_eq(dec("QR==", out, sizeof(out), true), 1);
	cr_assert_eq(out[0], 'A');
}

Test(base64, signature_vector_shape)
{
	/* A signature as the SDKs compute it: 43 unpadded characters for a
	   32-byte SHA-256 digest. */
	const char *sig = "gUtH/s9YCJWgCizjfUxuWfhFE4QSydOWEIIvfLwDr6E";
	unsigned char digest[33];
	char back[64];

	cr_assert_eq(base64_decode(digest, sig, strlen(sig)), 32);
	cr_assert_eq(base64_encoded_len_unpadded(32), 43);
	cr_assert_eq(base64_encode_unpadded(back, digest, 32), 43);
	cr_assert_str_eq(back, sig);
}

Test(base64, round_trip_all_lengths_and_bytes)
{
	unsigned char raw[300], got[304];
	char enc[512];
	uint32_t seed = 12345;

	for (size_t n = 0; n <= sizeof(raw); n++) {
		size_t w;

		for (size_t i = 0; i < n; i++) {
			seed = seed * 1103515245u + 12345u;
			raw[i] = (unsigned char)(seed >> 16);
		}
		w = base64_encode(enc, raw, n);
		cr_assert_eq(w, base64_encoded_len(n));
		cr_assert_eq(enc[w], '\0');
		cr_assert_eq(base64_decode(got, enc, w), (ssize_t)n);
		cr_assert(memcmp(got, raw, n) == 0);
		cr_assert_eq(base64_decode_strict(got, enc, w), (ssize_t)n);
		cr_assert(memcmp(got, raw, n) == 0);

		w = base64_encode_unpadded(enc, raw, n);
		cr_assert_eq(w, base64_encoded_len_unpadded(n));
		cr_assert_eq(base64_decode(got, enc, w), (ssize_t)n);
		cr_assert(memcmp(got, raw, n) == 0);
		if (n % 3)
			cr_assert_eq(base64_decode_strict(got, enc, w), -EINVAL);
	}
}

Test(base64, decode_in_place)
{
	char buf[64];
	const char *txt = "aGVsbG8gd29ybGQsIGluIHBsYWNlIQ==";

	strcpy(buf, txt);
	cr_assert_eq(base64_decode(buf, buf, strlen(txt)), 22);
	cr_assert(memcmp(buf, "hello world, in place!", 22) == 0);
}

Test(base64, every_byte_value)
{
	unsigned char raw[256], got[256];
	char enc[400];

	for (int i = 0; i < 256; i++)
		raw[i] = (unsigned char)i;
	base64_encode(enc, raw, sizeof(raw));
	cr_assert_eq(base64_decode(got, enc, strlen(enc)), 256);
	cr_assert(memcmp(got, raw, 256) == 0);
	/* The URL-safe form of the same data decodes identically. */
	for (char *p = enc; *p; p++) {
		if (*p == '+')
			*p = '-';
		else if (*p == '/')
			*p = '_';
	}
	cr_assert_eq(base64_decode(got, enc, strlen(enc)), 256);
	cr_assert(memcmp(got, raw, 256) == 0);
	cr_assert_eq(base64_decode_strict(got, enc, strlen(enc)), -EINVAL);
}

Test(base64, every_invalid_character_rejected)
{
	char out[8];

	for (int c = 0; c < 256; c++) {
		char in[5] = { 'A', 'A', 'A', (char)c, 0 };
		bool valid = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
			     (c >= '0' && c <= '9') || c == '+' || c == '/' || c == '-' || c == '_';
		ssize_t r = base64_decode(out, in, 4);

		if (c == '=')
			cr_assert_eq(r, 2);
		else if (valid)
			cr_assert_eq(r, 3, "char %d", c);
		else
			cr_assert_eq(r, -EINVAL, "char %d", c);
	}
}
