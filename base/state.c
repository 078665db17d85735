/* SPDX-License-Identifier: Apache-2.0 */
/*
 * state.c - default user/workdir, access token, env store.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "base/state.h"
#include "base/buf.h"
#include "base/handover.h"

int64_t state_last_init_ns;

static char *default_user;
static char *default_workdir;

const char *state_default_user(void) { return default_user ? default_user : "root"; }

void state_set_default_user(const char *name)
{
	char *d = strdup(name);
	if (!d)
		return;
	free(default_user);
	default_user = d;
}

const char *state_default_workdir(void) { return default_workdir; }

void state_set_default_workdir(const char *dir)
{
	char *d = dir ? strdup(dir) : NULL;
	if (dir && !d)
		return;
	free(default_workdir);
	default_workdir = d;
}

/* The token lives in a locked, non-dumpable page and is wiped on replacement,
   so it does not linger in core dumps or swap (docs/security.md). */
#define TOKEN_MAX 4096
static char *token_buf;
static size_t token_len;
static bool token_set;

static void token_page(void)
{
	if (token_buf)
		return;
	token_buf = mmap(NULL, TOKEN_MAX, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (token_buf == MAP_FAILED) {
		token_buf = NULL;
		return;
	}
	mlock(token_buf, TOKEN_MAX);
	madvise(token_buf, TOKEN_MAX, MADV_DONTDUMP);
}

bool state_token_is_set(void) { return token_set; }

bool state_token_equals(const char *p, size_t n)
{
	if (!token_set)
		return false;
	/* Constant time over the presented length; the length itself is not
	 * secret enough to matter (the reference compares it too). */
	unsigned char diff = (unsigned char)(n != token_len);
	for (size_t i = 0; i < n; i++)
		diff |= (unsigned char)(p[i] ^ token_buf[i < token_len ? i : 0]);
	return diff == 0;
}

void state_token_set(const char *p, size_t n)
{
	token_page();
	if (!token_buf || n >= TOKEN_MAX)
		return;
	explicit_bzero(token_buf, TOKEN_MAX);
	memcpy(token_buf, p, n);
	token_len = n;
	token_set = true;
}

void state_token_clear(void)
{
	if (token_buf)
		explicit_bzero(token_buf, TOKEN_MAX);
	token_len = 0;
	token_set = false;
}

const char *state_token(size_t *len)
{
	if (!token_set)
		return NULL;
	if (len)
		*len = token_len;
	return token_buf;
}

/* ---- env store: a small array; a handful of entries in practice ---- */

struct env_entry {
	char *key, *value;
	bool internal;
};
/* An array of struct env_entry, env_count() of them. */
static struct buf env_buf = BUF_INIT(BUF_UNBOUNDED);

static struct env_entry *env_at(size_t i)
{
	return (struct env_entry *)env_buf.p + i;
}

static size_t env_count(void)
{
	return env_buf.len / sizeof(struct env_entry);
}

static struct env_entry *env_find(const char *key)
{
	for (size_t i = 0; i < env_count(); i++)
		if (strcmp(env_at(i)->key, key) == 0)
			return env_at(i);
	return NULL;
}

static void env_put(const char *key, const char *value, bool internal)
{
	struct env_entry *e = env_find(key);
	char *v = strdup(value);
	if (!v)
		return;
	if (e) {
		free(e->value);
		e->value = v;
		e->internal = internal;
		return;
	}
	struct env_entry ne = {strdup(key), v, internal};
	if (!ne.key || buf_append(&env_buf, &ne, sizeof(ne)) < 0) {
		free(ne.key);
		free(v);
	}
}

void envstore_set_internal(const char *key, const char *value) { env_put(key, value, true); }

void envstore_replace_user(const char *const *keys, const char *const *vals, size_t n)
{
	/* Drop user entries, keep internals; then add the new set, never
	 * overriding an internal entry (users cannot change E2B_*). */
	size_t k = 0;
	for (size_t i = 0; i < env_count(); i++) {
		if (env_at(i)->internal) {
			*env_at(k++) = *env_at(i);
		} else {
			free(env_at(i)->key);
			free(env_at(i)->value);
		}
	}
	env_buf.len = k * sizeof(struct env_entry);
	for (size_t i = 0; i < n; i++) {
		struct env_entry *e = env_find(keys[i]);
		if (e && e->internal)
			continue;
		env_put(keys[i], vals[i], false);
	}
}

const char *envstore_get(const char *key)
{
	struct env_entry *e = env_find(key);
	return e ? e->value : NULL;
}

size_t envstore_count(void) { return env_count(); }

void envstore_entry(size_t i, const char **key, const char **value)
{
	*key = env_at(i)->key;
	*value = env_at(i)->value;
}

bool envstore_entry_internal(size_t i) { return env_at(i)->internal; }

/* ---- live upgrade and crash survival ---- */

void state_handover_save(struct handover *h)
{
	Upgrade__HandoverState *st = h->st;
	size_t tlen;
	const char *tok = state_token(&tlen);
	if (tok && state_token_is_set()) {
		st->has_access_token = true;
		st->access_token.data = (uint8_t *)tok;
		st->access_token.len = tlen;
	}
	st->default_user = (char *)state_default_user();
	st->default_workdir = (char *)(state_default_workdir() ? state_default_workdir() : "");
	for (size_t i = 0; i < envstore_count(); i++) {
		Upgrade__EnvVar *e = handover_alloc(h, sizeof(*e));
		const char *k, *v;
		if (!e)
			break;
		upgrade__env_var__init(e);
		envstore_entry(i, &k, &v);
		e->key = (char *)k;
		e->value = (char *)v;
		e->internal = envstore_entry_internal(i);
		HANDOVER_PUSH(h, st->user_env, st->n_user_env, e);
	}
	st->last_init_ns = state_last_init_ns;
}

void state_handover_restore(struct handover *h)
{
	const Upgrade__HandoverState *st = h->st;

	if (st->has_access_token)
		state_token_set((const char *)st->access_token.data, st->access_token.len);
	if (st->default_user && *st->default_user)
		state_set_default_user(st->default_user);
	if (st->default_workdir && *st->default_workdir)
		state_set_default_workdir(st->default_workdir);
	{
		const char **keys = calloc(st->n_user_env + 1, sizeof(*keys));
		const char **vals = calloc(st->n_user_env + 1, sizeof(*vals));
		size_t n = 0;
		for (size_t i = 0; keys && vals && i < st->n_user_env; i++) {
			if (st->user_env[i]->internal) {
				envstore_set_internal(st->user_env[i]->key, st->user_env[i]->value);
			} else {
				keys[n] = st->user_env[i]->key;
				vals[n++] = st->user_env[i]->value;
			}
		}
		if (n)
			envstore_replace_user(keys, vals, n);
		free(keys);
		free(vals);
	}
	if (st->last_init_ns > state_last_init_ns)
		state_last_init_ns = st->last_init_ns;
}
