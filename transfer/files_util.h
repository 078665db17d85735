/* SPDX-License-Identifier: Apache-2.0 */
/*
 * files_util.h - the protocol pieces of /files that need no I/O: URL
 * signatures, Accept-Encoding negotiation (docs/protocol.md, "Files HTTP
 * API"), Content-Disposition formatting, MIME types by extension, content
 * sniffing, Range and HTTP-date parsing.
 *
 * Errors: negative errno values (-ERANGE, -EINVAL) where a call can fail.
 */
#ifndef TRANSFER_FILES_UTIL_H
#define TRANSFER_FILES_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

/* "v1_" + unpadded base64(SHA-256(path:op:user:token[:exp])); exp < 0 = none. out >= 48. */
void files_signature(const char *path, const char *op, const char *user, const char *token, size_t toklen,
		     int64_t exp, char *out, size_t outlen);

/* Constant-time string equality (length leaks, content does not). */
bool files_const_eq(const char *a, const char *b);

enum files_encoding { FILES_ENC_IDENTITY = 0, FILES_ENC_GZIP = 1, FILES_ENC_NONE = -1 };

/*
 * Negotiate the response coding from an Accept-Encoding value (NULL ok).
 * Returns FILES_ENC_IDENTITY, FILES_ENC_GZIP or FILES_ENC_NONE (406).
 * *identity_rejected tells whether identity was excluded (Range rule).
 */
enum files_encoding files_negotiate(const char *accept, bool *identity_rejected);

/* `inline; filename=...` per Go mime.FormatMediaType. */
void files_content_disposition(const char *name, char *out, size_t outlen);

/*
 * MIME type for the extension of `path` (Go's built-in table, then
 * /etc/mime.types; text types get "; charset=utf-8"), or NULL if unknown.
 */
const char *files_mime_by_ext(const char *path);
/* Where the extra table is read from (tests point it elsewhere). */
extern const char *files_mime_types_path;

/* WHATWG-style sniffing of the first bytes of a file (Go DetectContentType subset). */
const char *files_sniff(const uint8_t *p, size_t n);

/*
 * Parse a Range header against `size`. Returns 1 with [*start,*len) for
 * a single satisfiable range; 0 when the header should be ignored (absent,
 * not bytes=, or several ranges, which we serve as a full 200); -ERANGE
 * when unsatisfiable (416); -EINVAL when malformed (Go answers 416 too).
 */
int files_parse_range(const char *hdr, int64_t size, int64_t *start, int64_t *len);

struct files_range {
	int64_t start, len;
};

/*
 * All ranges of a Range header that overlap [0, size), clipped. Returns
 * their number (1..max); 0 when the header should be ignored (absent, or
 * more than max ranges); -ERANGE when none is satisfiable (416); -EINVAL
 * when malformed (416 too).
 */
int files_parse_ranges(const char *hdr, int64_t size, struct files_range *out, size_t max);

/* Parse an HTTP date (IMF-fixdate, RFC 850, asctime). -1 if invalid. */
time_t files_parse_http_date(const char *s);
/* IMF-fixdate of t into buf (>= 30 bytes). */
void files_format_http_date(time_t t, char *buf, size_t len);

/* The longest If-Match / If-None-Match an upload takes (400 beyond). */
#define FILES_COND_MAX 1024

/*
 * Whether an If-Match, If-None-Match or If-Range field value (a
 * comma-separated list of entity tags, `"x"` or `W/"x"`) names the tag
 * of `version`. Strong comparison (If-Match, If-Range): a weak tag never
 * matches; weak (If-None-Match): the W/ is ignored. `*` is the caller's
 * to look at; an empty version never matches, nor does a malformed list.
 */
bool files_etag_listed(const char *field, const char *version, bool weak);

/*
 * The preconditions of a write (RFC 9110 13.2.2, for POST /files) against
 * the target's state: `if_match` and `if_none_match` are the field values
 * (NULL when absent), `exists` and `version` the target's ("" for no
 * version). Returns 0 when the write may go on, 412 when not, with the
 * reason in msg.
 */
int files_write_preconditions(const char *if_match, const char *if_none_match, bool exists, const char *version,
			      const char *path, char *msg, size_t msglen);

#endif
