/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rpc_caller_test.c - the caller context (rpc/caller.h): who a call runs
 * as and how its paths resolve, first as the pure core, then through the
 * real process and filesystem services (tests/unit/wire.h): the same bad
 * user or path must get the same code and message from every handler that
 * takes one, and the same good path must land in the same place.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "base/base64.h"
#include "fs/fs_service.h"
#include "process/process_service.h"
#include "rpc/caller.h"
#include "wire.h"

static char home[] = "/tmp/envd-caller-home-XXXXXX";

/* root's home is a fresh directory with a "sub" in it; "bad" has an
 * entry whose uid does not parse. */
static void setup(void)
{
	char path[PATH_MAX];
	int fd;

	wire_setup(&process_service);
	rpc_register(&fs_service);
	cr_assert_not_null(mkdtemp(home));
	snprintf(path, sizeof(path), "%s/sub", home);
	cr_assert_eq(mkdir(path, 0755), 0);
	fd = open(wire_passwd, O_WRONLY | O_TRUNC);
	cr_assert_geq(fd, 0);
	dprintf(fd, "root:x:0:0:root:%s:/bin/sh\nuser:x:1000:1000::/home/user:/bin/sh\n"
		    "bad:x:notanumber:0::/:/bin/sh\n", home);
	close(fd);
	state_set_default_user("root");
	state_set_default_workdir("");
}

static void teardown(void)
{
	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", home);
	cr_expect_eq(system(cmd), 0);
	wire_teardown();
}

/* A path a handler may act on harmlessly should the step under test let
 * it through: under the test's own home, missing. */
static const char *scratch(void)
{
	static char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s/sub/missing/x", home);
	return p;
}

TestSuite(caller, .init = setup, .fini = teardown);

/* ---- the core ---- */

static enum rpc_code resolve(const struct user *basic, const char *basic_error, const char *path,
			     struct user *u, char *out, char *err)
{
	return caller_resolve(basic, basic_error, path, u, out, PATH_MAX, err, 512);
}

Test(caller, the_basic_user_else_the_default_one)
{
	struct user basic, u;
	char out[PATH_MAX], err[512];

	cr_assert_eq(user_lookup("user", &basic, NULL, 0), 0);
	cr_assert_eq(resolve(&basic, NULL, NULL, &u, out, err), RPC_OK);
	cr_expect_str_eq(u.name, "user");
	cr_expect_eq(u.uid, 1000);
	cr_assert_eq(resolve(NULL, NULL, NULL, &u, out, err), RPC_OK);
	cr_expect_str_eq(u.name, "root");
	cr_expect_str_eq(u.home, home);
}

Test(caller, default_user_failures)
{
	struct user u;
	char out[PATH_MAX], err[512];

	state_set_default_user("ghost");
	cr_expect_eq(resolve(NULL, NULL, "x", &u, out, err), RPC_UNAUTHENTICATED);
	cr_expect_str_eq(err, "invalid default user: 'ghost'");
	state_set_default_user("");
	cr_expect_eq(resolve(NULL, NULL, "x", &u, out, err), RPC_UNAUTHENTICATED);
	cr_expect_str_eq(err, "no user specified");
	state_set_default_user("bad");
	cr_expect_eq(resolve(NULL, NULL, "x", &u, out, err), RPC_INTERNAL);
	cr_expect(strstr(err, "error parsing uid 'notanumber'"), "%s", err);
	/* The router's message for a Basic user whose entry does not parse. */
	cr_expect_eq(resolve(NULL, "error parsing uid 'x': bad", "x", &u, out, err), RPC_INTERNAL);
	cr_expect_str_eq(err, "error parsing uid 'x': bad");
}

