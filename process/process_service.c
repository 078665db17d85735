/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "process/process_service.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/errstr.h"
#include "process/budget.h"
#include "process/idem.h"
#include "process/procenv.h"
#include "process/process.h"
#include "process/session.h"
#include "process/waitfor.h"
#include "process.pb-c.h"
#include "base/state.h"
#include "base/users.h"
#include "rpc/caller.h"

/*
 * Selector lookup (pid, or the first process with the tag). Fails the call
 * (not_found; unimplemented for an empty selector) and returns NULL when
 * there is no such process.
 */
static struct process *select_or_fail(struct rpc_call *call, const Process__ProcessSelector *sel,
				      bool retained_too)
{
	struct process *p;

	if (!sel || sel->selector_case == PROCESS__PROCESS_SELECTOR__SELECTOR__NOT_SET) {
		rpc_fail(call, RPC_UNIMPLEMENTED, "invalid input type *process.ProcessSelector");
		return NULL;
	}
	if (sel->selector_case == PROCESS__PROCESS_SELECTOR__SELECTOR_PID) {
		p = process_find_pid(sel->pid, retained_too);
		if (!p)
			rpc_fail(call, RPC_NOT_FOUND, "process with pid %u not found", sel->pid);
		return p;
	}
	p = process_find_tag(sel->tag, retained_too);
	if (!p)
		rpc_fail(call, RPC_NOT_FOUND, "process with tag %s not found", sel->tag);
	return p;
}

/*
 * What a Start asks of envd itself, beside the command: its idempotency
 * key (idem.h) and its stream's output budget (budget.h), and the config
 * without the env vars that carried them (they are not the command's).
 */
struct start_ctl {
	Process__ProcessConfig config;      /* the request's, envs filtered */
	Process__ProcessConfig__EnvsEntry **envs;
	const char *key;                    /* NULL: none */
	char fp[IDEM_FP_LEN];
	uint32_t uid;
	struct budget budget;
	bool has_budget;
};

/* 0, or -1 once the call is failed. */
static int start_ctl_of(struct rpc_call *call, const Process__StartRequest *rq, const struct user *u,
			const char *cwd, const char *session, struct start_ctl *ctl)
{
	static const Process__ProcessConfig empty = PROCESS__PROCESS_CONFIG__INIT;
	const Process__ProcessConfig *c = rq->process ? rq->process : &empty;
	const char *env_key = NULL, *env_budget = NULL;
	char err[512];
	size_t n = 0;

	memset(ctl, 0, sizeof(*ctl));
	ctl->config = *c;
	ctl->envs = calloc(c->n_envs + 1, sizeof(*ctl->envs));
	if (!ctl->envs) {
		rpc_fail(call, RPC_INTERNAL, "error starting process: %s", go_strerror(ENOMEM));
		return -1;
	}
	for (size_t i = 0; i < c->n_envs; i++) {
		const char *k = c->envs[i]->key;

		if (k && strcmp(k, IDEM_ENV) == 0)
			env_key = c->envs[i]->value ? c->envs[i]->value : "";
		else if (k && strcmp(k, BUDGET_ENV) == 0)
			env_budget = c->envs[i]->value ? c->envs[i]->value : "";
		if (!idem_env_control(k))
			ctl->envs[n++] = c->envs[i];
	}
	ctl->config.envs = ctl->envs;
	ctl->config.n_envs = n;
	if (idem_key_pick(rpc_call_header(call, IDEM_HEADER), rq->idempotency_key, env_key, &ctl->key, err,
			  sizeof(err)) < 0) {
		rpc_fail(call, RPC_INVALID_ARGUMENT, "%s", err);
		return -1;
	}
	/* The field, else the env var. */
	if (rq->output_budget) {
		ctl->budget.head = rq->output_budget->head_bytes;
		ctl->budget.tail = rq->output_budget->tail_bytes;
		ctl->has_budget = true;
	} else if (env_budget) {
		if (budget_parse(env_budget, &ctl->budget, err, sizeof(err)) < 0) {
			rpc_fail(call, RPC_INVALID_ARGUMENT, "%s", err);
			return -1;
		}
		ctl->has_budget = true;
	}
	if (ctl->key) {
		struct idem_request ir = {
			.config = &ctl->config,
			.cwd = cwd,
			.pty = rq->optional_pty_case != PROCESS__START_REQUEST__OPTIONAL_PTY__NOT_SET,
			.tag = rq->optional_tag_case ? rq->tag : NULL,
			.session = session,
			.track_changes = rq->track_changes,
		};
#pragma push_macro("stdin")
#undef stdin
		ir.stdin_pipe = !rq->optional_stdin_case || rq->stdin;
#pragma pop_macro("stdin")
		ctl->uid = (uint32_t)u->uid;
		if (idem_fingerprint(&ir, ctl->fp) < 0) {
			rpc_fail(call, RPC_INTERNAL, "error starting process: %s", go_strerror(ENOMEM));
			return -1;
		}
	}
	return 0;
}

