/* SPDX-License-Identifier: Apache-2.0 */
/*
 * edit.c - Edit (edit.h).
 *
 * The call's edits are copied into the job (the request message belongs
 * to the call, which may go while the job runs); the job is a reqjob
 * bound to the call (rpc/rpcjob.h), freed once both let go.
 */
#include "fs/edit.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/errstr.h"
#include "base/fsid.h"
#include "base/reqjob.h"
#include "base/users.h"
#include "base/worker.h"
#include "filesystem.pb-c.h"
#include "fs/entry.h"
#include "fs/fguard.h"
#include "fs/fwrite.h"
#include "fs/wpath.h"
#include "rpc/caller.h"
#include "rpc/rpcjob.h"

#define ERRLEN (2 * PATH_MAX + 256)
/* Lines named in the message of an oldText found more than once. */
#define EDIT_LINES_SHOWN 5

/* --- the memory budget --- */

static size_t edit_mem;

/*
 * Buffers of up to EDIT_KEEP_BYTES are that size, and the last EDIT_KEEP
 * given back are kept for the next edits (not counted in the budget):
 * musl's allocator maps a buffer of a few KiB on its own and unmaps it
 * when freed, and an munmap in a process whose other threads run on
 * other CPUs interrupts each of them (a TLB shootdown). That, and the
 * new pages' faults, was a sixth of an Edit of a 5 KiB file.
 */
#define EDIT_KEEP 4
#define EDIT_KEEP_BYTES (32u * 1024)
static char *edit_kept[EDIT_KEEP];

static char *buf_take(size_t n)
{
	if (n > EDIT_KEEP_BYTES)
		return malloc(n);
	for (int i = 0; i < EDIT_KEEP; i++) {
		char *p = __atomic_exchange_n(&edit_kept[i], NULL, __ATOMIC_ACQUIRE);
		if (p)
			return p;
	}
	return malloc(EDIT_KEEP_BYTES);
}

static void buf_give(char *p, size_t n)
{
	if (n <= EDIT_KEEP_BYTES) {
		for (int i = 0; i < EDIT_KEEP; i++) {
			char *none = NULL;
			if (__atomic_compare_exchange_n(&edit_kept[i], &none, p, false, __ATOMIC_RELEASE,
							__ATOMIC_RELAXED))
				return;
		}
	}
	free(p);
}

char *fs_edit_buf_alloc(size_t n)
{
	size_t want = n ? n : 1;
	size_t held = __atomic_add_fetch(&edit_mem, want, __ATOMIC_RELAXED);
	char *p;

	if (held > FS_EDIT_MEM_MAX) {
		__atomic_sub_fetch(&edit_mem, want, __ATOMIC_RELAXED);
		errno = EAGAIN;
		return NULL;
	}
	if (!(p = buf_take(want))) {
		__atomic_sub_fetch(&edit_mem, want, __ATOMIC_RELAXED);
		errno = ENOMEM;
	}
	return p;
}

void fs_edit_buf_free(char *p, size_t n)
{
	if (!p)
		return;
	buf_give(p, n ? n : 1);
	__atomic_sub_fetch(&edit_mem, n ? n : 1, __ATOMIC_RELAXED);
}

size_t fs_edit_mem_held(void)
{
	return __atomic_load_n(&edit_mem, __ATOMIC_RELAXED);
}

/* --- the edits, on memory --- */

static int apply_fail(int rc, char *msg, size_t msglen, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int apply_fail(int rc, char *msg, size_t msglen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, msglen, fmt, ap);
	va_end(ap);
	return rc;
}

/* Which edit, for messages: "" when there is one. */
static void edit_name(char *out, size_t len, size_t i, size_t n)
{
	if (n > 1)
		snprintf(out, len, " (edit %zu of %zu)", i + 1, n);
	else
		out[0] = '\0';
}

/*
 * The next occurrence of op's old text in [p, end), or NULL. memmem is
 * linear, but a sanitizer's memmem checks the whole haystack it is given
 * at every call, which for dense matches (a one-byte oldText, replaceAll)
 * is quadratic: the haystack is a window that doubles while nothing is
 * found and starts small again after a match. *win carries it between
 * calls (0 to start).
 */
#define FIND_WIN_MIN 4096
static const char *find_next(const char *p, const char *end, const struct fs_edit_op *op, size_t *win)
{
	size_t m = op->old_len;

	if (*win < FIND_WIN_MIN)
		*win = FIND_WIN_MIN;
	while ((size_t)(end - p) >= m) {
		size_t span = (size_t)(end - p) < *win + m ? (size_t)(end - p) : *win + m;
		const char *hit = memmem(p, span, op->old_text, m);
		if (hit) {
			*win = FIND_WIN_MIN;
			return hit;
		}
		if (span == (size_t)(end - p))
			return NULL;
		p += span - m + 1; /* an occurrence across the edge starts here or later */
		if (*win < (SIZE_MAX >> 2))
			*win *= 2;
		worker_progress();
	}
	return NULL;
}

/* Occurrences of op's old text in s[0..len), left to right, not
 * overlapping. */
