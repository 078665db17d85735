/* SPDX-License-Identifier: Apache-2.0 */
/*
 * legacy.h - answers for very old Python SDKs (user agent exactly
 * "connect-python"), which fail on response fields added after they were
 * built: EntryInfo keeps fields 1-3 (name, type, path), FilesystemEvent
 * fields 1-2 (name, type). Field numbers do not change, so the downgrade
 * is the same message with the newer fields left out.
 */
#ifndef FS_LEGACY_H
#define FS_LEGACY_H

#include <stdbool.h>
#include <stddef.h>
#include <protobuf-c/protobuf-c.h>

#include "base/arena.h"

/*
 * A shallow copy of `m` (and of every message inside it) with the fields
 * the legacy schema lacks cleared. Shares strings and bytes with `m`, so
 * it is only valid while `m` is; NULL when out of memory. Its memory is
 * in `a`: arena_free(a) releases it.
 */
const ProtobufCMessage *legacy_view(const ProtobufCMessage *m, struct arena *a);

/* True for the exact user agent of the old Python SDK. */
bool legacy_user_agent(const char *ua);

#endif
