/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transfer/multipart.h"

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
	cr_assert_eq(mp_header_param("form-data; name=\"unterminated", "name", out, sizeof(out), &tr), -EINVAL);
	cr_assert_eq(mp_header_param("form-data; filename=\"0123456789\"", "filename", out, 5, &tr), 1);
	cr_assert(tr);
	cr_assert_str_eq(out, "0123");

	cr_assert_eq(mp_content_type_boundary("multipart/form-data; boundary=----abc", out, sizeof(out)), 1);
	cr_assert_str_eq(out, "----abc");
	cr_assert_eq(mp_content_type_boundary("Multipart/Form-Data; boundary=\"q q\"", out, sizeof(out)), 1);
	cr_assert_str_eq(out, "q q");
	cr_assert_eq(mp_content_type_boundary("multipart/form-data", out, sizeof(out)), 0);
	cr_assert_eq(mp_content_type_boundary("multipart/mixed; boundary=x", out, sizeof(out)), -EINVAL);
}

/* Random bodies full of CR, LF and boundary look-alikes, fed in random
 * chunk sizes, must come out byte-exact. */
struct collect {
	uint8_t *buf[6];
	size_t len[6];
	int n;
};

static int c_begin(void *ud, const struct mp_part *p)
{
	struct collect *c = ud;
	c->buf[c->n] = malloc(1 << 16);
	c->len[c->n] = 0;
	return 0;
}

static int c_data(void *ud, const uint8_t *d, size_t n)
{
	struct collect *c = ud;
	cr_assert_leq(c->len[c->n] + n, 1 << 16);
	memcpy(c->buf[c->n] + c->len[c->n], d, n);
	c->len[c->n] += n;
	return 0;
}

static int c_end(void *ud)
{
	struct collect *c = ud;
	c->n++;
	return 0;
}

Test(multipart, randomized_roundtrip)
{
	static const struct mp_callbacks ccb = { c_begin, c_data, c_end };
	static const char alphabet[] = "\r\n-Bbx";
	const char *boundary = "Bb-Bb";
	unsigned seed = 12345;
	uint8_t *body = malloc(1 << 19);
	uint8_t *parts[6];
	size_t plen[6];

	for (int round = 0; round < 300; round++) {
		size_t k = 0;
		int np = 1 + (int)(rand_r(&seed) % 5);
		for (int i = 0; i < np; i++) {
			plen[i] = (size_t)(rand_r(&seed) % 3000);
			parts[i] = malloc(plen[i] + 1);
			for (size_t j = 0; j < plen[i]; j++)
				parts[i][j] = (uint8_t)alphabet[rand_r(&seed) % 6];
			/* the part must not contain the real delimiter */
			for (size_t j = 0; j + 9 <= plen[i]; j++)
				if (!memcmp(parts[i] + j, "\r\n--Bb-Bb", 9))
					parts[i][j] = 'x';
			k += (size_t)sprintf((char *)body + k,
					     "--%s\r\nContent-Disposition: form-data; name=\"file\"; filename=\"f%d\"\r\n\r\n",
					     boundary, i);
			memcpy(body + k, parts[i], plen[i]);
			k += plen[i];
			memcpy(body + k, "\r\n", 2);
			k += 2;
		}
		k += (size_t)sprintf((char *)body + k, "--%s--\r\n", boundary);

		struct mp_parser p;
		struct collect c = { 0 };
		cr_assert_eq(mp_init(&p, boundary, &ccb, &c), 0);
		for (size_t off = 0; off < k;) {
			size_t step = 1 + (size_t)(rand_r(&seed) % 40);
			if (step > k - off)
				step = k - off;
			cr_assert_eq(mp_feed(&p, body + off, step), 0, "round %d", round);
			off += step;
		}
		cr_assert_eq(mp_finish(&p), 0);
		cr_assert_eq(c.n, np, "round %d", round);
		for (int i = 0; i < np; i++) {
			cr_assert_eq(c.len[i], plen[i], "round %d part %d", round, i);
			cr_assert(!memcmp(c.buf[i], parts[i], plen[i]), "round %d part %d", round, i);
			free(c.buf[i]);
			free(parts[i]);
		}
	}
	free(body);
}
