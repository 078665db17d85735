/* SPDX-License-Identifier: Apache-2.0 */
/*
 * conn.c - listener, accepted connections and their output queues.
 *
 * Each connection starts in CONN_DETECT: the first bytes decide between the
 * HTTP/2 prior-knowledge preface and HTTP/1.1. Input is read into one
 * fixed buffer per connection; output is a queue of memory and file
 * segments written with writev()/sendfile() when the socket is writable.
 * A connection with output queued above CONN_OUT_HIGH stops reading, so a
 * client that does not read cannot make us buffer without bound.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/handover.h"
#include "base/log.h"
#include "base/loop.h"
#include "http/conn.h"
#include "http/h1.h"
#include "http/h2.h"

void (*server_on_request)(struct http_req *r);
size_t server_n_conns;
size_t server_max_conns = 20000;
unsigned server_idle_timeout_s = 640;

static const char h2_preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
#define H2_PREFACE_LEN 24

static ev_io listen_io;
static struct conn *conns;

/* ---- connection lifetime ---- */

static void rbuf_put(struct conn *c);
static void conn_want_write(struct conn *c);
static void flush_forget(struct conn *c);
static void conn_pause_read(struct conn *c, bool paused);
static void conn_kick_input(struct conn *c);

static void conn_free(struct conn *c)
{
	flush_forget(c);
	ev_io_stop(envd_loop, &c->rio);
	ev_io_stop(envd_loop, &c->wio);
	ev_timer_stop(envd_loop, &c->idle);
	ev_timer_stop(envd_loop, &c->kick);
	if (c->proto == CONN_H1)
		h1_free(c->sess.h1);
	else if (c->proto == CONN_H2)
		h2_free(c->sess.h2);
	outq_clear(&c->out);
	if (c->rbuf)
		rbuf_put(c);
	if (c->fd >= 0)
		close(c->fd);
	if (c->prev)
		c->prev->next = c->next;
	else
		conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	free(c);
	server_n_conns--;
}

static void conn_abort(struct conn *c)
{
	/* Never freed synchronously: the caller may be a handler in the middle
	 * of using its request. The kick timer frees it from a clean stack. */
	if (c->dead)
		return;
	c->dead = true;
	ev_io_stop(envd_loop, &c->rio);
	ev_io_stop(envd_loop, &c->wio);
	ev_timer_stop(envd_loop, &c->kick);
	ev_timer_set(&c->kick, 0., 0.);
	ev_timer_start(envd_loop, &c->kick);
}

static void conn_close_after_flush(struct conn *c)
{
	c->closing = true;
	conn_pause_read(c, true);
	conn_want_write(c);
}

/*
 * Output is written without a trip through epoll where it fits: a
 * connection that gets output while its write watcher is off is put on a
 * list, and an ev_prepare writes the list out after the rest of the
 * iteration's work (lowest priority: worker completions come first) and
 * before libev hands its watcher changes to the kernel. A reply that fits
 * in the socket then leaves in the iteration that made it, and the write
 * watcher, started and stopped again before libev reifies it, costs no
 * epoll_ctl; only a connection whose socket is full waits for EPOLLOUT.
 */
static struct conn *flush_head;
static ev_prepare flush_prepare;
static bool flush_started;

static void conn_write_cb(struct ev_loop *loop, ev_io *w, int revents);

static void flush_cb(struct ev_loop *loop, ev_prepare *w, int revents)
{
	while (flush_head) {
		struct conn *c = flush_head;
		flush_head = c->flush_next;
		c->flush_next = NULL;
		c->flush_queued = false;
		if (!c->dead && ev_is_active(&c->wio))
			conn_write_cb(loop, &c->wio, EV_WRITE);
	}
}

static void flush_forget(struct conn *c)
{
	if (!c->flush_queued)
		return;
	for (struct conn **pp = &flush_head; *pp; pp = &(*pp)->flush_next) {
		if (*pp == c) {
			*pp = c->flush_next;
			break;
		}
	}
	c->flush_next = NULL;
	c->flush_queued = false;
}

