/* SPDX-License-Identifier: Apache-2.0 */
/*
 * portfwd.h - make loopback-only services reachable on the sandbox address
 * (docs/protocol.md, "Port forwarding"), inside envd and on its event loop.
 *
 * A scanner lists listening TCP sockets (netlink sock_diag; /proc/net/tcp*
 * when netlink is unavailable) every PORTFWD_SCAN_MS. For every port that
 * has a listener on exactly 127.0.0.1, ::ffff:127.0.0.1 or ::1, and no
 * wildcard or sandbox-address listener of its own, envd listens on
 * <sandbox address>:<port> and relays each accepted connection to the
 * loopback listener with splice(2) through one pipe per direction, so the
 * data never enters user space and each connection holds at most two pipe
 * buffers. Half-close is propagated with shutdown(SHUT_WR), errors with a
 * reset. A port whose listener is gone for PORTFWD_MISS_SCANS scans in a
 * row stops being forwarded (established relays carry on); when it comes
 * back it is forwarded again.
 *
 * Errors: 0 or a negative errno; failures after start-up are logged and
 * retried, never fatal.
 */
#ifndef ENVD_PORTFWD_H
#define ENVD_PORTFWD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/*
 * Scan periods. While the sandbox is active (a process was started or
 * written to, or the listeners changed, within PORTFWD_HOT_S) the scan
 * runs every PORTFWD_SCAN_MS, so a server started through envd is
 * forwarded within that; after that the period doubles each scan that
 * finds nothing new, up to PORTFWD_IDLE_MS. An idle sandbox then wakes
 * once a second instead of twenty times (under software emulation the
 * scans were most of an idle guest's CPU).
 */
#define PORTFWD_SCAN_MS 50
#define PORTFWD_IDLE_MS 1000
#define PORTFWD_HOT_S 30
/* Consecutive scans a listener must be missing before its forward closes:
 * one lost scan must not cut a port off (the reference's forwarder tore
 * every forward down on a single /proc read error). */
#define PORTFWD_MISS_SCANS 3
/* Bounds: forwarded ports and concurrent relayed connections. */
#define PORTFWD_MAX_FORWARDS 1024
#define PORTFWD_MAX_RELAYS 4096
/* Listening sockets considered per scan (the rest are ignored). */
#define PORTFWD_MAX_SOCKS 8192

/* One listening socket as the scanner saw it. */
struct portfwd_sock {
	uint8_t family;   /* AF_INET or AF_INET6 */
	uint8_t addr[16]; /* network order; AF_INET uses the first 4 bytes */
	uint16_t port;    /* host order */
};

/* A port to forward and the loopback family to connect to. */
struct portfwd_want {
	uint16_t port;
	uint8_t target_family; /* AF_INET: 127.0.0.1, AF_INET6: ::1 */
};

/*
 * Start forwarding on envd_loop. sandbox_addr is a numeric IPv4 or IPv6
 * address; own_port (envd's own listener) is never forwarded. Returns 0,
 * -EINVAL for a bad address, -EALREADY when running, or -errno when the
 * scan timer cannot be set up. Failures to bind a forward later are logged
 * and retried with back-off, never fatal.
 */
int portfwd_start(const char *sandbox_addr, int own_port);

/* Close every forward listener and relay (for tests and shutdown). */
void portfwd_stop(void);

/* The sandbox is active: scan at the fast pace for PORTFWD_HOT_S. */
void portfwd_kick(void);

/*
 * After every successful scan, fn (NULL: none) gets every listening TCP
 * socket it found, envd's own forward listeners among them
 * (portfwd_is_own tells them apart). Other layers learn of listeners
 * through it (WaitFor's port condition) without a scanner of their own.
 */
void portfwd_on_scan(void (*fn)(const struct portfwd_sock *socks, size_t n));
/* s is the listener of one of envd's own forwards (during on_scan). */
bool portfwd_is_own(const struct portfwd_sock *s);

/* Number of ports currently listening on the sandbox address. */
size_t portfwd_active_forwards(void);

/* Number of relayed connections currently open. */
size_t portfwd_active_relays(void);

/* ---- live upgrade: forward listeners are inherited across execve ---- */

/*
 * The forwards' part of the hand-over record (base/handover.h): each
 * forward's listener on the sandbox address, and each relayed connection
 * (both sockets, the pipe of each direction with the bytes in it, EOF and
 * shutdown per direction), all kept across the exec. The restore runs
 * after portfwd_start and takes them over; a listener that cannot be is
 * closed (the scanner forwards its port again within a period), a relay
 * that cannot be is closed rather than leaked.
 */
struct handover;
void portfwd_handover_save(struct handover *h);
void portfwd_handover_restore(struct handover *h);

/* ---- scanning, exposed for unit tests ---- */

/*
 * Parse the text of /proc/net/tcp (family AF_INET) or /proc/net/tcp6
 * (AF_INET6) and append every LISTEN socket to out[*n..max). Lines that do
 * not parse are skipped; the header is optional. Returns the number of
 * sockets appended, or -EINVAL for a bad family.
 */
int portfwd_parse_proc(const char *text, size_t len, int family, struct portfwd_sock *out,
		       size_t max, size_t *n);

/*
 * Parse one recv() buffer of a SOCK_DIAG_BY_FAMILY dump and append the
 * sockets to out[*n..max). Sets *done at NLMSG_DONE. Returns 0, -EPROTO for
 * a truncated or malformed message, or the negative errno of an
 * NLMSG_ERROR.
 */
int portfwd_parse_diag(const void *buf, size_t len, struct portfwd_sock *out, size_t max,
		       size_t *n, bool *done);

/* True for 127.0.0.1, ::ffff:127.0.0.1 and ::1 (exactly, as the reference). */
bool portfwd_is_loopback(const struct portfwd_sock *s);

/*
 * Decide which ports to forward. socks: every listener seen. sandbox: the
 * sandbox address (family and addr used). ours: bitmap of ports we already
 * forward (their sandbox-address listeners are ours, not a service's), may
 * be NULL. A port is wanted when it has a loopback listener, is not
 * own_port, and has no wildcard or foreign sandbox-address listener.
 * Fills out[0..max) sorted by port and returns the count.
 */
size_t portfwd_select(const struct portfwd_sock *socks, size_t n, const struct portfwd_sock *sandbox,
		      uint16_t own_port, const uint64_t *ours, struct portfwd_want *out, size_t max);

#endif
