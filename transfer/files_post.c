/* SPDX-License-Identifier: Apache-2.0 */
/*
 * files_post.c - POST /files (files_post.h).
 *
 * Lifetime: the upload lives in r->ud from the first callback
 * registration until on_close, which frees it, or, when a job is in
 * flight then, until that job's completion.
 */
#include "transfer/files_post.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "base/errstr.h"
#include "base/state.h"
#include "base/uptmp.h"
#include "base/users.h"
#include "base/worker.h"
#include "fs/entry.h"
#include "transfer/files_archive.h"
#include "transfer/files_common.h"
#include "transfer/fsjob.h"
#include "transfer/multipart.h"

/* Output room of one inflate step. */
#define CHUNK (64 * 1024)

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
	char err_msg[FILES_MSGLEN];
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
	char parent[PATH_MAX], err[FILES_MSGLEN];
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
	char err[FILES_MSGLEN];
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
		char others[FILES_MSGLEN] = "";
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
		char msg[FILES_MSGLEN];
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
	char msg[FILES_MSGLEN];

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
	char uname[256], err[FILES_MSGLEN], ctbuf[128], atomic[8];
	struct upload *up;
	const char *ce, *ct;

	if (files_check_signing(r, "write"))
		return;
	files_request_username(r, uname, sizeof(uname));
	ce = http_req_header(r, "content-encoding");
	bool gzip = false;
	if (ce && *ce) {
		size_t l = strcspn(ce, ";, \t");
		if (l == 4 && strncasecmp(ce, "gzip", 4) == 0)
			gzip = true;
		else if (!(l == 8 && strncasecmp(ce, "identity", 8) == 0))
			return files_respond_fmt(r, 400,
					   "error decompressing request body: unsupported Content-Encoding: %s, supported: [gzip]",
					   ce);
	}
	char fmt[16];
	if (http_query_get(r->query, "extract", fmt, sizeof(fmt)) > 0) {
		char qpath[PATH_MAX], dir[PATH_MAX];
		struct user u;
		if (files_lookup_user(r, uname, &u))
			return;
		if (http_query_get(r->query, "path", qpath, sizeof(qpath)) <= 0) {
			http_respond_json_error(r, 400, "path query parameter is required for extraction");
			return;
		}
		if (path_resolve(&u, qpath, state_default_workdir(), dir, sizeof(dir), err, sizeof(err)) < 0) {
			files_respond_fmt(r, 400, "error resolving path: %s", err);
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
	if (files_lookup_user(r, uname, &up->u))
		goto fail;
	if (collect_metadata(r, &up->meta) < 0) {
		http_respond_json_error(r, 500, "out of memory");
		goto fail;
	}
	if (fs_meta_validate(&up->meta, err, sizeof(err)) < 0) {
		files_respond_fmt(r, 400, "invalid metadata: %s", err);
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
			files_respond_fmt(r, 400, "error resolving path: %s", err);
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
		files_respond_fmt(r, 400, "unsupported content type: %s, expected multipart/form-data or application/octet-stream",
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