static void conn_want_write(struct conn *c)
{
	if (c->dead || ev_is_active(&c->wio))
		return;
	ev_io_start(envd_loop, &c->wio);
	if (!flush_started) {
		ev_prepare_init(&flush_prepare, flush_cb);
		ev_set_priority(&flush_prepare, EV_MINPRI);
		ev_prepare_start(envd_loop, &flush_prepare);
		ev_unref(envd_loop); /* it must not keep ev_run alive */
		flush_started = true;
	}
	if (!c->flush_queued) {
		c->flush_queued = true;
		c->flush_next = flush_head;
		flush_head = c;
	}
}

static void conn_pause_read(struct conn *c, bool paused)
{
	c->read_paused = paused;
	if (c->dead)
		return;
	if (paused)
		ev_io_stop(envd_loop, &c->rio);
	else if (!c->closing && !c->lingering && !ev_is_active(&c->rio))
		ev_io_start(envd_loop, &c->rio);
}

/*
 * Lingering close: after an error response the client may still be
 * sending; closing with unread input makes the kernel send RST, and the
 * client can lose the response. Half-close, discard input until EOF or
 * two seconds, then close.
 */
static void conn_linger_read_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct conn *c = w->data;
	char sink[16384];
	ssize_t n = read(c->fd, sink, sizeof(sink));
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
		conn_abort(c);
}

static void conn_linger(struct conn *c)
{
	shutdown(c->fd, SHUT_WR);
	ev_io_stop(envd_loop, &c->rio);
	ev_io_stop(envd_loop, &c->wio);
	ev_io_init(&c->rio, conn_linger_read_cb, c->fd, EV_READ);
	c->rio.data = c;
	ev_io_start(envd_loop, &c->rio);
	c->lingering = true;
	c->idle.repeat = 2.;
	ev_timer_again(envd_loop, &c->idle);
}

static void conn_touch(struct conn *c)
{
	/* The idle timer only matters when nothing is in flight; protocols
	 * re-arm it, streams in progress are never timed out. */
	ev_timer_again(envd_loop, &c->idle);
}

/*
 * Small read buffers are recycled through a short free list: musl's
 * allocator unmaps a size class's group as soon as it is empty, so a
 * buffer freed after every request meant an mmap/munmap pair per request.
 */
#define RBUF_POOL 32
static uint8_t *rbuf_pool[RBUF_POOL];
static int rbuf_pooled;

static uint8_t *rbuf_get(void)
{
	return rbuf_pooled > 0 ? rbuf_pool[--rbuf_pooled] : malloc(CONN_RBUF_SMALL);
}

static void rbuf_put(struct conn *c)
{
	if (c->rcap == CONN_RBUF_SMALL && rbuf_pooled < RBUF_POOL)
		rbuf_pool[rbuf_pooled++] = c->rbuf;
	else
		free(c->rbuf);
	c->rbuf = NULL;
	c->rcap = 0;
}

static bool conn_idle_session(const struct conn *c)
{
	if (c->proto == CONN_H1)
		return h1_idle(c->sess.h1);
	if (c->proto == CONN_H2)
		return h2_idle(c->sess.h2);
	return true;
}

static void conn_release_rbuf(struct conn *c)
{
	if (c->rlen == 0 && c->rbuf && !c->dead && c->proto != CONN_DETECT && conn_idle_session(c))
		rbuf_put(c);
}

/* The session link's report: what the connection should do next. */
static void conn_notify(struct http_link *l, enum http_link_event ev)
{
	struct conn *c = (struct conn *)((char *)l - offsetof(struct conn, link));

	switch (ev) {
	case HTTP_LINK_WANT_WRITE:
		conn_want_write(c);
		break;
	case HTTP_LINK_PAUSE_READ:
		conn_pause_read(c, true);
		break;
	case HTTP_LINK_RESUME_READ:
		conn_pause_read(c, false);
		conn_kick_input(c);
		break;
	case HTTP_LINK_CALL_BACK:
		conn_kick_input(c);
		break;
	case HTTP_LINK_CLOSE:
		conn_close_after_flush(c);
		break;
	case HTTP_LINK_ABORT:
		conn_abort(c);
		break;
	}
}

