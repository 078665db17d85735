/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dlplan.h - what GET /files answers, decided from what the open of the
 * path found and what the request asks (docs/protocol.md, "Files HTTP
 * API"; ranges and conditions as Go's http.ServeContent, with the file's
 * version as its ETag: strong on the file's own bytes, weak on a gzip
 * body, whose bytes vary with the compression level). No I/O: the
 * worker job has looked at the file, files_get.c carries the plan out.
 *
 * The outcomes, in the order they are tried:
 *   - the path could not be looked at: 404 (it does not exist) or 500;
 *   - ?archive= of a directory: handed on to the archive writer; of
 *     anything else: 400;
 *   - a directory: 400;
 *   - no acceptable coding: 406; identity refused for a range or a
 *     conditional request: 406;
 *   - the file could not be opened: 500;
 *   - gzip, where it is offered and wins (or always, -gzip-always):
 *     handed on to the gzip sender;
 *   - a condition that holds: 304 or 412, no body;
 *   - a range that overlaps nothing: 416;
 *   - several ranges: 206 multipart/byteranges;
 *   - one range: 206; else the whole file: 200.
 *
 * Errors: none; an error is one of the outcomes.
 */
#ifndef TRANSFER_DLPLAN_H
#define TRANSFER_DLPLAN_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "http/http.h"
#include "transfer/files_common.h"
#include "transfer/files_util.h"

#define DLPLAN_MAX_RANGES 32
#define DLPLAN_MAX_HDRS 8

/* What is known before answering. */
struct dlplan_in {
	const char *path;       /* resolved: for messages and the file name */
	const char *qpath;      /* as the client wrote it: the type by extension */
	bool archive;           /* ?archive= was given */
	int err;                /* errno of the failed stat or open, 0 if none */
	bool err_open;          /* ... which was the open(), the path exists */
	mode_t mode;
	time_t mtime;           /* seconds; <= 0: unknown */
	const char *version;    /* a regular file's (fs/entry.h), the ETag; NULL or "": none */
	int64_t size;
	const uint8_t *sniff;   /* the first bytes, when the name gives no type */
	size_t sniff_n;
	bool gzip_always;       /* -gzip-always */
	bool gzip_wins;         /* the link and the file's sample favour gzip */
};

enum dlplan_kind {
	DLPLAN_ERROR,         /* an envd JSON error: status, msg */
	DLPLAN_ARCHIVE,       /* the directory as an archive (files_archive_get) */
	DLPLAN_GZIP,          /* 200 with h[], a gzip body (gzsend_start) */
	DLPLAN_EMPTY,         /* status (304, 412) with h[], no body */
	DLPLAN_UNSATISFIABLE, /* 416 with h[], msg as a text body */
	DLPLAN_BYTERANGES,    /* 206 multipart/byteranges of rg[], each part of type ctype; h[] without a type */
	DLPLAN_BODY,          /* status (200, 206) with h[], bytes [start, start + len) */
};

struct dlplan {
	enum dlplan_kind kind;
	int status;
	bool vary;              /* the response carries Vary: Accept-Encoding */
	char msg[FILES_MSGLEN];
	/* Headers; the strings are literals or the buffers below. */
	struct http_hdr h[DLPLAN_MAX_HDRS];
	size_t nh;
	const char *ctype;      /* the body's type (BYTERANGES: each part's) */
	struct files_range rg[DLPLAN_MAX_RANGES];
	size_t nrg;
	int64_t start, len;
	char disp[PATH_MAX * 3 + 64];
	char lastmod[40];
	char etag[48];
	char crange[96];
};

/*
 * Decide the answer to GET request r (its headers only are read) from
 * what `in` holds, into *out (which must not move while its headers are
 * used).
 */
void dlplan_make(const struct http_req *r, const struct dlplan_in *in, struct dlplan *out);

#endif
