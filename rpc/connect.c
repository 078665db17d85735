/* SPDX-License-Identifier: Apache-2.0 */
/*
 * connect.c - Connect, gRPC and gRPC-Web over struct http_req.
 *
 * The protocol is chosen from the request content type (docs/protocol.md, "Connect-RPC"). Bodies
 * are collected (unary) or split into 5-byte-prefixed envelopes (streams),
 * decompressed with zlib within rpc_max_message, decoded with protobuf-c
 * (binary) or pbjson (JSON), and handed to the method's start function.
 * Responses are encoded the same way. Every error leaves in the shape its
 * protocol demands: unary Connect errors as HTTP status + JSON body, stream
 * errors as HTTP 200 + end-stream envelope, gRPC errors as grpc-status.
 */
#include <errno.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>
#include <zlib.h>

#include "http/http.h"
#include "base/log.h"
#include "base/loop.h"
#include "base/loopmem.h"
#include "proto/pbjson.h"
#include "proto/pbwire.h"
#include "rpc/envelope.h"
#include "rpc/rpc.h"

size_t rpc_max_message = 16 << 20;

#define MAX_SERVICES 8
static const struct rpc_service *services[MAX_SERVICES];
static size_t service_name_len[MAX_SERVICES];
static size_t n_services;

enum rpc_proto { P_CONNECT_UNARY, P_CONNECT_STREAM, P_GRPC, P_GRPC_WEB };

struct rpc_call {
	struct http_req *r;
	const struct rpc_service *svc;
	const ProtobufCMethodDescriptor *md;
	const struct rpc_method_impl *impl;
	enum rpc_proto proto;
	bool json;
	char ctype[48];
	bool req_gzip;       /* request messages may be gzip-compressed */
	bool resp_gzip;      /* compress response messages */
	struct env_dec dec;  /* body bytes not yet decoded */
	unsigned n_msgs;     /* request messages seen */
	ProtobufCMessage *req_msg;
	int refs;
	bool started, finished, http_gone, resp_begun;
	ev_timer deadline;
	int64_t timeout_ms;
	const struct rpc_call_hooks *hooks;
	void *ud;
	/* Client-stream back-pressure (rpc_call_pause_input). */
	bool in_paused;      /* deliver no messages; transport body paused */
	bool end_pending;    /* the body ended while paused */
	ev_timer resume_w;   /* resumes delivery outside the caller's stack */
	char *deadline_msg;  /* what the client hears at its deadline, or NULL */
};

static const char *const code_names[] = {
	"ok", "canceled", "unknown", "invalid_argument", "deadline_exceeded", "not_found",
	"already_exists", "permission_denied", "resource_exhausted", "failed_precondition",
	"aborted", "out_of_range", "unimplemented", "internal", "unavailable", "data_loss",
	"unauthenticated",
};
static const int code_status[] = {200, 499, 500, 400, 504, 404, 409, 403, 429, 400, 409, 400, 501,
				  500, 503, 500, 401};

const char *rpc_code_name(enum rpc_code code)
{
	return (unsigned)code < sizeof(code_names) / sizeof(code_names[0]) ? code_names[code] : "unknown";
}

int rpc_code_http_status(enum rpc_code code)
{
	return (unsigned)code < sizeof(code_status) / sizeof(code_status[0]) ? code_status[code] : 500;
}

void rpc_register(const struct rpc_service *svc)
{
	if (n_services < MAX_SERVICES) {
		service_name_len[n_services] = strlen(svc->desc->name);
		services[n_services++] = svc;
	}
}

/* ---- call lifetime ---- */

/* Request messages are decoded on the loop, by protobuf-c or pbjson, into
 * base/loopmem (the loop's size classes): no allocator lock shared with
 * the workers, no page of musl's given back per request. */
static ProtobufCAllocator *msg_allocator(const struct rpc_call *c)
{
	return &loopmem_pb_allocator;
}

static void msg_free(const struct rpc_call *c, ProtobufCMessage *m)
{
	protobuf_c_message_free_unpacked(m, msg_allocator(c));
}

static void call_unref(struct rpc_call *c)
{
	if (--c->refs > 0)
		return;
	ev_timer_stop(envd_loop, &c->deadline);
	ev_timer_stop(envd_loop, &c->resume_w);
	if (c->req_msg)
		msg_free(c, c->req_msg);
	env_dec_free(&c->dec);
	free(c->deadline_msg);
	loopmem_free(c);
}

static void call_cancel(struct rpc_call *c, enum rpc_code why)
{
	if (c->finished)
		return;
	c->finished = true;
	if (c->started && c->hooks && c->hooks->on_cancel) {
		c->refs++;
		c->hooks->on_cancel(c, why);
		call_unref(c);
	}
}

/* ---- encoding helpers ---- */


/*
 * One encode buffer for the whole daemon (everything runs on the loop):
 * a message is encoded at offset ENV_HDR, its envelope header written in
 * front, and the lot queued in one write. Reusing it avoids an allocation,
 * and with musl the page faults of a fresh mapping, per message; a buffer
 * grown by an unusually large message is released after use.
 */
_Static_assert(RPC_ENC_HDR == ENV_HDR, "rpc.h and envelope.h agree on the envelope header");
#define ENCBUF_KEEP (1u << 20)
static char *encbuf;
static size_t enccap;

static void encbuf_trim(void)
{
	if (enccap > ENCBUF_KEEP) {
		free(encbuf);
		encbuf = NULL;
		enccap = 0;
	}
}

/*
 * A large stream message is not copied into the output queue: the encode
 * buffer itself is queued (http_resp_write_owned) and the next message
 * takes another one. Buffers come back when their bytes are written and
 * are kept for reuse, up to ENCPOOL_BYTES in all.
 */
#define ENC_OWNED_MIN (16 * 1024)
#define ENCPOOL_N 16
#define ENCPOOL_BYTES (512 * 1024)
static char *encpool[ENCPOOL_N];
static size_t encpool_n, encpool_bytes;

static void encbuf_release(void *p)
{
	size_t cap = malloc_usable_size(p);
	if (encpool_n < ENCPOOL_N && cap <= ENCBUF_KEEP && encpool_bytes + cap <= ENCPOOL_BYTES) {
		encpool[encpool_n++] = p;
		encpool_bytes += cap;
		return;
	}
	free(p);
}

/* Give the encode buffer away; the next encode takes a pooled one. */
static char *encbuf_take(void)
{
	char *b = encbuf;
	if (encpool_n > 0) {
		encbuf = encpool[--encpool_n];
		enccap = malloc_usable_size(encbuf);
		encpool_bytes -= enccap;
	} else {
		encbuf = NULL;
		enccap = 0;
	}
	return b;
}

