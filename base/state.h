/* SPDX-License-Identifier: Apache-2.0 */
/*
 * state.h - the daemon-wide state /init changes: default user and workdir,
 * the access token and the env store (docs/protocol.md, "POST /init").
 * Everything here runs on the event loop thread only.
 *
 * Errors: none reported; a setter that cannot allocate keeps the previous value.
 */
#ifndef ENVD_STATE_H
#define ENVD_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Default user name (initially "root" or -default-user). */
const char *state_default_user(void);
void state_set_default_user(const char *name);

/* Default workdir, or NULL while unset. */
const char *state_default_workdir(void);
void state_set_default_workdir(const char *dir);

/* Access token. */
bool state_token_is_set(void);
/* Constant-time, byte-exact comparison with the token; false when unset. */
bool state_token_equals(const char *p, size_t n);
void state_token_set(const char *p, size_t n);
void state_token_clear(void);
/* The raw token (for signatures); NULL when unset. */
const char *state_token(size_t *len);

/* Env store. Internal entries always win over user entries. */
void envstore_set_internal(const char *key, const char *value);
/* Replace the whole user part with keys[i]=vals[i]. */
void envstore_replace_user(const char *const *keys, const char *const *vals, size_t n);
/* Value of key, or NULL. */
const char *envstore_get(const char *key);
size_t envstore_count(void);
/* The i-th entry, 0 <= i < envstore_count(). */
void envstore_entry(size_t i, const char **key, const char **value);
/* True when the i-th entry was set by envd itself (live-upgrade record). */
bool envstore_entry_internal(size_t i);

/* Largest /init timestamp applied so far (ns since epoch), for replay guard. */
extern int64_t state_last_init_ns;

/*
 * The /init state in the hand-over record (base/handover.h): access token,
 * default user and workdir, the env store, the newest /init timestamp.
 * The save borrows the state's strings (unchanged until the record is
 * packed); the restore copies them, and keeps the newer timestamp. Also
 * what is kept for a restart after a crash (docs/crash.md).
 */
struct handover;
void state_handover_save(struct handover *h);
void state_handover_restore(struct handover *h);

#endif
