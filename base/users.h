/* SPDX-License-Identifier: Apache-2.0 */
/*
 * users.h - Linux users as envd sees them (docs/protocol.md, "Users and
 * paths").
 *
 * Lookups parse /etc/passwd and /etc/group directly (never NSS), as the
 * reference does, so results do not depend on the libc.
 *
 * Errors: 0 or a negative errno, with a Go-shaped message where a client
 * sees it (docs/architecture.md, "Errors").
 */
#ifndef ENVD_USERS_H
#define ENVD_USERS_H

#include <limits.h>
#include <stddef.h>
#include <sys/types.h>

#define USER_MAX_GROUPS 64

struct user {
	char name[256];
	uid_t uid;
	gid_t gid;
	char home[PATH_MAX];
	gid_t groups[USER_MAX_GROUPS]; /* primary gid first */
	int n_groups;
};

/*
 * Look `name` up in /etc/passwd (and its groups in /etc/group).
 * Returns 0; -ENOENT for an unknown user; -EINVAL when the uid or gid
 * field does not parse (message in err: "error parsing uid '<v>': ...");
 * another -errno when the file cannot be read. err may be NULL.
 */
int user_lookup(const char *name, struct user *out, char *err, size_t errlen);

/* *dst = *src, copying only the used part of the strings and groups (the
 * whole struct is over 4 KiB; a request copies its user once or twice). */
void user_copy(struct user *dst, const struct user *src);

/* Name of a uid / gid, or its decimal form when unknown. */
void user_name_of(uid_t uid, char *buf, size_t len);
void group_name_of(gid_t gid, char *buf, size_t len);

/* Files the lookups read; tests point them elsewhere. */
extern const char *users_passwd_path;
extern const char *users_group_path;

/*
 * Resolve a request path for `u`: "" -> default workdir (when
 * set, may be NULL) else home; "~" and "~/x" -> under home, cleaned;
 * absolute paths returned unchanged (not cleaned); relative paths joined
 * onto home and cleaned. Returns 0, or with a message in err (may be
 * NULL): -EINVAL for "~other" forms ("failed to expand path ..."),
 * -ENAMETOOLONG ("path too long: <path>"), -ENOMEM.
 */
int path_resolve(const struct user *u, const char *path, const char *default_workdir, char *out,
		 size_t outlen, char *err, size_t errlen);

/* Go path.Clean / filepath.Base (docs/protocol.md, "Go-compatible strings"),
   into out. */
/* path_clean: 0; -ENOMEM (out "") only when `out` is shorter than `in`,
   the one case that needs a scratch buffer. `in` and `out` must differ. */
int path_clean(const char *in, char *out, size_t outlen);
void path_base(const char *in, char *out, size_t outlen);

#endif
