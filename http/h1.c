/* SPDX-License-Identifier: Apache-2.0 */
/*
 * h1.c - an HTTP/1.x server session, parsed with http-parser.
 *
 * One request is served at a time: when a request's head has been parsed
 * it is dispatched, and once its message is complete the parser is paused
 * so pipelined requests wait in the caller's input buffer until the
 * response is done. That answers pipelined requests in order without
 * queueing responses. Request bodies are delivered as they arrive; a
 * handler that pauses the body pauses the parser, and the link is told to
 * stop reading. The session does no I/O (see h1.h and link.h).
 */
#include <errno.h>
#include <stdarg.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <http_parser.h>

#include "base/base64.h"
#include "base/buf.h"
#include "base/log.h"
#include "http/h1.h"
#include "http/http.h"

/* Request head limit (request line + headers). */
size_t h1_max_header_bytes = 64 * 1024;
#define H1_MAX_HEADERS 128
/* Largest decoded HTTP2-Settings of an h2c upgrade. */
#define H1_UP_SETTINGS_MAX 1024

/* Where each header name and value starts in the head buffer. Allocated
 * with the first header of a request and freed with its head, so an idle
 * keep-alive connection does not carry it. */
struct h1_fields {
	uint32_t field_off[H1_MAX_HEADERS];
	uint32_t value_off[H1_MAX_HEADERS];
};
#define H1_NO_VALUE UINT32_MAX

struct h1;

struct h1_req {
	struct http_req r;
	struct h1 *h;
	bool chunked;      /* response uses chunked framing */
	bool no_body;      /* HEAD, 204, 304: body bytes are dropped */
	bool keep_alive;
	bool expect_body;  /* the request carries a body (chunked or sized) */
	bool finishing;    /* response and body done; h1_progress finishes it */
	struct http_hdr hdrs[H1_MAX_HEADERS];
	char *mem;         /* head strings, NUL-separated */
};

/*
 * Request structs (~3 KiB with their header table) and field tables are
 * kept for the next request, a bounded few, on the loop thread. musl
 * serves these sizes from groups of a few slots that it unmapped whenever
 * a keep-alive connection's request ended, and mapped again for the next.
 */
#define H1_CACHE 64
static struct h1_req *req_cache[H1_CACHE];
static size_t n_req_cache;
static struct h1_fields *fields_cache[H1_CACHE];
static size_t n_fields_cache;

static struct h1_req *req_alloc(void)
{
	struct h1_req *q;

	if (!n_req_cache)
		return calloc(1, sizeof(struct h1_req));
	q = req_cache[--n_req_cache];
	memset(q, 0, sizeof(*q));
	return q;
}

static void req_release(struct h1_req *q)
{
	if (n_req_cache < H1_CACHE)
		req_cache[n_req_cache++] = q;
	else
		free(q);
}

static struct h1_fields *fields_alloc(void)
{
	if (n_fields_cache)
		return fields_cache[--n_fields_cache];
	return malloc(sizeof(struct h1_fields));
}

static void fields_release(struct h1_fields *f)
{
	if (f && n_fields_cache < H1_CACHE)
		fields_cache[n_fields_cache++] = f;
	else
		free(f);
}

struct h1 {
	struct http_link *link;
	http_parser parser;
	struct h1_req *cur;
	bool closing;      /* the link was told to close after the flush */
	/* "Upgrade: h2c": the request and its decoded settings */
	struct h1_req *up_req;
	uint8_t *up_settings; /* H1_UP_SETTINGS_MAX bytes, only once upgrading */
	size_t up_settings_len;
	bool upgraded;
	bool waiting;      /* message complete, response not finished */
	bool body_paused;
	bool upgrade;      /* Upgrade: h2c accepted for the current request */
	bool in_exec;
	/* head accumulation: strings NUL-separated, bounded by h1_max_header_bytes */
	struct buf head;
	size_t url_len;
	struct h1_fields *fields; /* while a head is parsed; NULL when idle */
	int n_fields;
	bool last_was_value;
	int error_status;  /* 400 / 431 to send on parse error */
};

