/* SPDX-License-Identifier: Apache-2.0 */
/*
 * files_get_test.c - GET /files (transfer/files_get.h) driven directly, on
 * the real worker pool, with a request of the test's own transport
 * (fakereq.h): bodies, ranges, errors, and the two hand-offs (a directory
 * as an archive, a gzip body), and a client that leaves before the open
 * job is back.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <zlib.h>

#include "base/loop.h"
#include "base/state.h"
#include "base/worker.h"
#include "fakereq.h"
#include "transfer/files_get.h"
#include "testloop.h"


static char dir[] = "/tmp/files-get-test.XXXXXX";

static void setup(void)
{
	cr_assert(mkdtemp(dir));
	state_token_clear();
}

static void teardown(void)
{
	rm_tree(dir);
}

TestSuite(files_get, .init = setup, .fini = teardown);

static bool answered(void *arg) { return ((struct fake *)arg)->ended || ((struct fake *)arg)->cut; }

static char *put(const char *name, const char *content, size_t n)
{
	static char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	cr_assert_eq(write(fd, content, n), (ssize_t)n);
	close(fd);
	return p;
}

/* GET /files?<query> with headers (pairs, then NULL); answered. */
#define GET(f, query, ...)                                                           \
	do {                                                                         \
		(f) = fake_new(HTTP_M_GET, "/files", (query), __VA_ARGS__);          \
		files_get(&(f)->r);                                                  \
		cr_assert(spin_until(answered, (f)), "answered");                    \
	} while (0)

static char query[PATH_MAX + 64];

static const char *q(const char *fmt, const char *path)
{
	snprintf(query, sizeof(query), fmt, path);
	return query;
}

Test(files_get, whole_file)
{
	struct fake *f;
	char *p = put("hello.txt", "hello, world", 12);

	GET(f, q("path=%s", p), NULL);
	cr_assert_eq(f->status, 200);
	cr_assert_eq(f->body_len, 12);
	cr_assert_str_eq(f->body, "hello, world");
	cr_assert(strstr(f->head, "content-type: text/plain; charset=utf-8\n"), "%s", f->head);
	cr_assert(strstr(f->head, "Vary: Accept-Encoding\n"), "%s", f->head);
	fake_free(f);
	cr_assert(spin_until(pool_idle, NULL), "the fd closed");
}

Test(files_get, range_and_byteranges)
{
	struct fake *f;
	char *p = put("digits", "0123456789", 10);

	GET(f, q("path=%s", p), "range", "bytes=2-4", NULL);
	cr_assert_eq(f->status, 206);
	cr_assert_str_eq(f->body, "234");
	cr_assert(strstr(f->head, "content-range: bytes 2-4/10\n"), "%s", f->head);
	fake_free(f);

	GET(f, q("path=%s", p), "range", "bytes=0-0,8-9", NULL);
	cr_assert_eq(f->status, 206);
	cr_assert(strstr(f->head, "content-type: multipart/byteranges; boundary="), "%s", f->head);
	cr_assert(strstr(f->body, "Content-Range: bytes 0-0/10\r\n"), "%s", f->body);
	cr_assert(strstr(f->body, "\r\n\r\n0\r\n"), "%s", f->body);
	cr_assert(strstr(f->body, "\r\n\r\n89\r\n"), "%s", f->body);
	cr_assert_eq((int64_t)f->body_len, f->declared, "the length announced is the length sent");
	fake_free(f);

	GET(f, q("path=%s", p), "range", "bytes=50-60", NULL);
	cr_assert_eq(f->status, 416);
	fake_free(f);
}

Test(files_get, errors)
{
	struct fake *f;

	GET(f, q("path=%s/missing", dir), NULL);
	cr_assert_eq(f->status, 404);
	cr_assert(strstr(f->body, "does not exist"), "%s", f->body);
	fake_free(f);

	GET(f, q("path=%s", dir), NULL);
	cr_assert_eq(f->status, 400);
	cr_assert(strstr(f->body, "is a directory"), "%s", f->body);
	fake_free(f);

	state_token_set("secret", 6);
	GET(f, q("path=%s", dir), NULL);
	cr_assert_eq(f->status, 401);
	cr_assert(strstr(f->body, "missing signature query parameter"), "%s", f->body);
	fake_free(f);
	state_token_clear();
}

/* ?archive= hands the exchange over to the archive writer. */
Test(files_get, archive_hand_off)
{
	struct fake *f;
	char sub[PATH_MAX];

	snprintf(sub, sizeof(sub), "%s/tree", dir);
	mkdir(sub, 0755);
	put("tree/inside.txt", "archived", 8);
	GET(f, q("path=%s&archive=tar", sub), NULL);
	cr_assert_eq(f->status, 200);
	cr_assert(strstr(f->head, "content-type: application/x-tar\n"), "%s", f->head);
	cr_assert_geq(f->body_len, 1024);
	cr_assert(memmem(f->body, f->body_len, "inside.txt", 10), "the entry is in the tar");
	cr_assert(memmem(f->body, f->body_len, "archived", 8));
	fake_free(f);

	GET(f, q("path=%s&archive=rar", sub), NULL);
	cr_assert_eq(f->status, 400);
	cr_assert(strstr(f->body, "unsupported archive format"), "%s", f->body);
	fake_free(f);
	cr_assert(spin_until(pool_idle, NULL));
}

/* A gzip body hands the exchange over to the gzip sender. */
Test(files_get, gzip_hand_off)
{
	struct fake *f;
	size_t n = 300000;
	char *text = malloc(n), *out = malloc(n + 1);

	for (size_t i = 0; i < n; i++)
		text[i] = "the quick brown fox "[i % 20];
	char *p = put("big.txt", text, n);
	files_gzip_always = true;
	GET(f, q("path=%s", p), "accept-encoding", "gzip", NULL);
	files_gzip_always = false;
	cr_assert_eq(f->status, 200);
	cr_assert(strstr(f->head, "content-encoding: gzip\n"), "%s", f->head);
	z_stream z = { 0 };
	inflateInit2(&z, 16 + MAX_WBITS);
	z.next_in = (Bytef *)f->body;
	z.avail_in = (uInt)f->body_len;
	z.next_out = (Bytef *)out;
	z.avail_out = (uInt)n + 1;
	cr_assert_eq(inflate(&z, Z_FINISH), Z_STREAM_END);
	cr_assert_eq(z.total_out, n);
	inflateEnd(&z);
	cr_assert(!memcmp(out, text, n));
	fake_free(f);
	cr_assert(spin_until(pool_idle, NULL));
	free(text);
	free(out);
}

/* The client leaves while the open job is out: nothing is answered, and
 * the download is freed when the job is back (LeakSanitizer checks). */
Test(files_get, client_gone_before_the_open)
{
	struct fake *f = fake_new(HTTP_M_GET, "/files", q("path=%s", put("x", "x", 1)), NULL);

	files_get(&f->r);
	fake_close(f, false);
	cr_assert(spin_until(pool_idle, NULL));
	cr_assert(!f->begun);
	fake_free(f);
}
