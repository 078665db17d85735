/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "transfer/files_util.h"

Test(files_util, signature_vectors)
{
	char sig[64];
	/* SDK test vector (tests/sandbox/secure.test.ts). */
	files_signature("hello.txt", "read", "user", "0tQG31xiMp0IOQfaz9dcwi72L1CPo8e0", 32, -1, sig, sizeof(sig));
	cr_assert_str_eq(sig, "v1_gUtH/s9YCJWgCizjfUxuWfhFE4QSydOWEIIvfLwDr6E");
	/* With an expiration the raw string gains ":<exp>"; 43 chars, no '='. */
	files_signature("/path/to/resource.txt", "write", "", "secret-access-token", 19, 1700000000, sig,
			sizeof(sig));
	cr_assert_eq(strlen(sig), 46);
	cr_assert_null(strchr(sig, '='));
	char sig2[64];
	files_signature("/path/to/resource.txt", "write", "", "secret-access-token", 19, -1, sig2, sizeof(sig2));
	cr_assert_str_neq(sig, sig2);
}

Test(files_util, const_eq)
{
	cr_assert(files_const_eq("abc", "abc"));
	cr_assert_not(files_const_eq("abc", "abd"));
	cr_assert_not(files_const_eq("abc", "abcd"));
	cr_assert(files_const_eq("", ""));
}

Test(files_util, accept_encoding)
{
	static const struct {
		const char *h;
		int enc;
		bool rej;
	} v[] = {
		{ NULL, FILES_ENC_IDENTITY, false },
		{ "", FILES_ENC_IDENTITY, false },
		{ "gzip", FILES_ENC_GZIP, false },
		{ "br, gzip, deflate", FILES_ENC_GZIP, false },
		{ "gzip, deflate", FILES_ENC_GZIP, false },
		{ "identity, gzip", FILES_ENC_IDENTITY, false },
		{ "*", FILES_ENC_IDENTITY, false },
		{ "br", FILES_ENC_IDENTITY, false },
		{ "identity;q=0", FILES_ENC_NONE, true },
		{ "gzip;q=0, identity;q=0", FILES_ENC_NONE, true },
		{ "*;q=0", FILES_ENC_NONE, true },
		{ "identity;q=0.5, gzip;q=0.9", FILES_ENC_GZIP, false },
		{ "gzip;q=0, *", FILES_ENC_IDENTITY, false },
		{ "*;q=0, gzip", FILES_ENC_GZIP, true },
		{ "GZIP ; Q=1", FILES_ENC_GZIP, false },
		{ "gzip;q=bogus", FILES_ENC_GZIP, false },
	};
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		bool rej;
		cr_expect_eq(files_negotiate(v[i].h, &rej), v[i].enc, "%s", v[i].h ? v[i].h : "(null)");
		cr_expect_eq(rej, v[i].rej, "%s", v[i].h ? v[i].h : "(null)");
	}
}

Test(files_util, content_disposition)
{
	char out[512];
	files_content_disposition("document.pdf", out, sizeof(out));
	cr_assert_str_eq(out, "inline; filename=document.pdf");
	files_content_disposition("my file.txt", out, sizeof(out));
	cr_assert_str_eq(out, "inline; filename=\"my file.txt\"");
	files_content_disposition("file\\name.txt", out, sizeof(out));
	cr_assert_str_eq(out, "inline; filename=\"file\\\\name.txt\"");
	files_content_disposition("\xe6\x96\x87\xe6\xa1\xa3.pdf", out, sizeof(out));
	cr_assert_str_eq(out, "inline; filename*=utf-8''%E6%96%87%E6%A1%A3.pdf");
	files_content_disposition("a'b*c%.txt\x7f", out, sizeof(out));
	cr_assert_str_eq(out, "inline; filename*=utf-8''a%27b%2Ac%25.txt%7F");
}