/*
 * protobuf-c's pack() writes each sub-message after a one-byte length
 * guess and moves it when the length needs more bytes: for a 64 KiB
 * DataEvent nested three deep that is three memmoves of the payload.
 * pack_to_buffer() sizes every sub-message first and copies bytes once.
 */
struct encsink {
	ProtobufCBuffer base;
	uint8_t *p;
	size_t len;
};

static void encsink_append(ProtobufCBuffer *b, size_t n, const uint8_t *data)
{
	struct encsink *s = (struct encsink *)b;
	memcpy(s->p + s->len, data, n);
	s->len += n;
}

/* Messages up to this size are packed in one pass (see encode_msg). */
#define ENC_PACK_DIRECT 4096

/* Serialize msg with the call's codec into encbuf + ENV_HDR. */
static int encode_msg(struct rpc_call *c, const ProtobufCMessage *msg, uint8_t **out, size_t *len)
{
	if (c->json) {
		if (pbjson_encode_into(msg, &encbuf, &enccap, ENV_HDR, len) < 0)
			return -ENOMEM;
	} else {
		size_t n = protobuf_c_message_get_packed_size(msg);
		if (n + ENV_HDR > enccap) {
			char *b = realloc(encbuf, n + ENV_HDR);
			if (!b)
				return -ENOMEM;
			encbuf = b;
			enccap = n + ENV_HDR;
		}
		if (n <= ENC_PACK_DIRECT) {
			/* Small (unary replies): pack() guesses each sub-message's
			 * length prefix right and moves nothing; pack_to_buffer()
			 * would size every sub-message twice. */
			*len = protobuf_c_message_pack(msg, (uint8_t *)encbuf + ENV_HDR);
		} else {
			struct encsink sink = {{encsink_append}, (uint8_t *)encbuf + ENV_HDR, 0};
			protobuf_c_message_pack_to_buffer(msg, &sink.base);
			*len = sink.len;
		}
	}
	*out = (uint8_t *)encbuf + ENV_HDR;
	/* -max-message bounds what we receive; our own messages only need
	 * to fit an envelope's 32-bit length. */
	if (*len > RPC_SEND_MAX) {
		encbuf_trim();
		return -EMSGSIZE;
	}
	return 0;
}

static char *error_json(enum rpc_code code, const char *msg, bool wrap)
{
	json_t *e = json_object();
	json_object_set_new(e, "code", json_string(rpc_code_name(code)));
	if (msg && *msg)
		json_object_set_new(e, "message", json_stringn_nocheck(msg, strlen(msg)));
	if (wrap) {
		json_t *o = json_object();
		json_object_set_new(o, "error", e);
		e = o;
	}
	char *s = json_dumps(e, JSON_COMPACT);
	json_decref(e);
	return s;
}

static void grpc_percent_encode(const char *in, char *out, size_t outlen)
{
	size_t k = 0;
	for (const unsigned char *p = (const unsigned char *)in; *p && k + 4 < outlen; p++) {
		if (*p < 0x20 || *p > 0x7e || *p == '%')
			k += (size_t)snprintf(out + k, outlen - k, "%%%02X", *p);
		else
			out[k++] = (char)*p;
	}
	out[k] = '\0';
}

static void begin_stream_response(struct rpc_call *c)
{
	if (c->resp_begun)
		return;
	c->resp_begun = true;
	struct http_hdr h[3];
	size_t n = 0;
	h[n++] = (struct http_hdr){"Content-Type", c->ctype};
	if (c->resp_gzip)
		h[n++] = (struct http_hdr){c->proto == P_CONNECT_STREAM ? "Connect-Content-Encoding" : "Grpc-Encoding",
					   "gzip"};
	http_resp_begin(c->r, 200, h, n, -1);
}

static int write_envelope(struct rpc_call *c, uint8_t flags, const uint8_t *p, size_t n)
{
	uint8_t hdr[5] = {flags, (uint8_t)(n >> 24), (uint8_t)(n >> 16), (uint8_t)(n >> 8), (uint8_t)n};
	if (n <= 8192) {
		/* One write: one HTTP/1.1 chunk / one DATA frame per message. */
		uint8_t one[5 + 8192];
		memcpy(one, hdr, 5);
		if (n)
			memcpy(one + 5, p, n);
		return http_resp_write(c->r, one, 5 + n);
	}
	int rc = http_resp_write(c->r, hdr, 5);
	if (rc == 0 && n)
		rc = http_resp_write(c->r, p, n);
	return rc;
}

/* End the response with status `code` in the protocol's own shape. */
static void send_end(struct rpc_call *c, enum rpc_code code, const char *msg)
{
	struct http_req *r = c->r;

	switch (c->proto) {
	case P_CONNECT_UNARY: {
		if (c->resp_begun) {
			/* A reply sent in pieces: its status is out. */
			http_resp_abort(r);
			break;
		}
		char *body = error_json(code, msg, false);
		http_respond(r, rpc_code_http_status(code), "application/json", body, body ? strlen(body) : 0,
			     NULL, 0);
		free(body);
		break;
	}
	case P_CONNECT_STREAM: {
		begin_stream_response(c);
		char *body = code == RPC_OK ? strdup("{}") : error_json(code, msg, true);
		size_t n = body ? strlen(body) : 0;
		uint8_t flags = 0x02;
		uint8_t *z = NULL;
		size_t zn = 0;
		if (c->resp_gzip && body && env_gzip((uint8_t *)body, n, &z, &zn) == 0)
			flags |= 0x01;
		write_envelope(c, flags, z ? z : (uint8_t *)body, z ? zn : n);
		free(z);
		free(body);
		http_resp_end(r, NULL, 0);
		break;
	}
	case P_GRPC:
	case P_GRPC_WEB: {
		char st[12], gm[1024];
		snprintf(st, sizeof(st), "%d", (int)code);
		grpc_percent_encode(msg ? msg : "", gm, sizeof(gm));
		struct http_hdr tr[2] = {{"grpc-status", st}, {"grpc-message", gm}};
		size_t ntr = code == RPC_OK || !*gm ? 1 : 2;
		if (!c->resp_begun) {
			/* Trailers-only response. */
			struct http_hdr h[3] = {{"Content-Type", c->ctype}, tr[0], tr[1]};
			c->resp_begun = true;
			http_resp_begin(r, 200, h, 1 + ntr, c->proto == P_GRPC ? 0 : -1);
			if (c->proto == P_GRPC_WEB)
				http_resp_end(r, NULL, 0);
			else
				http_resp_end(r, NULL, 0);
			break;
		}
		if (c->proto == P_GRPC) {
			http_resp_end(r, tr, ntr);
		} else {
			char blk[1200];
			int k = snprintf(blk, sizeof(blk), "grpc-status: %s\r\n", st);
			if (ntr == 2)
				k += snprintf(blk + k, sizeof(blk) - (size_t)k, "grpc-message: %s\r\n", gm);
			write_envelope(c, 0x80, (uint8_t *)blk, (size_t)k);
			http_resp_end(r, NULL, 0);
		}
		break;
	}
	}
}

