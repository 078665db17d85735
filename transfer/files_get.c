/* SPDX-License-Identifier: Apache-2.0 */
/*
 * files_get.c - GET /files (files_get.h).
 *
 * Lifetime: a download is a reqjob (base/reqjob.h) bound to the exchange
 * (http/httpjob.h). The exchange holds a reference until on_close, each
 * job in flight one until its completion, and whoever frees last frees.
 * An archive of a directory or a gzip body hands the exchange on to
 * another responder (files_archive_get, gzsend_start) with
 * reqjob_handoff; the download lets go of it then.
 */
#include "transfer/files_get.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/errstr.h"
#include "base/log.h"
#include "base/pgzip.h"
#include "base/reqjob.h"
#include "base/state.h"
#include "base/users.h"
#include "base/worker.h"
#include "fs/entry.h"
#include "http/httpjob.h"
#include "http/linkrate.h"
#include "transfer/dlplan.h"
#include "transfer/files_archive.h"
#include "transfer/files_common.h"
#include "transfer/files_util.h"
#include "transfer/fsjob.h"
#include "transfer/gzsend.h"

/* File bytes queued per write_file call on identity downloads. */
#define FILE_SEGMENT (4 * 1024 * 1024)

/* Bytes one read job brings in (files on mounts that may hang). */
#define READ_CHUNK (256 * 1024)

/* A piece of the body: bytes of our own (part headers) or a file range. */
struct dl_seg {
	char *mem;          /* owned, or NULL for a file range */
	size_t memlen;
	int64_t off, len;   /* the file range still to send */
};

/*
 * Every call on the file runs in a worker job of its mount: first one job
 * that stats, opens and sizes it, then (unless the mount is a local kind,
 * which sendfile may read from the loop) one job per READ_CHUNK of body.
 * While a job is in flight (reqjob_busy), it owns the fields it fills; the
 * loop waits.
 */
struct download {
	struct reqjob job;      /* the exchange; the jobs' key and deadline */
	char fmt[16];           /* archive= */
	bool archive;
	bool want_sniff;
	bool begun;             /* headers are out */

	/* what the open job found */
	int err;                /* errno of the failed call, 0 if none */
	bool err_open;          /* ... which was open(), not stat() */
	struct stat st;
	int fd;
	uint64_t key;           /* the file's mount (a symlink may lead elsewhere) */
	bool local;
	int64_t size;
	uint8_t sniff[512];
	size_t sniff_n;
	char version[FS_VERSION_LEN + 1]; /* a regular file's: the ETag */
	bool want_sample;       /* judge compressibility (dl_sample) */
	double ratio;           /* ... its answer: expected gzip size / size */

	/* the body */
	struct dl_seg seg[2 * DLPLAN_MAX_RANGES + 1];
	size_t nseg, cur;
	uint8_t *rbuf;          /* the read job's buffer */
	size_t rlen;
	ssize_t rgot;           /* its result, -errno on failure */

	/* Not cleared for a new download (dl_alloc): set before use. */
	char path[PATH_MAX];
	char qpath[PATH_MAX];
};

/*
 * Download structs are kept for reuse on the loop: one is over 8 KiB (two
 * paths), which musl's allocator would hand back to the kernel (madvise)
 * on every free, a syscall per request. A bounded few are kept.
 */
#define DL_CACHE 128
static struct download *dl_cache[DL_CACHE];
static size_t n_dl_cache;

static struct download *dl_alloc(void)
{
	struct download *d;

	if (!n_dl_cache)
		return calloc(1, sizeof(struct download));
	d = dl_cache[--n_dl_cache];
	memset(d, 0, offsetof(struct download, path));
	d->path[0] = d->qpath[0] = '\0';
	return d;
}

static void dl_release(struct download *d)
{
	if (n_dl_cache < DL_CACHE)
		dl_cache[n_dl_cache++] = d;
	else
		free(d);
}

