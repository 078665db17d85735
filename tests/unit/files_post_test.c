/* SPDX-License-Identifier: Apache-2.0 */
/*
 * files_post_test.c - POST /files (transfer/files_post.h) driven directly,
 * on the real worker pool, with a request of the test's own transport
 * (fakereq.h): raw and multipart uploads, gzip bodies, what is refused
 * before any byte is read, a client that leaves mid-upload (nothing is
 * left behind), and ?extract= handed over to the archive edge.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <zlib.h>

#include "base/loop.h"
#include "base/state.h"
#include "base/uptmp.h"
#include "base/worker.h"
#include "fakereq.h"
#include "transfer/files_post.h"
#include "testloop.h"


static char dir[] = "/tmp/files-post-test.XXXXXX";

static void setup(void)
{
	cr_assert(mkdtemp(dir));
	state_token_clear();
	uptmp_registry[0] = '\0';
}

static void teardown(void)
{
	rm_tree(dir);
}

TestSuite(files_post, .init = setup, .fini = teardown);

static bool answered(void *arg) { return ((struct fake *)arg)->ended; }

static char *at(const char *name)
{
	static char p[2][PATH_MAX];
	static int k;
	char *s = p[k++ % 2];
	snprintf(s, PATH_MAX, "%s/%s", dir, name);
	return s;
}

static char *get(const char *path)
{
	static char buf[65536];
	int fd = open(path, O_RDONLY);
	ssize_t n;

	if (fd < 0)
		return NULL;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n < 0 ? 0 : n] = '\0';
	return buf;
}

static char query[PATH_MAX + 64];

static const char *q(const char *fmt, const char *arg)
{
	snprintf(query, sizeof(query), fmt, arg);
	return query;
}

/* Feed body b[0..n) in pieces, turning the loop while paused, then end it. */
static void feed(struct fake *f, const void *b, size_t n)
{
	const char *p = b;

	for (size_t off = 0; off < n;) {
		size_t k = n - off < 8192 ? n - off : 8192;
		if (f->ended)
			break;
		if (!fake_body(f, p + off, k)) {
			ev_run(envd_loop, EVRUN_ONCE | EVRUN_NOWAIT);
			usleep(1000);
			continue;
		}
		off += k;
	}
	fake_body_end(f);
}

static struct fake *post(const char *query, const char *ctype, const char *cenc, const void *b, size_t n)
{
	struct fake *f = cenc ? fake_new(HTTP_M_POST, "/files", query, "content-type", ctype, "content-encoding", cenc, NULL)
			      : fake_new(HTTP_M_POST, "/files", query, "content-type", ctype, NULL);

	f->r.content_length = (int64_t)n;
	files_post(&f->r);
	if (!f->ended)
		feed(f, b, n);
	cr_assert(spin_until(answered, f), "answered");
	return f;
}

Test(files_post, raw_body)
{
	struct fake *f = post(q("path=%s", at("raw.txt")), "application/octet-stream", NULL, "raw bytes", 9);

	cr_assert_eq(f->status, 200, "%s", f->body);
	cr_assert(strstr(f->body, "\"name\":\"raw.txt\""), "%s", f->body);
	cr_assert_str_eq(get(at("raw.txt")), "raw bytes");
	fake_free(f);
	cr_assert(spin_until(pool_idle, NULL));
}

Test(files_post, multipart_two_files)
{
	char body[3 * PATH_MAX];

	snprintf(body, sizeof(body),
		 "--XyZ\r\n"
		 "Content-Disposition: form-data; name=\"file\"; filename=\"%s/one.txt\"\r\n\r\n"
		 "first\r\n"
		 "--XyZ\r\n"
		 "Content-Disposition: form-data; name=\"note\"\r\n\r\n"
		 "a form field, not a file\r\n"
		 "--XyZ\r\n"
		 "Content-Disposition: form-data; name=\"file\"; filename=\"%s/two.txt\"\r\n\r\n"
		 "second\r\n"
		 "--XyZ--\r\n",
		 dir, dir);
	struct fake *f = post("", "multipart/form-data; boundary=XyZ", NULL, body, strlen(body));
	cr_assert_eq(f->status, 200, "%s", f->body);
	cr_assert_str_eq(get(at("one.txt")), "first", "%s", f->body);
	cr_assert_str_eq(get(at("two.txt")), "second");
	cr_assert(strstr(f->body, "one.txt") && strstr(f->body, "two.txt"), "%s", f->body);
	cr_assert_null(strstr(f->body, "note"), "%s", f->body);
	fake_free(f);
}

