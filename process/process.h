/* SPDX-License-Identifier: Apache-2.0 */
/*
 * process.h - one started command: its child, output ring, input, and the
 * streams subscribed to it (docs/protocol.md, "process.Process").
 *
 * Output path: the child's pipes (or PTY master) are read in >= 64 KiB
 * chunks into one reused buffer and appended to the process's ring
 * (ring.h); every subscriber is a cursor into that ring and is sent data
 * while its RPC send queue is below RPC_SEND_HIGH, resuming from
 * on_writable. So:
 *   - with no subscriber, output still goes into the ring (kept for replay);
 *   - a slow subscriber never holds up a faster one or the child: when its
 *     cursor is evicted from the ring it is ended with resource_exhausted
 *     (or, if it asked for replay, told about the gap and moved on);
 *   - the child is paced only while *every* subscriber is more than half a
 *     ring behind (so a lone reader gets complete output, as with a plain
 *     pipe); if none of them makes progress for 10 s (OUTPUT_STALL_S in
 *     output.h) they are dropped and reading resumes, so a dead peer
 *     cannot wedge the process.
 *
 * The decisions themselves are the pure functions of fanout.h.
 *
 * End: the end event is built once the child is reaped and its output
 * reached EOF, or PROCESS_GRACE_S after the reap when a descendant still
 * holds the output open (the process then stays listed until EOF). Each
 * subscriber gets all data up to that point, then the end event. After EOF
 * the process leaves the table and is retained PROCESS_RETAIN_S seconds
 * for late Connects, with its ring; the rings of all retained processes
 * together are held to max(16 MiB, 8 x process_ring_size), oldest dropped
 * first.
 *
 * Signals go to the process group (pipes) or to every member of the
 * session (PTY: an interactive shell gives each job its own group);
 * SIGKILL, when the command has a cgroup of its own (cgroup.h), empties
 * that cgroup instead, so nothing that left the group survives it. The
 * end event carries the command's resource usage.
 *
 * Everything runs on envd_loop.
 *
 * Errors: this module is the process service's RPC edge: the entry points
 * stream to an rpc_call and return an enum rpc_code with the message in err;
 * the modules below it (spawn, ring, ptable, procenv, waitstatus) return
 * negative errno values (docs/architecture.md, "Errors").
 */
#ifndef PROCESS_PROCESS_H
#define PROCESS_PROCESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "process.pb-c.h"
#include "process/budget.h"
#include "process/endreason.h"
#include "rpc/rpc.h"

struct user;
struct process;

/* Per-process output ring budget in bytes (flag -output-buffer). */
extern size_t process_ring_size;

#define PROCESS_RETAIN_S 30.0
#define PROCESS_GRACE_S 2.0
/* Streams attached to one process at once (flag -max-process-streams). */
extern unsigned process_max_subs;

struct process_spec {
	const Process__ProcessConfig *config; /* copied */
	const char *tag;                      /* NULL: none; copied */
	bool pty;
	unsigned cols, rows;
	bool stdin_pipe;                      /* pipes mode: keep a stdin pipe */
	const struct user *user;
	bool set_ids;                         /* apply the user's uid/gids */
	const char *cwd;                      /* resolved and checked */
	char **envp;                          /* one heap block; taken */
	int64_t timeout_ms;                   /* > 0: SIGKILL the group then */
	bool track_changes;                   /* the end event lists the command's changes */
	/* Its idempotency key (idem.h; NULL: none), scoped to idem_uid, and
	 * the fingerprint of the request (copied). */
	const char *idem_key;
	uint32_t idem_uid;
	const char *idem_fp;
	const struct budget *budget;          /* the Start stream's (NULL: none) */
	void *try_h;                          /* a try run's handle (process_try), or NULL; taken */
};

/*
 * Spawn, register and subscribe `call` (Start stream; start event sent).
 * The spawn runs in a worker job (the child's chdir and exec may hang on a
 * mount): RPC_OK means it is under way and the call will be answered
 * when it is done: the start event, the spawn's error (invalid_argument),
 * or deadline_exceeded naming the command (or the cwd) when the child did
 * not exec within the call's deadline (-fs-timeout without one); that
 * child is killed. Any other return: nothing is registered, the call is
 * untouched, and the message is in err. Takes s->envp (frees it).
 */