static size_t count_occurrences(const char *s, size_t len, const struct fs_edit_op *op)
{
	size_t count = 0, win = 0;
	const char *p = s, *end = s + len;

	for (const char *hit; (hit = find_next(p, end, op, &win)); p = hit + op->old_len)
		count++;
	return count;
}

/* The first EDIT_LINES_SHOWN lines where op's old text occurs in
 * s[0..len), and whether there are more such lines: for the message of
 * an old text found more than once, so counted only then (a line count
 * up to the match was a third of an Edit of a 5 KiB file). */
static void occurrence_lines(const char *s, size_t len, const struct fs_edit_op *op, size_t *lines, size_t *n_lines,
			     bool *more)
{
	size_t line = 1, win = 0;
	const char *p = s, *end = s + len, *scanned = s;

	*n_lines = 0;
	*more = false;
	for (const char *hit; (hit = find_next(p, end, op, &win)); p = hit + op->old_len) {
		size_t at = line;
		for (const char *q = scanned; (q = memchr(q, '\n', (size_t)(hit - q))); q++)
			at++;
		scanned = hit;
		line = at;
		if (*n_lines && lines[*n_lines - 1] == at)
			continue; /* another on the same line */
		if (*n_lines == EDIT_LINES_SHOWN) {
			*more = true;
			return;
		}
		lines[(*n_lines)++] = at;
	}
}

/* "4, 18 and 40" */
static void format_lines(char *out, size_t len, const size_t *lines, size_t n, bool more)
{
	size_t k = 0;

	out[0] = '\0';
	for (size_t i = 0; i < n && k < len; i++)
		k += (size_t)snprintf(out + k, len - k, "%s%zu", i == 0 ? "" : i + 1 == n && !more ? " and " : ", ",
				      lines[i]);
	if (more && k < len)
		snprintf(out + k, len - k, ", ...");
}

/* An edit buffer of n bytes, or the failure in msg. */
static int take_buf(size_t n, char **out, char *msg, size_t msglen, const char *which)
{
	if ((*out = fs_edit_buf_alloc(n)))
		return 0;
	if (errno == EAGAIN)
		return apply_fail(-EAGAIN, msg, msglen, "edits in flight hold their memory budget (%u MiB); retry%s",
				  FS_EDIT_MEM_MAX >> 20, which);
	return apply_fail(-ENOMEM, msg, msglen, "out of memory%s", which);
}

/* s with the first `count` occurrences of op's old text replaced, into a
 * new buffer. */
static int replace(const char *s, size_t len, const struct fs_edit_op *op, size_t count, size_t max, char **out,
		   size_t *out_len, char *msg, size_t msglen, const char *which)
{
	const char *p = s, *end = s + len;
	size_t new_len;
	char *w;
	int rc;

	if (op->new_len >= op->old_len) {
		size_t grow = op->new_len - op->old_len;
		if (grow && count > (SIZE_MAX - len) / grow)
			return apply_fail(-EFBIG, msg, msglen, "the edited file would be too large%s", which);
		new_len = len + count * grow;
	} else {
		new_len = len - count * (op->old_len - op->new_len);
	}
	if (new_len > max)
		return apply_fail(-EFBIG, msg, msglen, "the edited file would be %zu bytes, over Edit's limit of %zu%s",
				  new_len, max, which);
	if ((rc = take_buf(new_len, out, msg, msglen, which)) < 0)
		return rc;
	w = *out;
	size_t win = 0;
	for (size_t i = 0; i < count; i++) {
		const char *hit = find_next(p, end, op, &win);
		memcpy(w, p, (size_t)(hit - p));
		w += hit - p;
		memcpy(w, op->new_text, op->new_len);
		w += op->new_len;
		p = hit + op->old_len;
	}
	memcpy(w, p, (size_t)(end - p));
	*out_len = new_len;
	return 0;
}

/* One edit applied to cur[0..cur_len): a new buffer in *next, or an error. */
static int apply_one(const char *cur, size_t cur_len, bool *present, const struct fs_edit_op *op, size_t max,
		     char **next, size_t *next_len, size_t *count, char *msg, size_t msglen, const char *name,
		     const char *which)
{
	size_t lines[EDIT_LINES_SHOWN], n_lines;
	char shown[96];
	bool more;
	int rc;

	if (!op->old_len) {
		/* Create the file, or fill an empty one: new_text is the content. */
		if (*present && cur_len)
			return apply_fail(-EEXIST, msg, msglen,
					  "oldText is empty but %s is not%s: an empty oldText only creates a file (or fills an empty one); give the text to replace",
					  name, which);
		if (op->new_len > max)
			return apply_fail(-EFBIG, msg, msglen, "the new file would be %zu bytes, over Edit's limit of %zu%s",
					  op->new_len, max, which);
		if ((rc = take_buf(op->new_len, next, msg, msglen, which)) < 0)
			return rc;
		memcpy(*next, op->new_text, op->new_len);
		*next_len = op->new_len;
		*present = true;
		*count = 1;
		return 0;
	}
	if (!*present)
		return apply_fail(-ENOENT, msg, msglen, "file not found: %s%s", name, which);
	*count = count_occurrences(cur, cur_len, op);
	if (*count == 0)
		return apply_fail(-ESRCH, msg, msglen, "oldText not found in %s%s", name, which);
	if (*count > 1 && !op->replace_all) {
		occurrence_lines(cur, cur_len, op, lines, &n_lines, &more);
		format_lines(shown, sizeof(shown), lines, n_lines, more);
		return apply_fail(-ENOTUNIQ, msg, msglen,
				  "oldText found %zu times in %s%s, on line%s %s: give more context to make it unique, or set replaceAll",
				  *count, name, which, n_lines > 1 ? "s" : "", shown);
	}
	return replace(cur, cur_len, op, *count, max, next, next_len, msg, msglen, which);
}