/*
 * A Start whose key was used before by this user: the same request is
 * answered as a Connect to that process (no spawn); another request is
 * already_exists. True when the call was taken care of so.
 */
static bool start_repeated(struct rpc_call *call, const struct start_ctl *ctl)
{
	struct process *p = ctl->key ? process_find_key(ctl->uid, ctl->key) : NULL;

	if (!p)
		return false;
	if (strcmp(process_key_fingerprint(p), ctl->fp) != 0) {
		rpc_fail(call, RPC_ALREADY_EXISTS,
			 "idempotency key '%s' was used for process %u, started by a different request "
			 "(command, arguments, envs, cwd, user, tag, pty, stdin, session, limits or "
			 "trackChanges differ)", ctl->key, process_pid(p));
		return true;
	}
	process_rejoin(p, call, ctl->has_budget ? &ctl->budget : NULL);
	return true;
}

static void start_spawn(struct rpc_call *call, const Process__StartRequest *rq,
			const struct start_ctl *ctl, struct user *u, const char *cwd);
static void start_in_session(struct rpc_call *call, const Process__StartRequest *rq,
			     const struct start_ctl *ctl, struct user *u, const char *name,
			     const char *cwd, bool cwd_given);

/*
 * A Start on a copy-on-write layer (docs/try.md): StartRequest.try_run, or
 * ENVD_TRY in the envs for clients that cannot set the field (the
 * unmodified SDK). Its value is a colon-separated list of directories, as
 * PATH is; empty: the command's cwd. Never exported to the command.
 */
#define TRY_ENV "ENVD_TRY"

static const char *try_env_of(const Process__StartRequest *rq)
{
	const Process__ProcessConfig *c = rq->process;

	for (size_t i = 0; c && i < c->n_envs; i++)
		if (c->envs[i]->key && strcmp(c->envs[i]->key, TRY_ENV) == 0)
			return c->envs[i]->value ? c->envs[i]->value : "";
	return NULL;
}

static bool try_of(const Process__StartRequest *rq)
{
	return rq->try_run || try_env_of(rq);
}

/*
 * The try's handle from process_try (spec->try_h), or false with the call
 * failed. The directories: the field's, else ENVD_TRY's elements.
 */
static bool try_begin(struct rpc_call *call, const Process__StartRequest *rq, const struct user *u,
		      const char *cwd, struct process_spec *spec)
{
	const char *env = try_env_of(rq);
	char *copy = NULL, *save = NULL, err[1024];
	const char **paths = NULL;
	size_t n = 0;
	enum rpc_code code;

	if (!process_try) {
		rpc_fail(call, RPC_FAILED_PRECONDITION, "error starting process: try runs are not available");
		return false;
	}
	if (rq->try_run && rq->try_run->n_paths) {
		code = process_try->begin((const char *const *)rq->try_run->paths, rq->try_run->n_paths, u, cwd,
					  &spec->try_h, err, sizeof(err));
	} else if (!rq->try_run && env && *env) {
		size_t cap = 1;

		for (const char *e = env; *e; e++)
			cap += *e == ':';
		copy = strdup(env);
		paths = calloc(cap, sizeof(*paths));
		if (!copy || !paths) {
			free(copy);
			free(paths);
			rpc_fail(call, RPC_INTERNAL, "error starting process: %s", go_strerror(ENOMEM));
			return false;
		}
		for (char *t = strtok_r(copy, ":", &save); t; t = strtok_r(NULL, ":", &save))
			paths[n++] = t;
		code = process_try->begin(paths, n, u, cwd, &spec->try_h, err, sizeof(err));
	} else {
		code = process_try->begin(NULL, 0, u, cwd, &spec->try_h, err, sizeof(err));
	}
	free(copy);
	free(paths);
	if (code != RPC_OK) {
		rpc_fail(call, code, "%s", err);
		return false;
	}
	return true;
}

