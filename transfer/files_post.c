/* SPDX-License-Identifier: Apache-2.0 */
/*
 * files_post.c - POST /files (files_post.h).
 *
 * The body goes through the upload pump (transfer/uppump.h): collected on
 * the loop, inflated and parsed on the worker pool; this file is its sink
 * (the multipart parts, or the raw body, written to their targets).
 *
 * Lifetime: the upload embeds the pump, a reqjob bound to the exchange;
 * it is freed once the exchange and the job in flight have let go.
 */
#include "transfer/files_post.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/errstr.h"
#include "base/state.h"
#include "base/users.h"
#include "base/worker.h"
#include "fs/entry.h"
#include "fs/fguard.h"
#include "fs/fwrite.h"
#include "transfer/files_archive.h"
#include "transfer/files_common.h"
#include "transfer/files_util.h"
#include "transfer/fsjob.h"
#include "transfer/multipart.h"
#include "transfer/uppump.h"

struct upload {
	struct uppump pump;  /* the body, the exchange, the jobs (key: the target's mount) */
	struct user u;
	struct fs_meta meta;
	int64_t content_length;
	bool atomic;        /* replace by rename where it can (default) */
	/* HTTP's preconditions on each target (RFC 9110 13.2.2); "" absent */
	char if_match[FILES_COND_MAX];
	char if_none_match[FILES_COND_MAX];

	/* sink */
	bool multipart;
	struct mp_parser mp;
	bool has_path_param;
	char path_param[PATH_MAX];
	char raw_target[PATH_MAX];  /* raw mode: resolved target */
	bool raw_begun;

	/* current file */
	bool skip_part;     /* a non-file form field */
	char target[PATH_MAX];
	struct fwrite w;    /* its write, atomic or in place (fs/fwrite.h) */

	/* results */
	json_t *results;
	char **written;
	size_t n_written;
	char workdir[PATH_MAX];     /* default workdir at request time */

	/* Set by the jobs, read on the loop between them. */
	uint64_t key;       /* the mount of the file being written */
	bool local;         /* ... which cannot hang: closed on the loop */
	char *resp_body;    /* the reply, once finished */
	char etag[FS_VERSION_LEN + 3]; /* the file's, when one was written */
};

static bool up_conditional(const struct upload *up)
{
	return up->if_match[0] || up->if_none_match[0];
}

/* Worker: the target against If-Match / If-None-Match. 0, or 412 (and
 * the error recorded) when a precondition fails. */
static int up_preconditions(struct upload *up, char *msg, size_t msglen)
{
	char version[FS_VERSION_LEN + 1];
	bool exists;
	int rc = fguard_state(up->target, &exists, version);

	if (rc < 0) {
		snprintf(msg, msglen, "error checking %s: %s", up->target, go_strerror(-rc));
		return 500;
	}
	return files_write_preconditions(up->if_match[0] ? up->if_match : NULL,
					 up->if_none_match[0] ? up->if_none_match : NULL, exists, version, up->target,
					 msg, msglen);
}

/* fwrite's last look before the rename (under the path's lock). */
static int up_before_replace(void *arg, const char *target, char *err, size_t errlen)
{
	int st = up_preconditions(arg, err, errlen);

	return st == 412 ? -ESTALE : st ? -EIO : 0;
}

static struct upload *up_of(struct uppump *p)
{
	return UPPUMP_OWNER(p, struct upload, pump);
}

static void up_discard_current(struct upload *up)
{
	fwrite_discard(&up->w);
}

static void up_free(struct upload *up)
{
	up_discard_current(up);
	fs_meta_clear(&up->meta);
	json_decref(up->results);
	for (size_t i = 0; i < up->n_written; i++)
		free(up->written[i]);
	free(up->written);
	free(up->resp_body);
	free(up);
}

static void up_free_cb(void *arg)
{
	up_free(arg);
}

/* The pump's last reference: a half-written file on a mount that may hang
 * is closed and removed by a worker job. */
static void up_release(struct uppump *p)
{
	struct upload *up = up_of(p);

	if (up->w.fd >= 0 && !up->local)
		fsjob_release(up_free_cb, up, up->key);
	else
		up_free(up);
}

