/* SPDX-License-Identifier: Apache-2.0 */
/*
 * files_compose.h - POST /files/compose: concatenate source files into a
 * destination, then remove the sources (docs/protocol.md, "Files HTTP
 * API"). The JSON body is bounded (1 MiB); every call on the paths runs in
 * worker jobs of the destination's mount.
 *
 * Errors: answered on the exchange as an HTTP status with an envd JSON
 * error.
 */
#ifndef TRANSFER_FILES_COMPOSE_H
#define TRANSFER_FILES_COMPOSE_H

#include "http/http.h"

void files_compose(struct http_req *r);

#endif
