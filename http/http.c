/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http.c - protocol-independent helpers over struct http_req.
 */
#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "http/http.h"

const char *http_req_header(const struct http_req *r, const char *lname)
{
	/* A request is looked up a dozen times: the first letter rules out
	 * most names without a call. */
	for (size_t i = 0; i < r->n_hdrs; i++)
		if (r->hdrs[i].name[0] == lname[0] && strcmp(r->hdrs[i].name, lname) == 0)
			return r->hdrs[i].value;
	return NULL;
}

void http_req_extra_header(struct http_req *r, const char *name, const char *value, bool replace)
{
	if (replace) {
		for (size_t i = 0; i < r->n_extra; i++) {
			if (strcasecmp(r->extra[i].name, name) == 0) {
				r->extra[i].value = value;
				return;
			}
		}
	}
	if (r->n_extra < HTTP_MAX_EXTRA_HDRS) {
		r->extra[r->n_extra].name = name;
		r->extra[r->n_extra].value = value;
		r->n_extra++;
	}
}

int http_resp_begin(struct http_req *r, int status, const struct http_hdr *h, size_t n, int64_t len)
{
	if (r->resp_started)
		return -EALREADY;
	if (r->aborted)
		return -EPIPE;
	r->resp_started = true;
	r->status = status;
	return r->ops->begin(r, status, h, n, len);
}

int http_resp_write(struct http_req *r, const void *p, size_t n)
{
	if (r->aborted || r->resp_ended)
		return -EPIPE;
	if (n == 0)
		return 0;
	return r->ops->write(r, p, n);
}

int http_resp_write_owned(struct http_req *r, void *p, size_t n, void (*release)(void *), void *arg)
{
	int rc;

	if (r->aborted || r->resp_ended)
		rc = -EPIPE;
	else if (n == 0)
		rc = 0;
	else if (r->ops->write_owned)
		return r->ops->write_owned(r, p, n, release, arg);
	else
		rc = r->ops->write(r, p, n);
	release(arg);
	return rc;
}

int http_resp_write_file(struct http_req *r, int fd, off_t off, size_t len)
{
	if (r->aborted || r->resp_ended)
		return -EPIPE;
	if (len == 0)
		return 0;
	return r->ops->write_file(r, fd, off, len);
}

int http_resp_end(struct http_req *r, const struct http_hdr *trailers, size_t n)
{
	if (r->resp_ended)
		return -EALREADY;
	if (r->aborted)
		return -EPIPE;
	r->resp_ended = true;
	return r->ops->end(r, trailers, n);
}

void http_resp_abort(struct http_req *r)
{
	if (r->resp_ended || r->aborted)
		return;
	r->resp_ended = true;
	if (r->ops->abort)
		r->ops->abort(r);
	else
		r->ops->end(r, NULL, 0);
}

size_t http_resp_queued(const struct http_req *r)
{
	if (r->aborted)
		return 0;
	return r->ops->queued(r);
}

void http_req_pause_body(struct http_req *r, bool paused)
{
	if (!r->aborted && !r->body_done)
		r->ops->pause_body(r, paused);
}

int http_respond(struct http_req *r, int status, const char *ctype, const void *body, size_t n,
		 const struct http_hdr *more, size_t n_more)
{
	struct http_hdr h[16];
	size_t k = 0;
	int rc;

	if (ctype)
		h[k++] = (struct http_hdr){"content-type", ctype};
	for (size_t i = 0; i < n_more && k < 16; i++)
		h[k++] = more[i];
	rc = http_resp_begin(r, status, h, k, (int64_t)n);
	if (rc == 0 && n > 0)
		rc = http_resp_write(r, body, n);
	if (rc == 0)
		rc = http_resp_end(r, NULL, 0);
	return rc;
}

int http_respond_json_error(struct http_req *r, int status, const char *msg)
{
	char buf[2048];
	size_t k = 0;

	k += (size_t)snprintf(buf, sizeof(buf), "{\"code\":%d,\"message\":\"", status);
	/* JSON-escape the message; Go also escapes <, > and & this way. */
	for (const unsigned char *p = (const unsigned char *)msg; *p && k < sizeof(buf) - 16; p++) {
		if (*p == '"' || *p == '\\') {
			buf[k++] = '\\';
			buf[k++] = (char)*p;
		} else if (*p < 0x20 || *p == '<' || *p == '>' || *p == '&') {
			k += (size_t)snprintf(buf + k, sizeof(buf) - k, "\\u%04x", *p);
		} else {
			buf[k++] = (char)*p;
		}
	}
	k += (size_t)snprintf(buf + k, sizeof(buf) - k, "\"}\n");
	static const struct http_hdr nosniff = {"x-content-type-options", "nosniff"};
	return http_respond(r, status, "application/json; charset=utf-8", buf, k, &nosniff, 1);
}

