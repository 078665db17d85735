/* SPDX-License-Identifier: Apache-2.0 */
/*
 * files_util.c - pure helpers for /files.
 */
#include "transfer/files_util.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/base64.h"
#include "base/buf.h"
#include "base/sha2.h"

void files_signature(const char *path, const char *op, const char *user, const char *token, size_t toklen,
		     int64_t exp, char *out, size_t outlen)
{
	struct sha256_ctx c;
	uint8_t d[SHA256_DIGEST_LEN];
	char b64[64], num[24];

	sha256_init(&c);
	sha256_update(&c, path, strlen(path));
	sha256_update(&c, ":", 1);
	sha256_update(&c, op, strlen(op));
	sha256_update(&c, ":", 1);
	sha256_update(&c, user, strlen(user));
	sha256_update(&c, ":", 1);
	sha256_update(&c, token, toklen);
	if (exp >= 0) {
		int k = snprintf(num, sizeof(num), ":%lld", (long long)exp);
		sha256_update(&c, num, (size_t)k);
	}
	sha256_final(&c, d);
	base64_encode_unpadded(b64, d, sizeof(d));
	snprintf(out, outlen, "v1_%s", b64);
}

bool files_const_eq(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	unsigned char diff = la != lb;

	for (size_t i = 0; i < la && i < lb; i++)
		diff |= (unsigned char)(a[i] ^ b[i]);
	return diff == 0;
}

struct enc_entry {
	char name[32];
	double q;
};

enum files_encoding files_negotiate(const char *accept, bool *identity_rejected)
{
	struct enc_entry e[32];
	size_t n = 0;
	bool rejected = false, identity_q0 = false, identity_pos = false, star_q0 = false;

	*identity_rejected = false;
	if (!accept || !*accept)
		return FILES_ENC_IDENTITY;
	for (const char *s = accept; *s && n < 32;) {
		const char *end = strchr(s, ',');
		size_t len = end ? (size_t)(end - s) : strlen(s);
		char part[256];
		if (len >= sizeof(part))
			len = sizeof(part) - 1;
		memcpy(part, s, len);
		part[len] = '\0';
		s = end ? end + 1 : s + strlen(s);
		/* trim */
		char *a = part, *z = part + strlen(part);
		while (*a == ' ' || *a == '\t')
			a++;
		while (z > a && (z[-1] == ' ' || z[-1] == '\t'))
			*--z = '\0';
		if (!*a)
			continue;
		double q = 1.0;
		char *semi = strchr(a, ';');
		if (semi) {
			*semi = '\0';
			for (char *prm = semi + 1; prm && *prm;) {
				char *next = strchr(prm, ';');
				if (next)
					*next++ = '\0';
				while (*prm == ' ' || *prm == '\t')
					prm++;
				if (strncasecmp(prm, "q=", 2) == 0) {
					char *ep;
					double v = strtod(prm + 2, &ep);
					while (*ep == ' ' || *ep == '\t')
						ep++;
					if (ep != prm + 2 && !*ep)
						q = v;
				}
				prm = next;
			}
			z = a + strlen(a);
			while (z > a && (z[-1] == ' ' || z[-1] == '\t'))
				*--z = '\0';
		}
		size_t nl = strlen(a);
		if (nl >= sizeof(e[n].name))
			nl = sizeof(e[n].name) - 1;
		memcpy(e[n].name, a, nl);
		e[n].name[nl] = '\0';
		for (char *c = e[n].name; *c; c++)
			*c = (char)tolower((unsigned char)*c);
		e[n].q = q;
		if (!strcmp(e[n].name, "identity")) {
			if (q == 0)
				identity_q0 = true;
			else
				identity_pos = true;
		}
		if (!strcmp(e[n].name, "*") && q == 0)
			star_q0 = true;
		n++;
	}
	rejected = identity_q0 || (star_q0 && !identity_pos);
	*identity_rejected = rejected;
	/* Stable sort by descending q (insertion sort keeps equal order). */
	for (size_t i = 1; i < n; i++) {
		struct enc_entry t = e[i];
		size_t j = i;
		while (j > 0 && e[j - 1].q < t.q) {
			e[j] = e[j - 1];
			j--;
		}
		e[j] = t;
	}
	for (size_t i = 0; i < n; i++) {
		if (e[i].q == 0)
			continue;
		if (!strcmp(e[i].name, "identity"))
			return FILES_ENC_IDENTITY;
		if (!strcmp(e[i].name, "*"))
			return rejected ? FILES_ENC_GZIP : FILES_ENC_IDENTITY;
		if (!strcmp(e[i].name, "gzip"))
			return FILES_ENC_GZIP;
	}
	return rejected ? FILES_ENC_NONE : FILES_ENC_IDENTITY;
}

