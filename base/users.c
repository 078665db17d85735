/* SPDX-License-Identifier: Apache-2.0 */
/*
 * users.c - /etc/passwd and /etc/group parsing, path resolution and Go-style
 * path helpers (docs/protocol.md, "Users and paths", "Go-compatible strings").
 *
 * The files are parsed directly, line by line, as Go's pure-Go os/user does:
 * no NSS, so results are identical under musl and glibc.
 */
#include "base/users.h"
#include "base/errstr.h"

#include <errno.h>
#include <sys/stat.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *users_passwd_path = "/etc/passwd";
const char *users_group_path = "/etc/group";

/* Longest /etc line we accept; longer lines are skipped as malformed. */
#define USERS_LINE_MAX 8192

/*
 * Split `line` (modified in place) at ':' into at most `max` fields.
 * Returns the number of fields found.
 */
static int users_split(char *line, char **fields, int max)
{
	int n = 0;
	char *p = line;

	while (n < max) {
		fields[n++] = p;
		p = strchr(p, ':');
		if (!p)
			break;
		*p++ = '\0';
	}
	return n;
}

/* Strict unsigned 32-bit decimal, like strconv.ParseUint(s, 10, 32). */
static int users_parse_u32(const char *s, unsigned long *out, const char **why)
{
	unsigned long long v = 0;

	if (!*s) {
		*why = "invalid syntax";
		return -EINVAL;
	}
	for (const char *p = s; *p; p++) {
		if (*p < '0' || *p > '9') {
			*why = "invalid syntax";
			return -EINVAL;
		}
		v = v * 10 + (unsigned)(*p - '0');
		if (v > 0xffffffffULL) {
			*why = "value out of range";
			return -EINVAL;
		}
	}
	*out = (unsigned long)v;
	return 0;
}

/* Read one line; strips the newline. Returns false at EOF. Skips overlong lines. */
static bool users_getline(FILE *f, char *buf, size_t len)
{
	for (;;) {
		if (!fgets(buf, (int)len, f))
			return false;
		size_t n = strlen(buf);
		if (n && buf[n - 1] == '\n') {
			buf[n - 1] = '\0';
			return true;
		}
		if (feof(f))
			return true;
		/* Overlong: discard the rest of it and treat it as blank. */
		int c;
		while ((c = fgetc(f)) != EOF && c != '\n')
			;
		buf[0] = '\0';
		return true;
	}
}

static bool users_member_of(const char *list, const char *name)
{
	size_t nl = strlen(name);
	const char *p = list;

	while (*p) {
		const char *e = strchr(p, ',');
		size_t l = e ? (size_t)(e - p) : strlen(p);
		if (l == nl && memcmp(p, name, nl) == 0)
			return true;
		if (!e)
			break;
		p = e + 1;
	}
	return false;
}

static void users_load_groups(struct user *u)
{
	char *line;
	FILE *f;

	u->groups[0] = u->gid;
	u->n_groups = 1;
	f = fopen(users_group_path, "re");
	if (!f)
		return; /* logged by nobody: the reference ignores it too */
	line = malloc(USERS_LINE_MAX);
	if (!line)
		goto out;
	while (users_getline(f, line, USERS_LINE_MAX)) {
		char *fld[4];
		unsigned long gid;
		const char *why;

		if (!line[0] || line[0] == '#')
			continue;
		if (users_split(line, fld, 4) < 4)
			continue;
		if (users_parse_u32(fld[2], &gid, &why) < 0)
			continue;
		if (!users_member_of(fld[3], u->name))
			continue;
		if ((gid_t)gid == u->gid)
			continue;
		if (u->n_groups >= USER_MAX_GROUPS)
			break;
		u->groups[u->n_groups++] = (gid_t)gid;
	}
	free(line);
out:
	fclose(f);
}

