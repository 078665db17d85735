/* SPDX-License-Identifier: Apache-2.0 */
/*
 * portfwd.c - the in-daemon port forwarder (docs/protocol.md, "Port
 * forwarding").
 *
 * The reference polls /proc once a second and runs one socat per port;
 * a port is reachable up to a second late, a read error of /proc tears
 * every forward down, and a port that closes and reopens is never
 * forwarded again. Here the scan is a netlink sock_diag dump of LISTEN
 * sockets only (a few hundred bytes for a typical sandbox) every
 * PORTFWD_SCAN_MS, a failed scan changes nothing, teardown waits for
 * PORTFWD_MISS_SCANS missing scans, and a torn-down port is forgotten so
 * it is forwarded again when it reappears. Linux has no notification for
 * a new listening socket short of eBPF, so a cheap short poll it is.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/handover.h"
#include "base/log.h"
#include "base/loop.h"
#include "sandbox/portfwd.h"

#define LOGGER "port-forwarder"
#define RETRY_MIN 0.25
#define RETRY_MAX 2.0
/* Rounds of splicing per readiness event, so one fast stream cannot
 * starve the loop. */
#define PUMP_ROUNDS 16

#ifndef TCP_LISTEN
#define TCP_LISTEN 10
#endif

/* ---- parsing ---- */

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Parse exactly n hex digits into *v. Returns the end pointer or NULL. */
static const char *hex_n(const char *p, const char *end, int n, uint32_t *v)
{
	uint32_t x = 0;
	for (int i = 0; i < n; i++) {
		if (p >= end)
			return NULL;
		int h = hexval(*p++);
		if (h < 0)
			return NULL;
		x = x << 4 | (uint32_t)h;
	}
	*v = x;
	return p;
}

/* One line: "  N: ADDR:PORT REMADDR:PORT ST ...". The kernel prints each
 * 32-bit word of the address as a host-order integer of the raw network
 * bytes, so copying the integer back to memory restores the bytes. */
static bool parse_proc_line(const char *p, const char *end, int family, struct portfwd_sock *s)
{
	int words = family == AF_INET ? 1 : 4;
	uint32_t w, port, st;

	while (p < end && *p == ' ')
		p++;
	while (p < end && *p >= '0' && *p <= '9')
		p++;
	if (p >= end || *p != ':')
		return false;
	p++;
	while (p < end && *p == ' ')
		p++;
	memset(s, 0, sizeof(*s));
	for (int i = 0; i < words; i++) {
		if (!(p = hex_n(p, end, 8, &w)))
			return false;
		memcpy(s->addr + 4 * i, &w, 4);
	}
	if (p >= end || *p++ != ':' || !(p = hex_n(p, end, 4, &port)))
		return false;
	if (p >= end || *p++ != ' ')
		return false;
	/* remote address: skip it */
	while (p < end && *p != ' ')
		p++;
	while (p < end && *p == ' ')
		p++;
	if (!(p = hex_n(p, end, 2, &st)))
		return false;
	if (st != TCP_LISTEN)
		return false;
	s->family = (uint8_t)family;
	s->port = (uint16_t)port;
	return true;
}

int portfwd_parse_proc(const char *text, size_t len, int family, struct portfwd_sock *out,
		       size_t max, size_t *n)
{
	const char *p = text, *end = text + len;
	int added = 0;

	if (family != AF_INET && family != AF_INET6)
		return -EINVAL;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;
		struct portfwd_sock s;
		if (*n < max && parse_proc_line(p, le, family, &s)) {
			out[(*n)++] = s;
			added++;
		}
		p = nl ? nl + 1 : end;
	}
	return added;
}

int portfwd_parse_diag(const void *buf, size_t len, struct portfwd_sock *out, size_t max,
		       size_t *n, bool *done)
{
	const struct nlmsghdr *h = buf;
	size_t left = len;

	for (; NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
		if (h->nlmsg_type == NLMSG_DONE) {
			*done = true;
			return 0;
		}
		if (h->nlmsg_type == NLMSG_ERROR) {
			const struct nlmsgerr *e = NLMSG_DATA(h);
			if (h->nlmsg_len < NLMSG_LENGTH(sizeof(*e)))
				return -EPROTO;
			*done = true;
			return e->error < 0 ? e->error : -EPROTO;
		}
		if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY)
			continue;
		if (h->nlmsg_len < NLMSG_LENGTH(sizeof(struct inet_diag_msg)))
			return -EPROTO;
		const struct inet_diag_msg *m = NLMSG_DATA(h);
		if (m->idiag_state != TCP_LISTEN)
			continue;
		if (m->idiag_family != AF_INET && m->idiag_family != AF_INET6)
			continue;
		if (*n >= max)
			continue;
		struct portfwd_sock *s = &out[(*n)++];
		memset(s, 0, sizeof(*s));
		s->family = m->idiag_family;
		memcpy(s->addr, m->id.idiag_src, m->idiag_family == AF_INET ? 4 : 16);
		s->port = ntohs(m->id.idiag_sport);
	}
	/* A partial message at the end means the buffer was cut short. */
	return left == 0 ? 0 : -EPROTO;
}

