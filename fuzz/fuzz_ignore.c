/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The ignore-file parser (search/ignore.h): the input is an ignore file;
 * its rules are then asked about paths made from its own lines, as files
 * and as directories, alone and in a chain of levels.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "search/ignore.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
	const char *s = (const char *)data;
	struct ignore_rules *r, *r2;
	struct ignore_rules *rules[IGNORE_KINDS] = { 0 };
	char path[512];

	if (ignore_parse(s, n, &r) != 0)
		return 0;
	/* each line, as a path under /top/sub */
	for (size_t i = 0; i < n;) {
		const char *nl = memchr(s + i, '\n', n - i);
		size_t len = nl ? (size_t)(nl - (s + i)) : n - i;
		if (len < sizeof(path) - 10) {
			memcpy(path, "/top/sub/", 9);
			memcpy(path + 9, s + i, len);
			ignore_rules_match(r, s + i, len, false);
			ignore_rules_match(r, s + i, len, true);
			if (ignore_parse(s, n, &r2) == 0) {
				rules[IGNORE_GIT] = r2;
				struct ignore_level *top = ignore_level_new(NULL, 4, true, rules);
				struct ignore_rules *none[IGNORE_KINDS] = { 0 };
				struct ignore_level *sub = top ? ignore_level_new(top, 8, false, none) : NULL;
				if (sub) {
					ignore_judge(sub, path, 9 + len, false, false);
					ignore_judge(sub, path, 9 + len, true, true);
				}
				ignore_level_unref(sub);
				ignore_level_unref(top);
				rules[IGNORE_GIT] = NULL;
			}
		}
		i += len + 1;
	}
	ignore_rules_free(r);
	return 0;
}
