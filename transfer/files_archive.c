/* SPDX-License-Identifier: Apache-2.0 */
/*
 * files_archive.c - GET /files?archive= and POST /files?extract=.
 *
 * Download: the archive is produced on the worker pool, about 256 KiB a
 * job, and queued on the response; the next job starts once the queue is
 * below HTTP_QUEUE_HIGH again (on_writable). For identity tar over
 * HTTP/1.1 the bodies of files of 64 KiB or more are queued as file
 * segments, which the transport sends with sendfile(2).
 *
 * Upload: a first worker job checks DIR and prepares the spool (a 504
 * when the filesystem does not answer in time); the body (inflated if
 * Content-Encoding: gzip) is then spooled to an unnamed temporary file
 * in DIR's parent directory by worker jobs, through the upload pump of
 * plain uploads (transfer/uppump.h), which pauses the client while a job
 * is behind.
 * Once it is complete, one worker job extracts it into a temporary
 * directory beside DIR and moves the result into place. Memory stays at
 * two 1 MiB body buffers whatever the archive's size; disk holds the
 * archive once more while extracting. Zip needs its central directory at
 * the end anyway, which is why the body is complete before extraction.
 *
 * Lifetime: a download's context is a reqjob (base/reqjob.h) that the
 * exchange is handed to by GET /files; the exchange and each job in
 * flight hold a reference, so a job still running when the client goes
 * away frees it on return. An extraction embeds the upload pump, a reqjob
 * too.
 */
#include "transfer/files_archive.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/errstr.h"
#include "base/log.h"
#include "base/reqjob.h"
#include "base/worker.h"
#include "http/httpjob.h"
#include "transfer/archive.h"
#include "fs/entry.h"
#include "fs/wpath.h"
#include "transfer/files_util.h"
#include "transfer/fsjob.h"
#include "transfer/uppump.h"

#define FILL_WANT (256 * 1024)

/* ======================= GET ======================= */

/*
 * Every step runs in a worker job keyed by DIR's mount, with a deadline:
 * the first opens DIR and starts the writer (a 504 if it does not return
 * in time), each next one fills about FILL_WANT bytes (the stream is cut
 * if one does not). The writer holds directory streams and files of the
 * tree, so it is freed on a worker too.
 */
struct adl {
	struct reqjob job;      /* the exchange; the jobs' key (DIR's mount) and deadline */
	char dir[PATH_MAX];
	enum arch_format f;
	bool zero_copy;         /* asked for (HTTP/1.x); granted if DIR is local */
	struct arch_writer *w;
	struct arch_piece pieces[ARCH_MAX_PIECES];
	size_t np;
	int rc;
	bool begun;             /* headers are out */
	char err[512];
};

static void adl_writer_free(void *arg)
{
	arch_writer_free(arg);
}

static void adl_free(struct reqjob *j)
{
	struct adl *d = REQJOB_CONTAINER(j, struct adl, job);

	if (d->w)
		fsjob_release(adl_writer_free, d->w, j->key);
	free(d);
}

/* A job outlived its deadline: answer 504, or cut the archive if it began. */
static void adl_expired(struct reqjob *j)
{
	struct adl *d = REQJOB_CONTAINER(j, struct adl, job);
	struct http_req *r = httpjob_req(j);
	char msg[PATH_MAX + 128];

	if (d->begun) {
		log_warn("files", "files_get: archive of %s: the filesystem did not answer within %g s; archive cut",
			 d->dir, j->timeout);
		http_resp_abort(r); /* may call on_close */
		return;
	}
	fsjob_timeout_msg(msg, sizeof(msg), j->timeout, d->dir);
	http_respond_json_error(r, 504, msg); /* may call on_close */
}

static const struct reqjob_ops adl_ops = { .free = adl_free, .expired = adl_expired };

static void adl_work(void *arg)
{
	struct adl *d = arg;
	d->rc = arch_writer_fill(d->w, FILL_WANT, d->pieces, &d->np, d->err, sizeof(d->err));
}

static void adl_pump(struct http_req *r);

