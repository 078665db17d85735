/* SPDX-License-Identifier: Apache-2.0 */
/*
 * waitfor.h - process.Process/WaitFor (docs/protocol.md, "WaitFor"): a
 * unary call that returns as soon as its condition holds, or ends with
 * deadline_exceeded saying what it saw last. The conditions (waitcond.h):
 *
 *   port    a TCP listener on the port: told by the sandbox layer's port
 *           scanner after each scan (waitfor_ports_*); a new waiter asks
 *           it for its fast pace (the hook installed with
 *           waitfor_port_source), which it keeps for a while as after a
 *           Start;
 *   http    the port first, then GET http://127.0.0.1:PORT/PATH on a
 *           non-blocking socket of the loop, again after 50 ms doubling to
 *           1 s while the status is not in range (nothing tells when an
 *           application becomes ready; a refused connection goes back to
 *           waiting for the port);
 *   output  a line of a process's output (process_watch: each append to
 *           its ring), with the agent tools' regular expressions
 *           (search/pattern.h, PCRE2); output already in the ring counts;
 *   exit    the process's end (process_watch);
 *   path    inotify on the deepest directory of the path that exists,
 *           moved down as components appear; every look at the path runs
 *           in a worker job of its mount (a hung mount holds only that
 *           waiter).
 *
 * Nothing polls but the HTTP condition once its port listens: an idle
 * waiter is a timer, an entry on a list, or an inotify watch.
 *
 * Errors: invalid_argument for a bad condition (waitcond_parse),
 * not_found for an unknown process, failed_precondition when the
 * condition can no longer hold (the process ended without a matching
 * line) or cannot be watched (no port scanner), resource_exhausted past
 * WAITFOR_MAX waiters, deadline_exceeded with what it saw last. Everything
 * runs on envd_loop.
 */
#ifndef PROCESS_WAITFOR_H
#define PROCESS_WAITFOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rpc/rpc.h"

/* Waiters at once (each a small struct; a path waiter also a path). */
#define WAITFOR_MAX 4096
/* One HTTP attempt's bound, and the pause between attempts. */
#define WAITFOR_HTTP_ATTEMPT_S 5.0
#define WAITFOR_HTTP_RETRY_MIN_MS 50
#define WAITFOR_HTTP_RETRY_MAX_MS 1000

/* The RPC's handler (process_service.c's method table). */
void waitfor_start(struct rpc_call *call, const ProtobufCMessage *msg);

/* Waiters now (tests, metrics). */
size_t waitfor_count(void);

/*
 * The port source, installed by the layer that scans listeners (without
 * one, port and HTTP conditions fail with failed_precondition). `kick`
 * asks it for a scan soon and at its fast pace.
 */
void waitfor_port_source(void (*kick)(void));
/* True while a waiter waits for a port: a scan must tell what it found. */
bool waitfor_wants_ports(void);
/* After a scan: begin, every listening TCP socket seen (family AF_INET or
 * AF_INET6, the address in network order, the port), end. */
void waitfor_ports_begin(void);
void waitfor_port_seen(int family, const uint8_t addr[16], uint16_t port);
void waitfor_ports_end(void);

#endif
