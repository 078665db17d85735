/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The JSON codec: the first byte picks a request or response message type
 * of either service; the rest is decoded, and anything that decodes is
 * encoded again and re-decoded (the round trip must succeed).
 */
#include <stdlib.h>

#include "filesystem.pb-c.h"
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
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
	char err[256];
	if (n < 1)
		return 0;
	const ProtobufCMessageDescriptor *d = descs[data[0] % (sizeof(descs) / sizeof(descs[0]))];
	ProtobufCMessage *m = pbjson_decode(d, (const char *)data + 1, n - 1, err, sizeof(err));
	if (!m)
		return 0;
	size_t len;
	char *j = pbjson_encode(m, &len);
	if (j) {
		ProtobufCMessage *m2 = pbjson_decode(d, j, len, err, sizeof(err));
		if (!m2)
			abort(); /* our own output must decode */
		protobuf_c_message_free_unpacked(m2, NULL);
		free(j);
	}
	protobuf_c_message_free_unpacked(m, NULL);
	return 0;
}