/* An error drops the file in progress: nothing half-written stays. */
static void up_discard(struct uppump *p)
{
	up_discard_current(up_of(p));
}

/* Record the upload's error (the first one wins); the loop sends it. */
#define up_error(up, ...) uppump_fail(&(up)->pump, __VA_ARGS__)

/* An error of fs/fwrite.h as the upload's status. */
static int up_fwrite_error(struct upload *up, int rc, const char *msg)
{
	return up_error(up, rc == -EISDIR || rc == -ENAMETOOLONG ? 400 : rc == -ENOSPC ? 507 : rc == -EACCES ? 403 : 500, "%s",
			msg);
}

/* Open up->target for writing (fs/fwrite.h); the next jobs run on its
 * mount. A precondition that fails stops the upload before anything is
 * written. */
static int up_begin_file(struct upload *up)
{
	char err[FILES_MSGLEN];
	int rc;

	if (up_conditional(up)) {
		int st = up_preconditions(up, err, sizeof(err));
		if (st)
			return up_error(up, st, "%s", err);
		up->w.before_replace = up_before_replace;
		up->w.before_arg = up;
	}
	rc = fwrite_begin(&up->w, up->target, up->u.uid, up->u.gid, up->atomic, err, sizeof(err));
	if (rc < 0)
		return up_fwrite_error(up, rc, err);
	fsjob_fd_mount(up->w.fd, &up->key, &up->local);
	return 0;
}

static int up_write(struct upload *up, const uint8_t *p, size_t n)
{
	char err[FILES_MSGLEN];
	int rc = fwrite_write(&up->w, p, n, err, sizeof(err));

	if (rc == -ENOSPC && up->content_length > 0)
		return up_error(up, 507, "attempted to write %lld bytes: not enough disk space available",
				(long long)up->content_length);
	return rc < 0 ? up_fwrite_error(up, rc, err) : 0;
}

/*
 * Into place: with preconditions, under the path's lock across their last
 * check and the rename (fs/fguard.h). The new file's version (stamped so
 * that it needs no wait) becomes the reply's ETag.
 */
static int up_commit(struct upload *up)
{
	char err[FILES_MSGLEN];
	struct stat st;
	int keep, rc;

	fs_version_stamp(up->w.fd);
	keep = dup(up->w.fd);
	if (up_conditional(up) && fguard_lock(up->target, up->pump.job.timeout) < 0) {
		if (keep >= 0)
			close(keep);
		fwrite_discard(&up->w);
		return up_error(up, 504, "another write of %s did not finish within %g s", up->target,
				up->pump.job.timeout);
	}
	rc = fwrite_commit(&up->w, &up->meta, err, sizeof(err));
	if (up_conditional(up))
		fguard_unlock(up->target);
	up->etag[0] = '\0';
	if (rc == 0 && keep >= 0 && fstat(keep, &st) == 0 && S_ISREG(st.st_mode)) {
		char v[FS_VERSION_LEN + 1];
		if (fs_version_settle(&st, keep, NULL))
			fstat(keep, &st);
		fs_version(&st, v);
		snprintf(up->etag, sizeof(up->etag), "\"%s\"", v);
	}
	if (keep >= 0)
		close(keep);
	if (rc == -ESTALE)
		return up_error(up, 412, "%s", err);
	return rc < 0 ? up_fwrite_error(up, rc, err) : 0;
}

/* The file is complete: metadata, into place, and its entry in the reply. */
static int up_finish_file(struct upload *up)
{
	char base[PATH_MAX];
	struct fs_meta rb;
	int rc = up_commit(up);

	if (rc < 0)
		return rc;

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
	if (up->skip_part || up->w.fd < 0)
		return 0;
	return up_write(up, p, n);
}

