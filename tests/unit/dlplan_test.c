/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dlplan_test.c - what GET /files answers (transfer/dlplan.h), outcome by
 * outcome, from fixed facts about the file and a request's headers.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <sys/stat.h>

#include "fakereq.h"
#include "transfer/dlplan.h"

#define MTIME 1700000000 /* Tue, 14 Nov 2023 22:13:20 GMT */

static struct dlplan plan;

/* A regular file of `size` bytes at /data/report.txt. */
static struct dlplan_in file_in(int64_t size)
{
	return (struct dlplan_in){ .path = "/data/report.txt", .qpath = "report.txt", .mode = S_IFREG | 0644,
				   .mtime = MTIME, .size = size };
}

static const char *hdr(const char *name)
{
	for (size_t i = 0; i < plan.nh; i++)
		if (!strcmp(plan.h[i].name, name))
			return plan.h[i].value;
	return NULL;
}

/* Plan a GET with the given headers (name/value pairs, then NULL). */
#define PLAN(in, ...)                                                           \
	do {                                                                    \
		struct fake *f_ = fake_new(HTTP_M_GET, "/files", "", __VA_ARGS__); \
		dlplan_make(&f_->r, (in), &plan);                               \
		fake_free(f_);                                                  \
	} while (0)

Test(dlplan, missing_path_404)
{
	struct dlplan_in in = file_in(0);

	in.err = ENOENT;
	PLAN(&in, NULL);
	cr_assert_eq(plan.kind, DLPLAN_ERROR);
	cr_assert_eq(plan.status, 404);
	cr_assert_str_eq(plan.msg, "path '/data/report.txt' does not exist");
	cr_assert(!plan.vary);
}

Test(dlplan, stat_error_500)
{
	struct dlplan_in in = file_in(0);

	in.err = EACCES;
	PLAN(&in, NULL);
	cr_assert_eq(plan.status, 500);
	cr_assert_str_eq(plan.msg,
			 "error checking if path exists '/data/report.txt': stat /data/report.txt: permission denied");
}

Test(dlplan, archive_of_a_directory_is_handed_on)
{
	struct dlplan_in in = file_in(0);

	in.archive = true;
	in.mode = S_IFDIR | 0755;
	PLAN(&in, NULL);
	cr_assert_eq(plan.kind, DLPLAN_ARCHIVE);
	in.mode = S_IFREG | 0644;
	PLAN(&in, NULL);
	cr_assert_eq(plan.kind, DLPLAN_ERROR);
	cr_assert_eq(plan.status, 400);
	cr_assert_str_eq(plan.msg, "path '/data/report.txt' is not a directory");
}

Test(dlplan, directory_400)
{
	struct dlplan_in in = file_in(0);

	in.mode = S_IFDIR | 0755;
	PLAN(&in, NULL);
	cr_assert_eq(plan.status, 400);
	cr_assert_str_eq(plan.msg, "path '/data/report.txt' is a directory");
}

Test(dlplan, no_acceptable_coding_406)
{
	struct dlplan_in in = file_in(10);

	PLAN(&in, "accept-encoding", "br, identity;q=0", NULL);
	cr_assert_eq(plan.kind, DLPLAN_ERROR);
	cr_assert_eq(plan.status, 406);
	cr_assert_str_eq(plan.msg, "error parsing Accept-Encoding: no acceptable encoding found, supported: [gzip]");
	cr_assert(!plan.vary, "decided before the coding is");
}

Test(dlplan, identity_refused_for_a_range_406)
{
	struct dlplan_in in = file_in(10);

	PLAN(&in, "accept-encoding", "gzip, identity;q=0", "range", "bytes=0-1", NULL);
	cr_assert_eq(plan.status, 406);
	cr_assert_str_eq(plan.msg, "identity encoding not acceptable for Range or conditional request");
	cr_assert(plan.vary);
}

Test(dlplan, open_error_500)
{
	struct dlplan_in in = file_in(10);

	in.err = EACCES;
	in.err_open = true;
	PLAN(&in, NULL);
	cr_assert_eq(plan.kind, DLPLAN_ERROR);
	cr_assert_eq(plan.status, 500);
	cr_assert_str_eq(plan.msg, "error opening file '/data/report.txt': open /data/report.txt: permission denied");
	cr_assert(plan.vary);
}

