/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Allocation failures in the byte-engine cores (failalloc.h): every
 * allocation the operation makes fails in turn; the call must report the
 * failure, leave nothing allocated and never crash.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "failalloc.h"
#include "base/base64.h"
#include "base/buf.h"
#include "base/users.h"
#include "transfer/multipart.h"
#include "proto/pbjson.h"
#include "filesystem.pb-c.h"
#include "process.pb-c.h"

/* ---------------------------------------------------------------------- */
/* base/buf.c                                                              */

static int buf_op(void *ctx)
{
	struct buf b = BUF_INIT(1 << 20);
	char chunk[700];
	int rc = 0;

	memset(chunk, 'q', sizeof(chunk));
	for (int i = 0; i < 20 && rc == 0; i++)
		rc = buf_append(&b, chunk, sizeof(chunk));
	if (rc == 0)
		rc = buf_append_fmt(&b, "%s-%d", "tail", 42);
	if (rc == 0 && (b.len != 20 * 700 + 7 || memcmp(b.p + b.len - 7, "tail-42", 7) != 0))
		rc = -EINVAL;
	if (rc == 0) {
		size_t n;
		char *s = buf_steal(&b, &n);

		if (!s)
			rc = -ENOMEM;
		free(s);
	}
	buf_free(&b);
	return rc;
}

Test(cores_alloc, buf_every_allocation_fails_cleanly)
{
	cr_assert_gt(failalloc_run("buf", buf_op, NULL, 0), 3, "growth reallocates");
}

/* ---------------------------------------------------------------------- */
/* base/base64.c: no allocation at all                                     */

static int base64_op(void *ctx)
{
	static const char raw[] = "any carnal pleasure.";
	char enc[64], dec[64];
	size_t n = base64_encode(enc, raw, sizeof(raw) - 1);
	ssize_t m = base64_decode_strict(dec, enc, n);

	return m == (ssize_t)(sizeof(raw) - 1) && memcmp(dec, raw, (size_t)m) == 0 ? 0 : -EINVAL;
}

Test(cores_alloc, base64_allocates_nothing)
{
	cr_assert_eq(failalloc_count(base64_op, NULL), 0);
}

/* ---------------------------------------------------------------------- */
/* transfer/multipart.c: the parser works in its own struct                      */

static int mp_begin(void *ud, const struct mp_part *p) { (*(int *)ud)++; return 0; }
static int mp_data(void *ud, const uint8_t *d, size_t n) { return 0; }
static int mp_end(void *ud) { return 0; }

static int multipart_op(void *ctx)
{
	static const char body[] =
		"--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.txt\"\r\n\r\n"
		"hello\r\n--B\r\nContent-Disposition: form-data; name=file; filename*=UTF-8''b%20c\r\n\r\n"
		"x\r\n--B--\r\n";
	static const struct mp_callbacks cb = { mp_begin, mp_data, mp_end };
	struct mp_parser p;
	int parts = 0;

	if (mp_init(&p, "B", &cb, &parts) < 0)
		return -EINVAL;
	for (size_t i = 0; i < sizeof(body) - 1; i += 7) {
		size_t n = sizeof(body) - 1 - i < 7 ? sizeof(body) - 1 - i : 7;

		if (mp_feed(&p, (const uint8_t *)body + i, n) < 0)
			return -EINVAL;
	}
	return mp_finish(&p) == 0 && parts == 2 ? 0 : -EINVAL;
}

Test(cores_alloc, multipart_allocates_nothing)
{
	cr_assert_eq(failalloc_count(multipart_op, NULL), 0);
}

/* ---------------------------------------------------------------------- */
/* proto/pbjson.c: decode (yajl + protobuf-c message) and encode           */

static const char start_json[] =
	"{\"process\":{\"cmd\":\"/bin/bash\",\"args\":[\"-l\",\"-c\",\"echo hi\"],"
	"\"envs\":{\"A\":\"1\",\"B\":\"2\",\"LANG\":\"C.UTF-8\"},\"cwd\":\"/home/user\"},"
	"\"pty\":{\"size\":{\"cols\":80,\"rows\":24}},\"tag\":\"t\",\"stdin\":true}";

static const char list_json[] =
	"{\"entries\":[{\"name\":\"a.txt\",\"type\":\"FILE_TYPE_FILE\",\"path\":\"/home/user/a.txt\","
	"\"size\":\"3\",\"mode\":420,\"permissions\":\"-rw-r--r--\",\"owner\":\"user\","
	"\"group\":\"user\",\"modifiedTime\":\"2025-01-02T03:04:05.123456789Z\"},"
	"{\"name\":\"l\",\"type\":\"FILE_TYPE_DIRECTORY\",\"symlinkTarget\":\"/x\","
	"\"metadata\":{\"a\":\"1\",\"z\":\"2\"}}]}";

static const char input_json[] =
	"{\"process\":{\"pid\":7},\"input\":{\"stdin\":\"aGVsbG8gd29ybGQ=\"}}";

struct dec_case {
	const ProtobufCMessageDescriptor *desc;
	const char *json;
};