static const struct http_transport_ops h1_ops;

static void h1_close(struct h1 *h)
{
	h->closing = true;
	http_link_notify(h->link, HTTP_LINK_CLOSE);
}

static int head_append(struct h1 *h, const char *p, size_t n)
{
	int rc = buf_append(&h->head, p, n);
	if (rc == -E2BIG)
		h->error_status = 431;
	return rc < 0 ? -1 : 0;
}

static int head_sep(struct h1 *h)
{
	/* NUL separator between strings of the head. */
	return head_append(h, "", 1);
}

static int on_message_begin(http_parser *p)
{
	struct h1 *h = p->data;
	buf_reset(&h->head);
	h->url_len = 0;
	h->n_fields = 0;
	h->last_was_value = false;
	h->upgrade = false;
	return 0;
}

static int on_url(http_parser *p, const char *at, size_t n)
{
	struct h1 *h = p->data;
	if (head_append(h, at, n) < 0)
		return -1;
	h->url_len += n;
	return 0;
}

static int on_header_field(http_parser *p, const char *at, size_t n)
{
	struct h1 *h = p->data;
	if (h->n_fields == 0 && !h->last_was_value && h->head.len == h->url_len) {
		if (head_sep(h) < 0)
			return -1;
	}
	if (h->last_was_value || h->n_fields == 0) {
		if (h->n_fields == H1_MAX_HEADERS) {
			h->error_status = 431;
			return -1;
		}
		if (h->n_fields > 0 && head_sep(h) < 0)
			return -1;
		if (!h->fields && !(h->fields = fields_alloc()))
			return -1;
		h->fields->field_off[h->n_fields++] = (uint32_t)h->head.len;
		h->fields->value_off[h->n_fields - 1] = H1_NO_VALUE;
		h->last_was_value = false;
	}
	return head_append(h, at, n);
}

static int on_header_value(http_parser *p, const char *at, size_t n)
{
	struct h1 *h = p->data;
	if (h->n_fields == 0)
		return -1;
	if (!h->last_was_value) {
		if (head_sep(h) < 0)
			return -1;
		h->fields->value_off[h->n_fields - 1] = (uint32_t)h->head.len;
		h->last_was_value = true;
	}
	return head_append(h, at, n);
}

static enum http_verb method_of(unsigned m)
{
	switch (m) {
	case HTTP_GET: return HTTP_M_GET;
	case HTTP_HEAD: return HTTP_M_HEAD;
	case HTTP_POST: return HTTP_M_POST;
	case HTTP_PUT: return HTTP_M_PUT;
	case HTTP_PATCH: return HTTP_M_PATCH;
	case HTTP_DELETE: return HTTP_M_DELETE;
	case HTTP_OPTIONS: return HTTP_M_OPTIONS;
	default: return HTTP_M_OTHER;
	}
}

static bool token_in_list(const char *list, const char *tok)
{
	size_t tl = strlen(tok);
	const char *p = list;
	while (p && *p) {
		while (*p == ' ' || *p == ',' || *p == '\t')
			p++;
		if (strncasecmp(p, tok, tl) == 0 && (p[tl] == '\0' || p[tl] == ',' || p[tl] == ' '))
			return true;
		p = strchr(p, ',');
	}
	return false;
}

static void h1_req_free(struct h1_req *q)
{
	http_req_release(&q->r);
	free(q->mem);
	req_release(q);
}

