/* SPDX-License-Identifier: Apache-2.0 */
/*
 * server_test.c - the server spine without a network: a socketpair is
 * adopted as a connection and driven with raw HTTP/1.1 bytes or an
 * nghttp2 client session, through the real conn, h1, h2, router and
 * Connect layers. A test service (on the process.Process descriptor)
 * exercises unimplemented methods, async replies, streams and deadlines.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nghttp2/nghttp2.h>
#include <zlib.h>

#include "http/conn.h"
#include "http/http.h"
#include "base/loop.h"
#include "process.pb-c.h"
#include "envd/router.h"
#include "rpc/rpc.h"
#include "base/state.h"
#include "base/users.h"

/* ---- a test service on the process.Process descriptor ---- */

static int cancels;
static enum rpc_code last_cancel;

static void on_cancel(struct rpc_call *call, enum rpc_code why)
{
	cancels++;
	last_cancel = why;
}

static const struct rpc_call_hooks hang_hooks = {.on_cancel = on_cancel};

/* List: answers with one process whose pid is 42. */
static void t_list(struct rpc_call *call, const ProtobufCMessage *req)
{
	Process__ListResponse resp = PROCESS__LIST_RESPONSE__INIT;
	Process__ProcessInfo info = PROCESS__PROCESS_INFO__INIT;
	Process__ProcessInfo *infos[1] = {&info};
	Process__ProcessConfig cfg = PROCESS__PROCESS_CONFIG__INIT;
	cfg.cmd = "echo";
	info.config = &cfg;
	info.pid = 42;
	resp.n_processes = 1;
	resp.processes = infos;
	rpc_reply(call, &resp.base);
}

/* Connect: sends a start event and then never finishes (deadline tests). */
static void t_connect(struct rpc_call *call, const ProtobufCMessage *req)
{
	Process__ConnectResponse resp = PROCESS__CONNECT_RESPONSE__INIT;
	Process__ProcessEvent ev = PROCESS__PROCESS_EVENT__INIT;
	Process__ProcessEvent__StartEvent st = PROCESS__PROCESS_EVENT__START_EVENT__INIT;
	const Process__ConnectRequest *rq = (const Process__ConnectRequest *)req;
	st.pid = rq->process ? rq->process->pid : 0;
	ev.event_case = PROCESS__PROCESS_EVENT__EVENT_START;
	ev.start = &st;
	resp.event = &ev;
	rpc_call_set_hooks(call, &hang_hooks, NULL);
	rpc_send(call, &resp.base);
}

/* SendSignal: not_found with the pid in the message. */
static void t_signal(struct rpc_call *call, const ProtobufCMessage *req)
{
	const Process__SendSignalRequest *rq = (const Process__SendSignalRequest *)req;
	rpc_fail(call, RPC_NOT_FOUND, "process with pid %u not found", rq->process ? rq->process->pid : 0);
}

/* StreamInput: counts messages, replies at the end of input. */
static int stream_msgs;
static void si_message(struct rpc_call *call, const ProtobufCMessage *msg) { stream_msgs++; }
static void si_end(struct rpc_call *call)
{
	Process__StreamInputResponse resp = PROCESS__STREAM_INPUT_RESPONSE__INIT;
	rpc_reply(call, &resp.base);
}
static const struct rpc_call_hooks si_hooks = {.on_message = si_message, .on_input_end = si_end};
static void t_stream_input(struct rpc_call *call, const ProtobufCMessage *req)
{
	rpc_call_set_hooks(call, &si_hooks, NULL);
}

static const struct rpc_method_impl test_methods[] = {
	{"List", RPC_UNARY, t_list},
	{"Connect", RPC_SERVER_STREAM, t_connect},
	{"Start", RPC_SERVER_STREAM, NULL},
	{"Update", RPC_UNARY, NULL},
	{"StreamInput", RPC_CLIENT_STREAM, t_stream_input},
	{"SendInput", RPC_UNARY, NULL},
	{"SendSignal", RPC_UNARY, t_signal},
	{"CloseStdin", RPC_UNARY, NULL},
};
static const struct rpc_service test_service = {&process__process__descriptor, test_methods, 8};

/* ---- harness ---- */

static int client = -1;
static char passwd_path[] = "/tmp/envd-server-test-passwd-XXXXXX";
static char group_path[] = "/tmp/envd-server-test-group-XXXXXX";

