/* SPDX-License-Identifier: Apache-2.0 */
/*
 * files_archive.h - the HTTP edge of directory archives:
 * GET /files?path=DIR&archive=tar|tgz|zip and
 * POST /files?path=DIR&extract=tar|tgz|zip (docs/protocol.md,
 * "Directory archives"). files_get.c or files_post.c has checked the
 * signature and looked the user up before handing the request over.
 */
#ifndef TRANSFER_FILES_ARCHIVE_H
#define TRANSFER_FILES_ARCHIVE_H

#include <stdbool.h>

#include "base/reqjob.h"
#include "base/users.h"
#include "http/http.h"

/*
 * Take the exchange over from `from` (a live reqjob bound to it with
 * http/httpjob.h) and stream the tree under `dir` (resolved, known to be
 * a directory). An unknown format or a failed allocation is answered on
 * the exchange, which then stays with `from`.
 */
void files_archive_get(struct reqjob *from, const char *dir, const char *format);

/*
 * Extract the request body into the resolved directory `dir` as user `u`.
 * `gzip`: the body carries Content-Encoding: gzip.
 */
void files_archive_post(struct http_req *r, const struct user *u, const char *dir, const char *format, bool gzip);

#endif
