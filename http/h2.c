/* SPDX-License-Identifier: Apache-2.0 */
/*
 * h2.c - HTTP/2 (h2c) on a connection, with nghttp2 doing the protocol.
 *
 * nghttp2 eats the bytes conn.c read and produces the bytes conn.c writes
 * (mem_recv / mem_send); this file maps its stream callbacks onto struct
 * http_req. Each stream has its own response queue drained by a data
 * provider, so one slow stream never holds up the others beyond HTTP/2's
 * own flow control. Request bodies are flow-controlled by hand: window is
 * only returned to the peer for bytes the handler has accepted, so a
 * paused upload stops the sender instead of filling our memory.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <nghttp2/nghttp2.h>

#include "base/buf.h"
#include "base/log.h"
#include "base/loopmem.h"
#include "http/h2.h"
#include "http/http.h"

#define H2_MAX_HEADERS 128
#define H2_MAX_HEAD_BYTES (64 * 1024)
#define H2_STREAM_WINDOW (1 << 20)
#define H2_CONN_WINDOW (16 << 20)
/* Concurrent streams a client may open per connection (flag -max-streams). */
unsigned h2_max_streams = 1000;

struct h2;

struct h2_stream {
	struct http_req r;
	struct h2 *h;
	int32_t id;
	struct h2_stream *prev, *next;
	/* head strings: offsets into mem until dispatch */
	struct buf mem;
	/* 32-bit offsets: the head is bounded by H2_MAX_HEAD_BYTES. */
	uint32_t name_off[H2_MAX_HEADERS], value_off[H2_MAX_HEADERS];
	int n_fields;
	size_t method_off, path_off;
	bool has_method, has_path;
	struct http_hdr *hdrs;   /* built at dispatch, exactly n_fields long */
	/* response */
	struct outq out;
	bool eof;
	bool deferred;
	bool want_writable;
	bool submitted;
	char *trailer_mem;
	nghttp2_nv trailers[16];
	size_t n_trailers;
	/* request body while paused (bounded by the stream window) */
	bool paused;
	struct buf pending;
	bool dispatched;
};

struct h2 {
	struct http_link *link;
	bool closing;       /* the link was told to close (or abort) */
	nghttp2_session *s;
	struct h2_stream *streams;
	size_t n_streams;
	bool flushing;
};

static const struct http_transport_ops h2_ops;
static void h2_flush(struct h2 *h);
static int h2_upgrade_stream(struct h2 *h, const uint8_t *settings, size_t settings_len,
			     const struct http_req *r);

/*
 * Called from transport ops, i.e. from inside handlers: producing frames
 * now could close the stream and free the request under the handler, so
 * the frames are produced from the write callback instead.
 */
static void h2_schedule(struct h2 *h)
{
	http_link_notify(h->link, HTTP_LINK_WANT_WRITE);
}

/* Add a NUL-terminated string to the head; its offset goes to *off. */
static int mem_add(struct h2_stream *st, const uint8_t *p, size_t n, size_t *off)
{
	size_t at = st->mem.len;
	if (buf_append_str0(&st->mem, p, n) < 0)
		return -1;
	*off = at;
	return 0;
}

/* nghttp2's own allocations (frames, outbound items, header copies: a few
 * per request, all on the loop thread) come from base/loopmem. */
static void *h2mem_malloc(size_t n, void *ud)
{
	return loopmem_malloc(n);
}

static void h2mem_free(void *q, void *ud)
{
	loopmem_free(q);
}

static void *h2mem_calloc(size_t k, size_t n, void *ud)
{
	return loopmem_calloc(k, n);
}

static void *h2mem_realloc(void *q, size_t n, void *ud)
{
	return loopmem_realloc(q, n);
}

static nghttp2_mem h2mem = { NULL, h2mem_malloc, h2mem_free, h2mem_calloc, h2mem_realloc };

/*
 * Freed stream structs (with their head buffer) are kept for the next
 * request. A stream is ~2 KiB: musl's allocator serves that size from
 * 7-page groups that it unmaps as soon as a burst of requests ends, so
 * without this every burst of unary calls paid an mmap, a munmap and the
 * page faults in between. The loop thread alone touches the cache.
 */
#define STREAM_CACHE_MAX 256
static struct h2_stream *stream_cache;
static size_t stream_cache_n;