static void setup(void)
{
	static bool registered;
	int sv[2];
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
	server_on_request = router_dispatch;
	cr_assert_not_null(conn_adopt(sv[0], "test"));
	client = sv[1];
	if (!registered) {
		rpc_register(&test_service);
		registered = true;
	}
	int fd = mkstemp(passwd_path);
	dprintf(fd, "root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000::/home/user:/bin/sh\n");
	close(fd);
	fd = mkstemp(group_path);
	dprintf(fd, "root:x:0:\nuser:x:1000:\n");
	close(fd);
	users_passwd_path = passwd_path;
	users_group_path = group_path;
	state_token_clear();
	cancels = 0;
	stream_msgs = 0;
}

static void teardown(void)
{
	close(client);
	/* Let the server side notice the close and free the connection. */
	for (int i = 0; i < 5; i++)
		ev_run(envd_loop, EVRUN_NOWAIT);
	unlink(passwd_path);
	unlink(group_path);
	strcpy(passwd_path, "/tmp/envd-server-test-passwd-XXXXXX");
	strcpy(group_path, "/tmp/envd-server-test-group-XXXXXX");
}

static void send_all(const void *p, size_t n)
{
	const char *s = p;
	while (n > 0) {
		ssize_t k = write(client, s, n);
		if (k < 0 && errno == EAGAIN) {
			ev_run(envd_loop, EVRUN_NOWAIT);
			continue;
		}
		cr_assert(k > 0);
		s += k;
		n -= (size_t)k;
	}
}

/* Run the loop and collect output until `ms` pass with nothing new. */
static size_t pump(char *out, size_t cap, int ms)
{
	size_t len = 0;
	int quiet = 0;
	while (quiet < ms && len + 1 < cap) {
		ev_run(envd_loop, EVRUN_NOWAIT);
		ssize_t k = read(client, out + len, cap - 1 - len);
		if (k > 0) {
			len += (size_t)k;
			quiet = 0;
			continue;
		}
		if (k == 0)
			break;
		struct pollfd pfd = {client, POLLIN, 0};
		poll(&pfd, 1, 1);
		quiet++;
	}
	out[len] = '\0';
	return len;
}

static char *exchange(const char *req)
{
	static char buf[1 << 16];
	send_all(req, strlen(req));
	pump(buf, sizeof(buf), 30);
	return buf;
}

TestSuite(server, .init = setup, .fini = teardown);

/* ---- HTTP/1.1 ---- */

