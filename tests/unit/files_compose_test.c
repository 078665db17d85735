/* SPDX-License-Identifier: Apache-2.0 */
/*
 * files_compose_test.c - POST /files/compose (transfer/files_compose.h)
 * driven directly, on the real worker pool, with a request of the test's
 * own transport (fakereq.h): sources concatenated into the destination
 * and removed, the errors of the body and of the checks, and a client that
 * leaves while the checks are out.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>

#include "base/loop.h"
#include "base/state.h"
#include "base/worker.h"
#include "fakereq.h"
#include "transfer/files_compose.h"
#include "testloop.h"


static char dir[] = "/tmp/files-compose-test.XXXXXX";

static void setup(void)
{
	cr_assert(mkdtemp(dir));
	state_token_clear();
}

static void teardown(void)
{
	rm_tree(dir);
}

TestSuite(files_compose, .init = setup, .fini = teardown);

static bool answered(void *arg) { return ((struct fake *)arg)->ended; }

static void put(const char *name, const char *content)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	cr_assert_eq(write(fd, content, strlen(content)), (ssize_t)strlen(content));
	close(fd);
}

static char *get(const char *name)
{
	static char buf[4096];
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	int fd = open(p, O_RDONLY);
	if (fd < 0)
		return NULL;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n < 0 ? 0 : n] = '\0';
	return buf;
}

static struct fake *compose(const char *json, bool wait)
{
	struct fake *f = fake_new(HTTP_M_POST, "/files/compose", "", "content-type", "application/json", NULL);

	files_compose(&f->r);
	fake_body(f, json, strlen(json));
	fake_body_end(f);
	if (wait)
		cr_assert(spin_until(answered, f), "answered");
	return f;
}

static char body[4 * PATH_MAX];

Test(files_compose, concatenates_and_removes_the_sources)
{
	put("a", "first,");
	put("b", "second");
	snprintf(body, sizeof(body), "{\"source_paths\":[\"%s/a\",\"%s/b\"],\"destination\":\"%s/out/ab\"}", dir, dir,
		 dir);
	struct fake *f = compose(body, true);
	cr_assert_eq(f->status, 200, "%s", f->body);
	cr_assert(strstr(f->body, "\"name\":\"ab\""), "%s", f->body);
	cr_assert_str_eq(get("out/ab"), "first,second");
	cr_assert_null(get("a"));
	cr_assert_null(get("b"));
	fake_free(f);
	cr_assert(spin_until(pool_idle, NULL));
}

Test(files_compose, errors)
{
	struct fake *f = compose("{\"source_paths\":[],\"destination\":\"/x\"}", true);
	cr_assert_eq(f->status, 400);
	cr_assert(strstr(f->body, "source_paths must not be empty"), "%s", f->body);
	fake_free(f);

	f = compose("not json", true);
	cr_assert_eq(f->status, 400);
	cr_assert(strstr(f->body, "invalid request body"), "%s", f->body);
	fake_free(f);

	snprintf(body, sizeof(body), "{\"source_paths\":[\"%s/none\"],\"destination\":\"%s/d\"}", dir, dir);
	f = compose(body, true);
	cr_assert_eq(f->status, 404);
	cr_assert(strstr(f->body, "source file not found: "), "%s", f->body);
	fake_free(f);

	snprintf(body, sizeof(body), "{\"source_paths\":[\"%s\"],\"destination\":\"%s/d\"}", dir, dir);
	f = compose(body, true);
	cr_assert_eq(f->status, 400);
	cr_assert(strstr(f->body, "source path is not a regular file"), "%s", f->body);
	fake_free(f);
}

/* Gone while the checks are out: no answer, no copy, freed on return. */
Test(files_compose, client_gone_during_the_checks)
{
	put("s", "source");
	snprintf(body, sizeof(body), "{\"source_paths\":[\"%s/s\"],\"destination\":\"%s/never\"}", dir, dir);
	struct fake *f = compose(body, false);
	fake_close(f, false);
	cr_assert(spin_until(pool_idle, NULL));
	cr_assert(!f->begun);
	cr_assert_null(get("never"), "the copy never started");
	cr_assert_str_eq(get("s"), "source");
	fake_free(f);
}