static bool is_tspecial(int c)
{
	return strchr("()<>@,;:\\\"/[]?=", c) != NULL;
}

void files_content_disposition(const char *name, char *out, size_t outlen)
{
	const unsigned char *s = (const unsigned char *)name;
	bool token = *s != '\0', printable = true;
	size_t k;

	for (const unsigned char *c = s; *c; c++) {
		if (*c <= 0x20 || *c >= 0x7f || is_tspecial(*c))
			token = false;
		if ((*c < 0x20 && *c != '\t') || *c >= 0x7f)
			printable = false;
	}
	if (token) {
		snprintf(out, outlen, "inline; filename=%s", name);
		return;
	}
	if (printable) {
		k = (size_t)snprintf(out, outlen, "inline; filename=\"");
		for (const unsigned char *c = s; *c && k + 4 < outlen; c++) {
			if (*c == '"' || *c == '\\')
				out[k++] = '\\';
			out[k++] = (char)*c;
		}
		if (k + 2 <= outlen) {
			out[k++] = '"';
			out[k] = '\0';
		}
		return;
	}
	k = (size_t)snprintf(out, outlen, "inline; filename*=utf-8''");
	for (const unsigned char *c = s; *c && k + 4 < outlen; c++) {
		if (*c <= 0x20 || *c >= 0x7f || *c == '*' || *c == '\'' || *c == '%' || is_tspecial(*c))
			k += (size_t)snprintf(out + k, outlen - k, "%%%02X", *c);
		else
			out[k++] = (char)*c;
	}
	out[k < outlen ? k : outlen - 1] = '\0';
}

/* --- MIME types --- */

const char *files_mime_types_path = "/etc/mime.types";

struct mime_ent {
	char *ext;  /* with the dot, lower-case */
	char *type;
	size_t line; /* its order in the file: the first of an extension wins */
};

static const struct {
	const char *ext, *type;
} mime_builtin[] = {
	{ ".avif", "image/avif" },
	{ ".css", "text/css; charset=utf-8" },
	{ ".gif", "image/gif" },
	{ ".htm", "text/html; charset=utf-8" },
	{ ".html", "text/html; charset=utf-8" },
	{ ".jpeg", "image/jpeg" },
	{ ".jpg", "image/jpeg" },
	{ ".js", "text/javascript; charset=utf-8" },
	{ ".json", "application/json" },
	{ ".mjs", "text/javascript; charset=utf-8" },
	{ ".pdf", "application/pdf" },
	{ ".png", "image/png" },
	{ ".svg", "image/svg+xml" },
	{ ".wasm", "application/wasm" },
	{ ".webp", "image/webp" },
	{ ".xml", "text/xml; charset=utf-8" },
};

static struct mime_ent *mime_extra;
static size_t mime_n;
static pthread_once_t mime_once = PTHREAD_ONCE_INIT;

/* By extension, then by the order in the file. */
static int mime_order(const void *a, const void *b)
{
	const struct mime_ent *x = a, *y = b;
	int c = strcmp(x->ext, y->ext);

	return c ? c : (x->line > y->line) - (x->line < y->line);
}

/* Load /etc/mime.types once (small; read at first use). Go lets the
 * built-in table win for its own extensions. */
static void mime_load(void)
{
	FILE *f = fopen(files_mime_types_path, "re");
	char line[1024];
	struct buf b = BUF_INIT(BUF_UNBOUNDED); /* struct mime_ent, kept for good */

	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *save = NULL, *type, *ext;
		if (line[0] == '#')
			continue;
		type = strtok_r(line, " \t\r\n", &save);
		if (!type || !strchr(type, '/'))
			continue;
		while ((ext = strtok_r(NULL, " \t\r\n", &save))) {
			char typ[256];
			if (strncmp(type, "text/", 5) == 0 && !strstr(type, "charset"))
				snprintf(typ, sizeof(typ), "%s; charset=utf-8", type);
			else
				snprintf(typ, sizeof(typ), "%s", type);
			size_t el = strlen(ext);
			char *e = malloc(el + 2);
			char *t = strdup(typ);
			struct mime_ent me = { e, t, b.len / sizeof(struct mime_ent) };
			if (!e || !t) {
				free(e);
				free(t);
				goto out;
			}
			e[0] = '.';
			for (size_t i = 0; i <= el; i++)
				e[i + 1] = (char)tolower((unsigned char)ext[i]);
			if (buf_append(&b, &me, sizeof(me)) < 0) {
				free(e);
				free(t);
				goto out;
			}
		}
	}
