/* SPDX-License-Identifier: Apache-2.0 */
/*
 * multipart.c - streaming multipart parser.
 *
 * Delimiter search is Knuth-Morris-Pratt over "\r\n--boundary": bytes that
 * might start a delimiter are held back, and because they are always a
 * prefix of the delimiter they never need a buffer of their own — when a
 * match fails they are emitted from delim[] itself. Runs with no '\r' are
 * passed through with memchr and one callback, which keeps large uploads
 * at memory speed.
 */
#include "transfer/multipart.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static int mp_fail(struct mp_parser *p, const char *msg)
{
	snprintf(p->err, sizeof(p->err), "%s", msg);
	p->state = MP_ERROR;
	return -EBADMSG;
}

int mp_init(struct mp_parser *p, const char *boundary, const struct mp_callbacks *cb, void *ud)
{
	size_t bl = strlen(boundary);

	memset(p, 0, sizeof(*p));
	if (bl == 0 || bl > MP_BOUNDARY_MAX)
		return -EINVAL;
	memcpy(p->delim, "\r\n--", 4);
	memcpy(p->delim + 4, boundary, bl);
	p->dlen = bl + 4;
	/* fail[m]: length of the longest proper prefix of delim[0..m) that
	 * is also its suffix. */
	p->fail[0] = p->fail[1] = 0;
	for (size_t m = 2; m <= p->dlen; m++) {
		size_t k = p->fail[m - 1];
		while (k > 0 && p->delim[k] != p->delim[m - 1])
			k = p->fail[k];
		if (p->delim[k] == p->delim[m - 1])
			k++;
		p->fail[m] = (uint8_t)k;
	}
	p->cb = cb;
	p->ud = ud;
	p->state = MP_PREAMBLE;
	/* The first delimiter has no leading CRLF: pretend we saw one. */
	p->match = 2;
	return 0;
}

static int emit(struct mp_parser *p, const uint8_t *d, size_t n)
{
	if (p->state != MP_BODY || !n || !p->cb->on_part_data)
		return 0;
	return p->cb->on_part_data(p->ud, d, n);
}

/* Parse one complete header line (no CRLF) into p->part. */
static int header_line(struct mp_parser *p, char *line)
{
	char *colon = strchr(line, ':');
	bool trunc = false;

	if (!colon)
		return mp_fail(p, "multipart: malformed MIME header line");
	*colon = '\0';
	if (strcasecmp(line, "content-disposition") != 0)
		return 0;
	char *v = colon + 1;
	while (*v == ' ' || *v == '\t')
		v++;
	if (mp_header_param(v, "name", p->part.name, sizeof(p->part.name), &trunc) < 0)
		return 0; /* Go ignores an unparsable disposition: no name, no file */
	int r = mp_header_param(v, "filename", p->part.filename, sizeof(p->part.filename), &trunc);
	p->part.has_filename = r == 1;
	p->part.truncated = trunc;
	return 0;
}

static int part_begin(struct mp_parser *p)
{
	int rc = 0;

	p->in_part = true;
	p->n_parts++;
	p->state = MP_BODY;
	if (p->cb->on_part_begin)
		rc = p->cb->on_part_begin(p->ud, &p->part);
	return rc;
}

static int part_end(struct mp_parser *p)
{
	p->in_part = false;
	if (p->cb->on_part_end)
		return p->cb->on_part_end(p->ud);
	return 0;
}

/*
 * Advance the delimiter matcher over one byte c. Returns 1 when the
 * delimiter completed, 0 otherwise; emits (in body state) the bytes that
 * fell out of the held-back prefix.
 */
static int match_byte(struct mp_parser *p, uint8_t c, int *rc)
{
	size_t m = p->match;

	if (p->delim[m] == c) {
		p->match = m + 1;
		if (p->match == p->dlen) {
			p->match = 0;
			return 1;
		}
		return 0;
	}
	size_t k = m;
	while (k > 0 && p->delim[k] != c)
		k = p->fail[k];
	size_t nm = p->delim[k] == c ? k + 1 : 0;
	/* held (m bytes) + c = dropped + new held (nm bytes) */
	size_t dropped = m + 1 - nm;
	if (dropped <= m) {
		*rc = emit(p, p->delim, dropped);
	} else {
		*rc = emit(p, p->delim, m);
		if (!*rc)
			*rc = emit(p, &c, 1);
	}
	p->match = nm;
	return 0;
}

