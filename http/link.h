/* SPDX-License-Identifier: Apache-2.0 */
/*
 * link.h - what a protocol session (HTTP/1.1 in h1.c, HTTP/2 in h2.c) knows
 * of the connection under it.
 *
 * A session never touches a socket or the event loop. It eats the bytes it
 * is fed, appends its output to `out`, hands each request head to
 * `on_request`, and reports what the connection should do next through
 * `notify`. The connection (conn.c) is one implementation; the unit tests
 * and fuzz targets drive sessions with their own.
 */
#ifndef ENVD_HTTP_LINK_H
#define ENVD_HTTP_LINK_H

#include "http/outq.h"

struct http_req;

enum http_link_event {
	HTTP_LINK_WANT_WRITE,  /* output was queued: write it when possible */
	HTTP_LINK_PAUSE_READ,  /* stop reading: the session consumes no more input */
	HTTP_LINK_RESUME_READ, /* read again and feed what is already buffered */
	HTTP_LINK_CALL_BACK,   /* call the session's progress function from a clean stack */
	HTTP_LINK_CLOSE,       /* flush what is queued, then close */
	HTTP_LINK_ABORT,       /* close now, dropping queued output */
};

struct http_link {
	struct outq *out;
	void (*notify)(struct http_link *l, enum http_link_event ev);
	/* Every request head goes here (the application's router). */
	void (*on_request)(struct http_req *r);
	/* What the connection knows of its peer (NULL/"" when nothing):
	 * http/linkrate.h. */
	struct link_rate *rate;
	const char *peer;
};

static inline void http_link_notify(struct http_link *l, enum http_link_event ev)
{
	l->notify(l, ev);
}

#endif
