/* SPDX-License-Identifier: Apache-2.0 */
/*
 * h1.h - an HTTP/1.x server session: bytes in, requests and output out.
 *
 * Parsing is http-parser's. One request is served at a time: pipelined
 * requests wait in the caller's input buffer (h1_feed consumes nothing
 * while a response is in progress) and are answered in order. Request
 * bodies are delivered as they arrive; a handler that pauses its body
 * pauses consumption. The end of an exchange (on_close, freeing the
 * request) is never run from inside a transport call made by the handler:
 * the session asks for HTTP_LINK_CALL_BACK and finishes in h1_progress.
 *
 * Errors: h1_feed returns bytes consumed or -EPROTO when the connection
 * must be dropped at once; a malformed request is answered (400, 431) and
 * the link told to close.
 */
#ifndef ENVD_HTTP_H1_H
#define ENVD_HTTP_H1_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "http/link.h"

struct h1;
struct http_req;

/* Request head limit (request line + headers); flag -max-header-bytes. */
extern size_t h1_max_header_bytes;

/* A new session on `l` (borrowed; must outlive the session). NULL: ENOMEM. */
struct h1 *h1_new(struct http_link *l);
/* Consume a prefix of p[0..n). Returns bytes consumed, or -EPROTO. */
ssize_t h1_feed(struct h1 *h, const uint8_t *p, size_t n);
/* Finish an exchange whose response ended (after HTTP_LINK_CALL_BACK). */
void h1_progress(struct h1 *h);
/* The link's output queue drained below its low-water mark. */
void h1_on_output_drained(struct h1 *h);
/* No request in progress and no partial head. */
bool h1_idle(const struct h1 *h);

/*
 * "Upgrade: h2c" (RFC 7540 §3.2) was accepted: the 101 response is queued,
 * and the caller must move to HTTP/2 with the request and the decoded
 * HTTP2-Settings below (valid until h1_free), then free the session.
 */
bool h1_upgrading(const struct h1 *h);
struct http_req *h1_upgrade_request(struct h1 *h);
const uint8_t *h1_upgrade_settings(const struct h1 *h, size_t *len);

/* Free the session; a request in progress gets on_close(aborted). */
void h1_free(struct h1 *h);

#endif