int mp_feed(struct mp_parser *p, const uint8_t *d, size_t n)
{
	size_t i = 0;
	int rc = 0;

	if (p->state == MP_ERROR)
		return -EBADMSG;
	while (i < n) {
		switch (p->state) {
		case MP_PREAMBLE:
		case MP_BODY:
			if (p->match == 0) {
				/* Skip over every '\r' that visibly does not start a
				 * delimiter, so data leaves in one run per chunk. */
				size_t start = i;
				for (;;) {
					const uint8_t *r = memchr(d + i, '\r', n - i);
					if (!r) {
						i = n;
						break;
					}
					i = (size_t)(r - d);
					if (n - i < p->dlen || memcmp(d + i, p->delim, p->dlen) == 0)
						break;
					i++;
				}
				if (i > start && (rc = emit(p, d + start, i - start)))
					return rc;
				if (i == n)
					break;
			}
			if (match_byte(p, d[i++], &rc)) {
				if (p->state == MP_BODY && (rc = part_end(p)))
					return rc;
				p->state = MP_AFTER_BOUNDARY;
			}
			if (rc)
				return rc;
			break;
		case MP_AFTER_BOUNDARY:
			if (d[i] == '-')
				p->state = MP_AFTER_BOUNDARY_DASH;
			else if (d[i] == '\r')
				p->state = MP_AFTER_BOUNDARY_CR;
			else if (d[i] != ' ' && d[i] != '\t')
				return mp_fail(p, "multipart: boundary not followed by CRLF");
			i++;
			break;
		case MP_AFTER_BOUNDARY_DASH:
			if (d[i] != '-')
				return mp_fail(p, "multipart: malformed closing boundary");
			i++;
			p->state = MP_EPILOGUE;
			break;
		case MP_AFTER_BOUNDARY_CR:
			if (d[i] != '\n')
				return mp_fail(p, "multipart: boundary not followed by CRLF");
			i++;
			memset(&p->part, 0, sizeof(p->part));
			p->hlen = p->hline = 0;
			p->state = MP_HEADERS;
			break;
		case MP_HEADERS: {
			uint8_t c = d[i++];
			if (p->hlen + 1 >= sizeof(p->hdr))
				return mp_fail(p, "multipart: message too large");
			p->hdr[p->hlen++] = (char)c;
			if (c != '\n')
				break;
			/* A complete line hdr[hline..hlen). */
			size_t ll = p->hlen - p->hline;
			char *line = p->hdr + p->hline;
			if (ll >= 2 && line[ll - 2] == '\r')
				ll -= 2;
			else
				ll -= 1;
			if (ll == 0) {
				p->match = 0;
				if ((rc = part_begin(p)))
					return rc;
				break;
			}
			line[ll] = '\0';
			if ((rc = header_line(p, line)))
				return rc;
			p->hline = p->hlen;
			break;
		}
		case MP_EPILOGUE:
			return 0;
		case MP_ERROR:
			return -EBADMSG;
		}
	}
	return 0;
}

int mp_finish(struct mp_parser *p)
{
	switch (p->state) {
	case MP_EPILOGUE:
		return 0;
	case MP_ERROR:
		return -EBADMSG;
	case MP_PREAMBLE:
		return mp_fail(p, "multipart: NextPart: EOF");
	default:
		return mp_fail(p, "multipart: NextPart: unexpected EOF");
	}
}

static bool is_tspecial(int c)
{
	return strchr("()<>@,;:\\\"/[]?=", c) != NULL;
}

static bool is_token_char(int c)
{
	return c > 0x20 && c < 0x7f && !is_tspecial(c);
}

