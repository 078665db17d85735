/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The JSON codec: the first byte picks a request or response message type
 * of either service; the rest is decoded by the streaming decoder and by
 * the tree-walking one it replaced (tests/unit/pbjson_tree.c), which must
 * agree on every text either accepts (the exemptions are those of
 * pbjson_test's agrees_with_tree: what jansson refuses that protojson
 * does not, numbers it read through a double, a raw NUL it lets pass).
 * Anything that decodes is encoded again; that must decode, and encode to
 * the same text.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "filesystem.pb-c.h"
#include "pbjson_tree.h"
#include "proto/pbjson.h"
#include "process.pb-c.h"

static const ProtobufCMessageDescriptor *const descs[] = {
	&process__start_request__descriptor, &process__connect_request__descriptor,
	&process__send_input_request__descriptor, &process__stream_input_request__descriptor,
	&process__send_signal_request__descriptor, &process__update_request__descriptor,
	&process__list_response__descriptor, &process__start_response__descriptor,
	&filesystem__stat_request__descriptor, &filesystem__list_dir_request__descriptor,
	&filesystem__watch_dir_request__descriptor, &filesystem__list_dir_response__descriptor,
	&filesystem__watch_dir_response__descriptor, &filesystem__get_watcher_events_response__descriptor,
	&filesystem__move_request__descriptor, &filesystem__entry_info__descriptor,
	/* trusted commands and try runs */
	&process__wait_for_request__descriptor, &process__wait_for_response__descriptor,
	&process__end_reason__descriptor, &process__output_withheld__descriptor,
	&process__send_input_response__descriptor, &process__try_diff_request__descriptor,
	&process__try_diff_response__descriptor, &process__commit_try_request__descriptor,
	&process__commit_try_response__descriptor, &process__discard_try_request__descriptor,
	&filesystem__edit_request__descriptor, &filesystem__edit_response__descriptor,
};

static bool has_inexact_number(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '"') {
			for (i++; i < n && s[i] != '"'; i++)
				if (s[i] == '\\')
					i++;
			continue;
		}
		if (s[i] == '-' || (s[i] >= '0' && s[i] <= '9')) {
			size_t digits = 0;

			for (; i < n && s[i] && strchr("-+.eE0123456789", s[i]); i++) {
				if (s[i] == '.' || s[i] == 'e' || s[i] == 'E')
					return true;
				digits += s[i] >= '0' && s[i] <= '9';
			}
			if (digits >= 16)
				return true;
			i--;
		}
	}
	return false;
}

static uint8_t *packed(const ProtobufCMessage *m, size_t *len)
{
	uint8_t *p;

	*len = protobuf_c_message_get_packed_size(m);
	p = malloc(*len ? *len : 1);
	if (!p)
		abort();
	protobuf_c_message_pack(m, p);
	return p;
}

static bool same(const ProtobufCMessage *a, const ProtobufCMessage *b)
{
	size_t la, lb;
	uint8_t *pa = packed(a, &la), *pb = packed(b, &lb);
	bool eq = la == lb && memcmp(pa, pb, la) == 0;

	free(pa);
	free(pb);
	return eq;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
	char err[256], terr[256];
	bool parser_error, exempt;
	const ProtobufCMessageDescriptor *d;
	const char *json;
	ProtobufCMessage *m, *t;

	if (n < 1)
		return 0;
	d = descs[data[0] % (sizeof(descs) / sizeof(descs[0]))];
	json = (const char *)data + 1;
	n--;
	m = pbjson_decode(d, json, n, err, sizeof(err));
	t = pbjson_tree_decode(d, json, n, terr, sizeof(terr), &parser_error);
	exempt = has_inexact_number(json, n) ||
		 (!t && parser_error && (strstr(terr, "duplicate object key") || strstr(terr, "too big") ||
					 strstr(terr, "overflow"))) ||
		 (t && !m && memchr(json, '\0', n));
	if (!m && !err[0])
		abort(); /* a failure always says why */
	if (!exempt && (!m != !t || (m && !same(m, t))))
		abort(); /* the two decoders disagree */
	if (t)
		protobuf_c_message_free_unpacked(t, NULL);
	if (!m)
		return 0;
	{
		size_t len, len2;
		char *j = pbjson_encode(m, &len), *j2;
		ProtobufCMessage *m2;

		if (j) {
			/* Our own output must decode, to the same message: compared
			   by its text, as map entries come out sorted by key. */
			m2 = pbjson_decode(d, j, len, err, sizeof(err));
			if (!m2)
				abort();
			j2 = pbjson_encode(m2, &len2);
			if (!j2 || len2 != len || memcmp(j, j2, len) != 0)
				abort();
			free(j2);
			protobuf_c_message_free_unpacked(m2, NULL);
			free(j);
		}
	}
	protobuf_c_message_free_unpacked(m, NULL);
	return 0;
}
