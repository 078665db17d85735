/* SPDX-License-Identifier: Apache-2.0 */
/* The HTTP/1.1 session driven directly: bytes in, requests and output out. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/h1.h"
#include "http/http.h"

/* A link that records what the session asks for. */
static struct outq out;
static struct http_link link;
static int n_events[HTTP_LINK_ABORT + 1];
static int n_requests, n_closed, n_completed;
static char paths[8][64];
static char body_seen[4096];
static size_t body_len;
static bool respond_at_head = true; /* answer as soon as the head arrives */
static bool respond_owned;          /* answer with a streamed, lent buffer */
static char lent[] = "lent bytes";
static int n_released;
static bool closed_inside_end;      /* on_close ran inside http_resp_end */
static bool in_end;
static struct http_req *last;

static void notify(struct http_link *l, enum http_link_event ev) { n_events[ev]++; }

static void on_close(struct http_req *r, bool completed)
{
	n_closed++;
	n_completed += completed;
	if (in_end)
		closed_inside_end = true;
	if (last == r)
		last = NULL;
}

static void on_body(struct http_req *r, const uint8_t *p, size_t n)
{
	if (body_len + n < sizeof(body_seen)) {
		memcpy(body_seen + body_len, p, n);
		body_len += n;
	}
}

static void respond(struct http_req *r, const char *text)
{
	in_end = true;
	cr_assert_eq(http_respond(r, 200, "text/plain", text, strlen(text), NULL, 0), 0);
	in_end = false;
}

static void on_body_end(struct http_req *r)
{
	if (!respond_at_head)
		respond(r, "done");
}

static void release_lent(void *arg)
{
	cr_assert_eq(arg, lent);
	n_released++;
}

static void on_request(struct http_req *r)
{
	if (n_requests < 8)
		snprintf(paths[n_requests], sizeof(paths[0]), "%s?%s", r->path, r->query);
	n_requests++;
	last = r;
	r->on_close = on_close;
	r->on_body = on_body;
	r->on_body_end = on_body_end;
	if (respond_owned) {
		cr_assert_eq(http_resp_begin(r, 200, NULL, 0, -1), 0);
		cr_assert_eq(http_resp_write_owned(r, lent, strlen(lent), release_lent, lent), 0);
		cr_assert_eq(n_released, 0, "the queue still reads the buffer");
		cr_assert_eq(http_resp_end(r, NULL, 0), 0);
		return;
	}
	if (respond_at_head)
		respond(r, r->path);
}

static struct h1 *h;

static void setup(void)
{
	memset(&out, 0, sizeof(out));
	memset(n_events, 0, sizeof(n_events));
	n_requests = n_closed = n_completed = 0;
	body_len = 0;
	respond_at_head = true;
	respond_owned = false;
	n_released = 0;
	closed_inside_end = in_end = false;
	last = NULL;
	link = (struct http_link){.out = &out, .notify = notify, .on_request = on_request};
	h = h1_new(&link);
	cr_assert_not_null(h);
}

static void teardown(void)
{
	h1_free(h);
	outq_clear(&out);
}

/* Everything queued so far, as a string (memory segments only). */
static char *output(void)
{
	static char buf[65536];
	size_t k = 0;
	for (struct outseg *s = out.head; s && k < sizeof(buf) - 1; s = s->next) {
		size_t n = s->len < sizeof(buf) - 1 - k ? s->len : sizeof(buf) - 1 - k;
		memcpy(buf + k, outseg_mem(s) + s->off, n);
		k += n;
	}
	buf[k] = '\0';
	return buf;
}

/* Feed everything, running the deferred callbacks as the connection would. */
static size_t feed_all(const char *s)
{
	size_t n = strlen(s), used = 0;
	for (int guard = 0; guard < 100 && used < n; guard++) {
		ssize_t k = h1_feed(h, (const uint8_t *)s + used, n - used);
		cr_assert_geq(k, 0);
		used += (size_t)k;
		if (k == 0)
			h1_progress(h);
	}
	h1_progress(h);
	return used;
}

TestSuite(h1, .init = setup, .fini = teardown);

Test(h1, request_head_reaches_the_handler_and_the_answer_is_queued)
{
	feed_all("GET /health?x=1 HTTP/1.1\r\nHost: a\r\nX-Thing: v\r\n\r\n");
	cr_assert_eq(n_requests, 1);
	cr_assert_str_eq(paths[0], "/health?x=1");
	char *o = output();
	cr_assert(strncmp(o, "HTTP/1.1 200 OK\r\n", 17) == 0, "%s", o);
	cr_assert(strstr(o, "Content-Length: 7\r\n"));
	cr_assert(strstr(o, "\r\n\r\n/health"));
	cr_assert_gt(n_events[HTTP_LINK_WANT_WRITE], 0);
	cr_assert_eq(n_closed, 1);
	cr_assert_eq(n_completed, 1);
}

Test(h1, the_end_of_an_exchange_is_never_run_inside_the_handler)
{
	size_t n = strlen("GET /a HTTP/1.1\r\n\r\n");
	cr_assert_eq(h1_feed(h, (const uint8_t *)"GET /a HTTP/1.1\r\n\r\n", n), (ssize_t)n);
	/* The handler answered at once: the session asked to be called back,
	 * and on_close did not run under http_resp_end. */
	cr_assert_not(closed_inside_end);
	cr_assert_gt(n_events[HTTP_LINK_CALL_BACK], 0);
	h1_progress(h);
	cr_assert_eq(n_closed, 1);
	cr_assert(h1_idle(h));
}