static void dl_free(struct reqjob *j)
{
	struct download *d = REQJOB_CONTAINER(j, struct download, job);

	for (size_t i = 0; i < d->nseg; i++)
		free(d->seg[i].mem);
	free(d->rbuf);
	fsjob_close(d->fd, d->key, d->local);
	dl_release(d);
}

/* A job outlived its deadline: answer 504, or cut the body if it began. */
static void dl_expired(struct reqjob *j)
{
	struct download *d = REQJOB_CONTAINER(j, struct download, job);
	struct http_req *r = httpjob_req(j);
	char msg[FILES_MSGLEN];

	if (d->begun) {
		log_warn("files", "files_get: %s: read did not return within %g s; download cut", d->path, j->timeout);
		http_resp_abort(r); /* may call on_close */
		return;
	}
	fsjob_timeout_msg(msg, sizeof(msg), j->timeout, d->path);
	http_respond_json_error(r, 504, msg); /* may call on_close */
}

static const struct reqjob_ops dl_ops = { .free = dl_free, .expired = dl_expired };

static void dl_read_work(void *arg)
{
	struct download *d = arg;
	struct dl_seg *s = &d->seg[d->cur];
	size_t got = 0;

	while (got < d->rlen) {
		ssize_t k = pread(d->fd, d->rbuf + got, d->rlen - got, (off_t)(s->off + (int64_t)got));
		if (k == 0)
			break;
		if (k < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				break;
			d->rgot = -errno;
			return;
		}
		got += (size_t)k;
	}
	d->rgot = (ssize_t)got;
}

static void dl_pump(struct download *d);

/* Loop, while the exchange is live: a chunk is in. */
static void dl_read_done(void *arg)
{
	struct download *d = arg;
	struct http_req *r = httpjob_req(&d->job);
	struct dl_seg *s = &d->seg[d->cur];

	if (d->rgot <= 0) {
		/* Headers are out: all we can do is cut the body. */
		log_error("files", "files_get: read of '%s' failed mid-download: %s", d->path,
			  d->rgot < 0 ? go_strerror((int)-d->rgot) : "file shrank");
		http_resp_abort(r);
		return;
	}
	uint8_t *b = d->rbuf;
	d->rbuf = NULL;
	if (http_resp_write_owned(r, b, (size_t)d->rgot, free, b) < 0)
		return; /* client gone; on_close follows */
	s->off += d->rgot;
	s->len -= d->rgot;
	dl_pump(d);
}

/* Read the next chunk of the current file range on the worker pool. */
static void dl_read_submit(struct download *d)
{
	struct dl_seg *s = &d->seg[d->cur];

	if (!d->rbuf && !(d->rbuf = malloc(READ_CHUNK))) {
		log_error("files", "files_get: out of memory reading '%s'", d->path);
		http_resp_abort(httpjob_req(&d->job));
		return;
	}
	d->rlen = s->len > READ_CHUNK ? READ_CHUNK : (size_t)s->len;
	if (reqjob_run(&d->job, dl_read_work, dl_read_done, d, 0) < 0) {
		log_error("files", "files_get: worker queue full reading '%s'; download cut", d->path);
		http_resp_abort(httpjob_req(&d->job));
	}
}

/* Queue body pieces while the queue has room. Ends the response when all is queued. */
static void dl_pump(struct download *d)
{
	struct http_req *r = httpjob_req(&d->job);

	while (d->cur < d->nseg) {
		struct dl_seg *s = &d->seg[d->cur];
		if (reqjob_busy(&d->job) || http_resp_queued(r) >= HTTP_QUEUE_HIGH)
			return; /* the job or on_writable calls again */
		if (s->mem) {
			int rc = http_resp_write(r, s->mem, s->memlen);
			free(s->mem);
			s->mem = NULL;
			if (rc < 0)
				return;
			d->cur++;
			continue;
		}
		if (s->len <= 0) {
			d->cur++;
			continue;
		}
		if (!d->local) {
			dl_read_submit(d);
			return;
		}
		/* A local file: sendfile from the loop. Queued segments hold
		 * their own duplicate of the fd. */
		int64_t n = s->len > FILE_SEGMENT ? FILE_SEGMENT : s->len;
		if (http_resp_write_file(r, d->fd, (off_t)s->off, (size_t)n) < 0)
			return; /* client gone; on_close follows */
		s->off += n;
		s->len -= n;
	}
	http_resp_end(r, NULL, 0); /* may call on_close */
}

