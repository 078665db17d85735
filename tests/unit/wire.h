/* SPDX-License-Identifier: Apache-2.0 */
/*
 * wire.h - RPCs to the real services from a unit test, without a network:
 * each call is a socketpair adopted as a connection (http/conn.c) and
 * driven with HTTP/1.1 Connect requests in JSON, through the real router,
 * rpc/connect.c and the service registered with wire_setup(). The loop is
 * run from here (ev_run without waiting), so children, worker jobs and
 * timers of the code under test advance while a test waits.
 *
 * Every wait is for an event, bounded by WIRE_HANG_S only to turn a hang
 * into a failure (tests/common.sh, HANG_S): a slow machine (or qemu-user)
 * makes a test slower, never red.
 */
#ifndef TESTS_UNIT_WIRE_H
#define TESTS_UNIT_WIRE_H

#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "base/loop.h"
#include "base/state.h"
#include "base/users.h"
#include "envd/router.h"
#include "http/conn.h"
#include "rpc/rpc.h"

#ifndef WIRE_HANG_S
#define WIRE_HANG_S 300
#endif
#define WIRE_CAP (1 << 20)

struct wire {
	int fd;
	size_t len;
	char buf[WIRE_CAP];   /* the raw response so far */
	char body[WIRE_CAP];  /* its body, decoded (wire_body) */
};

static char wire_passwd[] = "/tmp/envd-wire-passwd-XXXXXX";
static char wire_group[] = "/tmp/envd-wire-group-XXXXXX";

/* Users root (home /root) and user (home /home/user); no token; `svc`
 * registered (NULL: none). Call once per test, before any wire_open. */
static inline void wire_setup(const struct rpc_service *svc)
{
	int fd = mkstemp(wire_passwd);

	cr_assert_geq(fd, 0);
	dprintf(fd, "root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000::/home/user:/bin/sh\n");
	close(fd);
	fd = mkstemp(wire_group);
	cr_assert_geq(fd, 0);
	dprintf(fd, "root:x:0:\nuser:x:1000:\n");
	close(fd);
	users_passwd_path = wire_passwd;
	users_group_path = wire_group;
	state_token_clear();
	server_on_request = router_dispatch;
	if (svc)
		rpc_register(svc);
}

static inline void wire_teardown(void)
{
	unlink(wire_passwd);
	unlink(wire_group);
}

static inline double wire_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* One turn: the loop without waiting, then what the server sent. */
static inline void wire_turn(struct wire *w)
{
	ev_run(envd_loop, EVRUN_NOWAIT);
	if (!w) {
		usleep(1000);
		return;
	}
	for (;;) {
		ssize_t k = read(w->fd, w->buf + w->len, sizeof(w->buf) - 1 - w->len);

		if (k <= 0)
			break;
		w->len += (size_t)k;
	}
	w->buf[w->len] = '\0';
	struct pollfd pfd = { w->fd, POLLIN, 0 };
	poll(&pfd, 1, 1);
}

/* Run the loop until pred(ud); false if WIRE_HANG_S pass first. */
static inline bool wire_until(struct wire *w, bool (*pred)(void *ud), void *ud)
{
	double end = wire_now() + WIRE_HANG_S;

	while (!pred(ud)) {
		if (wire_now() > end)
			return false;
		wire_turn(w);
	}
	return true;
}

static inline struct wire *wire_open(void)
{
	struct wire *w = calloc(1, sizeof(*w));
	int sv[2];

	cr_assert_not_null(w);
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
	cr_assert_not_null(conn_adopt(sv[0], "test"));
	w->fd = sv[1];
	return w;
}

static inline void wire_close(struct wire *w)
{
	close(w->fd);
	/* The server side notices and frees the connection. */
	for (int i = 0; i < 5; i++)
		ev_run(envd_loop, EVRUN_NOWAIT);
	free(w);
}

static inline void wire_send(struct wire *w, const void *p, size_t n)
{
	const char *s = p;

	while (n > 0) {
		ssize_t k = write(w->fd, s, n);

		if (k < 0 && errno == EAGAIN) {
			wire_turn(NULL);
			continue;
		}
		cr_assert_gt(k, 0);
		s += k;
		n -= (size_t)k;
	}
}

/*
 * A Connect request in JSON: unary (`stream` false) or server-streaming
 * (one enveloped message). `auth` is an Authorization value or NULL.
 */
static inline void wire_request(struct wire *w, const char *path, const char *json, bool stream, const char *auth)
{
	char head[1024];
	size_t n = strlen(json);
	int k = snprintf(head, sizeof(head),
			 "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/%sjson\r\n%s%s%s"
			 "Content-Length: %zu\r\n\r\n",
			 path, stream ? "connect+" : "", auth ? "Authorization: " : "", auth ? auth : "",
			 auth ? "\r\n" : "", n + (stream ? 5 : 0));

	wire_send(w, head, (size_t)k);
	if (stream) {
		uint8_t env[5] = { 0, (uint8_t)(n >> 24), (uint8_t)(n >> 16), (uint8_t)(n >> 8), (uint8_t)n };
		wire_send(w, env, 5);
	}
	wire_send(w, json, n);
}

