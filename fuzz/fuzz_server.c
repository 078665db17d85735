/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_server.c - shared harness: one connection per input, served by the
 * real code paths on the real loop.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "envd/router.h"
#include "http/conn.h"
#include "fuzz_server.h"
#include "base/loop.h"
#include "process.pb-c.h"
#include "rpc/rpc.h"

static void t_list(struct rpc_call *call, const ProtobufCMessage *req)
{
	Process__ListResponse resp = PROCESS__LIST_RESPONSE__INIT;
	rpc_reply(call, &resp.base);
}

static void t_connect(struct rpc_call *call, const ProtobufCMessage *req)
{
	Process__ConnectResponse resp = PROCESS__CONNECT_RESPONSE__INIT;
	rpc_send(call, &resp.base);
	rpc_finish(call);
}

static void si_end(struct rpc_call *call)
{
	Process__StreamInputResponse resp = PROCESS__STREAM_INPUT_RESPONSE__INIT;
	rpc_reply(call, &resp.base);
}
static const struct rpc_call_hooks si_hooks = {.on_input_end = si_end};
static void t_stream_input(struct rpc_call *call, const ProtobufCMessage *req)
{
	rpc_call_set_hooks(call, &si_hooks, NULL);
}

static const struct rpc_method_impl methods[] = {
	{"List", RPC_UNARY, t_list},
	{"Connect", RPC_SERVER_STREAM, t_connect},
	{"StreamInput", RPC_CLIENT_STREAM, t_stream_input},
};
static const struct rpc_service service = {&process__process__descriptor, methods, 3};

void fuzz_serve(const void *prefix, size_t plen, const uint8_t *data, size_t n)
{
	static bool once;
	int sv[2];
	char sink[65536];

	if (!once) {
		/* As envd's main does: a peer that hangs up must cost an EPIPE,
		 * not the process. The harness itself also sends with
		 * MSG_NOSIGNAL, since the server closes its end of the pair
		 * whenever a request is bad enough. */
		signal(SIGPIPE, SIG_IGN);
		rpc_register(&service);
		once = true;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0)
		return;
	server_on_request = router_dispatch;
	if (!conn_adopt(sv[0], "fuzz")) {
		close(sv[0]);
		close(sv[1]);
		return;
	}
	const uint8_t *parts[2] = {prefix, data};
	size_t lens[2] = {plen, n};
	for (int i = 0; i < 2; i++) {
		size_t off = 0;
		int spins = 0;
		while (off < lens[i] && spins < 1000) {
			ssize_t k = send(sv[1], parts[i] + off, lens[i] - off, MSG_NOSIGNAL);
			if (k > 0)
				off += (size_t)k;
			else if (k < 0 && errno == EPIPE)
				break; /* the server has closed its end: nothing more to feed */
			else
				spins++;
			ev_run(envd_loop, EVRUN_NOWAIT);
			while (read(sv[1], sink, sizeof(sink)) > 0)
				;
		}
	}
	for (int i = 0; i < 8; i++) {
		ev_run(envd_loop, EVRUN_NOWAIT);
		while (read(sv[1], sink, sizeof(sink)) > 0)
			;
	}
	close(sv[1]);
	for (int i = 0; i < 4; i++)
		ev_run(envd_loop, EVRUN_NOWAIT);
}
