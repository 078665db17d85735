/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rpc.h - Connect / gRPC / gRPC-Web calls as seen by service handlers.
 *
 * rpc/connect.c turns an HTTP exchange into a struct rpc_call: it picks the
 * protocol and codec from the content type, decodes request messages into
 * protobuf-c structs (binary or JSON), and encodes whatever the handler
 * sends. A handler never sees bytes, envelopes or HTTP statuses.
 *
 * Call lifetime, from the handler's side:
 *   - the method's start function is called once;
 *   - the handler ends the call with rpc_reply() (unary), rpc_finish() or
 *     rpc_fail(); after that it must not touch the call again;
 *   - if the client goes away or the deadline passes first, the on_cancel
 *     hook is called instead (if set); after it returns the call is gone.
 * Exactly one of the two happens. Calls may be completed asynchronously.
 *
 * Errors: a service ends a call with an enum rpc_code (rpc_fail()); below
 * the services, errors are negative errno values mapped with
 * rpc_code_from_errno() (rpc/rpcerr.h). rpc_send() returns 0, -EPIPE or
 * -EMSGSIZE.
 */
#ifndef ENVD_RPC_H
#define ENVD_RPC_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <protobuf-c/protobuf-c.h>

struct http_req;

enum rpc_code {
	RPC_OK = 0,
	RPC_CANCELED = 1,
	RPC_UNKNOWN = 2,
	RPC_INVALID_ARGUMENT = 3,
	RPC_DEADLINE_EXCEEDED = 4,
	RPC_NOT_FOUND = 5,
	RPC_ALREADY_EXISTS = 6,
	RPC_PERMISSION_DENIED = 7,
	RPC_RESOURCE_EXHAUSTED = 8,
	RPC_FAILED_PRECONDITION = 9,
	RPC_ABORTED = 10,
	RPC_OUT_OF_RANGE = 11,
	RPC_UNIMPLEMENTED = 12,
	RPC_INTERNAL = 13,
	RPC_UNAVAILABLE = 14,
	RPC_DATA_LOSS = 15,
	RPC_UNAUTHENTICATED = 16,
};

/* "not_found" etc.; "unknown" for out-of-range values. */
const char *rpc_code_name(enum rpc_code code);
/* Connect unary HTTP status for a code (docs/protocol.md, "Connect-RPC"). */
int rpc_code_http_status(enum rpc_code code);

enum rpc_kind {
	RPC_UNARY,
	RPC_SERVER_STREAM,
	RPC_CLIENT_STREAM,
	RPC_BIDI_STREAM,
};

struct rpc_call;

/*
 * Unary and server-streaming: `req` is the decoded request, owned by the
 * call and valid until the call ends. Client/bidi streaming: `req` is NULL
 * and messages arrive through the on_message hook.
 */
typedef void (*rpc_start_fn)(struct rpc_call *call, const ProtobufCMessage *req);

struct rpc_method_impl {
	const char *name;     /* as in the service descriptor, e.g. "Start" */
	enum rpc_kind kind;
	rpc_start_fn start;   /* NULL: answered with `unimplemented` */
};

struct rpc_service {
	const ProtobufCServiceDescriptor *desc;
	const struct rpc_method_impl *methods;
	size_t n_methods;
};

/*
 * A call whose send queue (rpc_call_queued()) holds this many bytes is full:
 * producers stop and wait for on_writable, which fires once the queue is
 * below half of it. The transport's HTTP_QUEUE_HIGH has the same value
 * (envd/main.c asserts it), so services need not know the transport.
 */
#define RPC_SEND_HIGH (256 * 1024)

struct rpc_call_hooks {
	/* Client streams: one decoded message; freed after the hook returns. */
	void (*on_message)(struct rpc_call *call, const ProtobufCMessage *msg);
	/* Client streams: the client finished sending. */
	void (*on_input_end)(struct rpc_call *call);
	/* The send queue drained below RPC_SEND_HIGH / 2. */
	void (*on_writable)(struct rpc_call *call);
	/*
	 * The client went away (RPC_CANCELED) or the deadline passed
	 * (RPC_DEADLINE_EXCEEDED; the client is sent that error). The call is
	 * freed when this returns.
	 */
	void (*on_cancel)(struct rpc_call *call, enum rpc_code why);
};

