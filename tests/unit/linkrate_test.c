// SPDX-License-Identifier: Apache-2.0
#include <criterion/criterion.h>
#include <string.h>

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
