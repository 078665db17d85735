/* SPDX-License-Identifier: Apache-2.0 */
/*
 * files_common.h - what every /files endpoint does first, and the words it
 * answers with (docs/protocol.md, "Files HTTP API"): the access token
 * header or the URL signature, the user the request acts as, envd JSON
 * errors with a formatted message.
 *
 * Errors: a function that fails has answered the exchange itself (an HTTP
 * status with an envd JSON error) and returns -1; the handler only
 * returns.
 */
#ifndef TRANSFER_FILES_COMMON_H
#define TRANSFER_FILES_COMMON_H

#include <limits.h>
#include <stddef.h>

#include "base/users.h"
#include "http/http.h"

/* Room for a message that names two paths. */
#define FILES_MSGLEN (2 * PATH_MAX + 512)

/*
 * The token header or a signed URL for operation `op` ("read", "write";
 * docs/protocol.md, "Signed URLs"). Returns 0 if the request may go on;
 * otherwise the 401 (or 400 for a malformed expiration) has been sent.
 */
int files_check_signing(struct http_req *r, const char *op);

/* The `username` parameter (even empty) or the default user, into out. */
void files_request_username(struct http_req *r, char *out, size_t outlen);

/* Look user `name` up into *u. 0, or -1 when the 401/500 has been sent. */
int files_lookup_user(struct http_req *r, const char *name, struct user *u);

/* An envd JSON error with a printf-formatted message (up to FILES_MSGLEN). */
void files_respond_fmt(struct http_req *r, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* n (at most 128) random lower-case hex characters and a NUL into out. */
void files_random_hex(char *out, size_t n);

#endif