/* Register a service; call before serving. At most 8 services. */
void rpc_register(const struct rpc_service *svc);

void rpc_call_set_hooks(struct rpc_call *call, const struct rpc_call_hooks *hooks, void *ud);
void *rpc_call_ud(const struct rpc_call *call);

/* First value of a request header (lower-case name), or NULL. */
const char *rpc_call_header(const struct rpc_call *call, const char *lname);

/* The underlying HTTP exchange (for logging only; do not respond on it). */
struct http_req *rpc_call_http(const struct rpc_call *call);

/* "Start", "Stat", ... */
const char *rpc_call_method(const struct rpc_call *call);

/* Connect-Timeout-Ms (or grpc-timeout) in ms; 0 when absent. */
int64_t rpc_call_timeout_ms(const struct rpc_call *call);

/* Keepalive-Ping-Interval in seconds; 90 when absent, invalid or <= 0. */
unsigned rpc_call_keepalive_s(const struct rpc_call *call);

/*
 * Send one stream message, flushed at once. Returns 0, -EPIPE if the call
 * is over, -EMSGSIZE if it cannot be encoded within the message limit.
 */
int rpc_send(struct rpc_call *call, const ProtobufCMessage *msg);

/*
 * Client streams: stop (true) or resume (false) handing messages to
 * on_message, for input back-pressure. While paused the request body is
 * paused in the transport too, so memory stays bounded by what was
 * already buffered. Resuming takes effect on a later loop iteration (never
 * inside the caller); on_input_end comes only after every message.
 */
void rpc_call_pause_input(struct rpc_call *call, bool paused);

/* Bytes sent but not yet written to the socket (for back-pressure). */
size_t rpc_call_queued(const struct rpc_call *call);

/*
 * What the client is told when its own deadline (Connect-Timeout-Ms,
 * grpc-timeout) passes, instead of "context deadline exceeded": e.g.
 * "filesystem did not answer within 3 s: /mnt/x" for a call waiting on a
 * worker job. The on_cancel hook still runs first. NULL: back to the
 * default.
 */