/* ---- handler API ---- */

void rpc_call_set_hooks(struct rpc_call *c, const struct rpc_call_hooks *hooks, void *ud)
{
	c->hooks = hooks;
	c->ud = ud;
}

void *rpc_call_ud(const struct rpc_call *c) { return c->ud; }

const char *rpc_call_header(const struct rpc_call *c, const char *lname)
{
	return c->http_gone ? NULL : http_req_header(c->r, lname);
}

struct http_req *rpc_call_http(const struct rpc_call *c) { return c->http_gone ? NULL : c->r; }

const char *rpc_call_method(const struct rpc_call *c) { return c->md->name; }

int64_t rpc_call_timeout_ms(const struct rpc_call *c) { return c->timeout_ms; }

unsigned rpc_call_keepalive_s(const struct rpc_call *c)
{
	const char *v = rpc_call_header(c, "keepalive-ping-interval");
	if (!v || !*v)
		return 90;
	char *end;
	long long s = strtoll(v, &end, 10);
	/* The reference panics on <= 0; we treat it as absent (docs/protocol.md,
	 * "Where we differ from the reference"). */
	if (*end || s <= 0)
		return 90;
	return s > 86400 ? 86400 : (unsigned)s;
}

int rpc_send(struct rpc_call *c, const ProtobufCMessage *msg)
{
	uint8_t *b, *z = NULL;
	size_t n, zn = 0;
	int rc;

	if (c->finished || c->http_gone)
		return -EPIPE;
	if ((rc = encode_msg(c, msg, &b, &n)) < 0)
		return rc;
	begin_stream_response(c);
	if (c->resp_gzip && n >= 1024 && env_gzip(b, n, &z, &zn) == 0) {
		rc = write_envelope(c, 0x01, z, zn);
		free(z);
	} else {
		/* The header goes in front of the encoded bytes: one write. */
		uint8_t *h = b - ENV_HDR;
		h[0] = 0;
		h[1] = (uint8_t)(n >> 24);
		h[2] = (uint8_t)(n >> 16);
		h[3] = (uint8_t)(n >> 8);
		h[4] = (uint8_t)n;
		if (n + ENV_HDR >= ENC_OWNED_MIN && (char *)h == encbuf)
			rc = http_resp_write_owned(c->r, h, n + ENV_HDR, encbuf_release, encbuf_take());
		else
			rc = http_resp_write(c->r, h, n + ENV_HDR);
	}
	encbuf_trim();
	return rc;
}

size_t rpc_call_queued(const struct rpc_call *c)
{
	return c->http_gone ? 0 : http_resp_queued(c->r);
}

void rpc_reply(struct rpc_call *c, const ProtobufCMessage *msg)
{
	uint8_t *b;
	size_t n;

	if (c->finished)
		return;
	if (c->proto != P_CONNECT_UNARY) {
		if (rpc_send(c, msg) == -EMSGSIZE) {
			rpc_fail(c, RPC_RESOURCE_EXHAUSTED, "message larger than %llu bytes",
				 (unsigned long long)RPC_SEND_MAX);
			return;
		}
		rpc_finish(c);
		return;
	}
	int rc = encode_msg(c, msg, &b, &n);
	if (rc < 0) {
		rpc_fail(c, rc == -EMSGSIZE ? RPC_RESOURCE_EXHAUSTED : RPC_INTERNAL, "cannot encode response");
		return;
	}
	c->finished = true;
	c->refs++;
	uint8_t *z = NULL;
	size_t zn = 0;
	struct http_hdr h[1] = {{"Content-Encoding", "gzip"}};
	if (c->resp_gzip && env_gzip(b, n, &z, &zn) == 0)
		http_respond(c->r, 200, c->ctype, z, zn, h, 1);
	else
		http_respond(c->r, 200, c->ctype, b, n, NULL, 0);
	free(z);
	encbuf_trim();
	call_unref(c);
}

void rpc_finish(struct rpc_call *c)
{
	if (c->finished)
		return;
	c->finished = true;
	c->refs++;
	if (!c->http_gone)
		send_end(c, RPC_OK, NULL);
	call_unref(c);
}

void rpc_failv(struct rpc_call *c, enum rpc_code code, const char *fmt, va_list ap)
{
	char msg[1024];
	if (c->finished)
		return;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	c->finished = true;
	c->refs++;
	if (!c->http_gone)
		send_end(c, code, msg);
	call_unref(c);
}

void rpc_fail(struct rpc_call *c, enum rpc_code code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	rpc_failv(c, code, fmt, ap);
	va_end(ap);
}

void rpc_call_set_deadline_message(struct rpc_call *c, const char *fmt, ...)
{
	va_list ap;
	char *m = NULL;

	if (fmt) {
		va_start(ap, fmt);
		if (vasprintf(&m, fmt, ap) < 0)
			m = NULL;
		va_end(ap);
	}
	free(c->deadline_msg);
	c->deadline_msg = m;
}

/* ---- replies encoded off the loop ---- */

void rpc_call_codec(const struct rpc_call *c, struct rpc_codec *out)
{
	out->json = c->json;
	out->gzip = c->resp_gzip;
}

void rpc_encoded_free(struct rpc_encoded *e)
{
	if (!e->borrowed)
		free(e->mem);
	e->mem = NULL;
	e->len = 0;
	e->borrowed = false;
}

