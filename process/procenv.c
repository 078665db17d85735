/* SPDX-License-Identifier: Apache-2.0 */
#include "process/procenv.h"

#include <stdlib.h>
#include <string.h>

#include "base/state.h"
#include "base/users.h"

const char *procenv_get(char *const *envp, const char *key)
{
	size_t kl = strlen(key);

	for (; envp && *envp; envp++)
		if (strncmp(*envp, key, kl) == 0 && (*envp)[kl] == '=')
			return *envp + kl + 1;
	return NULL;
}

char **procenv_build(const char *path, const char *home, const char *user,
		     const struct procenv_kv *store, size_t n_store,
		     const struct procenv_kv *req, size_t n_req)
{
	size_t n = 4 + n_store + n_req, bytes = 0, used = 0;
	struct procenv_kv *all;
	char **envp;
	char *s;

	all = malloc(n * sizeof(*all));
	if (!all)
		return NULL;
	/* Collect, folding duplicates into the first slot of their name. */
	const struct procenv_kv base[4] = {
		{ "PATH", path }, { "HOME", home }, { "USER", user }, { "LOGNAME", user },
	};
	for (size_t layer = 0; layer < 3; layer++) {
		const struct procenv_kv *v = layer == 0 ? base : layer == 1 ? store : req;
		size_t m = layer == 0 ? 4 : layer == 1 ? n_store : n_req;

		for (size_t i = 0; i < m; i++) {
			size_t j;

			if (!v[i].key || !v[i].value)
				continue;
			for (j = 0; j < used; j++)
				if (strcmp(all[j].key, v[i].key) == 0)
					break;
			all[j] = v[i];
			if (j == used)
				used++;
		}
	}
	for (size_t i = 0; i < used; i++)
		bytes += strlen(all[i].key) + strlen(all[i].value) + 2;
	envp = malloc((used + 1) * sizeof(char *) + bytes);
	if (!envp)
		goto out;
	s = (char *)(envp + used + 1);
	for (size_t i = 0; i < used; i++) {
		size_t kl = strlen(all[i].key), vl = strlen(all[i].value);

		envp[i] = s;
		memcpy(s, all[i].key, kl);
		s[kl] = '=';
		memcpy(s + kl + 1, all[i].value, vl + 1);
		s += kl + vl + 2;
	}
	envp[used] = NULL;
out:
	free(all);
	return envp;
}

char **procenv_for(const struct user *u, const struct procenv_kv *req, size_t n_req)
{
	size_t n_store = envstore_count();
	struct procenv_kv *store = calloc(n_store + 1, sizeof(*store));
	const char *path = getenv("PATH");
	char **envp;

	if (!store)
		return NULL;
	for (size_t i = 0; i < n_store; i++)
		envstore_entry(i, &store[i].key, &store[i].value);
	envp = procenv_build(path && *path ? path : PROCENV_DEFAULT_PATH, u->home, u->name, store, n_store,
			     req, n_req);
	free(store);
	return envp;
}
