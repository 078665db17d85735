/* SPDX-License-Identifier: Apache-2.0 */
/*
 * h2.h - an HTTP/2 (h2c) server session on nghttp2: bytes in, requests and
 * frames out. Like h1.h, it knows its connection only through the link.
 *
 * Errors: constructors return NULL on allocation failure; h2_feed returns
 * bytes consumed or -EPROTO when the connection must be dropped.
 */
#ifndef ENVD_HTTP_H2_H
#define ENVD_HTTP_H2_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "http/link.h"

struct h2;
struct http_req;

/* Concurrent streams a client may open per connection (flag -max-streams). */
extern unsigned h2_max_streams;

struct h2 *h2_new(struct http_link *l);
/*
 * A session after "Upgrade: h2c": the HTTP/1.1 request `r` (head only; its
 * body is complete) becomes stream 1. `settings` is the decoded
 * HTTP2-Settings payload. Both are copied.
 */
struct h2 *h2_new_upgrade(struct http_link *l, const uint8_t *settings, size_t settings_len,
			  const struct http_req *r);
ssize_t h2_feed(struct h2 *h, const uint8_t *p, size_t n);
void h2_on_output_drained(struct h2 *h);
bool h2_idle(const struct h2 *h);
void h2_free(struct h2 *h);

#endif
