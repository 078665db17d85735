/* SPDX-License-Identifier: Apache-2.0 */
/*
 * conn.h - the listener and its accepted TCP connections: socket I/O,
 * protocol detection, and the hand-off to an HTTP/1.1 or HTTP/2 session.
 *
 * This is the only part of the transport that touches sockets and the
 * event loop. Sessions (h1.c, h2.c) never see a struct conn: they eat the
 * bytes this module feeds them, queue output on the link's queue, and
 * report back through the link (http/link.h); this module moves bytes
 * between the queue and the kernel.
 *
 * Errors: 0 or a negative errno value.
 */
#ifndef ENVD_HTTP_CONN_H
#define ENVD_HTTP_CONN_H

#include <ev.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "http/link.h"
#include "http/linkrate.h"
#include "http/outq.h"

struct http_req;

enum conn_proto { CONN_DETECT, CONN_H1, CONN_H2 };

struct conn {
	int fd;
	ev_io rio, wio;
	ev_timer idle;
	ev_timer kick;      /* deferred work: re-feed input, session progress, free */
	enum conn_proto proto;
	bool closing;       /* close once output is flushed */
	bool dead;          /* socket gone; freed from the kick timer */
	bool read_paused;
	bool lingering;     /* half-closed, draining input before close */
	uint8_t *rbuf;      /* unread input */
	size_t rlen, rcap;
	struct outq out;
	struct http_link link;
	union {
		struct h1 *h1;
		struct h2 *h2;
	} sess;
	char peer[64];
	struct link_rate rate; /* what its writes showed of the link */
	struct conn *prev, *next;
	struct conn *flush_next; /* on the list of conns to write this iteration */
	bool flush_queued;
};

#define CONN_RBUF_SIZE (64 * 1024)
#define CONN_RBUF_SMALL 4096

/*
 * The request handler every connection hands its requests to (the
 * application's router). Set by main before server_listen (and by tests
 * before conn_adopt).
 */
extern void (*server_on_request)(struct http_req *r);

/*
 * Serve an already-connected, non-blocking socket (accept path, tests).
 * Returns the connection, or NULL (fd left open) on allocation failure.
 */
struct conn *conn_adopt(int fd, const char *peer);

/* Listener: bind [::]:port (v6only off), falling back to 0.0.0.0. */
int server_listen(int port, const char *addr);
/* Serve on an inherited listening socket (live upgrade). 0 or -errno. */
int server_listen_fd(int fd);
/* The listening socket, or -1 before server_listen. */
int server_listener_fd(void);
/*
 * The listener in the hand-over record (base/handover.h, field 1000): the
 * save keeps it across the exec; the restore serves on the first inherited
 * listener that is one, closes the others, and returns it (-1: none, the
 * caller listens as usual).
 */
struct handover;
void server_handover_save(struct handover *h);
int server_handover_restore(struct handover *h);
/* Stop/resume accepting: pending connections wait in the backlog. */
void server_pause_accept(bool paused);
/* True while a live connection still has output queued (not yet written to
 * its socket). */
bool server_output_pending(void);
/* Number of open connections (for limits and tests). */
extern size_t server_n_conns;
extern size_t server_max_conns;
extern unsigned server_idle_timeout_s;

#endif