static int on_headers_complete(http_parser *p)
{
	struct h1 *h = p->data;
	struct h1_req *q;
	char *mem;

	if (h->n_fields == 0 && head_sep(h) < 0)
		return -1;
	q = req_alloc();
	if (!q)
		return -1;
	/* The request takes the head's bytes; the next head starts afresh. */
	mem = buf_steal(&h->head, NULL);
	if (!mem) {
		req_release(q);
		return -1;
	}
	q->mem = mem;
	q->h = h;

	/* Request target: origin form, or absolute form (proxies). */
	char *url = mem;
	url[h->url_len] = '\0';
	if (strncasecmp(url, "http://", 7) == 0 || strncasecmp(url, "https://", 8) == 0) {
		char *s = strchr(url + 8, '/');
		url = s ? s : url + h->url_len;
	}
	char *qm = strchr(url, '?');
	if (qm) {
		*qm = '\0';
		q->r.query = qm + 1;
	} else {
		q->r.query = url + strlen(url);
	}
	q->r.path = url;
	if (!*url)
		q->r.path = "/";

	for (int i = 0; i < h->n_fields; i++) {
		char *name = mem + h->fields->field_off[i];
		for (char *s = name; *s; s++)
			if (*s >= 'A' && *s <= 'Z')
				*s = (char)(*s + 32);
		q->hdrs[i].name = name;
		q->hdrs[i].value = h->fields->value_off[i] == H1_NO_VALUE ? "" : mem + h->fields->value_off[i];
	}
	fields_release(h->fields);
	h->fields = NULL;
	q->r.hdrs = q->hdrs;
	q->r.n_hdrs = (size_t)h->n_fields;
	q->r.method = method_of(p->method);
	q->r.method_name = http_method_str(p->method);
	q->r.version = p->http_major == 1 && p->http_minor == 0 ? 10 : 11;
	q->r.content_length = (p->flags & F_CHUNKED) ? -1 : (p->content_length == ULLONG_MAX ? 0 : (int64_t)p->content_length);
	q->keep_alive = http_should_keep_alive(p) != 0;
	q->r.ops = &h1_ops;
	q->r.transport = q;
	h->cur = q;

	/* h2c upgrade (RFC 7540 §3.2), only for requests without a body. */
	const char *up = http_req_header(&q->r, "upgrade");
	const char *settings = http_req_header(&q->r, "http2-settings");
	if (up && settings && token_in_list(up, "h2c") && q->r.content_length == 0 &&
	    q->r.version == 11) {
		h->upgrade = true;
		return 0;
	}

	const char *expect = http_req_header(&q->r, "expect");
	bool has_body = (p->flags & F_CHUNKED) || q->r.content_length > 0;
	q->expect_body = has_body;
	if (expect && strcasecmp(expect, "100-continue") == 0 && has_body && q->r.version == 11) {
		static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
		outq_append(h->link->out, cont, sizeof(cont) - 1);
		http_link_notify(h->link, HTTP_LINK_WANT_WRITE);
	}
	h->link->on_request(&q->r);
	return 0;
}

static int on_body(http_parser *p, const char *at, size_t n)
{
	struct h1 *h = p->data;
	struct h1_req *q = h->cur;
	if (q && q->r.on_body && !q->r.aborted)
		q->r.on_body(&q->r, (const uint8_t *)at, n);
	if (h->body_paused)
		http_parser_pause(p, 1);
	return 0;
}

static void h1_req_maybe_done(struct h1_req *q);

static int on_message_complete(http_parser *p)
{
	struct h1 *h = p->data;
	struct h1_req *q = h->cur;

	h->waiting = true;
	http_parser_pause(p, 1);
	if (!q)
		return 0;
	q->r.body_done = true;
	if (h->upgrade)
		return 0;
	if (q->r.on_body_end && !q->r.aborted)
		q->r.on_body_end(&q->r);
	/* The handler may have answered already: h1_feed finishes the
	 * exchange once the parser has returned. */
	h1_req_maybe_done(q);
	return 0;
}

