/* SPDX-License-Identifier: Apache-2.0 */
/*
 * files_common.c - the token or signature, the user and the error words
 * every /files endpoint shares (files_common.h).
 */
#include "transfer/files_common.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "base/state.h"
#include "transfer/files_util.h"

/*
 * Token header or signed URL (docs/protocol.md, "Signed URLs"). Returns 0
 * if allowed; otherwise the 401 (or 400) has been sent.
 */
int files_check_signing(struct http_req *r, const char *op)
{
	char sig[128], path[PATH_MAX], user[256], expbuf[32], expected[64];
	const char *hdr;
	size_t toklen;
	const char *tok;
	int64_t exp = -1;

	if (!state_token_is_set())
		return 0;
	hdr = http_req_header(r, "x-access-token");
	if (hdr && *hdr) {
		if (state_token_equals(hdr, strlen(hdr)))
			return 0;
		http_respond_json_error(r, 401, "access token present in header but does not match");
		return -1;
	}
	if (http_query_get(r->query, "signature", sig, sizeof(sig)) <= 0) {
		http_respond_json_error(r, 401, "missing signature query parameter");
		return -1;
	}
	if (http_query_get(r->query, "path", path, sizeof(path)) <= 0)
		path[0] = '\0';
	if (http_query_get(r->query, "username", user, sizeof(user)) <= 0)
		user[0] = '\0';
	if (http_query_get(r->query, "signature_expiration", expbuf, sizeof(expbuf)) > 0) {
		char *ep;
		errno = 0;
		long long v = strtoll(expbuf, &ep, 10);
		if (!expbuf[0] || *ep || errno) {
			http_respond_json_error(r, 400,
						"Invalid format for parameter signature_expiration: invalid integer");
			return -1;
		}
		exp = v;
	}
	tok = state_token(&toklen);
	files_signature(path, op, user, tok ? tok : "", tok ? toklen : 0, exp, expected, sizeof(expected));
	if (!files_const_eq(expected, sig)) {
		http_respond_json_error(r, 401, "invalid signature");
		return -1;
	}
	if (exp >= 0 && exp < (int64_t)time(NULL)) {
		http_respond_json_error(r, 401, "signature is already expired");
		return -1;
	}
	return 0;
}

/* The `username` parameter (even empty) or the default user. */
void files_request_username(struct http_req *r, char *out, size_t outlen)
{
	if (http_query_get(r->query, "username", out, outlen) <= 0)
		snprintf(out, outlen, "%s", state_default_user());
}

/* Look the user up; on failure the error has been sent. */
int files_lookup_user(struct http_req *r, const char *name, struct user *u)
{
	char err[512], msg[1024];
	int rc = user_lookup(name, u, err, sizeof(err));

	if (rc == 0)
		return 0;
	if (rc == -ENOENT) {
		snprintf(msg, sizeof(msg), "error looking up user '%s': %s", name, err);
		http_respond_json_error(r, 401, msg);
	} else {
		snprintf(msg, sizeof(msg), "error getting user ids: %s", err);
		http_respond_json_error(r, 500, msg);
	}
	return -1;
}

void files_respond_fmt(struct http_req *r, int status, const char *fmt, ...)
{
	char msg[FILES_MSGLEN];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	http_respond_json_error(r, status, msg);
}

static void random_bytes(unsigned char *b, size_t n)
{
	if (getrandom(b, n, GRND_NONBLOCK) != (ssize_t)n) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		for (size_t i = 0; i < n; i++)
			b[i] = (unsigned char)(ts.tv_nsec >> (i % 4 * 8)) ^ (unsigned char)(i * 131);
	}
}

/* n random lower-case hex characters + NUL into out (n + 1 bytes). */
void files_random_hex(char *out, size_t n)
{
	static const char hx[] = "0123456789abcdef";
	unsigned char b[64];

	if (n > 2 * sizeof(b))
		n = 2 * sizeof(b);
	random_bytes(b, (n + 1) / 2);
	for (size_t i = 0; i < n; i++)
		out[i] = hx[(b[i / 2] >> (i % 2 ? 0 : 4)) & 15];
	out[n] = '\0';
}