/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fakereq.h - a struct http_req with a transport of the test's own, for
 * unit tests of handlers: what the handler answers is collected in memory
 * (status, headers, body), pausing is recorded, and the test decides when
 * the exchange closes (fake_close), as a transport would once the response
 * is out and the body consumed, or when the client goes away.
 *
 * Header-only (static functions): include it in one test file.
 */
#ifndef ENVD_TEST_FAKEREQ_H
#define ENVD_TEST_FAKEREQ_H

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "http/http.h"

struct fake {
	struct http_req r;
	struct http_hdr hdrs[16];
	int status;
	char head[4096];     /* response headers as "name: value\n" lines */
	size_t head_len;
	char *body;          /* response body (grows) */
	size_t body_len;
	int64_t declared;    /* length given to begin */
	bool begun, ended, cut, closed;
	int begins;          /* answers begun (one, or the handler answered twice) */
	bool paused;
	int pauses, resumes;
	size_t queued;       /* what queued() reports */
};

static inline struct fake *fake_of(struct http_req *r)
{
	return (struct fake *)(void *)((char *)r - offsetof(struct fake, r));
}

static inline void fake_append(struct fake *f, const void *p, size_t n)
{
	f->body = realloc(f->body, f->body_len + n + 1);
	memcpy(f->body + f->body_len, p, n);
	f->body_len += n;
	f->body[f->body_len] = '\0';
}

static inline int fake_begin(struct http_req *r, int status, const struct http_hdr *h, size_t n, int64_t len)
{
	struct fake *f = fake_of(r);

	f->begun = true;
	f->begins++;
	f->status = status;
	f->declared = len;
	for (size_t i = 0; i < n; i++)
		if (h[i].name)
			f->head_len += (size_t)snprintf(f->head + f->head_len, sizeof(f->head) - f->head_len, "%s: %s\n",
							h[i].name, h[i].value);
	for (size_t i = 0; i < r->n_extra; i++)
		f->head_len += (size_t)snprintf(f->head + f->head_len, sizeof(f->head) - f->head_len, "%s: %s\n",
						r->extra[i].name, r->extra[i].value);
	return 0;
}

static inline int fake_write(struct http_req *r, const void *p, size_t n)
{
	fake_append(fake_of(r), p, n);
	return 0;
}

static inline int fake_write_file(struct http_req *r, int fd, off_t off, size_t len)
{
	char buf[65536];

	while (len) {
		ssize_t k = pread(fd, buf, len < sizeof(buf) ? len : sizeof(buf), off);
		if (k <= 0)
			return -EIO;
		fake_append(fake_of(r), buf, (size_t)k);
		off += k;
		len -= (size_t)k;
	}
	return 0;
}

static inline int fake_end(struct http_req *r, const struct http_hdr *t, size_t n)
{
	fake_of(r)->ended = true;
	return 0;
}

static inline size_t fake_queued(const struct http_req *r)
{
	return fake_of((struct http_req *)r)->queued;
}

static inline void fake_pause(struct http_req *r, bool paused)
{
	struct fake *f = fake_of(r);

	if (paused && !f->paused)
		f->pauses++;
	if (!paused && f->paused)
		f->resumes++;
	f->paused = paused;
}

static inline void fake_abort(struct http_req *r)
{
	fake_of(r)->cut = true;
}

static const struct http_transport_ops fake_ops = {
	.begin = fake_begin,
	.write = fake_write,
	.write_file = fake_write_file,
	.end = fake_end,
	.queued = fake_queued,
	.pause_body = fake_pause,
	.abort = fake_abort,
};

/* A request: method, path, query ("" for none), headers as name/value pairs (lower-case names), then NULL. */
static inline struct fake *fake_new(enum http_verb method, const char *path, const char *query, ...)
{
	struct fake *f = calloc(1, sizeof(*f));
	va_list ap;
	const char *name;

	f->r.method = method;
	f->r.path = strdup(path);
	f->r.query = strdup(query);
	f->r.hdrs = f->hdrs;
	f->r.content_length = -1;
	f->r.version = 11;
	f->r.ops = &fake_ops;
	va_start(ap, query);
	while ((name = va_arg(ap, const char *)) && f->r.n_hdrs < 16) {
		f->hdrs[f->r.n_hdrs].name = name;
		f->hdrs[f->r.n_hdrs++].value = va_arg(ap, const char *);
	}
	va_end(ap);
	return f;
}

/* Deliver body bytes as the transport would (unless paused: then false). */
static inline bool fake_body(struct fake *f, const void *p, size_t n)
{
	if (f->paused)
		return false;
	if (f->r.on_body)
		f->r.on_body(&f->r, p, n);
	return true;
}

static inline void fake_body_end(struct fake *f)
{
	f->r.body_done = true;
	if (f->r.on_body_end)
		f->r.on_body_end(&f->r);
}

/* The exchange is over (answered and drained, or the client left). */
static inline void fake_close(struct fake *f, bool completed)
{
	if (f->closed)
		return;
	f->closed = true;
	f->r.aborted = !completed;
	if (f->r.on_close)
		f->r.on_close(&f->r, completed);
	http_req_release(&f->r);
}

static inline void fake_free(struct fake *f)
{
	fake_close(f, false);
	free(f->r.path);
	free(f->r.query);
	free(f->body);
	free(f);
}

#endif