Test(server, health_keep_alive)
{
	char *r = exchange("GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
	cr_assert(strncmp(r, "HTTP/1.1 204 No Content\r\n", 25) == 0, "%s", r);
	cr_assert(strstr(r, "Cache-Control: no-store\r\n"));
	cr_assert(strstr(r, "Date: "));
	cr_assert_null(strstr(r, "Connection: close"));
	r = exchange("GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
	cr_assert(strncmp(r, "HTTP/1.1 204", 12) == 0, "second request on the same connection: %s", r);
}

Test(server, pipelined_in_order)
{
	char *r = exchange("GET /nope HTTP/1.1\r\n\r\nGET /health HTTP/1.1\r\n\r\nPOST /health HTTP/1.1\r\n\r\n");
	char *a = strstr(r, "HTTP/1.1 404"), *b = strstr(r, "HTTP/1.1 204"), *c = strstr(r, "HTTP/1.1 405");
	cr_assert(a && b && c && a < b && b < c, "%s", r);
	cr_assert(strstr(r, "404 page not found\n"));
	cr_assert(strstr(r, "Allow: GET\r\n"));
}

Test(server, malformed_request_400_and_close)
{
	char *r = exchange("NOT A REQUEST\r\n\r\n");
	cr_assert(strncmp(r, "HTTP/1.1 400", 12) == 0, "%s", r);
	cr_assert(strstr(r, "Connection: close"));
}

Test(server, oversized_head_431)
{
	static char req[80000];
	size_t k = (size_t)snprintf(req, sizeof(req), "GET /health HTTP/1.1\r\nX-Big: ");
	memset(req + k, 'a', 70000);
	strcpy(req + k + 70000, "\r\n\r\n");
	char *r = exchange(req);
	cr_assert(strncmp(r, "HTTP/1.1 431", 12) == 0, "%.100s", r);
}

Test(server, chunked_request_and_100_continue)
{
	char *r = exchange("POST /process.Process/List HTTP/1.1\r\nContent-Type: application/json\r\n"
			   "Expect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n{\r\n1\r\n}\r\n0\r\n\r\n");
	cr_assert(strncmp(r, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK", 40) == 0, "%s", r);
	cr_assert(strstr(r, "{\"processes\":[{\"config\":{\"cmd\":\"echo\"},\"pid\":42}]}"), "%s", r);
}

Test(server, broken_chunk_400)
{
	char *r = exchange("POST /process.Process/List HTTP/1.1\r\nContent-Type: application/json\r\n"
			   "Transfer-Encoding: chunked\r\n\r\nzz\r\n");
	cr_assert(strncmp(r, "HTTP/1.1 400", 12) == 0, "%s", r);
}

Test(server, http10_close_delimited)
{
	char *r = exchange("GET /nope HTTP/1.0\r\n\r\n");
	cr_assert(strncmp(r, "HTTP/1.0 404", 12) == 0, "%s", r);
	cr_assert(strstr(r, "Connection: close"));
}

/* ---- router ---- */

Test(server, cors_preflight)
{
	char *r = exchange("OPTIONS /files HTTP/1.1\r\nOrigin: http://a\r\nAccess-Control-Request-Method: PUT\r\n"
			   "Access-Control-Request-Headers: x-a\r\n\r\n");
	cr_assert(strncmp(r, "HTTP/1.1 204", 12) == 0, "%s", r);
	cr_assert(strstr(r, "Access-Control-Allow-Methods: PUT\r\n"));
	cr_assert(strstr(r, "Access-Control-Allow-Headers: x-a\r\n"));
	cr_assert(strstr(r, "Vary: Origin, Access-Control-Request-Method, Access-Control-Request-Headers\r\n"));
}

Test(server, preflight_without_origin_has_no_allow_headers)
{
	char *r = exchange("OPTIONS /x HTTP/1.1\r\nAccess-Control-Request-Method: GET\r\n\r\n");
	cr_assert(strncmp(r, "HTTP/1.1 204", 12) == 0, "%s", r);
	cr_assert_null(strstr(r, "Access-Control-Allow-Origin"));
}

Test(server, token_gate)
{
	state_token_set("sekret", 6);
	char *r = exchange("POST /process.Process/List HTTP/1.1\r\nContent-Type: application/json\r\n"
			   "Content-Length: 2\r\n\r\n{}");
	cr_assert(strncmp(r, "HTTP/1.1 401", 12) == 0, "%s", r);
	cr_assert(strstr(r, "{\"code\":401,\"message\":\"unauthorized access, please provide a valid access token "
			    "or method signing if supported\"}\n"), "%s", r);
	r = exchange("POST /process.Process/List HTTP/1.1\r\nContent-Type: application/json\r\n"
		     "X-Access-Token: sekret\r\nContent-Length: 2\r\n\r\n{}");
	cr_assert(strncmp(r, "HTTP/1.1 200", 12) == 0, "%s", r);
	r = exchange("GET /health HTTP/1.1\r\n\r\n");
	cr_assert(strncmp(r, "HTTP/1.1 204", 12) == 0, "health is excluded: %s", r);
	r = exchange("GET //health HTTP/1.1\r\n\r\n");
	cr_assert(strncmp(r, "HTTP/1.1 401", 12) == 0, "exact-path exclusion only: %s", r);
}

Test(server, basic_auth_unknown_user)
{
	/* "ghost:" */
	char *r = exchange("GET /health HTTP/1.1\r\nAuthorization: Basic Z2hvc3Q6\r\n\r\n");
	cr_assert(strncmp(r, "HTTP/1.1 401", 12) == 0, "%s", r);
	cr_assert(strstr(r, "{\"code\":\"unauthenticated\",\"message\":\"invalid username: 'ghost'\"}"), "%s", r);
	/* "user:" is known */
	r = exchange("GET /health HTTP/1.1\r\nAuthorization: Basic dXNlcjo=\r\n\r\n");
	cr_assert(strncmp(r, "HTTP/1.1 204", 12) == 0, "%s", r);
	/* unpadded base64 is ignored, like Go's StdEncoding */
	r = exchange("GET /health HTTP/1.1\r\nAuthorization: Basic Z2hvc3Q6x\r\n\r\n");
	cr_assert(strncmp(r, "HTTP/1.1 204", 12) == 0, "%s", r);
}

Test(server, basic_user_parse)
{
	char u[64];
	cr_assert_eq(router_basic_user("Basic cm9vdDo=", u, sizeof(u)), 1);
	cr_assert_str_eq(u, "root");
	cr_assert_eq(router_basic_user("basic cm9vdDpwdw==", u, sizeof(u)), 1);
	cr_assert_str_eq(u, "root");
	cr_assert_eq(router_basic_user("Basic cm9vdA==", u, sizeof(u)), 0, "no colon");
	cr_assert_eq(router_basic_user("Bearer x", u, sizeof(u)), 0);
	cr_assert_eq(router_basic_user(NULL, u, sizeof(u)), 0);
}

/* ---- Connect ---- */

Test(server, unimplemented_unary)
{
	char *r = exchange("POST /process.Process/Update HTTP/1.1\r\nContent-Type: application/json\r\n"
			   "Content-Length: 2\r\n\r\n{}");
	cr_assert(strncmp(r, "HTTP/1.1 501", 12) == 0, "%s", r);
	cr_assert(strstr(r, "{\"code\":\"unimplemented\",\"message\":\"process.Process.Update is not implemented\"}"),
		  "%s", r);
}

Test(server, unimplemented_stream_is_200_end_stream)
{
	char req[256];
	int k = snprintf(req, sizeof(req), "POST /process.Process/Start HTTP/1.1\r\nContent-Type: application/connect+json\r\n"
					     "Content-Length: 7\r\n\r\n");
	memcpy(req + k, "\0\0\0\0\2{}", 7);
	send_all(req, (size_t)k + 7);
	static char buf[4096];
	size_t n = pump(buf, sizeof(buf), 30);
	cr_assert(strncmp(buf, "HTTP/1.1 200", 12) == 0, "%s", buf);
	cr_assert(strstr(buf, "Content-Type: application/connect+json\r\n"));
	char *body = strstr(buf, "\r\n\r\n");
	cr_assert_not_null(body);
	cr_assert(memmem(body, n - (size_t)(body - buf), "\x02\x00\x00\x00", 4), "end-stream flag");
	const char *want = "\"code\":\"unimplemented\"";
	cr_assert(memmem(body, n - (size_t)(body - buf), want, strlen(want)));
}

Test(server, unary_error_mapping)
{
	char req[512];
	const char *body = "{\"process\":{\"pid\":7},\"signal\":\"SIGNAL_SIGKILL\"}";
	snprintf(req, sizeof(req), "POST /process.Process/SendSignal HTTP/1.1\r\nContent-Type: application/json\r\n"
				   "Content-Length: %zu\r\n\r\n%s", strlen(body), body);
	char *r = exchange(req);
	cr_assert(strncmp(r, "HTTP/1.1 404", 12) == 0, "%s", r);
	cr_assert(strstr(r, "{\"code\":\"not_found\",\"message\":\"process with pid 7 not found\"}"), "%s", r);
}

Test(server, proto_codec_and_content_type_echo)
{
	/* ListRequest is empty: an empty proto body is a valid message. */
	char *r = exchange("POST /process.Process/List HTTP/1.1\r\nContent-Type: application/proto\r\n"
			   "Content-Length: 0\r\n\r\n");
	cr_assert(strncmp(r, "HTTP/1.1 200", 12) == 0, "%s", r);
	cr_assert(strstr(r, "Content-Type: application/proto\r\n"));
	/* processes{config{cmd:"echo"} pid:42} */
	cr_assert(strstr(r, "\x0a\x0a\x0a\x06\x0a\x04" "echo\x10\x2a"), "binary body");
}

Test(server, wrong_kind_content_type_415)
{
	char *r = exchange("POST /process.Process/Connect HTTP/1.1\r\nContent-Type: application/json\r\n"
			   "Content-Length: 2\r\n\r\n{}");
	cr_assert(strncmp(r, "HTTP/1.1 415", 12) == 0, "%s", r);
	cr_assert(strstr(r, "Accept-Post: application/connect+json"));
}

Test(server, protocol_version_must_be_1)
{
	char *r = exchange("POST /process.Process/List HTTP/1.1\r\nContent-Type: application/json\r\n"
			   "Connect-Protocol-Version: 2\r\nContent-Length: 2\r\n\r\n{}");
	cr_assert(strncmp(r, "HTTP/1.1 400", 12) == 0, "%s", r);
	cr_assert(strstr(r, "invalid_argument"));
}

Test(server, gzip_request_and_response)
{
	char json[] = "{}";
	uint8_t z[64];
	z_stream s = {0};
	deflateInit2(&s, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
	s.next_in = (Bytef *)json;
	s.avail_in = 2;
	s.next_out = z;
	s.avail_out = sizeof(z);
	deflate(&s, Z_FINISH);
	size_t zn = sizeof(z) - s.avail_out;
	deflateEnd(&s);
	char req[512];
	int k = snprintf(req, sizeof(req), "POST /process.Process/List HTTP/1.1\r\nContent-Type: application/json\r\n"
					     "Content-Encoding: gzip\r\nContent-Length: %zu\r\n\r\n", zn);
	memcpy(req + k, z, zn);
	send_all(req, (size_t)k + zn);
	static char buf[4096];
	size_t n = pump(buf, sizeof(buf), 30);
	cr_assert(strncmp(buf, "HTTP/1.1 200", 12) == 0, "%s", buf);
	cr_assert(strstr(buf, "Content-Encoding: gzip\r\n"), "answered in kind");
	char *body = strstr(buf, "\r\n\r\n") + 4;
	char plain[256];
	z_stream d = {0};
	inflateInit2(&d, 16 + MAX_WBITS);
	d.next_in = (Bytef *)body;
	d.avail_in = (uInt)(n - (size_t)(body - buf));
	d.next_out = (Bytef *)plain;
	d.avail_out = sizeof(plain) - 1;
	cr_assert_eq(inflate(&d, Z_FINISH), Z_STREAM_END);
	plain[sizeof(plain) - 1 - d.avail_out] = '\0';
	inflateEnd(&d);
	cr_assert(strstr(plain, "\"pid\":42"), "%s", plain);
}

Test(server, deadline_ends_stream_and_cancels_handler)
{
	char req[256];
	const char *msg = "{\"process\":{\"pid\":5}}";
	int k = snprintf(req, sizeof(req), "POST /process.Process/Connect HTTP/1.1\r\nContent-Type: application/connect+json\r\n"
					     "Connect-Timeout-Ms: 50\r\nContent-Length: %zu\r\n\r\n", strlen(msg) + 5);
	size_t ml = strlen(msg);
	uint8_t env[5] = {0, 0, 0, 0, (uint8_t)ml};
	memcpy(req + k, env, 5);
	memcpy(req + k + 5, msg, ml);
	send_all(req, (size_t)k + 5 + ml);
	static char buf[4096];
	size_t n = pump(buf, sizeof(buf), 200);
	cr_assert(memmem(buf, n, "{\"event\":{\"start\":{\"pid\":5}}}", 29), "start event first");
	const char *want = "{\"error\":{\"code\":\"deadline_exceeded\",\"message\":\"context deadline exceeded\"}}";
	cr_assert(memmem(buf, n, want, strlen(want)), "deadline end-stream");
	cr_assert(memmem(buf, n, "\r\n0\r\n\r\n", 7), "chunked body terminated");
	cr_assert_eq(cancels, 1);
	cr_assert_eq(last_cancel, RPC_DEADLINE_EXCEEDED);
}

Test(server, client_gone_cancels_stream)
{
	char req[256];
	const char *msg = "{}";
	int k = snprintf(req, sizeof(req), "POST /process.Process/Connect HTTP/1.1\r\nContent-Type: application/connect+json\r\n"
					     "Content-Length: 7\r\n\r\n");
	memcpy(req + k, "\0\0\0\0\2", 5);
	memcpy(req + k + 5, msg, 2);
	send_all(req, (size_t)k + 7);
	static char buf[4096];
	pump(buf, sizeof(buf), 20);
	shutdown(client, SHUT_RDWR);
	for (int i = 0; i < 10; i++)
		ev_run(envd_loop, EVRUN_NOWAIT);
	cr_assert_eq(cancels, 1);
	cr_assert_eq(last_cancel, RPC_CANCELED);
}

Test(server, client_stream_over_chunked_http1)
{
	/* Three StreamInputRequest envelopes of "{}", sent one chunk each. */
	char *r;
	const char *head = "POST /process.Process/StreamInput HTTP/1.1\r\nContent-Type: application/connect+json\r\n"
			   "Transfer-Encoding: chunked\r\n\r\n";
	send_all(head, strlen(head));
	for (int i = 0; i < 3; i++)
		send_all("7\r\n\0\0\0\0\2{}\r\n", 12);
	static char buf[4096];
	pump(buf, sizeof(buf), 20);
	cr_assert_eq(stream_msgs, 3, "messages are delivered as they arrive");
	send_all("0\r\n\r\n", 5);
	size_t n = pump(buf, sizeof(buf), 30);
	r = buf;
	cr_assert(strncmp(r, "HTTP/1.1 200", 12) == 0, "%s", r);
	cr_assert(memmem(r, n, "7\r\n\0\0\0\0\x02{}\r\n", 12), "one response message, one chunk");
	cr_assert(memmem(r, n, "7\r\n\x02\0\0\0\x02{}\r\n0\r\n\r\n", 17), "end-stream {} then the last chunk");
}

Test(server, multiple_messages_on_server_stream_rejected)
{
	char req[256];
	int k = snprintf(req, sizeof(req), "POST /process.Process/Connect HTTP/1.1\r\nContent-Type: application/connect+json\r\n"
					     "Content-Length: 14\r\n\r\n");
	memcpy(req + k, "\0\0\0\0\2{}\0\0\0\0\2{}", 14);
	send_all(req, (size_t)k + 14);
	static char buf[4096];
	size_t n = pump(buf, sizeof(buf), 30);
	cr_assert(memmem(buf, n, "unary request has multiple messages", 35), "%s", buf);
}

/* ---- HTTP/2 with an nghttp2 client ---- */

struct h2c {
	nghttp2_session *s;
	int status;
	char body[4096];
	size_t body_len;
	bool closed;
	char grpc_status[8];
};

static ssize_t h2c_send(nghttp2_session *s, const uint8_t *d, size_t n, int f, void *ud)
{
	send_all(d, n);
	return (ssize_t)n;
}
static int h2c_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name, size_t nl,
		      const uint8_t *value, size_t vl, uint8_t fl, void *ud)
{
	struct h2c *c = ud;
	if (nl == 7 && memcmp(name, ":status", 7) == 0)
		c->status = atoi((const char *)value);
	if (nl == 11 && memcmp(name, "grpc-status", 11) == 0)
		snprintf(c->grpc_status, sizeof(c->grpc_status), "%.*s", (int)vl, value);
	return 0;
}
static int h2c_data(nghttp2_session *s, uint8_t fl, int32_t id, const uint8_t *d, size_t n, void *ud)
{
	struct h2c *c = ud;
	if (c->body_len + n < sizeof(c->body)) {
		memcpy(c->body + c->body_len, d, n);
		c->body_len += n;
	}
	return 0;
}
static int h2c_close(nghttp2_session *s, int32_t id, uint32_t e, void *ud)
{
	((struct h2c *)ud)->closed = true;
	return 0;
}

struct body_src {
	const uint8_t *p;
	size_t n;
};
static ssize_t body_read(nghttp2_session *s, int32_t id, uint8_t *buf, size_t len, uint32_t *flags,
			 nghttp2_data_source *src, void *ud)
{
	struct body_src *b = src->ptr;
	size_t k = b->n < len ? b->n : len;
	memcpy(buf, b->p, k);
	b->p += k;
	b->n -= k;
	if (b->n == 0)
		*flags |= NGHTTP2_DATA_FLAG_EOF;
	return (ssize_t)k;
}

static void h2_request(struct h2c *c, const char *method, const char *path, const char *ctype, const void *body,
		       size_t blen)
{
	nghttp2_session_callbacks *cb;
	nghttp2_session_callbacks_new(&cb);
	nghttp2_session_callbacks_set_send_callback(cb, h2c_send);
	nghttp2_session_callbacks_set_on_header_callback(cb, h2c_header);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, h2c_data);
	nghttp2_session_callbacks_set_on_stream_close_callback(cb, h2c_close);
	nghttp2_session_client_new(&c->s, cb, c);
	nghttp2_session_callbacks_del(cb);
	nghttp2_submit_settings(c->s, NGHTTP2_FLAG_NONE, NULL, 0);
	nghttp2_nv nv[5] = {
		{(uint8_t *)":method", (uint8_t *)method, 7, strlen(method), 0},
		{(uint8_t *)":path", (uint8_t *)path, 5, strlen(path), 0},
		{(uint8_t *)":scheme", (uint8_t *)"http", 7, 4, 0},
		{(uint8_t *)":authority", (uint8_t *)"x", 10, 1, 0},
		{(uint8_t *)"content-type", (uint8_t *)ctype, 12, strlen(ctype), 0},
	};
	struct body_src src = {body, blen};
	nghttp2_data_provider prd = {.source.ptr = &src, .read_callback = body_read};
	nghttp2_submit_request(c->s, NULL, nv, 5, body ? &prd : NULL, NULL);
	for (int i = 0; i < 2000 && !c->closed; i++) {
		nghttp2_session_send(c->s);
		ev_run(envd_loop, EVRUN_NOWAIT);
		uint8_t buf[16384];
		ssize_t k = read(client, buf, sizeof(buf));
		if (k > 0)
			nghttp2_session_mem_recv(c->s, buf, (size_t)k);
		else
			usleep(500);
	}
	nghttp2_session_del(c->s);
}

Test(server, h2_prior_knowledge_health)
{
	struct h2c c = {0};
	h2_request(&c, "GET", "/health", "text/plain", NULL, 0);
	cr_assert(c.closed);
	cr_assert_eq(c.status, 204);
}

Test(server, h2_connect_unary)
{
	struct h2c c = {0};
	h2_request(&c, "POST", "/process.Process/List", "application/json", "{}", 2);
	cr_assert_eq(c.status, 200);
	c.body[c.body_len] = '\0';
	cr_assert(strstr(c.body, "\"pid\":42"), "%s", c.body);
}

Test(server, h2_grpc_error_trailers_only)
{
	/* SendSignal{process{pid:9}} */
	uint8_t msg[] = {0, 0, 0, 0, 4, 0x0a, 0x02, 0x08, 0x09};
	struct h2c c = {0};
	h2_request(&c, "POST", "/process.Process/SendSignal", "application/grpc", msg, sizeof(msg));
	cr_assert_eq(c.status, 200);
	cr_assert_str_eq(c.grpc_status, "5");
}

Test(server, h2_grpc_unary_ok_with_trailer)
{
	uint8_t msg[] = {0, 0, 0, 0, 0};
	struct h2c c = {0};
	h2_request(&c, "POST", "/process.Process/List", "application/grpc+proto", msg, sizeof(msg));
	cr_assert_eq(c.status, 200);
	cr_assert_str_eq(c.grpc_status, "0");
	cr_assert(c.body_len > 5 && c.body[0] == 0, "one uncompressed message envelope");
}

/* ---- helpers ---- */

Test(http, query_decoding)
{
	char v[64];
	cr_assert_eq(http_query_get("path=%2Fa%20b&username=u", "path", v, sizeof(v)), 1);
	cr_assert_str_eq(v, "/a b");
	cr_assert_eq(http_query_get("path=a+b", "path", v, sizeof(v)), 1);
	cr_assert_str_eq(v, "a b");
	cr_assert_eq(http_query_get("path=%zz&x=1", "path", v, sizeof(v)), 0, "malformed pair dropped");
	cr_assert_eq(http_query_get("path=a;b", "path", v, sizeof(v)), 0, "';' pair dropped");
	cr_assert_eq(http_query_get("path=1&path=2", "path", v, sizeof(v)), 2);
	cr_assert_str_eq(v, "1");
	cr_assert_eq(http_query_get("", "path", v, sizeof(v)), 0);
	cr_assert_eq(http_query_get("path", "path", v, sizeof(v)), 1);
	cr_assert_str_eq(v, "");
}

Test(http, connect_codes)
{
	cr_assert_str_eq(rpc_code_name(RPC_NOT_FOUND), "not_found");
	cr_assert_str_eq(rpc_code_name(RPC_UNAUTHENTICATED), "unauthenticated");
	cr_assert_eq(rpc_code_http_status(RPC_NOT_FOUND), 404);
	cr_assert_eq(rpc_code_http_status(RPC_FAILED_PRECONDITION), 400);
	cr_assert_eq(rpc_code_http_status(RPC_RESOURCE_EXHAUSTED), 429);
	cr_assert_eq(rpc_code_http_status(RPC_CANCELED), 499);
	cr_assert_eq(rpc_code_http_status(RPC_UNAVAILABLE), 503);
	cr_assert_eq(rpc_code_http_status(RPC_UNIMPLEMENTED), 501);
	cr_assert_str_eq(http_reason(431), "Request Header Fields Too Large");
}