static const uint8_t v4mapped_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

/* The IPv4 address of s, also for an IPv4-mapped IPv6 socket. */
static bool as_v4(const struct portfwd_sock *s, uint8_t v4[4])
{
	if (s->family == AF_INET) {
		memcpy(v4, s->addr, 4);
		return true;
	}
	if (memcmp(s->addr, v4mapped_prefix, 12) == 0) {
		memcpy(v4, s->addr + 12, 4);
		return true;
	}
	return false;
}

bool portfwd_is_loopback(const struct portfwd_sock *s)
{
	static const uint8_t lo4[4] = {127, 0, 0, 1};
	static const uint8_t lo6[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
	uint8_t v4[4];

	if (as_v4(s, v4))
		return memcmp(v4, lo4, 4) == 0;
	return s->family == AF_INET6 && memcmp(s->addr, lo6, 16) == 0;
}

static bool is_wildcard(const struct portfwd_sock *s)
{
	static const uint8_t zero[16];
	uint8_t v4[4];

	if (as_v4(s, v4))
		return memcmp(v4, zero, 4) == 0;
	return memcmp(s->addr, zero, 16) == 0;
}

static bool same_addr(const struct portfwd_sock *a, const struct portfwd_sock *b)
{
	uint8_t x[4], y[4];

	if (as_v4(a, x) && as_v4(b, y))
		return memcmp(x, y, 4) == 0;
	return a->family == AF_INET6 && b->family == AF_INET6 && memcmp(a->addr, b->addr, 16) == 0;
}

static bool bit_get(const uint64_t *map, uint16_t port)
{
	return map && (map[port >> 6] >> (port & 63) & 1);
}

static int want_cmp(const void *a, const void *b)
{
	const struct portfwd_want *x = a, *y = b;
	return (int)x->port - (int)y->port;
}

size_t portfwd_select(const struct portfwd_sock *socks, size_t n, const struct portfwd_sock *sandbox,
		      uint16_t own_port, const uint64_t *ours, struct portfwd_want *out, size_t max)
{
	enum { LO4 = 1, LO6 = 2, BLOCK = 4, DONE = 8 };
	/* Per-port marks, cleared again below for exactly the ports touched. */
	static uint8_t mark[65536];
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		const struct portfwd_sock *s = &socks[i];
		uint8_t v4[4];
		if (portfwd_is_loopback(s))
			mark[s->port] |= as_v4(s, v4) ? LO4 : LO6;
		else if (is_wildcard(s) || (same_addr(s, sandbox) && !bit_get(ours, s->port)))
			mark[s->port] |= BLOCK;
	}
	for (size_t i = 0; i < n; i++) {
		uint16_t p = socks[i].port;
		uint8_t m = mark[p];
		if (!(m & DONE) && (m & (LO4 | LO6)) && !(m & BLOCK) && p != own_port && k < max) {
			out[k].port = p;
			out[k].target_family = (m & LO4) ? AF_INET : AF_INET6;
			k++;
		}
		mark[p] |= DONE;
	}
	for (size_t i = 0; i < n; i++)
		mark[socks[i].port] = 0;
	qsort(out, k, sizeof(*out), want_cmp);
	return k;
}

/* ---- relays ---- */

struct pipe_dir {
	int pipe[2];
	size_t pending;  /* bytes in the pipe */
	size_t cap;      /* pipe capacity */
	bool eof;        /* source said EOF */
	bool shut;       /* EOF passed on with shutdown(SHUT_WR) */
	bool in_blocked; /* pipe may be full by slots: wait for a drain */
};

/* fd[0] is the accepted client, fd[1] the loopback service; d[i] carries
 * bytes from fd[i] to fd[1 - i]. */
struct relay {
	int fd[2];
	ev_io io[2];
	struct pipe_dir d[2];
	bool connecting;
	struct relay *prev, *next;
};

struct fwd {
	uint16_t port;
	uint8_t target_family;
	int lfd;
	ev_io lio;
	bool seen;
	bool accept_paused;
	int missing;
	ev_tstamp retry_at;
	ev_tstamp backoff;
	int last_err;
	struct fwd *next;
};

