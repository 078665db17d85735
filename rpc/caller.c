/* SPDX-License-Identifier: Apache-2.0 */
#include "rpc/caller.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>

#include "base/state.h"
#include "http/http.h"

/* Messages name the path: PATH_MAX of it and the words around it. */
#define CALLER_ERRLEN (PATH_MAX + 256)

static enum rpc_code resolve_path(const struct user *u, const char *path, char *out, size_t outlen,
				  char *err, size_t errlen)
{
	int rc = path_resolve(u, path, state_default_workdir(), out, outlen, err, errlen);

	if (rc == 0)
		return RPC_OK;
	return rc == -ENOMEM ? RPC_RESOURCE_EXHAUSTED : RPC_INVALID_ARGUMENT;
}

enum rpc_code caller_resolve(const struct user *basic, const char *basic_error, const char *path,
			     struct user *u, char *out, size_t outlen, char *err, size_t errlen)
{
	char lerr[256] = "";
	const char *def;
	int rc;

	if (basic) {
		user_copy(u, basic);
	} else if (basic_error) {
		snprintf(err, errlen, "%s", basic_error);
		return RPC_INTERNAL;
	} else {
		def = state_default_user();
		if (!def || !*def) {
			snprintf(err, errlen, "no user specified");
			return RPC_UNAUTHENTICATED;
		}
		rc = user_lookup(def, u, lerr, sizeof(lerr));
		if (rc == -EINVAL) {
			snprintf(err, errlen, "%s", lerr);
			return RPC_INTERNAL;
		}
		if (rc < 0) {
			snprintf(err, errlen, "invalid default user: '%s'", def);
			return RPC_UNAUTHENTICATED;
		}
	}
	return path ? resolve_path(u, path, out, outlen, err, errlen) : RPC_OK;
}

int caller_of(struct rpc_call *call, const char *path, struct user *u, char *out, size_t outlen)
{
	const struct http_req *r = rpc_call_http(call);
	char err[CALLER_ERRLEN];
	enum rpc_code code;

	code = caller_resolve(r ? r->user : NULL, r ? r->user_error : NULL, path, u, out, outlen, err,
			      sizeof(err));
	if (code == RPC_OK)
		return 0;
	rpc_fail(call, code, "%s", err);
	return -1;
}

int caller_path(struct rpc_call *call, const struct user *u, const char *path, char *out,
		size_t outlen)
{
	char err[CALLER_ERRLEN];
	enum rpc_code code = resolve_path(u, path, out, outlen, err, sizeof(err));

	if (code == RPC_OK)
		return 0;
	rpc_fail(call, code, "%s", err);
	return -1;
}
