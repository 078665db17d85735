/* SPDX-License-Identifier: Apache-2.0 */
/*
 * files_http.c - GET /files, POST /files and POST /files/compose
 * (docs/protocol.md, "Files HTTP API").
 *
 * Memory is O(1) in the file size in every direction:
 *   - identity downloads queue file ranges (sendfile on HTTP/1.1) a few
 *     MiB at a time, refilled from on_writable;
 *   - gzip downloads are read and compressed in blocks on the worker
 *     pool, a few in flight, while the output queue is below
 *     HTTP_QUEUE_HIGH (transfer/gzsend.c);
 *   - uploads are inflated (if gzip) and parsed (if multipart) as they
 *     arrive and written straight to the target file. That work runs on
 *     the worker pool, one job per upload at a time; the loop only
 *     collects body bytes and pauses the client while a job is behind.
 *
 * Lifetime: a handler's context lives in r->ud from the first callback
 * registration until on_close, which frees it. http_resp_end() may call
 * on_close synchronously, so nothing touches the context after ending a
 * response.
 */
#include "transfer/files_http.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "fs/entry.h"
#include "transfer/files_archive.h"
#include "base/buf.h"
#include "base/errstr.h"
#include "transfer/files_util.h"
#include "base/pgzip.h"
#include "transfer/fsjob.h"
#include "transfer/gzsend.h"
#include "http/linkrate.h"
#include "transfer/multipart.h"
#include "base/uptmp.h"
#include "base/log.h"
#include "base/state.h"
#include "base/users.h"
#include "base/worker.h"

#define MSGLEN (2 * PATH_MAX + 512)
#define CHUNK (64 * 1024)
/* File bytes queued per write_file call on identity downloads. */
#define FILE_SEGMENT (4 * 1024 * 1024)

/* --- common: auth, user, path --- */

/*
 * Token header or signed URL (docs/protocol.md, "Signed URLs"). Returns 0
 * if allowed; otherwise the 401 (or 400) has been sent.
 */
static int check_signing(struct http_req *r, const char *op)
{
	char sig[128], path[PATH_MAX], user[256], expbuf[32], expected[64];
	const char *hdr;
	size_t toklen;
	const char *tok;
	int64_t exp = -1;

	if (!state_token_is_set())
		return 0;
	hdr = http_req_header(r, "x-access-token");
	if (hdr && *hdr) {
		if (state_token_equals(hdr, strlen(hdr)))
			return 0;
		http_respond_json_error(r, 401, "access token present in header but does not match");
		return -1;
	}
	if (http_query_get(r->query, "signature", sig, sizeof(sig)) <= 0) {
		http_respond_json_error(r, 401, "missing signature query parameter");
		return -1;
	}
	if (http_query_get(r->query, "path", path, sizeof(path)) <= 0)
		path[0] = '\0';
	if (http_query_get(r->query, "username", user, sizeof(user)) <= 0)
		user[0] = '\0';
	if (http_query_get(r->query, "signature_expiration", expbuf, sizeof(expbuf)) > 0) {
		char *ep;
		errno = 0;
		long long v = strtoll(expbuf, &ep, 10);
		if (!expbuf[0] || *ep || errno) {
			http_respond_json_error(r, 400,
						"Invalid format for parameter signature_expiration: invalid integer");
			return -1;
		}
		exp = v;
	}
	tok = state_token(&toklen);
	files_signature(path, op, user, tok ? tok : "", tok ? toklen : 0, exp, expected, sizeof(expected));
	if (!files_const_eq(expected, sig)) {
		http_respond_json_error(r, 401, "invalid signature");
		return -1;
	}
	if (exp >= 0 && exp < (int64_t)time(NULL)) {
		http_respond_json_error(r, 401, "signature is already expired");
		return -1;
	}
	return 0;
}

/* The `username` parameter (even empty) or the default user. */
static void request_username(struct http_req *r, char *out, size_t outlen)
{
	if (http_query_get(r->query, "username", out, outlen) <= 0)
		snprintf(out, outlen, "%s", state_default_user());
}

/* Look the user up; on failure the error has been sent. */
static int lookup_user(struct http_req *r, const char *name, struct user *u)
{
	char err[512], msg[1024];
	int rc = user_lookup(name, u, err, sizeof(err));

	if (rc == 0)
		return 0;
	if (rc == -ENOENT) {
		snprintf(msg, sizeof(msg), "error looking up user '%s': %s", name, err);
		http_respond_json_error(r, 401, msg);
	} else {
		snprintf(msg, sizeof(msg), "error getting user ids: %s", err);
		http_respond_json_error(r, 500, msg);
	}
	return -1;
}

static void respond_fmt(struct http_req *r, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void respond_fmt(struct http_req *r, int status, const char *fmt, ...)
{
	char msg[MSGLEN];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	http_respond_json_error(r, status, msg);
}

static void random_bytes(unsigned char *b, size_t n)
{
	if (getrandom(b, n, GRND_NONBLOCK) != (ssize_t)n) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		for (size_t i = 0; i < n; i++)
			b[i] = (unsigned char)(ts.tv_nsec >> (i % 4 * 8)) ^ (unsigned char)(i * 131);
	}
}

/* n random lower-case hex characters + NUL into out (n + 1 bytes). */
static void random_hex(char *out, size_t n)
{
	static const char hx[] = "0123456789abcdef";
	unsigned char b[64];

	if (n > 2 * sizeof(b))
		n = 2 * sizeof(b);
	random_bytes(b, (n + 1) / 2);
	for (size_t i = 0; i < n; i++)
		out[i] = hx[(b[i / 2] >> (i % 2 ? 0 : 4)) & 15];
	out[n] = '\0';
}

/* ======================= GET /files ======================= */

#define MAX_RANGES 32
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
 * While `busy`, the job owns the fields it fills; the loop waits.
 */
struct download {
	struct http_req *r;     /* NULL once the exchange is over */
	char fmt[16];           /* archive= */
	bool archive;
	bool want_sniff;
	uint64_t key;
	double timeout;
	bool busy;
	bool expired;           /* a job's deadline passed: answered or cut */
	bool begun;             /* headers are out */

	/* what the open job found */
	int err;                /* errno of the failed call, 0 if none */
	bool err_open;          /* ... which was open(), not stat() */
	struct stat st;
	int fd;
	bool local;
	int64_t size;
	uint8_t sniff[512];
	size_t sniff_n;
	bool want_sample;       /* judge compressibility (dl_sample) */
	double ratio;           /* ... its answer: expected gzip size / size */

