/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rpcerr.c - errno -> RPC code (see rpcerr.h and docs/protocol.md,
 * "Errors" for where each code is used).
 */
#include "rpc/rpcerr.h"

#include <errno.h>

static const struct {
	int err;
	enum rpc_code code;
} rpcerr_table[] = {
	{ ENOENT, RPC_NOT_FOUND },            /* path, watcher, process missing */
	{ ESRCH, RPC_NOT_FOUND },             /* no such process */
	{ EEXIST, RPC_ALREADY_EXISTS },       /* MakeDir on an existing directory */
	{ ENOTDIR, RPC_INVALID_ARGUMENT },    /* a directory was required */
	{ EISDIR, RPC_INVALID_ARGUMENT },     /* a file was required */
	{ EINVAL, RPC_INVALID_ARGUMENT },     /* malformed request value */
	{ EREMOTE, RPC_INVALID_ARGUMENT },    /* watch on a network filesystem */
	{ ELOOP, RPC_FAILED_PRECONDITION },   /* symlink loop while resolving */
	{ EOPNOTSUPP, RPC_FAILED_PRECONDITION }, /* not possible here (a try's layer) */
	{ EBUSY, RPC_FAILED_PRECONDITION },   /* not in this state (a try still running) */
	{ ESTALE, RPC_ABORTED },              /* changed since it was read (a try's commit) */
	{ ENOMEM, RPC_RESOURCE_EXHAUSTED },   /* allocation failed */
	{ E2BIG, RPC_RESOURCE_EXHAUSTED },    /* over a bound (entries, bytes) */
	{ EAGAIN, RPC_RESOURCE_EXHAUSTED },   /* a bounded queue is full */
	{ ECANCELED, RPC_CANCELED },
	{ ETIMEDOUT, RPC_DEADLINE_EXCEEDED },
	{ ENOSYS, RPC_UNIMPLEMENTED },
	/* Everything else, EACCES and EPERM included, is internal. */
};

enum rpc_code rpc_code_from_errno(int err)
{
	if (err < 0)
		err = -err;
	if (err == 0)
		return RPC_OK;
	for (size_t i = 0; i < sizeof(rpcerr_table) / sizeof(rpcerr_table[0]); i++)
		if (rpcerr_table[i].err == err)
			return rpcerr_table[i].code;
	return RPC_INTERNAL;
}