enum rpc_code process_start(const struct process_spec *s, struct rpc_call *call, char *err,
			    size_t errlen);

/* Starts whose spawn job is not done yet (the upgrade waits for them). */
unsigned process_spawns_in_flight(void);

/*
 * Called on the loop whenever a client starts a process or writes to one
 * (the moments after which a new server tends to listen); NULL: none.
 * The port forwarder uses it to look for listeners at its fast pace.
 */
void process_on_activity(void (*fn)(void));

/* Lookups by pid or tag (first match): listed processes first;
   `retained_too` for Connect. */
struct process *process_find_pid(uint32_t pid, bool retained_too);
struct process *process_find_tag(const char *tag, bool retained_too);

/*
 * The process started with idempotency key `key` by user `uid`: listed,
 * retained, or still being spawned. A key lives as long as its process's
 * table entry (docs/protocol.md, "Idempotent Start"). NULL: none.
 */
struct process *process_find_key(uint32_t uid, const char *key);
/* Its key ("" without one) and its request's fingerprint. */
const char *process_key(const struct process *p);
const char *process_key_fingerprint(const struct process *p);

/*
 * Answer a repeated Start (`call`, a Start stream) as a Connect to p:
 * start{pid}, its output from offset 0 (gap events for what the ring
 * dropped), its end when it has ended; with `b`, that output budget. A
 * spawn still under way is waited for: the call then gets the spawn's
 * error if it fails. Fails the call with resource_exhausted when
 * process_max_subs streams are attached already.
 */
void process_rejoin(struct process *p, struct rpc_call *call, const struct budget *b);

/* Listed processes in start order; NULL at the end. */
struct process *process_first(void);
struct process *process_next(const struct process *p);
size_t process_count(void);

uint32_t process_pid(const struct process *p);
const char *process_tag(const struct process *p);
const Process__ProcessConfig *process_config(const struct process *p);

/*
 * Attach a Connect stream: sends start{pid}, then data from `from`
 * (when `replay`; clamped to the retained range with a gap event) or from
 * now on, then end; with `b` (NULL: none) that output budget from where
 * it starts. Fails the call with resource_exhausted when
 * process_max_subs streams are already attached.
 */
void process_subscribe(struct process *p, struct rpc_call *call, bool replay, uint64_t from,
		       const struct budget *b);

/* The rest return RPC_OK or a code with the spec's message in err. */
/* A client's SendSignal (its end's reason says so when it dies of it). */
enum rpc_code process_signal(struct process *p, int sig, char *err, size_t errlen);
/*
 * Whoever sends p `sig` next, on envd's behalf (a session that is closed),
 * notes it first: if p dies of that signal, its end's reason names it.
 * `session` (may be NULL) names the session.
 */
void process_kill_note(struct process *p, int sig, enum endreason_by by, const char *session);
/*
 * Input to the process's stdin (SendInput, StreamInput) with back-pressure.
 * Bytes the pipe does not take at once wait in order; owned copies are
 * bounded by 4 MiB (STDIN_QUEUE_MAX in stdin.h):
 *   - `stream` (a StreamInput call): the message is copied, and when the
 *     bound is exceeded the call is paused (rpc_call_pause_input) until
 *     the pipe drains below half of it;
 *   - unary (`call` is a SendInput): if the rest does not fit the bound,
 *     the request's own bytes are written as the process reads and *later
 *     is set: the call is answered here once all is written (or failed
 *     with the write error when the reader goes away), not by the caller.
 * `call` may be NULL (copy, as for a small write).
 */
/*
 * `off` (when `has_off`) is where data starts in the process's input,
 * counted from 0 over every byte it has taken (written, or queued to be,
 * in order): bytes before what it has taken are dropped (a retried write
 * is not doubled), an offset past it is out_of_range (the bytes between
 * are missing). *taken is then the count after this write.
 */
enum rpc_code process_write_input(struct process *p, struct rpc_call *call, bool stream,
				  bool to_pty, const uint8_t *data, size_t n, bool has_off,
				  uint64_t off, uint64_t *taken, bool *later, char *err, size_t errlen);