Test(caller, paths)
{
	struct user u;
	char out[PATH_MAX], err[512], want[PATH_MAX + 16], longp[PATH_MAX + 8];

	cr_assert_eq(resolve(NULL, NULL, "", &u, out, err), RPC_OK);
	cr_expect_str_eq(out, home, "empty: home without a default workdir");
	cr_assert_eq(resolve(NULL, NULL, "sub/../sub/", &u, out, err), RPC_OK);
	snprintf(want, sizeof(want), "%s/sub", home);
	cr_expect_str_eq(out, want, "relative: joined to home and cleaned");
	cr_assert_eq(resolve(NULL, NULL, "~/sub", &u, out, err), RPC_OK);
	cr_expect_str_eq(out, want);
	cr_assert_eq(resolve(NULL, NULL, "/a//b/../", &u, out, err), RPC_OK);
	cr_expect_str_eq(out, "/a//b/../", "absolute: as given");
	state_set_default_workdir("/srv");
	cr_assert_eq(resolve(NULL, NULL, "", &u, out, err), RPC_OK);
	cr_expect_str_eq(out, "/srv");
	cr_assert_eq(resolve(NULL, NULL, "x", &u, out, err), RPC_OK);
	snprintf(want, sizeof(want), "%s/x", home);
	cr_expect_str_eq(out, want, "relative: home, not the workdir");
	cr_expect_eq(resolve(NULL, NULL, "~bob/x", &u, out, err), RPC_INVALID_ARGUMENT);
	cr_expect_str_eq(err, "failed to expand path '~bob/x' for user 'root': cannot expand user-specific home dir");
	memset(longp, 'a', sizeof(longp) - 1);
	longp[0] = '/';
	longp[sizeof(longp) - 1] = '\0';
	cr_expect_eq(resolve(NULL, NULL, longp, &u, out, err), RPC_INVALID_ARGUMENT);
	cr_expect(strncmp(err, "path too long: /aaa", 19) == 0, "%s", err);
}

/* ---- the same answer from every service ---- */

/* The code and message a call ended with ("" for a success), unary or
 * streaming. */
static void answer(const char *path, const char *json, bool stream, const char *auth, char *code,
		   char *msg)
{
	json_t *r;
	int status;

	code[0] = msg[0] = '\0';
	if (!stream) {
		r = wire_unary(path, json, auth, &status);
		if (status != 200) {
			snprintf(code, 32, "%s", wire_str(r, "code") ?: "?");
			snprintf(msg, 8192, "%s", wire_str(r, "message") ?: "?");
		}
		json_decref(r);
		return;
	}
	struct wire *w = wire_open();
	int flags;

	wire_request(w, path, json, true, auth);
	for (int i = 0;; i++) {
		r = wire_next(w, i, &flags);
		if (flags & 2) {
			snprintf(code, 32, "%s", wire_str(r, "error.code") ?: "");
			snprintf(msg, 8192, "%s", wire_str(r, "error.message") ?: "");
			json_decref(r);
			break;
		}
		json_decref(r);
		if (i == 0)
			break; /* it started: the caller step passed */
	}
	wire_close(w);
}

/*
 * Every handler that takes the caller and a path, with `p` as that path:
 * each must answer want_code, and the same message, which starts with
 * want_msg (RPC messages are cut at 1 KiB).
 */
