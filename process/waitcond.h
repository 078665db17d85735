/* SPDX-License-Identifier: Apache-2.0 */
/*
 * waitcond.h - the conditions of WaitFor (docs/protocol.md, "WaitFor"), as
 * pure parts: a request checked and put in one shape, whether a listener
 * meets a port condition, whether a status is in range, the condition in
 * words, and the assembly of a process's output into lines. The waiting
 * itself (events, timers, sockets) is process/waitfor.c's.
 *
 * Errors: waitcond_parse returns 0 or -EINVAL with a message;
 * waitcond_lines_feed and _flush return 1 (a line was accepted), 0 or
 * -ENOMEM.
 */
#ifndef PROCESS_WAITCOND_H
#define PROCESS_WAITCOND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "process.pb-c.h"

enum waitcond_kind {
	WAITCOND_PORT,
	WAITCOND_HTTP,
	WAITCOND_OUTPUT,
	WAITCOND_EXIT,
	WAITCOND_PATH,
};

/* WaitFor's default wait when neither the request nor the call sets one. */
#define WAITCOND_DEFAULT_MS 60000u
/* The longest URL path of an HTTP condition. */
#define WAITCOND_HTTP_PATH_MAX 2048

struct waitcond {
	enum waitcond_kind kind;
	uint32_t timeout_ms;              /* 0: the call's deadline, else the default */
	/* port, http */
	uint16_t port;
	bool any_address;                 /* port: no address given */
	uint8_t family;                   /* port with an address: AF_INET, AF_INET6 */
	uint8_t addr[16];
	char address[48];                 /* as given, normalised */
	/* http */
	const char *path;                 /* borrowed from the request; starts with '/' */
	unsigned status_min, status_max;
	/* output, exit */
	const Process__ProcessSelector *process; /* borrowed */
	/* output */
	const char *pattern;              /* borrowed */
	bool ignore_case, fixed;
	int stream;                       /* 0 any, 1 stdout, 2 stderr (ring.h's kinds) */
	/* path */
	const char *fs_path;              /* borrowed, as given */
};

/*
 * Check a WaitForRequest and put it into *c (its strings borrowed from rq).
 * invalid_argument cases, with the message in err: no condition, port 0 or
 * above 65535, an address that is not numeric IPv4 or IPv6, an HTTP path
 * not starting with '/' or with a space or control byte, a status range
 * outside 100-599 or upside down, an empty pattern or path, no process
 * selector, an unknown stream name.
 */
int waitcond_parse(const Process__WaitForRequest *rq, struct waitcond *c, char *err, size_t errlen);

/*
 * Does a TCP listener on (family, addr, port) take connections the port
 * condition asks for? Any address: any listener on the port. An address:
 * a listener bound to it, or to its family's wildcard (0.0.0.0, ::), or to
 * :: for an IPv4 address (a dual-stack socket; one with IPV6_V6ONLY
 * cannot be told from it). An HTTP condition asks for 127.0.0.1.
 * IPv4-mapped IPv6 addresses count as IPv4.
 */
bool waitcond_port_ok(const struct waitcond *c, int family, const uint8_t addr[16], uint16_t port);

/* An HTTP status in the condition's range. */
bool waitcond_status_ok(const struct waitcond *c, unsigned status);

/* The condition in words ("port 8080 listening on any address"). */
void waitcond_describe(const struct waitcond *c, char *buf, size_t len);

/*
 * Output assembled into lines, per stream. A line is handed on without its
 * '\n' (and a '\r' before it, a terminal's), with the offset of its first
 * byte; a line longer than WAITCOND_LINE_MAX is handed on cut to that
 * length (`cut`), once its end comes. Lines that lie whole within a fed
 * chunk are handed on from the chunk itself, without a copy.
 */
#define WAITCOND_LINE_MAX (64 * 1024)

struct waitcond_lines {
	char *buf;          /* the line begun so far */
	size_t len, cap;
	uint64_t off;       /* offset of its first byte */
	bool cut;           /* it passed WAITCOND_LINE_MAX */
};

/* Called per line; returns true to stop (the line met the condition). */
typedef bool (*waitcond_line_fn)(void *ud, const char *line, size_t len, uint64_t off, bool cut);

/* Feed n bytes that start at output offset `off`. */
int waitcond_lines_feed(struct waitcond_lines *l, const uint8_t *p, size_t n, uint64_t off,
			waitcond_line_fn fn, void *ud);
/* The output ended: the last line, if it has no '\n'. */
int waitcond_lines_flush(struct waitcond_lines *l, waitcond_line_fn fn, void *ud);
void waitcond_lines_free(struct waitcond_lines *l);

#endif