int rpc_encode_buf(const struct rpc_codec *codec, const ProtobufCMessage *msg, void *buf, size_t cap,
		   struct rpc_encoded *out)
{
	if (codec->json && !codec->gzip && cap > ENV_HDR) {
		size_t n;

		/* Written in place; a reply that does not fit is made again
		 * in a buffer of its own. */
		if (pbjson_encode_to(msg, (char *)buf + ENV_HDR, cap - ENV_HDR, &n) == 0) {
			out->mem = buf;
			out->len = n;
			out->gzipped = false;
			out->borrowed = true;
			return 0;
		}
	}
	if (!codec->json && !codec->gzip) {
		size_t n = protobuf_c_message_get_packed_size(msg);

		if (n + ENV_HDR <= cap) {
			struct encsink sink = {{encsink_append}, (uint8_t *)buf + ENV_HDR, 0};

			protobuf_c_message_pack_to_buffer(msg, &sink.base);
			out->mem = buf;
			out->len = sink.len;
			out->gzipped = false;
			out->borrowed = true;
			return 0;
		}
	}
	return rpc_encode(codec, msg, out);
}

int rpc_encode(const struct rpc_codec *codec, const ProtobufCMessage *msg, struct rpc_encoded *out)
{
	char *b = NULL;
	size_t cap = 0, n;

	out->mem = NULL;
	out->len = 0;
	out->gzipped = false;
	out->borrowed = false;
	if (codec->json) {
		if (pbjson_encode_into(msg, &b, &cap, ENV_HDR, &n) < 0) {
			free(b);
			return -ENOMEM;
		}
	} else {
		struct encsink sink;

		n = protobuf_c_message_get_packed_size(msg);
		b = malloc(n + ENV_HDR);
		if (!b)
			return -ENOMEM;
		sink = (struct encsink){{encsink_append}, (uint8_t *)b + ENV_HDR, 0};
		protobuf_c_message_pack_to_buffer(msg, &sink.base);
		n = sink.len;
	}
	if (codec->gzip) {
		uint8_t *z = NULL;
		size_t zn = 0;

		if (env_gzip((uint8_t *)b + ENV_HDR, n, &z, &zn) == 0) {
			char *zb = malloc(zn + ENV_HDR);
			if (zb) {
				memcpy(zb + ENV_HDR, z, zn);
				free(b);
				b = zb;
				n = zn;
				out->gzipped = true;
			}
			free(z);
		}
	}
	if (n > RPC_SEND_MAX) {
		free(b);
		return -EMSGSIZE;
	}
	out->mem = b;
	out->len = n;
	return 0;
}

/* rpc_reply_encoded of a borrowed buffer (h: ENV_HDR bytes of room, then
 * n bytes): the bytes are copied into the response. */
static void reply_copied(struct rpc_call *c, uint8_t *h, size_t n, bool gzipped)
{
	if (c->proto != P_CONNECT_UNARY) {
		if (!c->http_gone) {
			begin_stream_response(c);
			h[0] = gzipped ? 0x01 : 0;
			h[1] = (uint8_t)(n >> 24);
			h[2] = (uint8_t)(n >> 16);
			h[3] = (uint8_t)(n >> 8);
			h[4] = (uint8_t)n;
			http_resp_write(c->r, h, n + ENV_HDR);
		}
		rpc_finish(c);
		return;
	}
	c->finished = true;
	c->refs++;
	struct http_hdr hd[2] = {{"Content-Type", c->ctype}, {"Content-Encoding", "gzip"}};
	if (!c->http_gone && http_resp_begin(c->r, 200, hd, gzipped ? 2 : 1, (int64_t)n) == 0) {
		http_resp_write(c->r, h + ENV_HDR, n);
		http_resp_end(c->r, NULL, 0);
	}
	call_unref(c);
}

int rpc_frame_append(const struct rpc_codec *codec, const ProtobufCMessage *msg, uint8_t **buf, size_t *len,
		     size_t *cap)
{
	struct rpc_encoded e;
	size_t need;
	int rc = rpc_encode(codec, msg, &e);

	if (rc < 0)
		return rc;
	need = *len + ENV_HDR + e.len;
	if (need > *cap) {
		size_t ncap = *cap ? *cap : 4096;
		while (ncap < need)
			ncap *= 2;
		uint8_t *nb = realloc(*buf, ncap);
		if (!nb) {
			rpc_encoded_free(&e);
			return -ENOMEM;
		}
		*buf = nb;
		*cap = ncap;
	}
	uint8_t *h = *buf + *len;
	h[0] = e.gzipped ? 0x01 : 0;
	h[1] = (uint8_t)(e.len >> 24);
	h[2] = (uint8_t)(e.len >> 16);
	h[3] = (uint8_t)(e.len >> 8);
	h[4] = (uint8_t)e.len;
	memcpy(h + ENV_HDR, (uint8_t *)e.mem + ENV_HDR, e.len);
	*len = need;
	rpc_encoded_free(&e);
	return 0;
}

int rpc_send_framed(struct rpc_call *c, void *mem, size_t len)
{
	if (c->finished || c->http_gone) {
		free(mem);
		return -EPIPE;
	}
	if (!len) {
		free(mem);
		return 0;
	}
	begin_stream_response(c);
	return http_resp_write_owned(c->r, mem, len, free, mem);
}

void rpc_reply_encoded(struct rpc_call *c, struct rpc_encoded *e)
{
	uint8_t *h = (uint8_t *)e->mem;
	size_t n = e->len;
	bool borrowed = e->borrowed;

	e->mem = NULL;
	e->len = 0;
	e->borrowed = false;
	if (borrowed) {
		/* The caller's buffer: sent by copy, the caller keeps it. */
		if (c->finished)
			return;
		reply_copied(c, h, n, e->gzipped);
		return;
	}
	if (c->finished) {
		free(h);
		return;
	}
	if (!h) {
		rpc_fail(c, RPC_INTERNAL, "cannot encode response");
		return;
	}
	if (c->proto != P_CONNECT_UNARY) {
		if (!c->http_gone) {
			begin_stream_response(c);
			h[0] = e->gzipped ? 0x01 : 0;
			h[1] = (uint8_t)(n >> 24);
			h[2] = (uint8_t)(n >> 16);
			h[3] = (uint8_t)(n >> 8);
			h[4] = (uint8_t)n;
			http_resp_write_owned(c->r, h, n + ENV_HDR, free, h);
		} else {
			free(h);
		}
		rpc_finish(c);
		return;
	}
	c->finished = true;
	c->refs++;
	struct http_hdr hd[2] = {{"Content-Type", c->ctype}, {"Content-Encoding", "gzip"}};
	if (!c->http_gone && http_resp_begin(c->r, 200, hd, e->gzipped ? 2 : 1, (int64_t)n) == 0) {
		http_resp_write_owned(c->r, h + ENV_HDR, n, free, h);
		http_resp_end(c->r, NULL, 0);
	} else {
		free(h);
	}
	call_unref(c);
}

