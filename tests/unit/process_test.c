/* SPDX-License-Identifier: Apache-2.0 */
/*
 * process_test.c - process.h, the table and each process's lifecycle,
 * with real children on the real libev loop: start, output, exit, signal,
 * retention for late Connects, eviction by tag, several subscribers and
 * their bound. Streams are real RPC calls of the process service
 * (tests/unit/wire.h); what the table holds is read through process.h.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "base/base64.h"
#include "process/procenv.h"
#include "process/process.h"
#include "process/process_service.h"
#include "wire.h"

static void setup(void)
{
	wire_setup(&process_service);
}

TestSuite(process, .init = setup, .fini = wire_teardown);

/* ---- a stream's events, gathered ---- */

struct events {
	uint32_t pid;
	char out[8192];           /* stdout and pty bytes, decoded */
	size_t out_len;
	char err[1024];           /* stderr bytes */
	size_t err_len;
	bool ended;               /* an end event came */
	json_t *end;              /* its body (a new ref), or NULL */
	char code[32];            /* the stream's error code, "" when it ended well */
	char message[512];
};

static void add_bytes(char *dst, size_t *len, size_t cap, const char *b64)
{
	char tmp[8192];
	ssize_t n = base64_decode(tmp, b64, strlen(b64));

	cr_assert_geq(n, 0);
	cr_assert_lt(*len + (size_t)n, cap);
	memcpy(dst + *len, tmp, (size_t)n);
	*len += (size_t)n;
	dst[*len] = '\0';
}

/* Read a stream's messages from the i-th on until the end of the stream. */
static void gather(struct wire *w, int i, struct events *ev)
{
	for (;; i++) {
		int flags;
		json_t *m = wire_next(w, i, &flags);
		json_t *e = json_object_get(m, "event");
		const char *s;

		if (flags & 2) {
			snprintf(ev->code, sizeof(ev->code), "%s", wire_str(m, "error.code") ?: "");
			snprintf(ev->message, sizeof(ev->message), "%s", wire_str(m, "error.message") ?: "");
			json_decref(m);
			return;
		}
		if (json_object_get(e, "start"))
			ev->pid = (uint32_t)wire_int(e, "start.pid");
		if ((s = wire_str(e, "data.stdout")) || (s = wire_str(e, "data.pty")))
			add_bytes(ev->out, &ev->out_len, sizeof(ev->out), s);
		if ((s = wire_str(e, "data.stderr")))
			add_bytes(ev->err, &ev->err_len, sizeof(ev->err), s);
		if (json_object_get(e, "end")) {
			ev->ended = true;
			ev->end = json_incref(json_object_get(e, "end"));
		}
		json_decref(m);
	}
}

/* Start a command (argv as a JSON array; `extra` more StartRequest
 * members, or ""); the stream is left open. */
static struct wire *start(const char *argv_json, const char *extra)
{
	char req[1024];
	struct wire *w = wire_open();

	snprintf(req, sizeof(req), "{\"process\":{\"cmd\":\"/bin/sh\",\"args\":%s,\"cwd\":\"/\"}%s}", argv_json,
		 extra);
	wire_request(w, "/process.Process/Start", req, true, NULL);
	return w;
}

/* The pid in the first message of a Start or Connect stream. */
static uint32_t start_pid(struct wire *w)
{
	int flags;
	json_t *m = wire_next(w, 0, &flags);
	uint32_t pid = (uint32_t)wire_int(m, "event.start.pid");

	cr_assert_eq(flags, 0, "the stream failed at once: %s", w->buf);
	cr_assert_gt(pid, 0);
	json_decref(m);
	return pid;
}

static json_t *unary(const char *method, const char *json, int *status)
{
	char path[64];

	snprintf(path, sizeof(path), "/process.Process/%s", method);
	return wire_unary(path, json, NULL, status);
}

static bool any_listed(void *ud)
{
	return process_first() != NULL;
}

static bool not_listed(void *ud)
{
	return process_find_pid((uint32_t)(uintptr_t)ud, false) == NULL;
}

/* ---- start, output, exit ---- */

Test(process, true_starts_and_ends_with_status_0)
{
	struct events ev = { 0 };
	struct wire *w = start("[\"-c\",\"true\"]", "");

	gather(w, 0, &ev);
	cr_assert_gt(ev.pid, 0);
	cr_assert(ev.ended, "no end event: %s", w->buf);
	cr_expect_str_eq(ev.code, "");
	cr_expect_str_eq(wire_str(ev.end, "status"), "exit status 0");
	cr_expect(json_is_true(json_object_get(ev.end, "exited")));
	cr_expect_null(json_object_get(ev.end, "exitCode"), "0 is the default: not sent");
	cr_expect_null(json_object_get(ev.end, "error"));
	cr_expect_eq(ev.out_len, 0);
	json_decref(ev.end);
	wire_close(w);
}