/* Loop, while the exchange is live: queue what the job made. */
static void adl_done(void *arg)
{
	struct adl *d = arg;
	struct http_req *r = httpjob_req(&d->job);

	for (size_t i = 0; i < d->np; i++) {
		const struct arch_piece *p = &d->pieces[i];
		int rc = p->fd >= 0 ? http_resp_write_file(r, p->fd, p->off, (size_t)p->len) : http_resp_write(r, p->p, p->n);
		if (rc < 0)
			return; /* client gone; on_close follows */
	}
	if (d->rc < 0) {
		/* Headers are out: all we can do is stop; the archive lacks its
		 * end, which readers report as truncated. */
		log_error("files", "files_get: archive failed mid-stream: %s", d->err);
		http_resp_abort(r); /* may free d */
		return;
	}
	if (d->rc == 0) {
		uint64_t n, skipped;
		arch_writer_counts(d->w, &n, &skipped);
		log_info("files", "files_get: archive sent: %llu entries, %llu skipped", (unsigned long long)n,
			 (unsigned long long)skipped);
		http_resp_end(r, NULL, 0); /* may free d */
		return;
	}
	adl_pump(r);
}

static void adl_pump(struct http_req *r)
{
	struct reqjob *j = httpjob_of(r);

	if (!j || reqjob_busy(j) || r->resp_ended || http_resp_queued(r) >= HTTP_QUEUE_HIGH)
		return; /* on_writable or the running job calls again */
	struct adl *d = REQJOB_CONTAINER(j, struct adl, job);
	if (reqjob_run(j, adl_work, adl_done, d, 0) < 0) {
		log_error("files", "files_get: worker queue full archiving '%s'; archive cut", d->dir);
		http_resp_abort(r);
	}
}

/* Worker: open DIR, learn its mount, start the writer. */
static void adl_open_work(void *arg)
{
	struct adl *d = arg;
	bool local = false;
	uint64_t key;
	int fd = open(d->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd >= 0) {
		fsjob_fd_mount(fd, &key, &local);
		close(fd);
	}
	d->w = arch_writer_new(d->dir, d->f, d->zero_copy && local, d->err, sizeof(d->err));
}

static void adl_open_done(void *arg)
{
	struct adl *d = arg;
	struct http_req *r = httpjob_req(&d->job);
	char base[PATH_MAX], fname[PATH_MAX + 16], disp[PATH_MAX * 3 + 64];

	if (!d->w) {
		http_respond_json_error(r, 500, d->err); /* on_close frees d */
		return;
	}
	path_base(d->dir, base, sizeof(base));
	if (!strcmp(base, "/") || !strcmp(base, "."))
		snprintf(base, sizeof(base), "root");
	snprintf(fname, sizeof(fname), "%s.%s", base, arch_format_ext(d->f));
	/* files_content_disposition writes `inline; filename=...`, quoted
	 * only when it must be; a download is an attachment, name quoted. */
	files_content_disposition(fname, disp, sizeof(disp));
	char adisp[sizeof(disp) + 16];
	const char *fv = disp + strlen("inline; filename=");
	if (!strncmp(disp, "inline; filename=", strlen("inline; filename=")) && *fv != '"')
		snprintf(adisp, sizeof(adisp), "attachment; filename=\"%s\"", fv);
	else
		snprintf(adisp, sizeof(adisp), "attachment%s", disp + strlen("inline"));
	struct http_hdr h[] = {
		{ "content-type", arch_format_mime(d->f) },
		{ "content-disposition", adisp },
	};
	r->on_writable = adl_pump;
	d->begun = true;
	if (http_resp_begin(r, 200, h, 2, -1) < 0)
		return;
	adl_pump(r);
}