static struct h2_stream *stream_new(struct h2 *h, int32_t id)
{
	struct h2_stream *st = stream_cache;
	if (st) {
		struct buf mem = st->mem;
		stream_cache = st->next;
		stream_cache_n--;
		memset(st, 0, sizeof(*st));
		st->mem = mem;
		buf_reset(&st->mem);
	} else {
		st = calloc(1, sizeof(*st));
		if (!st)
			return NULL;
		buf_init_loop(&st->mem, H2_MAX_HEAD_BYTES);
	}
	st->h = h;
	st->id = id;
	/* Flow control bounds it to the stream window; the bound is a backstop. */
	buf_init_loop(&st->pending, 2 * H2_STREAM_WINDOW);
	st->r.ops = &h2_ops;
	st->r.transport = st;
	st->r.version = 20;
	st->r.content_length = -1;
	st->next = h->streams;
	if (h->streams)
		h->streams->prev = st;
	h->streams = st;
	h->n_streams++;
	return st;
}

static void stream_free(struct h2_stream *st)
{
	http_req_release(&st->r);
	struct h2 *h = st->h;
	if (st->prev)
		st->prev->next = st->next;
	else
		h->streams = st->next;
	if (st->next)
		st->next->prev = st->prev;
	h->n_streams--;
	outq_clear(&st->out);
	free(st->hdrs);
	buf_free(&st->pending);
	free(st->trailer_mem);
	if (stream_cache_n < STREAM_CACHE_MAX && st->mem.cap <= 4096) {
		st->next = stream_cache;
		stream_cache = st;
		stream_cache_n++;
		return;
	}
	buf_free(&st->mem);
	free(st);
}

static enum http_verb method_from(const char *m)
{
	static const struct { const char *n; enum http_verb m; } t[] = {
		{"GET", HTTP_M_GET}, {"HEAD", HTTP_M_HEAD}, {"POST", HTTP_M_POST}, {"PUT", HTTP_M_PUT},
		{"PATCH", HTTP_M_PATCH}, {"DELETE", HTTP_M_DELETE}, {"OPTIONS", HTTP_M_OPTIONS},
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (strcmp(t[i].n, m) == 0)
			return t[i].m;
	return HTTP_M_OTHER;
}

/* Turn offsets into pointers and hand the request to the router. */
static void stream_dispatch(struct h2_stream *st)
{
	char *mem = (char *)st->mem.p;
	struct http_req *r = &st->r;

	st->dispatched = true;
	st->hdrs = calloc((size_t)st->n_fields + 1, sizeof(*st->hdrs));
	if (!st->hdrs) {
		nghttp2_submit_rst_stream(st->h->s, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
		st->n_fields = 0;
		return;
	}
	for (int i = 0; i < st->n_fields; i++) {
		st->hdrs[i].name = mem + st->name_off[i];
		st->hdrs[i].value = mem + st->value_off[i];
	}
	r->hdrs = st->hdrs;
	r->n_hdrs = (size_t)st->n_fields;
	r->method_name = mem + st->method_off;
	r->method = method_from(r->method_name);
	r->path = mem + st->path_off;
	char *q = strchr(r->path, '?');
	if (q) {
		*q = '\0';
		r->query = q + 1;
	} else {
		r->query = r->path + strlen(r->path);
	}
	const char *cl = http_req_header(r, "content-length");
	if (cl) {
		char *end;
		long long v = strtoll(cl, &end, 10);
		if (*end == '\0' && v >= 0)
			r->content_length = v;
	}
	st->h->link->on_request(r);
}

static void stream_body_end(struct h2_stream *st)
{
	if (st->r.body_done)
		return;
	st->r.body_done = true;
	if (st->r.on_body_end && !st->r.aborted)
		st->r.on_body_end(&st->r);
}

static void deliver_body(struct h2_stream *st, const uint8_t *p, size_t n)
{
	if (st->r.on_body && !st->r.aborted)
		st->r.on_body(&st->r, p, n);
	nghttp2_session_consume(st->h->s, st->id, n);
}

/* ---- nghttp2 callbacks ---- */

static int cb_begin_headers(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
	struct h2 *h = ud;
	if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
		return 0;
	struct h2_stream *st = stream_new(h, f->hd.stream_id);
	if (!st)
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	nghttp2_session_set_stream_user_data(s, f->hd.stream_id, st);
	return 0;
}

static int cb_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name, size_t namelen,
		     const uint8_t *value, size_t valuelen, uint8_t flags, void *ud)
{
	struct h2_stream *st = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);
	size_t no, vo;

