/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The HTTP/1.1 session on its own: arbitrary bytes, fed in pieces whose
 * sizes come from the input, to a handler that answers every request
 * (sometimes at once, sometimes at the end of its body, sometimes pausing
 * the body), with the deferred callbacks run as the connection would.
 */
#include <stdbool.h>
#include <string.h>

#include "http/h1.h"
#include "http/http.h"

static struct outq out;
static unsigned mode;

static void notify(struct http_link *l, enum http_link_event ev) {}

static void on_body_end(struct http_req *r)
{
	http_respond(r, 200, "text/plain", "ok", 2, NULL, 0);
}

static void on_body(struct http_req *r, const uint8_t *p, size_t n)
{
	if (mode & 4)
		http_req_pause_body(r, (n & 1) != 0);
}

static void on_request(struct http_req *r)
{
	r->on_body = on_body;
	r->on_body_end = on_body_end;
	if (mode & 1)
		http_respond(r, 204, NULL, NULL, 0, NULL, 0);
	else if (mode & 2) {
		http_resp_begin(r, 200, NULL, 0, -1);
		http_resp_write(r, r->path, strlen(r->path));
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
	if (n < 2)
		return 0;
	mode = data[0];
	size_t step = (size_t)(data[1] % 31) + 1, off = 2;
	struct http_link link = {.out = &out, .notify = notify, .on_request = on_request};
	struct h1 *h = h1_new(&link);
	if (!h)
		return 0;
	size_t pending_from = off;
	int stalls = 0;
	while (pending_from < n && !h1_upgrading(h) && stalls < 3) {
		size_t end = pending_from + step < n ? pending_from + step : n;
		ssize_t k = h1_feed(h, data + pending_from, end - pending_from);
		if (k < 0)
			break;
		stalls = k == 0 ? stalls + 1 : 0;
		pending_from += (size_t)k;
		h1_progress(h);
		h1_on_output_drained(h);
		outq_clear(&out);
	}
	h1_free(h);
	outq_clear(&out);
	return 0;
}
