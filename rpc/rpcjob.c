/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rpcjob.c - struct reqjob over struct rpc_call (rpcjob.h).
 */
#include "rpc/rpcjob.h"
#include "base/worker.h"

#include <stddef.h>

static void rpcjob_on_cancel(struct rpc_call *call, enum rpc_code why)
{
	reqjob_peer_gone(rpc_call_ud(call));
}

/* A reply sent in pieces (rpc_reply_piece) goes on when the queue drains. */
static void rpcjob_on_writable(struct rpc_call *call)
{
	struct reqjob *j = rpc_call_ud(call);

	if (j && j->ops->writable && reqjob_live(j))
		j->ops->writable(j);
}

static const struct rpc_call_hooks rpcjob_hooks = { .on_cancel = rpcjob_on_cancel,
						    .on_writable = rpcjob_on_writable };

static void rpcjob_bind(void *peer, struct reqjob *j)
{
	rpc_call_set_hooks(peer, &rpcjob_hooks, j);
}

static void rpcjob_unbind(void *peer)
{
	rpc_call_set_hooks(peer, NULL, NULL);
}

static const struct reqjob_binding rpcjob_binding = { .bind = rpcjob_bind, .unbind = rpcjob_unbind };

void rpcjob_attach(struct reqjob *j, struct rpc_call *call)
{
	reqjob_attach(j, call, &rpcjob_binding);
}

struct rpc_call *rpcjob_call(const struct reqjob *j)
{
	return reqjob_peer(j);
}

struct rpc_call *rpcjob_take(struct reqjob *j)
{
	return reqjob_detach(j);
}

void rpcjob_answer(struct reqjob *j, enum rpc_code code, const char *err, struct rpc_encoded *enc)
{
	struct rpc_call *call = rpcjob_take(j);

	if (code != RPC_OK)
		rpc_fail(call, code, "%s", err);
	else
		rpc_reply_encoded(call, enc);
}

void rpcjob_expire(struct reqjob *j, const char *path)
{
	rpc_fail(rpcjob_take(j), RPC_DEADLINE_EXCEEDED, WORKER_TIMEOUT_FMT, j->timeout, path);
}