Test(process, output_then_exit_code)
{
	struct events ev = { 0 };
	struct wire *w = start("[\"-c\",\"echo x; echo y >&2; exit 3\"]", "");

	gather(w, 0, &ev);
	cr_assert(ev.ended, "no end event: %s", w->buf);
	cr_expect_str_eq(ev.out, "x\n");
	cr_expect_str_eq(ev.err, "y\n");
	cr_expect_eq(wire_int(ev.end, "exitCode"), 3);
	cr_expect_str_eq(wire_str(ev.end, "status"), "exit status 3");
	cr_expect_str_eq(wire_str(ev.end, "error"), "exit status 3");
	json_decref(ev.end);
	wire_close(w);
}

Test(process, a_signal_ends_it_with_the_signal)
{
	struct events ev = { 0 };
	struct wire *w = start("[\"-c\",\"exec sleep 600\"]", "");
	uint32_t pid = start_pid(w);
	char err[256];
	struct process *p = process_find_pid(pid, false);

	cr_assert_not_null(p, "a running command is listed");
	cr_assert_eq(process_count(), 1);
	cr_assert_eq(process_first(), p);
	cr_assert_eq(process_signal(p, SIGTERM, err, sizeof(err)), RPC_OK, "%s", err);
	gather(w, 1, &ev);
	cr_assert(ev.ended, "no end event: %s", w->buf);
	cr_expect_str_eq(wire_str(ev.end, "status"), "signal: terminated");
	cr_expect_null(json_object_get(ev.end, "exited"), "ended by a signal, not an exit");
	cr_expect_eq(wire_int(ev.end, "exitCode"), -1);
	json_decref(ev.end);
	wire_close(w);
}

Test(process, started_without_a_stream)
{
	struct user u;
	char **envp;
	char err[256];
	/* It waits for a line, so it is listed until the test sends one. */
	char *args[] = { "-c", "read a; exit 4" };
	Process__ProcessConfig c = PROCESS__PROCESS_CONFIG__INIT;
	struct process_spec s = { 0 };
	struct process *p;
	bool later;
	uint64_t taken;

	cr_assert_eq(user_lookup("root", &u, NULL, 0), 0);
	envp = procenv_for(&u, NULL, 0);
	cr_assert_not_null(envp);
	c.cmd = "/bin/sh";
	c.args = args;
	c.n_args = 2;
	s.config = &c;
	s.tag = "quiet";
	s.stdin_pipe = true;
	s.user = &u;
	s.cwd = "/";
	s.envp = envp;
	cr_assert_eq(process_start(&s, NULL, err, sizeof(err)), RPC_OK, "%s", err);
	/* Listed once the spawn job is done, retained once it ended. */
	cr_assert(wire_until(NULL, any_listed, NULL));
	p = process_first();
	uint32_t pid = process_pid(p);
	cr_expect_eq(process_count(), 1);
	cr_expect_null(process_next(p));
	cr_expect_eq(process_find_tag("quiet", false), p);
	cr_expect_str_eq(process_tag(p), "quiet");
	cr_expect_str_eq(process_config(p)->cmd, "/bin/sh");
	cr_assert_eq(process_write_input(p, NULL, false, false, (const uint8_t *)"\n", 1, false, 0, &taken, &later, err, sizeof(err)),
		     RPC_OK, "%s", err);
	cr_assert(wire_until(NULL, not_listed, (void *)(uintptr_t)pid));
	p = process_find_tag("quiet", true);
	cr_assert_not_null(p, "retained for a late Connect");
	cr_expect_eq(process_pid(p), pid);
	cr_expect_null(process_find_tag("quiet", false));
	cr_expect_eq(process_count(), 0);
}

/* ---- retention, eviction, subscribers ---- */

