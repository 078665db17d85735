/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base64.h - RFC 4648 base64 for the JSON codec (bytes fields), signed URLs
 * and HTTP Basic auth.
 *
 * No allocation: the caller provides the output buffer, sized with the
 * *_len helpers below. Nothing here keeps pointers to its arguments.
 *
 * Errors: encoders cannot fail; decoders return the length or -EINVAL.
 */
#ifndef ENVD_BASE64_H
#define ENVD_BASE64_H

#include <stddef.h>
#include <sys/types.h>

/* Characters produced by base64_encode() for n input bytes (no NUL). */
static inline size_t base64_encoded_len(size_t n)
{
	return (n + 2) / 3 * 4;
}

/* Characters produced by base64_encode_unpadded() for n bytes (no NUL). */
static inline size_t base64_encoded_len_unpadded(size_t n)
{
	return n / 3 * 4 + (n % 3 ? n % 3 + 1 : 0);
}

/* Upper bound of the bytes either decoder writes for n input characters. */
static inline size_t base64_decoded_maxlen(size_t n)
{
	return (n + 3) / 4 * 3;
}

/*
 * Standard alphabet (`+`, `/`) with `=` padding. Writes
 * base64_encoded_len(n) characters and a terminating NUL to dst, which must
 * hold base64_encoded_len(n) + 1 bytes. src may be NULL when n is 0.
 * Returns the number of characters written, excluding the NUL.
 */
size_t base64_encode(char *dst, const void *src, size_t n);

/*
 * Standard alphabet without padding (Go's RawStdEncoding; used for the
 * `v1_` URL signatures). dst must hold base64_encoded_len_unpadded(n) + 1
 * bytes; NUL-terminated. Returns the characters written, excluding the NUL.
 */
size_t base64_encode_unpadded(char *dst, const void *src, size_t n);

/*
 * Lenient decode, as protojson reads `bytes`: standard or URL-safe alphabet
 * (not both in one string), with correct `=` padding or none at all.
 * Trailing bits of the last group are ignored, as Go's non-strict decoders
 * do. dst must hold base64_decoded_maxlen(n) bytes and may equal src
 * (decoding in place is safe). Returns the number of bytes written, or
 * -EINVAL if src is not valid base64.
 */
ssize_t base64_decode(void *dst, const char *src, size_t n);

/*
 * Strict decode, as Go's base64.StdEncoding (HTTP Basic credentials):
 * standard alphabet only, length a multiple of 4, padding required.
 * Same buffer rules and return values as base64_decode().
 */
ssize_t base64_decode_strict(void *dst, const char *src, size_t n);

#endif