static const http_parser_settings h1_settings = {
	.on_message_begin = on_message_begin,
	.on_url = on_url,
	.on_header_field = on_header_field,
	.on_header_value = on_header_value,
	.on_headers_complete = on_headers_complete,
	.on_body = on_body,
	.on_message_complete = on_message_complete,
};

/* ---- responses ---- */

/* Go canonicalises header names (content-type -> Content-Type). */
static size_t put_header(char *buf, size_t cap, const char *name, const char *value)
{
	size_t k = 0;
	bool up = true;
	for (const char *p = name; *p && k + 1 < cap; p++) {
		char ch = *p;
		if (up && ch >= 'a' && ch <= 'z')
			ch = (char)(ch - 32);
		else if (!up && ch >= 'A' && ch <= 'Z')
			ch = (char)(ch + 32);
		up = ch == '-';
		buf[k++] = ch;
	}
	size_t vl = strlen(value);
	if (k + 4 + vl >= cap)
		return cap; /* full: the caller fails with -E2BIG */
	buf[k++] = ':';
	buf[k++] = ' ';
	memcpy(buf + k, value, vl);
	k += vl;
	buf[k++] = '\r';
	buf[k++] = '\n';
	return k;
}

/*
 * Appenders for the response head, which every request builds: printf was
 * the largest single cost of a small HTTP/1.1 response. Like appendf they
 * never move *k past cap, and a buffer that would overflow stays full.
 */
static void put_str(char *buf, size_t cap, size_t *k, const char *s)
{
	size_t n = strlen(s);
	if (*k >= cap || n >= cap - *k) {
		*k = cap;
		return;
	}
	memcpy(buf + *k, s, n);
	*k += n;
}