	if (!st || st->dispatched)
		return 0; /* trailers: ignored */
	if (namelen > 0 && name[0] == ':') {
		if (namelen == 7 && memcmp(name, ":method", 7) == 0) {
			if (mem_add(st, value, valuelen, &st->method_off) < 0)
				return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
			st->has_method = true;
		} else if (namelen == 5 && memcmp(name, ":path", 5) == 0) {
			if (mem_add(st, value, valuelen, &st->path_off) < 0)
				return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
			st->has_path = true;
		} else if (namelen == 10 && memcmp(name, ":authority", 10) == 0) {
			/* Expose as Host, as HTTP/1.1 would. */
			if (st->n_fields < H2_MAX_HEADERS && mem_add(st, (const uint8_t *)"host", 4, &no) == 0 &&
			    mem_add(st, value, valuelen, &vo) == 0) {
				st->name_off[st->n_fields] = (uint32_t)no;
				st->value_off[st->n_fields++] = (uint32_t)vo;
			}
		}
		return 0;
	}
	if (st->n_fields == H2_MAX_HEADERS || mem_add(st, name, namelen, &no) < 0 ||
	    mem_add(st, value, valuelen, &vo) < 0)
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* RST_STREAM this one only */
	st->name_off[st->n_fields] = (uint32_t)no;
	st->value_off[st->n_fields++] = (uint32_t)vo;
	return 0;
}

static int cb_frame_recv(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
	struct h2_stream *st = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);
	if (!st)
		return 0;
	switch (f->hd.type) {
	case NGHTTP2_HEADERS:
		if (!st->dispatched && (f->hd.flags & NGHTTP2_FLAG_END_HEADERS)) {
			if (!st->has_method || !st->has_path) {
				nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_PROTOCOL_ERROR);
				return 0;
			}
			stream_dispatch(st);
		}
		if (f->hd.flags & NGHTTP2_FLAG_END_STREAM)
			stream_body_end(st);
		break;
	case NGHTTP2_DATA:
		if ((f->hd.flags & NGHTTP2_FLAG_END_STREAM) && !st->paused)
			stream_body_end(st);
		break;
	}
	return 0;
}

static int cb_data_chunk(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data, size_t len,
			 void *ud)
{
	struct h2_stream *st = nghttp2_session_get_stream_user_data(s, id);
	if (!st || st->r.body_done) {
		nghttp2_session_consume_connection(s, len);
		return 0;
	}
	if (!st->paused && st->pending.len == 0) {
		deliver_body(st, data, len);
		return 0;
	}
	/* Paused: keep it; the unreturned window bounds how much can come. */
	if (buf_append(&st->pending, data, len) < 0)
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	return 0;
}

static int cb_stream_close(nghttp2_session *s, int32_t id, uint32_t err, void *ud)
{
	struct h2_stream *st = nghttp2_session_get_stream_user_data(s, id);
	if (!st)
		return 0;
	nghttp2_session_set_stream_user_data(s, id, NULL);
	bool done = st->r.resp_ended && st->eof && st->out.bytes == 0 && err == NGHTTP2_NO_ERROR;
	st->r.aborted = !done;
	if (st->dispatched && st->r.on_close)
		st->r.on_close(&st->r, done);
	stream_free(st);
	return 0;
}

static ssize_t data_read(nghttp2_session *s, int32_t id, uint8_t *buf, size_t len, uint32_t *flags,
			 nghttp2_data_source *src, void *ud)
{
	struct h2_stream *st = src->ptr;
	struct outq *q = &st->out;
	size_t k = 0;

	while (k < len && q->head) {
		struct outseg *sg = q->head;
		size_t n = sg->len < len - k ? sg->len : len - k;
		if (sg->fd >= 0) {
			ssize_t rd = pread(sg->fd, buf + k, n, sg->foff);
			if (rd <= 0)
				return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
			n = (size_t)rd;
			sg->foff += (off_t)n;
		} else {
			memcpy(buf + k, outseg_mem(sg) + sg->off, n);
			sg->off += n;
		}
		sg->len -= n;
		q->bytes -= n;
		k += n;
		if (sg->len == 0) {
			q->head = sg->next;
			if (!q->head)
				q->tail = NULL;
			outseg_free(sg);
		}
	}
	if (st->r.on_writable && !st->eof && q->bytes < HTTP_QUEUE_HIGH / 2)
		st->want_writable = true;
	if (q->bytes == 0 && st->eof) {
		*flags |= NGHTTP2_DATA_FLAG_EOF;
		if (st->n_trailers) {
			*flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
			nghttp2_submit_trailer(s, id, st->trailers, st->n_trailers);
		}
		return (ssize_t)k;
	}
	if (k == 0) {
		st->deferred = true;
		return NGHTTP2_ERR_DEFERRED;
	}
	return (ssize_t)k;
}

