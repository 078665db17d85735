/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The request parsers of the process service's additions: the first byte
 * picks one, the rest is its input. 0: an output budget in its env form
 * (process/budget.h); 1: an idempotency key from its three places
 * (process/idem.h; NUL-separated); 2: a WaitForRequest in protobuf, checked
 * (process/waitcond.h) and, when valid, described and matched against a
 * listener made of its own bytes; 3: output assembled into lines, in
 * chunks cut where the input says.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "process.pb-c.h"
#include "process/budget.h"
#include "process/idem.h"
#include "process/waitcond.h"

static bool count_line(void *ud, const char *line, size_t len, uint64_t off, bool cut)
{
	size_t *n = ud;

	*n += len + (cut ? 1 : 0) + (size_t)(off & 1);
	return len == 7; /* stop now and then */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
	char err[512];

	if (n < 1)
		return 0;
	uint8_t which = data[0] % 4;
	data++;
	n--;
	char *s = malloc(n + 1);
	if (!s)
		return 0;
	memcpy(s, data, n);
	s[n] = '\0';
	if (which == 0) {
		struct budget b;
		struct budget_state st;
		uint64_t upto;

		if (budget_parse(s, &b, err, sizeof(err)) == 0) {
			budget_begin(&st, &b, n);
			for (uint64_t c = n, end = n + 3 * (uint64_t)b.head + 7; c < end; c += 1 + b.head / 3) {
				budget_next(&st, c, end, c + 1 >= end, &upto);
				budget_holding(&st, c);
			}
		}
	} else if (which == 1) {
		const char *parts[3] = { s, NULL, NULL }, *key;
		size_t at = strlen(s) + 1;

		for (int i = 1; i < 3 && at <= n; i++) {
			parts[i] = s + at;
			at += strlen(s + at) + 1;
		}
		idem_key_pick(parts[0], parts[1], parts[2], &key, err, sizeof(err));
	} else if (which == 2) {
		Process__WaitForRequest *rq = process__wait_for_request__unpack(NULL, n, data);
		struct waitcond c;

		if (rq && waitcond_parse(rq, &c, err, sizeof(err)) == 0) {
			uint8_t addr[16] = { 0 };

			waitcond_describe(&c, err, sizeof(err));
			memcpy(addr, data, n < 16 ? n : 16);
			waitcond_port_ok(&c, n & 1 ? 10 : 2, addr, c.port);
			waitcond_status_ok(&c, (unsigned)n);
		}
		if (rq)
			process__wait_for_request__free_unpacked(rq, NULL);
	} else {
		struct waitcond_lines l = { 0 };
		size_t seen = 0, at = 0;

		while (at < n) {
			size_t len = 1 + data[at] % 97;

			if (len > n - at)
				len = n - at;
			if (waitcond_lines_feed(&l, data + at, len, at, count_line, &seen) < 0)
				break;
			at += len;
		}
		waitcond_lines_flush(&l, count_line, &seen);
		waitcond_lines_free(&l);
	}
	free(s);
	return 0;
}