void rpc_call_set_deadline_message(struct rpc_call *call, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * Replies built off the loop: take the call's codec on the loop
 * (rpc_call_codec), encode the reply on a worker thread (rpc_encode is
 * thread-safe and touches no call), answer on the loop with
 * rpc_reply_encoded, which takes the buffer and sends it without a copy.
 */
struct rpc_codec {
	bool json;
	bool gzip;
};

struct rpc_encoded {
	void *mem;    /* RPC_ENC_HDR bytes of room, then len bytes of message */
	size_t len;
	bool gzipped;
	bool borrowed; /* mem is the caller's buffer (rpc_encode_buf): copied, never freed */
};

#define RPC_ENC_HDR 5 /* = ENV_HDR of rpc/envelope.h */

/* Our own messages are bounded only by an envelope's 32-bit length:
   -max-message limits what we receive. */
#define RPC_SEND_MAX ((size_t)UINT32_MAX)

void rpc_call_codec(const struct rpc_call *call, struct rpc_codec *out);
/* 0, -ENOMEM, or -EMSGSIZE beyond RPC_SEND_MAX. Any thread. */
int rpc_encode(const struct rpc_codec *codec, const ProtobufCMessage *msg, struct rpc_encoded *out);
/* rpc_encode into buf (cap bytes, which the reply must outlive) when a
 * reply without gzip, proto or JSON, fits there, else as rpc_encode. A
 * small reply then costs no allocation on the worker and no free across
 * threads. */
int rpc_encode_buf(const struct rpc_codec *codec, const ProtobufCMessage *msg, void *buf, size_t cap,
		   struct rpc_encoded *out);
void rpc_encoded_free(struct rpc_encoded *e);
/* Unary success with a reply from rpc_encode (e is emptied; a call that
   already ended just frees it). Ends the call. */
void rpc_reply_encoded(struct rpc_call *call, struct rpc_encoded *e);

/*
 * Stream messages encoded off the loop: rpc_frame_append() (any thread)
 * appends msg's envelope (header and message, gzipped as the codec says)
 * to a growing buffer (*buf, *len bytes used of *cap; realloc'd); returns
 * 0, -ENOMEM or -EMSGSIZE. rpc_send_framed() (loop) sends such a buffer
 * of whole envelopes as it is and takes it (freed with free()); 0, or
 * -EPIPE if the call is over.
 */
int rpc_frame_append(const struct rpc_codec *codec, const ProtobufCMessage *msg, uint8_t **buf, size_t *len,
		     size_t *cap);
int rpc_send_framed(struct rpc_call *call, void *mem, size_t len);

/*
 * A reply whose one repeated field is written element by element (a
 * ListDir of a large tree), for a message that holds nothing else: the
 * bytes are the codec's encoding of the whole message (protojson
 * `{"entries":[...]}` or `{}`, proto tag-length-value per element), made
 * in pieces whose memory stays bounded. rpc_list_add and rpc_list_take
 * run on any thread (the worker that walks).
 */
struct rpc_list {
	struct rpc_codec codec;
	const ProtobufCFieldDescriptor *field;
	size_t count;   /* elements added */
	bool taken;     /* a piece was taken before */
	char *buf;      /* RPC_ENC_HDR bytes of room, then len bytes */
	size_t len, cap;
};

void rpc_list_init(struct rpc_list *l, const struct rpc_codec *codec, const ProtobufCFieldDescriptor *field);
/* Append one element. 0, -ENOMEM, or -EMSGSIZE past RPC_SEND_MAX. */
int rpc_list_add(struct rpc_list *l, const ProtobufCMessage *elem);
/* Bytes waiting to be taken. */
size_t rpc_list_pending(const struct rpc_list *l);
/*
 * The bytes so far as an rpc_encoded (owned: rpc_reply_piece or, for the
 * whole message, rpc_reply_encoded takes it); `last` adds the closing
 * bytes. The whole message taken at once (first piece and last) is
 * gzipped when the codec asks. 0 or -ENOMEM.
 */
int rpc_list_take(struct rpc_list *l, bool last, struct rpc_encoded *out);
void rpc_list_free(struct rpc_list *l);

/*
 * Can this unary reply be sent in pieces? Connect's unary protocol only
 * (the other protocols put the message's length in front of it), and only
 * uncompressed (a gzip of the whole is what a compressing client expects).
 */
bool rpc_reply_streamable(const struct rpc_call *call);
/*
 * Send the next piece of a unary reply (the first begins the response:
 * 200, no length, chunked on HTTP/1.1). Takes e. 0, or -EPIPE when the
 * call is over. The call stays open: end it with rpc_reply_pieces_end(),
 * or with rpc_fail() when the rest cannot be made, which then cuts the
 * body (HTTP/1.1 closes the connection, HTTP/2 resets the stream): the
 * client sees a failed request, never a short reply.
 */
int rpc_reply_piece(struct rpc_call *call, struct rpc_encoded *e);
/* The last piece went out: success. Ends the call. */
void rpc_reply_pieces_end(struct rpc_call *call);

/* Unary success. Ends the call. */
void rpc_reply(struct rpc_call *call, const ProtobufCMessage *msg);
/* Stream success (end-stream `{}` / grpc-status 0). Ends the call. */
void rpc_finish(struct rpc_call *call);
/* Error in the right shape for the protocol. Ends the call. */
void rpc_fail(struct rpc_call *call, enum rpc_code code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void rpc_failv(struct rpc_call *call, enum rpc_code code, const char *fmt, va_list ap);

/* Dispatch an HTTP exchange whose path starts with "/<service>/". */
void rpc_dispatch(struct http_req *r);

/* True if `path` falls under a registered service prefix. */
bool rpc_path_is_rpc(const char *path);

/* Connect-formatted error for a non-handler failure (Basic auth), in the
   shape the request's protocol expects (docs/protocol.md, "Request pipeline"). */
void rpc_respond_error(struct http_req *r, enum rpc_code code, const char *msg);

/* Maximum encoded or decoded message size, bytes (flag -max-message). */
extern size_t rpc_max_message;

#endif
