/* SPDX-License-Identifier: Apache-2.0 */
/* HTTP/1.1 requests (heads, chunked bodies, pipelining) through the server. */
#include "fuzz_server.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
	fuzz_serve(NULL, 0, data, n);
	return 0;
}
