/* SPDX-License-Identifier: Apache-2.0 */
/*
 * multipart.h - incremental multipart/form-data parser (RFC 7578/2046).
 *
 * It does no I/O and never buffers part bodies: bytes go in through
 * mp_feed() in chunks of any size (a boundary may be split anywhere), and
 * come out through callbacks as soon as they are known not to belong to a
 * delimiter. Only part headers are buffered, up to MP_HEADER_MAX bytes.
 *
 * Errors: 0 or a negative errno: -EBADMSG for a malformed body, -EINVAL for
 * a malformed parameter; a callback's negative value is passed through.
 */
#ifndef TRANSFER_MULTIPART_H
#define TRANSFER_MULTIPART_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MP_BOUNDARY_MAX 70   /* RFC 2046 */
#define MP_HEADER_MAX 16384  /* all header lines of one part */

struct mp_part {
	char name[256];           /* form field name ("" if absent) */
	char filename[PATH_MAX];  /* filename parameter, as sent */
	bool has_filename;
	bool truncated;           /* name or filename did not fit */
};

/* Callbacks return 0 to go on, or a negative value to stop the parser
 * (mp_feed then returns that value). */
struct mp_callbacks {
	int (*on_part_begin)(void *ud, const struct mp_part *part);
	int (*on_part_data)(void *ud, const uint8_t *p, size_t n);
	int (*on_part_end)(void *ud);
};

enum mp_state {
	MP_PREAMBLE,
	MP_AFTER_BOUNDARY,
	MP_AFTER_BOUNDARY_DASH,
	MP_AFTER_BOUNDARY_CR,
	MP_HEADERS,
	MP_BODY,
	MP_EPILOGUE,
	MP_ERROR,
};

struct mp_parser {
	enum mp_state state;
	uint8_t delim[MP_BOUNDARY_MAX + 4]; /* "\r\n--" boundary */
	size_t dlen;
	uint8_t fail[MP_BOUNDARY_MAX + 5];  /* KMP failure function of delim */
	size_t match;                       /* delim bytes matched so far */
	char hdr[MP_HEADER_MAX];
	size_t hlen;                        /* bytes in hdr (current line start at hline) */
	size_t hline;
	struct mp_part part;
	bool in_part;
	size_t n_parts;
	const struct mp_callbacks *cb;
	void *ud;
	char err[128];
};

/* Returns 0, or -EINVAL for an empty or over-long boundary. */
int mp_init(struct mp_parser *p, const char *boundary, const struct mp_callbacks *cb, void *ud);

/*
 * Feed body bytes. Returns 0; -EBADMSG for malformed input (message in
 * p->err); or the negative value a callback returned. After an error the
 * parser stays failed.
 */
int mp_feed(struct mp_parser *p, const uint8_t *data, size_t n);

/* The body ended. 0 if the closing delimiter was seen, else -EBADMSG. */
int mp_finish(struct mp_parser *p);

/*
 * Parse a Content-Disposition (or any media-type-with-parameters) value
 * and copy parameter `param` (lower-case), decoding quoted strings and
 * RFC 2231 `param*=charset''pct` forms. Returns 1 if found, 0 if not,
 * -EINVAL if the value is malformed. Truncates to outlen-1 (sets *truncated).
 */
int mp_header_param(const char *value, const char *param, char *out, size_t outlen, bool *truncated);

/*
 * Boundary parameter of a multipart Content-Type. Returns 1 and copies it
 * when the media type is multipart/form-data with a usable boundary; 0 if
 * it is multipart/form-data without one; -EINVAL if it is not form-data.
 */
int mp_content_type_boundary(const char *ctype, char *out, size_t outlen);

#endif