/* "Upgrade: h2c" accepted by the HTTP/1.1 session: continue as HTTP/2. */
static int conn_upgrade_h2(struct conn *c)
{
	struct h1 *h1 = c->sess.h1;
	size_t sl;
	const uint8_t *settings = h1_upgrade_settings(h1, &sl);
	struct h2 *h2 = h2_new_upgrade(&c->link, settings, sl, h1_upgrade_request(h1));

	h1_free(h1);
	c->sess.h1 = NULL;
	c->proto = CONN_DETECT;
	if (!h2)
		return -ENOMEM;
	c->sess.h2 = h2;
	c->proto = CONN_H2;
	return 0;
}

/* Feed buffered input to the session; returns false if c is going away. */
static bool conn_process_input(struct conn *c)
{
	if (c->proto == CONN_DETECT) {
		size_t n = c->rlen < H2_PREFACE_LEN ? c->rlen : H2_PREFACE_LEN;
		if (memcmp(c->rbuf, h2_preface, n) == 0 && n < H2_PREFACE_LEN)
			return true; /* could still be the preface: wait */
		if (n == H2_PREFACE_LEN && memcmp(c->rbuf, h2_preface, n) == 0) {
			c->sess.h2 = h2_new(&c->link);
			c->proto = c->sess.h2 ? CONN_H2 : CONN_DETECT;
		} else {
			c->sess.h1 = h1_new(&c->link);
			c->proto = c->sess.h1 ? CONN_H1 : CONN_DETECT;
		}
		if (c->proto == CONN_DETECT) {
			conn_abort(c);
			return false;
		}
	}
	while (c->rlen > 0 && !c->dead && !c->closing) {
		ssize_t n = c->proto == CONN_H2 ? h2_feed(c->sess.h2, c->rbuf, c->rlen)
						: h1_feed(c->sess.h1, c->rbuf, c->rlen);
		if (n < 0) {
			conn_abort(c);
			break;
		}
		memmove(c->rbuf, c->rbuf + n, c->rlen - (size_t)n);
		c->rlen -= (size_t)n;
		if (c->proto == CONN_H1 && h1_upgrading(c->sess.h1)) {
			if (conn_upgrade_h2(c) < 0) {
				conn_abort(c);
				break;
			}
			continue;
		}
		if (n == 0)
			break;
	}
	/* Input stays buffered while the session is paused; once the buffer
	 * is full, stop reading until it consumes. */
	if (!c->dead && c->rbuf && c->rlen == c->rcap)
		conn_pause_read(c, true);
	conn_release_rbuf(c);
	return !c->dead;
}

static void conn_read_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct conn *c = w->data;

	if (c->dead)
		return;
	if (c->rbuf && c->rlen == c->rcap) {
		/* The protocol left the buffer full (paused body): stop reading
		 * until it consumes. */
		conn_pause_read(c, true);
		return;
	}
	if (!c->rbuf) {
		/* Allocated when bytes arrive and dropped again between
		 * requests, so an idle connection costs a few hundred bytes.
		 * Small first: a typical request fits, and small blocks come
		 * from the allocator's pools instead of a fresh mapping. */
		c->rcap = CONN_RBUF_SMALL;
		c->rbuf = rbuf_get();
		if (!c->rbuf) {
			conn_abort(c);
			return;
		}
	}
	size_t room = c->rcap - c->rlen;
	ssize_t n = read(c->fd, c->rbuf + c->rlen, room);
	if (n > 0 && (size_t)n == room && c->rcap < CONN_RBUF_SIZE) {
		/* A full read: a body is streaming in; read in large pieces. */
		uint8_t *b = realloc(c->rbuf, CONN_RBUF_SIZE);
		if (b) {
			c->rbuf = b;
			c->rcap = CONN_RBUF_SIZE;
		}
	}
	if (n < 0) {
		if (errno == EAGAIN || errno == EINTR)
			return;
		conn_abort(c);
		return;
	}
	if (n == 0) {
		/* Peer closed its side. Anything in flight is aborted: HTTP
		 * clients that half-close do not expect more responses. */
		conn_abort(c);
		return;
	}
	c->rlen += (size_t)n;
	conn_touch(c);
	conn_process_input(c);
}

static void conn_kick_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct conn *c = w->data;
	if (c->dead) {
		conn_free(c);
		return;
	}
	if (c->proto == CONN_H1)
		h1_progress(c->sess.h1);
	if (!c->dead && c->rlen > 0)
		conn_process_input(c);
	else if (!c->dead)
		conn_release_rbuf(c);
}