/* ---- replies in pieces ---- */

void rpc_list_init(struct rpc_list *l, const struct rpc_codec *codec, const ProtobufCFieldDescriptor *field)
{
	*l = (struct rpc_list){ .codec = *codec, .field = field };
}

size_t rpc_list_pending(const struct rpc_list *l)
{
	return l->len;
}

void rpc_list_free(struct rpc_list *l)
{
	free(l->buf);
	l->buf = NULL;
	l->len = l->cap = 0;
}

/* Room for n more bytes after the header and len. */
static int list_room(struct rpc_list *l, size_t n)
{
	size_t want = ENV_HDR + l->len + n, nc;
	char *nb;

	if (want <= l->cap)
		return 0;
	if (n > RPC_SEND_MAX)
		return -EMSGSIZE;
	/* From 1 KiB: a short listing's block is of a size the allocator
	   keeps at hand. */
	nc = l->cap ? l->cap : 1024;
	while (nc < want)
		nc *= 2;
	nb = realloc(l->buf, nc);
	if (!nb)
		return -ENOMEM;
	l->buf = nb;
	l->cap = nc;
	return 0;
}

static size_t put_varint(uint8_t *w, uint64_t v)
{
	size_t n = 0;

	while (v >= 0x80) {
		w[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	w[n++] = (uint8_t)v;
	return n;
}

int rpc_list_add(struct rpc_list *l, const ProtobufCMessage *elem)
{
	int rc;

	if (l->codec.json) {
		char name[256];
		size_t nl = 0, n;

		if (l->count == 0) {
			name[0] = '{';
			nl = pbjson_field_name(l->field, name + 1, sizeof(name) - 2);
			if (!nl)
				return -ENOMEM;
			name[nl + 1] = '[';
			nl += 2;
		} else {
			name[0] = ',';
			nl = 1;
		}
		if ((rc = list_room(l, nl)) < 0)
			return rc;
		memcpy(l->buf + ENV_HDR + l->len, name, nl);
		l->len += nl;
		/* The element is written right after, growing the buffer as it
		 * must: the encoder's own buffer is this one. */
		if (pbjson_encode_into(elem, &l->buf, &l->cap, ENV_HDR + l->len, &n) < 0) {
			l->len -= nl;
			return -ENOMEM;
		}
		l->len += n;
	} else {
		uint8_t hdr[20];
		size_t n = protobuf_c_message_get_packed_size(elem);
		size_t hl = put_varint(hdr, ((uint64_t)l->field->id << 3) | 2);

		hl += put_varint(hdr + hl, n);
		if ((rc = list_room(l, hl + n)) < 0)
			return rc;
		memcpy(l->buf + ENV_HDR + l->len, hdr, hl);
		l->len += hl;
		struct encsink sink = {{encsink_append}, (uint8_t *)l->buf + ENV_HDR + l->len, 0};
		protobuf_c_message_pack_to_buffer(elem, &sink.base);
		l->len += sink.len;
	}
	l->count++;
	return 0;
}

int rpc_list_take(struct rpc_list *l, bool last, struct rpc_encoded *out)
{
	int rc;

	out->mem = NULL;
	out->len = 0;
	out->gzipped = false;
	out->borrowed = false;
	if (last && l->codec.json) {
		const char *tail = l->count ? "]}" : "{}";

		if ((rc = list_room(l, 2)) < 0)
			return rc;
		memcpy(l->buf + ENV_HDR + l->len, tail, 2);
		l->len += 2;
	}
	if (!l->buf && (rc = list_room(l, 0)) < 0)
		return rc;
	if (last && !l->taken && l->codec.gzip) {
		uint8_t *z = NULL;
		size_t zn = 0;

		if (env_gzip((uint8_t *)l->buf + ENV_HDR, l->len, &z, &zn) == 0) {
			char *zb = malloc(zn + ENV_HDR);

			if (zb) {
				memcpy(zb + ENV_HDR, z, zn);
				free(l->buf);
				l->buf = zb;
				l->len = zn;
				out->gzipped = true;
			}
			free(z);
		}
	}
	out->mem = l->buf;
	out->len = l->len;
	l->buf = NULL;
	l->len = l->cap = 0;
	l->taken = true;
	return 0;
}

bool rpc_reply_streamable(const struct rpc_call *c)
{
	return c->proto == P_CONNECT_UNARY && !c->resp_gzip;
}

int rpc_reply_piece(struct rpc_call *c, struct rpc_encoded *e)
{
	uint8_t *h = e->mem;
	size_t n = e->len;

	e->mem = NULL;
	e->len = 0;
	if (c->finished || c->http_gone || c->proto != P_CONNECT_UNARY) {
		free(h);
		return -EPIPE;
	}
	if (!c->resp_begun) {
		struct http_hdr hd[1] = {{"Content-Type", c->ctype}};

		c->resp_begun = true;
		if (http_resp_begin(c->r, 200, hd, 1, -1) < 0) {
			free(h);
			return -EPIPE;
		}
	}
	if (!n) {
		free(h);
		return 0;
	}
	return http_resp_write_owned(c->r, h + ENV_HDR, n, free, h);
}

void rpc_reply_pieces_end(struct rpc_call *c)
{
	if (c->finished)
		return;
	c->finished = true;
	c->refs++;
	if (!c->http_gone) {
		if (!c->resp_begun) {
			struct http_hdr hd[1] = {{"Content-Type", c->ctype}};

			c->resp_begun = true;
			http_resp_begin(c->r, 200, hd, 1, 0);
		}
		http_resp_end(c->r, NULL, 0);
	}
	call_unref(c);
}

/* ---- request side ---- */

static void deadline_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct rpc_call *c = w->data;
	if (c->finished)
		return;
	c->refs++;
	/* The handler hears first, so it stops producing before the end. */
	call_cancel(c, RPC_DEADLINE_EXCEEDED);
	c->finished = true;
	if (!c->http_gone)
		send_end(c, RPC_DEADLINE_EXCEEDED, c->deadline_msg ? c->deadline_msg : "context deadline exceeded");
	call_unref(c);
}

static void start_handler(struct rpc_call *c, ProtobufCMessage *msg)
{
	c->started = true;
	c->req_msg = msg;
	c->refs++;
	if (!c->impl || !c->impl->start)
		rpc_fail(c, RPC_UNIMPLEMENTED, "%s.%s is not implemented", c->svc->desc->name, c->md->name);
	else
		c->impl->start(c, msg);
	call_unref(c);
}

/* Decode one message payload (already decompressed). */
static ProtobufCMessage *decode_msg(struct rpc_call *c, const uint8_t *p, size_t n, char *err, size_t errlen)
{
	if (c->json) {
		char detail[400];
		if (n == 0) {
			snprintf(err, errlen, "unmarshal message: zero-length payload is not a valid JSON object");
			return NULL;
		}
		ProtobufCMessage *m = pbjson_decode_with(c->md->input, (const char *)p, n, msg_allocator(c),
							 detail, sizeof(detail));
		if (!m)
			snprintf(err, errlen, "unmarshal message: %s", detail);
		return m;
	}
	char detail[200];
	if (pbwire_check_strings(c->md->input, p, n, detail, sizeof(detail)) < 0) {
		snprintf(err, errlen, "unmarshal message: %s", detail);
		return NULL;
	}
	ProtobufCMessage *m = protobuf_c_message_unpack(c->md->input, msg_allocator(c), n, p);
	if (!m)
		snprintf(err, errlen, "unmarshal message: proto: cannot parse invalid wire-format data");
	return m;
}

/* One request message, decoded and handed on; non-zero stops the drain. */
static int on_envelope(void *ud, uint8_t flags, const uint8_t *p, size_t n)
{
	struct rpc_call *c = ud;
	char err[512];

	if (c->finished)
		return 1;
	c->n_msgs++;
	bool streaming_in = c->impl && (c->impl->kind == RPC_CLIENT_STREAM || c->impl->kind == RPC_BIDI_STREAM);
	if (!streaming_in && c->n_msgs > 1) {
		rpc_fail(c, RPC_UNIMPLEMENTED, "unary request has multiple messages");
		return 1;
	}
	ProtobufCMessage *m = decode_msg(c, p, n, err, sizeof(err));
	if (!m) {
		rpc_fail(c, RPC_INVALID_ARGUMENT, "%s", err);
		return 1;
	}
	if (!streaming_in) {
		if (c->req_msg)
			msg_free(c, c->req_msg);
		c->req_msg = m;
		return 0;
	}
	if (!c->hooks || !c->hooks->on_message) {
		msg_free(c, m);
		return 0;
	}
	c->refs++;
	c->hooks->on_message(c, m);
	msg_free(c, m);
	/* The handler may have paused input: stop after this message. */
	bool stop = c->finished || c->in_paused;
	call_unref(c);
	return stop ? 1 : 0;
}

/* Fail the call for a decoder error (envelope.h's codes). */
static void fail_decode(struct rpc_call *c, int rc)
{
	switch (rc) {
	case -EMSGSIZE:
		if (c->dec.last_len)
			rpc_fail(c, RPC_RESOURCE_EXHAUSTED, "message size %zu is larger than configured max %zu",
				 c->dec.last_len, rpc_max_message);
		else
			rpc_fail(c, RPC_RESOURCE_EXHAUSTED, "decompressed message larger than configured max");
		break;
	case -EPROTO:
		rpc_fail(c, RPC_INTERNAL, "protocol error: received compressed message without compression negotiated");
		break;
	case -ENOMEM:
		rpc_fail(c, RPC_RESOURCE_EXHAUSTED, "out of memory");
		break;
	default:
		rpc_fail(c, RPC_INVALID_ARGUMENT, "decompress: gzip: invalid data");
		break;
	}
}

/* Handle whole envelopes buffered; false when the call ended. */
static bool drain_envelopes(struct rpc_call *c, bool at_end)
{
	/* Paused: the next envelope stays buffered (the decoder consumes
	 * an envelope before handing it on, so it must not even be asked). */
	if (c->in_paused)
		return !c->finished;
	int rc = env_dec_drain(&c->dec, on_envelope, c);
	if (rc < 0) {
		fail_decode(c, rc);
		return false;
	}
	if (at_end && env_dec_pending(&c->dec) > 0 && !c->finished && !c->in_paused) {
		rpc_fail(c, RPC_INVALID_ARGUMENT, "protocol error: incomplete envelope");
		return false;
	}
	return !c->finished;
}

static void on_body(struct http_req *r, const uint8_t *p, size_t n)
{
	struct rpc_call *c = r->ud;
	if (c->finished)
		return;
	int rc = env_dec_push(&c->dec, p, n);
	if (rc < 0) {
		if (rc == -EMSGSIZE)
			rpc_fail(c, RPC_RESOURCE_EXHAUSTED, "request larger than configured max %zu bytes", rpc_max_message);
		else
			rpc_fail(c, RPC_RESOURCE_EXHAUSTED, "out of memory");
		return;
	}
	if (c->proto != P_CONNECT_UNARY && c->impl &&
	    (c->impl->kind == RPC_CLIENT_STREAM || c->impl->kind == RPC_BIDI_STREAM) && c->started) {
		c->refs++;
		drain_envelopes(c, false);
		call_unref(c);
	}
}

static void on_body_end(struct http_req *r)
{
	struct rpc_call *c = r->ud;
	char err[512];

	if (c->finished)
		return;
	c->refs++;
	if (c->proto == P_CONNECT_UNARY) {
		/* A unary Connect body is one bare message, no envelope. */
		const uint8_t *p = env_dec_data(&c->dec);
		size_t n = env_dec_pending(&c->dec);
		uint8_t *plain = NULL;
		if (c->req_gzip && n > 0) {
			int rc = env_gunzip(p, n, rpc_max_message, &plain, &n);
			if (rc < 0) {
				c->dec.last_len = 0;
				fail_decode(c, rc);
				goto out;
			}
			p = plain;
		}
		ProtobufCMessage *m = decode_msg(c, p ? p : (const uint8_t *)"", n, err, sizeof(err));
		free(plain);
		if (!m) {
			rpc_fail(c, RPC_INVALID_ARGUMENT, "%s", err);
			goto out;
		}
		start_handler(c, m);
		goto out;
	}
	bool streaming_in = c->impl && (c->impl->kind == RPC_CLIENT_STREAM || c->impl->kind == RPC_BIDI_STREAM);
	/* Paused: messages are still buffered; the end waits for them. */
	if (streaming_in && c->in_paused) {
		c->end_pending = true;
		goto out;
	}
	if (!drain_envelopes(c, true))
		goto out;
	if (streaming_in && c->in_paused) {
		c->end_pending = true;
		goto out;
	}
	if (streaming_in) {
		if (c->hooks && c->hooks->on_input_end)
			c->hooks->on_input_end(c);
		goto out;
	}
	if (c->n_msgs == 0) {
		rpc_fail(c, RPC_UNIMPLEMENTED, "unary request has zero messages");
		goto out;
	}
	ProtobufCMessage *m = c->req_msg;
	c->req_msg = NULL;
	start_handler(c, m);
out:
	call_unref(c);
}

/*
 * Client-stream back-pressure. Pausing stops message delivery at once
 * (envelopes already buffered stay buffered) and pauses the request body
 * in the transport, so the client's flow control (TCP window, HTTP/2
 * stream window) holds the rest. Resuming is deferred to a zero timer:
 * the handler usually resumes from deep inside its own callbacks, and
 * delivering the next message there would re-enter it.
 */
static void resume_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct rpc_call *c = w->data;

	if (c->finished || c->in_paused)
		return;
	c->refs++;
	if (!c->http_gone && c->r)
		http_req_pause_body(c->r, false); /* h2 may deliver right here */
	if (!c->finished && !c->in_paused && drain_envelopes(c, c->end_pending) && c->end_pending &&
	    !c->in_paused) {
		c->end_pending = false;
		if (c->hooks && c->hooks->on_input_end)
			c->hooks->on_input_end(c);
	}
	call_unref(c);
}