static void each_handler(const char *p, const char *auth, const char *want_code, const char *want_msg)
{
	static const struct {
		const char *path, *fmt;
		bool stream;
	} h[] = {
		{ "/filesystem.Filesystem/Stat", "{\"path\":\"%s\"}", false },
		{ "/filesystem.Filesystem/ListDir", "{\"path\":\"%s\"}", false },
		{ "/filesystem.Filesystem/MakeDir", "{\"path\":\"%s\"}", false },
		{ "/filesystem.Filesystem/Remove", "{\"path\":\"%s\"}", false },
		{ "/filesystem.Filesystem/Move", "{\"source\":\"%s\",\"destination\":\"/nonexistent\"}", false },
		{ "/filesystem.Filesystem/Move", "{\"source\":\"/nonexistent\",\"destination\":\"%s\"}", false },
		{ "/filesystem.Filesystem/WatchDir", "{\"path\":\"%s\"}", true },
		{ "/filesystem.Filesystem/CreateWatcher", "{\"path\":\"%s\"}", false },
		{ "/filesystem.Filesystem/Edit", "{\"path\":\"%s\",\"edits\":[{\"oldText\":\"x\",\"newText\":\"y\"}]}", false },
		{ "/process.Process/Start", "{\"process\":{\"cmd\":\"/bin/true\",\"cwd\":\"%s\"}}", true },
		{ "/process.Process/CreateSession", "{\"name\":\"s\",\"cwd\":\"%s\"}", false },
	};
	static char json[2 * PATH_MAX], code[32], msg[8192], first[8192];

	for (size_t i = 0; i < sizeof(h) / sizeof(h[0]); i++) {
		snprintf(json, sizeof(json), h[i].fmt, p);
		answer(h[i].path, json, h[i].stream, auth, code, msg);
		cr_expect_str_eq(code, want_code, "%s %.60s", h[i].path, json);
		cr_expect(strncmp(msg, want_msg, strlen(want_msg)) == 0, "%s %.60s: %.200s", h[i].path, json, msg);
		if (i == 0)
			snprintf(first, sizeof(first), "%s", msg);
		cr_expect_str_eq(msg, first, "%s %.60s", h[i].path, json);
	}
}

Test(caller, a_home_of_someone_else_is_the_same_error_everywhere)
{
	each_handler("~bob/x", NULL, "invalid_argument",
		     "failed to expand path '~bob/x' for user 'root': cannot expand user-specific home dir");
}

Test(caller, a_path_too_long_is_the_same_error_everywhere)
{
	static char p[PATH_MAX + 100];

	memset(p, 'a', sizeof(p) - 1);
	p[0] = '/';
	p[sizeof(p) - 1] = '\0';
	each_handler(p, NULL, "invalid_argument", "path too long: /aaaaaaaa");
}

Test(caller, a_bad_default_user_is_the_same_error_everywhere)
{
	char code[32], msg[8192];

	state_set_default_user("ghost");
	each_handler(scratch(), NULL, "unauthenticated", "invalid default user: 'ghost'");
	answer("/process.Process/CloseSession", "{\"name\":\"s\"}", false, NULL, code, msg);
	cr_expect_str_eq(code, "unauthenticated");
	cr_expect_str_eq(msg, "invalid default user: 'ghost'");
}

Test(caller, a_basic_user_whose_entry_does_not_parse_is_internal_everywhere)
{
	char auth[64], b64[16];

	base64_encode(b64, "bad:", 4);
	snprintf(auth, sizeof(auth), "Basic %s", b64);
	each_handler(scratch(), auth, "internal", "error parsing uid 'notanumber': strconv.ParseUint: parsing "
					       "\"notanumber\": invalid syntax");
}

/* A relative path lands under home for the filesystem and for a command. */
Test(caller, the_same_path_resolves_to_the_same_place)
{
	json_t *r;
	int status, flags;
	char want[PATH_MAX + 16];
	struct wire *w;

	snprintf(want, sizeof(want), "%s/sub", home);
	r = wire_unary("/filesystem.Filesystem/Stat", "{\"path\":\"sub\"}", NULL, &status);
	cr_assert_eq(status, 200, "%s", json_dumps(r, 0));
	cr_expect_str_eq(wire_str(r, "entry.path"), want);
	json_decref(r);

	w = wire_open();
	wire_request(w, "/process.Process/Start", "{\"process\":{\"cmd\":\"/bin/pwd\",\"cwd\":\"sub\"}}", true, NULL);
	for (int i = 0;; i++) {
		r = wire_next(w, i, &flags);
		cr_assert_eq(flags, 0, "the start failed: %s", w->buf);
		const char *out = wire_str(r, "event.data.stdout");
		if (out) {
			char dec[PATH_MAX + 16];
			ssize_t n = base64_decode(dec, out, strlen(out));
			cr_assert_gt(n, 0);
			dec[n - 1] = '\0'; /* the newline */
			cr_expect_str_eq(dec, want);
			json_decref(r);
			break;
		}
		json_decref(r);
	}
	wire_close(w);
}