/* Bytes of input p has taken so far (the offset of the next byte). */
uint64_t process_input_taken(const struct process *p);
/* A StreamInput call is ending: drop it from p's paused list. */
void process_input_forget(struct process *p, struct rpc_call *call);
enum rpc_code process_close_stdin(struct process *p, char *err, size_t errlen);
enum rpc_code process_resize(struct process *p, unsigned cols, unsigned rows, char *err,
			     size_t errlen);

/* ---- observers of one process (WaitFor: process/waitfor.c) ---------------
 *
 * A watch is told when output was appended to the process's ring, when
 * its end is complete (the end event's fields are final: the moment
 * subscribers get it), and when the process is freed (the watch is
 * dropped then, and `gone` is its last call). A callback may unwatch its
 * own watch, never another's. Everything runs on envd_loop.
 */
struct ring;

struct process_watch {
	struct process_watch *next;
	void (*appended)(struct process_watch *w, struct process *p);
	void (*ended)(struct process_watch *w, struct process *p);
	void (*gone)(struct process_watch *w, struct process *p);
};
void process_watch(struct process *p, struct process_watch *w);
void process_unwatch(struct process *p, struct process_watch *w);
/* Its output ring (ring.h), valid until the next callback returns. */
const struct ring *process_ring(const struct process *p);
/* Its end is complete (the end event has been, or is being, sent). */
bool process_ended(const struct process *p);
/*
 * The end event as subscribers get it, into *end, with *use and *why as
 * its storage (strings borrowed from p until it is freed).
 */
void process_end_event(struct process *p, Process__ProcessEvent__EndEvent *end,
		       Process__ResourceUsage *use, Process__EndReason *why, char *words,
		       size_t wlen);

/* ---- attached commands (process/session.c) --------------------------------
 *
 * A command that is not a child of envd: a session's shell runs it and
 * tells its end. Its stdin/stdout/stderr are descriptors envd holds (here
 * the FIFOs the shell opens for it); everything else (ring, subscribers,
 * input, deadline, List/Connect) is as for a started command.
 */
struct pcg_leaf;

struct process_attach_ops {
	/* Deliver `sig` to the command's processes (not to what runs it):
	 * 0 or -errno (-ESRCH: it is gone). */
	int (*signal)(void *ud, int sig);
	/* At the exit: an output read end still open (a background job of the
	 * command holds the write end); the callee owns it now. */
	void (*keep_fd)(void *ud, int fd);
};

/*
 * Register an attached command under `pid` (a number no real process has)
 * with fds {stdin write end or -1, stdout, stderr read ends} (taken, also
 * on failure: no), and subscribe `call` (start event sent) when not NULL.
 * ops are called until process_attach_exit. It gets a cgroup leaf of its
 * own with the config's limits, as a started command does (none without
 * cgroups, or when tagged `_system`); whoever runs it puts the processes
 * there (process_attach_leaf). track_changes registers it with the change
 * tracker under that leaf (cwd, may be NULL, is where it runs). The spec's
 * user, envp and pty are not used. RPC_OK with *out, or a code and err
 * (the fds are then still the caller's): failed_precondition for limits
 * that cannot be applied, unavailable while the workload is frozen.
 */
enum rpc_code process_attach(const struct process_spec *s, uint32_t pid, const int fds[3],
			     const struct process_attach_ops *ops, void *ud, struct rpc_call *call,
			     struct process **out, char *err, size_t errlen);
/* The command ended with wait status `wstatus`: the output already in its
 * pipes is taken, the rest of the descriptors go to ops->keep_fd, and the
 * end event follows. No op is called after this. */
void process_attach_exit(struct process *p, int wstatus);
/* It begins to run now (its wall time counts from here, not from the
   queue). */
void process_attach_running(struct process *p);
/* CPU time it used, for the end event's usage (before process_attach_exit). */
void process_attach_usage(struct process *p, uint64_t user_us, uint64_t sys_us);
/*
 * Call fn(ud) once its end is complete (after process_attach_exit: the
 * usage read from its leaf, the change tracker's list in), or when it is
 * freed before that. At most one; cancel it while it is still pending.
 */
void process_attach_on_settled(struct process *p, void (*fn)(void *ud), void *ud);
void process_attach_settle_cancel(struct process *p);
/* Its cgroup leaf (owned by p, valid until its end), or NULL. */
const struct pcg_leaf *process_attach_leaf(const struct process *p);
/* Live upgrade: hand its leaf to the cgroup module (removed once empty). */
void process_attach_leaf_drop(struct process *p);
/* Its descriptors {stdin, stdout, stderr} as they are now (-1: closed). */
void process_attach_fds(const struct process *p, int fds[3]);

