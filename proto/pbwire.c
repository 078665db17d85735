/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pbwire.c - a walk over protobuf wire data looking at string fields.
 */
#include "proto/pbwire.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* A varint at *p (below end) into *v; the bytes it took, 0 when cut or
 * longer than ten bytes. */
static size_t varint(const uint8_t *p, const uint8_t *end, uint64_t *v)
{
	uint64_t x = 0;
	for (size_t i = 0; i < 10 && p + i < end; i++) {
		x |= (uint64_t)(p[i] & 0x7f) << (7 * i);
		if (!(p[i] & 0x80)) {
			*v = x;
			return i + 1;
		}
	}
	return 0;
}

/* 1: a NUL found (err written), 0: none or malformed data. */
static int walk(const ProtobufCMessageDescriptor *desc, const uint8_t *p, const uint8_t *end, int depth, char *err,
		size_t errlen)
{
	while (p < end) {
		uint64_t tag, n;
		size_t k = varint(p, end, &tag);
		if (!k)
			return 0;
		p += k;
		switch (tag & 7) {
		case 0: /* varint */
			if (!(k = varint(p, end, &n)))
				return 0;
			p += k;
			break;
		case 1: /* fixed64 */
			if ((size_t)(end - p) < 8)
				return 0;
			p += 8;
			break;
		case 5: /* fixed32 */
			if ((size_t)(end - p) < 4)
				return 0;
			p += 4;
			break;
		case 2: { /* length-delimited: string, bytes, message, packed */
			if (!(k = varint(p, end, &n)) || n > (uint64_t)(end - p - k))
				return 0;
			p += k;
			const ProtobufCFieldDescriptor *f =
				tag >> 3 <= UINT32_MAX ? protobuf_c_message_descriptor_get_field(desc, (unsigned)(tag >> 3))
						       : NULL;
			if (f && f->type == PROTOBUF_C_TYPE_STRING && memchr(p, 0, n)) {
				snprintf(err, errlen, "string field %s holds a NUL byte", f->name);
				return 1;
			}
			if (f && f->type == PROTOBUF_C_TYPE_MESSAGE && depth < PBWIRE_MAX_DEPTH &&
			    walk(f->descriptor, p, p + n, depth + 1, err, errlen))
				return 1;
			p += n;
			break;
		}
		default: /* groups (3, 4) and unknown types: not ours to judge */
			return 0;
		}
	}
	return 0;
}

int pbwire_check_strings(const ProtobufCMessageDescriptor *desc, const uint8_t *p, size_t len, char *err,
			 size_t errlen)
{
	if (errlen)
		err[0] = '\0';
	return walk(desc, p, p + len, 0, err, errlen) ? -EINVAL : 0;
}
