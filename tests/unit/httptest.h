/* SPDX-License-Identifier: Apache-2.0 */
/*
 * httptest.h - one HTTP/1.1 exchange driven through a real session
 * (http/h1.c) with a link of the test's own, for the unit tests of the
 * handlers (the way tests/unit/h1_test.c drives sessions): the raw request
 * goes in, the handler gets the `struct http_req` the transport made, and
 * the response comes out as bytes. Handlers that answer later (from a
 * worker, a timer, another thread's batch) are waited for on envd_loop,
 * with a hang deadline of minutes.
 */
#ifndef TESTS_UNIT_HTTPTEST_H
#define TESTS_UNIT_HTTPTEST_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/loop.h"
#include "http/h1.h"
#include "http/http.h"
#include "http/outq.h"

/* Waiting for an event never decides a test: only a hang ends the wait. */
#define HT_HANG_S 120.0

struct ht_resp {
	int status;
	char head[8192];
	char *body; /* NUL-terminated, malloc'ed */
	size_t body_len;
};

static struct {
	struct outq out;
	struct http_link link;
	struct h1 *h;
	void (*handler)(struct http_req *r);
	bool call_back;
	bool closed;
	void (*inner_close)(struct http_req *r, bool completed);
} ht;

static inline void ht_notify(struct http_link *l, enum http_link_event ev)
{
	if (ev == HTTP_LINK_CALL_BACK)
		ht.call_back = true;
}

/* Wraps the handler's on_close to learn when the exchange is over. */
static inline void ht_on_close(struct http_req *r, bool completed)
{
	ht.closed = true;
	if (ht.inner_close)
		ht.inner_close(r, completed);
}

static inline void ht_on_request(struct http_req *r)
{
	ht.handler(r);
	ht.inner_close = r->on_close;
	r->on_close = ht_on_close;
}

static inline double ht_now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static inline void ht_tick_cb(EV_P_ ev_timer *w, int revents)
{
}

/* One turn of the loop, at most 10 ms long. */
static inline void ht_turn(void)
{
	static ev_timer tick;

	ev_timer_init(&tick, ht_tick_cb, 0.01, 0.);
	ev_timer_start(envd_loop, &tick);
	ev_run(envd_loop, EVRUN_ONCE);
	ev_timer_stop(envd_loop, &tick);
}

/* Turn the loop until done(ud) is true; false on a hang. */
static inline bool ht_wait(bool (*done)(void *ud), void *ud)
{
	double until = ht_now() + HT_HANG_S;

	while (!done(ud)) {
		if (ht_now() > until)
			return false;
		ht_turn();
	}
	return true;
}

static inline bool ht_exchange_over(void *ud)
{
	if (ht.call_back) {
		ht.call_back = false;
		h1_progress(ht.h);
	}
	return ht.closed;
}

/*
 * Send `raw` (a whole request: head and body, body_len bytes after the
 * head's blank line may hold NULs) to `handler` and collect the response.
 */
static inline struct ht_resp ht_request_n(void (*handler)(struct http_req *r), const char *raw, size_t len)
{
	struct ht_resp resp = { 0 };
	size_t used = 0;

	memset(&ht, 0, sizeof(ht));
	ht.handler = handler;
	ht.link = (struct http_link){ .out = &ht.out, .notify = ht_notify, .on_request = ht_on_request };
	ht.h = h1_new(&ht.link);
	cr_assert_not_null(ht.h);
	double until = ht_now() + HT_HANG_S;
	while (used < len) {
		ssize_t k = h1_feed(ht.h, (const uint8_t *)raw + used, len - used);
		cr_assert_geq(k, 0, "the session refused the request");
		used += (size_t)k;
		if (k == 0) {
			cr_assert_lt(ht_now(), until, "the session stopped reading");
			ht_exchange_over(NULL);
			ht_turn();
		}
	}
	cr_assert(ht_wait(ht_exchange_over, NULL), "no response within %.0f s", HT_HANG_S);

	size_t total = 0;
	for (struct outseg *s = ht.out.head; s; s = s->next)
		total += s->len;
	char *all = malloc(total + 1);
	cr_assert_not_null(all);
	size_t k = 0;
	for (struct outseg *s = ht.out.head; s; s = s->next) {
		memcpy(all + k, outseg_mem(s) + s->off, s->len);
		k += s->len;
	}
	all[k] = '\0';
	char *sep = strstr(all, "\r\n\r\n");
	cr_assert_not_null(sep, "no response head in: %s", all);
	size_t hl = (size_t)(sep - all) + 4;
	cr_assert_lt(hl, sizeof(resp.head));
	memcpy(resp.head, all, hl);
	resp.head[hl] = '\0';
	cr_assert_eq(sscanf(all, "HTTP/1.1 %d", &resp.status), 1, "%s", all);
	resp.body_len = k - hl;
	resp.body = malloc(resp.body_len + 1);
	cr_assert_not_null(resp.body);
	/* A chunked body is joined (the handlers here answer small bodies). */
	if (strcasestr(resp.head, "Transfer-Encoding: chunked")) {
		const char *p = all + hl;
		size_t o = 0;
		for (;;) {
			unsigned long n = strtoul(p, NULL, 16);
			p = strstr(p, "\r\n");
			cr_assert_not_null(p);
			p += 2;
			if (n == 0)
				break;
			memcpy(resp.body + o, p, n);
			o += n;
			p += n + 2;
		}
		resp.body_len = o;
	} else {
		memcpy(resp.body, all + hl, resp.body_len);
	}
	resp.body[resp.body_len] = '\0';
	free(all);
	h1_free(ht.h);
	outq_clear(&ht.out);
	return resp;
}

static inline struct ht_resp ht_request(void (*handler)(struct http_req *r), const char *raw)
{
	return ht_request_n(handler, raw, strlen(raw));
}

/* A POST with this body and content type (NULL: none). */
static inline struct ht_resp ht_post(void (*handler)(struct http_req *r), const char *path, const char *ctype,
			      const char *body)
{
	size_t bl = strlen(body), cap = bl + 512;
	char *raw = malloc(cap);

	cr_assert_not_null(raw);
	int n = snprintf(raw, cap, "POST %s HTTP/1.1\r\nHost: t\r\n%s%s%sContent-Length: %zu\r\n\r\n%s", path,
			 ctype ? "Content-Type: " : "", ctype ? ctype : "", ctype ? "\r\n" : "", bl, body);
	struct ht_resp r = ht_request_n(handler, raw, (size_t)n);
	free(raw);
	return r;
}

static inline struct ht_resp ht_get(void (*handler)(struct http_req *r), const char *target)
{
	char raw[4096];

	snprintf(raw, sizeof(raw), "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", target);
	return ht_request(handler, raw);
}

/* The value of header `name` in the response head ("" when absent). */
static inline const char *ht_header(const struct ht_resp *r, const char *name)
{
	static char v[1024];
	char key[128];
	const char *p;

	snprintf(key, sizeof(key), "\r\n%s: ", name);
	v[0] = '\0';
	if ((p = strcasestr(r->head, key))) {
		p += strlen(key);
		size_t n = strcspn(p, "\r");
		if (n >= sizeof(v))
			n = sizeof(v) - 1;
		memcpy(v, p, n);
		v[n] = '\0';
	}
	return v;
}

static inline void ht_free(struct ht_resp *r)
{
	free(r->body);
	r->body = NULL;
}

#endif
