// SPDX-License-Identifier: Apache-2.0
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http/http.h"
#include "http/link.h"
#include "http/linkrate.h"

static struct http_link fake_link;

static const struct http_link *fake_get_link(const struct http_req *r)
{
	(void)r;
	return &fake_link;
}

static const struct http_transport_ops fake_ops = { .link = fake_get_link };

static void estimate(struct link_rate *lr, const char *peer, struct link_estimate *e)
{
	struct http_req r;
	memset(&r, 0, sizeof(r));
	memset(&fake_link, 0, sizeof(fake_link));
	fake_link.rate = lr;
	fake_link.peer = peer;
	r.ops = &fake_ops;
	linkrate_estimate(&r, e);
}

Test(linkrate, rule)
{
	struct link_estimate unknown = { 0 };
	cr_assert(linkrate_prefer_gzip(&unknown, 0.2), "an unknown link may be slow: gzip text");
	cr_assert(!linkrate_prefer_gzip(&unknown, 0.95), "data that does not shrink: identity");
	struct link_estimate lo = { .loopback = true };
	cr_assert(!linkrate_prefer_gzip(&lo, 0.2));
	struct link_estimate slow = { .known = true, .bound = true, .bps = 2500000 };
	cr_assert(linkrate_prefer_gzip(&slow, 0.2));
	struct link_estimate fast = { .known = true, .bound = true, .bps = LINKRATE_GZIP_BELOW + 1 };
	cr_assert(!linkrate_prefer_gzip(&fast, 0.2));
	struct link_estimate floor_fast = { .known = true, .bps = 500u << 20 };
	cr_assert(!linkrate_prefer_gzip(&floor_fast, 0.2), "at least this fast is fast");
	struct link_estimate floor_slow = { .known = true, .bps = 1u << 20 };
	cr_assert(linkrate_prefer_gzip(&floor_slow, 0.2), "a low floor says nothing");
}

Test(linkrate, estimate_from_the_connection)
{
	struct link_rate lr;
	struct link_estimate e;

	linkrate_init(&lr, -1, "10.1.2.3");
	estimate(&lr, "10.1.2.3", &e);
	cr_assert(!e.known && !e.loopback);
	lr.bound_bps = 3000000;
	estimate(&lr, "10.1.2.3", &e);
	cr_assert(e.known && e.bound);
	cr_assert_eq(e.bps, 3000000);
	/* A floor above the bound rate: the link got faster. */
	lr.floor_bps = 9000000;
	estimate(&lr, "10.1.2.3", &e);
	cr_assert(e.known && !e.bound);
	cr_assert_eq(e.bps, 9000000);
	linkrate_init(&lr, -1, "127.0.0.1");
	estimate(&lr, "127.0.0.1", &e);
	cr_assert(e.loopback);
	linkrate_init(&lr, -1, "::1");
	cr_assert(lr.loopback);
	linkrate_init(&lr, -1, "::ffff:127.0.0.9");
	cr_assert(lr.loopback);
	linkrate_init(&lr, -1, "10.127.0.1");
	cr_assert(!lr.loopback);
}

/* A request on a transport without a connection (tests, fuzzers). */
Test(linkrate, no_link)
{
	struct http_req r;
	struct link_estimate e;
	memset(&r, 0, sizeof(r));
	linkrate_estimate(&r, &e);
	cr_assert(!e.known);
}

/* Whether TCP_INFO reaches the rate counters here (qemu-user does not
 * pass TCP_INFO through: there envd learns nothing of a link). */
static bool tcp_info_has_rates(int fd)
{
	uint8_t buf[512];
	socklen_t len = sizeof(buf);

	return getsockopt(fd, IPPROTO_TCP, TCP_INFO, buf, &len) == 0 && len >= 192; /* to sndbuf_limited */
}

