/* SPDX-License-Identifier: Apache-2.0 */
/* WaitFor's conditions (process/waitcond.h): requests checked, listeners
 * matched, status ranges, words, and output assembled into lines. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <arpa/inet.h>
#include <string.h>
#include <sys/socket.h>

#include "process/waitcond.h"

static int parse_port(unsigned port, const char *addr, struct waitcond *c, char *err)
{
	Process__WaitForRequest rq = PROCESS__WAIT_FOR_REQUEST__INIT;
	Process__WaitPort p = PROCESS__WAIT_PORT__INIT;

	p.port = port;
	p.address = (char *)addr;
	rq.condition_case = PROCESS__WAIT_FOR_REQUEST__CONDITION_PORT;
	rq.port = &p;
	return waitcond_parse(&rq, c, err, 256);
}

static void sock(const char *a, int *family, uint8_t addr[16])
{
	memset(addr, 0, 16);
	*family = strchr(a, ':') ? AF_INET6 : AF_INET;
	cr_assert_eq(inet_pton(*family, a, addr), 1, "%s", a);
}

static bool ok(const struct waitcond *c, const char *a, unsigned port)
{
	int f;
	uint8_t addr[16];

	sock(a, &f, addr);
	return waitcond_port_ok(c, f, addr, (uint16_t)port);
}

Test(waitcond, port_requests)
{
	struct waitcond c;
	char err[256];

	cr_expect_eq(parse_port(8080, "", &c, err), 0);
	cr_expect_eq(c.kind, WAITCOND_PORT);
	cr_expect(c.any_address);
	cr_expect_eq(parse_port(0, "", &c, err), -EINVAL);
	cr_expect(strstr(err, "invalid port 0"), "%s", err);
	cr_expect_eq(parse_port(65536, "", &c, err), -EINVAL);
	cr_expect_eq(parse_port(80, "localhost", &c, err), -EINVAL);
	cr_expect(strstr(err, "numeric IPv4 or IPv6"), "%s", err);
	cr_expect_eq(parse_port(80, "::ffff:127.0.0.1", &c, err), 0);
	cr_expect_str_eq(c.address, "127.0.0.1", "IPv4-mapped is IPv4");
}

Test(waitcond, listeners_that_count)
{
	struct waitcond c;
	char err[256];

	cr_assert_eq(parse_port(8080, "", &c, err), 0);
	cr_expect(ok(&c, "127.0.0.1", 8080));
	cr_expect(ok(&c, "::1", 8080));
	cr_expect(ok(&c, "169.254.0.21", 8080));
	cr_expect_not(ok(&c, "127.0.0.1", 8081), "another port");

	cr_assert_eq(parse_port(8080, "127.0.0.1", &c, err), 0);
	cr_expect(ok(&c, "127.0.0.1", 8080));
	cr_expect(ok(&c, "0.0.0.0", 8080), "the IPv4 wildcard");
	cr_expect(ok(&c, "::", 8080), "a dual-stack wildcard");
	cr_expect(ok(&c, "::ffff:127.0.0.1", 8080), "IPv4-mapped");
	cr_expect_not(ok(&c, "::1", 8080));
	cr_expect_not(ok(&c, "10.0.0.1", 8080));

	cr_assert_eq(parse_port(8080, "::1", &c, err), 0);
	cr_expect(ok(&c, "::1", 8080));
	cr_expect(ok(&c, "::", 8080));
	cr_expect_not(ok(&c, "0.0.0.0", 8080), "an IPv4 wildcard does not take ::1");
	cr_expect_not(ok(&c, "127.0.0.1", 8080));
}

static int parse_http(unsigned port, const char *path, unsigned lo, unsigned hi, struct waitcond *c,
		      char *err)
{
	Process__WaitForRequest rq = PROCESS__WAIT_FOR_REQUEST__INIT;
	Process__WaitHttp h = PROCESS__WAIT_HTTP__INIT;

	h.port = port;
	h.path = (char *)path;
	h.status_min = lo;
	h.status_max = hi;
	rq.condition_case = PROCESS__WAIT_FOR_REQUEST__CONDITION_HTTP;
	rq.http = &h;
	return waitcond_parse(&rq, c, err, 256);
}

Test(waitcond, http_requests)
{
	struct waitcond c;
	char err[256], words[256];

	cr_assert_eq(parse_http(3000, "", 0, 0, &c, err), 0);
	cr_expect_str_eq(c.path, "/");
	cr_expect_eq(c.status_min, 200);
	cr_expect_eq(c.status_max, 399);
	cr_expect(waitcond_status_ok(&c, 200));
	cr_expect(waitcond_status_ok(&c, 302));
	cr_expect_not(waitcond_status_ok(&c, 404));
	cr_expect_not(waitcond_status_ok(&c, 503));
	/* It asks for 127.0.0.1, where the GET goes. */
	cr_expect(ok(&c, "127.0.0.1", 3000));
	cr_expect(ok(&c, "0.0.0.0", 3000));
	cr_expect_not(ok(&c, "::1", 3000));
	waitcond_describe(&c, words, sizeof(words));
	cr_expect_str_eq(words, "GET http://127.0.0.1:3000/ answering 200-399");

	cr_assert_eq(parse_http(3000, "/health?x=1", 204, 0, &c, err), 0);
	cr_expect_eq(c.status_max, 204, "one status");
	cr_expect_not(waitcond_status_ok(&c, 200));
	cr_assert_eq(parse_http(3000, "/", 500, 599, &c, err), 0);
	cr_expect(waitcond_status_ok(&c, 503), "a range of errors can be waited for too");

	cr_expect_eq(parse_http(3000, "health", 0, 0, &c, err), -EINVAL);
	cr_expect(strstr(err, "starts with '/'"), "%s", err);
	cr_expect_eq(parse_http(3000, "/a b", 0, 0, &c, err), -EINVAL);
	cr_expect_eq(parse_http(3000, "/a\r\nX: y", 0, 0, &c, err), -EINVAL, "no header injection");
	cr_expect_eq(parse_http(3000, "/", 300, 200, &c, err), -EINVAL);
	cr_expect_eq(parse_http(3000, "/", 99, 200, &c, err), -EINVAL);
	cr_expect_eq(parse_http(3000, "/", 200, 600, &c, err), -EINVAL);
	cr_expect_eq(parse_http(0, "/", 0, 0, &c, err), -EINVAL);
}