/* ---- live upgrade (process/process_handover.c) ---------------------------
 *
 * What the hand-over record needs of a process, and the way back. The
 * descriptors stay open across execve; the ring is copied into the record.
 */
struct ring;

struct process_snapshot {
	uint32_t pid;
	const char *tag;                      /* NULL: none */
	bool pty;
	const Process__ProcessConfig *config;
	int out_fd, err_fd, in_fd;            /* -1 when closed; in_fd == out_fd for a PTY */
	int64_t timeout_left_ms;              /* 0: no kill deadline */
	const struct ring *ring;
	bool finished;                        /* retained: only the end event is left */
	int64_t retain_left_ms;
	bool reaped;
	int exit_code;
	bool exited;
	const char *status;
	const uint8_t *stdin_pending;
	size_t stdin_pending_len;
	bool stdin_close_pending;
	const char *cgroup;                   /* the command's own cgroup leaf, or NULL */
	/* Taken back after a crash (process/keep.c): not our child, so its
	 * end is learnt from `pidfd` (taken; -1: opened by pid) and the
	 * reaper's exit ring instead of a child watcher. */
	bool not_child;
	int pidfd;
	uint64_t t_start_us;                  /* CLOCK_MONOTONIC at spawn; 0: unknown (now) */
	/* Its idempotency key (NULL: none), the user it is scoped to, and the
	 * request's fingerprint. */
	const char *idem_key;
	uint32_t idem_uid;
	const char *idem_fp;
	uint64_t in_taken;                    /* input taken, pending included */
	int64_t deadline_ms;                  /* the deadline it was given; 0: none */
	struct endreason_kill kill;           /* the last kill envd sent */
	int termsig;                          /* reaped: the signal it died of */
	struct endreason why;                 /* finished: why it ended */
};

/* Call fn for every process envd knows (listed and retained), in start order. */
void process_snapshot_each(void (*fn)(void *ud, const struct process_snapshot *s), void *ud);

/* End every attached stream with `code` and `msg` (the process lives on). */
void process_end_streams(enum rpc_code code, const char *msg);

/*
 * Re-create a process from a record: its descriptors (made non-blocking
 * and close-on-exec) and `ring` (moved: *ring is left empty) become the
 * new entry's. A live one is reaped through a child watcher, as the
 * child of this same pid. Returns 0 or -errno (nothing taken then).
 */
int process_adopt(const struct process_snapshot *s, struct ring *ring);

/*
 * Change tracking, installed by the change journal (changes/tracker.c), which
 * sits above this layer. `begin` runs on the loop just before a command is
 * spawned (every command, so changes can be attributed to it; pid -1, the
 * cgroup known; `cwd` is its working directory, borrowed for the call) and
 * returns a handle or NULL; `set_pid` gives it the pid, from the spawn's
 * worker thread as soon as the child has exec'd (it must be thread-safe).
 * When the command's end is due, `end` is given the handle; the end
 * event waits until the tracker calls ready(p) (at once, or once its
 * changes are in; at most a few seconds). `fill` adds the changes to an
 * end event (memory owned by the handle, valid until release); `release`
 * runs when the process is freed.
 */
struct process_tracker {
	void *(*begin)(struct process *p, pid_t pid, const char *cgroup, bool track, const char *cwd);
	void (*set_pid)(void *h, pid_t pid);
	void (*end)(void *h, struct process *p, void (*ready)(struct process *p));
	void (*fill)(void *h, Process__ProcessEvent__EndEvent *end);
	void (*release)(void *h);
	/* done(ud) once every change made before now is attributed (at most a
	 * few seconds); 0, or -errno and done is not called. For a process
	 * that moves between cgroups (a session's shell): what it did before
	 * the move is then attributed by where it was. */
	int (*sync)(void (*done)(void *ud), void *ud);
};
extern const struct process_tracker *process_tracker;

