/* SPDX-License-Identifier: Apache-2.0 */
/*
 * router.h - the request pipeline (docs/protocol.md, "Request pipeline"):
 * CORS, the access-token gate, Basic-auth user resolution, then the route
 * table.
 *
 * Errors: answered on the exchange: 401 (token), Connect unauthenticated
 * (Basic auth), 404/405 (routes).
 */
#ifndef ENVD_ROUTER_H
#define ENVD_ROUTER_H

#include "http/http.h"

/* Entry point for every request head, from either protocol. */
void router_dispatch(struct http_req *r);

/*
 * Parse "Authorization: Basic ..." the way Go does ("Basic " in any case,
 * padded base64, a ':'): returns 1 and
 * the user name in out when a user was given, 0 when the header is absent
 * or ignorable.
 */
int router_basic_user(const char *authz, char *out, size_t outlen);

#endif