/* The session a Start names (ENVD_SESSION in its envs), or NULL. */
static const char *session_of(const Process__StartRequest *rq)
{
	const Process__ProcessConfig *c = rq->process;

	if (rq->optional_session_case && rq->session && *rq->session)
		return rq->session;
	for (size_t i = 0; c && i < c->n_envs; i++)
		if (c->envs[i]->key && strcmp(c->envs[i]->key, SESSION_ENV) == 0)
			return c->envs[i]->value ? c->envs[i]->value : "";
	return NULL;
}

/*
 * Start: the user and the cwd resolved here (no syscall on the path: the
 * cwd is checked in the spawn's worker job, process_start), the key and
 * the budget taken out, a repeated key answered, the rest in start_spawn.
 */
static void do_start(struct rpc_call *call, const ProtobufCMessage *msg)
{
	const Process__StartRequest *rq = (const Process__StartRequest *)msg;
	static const Process__ProcessConfig empty = PROCESS__PROCESS_CONFIG__INIT;
	const Process__ProcessConfig *c = rq->process ? rq->process : &empty;
	const char *session = rq->optional_pty_case || !rq->process ? NULL : session_of(rq);
	struct start_ctl ctl = { 0 };
	char cwd[PATH_MAX];
	struct user *u;

	/* struct user carries PATH_MAX bytes; keep it off the loop's stack. */
	u = calloc(1, sizeof(*u));
	if (!u) {
		rpc_fail(call, RPC_INTERNAL, "error starting process: %s", go_strerror(ENOMEM));
		return;
	}
	if (caller_of(call, rq->process && c->optional_cwd_case ? c->cwd : "", u, cwd, sizeof(cwd)) < 0) {
		free(u);
		return;
	}
	if (start_ctl_of(call, rq, u, cwd, session, &ctl) < 0)
		goto out;
	if (start_repeated(call, &ctl))
		goto out;
	if (session && try_of(rq))
		rpc_fail(call, RPC_INVALID_ARGUMENT,
			 "error starting process: a try run cannot run in a shell session (%s and %s)", SESSION_ENV,
			 TRY_ENV);
	else if (session)
		start_in_session(call, rq, &ctl, u, session, cwd,
				 rq->process && c->optional_cwd_case && c->cwd && *c->cwd);
	else
		start_spawn(call, rq, &ctl, u, cwd);
out:
	free(ctl.envs);
	free(u);
}

