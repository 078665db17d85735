/* SPDX-License-Identifier: Apache-2.0 */
/*
 * envelope.c - Connect/gRPC envelope decoding and the gzip message codec.
 * See envelope.h for the contract.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "rpc/envelope.h"

void env_dec_init(struct env_dec *d, size_t max_msg, size_t max_buffered, bool gzip_ok)
{
	memset(d, 0, sizeof(*d));
	d->max_msg = max_msg;
	d->gzip_ok = gzip_ok;
	/* Decoded on the loop thread, and short-lived (a unary body). */
	buf_init_loop(&d->in, max_buffered);
}

void env_dec_free(struct env_dec *d)
{
	buf_free(&d->in);
}

int env_dec_push(struct env_dec *d, const uint8_t *p, size_t n)
{
	if (n == 0)
		return 0;
	int rc = buf_append(&d->in, p, n);
	return rc == -E2BIG ? -EMSGSIZE : rc;
}

int env_dec_drain(struct env_dec *d, env_msg_fn fn, void *ud)
{
	size_t off = 0;
	int rc = 0;

	while (d->in.len - off >= ENV_HDR) {
		const uint8_t *h = d->in.p + off;
		size_t n = (size_t)h[1] << 24 | (size_t)h[2] << 16 | (size_t)h[3] << 8 | h[4];
		if (n > d->max_msg) {
			d->last_len = n;
			rc = -EMSGSIZE;
			break;
		}
		if (d->in.len - off - ENV_HDR < n)
			break;
		const uint8_t *p = h + ENV_HDR;
		uint8_t *plain = NULL;
		size_t pn = n;
		if (h[0] & ENV_FLAG_COMPRESSED) {
			if (!d->gzip_ok) {
				rc = -EPROTO;
				break;
			}
			rc = env_gunzip(p, n, d->max_msg, &plain, &pn);
			if (rc < 0)
				break;
			p = plain;
		}
		off += ENV_HDR + n;
		rc = fn(ud, h[0], p ? p : (const uint8_t *)"", pn);
		free(plain);
		if (rc != 0)
			break;
	}
	buf_consume(&d->in, off);
	return rc;
}

int env_gzip(const uint8_t *in, size_t n, uint8_t **out, size_t *outlen)
{
	z_stream z = {0};
	if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return -ENOMEM;
	size_t cap = deflateBound(&z, n);
	uint8_t *o = malloc(cap);
	if (!o) {
		deflateEnd(&z);
		return -ENOMEM;
	}
	z.next_in = (Bytef *)in;
	z.avail_in = (uInt)n;
	z.next_out = o;
	z.avail_out = (uInt)cap;
	int rc = deflate(&z, Z_FINISH);
	deflateEnd(&z);
	if (rc != Z_STREAM_END) {
		free(o);
		return -EIO;
	}
	*out = o;
	*outlen = cap - z.avail_out;
	return 0;
}

int env_gunzip(const uint8_t *in, size_t n, size_t max, uint8_t **out, size_t *outlen)
{
	z_stream z = {0};
	if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK)
		return -ENOMEM;
	size_t cap = n * 4 + 1024, len = 0;
	uint8_t *o = NULL;
	int rc;
	z.next_in = (Bytef *)in;
	z.avail_in = (uInt)n;
	do {
		if (len == cap || !o) {
			if (o)
				cap *= 2;
			if (cap > max + 1)
				cap = max + 1;
			uint8_t *no = realloc(o, cap);
			if (!no) {
				rc = Z_MEM_ERROR;
				break;
			}
			o = no;
		}
		z.next_out = o + len;
		z.avail_out = (uInt)(cap - len);
		rc = inflate(&z, Z_NO_FLUSH);
		len = cap - z.avail_out;
		if (len > max) {
			rc = Z_BUF_ERROR;
			break;
		}
	} while (rc == Z_OK);
	inflateEnd(&z);
	if (rc != Z_STREAM_END) {
		free(o);
		if (rc == Z_MEM_ERROR)
			return -ENOMEM;
		return len > max ? -EMSGSIZE : -EINVAL;
	}
	*out = o;
	*outlen = len;
	return 0;
}