	/* the body */
	struct dl_seg seg[2 * MAX_RANGES + 1];
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

static void dl_free(struct download *d)
{
	for (size_t i = 0; i < d->nseg; i++)
		free(d->seg[i].mem);
	free(d->rbuf);
	fsjob_close(d->fd, d->key, d->local);
	dl_release(d);
}

static void dl_on_close(struct http_req *r, bool completed)
{
	struct download *d = r->ud;

	r->ud = NULL;
	if (!d)
		return;
	d->r = NULL;
	if (!d->busy)
		dl_free(d); /* else the job's completion frees it */
}

/* A job outlived its deadline: answer 504, or cut the body if it began. */
static void dl_expired(void *arg)
{
	struct download *d = arg;
	char msg[MSGLEN];

	d->expired = true;
	if (!d->r)
		return;
	if (d->begun) {
		log_warn("files", "files_get: %s: read did not return within %g s; download cut", d->path, d->timeout);
		http_resp_abort(d->r); /* may call on_close */
		return;
	}
	fsjob_timeout_msg(msg, sizeof(msg), d->timeout, d->path);
	http_respond_json_error(d->r, 504, msg); /* may call on_close */
}

/* Common start of a job's completion. Returns false when d is done for. */
static bool dl_job_back(struct download *d)
{
	d->busy = false;
	if (!d->r) {
		dl_free(d);
		return false;
	}
	return !d->expired; /* else answered already; on_close frees d */
}

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

static void dl_read_done(void *arg)
{
	struct download *d = arg;
	struct http_req *r = d->r;
	struct dl_seg *s = &d->seg[d->cur];

	if (!dl_job_back(d))
		return;
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
	struct worker_req req = { .work = dl_read_work, .done = dl_read_done, .expired = dl_expired,
				  .arg = d, .key = d->key, .timeout = d->timeout };

	if (!d->rbuf && !(d->rbuf = malloc(READ_CHUNK))) {
		log_error("files", "files_get: out of memory reading '%s'", d->path);
		http_resp_abort(d->r);
		return;
	}
	d->rlen = s->len > READ_CHUNK ? READ_CHUNK : (size_t)s->len;
	d->busy = true;
	if (worker_run(&req) < 0) {
		d->busy = false;
		log_error("files", "files_get: worker queue full reading '%s'; download cut", d->path);
		http_resp_abort(d->r);
	}
}

/* Queue body pieces while the queue has room. Ends the response when all is queued. */
static void dl_pump(struct download *d)
{
	struct http_req *r = d->r;

	while (d->cur < d->nseg) {
		struct dl_seg *s = &d->seg[d->cur];
		if (d->busy || http_resp_queued(r) >= HTTP_QUEUE_HIGH)
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
	http_resp_end(r, NULL, 0); /* may free d */
}

static void dl_on_writable(struct http_req *r)
{
	struct download *d = r->ud;
	if (!d || d->busy || r->resp_ended)
		return;
	dl_pump(d);
}

/*
 * Conditional request evaluation against Last-Modified (Go ServeContent,
 * without ETags). Returns 0 to serve, 304 or 412; clears *range_ok when an
 * If-Range does not match.
 */
static int check_conditions(struct http_req *r, time_t mtime, bool *range_ok)
{
	const char *h;
	time_t t;

	if ((h = http_req_header(r, "if-match"))) {
		if (strcmp(h, "*") != 0)
			return 412;
	} else if ((h = http_req_header(r, "if-unmodified-since")) && mtime > 0) {
		t = files_parse_http_date(h);
		if (t >= 0 && mtime > t)
			return 412;
	}
	if ((h = http_req_header(r, "if-none-match"))) {
		/* No ETags: only "*" matches an existing file. */
		if (strcmp(h, "*") == 0)
			return 304;
	} else if ((h = http_req_header(r, "if-modified-since")) && mtime > 0) {
		t = files_parse_http_date(h);
		if (t >= 0 && mtime <= t)
			return 304;
	}
	if ((h = http_req_header(r, "if-range"))) {
		t = files_parse_http_date(h);
		if (t < 0 || mtime <= 0 || mtime > t)
			*range_ok = false;
	}
	return 0;
}

/* Begin the response and send the segments set up in d. */
static void dl_begin(struct download *d, int status, const struct http_hdr *h, size_t nh, int64_t len)
{
	struct http_req *r = d->r;

	r->on_writable = dl_on_writable;
	d->begun = true;
	if (http_resp_begin(r, status, h, nh, len) < 0)
		return;
	dl_pump(d);
}

/*
 * 206 multipart/byteranges (Go's ServeContent layout): part headers are
 * small memory pieces, part bodies file ranges (bounded by MAX_RANGES).
 * h[] may contain a NULL-named slot to drop.
 */
static void serve_byteranges(struct download *d, const struct http_hdr *h, size_t nh,
			     const struct files_range *rg, size_t n, int64_t size, const char *ctype)
{
	char boundary[40], ctbuf[96], ph[256];
	struct http_hdr hh[12];
	size_t k = 0;
	int64_t total = 0;

	random_hex(boundary, 30);
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
			http_respond_json_error(d->r, 500, "out of memory"); /* on_close frees d */
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

	linkrate_estimate(r, &e);
	return d->want_sample && linkrate_prefer_gzip(&e, d->ratio);
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

static void dl_open_done(void *arg)
{
	struct download *d = arg;
	struct http_req *r = d->r;
	char base[PATH_MAX], disp[PATH_MAX * 3 + 64], lastmod[40], crange[96];
	struct http_hdr h[8];
	size_t nh = 0;
	bool id_rejected, range_ok = true;
	const char *path = d->path;

	if (!dl_job_back(d))
		return;
	if (d->err && !d->err_open) {
		if (d->err == ENOENT)
			respond_fmt(r, 404, "path '%s' does not exist", path);
		else
			respond_fmt(r, 500, "error checking if path exists '%s': stat %s: %s", path, path,
				    go_strerror(d->err));
		return;
	}
	if (d->archive) {
		char dir[PATH_MAX], fmt[16];
		if (!S_ISDIR(d->st.st_mode)) {
			respond_fmt(r, 400, "path '%s' is not a directory", path);
			return;
		}
		snprintf(dir, sizeof(dir), "%s", d->path);
		snprintf(fmt, sizeof(fmt), "%s", d->fmt);
		r->ud = NULL;
		r->on_close = NULL;
		dl_free(d);
		files_archive_get(r, dir, fmt);
		return;
	}
	if (S_ISDIR(d->st.st_mode)) {
		respond_fmt(r, 400, "path '%s' is a directory", path);
		return;
	}
	enum files_encoding enc = files_negotiate(http_req_header(r, "accept-encoding"), &id_rejected);
	if (enc == FILES_ENC_NONE) {
		http_respond_json_error(r, 406,
					"error parsing Accept-Encoding: no acceptable encoding found, supported: [gzip]");
		return;
	}
	http_req_extra_header(r, "Vary", "Accept-Encoding", true);
	const char *range = http_req_header(r, "range");
	if (range || http_req_header(r, "if-modified-since") || http_req_header(r, "if-none-match") ||
	    http_req_header(r, "if-range")) {
		if (id_rejected) {
			http_respond_json_error(r, 406, "identity encoding not acceptable for Range or conditional request");
			return;
		}
		enc = FILES_ENC_IDENTITY;
	}
	if (d->err) {
		respond_fmt(r, 500, "error opening file '%s': open %s: %s", path, path, go_strerror(d->err));
		return;
	}
	path_base(path, base, sizeof(base));
	files_content_disposition(base, disp, sizeof(disp));
	h[nh++] = (struct http_hdr){ "content-disposition", disp };
	const char *ctype = files_mime_by_ext(d->qpath);

	if (enc == FILES_ENC_GZIP && !id_rejected && !files_gzip_always && !dl_gzip_wins(r, d))
		enc = FILES_ENC_IDENTITY;
	if (enc == FILES_ENC_GZIP) {
		/* Read and compressed block by block on the worker pool. */
		struct gzsend_src src = { .fd = d->fd, .size = S_ISREG(d->st.st_mode) ? (int64_t)d->st.st_size : 0,
					  .key = d->key, .local = d->local, .timeout = d->timeout };
		snprintf(src.path, sizeof(src.path), "%s", d->path);
		h[nh++] = (struct http_hdr){ "content-encoding", "gzip" };
		h[nh++] = (struct http_hdr){ "content-type", ctype ? ctype : "application/octet-stream" };
		d->fd = -1;
		r->ud = NULL;
		r->on_close = NULL;
		dl_free(d);
		gzsend_start(r, &src, h, nh);
		return;
	}

	int64_t size = d->size;
	if (!ctype)
		ctype = files_sniff(d->sniff, d->sniff_n);
	int cond = check_conditions(r, d->st.st_mtim.tv_sec, &range_ok);
	if (d->st.st_mtim.tv_sec > 0) {
		files_format_http_date(d->st.st_mtim.tv_sec, lastmod, sizeof(lastmod));
		h[nh++] = (struct http_hdr){ "last-modified", lastmod };
	}
	if (cond) {
		d->begun = true;
		http_resp_begin(r, cond, h + 1, nh - 1, 0);
		http_resp_end(r, NULL, 0); /* on_close frees d */
		return;
	}
	h[nh++] = (struct http_hdr){ "content-type", ctype };
	h[nh++] = (struct http_hdr){ "accept-ranges", "bytes" };
	int status = 200;
	int64_t start = 0, len = size;
	struct files_range rg[MAX_RANGES];
	if (range && range_ok) {
		int rr = files_parse_ranges(range, size, rg, MAX_RANGES);
		/* Go ignores an unsatisfiable range on an empty file (clients
		 * that always send Range get a 200, not a 416). */
		if (rr == -ERANGE && size == 0)
			rr = 0;
		if (rr < 0) {
			snprintf(crange, sizeof(crange), "bytes */%lld", (long long)size);
			static const char msg[] = "invalid range: failed to overlap\n";
			struct http_hdr eh[] = { { "content-range", crange },
						 { "x-content-type-options", "nosniff" } };
			http_respond(r, 416, "text/plain; charset=utf-8", msg, sizeof(msg) - 1, eh, 2);
			return;
		}
		if (rr > 1) {
			int64_t sum = 0;
			for (int i = 0; i < rr; i++)
				sum += rg[i].len;
			/* Go serves the whole file when the parts add up to more. */
			if (sum <= size) {
				h[nh - 2].name = NULL; /* the part headers carry the type */
				serve_byteranges(d, h, nh, rg, (size_t)rr, size, ctype);
				return;
			}
			rr = 0;
		}
		if (rr == 1) {
			start = rg[0].start;
			len = rg[0].len;
			status = 206;
			snprintf(crange, sizeof(crange), "bytes %lld-%lld/%lld", (long long)start,
				 (long long)(start + len - 1), (long long)size);
			h[nh++] = (struct http_hdr){ "content-range", crange };
		} else {
			start = 0;
			len = size;
		}
	}
	d->seg[0].off = start;
	d->seg[0].len = len;
	d->nseg = 1;
	dl_begin(d, status, h, nh, len);
}

void files_get(struct http_req *r)
{
	char uname[256], qpath[PATH_MAX], err[MSGLEN], msg[MSGLEN];
	struct download *d;
	struct user u;

	if (check_signing(r, "read"))
		return;
	request_username(r, uname, sizeof(uname));
	if (lookup_user(r, uname, &u))
		return;
	if (http_query_get(r->query, "path", qpath, sizeof(qpath)) <= 0)
		qpath[0] = '\0';
	d = dl_alloc();
	if (!d) {
		http_respond_json_error(r, 500, "out of memory");
		return;
	}
	d->fd = -1;
	d->r = r;
	snprintf(d->qpath, sizeof(d->qpath), "%s", qpath);
	if (path_resolve(&u, qpath, state_default_workdir(), d->path, sizeof(d->path), err, sizeof(err)) < 0) {
		dl_release(d);
		respond_fmt(r, 400, "error expanding and resolving path '%s': %s", qpath, err);
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
	d->key = worker_path_key(d->path);
	d->timeout = worker_fs_timeout;
	r->ud = d;
	r->on_close = dl_on_close;
	d->busy = true;
	struct worker_req req = { .work = dl_open_work, .done = dl_open_done, .expired = dl_expired,
				  .arg = d, .key = d->key, .timeout = d->timeout };
	if (worker_run(&req) < 0) {
		d->busy = false;
		fsjob_busy_msg(msg, sizeof(msg), d->path);
		http_respond_json_error(r, 503, msg); /* on_close frees d */
	}
}

/* ======================= POST /files ======================= */

struct upload {
	struct http_req *r;
	struct user u;
	struct fs_meta meta;
	int64_t content_length;
	bool atomic;        /* replace by rename where it can (default) */

	/* body decoding */
	bool gzip;
	bool zinit;
	bool zended;        /* a gzip member ended and no more input followed */
	bool got_input;     /* any compressed byte seen */
	z_stream zs;
	uint8_t *zout;

	/* sink */
	bool multipart;
	struct mp_parser mp;
	bool has_path_param;
	char path_param[PATH_MAX];
	char raw_target[PATH_MAX];  /* raw mode: resolved target */
	bool raw_begun;

	/* current file */
	int fd;
	bool skip_part;     /* a non-file form field */
	bool created;       /* the target did not exist before */
	char target[PATH_MAX];
	char tmp[PATH_MAX]; /* atomic mode: the temporary file */
	char reg[320];      /* ... and its registry entry (base/uptmp.h) */

	/* results */
	json_t *results;
	char **written;
	size_t n_written;
	char workdir[PATH_MAX];     /* default workdir at request time */

	/*
	 * Hand-off to the worker pool. Body bytes collect in `in` on the
	 * loop; a job takes them (swapped into `work`) and does the
	 * inflating, parsing and writing. While `busy`, the state above
	 * belongs to the job and the loop touches only `in`.
	 */
	uint8_t *in, *work;
	size_t in_len, work_len;
	bool busy;
	bool paused;
	bool body_ended;
	bool finishing;     /* the queued job ends the upload */
	bool aborted;       /* the exchange ended while busy: done frees */
	bool overrun;       /* body bytes arrived beyond UP_IN_MAX */
	bool expired;       /* a job outlived its deadline: answered 504 */
	uint64_t key;       /* the mount of the file being written */
	bool local;         /* ... which cannot hang: closed on the loop */
	double timeout;
	char shown[PATH_MAX]; /* the target as the loop last knew it */

	/* outcome, set by jobs, sent by the loop */
	bool failed;
	int err_status;
	char err_msg[MSGLEN];
	char *resp_body;

	bool done;          /* response sent (success or error) */
};

/* Bytes worth a job of their own (less waits for more, or the end). */
#define UP_KICK (128 * 1024)
/* Body bytes buffered while a job runs before the client is paused. */
#define UP_IN_HIGH (1024 * 1024)
/* Hard cap for what a transport may still deliver after the pause. */
#define UP_IN_MAX (4 * 1024 * 1024)

static void up_discard_current(struct upload *up)
{
	if (up->fd >= 0) {
		close(up->fd);
		up->fd = -1;
		/* Nothing half-written stays behind that was not there before. */
		if (up->tmp[0])
			unlink(up->tmp);
		else if (up->created)
			unlink(up->target);
	}
	if (up->tmp[0])
		uptmp_forget(up->reg);
	up->tmp[0] = '\0';
	up->reg[0] = '\0';
	up->created = false;
}

static void up_free(struct upload *up)
{
	up_discard_current(up);
	if (up->zinit)
		inflateEnd(&up->zs);
	free(up->zout);
	fs_meta_clear(&up->meta);
	json_decref(up->results);
	for (size_t i = 0; i < up->n_written; i++)
		free(up->written[i]);
	free(up->written);
	free(up->in);
	free(up->work);
	free(up->resp_body);
	free(up);
}

static void up_free_cb(void *arg)
{
	up_free(arg);
}

/* Free an upload; a half-written file on a mount that may hang is closed
 * and removed by a worker job. */
static void up_release(struct upload *up)
{
	if (up->fd >= 0 && !up->local)
		fsjob_release(up_free_cb, up, up->key);
	else
		up_free(up);
}

static void up_on_close(struct http_req *r, bool completed)
{
	struct upload *up = r->ud;

	r->ud = NULL;
	if (!up)
		return;
	if (up->busy) {
		/* A job still owns the state: its completion frees it. */
		up->aborted = true;
		up->r = NULL;
		return;
	}
	up_release(up);
}

/*
 * Record the upload's error (the first one wins) and drop the file in
 * progress. Runs on whichever thread owns the upload; the loop sends it.
 */
static int up_error(struct upload *up, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int up_error(struct upload *up, int status, const char *fmt, ...)
{
	va_list ap;

	up_discard_current(up);
	if (up->failed)
		return -ECANCELED;
	up->failed = true;
	up->err_status = status;
	va_start(ap, fmt);
	vsnprintf(up->err_msg, sizeof(up->err_msg), fmt, ap);
	va_end(ap);
	return -ECANCELED;
}

static void random_suffix(char *out, size_t len)
{
	random_hex(out, len > 17 ? 16 : len - 1);
}

/*
 * Whether an upload to `target` may replace it by rename: it is absent or
 * a regular file with no other name. A symlink (even a dangling one), a
 * device, a FIFO or a hard-linked file is written in place, as the client
 * meant the object behind that name.
 */
static bool up_can_rename(const char *target)
{
	struct stat lst;

	if (lstat(target, &lst) < 0)
		return errno == ENOENT;
	return S_ISREG(lst.st_mode) && lst.st_nlink == 1;
}

/* Open up->target for writing: create its parent directories, refuse a
   directory, chown an existing file, open (a temporary beside it when
   atomic, which gets the target's mode and extended attributes). */
static int up_begin_file(struct upload *up)
{
	char parent[PATH_MAX], err[MSGLEN];
	struct stat st;
	bool existed, atomic;

	fs_path_dir(up->target, parent, sizeof(parent));
	if (fs_ensure_dirs(parent, up->u.uid, up->u.gid, err, sizeof(err)) < 0)
		return up_error(up, 500, "error ensuring directories: %s", err);
	if (stat(up->target, &st) == 0) {
		if (S_ISDIR(st.st_mode))
			return up_error(up, 400, "path is a directory: %s", up->target);
		existed = true;
		atomic = up->atomic && up_can_rename(up->target);
		if (!atomic && chown(up->target, up->u.uid, up->u.gid) < 0 && errno != ENOENT)
			return up_error(up, 500, "error changing file ownership: chown %s: %s", up->target,
					go_strerror(errno));
	} else if (errno == ENOENT) {
		existed = false;
		atomic = up->atomic && up_can_rename(up->target);
	} else {
		return up_error(up, 500, "error getting file info: stat %s: %s", up->target, go_strerror(errno));
	}

	if (atomic) {
		int fd = uptmp_open(parent, existed, up->tmp, sizeof(up->tmp), up->reg, sizeof(up->reg));
		if (fd == -ENAMETOOLONG)
			return up_error(up, 400, "error resolving path: %s", go_strerror(ENAMETOOLONG));
		errno = fd < 0 ? -fd : 0;
		up->fd = fd < 0 ? -1 : fd;
	} else {
		/* O_NONBLOCK only matters for FIFOs: fail (ENXIO) instead of
		 * blocking the loop until some reader shows up. */
		up->fd = open(up->target, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NONBLOCK, 0666);
		up->created = !existed;
	}
	if (up->fd < 0) {
		int e = errno;
		up->tmp[0] = '\0';
		up->created = false;
		if (e == ENOSPC)
			return up_error(up, 507, "not enough inodes available: open %s: %s", up->target, go_strerror(e));
		return up_error(up, 500, "error opening file: open %s: %s", up->target, go_strerror(e));
	}
	fsjob_fd_mount(up->fd, &up->key, &up->local);
	/* The replacement ends as an in-place write would leave the file:
	 * chowned to the user, the target's mode (after fchown, which clears
	 * set-id bits) and its other extended attributes (ACLs among them). */
	if ((!existed || atomic) && fchown(up->fd, up->u.uid, up->u.gid) < 0)
		return up_error(up, 500, "error changing file ownership: chown %s: %s", up->target, go_strerror(errno));
	if (atomic && existed) {
		int rc;
		fchmod(up->fd, st.st_mode & 07777);
		if ((rc = uptmp_copy_attrs(up->target, up->fd)) < 0)
			return up_error(up, 507, "not enough space for file metadata: %s", go_strerror(-rc));
	}
	return 0;
}

static int up_write(struct upload *up, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t w = write(up->fd, p, n);
		if (w < 0) {
			int e = errno;
			if (e == EINTR)
				continue;
			if (e == ENOSPC || e == EDQUOT) {
				if (up->content_length > 0)
					return up_error(up, 507, "attempted to write %lld bytes: not enough disk space available",
							(long long)up->content_length);
				return up_error(up, 507, "not enough disk space available");
			}
			return up_error(up, 500, "error writing file: write %s: %s", up->target, go_strerror(e));
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Steps 5-6 and the response entry. */
static int up_finish_file(struct upload *up)
{
	char base[PATH_MAX];
	struct fs_meta rb;
	int rc;

	rc = fs_meta_replace_fd(up->fd, &up->meta);
	if (rc == -ENOSPC || rc == -EDQUOT)
		return up_error(up, 507, "not enough space for file metadata: %s", go_strerror(-rc));
	if (rc < 0)
		return up_error(up, 500, "error writing file metadata: %s", go_strerror(-rc));
	if (close(up->fd) < 0) {
		int e = errno;
		up->fd = -1;
		if (up->tmp[0]) {
			unlink(up->tmp);
			uptmp_forget(up->reg);
			up->tmp[0] = '\0';
		} else if (up->created) {
			unlink(up->target);
		}
		if (e == ENOSPC || e == EDQUOT)
			return up_error(up, 507, "not enough disk space available");
		return up_error(up, 500, "error writing file: close %s: %s", up->target, go_strerror(e));
	}
	up->fd = -1;
	if (up->tmp[0]) {
		if (rename(up->tmp, up->target) < 0) {
			int e = errno;
			char tmp[PATH_MAX];
			snprintf(tmp, sizeof(tmp), "%s", up->tmp);
			unlink(up->tmp);
			uptmp_forget(up->reg);
			up->tmp[0] = '\0';
			return up_error(up, 500, "error writing file: rename %s %s: %s", tmp, up->target, go_strerror(e));
		}
		uptmp_forget(up->reg);
		up->tmp[0] = '\0';
	}
	up->created = false;

	char **nw = realloc(up->written, (up->n_written + 1) * sizeof(*nw));
	if (!nw)
		return up_error(up, 500, "out of memory");
	up->written = nw;
	if (!(up->written[up->n_written] = strdup(up->target)))
		return up_error(up, 500, "out of memory");
	up->n_written++;

	json_t *o = json_object();
	path_base(up->target, base, sizeof(base));
	json_object_set_new(o, "name", json_string(base));
	json_object_set_new(o, "type", json_string("file"));
	json_object_set_new(o, "path", json_string(up->target));
	fs_meta_read(up->target, &rb);
	if (rb.n) {
		json_t *m = json_object();
		for (size_t i = 0; i < rb.n; i++)
			json_object_set_new(m, rb.kv[i].key, json_string(rb.kv[i].value));
		json_object_set_new(o, "metadata", m);
	}
	fs_meta_clear(&rb);
	json_array_append_new(up->results, o);
	return 0;
}

/* --- multipart sink --- */

static int up_part_begin(void *ud, const struct mp_part *part)
{
	struct upload *up = ud;
	char err[MSGLEN];
	const char *name;

	up->skip_part = strcmp(part->name, "file") != 0;
	if (up->skip_part)
		return 0;
	if (up->has_path_param) {
		name = up->path_param;
	} else {
		if (!part->has_filename)
			return up_error(up, 400,
					"error resolving path: error getting multipart custom part file name: filename not found in Content-Disposition header");
		if (part->truncated)
			return up_error(up, 400, "error resolving path: %s", go_strerror(ENAMETOOLONG));
		name = part->filename;
	}
	if (path_resolve(&up->u, name, up->workdir[0] ? up->workdir : NULL, up->target, sizeof(up->target), err,
			 sizeof(err)) < 0)
		return up_error(up, 400, "error resolving path: %s", err);
	for (size_t i = 0; i < up->n_written; i++) {
		if (strcmp(up->written[i], up->target) != 0)
			continue;
		char others[MSGLEN] = "";
		size_t k = 0;
		for (size_t j = 0; j < up->n_written; j++) {
			if (j == i)
				continue;
			k += (size_t)snprintf(others + k, k < sizeof(others) ? sizeof(others) - k : 0, "%s%s",
					      k ? ", " : "", up->written[j]);
			if (k >= sizeof(others))
				break;
		}
		if (others[0])
			return up_error(up, 400,
					"you cannot upload multiple files to the same path '%s' in one upload request, only the first specified file was uploaded, also the following files were uploaded: %s",
					up->target, others);
		return up_error(up, 400,
				"you cannot upload multiple files to the same path '%s' in one upload request, only the first specified file was uploaded",
				up->target);
	}
	return up_begin_file(up);
}

static int up_part_data(void *ud, const uint8_t *p, size_t n)
{
	struct upload *up = ud;
	if (up->skip_part || up->fd < 0)
		return 0;
	return up_write(up, p, n);
}

static int up_part_end(void *ud)
{
	struct upload *up = ud;
	if (up->skip_part || up->fd < 0)
		return 0;
	return up_finish_file(up);
}

static const struct mp_callbacks up_mp_cbs = { up_part_begin, up_part_data, up_part_end };

/* Decoded body bytes go here. */
static int up_sink(struct upload *up, const uint8_t *p, size_t n)
{
	int rc;

	if (up->multipart) {
		rc = mp_feed(&up->mp, p, n);
		if (rc == -EBADMSG)
			return up_error(up, 500, "error reading form: %s", up->mp.err);
		return rc;
	}
	if (!up->raw_begun) {
		up->raw_begun = true;
		snprintf(up->target, sizeof(up->target), "%s", up->raw_target);
		if ((rc = up_begin_file(up)))
			return rc;
	}
	return up_write(up, p, n);
}

static int up_inflate(struct upload *up, const uint8_t *p, size_t n)
{
	up->zs.next_in = (Bytef *)p;
	up->zs.avail_in = (uInt)n;
	if (n)
		up->got_input = true;
	while (up->zs.avail_in > 0) {
		if (up->zended) {
			/* Another gzip member follows (Go reads multistream). */
			inflateReset(&up->zs);
			up->zended = false;
		}
		up->zs.next_out = up->zout;
		up->zs.avail_out = CHUNK;
		int zr = inflate(&up->zs, Z_NO_FLUSH);
		size_t have = CHUNK - up->zs.avail_out;
		if (zr == Z_DATA_ERROR || zr == Z_NEED_DICT || zr == Z_STREAM_ERROR || zr == Z_MEM_ERROR) {
			if (up->zs.total_out == 0 && !up->raw_begun && !up->mp.n_parts)
				return up_error(up, 400,
						"error decompressing request body: failed to create gzip reader: gzip: invalid header");
			return up_error(up, 500, "error writing file: gzip: %s", up->zs.msg ? up->zs.msg : "invalid data");
		}
		if (have) {
			int rc = up_sink(up, up->zout, have);
			if (rc)
				return rc;
		}
		if (zr == Z_STREAM_END)
			up->zended = true;
		else if (zr == Z_BUF_ERROR && have == 0)
			break;
	}
	return 0;
}

/* Worker side: the last step once the whole body went through. */
static void up_finalize(struct upload *up)
{
	if (up->gzip) {
		if (!up->got_input) {
			up_error(up, 400, "error decompressing request body: failed to create gzip reader: EOF");
			return;
		}
		if (!up->zended) {
			up_error(up, 500, "error writing file: unexpected EOF");
			return;
		}
	}
	if (up->multipart) {
		if (mp_finish(&up->mp) < 0) {
			up_error(up, 500, "error reading form: %s", up->mp.err);
			return;
		}
	} else {
		if (!up->raw_begun) {
			up->raw_begun = true;
			snprintf(up->target, sizeof(up->target), "%s", up->raw_target);
			if (up_begin_file(up))
				return;
		}
		if (up_finish_file(up))
			return;
	}
	up->resp_body = json_dumps(up->results, JSON_COMPACT);
	if (!up->resp_body)
		up_error(up, 500, "out of memory");
}

/* Worker: consume `work`, and finish when asked. Blocking file I/O lives here. */
static void up_job(void *arg)
{
	struct upload *up = arg;

	if (!up->failed && up->work_len) {
		if (up->gzip)
			up_inflate(up, up->work, up->work_len);
		else
			up_sink(up, up->work, up->work_len);
	}
	up->work_len = 0;
	if (up->finishing && !up->failed)
		up_finalize(up);
}

static void up_job_done(void *arg);
static void up_expired(void *arg);

/* Loop: hand the buffered bytes (or the final step) to the worker. */
static void up_kick(struct upload *up)
{
	uint8_t *t;
	int rc;

	if (up->busy || up->done)
		return;
	/* Batch small deliveries: one thread hand-off per UP_KICK bytes. */
	if (!up->body_ended && up->in_len < UP_KICK)
		return;
	t = up->work;
	up->work = up->in;
	up->work_len = up->in_len;
	up->in = t;
	up->in_len = 0;
	up->finishing = up->body_ended;
	up->busy = true;
	struct worker_req req = { .work = up_job, .done = up_job_done, .expired = up_expired, .arg = up,
				  .key = up->key, .timeout = up->timeout };
	rc = worker_run(&req);
	if (rc < 0) {
		char msg[MSGLEN];
		up->busy = false;
		fsjob_busy_msg(msg, sizeof(msg), up->shown);
		up_error(up, 503, "%s", msg);
		up->done = true;
		http_req_pause_body(up->r, false);
		http_respond_json_error(up->r, 503, up->err_msg); /* may free up */
	}
}

/* A job outlived its deadline: answer 504 while its thread stays stuck. */
static void up_expired(void *arg)
{
	struct upload *up = arg;
	char msg[MSGLEN];

	up->expired = true;
	if (!up->r || up->done)
		return;
	up->done = true;
	if (up->paused) {
		up->paused = false;
		http_req_pause_body(up->r, false); /* drain the rest, ignored */
	}
	fsjob_timeout_msg(msg, sizeof(msg), up->timeout, up->shown);
	http_respond_json_error(up->r, 504, msg); /* may call on_close */
}

static void up_job_done(void *arg)
{
	struct upload *up = arg;
	struct http_req *r = up->r;

	up->busy = false;
	if (up->aborted) {
		up_release(up); /* discards a half-written new file */
		return;
	}
	if (up->expired)
		return; /* answered (504); on_close frees up */
	if (up->target[0])
		snprintf(up->shown, sizeof(up->shown), "%s", up->target);
	if (up->overrun)
		up_error(up, 500, "error reading request body: too much data buffered");
	if (up->failed) {
		up->done = true;
		/* Let the rest of the body drain (ignored) so the connection lives on. */
		if (up->paused) {
			up->paused = false;
			http_req_pause_body(r, false);
		}
		http_respond_json_error(r, up->err_status, up->err_msg); /* may free up */
		return;
	}
	if (up->finishing) {
		up->done = true;
		http_respond(r, 200, "application/json", up->resp_body, strlen(up->resp_body), NULL, 0); /* may free up */
		return;
	}
	if (up->in_len >= UP_KICK || up->body_ended) {
		up_kick(up);
		return;
	}
	if (up->paused) {
		up->paused = false;
		http_req_pause_body(r, false);
	}
}

static void up_on_body(struct http_req *r, const uint8_t *p, size_t n)
{
	struct upload *up = r->ud;

	/* `failed` belongs to a running job; look at it only when idle. */
	if (!up || up->done || (!up->busy && up->failed))
		return; /* drained and ignored after an error */
	if (up->in_len + n > UP_IN_MAX) {
		/* The transport kept delivering far past the pause: fail rather
		 * than lose bytes or buffer without bound. */
		up->overrun = true;
		if (!up->busy) {
			up_error(up, 500, "error reading request body: too much data buffered");
			up->done = true;
			http_respond_json_error(r, 500, up->err_msg); /* may free up */
		}
		return;
	}
	memcpy(up->in + up->in_len, p, n);
	up->in_len += n;
	if (up->busy && up->in_len >= UP_IN_HIGH && !up->paused) {
		up->paused = true;
		http_req_pause_body(r, true);
	}
	up_kick(up);
}

static void up_on_body_end(struct http_req *r)
{
	struct upload *up = r->ud;

	if (!up || up->done || (!up->busy && up->failed))
		return;
	up->body_ended = true;
	up_kick(up);
}

/* Go's textproto canonical-header + TrimSpace behaviour for X-Metadata-*. */
static int collect_metadata(struct http_req *r, struct fs_meta *m)
{
	static const char pfx[] = "x-metadata-";
	const size_t pl = sizeof(pfx) - 1;

	for (size_t i = 0; i < r->n_hdrs; i++) {
		const char *name = r->hdrs[i].name;
		if (strncasecmp(name, pfx, pl) != 0 || !name[pl])
			continue;
		char key[512];
		size_t kl = strlen(name + pl);
		if (kl >= sizeof(key))
			kl = sizeof(key) - 1;
		for (size_t j = 0; j < kl; j++)
			key[j] = (char)((name[pl + j] >= 'A' && name[pl + j] <= 'Z') ? name[pl + j] + 32 : name[pl + j]);
		key[kl] = '\0';
		const char *v = r->hdrs[i].value;
		while (*v == ' ' || *v == '\t')
			v++;
		size_t vl = strlen(v);
		while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
			vl--;
		if (fs_meta_add(m, key, kl, v, vl) < 0)
			return -ENOMEM;
	}
	return 0;
}

void files_post(struct http_req *r)
{
	char uname[256], err[MSGLEN], ctbuf[128], atomic[8];
	struct upload *up;
	const char *ce, *ct;

	if (check_signing(r, "write"))
		return;
	request_username(r, uname, sizeof(uname));
	ce = http_req_header(r, "content-encoding");
	bool gzip = false;
	if (ce && *ce) {
		size_t l = strcspn(ce, ";, \t");
		if (l == 4 && strncasecmp(ce, "gzip", 4) == 0)
			gzip = true;
		else if (!(l == 8 && strncasecmp(ce, "identity", 8) == 0))
			return respond_fmt(r, 400,
					   "error decompressing request body: unsupported Content-Encoding: %s, supported: [gzip]",
					   ce);
	}
	char fmt[16];
	if (http_query_get(r->query, "extract", fmt, sizeof(fmt)) > 0) {
		char qpath[PATH_MAX], dir[PATH_MAX];
		struct user u;
		if (lookup_user(r, uname, &u))
			return;
		if (http_query_get(r->query, "path", qpath, sizeof(qpath)) <= 0) {
			http_respond_json_error(r, 400, "path query parameter is required for extraction");
			return;
		}
		if (path_resolve(&u, qpath, state_default_workdir(), dir, sizeof(dir), err, sizeof(err)) < 0) {
			respond_fmt(r, 400, "error resolving path: %s", err);
			return;
		}
		files_archive_post(r, &u, dir, fmt, gzip);
		return;
	}
	up = calloc(1, sizeof(*up));
	if (!up) {
		http_respond_json_error(r, 500, "out of memory");
		return;
	}
	up->r = r;
	up->fd = -1;
	up->gzip = gzip;
	up->content_length = r->content_length;
	if (lookup_user(r, uname, &up->u))
		goto fail;
	if (collect_metadata(r, &up->meta) < 0) {
		http_respond_json_error(r, 500, "out of memory");
		goto fail;
	}
	if (fs_meta_validate(&up->meta, err, sizeof(err)) < 0) {
		respond_fmt(r, 400, "invalid metadata: %s", err);
		goto fail;
	}
	/* Atomic unless asked not to: a cut connection or a crash never
	 * leaves a half-written target nor loses its previous content. */
	up->atomic = true;
	if (http_query_get(r->query, "atomic", atomic, sizeof(atomic)) > 0)
		up->atomic = !(strcmp(atomic, "false") == 0 || strcmp(atomic, "0") == 0);
	up->has_path_param = http_query_get(r->query, "path", up->path_param, sizeof(up->path_param)) > 0;

	ct = http_req_header(r, "content-type");
	size_t mtl = ct ? strcspn(ct, ";") : 0;
	while (mtl && (ct[mtl - 1] == ' ' || ct[mtl - 1] == '\t'))
		mtl--;
	if (ct && mtl == strlen("application/octet-stream") && strncasecmp(ct, "application/octet-stream", mtl) == 0) {
		if (!up->has_path_param) {
			http_respond_json_error(r, 400, "path query parameter is required for raw body upload");
			goto fail;
		}
		if (path_resolve(&up->u, up->path_param, state_default_workdir(), up->raw_target, sizeof(up->raw_target),
				 err, sizeof(err)) < 0) {
			respond_fmt(r, 400, "error resolving path: %s", err);
			goto fail;
		}
	} else if (ct && strncasecmp(ct, "multipart/", 10) == 0) {
		int b = mp_content_type_boundary(ct, ctbuf, sizeof(ctbuf));
		if (b < 0) {
			http_respond_json_error(r, 500,
						"error parsing multipart form: request Content-Type isn't multipart/form-data");
			goto fail;
		}
		if (b == 0 || mp_init(&up->mp, ctbuf, &up_mp_cbs, up) < 0) {
			http_respond_json_error(r, 500,
						"error parsing multipart form: no multipart boundary param in Content-Type");
			goto fail;
		}
		up->multipart = true;
	} else {
		respond_fmt(r, 400, "unsupported content type: %s, expected multipart/form-data or application/octet-stream",
			    ct ? ct : "");
		goto fail;
	}
	up->results = json_array();
	up->in = malloc(UP_IN_MAX);
	up->work = malloc(UP_IN_MAX);
	if (!up->results || !up->in || !up->work)
		goto nomem;
	if (state_default_workdir())
		snprintf(up->workdir, sizeof(up->workdir), "%s", state_default_workdir());
	/* Until the first job opens the target, the mount is guessed from
	 * the path the client named (path_resolve is pure). */
	if (up->raw_target[0])
		snprintf(up->shown, sizeof(up->shown), "%s", up->raw_target);
	else if (!up->has_path_param ||
		 path_resolve(&up->u, up->path_param, up->workdir[0] ? up->workdir : NULL, up->shown, sizeof(up->shown),
			      err, sizeof(err)) < 0)
		snprintf(up->shown, sizeof(up->shown), "%s", up->workdir[0] ? up->workdir : up->u.home);
	up->key = worker_path_key(up->shown);
	up->timeout = worker_fs_timeout;
	if (gzip) {
		up->zout = malloc(CHUNK);
		if (!up->zout || inflateInit2(&up->zs, 16 + MAX_WBITS) != Z_OK)
			goto nomem;
		up->zinit = true;
	}
	r->ud = up;
	r->on_body = up_on_body;
	r->on_body_end = up_on_body_end;
	r->on_close = up_on_close;
	if (r->body_done)
		up_on_body_end(r);
	return;
nomem:
	http_respond_json_error(r, 500, "out of memory");
fail:
	up_free(up);
}

/* ======================= POST /files/compose ======================= */

#define COMPOSE_BODY_MAX (1024 * 1024)

struct compose {
	struct http_req *r;     /* NULL once the client went away */
	struct user u;
	struct buf body;        /* bounded by COMPOSE_BODY_MAX */
	bool too_big;
	char dest[PATH_MAX];
	char **srcs;            /* resolved */
	char **srcs_given;
	size_t n;
	uint64_t key;           /* the destination's mount */
	double timeout;
	bool checked;           /* the first job (checks) is back */
	bool expired;           /* answered 504 */
	_Atomic int at;         /* the source the job is on, -1: the destination */
	/* worker result */
	int status;
	char msg[MSGLEN];
	bool queued;            /* handed to the worker; it frees the job */
};

static void compose_free(struct compose *c)
{
	for (size_t i = 0; i < c->n; i++) {
		free(c->srcs[i]);
		free(c->srcs_given[i]);
	}
	free(c->srcs);
	free(c->srcs_given);
	buf_free(&c->body);
	free(c);
}

static void compose_on_close(struct http_req *r, bool completed)
{
	struct compose *c = r->ud;
	r->ud = NULL;
	if (!c)
		return;
	if (c->queued)
		c->r = NULL; /* the worker completion frees it */
	else
		compose_free(c);
}

static void compose_on_body(struct http_req *r, const uint8_t *p, size_t n)
{
	struct compose *c = r->ud;
	if (!c->too_big && buf_append(&c->body, p, n) < 0)
		c->too_big = true;
}

/* Copy all of src into dst at its end with the kernel doing the work. */
static int copy_all(int in, int out)
{
	for (;;) {
		ssize_t n = copy_file_range(in, NULL, out, NULL, 1 << 30, 0);
		if (n == 0)
			return 0;
		if (n > 0)
			continue;
		if (errno == EINTR)
			continue;
		if (errno != EXDEV && errno != ENOSYS && errno != EINVAL && errno != EOPNOTSUPP)
			return -errno;
		break;
	}
	/* Fallback for filesystems without copy_file_range. */
	static _Thread_local char buf[CHUNK];
	for (;;) {
		ssize_t n = read(in, buf, sizeof(buf));
		if (n == 0)
			return 0;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		for (ssize_t o = 0; o < n;) {
			ssize_t w = write(out, buf + o, (size_t)(n - o));
			if (w < 0) {
				if (errno == EINTR)
					continue;
				return -errno;
			}
			o += w;
		}
	}
}

/* Worker, first job: the sources are files, the destination's directory exists. */
static void compose_check(void *arg)
{
	struct compose *c = arg;
	char err[MSGLEN - 64], parent[PATH_MAX];
	struct stat st;

	c->status = 200;
	for (size_t i = 0; i < c->n; i++) {
		c->at = (int)i;
		if (stat(c->srcs[i], &st) < 0) {
			c->status = 404;
			snprintf(c->msg, sizeof(c->msg), "source file not found: %s", c->srcs_given[i]);
			return;
		}
		if (!S_ISREG(st.st_mode)) {
			c->status = 400;
			snprintf(c->msg, sizeof(c->msg), "source path is not a regular file: %s", c->srcs_given[i]);
			return;
		}
	}
	c->at = -1;
	fs_path_dir(c->dest, parent, sizeof(parent));
	if (fs_ensure_dirs(parent, c->u.uid, c->u.gid, err, sizeof(err)) < 0) {
		c->status = 500;
		snprintf(c->msg, sizeof(c->msg), "error ensuring directories: %s", err);
	}
}

/* Worker, second job (no deadline: a large copy takes its time). */
static void compose_work(void *arg)
{
	struct compose *c = arg;
	char tmp[PATH_MAX], sfx[40];
	int out, rc;

	random_suffix(sfx, sizeof(sfx));
	if (snprintf(tmp, sizeof(tmp), "%s.e2b-compose.%s.tmp", c->dest, sfx) >= (int)sizeof(tmp)) {
		c->status = 500;
		snprintf(c->msg, sizeof(c->msg), "error creating destination file: %s", go_strerror(ENAMETOOLONG));
		return;
	}
	out = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
	if (out < 0) {
		int e = errno;
		c->status = e == ENOSPC ? 507 : 500;
		if (e == ENOSPC)
			snprintf(c->msg, sizeof(c->msg), "not enough disk space available");
		else
			snprintf(c->msg, sizeof(c->msg), "error creating destination file: open %s: %s", tmp, go_strerror(e));
		return;
	}
	if (fchown(out, c->u.uid, c->u.gid) < 0) {
		c->status = 500;
		snprintf(c->msg, sizeof(c->msg), "error changing file ownership: chown %s: %s", tmp, go_strerror(errno));
		goto fail;
	}
	for (size_t i = 0; i < c->n; i++) {
		c->at = (int)i;
		int in = open(c->srcs[i], O_RDONLY | O_CLOEXEC);
		if (in < 0) {
			c->status = 500;
			snprintf(c->msg, sizeof(c->msg), "error opening source file %s: open %s: %s", c->srcs_given[i],
				 c->srcs[i], go_strerror(errno));
			goto fail;
		}
		rc = copy_all(in, out);
		close(in);
		if (rc < 0) {
			c->status = rc == -ENOSPC || rc == -EDQUOT ? 507 : 500;
			if (c->status == 507)
				snprintf(c->msg, sizeof(c->msg), "not enough disk space available");
			else
				snprintf(c->msg, sizeof(c->msg), "error composing source %s: %s", c->srcs_given[i],
					 go_strerror(-rc));
			goto fail;
		}
	}
	if (close(out) < 0) {
		out = -1;
		c->status = 500;
		snprintf(c->msg, sizeof(c->msg), "error finalizing compose: close %s: %s", tmp, go_strerror(errno));
		goto fail;
	}
	out = -1;
	if (rename(tmp, c->dest) < 0) {
		c->status = 500;
		snprintf(c->msg, sizeof(c->msg), "error finalizing compose: rename %s %s: %s", tmp, c->dest,
			 go_strerror(errno));
		goto fail;
	}
	for (size_t i = 0; i < c->n; i++)
		if (strcmp(c->srcs[i], c->dest) != 0)
			unlink(c->srcs[i]);
	c->status = 200;
	return;
fail:
	if (out >= 0)
		close(out);
	unlink(tmp);
}

static void compose_expired(void *arg)
{
	struct compose *c = arg;
	char msg[MSGLEN];
	int at = c->at;

	c->expired = true;
	if (!c->r)
		return;
	fsjob_timeout_msg(msg, sizeof(msg), c->timeout, at >= 0 && (size_t)at < c->n ? c->srcs[at] : c->dest);
	http_respond_json_error(c->r, 504, msg); /* may call on_close */
}

static void compose_done(void *arg);

static void compose_submit(struct compose *c, bool check)
{
	struct worker_req req = { .work = check ? compose_check : compose_work, .done = compose_done,
				  .expired = check ? compose_expired : NULL, .arg = c, .key = c->key,
				  .timeout = check ? c->timeout : 0 };
	char msg[MSGLEN];

	c->queued = true;
	if (worker_run(&req) == 0)
		return;
	c->queued = false;
	fsjob_busy_msg(msg, sizeof(msg), c->dest);
	http_respond_json_error(c->r, 503, msg); /* on_close frees c */
}

static void compose_done(void *arg)
{
	struct compose *c = arg;
	struct http_req *r = c->r;
	char base[PATH_MAX];

	c->queued = false;
	if (!r) {
		compose_free(c);
		return;
	}
	if (c->expired)
		return; /* answered (504); on_close frees c */
	if (c->status == 200 && !c->checked) {
		c->checked = true;
		compose_submit(c, false);
		return;
	}
	if (c->status != 200) {
		http_respond_json_error(r, c->status, c->msg); /* on_close frees c */
		return;
	}
	json_t *o = json_object();
	path_base(c->dest, base, sizeof(base));
	json_object_set_new(o, "name", json_string(base));
	json_object_set_new(o, "path", json_string(c->dest));
	json_object_set_new(o, "type", json_string("file"));
	char *s = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (!s) {
		http_respond_json_error(r, 500, "out of memory");
		return;
	}
	size_t l = strlen(s);
	char *body = malloc(l + 2);
	if (body) {
		memcpy(body, s, l);
		body[l] = '\n';
		http_respond(r, 200, "application/json", body, l + 1, NULL, 0);
	} else {
		http_respond_json_error(r, 500, "out of memory");
	}
	free(body);
	free(s);
}

static void compose_on_body_end(struct http_req *r)
{
	struct compose *c = r->ud;
	char err[MSGLEN];
	json_error_t je;
	json_t *root = NULL, *srcs, *dest, *user;
	const char *uname;

	if (!c || c->queued)
		return;
	if (c->too_big) {
		http_respond_json_error(r, 400, "invalid request body: request body too large");
		return;
	}
	root = json_loadb(c->body.p ? (const char *)c->body.p : "", c->body.len, JSON_REJECT_DUPLICATES,
			  &je);
	if (!root || !json_is_object(root)) {
		respond_fmt(r, 400, "invalid request body: %s", root ? "expected a JSON object" : je.text);
		goto out;
	}
	srcs = json_object_get(root, "source_paths");
	dest = json_object_get(root, "destination");
	user = json_object_get(root, "username");
	if ((srcs && !json_is_array(srcs) && !json_is_null(srcs)) || (dest && !json_is_string(dest) && !json_is_null(dest)) ||
	    (user && !json_is_string(user) && !json_is_null(user))) {
		http_respond_json_error(r, 400, "invalid request body: wrong field type");
		goto out;
	}
	if (!srcs || !json_is_array(srcs) || json_array_size(srcs) == 0) {
		http_respond_json_error(r, 400, "source_paths must not be empty");
		goto out;
	}
	if (!dest || !json_is_string(dest) || !*json_string_value(dest)) {
		http_respond_json_error(r, 400, "destination is required");
		goto out;
	}
	uname = user && json_is_string(user) ? json_string_value(user) : state_default_user();
	if (lookup_user(r, uname, &c->u))
		goto out;
	if (path_resolve(&c->u, json_string_value(dest), state_default_workdir(), c->dest, sizeof(c->dest), err,
			 sizeof(err)) < 0) {
		respond_fmt(r, 400, "error resolving destination path: %s", err);
		goto out;
	}
	size_t n = json_array_size(srcs);
	c->srcs = calloc(n, sizeof(char *));
	c->srcs_given = calloc(n, sizeof(char *));
	if (!c->srcs || !c->srcs_given) {
		http_respond_json_error(r, 500, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		json_t *s = json_array_get(srcs, i);
		char rp[PATH_MAX];
		if (!json_is_string(s)) {
			http_respond_json_error(r, 400, "invalid request body: source_paths must be strings");
			goto out;
		}
		const char *given = json_string_value(s);
		if (path_resolve(&c->u, given, state_default_workdir(), rp, sizeof(rp), err, sizeof(err)) < 0) {
			respond_fmt(r, 400, "error resolving source path \"%s\": %s", given, err);
			goto out;
		}
		if (strcmp(rp, c->dest) == 0) {
			respond_fmt(r, 400, "source path \"%s\" cannot be the same as destination", given);
			goto out;
		}
		c->srcs[i] = strdup(rp);
		c->srcs_given[i] = strdup(given);
		c->n = i + 1;
		if (!c->srcs[i] || !c->srcs_given[i]) {
			http_respond_json_error(r, 500, "out of memory");
			goto out;
		}
	}
	/* Every call on the paths runs in worker jobs of the destination's
	 * mount: first the checks, with the deadline, then the copy. */
	c->key = worker_path_key(c->dest);
	c->timeout = worker_fs_timeout;
	c->at = -1;
	compose_submit(c, true);
out:
	json_decref(root);
}

void files_compose(struct http_req *r)
{
	struct compose *c = calloc(1, sizeof(*c));

	if (!c) {
		http_respond_json_error(r, 500, "out of memory");
		return;
	}
	c->r = r;
	buf_init(&c->body, COMPOSE_BODY_MAX);
	r->ud = c;
	r->on_body = compose_on_body;
	r->on_body_end = compose_on_body_end;
	r->on_close = compose_on_close;
}