static void start_in_session(struct rpc_call *call, const Process__StartRequest *rq,
			     const struct start_ctl *ctl, struct user *u, const char *name,
			     const char *cwd, bool cwd_given)
{
	const Process__ProcessConfig *c = &ctl->config;
	struct session_req r = { 0 };
	struct session_env *envs = calloc(c->n_envs + 1, sizeof(*envs));
	char err[1024], home[PATH_MAX];
	enum rpc_code code;

	if (!envs) {
		rpc_fail(call, RPC_INTERNAL, "error starting process: %s", go_strerror(ENOMEM));
		goto out;
	}
	for (size_t i = 0; i < c->n_envs; i++) {
		if (c->envs[i]->key && strcmp(c->envs[i]->key, SESSION_ENV) == 0)
			continue;
		envs[r.n_envs].key = c->envs[i]->key ? c->envs[i]->key : "";
		envs[r.n_envs].value = c->envs[i]->value ? c->envs[i]->value : "";
		r.n_envs++;
	}
	if (cwd_given &&
	    path_resolve(u, "", state_default_workdir(), home, sizeof(home), err, sizeof(err)) < 0)
		snprintf(home, sizeof(home), "%s", u->home);
	r.name = name;
	r.user = u;
	r.cwd = cwd_given ? cwd : NULL;
	r.home_cwd = cwd_given ? home : cwd;
	/* The request's envs are the command's, exported in the shell by
	 * session.c; the shell itself gets the user's environment. */
	r.shell_envp = procenv_for(u, NULL, 0);
	if (!r.shell_envp) {
		rpc_fail(call, RPC_INTERNAL, "error starting process: %s", go_strerror(ENOMEM));
		goto out;
	}
	r.config = c;
	r.tag = rq->optional_tag_case ? rq->tag : NULL;
#pragma push_macro("stdin")
#undef stdin
	r.stdin_pipe = !rq->optional_stdin_case || rq->stdin;
#pragma pop_macro("stdin")
	r.set_ids = geteuid() == 0 || u->uid != geteuid();
	r.timeout_ms = rpc_call_timeout_ms(call);
	r.track_changes = rq->track_changes;
	r.envs = envs;
	r.idem_key = ctl->key;
	r.idem_uid = ctl->uid;
	r.idem_fp = ctl->fp;
	r.budget = ctl->has_budget ? &ctl->budget : NULL;
	code = session_run(&r, call, err, sizeof(err));
	if (code != RPC_OK)
		rpc_fail(call, code, "%s", err);
out:
	free(envs);
}

/* The rest of Start: environment and spec, then process_start. */
static void start_spawn(struct rpc_call *call, const Process__StartRequest *rq,
			const struct start_ctl *ctl, struct user *u, const char *cwd)
{
	const Process__ProcessConfig *c = &ctl->config;
	struct process_spec spec = { 0 };
	struct procenv_kv *req = calloc(c->n_envs + 1, sizeof(*req));
	char err[1024];
	char **envp = NULL;
	enum rpc_code code;
	size_t n_req = 0;

	for (size_t i = 0; req && i < c->n_envs; i++) {
		if (c->envs[i]->key && strcmp(c->envs[i]->key, TRY_ENV) == 0)
			continue; /* envd's, not the command's */
		req[n_req].key = c->envs[i]->key;
		req[n_req].value = c->envs[i]->value;
		n_req++;
	}
	if (req)
		envp = procenv_for(u, req, n_req);
	if (!envp) {
		rpc_fail(call, RPC_INTERNAL, "error starting process: %s", go_strerror(ENOMEM));
		goto out;
	}

	spec.config = c;
	spec.tag = rq->optional_tag_case ? rq->tag : NULL;
	spec.pty = rq->optional_pty_case != PROCESS__START_REQUEST__OPTIONAL_PTY__NOT_SET;
	if (spec.pty && rq->pty && rq->pty->size) {
		spec.cols = rq->pty->size->cols;
		spec.rows = rq->pty->size->rows;
	}
	/* musl defines stdin as "(stdin)", which breaks the member access. */
#pragma push_macro("stdin")
#undef stdin
	spec.stdin_pipe = !rq->optional_stdin_case || rq->stdin;
#pragma pop_macro("stdin")
	spec.user = u;
	/* Without root only our own identity is possible; anything else fails. */
	spec.set_ids = geteuid() == 0 || u->uid != geteuid();
	spec.cwd = cwd;
	spec.envp = envp;
	spec.timeout_ms = rpc_call_timeout_ms(call);
	spec.track_changes = rq->track_changes;
	spec.idem_key = ctl->key;
	spec.idem_uid = ctl->uid;
	spec.idem_fp = ctl->fp;
	spec.budget = ctl->has_budget ? &ctl->budget : NULL;
	if (try_of(rq) && !try_begin(call, rq, u, cwd, &spec))
		goto out;
	code = process_start(&spec, call, err, sizeof(err));
	envp = NULL; /* process_start's now */
	if (code != RPC_OK)
		rpc_fail(call, code, "%s", err);
out:
	free(envp);
	free(req);
}