Test(dlplan, gzip_where_it_wins)
{
	struct dlplan_in in = file_in(100000);

	in.gzip_wins = true;
	PLAN(&in, "accept-encoding", "gzip", NULL);
	cr_assert_eq(plan.kind, DLPLAN_GZIP);
	cr_assert_eq(plan.status, 200);
	cr_assert_str_eq(hdr("content-encoding"), "gzip");
	cr_assert_str_eq(hdr("content-type"), "text/plain; charset=utf-8");
	cr_assert_str_eq(hdr("content-disposition"), "inline; filename=report.txt");
	cr_assert_eq(plan.nh, 3);

	in.gzip_wins = false;
	PLAN(&in, "accept-encoding", "gzip", NULL);
	cr_assert_eq(plan.kind, DLPLAN_BODY, "identity where gzip would not arrive sooner");

	in.gzip_always = true;
	PLAN(&in, "accept-encoding", "gzip", NULL);
	cr_assert_eq(plan.kind, DLPLAN_GZIP, "-gzip-always");

	in.gzip_always = false;
	PLAN(&in, "accept-encoding", "gzip, identity;q=0", NULL);
	cr_assert_eq(plan.kind, DLPLAN_GZIP, "the only coding the client takes");

	in.gzip_wins = true;
	in.qpath = "blob";
	PLAN(&in, "accept-encoding", "gzip", NULL);
	cr_assert_str_eq(hdr("content-type"), "application/octet-stream");

	in.qpath = "report.txt";
	PLAN(&in, "accept-encoding", "gzip", "if-none-match", "*", NULL);
	cr_assert_eq(plan.kind, DLPLAN_EMPTY, "a condition asks for identity");
}

Test(dlplan, conditions_304_412)
{
	struct dlplan_in in = file_in(10);

	PLAN(&in, "if-none-match", "*", NULL);
	cr_assert_eq(plan.kind, DLPLAN_EMPTY);
	cr_assert_eq(plan.status, 304);
	cr_assert_eq(plan.nh, 1, "Last-Modified alone");
	cr_assert_str_eq(hdr("last-modified"), "Tue, 14 Nov 2023 22:13:20 GMT");

	PLAN(&in, "if-modified-since", "Tue, 14 Nov 2023 22:13:20 GMT", NULL);
	cr_assert_eq(plan.status, 304);
	PLAN(&in, "if-modified-since", "Tue, 14 Nov 2023 22:13:19 GMT", NULL);
	cr_assert_eq(plan.kind, DLPLAN_BODY);

	PLAN(&in, "if-match", "\"abc\"", NULL);
	cr_assert_eq(plan.kind, DLPLAN_EMPTY);
	cr_assert_eq(plan.status, 412);
	PLAN(&in, "if-unmodified-since", "Tue, 14 Nov 2023 22:13:19 GMT", NULL);
	cr_assert_eq(plan.status, 412);
	PLAN(&in, "if-match", "*", NULL);
	cr_assert_eq(plan.kind, DLPLAN_BODY);
}

#define VERSION "0123456789abcdef0123456789abcdef"
#define ETAG "\"" VERSION "\""

Test(dlplan, etag_conditions)
{
	struct dlplan_in in = file_in(10);

	in.version = VERSION;
	PLAN(&in, NULL);
	cr_assert_eq(plan.kind, DLPLAN_BODY);
	cr_assert_str_eq(hdr("etag"), ETAG, "the version, strong");

	PLAN(&in, "if-none-match", ETAG, NULL);
	cr_assert_eq(plan.status, 304);
	cr_assert_str_eq(hdr("etag"), ETAG);
	cr_assert_null(hdr("last-modified"), "a 304 with an ETag drops Last-Modified, as Go's");
	PLAN(&in, "if-none-match", "\"old\", W/" ETAG, NULL);
	cr_assert_eq(plan.status, 304, "If-None-Match compares weakly, any of a list");
	PLAN(&in, "if-none-match", "\"old\"", "if-modified-since", "Tue, 14 Nov 2023 22:13:20 GMT", NULL);
	cr_assert_eq(plan.kind, DLPLAN_BODY, "If-None-Match given: If-Modified-Since is not looked at");

	PLAN(&in, "if-match", ETAG, NULL);
	cr_assert_eq(plan.kind, DLPLAN_BODY);
	PLAN(&in, "if-match", "\"old\"", NULL);
	cr_assert_eq(plan.status, 412);
	cr_assert_str_eq(hdr("etag"), ETAG, "the 412 tells the current one");
	PLAN(&in, "if-match", "W/" ETAG, NULL);
	cr_assert_eq(plan.status, 412, "If-Match compares strongly");
	PLAN(&in, "if-match", "\"old\"", "accept-encoding", "gzip", NULL);
	cr_assert_eq(plan.status, 412, "a condition asks for identity, also If-Match");

	PLAN(&in, "range", "bytes=0-1", "if-range", ETAG, NULL);
	cr_assert_eq(plan.status, 206, "If-Range with the current ETag: the range");
	PLAN(&in, "range", "bytes=0-1", "if-range", "\"old\"", NULL);
	cr_assert_eq(plan.status, 200, "If-Range with another: the whole file");

	in.gzip_always = true;
	PLAN(&in, "accept-encoding", "gzip", NULL);
	cr_assert_eq(plan.kind, DLPLAN_GZIP);
	cr_assert_str_eq(hdr("etag"), "W/" ETAG, "a gzip body: weak, its bytes vary with the level");
}

