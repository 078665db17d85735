/* SPDX-License-Identifier: Apache-2.0 */
/*
 * session.h - persistent shells: commands that share one long-lived shell
 * per (user, name), so that cd, export, variables, functions, aliases,
 * umask and options carry over from one command to the next
 * (docs/sessions.md).
 *
 * A session is one bash (sh where there is no bash) started as the user
 * with a login environment, reading command lines from a pipe that only
 * envd writes. A command is a process-table entry like any other
 * (process_attach): its own stdin, stdout and stderr are FIFOs in a private
 * directory of the session under /run that the shell opens for it, so
 * output streams as it is written; the shell reports on a status pipe (fd 3,
 * hidden from the command) the moment it has opened them and then the
 * command's exit status. Nothing is polled.
 *
 * Commands of one session run one at a time in arrival order, at most
 * SESSION_QUEUE_MAX waiting. A signal (SendSignal, the Start's deadline)
 * goes to the processes the command started, and a trap in the shell ends
 * the rest of the command at the next step: the session lives on. `exit`
 * ends the shell: the command ends with its status, background jobs (the
 * shell's process group) are killed, and the next command of that name
 * starts a new shell.
 *
 * Everything runs on envd_loop.
 */
#ifndef PROCESS_SESSION_H
#define PROCESS_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "process.pb-c.h"
#include "rpc/rpc.h"

struct user;

#define SESSION_QUEUE_MAX 64      /* commands waiting in one session */
#define SESSION_MAX 256           /* sessions in all */
#define SESSION_NAME_MAX 64
/* The env var that puts a Start into a session (the SDKs can set envs). */
#define SESSION_ENV "ENVD_SESSION"

struct session_env {
	const char *key, *value;
};

struct session_req {
	const char *name;             /* checked by session_run */
	const struct user *user;
	const char *cwd;              /* the command's own cwd, or NULL: the session's */
	const char *home_cwd;         /* where a new session starts */
	char **shell_envp;            /* a new session's environment; taken (freed) */
	const Process__ProcessConfig *config;
	const char *tag;              /* NULL: none */
	bool stdin_pipe;
	bool set_ids;
	int64_t timeout_ms;
	const struct session_env *envs; /* for this command only */
	size_t n_envs;
};

/*
 * Queue the command in its session (starting the shell when there is
 * none) and subscribe `call` to it: RPC_OK (the start event is sent), or
 * a code with the message in err (invalid_argument for a bad name or
 * env key, resource_exhausted for a full queue or too many sessions).
 */
enum rpc_code session_run(const struct session_req *r, struct rpc_call *call, char *err,
			  size_t errlen);

/* True when `name` is a valid session name (1..SESSION_NAME_MAX of
   [A-Za-z0-9._-]). */
bool session_name_ok(const char *name);

/* The command line a session runs for this config: the text of
   `/bin/bash -l -c TEXT` (the SDK's shape), else cmd and args quoted.
   Heap string or NULL (out of memory). */
char *session_command_text(const Process__ProcessConfig *c);

/* Append `s` single-quoted for the shell to out (capacity cap); returns
   the length it needs (like snprintf). */
size_t session_quote(char *out, size_t cap, const char *s);

#endif