static void dl_on_writable(struct http_req *r)
{
	struct reqjob *j = httpjob_of(r);

	if (!j || reqjob_busy(j) || r->resp_ended)
		return;
	dl_pump(REQJOB_CONTAINER(j, struct download, job));
}

/* Begin the response and send the segments set up in d. */
static void dl_begin(struct download *d, int status, const struct http_hdr *h, size_t nh, int64_t len)
{
	struct http_req *r = httpjob_req(&d->job);

	r->on_writable = dl_on_writable;
	d->begun = true;
	if (http_resp_begin(r, status, h, nh, len) < 0)
		return;
	dl_pump(d);
}

/*
 * 206 multipart/byteranges (Go's ServeContent layout): part headers are
 * small memory pieces, part bodies file ranges (bounded by DLPLAN_MAX_RANGES).
 * h[] may contain a NULL-named slot to drop.
 */
static void serve_byteranges(struct download *d, const struct dlplan *p)
{
	const struct http_hdr *h = p->h;
	const struct files_range *rg = p->rg;
	size_t nh = p->nh, n = p->nrg;
	int64_t size = d->size;
	const char *ctype = p->ctype;
	char boundary[40], ctbuf[96], ph[256];
	struct http_hdr hh[12];
	size_t k = 0;
	int64_t total = 0;

	files_random_hex(boundary, 30);
	for (size_t i = 0; i < n; i++) {
		int l = snprintf(ph, sizeof(ph), "%s--%s\r\nContent-Range: bytes %lld-%lld/%lld\r\nContent-Type: %s\r\n\r\n",
				 i ? "\r\n" : "", boundary, (long long)rg[i].start,
				 (long long)(rg[i].start + rg[i].len - 1), (long long)size, ctype);
		if (l >= (int)sizeof(ph))
			l = (int)sizeof(ph) - 1;
		d->seg[d->nseg].mem = strndup(ph, (size_t)l);
		d->seg[d->nseg++].memlen = (size_t)l;
		d->seg[d->nseg].off = rg[i].start;
		d->seg[d->nseg++].len = rg[i].len;
		total += l + rg[i].len;
	}
	int tl = snprintf(ph, sizeof(ph), "\r\n--%s--\r\n", boundary);
	d->seg[d->nseg].mem = strndup(ph, (size_t)tl);
	d->seg[d->nseg++].memlen = (size_t)tl;
	total += tl;
	for (size_t i = 0; i < d->nseg; i++)
		if (i % 2 == 0 && !d->seg[i].mem) {
			http_respond_json_error(httpjob_req(&d->job), 500, "out of memory");
			return;
		}
	for (size_t i = 0; i < nh && k < 10; i++)
		if (h[i].name)
			hh[k++] = h[i];
	snprintf(ctbuf, sizeof(ctbuf), "multipart/byteranges; boundary=%s", boundary);
	hh[k++] = (struct http_hdr){ "content-type", ctbuf };
	dl_begin(d, 206, hh, k, total);
}

bool files_gzip_always;

/* Files smaller than this go out as they are: gzip cannot save a packet. */
#define DL_GZIP_MIN 2048
/* Bytes read at the start and the middle of a file to judge how it shrinks. */
#define DL_SAMPLE 16384

