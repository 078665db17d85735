/* SPDX-License-Identifier: Apache-2.0 */
/*
 * conn.h - one accepted TCP connection: socket I/O, the output queue, and
 * the hand-off to the protocol (HTTP/1.1 in h1.c, HTTP/2 in h2.c).
 *
 * The protocol modules never read or write the socket themselves: they eat
 * bytes from conn->rbuf and append output to conn->out; this module moves
 * bytes between the queue and the kernel on the event loop.
 */
#ifndef ENVD_CONN_H
#define ENVD_CONN_H

#include <ev.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* One piece of output: bytes in memory, or a range of a file. */
struct outseg {
	struct outseg *next;
	int fd;          /* -1 for memory */
	off_t foff;      /* file: next offset */
	size_t len;      /* bytes left to send */
	size_t cap;      /* memory: capacity of data[] */
	size_t off;      /* memory: first unsent byte */
	void (*on_sent)(void *arg); /* called once the segment is written */
	void *arg;
	uint8_t data[];
};

struct outq {
	struct outseg *head, *tail;
	size_t bytes;    /* total unsent bytes */
};

enum conn_proto { CONN_DETECT, CONN_H1, CONN_H2 };

struct conn {
	int fd;
	ev_io rio, wio;
	ev_timer idle;
	ev_timer kick;      /* deferred re-processing of buffered input */
	enum conn_proto proto;
	bool closing;       /* close once output is flushed */
	bool dead;          /* socket gone; free when no one holds a ref */
	bool read_paused;
	bool lingering;     /* half-closed, draining input before close */
	int refs;
	uint8_t *rbuf;      /* unread input */
	size_t rlen, rcap;
	struct outq out;
	void *proto_state;  /* struct h1 or struct h2 */
	char peer[64];
	struct conn *prev, *next;
};

/* Bytes of output a connection may queue before producers wait. */
#define CONN_OUT_HIGH (512 * 1024)
#define CONN_RBUF_SIZE (64 * 1024)
#define CONN_RBUF_SMALL 4096

/* Append a copy of p[0..n) to the queue. Returns 0 or -ENOMEM. */
int outq_append(struct outq *q, const void *p, size_t n);
/* Append a file range; on_sent(arg) runs when it has gone out or is dropped. */
int outq_append_file(struct outq *q, int fd, off_t off, size_t len, void (*on_sent)(void *),
		     void *arg);
/* Append a file range from a private duplicate of fd (closed when sent). */
int outq_append_file_dup(struct outq *q, int fd, off_t off, size_t len);
/* Release a segment taken off a queue: runs on_sent, recycles memory. */
void outseg_free(struct outseg *s);
/* Run every callback and free everything. */
void outq_clear(struct outq *q);

/* Ask the loop to write queued output (idempotent). */
void conn_want_write(struct conn *c);
/* Stop/resume reading the socket (input back-pressure). */
void conn_pause_read(struct conn *c, bool paused);
/* Flush what is queued, then close. */
void conn_close_after_flush(struct conn *c);
/* Close now, dropping queued output. */
void conn_abort(struct conn *c);
/* Re-run input processing on already-buffered bytes (from the loop). */
void conn_kick_input(struct conn *c);

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
/* Stop/resume accepting: pending connections wait in the backlog. */
void server_pause_accept(bool paused);
/* Number of open connections (for limits and tests). */
extern size_t server_n_conns;
extern size_t server_max_conns;
extern unsigned server_idle_timeout_s;

/* Protocol entry points (h1.c, h2.c). */
int h1_attach(struct conn *c);
int h1_on_input(struct conn *c);      /* 0 ok, <0 close */
void h1_on_output_drained(struct conn *c);
void h1_detach(struct conn *c);       /* connection going away */
bool h1_idle(struct conn *c);

struct http_req;
int h2_attach(struct conn *c);
/*
 * Switch a connection to HTTP/2 after "Upgrade: h2c" (RFC 7540 §3.2): the
 * HTTP/1.1 request `r` (head only; its body is complete) becomes stream 1.
 * `settings` is the decoded HTTP2-Settings payload.
 */
int h2_attach_upgrade(struct conn *c, const uint8_t *settings, size_t settings_len,
		      struct http_req *r);
int h2_on_input(struct conn *c);
void h2_on_output_drained(struct conn *c);
void h2_detach(struct conn *c);
bool h2_idle(struct conn *c);

#endif
