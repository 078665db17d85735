/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The glob matcher (search/glob.h): the input is a pattern, a NUL, then
 * paths separated by NULs; each is compiled in both modes and matched,
 * and the pruning question is asked for every path.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "search/glob.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
	const char *s = (const char *)data;
	const char *nul = memchr(s, '\0', n);
	size_t plen = nul ? (size_t)(nul - s) : n;
	char err[256];

	for (unsigned flags = 0; flags < 4; flags++) {
		struct glob *g;
		if (glob_compile(s, plen, flags, &g, err, sizeof(err)) != 0)
			continue;
		glob_is_literal(g);
		size_t at = nul ? plen + 1 : n;
		while (at <= n) {
			const char *e = at < n ? memchr(s + at, '\0', n - at) : NULL;
			size_t len = e ? (size_t)(e - (s + at)) : n - at;
			glob_match(g, s + at, len);
			glob_may_match_under(g, s + at, len);
			if (!e)
				break;
			at += len + 1;
		}
		glob_free(g);
	}
	return 0;
}