static void conn_kick_input(struct conn *c)
{
	/* Deferred to the loop: the caller may be deep inside a handler. */
	if (!c->dead && !ev_is_active(&c->kick)) {
		ev_timer_set(&c->kick, 0., 0.);
		ev_timer_start(envd_loop, &c->kick);
	}
}

static void conn_write_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct conn *c = w->data;
	struct outq *q = &c->out;
	size_t wrote = 0;
	bool full = false;

	if (c->dead)
		return;
	while (q->head) {
		struct outseg *s = q->head;
		ssize_t n;
		if (s->len == 0) {
			outq_pop(q);
			continue;
		}
		if (s->fd >= 0) {
			n = sendfile(c->fd, s->fd, &s->foff, s->len > (1 << 20) ? (1 << 20) : s->len);
			if (n == 0) {
				/* File shrank under us: the promised length can no
				 * longer be delivered, so the framing is broken. */
				conn_abort(c);
				return;
			}
		} else {
			struct iovec iov[16];
			int cnt = 0;
			for (struct outseg *t = s; t && t->fd < 0 && cnt < 16; t = t->next) {
				if (t->len == 0)
					continue;
				iov[cnt].iov_base = outseg_mem(t) + t->off;
				iov[cnt].iov_len = t->len;
				cnt++;
			}
			n = writev(c->fd, iov, cnt);
		}
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR) {
				full = errno == EAGAIN;
				break;
			}
			conn_abort(c);
			return;
		}
		wrote += (size_t)n;
		size_t left = (size_t)n;
		while (left > 0 && q->head) {
			struct outseg *t = q->head;
			size_t k = left < t->len ? left : t->len;
			if (t->fd < 0)
				t->off += k;
			t->len -= k;
			q->bytes -= k;
			left -= k;
			if (t->len == 0)
				outq_pop(q);
			else
				break;
		}
	}
	if (wrote)
		linkrate_wrote(&c->rate, c->fd, c->peer, wrote, full);
	if (q->bytes < OUTQ_HIGH / 2) {
		if (c->proto == CONN_H1)
			h1_on_output_drained(c->sess.h1);
		else if (c->proto == CONN_H2)
			h2_on_output_drained(c->sess.h2);
	}
	if (c->dead)
		return;
	if (!q->head) {
		ev_io_stop(envd_loop, &c->wio);
		if (c->closing) {
			conn_linger(c);
			return;
		}
	}
	if (!c->lingering)
		conn_touch(c);
}

static void conn_idle_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct conn *c = w->data;
	bool idle = c->out.bytes == 0;

	if (c->lingering) {
		conn_abort(c);
		return;
	}
	if (idle && !conn_idle_session(c)) idle = false;
	if (idle) {
		conn_abort(c);
		return;
	}
	ev_timer_again(envd_loop, &c->idle);
}

static void accept_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	for (int i = 0; i < 64; i++) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		int fd = accept4(w->fd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE)
				log_warn("envd", "accept: %s", strerror(errno));
			return;
		}
		if (server_n_conns >= server_max_conns) {
			close(fd);
			continue;
		}
		char peer[64] = "";
		if (ss.ss_family == AF_INET6)
			inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, peer, sizeof(peer));
		else if (ss.ss_family == AF_INET)
			inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, peer, sizeof(peer));
		int one = 1, idle = 30, intvl = 10, cnt = 3;
		unsigned int user_timeout = 300000;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		/* A peer that vanished without a FIN (a snapshot restored
		 * elsewhere, a dropped proxy) must not hold a subscriber forever:
		 * keep-alive probes find idle dead peers, and unacknowledged
		 * output fails the socket after five minutes instead of the
		 * kernel's default of about fifteen. Linux counts a receive
		 * window held at zero towards the same timeout, even while the
		 * peer answers every probe: a live client that stops reading is
		 * cut off after it too. One minute cut off a test's watcher that
		 * paused its reads for longer on a loaded machine; five is long
		 * for a client to stall, and a process stream can be picked up
		 * again with replayFrom. */
		setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
		setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
		setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
		setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
		setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof(user_timeout));
		if (!conn_adopt(fd, peer))
			close(fd);
	}
}