static void do_connect(struct rpc_call *call, const ProtobufCMessage *msg)
{
	const Process__ConnectRequest *rq = (const Process__ConnectRequest *)msg;
	struct process *p = select_or_fail(call, rq->process, true);
	struct budget b = { 0 };

	if (!p)
		return;
	if (rq->output_budget) {
		b.head = rq->output_budget->head_bytes;
		b.tail = rq->output_budget->tail_bytes;
	}
	process_subscribe(p, call, rq->optional_replay_from_case != 0, rq->replay_from,
			  rq->output_budget ? &b : NULL);
}

static void do_list(struct rpc_call *call, const ProtobufCMessage *msg)
{
	Process__ListResponse resp = PROCESS__LIST_RESPONSE__INIT;
	size_t n = process_count(), i = 0;
	Process__ProcessInfo *infos = calloc(n + 1, sizeof(*infos));
	Process__ProcessInfo **ptrs = calloc(n + 1, sizeof(*ptrs));

	if (!infos || !ptrs) {
		rpc_fail(call, RPC_INTERNAL, "error listing processes: %s", go_strerror(ENOMEM));
		goto out;
	}
	for (struct process *p = process_first(); p && i < n; p = process_next(p), i++) {
		process__process_info__init(&infos[i]);
		/* Borrowed for the encode below; rpc_reply does not keep it. */
		infos[i].config = (Process__ProcessConfig *)process_config(p);
		infos[i].pid = process_pid(p);
		if (process_tag(p)) {
			infos[i].optional_tag_case = PROCESS__PROCESS_INFO__OPTIONAL_TAG_TAG;
			infos[i].tag = (char *)process_tag(p);
		}
		infos[i].idempotency_key = (char *)process_key(p);
		ptrs[i] = &infos[i];
	}
	resp.n_processes = i;
	resp.processes = ptrs;
	rpc_reply(call, &resp.base);
out:
	free(infos);
	free(ptrs);
}

static void do_send_input(struct rpc_call *call, const ProtobufCMessage *msg)
{
	const Process__SendInputRequest *rq = (const Process__SendInputRequest *)msg;
	Process__SendInputResponse resp = PROCESS__SEND_INPUT_RESPONSE__INIT;
	struct process *p = select_or_fail(call, rq->process, false);
	const Process__ProcessInput *in = rq->input;
	enum rpc_code code;
	uint64_t taken;
	bool later;
	char err[512];

	if (!p)
		return;
	if (!in || in->input_case == PROCESS__PROCESS_INPUT__INPUT__NOT_SET) {
		rpc_fail(call, RPC_UNIMPLEMENTED, "invalid input type <nil>");
		return;
	}
	/* stdin and pty are the same union slot type; .pty reads either. */
	code = process_write_input(p, call, false, in->input_case == PROCESS__PROCESS_INPUT__INPUT_PTY,
				   in->pty.data, in->pty.len, rq->optional_offset_case != 0, rq->offset,
				   &taken, &later, err, sizeof(err));
	if (code != RPC_OK) {
		rpc_fail(call, code, "%s", err);
		return;
	}
	resp.input_offset = taken;
	if (!later) /* else answered once the process has read it all */
		rpc_reply(call, &resp.base);
}

static const struct rpc_call_hooks si_hooks;