/* ---- transport ops ---- */

/* Decimal of v into buf (>= 21 bytes), NUL-terminated: printf is a large
 * share of a small response's cost. */
static void fmt_uint(char *buf, unsigned long long v)
{
	char t[24];
	size_t n = 0;
	do {
		t[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	for (size_t i = 0; i < n; i++)
		buf[i] = t[n - 1 - i];
	buf[n] = '\0';
}

static int h2_begin(struct http_req *r, int status, const struct http_hdr *hs, size_t n, int64_t len)
{
	struct h2_stream *st = r->transport;
	nghttp2_nv nv[64];
	size_t k = 0;
	char sbuf[8], lbuf[24], date[40];

	fmt_uint(sbuf, (unsigned long long)status);
	http_date(date, sizeof(date));
#define NV(nm, val) do { if (k < 64) { nv[k].name = (uint8_t *)(nm); nv[k].namelen = strlen(nm); \
	nv[k].value = (uint8_t *)(val); nv[k].valuelen = strlen(val); \
	nv[k].flags = NGHTTP2_NV_FLAG_NONE; k++; } } while (0)
	NV(":status", sbuf);
	NV("date", date);
	/* HTTP/2 header names must be lower-case; nghttp2 rejects others. */
	char lower[64][64];
	size_t nl = 0;
	for (size_t i = 0; i < r->n_extra + n && nl < 64; i++) {
		const struct http_hdr *x = i < r->n_extra ? &r->extra[i] : &hs[i - r->n_extra];
		size_t j = 0;
		for (; x->name[j] && j < 63; j++)
			lower[nl][j] = (char)((x->name[j] >= 'A' && x->name[j] <= 'Z') ? x->name[j] + 32 : x->name[j]);
		lower[nl][j] = '\0';
		if (strcmp(lower[nl], "connection") == 0 || strcmp(lower[nl], "transfer-encoding") == 0)
			continue;
		if ((status == 204 || status == 304) && strcmp(lower[nl], "content-length") == 0)
			continue;
		NV(lower[nl], x->value);
		nl++;
	}
	if (len >= 0 && status != 204 && status != 304) {
		fmt_uint(lbuf, (unsigned long long)len);
		NV("content-length", lbuf);
	}
#undef NV
	nghttp2_data_provider prd = {.source.ptr = st, .read_callback = data_read};
	bool body = !(len == 0 || status == 204 || status == 304 || r->method == HTTP_M_HEAD);
	if (!body)
		st->eof = true;
	int rc = nghttp2_submit_response(st->h->s, st->id, nv, k, body ? &prd : NULL);
	if (rc != 0)
		return -EIO;
	st->submitted = true;
	h2_schedule(st->h);
	return 0;
}

static void stream_resume(struct h2_stream *st)
{
	if (st->deferred) {
		st->deferred = false;
		nghttp2_session_resume_data(st->h->s, st->id);
	}
	h2_schedule(st->h);
}

static int h2_write(struct http_req *r, const void *p, size_t n)
{
	struct h2_stream *st = r->transport;
	if (st->eof)
		return 0;
	if (outq_append(&st->out, p, n) < 0)
		return -ENOMEM;
	stream_resume(st);
	return 0;
}

static int h2_write_file(struct http_req *r, int fd, off_t off, size_t len)
{
	struct h2_stream *st = r->transport;
	if (st->eof)
		return 0;
	if (outq_append_file_dup(&st->out, fd, off, len) < 0)
		return -ENOMEM;
	stream_resume(st);
	return 0;
}

