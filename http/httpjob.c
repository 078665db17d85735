/* SPDX-License-Identifier: Apache-2.0 */
/*
 * httpjob.c - struct reqjob over struct http_req (httpjob.h).
 */
#include "http/httpjob.h"

#include <stddef.h>

static void httpjob_on_close(struct http_req *r, bool completed)
{
	struct reqjob *j = r->ud;

	r->ud = NULL;
	if (j)
		reqjob_peer_gone(j);
}

/* The previous responder's hooks go: they would reach a context that is
 * no longer the exchange's. */
static void httpjob_bind(void *peer, struct reqjob *j)
{
	struct http_req *r = peer;

	r->ud = j;
	r->on_close = httpjob_on_close;
	r->on_body = NULL;
	r->on_body_end = NULL;
	r->on_writable = NULL;
}

static void httpjob_unbind(void *peer)
{
	struct http_req *r = peer;

	r->ud = NULL;
	r->on_close = NULL;
	r->on_body = NULL;
	r->on_body_end = NULL;
	r->on_writable = NULL;
}

static const struct reqjob_binding httpjob_binding = { .bind = httpjob_bind, .unbind = httpjob_unbind };

void httpjob_attach(struct reqjob *j, struct http_req *r)
{
	reqjob_attach(j, r, &httpjob_binding);
}

struct http_req *httpjob_req(const struct reqjob *j)
{
	return reqjob_peer(j);
}

struct reqjob *httpjob_of(const struct http_req *r)
{
	return r->ud;
}