static int user_lookup_files(const char *name, struct user *out, char *err, size_t errlen)
{
	char *line;
	FILE *f;
	int rc = -ENOENT;

	if (err && errlen)
		err[0] = '\0';
	f = fopen(users_passwd_path, "re");
	if (!f) {
		rc = -errno;
		if (err)
			snprintf(err, errlen, "open %s: %s", users_passwd_path, go_strerror(-rc));
		return rc;
	}
	line = malloc(USERS_LINE_MAX);
	if (!line) {
		fclose(f);
		return -ENOMEM;
	}
	while (users_getline(f, line, USERS_LINE_MAX)) {
		char *fld[7];
		unsigned long uid, gid;
		const char *why;

		if (!line[0] || line[0] == '#')
			continue;
		if (users_split(line, fld, 7) < 6)
			continue;
		if (strcmp(fld[0], name) != 0)
			continue;
		if (users_parse_u32(fld[2], &uid, &why) < 0) {
			if (err)
				snprintf(err, errlen, "error parsing uid '%s': strconv.ParseUint: parsing \"%s\": %s",
					 fld[2], fld[2], why);
			rc = -EINVAL;
			break;
		}
		if (users_parse_u32(fld[3], &gid, &why) < 0) {
			if (err)
				snprintf(err, errlen, "error parsing gid '%s': strconv.ParseUint: parsing \"%s\": %s",
					 fld[3], fld[3], why);
			rc = -EINVAL;
			break;
		}
		if (strlen(fld[0]) >= sizeof(out->name) || strlen(fld[5]) >= sizeof(out->home)) {
			rc = -ENAMETOOLONG;
			if (err)
				snprintf(err, errlen, "user entry for '%s' too long", name);
			break;
		}
		memset(out, 0, sizeof(*out));
		strcpy(out->name, fld[0]);
		strcpy(out->home, fld[5]);
		out->uid = (uid_t)uid;
		out->gid = (gid_t)gid;
		rc = 0;
		break;
	}
	free(line);
	fclose(f);
	if (rc == 0)
		users_load_groups(out);
	else if (rc == -ENOENT && err)
		snprintf(err, errlen, "user: unknown user %s", name);
	return rc;
}

/* Field 0 of the first line of `path` whose field 2 equals `id`. */
static bool users_name_by_id(const char *path, unsigned long id, char *buf, size_t len)
{
	char *line;
	FILE *f;
	bool found = false;

	f = fopen(path, "re");
	if (!f)
		return false;
	line = malloc(USERS_LINE_MAX);
	if (!line)
		goto out;
	while (users_getline(f, line, USERS_LINE_MAX)) {
		char *fld[4];
		unsigned long v;
		const char *why;

		if (!line[0] || line[0] == '#')
			continue;
		if (users_split(line, fld, 4) < 3)
			continue;
		if (users_parse_u32(fld[2], &v, &why) < 0 || v != id)
			continue;
		snprintf(buf, len, "%s", fld[0]);
		found = true;
		break;
	}
	free(line);
out:
	fclose(f);
	return found;
}

static void name_of_cached(bool group, unsigned long id, char *buf, size_t len);

void user_name_of(uid_t uid, char *buf, size_t len)
{
	name_of_cached(false, (unsigned long)uid, buf, len);
}

void group_name_of(gid_t gid, char *buf, size_t len)
{
	name_of_cached(true, (unsigned long)gid, buf, len);
}

/*
 * Go path.Clean. Works on a bounded copy; output is truncated to outlen-1
 * (callers size it at PATH_MAX, which also bounds the input).
 */
int path_clean(const char *in, char *out, size_t outlen)
{
	size_t n = strlen(in);
	bool rooted = n > 0 && in[0] == '/';
	size_t r = 0, w = 0, dotdot = 0;
	char *buf;

	if (!outlen)
		return 0;
	if (n == 0) {
		snprintf(out, outlen, ".");
		return 0;
	}
	/* Cleaning never lengthens a non-empty path: when `in` fits in `out`
	   the work is done there, without allocating. */
	buf = outlen > n ? out : malloc(n + 2);
	if (!buf) {
		out[0] = '\0';
		return -ENOMEM;
	}
	if (rooted) {
		buf[w++] = '/';
		r = 1;
		dotdot = 1;
	}
	while (r < n) {
		if (in[r] == '/') {
			r++;
		} else if (in[r] == '.' && (r + 1 == n || in[r + 1] == '/')) {
			r++;
		} else if (in[r] == '.' && in[r + 1] == '.' && (r + 2 == n || in[r + 2] == '/')) {
			r += 2;
			if (w > dotdot) {
				w--;
				while (w > dotdot && buf[w] != '/')
					w--;
			} else if (!rooted) {
				if (w > 0)
					buf[w++] = '/';
				buf[w++] = '.';
				buf[w++] = '.';
				dotdot = w;
			}
		} else {
			if ((rooted && w != 1) || (!rooted && w != 0))
				buf[w++] = '/';
			for (; r < n && in[r] != '/'; r++)
				buf[w++] = in[r];
		}
	}
	if (w == 0)
		buf[w++] = '.';
	buf[w] = '\0';
	if (buf != out) {
		snprintf(out, outlen, "%s", buf);
		free(buf);
	}
	return 0;
}

/* Go filepath.Base. */
void path_base(const char *in, char *out, size_t outlen)
{
	size_t n = strlen(in);
	const char *s;

	if (!outlen)
		return;
	if (n == 0) {
		snprintf(out, outlen, ".");
		return;
	}
	while (n > 0 && in[n - 1] == '/')
		n--;
	if (n == 0) {
		snprintf(out, outlen, "/");
		return;
	}
	s = in + n;
	while (s > in && s[-1] != '/')
		s--;
	n -= (size_t)(s - in);
	if (n >= outlen)
		n = outlen - 1;
	memcpy(out, s, n);
	out[n] = '\0';
}

