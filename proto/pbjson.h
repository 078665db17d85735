/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pbjson.h - canonical proto3 JSON (protojson) for any protobuf-c message.
 *
 * The codec walks protobuf-c descriptors, so it serves every message type
 * of every service without per-type code. Mapping (docs/protocol.md,
 * "Connect-RPC"):
 *   - field names in lowerCamelCase on output; lowerCamelCase or the
 *     original proto name on input;
 *   - implicit-presence fields are omitted when they hold their default;
 *     oneof members (and so our proto3 `optional` fields, which are
 *     single-member oneofs) are emitted whenever their case is set;
 *   - 64-bit integers as strings, 32-bit integers as numbers, bytes as
 *     padded standard base64, enums by value name, map<K,V> as an object,
 *     google.protobuf.Timestamp as an RFC 3339 UTC string.
 * Input is checked strictly where protojson is strict (RFC 8259 text with
 * valid UTF-8 and no NUL, types, ranges read from the number's own text,
 * duplicate fields, map keys and oneof members) and leniently where it is
 * lenient (unknown fields, with any valid value and repeated keys, and
 * unknown enum names are ignored; null means unset).
 *
 * Errors: the encoders return NULL, -ENOMEM or (a fixed buffer) -ENOBUFS;
 * the decoder returns NULL with a message (the RPC edge reports it as
 * invalid_argument).
 */
#ifndef ENVD_PBJSON_H
#define ENVD_PBJSON_H

#include <stddef.h>
#include <protobuf-c/protobuf-c.h>

/* JSON nesting (objects plus arrays) accepted by pbjson_decode(). */
#define PBJSON_MAX_DEPTH 64

/*
 * Encode as compact canonical proto3 JSON. Returns a malloc'd
 * NUL-terminated buffer (the caller frees it) and its length, excluding the
 * NUL, in *len; NULL on allocation failure or if messages nest deeper than
 * PBJSON_MAX_DEPTH.
 */
char *pbjson_encode(const ProtobufCMessage *msg, size_t *len);

/* Bytes one value of type t takes in a protobuf-c message struct. */
size_t pbjson_value_size(ProtobufCType t);

/*
 * Encode into a caller-owned, growable buffer (*buf of *cap bytes, may be
 * NULL/0; realloc'd as needed and left to the caller to free), starting
 * at byte `off` (room for a frame header). On success *len is the JSON
 * length and 0 is returned; -ENOMEM on allocation failure. Reusing one
 * buffer avoids an allocation (and its page faults) per message.
 */
int pbjson_encode_into(const ProtobufCMessage *msg, char **buf, size_t *cap, size_t off, size_t *len);

/*
 * Encode into buf (cap bytes, fixed: never grown or freed), for a reply
 * built where allocating is to be avoided (a worker thread). 0 with the
 * length in *len; -ENOBUFS when the JSON does not fit (the writer asks
 * for room a value at a time, up to 32 bytes more than the value takes:
 * give that much to spare), and the caller then uses pbjson_encode_into;
 * -ENOMEM as pbjson_encode().
 * Nothing is NUL-terminated.
 */
int pbjson_encode_to(const ProtobufCMessage *msg, char *buf, size_t cap, size_t *len);

/*
 * `"jsonName":` of field f (its protojson key and the colon) into out;
 * returns the length, 0 when it does not fit in cap bytes. For a message
 * written in pieces (a long repeated field streamed element by element):
 * the pieces then match what pbjson_encode() makes of the whole.
 */
size_t pbjson_field_name(const ProtobufCFieldDescriptor *f, char *out, size_t cap);

/*
 * Decode `len` bytes of JSON into a new message of type `desc`. The result
 * is owned by the caller and freed with
 * protobuf_c_message_free_unpacked(msg, NULL), like the result of
 * protobuf_c_message_unpack(). The input need not be NUL-terminated; its
 * size is bounded by the caller. On error returns NULL and writes a short
 * message (no prefix, e.g. `invalid value for uint32 field pid: "x"`) into
 * err (always NUL-terminated when errlen > 0).
 *
 * The text is parsed by yajl's streaming parser, whose events fill the
 * message directly: no document tree. Errors: malformed text is
 * `syntax error at line L column C: ...` (reported even when a value
 * before it was invalid), nesting deeper than PBJSON_MAX_DEPTH
 * `exceeds maximum nesting depth 64`, otherwise the first value that
 * cannot be stored (`invalid value for ...`, `duplicate field ...`,
 * `oneof fields ... are both set`) or `out of memory`; on any error all
 * memory is given back. yajl's own memory comes from a per-thread arena
 * (a thread-local block, then malloc). Any thread.
 */
ProtobufCMessage *pbjson_decode(const ProtobufCMessageDescriptor *desc, const char *json,
				size_t len, char *err, size_t errlen);

/*
 * pbjson_decode with the message's memory (the struct, strings, bytes,
 * arrays, sub-messages) from `alloc` (NULL: malloc); free the result with
 * protobuf_c_message_free_unpacked(msg, alloc).
 */
ProtobufCMessage *pbjson_decode_with(const ProtobufCMessageDescriptor *desc, const char *json,
				     size_t len, ProtobufCAllocator *alloc, char *err, size_t errlen);

#endif
