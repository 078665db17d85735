/* SPDX-License-Identifier: Apache-2.0 */
/*
 * idem.h - idempotency keys of Start (docs/protocol.md, "Idempotent Start").
 *
 * A Start that carries a key spawns once per (user, key): a repeat of the
 * same request answers as a Connect to the process the first one started,
 * and a different request with the key is refused. This module is the pure
 * part: where a request's key comes from, what a valid key is, and what
 * "the same request" compares (a fingerprint of the request as it will
 * run). The table lookup is process.h's (process_find_key).
 *
 * Errors: -EINVAL with a message for a bad key or disagreeing sources;
 * -ENOMEM.
 */
#ifndef PROCESS_IDEM_H
#define PROCESS_IDEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "process.pb-c.h"

/* The env var that carries a key for clients that cannot add a field or a
 * header (the unmodified SDK); never exported to the command. */
#define IDEM_ENV "ENVD_IDEMPOTENCY_KEY"
/* The request header (lower case, as rpc_call_header looks it up). */
#define IDEM_HEADER "idempotency-key"
/* Longest key, bytes (as Stripe's). */
#define IDEM_KEY_MAX 255
/* A fingerprint: 64 lower-case hex digits and the NUL. */
#define IDEM_FP_LEN 65

/*
 * A key is 1 to IDEM_KEY_MAX printable ASCII bytes, space excluded (a
 * header value's characters, so the three sources can carry the same
 * keys). 0, or -EINVAL with the reason in err.
 */
int idem_key_check(const char *key, char *err, size_t errlen);

/*
 * The request's key from its three places (each NULL or "" when absent):
 * the Idempotency-Key header, the StartRequest field, the env var. Those
 * given must be equal. *out is one of them (borrowed), or NULL without a
 * key. 0, or -EINVAL with the message.
 */
int idem_key_pick(const char *header, const char *field, const char *env, const char **out,
		  char *err, size_t errlen);

/*
 * What "the same request" compares, besides the user (the key's scope):
 * the command as it will run. `config` is the request's with the control
 * variables already left out of its envs (idem_env_control); its envs are
 * compared as a set. Not compared: the key itself, the output budget and
 * the deadline (properties of one stream, not of the command) and the
 * terminal's size (Update changes it).
 */
struct idem_request {
	const Process__ProcessConfig *config;
	const char *cwd;        /* as resolved for the user */
	bool pty;
	bool stdin_pipe;
	const char *tag;        /* NULL: none */
	const char *session;    /* NULL: none */
	bool track_changes;
};

/* Hex SHA-256 of a length-prefixed encoding of r into out. 0 or -ENOMEM. */
int idem_fingerprint(const struct idem_request *r, char out[IDEM_FP_LEN]);

/* True for the env vars that steer envd itself (the key, the output
 * budget): they are taken out of a Start's envs. */
bool idem_env_control(const char *key);

#endif
