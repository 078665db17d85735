/* SPDX-License-Identifier: Apache-2.0 */
/*
 * caller.h - who an RPC runs as, and the paths it names, resolved once at
 * the RPC edge (docs/protocol.md, "Users and paths"). Every service's
 * handlers start here, so the same input gets the same answer, code and
 * message, from each of them.
 *
 * The user is the Basic-auth user the router looked up (http_req.user),
 * else the default user (base/state.h). A path is resolved for that user
 * by path_resolve (base/users.h): "" is the default workdir, else home;
 * "~" and "~/x" are under home; an absolute path is kept as given; a
 * relative one is joined to home. No system call: nothing here touches
 * the path.
 *
 * Errors (caller_of and caller_path fail the call with them and return
 * -1; caller_resolve returns the code with the message in err):
 *   unauthenticated     "no user specified" (the default user is empty),
 *                       "invalid default user: '<name>'";
 *   internal            the user's passwd entry does not parse ("error
 *                       parsing uid '<v>': ...");
 *   invalid_argument    "failed to expand path '<p>' for user '<u>':
 *                       cannot expand user-specific home dir",
 *                       "path too long: <p>";
 *   resource_exhausted  "out of memory resolving path: <p>".
 */
#ifndef ENVD_RPC_CALLER_H
#define ENVD_RPC_CALLER_H

#include <stddef.h>

#include "base/users.h"
#include "rpc/rpc.h"

/*
 * The user `call` runs as, into *u, and unless `path` is NULL that path
 * resolved for them into out (outlen bytes; PATH_MAX holds any path that
 * resolves). 0, or -1 once the call is failed.
 */
int caller_of(struct rpc_call *call, const char *path, struct user *u, char *out, size_t outlen);

/*
 * Another path of the same request (Move's destination) resolved for u
 * into out. 0, or -1 once the call is failed.
 */
int caller_path(struct rpc_call *call, const struct user *u, const char *path, char *out,
		size_t outlen);

/*
 * caller_of without a call: `basic` is the Basic-auth user (NULL: none
 * named), `basic_error` the message when that user's entry did not parse
 * (NULL: none). RPC_OK, or a code with the message in err.
 */
enum rpc_code caller_resolve(const struct user *basic, const char *basic_error, const char *path,
			     struct user *u, char *out, size_t outlen, char *err, size_t errlen);

#endif