static void put_uint(char *buf, size_t cap, size_t *k, unsigned long long v)
{
	char t[24];
	size_t n = sizeof(t);
	t[--n] = '\0';
	do {
		t[--n] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	put_str(buf, cap, k, t + n);
}

/* snprintf that never moves *k past cap (a full buffer stays full). */
static void appendf(char *buf, size_t cap, size_t *k, const char *fmt, ...)
{
	va_list ap;
	if (*k >= cap)
		return;
	va_start(ap, fmt);
	int n = vsnprintf(buf + *k, cap - *k, fmt, ap);
	va_end(ap);
	*k = (n < 0 || (size_t)n >= cap - *k) ? cap : *k + (size_t)n;
}

static int h1_begin(struct http_req *r, int status, const struct http_hdr *hs, size_t n, int64_t len)
{
	struct h1_req *q = r->transport;
	struct h1 *h = q->h;
	char buf[8192];
	char date[40];
	size_t k = 0;

	http_date(date, sizeof(date));
	q->no_body = r->method == HTTP_M_HEAD || status == 204 || status == 304 || status < 200;
	/* A response that starts before the request body is in cannot leave
	 * the connection reusable without reading that body; close instead. */
	if (!r->body_done && q->expect_body && (r->content_length < 0 || r->content_length > 65536))
		q->keep_alive = false; /* a small rest of body is read and dropped */
	put_str(buf, sizeof(buf), &k, r->version == 10 ? "HTTP/1.0 " : "HTTP/1.1 ");
	put_uint(buf, sizeof(buf), &k, (unsigned)status);
	put_str(buf, sizeof(buf), &k, " ");
	put_str(buf, sizeof(buf), &k, http_reason(status));
	put_str(buf, sizeof(buf), &k, "\r\nDate: ");
	put_str(buf, sizeof(buf), &k, date);
	put_str(buf, sizeof(buf), &k, "\r\n");
	for (size_t i = 0; i < r->n_extra && k < sizeof(buf); i++)
		k += put_header(buf + k, sizeof(buf) - k, r->extra[i].name, r->extra[i].value);
	for (size_t i = 0; i < n && k < sizeof(buf); i++) {
		if (q->no_body && status != 304 && (strcasecmp(hs[i].name, "content-type") == 0 ||
						    strcasecmp(hs[i].name, "content-length") == 0))
			continue;
		k += put_header(buf + k, sizeof(buf) - k, hs[i].name, hs[i].value);
	}
	if (k < sizeof(buf) && !q->no_body) {
		if (len >= 0) {
			put_str(buf, sizeof(buf), &k, "Content-Length: ");
			put_uint(buf, sizeof(buf), &k, (unsigned long long)len);
			put_str(buf, sizeof(buf), &k, "\r\n");
		} else if (r->version == 11) {
			q->chunked = true;
			put_str(buf, sizeof(buf), &k, "Transfer-Encoding: chunked\r\n");
		} else {
			q->keep_alive = false;
		}
	}
	if (k < sizeof(buf) && !q->keep_alive)
		put_str(buf, sizeof(buf), &k, "Connection: close\r\n");
	if (k + 2 >= sizeof(buf))
		return -E2BIG;
	buf[k++] = '\r';
	buf[k++] = '\n';
	if (outq_append(h->link->out, buf, k) < 0)
		return -ENOMEM;
	http_link_notify(h->link, HTTP_LINK_WANT_WRITE);
	return 0;
}

/*
 * Queue one piece of body: memory (p; kept in place when release is set)
 * or a file range (fd >= 0), framed as a chunk when the response is
 * chunked. With release, release(arg) runs exactly once.
 */
static int h1_queue_body(struct http_req *r, const void *p, int fd, off_t off, size_t n,
			 void (*release)(void *), void *arg)
{
	struct h1_req *q = r->transport;
	struct outq *o = q->h->link->out;
	char hdr[24];

	if (q->no_body) {
		if (release)
			release(arg);
		return 0;
	}
	if (q->chunked) {
		int k = 0;
		for (int sh = (int)(sizeof(n) * 8) - 4; sh >= 0; sh -= 4)
			if ((n >> sh) || k || sh == 0)
				hdr[k++] = "0123456789abcdef"[(n >> sh) & 15];
		hdr[k++] = '\r';
		hdr[k++] = '\n';
		if (outq_append(o, hdr, (size_t)k) < 0) {
			if (release)
				release(arg);
			return -ENOMEM;
		}
	}
	int rc;
	if (fd >= 0)
		rc = outq_append_file_dup(o, fd, off, n);
	else if (!release)
		rc = outq_append(o, p, n);
	else if ((rc = outq_append_owned(o, (void *)p, n, release, arg)) < 0)
		release(arg);
	if (rc < 0 || (q->chunked && outq_append(o, "\r\n", 2) < 0))
		return -ENOMEM;
	http_link_notify(q->h->link, HTTP_LINK_WANT_WRITE);
	return 0;
}

static int h1_write(struct http_req *r, const void *p, size_t n)
{
	return h1_queue_body(r, p, -1, 0, n, NULL, NULL);
}

static int h1_write_owned(struct http_req *r, void *p, size_t n, void (*release)(void *), void *arg)
{
	return h1_queue_body(r, p, -1, 0, n, release, arg);
}

static int h1_write_file(struct http_req *r, int fd, off_t off, size_t len)
{
	return h1_queue_body(r, NULL, fd, off, len, NULL, NULL);
}

static int h1_end(struct http_req *r, const struct http_hdr *tr, size_t n)
{
	struct h1_req *q = r->transport;
	struct h1 *h = q->h;
	struct outq *o = h->link->out;

	if (q->chunked && !q->no_body) {
		char buf[4096];
		size_t k = 0;
		appendf(buf, sizeof(buf), &k, "0\r\n");
		for (size_t i = 0; i < n; i++)
			appendf(buf, sizeof(buf), &k, "%s: %s\r\n", tr[i].name, tr[i].value);
		if (k + 2 >= sizeof(buf))
			return -E2BIG;
		buf[k++] = '\r';
		buf[k++] = '\n';
		if (outq_append(o, buf, k) < 0)
			return -ENOMEM;
	}
	http_link_notify(h->link, HTTP_LINK_WANT_WRITE);
	if (!q->keep_alive)
		h1_close(h);
	h1_req_maybe_done(q);
	return 0;
}

static void h1_abort(struct http_req *r)
{
	struct h1_req *q = r->transport;

	/* No last chunk and no reuse: the client sees the body cut short. */
	q->chunked = false;
	q->keep_alive = false;
	h1_end(r, NULL, 0);
}

static size_t h1_queued(const struct http_req *r)
{
	const struct h1_req *q = r->transport;
	return q->h->link->out->bytes;
}

static void h1_pause_body(struct http_req *r, bool paused)
{
	struct h1_req *q = r->transport;
	struct h1 *h = q->h;

	if (h->body_paused == paused)
		return;
	h->body_paused = paused;
	if (paused) {
		http_parser_pause(&h->parser, 1);
	} else if (!h->waiting) {
		http_parser_pause(&h->parser, 0);
		http_link_notify(h->link, HTTP_LINK_RESUME_READ);
	}
}

static const struct http_link *h1_link(const struct http_req *r)
{
	const struct h1_req *q = r->transport;
	return q->h->link;
}

static const struct http_transport_ops h1_ops = {
	.begin = h1_begin,
	.write = h1_write,
	.write_owned = h1_write_owned,
	.write_file = h1_write_file,
	.end = h1_end,
	.queued = h1_queued,
	.pause_body = h1_pause_body,
	.link = h1_link,
	.abort = h1_abort,
};

/*
 * Both halves are over. The exchange is finished later, in h1_progress or
 * h1_feed, never here: this runs inside the handler's own call to
 * http_end (or from the parser), and on_close may free the handler.
 */
static void h1_req_maybe_done(struct h1_req *q)
{
	if (!q->r.resp_ended || !q->r.body_done || q->finishing)
		return;
	q->finishing = true;
	http_link_notify(q->h->link, HTTP_LINK_CALL_BACK);
}

/* Finish the current exchange if it is over: on_close, free, next request. */
static void h1_finish(struct h1 *h)
{
	struct h1_req *q = h->cur;

	if (!q || !q->finishing)
		return;
	h->cur = NULL;
	/* An idle keep-alive connection holds no head buffer. */
	buf_free(&h->head);
	fields_release(h->fields);
	h->fields = NULL;
	if (q->r.on_close)
		q->r.on_close(&q->r, true);
	bool keep = q->keep_alive;
	h1_req_free(q);
	if (keep && !h->closing) {
		h->waiting = false;
		h->body_paused = false;
		http_parser_pause(&h->parser, 0);
		http_link_notify(h->link, HTTP_LINK_RESUME_READ);
	}
}

void h1_progress(struct h1 *h)
{
	if (h)
		h1_finish(h);
}

/* ---- session ---- */

struct h1 *h1_new(struct http_link *l)
{
	struct h1 *h = calloc(1, sizeof(*h));
	if (!h)
		return NULL;
	h->link = l;
	buf_init(&h->head, h1_max_header_bytes > 1 ? h1_max_header_bytes - 1 : 1);
	http_parser_init(&h->parser, HTTP_REQUEST);
	h->parser.data = h;
	return h;
}

bool h1_idle(const struct h1 *h)
{
	return !h || (!h->cur && h->head.len == 0);
}

static void h1_send_error(struct h1 *h, int status)
{
	char buf[256];
	const char *reason = http_reason(status);
	int k = snprintf(buf, sizeof(buf),
			 "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
			 "Connection: close\r\nContent-Length: %zu\r\n\r\n%d %s",
			 status, reason, strlen(reason) + 4, status, reason);
	outq_append(h->link->out, buf, (size_t)k);
	h1_close(h);
}

/* Accept "Upgrade: h2c": queue the 101 and keep what HTTP/2 needs. */
static void h1_do_upgrade(struct h1 *h)
{
	struct h1_req *q = h->cur;
	static const char sw[] = "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n";
	const char *s64 = http_req_header(&q->r, "http2-settings");
	size_t sl = strlen(s64);
	ssize_t n = -1;

	if (base64_decoded_maxlen(sl) <= H1_UP_SETTINGS_MAX &&
	    (h->up_settings = malloc(H1_UP_SETTINGS_MAX)))
		n = base64_decode(h->up_settings, s64, sl);

	if (n < 0) {
		h->cur = NULL;
		h1_req_free(q);
		h1_send_error(h, 400);
		return;
	}
	outq_append(h->link->out, sw, sizeof(sw) - 1);
	http_link_notify(h->link, HTTP_LINK_WANT_WRITE);
	h->cur = NULL;
	h->up_req = q;
	h->up_settings_len = (size_t)n;
	h->upgraded = true;
}

bool h1_upgrading(const struct h1 *h) { return h->upgraded; }

struct http_req *h1_upgrade_request(struct h1 *h) { return h->up_req ? &h->up_req->r : NULL; }

const uint8_t *h1_upgrade_settings(const struct h1 *h, size_t *len)
{
	*len = h->up_settings_len;
	return h->up_settings;
}

ssize_t h1_feed(struct h1 *h, const uint8_t *p, size_t len)
{
	size_t used = 0;

	h1_finish(h);
	while (used < len && !h->closing && !h->upgraded) {
		if (HTTP_PARSER_ERRNO(&h->parser) == HPE_PAUSED)
			break;
		h->in_exec = true;
		size_t n = http_parser_execute(&h->parser, &h1_settings, (const char *)p + used, len - used);
		h->in_exec = false;
		if (n > len - used)
			n = len - used;
		used += n;
		enum http_errno err = HTTP_PARSER_ERRNO(&h->parser);
		if (err == HPE_PAUSED) {
			if (h->upgrade && h->waiting) {
				h1_do_upgrade(h);
				break;
			}
			/* A response that finished while the parser ran: finish the
			 * exchange now that the parser has returned, and go on. */
			if (h->cur && h->cur->finishing)
				h1_finish(h);
			if (!h->cur && h->waiting && !h->closing) {
				h->waiting = false;
				http_parser_pause(&h->parser, 0);
				continue;
			}
			break;
		}
		if (err != HPE_OK) {
			struct h1_req *q = h->cur;
			int status = h->error_status ? h->error_status : 400;
			if (err == HPE_HEADER_OVERFLOW)
				status = 431;
			if (q && q->r.resp_ended && h->closing)
				return (ssize_t)len; /* answered already; the rest is moot */
			if (q) {
				if (q->r.resp_started)
					return -EPROTO;
				h->cur = NULL;
				q->r.aborted = true;
				if (q->r.on_close)
					q->r.on_close(&q->r, false);
				h1_req_free(q);
			}
			h1_send_error(h, status);
			return (ssize_t)len;
		}
	}
	return (ssize_t)used;
}

void h1_on_output_drained(struct h1 *h)
{
	struct h1_req *q = h ? h->cur : NULL;
	if (q && q->r.resp_started && !q->r.resp_ended && q->r.on_writable)
		q->r.on_writable(&q->r);
}

void h1_free(struct h1 *h)
{
	if (!h)
		return;
	struct h1_req *q = h->cur;
	if (q) {
		h->cur = NULL;
		bool done = q->r.resp_ended;
		q->r.aborted = !done;
		if (q->r.on_close)
			q->r.on_close(&q->r, done);
		h1_req_free(q);
	}
	/* An upgraded request was never dispatched: nothing to tell. */
	if (h->up_req)
		h1_req_free(h->up_req);
	buf_free(&h->head);
	fields_release(h->fields);
	free(h->up_settings);
	free(h);
}