Test(files_post, gzip_body)
{
	const char *text = "compressed on the way in";
	uint8_t z[256];
	z_stream s = { 0 };

	deflateInit2(&s, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
	s.next_in = (Bytef *)text;
	s.avail_in = (uInt)strlen(text);
	s.next_out = z;
	s.avail_out = sizeof(z);
	deflate(&s, Z_FINISH);
	size_t zn = sizeof(z) - s.avail_out;
	deflateEnd(&s);
	struct fake *f = post(q("path=%s", at("gz.txt")), "application/octet-stream", "gzip", z, zn);
	cr_assert_eq(f->status, 200, "%s", f->body);
	cr_assert_str_eq(get(at("gz.txt")), text);
	fake_free(f);

	f = post(q("path=%s", at("bad.txt")), "application/octet-stream", "gzip", "not gzip at all", 15);
	cr_assert_eq(f->status, 400);
	cr_assert(strstr(f->body, "gzip: invalid header"), "%s", f->body);
	cr_assert_null(get(at("bad.txt")), "nothing written");
	fake_free(f);
}

Test(files_post, refused_before_the_body)
{
	struct fake *f = post("", "application/octet-stream", NULL, "x", 1);
	cr_assert_eq(f->status, 400);
	cr_assert(strstr(f->body, "path query parameter is required for raw body upload"), "%s", f->body);
	fake_free(f);

	f = post(q("path=%s", at("t")), "text/plain", NULL, "x", 1);
	cr_assert_eq(f->status, 400);
	cr_assert(strstr(f->body, "unsupported content type: text/plain"), "%s", f->body);
	fake_free(f);

	f = post(q("path=%s", at("t")), "application/octet-stream", "br", "x", 1);
	cr_assert_eq(f->status, 400);
	cr_assert(strstr(f->body, "unsupported Content-Encoding: br"), "%s", f->body);
	fake_free(f);

	f = post(q("path=%s", dir), "application/octet-stream", NULL, "x", 1);
	cr_assert_eq(f->status, 400);
	cr_assert(strstr(f->body, "path is a directory"), "%s", f->body);
	fake_free(f);
}

static int temporaries(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	while ((e = readdir(d)))
		n += uptmp_name_is(e->d_name, strlen(e->d_name), NULL);
	closedir(d);
	return n;
}

/* The client leaves mid-upload: the target keeps its old content and no
 * temporary is left, whenever the job in flight comes back. */
Test(files_post, client_gone_mid_upload)
{
	int fd = open(at("keep.txt"), O_WRONLY | O_CREAT, 0644);
	cr_assert_eq(write(fd, "old", 3), 3);
	close(fd);
	struct fake *f = fake_new(HTTP_M_POST, "/files", q("path=%s", at("keep.txt")), "content-type",
				  "application/octet-stream", NULL);
	char chunk[65536];

	memset(chunk, 'n', sizeof(chunk));
	files_post(&f->r);
	for (int i = 0; i < 8; i++)
		fake_body(f, chunk, sizeof(chunk));
	fake_close(f, false);
	cr_assert(spin_until(pool_idle, NULL));
	cr_assert(!f->begun);
	cr_assert_str_eq(get(at("keep.txt")), "old");
	cr_assert_eq(temporaries(), 0);
	fake_free(f);
}

/* A tar with one file, made by hand (ustar header, the data, two zero blocks). */
static size_t tar_one(uint8_t *out, const char *name, const char *data)
{
	size_t n = strlen(data);
	unsigned sum = 0;

	memset(out, 0, 512 * 4);
	snprintf((char *)out, 100, "%s", name);
	snprintf((char *)out + 100, 8, "0000644");
	snprintf((char *)out + 108, 8, "0000000");
	snprintf((char *)out + 116, 8, "0000000");
	snprintf((char *)out + 124, 12, "%011zo", n);
	snprintf((char *)out + 136, 12, "%011o", 0);
	out[156] = '0';
	memcpy(out + 257, "ustar", 6);
	memcpy(out + 263, "00", 2);
	memset(out + 148, ' ', 8);
	for (int i = 0; i < 512; i++)
		sum += out[i];
	snprintf((char *)out + 148, 8, "%06o", sum);
	memcpy(out + 512, data, n);
	return 512 * 4;
}

Test(files_post, extract_hand_off)
{
	uint8_t tar[2048];
	size_t n = tar_one(tar, "in/tar.txt", "from the archive");
	struct fake *f = post(q("path=%s&extract=tar", at("ex")), "application/octet-stream", NULL, tar, n);

	cr_assert_eq(f->status, 200, "%s", f->body);
	cr_assert(strstr(f->body, "tar.txt"), "%s", f->body);
	cr_assert_str_eq(get(at("ex/in/tar.txt")), "from the archive");
	fake_free(f);
	cr_assert(spin_until(pool_idle, NULL));
}