/* StreamInput keeps the selected pid in the call's user data (0 = none). */
static void si_message(struct rpc_call *call, const ProtobufCMessage *msg)
{
	const Process__StreamInputRequest *rq = (const Process__StreamInputRequest *)msg;
	uintptr_t sel = (uintptr_t)rpc_call_ud(call);
	const Process__ProcessInput *in;
	struct process *p;
	enum rpc_code code;
	uint64_t taken;
	bool later;
	char err[512];

	switch (rq->event_case) {
	case PROCESS__STREAM_INPUT_REQUEST__EVENT_START:
		p = select_or_fail(call, rq->start ? rq->start->process : NULL, false);
		if (p)
			rpc_call_set_hooks(call, &si_hooks, (void *)(uintptr_t)process_pid(p));
		return;
	case PROCESS__STREAM_INPUT_REQUEST__EVENT_DATA:
		if (!sel) {
			rpc_fail(call, RPC_FAILED_PRECONDITION,
				 "error streaming input: a start event selecting the process must "
				 "come before data");
			return;
		}
		p = process_find_pid((uint32_t)sel, false);
		if (!p) {
			rpc_fail(call, RPC_NOT_FOUND, "process with pid %u not found", (unsigned)sel);
			return;
		}
		in = rq->data ? rq->data->input : NULL;
		if (!in || in->input_case == PROCESS__PROCESS_INPUT__INPUT__NOT_SET) {
			rpc_fail(call, RPC_UNIMPLEMENTED, "invalid input type <nil>");
			return;
		}
		/* Copied; over the bound the call is paused until stdin drains. */
		code = process_write_input(p, call, true,
					   in->input_case == PROCESS__PROCESS_INPUT__INPUT_PTY,
					   in->pty.data, in->pty.len, rq->data->optional_offset_case != 0,
					   rq->data->offset, &taken, &later, err, sizeof(err));
		if (code != RPC_OK) {
			process_input_forget(p, call);
			rpc_fail(call, code, "%s", err);
		}
		return;
	default:
		return; /* keepalive */
	}
}

/* The client left or the deadline passed: the process must forget the call. */
static void si_cancel(struct rpc_call *call, enum rpc_code why)
{
	uintptr_t sel = (uintptr_t)rpc_call_ud(call);
	struct process *p = sel ? process_find_pid((uint32_t)sel, true) : NULL;

	if (p)
		process_input_forget(p, call);
}

static void si_end(struct rpc_call *call)
{
	Process__StreamInputResponse resp = PROCESS__STREAM_INPUT_RESPONSE__INIT;
	uintptr_t sel = (uintptr_t)rpc_call_ud(call);
	struct process *p = sel ? process_find_pid((uint32_t)sel, true) : NULL;

	if (p)
		resp.input_offset = process_input_taken(p);
	rpc_reply(call, &resp.base);
}

static const struct rpc_call_hooks si_hooks = {
	.on_message = si_message,
	.on_input_end = si_end,
	.on_cancel = si_cancel,
};

static void do_stream_input(struct rpc_call *call, const ProtobufCMessage *msg)
{
	rpc_call_set_hooks(call, &si_hooks, NULL);
}

static void do_send_signal(struct rpc_call *call, const ProtobufCMessage *msg)
{
	const Process__SendSignalRequest *rq = (const Process__SendSignalRequest *)msg;
	Process__SendSignalResponse resp = PROCESS__SEND_SIGNAL_RESPONSE__INIT;
	struct process *p = select_or_fail(call, rq->process, false);
	const ProtobufCEnumValue *v;
	enum rpc_code code;
	char err[512];

	if (!p)
		return;
	/* Every named value's number is the Linux signal number. */
	v = protobuf_c_enum_descriptor_get_value(&process__signal__descriptor, (int)rq->signal);
	if (!v || rq->signal == PROCESS__SIGNAL__SIGNAL_UNSPECIFIED) {
		if (v)
			rpc_fail(call, RPC_UNIMPLEMENTED, "invalid signal: %s", v->name);
		else
			rpc_fail(call, RPC_UNIMPLEMENTED, "invalid signal: %d", (int)rq->signal);
		return;
	}
	code = process_signal(p, (int)rq->signal, err, sizeof(err));
	if (code != RPC_OK) {
		rpc_fail(call, code, "%s", err);
		return;
	}
	rpc_reply(call, &resp.base);
}

static void do_close_stdin(struct rpc_call *call, const ProtobufCMessage *msg)
{
	const Process__CloseStdinRequest *rq = (const Process__CloseStdinRequest *)msg;
	Process__CloseStdinResponse resp = PROCESS__CLOSE_STDIN_RESPONSE__INIT;
	struct process *p = select_or_fail(call, rq->process, false);
	enum rpc_code code;
	char err[512];

	if (!p)
		return;
	code = process_close_stdin(p, err, sizeof(err));
	if (code != RPC_OK) {
		rpc_fail(call, code, "%s", err);
		return;
	}
	rpc_reply(call, &resp.base);
}

