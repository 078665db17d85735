/* SPDX-License-Identifier: Apache-2.0 */
/*
 * files_get.h - GET /files: a file's content, or a directory as an archive
 * (?archive=, handed on to transfer/files_archive.h) (docs/protocol.md,
 * "Files HTTP API").
 *
 * The router calls it after CORS, the token gate and Basic-auth
 * validation; it checks the URL signature or token header itself. Memory
 * is O(1) in the file size: identity bodies are queued as file ranges
 * (sendfile on HTTP/1.1) a few MiB at a time, refilled from on_writable;
 * gzip bodies are read and compressed in blocks on the worker pool
 * (transfer/gzsend.h). Ranges, conditional requests and content types
 * follow Go's http.ServeContent.
 *
 * Errors: answered on the exchange as an HTTP status with an envd JSON
 * error (docs/protocol.md, "Files HTTP API").
 */
#ifndef TRANSFER_FILES_GET_H
#define TRANSFER_FILES_GET_H

#include <stdbool.h>

#include "http/http.h"

void files_get(struct http_req *r);

/*
 * false (default): a download offered gzip gets it only where it is
 * expected to arrive sooner (http/linkrate.h); true: whenever it is
 * offered, as Go envd does (-gzip-always).
 */
extern bool files_gzip_always;

#endif
