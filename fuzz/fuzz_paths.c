/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Query strings, form decoding, path resolution and cleaning, Basic-auth
 * parsing, Range headers and URL signatures: small parsers of untrusted
 * strings. The input is split on NUL bytes into the pieces each needs.
 */
#include <stdlib.h>
#include <string.h>

#include "transfer/files_util.h"
#include "http/http.h"
#include "envd/router.h"
#include "base/users.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
	char *s = malloc(n + 1);
	char out[8192], err[512];
	if (!s)
		return 0;
	memcpy(s, data, n);
	s[n] = '\0';
	struct user u = {.name = "user", .uid = 1000, .gid = 1000, .home = "/home/user"};

	http_query_get(s, "path", out, sizeof(out));
	http_form_decode(s, strlen(s), out, sizeof(out));
	path_resolve(&u, s, "/work", out, sizeof(out), err, sizeof(err));
	path_clean(s, out, sizeof(out));
	path_base(s, out, sizeof(out));
	router_basic_user(s, out, sizeof(out));
	int64_t start, len;
	files_parse_range(s, 1000, &start, &len);
	files_signature(s, "read", "user", "tok", 3, -1, out, sizeof(out));
	free(s);
	return 0;
}
