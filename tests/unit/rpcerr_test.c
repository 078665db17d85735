/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <errno.h>

#include "rpc/rpcerr.h"

Test(rpcerr, situations_map_to_their_codes)
{
	cr_assert_eq(rpc_code_from_errno(0), RPC_OK);
	cr_assert_eq(rpc_code_from_errno(-ENOENT), RPC_NOT_FOUND);
	cr_assert_eq(rpc_code_from_errno(ENOENT), RPC_NOT_FOUND, "sign does not matter");
	cr_assert_eq(rpc_code_from_errno(-EEXIST), RPC_ALREADY_EXISTS);
	cr_assert_eq(rpc_code_from_errno(-ENOTDIR), RPC_INVALID_ARGUMENT);
	cr_assert_eq(rpc_code_from_errno(-EREMOTE), RPC_INVALID_ARGUMENT);
	cr_assert_eq(rpc_code_from_errno(-ELOOP), RPC_FAILED_PRECONDITION);
	cr_assert_eq(rpc_code_from_errno(-ENOMEM), RPC_RESOURCE_EXHAUSTED);
	cr_assert_eq(rpc_code_from_errno(-E2BIG), RPC_RESOURCE_EXHAUSTED);
	cr_assert_eq(rpc_code_from_errno(-EOPNOTSUPP), RPC_FAILED_PRECONDITION);
	cr_assert_eq(rpc_code_from_errno(-EBUSY), RPC_FAILED_PRECONDITION);
	cr_assert_eq(rpc_code_from_errno(-ESTALE), RPC_ABORTED);
}

Test(rpcerr, everything_else_is_internal)
{
	/* envd runs as root: the reference reports permission errors as internal. */
	cr_assert_eq(rpc_code_from_errno(-EACCES), RPC_INTERNAL);
	cr_assert_eq(rpc_code_from_errno(-EPERM), RPC_INTERNAL);
	cr_assert_eq(rpc_code_from_errno(-EIO), RPC_INTERNAL);
	cr_assert_eq(rpc_code_from_errno(-EXDEV), RPC_INTERNAL);
	cr_assert_eq(rpc_code_from_errno(-ENOTEMPTY), RPC_INTERNAL);
	cr_assert_eq(rpc_code_from_errno(-4095), RPC_INTERNAL);
}