Test(waitcond, other_requests)
{
	Process__WaitForRequest rq = PROCESS__WAIT_FOR_REQUEST__INIT;
	Process__WaitOutput o = PROCESS__WAIT_OUTPUT__INIT;
	Process__ProcessSelector sel = PROCESS__PROCESS_SELECTOR__INIT;
	Process__WaitPath pa = PROCESS__WAIT_PATH__INIT;
	struct waitcond c;
	char err[256], words[256];

	cr_expect_eq(waitcond_parse(&rq, &c, err, sizeof(err)), -EINVAL, "no condition");
	cr_expect(strstr(err, "one condition"), "%s", err);

	rq.condition_case = PROCESS__WAIT_FOR_REQUEST__CONDITION_OUTPUT;
	rq.output = &o;
	o.pattern = "ready";
	cr_expect_eq(waitcond_parse(&rq, &c, err, sizeof(err)), -EINVAL, "no process");
	o.process = &sel;
	cr_expect_eq(waitcond_parse(&rq, &c, err, sizeof(err)), -EINVAL, "an empty selector");
	sel.selector_case = PROCESS__PROCESS_SELECTOR__SELECTOR_TAG;
	sel.tag = "web";
	cr_expect_eq(waitcond_parse(&rq, &c, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(c.stream, 0);
	waitcond_describe(&c, words, sizeof(words));
	cr_expect_str_eq(words, "a line of process tagged 'web''s output matching 'ready'");
	o.stream = "stderr";
	o.ignore_case = true;
	cr_expect_eq(waitcond_parse(&rq, &c, err, sizeof(err)), 0);
	cr_expect_eq(c.stream, 2);
	o.stream = "both";
	cr_expect_eq(waitcond_parse(&rq, &c, err, sizeof(err)), -EINVAL);
	o.stream = "";
	o.pattern = "";
	cr_expect_eq(waitcond_parse(&rq, &c, err, sizeof(err)), -EINVAL, "an empty pattern");

	rq.condition_case = PROCESS__WAIT_FOR_REQUEST__CONDITION_EXIT;
	rq.exit = &sel;
	sel.selector_case = PROCESS__PROCESS_SELECTOR__SELECTOR_PID;
	sel.pid = 42;
	cr_expect_eq(waitcond_parse(&rq, &c, err, sizeof(err)), 0);
	waitcond_describe(&c, words, sizeof(words));
	cr_expect_str_eq(words, "process 42 to end");

	rq.condition_case = PROCESS__WAIT_FOR_REQUEST__CONDITION_PATH;
	rq.path = &pa;
	cr_expect_eq(waitcond_parse(&rq, &c, err, sizeof(err)), -EINVAL, "an empty path");
	pa.path = "out/done";
	rq.timeout_ms = 1500;
	cr_expect_eq(waitcond_parse(&rq, &c, err, sizeof(err)), 0);
	cr_expect_eq(c.timeout_ms, 1500);
	cr_expect_str_eq(c.fs_path, "out/done");
}

/* Lines as the callback sees them. */
struct seen {
	char lines[16][128];
	uint64_t offs[16];
	bool cuts[16];
	int n;
	int stop_at; /* stop (a match) at this line, -1: never */
};

static bool collect(void *ud, const char *line, size_t len, uint64_t off, bool cut)
{
	struct seen *s = ud;

	if (s->n < 16) {
		snprintf(s->lines[s->n], sizeof(s->lines[0]), "%.*s", (int)(len < 100 ? len : 100), line);
		s->offs[s->n] = off;
		s->cuts[s->n] = cut;
	}
	return s->n++ == s->stop_at;
}

static int feed(struct waitcond_lines *l, const char *p, uint64_t off, struct seen *s)
{
	return waitcond_lines_feed(l, (const uint8_t *)p, strlen(p), off, collect, s);
}

Test(waitcond, lines_across_chunks)
{
	struct waitcond_lines l = { 0 };
	struct seen s = { .stop_at = -1 };

	cr_expect_eq(feed(&l, "one\ntw", 0, &s), 0);
	cr_expect_eq(s.n, 1);
	cr_expect_eq(feed(&l, "o\r\nthr", 6, &s), 0);
	cr_expect_eq(feed(&l, "ee", 12, &s), 0);
	cr_expect_eq(s.n, 2);
	cr_expect_eq(waitcond_lines_flush(&l, collect, &s), 0);
	cr_expect_eq(s.n, 3);
	cr_expect_str_eq(s.lines[0], "one");
	cr_expect_eq(s.offs[0], 0);
	cr_expect_str_eq(s.lines[1], "two", "a terminal's \\r is not part of the line");
	cr_expect_eq(s.offs[1], 4);
	cr_expect_str_eq(s.lines[2], "three", "the last line without its newline, at the end");
	cr_expect_eq(s.offs[2], 9);
	cr_expect_eq(waitcond_lines_flush(&l, collect, &s), 0);
	cr_expect_eq(s.n, 3, "nothing left");
	waitcond_lines_free(&l);
}

Test(waitcond, lines_stop_at_a_match)
{
	struct waitcond_lines l = { 0 };
	struct seen s = { .stop_at = 1 };

	cr_expect_eq(feed(&l, "a\nb\nc\n", 100, &s), 1);
	cr_expect_eq(s.n, 2, "c was not looked at");
	cr_expect_str_eq(s.lines[1], "b");
	cr_expect_eq(s.offs[1], 102);
	/* An empty line is a line. */
	struct seen e = { .stop_at = -1 };
	cr_expect_eq(feed(&l, "\n\n", 0, &e), 0);
	cr_expect_eq(e.n, 2);
	cr_expect_str_eq(e.lines[0], "");
	waitcond_lines_free(&l);
}

Test(waitcond, long_lines_are_cut)
{
	struct waitcond_lines l = { 0 };
	struct seen s = { .stop_at = -1 };
	size_t big = WAITCOND_LINE_MAX + 1000;
	char *p = malloc(big + 1);

	memset(p, 'x', big);
	p[big] = '\0';
	/* Over several chunks: kept up to the bound, handed on once. */
	cr_expect_eq(feed(&l, p, 0, &s), 0);
	cr_expect_eq(s.n, 0);
	cr_expect_eq(feed(&l, "yy\nnext\n", big, &s), 0);
	cr_expect_eq(s.n, 2);
	cr_expect(s.cuts[0]);
	cr_expect_eq(l.cap <= WAITCOND_LINE_MAX, true, "memory stays bounded");
	cr_expect_str_eq(s.lines[1], "next");
	cr_expect_not(s.cuts[1]);
	/* Whole in one chunk: cut too. */
	p[big - 1] = '\n';
	s.n = 0;
	cr_expect_eq(feed(&l, p, 0, &s), 0);
	cr_expect_eq(s.n, 1);
	cr_expect(s.cuts[0]);
	free(p);
	waitcond_lines_free(&l);
}