/* Join a and b with '/', clean, into out. -ENAMETOOLONG on overflow. */
static int users_join_clean(const char *a, const char *b, char *out, size_t outlen)
{
	size_t la = strlen(a), lb = strlen(b);
	char *tmp = malloc(la + lb + 2);

	if (!tmp)
		return -ENOMEM;
	memcpy(tmp, a, la);
	tmp[la] = '/';
	memcpy(tmp + la + 1, b, lb + 1);
	if (la == 0)
		memmove(tmp, tmp + 1, lb + 1); /* Go's Join ignores empty elements */
	/* Cleaning only shortens, so the cleaned result fits when this does. */
	char *clean = malloc(la + lb + 3);
	if (!clean) {
		free(tmp);
		return -ENOMEM;
	}
	path_clean(tmp, clean, la + lb + 3);
	free(tmp);
	if (strlen(clean) >= outlen) {
		free(clean);
		return -ENAMETOOLONG;
	}
	strcpy(out, clean);
	free(clean);
	return 0;
}

static void join_error(int rc, const char *path, char *err, size_t errlen)
{
	snprintf(err, errlen, "%s: %s", rc == -ENOMEM ? "out of memory resolving path" : "path too long",
		 path);
}

int path_resolve(const struct user *u, const char *path, const char *default_workdir, char *out,
		 size_t outlen, char *err, size_t errlen)
{
	int rc;

	if (err && errlen)
		err[0] = '\0';
	if (path[0] == '\0' && default_workdir && default_workdir[0])
		path = default_workdir;
	if (path[0] == '~') {
		if (path[1] == '\0' || path[1] == '/' || path[1] == '\\') {
			rc = users_join_clean(u->home, path + 1, out, outlen);
			if (rc < 0 && err)
				join_error(rc, path, err, errlen);
			return rc;
		}
		if (err)
			snprintf(err, errlen,
				 "failed to expand path '%s' for user '%s': cannot expand user-specific home dir",
				 path, u->name);
		return -EINVAL;
	}
	if (path[0] == '/') {
		if (strlen(path) >= outlen) {
			if (err)
				snprintf(err, errlen, "path too long: %s", path);
			return -ENAMETOOLONG;
		}
		strcpy(out, path);
		return 0;
	}
	rc = users_join_clean(u->home, path, out, outlen);
	if (rc < 0 && err)
		join_error(rc, path, err, errlen);
	return rc;
}

/*
 * Lookups are cached: every RPC resolves its user, and re-reading
 * /etc/passwd and /etc/group each time showed up as a fifth of the CPU of
 * a small RPC. An entry is valid while both files keep the inode, size and
 * modification time seen when it was filled; any change refills. The
 * lock makes it safe from worker threads too.
 */
#define USER_CACHE_SLOTS 8

struct file_id {
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
};

static struct {
	pthread_mutex_t lock;
	struct file_id pw, gr;
	const char *pw_path, *gr_path;
	int64_t checked_ms;      /* when the file ids were last compared */
	struct user users[USER_CACHE_SLOTS];
	int n, next;
} ucache = {.lock = PTHREAD_MUTEX_INITIALIZER};

/*
 * The files are compared at most every USERS_RECHECK_MS: two stat() calls
 * per RPC were most of a small RPC's cost. A change to /etc/passwd is
 * therefore seen within that time, not instantly.
 */
#define USERS_RECHECK_MS 100

static int64_t mono_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static int file_id_of(const char *path, struct file_id *id)
{
	struct stat st;
	if (stat(path, &st) < 0)
		return -errno;
	id->dev = st.st_dev;
	id->ino = st.st_ino;
	id->size = st.st_size;
	id->mtime = st.st_mtim;
	return 0;
}

static bool file_id_eq(const struct file_id *a, const struct file_id *b)
{
	return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
	       a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec;
}

void user_copy(struct user *dst, const struct user *src)
{
	int ng = src->n_groups < 0 ? 0 : src->n_groups > USER_MAX_GROUPS ? USER_MAX_GROUPS : src->n_groups;

	memcpy(dst->name, src->name, strnlen(src->name, sizeof(dst->name) - 1) + 1);
	dst->name[sizeof(dst->name) - 1] = '\0';
	dst->uid = src->uid;
	dst->gid = src->gid;
	memcpy(dst->home, src->home, strnlen(src->home, sizeof(dst->home) - 1) + 1);
	dst->home[sizeof(dst->home) - 1] = '\0';
	memcpy(dst->groups, src->groups, (size_t)ng * sizeof(dst->groups[0]));
	dst->n_groups = ng;
}

