/* SPDX-License-Identifier: Apache-2.0 */
/*
 * process_service.h - the process.Process Connect-RPC service
 * (docs/protocol.md, "process.Process"):
 * Start, Connect, List, SendInput, StreamInput, CloseStdin, SendSignal,
 * Update. Register with rpc_register(&process_service).
 *
 * Errors: reported on each call as Connect codes (docs/protocol.md,
 * "process.Process").
 */
#ifndef PROCESS_PROCESS_SERVICE_H
#define PROCESS_PROCESS_SERVICE_H

#include "rpc/rpc.h"

extern const struct rpc_service process_service;

#endif