/* Worker (with the open): how a sample of the file shrinks, d->ratio. */
static void dl_sample(struct download *d)
{
	uint8_t *buf;

	d->ratio = 1.0;
	if (!S_ISREG(d->st.st_mode)) {
		d->ratio = 0.0; /* no size to sample from (a pipe, /proc): as before, gzip */
		return;
	}
	if (d->size < DL_GZIP_MIN || !(buf = malloc(2 * DL_SAMPLE)))
		return;
	ssize_t a = pread(d->fd, buf, DL_SAMPLE, 0);
	ssize_t b = a == DL_SAMPLE && d->size > 2 * DL_SAMPLE ? pread(d->fd, buf + DL_SAMPLE, DL_SAMPLE, d->size / 2) : 0;
	if (a < 0)
		d->ratio = 0.0; /* the download itself reports the error */
	else
		d->ratio = pgz_sample_ratio(buf, (size_t)a + (size_t)(b > 0 ? b : 0));
	free(buf);
}

/*
 * Whether a download offered gzip should get it: only where gzip is
 * expected to arrive sooner than the bytes themselves (the rule is in
 * http/linkrate.c, the figures in docs/performance.md). files_get asks
 * for the sample only when the link does not already decide.
 */
static bool dl_gzip_wins(const struct http_req *r, const struct download *d)
{
	struct link_estimate e;

	if (!d->want_sample)
		return false;
	linkrate_estimate(r, &e);
	return linkrate_prefer_gzip(&e, d->ratio);
}

/* Worker: everything GET needs from the file before answering. Each call
 * is a syscall on the request's path, so as few as can tell it all: open,
 * one statx for the kind, size and mount (fsjob_fd_stat), and a read for
 * the content sniff where the name gives no type. */
