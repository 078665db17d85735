/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dlplan.c - what GET /files answers (dlplan.h).
 */
#include "transfer/dlplan.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "base/errstr.h"
#include "base/users.h"

static void plan_error(struct dlplan *p, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void plan_error(struct dlplan *p, int status, const char *fmt, ...)
{
	va_list ap;

	p->kind = DLPLAN_ERROR;
	p->status = status;
	va_start(ap, fmt);
	vsnprintf(p->msg, sizeof(p->msg), fmt, ap);
	va_end(ap);
}

static void plan_hdr(struct dlplan *p, const char *name, const char *value)
{
	if (p->nh < DLPLAN_MAX_HDRS)
		p->h[p->nh++] = (struct http_hdr){ name, value };
}

/*
 * Conditional request evaluation (Go's ServeContent, RFC 9110 13.2.2):
 * If-Match, else If-Unmodified-Since; If-None-Match, else
 * If-Modified-Since; the ETag is the version, when the file has one.
 * Returns 0 to serve, 304 or 412; clears *range_ok when an If-Range does
 * not match.
 */
static int plan_conditions(const struct http_req *r, time_t mtime, const char *version, bool *range_ok)
{
	const char *h;
	time_t t;

	if ((h = http_req_header(r, "if-match"))) {
		if (strcmp(h, "*") != 0 && !files_etag_listed(h, version, false))
			return 412;
	} else if ((h = http_req_header(r, "if-unmodified-since")) && mtime > 0) {
		t = files_parse_http_date(h);
		if (t >= 0 && mtime > t)
			return 412;
	}
	if ((h = http_req_header(r, "if-none-match"))) {
		if (strcmp(h, "*") == 0 || files_etag_listed(h, version, true))
			return 304;
	} else if ((h = http_req_header(r, "if-modified-since")) && mtime > 0) {
		t = files_parse_http_date(h);
		if (t >= 0 && mtime <= t)
			return 304;
	}
	if ((h = http_req_header(r, "if-range"))) {
		if (h[0] == '"' || (h[0] == 'W' && h[1] == '/')) {
			if (!files_etag_listed(h, version, false))
				*range_ok = false;
		} else {
			t = files_parse_http_date(h);
			if (t < 0 || mtime <= 0 || mtime > t)
				*range_ok = false;
		}
	}
	return 0;
}

/*
 * The answers that need no coding: the path cannot be looked at, is a
 * directory, or is one for ?archive=. True when one was planned.
 */
static bool plan_path(const struct dlplan_in *in, struct dlplan *p)
{
	if (in->err && !in->err_open) {
		if (in->err == ENOENT)
			plan_error(p, 404, "path '%s' does not exist", in->path);
		else
			plan_error(p, 500, "error checking if path exists '%s': stat %s: %s", in->path, in->path,
				   go_strerror(in->err));
		return true;
	}
	if (in->archive) {
		if (S_ISDIR(in->mode))
			p->kind = DLPLAN_ARCHIVE;
		else
			plan_error(p, 400, "path '%s' is not a directory", in->path);
		return true;
	}
	if (S_ISDIR(in->mode)) {
		plan_error(p, 400, "path '%s' is a directory", in->path);
		return true;
	}
	return false;
}

/*
 * The coding (Accept-Encoding; identity for a range or a condition,
 * gzip only where it wins). False when an error was planned instead.
 */
static bool plan_coding(const struct http_req *r, const struct dlplan_in *in, struct dlplan *p, bool *gzip)
{
	bool id_rejected;
	enum files_encoding enc = files_negotiate(http_req_header(r, "accept-encoding"), &id_rejected);

	if (enc == FILES_ENC_NONE) {
		plan_error(p, 406, "error parsing Accept-Encoding: no acceptable encoding found, supported: [gzip]");
		return false;
	}
	p->vary = true;
	if (http_req_header(r, "range") || http_req_header(r, "if-modified-since") ||
	    http_req_header(r, "if-none-match") || http_req_header(r, "if-range") || http_req_header(r, "if-match") ||
	    http_req_header(r, "if-unmodified-since")) {
		if (id_rejected) {
			plan_error(p, 406, "identity encoding not acceptable for Range or conditional request");
			return false;
		}
		enc = FILES_ENC_IDENTITY;
	}
	if (in->err) {
		plan_error(p, 500, "error opening file '%s': open %s: %s", in->path, in->path, go_strerror(in->err));
		return false;
	}
	if (enc == FILES_ENC_GZIP && !id_rejected && !in->gzip_always && !in->gzip_wins)
		enc = FILES_ENC_IDENTITY;
	*gzip = enc == FILES_ENC_GZIP;
	return true;
}

/* A Range header against the file: 416, byteranges, one range or the whole. */
static void plan_ranges(const char *range, const struct dlplan_in *in, struct dlplan *p)
{
	int rr = range ? files_parse_ranges(range, in->size, p->rg, DLPLAN_MAX_RANGES) : 0;

	/* Go ignores an unsatisfiable range on an empty file (clients that
	 * always send Range get a 200, not a 416). */
	if (rr == -ERANGE && in->size == 0)
		rr = 0;
	if (rr < 0) {
		p->kind = DLPLAN_UNSATISFIABLE;
		p->status = 416;
		p->nh = 0;
		snprintf(p->crange, sizeof(p->crange), "bytes */%lld", (long long)in->size);
		plan_hdr(p, "content-range", p->crange);
		plan_hdr(p, "x-content-type-options", "nosniff");
		snprintf(p->msg, sizeof(p->msg), "invalid range: failed to overlap\n");
		return;
	}
	if (rr > 1) {
		int64_t sum = 0;
		for (int i = 0; i < rr; i++)
			sum += p->rg[i].len;
		/* Go serves the whole file when the parts add up to more. */
		if (sum <= in->size) {
			p->kind = DLPLAN_BYTERANGES;
			p->status = 206;
			p->nrg = (size_t)rr;
			return;
		}
		rr = 0;
	}
	p->kind = DLPLAN_BODY;
	p->status = 200;
	p->start = 0;
	p->len = in->size;
	if (rr == 1) {
		p->nrg = 1;
		p->start = p->rg[0].start;
		p->len = p->rg[0].len;
		p->status = 206;
		snprintf(p->crange, sizeof(p->crange), "bytes %lld-%lld/%lld", (long long)p->start,
			 (long long)(p->start + p->len - 1), (long long)in->size);
	}
}

/* The file's own bytes: a condition, then the ranges. */
static void plan_identity(const struct http_req *r, const struct dlplan_in *in, struct dlplan *p)
{
	bool range_ok = true;
	const char *ctype = p->ctype ? p->ctype : files_sniff(in->sniff, in->sniff_n);
	const char *version = in->version ? in->version : "";
	int cond = plan_conditions(r, in->mtime, version, &range_ok);

	if (in->mtime > 0)
		files_format_http_date(in->mtime, p->lastmod, sizeof(p->lastmod));
	if (version[0])
		snprintf(p->etag, sizeof(p->etag), "\"%s\"", version);
	if (cond) {
		/* Without Content-Disposition, as Go's ServeContent; a 304
		 * with an ETag drops Last-Modified, as Go's does. */
		p->kind = DLPLAN_EMPTY;
		p->status = cond;
		p->nh = 0;
		if (version[0])
			plan_hdr(p, "etag", p->etag);
		if (in->mtime > 0 && !(cond == 304 && version[0]))
			plan_hdr(p, "last-modified", p->lastmod);
		return;
	}
	p->ctype = ctype;
	plan_ranges(range_ok ? http_req_header(r, "range") : NULL, in, p);
	if (p->kind == DLPLAN_UNSATISFIABLE)
		return;
	if (in->mtime > 0)
		plan_hdr(p, "last-modified", p->lastmod);
	if (version[0])
		plan_hdr(p, "etag", p->etag);
	/* Byteranges: the part headers carry the type. */
	if (p->kind != DLPLAN_BYTERANGES)
		plan_hdr(p, "content-type", ctype);
	plan_hdr(p, "accept-ranges", "bytes");
	if (p->kind == DLPLAN_BODY && p->status == 206)
		plan_hdr(p, "content-range", p->crange);
}

void dlplan_make(const struct http_req *r, const struct dlplan_in *in, struct dlplan *p)
{
	char base[PATH_MAX];
	bool gzip = false;

	p->kind = DLPLAN_ERROR;
	p->status = 500;
	p->vary = false;
	p->msg[0] = '\0';
	p->nh = p->nrg = 0;
	p->start = p->len = 0;
	if (plan_path(in, p) || !plan_coding(r, in, p, &gzip))
		return;
	path_base(in->path, base, sizeof(base));
	files_content_disposition(base, p->disp, sizeof(p->disp));
	plan_hdr(p, "content-disposition", p->disp);
	p->ctype = files_mime_by_ext(in->qpath);
	if (gzip) {
		/* Read and compressed block by block on the worker pool. */
		p->kind = DLPLAN_GZIP;
		p->status = 200;
		plan_hdr(p, "content-encoding", "gzip");
		p->ctype = p->ctype ? p->ctype : "application/octet-stream";
		plan_hdr(p, "content-type", p->ctype);
		if (in->version && in->version[0]) {
			snprintf(p->etag, sizeof(p->etag), "W/\"%s\"", in->version);
			plan_hdr(p, "etag", p->etag);
		}
		return;
	}
	plan_identity(r, in, p);
}
