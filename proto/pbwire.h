/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pbwire.h - checks on protobuf wire data that protobuf-c does not make.
 *
 * protobuf-c hands a string field to us NUL-terminated, so a string that
 * carries a NUL byte inside arrives cut at it: a Stat, Remove or Move of
 * "/tmp\0x" would act on "/tmp". No path, user name or command line can
 * hold a NUL, and the JSON codec refuses one; this refuses it in binary
 * requests too, before the message is unpacked.
 */
#ifndef ENVD_PBWIRE_H
#define ENVD_PBWIRE_H

#include <stddef.h>
#include <stdint.h>
#include <protobuf-c/protobuf-c.h>

/* Sub-messages followed below the top one; deeper ones are not looked into
 * (protobuf-c refuses nothing for depth, but our messages nest 4 deep). */
#define PBWIRE_MAX_DEPTH 64

/*
 * Walk the `len` bytes of a message of type `desc` and every known
 * sub-message field. Returns 0 when no string field holds a NUL byte, or
 * when the data is not well-formed wire data (the unpack that follows
 * reports that); -EINVAL with a message naming the field ("string field
 * path holds a NUL byte") in err.
 */
int pbwire_check_strings(const ProtobufCMessageDescriptor *desc, const uint8_t *p, size_t len, char *err,
			 size_t errlen);

#endif
