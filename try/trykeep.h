/* SPDX-License-Identifier: Apache-2.0 */
/*
 * trykeep.h - a try kept outside envd for a restart after a crash
 * (docs/crash.md, docs/try.md).
 *
 * Where a service manager keeps envd's descriptors (process/keep.h), each
 * try that has a command puts three in the store: t<pid>.n, its mount
 * namespace (which holds the overlays even when no process is left in
 * it), t<pid>.l, the root of its layer's tmpfs, and t<pid>.r, its record:
 * a memfd holding the try as a live upgrade carries it
 * (upgrade.HandoverTry, proto/handover.proto), in two slots so that a
 * crash while one is written leaves the other. The next envd takes them
 * back with trykeep_take.
 *
 * Everything runs on envd_loop (the record is envd's own memory file).
 * Failures leave the try unkept (logged once).
 */
#ifndef TRY_TRYKEEP_H
#define TRY_TRYKEEP_H

#include <stddef.h>
#include <stdint.h>

#include "handover.pb-c.h"

struct trykeep;
struct sdnotify_fd;

/* Keep a try (rec->pid names it): NULL when tries are not kept here. */
struct trykeep *trykeep_start(const Upgrade__HandoverTry *rec, int ns_fd, int layer_fd);
/* Write the record again (its state or expiry changed). */
void trykeep_update(struct trykeep *k, const Upgrade__HandoverTry *rec);
/* The try is gone: out of the store, freed. */
void trykeep_drop(struct trykeep *k);
/* The record's descriptor (a live upgrade carries it), or -1. */
int trykeep_fd(const struct trykeep *k);
/* A record descriptor carried across a live upgrade, kept again. */
struct trykeep *trykeep_resume(uint32_t pid, int fd);

/*
 * At start: every try a killed envd kept, from the descriptors the manager
 * handed over (t<pid>.*; consumed, set to -1). fn gets each readable
 * record with its descriptors (taken) and its keep handle; a try whose
 * record cannot be read is dropped from the store. Returns the number
 * given to fn. rec is valid for the call.
 */
size_t trykeep_take(struct sdnotify_fd *fds, size_t n,
		    void (*fn)(void *ud, const Upgrade__HandoverTry *rec, int ns_fd, int layer_fd, struct trykeep *k),
		    void *ud);

#endif
