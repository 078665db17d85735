/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gzsend.h - a file as a gzip response body, compressed in parallel.
 *
 * The file is read in GZSEND_BLOCK pieces on the worker pool, several in
 * flight at once; each piece is either stored (data that does not shrink:
 * a CRC and a copy) or deflated with the 32 KiB before it as dictionary
 * (base/pgzip.h). Pieces are queued in file order as one gzip stream.
 * The file is read until a read comes back short, so a file that grows
 * while it is sent is sent up to wherever its end was at that read.
 *
 * Memory per download is bounded: GZSEND_SLOTS pieces in flight plus the
 * response queue's high-water mark.
 */
#ifndef TRANSFER_GZSEND_H
#define TRANSFER_GZSEND_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/reqjob.h"
#include "http/http.h"

#define GZSEND_BLOCK (128 * 1024)
#define GZSEND_SLOTS 3

/* The file to send, opened (and looked at) by the caller's worker job. */
struct gzsend_src {
	int fd;
	int64_t size;       /* st_size of a regular file, else 0 */
	uint64_t key;       /* its mount (fsjob_fd_mount): the reads' key */
	bool local;         /* a mount that cannot hang: fd closed on the loop */
	double timeout;     /* deadline of each read, seconds */
	char path[PATH_MAX]; /* for messages */
};

/*
 * Take the exchange over from `from` (a reqjob bound to it with
 * http/httpjob.h, handed on with reqjob_handoff), begin a 200 response
 * with headers h[0..n) (the caller includes Content-Encoding: gzip) and
 * stream src->fd as its gzip body. Takes the fd in every case. The
 * sender's own reqjob holds its state from here, until the exchange and
 * the last read in flight have let go. On an allocation failure, a 500 is
 * sent on the exchange, which stays with `from`. A read that outlives its
 * deadline (a hung mount) cuts the stream (http_resp_abort); the fd is
 * closed once the read returns, never on the loop unless src->local.
 */
void gzsend_start(struct reqjob *from, const struct gzsend_src *src, const struct http_hdr *h, size_t n);

#endif
