/* SPDX-License-Identifier: Apache-2.0 */
/*
 * linkrate.c - link speed from TCP_INFO and per-peer history (see
 * linkrate.h).
 */
#include "http/linkrate.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "base/loop.h"
#include "http/http.h"
#include "http/link.h"

/* Sample after this much output. */
#define SAMPLE_BYTES (64 * 1024)
/* Unsent bytes in the kernel from which the link, not we, sets the pace. */
#define BACKLOGGED_BYTES (16 * 1024)
/* Intervals shorter than this say more about bursts than about the link. */
#define SAMPLE_MIN_US 20000
/* Acked while output drained at once, from which that rate is a floor
 * (less could still sit in buffers along the way). */
#define FREE_MIN_BYTES (1024 * 1024)
/*
 * Network-bound time over which the rate is averaged: past it, what was
 * counted is halved. An average, not the best interval: a loss on the
 * path holds back the cumulative ack until the retransmission fills the
 * hole, and then it jumps by a window at once. Over 20 ms intervals the
 * best of them read 3 to 4 times the rate of a 20 Mbit/s link.
 */
#define BOUND_WINDOW_US 2000000
/* A wall-clock interval longer than TCP's busy time by more than this
 * held idle time (two jiffies at HZ=100). */
#define IDLE_SLACK_US 20000
/* Peers remembered, and for how long (links change: a laptop moves). */
#define PEERS 64
#define PEER_TTL_S 600.

struct peer_rate {
	char addr[48];
	uint64_t bound_bps, floor_bps;
	ev_tstamp at;
};

static struct peer_rate peers[PEERS];

static bool is_loopback(const char *peer)
{
	return strncmp(peer, "127.", 4) == 0 || strcmp(peer, "::1") == 0 || strncmp(peer, "::ffff:127.", 11) == 0;
}

void linkrate_init(struct link_rate *lr, int fd, const char *peer)
{
	memset(lr, 0, sizeof(*lr));
	lr->fd = fd;
	lr->loopback = peer && is_loopback(peer);
}

static struct peer_rate *peer_find(const char *addr, bool add)
{
	struct peer_rate *oldest = &peers[0];
	ev_tstamp now = ev_now(envd_loop);

	if (!addr || !*addr || strlen(addr) >= sizeof(peers[0].addr))
		return NULL;
	for (int i = 0; i < PEERS; i++) {
		if (strcmp(peers[i].addr, addr) == 0) {
			if (now - peers[i].at > PEER_TTL_S)
				peers[i].bound_bps = peers[i].floor_bps = 0;
			return &peers[i];
		}
		if (peers[i].at < oldest->at)
			oldest = &peers[i];
	}
	if (!add)
		return NULL;
	memset(oldest, 0, sizeof(*oldest));
	strcpy(oldest->addr, addr);
	return oldest;
}

/* What the connection knows now is what its peer is known by. */
static void peer_note(const char *peer, const struct link_rate *lr)
{
	struct peer_rate *p = peer_find(peer, true);

	if (p) {
		p->bound_bps = lr->bound_bps;
		p->floor_bps = lr->floor_bps;
		p->at = ev_now(envd_loop);
	}
}

/*
 * The start of the kernel's struct tcp_info (linux/tcp.h), which is ABI:
 * fields are only ever appended. Spelled out because libc headers stop at
 * different fields (glibc's before the rate counters).
 */
struct tcpi_abi {
	uint8_t state, ca_state, retransmits, probes, backoff, options, wscale, flags;
	uint32_t rto, ato, snd_mss, rcv_mss, unacked, sacked, lost, retrans, fackets;
	uint32_t last_data_sent, last_ack_sent, last_data_recv, last_ack_recv;
	uint32_t pmtu, rcv_ssthresh, rtt, rttvar, snd_ssthresh, snd_cwnd, advmss, reordering;
	uint32_t rcv_rtt, rcv_space, total_retrans;
	uint64_t pacing_rate, max_pacing_rate, bytes_acked, bytes_received;
	uint32_t segs_out, segs_in, notsent_bytes, min_rtt, data_segs_in, data_segs_out;
	uint64_t delivery_rate, busy_time, rwnd_limited, sndbuf_limited;
};

/* TCP_INFO of fd up to the rate counters; false when it is not TCP or
 * the kernel is too old to have them. */
static bool tcpi_get(int fd, struct tcpi_abi *ti)
{
	socklen_t tl = sizeof(*ti);

	memset(ti, 0, sizeof(*ti));
	return fd >= 0 && getsockopt(fd, IPPROTO_TCP, TCP_INFO, ti, &tl) == 0 && tl >= sizeof(*ti);
}

static uint64_t mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