/*
 * Crash keeping (process/keep.c, docs/crash.md): an observer of the table,
 * installed by keep_setup() as the change journal installs the tracker.
 * The table tells it what happens to each process and never calls it
 * otherwise, so the dependency runs one way (keep.c uses this header).
 * `start` runs when a process is registered (process_start) or taken back
 * (process_adopt; s->finished: it ended already) and returns a handle, or
 * NULL when the process is not kept; the other hooks get that handle and
 * are not called for a process without one:
 *   sync          output was appended to the ring `r`;
 *   reaped        the exit is known (s's exit fields);
 *   stdin_closed  envd closed the process's stdin;
 *   finalized     it ended and is retained: its I/O is closed, the ring
 *                 (for late Connects) stays;
 *   drop          the process, or its ring, is dropped; a ring that used
 *                 storage the keeper lent (process_ring_lend) has
 *                 forgotten it already. The handle is not used again.
 * and:
 *   input_written  bytes written to its stdin or terminal so far (`total`);
 *   killed         envd sent it a kill (s->kill says which).
 * exit_status tells how a process taken back (not our child) ended (h
 * is its handle, or NULL): 0 with its wait status and usage, -EBUSY while
 * it is a zombie its reaper has not reaped (asked again, however long
 * that takes), or -EAGAIN while nobody knows (asked again for a while).
 * The process_snapshot a hook gets is valid for the call and carries no
 * pending input. Everything runs on envd_loop.
 */
struct process_keeper {
	void *(*start)(struct process *p, const struct process_snapshot *s);
	void (*sync)(void *h, const struct ring *r);
	void (*reaped)(void *h, const struct process_snapshot *s);
	void (*stdin_closed)(void *h);
	void (*finalized)(void *h, const struct process_snapshot *s);
	void (*drop)(void *h);
	void (*input_written)(void *h, uint64_t total);
	void (*killed)(void *h, const struct process_snapshot *s);
	int (*exit_status)(void *h, pid_t pid, int pidfd, int *status, struct rusage *ru);
};
extern const struct process_keeper *process_keeper;

/*
 * Try runs (docs/try.md): a command on a copy-on-write layer over some
 * directories, installed by the try module (try/tryrun.c), which sits
 * above this layer as the change journal does. The service edge asks
 * `begin` for a handle when a Start names a try (StartRequest.try_run, or
 * ENVD_TRY in its envs): `paths` as requested (n may be 0: the cwd), the
 * user and the resolved cwd, borrowed for the call; RPC_OK with *h, or a
 * code with the message in err. process_start takes the handle (s->try_h):
 *   prepare   on the spawn job's worker thread, before the child is made:
 *             build the layer and give the mount namespace the child
 *             joins and, where envd is chrooted, the root it takes there
 *             (*mntns_root, else -1; both stay the handle's, open until
 *             `started`); 0, or a negative errno
 *             with the message (rpc_code_from_errno: failed_precondition
 *             where a layer cannot be made, invalid_argument for a bad
 *             directory) and nothing runs;
 *   started   on the loop once the spawn is done: p with its pid, or p
 *             NULL when the start failed or was given up (the layer goes);
 *   end, fill as the tracker's: the end event waits until ready(p), then
 *             carries the try's changes;
 *   release   p is freed (the try itself lives on until it is committed,
 *             discarded or expires).
 * `diff`, `commit` and `discard` serve the RPCs TryDiff, CommitTry and
 * DiscardTry. Loop thread, except prepare.
 */
struct process_try_ops {
	enum rpc_code (*begin)(const char *const *paths, size_t n, const struct user *u, const char *cwd,
			       void **h, char *err, size_t errlen);
	int (*prepare)(void *h, int *mntns, int *mntns_root, char *err, size_t errlen);
	void (*started)(void *h, struct process *p, pid_t pid);
	void (*end)(void *h, struct process *p, void (*ready)(struct process *p));
	void (*fill)(void *h, Process__ProcessEvent__EndEvent *end);
	void (*release)(void *h);
	rpc_start_fn diff, commit, discard;
};
extern const struct process_try_ops *process_try;

/* A try's command taken back after a crash or an upgrade gets its handle
   again (its end event then waits for the try's changes). */
void process_try_attach(struct process *p, void *h);

/*
 * For the keeper's start hook: move p's output ring into `buf` (cap bytes,
 * storage that outlives envd) and use it from now on (ring.h, ring_use).
 * 0, or -ENOSPC when cap is below the ring's budget.
 */
int process_ring_lend(struct process *p, uint8_t *buf, size_t cap);

#endif