static struct {
	bool running;
	struct portfwd_sock sandbox;
	struct sockaddr_storage sandbox_sa;
	socklen_t sandbox_len;
	char sandbox_str[INET6_ADDRSTRLEN];
	uint16_t own_port;
	int nl;             /* sock_diag socket, -1 when using /proc */
	ev_timer scan;
	unsigned period_ms; /* the scan's period now */
	ev_tstamp hot_until; /* fast scans until then */
	uint64_t wants_sig; /* what the last scan wanted forwarded */
	struct fwd *fwds;
	struct fwd *by_port[65536];
	size_t n_fwds;
	struct relay *relays;
	size_t n_relays;
	struct portfwd_sock socks[PORTFWD_MAX_SOCKS];
	void (*on_scan)(const struct portfwd_sock *socks, size_t n);
	struct portfwd_want wants[PORTFWD_MAX_FORWARDS];
	uint64_t ours[1024];
	char buf[32768] __attribute__((aligned(8))); /* netlink messages are read in place */
} pf; /* zero-initialised (.bss): nl is set by portfwd_start */

void portfwd_on_scan(void (*fn)(const struct portfwd_sock *socks, size_t n))
{
	pf.on_scan = fn;
}

bool portfwd_is_own(const struct portfwd_sock *s)
{
	const struct fwd *f = pf.by_port[s->port];

	return f && f->lfd >= 0 && s->family == pf.sandbox.family &&
	       memcmp(s->addr, pf.sandbox.addr, s->family == AF_INET ? 4 : 16) == 0;
}

size_t portfwd_active_forwards(void)
{
	size_t k = 0;
	for (struct fwd *f = pf.fwds; f; f = f->next)
		k += f->lfd >= 0;
	return k;
}

size_t portfwd_active_relays(void)
{
	return pf.n_relays;
}

static void close_rst(int fd)
{
	struct linger l = {1, 0};
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
	close(fd);
}

static void relay_free(struct relay *r, bool reset)
{
	for (int k = 0; k < 2; k++) {
		ev_io_stop(envd_loop, &r->io[k]);
		if (r->fd[k] >= 0) {
			if (reset)
				close_rst(r->fd[k]);
			else
				close(r->fd[k]);
		}
		for (int j = 0; j < 2; j++)
			if (r->d[k].pipe[j] >= 0)
				close(r->d[k].pipe[j]);
	}
	if (r->prev)
		r->prev->next = r->next;
	else
		pf.relays = r->next;
	if (r->next)
		r->next->prev = r->prev;
	pf.n_relays--;
	free(r);
}

/* Move what can move in direction i. Returns 0 or -errno of the socket
 * error that must end the relay. */