static void do_update(struct rpc_call *call, const ProtobufCMessage *msg)
{
	const Process__UpdateRequest *rq = (const Process__UpdateRequest *)msg;
	Process__UpdateResponse resp = PROCESS__UPDATE_RESPONSE__INIT;
	struct process *p = select_or_fail(call, rq->process, false);
	enum rpc_code code;
	char err[512];

	if (!p)
		return;
	if (rq->optional_pty_case) {
		unsigned cols = 0, rows = 0;

		if (rq->pty && rq->pty->size) {
			cols = rq->pty->size->cols;
			rows = rq->pty->size->rows;
		}
		code = process_resize(p, cols, rows, err, sizeof(err));
		if (code != RPC_OK) {
			rpc_fail(call, code, "%s", err);
			return;
		}
	}
	rpc_reply(call, &resp.base);
}

/* ---- sessions (docs/sessions.md) ------------------------------------------ */

static void info_fill(Process__SessionInfo *pi, const struct session_info *in)
{
	process__session_info__init(pi);
	pi->name = (char *)in->name;
	pi->user = (char *)in->user;
	pi->shell_pid = (uint32_t)in->shell_pid;
	pi->cwd = (char *)in->cwd;
	pi->running_pid = in->running_pid;
	pi->queued = in->queued;
	pi->created_unix_ms = in->created_ms;
	pi->last_used_unix_ms = in->used_ms;
}

static void do_create_session(struct rpc_call *call, const ProtobufCMessage *msg)
{
	const Process__CreateSessionRequest *rq = (const Process__CreateSessionRequest *)msg;
	Process__CreateSessionResponse resp = PROCESS__CREATE_SESSION_RESPONSE__INIT;
	Process__SessionInfo pi;
	struct session_info *in = calloc(1, sizeof(*in));
	struct user *u = calloc(1, sizeof(*u));
	struct procenv_kv *req = calloc(rq->n_envs + 1, sizeof(*req));
	struct session_req r = { 0 };
	char err[1024], cwd[PATH_MAX];
	enum rpc_code code;

	if (!in || !u || !req) {
		rpc_fail(call, RPC_INTERNAL, "error creating session: %s", go_strerror(ENOMEM));
		goto out;
	}
	if (caller_of(call, rq->optional_cwd_case ? rq->cwd : "", u, cwd, sizeof(cwd)) < 0)
		goto out;
	for (size_t i = 0; i < rq->n_envs; i++) {
		req[i].key = rq->envs[i]->key ? rq->envs[i]->key : "";
		req[i].value = rq->envs[i]->value ? rq->envs[i]->value : "";
	}
	r.name = rq->name;
	r.user = u;
	r.home_cwd = cwd;
	r.set_ids = geteuid() == 0 || u->uid != geteuid();
	r.shell_envp = procenv_for(u, req, rq->n_envs);
	if (!r.shell_envp) {
		rpc_fail(call, RPC_INTERNAL, "error creating session: %s", go_strerror(ENOMEM));
		goto out;
	}
	code = session_create(&r, in, err, sizeof(err));
	if (code != RPC_OK) {
		rpc_fail(call, code, "%s", err);
		goto out;
	}
	info_fill(&pi, in);
	resp.session = &pi;
	rpc_reply(call, &resp.base);
out:
	free(in);
	free(u);
	free(req);
}

struct list_acc {
	Process__SessionInfo *infos;
	Process__SessionInfo **ptrs;
	char (*cwds)[4096];
	size_t n, cap;
};

static void list_one(void *ud, const struct session_info *in)
{
	struct list_acc *a = ud;

	if (a->n >= a->cap)
		return;
	memcpy(a->cwds[a->n], in->cwd, sizeof(a->cwds[a->n]));
	info_fill(&a->infos[a->n], in);
	a->infos[a->n].cwd = a->cwds[a->n];
	a->ptrs[a->n] = &a->infos[a->n];
	a->n++;
}