static int up_part_end(void *ud)
{
	struct upload *up = ud;
	if (up->skip_part || up->w.fd < 0)
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

/* Worker: the gzip body is corrupt. Before any byte came out of it, that
 * is what Go's gzip reader says of a bad header. */
static int up_bad_gzip(struct uppump *p, const char *zmsg)
{
	struct upload *up = up_of(p);

	if (p->zs.total_out == 0 && !up->raw_begun && !up->mp.n_parts)
		return up_error(up, 400, "error decompressing request body: failed to create gzip reader: gzip: invalid header");
	return up_error(up, 500, "error writing file: gzip: %s", zmsg);
}

static int up_sink_cb(struct uppump *p, const uint8_t *b, size_t n)
{
	return up_sink(up_of(p), b, n);
}

/* Worker side: the last step once the whole body went through. */
static void up_finalize(struct uppump *p)
{
	struct upload *up = up_of(p);

	if (p->gzip) {
		if (!p->got_input) {
			up_error(up, 400, "error decompressing request body: failed to create gzip reader: EOF");
			return;
		}
		if (!p->zended) {
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

/* Loop: a job is back. The next job runs on the mount of the file it
 * opened, and a 503 or 504 names it. */
static void up_back(struct uppump *p)
{
	struct upload *up = up_of(p);

	if (up->target[0])
		snprintf(p->shown, sizeof(p->shown), "%s", up->target);
	p->job.key = up->key;
}

static void up_respond(struct uppump *p, struct http_req *r)
{
	struct upload *up = up_of(p);
	struct http_hdr h[1] = { { "etag", up->etag } };

	/* The ETag of the one file written: what If-Match takes next. */
	http_respond(r, 200, "application/json", up->resp_body, strlen(up->resp_body), h,
		     up->n_written == 1 && up->etag[0] ? 1 : 0);
}

static const struct uppump_ops up_pump_ops = {
	.sink = up_sink_cb,
	.bad_gzip = up_bad_gzip,
	.finish = up_finalize,
	.back = up_back,
	.respond = up_respond,
	.discard = up_discard,
	.free = up_release,
};

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

/*
 * Content-Encoding: gzip or identity. Returns 1 for gzip, 0 for none; -1
 * when the 400 has been sent.
 */
static int post_coding(struct http_req *r)
{
	const char *ce = http_req_header(r, "content-encoding");
	size_t l;

	if (!ce || !*ce)
		return 0;
	l = strcspn(ce, ";, \t");
	if (l == 4 && strncasecmp(ce, "gzip", 4) == 0)
		return 1;
	if (l == 8 && strncasecmp(ce, "identity", 8) == 0)
		return 0;
	files_respond_fmt(r, 400, "error decompressing request body: unsupported Content-Encoding: %s, supported: [gzip]",
			  ce);
	return -1;
}

/* ?extract=: the user and the directory, then the archive edge. */
static void post_extract(struct http_req *r, const char *uname, const char *fmt, bool gzip)
{
	char qpath[PATH_MAX], dir[PATH_MAX], err[FILES_MSGLEN];
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
}

/* The user, the metadata headers and the query. 0, or -1 once answered. */
static int up_params(struct upload *up, struct http_req *r, const char *uname)
{
	char err[FILES_MSGLEN], atomic[8];

	if (files_lookup_user(r, uname, &up->u))
		return -1;
	if (collect_metadata(r, &up->meta) < 0) {
		http_respond_json_error(r, 500, "out of memory");
		return -1;
	}
	if (fs_meta_validate(&up->meta, err, sizeof(err)) < 0) {
		files_respond_fmt(r, 400, "invalid metadata: %s", err);
		return -1;
	}
	/* Atomic unless asked not to: a cut connection or a crash never
	 * leaves a half-written target nor loses its previous content. */
	up->atomic = true;
	if (http_query_get(r->query, "atomic", atomic, sizeof(atomic)) > 0)
		up->atomic = !(strcmp(atomic, "false") == 0 || strcmp(atomic, "0") == 0);
	up->has_path_param = http_query_get(r->query, "path", up->path_param, sizeof(up->path_param)) > 0;
	static const char *const conds[2] = { "if-match", "if-none-match" };
	char *dst[2] = { up->if_match, up->if_none_match };
	for (int i = 0; i < 2; i++) {
		const char *v = http_req_header(r, conds[i]);
		if (!v)
			continue;
		if (strlen(v) >= FILES_COND_MAX || !*v) {
			files_respond_fmt(r, 400, "invalid %s: empty or over %d bytes", conds[i], FILES_COND_MAX - 1);
			return -1;
		}
		snprintf(dst[i], FILES_COND_MAX, "%s", v);
	}
	return 0;
}

/* A raw body (its target) or a multipart one (its parser). 0, or -1 once answered. */
static int up_content_type(struct upload *up, struct http_req *r)
{
	const char *ct = http_req_header(r, "content-type");
	size_t mtl = ct ? strcspn(ct, ";") : 0;
	char err[FILES_MSGLEN], ctbuf[128];

	while (mtl && (ct[mtl - 1] == ' ' || ct[mtl - 1] == '\t'))
		mtl--;
	if (ct && mtl == strlen("application/octet-stream") && strncasecmp(ct, "application/octet-stream", mtl) == 0) {
		if (!up->has_path_param) {
			http_respond_json_error(r, 400, "path query parameter is required for raw body upload");
			return -1;
		}
		if (path_resolve(&up->u, up->path_param, state_default_workdir(), up->raw_target, sizeof(up->raw_target),
				 err, sizeof(err)) < 0) {
			files_respond_fmt(r, 400, "error resolving path: %s", err);
			return -1;
		}
		return 0;
	}
	if (ct && strncasecmp(ct, "multipart/", 10) == 0) {
		int b = mp_content_type_boundary(ct, ctbuf, sizeof(ctbuf));
		if (b < 0) {
			http_respond_json_error(r, 500,
						"error parsing multipart form: request Content-Type isn't multipart/form-data");
			return -1;
		}
		if (b == 0 || mp_init(&up->mp, ctbuf, &up_mp_cbs, up) < 0) {
			http_respond_json_error(r, 500,
						"error parsing multipart form: no multipart boundary param in Content-Type");
			return -1;
		}
		up->multipart = true;
		return 0;
	}
	files_respond_fmt(r, 400, "unsupported content type: %s, expected multipart/form-data or application/octet-stream",
			  ct ? ct : "");
	return -1;
}

/* Where the jobs go until the first one opens the target: the mount is
 * guessed from the path the client named (path_resolve is pure). */
static void up_first_key(struct upload *up)
{
	char err[FILES_MSGLEN];
	char *shown = up->pump.shown;

	if (state_default_workdir())
		snprintf(up->workdir, sizeof(up->workdir), "%s", state_default_workdir());
	if (up->raw_target[0])
		snprintf(shown, PATH_MAX, "%s", up->raw_target);
	else if (!up->has_path_param ||
		 path_resolve(&up->u, up->path_param, up->workdir[0] ? up->workdir : NULL, shown, PATH_MAX, err,
			      sizeof(err)) < 0)
		snprintf(shown, PATH_MAX, "%s", up->workdir[0] ? up->workdir : up->u.home);
	up->key = up->pump.job.key = worker_path_key(shown);
	up->pump.job.timeout = worker_fs_timeout;
}

void files_post(struct http_req *r)
{
	char uname[256], fmt[16];
	struct upload *up;
	int gzip;

	if (files_check_signing(r, "write"))
		return;
	files_request_username(r, uname, sizeof(uname));
	if ((gzip = post_coding(r)) < 0)
		return;
	if (http_query_get(r->query, "extract", fmt, sizeof(fmt)) > 0) {
		post_extract(r, uname, fmt, gzip);
		return;
	}
	up = calloc(1, sizeof(*up));
	if (!up) {
		http_respond_json_error(r, 500, "out of memory");
		return;
	}
	uppump_init(&up->pump, &up_pump_ops);
	fwrite_init(&up->w);
	up->content_length = r->content_length;
	if (up_params(up, r, uname) < 0 || up_content_type(up, r) < 0)
		goto out; /* answered; the release frees it: nothing else holds it yet */
	up->results = json_array();
	if (!up->results || uppump_alloc(&up->pump, gzip) < 0) {
		http_respond_json_error(r, 500, "out of memory");
		goto out;
	}
	up_first_key(up);
	uppump_start(&up->pump, r, false);
out:
	reqjob_release(&up->pump.job);
}