void linkrate_wrote(struct link_rate *lr, int fd, const char *peer, size_t n, bool full)
{
	struct tcpi_abi ti;

	lr->unsampled += n;
	if (lr->unsampled < SAMPLE_BYTES && !(full && !lr->t_us))
		return;
	lr->unsampled = 0;
	if (!tcpi_get(fd, &ti))
		return;
	uint64_t now = mono_us(), limited = ti.rwnd_limited + ti.sndbuf_limited;
	uint64_t t0 = lr->t_us, acked0 = lr->acked, lim0 = lr->limited_us, busy0 = lr->busy_us;
	if (!full && ti.notsent_bytes < BACKLOGGED_BYTES) {
		/* Next to nothing waits: we, not the link, set the pace since
		 * the last sample; the next interval starts afresh. What the
		 * link took meanwhile is still a floor for its speed. */
		lr->t_us = 0;
		if (!lr->free_t_us) {
			lr->free_t_us = now;
			lr->free_acked = ti.bytes_acked;
		} else if (ti.bytes_acked >= lr->free_acked + FREE_MIN_BYTES && now - lr->free_t_us >= SAMPLE_MIN_US) {
			uint64_t bps = (ti.bytes_acked - lr->free_acked) * 1000000u / (now - lr->free_t_us);
			if (bps > lr->floor_bps) {
				lr->floor_bps = bps;
				peer_note(peer, lr);
			}
		}
		return;
	}
	lr->free_t_us = 0;
	/* The interval runs from the first moment output waited until one at
	 * least SAMPLE_MIN_US later: restarted only when it yields a sample,
	 * else a fast link, whose writes come back every few ms, never
	 * would. */
	if (t0 && (now - t0 < SAMPLE_MIN_US || ti.bytes_acked <= acked0))
		return;
	lr->t_us = now;
	lr->acked = ti.bytes_acked;
	lr->limited_us = limited;
	lr->busy_us = ti.busy_time;
	if (!t0)
		return;
	/*
	 * What the link delivered between two moments output was waiting.
	 * Bound when TCP spent most of it limited by neither the receiver's
	 * window (a client busy decoding) nor the send buffer. An interval
	 * from the end of one response to the next one's first write holds
	 * the connection's idle gap, which is not link time: when TCP's busy
	 * clock (data queued or in flight) says so, the interval counts only
	 * that busy time. Else the clock's own reading counts, as the busy
	 * clock ticks in jiffies (up to 10 ms).
	 */
	uint64_t dt = now - t0, dbusy = ti.busy_time - busy0, bps = (ti.bytes_acked - acked0) * 1000000u / dt;
	if (dt > dbusy + IDLE_SLACK_US)
		dt = dbusy;
	if ((limited - lim0) * 2 < dt) {
		lr->bound_bytes += ti.bytes_acked - acked0;
		lr->bound_us += dt;
		if (lr->bound_us > BOUND_WINDOW_US) {
			lr->bound_bytes /= 2;
			lr->bound_us /= 2;
		}
		if (lr->bound_us >= SAMPLE_MIN_US)
			lr->bound_bps = lr->bound_bytes * 1000000u / lr->bound_us;
	} else if (bps > lr->floor_bps) {
		lr->floor_bps = bps;
	}
	peer_note(peer, lr);
}

void linkrate_estimate(const struct http_req *r, struct link_estimate *e)
{
	const struct http_link *l = r->ops && r->ops->link ? r->ops->link(r) : NULL;
	uint64_t bound = 0, floor = 0;

	memset(e, 0, sizeof(*e));
	if (!l || !l->rate)
		return;
	e->loopback = l->rate->loopback;
	bound = l->rate->bound_bps;
	floor = l->rate->floor_bps;
	if (!bound && !floor) {
		const struct peer_rate *p = peer_find(l->peer, false);
		if (p) {
			bound = p->bound_bps;
			floor = p->floor_bps;
		}
	}
	/* A floor above the bound rate means the link got faster (or the
	 * bound sample was taken while TCP was still ramping up). */
	if (bound && bound >= floor) {
		e->known = e->bound = true;
		e->bps = bound;
	} else if (floor) {
		e->known = true;
		e->bps = floor;
	}
}

size_t linkrate_backlog(const struct http_req *r)
{
	const struct http_link *l = r->ops && r->ops->link ? r->ops->link(r) : NULL;
	size_t q = http_resp_queued(r);
	struct tcpi_abi ti;

	if (!l)
		return q;
	if (l->out && l->out->bytes > q)
		q = l->out->bytes;
	if (l->rate && tcpi_get(l->rate->fd, &ti))
		q += ti.notsent_bytes;
	return q;
}

bool linkrate_prefer_gzip(const struct link_estimate *e, double ratio)
{
	if (ratio > LINKRATE_RATIO_MAX || e->loopback)
		return false;
	/* Measured slow, or not known to be fast: gzip. Sending identity over
	 * a slow link loses far more (5x the time for text at 20 Mbit/s)
	 * than gzip loses on a fast one. */
	return !e->known || e->bps < LINKRATE_GZIP_BELOW;
}