Test(files_util, mime)
{
	char tmpl[] = "/tmp/mime_test_XXXXXX";
	int fd = mkstemp(tmpl);
	const char *content = "# comment\ntext/plain\t\ttxt asc\napplication/x-foo foo\nimage/png png\n"
			      "application/x-first dup\napplication/x-second dup zz\nimage/x-upper UPX\n";
	cr_assert_eq(write(fd, content, strlen(content)), (ssize_t)strlen(content));
	close(fd);
	files_mime_types_path = tmpl;
	cr_assert_str_eq(files_mime_by_ext("/a/b.json"), "application/json");
	cr_assert_str_eq(files_mime_by_ext("x.HTML"), "text/html; charset=utf-8");
	cr_assert_str_eq(files_mime_by_ext("notes.txt"), "text/plain; charset=utf-8");
	cr_assert_str_eq(files_mime_by_ext("a.foo"), "application/x-foo");
	cr_assert_null(files_mime_by_ext("noext"));
	cr_assert_null(files_mime_by_ext("dir.d/noext"));
	cr_assert_null(files_mime_by_ext("a.unknownext"));
	cr_assert_str_eq(files_mime_by_ext("a.dup"), "application/x-first", "the file's first type of an extension wins");
	cr_assert_str_eq(files_mime_by_ext("a.zz"), "application/x-second");
	cr_assert_str_eq(files_mime_by_ext("a.upx"), "image/x-upper", "extensions compare in lower case");
	cr_assert_str_eq(files_mime_by_ext("A.UpX"), "image/x-upper");
	cr_assert_str_eq(files_mime_by_ext("t.asc"), "text/plain; charset=utf-8");
	cr_assert_null(files_mime_by_ext("a."));
	unlink(tmpl);
}

Test(files_util, sniff)
{
	cr_assert_str_eq(files_sniff((const uint8_t *)"hello\n", 6), "text/plain; charset=utf-8");
	cr_assert_str_eq(files_sniff((const uint8_t *)"\x00\x01\x02", 3), "application/octet-stream");
	cr_assert_str_eq(files_sniff((const uint8_t *)"%PDF-1.7", 8), "application/pdf");
	cr_assert_str_eq(files_sniff((const uint8_t *)"\x89PNG\r\n\x1a\n....", 12), "image/png");
	cr_assert_str_eq(files_sniff((const uint8_t *)"  <html><body>", 14), "text/html; charset=utf-8");
	cr_assert_str_eq(files_sniff((const uint8_t *)"", 0), "text/plain; charset=utf-8");
}

Test(files_util, ranges)
{
	int64_t s, l;
	cr_assert_eq(files_parse_range(NULL, 100, &s, &l), 0);
	cr_assert_eq(files_parse_range("bytes=0-9", 100, &s, &l), 1);
	cr_assert_eq(s, 0);
	cr_assert_eq(l, 10);
	cr_assert_eq(files_parse_range("bytes=90-", 100, &s, &l), 1);
	cr_assert_eq(s, 90);
	cr_assert_eq(l, 10);
	cr_assert_eq(files_parse_range("bytes=-5", 100, &s, &l), 1);
	cr_assert_eq(s, 95);
	cr_assert_eq(l, 5);
	cr_assert_eq(files_parse_range("bytes=-500", 100, &s, &l), 1);
	cr_assert_eq(s, 0);
	cr_assert_eq(l, 100);
	cr_assert_eq(files_parse_range("bytes=50-1000", 100, &s, &l), 1);
	cr_assert_eq(l, 50);
	cr_assert_eq(files_parse_range("bytes=100-", 100, &s, &l), -ERANGE);
	cr_assert_eq(files_parse_range("bytes=0-1,5-6", 100, &s, &l), 0);
	cr_assert_eq(files_parse_range("bytes=5-1", 100, &s, &l), -EINVAL);
	cr_assert_eq(files_parse_range("items=0-1", 100, &s, &l), -EINVAL);
	cr_assert_eq(files_parse_range("bytes=x-1", 100, &s, &l), -EINVAL);
	cr_assert_eq(files_parse_range("bytes=0-0", 0, &s, &l), -ERANGE);
}

