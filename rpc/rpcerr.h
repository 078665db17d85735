/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rpcerr.h - the one table from errno values to RPC codes.
 *
 * Below the RPC edge, functions return 0 or a negative errno that names the
 * situation (-ENOENT "does not exist", -ENOTDIR "not a directory", -ELOOP
 * "symlink loop", ...). Services turn it into a code here, once, with the
 * message the lower layer wrote. The choices follow the reference's: an
 * operation that fails for a reason the reference does not single out is
 * `internal` (envd runs as root, so EACCES/EPERM are internal too). A call
 * site whose errno comes straight from a system call, where the reference
 * singles out only "does not exist", maps ENOENT itself and passes nothing
 * else here (see docs/architecture.md, "Errors").
 */
#ifndef ENVD_RPCERR_H
#define ENVD_RPCERR_H

#include "rpc/rpc.h"

/* `err` may be positive or negative (errno or -errno); 0 is RPC_OK. */
enum rpc_code rpc_code_from_errno(int err);

#endif