int user_lookup(const char *name, struct user *out, char *err, size_t errlen)
{
	struct file_id pw, gr;
	int64_t now = mono_ms();
	bool ids_ok;
	int rc;

	pthread_mutex_lock(&ucache.lock);
	if (ucache.pw_path == users_passwd_path && ucache.gr_path == users_group_path &&
	    now - ucache.checked_ms < USERS_RECHECK_MS) {
		/* Checked a moment ago: trust the cache as it is. */
		pw = ucache.pw;
		gr = ucache.gr;
		ids_ok = true;
	} else {
		pthread_mutex_unlock(&ucache.lock);
		ids_ok = file_id_of(users_passwd_path, &pw) == 0 && file_id_of(users_group_path, &gr) == 0;
		pthread_mutex_lock(&ucache.lock);
		ucache.checked_ms = now;
	}
	if (!ids_ok || ucache.pw_path != users_passwd_path || ucache.gr_path != users_group_path ||
	    !file_id_eq(&pw, &ucache.pw) || !file_id_eq(&gr, &ucache.gr)) {
		ucache.n = ucache.next = 0;
		ucache.pw_path = ids_ok ? users_passwd_path : NULL;
		ucache.gr_path = ids_ok ? users_group_path : NULL;
		if (ids_ok) {
			ucache.pw = pw;
			ucache.gr = gr;
		}
	}
	for (int i = 0; i < ucache.n; i++) {
		if (strcmp(ucache.users[i].name, name) == 0) {
			user_copy(out, &ucache.users[i]);
			pthread_mutex_unlock(&ucache.lock);
			if (err && errlen)
				err[0] = '\0';
			return 0;
		}
	}
	pthread_mutex_unlock(&ucache.lock);

	rc = user_lookup_files(name, out, err, errlen);
	if (rc == 0 && ids_ok) {
		pthread_mutex_lock(&ucache.lock);
		if (ucache.pw_path == users_passwd_path && file_id_eq(&pw, &ucache.pw) && file_id_eq(&gr, &ucache.gr)) {
			ucache.users[ucache.next] = *out;
			ucache.next = (ucache.next + 1) % USER_CACHE_SLOTS;
			if (ucache.n < USER_CACHE_SLOTS)
				ucache.n++;
		}
		pthread_mutex_unlock(&ucache.lock);
	}
	return rc;
}

/*
 * id -> name, cached like user_lookup(): every EntryInfo names its owner
 * and group, and a ListDir of a thousand entries must not read /etc/passwd
 * two thousand times.
 */
#define NAME_CACHE_SLOTS 32

static struct {
	pthread_mutex_t lock;
	struct file_id id;
	int64_t checked_ms;
	const char *path;
	struct {
		unsigned long id;
		char name[64];
	} e[NAME_CACHE_SLOTS];
	int n, next;
} ncache[2] = {{.lock = PTHREAD_MUTEX_INITIALIZER}, {.lock = PTHREAD_MUTEX_INITIALIZER}};

static void name_of_cached(bool group, unsigned long id, char *buf, size_t len)
{
	const char *path = group ? users_group_path : users_passwd_path;
	struct file_id fid;
	typeof(&ncache[0]) c = &ncache[group];
	int64_t now = mono_ms();
	bool fid_ok;

	pthread_mutex_lock(&c->lock);
	if (c->path == path && now - c->checked_ms < USERS_RECHECK_MS) {
		fid = c->id;
		fid_ok = true;
	} else {
		pthread_mutex_unlock(&c->lock);
		fid_ok = file_id_of(path, &fid) == 0;
		pthread_mutex_lock(&c->lock);
		c->checked_ms = now;
	}
	if (!fid_ok || c->path != path || !file_id_eq(&fid, &c->id)) {
		c->n = c->next = 0;
		c->path = fid_ok ? path : NULL;
		if (fid_ok)
			c->id = fid;
	}
	for (int i = 0; i < c->n; i++) {
		if (c->e[i].id == id) {
			snprintf(buf, len, "%s", c->e[i].name);
			pthread_mutex_unlock(&c->lock);
			return;
		}
	}
	pthread_mutex_unlock(&c->lock);
	if (!users_name_by_id(path, id, buf, len))
		snprintf(buf, len, "%lu", id);
	if (!fid_ok || strlen(buf) >= sizeof(c->e[0].name))
		return;
	pthread_mutex_lock(&c->lock);
	if (c->path == path && file_id_eq(&fid, &c->id)) {
		c->e[c->next].id = id;
		snprintf(c->e[c->next].name, sizeof(c->e[0].name), "%s", buf);
		c->next = (c->next + 1) % NAME_CACHE_SLOTS;
		if (c->n < NAME_CACHE_SLOTS)
			c->n++;
	}
	pthread_mutex_unlock(&c->lock);
}
