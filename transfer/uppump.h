/* SPDX-License-Identifier: Apache-2.0 */
/*
 * uppump.h - a request body pumped to the worker pool: what an upload
 * (POST /files) and an extraction (POST /files?extract=) share.
 *
 * Body bytes collect on the loop in an input buffer. A job takes them
 * (the input and work buffers are swapped) once UPPUMP_KICK bytes wait or
 * the body ended, inflates them if the body is gzip (zlib; several gzip
 * members in a row are one body, as Go reads them), and hands the decoded
 * bytes to the owner's sink, on a worker thread, one job at a time, keyed
 * by the mount of the target and bounded by its deadline. While a job
 * runs and UPPUMP_IN_HIGH bytes wait, the client is paused; a transport
 * that delivers past UPPUMP_IN_MAX anyway fails the upload rather than
 * buffering without bound. The job that follows the end of the body runs
 * the owner's finish; then the loop answers: the owner's respond after a
 * success, else the first error recorded (uppump_fail) as an envd JSON
 * error, while the rest of the body drains, ignored. A job that outlives
 * its deadline (a mount that does not answer) is answered 504, a full
 * worker queue 503, both naming `shown`.
 *
 * Memory: two UPPUMP_IN_MAX buffers and, for gzip, one output chunk and
 * zlib's state, whatever the body's size.
 *
 * Lifetime: the pump is a reqjob (base/reqjob.h) bound to the exchange
 * (http/httpjob.h). Its owner embeds it; ops->free runs once the exchange,
 * the job in flight and the owner's own reference (from uppump_init)
 * have let go.
 *
 * Threads: while a job is in flight, the outcome fields and everything
 * the owner's worker callbacks touch belong to the job; the loop touches
 * only the input buffer.
 *
 * Errors: uppump_alloc() returns 0 or -ENOMEM; uppump_fail() returns
 * -ECANCELED, for sinks to pass on.
 */
#ifndef TRANSFER_UPPUMP_H
#define TRANSFER_UPPUMP_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <zlib.h>

#include "base/reqjob.h"
#include "http/http.h"
#include "transfer/files_common.h"

/* Bytes worth a job of their own (less waits for more, or the end). */
#define UPPUMP_KICK (128 * 1024)
/* Body bytes buffered while a job runs before the client is paused. */
#define UPPUMP_IN_HIGH (1024 * 1024)
/* Hard cap for what a transport may still deliver after the pause. */
#define UPPUMP_IN_MAX (4 * 1024 * 1024)
/* Inflated bytes per step. */
#define UPPUMP_ZCHUNK (64 * 1024)

struct uppump;

/* The owner's context of pump p, embedded as `member` of `type`. */
#define UPPUMP_OWNER(p, type, member) REQJOB_CONTAINER(p, type, member)

struct uppump_ops {
	/* Worker, optional: before each job's bytes (set up where they go). */
	void (*prepare)(struct uppump *p);
	/* Worker: decoded body bytes. 0, or uppump_fail()'s value. */
	int (*sink)(struct uppump *p, const uint8_t *b, size_t n);
	/* Worker: the gzip body is corrupt; zmsg is zlib's word for it.
	 * Records the error (uppump_fail) and returns its value. */
	int (*bad_gzip)(struct uppump *p, const char *zmsg);
	/* Worker: the whole body went through without error. Checks what
	 * the owner needs of its end (got_input, zended) and completes. */
	void (*finish)(struct uppump *p);
	/* Loop, optional: a job is back and the request still live. */
	void (*back)(struct uppump *p);
	/* Loop, optional: the next job may run without a deadline. */
	bool (*unbounded)(struct uppump *p, bool finishing);
	/* Loop: the body went through and finish() recorded no error: answer. */
	void (*respond)(struct uppump *p, struct http_req *r);
	/* Optional, on the thread that records an error: drop what is half
	 * done (every uppump_fail calls it, the first and the later ones). */
	void (*discard)(struct uppump *p);
	/* Loop: the last reference went. Free the owner; the pump's own
	 * buffers are freed already. */
	void (*free)(struct uppump *p);
};

struct uppump {
	struct reqjob job;       /* the exchange; key (the target's mount) and deadline */
	const struct uppump_ops *ops;
	char shown[PATH_MAX];    /* the target as the loop knows it, for 503 and 504 */

	bool gzip, zinit;
	bool zended;             /* a gzip member ended and no input followed yet */
	bool got_input;          /* any compressed byte seen */
	z_stream zs;
	uint8_t *zout;

	uint8_t *in, *work;
	size_t in_len, work_len;
	bool paused, body_ended, overrun;
	bool finishing;          /* the job in flight is the last */

	/* The outcome, recorded by whichever thread owns the pump. */
	bool failed;
	int status;
	char msg[FILES_MSGLEN];
};

/* Set p up with one reference, the caller's. Allocates nothing. */
void uppump_init(struct uppump *p, const struct uppump_ops *ops);

/* The buffers (and the inflater, for a gzip body). 0 or -ENOMEM; what
 * was allocated is freed with p either way. */
int uppump_alloc(struct uppump *p, bool gzip);

/*
 * Bind p to exchange r and receive its body. `first_job`: run one job at
 * once (the owner's prepare) before any byte is there. The caller still
 * holds its reference from uppump_init and drops it with
 * reqjob_release(&p->job).
 */
void uppump_start(struct uppump *p, struct http_req *r, bool first_job);

/*
 * Record the upload's error (the first one wins) after ops->discard. On
 * whichever thread owns the pump. Returns -ECANCELED.
 */
int uppump_fail(struct uppump *p, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
