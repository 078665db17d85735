/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "multipart.h"

/* Collected parts: "name|filename|has|body" per part. */
struct sink {
	char out[8][4096];
	size_t len[8];
	int n;
	int begins, ends;
	int fail_on_data; /* return an error from the N-th data callback (1-based) */
	int data_calls;
};

static int on_begin(void *ud, const struct mp_part *p)
{
	struct sink *s = ud;
	cr_assert_lt(s->n, 8);
	s->len[s->n] = (size_t)snprintf(s->out[s->n], sizeof(s->out[0]), "%s|%s|%d|", p->name, p->filename,
					  p->has_filename);
	s->begins++;
	return 0;
}

static int on_data(void *ud, const uint8_t *d, size_t n)
{
	struct sink *s = ud;
	s->data_calls++;
	if (s->fail_on_data && s->data_calls == s->fail_on_data)
		return -EIO;
	cr_assert_lt(s->len[s->n] + n, sizeof(s->out[0]));
	memcpy(s->out[s->n] + s->len[s->n], d, n);
	s->len[s->n] += n;
	s->out[s->n][s->len[s->n]] = '\0';
	return 0;
}

static int on_end(void *ud)
{
	struct sink *s = ud;
	s->n++;
	s->ends++;
	return 0;
}

static const struct mp_callbacks cbs = { on_begin, on_data, on_end };

static const char body3[] =
	"preamble to ignore\r\n"
	"--XyZ\r\n"
	"Content-Disposition: form-data; name=\"file\"; filename=\"/0/multi file0.txt\"\r\n"
	"Content-Type: application/octet-stream\r\n"
	"\r\n"
	"hello\r\n--X not a boundary\r\r\n-\r\n--XyZ\r\n"
	"content-disposition: form-data; name=\"other\"\r\n"
	"\r\n"
	"\r\n"
	"--XyZ\r\n"
	"Content-Disposition: form-data; name=file; filename=rel/dir/b.bin\r\n"
	"\r\n"
	"--XyZ-ish data\r\n--XyZ--\r\n"
	"epilogue --XyZ\r\n";

static void check3(struct sink *s)
{
	cr_assert_eq(s->n, 3);
	cr_assert_str_eq(s->out[0], "file|/0/multi file0.txt|1|hello\r\n--X not a boundary\r\r\n-");
	cr_assert_str_eq(s->out[1], "other||0|");
	cr_assert_str_eq(s->out[2], "file|rel/dir/b.bin|1|--XyZ-ish data");
}

Test(multipart, whole_body)
{
	struct mp_parser p;
	struct sink s = { 0 };
	cr_assert_eq(mp_init(&p, "XyZ", &cbs, &s), 0);
	cr_assert_eq(mp_feed(&p, (const uint8_t *)body3, strlen(body3)), 0);
	cr_assert_eq(mp_finish(&p), 0);
	check3(&s);
}

Test(multipart, split_at_every_position)
{
	size_t n = strlen(body3);
	for (size_t cut = 0; cut <= n; cut++) {
		struct mp_parser p;
		struct sink s = { 0 };
		cr_assert_eq(mp_init(&p, "XyZ", &cbs, &s), 0);
		cr_assert_eq(mp_feed(&p, (const uint8_t *)body3, cut), 0, "cut %zu", cut);
		cr_assert_eq(mp_feed(&p, (const uint8_t *)body3 + cut, n - cut), 0, "cut %zu", cut);
		cr_assert_eq(mp_finish(&p), 0);
		check3(&s);
	}
}

Test(multipart, byte_by_byte)
{
	struct mp_parser p;
	struct sink s = { 0 };
	cr_assert_eq(mp_init(&p, "XyZ", &cbs, &s), 0);
	for (size_t i = 0; i < strlen(body3); i++)
		cr_assert_eq(mp_feed(&p, (const uint8_t *)body3 + i, 1), 0);
	cr_assert_eq(mp_finish(&p), 0);
	check3(&s);
}

/* Boundary with a self-overlapping prefix exercises the KMP fallback. */
Test(multipart, overlapping_boundary)
{
	static const char b[] = "--aab\r\n"
				"Content-Disposition: form-data; name=\"file\"; filename=\"x\"\r\n\r\n"
				"a\r\n--aa\r\n--aaa\r\n--aab";
	static const char tail[] = "--";
	char body[256];
	snprintf(body, sizeof(body), "%s%s", b, tail);
	for (size_t cut = 0; cut <= strlen(body); cut++) {
		struct mp_parser p;
		struct sink s = { 0 };
		cr_assert_eq(mp_init(&p, "aab", &cbs, &s), 0);
		cr_assert_eq(mp_feed(&p, (const uint8_t *)body, cut), 0);
		cr_assert_eq(mp_feed(&p, (const uint8_t *)body + cut, strlen(body) - cut), 0);
		cr_assert_eq(mp_finish(&p), 0);
		cr_assert_eq(s.n, 1);
		cr_assert_str_eq(s.out[0], "file|x|1|a\r\n--aa\r\n--aaa");
	}
}

