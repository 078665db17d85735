/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "sandbox/logexport.h"

static int parse(const char *url, char *host, char *port, char *path)
{
	return logexport_parse_url(url, host, 256, port, 8, path, 512);
}

Test(logexport, parses_collector_addresses)
{
	char h[256], p[8], path[512];

	cr_assert_eq(parse("http://10.0.0.1:8080/logs", h, p, path), 0);
	cr_assert_str_eq(h, "10.0.0.1");
	cr_assert_str_eq(p, "8080");
	cr_assert_str_eq(path, "/logs");
	cr_assert_eq(parse("http://collector.local", h, p, path), 0);
	cr_assert_str_eq(h, "collector.local");
	cr_assert_str_eq(p, "80");
	cr_assert_str_eq(path, "/");
	cr_assert_eq(parse("http://[fd00::1]:9/x?y=1", h, p, path), 0);
	cr_assert_str_eq(h, "fd00::1");
	cr_assert_str_eq(p, "9");
	cr_assert_str_eq(path, "/x?y=1");
	cr_assert_eq(parse("http://h?q", h, p, path), 0);
	cr_assert_str_eq(path, "/?q");
}

Test(logexport, refuses_unusable_addresses)
{
	char h[256], p[8], path[512];

	cr_assert_eq(parse("https://h/", h, p, path), -EINVAL);
	cr_assert_eq(parse("http://", h, p, path), -EINVAL);
	cr_assert_eq(parse("http://h:/", h, p, path), -EINVAL);
	cr_assert_eq(parse("http://h:12ab/", h, p, path), -EINVAL);
	cr_assert_eq(parse("http://:80/", h, p, path), -EINVAL);
	cr_assert_eq(parse("http://[::1/", h, p, path), -EINVAL);
	cr_assert_eq(logexport_configure("ftp://x", "i", "e"), -EINVAL);
}

/* A collector nobody listens on: lines queue up, bounded, oldest dropped. */
Test(logexport, queue_is_bounded_and_drops_long_lines)
{
	unsigned long long sent, dropped, dropped0;
	size_t queued;
	char line[200];

	logexport_queue_max = 4096;
	cr_assert_eq(logexport_configure("http://127.0.0.1:1/logs", "sbx", "tpl"), 0);
	cr_assert_not_null(log_sink);
	logexport_stats(&sent, &dropped0, &queued);
	for (int i = 0; i < 200; i++) {
		snprintf(line, sizeof(line), "{\"message\":\"line %d with some padding to make it longer\"}", i);
		log_sink(line, strlen(line));
	}
	logexport_stats(&sent, &dropped, &queued);
	cr_assert_eq(sent, 0);
	cr_assert_leq(queued, 4096);
	cr_assert_gt(dropped, dropped0 + 100, "oldest lines dropped past the bound (%llu)", dropped);

	size_t big = LOGEXPORT_LINE_MAX + 10;
	char *b = malloc(big + 1);
	cr_assert_not_null(b);
	memset(b, 'x', big);
	b[0] = '{';
	b[big - 1] = '}';
	logexport_queue_max = 64u << 20;
	logexport_stats(&sent, &dropped0, &queued);
	log_sink(b, big);
	logexport_stats(&sent, &dropped, &queued);
	cr_assert_eq(dropped, dropped0 + 1, "a line over the limit is dropped");
	free(b);
}