void files_archive_get(struct reqjob *from, const char *dir, const char *format)
{
	struct http_req *r = httpjob_req(from);
	char msg[PATH_MAX + 128];
	int f = arch_format_parse(format);

	if (f < 0) {
		snprintf(msg, sizeof(msg), "unsupported archive format '%.256s', supported: tar, tgz, zip", format);
		http_respond_json_error(r, 400, msg);
		return;
	}
	struct adl *d = calloc(1, sizeof(*d));
	if (!d) {
		http_respond_json_error(r, 500, "out of memory");
		return;
	}
	reqjob_init(&d->job, &adl_ops);
	snprintf(d->dir, sizeof(d->dir), "%s", dir);
	d->f = (enum arch_format)f;
	/* sendfile only where the transport does it: HTTP/1.x. */
	d->zero_copy = r->version < 20;
	d->job.key = worker_path_key(dir);
	d->job.timeout = worker_fs_timeout;
	/* Handed over, the exchange holds d; if it is gone, the release below frees d. */
	if (reqjob_handoff(from, &d->job) == 0 && reqjob_run(&d->job, adl_open_work, adl_open_done, d, 0) < 0) {
		fsjob_busy_msg(msg, sizeof(msg), dir);
		http_respond_json_error(r, 503, msg); /* may call on_close */
	}
	reqjob_release(&d->job);
}

/* ======================= POST ======================= */

struct aup {
	/* The body, the exchange, the jobs (key: the parent's mount). Its
	 * `shown` is DIR as the client named it, for the list too. */
	struct uppump pump;
	struct user u;
	enum arch_format fmt;
	char dir[PATH_MAX];     /* where to extract, as named (for messages) */
	char parent[PATH_MAX];  /* its directory, as named (for messages) */
	char base[NAME_MAX + 1]; /* DIR's name in parent_fd (links followed) */
	int parent_fd;          /* where the temporary directory goes (O_PATH) */
	/* The identity the walk to parent_fd went on with (fs/wpath.h): every
	 * call in parent_fd and below is made with it, so a link of another
	 * user's on the way does not carry root's rights (its dirfd is -1:
	 * the directory moved to parent_fd). */
	struct wpath walk;
	bool inside;            /* ... which is DIR itself (a mount point) */
	int spool_fd;
	int list_fd;
	uint64_t spooled;
	/* Set by the jobs, read on the loop between them. */
	uint64_t key;           /* the mount of the parent, for every job */
	bool local;             /* ... which cannot hang: fds closed on the loop */
	char *list_mem;         /* the entry list, read back when not local */
	struct arch_extract x;
};

static struct aup *aup_of(struct uppump *p)
{
	return UPPUMP_OWNER(p, struct aup, pump);
}

static void aup_free(struct uppump *p)
{
	struct aup *a = aup_of(p);

	fsjob_close(a->parent_fd, a->key, a->local);
	wpath_close(&a->walk); /* its dirfd is parent_fd's or -1 */
	fsjob_close(a->spool_fd, a->key, a->local);
	fsjob_close(a->list_fd, a->key, a->local);
	free(a->list_mem);
	free(a);
}

/* Record the extraction's error (the first one wins); the loop sends it. */
#define aup_error(a, ...) uppump_fail(&(a)->pump, __VA_ARGS__)

/* An error of a call in parent_fd: 403 when the identity may not. */
static int aup_fs_status(int e)
{
	return e == EACCES || e == EPERM ? 403 : e == ENOSPC || e == EDQUOT ? 507 : 500;
}

/* An unnamed file in dir (removed by the kernel however we exit). */
static int anon_file(int dirfd)
{
	int fd = openat(dirfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL))
		return fd;
	char name[64];
	unsigned char b[8];
	if (getrandom(b, sizeof(b), GRND_NONBLOCK) != sizeof(b))
		memset(b, 0x5a, sizeof(b));
	snprintf(name, sizeof(name), ".e2b-spool.%02x%02x%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3], b[4], b[5],
		 b[6], b[7]);
	fd = openat(dirfd, name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
	if (fd >= 0)
		unlinkat(dirfd, name, 0);
	return fd;
}

static int aup_spool(struct aup *a, const uint8_t *p, size_t n)
{
	if (arch_limits.max_bytes && a->spooled + n > arch_limits.max_bytes)
		return aup_error(a, 413, "archive larger than %llu bytes", (unsigned long long)arch_limits.max_bytes);
	while (n) {
		ssize_t w = write(a->spool_fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == ENOSPC || errno == EDQUOT)
				return aup_error(a, 507, "not enough disk space available");
			return aup_error(a, 500, "error storing the archive: %s", go_strerror(errno));
		}
		p += w;
		n -= (size_t)w;
		a->spooled += (uint64_t)w;
	}
	return 0;
}

static int aup_spool_cb(struct uppump *p, const uint8_t *b, size_t n)
{
	return aup_spool(aup_of(p), b, n);
}