out:
	fclose(f);
	/* What was read before a failure is kept, as a partial table, sorted
	 * for bsearch (a linear scan of Debian's two thousand extensions was
	 * most of a small download's cost), one entry per extension: the
	 * first the file gave. */
	mime_extra = (struct mime_ent *)b.p;
	mime_n = b.len / sizeof(struct mime_ent);
	if (mime_n)
		qsort(mime_extra, mime_n, sizeof(*mime_extra), mime_order);
	size_t k = 0;
	for (size_t i = 0; i < mime_n; i++) {
		if (k && !strcmp(mime_extra[k - 1].ext, mime_extra[i].ext)) {
			free(mime_extra[i].ext);
			free(mime_extra[i].type);
			continue;
		}
		mime_extra[k++] = mime_extra[i];
	}
	mime_n = k;
}

static int mime_by_ext_cmp(const void *key, const void *ent)
{
	return strcmp(key, ((const struct mime_ent *)ent)->ext);
}

const char *files_mime_by_ext(const char *path)
{
	const char *slash = strrchr(path, '/');
	const char *base = slash ? slash + 1 : path;
	const char *dot = strrchr(base, '.');
	char ext[64];

	if (!dot || strlen(dot) >= sizeof(ext))
		return NULL;
	for (size_t i = 0; i <= strlen(dot); i++)
		ext[i] = (char)tolower((unsigned char)dot[i]);
	for (size_t i = 0; i < sizeof(mime_builtin) / sizeof(mime_builtin[0]); i++)
		if (!strcmp(mime_builtin[i].ext, ext))
			return mime_builtin[i].type;
	pthread_once(&mime_once, mime_load);
	/* Go's TypeByExtension tries the exact case, then lower case; the
	 * table holds lower-case extensions, which only the second can meet. */
	const struct mime_ent *m = mime_n ? bsearch(ext, mime_extra, mime_n, sizeof(*mime_extra), mime_by_ext_cmp) : NULL;
	return m ? m->type : NULL;
}

const char *files_sniff(const uint8_t *p, size_t n)
{
	static const struct {
		const char *sig;
		size_t len;
		const char *type;
	} magic[] = {
		{ "%PDF-", 5, "application/pdf" },
		{ "\x89PNG\r\n\x1a\n", 8, "image/png" },
		{ "\xff\xd8\xff", 3, "image/jpeg" },
		{ "GIF87a", 6, "image/gif" },
		{ "GIF89a", 6, "image/gif" },
		{ "\x1f\x8b\x08", 3, "application/x-gzip" },
		{ "PK\x03\x04", 4, "application/zip" },
		{ "\x00\x61\x73\x6d", 4, "application/wasm" },
	};

	if (n > 512)
		n = 512;
	if (n == 0)
		return "text/plain; charset=utf-8";
	for (size_t i = 0; i < sizeof(magic) / sizeof(magic[0]); i++)
		if (n >= magic[i].len && memcmp(p, magic[i].sig, magic[i].len) == 0)
			return magic[i].type;
	/* UTF BOMs */
	if (n >= 3 && !memcmp(p, "\xef\xbb\xbf", 3))
		return "text/plain; charset=utf-8";
	if (n >= 2 && (!memcmp(p, "\xfe\xff", 2) || !memcmp(p, "\xff\xfe", 2)))
		return "text/plain; charset=utf-16";
	size_t i = 0;
	while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r' || p[i] == '\f'))
		i++;
	if (n - i >= 5 && (!strncasecmp((const char *)p + i, "<html", 5) || !strncasecmp((const char *)p + i, "<!doc", 5)))
		return "text/html; charset=utf-8";
	if (n - i >= 5 && !memcmp(p + i, "<?xml", 5))
		return "text/xml; charset=utf-8";
	for (size_t j = 0; j < n; j++) {
		uint8_t c = p[j];
		if (c <= 0x08 || c == 0x0b || (c >= 0x0e && c <= 0x1a) || (c >= 0x1c && c <= 0x1f))
			return "application/octet-stream";
	}
	return "text/plain; charset=utf-8";
}

