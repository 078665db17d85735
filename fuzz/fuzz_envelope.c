/* SPDX-License-Identifier: Apache-2.0 */
/* The envelope decoder on its own, with and without gzip negotiated. */
#include "rpc/envelope.h"

static int sink(void *ud, uint8_t flags, const uint8_t *p, size_t n)
{
	return (flags & 0x80) ? 1 : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
	struct env_dec d;
	if (n < 1)
		return 0;
	size_t step = (size_t)(data[0] % 13) + 1;
	env_dec_init(&d, 64 * 1024, 256 * 1024, (data[0] & 0x80) != 0);
	for (size_t off = 1; off < n; off += step) {
		size_t k = n - off < step ? n - off : step;
		if (env_dec_push(&d, data + off, k) < 0 || env_dec_drain(&d, sink, NULL) < 0)
			break;
	}
	env_dec_free(&d);
	return 0;
}