static void do_list_sessions(struct rpc_call *call, const ProtobufCMessage *msg)
{
	Process__ListSessionsResponse resp = PROCESS__LIST_SESSIONS_RESPONSE__INIT;
	struct list_acc a = { 0 };

	(void)msg;
	a.cap = session_count();
	a.infos = calloc(a.cap + 1, sizeof(*a.infos));
	a.ptrs = calloc(a.cap + 1, sizeof(*a.ptrs));
	a.cwds = calloc(a.cap + 1, sizeof(*a.cwds));
	if (!a.infos || !a.ptrs || !a.cwds) {
		rpc_fail(call, RPC_INTERNAL, "error listing sessions: %s", go_strerror(ENOMEM));
		goto out;
	}
	session_each(list_one, &a);
	resp.n_sessions = a.n;
	resp.sessions = a.ptrs;
	rpc_reply(call, &resp.base);
out:
	free(a.infos);
	free(a.ptrs);
	free(a.cwds);
}

static void do_close_session(struct rpc_call *call, const ProtobufCMessage *msg)
{
	const Process__CloseSessionRequest *rq = (const Process__CloseSessionRequest *)msg;
	Process__CloseSessionResponse resp = PROCESS__CLOSE_SESSION_RESPONSE__INIT;
	struct user *u = calloc(1, sizeof(*u));
	char err[1024];
	enum rpc_code code;

	if (!u) {
		rpc_fail(call, RPC_INTERNAL, "error closing session: %s", go_strerror(ENOMEM));
		return;
	}
	if (caller_of(call, NULL, u, NULL, 0) < 0) {
		free(u);
		return;
	}
	code = session_close(rq->name, u->uid, err, sizeof(err));
	free(u);
	if (code != RPC_OK) {
		rpc_fail(call, code, "%s", err);
		return;
	}
	rpc_reply(call, &resp.base);
}

/* ---- try runs (docs/try.md): served by the try module ---------------------- */

static void try_rpc(struct rpc_call *call, const ProtobufCMessage *msg, rpc_start_fn fn)
{
	if (!process_try || !fn) {
		rpc_fail(call, RPC_UNIMPLEMENTED, "try runs are not available");
		return;
	}
	fn(call, msg);
}

static void do_try_diff(struct rpc_call *call, const ProtobufCMessage *msg)
{
	try_rpc(call, msg, process_try ? process_try->diff : NULL);
}

static void do_commit_try(struct rpc_call *call, const ProtobufCMessage *msg)
{
	try_rpc(call, msg, process_try ? process_try->commit : NULL);
}

static void do_discard_try(struct rpc_call *call, const ProtobufCMessage *msg)
{
	try_rpc(call, msg, process_try ? process_try->discard : NULL);
}

static const struct rpc_method_impl methods[] = {
	{ "List", RPC_UNARY, do_list },
	{ "Connect", RPC_SERVER_STREAM, do_connect },
	{ "Start", RPC_SERVER_STREAM, do_start },
	{ "Update", RPC_UNARY, do_update },
	{ "StreamInput", RPC_CLIENT_STREAM, do_stream_input },
	{ "SendInput", RPC_UNARY, do_send_input },
	{ "SendSignal", RPC_UNARY, do_send_signal },
	{ "CloseStdin", RPC_UNARY, do_close_stdin },
	{ "CreateSession", RPC_UNARY, do_create_session },
	{ "ListSessions", RPC_UNARY, do_list_sessions },
	{ "CloseSession", RPC_UNARY, do_close_session },
	{ "WaitFor", RPC_UNARY, waitfor_start },
	{ "TryDiff", RPC_UNARY, do_try_diff },
	{ "CommitTry", RPC_UNARY, do_commit_try },
	{ "DiscardTry", RPC_UNARY, do_discard_try },
};

const struct rpc_service process_service = {
	.desc = &process__process__descriptor,
	.methods = methods,
	.n_methods = sizeof(methods) / sizeof(methods[0]),
};