Test(files_util, multi_ranges)
{
	struct files_range r[4];
	cr_assert_eq(files_parse_ranges("bytes=0-1, 5-6,-3", 100, r, 4), 3);
	cr_assert_eq(r[0].start, 0);
	cr_assert_eq(r[0].len, 2);
	cr_assert_eq(r[1].start, 5);
	cr_assert_eq(r[1].len, 2);
	cr_assert_eq(r[2].start, 97);
	cr_assert_eq(r[2].len, 3);
	/* non-overlapping members are dropped, the rest kept */
	cr_assert_eq(files_parse_ranges("bytes=200-300,0-0", 100, r, 4), 1);
	cr_assert_eq(r[0].len, 1);
	/* more than the caller's limit: serve everything */
	cr_assert_eq(files_parse_ranges("bytes=0-0,1-1,2-2,3-3,4-4", 100, r, 4), 0);
	cr_assert_eq(files_parse_ranges("bytes=200-300", 100, r, 4), -ERANGE);
}

Test(files_util, http_dates)
{
	char buf[40];
	files_format_http_date(784111777, buf, sizeof(buf));
	cr_assert_str_eq(buf, "Sun, 06 Nov 1994 08:49:37 GMT");
	cr_assert_eq(files_parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"), 784111777);
	cr_assert_eq(files_parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT"), 784111777);
	cr_assert_eq(files_parse_http_date("Sun Nov  6 08:49:37 1994"), 784111777);
	cr_assert_eq(files_parse_http_date("yesterday"), -1);
}

Test(files_util, etag_lists)
{
	const char *v = "0123456789abcdef0123456789abcdef";

	cr_assert(files_etag_listed("\"0123456789abcdef0123456789abcdef\"", v, false));
	cr_assert(files_etag_listed("\"x\", \"0123456789abcdef0123456789abcdef\"", v, false), "any of a list");
	cr_assert(files_etag_listed(" \"x\" ,\t\"0123456789abcdef0123456789abcdef\" ", v, false), "with spaces");
	cr_assert_not(files_etag_listed("W/\"0123456789abcdef0123456789abcdef\"", v, false), "strong: weak never");
	cr_assert(files_etag_listed("W/\"0123456789abcdef0123456789abcdef\"", v, true), "weak: W/ ignored");
	cr_assert_not(files_etag_listed("\"0123456789abcdef0123456789abcde\"", v, true), "a prefix is not the tag");
	cr_assert_not(files_etag_listed("0123456789abcdef0123456789abcdef", v, true), "unquoted: malformed");
	cr_assert_not(files_etag_listed("\"\"", "", true), "no version matches nothing");
	cr_assert_not(files_etag_listed("\"unterminated", v, true));
}

Test(files_util, write_preconditions)
{
	const char *v = "0123456789abcdef0123456789abcdef";
	char msg[512];

	cr_assert_eq(files_write_preconditions(NULL, NULL, true, v, "/f", msg, sizeof(msg)), 0);
	cr_assert_eq(files_write_preconditions("\"0123456789abcdef0123456789abcdef\"", NULL, true, v, "/f", msg,
					       sizeof(msg)),
		     0);
	cr_assert_eq(files_write_preconditions("\"other\"", NULL, true, v, "/f", msg, sizeof(msg)), 412);
	cr_assert(strstr(msg, "/f is at version \"0123456789abcdef0123456789abcdef\""), "%s", msg);
	cr_assert_eq(files_write_preconditions("*", NULL, true, v, "/f", msg, sizeof(msg)), 0);
	cr_assert_eq(files_write_preconditions("*", NULL, false, "", "/f", msg, sizeof(msg)), 412, "* needs a file");
	cr_assert_eq(files_write_preconditions("\"x\"", NULL, false, "", "/f", msg, sizeof(msg)), 412);
	cr_assert_eq(files_write_preconditions(NULL, "*", false, "", "/f", msg, sizeof(msg)), 0, "create only");
	cr_assert_eq(files_write_preconditions(NULL, "*", true, v, "/f", msg, sizeof(msg)), 412);
	cr_assert_str_eq(msg, "precondition failed: /f exists (If-None-Match: *)");
	cr_assert_eq(files_write_preconditions(NULL, "W/\"0123456789abcdef0123456789abcdef\"", true, v, "/f", msg,
					       sizeof(msg)),
		     412, "If-None-Match compares weakly");
	cr_assert_eq(files_write_preconditions(NULL, "\"x\"", true, v, "/f", msg, sizeof(msg)), 0);
}