Test(h1, pipelined_requests_are_answered_in_order)
{
	feed_all("GET /one HTTP/1.1\r\n\r\nGET /two HTTP/1.1\r\n\r\nGET /three HTTP/1.1\r\n\r\n");
	cr_assert_eq(n_requests, 3);
	char *o = output();
	char *a = strstr(o, "/one"), *b = strstr(o, "/two"), *c = strstr(o, "/three");
	cr_assert(a && b && c && a < b && b < c, "%s", o);
}

Test(h1, a_request_waits_while_the_previous_response_is_open)
{
	respond_at_head = false;
	const char *two = "POST /a HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcGET /b HTTP/1.1\r\n\r\n";
	ssize_t k = h1_feed(h, (const uint8_t *)two, strlen(two));
	/* The first exchange answered at body end; the second is not parsed
	 * until the first is finished. */
	cr_assert_lt(k, (ssize_t)strlen(two));
	cr_assert_eq(n_requests, 1);
	cr_assert_eq(body_len, 3);
	cr_assert(memcmp(body_seen, "abc", 3) == 0);
	h1_progress(h);
	h1_feed(h, (const uint8_t *)two + k, strlen(two) - (size_t)k);
	h1_progress(h);
	cr_assert_eq(n_requests, 2);
}

Test(h1, chunked_request_bodies_are_dechunked)
{
	respond_at_head = false;
	feed_all("POST /u HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n");
	cr_assert_eq(body_len, 5);
	cr_assert(memcmp(body_seen, "abcde", 5) == 0);
	cr_assert(strstr(output(), "done"));
}

Test(h1, garbage_is_answered_400_and_the_link_closed)
{
	feed_all("\x01\x02 nonsense\r\n\r\n");
	cr_assert(strncmp(output(), "HTTP/1.1 400 Bad Request", 24) == 0, "%s", output());
	cr_assert_gt(n_events[HTTP_LINK_CLOSE], 0);
	cr_assert_eq(n_requests, 0);
}

Test(h1, a_head_over_the_limit_is_answered_431)
{
	size_t saved = h1_max_header_bytes;
	h1_max_header_bytes = 256; /* read when a session starts */
	teardown();
	setup();
	char req[1024];
	snprintf(req, sizeof(req), "GET / HTTP/1.1\r\nX-Big: %0600d\r\n\r\n", 7);
	feed_all(req);
	h1_max_header_bytes = saved;
	cr_assert(strncmp(output(), "HTTP/1.1 431 ", 13) == 0, "%s", output());
	cr_assert_gt(n_events[HTTP_LINK_CLOSE], 0);
}

Test(h1, bytes_split_at_every_position_give_the_same_request)
{
	const char *req = "GET /split?q=1 HTTP/1.1\r\nHost: x\r\nA: b\r\n\r\n";
	size_t n = strlen(req);
	for (size_t cut = 1; cut < n; cut++) {
		teardown();
		setup();
		ssize_t k = h1_feed(h, (const uint8_t *)req, cut);
		cr_assert_eq(k, (ssize_t)cut, "cut %zu", cut);
		feed_all(req + cut);
		cr_assert_eq(n_requests, 1, "cut %zu", cut);
		cr_assert_str_eq(paths[0], "/split?q=1");
	}
}

Test(h1, upgrade_to_h2c_hands_over_the_request_and_settings)
{
	/* HTTP2-Settings: one setting (MAX_CONCURRENT_STREAMS = 100). */
	feed_all("GET /up HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
		 "HTTP2-Settings: AAMAAABk\r\n\r\n");
	cr_assert(h1_upgrading(h));
	cr_assert_eq(n_requests, 0, "the request goes to HTTP/2, not the handler");
	cr_assert(strncmp(output(), "HTTP/1.1 101 Switching Protocols", 32) == 0);
	size_t sl;
	const uint8_t *s = h1_upgrade_settings(h, &sl);
	cr_assert_eq(sl, 6);
	cr_assert_eq(s[1], 3);
	cr_assert_str_eq(h1_upgrade_request(h)->path, "/up");
}

Test(h1, freeing_mid_request_tells_the_handler_it_was_aborted)
{
	respond_at_head = false;
	const char *req = "POST /a HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc";
	h1_feed(h, (const uint8_t *)req, strlen(req));
	cr_assert_eq(n_requests, 1);
	h1_free(h);
	h = NULL;
	cr_assert_eq(n_closed, 1);
	cr_assert_eq(n_completed, 0);
}

Test(h1, a_lent_buffer_is_sent_in_place_and_released_once)
{
	respond_owned = true;
	feed_all("GET /stream HTTP/1.1\r\n\r\n");
	char *o = output();
	cr_assert(strstr(o, "Transfer-Encoding: chunked\r\n"), "%s", o);
	cr_assert(strstr(o, "\r\n\r\na\r\nlent bytes\r\n0\r\n\r\n"), "framed as one chunk: %s", o);
	bool in_place = false;
	for (struct outseg *s = out.head; s; s = s->next)
		in_place |= outseg_mem(s) == (uint8_t *)lent;
	cr_assert(in_place, "the queue points at the caller's buffer");
	cr_assert_eq(n_released, 0);
	while (out.head)
		outq_pop(&out);
	cr_assert_eq(n_released, 1, "released once, when its segment is dropped");
}
