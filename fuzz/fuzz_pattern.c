/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Grep's pattern compiler (search/pattern.h): the input's first byte picks
 * the options, then comes the pattern, a NUL, and text searched line by
 * line with it (whole buffer and line at a time, with the window flags).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "search/pattern.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
	struct pattern_opts o;
	struct pattern *p;
	struct pattern_matcher *m;
	struct pattern_hit h;
	char err[512];

	if (n < 1)
		return 0;
	o.fixed = data[0] & 1;
	o.ignore_case = data[0] & 2;
	const char *s = (const char *)data + 1;
	n--;
	const char *nul = memchr(s, '\0', n);
	size_t plen = nul ? (size_t)(nul - s) : n;
	if (pattern_compile(s, plen, &o, &p, err, sizeof(err)) != 0)
		return 0;
	pattern_plan(p);
	m = pattern_matcher_new(p);
	if (m && nul) {
		const char *text = nul + 1;
		size_t len = n - plen - 1, at = 0;
		/* a private copy: the matcher must not read past len */
		char *t = malloc(len ? len : 1);
		if (t) {
			memcpy(t, text, len);
			while (at < len) {
				int rc = pattern_next(m, t, len, at, data[0] & 4, data[0] & 8, &h);
				if (rc <= 0)
					break;
				if (h.line_end < at || h.match_start < h.line_start || h.line_end > len)
					abort(); /* a hit outside what was asked */
				at = h.line_end + 1;
			}
			pattern_line(m, t, len, false, false, &h);
			free(t);
		}
	}
	pattern_matcher_free(m);
	pattern_free(p);
	return 0;
}