Test(process, retained_for_a_late_connect_by_pid_and_tag)
{
	struct events ev = { 0 }, late = { 0 }, by_tag = { 0 };
	char req[128];
	struct wire *w = start("[\"-c\",\"echo x; exit 3\"]", ",\"tag\":\"keep-me\"");

	gather(w, 0, &ev);
	wire_close(w);
	cr_assert(ev.ended);
	cr_assert(wire_until(NULL, not_listed, (void *)(uintptr_t)ev.pid));
	cr_assert_not_null(process_find_pid(ev.pid, true));

	/* A Connect after the end: the output again from offset 0, then the end. */
	w = wire_open();
	snprintf(req, sizeof(req), "{\"process\":{\"pid\":%u},\"replayFrom\":\"0\"}", ev.pid);
	wire_request(w, "/process.Process/Connect", req, true, NULL);
	gather(w, 0, &late);
	wire_close(w);
	cr_expect_eq(late.pid, ev.pid);
	cr_expect_str_eq(late.out, "x\n");
	cr_assert(late.ended);
	cr_expect_eq(wire_int(late.end, "exitCode"), 3);

	w = wire_open();
	wire_request(w, "/process.Process/Connect", "{\"process\":{\"tag\":\"keep-me\"},\"replayFrom\":\"0\"}",
		     true, NULL);
	gather(w, 0, &by_tag);
	wire_close(w);
	cr_expect_eq(by_tag.pid, ev.pid);
	cr_expect_str_eq(by_tag.out, "x\n");

	/* Not listed, and not there for the calls that need a running one. */
	int status;
	json_t *r = unary("List", "{}", &status);
	cr_expect_eq(status, 200);
	cr_expect_eq(json_array_size(json_object_get(r, "processes")), 0);
	json_decref(r);
	snprintf(req, sizeof(req), "{\"process\":{\"pid\":%u},\"signal\":\"SIGNAL_SIGKILL\"}", ev.pid);
	r = unary("SendSignal", req, &status);
	cr_expect_eq(status, 404);
	cr_expect_str_eq(wire_str(r, "code"), "not_found");
	json_decref(r);
	json_decref(ev.end);
	json_decref(late.end);
	json_decref(by_tag.end);
}

Test(process, a_new_start_with_the_tag_evicts_the_retained_one)
{
	struct events a = { 0 }, b = { 0 };
	struct wire *w = start("[\"-c\",\"echo first\"]", ",\"tag\":\"t\"");

	gather(w, 0, &a);
	wire_close(w);
	cr_assert(wire_until(NULL, not_listed, (void *)(uintptr_t)a.pid));
	cr_assert_not_null(process_find_pid(a.pid, true));
	w = start("[\"-c\",\"echo second\"]", ",\"tag\":\"t\"");
	gather(w, 0, &b);
	wire_close(w);
	cr_assert_str_eq(b.out, "second\n");
	cr_assert_neq(a.pid, b.pid);
	/* A late Connect by the tag must find the new one, not the old. */
	cr_expect_null(process_find_pid(a.pid, true), "the first is gone from the table");
	cr_expect_eq(process_pid(process_find_tag("t", true)), b.pid);
	json_decref(a.end);
	json_decref(b.end);
}

Test(process, every_subscriber_gets_the_output_and_the_end)
{
	struct events s1 = { 0 }, s2 = { 0 };
	char req[256];
	int status;
	/* Waits for a line on stdin, so the second stream is there first. */
	struct wire *w1 = start("[\"-c\",\"read a; echo got $a; exit 5\"]", "");
	uint32_t pid = start_pid(w1);
	struct wire *w2 = wire_open();

	snprintf(req, sizeof(req), "{\"process\":{\"pid\":%u}}", pid);
	wire_request(w2, "/process.Process/Connect", req, true, NULL);
	cr_assert_eq(start_pid(w2), pid);
	snprintf(req, sizeof(req), "{\"process\":{\"pid\":%u},\"input\":{\"stdin\":\"aGkK\"}}", pid);
	json_t *r = unary("SendInput", req, &status);
	cr_assert_eq(status, 200, "SendInput: %s", json_dumps(r, 0));
	json_decref(r);
	gather(w1, 1, &s1);
	gather(w2, 1, &s2);
	cr_expect_str_eq(s1.out, "got hi\n");
	cr_expect_str_eq(s2.out, "got hi\n");
	cr_assert(s1.ended && s2.ended);
	cr_expect_eq(wire_int(s1.end, "exitCode"), 5);
	cr_expect_eq(wire_int(s2.end, "exitCode"), 5);
	json_decref(s1.end);
	json_decref(s2.end);
	wire_close(w1);
	wire_close(w2);
}

Test(process, streams_per_process_are_bounded)
{
	struct events ev = { 0 };
	char req[128];
	struct wire *w1, *w2;
	uint32_t pid;

	process_max_subs = 1;
	w1 = start("[\"-c\",\"exec sleep 600\"]", "");
	pid = start_pid(w1);
	w2 = wire_open();
	snprintf(req, sizeof(req), "{\"process\":{\"pid\":%u}}", pid);
	wire_request(w2, "/process.Process/Connect", req, true, NULL);
	gather(w2, 0, &ev);
	cr_expect_str_eq(ev.code, "resource_exhausted");
	snprintf(req, sizeof(req), "process %u already has 1 attached streams", pid);
	cr_expect_str_eq(ev.message, req);
	wire_close(w2);
	/* The first stream is not disturbed: it gets the end of a kill. */
	char err[128];
	cr_assert_eq(process_signal(process_find_pid(pid, false), SIGKILL, err, sizeof(err)), RPC_OK);
	memset(&ev, 0, sizeof(ev));
	gather(w1, 1, &ev);
	cr_expect_str_eq(wire_str(ev.end, "status"), "signal: killed");
	json_decref(ev.end);
	wire_close(w1);
}
