/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pbjson_tree.h - the tree-walking decoder (jansson) that proto/pbjson
 * replaced, kept as the reference the streaming decoder is tested against.
 */
#ifndef ENVD_PBJSON_TREE_H
#define ENVD_PBJSON_TREE_H

#include <stdbool.h>
#include <stddef.h>
#include <protobuf-c/protobuf-c.h>

/*
 * Decode as pbjson_decode() did with jansson (malloc'd message, freed with
 * protobuf_c_message_free_unpacked(m, NULL)). On failure *parser_error
 * tells whether jansson itself refused the text (its message in err).
 */
ProtobufCMessage *pbjson_tree_decode(const ProtobufCMessageDescriptor *desc, const char *json, size_t len,
				     char *err, size_t errlen, bool *parser_error);

#endif