static int hexv(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = tolower(c);
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

static void put(char *out, size_t outlen, size_t *k, char c, bool *trunc)
{
	if (*k + 1 < outlen)
		out[(*k)++] = c;
	else
		*trunc = true;
}

int mp_header_param(const char *v, const char *param, char *out, size_t outlen, bool *truncated)
{
	const char *s = v;
	int found = 0;
	bool star_found = false;

	/* Skip the media type / disposition type token. */
	while (*s && *s != ';')
		s++;
	while (*s == ';') {
		char key[128];
		size_t kl = 0, k = 0;
		bool ext;

		s++;
		while (*s == ' ' || *s == '\t')
			s++;
		if (!*s)
			break;
		while (is_token_char((unsigned char)*s) && *s != '=') {
			if (kl + 1 < sizeof(key))
				key[kl++] = (char)tolower((unsigned char)*s);
			s++;
		}
		key[kl] = '\0';
		while (*s == ' ' || *s == '\t')
			s++;
		if (!kl || *s != '=')
			return -EINVAL;
		s++;
		while (*s == ' ' || *s == '\t')
			s++;
		ext = kl > 1 && key[kl - 1] == '*';
		if (ext)
			key[kl - 1] = '\0';
		bool want = strcmp(key, param) == 0 && !(found && !ext) && !(star_found);
		char tmp[PATH_MAX];
		bool tr = false;
		if (*s == '"') {
			s++;
			while (*s && *s != '"') {
				if (*s == '\\' && s[1])
					s++;
				put(tmp, sizeof(tmp), &k, *s, &tr);
				s++;
			}
			if (*s != '"')
				return -EINVAL;
			s++;
		} else {
			while (*s && *s != ';' && *s != ' ' && *s != '\t')
				put(tmp, sizeof(tmp), &k, *s++, &tr);
			if (!k)
				return -EINVAL;
		}
		tmp[k] = '\0';
		while (*s == ' ' || *s == '\t')
			s++;
		if (*s && *s != ';')
			return -EINVAL;
		if (!want)
			continue;
		size_t o = 0;
		bool otr = tr;
		if (ext) {
			/* charset'language'percent-encoded; only utf-8/us-ascii */
			char *q1 = strchr(tmp, '\'');
			char *q2 = q1 ? strchr(q1 + 1, '\'') : NULL;
			if (!q2)
				continue;
			*q1 = '\0';
			if (strcasecmp(tmp, "utf-8") != 0 && strcasecmp(tmp, "us-ascii") != 0)
				continue;
			for (const char *c = q2 + 1; *c; c++) {
				if (*c == '%') {
					int h = hexv((unsigned char)c[1]), l = h >= 0 ? hexv((unsigned char)c[2]) : -1;
					if (h < 0 || l < 0)
						return -EINVAL;
					put(out, outlen, &o, (char)(h * 16 + l), &otr);
					c += 2;
				} else {
					put(out, outlen, &o, *c, &otr);
				}
			}
			star_found = true;
		} else {
			for (const char *c = tmp; *c; c++)
				put(out, outlen, &o, *c, &otr);
		}
		if (outlen)
			out[o] = '\0';
		if (otr && truncated)
			*truncated = true;
		found = 1;
	}
	if (*s)
		return -EINVAL;
	return found;
}

int mp_content_type_boundary(const char *ctype, char *out, size_t outlen)
{
	size_t tl = 0;
	bool trunc = false;

	while (ctype[tl] == ' ')
		ctype++;
	while (ctype[tl] && ctype[tl] != ';' && ctype[tl] != ' ')
		tl++;
	if (tl != strlen("multipart/form-data") || strncasecmp(ctype, "multipart/form-data", tl) != 0)
		return -EINVAL;
	int r = mp_header_param(ctype, "boundary", out, outlen, &trunc);
	if (r < 0)
		return -EINVAL;
	if (r == 0 || !out[0] || trunc || strlen(out) > MP_BOUNDARY_MAX)
		return 0;
	return 1;
}