int http_respond_text_error(struct http_req *r, int status, const char *msg)
{
	char buf[2048];
	int k = snprintf(buf, sizeof(buf), "%s\n", msg);
	if (k < 0 || (size_t)k >= sizeof(buf))
		k = sizeof(buf) - 1;
	static const struct http_hdr nosniff = {"x-content-type-options", "nosniff"};
	return http_respond(r, status, "text/plain; charset=utf-8", buf, (size_t)k, &nosniff, 1);
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int http_form_decode(const char *src, size_t n, char *out, size_t outlen)
{
	size_t k = 0;

	if (outlen == 0)
		return -1;
	for (size_t i = 0; i < n; i++) {
		int ch = (unsigned char)src[i];
		if (ch == '+') {
			ch = ' ';
		} else if (ch == '%') {
			int hi, lo;
			if (i + 2 >= n)
				return -1;
			hi = hexval((unsigned char)src[i + 1]);
			lo = hexval((unsigned char)src[i + 2]);
			if (hi < 0 || lo < 0)
				return -1;
			ch = hi * 16 + lo;
			i += 2;
		}
		if (k + 1 >= outlen)
			return -1;
		out[k++] = (char)ch;
	}
	out[k] = '\0';
	return (int)k;
}

static int form_valid(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (s[i] != '%')
			continue;
		if (i + 2 >= n || hexval((unsigned char)s[i + 1]) < 0 || hexval((unsigned char)s[i + 2]) < 0)
			return -1;
		i += 2;
	}
	return 0;
}

int http_query_get(const char *query, const char *name, char *out, size_t outlen)
{
	/* Go's url.ParseQuery: pairs split on '&'; a pair containing ';' or a
	 * bad escape is dropped; key and value are form-decoded. */
	int count = 0;
	const char *p = query ? query : "";
	char key[256];

	if (outlen)
		out[0] = '\0';
	while (*p) {
		const char *end = strchr(p, '&');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		const char *eq = memchr(p, '=', len);
		size_t klen = eq ? (size_t)(eq - p) : len;
		if (len > 0 && !memchr(p, ';', len) && http_form_decode(p, klen, key, sizeof(key)) >= 0 &&
		    strcmp(key, name) == 0) {
			const char *v = eq ? eq + 1 : p + len;
			size_t vlen = eq ? len - klen - 1 : 0;
			/* Later duplicates only count; they are validated the
			 * same way so a malformed one is dropped, as in Go. */
			int ok = count == 0 ? http_form_decode(v, vlen, out, outlen) : form_valid(v, vlen);
			if (ok >= 0)
				count++;
		}
		if (!end)
			break;
		p = end + 1;
	}
	return count;
}

void http_date(char *buf, size_t len)
{
	static time_t cached_t;
	static char cached[40];
	time_t now = time(NULL);

	if (now != cached_t) {
		struct tm tm;
		gmtime_r(&now, &tm);
		strftime(cached, sizeof(cached), "%a, %d %b %Y %H:%M:%S GMT", &tm);
		cached_t = now;
	}
	size_t n = strlen(cached);
	if (!len)
		return;
	if (n >= len)
		n = len - 1;
	memcpy(buf, cached, n);
	buf[n] = '\0';
}

const char *http_reason(int s)
{
	switch (s) {
	case 100: return "Continue";
	case 101: return "Switching Protocols";
	case 200: return "OK";
	case 201: return "Created";
	case 204: return "No Content";
	case 206: return "Partial Content";
	case 304: return "Not Modified";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 406: return "Not Acceptable";
	case 409: return "Conflict";
	case 411: return "Length Required";
	case 412: return "Precondition Failed";
	case 413: return "Request Entity Too Large";
	case 415: return "Unsupported Media Type";
	case 416: return "Requested Range Not Satisfiable";
	case 429: return "Too Many Requests";
	case 431: return "Request Header Fields Too Large";
	case 499: return "Client Closed Request";
	case 500: return "Internal Server Error";
	case 501: return "Not Implemented";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	case 507: return "Insufficient Storage";
	default: return "Unknown";
	}
}

void (*http_req_done_hook)(struct http_req *r);

void http_req_release(struct http_req *r)
{
	if (http_req_done_hook && r->op_id)
		http_req_done_hook(r);
	r->op_id = 0;
	free(r->user);
	free(r->user_error);
	r->user = NULL;
	r->user_error = NULL;
}
