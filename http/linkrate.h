/* SPDX-License-Identifier: Apache-2.0 */
/*
 * linkrate.h - how fast the link to a client is, from what its sockets
 * have shown, and whether a response should be gzipped for it.
 *
 * Both SDKs offer gzip on every request, but a gzip response is only
 * faster end to end when the link is slower than the compressor and the
 * client's decoder together: on a fast link the client spends longer
 * inflating than the bytes would have taken to arrive. The speed comes
 * from TCP_INFO of the connection, sampled while a response is written
 * (conn.c calls linkrate_wrote), and from what earlier connections from
 * the same peer address achieved, so a client that opens a connection per
 * request is known from its first one.
 *
 * A sample is "bound" when the network set the pace: the socket was full
 * and TCP was neither waiting for the receiver's window (a client busy
 * decoding) nor for us. Other samples only say the link is at least that
 * fast: among them, what the link took while output never backed up
 * (a client that read a few MiB as fast as we wrote them is on a fast
 * link, even though it never made us wait).
 */
#ifndef ENVD_HTTP_LINKRATE_H
#define ENVD_HTTP_LINKRATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct http_req;

/* One connection's samples. Zero-initialise. */
struct link_rate {
	uint64_t bound_bps;  /* network-bound delivery rate, bytes/s; 0: none */
	/* Acked bytes and time over the network-bound intervals, decayed:
	 * bound_bps is their ratio, a moving average over the last seconds. */
	uint64_t bound_bytes, bound_us;
	uint64_t floor_bps;  /* best other delivery rate: the link is at least this fast */
	uint64_t unsampled;  /* bytes written since the last sample */
	/* The last sample, taken with the socket full (t_us 0: none since the
	 * socket last ran dry): monotonic time, TCP_INFO bytes acked, time
	 * limited by the receiver's window or the send buffer, and busy time. */
	uint64_t t_us, acked, limited_us, busy_us;
	/* Since output last stopped draining at once (free_t_us 0: it is
	 * backed up): when it started to, and TCP_INFO bytes acked then. */
	uint64_t free_t_us, free_acked;
	bool loopback;       /* the peer is this machine */
	int fd;              /* the socket, -1 when there is none */
};

/* What is known of the link under a request. */
struct link_estimate {
	bool known;
	bool bound;          /* bps was measured with the network as the bottleneck */
	bool loopback;
	uint64_t bps;        /* bound: the rate; else a lower bound (0: nothing known) */
};

/* A new connection on socket fd from peer (an address as inet_ntop
 * writes it, or ""). */
void linkrate_init(struct link_rate *lr, int fd, const char *peer);

/*
 * n bytes were just written to socket fd; full is true when the socket
 * refused more (EAGAIN). Samples TCP_INFO every few hundred KiB and
 * records the result for the connection and for peer.
 */
void linkrate_wrote(struct link_rate *lr, int fd, const char *peer, size_t n, bool full);

/* The estimate for the link a request came over (the connection's own
 * samples first, then its peer's history). */
void linkrate_estimate(const struct http_req *r, struct link_estimate *e);

/*
 * Bytes of this response's output not yet on the wire: what is queued for
 * it and in the connection's queue, plus what the kernel holds unsent.
 * A backlog near zero means the link waits for us; a large one that the
 * link is the bottleneck.
 */
size_t linkrate_backlog(const struct http_req *r);

/*
 * The encoding rule: true when gzip is expected to deliver size bytes
 * sooner than identity over link e, given ratio (expected compressed size
 * / size, 0..1; > 1 for data that does not shrink). See
 * docs/performance.md for the figures behind the constants.
 */
bool linkrate_prefer_gzip(const struct link_estimate *e, double ratio);

/* Bytes per second below which a bound link counts as slow (tests, docs). */
#define LINKRATE_GZIP_BELOW (64ull << 20)
/* Worst compressed/original ratio for which gzip is still chosen. */
#define LINKRATE_RATIO_MAX 0.8

#endif