int files_parse_ranges(const char *hdr, int64_t size, struct files_range *out, size_t max)
{
	const char *s;
	size_t count = 0;

	if (!hdr || !*hdr)
		return 0;
	if (strncmp(hdr, "bytes=", 6) != 0)
		return -EINVAL;
	s = hdr + 6;
	while (*s) {
		char spec[64];
		const char *end = strchr(s, ',');
		size_t l = end ? (size_t)(end - s) : strlen(s);
		if (l >= sizeof(spec))
			return -EINVAL;
		memcpy(spec, s, l);
		spec[l] = '\0';
		s = end ? end + 1 : s + l;
		char *a = spec, *z = spec + strlen(spec);
		while (*a == ' ' || *a == '\t')
			a++;
		while (z > a && (z[-1] == ' ' || z[-1] == '\t'))
			*--z = '\0';
		if (!*a)
			continue;
		char *dash = strchr(a, '-');
		if (!dash)
			return -EINVAL;
		*dash = '\0';
		char *b = dash + 1, *ep;
		int64_t st, ln;
		if (!*a) {
			/* suffix range: the last N bytes */
			if (!*b)
				return -EINVAL;
			errno = 0;
			long long nlast = strtoll(b, &ep, 10);
			if (*ep || errno || nlast < 0)
				return -EINVAL;
			if (nlast > size)
				nlast = size;
			st = size - nlast;
			ln = nlast;
			if (nlast == 0)
				continue; /* unsatisfiable on its own */
		} else {
			errno = 0;
			long long i = strtoll(a, &ep, 10);
			if (*ep || errno || i < 0)
				return -EINVAL;
			if (i >= size)
				continue; /* this one does not overlap */
			st = i;
			if (!*b) {
				ln = size - st;
			} else {
				long long j = strtoll(b, &ep, 10);
				if (*ep || errno || j < i)
					return -EINVAL;
				if (j >= size)
					j = size - 1;
				ln = j - i + 1;
			}
		}
		if (count < max) {
			out[count].start = st;
			out[count].len = ln;
		}
		count++;
	}
	if (!count)
		return -ERANGE;
	if (count > max)
		return 0; /* too many to bother: serve the whole file */
	return (int)count;
}

int files_parse_range(const char *hdr, int64_t size, int64_t *start, int64_t *len)
{
	struct files_range r[2];
	int n = files_parse_ranges(hdr, size, r, 2);

	if (n == 1) {
		*start = r[0].start;
		*len = r[0].len;
		return 1;
	}
	return n > 1 ? 0 : n;
}

static const char *const wdays[] = { "Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat" };
static const char *const months[] = { "Jan", "Feb", "Mar", "Apr", "May", "Jun",
				      "Jul", "Aug", "Sep", "Oct", "Nov", "Dec" };

void files_format_http_date(time_t t, char *buf, size_t len)
{
	struct tm tm;
	gmtime_r(&t, &tm);
	snprintf(buf, len, "%s, %02d %s %04d %02d:%02d:%02d GMT", wdays[tm.tm_wday], tm.tm_mday,
		 months[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

time_t files_parse_http_date(const char *s)
{
	struct tm tm;
	const char *fmts[] = { "%a, %d %b %Y %H:%M:%S GMT", "%A, %d-%b-%y %H:%M:%S GMT", "%a %b %e %H:%M:%S %Y" };

	for (size_t i = 0; i < 3; i++) {
		memset(&tm, 0, sizeof(tm));
		const char *end = strptime(s, fmts[i], &tm);
		if (end && *end == '\0')
			return timegm(&tm);
	}
	return -1;
}

/* --- entity tags --- */

bool files_etag_listed(const char *field, const char *version, bool weak)
{
	size_t vlen = strlen(version);
	const char *p = field;

	if (!vlen)
		return false;
	for (;;) {
		bool is_weak = false;
		const char *q;

		while (*p == ' ' || *p == '\t' || *p == ',')
			p++;
		if (!*p)
			return false;
		if (p[0] == 'W' && p[1] == '/') {
			is_weak = true;
			p += 2;
		}
		if (*p != '"')
			return false; /* malformed: nothing matches */
		q = strchr(p + 1, '"');
		if (!q)
			return false;
		if ((weak || !is_weak) && (size_t)(q - p - 1) == vlen && memcmp(p + 1, version, vlen) == 0)
			return true;
		p = q + 1;
	}
}

int files_write_preconditions(const char *if_match, const char *if_none_match, bool exists, const char *version,
			      const char *path, char *msg, size_t msglen)
{
	if (if_match) {
		if (!exists) {
			snprintf(msg, msglen, "precondition failed: %s does not exist (If-Match: %s)", path, if_match);
			return 412;
		}
		if (strcmp(if_match, "*") != 0 && !files_etag_listed(if_match, version, false)) {
			snprintf(msg, msglen, "precondition failed: %s is at version \"%s\" (If-Match: %s)", path, version,
				 if_match);
			return 412;
		}
	}
	if (if_none_match && exists) {
		if (strcmp(if_none_match, "*") == 0) {
			snprintf(msg, msglen, "precondition failed: %s exists (If-None-Match: *)", path);
			return 412;
		}
		if (files_etag_listed(if_none_match, version, true)) {
			snprintf(msg, msglen, "precondition failed: %s is at version \"%s\" (If-None-Match: %s)", path,
				 version, if_none_match);
			return 412;
		}
	}
	return 0;
}
