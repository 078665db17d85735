/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sha2.h - SHA-256 and SHA-512 (FIPS 180-4), streaming and one-shot.
 *
 * Used for /files URL signatures (SHA-256) and the /init token hash that
 * MMDS holds (SHA-512). No allocation; contexts live wherever the caller
 * puts them.
 *
 * Errors: none.
 */
#ifndef ENVD_SHA2_H
#define ENVD_SHA2_H

#include <stddef.h>
#include <stdint.h>

#define SHA256_DIGEST_LEN 32
#define SHA512_DIGEST_LEN 64

struct sha256_ctx {
	uint32_t h[8];
	uint64_t len;     /* bytes hashed so far */
	uint8_t buf[64];
	size_t nbuf;
};

struct sha512_ctx {
	uint64_t h[8];
	uint64_t len;     /* bytes hashed so far (2^64 bytes is plenty) */
	uint8_t buf[128];
	size_t nbuf;
};

void sha256_init(struct sha256_ctx *c);
void sha256_update(struct sha256_ctx *c, const void *p, size_t n);
void sha256_final(struct sha256_ctx *c, uint8_t out[SHA256_DIGEST_LEN]);
void sha256(const void *p, size_t n, uint8_t out[SHA256_DIGEST_LEN]);

void sha512_init(struct sha512_ctx *c);
void sha512_update(struct sha512_ctx *c, const void *p, size_t n);
void sha512_final(struct sha512_ctx *c, uint8_t out[SHA512_DIGEST_LEN]);
void sha512(const void *p, size_t n, uint8_t out[SHA512_DIGEST_LEN]);

/* Lower-case hex of n bytes into out (2n+1 bytes). */
void sha2_hex(const uint8_t *d, size_t n, char *out);

#endif