static int h2_end(struct http_req *r, const struct http_hdr *tr, size_t n)
{
	struct h2_stream *st = r->transport;
	if (n > 0 && !st->eof) {
		size_t total = 0;
		for (size_t i = 0; i < n && i < 16; i++)
			total += strlen(tr[i].name) + strlen(tr[i].value) + 2;
		st->trailer_mem = malloc(total);
		if (st->trailer_mem) {
			char *m = st->trailer_mem;
			for (size_t i = 0; i < n && i < 16; i++) {
				size_t nl = strlen(tr[i].name), vl = strlen(tr[i].value);
				memcpy(m, tr[i].name, nl + 1);
				for (size_t j = 0; j < nl; j++)
					if (m[j] >= 'A' && m[j] <= 'Z')
						m[j] = (char)(m[j] + 32);
				st->trailers[i] = (nghttp2_nv){(uint8_t *)m, (uint8_t *)m + nl + 1, nl, vl,
							       NGHTTP2_NV_FLAG_NONE};
				memcpy(m + nl + 1, tr[i].value, vl + 1);
				m += nl + vl + 2;
			}
			st->n_trailers = n < 16 ? n : 16;
		}
	}
	st->eof = true;
	stream_resume(st);
	return 0;
}

static size_t h2_queued(const struct http_req *r)
{
	const struct h2_stream *st = r->transport;
	return st->out.bytes;
}

static void h2_pause_body(struct http_req *r, bool paused)
{
	struct h2_stream *st = r->transport;
	if (st->paused == paused)
		return;
	st->paused = paused;
	if (paused)
		return;
	/* Deliver what arrived meanwhile; the handler may pause again. */
	size_t off = 0;
	while (off < st->pending.len && !st->paused && !st->r.aborted) {
		size_t k = st->pending.len - off < 65536 ? st->pending.len - off : 65536;
		deliver_body(st, st->pending.p + off, k);
		off += k;
	}
	buf_consume(&st->pending, off);
	if (st->pending.len == 0 && !st->paused) {
		int32_t id = st->id;
		struct h2 *h = st->h;
		if (nghttp2_session_get_stream_remote_close(h->s, id))
			stream_body_end(st);
	}
	h2_schedule(st->h);
}

static const struct http_link *h2_link(const struct http_req *r)
{
	const struct h2_stream *st = r->transport;
	return st->h->link;
}

static void h2_abort(struct http_req *r)
{
	struct h2_stream *st = r->transport;

	nghttp2_submit_rst_stream(st->h->s, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
	h2_schedule(st->h);
}

static const struct http_transport_ops h2_ops = {
	.begin = h2_begin,
	.write = h2_write,
	.write_file = h2_write_file,
	.end = h2_end,
	.queued = h2_queued,
	.pause_body = h2_pause_body,
	.link = h2_link,
	.abort = h2_abort,
};

/* ---- connection-level ---- */

static void h2_flush(struct h2 *h)
{
	struct outq *out = h->link->out;
	if (h->flushing || h->closing)
		return;
	h->flushing = true;
	while (out->bytes < OUTQ_HIGH) {
		const uint8_t *p;
		ssize_t n = nghttp2_session_mem_send(h->s, &p);
		if (n < 0 || (n > 0 && outq_append(out, p, (size_t)n) < 0)) {
			h->closing = true;
			http_link_notify(h->link, HTTP_LINK_ABORT);
			break;
		}
		if (n == 0)
			break;
	}
	h->flushing = false;
	if (out->bytes > 0)
		http_link_notify(h->link, HTTP_LINK_WANT_WRITE);
	else if (!h->closing && !nghttp2_session_want_read(h->s) && !nghttp2_session_want_write(h->s)) {
		h->closing = true;
		http_link_notify(h->link, HTTP_LINK_CLOSE);
	}
	/* Streams whose queues drained get to produce more. */
	for (struct h2_stream *st = h->streams; st;) {
		struct h2_stream *next = st->next;
		if (st->want_writable) {
			st->want_writable = false;
			if (st->r.on_writable && !st->r.aborted && !st->r.resp_ended)
				st->r.on_writable(&st->r);
		}
		st = next;
	}
}

struct h2 *h2_new(struct http_link *l)
{
	nghttp2_session_callbacks *cbs;
	nghttp2_option *opt;
	struct h2 *h = calloc(1, sizeof(*h));
	if (!h)
		return NULL;
	h->link = l;
	if (nghttp2_session_callbacks_new(&cbs) != 0) {
		free(h);
		return NULL;
	}
	nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, cb_begin_headers);
	nghttp2_session_callbacks_set_on_header_callback(cbs, cb_header);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, cb_frame_recv);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, cb_data_chunk);
	nghttp2_session_callbacks_set_on_stream_close_callback(cbs, cb_stream_close);
	if (nghttp2_option_new(&opt) != 0) {
		nghttp2_session_callbacks_del(cbs);
		free(h);
		return NULL;
	}
	nghttp2_option_set_no_auto_window_update(opt, 1);
	int rc = nghttp2_session_server_new3(&h->s, cbs, h, opt, &h2mem);
	nghttp2_option_del(opt);
	nghttp2_session_callbacks_del(cbs);
	if (rc != 0) {
		free(h);
		return NULL;
	}
	nghttp2_settings_entry iv[] = {
		{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, h2_max_streams},
		{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, H2_STREAM_WINDOW},
	};
	nghttp2_submit_settings(h->s, NGHTTP2_FLAG_NONE, iv, 2);
	nghttp2_session_set_local_window_size(h->s, NGHTTP2_FLAG_NONE, 0, H2_CONN_WINDOW);
	return h;
}

