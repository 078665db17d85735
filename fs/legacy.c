/* SPDX-License-Identifier: Apache-2.0 */
/*
 * legacy.c - see legacy.h. Works on any message through its descriptor,
 * so a response type that gains an EntryInfo later is covered too.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "filesystem.pb-c.h"
#include "fs/legacy.h"
#include "proto/pbjson.h"

bool legacy_user_agent(const char *ua)
{
	return ua && strcmp(ua, "connect-python") == 0;
}

/* Leave field f out of the copy c (which does not own anything). */
static void clear_field(ProtobufCMessage *c, const ProtobufCFieldDescriptor *f)
{
	char *base = (char *)c;

	if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
		uint32_t *cs = (uint32_t *)(base + f->quantifier_offset);
		if (*cs == f->id)
			*cs = 0;
		return;
	}
	if (f->label == PROTOBUF_C_LABEL_REPEATED) {
		*(size_t *)(base + f->quantifier_offset) = 0;
		return;
	}
	if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->quantifier_offset &&
	    f->type != PROTOBUF_C_TYPE_MESSAGE && f->type != PROTOBUF_C_TYPE_STRING)
		*(protobuf_c_boolean *)(base + f->quantifier_offset) = 0;
	memset(base + f->offset, 0, pbjson_value_size(f->type));
}

const ProtobufCMessage *legacy_view(const ProtobufCMessage *m, struct arena *a)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;
	ProtobufCMessage *c = arena_alloc(a, d->sizeof_message);
	unsigned keep = UINT32_MAX;

	if (!c)
		return NULL;
	memcpy(c, m, d->sizeof_message);
	if (d == &filesystem__entry_info__descriptor)
		keep = 3;
	else if (d == &filesystem__filesystem_event__descriptor)
		keep = 2;
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		char *member = (char *)c + f->offset;

		if (f->id > keep) {
			clear_field(c, f);
			continue;
		}
		if (f->type != PROTOBUF_C_TYPE_MESSAGE)
			continue;
		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t n = *(size_t *)((char *)c + f->quantifier_offset);
			const ProtobufCMessage *const *arr = *(const ProtobufCMessage *const **)member;
			const ProtobufCMessage **na;

			if (!n)
				continue;
			na = arena_alloc(a, n * sizeof(*na));
			if (!na)
				return NULL;
			for (size_t j = 0; j < n; j++)
				if (!(na[j] = legacy_view(arr[j], a)))
					return NULL;
			*(const ProtobufCMessage ***)member = na;
			continue;
		}
		if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
		    *(uint32_t *)((char *)c + f->quantifier_offset) != f->id)
			continue;
		const ProtobufCMessage *sub = *(const ProtobufCMessage **)member;
		if (sub && !(*(const ProtobufCMessage **)member = legacy_view(sub, a)))
			return NULL;
	}
	return c;
}
