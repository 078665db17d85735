/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http.h - one request/response exchange, whichever protocol carried it.
 *
 * HTTP/1.1 (http/h1.c) and HTTP/2 (http/h2.c) both hand requests to the
 * router as a struct http_req. A handler reads the request head, receives
 * the body through callbacks, and answers through http_resp_*(). Nothing
 * here blocks: writes are queued and the handler is told through
 * on_writable when the queue has drained, which is how back-pressure works.
 *
 * Lifetime: the transport owns the struct. It calls on_close exactly once,
 * when the exchange is over (response ended and request body consumed, or
 * the client/stream went away); after on_close returns the struct is freed
 * and the handler must hold no pointer to it.
 */
#ifndef ENVD_HTTP_H
#define ENVD_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum http_verb {
	HTTP_M_OTHER = 0,
	HTTP_M_GET,
	HTTP_M_HEAD,
	HTTP_M_POST,
	HTTP_M_PUT,
	HTTP_M_PATCH,
	HTTP_M_DELETE,
	HTTP_M_OPTIONS,
	HTTP_M_PRI,
};

struct http_hdr {
	const char *name;  /* request headers: lower-case */
	const char *value;
};

struct http_req;

/* Transport operations; implemented by h1.c and h2.c. */
struct http_transport_ops {
	int (*begin)(struct http_req *r, int status, const struct http_hdr *h, size_t n, int64_t len);
	int (*write)(struct http_req *r, const void *p, size_t n);
	int (*write_file)(struct http_req *r, int fd, off_t off, size_t len);
	/* optional: queue memory without copying it (see http_resp_write_owned) */
	int (*write_owned)(struct http_req *r, void *p, size_t n, void (*release)(void *), void *arg);
	int (*end)(struct http_req *r, const struct http_hdr *trailers, size_t n);
	size_t (*queued)(const struct http_req *r);
	void (*pause_body)(struct http_req *r, bool paused);
	/* optional: end the response as failed (see http_resp_abort) */
	void (*abort)(struct http_req *r);
};

#define HTTP_MAX_EXTRA_HDRS 12

struct http_req {
	/* --- request, valid until on_close --- */
	enum http_verb method;
	const char *method_name;
	char *path;           /* raw path, without the query */
	char *query;          /* raw query without '?', "" when none */
	struct http_hdr *hdrs;
	size_t n_hdrs;
	int64_t content_length; /* -1 when not known in advance */
	int version;          /* 10, 11 or 20 */
	bool body_done;       /* the whole request body has been delivered */
	bool resp_started;
	bool resp_ended;
	bool aborted;         /* the client or stream went away */
	int status;           /* response status once begun */

	/*
	 * The caller, resolved once at the edge (the router, from Basic auth):
	 * the user the Authorization header named, or NULL when it named none.
	 * user_error is the message when the named user's passwd entry does
	 * not parse. Both are owned by the request and freed with it.
	 */
	struct user *user;
	char *user_error;

	/* Request log: operation id (0 = not logged) and start, set by the router. */
	uint64_t op_id;
	int64_t t_start_ns;

	/* Headers the router adds to whatever response is produced (CORS). */
	struct http_hdr extra[HTTP_MAX_EXTRA_HDRS];
	size_t n_extra;

	/* --- handler hooks; all optional --- */
	void *ud;
	/* A piece of the (de-chunked) request body. */
	void (*on_body)(struct http_req *r, const uint8_t *p, size_t n);
	/* The request body is complete (also called for bodiless requests). */
	void (*on_body_end)(struct http_req *r);
	/* The response queue fell below the low-water mark. */
	void (*on_writable)(struct http_req *r);
	/* Last call: the exchange is over. `completed` is false when aborted. */
	void (*on_close)(struct http_req *r, bool completed);

	/* --- transport private --- */
	const struct http_transport_ops *ops;
	void *transport;
};

/* Called as each exchange whose op_id is set is freed (the request log). */
extern void (*http_req_done_hook)(struct http_req *r);

/* Bytes a handler may keep queued before waiting for on_writable. */
#define HTTP_QUEUE_HIGH (256 * 1024)

/* Free what the request owns beyond the transport's memory (transports). */
void http_req_release(struct http_req *r);

/* Reason phrase for a status code ("OK", "Not Found", ...). */
const char *http_reason(int status);

/* First value of request header `lname` (lower-case), or NULL. */
const char *http_req_header(const struct http_req *r, const char *lname);

/*
 * Add (or replace, when `replace`) a header that every response to `r`
 * carries. Strings must outlive the request (literals or req-owned memory).
 */
void http_req_extra_header(struct http_req *r, const char *name, const char *value, bool replace);

/*
 * Start the response. `len` is the body length, or -1 for a streamed body
 * (chunked on HTTP/1.1). Date and the extra headers are added here.
 * Returns 0, -EALREADY if already begun, -EPIPE if the client is gone.
 */
int http_resp_begin(struct http_req *r, int status, const struct http_hdr *h, size_t n, int64_t len);

/* Queue body bytes (copied). Never blocks. 0, or -EPIPE when gone. */
int http_resp_write(struct http_req *r, const void *p, size_t n);

/*
 * Queue body bytes without a copy where the transport can (HTTP/1.1): p
 * stays the caller's memory, read in place until it is written or dropped,
 * and release(arg) runs then. Elsewhere the bytes are copied and release
 * runs before this returns. release always runs exactly once, also on an
 * error.
 */
int http_resp_write_owned(struct http_req *r, void *p, size_t n, void (*release)(void *), void *arg);

/*
 * Queue `len` bytes of `fd` from `off`; HTTP/1.1 uses sendfile. The
 * transport keeps its own duplicate of the fd, so the caller may close
 * its descriptor as soon as this returns.
 */
int http_resp_write_file(struct http_req *r, int fd, off_t off, size_t len);

/* Finish the response, with optional trailers (HTTP/2 and chunked only). */
int http_resp_end(struct http_req *r, const struct http_hdr *trailers, size_t n);

/*
 * End a response whose headers are out but whose body cannot be completed
 * (its source failed): HTTP/1.x closes the connection after what is
 * queued, with no last chunk, so the client sees a cut body, never a
 * complete one; HTTP/2 resets the stream. on_close follows (maybe at once).
 */
void http_resp_abort(struct http_req *r);

/* Bytes queued and not yet handed to the kernel. */
size_t http_resp_queued(const struct http_req *r);

/* Stop (true) or resume (false) delivery of request body bytes. */
void http_req_pause_body(struct http_req *r, bool paused);

/* Whole response in one call: status, content type (may be NULL), body. */
int http_respond(struct http_req *r, int status, const char *ctype, const void *body, size_t n,
		 const struct http_hdr *more, size_t n_more);

/* envd JSON error {"code":status,"message":msg}\n (docs/protocol.md, "Conventions"). */
int http_respond_json_error(struct http_req *r, int status, const char *msg);

/* Go http.Error style text: "<msg>\n", text/plain, nosniff. */
int http_respond_text_error(struct http_req *r, int status, const char *msg);

/*
 * Query parameter lookup with form decoding (+ is space, %XX decoded,
 * malformed pairs dropped). Returns the number of occurrences of `name`;
 * the first decoded value is copied to out (truncated to outlen-1).
 */
int http_query_get(const char *query, const char *name, char *out, size_t outlen);

/* Percent/form-decode src[0..n) into out (NUL-terminated). -1 if malformed. */
int http_form_decode(const char *src, size_t n, char *out, size_t outlen);

/* RFC 1123 date for `now` into buf (>= 30 bytes). */
void http_date(char *buf, size_t len);

#endif