struct conn *conn_adopt(int fd, const char *peer)
{
	struct conn *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->fd = fd;
	c->rcap = 0;
	snprintf(c->peer, sizeof(c->peer), "%s", peer ? peer : "");
	ev_io_init(&c->rio, conn_read_cb, fd, EV_READ);
	ev_io_init(&c->wio, conn_write_cb, fd, EV_WRITE);
	ev_init(&c->idle, conn_idle_cb);
	ev_timer_init(&c->kick, conn_kick_cb, 0., 0.);
	c->kick.data = c;
	c->idle.repeat = server_idle_timeout_s;
	c->rio.data = c->wio.data = c->idle.data = c;
	c->link.out = &c->out;
	c->link.notify = conn_notify;
	c->link.on_request = server_on_request;
	linkrate_init(&c->rate, fd, c->peer);
	c->link.rate = &c->rate;
	c->link.peer = c->peer;
	c->next = conns;
	if (conns)
		conns->prev = c;
	conns = c;
	server_n_conns++;
	ev_io_start(envd_loop, &c->rio);
	ev_timer_again(envd_loop, &c->idle);
	return c;
}

int server_listen(int port, const char *addr)
{
	int fd = -1;
	int one = 1, zero = 0;

	if (!addr || !*addr || strcmp(addr, "::") == 0) {
		fd = socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd >= 0) {
			struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_port = htons(port),
						  .sin6_addr = in6addr_any};
			setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
			setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
			if (bind(fd, (struct sockaddr *)&a6, sizeof(a6)) < 0) {
				int e = errno;
				close(fd);
				fd = -1;
				if (e == EADDRINUSE) {
					errno = e;
					return -e;
				}
			}
		}
		addr = "0.0.0.0";
	}
	if (fd < 0) {
		struct sockaddr_in a4 = {.sin_family = AF_INET, .sin_port = htons(port)};
		if (inet_pton(AF_INET, addr, &a4.sin_addr) != 1)
			return -EINVAL;
		fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return -errno;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, (struct sockaddr *)&a4, sizeof(a4)) < 0) {
			int e = errno;
			close(fd);
			return -e;
		}
	}
	if (listen(fd, 4096) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	ev_io_init(&listen_io, accept_cb, fd, EV_READ);
	ev_io_start(envd_loop, &listen_io);
	return 0;
}

/* ---- live upgrade: the listener outlives the process image ---- */

int server_listen_fd(int fd)
{
	int type = 0, acc = 0;
	socklen_t len = sizeof(type);

	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) < 0)
		return -errno;
	len = sizeof(acc);
	if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &len) < 0)
		return -errno;
	if (type != SOCK_STREAM || !acc)
		return -ENOTSOCK;
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
		return -errno;
	ev_io_init(&listen_io, accept_cb, fd, EV_READ);
	ev_io_start(envd_loop, &listen_io);
	return 0;
}

int server_listener_fd(void)
{
	return listen_io.cb == accept_cb ? listen_io.fd : -1;
}

void server_handover_save(struct handover *h)
{
	int lfd = server_listener_fd();

	if (lfd >= 0) {
		int32_t *l = handover_alloc(h, sizeof(*l));
		if (l) {
			*l = lfd;
			h->st->listen_fds = l;
			h->st->n_listen_fds = 1;
			handover_keep_fd(h, lfd);
		}
	}
}

int server_handover_restore(struct handover *h)
{
	const Upgrade__HandoverState *st = h->st;
	int lfd = -1;

	for (size_t i = 0; i < st->n_listen_fds; i++) {
		if (lfd < 0 && server_listen_fd(st->listen_fds[i]) == 0)
			lfd = st->listen_fds[i];
		else if (st->listen_fds[i] != lfd && handover_fd_open(st->listen_fds[i]))
			close(st->listen_fds[i]);
	}
	return lfd;
}

bool server_output_pending(void)
{
	for (const struct conn *c = conns; c; c = c->next)
		if (!c->dead && c->out.bytes > 0)
			return true;
	return false;
}

void server_pause_accept(bool paused)
{
	if (listen_io.cb != accept_cb)
		return;
	if (paused)
		ev_io_stop(envd_loop, &listen_io);
	else
		ev_io_start(envd_loop, &listen_io);
}
