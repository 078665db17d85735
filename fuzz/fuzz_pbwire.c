/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The wire walk of proto/pbwire: the first byte picks a request type; the
 * rest is walked, and what the walk lets through is unpacked as the RPC
 * edge would (the walk must never read outside the data or loop).
 */
#include <stdlib.h>

#include "filesystem.pb-c.h"
#include "process.pb-c.h"
#include "proto/pbwire.h"

static const ProtobufCMessageDescriptor *const descs[] = {
	&process__start_request__descriptor,      &process__connect_request__descriptor,
	&process__send_input_request__descriptor, &process__stream_input_request__descriptor,
	&process__send_signal_request__descriptor, &process__update_request__descriptor,
	&filesystem__stat_request__descriptor,    &filesystem__list_dir_request__descriptor,
	&filesystem__move_request__descriptor,    &filesystem__watch_dir_request__descriptor,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
	char err[256];
	if (n < 1)
		return 0;
	const ProtobufCMessageDescriptor *d = descs[data[0] % (sizeof(descs) / sizeof(descs[0]))];
	if (pbwire_check_strings(d, data + 1, n - 1, err, sizeof(err)) < 0)
		return 0;
	ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, n - 1, data + 1);
	if (m)
		protobuf_c_message_free_unpacked(m, NULL);
	return 0;
}
