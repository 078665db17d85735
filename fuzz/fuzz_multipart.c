/* SPDX-License-Identifier: Apache-2.0 */
/* The multipart parser, fed in pieces whose sizes come from the input. */
#include <string.h>

#include "transfer/multipart.h"

static int begin(void *ud, const struct mp_part *p) { return 0; }
static int part_data(void *ud, const uint8_t *p, size_t n) { return 0; }
static int end(void *ud) { return 0; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
	static const struct mp_callbacks cb = {begin, part_data, end};
	struct mp_parser p;
	if (n < 1)
		return 0;
	if (mp_init(&p, "XyZ-boundary", &cb, NULL) < 0)
		return 0;
	size_t step = (size_t)(data[0] % 17) + 1, off = 1;
	while (off < n) {
		size_t k = n - off < step ? n - off : step;
		if (mp_feed(&p, data + off, k) < 0)
			break;
		off += k;
	}
	mp_finish(&p);
	return 0;
}
