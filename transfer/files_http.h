/* SPDX-License-Identifier: Apache-2.0 */
/*
 * files_http.h - the /files HTTP API (docs/protocol.md, "Files HTTP API").
 *
 * The router calls these after CORS, the token gate and Basic-auth
 * validation. Each handler owns the exchange from then on: it checks the
 * URL signature or token header itself, and streams bodies in both
 * directions with bounded memory (sendfile for identity downloads on
 * HTTP/1.1, zlib in fixed buffers for gzip, uploads written to disk as
 * they arrive through an incremental multipart parser).
 *
 * Additive query parameter on POST /files: atomic=true writes each target
 * through a temporary file in the same directory, renamed over the target
 * only once complete.
 *
 * Errors: answered on the exchange as an HTTP status with an envd JSON error
 * (docs/protocol.md, "Files HTTP API").
 */
#ifndef TRANSFER_FILES_HTTP_H
#define TRANSFER_FILES_HTTP_H

#include "http/http.h"

void files_get(struct http_req *r);

/*
 * false (default): a download offered gzip gets it only where it is
 * expected to arrive sooner (http/linkrate.h); true: whenever it is
 * offered, as Go envd does (-gzip-always).
 */
extern bool files_gzip_always;
void files_post(struct http_req *r);
void files_compose(struct http_req *r);

#endif
