/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Allocation failures in the HTTP/1.1 session and the Connect envelope
 * decoder: every allocation fails in turn; the call fails cleanly, nothing
 * crashes and nothing leaks (see failalloc.h).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "failalloc.h"
#include "http/h1.h"
#include "http/http.h"
#include "rpc/envelope.h"

/* ---- http/h1.c ---- */

static struct outq out;
static int closed;

static void notify(struct http_link *l, enum http_link_event ev) {}
static void on_close(struct http_req *r, bool completed) { closed++; }
static void on_body_end(struct http_req *r)
{
	http_respond(r, 200, "text/plain", "pong", 4, NULL, 0);
}
static void on_request(struct http_req *r)
{
	r->on_close = on_close;
	r->on_body_end = on_body_end;
}

static int h1_op(void *ctx)
{
	static const char reqs[] = "POST /a HTTP/1.1\r\nContent-Length: 3\r\nX-A: b\r\n\r\nabc"
				   "GET /b HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n";
	struct http_link l = {.out = &out, .notify = notify, .on_request = on_request};
	size_t n = sizeof(reqs) - 1, used = 0;
	int rc = 0;

	closed = 0;
	struct h1 *h = h1_new(&l);
	if (!h)
		return -ENOMEM;
	for (int i = 0; i < 20 && used < n; i++) {
		ssize_t k = h1_feed(h, (const uint8_t *)reqs + used, n - used);
		if (k < 0) {
			rc = -EPROTO;
			break;
		}
		used += (size_t)k;
		h1_progress(h);
	}
	h1_progress(h);
	/* Success is both answers queued and both exchanges finished. */
	size_t pongs = 0;
	for (struct outseg *s = out.head; s; s = s->next)
		for (size_t i = 0; i + 4 <= s->len; i++)
			pongs += memcmp(s->data + s->off + i, "pong", 4) == 0;
	if (rc == 0 && (pongs != 2 || closed != 2))
		rc = -EIO;
	h1_free(h);
	outq_clear(&out);
	return rc;
}

Test(http_alloc, h1_every_allocation_fails_cleanly)
{
	cr_assert_gt(failalloc_run("h1", h1_op, NULL, FAILALLOC_MAY_ABSORB), 2);
}

/* ---- rpc/envelope.c ---- */

static int count_msgs(void *ud, uint8_t flags, const uint8_t *p, size_t n)
{
	(*(int *)ud)++;
	return 0;
}

static int envelope_op(void *ctx)
{
	const uint8_t *wire = ctx;
	size_t wlen = (size_t)wire[0] << 8 | wire[1];
	struct env_dec d;
	int msgs = 0, rc = 0;

	env_dec_init(&d, 1 << 20, 4 << 20, true);
	for (size_t off = 2; off < wlen + 2 && rc == 0; off += 7) {
		size_t k = wlen + 2 - off < 7 ? wlen + 2 - off : 7;
		rc = env_dec_push(&d, wire + off, k);
		if (rc == 0)
			rc = env_dec_drain(&d, count_msgs, &msgs);
	}
	env_dec_free(&d);
	if (rc == 0 && msgs != 2)
		rc = -EIO;
	return rc;
}

Test(http_alloc, envelope_every_allocation_fails_cleanly)
{
	/* Two envelopes: one plain, one gzip-compressed (made unarmed). */
	static uint8_t wire[2048];
	uint8_t *z;
	size_t zn, n = 2;
	static const char text[] = "a message long enough to be worth compressing, compressing, compressing";
	cr_assert_eq(env_gzip((const uint8_t *)text, sizeof(text), &z, &zn), 0);
	wire[n++] = 0;
	wire[n++] = 0, wire[n++] = 0, wire[n++] = 0, wire[n++] = 3;
	memcpy(wire + n, "abc", 3);
	n += 3;
	wire[n++] = ENV_FLAG_COMPRESSED;
	wire[n++] = 0, wire[n++] = 0, wire[n++] = (uint8_t)(zn >> 8), wire[n++] = (uint8_t)zn;
	memcpy(wire + n, z, zn);
	n += zn;
	free(z);
	wire[0] = (uint8_t)((n - 2) >> 8);
	wire[1] = (uint8_t)(n - 2);
	cr_assert_gt(failalloc_run("envelope", envelope_op, wire, 0), 1);
}
