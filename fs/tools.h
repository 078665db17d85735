/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tools.h - the agent's file tools on filesystem.Filesystem: Glob, Grep
 * and ReadLines (docs/protocol.md, "Agent file tools").
 *
 * Every call runs on the worker pool as the request's user (base/fsid.h:
 * a file that user may not read is skipped and counted), keyed by the
 * mount of its path and bounded by its deadline; Glob and Grep walk with
 * several jobs at once (one per processor, at most TOOLS_WORKERS) over
 * one shared walk (search/walk.h). Grep streams its matches as the jobs
 * find them; when the client reads slowly, the jobs stop at their next
 * match and give their threads back until the stream drains, so a slow
 * client holds no thread. A cancel or the client's deadline stops the
 * walk at the next entry.
 *
 * Errors: the handlers answer the call themselves (rpc_fail with the code
 * of the situation: invalid_argument for a bad pattern or option,
 * not_found, permission_denied for the path itself, deadline_exceeded,
 * resource_exhausted for a pattern that hit its match limit).
 */
#ifndef FS_TOOLS_H
#define FS_TOOLS_H

#include "rpc/rpc.h"

#define TOOLS_WORKERS 4          /* walk jobs per call, at most */
#define TOOLS_LIMIT_DEFAULT 1000
#define TOOLS_LIMIT_MAX 100000
#define TOOLS_LINE_DEFAULT 500
#define TOOLS_READ_LIMIT_DEFAULT 2000
#define TOOLS_READ_BYTES_DEFAULT (256 * 1024)

void fs_tools_glob(struct rpc_call *call, const ProtobufCMessage *req);
void fs_tools_grep(struct rpc_call *call, const ProtobufCMessage *req);
void fs_tools_read_lines(struct rpc_call *call, const ProtobufCMessage *req);

#endif
