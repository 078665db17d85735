/* SPDX-License-Identifier: Apache-2.0 */
#include "process/idem.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/sha2.h"
#include "process/budget.h"

int idem_key_check(const char *key, char *err, size_t errlen)
{
	size_t n = strlen(key);

	if (n == 0 || n > IDEM_KEY_MAX) {
		snprintf(err, errlen, "invalid idempotency key: 1 to %d characters, got %zu", IDEM_KEY_MAX, n);
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)key[i];

		if (c <= 0x20 || c >= 0x7f) {
			snprintf(err, errlen, "invalid idempotency key: printable ASCII without spaces only "
					      "(byte %zu is 0x%02x)", i, c);
			return -EINVAL;
		}
	}
	return 0;
}

int idem_key_pick(const char *header, const char *field, const char *env, const char **out,
		  char *err, size_t errlen)
{
	const char *src[3] = { header, field, env };
	static const char *const names[3] = { "the Idempotency-Key header", "idempotencyKey",
					       IDEM_ENV };
	int first = -1;

	*out = NULL;
	for (int i = 0; i < 3; i++) {
		if (!src[i] || !*src[i])
			continue;
		if (first < 0) {
			first = i;
			continue;
		}
		if (strcmp(src[first], src[i]) != 0) {
			snprintf(err, errlen, "idempotency keys differ: %s says '%.64s', %s says '%.64s'",
				 names[first], src[first], names[i], src[i]);
			return -EINVAL;
		}
	}
	if (first < 0)
		return 0;
	if (idem_key_check(src[first], err, errlen) < 0)
		return -EINVAL;
	*out = src[first];
	return 0;
}

bool idem_env_control(const char *key)
{
	return key && (strcmp(key, IDEM_ENV) == 0 || strcmp(key, BUDGET_ENV) == 0);
}

/* A field: its tag, its length, its bytes, so no two requests encode the
 * same (an argument "a b" is not the arguments "a", "b"). */
static void put(struct sha256_ctx *c, char tag, const void *p, size_t n)
{
	uint8_t h[9];

	h[0] = (uint8_t)tag;
	for (int i = 0; i < 8; i++)
		h[1 + i] = (uint8_t)((uint64_t)n >> (8 * i));
	sha256_update(c, h, sizeof(h));
	if (n)
		sha256_update(c, p, n);
}

static void put_str(struct sha256_ctx *c, char tag, const char *s)
{
	if (s)
		put(c, tag, s, strlen(s));
	else
		put(c, (char)(tag | 0x80), NULL, 0); /* absent differs from "" */
}

static void put_u64(struct sha256_ctx *c, char tag, uint64_t v)
{
	uint8_t b[8];

	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	put(c, tag, b, sizeof(b));
}

static int env_cmp(const void *a, const void *b)
{
	const Process__ProcessConfig__EnvsEntry *x = *(Process__ProcessConfig__EnvsEntry *const *)a;
	const Process__ProcessConfig__EnvsEntry *y = *(Process__ProcessConfig__EnvsEntry *const *)b;
	int r = strcmp(x->key ? x->key : "", y->key ? y->key : "");

	return r ? r : strcmp(x->value ? x->value : "", y->value ? y->value : "");
}

int idem_fingerprint(const struct idem_request *r, char out[IDEM_FP_LEN])
{
	static const Process__ProcessConfig empty = PROCESS__PROCESS_CONFIG__INIT;
	const Process__ProcessConfig *c = r->config ? r->config : &empty;
	const Process__ProcessLimits *l = c->limits;
	Process__ProcessConfig__EnvsEntry **envs = NULL;
	struct sha256_ctx ctx;
	uint8_t d[SHA256_DIGEST_LEN];

	/* A map's order on the wire is the client's: compared as a set. */
	if (c->n_envs) {
		envs = malloc(c->n_envs * sizeof(*envs));
		if (!envs)
			return -ENOMEM;
		memcpy(envs, c->envs, c->n_envs * sizeof(*envs));
		qsort(envs, c->n_envs, sizeof(*envs), env_cmp);
	}
	sha256_init(&ctx);
	put_str(&ctx, 'c', c->cmd ? c->cmd : "");
	put_u64(&ctx, 'n', c->n_args);
	for (size_t i = 0; i < c->n_args; i++)
		put_str(&ctx, 'a', c->args[i]);
	put_u64(&ctx, 'm', c->n_envs);
	for (size_t i = 0; i < c->n_envs; i++) {
		put_str(&ctx, 'k', envs[i]->key ? envs[i]->key : "");
		put_str(&ctx, 'v', envs[i]->value ? envs[i]->value : "");
	}
	free(envs);
	put_str(&ctx, 'd', r->cwd ? r->cwd : "");
	put_u64(&ctx, 'p', r->pty);
	put_u64(&ctx, 'i', r->stdin_pipe);
	put_str(&ctx, 't', r->tag);
	put_str(&ctx, 's', r->session);
	put_u64(&ctx, 'w', r->track_changes);
	put_u64(&ctx, 'M', l ? l->memory_max_bytes : 0);
	put_u64(&ctx, 'C', l ? l->cpu_percent : 0);
	put_u64(&ctx, 'P', l ? l->pids_max : 0);
	sha256_final(&ctx, d);
	sha2_hex(d, sizeof(d), out);
	return 0;
}