struct h2 *h2_new_upgrade(struct http_link *l, const uint8_t *settings, size_t settings_len,
			  const struct http_req *r)
{
	struct h2 *h = h2_new(l);
	if (!h)
		return NULL;
	if (h2_upgrade_stream(h, settings, settings_len, r) < 0) {
		h2_free(h);
		return NULL;
	}
	return h;
}

static int h2_upgrade_stream(struct h2 *h, const uint8_t *settings, size_t settings_len,
			     const struct http_req *r)
{
	if (nghttp2_session_upgrade2(h->s, settings, settings_len, r->method == HTTP_M_HEAD, NULL) != 0)
		return -EPROTO;
	struct h2_stream *st = stream_new(h, 1);
	if (!st)
		return -ENOMEM;
	nghttp2_session_set_stream_user_data(h->s, 1, st);
	size_t off;
	mem_add(st, (const uint8_t *)r->method_name, strlen(r->method_name), &st->method_off);
	/* Rebuild the target (path + query) as :path would carry it. */
	size_t pl = strlen(r->path), ql = strlen(r->query);
	char *tmp = malloc(pl + ql + 2);
	if (!tmp)
		return -ENOMEM;
	memcpy(tmp, r->path, pl);
	if (ql) {
		tmp[pl] = '?';
		memcpy(tmp + pl + 1, r->query, ql);
	}
	mem_add(st, (const uint8_t *)tmp, pl + (ql ? ql + 1 : 0), &st->path_off);
	free(tmp);
	for (size_t i = 0; i < r->n_hdrs && st->n_fields < H2_MAX_HEADERS; i++) {
		const char *n = r->hdrs[i].name;
		if (!strcmp(n, "connection") || !strcmp(n, "upgrade") || !strcmp(n, "http2-settings"))
			continue;
		mem_add(st, (const uint8_t *)n, strlen(n), &off);
		st->name_off[st->n_fields] = (uint32_t)off;
		mem_add(st, (const uint8_t *)r->hdrs[i].value, strlen(r->hdrs[i].value), &off);
		st->value_off[st->n_fields++] = (uint32_t)off;
	}
	stream_dispatch(st);
	stream_body_end(st);
	return 0;
}

ssize_t h2_feed(struct h2 *h, const uint8_t *p, size_t len)
{
	ssize_t n = nghttp2_session_mem_recv(h->s, p, len);
	if (n < 0)
		return -EPROTO;
	h2_flush(h);
	return (ssize_t)len;
}

void h2_on_output_drained(struct h2 *h)
{
	h2_flush(h);
}

bool h2_idle(const struct h2 *h)
{
	return !h || h->n_streams == 0;
}

void h2_free(struct h2 *h)
{
	if (!h)
		return;
	while (h->streams) {
		struct h2_stream *st = h->streams;
		bool done = st->r.resp_ended && st->eof && st->out.bytes == 0;
		st->r.aborted = !done;
		if (st->dispatched && st->r.on_close)
			st->r.on_close(&st->r, done);
		stream_free(st);
	}
	nghttp2_session_del(h->s);
	free(h);
}