static void dl_open_work(void *arg)
{
	struct download *d = arg;

	/* O_NONBLOCK: opening a FIFO must not wait for a writer (it reads
	 * as empty instead). */
	d->fd = open(d->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (d->fd < 0) {
		int e = errno;
		/* Which failure it is, as stat-then-open would have told it:
		 * a path that is not there, or a directory (answered without
		 * opening), or a file that cannot be opened. */
		if (stat(d->path, &d->st) < 0) {
			d->err = errno;
			return;
		}
		if (d->archive || S_ISDIR(d->st.st_mode))
			return;
		d->err = e;
		d->err_open = true;
		return;
	}
	/* The key of where the file really is (a symlink may lead to
	 * another mount), for the jobs that follow. */
	int rc = fsjob_fd_stat(d->fd, &d->st, &d->key, &d->local);
	if (rc < 0) {
		d->err = -rc;
		close(d->fd);
		d->fd = -1;
		return;
	}
	if (d->archive || S_ISDIR(d->st.st_mode)) {
		close(d->fd); /* answered by the path; here, on its worker */
		d->fd = -1;
		return;
	}
	/* The size: a regular file's from the statx; of anything else by
	 * seeking, as Go's ServeContent does (a block device has one). */
	if (S_ISREG(d->st.st_mode)) {
		/* The version, strong as Stat's: a file changed in the
		 * clock's current tick may wait it out (fs/entry.h). */
		if (fs_version_settle(&d->st, d->fd, NULL))
			fstat(d->fd, &d->st);
		fs_version(&d->st, d->version);
		d->size = (int64_t)d->st.st_size;
	} else {
		off_t size = lseek(d->fd, 0, SEEK_END);
		d->size = size < 0 ? 0 : (int64_t)size;
	}
	if (d->want_sniff) {
		ssize_t n = pread(d->fd, d->sniff, sizeof(d->sniff), 0);
		d->sniff_n = n > 0 ? (size_t)n : 0;
	}
	if (d->want_sample)
		dl_sample(d);
}

/* Hand the exchange to the gzip sender, with the open file. */
static void dl_send_gzip(struct download *d, const struct dlplan *p)
{
	struct gzsend_src src = { .fd = d->fd, .size = S_ISREG(d->st.st_mode) ? (int64_t)d->st.st_size : 0,
				  .key = d->key, .local = d->local, .timeout = d->job.timeout };

	snprintf(src.path, sizeof(src.path), "%s", d->path);
	d->fd = -1; /* the sender's now */
	gzsend_start(&d->job, &src, p->h, p->nh);
}

/* Loop, while the exchange is live: plan the answer from what the open
 * found (transfer/dlplan.h), then carry it out. */
static void dl_open_done(void *arg)
{
	struct download *d = arg;
	struct http_req *r = httpjob_req(&d->job);
	struct dlplan p;
	struct dlplan_in in = { .path = d->path, .qpath = d->qpath, .archive = d->archive, .err = d->err,
				.err_open = d->err_open, .mode = d->st.st_mode, .mtime = d->st.st_mtim.tv_sec,
				.version = d->version,
				.size = d->size, .sniff = d->sniff, .sniff_n = d->sniff_n,
				.gzip_always = files_gzip_always, .gzip_wins = dl_gzip_wins(r, d) };

	d->job.key = d->key; /* the reads' mount: where the file really is */
	dlplan_make(r, &in, &p);
	if (p.vary)
		http_req_extra_header(r, "Vary", "Accept-Encoding", true);
	switch (p.kind) {
	case DLPLAN_ERROR:
		http_respond_json_error(r, p.status, p.msg);
		return;
	case DLPLAN_ARCHIVE:
		files_archive_get(&d->job, d->path, d->fmt);
		return;
	case DLPLAN_GZIP:
		dl_send_gzip(d, &p);
		return;
	case DLPLAN_EMPTY:
		d->begun = true;
		http_resp_begin(r, p.status, p.h, p.nh, 0);
		http_resp_end(r, NULL, 0); /* may call on_close */
		return;
	case DLPLAN_UNSATISFIABLE:
		http_respond(r, p.status, "text/plain; charset=utf-8", p.msg, strlen(p.msg), p.h, p.nh);
		return;
	case DLPLAN_BYTERANGES:
		serve_byteranges(d, &p);
		return;
	case DLPLAN_BODY:
		d->seg[0].off = p.start;
		d->seg[0].len = p.len;
		d->nseg = 1;
		dl_begin(d, p.status, p.h, p.nh, p.len);
		return;
	}
}

void files_get(struct http_req *r)
{
	char uname[256], qpath[PATH_MAX], err[FILES_MSGLEN], msg[FILES_MSGLEN];
	struct download *d;
	struct user u;

	if (files_check_signing(r, "read"))
		return;
	files_request_username(r, uname, sizeof(uname));
	if (files_lookup_user(r, uname, &u))
		return;
	if (http_query_get(r->query, "path", qpath, sizeof(qpath)) <= 0)
		qpath[0] = '\0';
	d = dl_alloc();
	if (!d) {
		http_respond_json_error(r, 500, "out of memory");
		return;
	}
	reqjob_init(&d->job, &dl_ops);
	d->fd = -1;
	snprintf(d->qpath, sizeof(d->qpath), "%s", qpath);
	if (path_resolve(&u, qpath, state_default_workdir(), d->path, sizeof(d->path), err, sizeof(err)) < 0) {
		dl_release(d);
		files_respond_fmt(r, 400, "error expanding and resolving path '%s': %s", qpath, err);
		return;
	}
	d->archive = http_query_get(r->query, "archive", d->fmt, sizeof(d->fmt)) > 0;
	d->want_sniff = !files_mime_by_ext(qpath);
	/* The compressibility sample is read with the open, and only when
	 * gzip is offered and the link does not already rule it out. */
	const char *ae = http_req_header(r, "accept-encoding");
	struct link_estimate e;
	linkrate_estimate(r, &e);
	d->want_sample = !files_gzip_always && ae && strcasestr(ae, "gzip") && linkrate_prefer_gzip(&e, 0.0);
	d->job.key = worker_path_key(d->path);
	d->job.timeout = worker_fs_timeout;
	httpjob_attach(&d->job, r);
	if (reqjob_run(&d->job, dl_open_work, dl_open_done, d, 0) < 0) {
		fsjob_busy_msg(msg, sizeof(msg), d->path);
		http_respond_json_error(r, 503, msg); /* may call on_close */
	}
	reqjob_release(&d->job);
}