static int aup_bad_gzip(struct uppump *p, const char *zmsg)
{
	return aup_error(aup_of(p), 400, "error decompressing request body: gzip: %s", zmsg);
}

static void random_name(char *out, size_t len, const char *base)
{
	unsigned char b[8];
	if (getrandom(b, sizeof(b), GRND_NONBLOCK) != sizeof(b))
		memset(b, 0x3c, sizeof(b));
	snprintf(out, len, ".%.200s.e2b-extract.%02x%02x%02x%02x%02x%02x%02x%02x", base, b[0], b[1], b[2], b[3], b[4],
		 b[5], b[6], b[7]);
}

/* Worker: the whole archive is spooled; extract it and move it into place. */
/*
 * Worker: where the temporary directory goes. Beside DIR, so a new DIR is
 * one rename; inside DIR when DIR is a mount point, or nothing could be
 * renamed into it. 0, or the error recorded.
 */
static int aup_workdir(struct aup *a)
{
	struct stat pst, dst_st;

	if (fstatat(a->parent_fd, a->base, &dst_st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(dst_st.st_mode) &&
	    fstat(a->parent_fd, &pst) == 0 && pst.st_dev != dst_st.st_dev) {
		int dfd = openat(a->parent_fd, a->base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (dfd < 0)
			return aup_error(a, 500, "error opening '%s': %s", a->dir, go_strerror(errno));
		uint64_t k2;
		bool l2;
		fsjob_fd_mount(dfd, &k2, &l2);
		if (!l2) {
			a->local = false;
			a->key = k2;
		}
		close(a->parent_fd);
		a->parent_fd = dfd;
		a->inside = true;
	}
	return 0;
}

static void aup_extract_as(struct aup *a, uid_t uid, gid_t gid)
{
	char tmp[NAME_MAX + 1];
	int root = -1, dst = -1;

	random_name(tmp, sizeof(tmp), a->base);
	if (aup_workdir(a) < 0)
		return;
	if (mkdirat(a->parent_fd, tmp, 0700) < 0) {
		int e = errno;
		if (e == ENOSPC || e == EDQUOT)
			aup_error(a, 507, "not enough disk space available");
		else
			aup_error(a, aup_fs_status(e), "error creating temporary directory in '%s': %s", a->parent,
				  go_strerror(e));
		return;
	}
	root = openat(a->parent_fd, tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	a->list_fd = anon_file(a->parent_fd);
	if (root < 0 || a->list_fd < 0) {
		int e = errno;
		aup_error(a, e == ENOSPC || e == EDQUOT ? 507 : 500, "error preparing extraction in '%s': %s", a->parent,
			  go_strerror(e));
		goto fail;
	}
	struct arch_extract *x = &a->x;
	x->archive_fd = a->spool_fd;
	x->archive_size = a->spooled;
	x->format = a->fmt;
	x->root_fd = root;
	x->final_dir = a->pump.shown;
	x->uid = uid;
	x->gid = gid;
	x->keep_setid = uid == 0 && wpath_as_root(&a->walk);
	x->list_fd = a->list_fd;
	if (arch_extract_run(x) < 0) {
		aup_error(a, x->status, "%s", x->msg);
		goto fail;
	}
	/* Into place. */
	if (a->inside)
		dst = openat(a->parent_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	else
		dst = openat(a->parent_fd, a->base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dst < 0 && errno == ENOENT) {
		fchown(root, uid, gid);
		fchmod(root, 0755);
		if (renameat(a->parent_fd, tmp, a->parent_fd, a->base) == 0)
			goto ok;
		/* Someone created DIR meanwhile: merge instead. */
		dst = openat(a->parent_fd, a->base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	}
	if (dst < 0) {
		aup_error(a, errno == ENOTDIR || errno == ELOOP ? 400 : 500, "error opening '%s': %s", a->dir,
			  go_strerror(errno));
		goto fail;
	}
	int st = 500;
	if (arch_merge_check(root, dst, &st, a->x.msg, sizeof(a->x.msg)) < 0) {
		aup_error(a, st, "%s", a->x.msg);
		goto fail;
	}
	if (arch_merge(root, dst, a->x.msg, sizeof(a->x.msg)) < 0) {
		/* Only an I/O error gets here (the check passed): some names
		 * may be in place already; say so rather than pretend. */
		aup_error(a, 500, "%s (extraction partly applied)", a->x.msg);
		goto fail;
	}
	arch_remove_tree(a->parent_fd, tmp); /* what is left: emptied directories */
ok:
	if (root >= 0)
		close(root);
	if (dst >= 0)
		close(dst);
	return;
fail:
	if (root >= 0)
		close(root);
	if (dst >= 0)
		close(dst);
	arch_remove_tree(a->parent_fd, tmp);
}

/*
 * Extract with the walk's identity. Past a link of another user's that is
 * that user's (what they could have made themselves, owned by them: the
 * identity cannot give files away); otherwise root's, the tree given to
 * the request's user.
 */
static void aup_extract(struct aup *a)
{
	struct fsid_saved sv;

	if (wpath_enter(&a->walk, &sv) < 0) {
		aup_error(a, 500, "error taking the identity to extract into '%s'", a->dir);
		return;
	}
	if (a->walk.as.set)
		aup_extract_as(a, a->walk.as.uid, a->walk.as.gid);
	else
		aup_extract_as(a, a->u.uid, a->u.gid);
	wpath_leave(&sv);
}

/* Worker: the entry list into memory, for a mount the loop must not read. */
static void aup_list_read(struct aup *a)
{
	size_t got = 0, n = (size_t)a->x.list_len;

	if (a->local || !n || a->pump.failed)
		return;
	if (!(a->list_mem = malloc(n))) {
		aup_error(a, 500, "out of memory");
		return;
	}
	while (got < n) {
		ssize_t k = pread(a->list_fd, a->list_mem + got, n - got, (off_t)got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			aup_error(a, 500, "error reading the entry list: %s", k < 0 ? go_strerror(errno) : "short read");
			return;
		}
		got += (size_t)k;
	}
}

/*
 * Worker: check DIR, make its parent, open the spool there. The parent is
 * reached by the write walk (fs/wpath.h), and a DIR that is a symbolic
 * link is followed under the same rule: extraction happens beside its
 * target, so the final rename stays on one filesystem.
 */
static void aup_setup(struct aup *a)
{
	struct wpath_mk mk = { .uid = a->u.uid, .gid = a->u.gid };
	struct fsid_saved sv;
	char err[2 * PATH_MAX + 512];
	struct stat st;
	int rc, e;

	wpath_close(&a->walk);
	snprintf(a->dir, sizeof(a->dir), "%s", a->pump.shown);
	fs_path_dir(a->dir, a->parent, sizeof(a->parent));
	rc = wpath_parent(&a->walk, a->pump.shown, &mk, err, sizeof(err));
	for (;;) {
		if (rc < 0) {
			aup_error(a, rc == -EACCES ? 403 : rc == -ENOTDIR ? 400 : 500, "error ensuring directories: %s",
				  err);
			goto fail;
		}
		if (!a->walk.name[0] || !strcmp(a->walk.name, ".") || !strcmp(a->walk.name, "..")) {
			aup_error(a, 400, "cannot extract into the root directory");
			goto fail;
		}
		if ((rc = wpath_enter(&a->walk, &sv)) == 0)
			rc = fstatat(a->walk.dirfd, a->walk.name, &st, AT_SYMLINK_NOFOLLOW) == 0 ? 0 : -errno;
		wpath_leave(&sv);
		if (rc == 0 && S_ISLNK(st.st_mode)) {
			rc = wpath_follow(&a->walk, err, sizeof(err));
			continue;
		}
		break;
	}
	if (rc == 0 && !S_ISDIR(st.st_mode)) {
		aup_error(a, 400, "path '%s' is not a directory", a->pump.shown);
		goto fail;
	}
	if (rc < 0 && rc != -ENOENT) {
		aup_error(a, aup_fs_status(-rc), "error checking path '%s': %s", a->pump.shown, go_strerror(-rc));
		goto fail;
	}
	snprintf(a->base, sizeof(a->base), "%s", a->walk.name);
	a->parent_fd = a->walk.dirfd;
	a->walk.dirfd = -1;
	fsjob_fd_mount(a->parent_fd, &a->key, &a->local);
	if ((rc = wpath_enter(&a->walk, &sv)) == 0)
		a->spool_fd = anon_file(a->parent_fd);
	e = rc < 0 ? -rc : errno;
	wpath_leave(&sv);
	if (a->spool_fd < 0)
		aup_error(a, aup_fs_status(e), "error creating temporary file in '%s': %s", a->parent, go_strerror(e));
	return;
fail:
	wpath_close(&a->walk); /* here, not on the loop: its mount may hang */
}

/* Worker, before each job's bytes: the first one sets up. */
static void aup_prepare(struct uppump *p)
{
	struct aup *a = aup_of(p);

	if (a->parent_fd < 0)
		aup_setup(a);
}

/* Worker: the whole archive is spooled: extract it. */
static void aup_finish(struct uppump *p)
{
	struct aup *a = aup_of(p);

	if (p->gzip && (!p->got_input || !p->zended)) {
		aup_error(a, 400, "error decompressing request body: gzip: unexpected EOF");
		return;
	}
	aup_extract(a);
	aup_list_read(a);
}

/* Loop: a job is back; the next runs where the parent really is. */
static void aup_back(struct uppump *p)
{
	p->job.key = aup_of(p)->key;
}

/* Setting up and spooling have the deadline; the extraction itself has
 * none (a large archive takes its time on a healthy disk). */
static bool aup_unbounded(struct uppump *p, bool finishing)
{
	return finishing && aup_of(p)->parent_fd >= 0 && !p->failed;
}

static void aup_respond(struct uppump *p, struct http_req *r)
{
	struct aup *a = aup_of(p);
	struct http_hdr h[] = { { "content-type", "application/json" } };

	log_info("files", "files_post: extracted %llu entries (%llu bytes) into %s", (unsigned long long)a->x.entries,
		 (unsigned long long)a->x.bytes, a->dir);
	if (http_resp_begin(r, 200, h, 1, (int64_t)a->x.list_len + 3) < 0)
		return;
	if (http_resp_write(r, "[", 1) < 0)
		return;
	if (a->x.list_len && (a->list_mem ? http_resp_write(r, a->list_mem, (size_t)a->x.list_len)
					 : http_resp_write_file(r, a->list_fd, 0, (size_t)a->x.list_len)) < 0)
		return;
	if (http_resp_write(r, "]\n", 2) < 0)
		return;
	http_resp_end(r, NULL, 0); /* may call on_close */
}

static const struct uppump_ops aup_pump_ops = {
	.prepare = aup_prepare,
	.sink = aup_spool_cb,
	.bad_gzip = aup_bad_gzip,
	.finish = aup_finish,
	.back = aup_back,
	.unbounded = aup_unbounded,
	.respond = aup_respond,
	.free = aup_free,
};

void files_archive_post(struct http_req *r, const struct user *u, const char *dir, const char *format, bool gzip)
{
	char msg[PATH_MAX + 1024];
	int f = arch_format_parse(format);

	if (f < 0) {
		snprintf(msg, sizeof(msg), "unsupported archive format '%.256s', supported: tar, tgz, zip", format);
		http_respond_json_error(r, 400, msg);
		return;
	}
	struct aup *a = calloc(1, sizeof(*a));
	if (!a) {
		http_respond_json_error(r, 500, "out of memory");
		return;
	}
	uppump_init(&a->pump, &aup_pump_ops);
	a->u = *u;
	a->fmt = (enum arch_format)f;
	a->parent_fd = a->spool_fd = a->list_fd = -1;
	wpath_init(&a->walk);
	snprintf(a->pump.shown, sizeof(a->pump.shown), "%s", dir);
	a->key = a->pump.job.key = worker_path_key(dir);
	a->pump.job.timeout = worker_fs_timeout;
	if (uppump_alloc(&a->pump, gzip) < 0) {
		http_respond_json_error(r, 500, "out of memory");
	} else {
		/* The first job checks DIR and opens the spool; body bytes
		 * collect meanwhile (the client is paused once a buffer's
		 * worth waits). */
		uppump_start(&a->pump, r, true);
	}
	reqjob_release(&a->pump.job);
}