static bool op_changes_text(const struct fs_edit_op *op)
{
	return op->old_len && (op->old_len != op->new_len || memcmp(op->old_text, op->new_text, op->old_len) != 0);
}

int fs_edit_apply(const char *src, size_t len, bool present, const struct fs_edit_op *ops, size_t n, size_t max,
		  const char *name, struct fs_edit_result *out, char *msg, size_t msglen)
{
	const char *cur = src;
	char *owned = NULL, which[64];
	size_t cur_len = present ? len : 0;
	uint64_t replacements = 0;
	bool created = !present;

	memset(out, 0, sizeof(*out));
	if (!name)
		name = "the file";
	for (size_t i = 0; i < n; i++) {
		char *next = NULL;
		size_t next_len = 0, count = 0;
		int rc;

		edit_name(which, sizeof(which), i, n);
		rc = apply_one(cur, cur_len, &present, &ops[i], max, &next, &next_len, &count, msg, msglen, name, which);
		if (rc < 0) {
			fs_edit_buf_free(owned, cur_len);
			return rc;
		}
		fs_edit_buf_free(owned, cur_len);
		owned = next;
		cur = next;
		cur_len = next_len;
		replacements += count;
		worker_progress(); /* a job without a client deadline is bounded by its stalls */
	}
	out->replacements = replacements > UINT32_MAX ? UINT32_MAX : (uint32_t)replacements;
	/* One replacement of a text by another changes the content where
	 * the first occurrence was: no need to compare it all. */
	bool differs = n == 1 && op_changes_text(&ops[0]);
	out->changed = owned && (created || cur_len != len || differs || (len && memcmp(owned, src, len) != 0));
	if (!out->changed) {
		fs_edit_buf_free(owned, cur_len);
		owned = NULL;
		cur_len = present ? len : 0;
	}
	out->buf = owned;
	out->len = cur_len;
	return 0;
}

void fs_edit_result_free(struct fs_edit_result *r)
{
	if (r->buf)
		fs_edit_buf_free(r->buf, r->len);
	r->buf = NULL;
}

/* --- the job --- */

struct edit_job {
	struct reqjob rj;              /* the call; key, deadline, stall */
	struct fsid id;
	gid_t groups[USER_MAX_GROUPS];
	struct fs_edit_op *ops;        /* into mem */
	size_t n_ops;
	char *mem;                     /* the ops and their texts, one block */
	char if_version[FS_VERSION_LEN + 1];
	struct rpc_codec codec;
	enum rpc_code code;
	struct rpc_encoded enc;
	uint8_t encbuf[128];
	char err[ERRLEN];
	char path[PATH_MAX];           /* as resolved from the request */
	char target[PATH_MAX];         /* what is read and replaced */
	bool by_path;                  /* target is opened by its path, followed: it was a symlink */
};

/* One try: the snapshot and what the hook compares against. */
struct edit_try {
	bool present;
	bool mgtime;           /* the file's filesystem has multigrain timestamps (fs_version_mgtime) */
	char version[FS_VERSION_LEN + 1];
	const struct wpath *at; /* the directory the name is looked at in; NULL: by the target's path */
};

/* edit_try_once: the target's name is a symbolic link (see edit_run). */
#define EDIT_LINK 1

