/* SPDX-License-Identifier: Apache-2.0 */
/*
 * procenv.h - the environment a started process gets (docs/protocol.md,
 * "Start").
 *
 * Layers, later ones winning for the same name: PATH, HOME, USER, LOGNAME;
 * the env store; the request's envs. A name keeps the position of its
 * first appearance and the value of its last.
 *
 * Errors: NULL when memory runs out.
 */
#ifndef PROCESS_PROCENV_H
#define PROCESS_PROCENV_H

#include <stddef.h>

struct procenv_kv {
	const char *key;
	const char *value;
};

/*
 * NULL-terminated "K=V" array in one heap block (free() it), or NULL when
 * out of memory.
 */
char **procenv_build(const char *path, const char *home, const char *user,
		     const struct procenv_kv *store, size_t n_store,
		     const struct procenv_kv *req, size_t n_req);

/* PATH when envd's own environment has none. */
#define PROCENV_DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

struct user;

/*
 * The environment of a command (or a session's shell) run as `u`:
 * procenv_build with envd's own PATH (PROCENV_DEFAULT_PATH when it is
 * unset or empty), u's home and name, the env store (base/state.h) and
 * `req` (the request's envs; NULL: none). The one builder every Start and
 * session uses. NULL when out of memory.
 */
char **procenv_for(const struct user *u, const struct procenv_kv *req, size_t n_req);

/* Value of `key` in envp, or NULL. */
const char *procenv_get(char *const *envp, const char *key);

#endif
