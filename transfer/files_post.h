/* SPDX-License-Identifier: Apache-2.0 */
/*
 * files_post.h - POST /files: uploads, multipart or a raw body, plain or
 * gzip, and ?extract= (handed on to transfer/files_archive.h)
 * (docs/protocol.md, "Files HTTP API").
 *
 * The router calls it after CORS, the token gate and Basic-auth
 * validation; it checks the URL signature or token header itself. The
 * body is inflated (if gzip) and parsed (if multipart) as it arrives and
 * written straight to the target file, on the worker pool, one job per
 * upload at a time; the loop only collects body bytes and pauses the
 * client while a job is behind.
 *
 * Additive query parameter: atomic=false writes each target in place;
 * by default (atomic=true) a target is written through a temporary file
 * in the same directory, renamed over it only once complete.
 *
 * Errors: answered on the exchange as an HTTP status with an envd JSON
 * error (docs/protocol.md, "Files HTTP API").
 */
#ifndef TRANSFER_FILES_POST_H
#define TRANSFER_FILES_POST_H

#include "http/http.h"

void files_post(struct http_req *r);

#endif