void rpc_call_pause_input(struct rpc_call *c, bool paused)
{
	if (c->finished || c->in_paused == paused)
		return;
	c->in_paused = paused;
	if (paused) {
		ev_timer_stop(envd_loop, &c->resume_w);
		if (!c->http_gone && c->r)
			http_req_pause_body(c->r, true);
		return;
	}
	ev_timer_set(&c->resume_w, 0., 0.);
	ev_timer_start(envd_loop, &c->resume_w);
}

static void on_writable(struct http_req *r)
{
	struct rpc_call *c = r->ud;
	if (!c->finished && c->started && c->hooks && c->hooks->on_writable) {
		c->refs++;
		c->hooks->on_writable(c);
		call_unref(c);
	}
}

static void on_close(struct http_req *r, bool completed)
{
	struct rpc_call *c = r->ud;
	c->http_gone = true;
	r->ud = NULL;
	call_cancel(c, RPC_CANCELED);
	call_unref(c);
}

/* ---- dispatch ---- */

static const char accept_post[] =
	"application/grpc, application/grpc+json, application/grpc+json; charset=utf-8, application/grpc+proto, "
	"application/grpc-web, application/grpc-web+json, application/grpc-web+json; charset=utf-8, "
	"application/grpc-web+proto, application/json, application/json; charset=utf-8, application/proto, "
	"application/connect+json, application/connect+json; charset=utf-8, application/connect+proto";