static int decode_op(void *ctx)
{
	const struct dec_case *c = ctx;
	char err[128];
	ProtobufCMessage *m = pbjson_decode(c->desc, c->json, strlen(c->json), err, sizeof(err));

	if (!m)
		return -ENOMEM;
	protobuf_c_message_free_unpacked(m, NULL);
	return 0;
}

static int encode_op(void *ctx)
{
	const ProtobufCMessage *m = ctx;
	size_t len;
	char *s = pbjson_encode(m, &len);

	if (!s)
		return -ENOMEM;
	free(s);
	return 0;
}

static int encode_into_op(void *ctx)
{
	const ProtobufCMessage *m = ctx;
	char *b = NULL;
	size_t cap = 0, len = 0;
	int rc = pbjson_encode_into(m, &b, &cap, 5, &len);

	free(b);
	return rc;
}

static const struct dec_case dec_cases[] = {
	{ &process__start_request__descriptor, start_json },
	{ &filesystem__list_dir_response__descriptor, list_json },
	{ &process__send_input_request__descriptor, input_json },
};

Test(cores_alloc, pbjson_decode_every_allocation_fails_cleanly)
{
	for (size_t i = 0; i < sizeof(dec_cases) / sizeof(dec_cases[0]); i++)
		cr_assert_gt(failalloc_run(dec_cases[i].json, decode_op, (void *)&dec_cases[i], 0), 0);
}

Test(cores_alloc, pbjson_encode_every_allocation_fails_cleanly)
{
	for (size_t i = 0; i < sizeof(dec_cases) / sizeof(dec_cases[0]); i++) {
		char err[128];
		ProtobufCMessage *m = pbjson_decode(dec_cases[i].desc, dec_cases[i].json,
						    strlen(dec_cases[i].json), err, sizeof(err));

		cr_assert_not_null(m, "%s", err);
		cr_assert_gt(failalloc_run("encode", encode_op, m, 0), 0);
		cr_assert_gt(failalloc_run("encode_into", encode_into_op, m, 0), 0);
		protobuf_c_message_free_unpacked(m, NULL);
	}
}

/* A decode error message quotes the bad value (describe()): its allocation
   failing falls back to a generic word, and the call still fails cleanly. */
static int decode_bad_op(void *ctx)
{
	char err[128];
	ProtobufCMessage *m = pbjson_decode(&process__start_request__descriptor,
					    "{\"process\":{\"cmd\":7}}", 22, err, sizeof(err));

	if (m) {
		protobuf_c_message_free_unpacked(m, NULL);
		return -EINVAL; /* must not decode */
	}
	return err[0] ? 0 : -EINVAL;
}

Test(cores_alloc, pbjson_decode_error_path_survives_failures)
{
	failalloc_run("decode error", decode_bad_op, NULL, FAILALLOC_MAY_ABSORB);
}

/* The parser's own memory: a string with escapes longer than its first
   buffer (decoded in a buffer that doubles), a text cut inside a long
   string (kept whole by the lexer), many frames. An allocation failing
   inside yajl jumps back to the decoder, which gives everything back. */
static char long_escaped[24 * 1024], long_cut[24 * 1024];

static int decode_text_op(void *ctx)
{
	const char *j = ctx;
	char err[128];
	ProtobufCMessage *m = pbjson_decode(&process__start_request__descriptor, j, strlen(j), err, sizeof(err));

	if (m) {
		protobuf_c_message_free_unpacked(m, NULL);
		return 0;
	}
	/* The cut text: its syntax error is its success. */
	return strstr(err, "syntax error") ? 0 : -ENOMEM;
}

Test(cores_alloc, pbjson_decode_parser_memory_fails_cleanly)
{
	size_t o = (size_t)sprintf(long_escaped, "{\"process\":{\"cmd\":\"");

	while (o < sizeof(long_escaped) - 64)
		o += (size_t)sprintf(long_escaped + o, "ab\\n\\u00e9");
	sprintf(long_escaped + o, "\",\"args\":[\"\\t\"]},\"x\":[[[[{}]]]]}");
	cr_assert_gt(failalloc_run("long escaped string", decode_text_op, long_escaped, 0), 2);
	memcpy(long_cut, long_escaped, sizeof(long_cut));
	long_cut[sizeof(long_cut) - 200] = '\0';
	cr_assert_gt(failalloc_run("cut string", decode_text_op, long_cut, FAILALLOC_MAY_ABSORB), 1);
}

/* ---------------------------------------------------------------------- */
/* base/users.c path_clean(): no allocation when the output fits            */

static int clean_op(void *ctx)
{
	char out[64];

	if (path_clean("/a/./b/../c//d/", out, sizeof(out)) < 0)
		return -ENOMEM;
	return strcmp(out, "/a/c/d") == 0 ? 0 : -EINVAL;
}

static int clean_short_op(void *ctx)
{
	char out[4];

	/* The result "/c" fits, the input does not: a scratch buffer is used. */
	return path_clean("/a/../b/../c", out, sizeof(out)) < 0 ? -ENOMEM
	       : strcmp(out, "/c") == 0 ? 0 : -EINVAL;
}

Test(cores_alloc, path_clean_allocates_nothing_when_output_fits)
{
	cr_assert_eq(failalloc_count(clean_op, NULL), 0);
	cr_assert_eq(failalloc_run("path_clean short", clean_short_op, NULL, 0), 1);
}
