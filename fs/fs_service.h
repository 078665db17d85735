/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs_service.h - the filesystem.Filesystem Connect service
 * (docs/protocol.md, "filesystem.Filesystem").
 * main registers it with rpc_register(&fs_service).
 *
 * Errors: the internals' negative errno values are mapped once, with
 * rpc_code_from_errno() (rpc/rpcerr.h), where a call is answered.
 */
#ifndef FS_FS_SERVICE_H
#define FS_FS_SERVICE_H

#include <stddef.h>

#include "rpc/rpc.h"

extern const struct rpc_service fs_service;

/* Limit on CreateWatcher watchers alive at once (at most 4096). */
extern size_t fs_max_watchers;

/* Watchers created with CreateWatcher and not yet removed (tests, metrics). */
size_t fs_service_watcher_count(void);

#endif
