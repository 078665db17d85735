/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Connect/gRPC bodies: the first byte picks a content type and method,
 * the rest is the request body (envelopes, JSON, proto, gzip).
 */
#include <stdio.h>
#include <string.h>

#include "fuzz_server.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
	static const char *const ctypes[] = {
		"application/json", "application/proto", "application/connect+json", "application/connect+proto",
		"application/grpc", "application/grpc-web+json",
	};
	static const char *const paths[] = {"List", "Connect", "StreamInput"};
	char head[512];

	if (n < 1)
		return 0;
	unsigned sel = data[0];
	const char *enc = (sel & 0x80) ? "gzip" : "identity";
	int k = snprintf(head, sizeof(head),
			 "POST /process.Process/%s HTTP/1.1\r\nContent-Type: %s\r\nContent-Encoding: %s\r\n"
			 "Connect-Content-Encoding: %s\r\nContent-Length: %zu\r\n\r\n",
			 paths[(sel >> 3) % 3], ctypes[sel % 6], enc, enc, n - 1);
	fuzz_serve(head, (size_t)k, data + 1, n - 1);
	return 0;
}
