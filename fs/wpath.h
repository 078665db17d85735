/* SPDX-License-Identifier: Apache-2.0 */
/*
 * wpath.h - where a write lands: the directory of a path, opened to
 * create, open, rename or remove names in it, walked so that no local
 * user can steer a write of root's with a symbolic link of theirs
 * (docs/security.md, "Uploads and in-place writes").
 *
 * The rule. A walk that runs with root's filesystem identity and meets a
 * symbolic link owned by another uid goes on with that uid's identity
 * (base/fsid.h: its passwd entry's gid and groups; a uid without an
 * entry gets group 65534 and no others): the rest of the path is looked
 * up, and every name of the directory it ends in is created, opened,
 * renamed or removed, as the link's owner could (wpath_enter). A link
 * owned by root counts as root's unless someone else could have made
 * that name (it has other hard links and its directory is writable by
 * another uid than root): then the walk goes on as nobody (65534). A
 * walk that already runs as someone else (a job under base/fsid, or past
 * such a link) follows links as they are: the kernel holds it to that
 * identity's rights. So root's rights never reach past a link that a
 * user made, and what a user's link leads to is only what that user
 * could write anyway.
 *
 * Missing directories, when asked (`mk`), are created 0755 with the
 * walk's identity and given to mk's uid/gid on their descriptor
 * (fchownat AT_EMPTY_PATH, with the caller's own identity), never by
 * name; only a directory that the walk's identity owns (one it just made,
 * or a concurrent creator of the same identity) is given away.
 *
 * Cost: a path without a symbolic link that exists is one openat2
 * (RESOLVE_NO_SYMLINKS); a link, a missing component or a kernel without
 * openat2 is walked a component at a time (openat O_PATH|O_NOFOLLOW and
 * fstat each).
 *
 * Threads: every call makes path system calls: a worker job, never the
 * loop. The identity is taken only inside calls (wpath_enter and
 * wpath_leave around the caller's own), never left on the thread.
 *
 * Errors (wpath_dir, wpath_parent, wpath_follow): a negative errno with
 * a Go-shaped message in err naming the path as given:
 *   -ENOENT        a component is missing and mk is NULL;
 *   -ENOTDIR       a component is not a directory ("path is a file: P");
 *   -ELOOP         more than WPATH_MAX_LINKS symbolic links;
 *   -EACCES        the identity may not look up or create there (as a
 *                  link's owner: "permission denied");
 *   -ENAMETOOLONG  a path does not fit;
 *   another -errno of the failing call ("failed to create directory:
 *   mkdir P: ...", "failed to chown directory: chown P: ...").
 */
#ifndef FS_WPATH_H
#define FS_WPATH_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "base/fsid.h"

#define WPATH_MAX_LINKS 40

/* The identity a walk went on with after a link of another user's. */
struct wpath_as {
	bool set;
	uid_t uid;
	gid_t gid;
	int n_groups;
	gid_t groups[FSID_GROUPS_MAX];
};

struct wpath {
	int dirfd;                /* O_PATH directory the name is in; -1 when none */
	char name[NAME_MAX + 1];  /* the last component; "" for "/" */
	bool slash;               /* the path ended in '/' */
	bool followed;            /* wpath_follow went through a link */
	int links;                /* symbolic links followed so far */
	struct wpath_as as;
};

/* Who gets the directories a walk creates. */
struct wpath_mk {
	uid_t uid;
	gid_t gid;
};

/* Nothing open: wpath_close() does nothing. */
void wpath_init(struct wpath *p);

/*
 * Open directory `dir` (absolute, or relative to the working directory)
 * into p->dirfd, creating what is missing when mk is not NULL; p->name
 * is set to "". Errors above.
 */
int wpath_dir(struct wpath *p, const char *dir, const struct wpath_mk *mk, char *err, size_t errlen);

/*
 * Open the directory `path` names its last component in (trailing '/'
 * ignored: p->slash says there was one) into p->dirfd and that component
 * into p->name ("" for "/"). The directory part is the path as given, not
 * cleaned, so ".." and links resolve as the kernel would. Errors above.
 */
int wpath_parent(struct wpath *p, const char *path, const struct wpath_mk *mk, char *err, size_t errlen);

/*
 * p->name is a symbolic link in p->dirfd: go through it. Its text is
 * resolved from p->dirfd (or "/") under the rule above; p->dirfd and
 * p->name become the directory and the last component it leads to (which
 * may be missing, or another link). Counts towards WPATH_MAX_LINKS.
 * Errors above; -EINVAL when p->name is not a link.
 */
int wpath_follow(struct wpath *p, char *err, size_t errlen);

/*
 * Take p's identity on this thread for the caller's own calls on names in
 * p->dirfd (nothing when the walk kept the thread's). 0, or -EPERM when
 * the kernel refused (then nothing changed). Always pair with
 * wpath_leave(saved), which is a no-op for an identity not taken.
 */
int wpath_enter(const struct wpath *p, struct fsid_saved *saved);
void wpath_leave(struct fsid_saved *saved);

/* Whether calls under p act with root's rights: the thread is root's and
 * the walk kept it. */
bool wpath_as_root(const struct wpath *p);

/*
 * Whether p->dirfd can be written by root and `owner` alone: owned by one
 * of them, no write bit for group or others (an ACL's named entries are
 * capped by the group bits). A name there with other hard links was put
 * there by one of them. false when it cannot be told.
 */
bool wpath_dir_private(const struct wpath *p, uid_t owner);

/* Close p->dirfd; p may be used again. */
void wpath_close(struct wpath *p);

#endif