/* A TCP connection over loopback: listener, client end, server end. */
static void tcp_pair(int *ls, int *cs, int *ss)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);

	*ls = socket(AF_INET, SOCK_STREAM, 0);
	*cs = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert(*ls >= 0 && *cs >= 0);
	cr_assert(bind(*ls, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(*ls, 1) == 0);
	cr_assert(getsockname(*ls, (struct sockaddr *)&a, &al) == 0);
	cr_assert(connect(*cs, (struct sockaddr *)&a, sizeof(a)) == 0);
	*ss = accept(*ls, NULL, NULL);
	cr_assert(*ss >= 0);
}

/* A reader that keeps up: output never waits, and once a MiB has been
 * acked the rate it was taken at is a floor, for the connection and for
 * the next connection from the same peer. Written until it is known (a
 * slow machine only takes longer), at most 1 GiB. Where TCP_INFO has no
 * rate counters nothing may be learnt: the link stays unknown. */
Test(linkrate, floor_from_output_that_never_waited, .timeout = 300)
{
	int ls, cs, ss;
	tcp_pair(&ls, &cs, &ss);

	struct link_rate lr;
	struct link_estimate e;
	static char chunk[64 * 1024], sink[256 * 1024];
	const char *peer = "10.9.8.7"; /* not loopback: the rule applies */
	linkrate_init(&lr, ss, peer);
	bool rates = tcp_info_has_rates(ss);
	size_t chunks = rates ? 16384 : 64; /* 1 GiB; 4 MiB */
	do {
		cr_assert(write(ss, chunk, sizeof(chunk)) == (ssize_t)sizeof(chunk));
		for (size_t got = 0; got < sizeof(chunk);) {
			ssize_t k = read(cs, sink, sizeof(sink));
			cr_assert(k > 0);
			got += (size_t)k;
		}
		linkrate_wrote(&lr, ss, peer, sizeof(chunk), false);
		estimate(&lr, peer, &e);
	} while (!e.known && --chunks > 0);
	if (!rates) {
		cr_assert(!e.known, "no TCP_INFO rates: the link stays unknown");
		close(cs);
		close(ss);
		close(ls);
		return;
	}
	cr_assert(e.known, "a floor after output that never waited");
	cr_assert(!e.bound, "the link never set the pace: a floor, not its rate");
	cr_assert(e.bps > 0);

	struct link_rate next;
	linkrate_init(&next, -1, peer);
	estimate(&next, peer, &e);
	cr_assert(e.known && e.bps == lr.floor_bps, "the peer is known from its last connection");
	close(cs);
	close(ss);
	close(ls);
}

static void *drain(void *arg)
{
	static char sink[256 * 1024];
	int fd = *(int *)arg;

	while (read(fd, sink, sizeof(sink)) > 0)
		;
	return NULL;
}

/* A reader on its own thread and a writer whose output is always waiting
 * (full), as on a connection that keeps the socket full: the writes come
 * back every few microseconds, far less than the sampling interval. The
 * interval must still grow to a sample, so the link gets a rate. Bounded
 * by bytes (1 GiB), not time. */
Test(linkrate, rate_of_output_that_kept_waiting, .timeout = 300)
{
	int ls, cs, ss;
	tcp_pair(&ls, &cs, &ss);
	pthread_t t;
	cr_assert(pthread_create(&t, NULL, drain, &cs) == 0);

	struct link_rate lr;
	struct link_estimate e;
	static char chunk[4096];
	const char *peer = "10.9.8.6";
	linkrate_init(&lr, ss, peer);
	bool rates = tcp_info_has_rates(ss);
	uint64_t left = rates ? (1ull << 30) : (4u << 20);
	do {
		cr_assert(write(ss, chunk, sizeof(chunk)) == (ssize_t)sizeof(chunk));
		linkrate_wrote(&lr, ss, peer, sizeof(chunk), true);
		estimate(&lr, peer, &e);
		left -= sizeof(chunk);
	} while (!e.known && left > 0);
	shutdown(ss, SHUT_WR);
	pthread_join(t, NULL);
	if (!rates)
		cr_assert(!e.known, "no TCP_INFO rates: the link stays unknown");
	else
		cr_assert(e.known && e.bps > 0, "a rate once output had waited for a while");
	close(cs);
	close(ss);
	close(ls);
}
