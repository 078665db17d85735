/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rpcjob.h - a request's async job (base/reqjob.h) serving an RPC call:
 * the glue between struct reqjob and struct rpc_call.
 *
 * Attached, the call's hooks are the reqjob's: its on_cancel (the client
 * went away, or its own deadline passed) tells the reqjob the call is gone
 * (reqjob_peer_gone), and its on_writable runs the reqjob's ops->writable
 * (a reply sent in pieces, rpc_reply_piece, goes on). To answer, the service takes the call back with
 * rpcjob_take(), which clears the hooks, and ends it (rpc_reply,
 * rpc_reply_encoded, rpc_fail) or starts a stream on it with hooks of its
 * own.
 *
 * Errors: none.
 */
#ifndef ENVD_RPC_RPCJOB_H
#define ENVD_RPC_RPCJOB_H

#include "base/reqjob.h"
#include "rpc/rpc.h"

/* Tie `call` to j (which has no peer); the call holds a reference on j. */
void rpcjob_attach(struct reqjob *j, struct rpc_call *call);

/* The call j serves, or NULL once it is gone or taken. */
struct rpc_call *rpcjob_call(const struct reqjob *j);

/*
 * Take the call back to end it: its hooks are cleared and j lets go of it
 * (j may be freed unless the caller holds a reference, as a job's done()
 * and ops->expired do). NULL when the call is gone or taken already.
 */
struct rpc_call *rpcjob_take(struct reqjob *j);

/*
 * The end of a job with one answer, taking the call (nothing when it is
 * gone): code RPC_OK answers with enc, any other code fails with err as
 * the message.
 */
void rpcjob_answer(struct reqjob *j, enum rpc_code code, const char *err, struct rpc_encoded *enc);

/* ops->expired of a job on a path: deadline_exceeded with the worker
 * pool's words ("... did not answer within N s: path"), taking the call. */
void rpcjob_expire(struct reqjob *j, const char *path);

#endif