/* Map the content type to a protocol and codec; false if unsupported. */
static bool pick_protocol(struct rpc_call *c, const char *ct)
{
	char t[64];
	size_t i = 0;
	if (!ct)
		return false;
	for (; ct[i] && i < sizeof(t) - 1; i++)
		t[i] = (char)((ct[i] >= 'A' && ct[i] <= 'Z') ? ct[i] + 32 : ct[i]);
	t[i] = '\0';
	/* Only the canonical "; charset=utf-8" parameter is accepted. */
	char *semi = strchr(t, ';');
	bool charset = false;
	if (semi) {
		const char *par = semi + 1;
		while (*par == ' ')
			par++;
		if (strcmp(par, "charset=utf-8") != 0)
			return false;
		*semi = '\0';
		charset = true;
	}
	static const struct { const char *t; enum rpc_proto p; bool json; } tab[] = {
		{"application/json", P_CONNECT_UNARY, true},
		{"application/proto", P_CONNECT_UNARY, false},
		{"application/connect+json", P_CONNECT_STREAM, true},
		{"application/connect+proto", P_CONNECT_STREAM, false},
		{"application/grpc", P_GRPC, false},
		{"application/grpc+proto", P_GRPC, false},
		{"application/grpc+json", P_GRPC, true},
		{"application/grpc-web", P_GRPC_WEB, false},
		{"application/grpc-web+proto", P_GRPC_WEB, false},
		{"application/grpc-web+json", P_GRPC_WEB, true},
	};
	for (size_t k = 0; k < sizeof(tab) / sizeof(tab[0]); k++) {
		if (strcmp(t, tab[k].t) == 0) {
			if (charset && !tab[k].json)
				return false;
			c->proto = tab[k].p;
			c->json = tab[k].json;
			/* Both parts are literals that fit c->ctype. */
			size_t tl = strlen(tab[k].t);
			memcpy(c->ctype, tab[k].t, tl);
			strcpy(c->ctype + tl, charset ? "; charset=utf-8" : "");
			return true;
		}
	}
	return false;
}

/* Connect-Timeout-Ms or grpc-timeout (docs/protocol.md, "Connect-RPC"); <0 with message on error. */
static int parse_timeout(struct rpc_call *c, char *err, size_t errlen)
{
	const char *v = http_req_header(c->r, c->proto == P_CONNECT_UNARY || c->proto == P_CONNECT_STREAM
						      ? "connect-timeout-ms" : "grpc-timeout");
	if (!v)
		return 0;
	size_t n = strlen(v);
	if (c->proto == P_GRPC || c->proto == P_GRPC_WEB) {
		/* grpc-timeout: up to 8 digits and a unit. */
		if (n < 2 || n > 9)
			goto bad_grpc;
		long long q = 0;
		for (size_t i = 0; i + 1 < n; i++) {
			if (v[i] < '0' || v[i] > '9')
				goto bad_grpc;
			q = q * 10 + (v[i] - '0');
		}
		switch (v[n - 1]) {
		case 'H': c->timeout_ms = q * 3600000; break;
		case 'M': c->timeout_ms = q * 60000; break;
		case 'S': c->timeout_ms = q * 1000; break;
		case 'm': c->timeout_ms = q; break;
		case 'u': c->timeout_ms = (q + 999) / 1000; break;
		case 'n': c->timeout_ms = (q + 999999) / 1000000; break;
		default: goto bad_grpc;
		}
		return 0;
bad_grpc:
		snprintf(err, errlen, "protocol error: invalid grpc timeout value: %s", v);
		return -1;
	}
	if (n > 10) {
		snprintf(err, errlen, "parse timeout: \"%s\" has >10 digits", v);
		return -1;
	}
	long long ms = 0;
	for (size_t i = 0; i < n; i++) {
		if (v[i] < '0' || v[i] > '9') {
			snprintf(err, errlen, "parse timeout: strconv.ParseInt: parsing \"%s\": invalid syntax", v);
			return -1;
		}
		ms = ms * 10 + (v[i] - '0');
	}
	if (n == 0) {
		snprintf(err, errlen, "parse timeout: strconv.ParseInt: parsing \"\": invalid syntax");
		return -1;
	}
	c->timeout_ms = ms;
	return 0;
}

