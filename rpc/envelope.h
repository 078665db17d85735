/* SPDX-License-Identifier: Apache-2.0 */
/*
 * envelope.h - the 5-byte-prefixed message framing of Connect streams,
 * gRPC and gRPC-Web, and the gzip codec of compressed messages.
 *
 * A pure byte engine: bytes are pushed in as the request body arrives,
 * complete envelopes come out through a callback with their payload
 * already decompressed. No I/O, no event loop; tests and fuzz targets drive
 * it directly.
 *
 * Envelope: flags (1 byte: 0x01 compressed, 0x02 end-of-stream), length
 * (4 bytes, big-endian), payload.
 *
 * Errors (negative errno values):
 *   -EMSGSIZE  a message (declared, or once decompressed) over max_msg, or
 *              buffered input over max_buffered
 *   -EPROTO    a compressed message when compression was not negotiated
 *   -EINVAL    gzip data that does not inflate
 *   -ENOMEM    allocation failure
 * Each leaves the decoder unusable except for env_dec_free.
 */
#ifndef ENVD_RPC_ENVELOPE_H
#define ENVD_RPC_ENVELOPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

#define ENV_HDR 5
#define ENV_FLAG_COMPRESSED 0x01
#define ENV_FLAG_END 0x02

struct env_dec {
	size_t max_msg;      /* bound on one message, compressed and decompressed */
	bool gzip_ok;        /* compressed messages were negotiated */
	size_t last_len;     /* declared length of the envelope that failed with -EMSGSIZE */
	struct buf in;       /* input not yet decoded, bounded by max_buffered */
};

/*
 * Called once per complete envelope with its flags and its (inflated)
 * payload, valid during the call. Return 0 to go on, anything else to stop
 * the drain (it is returned by env_dec_drain).
 */
typedef int (*env_msg_fn)(void *ud, uint8_t flags, const uint8_t *p, size_t n);

void env_dec_init(struct env_dec *d, size_t max_msg, size_t max_buffered, bool gzip_ok);
/* Buffer input. 0, -EMSGSIZE (over max_buffered), -ENOMEM. */
int env_dec_push(struct env_dec *d, const uint8_t *p, size_t n);
/* Deliver every complete envelope buffered. 0, fn's non-zero value, or an error above. */
int env_dec_drain(struct env_dec *d, env_msg_fn fn, void *ud);
/* Bytes of an incomplete envelope still buffered. */
static inline size_t env_dec_pending(const struct env_dec *d) { return d->in.len; }
/* The buffered input (a unary Connect body is one bare message). */
static inline const uint8_t *env_dec_data(const struct env_dec *d) { return d->in.p; }
void env_dec_free(struct env_dec *d);

/* gzip p[0..n) into a new buffer (*out, caller frees). 0, -ENOMEM, -EIO. */
int env_gzip(const uint8_t *p, size_t n, uint8_t **out, size_t *outlen);
/*
 * Inflate gzip data into a new buffer, refusing to produce more than max
 * bytes. 0, -EMSGSIZE, -EINVAL, -ENOMEM.
 */
int env_gunzip(const uint8_t *p, size_t n, size_t max, uint8_t **out, size_t *outlen);

#endif
