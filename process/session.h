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
 * command's exit status. Nothing is polled. With cgroups each command has
 * a leaf of its own (process_attach) and the shell, which lives in a leaf
 * of the session's, is moved into it for the time the command runs: usage,
 * limits, the kill and trackChanges are the leaf's, as for any Start.
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
#include <sys/types.h>

#include "process.pb-c.h"
#include "rpc/rpc.h"

struct user;
struct budget;

#define SESSION_QUEUE_MAX 64      /* commands in one session, the running one included */
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
	bool track_changes;           /* the end event lists its changes */
	const struct session_env *envs; /* for this command only */
	size_t n_envs;
	/* As process_spec's: the command's idempotency key (NULL: none), its
	 * user and request fingerprint, and the Start stream's output budget. */
	const char *idem_key;
	uint32_t idem_uid;
	const char *idem_fp;
	const struct budget *budget;
};

/*
 * Queue the command in its session (starting the shell when there is
 * none) and subscribe `call` to it: RPC_OK (the start event is sent), or
 * a code with the message in err (invalid_argument for a bad name or
 * env key, resource_exhausted for a full queue or too many sessions).
 */
enum rpc_code session_run(const struct session_req *r, struct rpc_call *call, char *err,
			  size_t errlen);

/* Seconds a session may sit without commands before it is closed
   (flag -session-idle-timeout); 0: never. */
extern double session_idle_s;

struct session_info {
	const char *name, *user;  /* valid until the loop runs again */
	int shell_pid;            /* 0 while the shell starts */
	char cwd[4096];           /* the shell's current directory */
	uint32_t running_pid;     /* 0: none */
	unsigned queued;          /* waiting behind the running one */
	int64_t created_ms, used_ms; /* Unix time */
};

/*
 * Start session r->name of r->user (r->home_cwd, r->shell_envp with its
 * envs; the command fields unused) and describe it in *info. RPC_OK, or
 * already_exists, invalid_argument, resource_exhausted (err).
 */
enum rpc_code session_create(const struct session_req *r, struct session_info *info, char *err,
			     size_t errlen);
/* Every open session, any order. */
void session_each(void (*fn)(void *ud, const struct session_info *in), void *ud);
size_t session_count(void);
/* End the shell of session `name` of uid, its jobs and the commands
   waiting in it (they end as killed). RPC_OK or not_found. */
enum rpc_code session_close(const char *name, uid_t uid, char *err, size_t errlen);

/*
 * At start: remove the session directories of envd processes that no
 * longer run (a crash or a kill left them, with the last command's file,
 * which may carry a secret). Directories are named by envd's pid, so a
 * live upgrade's (same pid) stay. The removal runs on the worker pool.
 * Returns the number of directories handed over.
 */
size_t session_sweep(void);

/* envd is stopping (the loop has ended): idle shells end, and the
   sessions' cgroup leaves go to the cgroup module to be removed
   (before pcg_shutdown). */
void session_shutdown(void);

/* ---- live upgrade (process/session_handover.c) --------------------------
 *
 * The shell keeps running over the exec (it is envd's child either way);
 * its command and status pipes and the descriptors held for background
 * jobs are inherited. A command running at the upgrade goes on in its
 * shell, but its stream is not carried (the upgrade ends every stream): its
 * output is read and dropped, its status awaited before the next command.
 * Commands waiting in the queue are not carried (their Starts end too).
 */
struct session_snapshot {
	const char *name, *user;
	uid_t uid;
	bool set_ids;
	const char *home_cwd;
	char *const *envp;        /* NULL-terminated */
	size_t n_envp;
	const char *dir, *nonce;
	unsigned long id, seq;
	int pid, cmd_fd, st_fd;
	bool ready;
	int64_t created_ms, used_ms;
	bool busy, busy_started;
	const int *keep_fds;
	size_t n_keep_fds;
	int busy_in_fd;           /* -1: none */
};

/* Call fn for every live session (fn keeps what it needs: the pointers
   are valid during the call). */
void session_snapshot_each(void (*fn)(void *ud, const struct session_snapshot *s), void *ud);

/* Re-create a session from a record. Returns 0 or -errno (the caller
   closes the descriptors then). */
int session_adopt(const struct session_snapshot *s);

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