/* The HTTP status, or 0 while the head is not complete. */
static inline int wire_status(const struct wire *w)
{
	if (!strstr(w->buf, "\r\n\r\n") || strncmp(w->buf, "HTTP/1.1 ", 9) != 0)
		return 0;
	return atoi(w->buf + 9);
}

/* The body received so far, decoded (chunked or Content-Length); its
 * length, -1 while the head is not complete. *done: the body is whole. */
static inline long wire_body(struct wire *w, bool *done)
{
	const char *h = strstr(w->buf, "\r\n\r\n"), *p, *end = w->buf + w->len;
	size_t n = 0;

	*done = false;
	if (!h)
		return -1;
	p = h + 4;
	if (!strcasestr(w->buf, "transfer-encoding: chunked")) {
		const char *cl = strcasestr(w->buf, "content-length:");
		size_t want = cl && cl < h ? strtoul(cl + 15, NULL, 10) : 0;

		n = (size_t)(end - p) < want ? (size_t)(end - p) : want;
		memcpy(w->body, p, n);
		*done = n == want;
		return (long)n;
	}
	while (p < end) {
		char *q;
		size_t c = strtoul(p, &q, 16);

		if (q + 2 > end || q[0] != '\r')
			break;
		if (c == 0) {
			*done = true;
			break;
		}
		if ((size_t)(end - (q + 2)) < c)
			break;
		memcpy(w->body + n, q + 2, c);
		n += c;
		p = q + 2 + c + 2;
	}
	return (long)n;
}

/* The i-th enveloped message of a streaming response, parsed, with its
 * flags (2: the end of the stream); NULL while it has not come. */
static inline json_t *wire_envelope(struct wire *w, int i, int *flags)
{
	bool done;
	long n = wire_body(w, &done);
	size_t o = 0;

	for (int k = 0; n > 0 && o + 5 <= (size_t)n; k++) {
		const uint8_t *e = (const uint8_t *)w->body + o;
		size_t len = (size_t)e[1] << 24 | (size_t)e[2] << 16 | (size_t)e[3] << 8 | e[4];

		if (o + 5 + len > (size_t)n)
			break;
		if (k == i) {
			*flags = e[0];
			return json_loadb((const char *)e + 5, len, 0, NULL);
		}
		o += 5 + len;
	}
	return NULL;
}

struct wire_wait {
	struct wire *w;
	int i;
	int flags;
	json_t *msg;
};

static inline bool wire_got_envelope(void *ud)
{
	struct wire_wait *ww = ud;

	return (ww->msg = wire_envelope(ww->w, ww->i, &ww->flags)) != NULL;
}

/* Wait for the i-th message of a stream (a hang fails the test). */
static inline json_t *wire_next(struct wire *w, int i, int *flags)
{
	struct wire_wait ww = { .w = w, .i = i };

	cr_assert(wire_until(w, wire_got_envelope, &ww), "message %d of the stream never came: %s", i, w->buf);
	*flags = ww.flags;
	return ww.msg;
}

static inline bool wire_whole(void *ud)
{
	bool done;

	return wire_body(ud, &done) >= 0 && done;
}

/* A unary call: the HTTP status and the body parsed as JSON (a new ref). */
static inline json_t *wire_unary(const char *path, const char *json, const char *auth, int *status)
{
	struct wire *w = wire_open();
	json_t *out;
	bool done;
	long n;

	wire_request(w, path, json, false, auth);
	cr_assert(wire_until(w, wire_whole, w), "no answer to %s: %s", path, w->buf);
	*status = wire_status(w);
	n = wire_body(w, &done);
	out = json_loadb(w->body, (size_t)n, 0, NULL);
	cr_assert_not_null(out, "%s answered no JSON: %s", path, w->buf);
	wire_close(w);
	return out;
}

/* A string member of a JSON object by a dotted path ("error.code"), or NULL. */
static inline const char *wire_str(json_t *v, const char *dotted)
{
	char key[128];
	const char *p = dotted;

	while (v && *p) {
		size_t k = strcspn(p, ".");

		snprintf(key, sizeof(key), "%.*s", (int)k, p);
		v = json_object_get(v, key);
		p += k + (p[k] == '.');
	}
	return json_is_string(v) ? json_string_value(v) : NULL;
}

static inline json_int_t wire_int(json_t *v, const char *dotted)
{
	char key[128];
	const char *p = dotted;

	while (v && *p) {
		size_t k = strcspn(p, ".");

		snprintf(key, sizeof(key), "%.*s", (int)k, p);
		v = json_object_get(v, key);
		p += k + (p[k] == '.');
	}
	if (json_is_string(v)) /* 64-bit integers are strings in proto3 JSON */
		return strtoll(json_string_value(v), NULL, 10);
	return json_is_integer(v) ? json_integer_value(v) : -1;
}

#endif