Test(multipart, many_parts)
{
	size_t cap = 1 << 20, k = 0;
	char *body = malloc(cap);
	struct mp_parser p;
	int parts = 0;
	static struct sink s;
	struct mp_callbacks counting = { NULL, NULL, NULL };

	for (int i = 0; i < 5000; i++)
		k += (size_t)snprintf(body + k, cap - k,
				      "--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"f%d\"\r\n\r\n%d\r\n", i, i);
	k += (size_t)snprintf(body + k, cap - k, "--b--");
	memset(&s, 0, sizeof(s));
	cr_assert_eq(mp_init(&p, "b", &counting, &s), 0);
	cr_assert_eq(mp_feed(&p, (const uint8_t *)body, k), 0);
	cr_assert_eq(mp_finish(&p), 0);
	parts = (int)p.n_parts;
	cr_assert_eq(parts, 5000);
	free(body);
}

Test(multipart, malformed)
{
	struct mp_parser p;
	struct sink s = { 0 };
	static const char *bad[] = {
		"--b\r\nno colon header\r\n\r\nx\r\n--b--",
		"--bX\r\n",
		"--b-x",
	};
	for (size_t i = 0; i < 3; i++) {
		memset(&s, 0, sizeof(s));
		cr_assert_eq(mp_init(&p, "b", &cbs, &s), 0);
		cr_assert_eq(mp_feed(&p, (const uint8_t *)bad[i], strlen(bad[i])), -EBADMSG, "case %zu", i);
		cr_assert_eq(mp_feed(&p, (const uint8_t *)"x", 1), -EBADMSG);
	}
	/* Truncated: no closing delimiter. */
	memset(&s, 0, sizeof(s));
	mp_init(&p, "b", &cbs, &s);
	cr_assert_eq(mp_feed(&p, (const uint8_t *)"--b\r\n\r\npartial", 15), 0);
	cr_assert_eq(mp_finish(&p), -EBADMSG);
	cr_assert_str_eq(p.err, "multipart: NextPart: unexpected EOF");
	/* No boundary at all. */
	mp_init(&p, "b", &cbs, &s);
	cr_assert_eq(mp_feed(&p, (const uint8_t *)"just text", 9), 0);
	cr_assert_eq(mp_finish(&p), -EBADMSG);
	cr_assert_str_eq(p.err, "multipart: NextPart: EOF");
	/* Oversized headers. */
	char *big = malloc(MP_HEADER_MAX + 100);
	memcpy(big, "--b\r\nX: ", 8);
	memset(big + 8, 'a', MP_HEADER_MAX + 50);
	mp_init(&p, "b", &cbs, &s);
	cr_assert_eq(mp_feed(&p, (const uint8_t *)big, MP_HEADER_MAX + 58), -EBADMSG);
	free(big);
	/* Bad boundaries. */
	cr_assert_eq(mp_init(&p, "", &cbs, &s), -EINVAL);
	char longb[80];
	memset(longb, 'q', 79);
	longb[79] = '\0';
	cr_assert_eq(mp_init(&p, longb, &cbs, &s), -EINVAL);
}

Test(multipart, callback_error_stops)
{
	struct mp_parser p;
	struct sink s = { 0 };
	s.fail_on_data = 1;
	mp_init(&p, "XyZ", &cbs, &s);
	cr_assert_eq(mp_feed(&p, (const uint8_t *)body3, strlen(body3)), -EIO);
}

Test(multipart, header_params)
{
	char out[256];
	bool tr = false;
	cr_assert_eq(mp_header_param("form-data; name=\"file\"; filename=\"a\\\"b.txt\"", "filename", out,
				     sizeof(out), &tr), 1);
	cr_assert_str_eq(out, "a\"b.txt");
	cr_assert_eq(mp_header_param("form-data; name=file", "filename", out, sizeof(out), &tr), 0);
	cr_assert_eq(mp_header_param("form-data; NAME=file", "name", out, sizeof(out), &tr), 1);
	cr_assert_str_eq(out, "file");
	cr_assert_eq(mp_header_param("form-data; filename*=UTF-8''%E6%96%87.txt; filename=\"x\"", "filename",
				     out, sizeof(out), &tr), 1);
	cr_assert_str_eq(out, "\xe6\x96\x87.txt");
	cr_assert_eq(mp_header_param("form-data; name=\"unterminated", "name", out, sizeof(out), &tr), -1);
	cr_assert_eq(mp_header_param("form-data; filename=\"0123456789\"", "filename", out, 5, &tr), 1);
	cr_assert(tr);
	cr_assert_str_eq(out, "0123");

	cr_assert_eq(mp_content_type_boundary("multipart/form-data; boundary=----abc", out, sizeof(out)), 1);
	cr_assert_str_eq(out, "----abc");
	cr_assert_eq(mp_content_type_boundary("Multipart/Form-Data; boundary=\"q q\"", out, sizeof(out)), 1);
	cr_assert_str_eq(out, "q q");
	cr_assert_eq(mp_content_type_boundary("multipart/form-data", out, sizeof(out)), 0);
	cr_assert_eq(mp_content_type_boundary("multipart/mixed; boundary=x", out, sizeof(out)), -1);
}