static const struct rpc_service *find_service(const char *path, const char **method)
{
	const char *slash;

	if (path[0] != '/' || !(slash = strchr(path + 1, '/')))
		return NULL;
	/* "/<service>/<method>": compare the service part by length first. */
	size_t sl = (size_t)(slash - (path + 1));
	for (size_t i = 0; i < n_services; i++) {
		const char *name = services[i]->desc->name;
		size_t nl = service_name_len[i];
		if (nl == sl && memcmp(path + 1, name, nl) == 0) {
			*method = path + 2 + nl;
			return services[i];
		}
	}
	return NULL;
}

bool rpc_path_is_rpc(const char *path)
{
	const char *m;
	return find_service(path, &m) != NULL;
}

void rpc_respond_error(struct http_req *r, enum rpc_code code, const char *msg)
{
	struct rpc_call tmp = {.r = r, .refs = 1};
	const char *ct = http_req_header(r, "content-type");
	if (!rpc_path_is_rpc(r->path) || !pick_protocol(&tmp, ct))
		tmp.proto = P_CONNECT_UNARY;
	if (tmp.proto == P_CONNECT_UNARY) {
		char *body = error_json(code, msg, false);
		http_respond(r, rpc_code_http_status(code), "application/json", body, body ? strlen(body) : 0,
			     NULL, 0);
		free(body);
		return;
	}
	send_end(&tmp, code, msg);
}

void rpc_dispatch(struct http_req *r)
{
	const char *mname = NULL;
	const struct rpc_service *svc = find_service(r->path, &mname);
	const ProtobufCMethodDescriptor *md = NULL;
	char err[512];

	if (svc) {
		for (unsigned i = 0; i < svc->desc->n_methods && !md; i++)
			if (svc->desc->methods[i].name[0] == mname[0] && strcmp(svc->desc->methods[i].name, mname) == 0)
				md = &svc->desc->methods[i];
	}
	if (!md) {
		http_respond_text_error(r, 404, "404 page not found");
		return;
	}
	if (r->method != HTTP_M_POST) {
		static const struct http_hdr allow = {"Allow", "POST"};
		http_respond(r, 405, NULL, NULL, 0, &allow, 1);
		return;
	}
	struct rpc_call *c = loopmem_calloc(1, sizeof(*c)); /* loop thread, per request */
	if (!c) {
		http_respond(r, 503, NULL, NULL, 0, NULL, 0);
		return;
	}
	c->r = r;
	c->svc = svc;
	c->md = md;
	c->refs = 1; /* held by the HTTP exchange until on_close */
	for (size_t i = 0; i < svc->n_methods && !c->impl; i++)
		if (svc->methods[i].name[0] == md->name[0] && strcmp(svc->methods[i].name, md->name) == 0)
			c->impl = &svc->methods[i];
	if (!pick_protocol(c, http_req_header(r, "content-type"))) {
		loopmem_free(c);
		struct http_hdr ap = {"Accept-Post", accept_post};
		http_respond(r, 415, NULL, NULL, 0, &ap, 1);
		return;
	}
	/* connect-go serves a method only with the content types of its kind. */
	bool stream_kind = c->impl && c->impl->kind != RPC_UNARY;
	if ((c->proto == P_CONNECT_UNARY && stream_kind) || (c->proto == P_CONNECT_STREAM && c->impl && !stream_kind)) {
		loopmem_free(c);
		struct http_hdr ap = {"Accept-Post", stream_kind ? "application/connect+json, application/connect+json; "
			"charset=utf-8, application/connect+proto, application/grpc, application/grpc+json, "
			"application/grpc+json; charset=utf-8, application/grpc+proto, application/grpc-web, "
			"application/grpc-web+json, application/grpc-web+json; charset=utf-8, application/grpc-web+proto"
			: accept_post};
		http_respond(r, 415, NULL, NULL, 0, &ap, 1);
		return;
	}
	/* A unary body is held whole; a stream may hold an envelope and the
	 * start of the next. */
	size_t limit = rpc_max_message + ENV_HDR;
	env_dec_init(&c->dec, rpc_max_message, c->proto == P_CONNECT_UNARY ? limit : 2 * limit, false);
	r->ud = c;
	r->on_body = on_body;
	r->on_body_end = on_body_end;
	r->on_writable = on_writable;
	r->on_close = on_close;
	ev_init(&c->deadline, deadline_cb);
	c->deadline.data = c;
	ev_init(&c->resume_w, resume_cb);
	c->resume_w.data = c;

	const char *cpv = http_req_header(r, "connect-protocol-version");
	if (cpv && (c->proto == P_CONNECT_UNARY || c->proto == P_CONNECT_STREAM) && strcmp(cpv, "1") != 0) {
		rpc_fail(c, RPC_INVALID_ARGUMENT, "connect-protocol-version must be \"1\": got \"%s\"", cpv);
		return;
	}
	if (parse_timeout(c, err, sizeof(err)) < 0) {
		rpc_fail(c, RPC_INVALID_ARGUMENT, "%s", err);
		return;
	}
	const char *enc = http_req_header(r, c->proto == P_CONNECT_UNARY ? "content-encoding"
					  : c->proto == P_CONNECT_STREAM ? "connect-content-encoding"
									 : "grpc-encoding");
	if (enc && *enc && strcmp(enc, "identity") != 0) {
		if (strcmp(enc, "gzip") != 0) {
			rpc_fail(c, RPC_UNIMPLEMENTED, "unknown compression \"%s\": supported encodings are gzip", enc);
			return;
		}
		c->req_gzip = true;
		c->dec.gzip_ok = true;
		/* Answer in kind: a client that compresses can decompress. */
		c->resp_gzip = true;
	}
	if (c->timeout_ms > 0) {
		ev_timer_set(&c->deadline, (double)c->timeout_ms / 1000.0, 0.);
		ev_timer_start(envd_loop, &c->deadline);
	}
	if (c->proto != P_CONNECT_UNARY && c->impl &&
	    (c->impl->kind == RPC_CLIENT_STREAM || c->impl->kind == RPC_BIDI_STREAM)) {
		/* Client streams start at once; messages follow as they come. */
		c->refs++;
		start_handler(c, NULL);
		if (!c->finished && env_dec_pending(&c->dec))
			drain_envelopes(c, false);
		call_unref(c);
	}
}