static void job_fail(struct edit_job *j, enum rpc_code code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void job_fail(struct edit_job *j, enum rpc_code code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(j->err, sizeof(j->err), fmt, ap);
	va_end(ap);
	j->code = code;
}

/* An access check as the thread's file identity (faccessat2 with
 * AT_EACCESS: the fsuid and its capabilities). 0, -errno, or -ENOSYS on a
 * kernel before 5.8, where the write itself will tell. */
static int may(const char *path, int mode)
{
#ifdef SYS_faccessat2
	if (syscall(SYS_faccessat2, AT_FDCWD, path, mode, AT_EACCESS) == 0)
		return 0;
	return -errno;
#else
	return -ENOSYS;
#endif
}

static bool denied(int rc)
{
	return rc == -EACCES || rc == -EPERM || rc == -EROFS;
}

/*
 * Whether the file st's mode alone says that the job's user may write it:
 * root, or the owner with the owner's write bit (the kernel asks nothing
 * else of the owner; an ACL's owner entry is those bits). Then the write
 * is not asked about first: what only the write itself can tell (a
 * read-only mount, an immutable file) is asked after it failed, and
 * answered as the question first would have been (write_result).
 */
static bool may_write_by_mode(const struct edit_job *j, const struct stat *st)
{
	return j->id.uid == 0 || (st->st_uid == j->id.uid && (st->st_mode & S_IWUSR));
}

/* Read all of fd (size bytes expected) into an edit buffer. 0, -EAGAIN,
 * -ENOMEM, -EFBIG (it grew past the bound) or a read's -errno. */
static int read_whole(int fd, size_t size, char **out)
{
	char *b = fs_edit_buf_alloc(size);
	size_t got = 0;

	if (!b)
		return -errno;
	while (got < size) {
		ssize_t k = read(fd, b + got, size - got);
		if (k == 0)
			break;
		if (k < 0) {
			if (errno == EINTR)
				continue;
			int e = errno;
			fs_edit_buf_free(b, size);
			return -e;
		}
		got += (size_t)k;
	}
	*out = b;
	return got == size ? 0 : -ESTALE; /* it shrank while read: changed */
}

/* fwrite's last look before the rename: is the target still the snapshot? */
static int edit_before_replace(void *arg, const char *target, char *err, size_t errlen)
{
	const struct edit_try *t = arg;
	char v[FS_VERSION_LEN + 1];
	bool exists;
	int rc;

	if (t->at && t->at->dirfd >= 0) {
		/* In the directory the rename is made in, the name not
		 * followed: a link swapped in is a change. */
		struct fsid_saved sv;
		if ((rc = wpath_enter(t->at, &sv)) == 0)
			rc = fguard_state_at(t->at->dirfd, t->at->name, &exists, v);
		wpath_leave(&sv);
	} else {
		rc = fguard_state(target, &exists, v);
	}
	if (rc < 0) {
		snprintf(err, errlen, "error checking %s before replacing it: %s", target, go_strerror(-rc));
		return -EIO;
	}
	if (exists != t->present || (exists && strcmp(v, t->version) != 0)) {
		snprintf(err, errlen, "%s changed while it was edited", target);
		return -ESTALE;
	}
	return 0;
}

/* Whether the user may not create files in the target's directory (then
 * no temporary can be made beside it). */
static bool dir_refuses(const char *target)
{
	char dir[PATH_MAX];

	fs_path_dir(target, dir, sizeof(dir));
	int rc = may(dir, W_OK | X_OK);
	return rc < 0 && rc != -ENOSYS;
}

/* After a failed write: permission_denied when the user may not create
 * files where the temporary (or a new file) goes, else internal. */
static enum rpc_code write_failure_code(const char *target)
{
	char dir[PATH_MAX];

	fs_path_dir(target, dir, sizeof(dir));
	/* the nearest directory that exists: where a new one would be made */
	while (may(dir, F_OK) == -ENOENT && strcmp(dir, "/") != 0) {
		char up[PATH_MAX];
		fs_path_dir(dir, up, sizeof(up));
		snprintf(dir, sizeof(dir), "%s", up);
	}
	return denied(may(dir, W_OK | X_OK)) ? RPC_PERMISSION_DENIED : RPC_INTERNAL;
}

/* Whether this thread's user is in group g. */
static bool in_groups(const struct edit_job *j, gid_t g)
{
	if (g == j->id.gid)
		return true;
	for (int i = 0; i < j->id.n_groups; i++)
		if (j->id.groups[i] == g)
			return true;
	return false;
}

/*
 * Before a write in place, whose content goes at fwrite_begin: a user
 * other than root leaves the owner as it is (chown(-1, -1): nothing to
 * change, nothing refused), and the target is looked at once more, under
 * the lock. 0, -ESTALE, or a failure with j->code set.
 */
static int in_place_prepare(struct edit_job *j, const struct edit_try *t, uid_t *uid, gid_t *gid)
{
	char err[ERRLEN];
	int rc;

	if (j->id.uid != 0) {
		*uid = (uid_t)-1;
		*gid = (gid_t)-1;
	}
	if ((rc = edit_before_replace((void *)t, j->target, err, sizeof(err))) < 0 && rc != -ESTALE)
		job_fail(j, RPC_INTERNAL, "%s", err);
	return rc;
}

/*
 * What the job leaves for after its answer is on its way (worker_after):
 * the identity the thread had before it (5 us of an Edit's round trip),
 * and the snapshot's descriptor, where closing it frees the replaced file
 * (its pages, on tmpfs; its blocks, on a disk): kept open across the
 * rename, the file is not torn down inside the rename but at this close.
 */
static _Thread_local struct edit_after {
	struct fsid_saved saved;
	int snap_fd;
} edit_after_state;

static void edit_leave(void *arg)
{
	struct edit_after *a = arg;

	if (a->snap_fd >= 0)
		close(a->snap_fd);
	a->snap_fd = -1;
	fsid_leave(&a->saved);
}

/* The snapshot's descriptor, once the write has begun: closed after the
 * answer where the filesystem is known to be local (multigrain times say
 * so without another call); elsewhere now (NFS would rename a replaced
 * file that is still open aside, a FUSE library may as well). */
static void snap_close(const struct edit_try *t, int fd)
{
	if (fd < 0)
		return;
	if (!t->mgtime) {
		close(fd);
		return;
	}
	if (edit_after_state.snap_fd >= 0)
		close(edit_after_state.snap_fd); /* a try before this one's */
	edit_after_state.snap_fd = fd;
}

/*
 * Write the result over the target (present: the snapshot st0 is there,
 * open as *src, which is closed here once the write has begun; at: its
 * directory, when the snapshot was opened there) and put the new version
 * in `version`. 0, -ESTALE when the target changed before the rename, or
 * another failure with j->code set.
 */
static int write_result(struct edit_job *j, struct edit_try *t, struct wpath *at, int *src, const struct stat *st0,
			const struct fs_edit_result *res, char version[FS_VERSION_LEN + 1])
{
	struct fwrite w;
	struct fs_meta meta = { 0 };
	char err[ERRLEN];
	uid_t uid = j->id.uid;
	gid_t gid = j->id.gid;
	bool atomic = true;
	int keep = -1, attrs = -1, rc;
	struct stat st;

	if (t->present) {
		/* The replacement keeps the owner; a user who could not give
		 * it back (not the owner, or not in the file's group), and a
		 * file with other names (as uploads do) are written in
		 * place; so is one whose directory the user may not write
		 * (below: found when the temporary cannot be made). */
		uid = st0->st_uid;
		gid = st0->st_gid;
		if (j->id.uid != 0 && (st0->st_uid != j->id.uid || !in_groups(j, st0->st_gid)))
			atomic = false;
		if (st0->st_nlink > 1)
			atomic = false;
		/* user.e2b.*, which fwrite sets from meta: also for a file
		 * meant for in place that fwrite replaces after all (a hard
		 * link root does not write through). A file with no extended
		 * attribute at all has none for the temporary to take (one
		 * added since changes the version the last look compares). */
		if (fs_meta_read_fd(*src, &meta) != 0)
			attrs = *src;
		if (!atomic && (rc = in_place_prepare(j, t, &uid, &gid)) < 0) {
			fs_meta_clear(&meta);
			return rc;
		}
	}
	fwrite_init(&w);
	w.before_replace = edit_before_replace;
	w.before_arg = t;
	if (t->present && at->dirfd >= 0) {
		/* Where the snapshot was read: no second walk, no second look. */
		rc = fwrite_begin_from(&w, j->target, at, attrs, st0, uid, gid, atomic, err, sizeof(err));
		t->at = &w.at;
	} else {
		rc = fwrite_begin(&w, j->target, uid, gid, atomic, err, sizeof(err));
	}
	if (rc < 0 && rc != -ENOSPC && atomic && t->present && dir_refuses(j->target)) {
		/* No temporary beside it: in place, which needs only the
		 * right to write the file. */
		fwrite_discard(&w);
		t->at = NULL;
		atomic = false;
		if ((rc = in_place_prepare(j, t, &uid, &gid)) < 0) {
			fs_meta_clear(&meta);
			return rc;
		}
		fwrite_init(&w);
		w.before_replace = edit_before_replace;
		w.before_arg = t;
		rc = fwrite_begin(&w, j->target, uid, gid, false, err, sizeof(err));
	}
	snap_close(t, *src);
	*src = -1;
	if (rc == 0)
		rc = fwrite_write(&w, res->buf, res->len, err, sizeof(err));
	if (rc == 0) {
		if (!t->mgtime)
			fs_version_stamp(w.fd);
		keep = dup(w.fd); /* the new file's own stat after the rename */
		rc = fwrite_commit(&w, t->present ? &meta : NULL, err, sizeof(err));
	} else {
		fwrite_discard(&w);
	}
	fs_meta_clear(&meta);
	if (rc < 0 && keep >= 0)
		close(keep);
	if (rc == -ESTALE)
		return rc;
	if (rc < 0) {
		int w_ok = t->present && may_write_by_mode(j, st0) ? may(j->target, W_OK) : 0;
		if (denied(w_ok))
			job_fail(j, RPC_PERMISSION_DENIED, "permission denied: %s: %s", j->path, go_strerror(-w_ok));
		else if (rc == -ENOSPC)
			job_fail(j, RPC_RESOURCE_EXHAUSTED, "%s", err);
		else if (rc == -EISDIR || rc == -ENAMETOOLONG)
			job_fail(j, RPC_INVALID_ARGUMENT, "%s", err);
		else
			job_fail(j, write_failure_code(j->target), "%s", err);
		return rc;
	}
	version[0] = '\0';
	if (keep >= 0 && fstat(keep, &st) == 0) {
		/* The temporary was made beside the snapshot: on its
		 * filesystem, unless a link swapped in meanwhile led away. */
		bool mg = t->mgtime && t->present && st.st_dev == st0->st_dev;
		if (!mg && fs_version_settle(&st, keep, NULL))
			fstat(keep, &st);
		fs_version(&st, version);
	}
	if (keep >= 0)
		close(keep);
	return 0;
}

/*
 * Open the target for its snapshot: in its directory, walked to once
 * (at, which the write then uses as it is), the name not followed; by
 * its path, followed, when it is a symlink's (j->by_path) or the walk
 * fails (a missing directory: a file to create). An fd or -errno; -ELOOP
 * with at open: the name is a symbolic link.
 */
static int snap_open(struct edit_job *j, struct wpath *at)
{
	const int flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
	char werr[2 * PATH_MAX + 512];
	int fd;

	/* openat, not open: musl's open() follows O_CLOEXEC with an
	 * fcntl(FD_CLOEXEC) for kernels that ignored the flag. */
	if (!j->by_path && wpath_parent(at, j->target, NULL, werr, sizeof(werr)) == 0 && at->name[0] && !at->slash) {
		fd = openat(at->dirfd, at->name, flags | O_NOFOLLOW);
	} else {
		wpath_close(at);
		fd = openat(AT_FDCWD, j->target, flags);
	}
	return fd >= 0 ? fd : -errno;
}

/* A change between two stats of one open file. */
static bool changed_between(const struct stat *a, const struct stat *b)
{
	return a->st_size != b->st_size || a->st_mtim.tv_nsec != b->st_mtim.tv_nsec ||
	       a->st_mtim.tv_sec != b->st_mtim.tv_sec || a->st_ctim.tv_nsec != b->st_ctim.tv_nsec ||
	       a->st_ctim.tv_sec != b->st_ctim.tv_sec;
}

/* The file changed under the try: aborted with ifVersion (0), else
 * -ESTALE (try again). */
static int changed(struct edit_job *j)
{
	if (!j->if_version[0])
		return -ESTALE;
	job_fail(j, RPC_ABORTED, "%s changed since version %s", j->path, j->if_version);
	return 0;
}

/*
 * The snapshot of the file open as fd: its stat in st0, its version in
 * t, its content in *snap (size bytes). 1, 0 (answered: j->code says
 * how), or -ESTALE: it changed while read; try again.
 */
static int snap_read(struct edit_job *j, int fd, struct edit_try *t, struct stat *st0, char **snap, size_t *size)
{
	struct stat st1;
	int rc;

	if (fstat(fd, st0) < 0 || !S_ISREG(st0->st_mode)) {
		job_fail(j, RPC_INVALID_ARGUMENT, "path is not a file: %s", j->path);
		return 0;
	}
	fs_version(st0, t->version);
	if (j->if_version[0] && strcmp(j->if_version, t->version) != 0) {
		job_fail(j, RPC_ABORTED, "%s changed since version %s (it is at %s now)", j->path, j->if_version,
			 t->version);
		return 0;
	}
	if ((uint64_t)st0->st_size > FS_EDIT_MAX_BYTES) {
		job_fail(j, RPC_FAILED_PRECONDITION, "%s is %lld bytes: Edit takes files up to %u bytes", j->path,
			 (long long)st0->st_size, FS_EDIT_MAX_BYTES);
		return 0;
	}
	/* A change after this read must show in the version: a file
	 * changed within the clock's current tick waits it out. */
	t->mgtime = fs_version_mgtime(st0, fd);
	if (!t->mgtime && fs_version_settle(st0, fd, NULL)) {
		char v[FS_VERSION_LEN + 1];
		fstat(fd, &st1);
		fs_version(&st1, v);
		if (strcmp(v, t->version) != 0)
			return changed(j);
	}
	if (!may_write_by_mode(j, st0) && denied(rc = may(j->target, W_OK))) {
		job_fail(j, RPC_PERMISSION_DENIED, "permission denied: %s: %s", j->path, go_strerror(-rc));
		return 0;
	}
	*size = (size_t)st0->st_size;
	rc = read_whole(fd, *size, snap);
	if (rc == -ESTALE) {
		fs_edit_buf_free(*snap, *size);
		*snap = NULL;
		return changed(j);
	}
	if (rc == -EAGAIN) {
		job_fail(j, RPC_RESOURCE_EXHAUSTED, "edits in flight hold their memory budget (%u MiB); retry: %s",
			 FS_EDIT_MEM_MAX >> 20, j->path);
		return 0;
	}
	if (rc < 0) {
		job_fail(j, rc == -ENOMEM ? RPC_RESOURCE_EXHAUSTED : RPC_INTERNAL, "error reading %s: %s", j->path,
			 go_strerror(-rc));
		return 0;
	}
	/* A change during the read shows at the last look before the
	 * write (edit_before_replace: the version covers the size and
	 * times compared here), so it is not looked for now. */
	return 1;
}

/*
 * One try under the lock. 0 (answered: j->code says how), -ESTALE: the
 * file changed between the read and the rename; try again; or EDIT_LINK.
 */
static int edit_try_once(struct edit_job *j, uint32_t *replacements, char version[FS_VERSION_LEN + 1])
{
	struct edit_try t = { 0 };
	struct fs_edit_result res;
	struct wpath at;
	struct stat st0, st1;
	char *snap = NULL, msg[ERRLEN];
	size_t size = 0;
	int fd, rc = 0;

	wpath_init(&at);
	fd = snap_open(j, &at);
	t.at = at.dirfd >= 0 ? &at : NULL;
	if (fd < 0) {
		int e = -fd;
		if (e == ELOOP && at.dirfd >= 0) {
			rc = EDIT_LINK;
			goto out;
		}
		if (e == EACCES || e == EPERM) {
			job_fail(j, RPC_PERMISSION_DENIED, "permission denied: %s", j->path);
			goto out;
		}
		if (e != ENOENT) {
			job_fail(j, e == ENOTDIR ? RPC_NOT_FOUND : RPC_INTERNAL, "error opening %s: %s", j->path,
				 go_strerror(e));
			goto out;
		}
		if (j->if_version[0]) {
			job_fail(j, RPC_ABORTED, "%s no longer exists (ifVersion %s)", j->path, j->if_version);
			goto out;
		}
		/* A new file: fwrite_begin walks again, making what is missing. */
		wpath_close(&at);
		t.at = NULL;
	} else {
		t.present = true;
		if ((rc = snap_read(j, fd, &t, &st0, &snap, &size)) <= 0)
			goto out;
	}
	rc = fs_edit_apply(snap, size, t.present, j->ops, j->n_ops, FS_EDIT_MAX_BYTES, j->path, &res, msg, sizeof(msg));
	if (rc < 0) {
		job_fail(j, rc == -ENOENT ? RPC_NOT_FOUND : rc == -EAGAIN || rc == -ENOMEM ? RPC_RESOURCE_EXHAUSTED
											   : RPC_FAILED_PRECONDITION,
			 "%s", msg);
		rc = 0;
		goto out;
	}
	*replacements = res.replacements;
	if (!res.changed) {
		/* The edits give back what is there: nothing to write, once
		 * what was read is known to be what is there. */
		if (t.present && (fstat(fd, &st1) < 0 || changed_between(&st0, &st1))) {
			rc = changed(j);
			goto out;
		}
		snprintf(version, FS_VERSION_LEN + 1, "%s", t.version);
		j->code = RPC_OK;
		goto out;
	}
	rc = write_result(j, &t, &at, &fd, &st0, &res, version);
	fs_edit_result_free(&res);
	if (rc == -ESTALE)
		rc = changed(j);
	else if (rc == 0)
		j->code = RPC_OK;
	else
		rc = 0;
out:
	fs_edit_buf_free(snap, size);
	if (fd >= 0)
		close(fd);
	wpath_close(&at);
	return rc;
}

static void edit_run(struct edit_job *j)
{
	Filesystem__EditResponse resp = FILESYSTEM__EDIT_RESPONSE__INIT;
	char version[FS_VERSION_LEN + 1] = "";
	char *real;
	uint32_t replacements = 0;
	int rc = -ESTALE;

	snprintf(j->target, sizeof(j->target), "%s", j->path);
	for (int i = 0; i < FS_EDIT_TRIES && rc == -ESTALE; i++) {
		if (reqjob_gone(&j->rj))
			return;
		if (fguard_lock(j->target, j->rj.timeout) < 0) {
			job_fail(j, RPC_DEADLINE_EXCEEDED, "%s: another write of this file did not finish in time", j->path);
			return;
		}
		rc = edit_try_once(j, &replacements, version);
		fguard_unlock(j->target);
		if (rc == EDIT_LINK) {
			/* A symlink is edited where it leads: the file is
			 * replaced there and the link stays a link. One that
			 * does not resolve (a file to create) is written as
			 * named. Found once (by_path from here on), so not a
			 * try. */
			real = realpath(j->path, NULL);
			snprintf(j->target, sizeof(j->target), "%s", real ? real : j->path);
			free(real);
			j->by_path = true;
			rc = -ESTALE;
			i--;
		}
	}
	if (rc == -ESTALE) {
		job_fail(j, RPC_ABORTED, "%s kept changing while it was edited (%d tries)", j->path, FS_EDIT_TRIES);
		return;
	}
	if (j->code != RPC_OK)
		return;
	resp.version = version;
	resp.replacements = replacements;
	rc = rpc_encode_buf(&j->codec, &resp.base, j->encbuf, sizeof(j->encbuf), &j->enc);
	if (rc < 0)
		job_fail(j, RPC_RESOURCE_EXHAUSTED, "cannot encode response: %s", go_strerror(-rc));
}

static void edit_work(void *arg)
{
	struct edit_job *j = arg;
	int rc = fsid_enter(&j->id, &edit_after_state.saved);

	edit_after_state.snap_fd = -1;
	j->code = RPC_INTERNAL;
	if (rc < 0) {
		job_fail(j, RPC_INTERNAL, "cannot act as uid %u: %s", (unsigned)j->id.uid, go_strerror(-rc));
		return;
	}
	edit_run(j);
	if (worker_after(edit_leave, &edit_after_state) < 0)
		edit_leave(&edit_after_state);
}

static void edit_done(void *arg)
{
	struct edit_job *j = arg;

	rpcjob_answer(&j->rj, j->code, j->err, &j->enc);
}

static void edit_expired(struct reqjob *rj)
{
	struct edit_job *j = REQJOB_CONTAINER(rj, struct edit_job, rj);

	rpcjob_expire(rj, j->path);
}

static void edit_free(struct reqjob *rj)
{
	struct edit_job *j = REQJOB_CONTAINER(rj, struct edit_job, rj);

	rpc_encoded_free(&j->enc);
	free(j->mem);
	free(j);
}

static const struct reqjob_ops edit_ops = { .free = edit_free, .expired = edit_expired };

/* 32 lower-case hex digits, as fs_version writes them. */
static bool is_version(const char *s)
{
	size_t n = 0;

	for (; s[n]; n++)
		if (!((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f')))
			return false;
	return n == FS_VERSION_LEN;
}

/* The request's edits, copied into one block the job owns. 0, or -1
 * once the call was answered. */
static int copy_ops(struct rpc_call *call, struct edit_job *j, const Filesystem__EditRequest *req)
{
	size_t bytes = req->n_edits * sizeof(struct fs_edit_op);
	char *p;

	for (size_t i = 0; i < req->n_edits; i++) {
		const Filesystem__TextEdit *e = req->edits[i];
		bytes += strlen(e->old_text) + strlen(e->new_text) + 2;
	}
	if (!(j->mem = malloc(bytes ? bytes : 1))) {
		rpc_fail(call, RPC_RESOURCE_EXHAUSTED, "out of memory");
		return -1;
	}
	j->ops = (struct fs_edit_op *)(void *)j->mem;
	j->n_ops = req->n_edits;
	p = j->mem + req->n_edits * sizeof(struct fs_edit_op);
	for (size_t i = 0; i < req->n_edits; i++) {
		const Filesystem__TextEdit *e = req->edits[i];
		struct fs_edit_op *op = &j->ops[i];
		op->old_len = strlen(e->old_text);
		op->new_len = strlen(e->new_text);
		op->replace_all = e->replace_all;
		op->old_text = memcpy(p, e->old_text, op->old_len + 1);
		p += op->old_len + 1;
		op->new_text = memcpy(p, e->new_text, op->new_len + 1);
		p += op->new_len + 1;
	}
	return 0;
}

void fs_edit(struct rpc_call *call, const ProtobufCMessage *msg)
{
	const Filesystem__EditRequest *req = (const Filesystem__EditRequest *)msg;
	struct edit_job *j;
	struct user u;
	int64_t ms;
	int rc;

	if (!req->n_edits) {
		rpc_fail(call, RPC_INVALID_ARGUMENT, "no edits");
		return;
	}
	if (req->n_edits > FS_EDIT_MAX_EDITS) {
		rpc_fail(call, RPC_INVALID_ARGUMENT, "%zu edits: at most %d in one call", req->n_edits, FS_EDIT_MAX_EDITS);
		return;
	}
	if (req->if_version[0] && !is_version(req->if_version)) {
		rpc_fail(call, RPC_INVALID_ARGUMENT, "ifVersion is not a version (32 hex digits, as Stat gives): %s",
			 req->if_version);
		return;
	}
	if (!(j = calloc(1, sizeof(*j)))) {
		rpc_fail(call, RPC_RESOURCE_EXHAUSTED, "out of memory");
		return;
	}
	if (caller_of(call, req->path, &u, j->path, sizeof(j->path)) < 0) {
		free(j);
		return;
	}
	if (copy_ops(call, j, req) < 0) {
		free(j);
		return;
	}
	snprintf(j->if_version, sizeof(j->if_version), "%s", req->if_version);
	j->id.uid = u.uid;
	j->id.gid = u.gid;
	j->id.n_groups = u.n_groups < USER_MAX_GROUPS ? u.n_groups : USER_MAX_GROUPS;
	memcpy(j->groups, u.groups, (size_t)j->id.n_groups * sizeof(gid_t));
	j->id.groups = j->groups;
	ms = rpc_call_timeout_ms(call);
	reqjob_init(&j->rj, &edit_ops);
	j->rj.key = worker_path_key(j->path);
	j->rj.timeout = worker_deadline_s(ms);
	j->rj.stall = ms <= 0;
	rpc_call_codec(call, &j->codec);
	rpcjob_attach(&j->rj, call);
	rc = reqjob_run(&j->rj, edit_work, edit_done, j, REQJOB_WRITES);
	if (rc < 0)
		rpc_fail(rpcjob_take(&j->rj), RPC_RESOURCE_EXHAUSTED, "filesystem worker queue is full, retry later: %s: %s",
			 j->path, go_strerror(-rc));
	else if (ms > 0)
		rpc_call_set_deadline_message(call, WORKER_TIMEOUT_FMT, j->rj.timeout, j->path);
	reqjob_release(&j->rj);
}