static int dir_pump(struct relay *r, int i)
{
	struct pipe_dir *d = &r->d[i];
	int src = r->fd[i], dst = r->fd[1 - i];

	for (int round = 0; round < PUMP_ROUNDS; round++) {
		bool progress = false;
		if (!d->eof && !d->in_blocked && d->pending < d->cap) {
			ssize_t k = splice(src, NULL, d->pipe[1], NULL, d->cap - d->pending,
					   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
			if (k > 0) {
				d->pending += (size_t)k;
				progress = true;
			} else if (k == 0) {
				d->eof = true;
				progress = true;
			} else if (errno == EAGAIN) {
				/* With bytes in the pipe, EAGAIN may mean the pipe is
				 * out of slots (many small segments), not that the
				 * socket is empty: stop polling the source until the
				 * pipe drains, or we would spin. */
				if (d->pending > 0)
					d->in_blocked = true;
			} else if (errno != EINTR) {
				return -errno;
			}
		}
		if (d->pending > 0) {
			ssize_t k = splice(d->pipe[0], NULL, dst, NULL, d->pending,
					   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
			if (k > 0) {
				d->pending -= (size_t)k;
				d->in_blocked = false;
				progress = true;
			} else if (k < 0 && errno != EAGAIN && errno != EINTR) {
				return -errno;
			}
		}
		if (d->eof && d->pending == 0 && !d->shut) {
			/* Half-close: the peer sees EOF, the other way stays open. */
			if (shutdown(dst, SHUT_WR) < 0 && errno != ENOTCONN)
				return -errno;
			d->shut = true;
		}
		if (!progress)
			break;
	}
	return 0;
}

static void relay_watch(struct relay *r)
{
	for (int k = 0; k < 2; k++) {
		int ev = 0;
		if (r->connecting) {
			ev = k == 1 ? EV_WRITE : 0;
		} else {
			const struct pipe_dir *in = &r->d[k], *out = &r->d[1 - k];
			if (!in->eof && !in->in_blocked && in->pending < in->cap)
				ev |= EV_READ;
			if (out->pending > 0)
				ev |= EV_WRITE;
		}
		if (ev == (r->io[k].events & (EV_READ | EV_WRITE)) && ev_is_active(&r->io[k]))
			continue;
		ev_io_stop(envd_loop, &r->io[k]);
		ev_io_set(&r->io[k], r->fd[k], ev);
		if (ev)
			ev_io_start(envd_loop, &r->io[k]);
	}
}

static void relay_pump(struct relay *r)
{
	int rc = 0;

	if (r->connecting) {
		int err = 0;
		socklen_t el = sizeof(err);
		if (getsockopt(r->fd[1], SOL_SOCKET, SO_ERROR, &err, &el) < 0)
			err = errno;
		if (err == EINPROGRESS || err == EALREADY) {
			relay_watch(r);
			return;
		}
		if (err) {
			/* The service went away between scan and connect: the
			 * client gets a reset, as if the port were closed. */
			relay_free(r, true);
			return;
		}
		r->connecting = false;
	}
	for (int i = 0; i < 2 && rc == 0; i++)
		rc = dir_pump(r, i);
	if (rc < 0) {
		/* An error on one side becomes a reset on the other. */
		relay_free(r, true);
		return;
	}
	if (r->d[0].shut && r->d[1].shut) {
		relay_free(r, false);
		return;
	}
	relay_watch(r);
}

static void relay_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	relay_pump(w->data);
}

static int pipe_open(struct pipe_dir *d)
{
	if (pipe2(d->pipe, O_NONBLOCK | O_CLOEXEC) < 0)
		return -errno;
	int cap = fcntl(d->pipe[1], F_GETPIPE_SZ);
	d->cap = cap > 0 ? (size_t)cap : 65536;
	return 0;
}

/* Put a new relay on the list, its two watchers ready but not started. */
static void relay_link(struct relay *r)
{
	r->next = pf.relays;
	if (pf.relays)
		pf.relays->prev = r;
	pf.relays = r;
	pf.n_relays++;
	for (int k = 0; k < 2; k++) {
		ev_io_init(&r->io[k], relay_cb, -1, 0);
		r->io[k].data = r;
	}
}

static void relay_start(struct fwd *f, int cfd)
{
	struct relay *r = calloc(1, sizeof(*r));
	int one = 1;

	if (!r) {
		close_rst(cfd);
		return;
	}
	r->fd[0] = cfd;
	r->fd[1] = -1;
	for (int k = 0; k < 2; k++)
		r->d[k].pipe[0] = r->d[k].pipe[1] = -1;
	relay_link(r);
	if (pipe_open(&r->d[0]) < 0 || pipe_open(&r->d[1]) < 0)
		goto fail;

	struct sockaddr_storage ss;
	socklen_t sl;
	memset(&ss, 0, sizeof(ss));
	if (f->target_family == AF_INET) {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;
		a->sin_family = AF_INET;
		a->sin_port = htons(f->port);
		a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		sl = sizeof(*a);
	} else {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
		a->sin6_family = AF_INET6;
		a->sin6_port = htons(f->port);
		a->sin6_addr = in6addr_loopback;
		sl = sizeof(*a);
	}
	r->fd[1] = socket(f->target_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (r->fd[1] < 0)
		goto fail;
	/* Relayed segments should leave as they arrive, not wait for Nagle. */
	setsockopt(r->fd[0], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(r->fd[1], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(r->fd[1], (struct sockaddr *)&ss, sl) < 0) {
		if (errno != EINPROGRESS)
			goto fail;
		r->connecting = true;
		relay_watch(r);
		return;
	}
	relay_pump(r);
	return;
fail:
	relay_free(r, true);
}

/* ---- forwards ---- */

static void fwd_accept_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct fwd *f = w->data;

	for (int i = 0; i < 64; i++) {
		int cfd = accept4(f->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (cfd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
				/* Out of descriptors: stop accepting until the next
				 * scan instead of spinning on a readable listener. */
				ev_io_stop(loop, w);
				f->accept_paused = true;
				log_warn(LOGGER, "accept on port %u: %s", f->port, strerror(errno));
			}
			return;
		}
		if (pf.n_relays >= PORTFWD_MAX_RELAYS) {
			close_rst(cfd);
			continue;
		}
		relay_start(f, cfd);
	}
}

static int fwd_listen(struct fwd *f)
{
	int one = 1;
	int fam = pf.sandbox_sa.ss_family;
	int fd = socket(fam, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (fam == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (fam == AF_INET)
		((struct sockaddr_in *)&pf.sandbox_sa)->sin_port = htons(f->port);
	else
		((struct sockaddr_in6 *)&pf.sandbox_sa)->sin6_port = htons(f->port);
	if (bind(fd, (struct sockaddr *)&pf.sandbox_sa, pf.sandbox_len) < 0 || listen(fd, 511) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	f->lfd = fd;
	ev_io_init(&f->lio, fwd_accept_cb, fd, EV_READ);
	f->lio.data = f;
	ev_io_start(envd_loop, &f->lio);
	return 0;
}

static void fwd_try_listen(struct fwd *f, ev_tstamp now)
{
	if (f->lfd >= 0 || now < f->retry_at)
		return;
	int rc = fwd_listen(f);
	if (rc == 0) {
		log_info(LOGGER, "forwarding %s:%u to %s:%u", pf.sandbox_str, f->port,
			 f->target_family == AF_INET ? "127.0.0.1" : "[::1]", f->port);
		f->backoff = 0;
		f->last_err = 0;
		return;
	}
	/* The address may not exist yet (not in Firecracker, or the network
	 * is still coming up): retry with back-off, log once per cause. */
	if (rc != f->last_err)
		log_warn(LOGGER, "cannot listen on port %u of the sandbox address: %s", f->port,
			 strerror(-rc));
	f->last_err = rc;
	f->backoff = f->backoff ? f->backoff * 2 : RETRY_MIN;
	if (f->backoff > RETRY_MAX)
		f->backoff = RETRY_MAX;
	f->retry_at = now + f->backoff;
}

static void fwd_free(struct fwd *f)
{
	if (f->lfd >= 0) {
		ev_io_stop(envd_loop, &f->lio);
		close(f->lfd);
		log_info(LOGGER, "stopped forwarding port %u", f->port);
	}
	pf.by_port[f->port] = NULL;
	pf.n_fwds--;
	free(f);
}

static struct fwd *fwd_new(uint16_t port)
{
	if (pf.n_fwds >= PORTFWD_MAX_FORWARDS)
		return NULL;
	struct fwd *f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	f->port = port;
	f->lfd = -1;
	f->next = pf.fwds;
	pf.fwds = f;
	pf.by_port[port] = f;
	pf.n_fwds++;
	return f;
}

/* ---- scanning ---- */

static int nl_open(void)
{
	int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_SOCK_DIAG);
	return fd < 0 ? -errno : fd;
}

static int scan_diag_family(int family, size_t *n)
{
	struct {
		struct nlmsghdr nlh;
		struct inet_diag_req_v2 req;
	} msg;
	static uint32_t seq;
	struct sockaddr_nl nladdr = {.nl_family = AF_NETLINK};

	memset(&msg, 0, sizeof(msg));
	msg.nlh.nlmsg_len = sizeof(msg);
	msg.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
	msg.nlh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	msg.nlh.nlmsg_seq = ++seq;
	msg.req.sdiag_family = (uint8_t)family;
	msg.req.sdiag_protocol = IPPROTO_TCP;
	msg.req.idiag_states = 1u << TCP_LISTEN;
	if (sendto(pf.nl, &msg, sizeof(msg), 0, (struct sockaddr *)&nladdr, sizeof(nladdr)) < 0)
		return -errno;
	/* The kernel builds the dump inside recvmsg, so this does not wait;
	 * EAGAIN before NLMSG_DONE is treated as a failed scan. */
	for (;;) {
		ssize_t k = recv(pf.nl, pf.buf, sizeof(pf.buf), MSG_DONTWAIT);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (k == 0)
			return -EPROTO;
		bool done = false;
		int rc = portfwd_parse_diag(pf.buf, (size_t)k, pf.socks, PORTFWD_MAX_SOCKS, n, &done);
		if (rc < 0)
			return rc;
		if (done)
			return 0;
	}
}

static int scan_proc_file(const char *path, int family, size_t *n)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t have = 0;

	if (fd < 0)
		return family == AF_INET6 && errno == ENOENT ? 0 : -errno; /* no IPv6 is fine */
	for (;;) {
		ssize_t k = read(fd, pf.buf + have, sizeof(pf.buf) - have);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			int e = errno;
			close(fd);
			return -e;
		}
		if (k == 0)
			break;
		have += (size_t)k;
		/* Parse whole lines, keep the partial last one for the next read. */
		char *nl = memrchr(pf.buf, '\n', have);
		if (!nl) {
			if (have == sizeof(pf.buf))
				have = 0; /* a line longer than the buffer: drop it */
			continue;
		}
		size_t whole = (size_t)(nl - pf.buf) + 1;
		portfwd_parse_proc(pf.buf, whole, family, pf.socks, PORTFWD_MAX_SOCKS, n);
		memmove(pf.buf, pf.buf + whole, have - whole);
		have -= whole;
	}
	if (have)
		portfwd_parse_proc(pf.buf, have, family, pf.socks, PORTFWD_MAX_SOCKS, n);
	close(fd);
	return 0;
}

static int scan(size_t *n)
{
	*n = 0;
	if (pf.nl >= 0) {
		int rc = scan_diag_family(AF_INET, n);
		if (rc == 0)
			rc = scan_diag_family(AF_INET6, n);
		if (rc == 0)
			return 0;
		if (rc == -EAGAIN || rc == -EINTR || rc == -ENOBUFS || rc == -EPROTO || rc == -EBUSY) {
			/* Transient: this scan is void. Drop whatever is left of
			 * the dump together with the socket. */
			close(pf.nl);
			int fd = nl_open();
			pf.nl = fd >= 0 ? fd : -1;
			return rc;
		}
		log_warn(LOGGER, "sock_diag failed (%s); scanning /proc/net/tcp instead", strerror(-rc));
		close(pf.nl);
		pf.nl = -1;
		*n = 0;
	}
	int rc = scan_proc_file("/proc/net/tcp", AF_INET, n);
	if (rc == 0)
		rc = scan_proc_file("/proc/net/tcp6", AF_INET6, n);
	return rc;
}

static void scan_period(struct ev_loop *loop, unsigned ms)
{
	if (ms == pf.period_ms)
		return;
	if (ms == PORTFWD_IDLE_MS || pf.period_ms == PORTFWD_IDLE_MS)
		log_debug(LOGGER, "port scan every %u ms (%s)", ms, ms == PORTFWD_IDLE_MS ? "idle" : "active");
	pf.period_ms = ms;
	pf.scan.repeat = ms / 1000.;
	ev_timer_again(loop, &pf.scan);
}

/* After a scan: fast while the sandbox is active, else back off. */
static void scan_pace(struct ev_loop *loop, ev_tstamp now, uint64_t sig)
{
	bool settling = false;

	for (struct fwd *f = pf.fwds; f && !settling; f = f->next)
		settling = f->missing > 0 || f->lfd < 0;
	if (sig != pf.wants_sig || settling)
		pf.hot_until = now + PORTFWD_HOT_S;
	pf.wants_sig = sig;
	if (now < pf.hot_until)
		scan_period(loop, PORTFWD_SCAN_MS);
	else if (pf.period_ms < PORTFWD_IDLE_MS)
		scan_period(loop, pf.period_ms * 2 < PORTFWD_IDLE_MS ? pf.period_ms * 2 : PORTFWD_IDLE_MS);
}

void portfwd_kick(void)
{
	if (!pf.running)
		return;
	pf.hot_until = ev_now(envd_loop) + PORTFWD_HOT_S;
	scan_period(envd_loop, PORTFWD_SCAN_MS); /* the next scan within that */
}

static void scan_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	size_t n;
	ev_tstamp now = ev_now(loop);

	if (scan(&n) < 0) {
		scan_pace(loop, now, pf.wants_sig); /* a failed scan changes nothing */
		return;
	}
	/* Before the forwards change: a forward's own listener is known as
	 * such (portfwd_is_own) while the scan that saw it is handed on. */
	if (pf.on_scan)
		pf.on_scan(pf.socks, n);
	memset(pf.ours, 0, sizeof(pf.ours));
	for (struct fwd *f = pf.fwds; f; f = f->next)
		if (f->lfd >= 0)
			pf.ours[f->port >> 6] |= 1ull << (f->port & 63);
	size_t k = portfwd_select(pf.socks, n, &pf.sandbox, pf.own_port, pf.ours, pf.wants,
				  PORTFWD_MAX_FORWARDS);
	for (struct fwd *f = pf.fwds; f; f = f->next)
		f->seen = false;
	for (size_t i = 0; i < k; i++) {
		struct fwd *f = pf.by_port[pf.wants[i].port];
		if (!f && !(f = fwd_new(pf.wants[i].port)))
			continue;
		f->seen = true;
		f->missing = 0;
		f->target_family = pf.wants[i].target_family;
		fwd_try_listen(f, now);
		if (f->accept_paused && f->lfd >= 0) {
			f->accept_paused = false;
			ev_io_start(loop, &f->lio);
		}
	}
	for (struct fwd **pp = &pf.fwds; *pp;) {
		struct fwd *f = *pp;
		if (!f->seen && ++f->missing >= PORTFWD_MISS_SCANS) {
			*pp = f->next;
			fwd_free(f);
			continue;
		}
		pp = &f->next;
	}
	/* FNV-1a over what is wanted: a change keeps the scans fast. */
	uint64_t sig = 14695981039346656037ull;
	for (size_t i = 0; i < k; i++) {
		sig = (sig ^ pf.wants[i].port) * 1099511628211ull;
		sig = (sig ^ pf.wants[i].target_family) * 1099511628211ull;
	}
	scan_pace(loop, now, sig);
}

int portfwd_start(const char *sandbox_addr, int own_port)
{
	struct sockaddr_in *a4 = (struct sockaddr_in *)&pf.sandbox_sa;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&pf.sandbox_sa;

	if (pf.running)
		return -EALREADY;
	memset(&pf.sandbox_sa, 0, sizeof(pf.sandbox_sa));
	memset(&pf.sandbox, 0, sizeof(pf.sandbox));
	if (inet_pton(AF_INET, sandbox_addr, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		pf.sandbox_len = sizeof(*a4);
		pf.sandbox.family = AF_INET;
		memcpy(pf.sandbox.addr, &a4->sin_addr, 4);
	} else if (inet_pton(AF_INET6, sandbox_addr, &a6->sin6_addr) == 1) {
		a6->sin6_family = AF_INET6;
		pf.sandbox_len = sizeof(*a6);
		pf.sandbox.family = AF_INET6;
		memcpy(pf.sandbox.addr, &a6->sin6_addr, 16);
	} else {
		return -EINVAL;
	}
	snprintf(pf.sandbox_str, sizeof(pf.sandbox_str), "%s", sandbox_addr);
	pf.own_port = own_port > 0 && own_port < 65536 ? (uint16_t)own_port : 0;
	int fd = nl_open();
	pf.nl = fd >= 0 ? fd : -1;
	if (fd < 0)
		log_warn(LOGGER, "sock_diag unavailable (%s); scanning /proc/net/tcp", strerror(-fd));
	/* First scan on the first loop iteration, then every period. */
	pf.period_ms = PORTFWD_SCAN_MS;
	pf.hot_until = ev_now(envd_loop) + PORTFWD_HOT_S;
	pf.wants_sig = 0;
	ev_timer_init(&pf.scan, scan_cb, 0., PORTFWD_SCAN_MS / 1000.);
	ev_timer_start(envd_loop, &pf.scan);
	/* The periodic scan alone must not keep a loop alive that has nothing
	 * else to do (tests run the loop until their own watchers finish). */
	ev_unref(envd_loop);
	pf.running = true;
	return 0;
}

void portfwd_stop(void)
{
	if (!pf.running)
		return;
	ev_ref(envd_loop);
	ev_timer_stop(envd_loop, &pf.scan);
	while (pf.fwds) {
		struct fwd *f = pf.fwds;
		pf.fwds = f->next;
		fwd_free(f);
	}
	while (pf.relays)
		relay_free(pf.relays, true);
	if (pf.nl >= 0)
		close(pf.nl);
	pf.nl = -1;
	pf.running = false;
}

/* ---- live upgrade ---- */

/* A forward listener inherited across the exec (after portfwd_start). */
static int fwd_adopt(uint16_t port, uint8_t target_family, int lfd)
{
	struct fwd *f;

	if (!pf.running || port == 0 || pf.by_port[port])
		return -EINVAL;
	f = fwd_new(port);
	if (!f)
		return -ENOMEM;
	f->target_family = target_family == AF_INET6 ? AF_INET6 : AF_INET;
	f->lfd = lfd;
	f->seen = true;
	fcntl(f->lfd, F_SETFD, FD_CLOEXEC);
	ev_io_init(&f->lio, fwd_accept_cb, f->lfd, EV_READ);
	f->lio.data = f;
	ev_io_start(envd_loop, &f->lio);
	return 0;
}

/* A relayed connection: both sockets, the pipe of each direction with the
 * bytes it holds, and where each direction is in its shutdown. */
struct relay_state {
	int fd[2];        /* [0] accepted client, [1] loopback service */
	int pipe[2][2];   /* direction i carries fd[i] -> fd[1 - i] */
	size_t pending[2];
	bool eof[2], shut[2];
	bool connecting;
};

/* Carry on relaying with inherited descriptors (after portfwd_start). */
static int relay_adopt(const struct relay_state *s)
{
	struct relay *r;

	if (!pf.running || pf.n_relays >= PORTFWD_MAX_RELAYS)
		return -ENOSPC;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->connecting = s->connecting;
	for (int i = 0; i < 2; i++) {
		r->fd[i] = s->fd[i];
		r->d[i].pipe[0] = s->pipe[i][0];
		r->d[i].pipe[1] = s->pipe[i][1];
		r->d[i].pending = s->pending[i];
		r->d[i].eof = s->eof[i];
		r->d[i].shut = s->shut[i];
		int cap = fcntl(r->d[i].pipe[1], F_GETPIPE_SZ);
		r->d[i].cap = cap > 0 ? (size_t)cap : 65536;
		int fds[3] = { r->fd[i], r->d[i].pipe[0], r->d[i].pipe[1] };
		for (int j = 0; j < 3; j++) {
			fcntl(fds[j], F_SETFD, FD_CLOEXEC);
			fcntl(fds[j], F_SETFL, fcntl(fds[j], F_GETFL) | O_NONBLOCK);
		}
	}
	relay_link(r);
	/* Whatever arrived during the exec is waiting in the sockets. */
	relay_pump(r);
	return 0;
}

void portfwd_handover_save(struct handover *h)
{
	Upgrade__HandoverState *st = h->st;
	size_t k = 0;

	for (struct fwd *fw = pf.fwds; fw && k < PORTFWD_MAX_FORWARDS; fw = fw->next) {
		if (fw->lfd < 0)
			continue;
		k++;
		Upgrade__ForwardedPort *f = handover_alloc(h, sizeof(*f));
		char *key = handover_alloc(h, 32);
		if (!f || !key)
			break;
		upgrade__forwarded_port__init(f);
		snprintf(key, 32, "%d-%u", (int)getpid(), fw->port);
		f->key = key;
		f->port = fw->port;
		f->listener_pid = (uint32_t)getpid();
		f->family = fw->target_family == AF_INET6 ? 6 : 4;
		f->listen_fd = fw->lfd;
		handover_keep_fd(h, fw->lfd);
		HANDOVER_PUSH(h, st->forwards, st->n_forwards, f);
	}
	k = 0;
	for (struct relay *rl = pf.relays; rl && k < PORTFWD_MAX_RELAYS; rl = rl->next, k++) {
		Upgrade__Relay *r = handover_alloc(h, sizeof(*r));
		int32_t *pfds = handover_alloc(h, 4 * sizeof(*pfds));
		uint64_t *pend = handover_alloc(h, 2 * sizeof(*pend));
		protobuf_c_boolean *eof = handover_alloc(h, 2 * sizeof(*eof)), *shut = handover_alloc(h, 2 * sizeof(*shut));
		if (!r || !pfds || !pend || !eof || !shut)
			break;
		upgrade__relay__init(r);
		r->client_fd = rl->fd[0];
		r->service_fd = rl->fd[1];
		for (int d = 0; d < 2; d++) {
			pfds[2 * d] = rl->d[d].pipe[0];
			pfds[2 * d + 1] = rl->d[d].pipe[1];
			pend[d] = rl->d[d].pending;
			eof[d] = rl->d[d].eof;
			shut[d] = rl->d[d].shut;
		}
		r->pipe_fds = pfds;
		r->n_pipe_fds = 4;
		r->pending = pend;
		r->n_pending = 2;
		r->eof = eof;
		r->n_eof = 2;
		r->shut = shut;
		r->n_shut = 2;
		r->connecting = rl->connecting;
		handover_keep_fd(h, r->client_fd);
		handover_keep_fd(h, r->service_fd);
		for (int j = 0; j < 4; j++)
			handover_keep_fd(h, pfds[j]);
		HANDOVER_PUSH(h, st->relays, st->n_relays, r);
	}
}

void portfwd_handover_restore(struct handover *h)
{
	const Upgrade__HandoverState *st = h->st;

	for (size_t i = 0; i < st->n_forwards; i++) {
		Upgrade__ForwardedPort *f = st->forwards[i];
		if (f->listen_fd <= 0 || !handover_fd_open(f->listen_fd))
			continue; /* the scanner forwards it again within a period */
		if (fwd_adopt((uint16_t)f->port, f->family == 6 ? AF_INET6 : AF_INET, f->listen_fd) < 0)
			close(f->listen_fd);
	}
	for (size_t i = 0; i < st->n_relays; i++) {
		Upgrade__Relay *r = st->relays[i];
		struct relay_state s = { .fd = { r->client_fd, r->service_fd }, .connecting = r->connecting };
		bool ok = r->n_pipe_fds == 4 && r->n_pending == 2 && r->n_eof == 2 && r->n_shut == 2 &&
			  handover_fd_open(r->client_fd) && handover_fd_open(r->service_fd);
		for (int d = 0; ok && d < 2; d++) {
			s.pipe[d][0] = r->pipe_fds[2 * d];
			s.pipe[d][1] = r->pipe_fds[2 * d + 1];
			s.pending[d] = r->pending[d];
			s.eof[d] = r->eof[d];
			s.shut[d] = r->shut[d];
			ok = handover_fd_open(s.pipe[d][0]) && handover_fd_open(s.pipe[d][1]);
		}
		if (ok && relay_adopt(&s) == 0)
			continue;
		/* Cannot carry on: the connection is closed rather than leaked. */
		int all[6] = { r->client_fd, r->service_fd, -1, -1, -1, -1 };
		for (size_t k = 0; k < r->n_pipe_fds && k < 4; k++)
			all[2 + k] = r->pipe_fds[k];
		for (int k = 0; k < 6; k++)
			if (handover_fd_open(all[k]))
				close(all[k]);
	}
}
