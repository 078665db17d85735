/* SPDX-License-Identifier: Apache-2.0 */
/*
 * httpjob.h - a request's async job (base/reqjob.h) serving an HTTP
 * exchange: the glue between struct reqjob and struct http_req.
 *
 * Attached, the exchange's r->ud is the reqjob and its on_close tells the
 * reqjob the exchange is over (reqjob_peer_gone); the handler sets its
 * other hooks (on_body, on_writable, ...) after attaching and finds its
 * context with httpjob_of() and REQJOB_CONTAINER. A hand-off
 * (reqjob_handoff) binds the exchange to the new reqjob and clears the
 * hooks of the old responder, so the new one starts from a clean slate.
 *
 * Errors: none.
 */
#ifndef ENVD_HTTP_HTTPJOB_H
#define ENVD_HTTP_HTTPJOB_H

#include "base/reqjob.h"
#include "http/http.h"

/* Tie exchange r to j (which has no peer); r holds a reference on j until on_close. */
void httpjob_attach(struct reqjob *j, struct http_req *r);

/* The exchange j serves, or NULL once it is over or handed on. */
struct http_req *httpjob_req(const struct reqjob *j);

/* The reqjob attached to r, or NULL (none, or on_close has run). */
struct reqjob *httpjob_of(const struct http_req *r);

#endif