Test(dlplan, unsatisfiable_range_416)
{
	struct dlplan_in in = file_in(50);

	PLAN(&in, "range", "bytes=100-200", NULL);
	cr_assert_eq(plan.kind, DLPLAN_UNSATISFIABLE);
	cr_assert_eq(plan.status, 416);
	cr_assert_str_eq(plan.msg, "invalid range: failed to overlap\n");
	cr_assert_str_eq(hdr("content-range"), "bytes */50");
	cr_assert_str_eq(hdr("x-content-type-options"), "nosniff");
	cr_assert_eq(plan.nh, 2);

	in.size = 0;
	PLAN(&in, "range", "bytes=100-200", NULL);
	cr_assert_eq(plan.kind, DLPLAN_BODY, "an empty file ignores it, as Go does");
	cr_assert_eq(plan.status, 200);
}

Test(dlplan, several_ranges_byteranges)
{
	struct dlplan_in in = file_in(100);

	PLAN(&in, "range", "bytes=0-1,5-6", NULL);
	cr_assert_eq(plan.kind, DLPLAN_BYTERANGES);
	cr_assert_eq(plan.status, 206);
	cr_assert_eq(plan.nrg, 2);
	cr_assert_eq(plan.rg[1].start, 5);
	cr_assert_eq(plan.rg[1].len, 2);
	cr_assert_null(hdr("content-type"), "each part carries the type");
	cr_assert_str_eq(plan.ctype, "text/plain; charset=utf-8");
	cr_assert_str_eq(hdr("accept-ranges"), "bytes");
	cr_assert_not_null(hdr("content-disposition"));

	PLAN(&in, "range", "bytes=0-79,10-99", NULL);
	cr_assert_eq(plan.kind, DLPLAN_BODY, "parts adding up to more than the file: the whole");
	cr_assert_eq(plan.status, 200);
	cr_assert_eq(plan.len, 100);
}

Test(dlplan, one_range_206)
{
	struct dlplan_in in = file_in(100);

	PLAN(&in, "range", "bytes=10-19", NULL);
	cr_assert_eq(plan.kind, DLPLAN_BODY);
	cr_assert_eq(plan.status, 206);
	cr_assert_eq(plan.start, 10);
	cr_assert_eq(plan.len, 10);
	cr_assert_str_eq(hdr("content-range"), "bytes 10-19/100");
	/* Go's order: disposition, last-modified, type, accept-ranges, range. */
	cr_assert_str_eq(plan.h[0].name, "content-disposition");
	cr_assert_str_eq(plan.h[1].name, "last-modified");
	cr_assert_str_eq(plan.h[2].name, "content-type");
	cr_assert_str_eq(plan.h[3].name, "accept-ranges");
	cr_assert_str_eq(plan.h[4].name, "content-range");

	PLAN(&in, "range", "bytes=10-19", "if-range", "Tue, 14 Nov 2023 22:13:19 GMT", NULL);
	cr_assert_eq(plan.status, 200, "an If-Range the file changed since: the whole");
	cr_assert_eq(plan.len, 100);
}

Test(dlplan, whole_file_200)
{
	struct dlplan_in in = file_in(6);
	static const uint8_t html[] = "<html>";

	PLAN(&in, NULL);
	cr_assert_eq(plan.kind, DLPLAN_BODY);
	cr_assert_eq(plan.status, 200);
	cr_assert_eq(plan.start, 0);
	cr_assert_eq(plan.len, 6);
	cr_assert(plan.vary);
	cr_assert_null(hdr("content-range"));

	in.qpath = "page";
	in.sniff = html;
	in.sniff_n = 6;
	in.mtime = 0;
	PLAN(&in, NULL);
	cr_assert_str_eq(hdr("content-type"), "text/html; charset=utf-8", "sniffed when the name tells nothing");
	cr_assert_null(hdr("last-modified"), "no date where none is known");
}
