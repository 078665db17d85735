/* SPDX-License-Identifier: Apache-2.0 */
/*
 * upgrade.c - POST /upgrade and the hand-over to the next envd image.
 *
 * The outgoing image:
 *   1. stores the uploaded binary (or picks its own), then runs it with
 *      -version, asynchronously, with a 2 s budget: a binary that cannot
 *      even say its version never replaces a working envd;
 *   2. ends the open process streams with `unavailable` so clients
 *      reconnect, stops accepting (new connections wait in the backlog of
 *      the same listening socket), and lets queued output drain briefly;
 *   3. writes the record (proto/handover.proto), clears close-on-exec on
 *      every descriptor the record names, and execve()s with its own argv
 *      plus -resume-handover. If execve fails, the flags are restored, the
 *      record removed and accepting resumes: nothing else was touched.
 * The incoming image (upgrade_resume) reads the record before it serves.
 *
 * Process output is copied into the record with its offsets, so a reader
 * that reconnects with replay_from sees one gapless sequence; bytes the
 * children write while the exec is under way wait in their pipes.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/arena.h"
#include "handover.pb-c.h"

#include "base/log.h"
#include "base/loop.h"
#include "base/state.h"
#include "changes/changes.h"
#include "fs/fs_service.h"
#include "fs/watch.h"
#include "http/conn.h"
#include "process/cgroup.h"
#include "process/process.h"
#include "process/ring.h"
#include "process/session.h"
#include "sandbox/freeze.h"
#include "sandbox/logexport.h"
#include "sandbox/nfs.h"
#include "sandbox/portfwd.h"
#include "sandbox/upgrade.h"
#include "base/sdnotify.h"
#include "process/keep.h"

extern char **environ;

char upgrade_dir[256] = "/usr/bin";
char upgrade_record_path[256] = "/run/e2b/envd-handover.pb";
const char *upgrade_version = "";

#define LOGGER "envd"
/* Budget for `<new binary> -version` (flag -upgrade-preflight-ms). */
double upgrade_preflight_s = 2.0;
/* Time given to queued responses (the ended streams) before the exec: at
 * least DRAIN_S, then until every connection's queue is written, at most
 * DRAIN_MAX_S (a client that stopped reading loses its stream's tail, not
 * the upgrade). */
#define DRAIN_S 0.03
#define DRAIN_MAX_S 1.0
/* At most this long for the log exporter to empty its queue. */
#define EXPORT_WAIT_S 0.5
/* The workload is thawed this long after a hand-over even without /init. */
#define THAW_AFTER_S 60.0
/* Newest record schema this reader understands. */
#define SCHEMA_MAX 2

/* The architecture this image is built for, written into the record and
 * required of a record read (an upstream record names none). */
#if defined(__x86_64__)
#define RECORD_ARCH "amd64"
#elif defined(__aarch64__)
#define RECORD_ARCH "arm64"
#else
#error "envd builds for amd64 and arm64"
#endif
#define RECORD_MAX (512u << 20)
/* Largest binary accepted by upload (envd itself is well under 10 MiB). */
#define UPLOAD_MAX (256u << 20)

static int saved_argc;
static char **saved_argv;

void upgrade_set_argv(int argc, char **argv)
{
	saved_argc = argc;
	saved_argv = argv;
}

/* ---- the request ------------------------------------------------------------ */

struct upg {
	struct http_req *r;      /* NULL once the client went away */
	char bin[300];
	int fd;                  /* upload being written, -1 otherwise */
	size_t got;
	int write_err;
	/* pre-flight */
	pid_t pid;
	int out_fd;
	ev_io out_w;
	ev_child child_w;
	ev_timer timer;
	char out[256];
	size_t out_len;
	bool eof, exited, timed_out;
	int status;
	ev_timer drain;
	ev_tstamp drain_start;
};

static struct upg *active; /* one upgrade at a time */

static void upg_free(struct upg *u)
{
	if (u->fd >= 0)
		close(u->fd);
	if (u->out_fd >= 0) {
		ev_io_stop(envd_loop, &u->out_w);
		close(u->out_fd);
	}
	ev_timer_stop(envd_loop, &u->timer);
	ev_timer_stop(envd_loop, &u->drain);
	if (active == u)
		active = NULL;
	free(u);
}

static void upg_fail(struct upg *u, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void upg_fail(struct upg *u, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_error(LOGGER, "upgrade refused: %s", msg);
	if (u->r) {
		u->r->ud = NULL;
		http_respond_text_error(u->r, 500, msg);
		u->r = NULL;
	}
	/* The pre-flight child must be reaped by its watcher first. */
	if (u->pid > 0 && !u->exited)
		return;
	upg_free(u);
}

/* ---- building the record ---- */

/* Append one pointer to a protobuf-c repeated field kept in the arena. */
#define PUSH(a, arr, n, item)                                                              \
	do {                                                                               \
		void *_np = arena_alloc((a), ((n) + 1) * sizeof(*(arr)));                      \
		if (_np) {                                                                 \
			if (n)                                                             \
				memcpy(_np, (arr), (n) * sizeof(*(arr)));                  \
			(arr) = _np;                                                       \
			(arr)[(n)++] = (item);                                             \
		}                                                                          \
	} while (0)

/* Descriptors whose close-on-exec flag was cleared, to restore on failure. */
struct fdlist {
	int fd[4096];
	size_t n;
};

static void keep_fd(struct fdlist *l, int fd)
{
	if (fd < 0 || l->n >= sizeof(l->fd) / sizeof(l->fd[0]))
		return;
	for (size_t i = 0; i < l->n; i++)
		if (l->fd[i] == fd)
			return;
	if (fcntl(fd, F_SETFD, 0) == 0)
		l->fd[l->n++] = fd;
}

static Upgrade__OutputRing *ring_to_record(struct arena *a, const struct ring *rg)
{
	Upgrade__OutputRing *o = arena_alloc(a, sizeof(*o));
	uint64_t off;

	if (!o)
		return NULL;
	upgrade__output_ring__init(o);
	o->start = ring_start(rg);
	o->end = ring_end(rg);
	off = o->start;
	while (off < o->end) {
		enum ring_kind kind;
		const uint8_t *p;
		long n = ring_peek(rg, off, &kind, &p, (size_t)(o->end - off));
		Upgrade__OutputRun *last = o->n_runs ? o->runs[o->n_runs - 1] : NULL;

		if (n <= 0)
			break;
		if (last && last->kind == (uint32_t)kind) {
			uint8_t *d = arena_alloc(a, last->data.len + (size_t)n);
			if (!d)
				return NULL;
			memcpy(d, last->data.data, last->data.len);
			memcpy(d + last->data.len, p, (size_t)n);
			last->data.data = d;
			last->data.len += (size_t)n;
		} else {
			Upgrade__OutputRun *run = arena_alloc(a, sizeof(*run));
			uint8_t *d = arena_alloc(a, (size_t)n);
			if (!run || !d)
				return NULL;
			upgrade__output_run__init(run);
			run->kind = (uint32_t)kind;
			memcpy(d, p, (size_t)n);
			run->data.data = d;
			run->data.len = (size_t)n;
			PUSH(a, o->runs, o->n_runs, run);
		}
		off += (uint64_t)n;
	}
	/* Bytes that did not fit are recorded as evicted (the start moves). */
	uint64_t have = 0;
	for (size_t i = 0; i < o->n_runs; i++)
		have += o->runs[i]->data.len;
	o->start = o->end - have;
	return o;
}

struct build {
	struct arena *a;
	struct fdlist *fds;
	Upgrade__HandoverState *st;
};

static void add_process(void *ud, const struct process_snapshot *s)
{
	struct build *b = ud;
	struct arena *a = b->a;

	if (s->finished) {
		Upgrade__HandoverExit *x = arena_alloc(a, sizeof(*x));
		Process__ProcessEvent__EndEvent *end = arena_alloc(a, sizeof(*end));
		if (!x || !end)
			return;
		upgrade__handover_exit__init(x);
		process__process_event__end_event__init(end);
		x->pid = s->pid;
		x->tag = (char *)(s->tag ? s->tag : "");
		x->has_tag = s->tag != NULL;
		end->exit_code = s->exit_code;
		end->exited = s->exited;
		end->status = (char *)s->status;
		if (s->exit_code != 0) {
			end->optional_error_case = PROCESS__PROCESS_EVENT__END_EVENT__OPTIONAL_ERROR_ERROR;
			end->error = (char *)s->status;
		}
		x->end = end;
		x->remaining_ms = s->retain_left_ms;
		x->output = ring_to_record(a, s->ring);
		x->pty = s->pty;
		x->config = (Process__ProcessConfig *)s->config;
		PUSH(a, b->st->terminated, b->st->n_terminated, x);
		return;
	}
	Upgrade__HandoverProc *p = arena_alloc(a, sizeof(*p));
	if (!p)
		return;
	upgrade__handover_proc__init(p);
	p->pid = s->pid;
	p->tag = (char *)(s->tag ? s->tag : "");
	p->has_tag = s->tag != NULL;
	p->cg_type = (char *)(s->pty ? "pty" : "user");
	p->config = (Process__ProcessConfig *)s->config;
	p->stdout_fd = p->stderr_fd = p->stdin_fd = p->tty_fd = -1;
	if (s->pty) {
		p->tty_fd = s->out_fd;
		p->has_stdout = s->out_fd >= 0;
	} else {
		p->stdout_fd = s->out_fd;
		p->stderr_fd = s->err_fd;
		p->stdin_fd = s->in_fd;
		p->has_stdout = s->out_fd >= 0;
		p->has_stderr = s->err_fd >= 0;
		p->has_stdin = s->in_fd >= 0;
	}
	keep_fd(b->fds, s->out_fd);
	keep_fd(b->fds, s->err_fd);
	keep_fd(b->fds, s->in_fd);
	p->timeout_ms = s->timeout_left_ms;
	p->output = ring_to_record(a, s->ring);
	p->stdin_pending.data = (uint8_t *)s->stdin_pending;
	p->stdin_pending.len = s->stdin_pending_len;
	p->stdin_close_pending = s->stdin_close_pending;
	p->reaped = s->reaped;
	p->exit_code = s->exit_code;
	p->exited = s->exited;
	p->status = (char *)s->status;
	p->cgroup = (char *)(s->cgroup ? s->cgroup : "");
	PUSH(a, b->st->processes, b->st->n_processes, p);
}

static char *arena_str(struct arena *a, const char *s)
{
	size_t n = strlen(s ? s : "") + 1;
	char *o = arena_alloc(a, n);

	if (o)
		memcpy(o, s ? s : "", n);
	return o;
}

static void add_session(void *ud, const struct session_snapshot *s)
{
	struct build *b = ud;
	struct arena *a = b->a;
	Upgrade__HandoverSession *hs = arena_alloc(a, sizeof(*hs));
	char **envp = arena_alloc(a, (s->n_envp + 1) * sizeof(char *));
	int32_t *keeps = arena_alloc(a, (s->n_keep_fds + 1) * sizeof(int32_t));

	if (!hs || !envp || !keeps)
		return;
	upgrade__handover_session__init(hs);
	hs->name = arena_str(a, s->name);
	hs->user = arena_str(a, s->user);
	hs->uid = (uint32_t)s->uid;
	hs->set_ids = s->set_ids;
	hs->home_cwd = arena_str(a, s->home_cwd);
	for (size_t i = 0; i < s->n_envp; i++)
		envp[i] = arena_str(a, s->envp[i]);
	hs->envp = envp;
	hs->n_envp = s->n_envp;
	hs->dir = arena_str(a, s->dir);
	hs->id = s->id;
	hs->seq = s->seq;
	hs->pid = s->pid;
	hs->cmd_fd = s->cmd_fd;
	hs->status_fd = s->st_fd;
	hs->nonce = arena_str(a, s->nonce);
	hs->ready = s->ready;
	hs->created_ms = s->created_ms;
	hs->used_ms = s->used_ms;
	hs->busy = s->busy;
	hs->busy_started = s->busy_started;
	hs->busy_in_fd = s->busy_in_fd;
	for (size_t i = 0; i < s->n_keep_fds; i++) {
		keeps[i] = s->keep_fds[i];
		keep_fd(b->fds, s->keep_fds[i]);
	}
	hs->keep_fds = keeps;
	hs->n_keep_fds = s->n_keep_fds;
	keep_fd(b->fds, s->cmd_fd);
	keep_fd(b->fds, s->st_fd);
	keep_fd(b->fds, s->busy_in_fd);
	PUSH(a, b->st->sessions, b->st->n_sessions, hs);
}

static void add_watcher(void *ud, const struct fs_watcher_snapshot *s)
{
	struct build *b = ud;
	Upgrade__HandoverWatcher *w = arena_alloc(b->a, sizeof(*w));

	if (!w)
		return;
	upgrade__handover_watcher__init(w);
	w->id = (char *)s->id;
	w->path = (char *)s->path;
	w->recursive = s->recursive;
	w->include_entry_info = s->include_entry;
	w->pending_events = (Filesystem__FilesystemEvent **)s->events;
	w->n_pending_events = s->n_events;
	if (s->watch) {
		int wd;
		const char *rel;
		w->inotify_fd = fs_watch_fd(s->watch);
		for (size_t i = 0; fs_watch_wd(s->watch, i, &wd, &rel); i++) {
			Upgrade__WatchDescriptor *d = arena_alloc(b->a, sizeof(*d));
			if (!d)
				return;
			upgrade__watch_descriptor__init(d);
			d->wd = wd;
			d->rel = (char *)rel;
			PUSH(b->a, w->wds, w->n_wds, d);
		}
		keep_fd(b->fds, w->inotify_fd);
	}
	PUSH(b->a, b->st->watchers, b->st->n_watchers, w);
}

/* Pack the whole state; *out is malloc'ed. */
struct leaves_ctx {
	struct arena *a;
	Upgrade__HandoverState *st;
};

static void add_leaf(void *ud, const char *path)
{
	struct leaves_ctx *c = ud;

	/* Borrowed: the module's list is unchanged until the record is packed. */
	PUSH(c->a, c->st->cgroup_leaves, c->st->n_cgroup_leaves, (char *)path);
}

/* The /init state into a record (pointers borrowed from the state). */
static void init_state_fill(Upgrade__HandoverState *st, struct arena *a)
{
	size_t tlen;
	const char *tok = state_token(&tlen);
	if (tok && state_token_is_set()) {
		st->has_access_token = true;
		st->access_token.data = (uint8_t *)tok;
		st->access_token.len = tlen;
	}
	st->default_user = (char *)state_default_user();
	st->default_workdir = (char *)(state_default_workdir() ? state_default_workdir() : "");
	for (size_t i = 0; i < envstore_count(); i++) {
		Upgrade__EnvVar *e = arena_alloc(a, sizeof(*e));
		const char *k, *v;
		if (!e)
			break;
		upgrade__env_var__init(e);
		envstore_entry(i, &k, &v);
		e->key = (char *)k;
		e->value = (char *)v;
		e->internal = envstore_entry_internal(i);
		PUSH(a, st->user_env, st->n_user_env, e);
	}
	st->last_init_ns = state_last_init_ns;
}

/* ... and back. */
static void init_state_apply(const Upgrade__HandoverState *st)
{
	if (st->has_access_token)
		state_token_set((const char *)st->access_token.data, st->access_token.len);
	if (st->default_user && *st->default_user)
		state_set_default_user(st->default_user);
	if (st->default_workdir && *st->default_workdir)
		state_set_default_workdir(st->default_workdir);
	{
		const char **keys = calloc(st->n_user_env + 1, sizeof(*keys));
		const char **vals = calloc(st->n_user_env + 1, sizeof(*vals));
		size_t n = 0;
		for (size_t i = 0; keys && vals && i < st->n_user_env; i++) {
			if (st->user_env[i]->internal) {
				envstore_set_internal(st->user_env[i]->key, st->user_env[i]->value);
			} else {
				keys[n] = st->user_env[i]->key;
				vals[n++] = st->user_env[i]->value;
			}
		}
		if (n)
			envstore_replace_user(keys, vals, n);
		free(keys);
		free(vals);
	}
	if (st->last_init_ns > state_last_init_ns)
		state_last_init_ns = st->last_init_ns;
}

/* ---- the /init state kept for a restart after a crash (docs/crash.md) ---- */

/* Two names used in turn: the new state is stored before the old one is
 * dropped, so a crash in between leaves one whole (the higher generation
 * wins). */
static uint64_t kept_gen;

void upgrade_keep_init_state(void)
{
	Upgrade__HandoverState st = UPGRADE__HANDOVER_STATE__INIT;
	struct arena a = { 0 };
	char name[32];
	size_t len;
	uint8_t *buf = NULL;
	int fd = -1;

	if (!keep_enabled)
		return;
	init_state_fill(&st, &a);
	len = upgrade__handover_state__get_packed_size(&st);
	if (!(buf = malloc(8 + len)))
		goto out;
	kept_gen++;
	memcpy(buf, &kept_gen, 8);
	upgrade__handover_state__pack(&st, buf + 8);
	fd = memfd_create("envd-state", MFD_CLOEXEC);
	if (fd < 0 || write(fd, buf, 8 + len) != (ssize_t)(8 + len))
		goto out;
	snprintf(name, sizeof(name), "envd.state.%c", kept_gen & 1 ? 'a' : 'b');
	if (sdnotify_store(name, &fd, 1) == 0) {
		snprintf(name, sizeof(name), "envd.state.%c", kept_gen & 1 ? 'b' : 'a');
		sdnotify_store_remove(name);
	}
out:
	if (fd >= 0)
		close(fd);
	free(buf);
	arena_free(&a);
}

void upgrade_restore_init_state(struct sdnotify_fd *fds, size_t n)
{
	Upgrade__HandoverState *best = NULL;
	uint64_t best_gen = 0;

	for (size_t i = 0; i < n; i++) {
		struct stat stt;
		uint8_t *buf;
		uint64_t gen;

		if (fds[i].fd < 0 || strncmp(fds[i].name, "envd.state.", 11) != 0)
			continue;
		if (fstat(fds[i].fd, &stt) == 0 && stt.st_size > 8 && stt.st_size < 64 * 1024 * 1024 &&
		    (buf = malloc((size_t)stt.st_size))) {
			if (pread(fds[i].fd, buf, (size_t)stt.st_size, 0) == stt.st_size) {
				memcpy(&gen, buf, 8);
				Upgrade__HandoverState *st =
					upgrade__handover_state__unpack(NULL, (size_t)stt.st_size - 8, buf + 8);
				if (st && gen >= best_gen) {
					if (best)
						upgrade__handover_state__free_unpacked(best, NULL);
					best = st;
					best_gen = gen;
				} else if (st) {
					upgrade__handover_state__free_unpacked(st, NULL);
				}
			}
			free(buf);
		}
		close(fds[i].fd);
		fds[i].fd = -1;
	}
	if (!best)
		return;
	init_state_apply(best);
	upgrade__handover_state__free_unpacked(best, NULL);
	kept_gen = best_gen;
	/* Stored again under this envd, and the older name dropped. */
	upgrade_keep_init_state();
	fprintf(stderr, "envd: the /init state was restored after a restart\n");
}


static int build_record(struct fdlist *fds, uint8_t **out, size_t *out_len)
{
	struct arena a = { 0 };
	struct build b = { .a = &a, .fds = fds };
	Upgrade__HandoverState st = UPGRADE__HANDOVER_STATE__INIT;
	int rc = 0;

	b.st = &st;
	st.schema = 1;
	st.from_ver = (char *)upgrade_version;
	st.arch = (char *)RECORD_ARCH;
	process_snapshot_each(add_process, &b);
	session_snapshot_each(add_session, &b);
	fs_watchers_snapshot_each(add_watcher, &b);
	for (size_t i = 0; i < nfs_ledger_count(); i++) {
		Upgrade__MountEntry *m = arena_alloc(&a, sizeof(*m));
		const char *path, *lc;
		if (!m)
			break;
		upgrade__mount_entry__init(m);
		nfs_ledger_entry(i, &path, &lc);
		m->path = (char *)path;
		m->lifecycle_id = (char *)lc;
		PUSH(&a, st.mounts, st.n_mounts, m);
	}
	struct portfwd_handover fw[PORTFWD_MAX_FORWARDS];
	size_t nfw = portfwd_snapshot(fw, PORTFWD_MAX_FORWARDS);
	for (size_t i = 0; i < nfw; i++) {
		Upgrade__ForwardedPort *f = arena_alloc(&a, sizeof(*f));
		char *key = arena_alloc(&a, 32);
		if (!f || !key)
			break;
		upgrade__forwarded_port__init(f);
		snprintf(key, 32, "%d-%u", (int)getpid(), fw[i].port);
		f->key = key;
		f->port = fw[i].port;
		f->listener_pid = (uint32_t)getpid();
		f->family = fw[i].target_family == AF_INET6 ? 6 : 4;
		f->listen_fd = fw[i].lfd;
		keep_fd(fds, fw[i].lfd);
		PUSH(&a, st.forwards, st.n_forwards, f);
	}
	static struct portfwd_relay_state rs[PORTFWD_MAX_RELAYS];
	size_t nrs = portfwd_relay_snapshot(rs, PORTFWD_MAX_RELAYS);
	for (size_t i = 0; i < nrs; i++) {
		Upgrade__Relay *r = arena_alloc(&a, sizeof(*r));
		int32_t *pfds = arena_alloc(&a, 4 * sizeof(*pfds));
		uint64_t *pend = arena_alloc(&a, 2 * sizeof(*pend));
		protobuf_c_boolean *eof = arena_alloc(&a, 2 * sizeof(*eof)), *shut = arena_alloc(&a, 2 * sizeof(*shut));
		if (!r || !pfds || !pend || !eof || !shut)
			break;
		upgrade__relay__init(r);
		r->client_fd = rs[i].fd[0];
		r->service_fd = rs[i].fd[1];
		for (int d = 0; d < 2; d++) {
			pfds[2 * d] = rs[i].pipe[d][0];
			pfds[2 * d + 1] = rs[i].pipe[d][1];
			pend[d] = rs[i].pending[d];
			eof[d] = rs[i].eof[d];
			shut[d] = rs[i].shut[d];
		}
		r->pipe_fds = pfds;
		r->n_pipe_fds = 4;
		r->pending = pend;
		r->n_pending = 2;
		r->eof = eof;
		r->n_eof = 2;
		r->shut = shut;
		r->n_shut = 2;
		r->connecting = rs[i].connecting;
		keep_fd(fds, r->client_fd);
		keep_fd(fds, r->service_fd);
		for (int k = 0; k < 4; k++)
			keep_fd(fds, pfds[k]);
		PUSH(&a, st.relays, st.n_relays, r);
	}
	int lfd = server_listener_fd();
	if (lfd >= 0) {
		int32_t *l = arena_alloc(&a, sizeof(*l));
		if (l) {
			*l = lfd;
			st.listen_fds = l;
			st.n_listen_fds = 1;
			keep_fd(fds, lfd);
		}
	}
	init_state_fill(&st, &a);

	/* The change journal: its group crosses the exec, so changes made
	 * meanwhile wait in the kernel and old checkpoints still answer. */
	static Upgrade__ChangeJournal cj;
	if (changes_snapshot(&cj) == 0 && cj.epoch) {
		st.changes = &cj;
		keep_fd(fds, cj.fanotify_fd);
	}

	/* The freeze state: whether a freeze of ours is in effect, and the
	 * cgroups the guest had frozen itself (a thaw must leave them). */
	static struct freeze_state fz;
	freeze_state_get(&fz);
	st.frozen = fz.applied;
	for (size_t i = 0; i < fz.n_guest && i < FREEZE_GUEST_MAX; i++)
		PUSH(&a, st.guest_frozen_cgroups, st.n_guest_frozen_cgroups, fz.guest[i]);
	if (st.n_guest_frozen_cgroups)
		st.schema = 2;
	/* Leaves of no process (spares, released ones): removed by the next
	 * image, not left behind. */
	{
		struct leaves_ctx lc = { .a = &a, .st = &st };

		pcg_owned_leaves(add_leaf, &lc);
	}
	if (a.oom) {
		rc = -ENOMEM;
	} else {
		*out_len = upgrade__handover_state__get_packed_size(&st);
		*out = malloc(*out_len ? *out_len : 1);
		if (!*out)
			rc = -ENOMEM;
		else
			upgrade__handover_state__pack(&st, *out);
	}
	arena_free(&a);
	return rc;
}

static int write_file(const char *path, const uint8_t *p, size_t n)
{
	char tmp[300];
	int fd;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	unlink(tmp);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			int e = w < 0 ? errno : EIO;
			close(fd);
			unlink(tmp);
			return -e;
		}
		p += w;
		n -= (size_t)w;
	}
	close(fd);
	if (rename(tmp, path) < 0) {
		int e = errno;
		unlink(tmp);
		return -e;
	}
	return 0;
}

/* Write the record and execve; returns only on failure (-errno, err set). */
static int hand_over(const char *bin, char *err, size_t errlen)
{
	static struct fdlist fds;
	uint8_t *rec = NULL;
	size_t len = 0;
	int rc;

	fds.n = 0;
	rc = build_record(&fds, &rec, &len);
	if (rc < 0) {
		snprintf(err, errlen, "build hand-over record: %s", strerror(-rc));
		goto restore;
	}
	rc = write_file(upgrade_record_path, rec, len);
	free(rec);
	if (rc < 0) {
		snprintf(err, errlen, "write %s: %s", upgrade_record_path, strerror(-rc));
		goto restore;
	}
	char **argv = calloc((size_t)saved_argc + 2, sizeof(char *));
	if (!argv) {
		rc = -ENOMEM;
		snprintf(err, errlen, "exec %s: %s", bin, strerror(ENOMEM));
		goto unlink_restore;
	}
	bool has_flag = false;
	for (int i = 0; i < saved_argc; i++) {
		argv[i] = saved_argv[i];
		if (strcmp(argv[i], "-resume-handover") == 0 || strcmp(argv[i], "--resume-handover") == 0)
			has_flag = true;
	}
	if (!has_flag)
		argv[saved_argc] = "-resume-handover";
	log_info(LOGGER, "upgrade: executing %s (record %zu bytes)", bin, len);
	fflush(stdout);
	fflush(stderr);
	execve(bin, argv, environ);
	rc = -errno;
	free(argv);
	snprintf(err, errlen, "exec %s: %s", bin, strerror(-rc));
unlink_restore:
	unlink(upgrade_record_path);
restore:
	for (size_t i = 0; i < fds.n; i++)
		fcntl(fds.fd[i], F_SETFD, FD_CLOEXEC);
	changes_resume();
	return rc;
}

static void drain_cb(EV_P_ ev_timer *w, int revents)
{
	struct upg *u = w->data;
	char err[512];

	ev_tstamp waited = ev_now(EV_A) - u->drain_start;

	/* Queued responses (the ends of the streams) and lines for the log
	 * collector die with this image: give them a bounded time to leave. */
	if ((server_output_pending() && waited < DRAIN_MAX_S) ||
	    (!pcg_idle() && waited < DRAIN_MAX_S) ||
	    /* A spawn completes on this image's loop: a command that
	     * started meanwhile would be in no record. One stuck on a hung
	     * mount is left behind after the bound. */
	    (process_spawns_in_flight() && waited < DRAIN_MAX_S) ||
	    (!logexport_idle() && waited < EXPORT_WAIT_S)) {
		ev_timer_set(w, 0.01, 0.);
		ev_timer_start(EV_A_ w);
		return;
	}

	hand_over(u->bin, err, sizeof(err));
	/* Still here: the exec failed and everything is as it was. */
	pcg_quiesce(false);
	server_pause_accept(false);
	upg_fail(u, "%s", err);
}

static void preflight_done(struct upg *u)
{
	if (!u->exited || (!u->eof && !u->timed_out))
		return;
	ev_timer_stop(envd_loop, &u->timer);
	u->pid = 0;
	while (u->out_len && (u->out[u->out_len - 1] == '\n' || u->out[u->out_len - 1] == '\r'))
		u->out_len--;
	u->out[u->out_len] = '\0';
	if (u->timed_out) {
		upg_fail(u, "new binary %s did not answer -version within %g s", u->bin, upgrade_preflight_s);
		return;
	}
	if (!WIFEXITED(u->status) || WEXITSTATUS(u->status) != 0) {
		if (WIFSIGNALED(u->status))
			upg_fail(u, "new binary %s -version was killed by signal %d", u->bin, WTERMSIG(u->status));
		else
			upg_fail(u, "new binary %s -version exited with status %d", u->bin, WEXITSTATUS(u->status));
		return;
	}
	if (u->out_len == 0 || strchr(u->out, '\n')) {
		upg_fail(u, "new binary %s -version printed no version line", u->bin);
		return;
	}
	if (!u->r) {
		log_warn(LOGGER, "upgrade abandoned: the client went away");
		upg_free(u);
		return;
	}
	log_info(LOGGER, "upgrade: %s reports version %s; handing over", u->bin, u->out);
	/* Clients attached to a process learn why their stream ends, and
	 * reconnect (with replay_from) to the new image. */
	process_end_streams(RPC_UNAVAILABLE, "envd is upgrading; reconnect to continue");
	fs_end_streams(RPC_UNAVAILABLE, "envd is upgrading; watch again to continue");
	server_pause_accept(true);
	/* No cgroup job may be out when the record is written: a leaf made
	 * or removed behind its back would be leaked or named twice. */
	pcg_quiesce(true);
	u->drain_start = ev_now(envd_loop);
	ev_timer_init(&u->drain, drain_cb, DRAIN_S, 0.);
	u->drain.data = u;
	ev_timer_start(envd_loop, &u->drain);
}

static void pf_read_cb(EV_P_ ev_io *w, int revents)
{
	struct upg *u = w->data;
	char buf[256];
	ssize_t n = read(u->out_fd, buf, sizeof(buf));

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n > 0) {
		size_t k = (size_t)n;
		if (k > sizeof(u->out) - 1 - u->out_len)
			k = sizeof(u->out) - 1 - u->out_len;
		memcpy(u->out + u->out_len, buf, k);
		u->out_len += k;
		return;
	}
	ev_io_stop(EV_A_ w);
	close(u->out_fd);
	u->out_fd = -1;
	u->eof = true;
	preflight_done(u);
}

static void pf_child_cb(EV_P_ ev_child *w, int revents)
{
	struct upg *u = w->data;

	ev_child_stop(EV_A_ w);
	u->exited = true;
	u->status = w->rstatus;
	if (!u->r && u->pid == 0) {
		upg_free(u);
		return;
	}
	preflight_done(u);
}

static void pf_timer_cb(EV_P_ ev_timer *w, int revents)
{
	struct upg *u = w->data;

	u->timed_out = true;
	kill(u->pid, SIGKILL);
}

static void preflight_start(struct upg *u)
{
	int p[2];
	posix_spawn_file_actions_t fa;
	char *argv[] = { u->bin, "-version", NULL };
	pid_t pid;
	int rc;

	if (access(u->bin, X_OK) < 0) {
		upg_fail(u, "new binary %s is not executable: %s", u->bin, strerror(errno));
		return;
	}
	if (pipe2(p, O_CLOEXEC) < 0) {
		upg_fail(u, "pre-flight pipe: %s", strerror(errno));
		return;
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, p[1], 1);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	rc = posix_spawn(&pid, u->bin, &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(p[1]);
	if (rc != 0) {
		close(p[0]);
		upg_fail(u, "new binary %s cannot run: %s", u->bin, strerror(rc));
		return;
	}
	u->pid = pid;
	u->out_fd = p[0];
	fcntl(u->out_fd, F_SETFL, O_NONBLOCK);
	ev_io_init(&u->out_w, pf_read_cb, u->out_fd, EV_READ);
	u->out_w.data = u;
	ev_io_start(envd_loop, &u->out_w);
	ev_child_init(&u->child_w, pf_child_cb, pid, 0);
	u->child_w.data = u;
	ev_child_start(envd_loop, &u->child_w);
	ev_timer_init(&u->timer, pf_timer_cb, upgrade_preflight_s, 0.);
	u->timer.data = u;
	ev_timer_start(envd_loop, &u->timer);
}

static void upg_body(struct http_req *r, const uint8_t *p, size_t n)
{
	struct upg *u = r->ud;

	u->got += n;
	if (u->got > UPLOAD_MAX && !u->write_err) {
		u->write_err = EFBIG;
		if (u->fd >= 0) {
			close(u->fd);
			u->fd = -1;
			unlink(u->bin);
		}
	}
	if (u->fd < 0 && !u->write_err) {
		unlink(u->bin);
		u->fd = open(u->bin, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
		if (u->fd < 0)
			u->write_err = errno;
	}
	while (u->fd >= 0 && n) {
		ssize_t w = write(u->fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			u->write_err = w < 0 ? errno : EIO;
			close(u->fd);
			u->fd = -1;
			break;
		}
		p += w;
		n -= (size_t)w;
	}
}

static void upg_body_end(struct http_req *r)
{
	struct upg *u = r->ud;
	const char *te = http_req_header(r, "transfer-encoding");
	bool has_body = u->got > 0 || r->content_length > 0 || (te && *te);

	if (has_body) {
		if (u->fd < 0 && !u->write_err)
			upg_body(r, NULL, 0); /* an announced but empty body */
		if (u->write_err) {
			upg_fail(u, "write %s: %s", u->bin, strerror(u->write_err));
			return;
		}
		if (fchmod(u->fd, 0755) < 0 || close(u->fd) < 0) {
			u->fd = -1;
			upg_fail(u, "write %s: %s", u->bin, strerror(errno));
			return;
		}
		u->fd = -1;
		log_info(LOGGER, "upgrade: received %zu bytes into %s", u->got, u->bin);
	} else {
		snprintf(u->bin, sizeof(u->bin), "/proc/self/exe");
	}
	preflight_start(u);
}

static void upg_close(struct http_req *r, bool completed)
{
	struct upg *u = r->ud;

	if (!u)
		return;
	u->r = NULL;
	/* Before the pre-flight: nothing runs yet. */
	if (u->pid == 0 && !ev_is_active(&u->drain))
		upg_free(u);
}

void upgrade_request(struct http_req *r)
{
	char target[300];
	const char *hdr = http_req_header(r, "x-envd-upgrade-bin");

	snprintf(target, sizeof(target), "%s/envd.next", upgrade_dir);
	if (hdr && *hdr && strcmp(hdr, target) != 0) {
		http_respond_text_error(r, 400, "unsupported upgrade target");
		return;
	}
	if (active) {
		http_respond_text_error(r, 409, "an upgrade is already in progress");
		return;
	}
	struct upg *u = calloc(1, sizeof(*u));
	if (!u) {
		http_respond_text_error(r, 500, "out of memory");
		return;
	}
	u->fd = -1;
	u->out_fd = -1;
	u->r = r;
	snprintf(u->bin, sizeof(u->bin), "%s", target);
	ev_init(&u->drain, drain_cb);
	ev_init(&u->timer, pf_timer_cb);
	active = u;
	r->ud = u;
	r->on_body = upg_body;
	r->on_body_end = upg_body_end;
	r->on_close = upg_close;
	log_info(LOGGER, "upgrade requested");
}

/* ---- the incoming image --------------------------------------------------------- */

static bool resumed, gate_closed;
static char handover_json[256];
static Upgrade__HandoverState *record;
static ev_timer thaw_timer;

bool upgrade_gate_closed(void)
{
	return gate_closed;
}

const char *upgrade_handover_header(void)
{
	return resumed ? handover_json : NULL;
}

static void thaw(const char *why)
{
	ev_timer_stop(envd_loop, &thaw_timer);
	/* The workload runs through the exec; what may be frozen is a freeze
	 * that was in effect when the upgrade began (carried in the record).
	 * /init thaws that itself; the timer does it when no /init comes. */
	struct freeze_state fz;
	freeze_state_get(&fz);
	if (fz.applied && strcmp(why, "/init") != 0) {
		int rc = freeze_thaw();
		log_info(LOGGER, "upgrade: workload thawed (%s)%s%s", why, rc < 0 ? ": " : "",
			 rc < 0 ? strerror(-rc) : "");
		return;
	}
	log_info(LOGGER, "upgrade: workload thawed (%s)", why);
}

static void thaw_cb(EV_P_ ev_timer *w, int revents)
{
	thaw("no /init within 60 s");
}

void upgrade_init_done(void)
{
	if (!gate_closed)
		return;
	gate_closed = false;
	thaw("/init");
}

/*
 * Everything taken over is close-on-exec again by now. A descriptor that
 * still is not was inherited and not taken over (a record that could not
 * be read, a process that could not be adopted): close it, so neither
 * envd nor a child started later holds it.
 */
static void close_leftovers(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	int dfd = d ? dirfd(d) : -1;
	unsigned closed = 0;

	if (!d)
		return;
	while ((de = readdir(d))) {
		char *end;
		long fd = strtol(de->d_name, &end, 10);
		if (*end || fd < 3 || fd == dfd)
			continue;
		int fl = fcntl((int)fd, F_GETFD);
		if (fl >= 0 && !(fl & FD_CLOEXEC)) {
			close((int)fd);
			closed++;
		}
	}
	closedir(d);
	if (closed)
		log_warn(LOGGER, "upgrade: closed %u inherited descriptors that were not taken over", closed);
}

static bool fd_open(int fd)
{
	return fd > 0 && fcntl(fd, F_GETFD) >= 0;
}

static int ring_from_record(struct ring *rg, const Upgrade__OutputRing *o)
{
	uint64_t total = 0;

	ring_init(rg, process_ring_size);
	if (!o)
		return 0;
	for (size_t i = 0; i < o->n_runs; i++)
		total += o->runs[i]->data.len;
	/* Offsets continue where the old image stopped. */
	rg->start = rg->end = o->end - total;
	for (size_t i = 0; i < o->n_runs; i++) {
		uint32_t k = o->runs[i]->kind;
		if (k < RING_STDOUT || k > RING_PTY)
			k = RING_STDOUT;
		if (ring_append(rg, (enum ring_kind)k, o->runs[i]->data.data, o->runs[i]->data.len) < 0)
			return -ENOMEM;
	}
	return 0;
}

static int adopt_proc(const Upgrade__HandoverProc *hp)
{
	struct process_snapshot s = { 0 };
	struct ring rg;
	int rc;

	s.pid = hp->pid;
	s.tag = hp->has_tag ? hp->tag : NULL;
	s.config = hp->config;
	s.pty = (hp->cg_type && strcmp(hp->cg_type, "pty") == 0) || fd_open(hp->tty_fd);
	if (s.pty) {
		s.out_fd = fd_open(hp->tty_fd) ? hp->tty_fd : -1;
		s.err_fd = s.in_fd = -1;
	} else {
		s.out_fd = fd_open(hp->stdout_fd) ? hp->stdout_fd : -1;
		s.err_fd = fd_open(hp->stderr_fd) ? hp->stderr_fd : -1;
		s.in_fd = fd_open(hp->stdin_fd) ? hp->stdin_fd : -1;
	}
	s.timeout_left_ms = hp->timeout_ms;
	s.reaped = hp->reaped;
	s.exit_code = hp->exit_code;
	s.exited = hp->exited;
	s.status = hp->status;
	s.stdin_pending = hp->stdin_pending.data;
	s.stdin_pending_len = hp->stdin_pending.len;
	s.stdin_close_pending = hp->stdin_close_pending;
	s.cgroup = hp->cgroup && *hp->cgroup ? hp->cgroup : NULL;
	if (s.pid == 0 || (!s.reaped && kill((pid_t)s.pid, 0) < 0 && errno == ESRCH && s.out_fd < 0))
		return -ESRCH;
	rc = ring_from_record(&rg, hp->output);
	if (rc == 0)
		rc = process_adopt(&s, &rg);
	ring_free(&rg);
	return rc;
}

static int adopt_exit(const Upgrade__HandoverExit *x)
{
	struct process_snapshot s = { 0 };
	struct ring rg;
	int rc;

	s.pid = x->pid;
	s.tag = x->has_tag ? x->tag : NULL;
	s.finished = true;
	s.pty = x->pty;
	s.config = x->config;
	s.retain_left_ms = x->remaining_ms;
	s.out_fd = s.err_fd = s.in_fd = -1;
	if (x->end) {
		s.exit_code = x->end->exit_code;
		s.exited = x->end->exited;
		s.status = x->end->status;
	}
	if (x->remaining_ms <= 0)
		return -ETIME;
	rc = ring_from_record(&rg, x->output);
	if (rc == 0)
		rc = process_adopt(&s, &rg);
	ring_free(&rg);
	return rc;
}

static int read_record(uint8_t **out, size_t *len)
{
	int fd = open(upgrade_record_path, O_RDONLY | O_CLOEXEC);
	struct stat st;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || st.st_size < 0 || (size_t)st.st_size > RECORD_MAX) {
		close(fd);
		return -EFBIG;
	}
	*len = (size_t)st.st_size;
	*out = malloc(*len ? *len : 1);
	if (!*out) {
		close(fd);
		return -ENOMEM;
	}
	size_t got = 0;
	while (got < *len) {
		ssize_t n = read(fd, *out + got, *len - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	*len = got;
	return 0;
}

int upgrade_resume(void)
{
	uint8_t *buf = NULL;
	size_t len = 0;
	int rc = read_record(&buf, &len);
	unsigned procs = 0, procs_failed = 0, ret = 0, ret_failed = 0, wat = 0, wat_failed = 0;

	/* Whatever happens, the gate holds until /init: the orchestrator
	 * re-sends the state, and a half-adopted envd must not serve. */
	resumed = gate_closed = true;
	ev_timer_init(&thaw_timer, thaw_cb, THAW_AFTER_S, 0.);
	ev_timer_start(envd_loop, &thaw_timer);
	ev_unref(envd_loop);
	if (rc < 0) {
		log_error(LOGGER, "upgrade: cannot read %s: %s", upgrade_record_path, strerror(-rc));
		/* Nothing can be taken over: free the inherited descriptors (the
		 * old listener among them, so this image can bind its port). */
		close_leftovers();
		snprintf(handover_json, sizeof(handover_json),
			 "{\"failed\":true,\"procs\":0,\"procs_failed\":0,\"retained\":0,\"retained_failed\":0,"
			 "\"watchers\":0,\"watchers_failed\":0}");
		return rc;
	}
	/* The record holds the access token: it lives no longer than needed. */
	unlink(upgrade_record_path);
	record = upgrade__handover_state__unpack(NULL, len, buf);
	free(buf);
	bool foreign = record && record->arch && *record->arch && strcmp(record->arch, RECORD_ARCH) != 0;
	if (!record || record->schema > SCHEMA_MAX || foreign) {
		if (foreign)
			log_error(LOGGER, "upgrade: record written for %s, this image is %s: not taken over",
				  record->arch, RECORD_ARCH);
		else
			log_error(LOGGER, "upgrade: record %s", record ? "has a newer schema" : "does not parse");
		snprintf(handover_json, sizeof(handover_json),
			 "{\"failed\":true,\"procs\":0,\"procs_failed\":0,\"retained\":0,\"retained_failed\":0,"
			 "\"watchers\":0,\"watchers_failed\":0}");
		if (record)
			upgrade__handover_state__free_unpacked(record, NULL);
		record = NULL;
		close_leftovers();
		return -EPROTO;
	}
	Upgrade__HandoverState *st = record;

	/* The /init state. */
	init_state_apply(st);
	{
		static struct freeze_state fz;
		memset(&fz, 0, sizeof(fz));
		fz.applied = st->frozen;
		for (size_t i = 0; i < st->n_guest_frozen_cgroups && fz.n_guest < FREEZE_GUEST_MAX; i++)
			snprintf(fz.guest[fz.n_guest++], sizeof(fz.guest[0]), "%s", st->guest_frozen_cgroups[i]);
		if (fz.applied || fz.n_guest)
			freeze_state_set(&fz);
	}
	for (size_t i = 0; i < st->n_cgroup_leaves; i++)
		pcg_release_path(st->cgroup_leaves[i]);

	for (size_t i = 0; i < st->n_processes; i++) {
		rc = adopt_proc(st->processes[i]);
		if (rc < 0) {
			procs_failed++;
			log_error(LOGGER, "upgrade: process %u not taken over: %s", st->processes[i]->pid,
				  strerror(-rc));
		} else {
			procs++;
		}
	}
	for (size_t i = 0; i < st->n_sessions; i++) {
		Upgrade__HandoverSession *hs = st->sessions[i];
		struct session_snapshot sn = {
			.name = hs->name, .user = hs->user, .uid = hs->uid, .set_ids = hs->set_ids,
			.home_cwd = hs->home_cwd, .envp = hs->envp, .n_envp = hs->n_envp, .dir = hs->dir,
			.nonce = hs->nonce, .id = hs->id, .seq = hs->seq, .pid = hs->pid,
			.cmd_fd = fd_open(hs->cmd_fd) ? hs->cmd_fd : -1,
			.st_fd = fd_open(hs->status_fd) ? hs->status_fd : -1, .ready = hs->ready,
			.created_ms = hs->created_ms, .used_ms = hs->used_ms, .busy = hs->busy,
			.busy_started = hs->busy_started,
			.busy_in_fd = fd_open(hs->busy_in_fd) ? hs->busy_in_fd : -1,
		};
		int *keeps = calloc(hs->n_keep_fds + 1, sizeof(int));

		for (size_t k = 0; keeps && k < hs->n_keep_fds; k++)
			if (fd_open(hs->keep_fds[k]))
				keeps[sn.n_keep_fds++] = hs->keep_fds[k];
		sn.keep_fds = keeps;
		rc = keeps ? session_adopt(&sn) : -ENOMEM;
		if (rc < 0) {
			/* Its descriptors are left to close_leftovers' kind: close them. */
			log_error(LOGGER, "upgrade: session %s not taken over: %s", hs->name, strerror(-rc));
			if (sn.cmd_fd >= 0)
				close(sn.cmd_fd);
			if (sn.st_fd >= 0)
				close(sn.st_fd);
			if (sn.busy_in_fd >= 0)
				close(sn.busy_in_fd);
			for (size_t k = 0; k < sn.n_keep_fds; k++)
				close(keeps[k]);
			if (hs->pid > 0)
				kill(-hs->pid, SIGKILL);
		}
		free(keeps);
	}
	for (size_t i = 0; i < st->n_terminated; i++) {
		rc = adopt_exit(st->terminated[i]);
		if (rc < 0 && rc != -ETIME)
			ret_failed++;
		else if (rc == 0)
			ret++;
	}
	for (size_t i = 0; i < st->n_watchers; i++) {
		Upgrade__HandoverWatcher *hw = st->watchers[i];
		struct fs_watcher_snapshot ws = {
			.id = hw->id, .path = hw->path, .recursive = hw->recursive,
			.include_entry = hw->include_entry_info,
			.events = (const Filesystem__FilesystemEvent *const *)hw->pending_events,
			.n_events = hw->n_pending_events,
			.inotify_fd = -1,
		};
		int *wds = NULL;
		const char **rels = NULL;
		/* Our own record: the same inotify instance carries on. */
		if (hw->inotify_fd > 0 && fd_open(hw->inotify_fd) && hw->n_wds &&
		    (wds = calloc(hw->n_wds, sizeof(*wds))) && (rels = calloc(hw->n_wds, sizeof(*rels)))) {
			for (size_t k = 0; k < hw->n_wds; k++) {
				wds[k] = hw->wds[k]->wd;
				rels[k] = hw->wds[k]->rel;
			}
			ws.inotify_fd = hw->inotify_fd;
			ws.wds = wds;
			ws.rels = rels;
			ws.n_wds = hw->n_wds;
		}
		char err[256];
		int arc = fs_watcher_adopt(&ws, err, sizeof(err));
		free(wds);
		free(rels);
		if (arc < 0 && ws.inotify_fd >= 0)
			close(ws.inotify_fd);
		if (arc < 0) {
			wat_failed++;
			log_error(LOGGER, "upgrade: watcher %s on %s not re-armed: %s", hw->id, hw->path, err);
		} else {
			wat++;
		}
	}
	for (size_t i = 0; i < st->n_mounts; i++)
		nfs_ledger_add(st->mounts[i]->path, st->mounts[i]->lifecycle_id);
	if (st->changes && changes_adopt(st->changes) < 0)
		log_error(LOGGER, "upgrade: the change journal was not taken over");
	/* A child that ended during the exec is a zombie whose SIGCHLD went
	 * to the old image: have the loop look for it. */
	kill(getpid(), SIGCHLD);

	snprintf(handover_json, sizeof(handover_json),
		 "{\"failed\":%s,\"procs\":%u,\"procs_failed\":%u,\"retained\":%u,\"retained_failed\":%u,"
		 "\"watchers\":%u,\"watchers_failed\":%u,\"forwards\":%zu}",
		 procs_failed || ret_failed || wat_failed ? "true" : "false", procs, procs_failed, ret,
		 ret_failed, wat, wat_failed, st->n_forwards);
	log_info(LOGGER, "upgrade: took over from %s: %s", st->from_ver ? st->from_ver : "?", handover_json);

	int lfd = -1;
	for (size_t i = 0; i < st->n_listen_fds; i++) {
		if (lfd < 0 && server_listen_fd(st->listen_fds[i]) == 0)
			lfd = st->listen_fds[i];
		else if (st->listen_fds[i] != lfd && fd_open(st->listen_fds[i]))
			close(st->listen_fds[i]);
	}
	return lfd;
}

void upgrade_resume_forwards(void)
{
	if (!record) {
		if (resumed)
			close_leftovers();
		return;
	}
	for (size_t i = 0; i < record->n_forwards; i++) {
		Upgrade__ForwardedPort *f = record->forwards[i];
		struct portfwd_handover h = {
			.port = (uint16_t)f->port,
			.target_family = f->family == 6 ? AF_INET6 : AF_INET,
			.lfd = f->listen_fd,
		};
		if (f->listen_fd <= 0 || !fd_open(f->listen_fd))
			continue; /* the scanner forwards it again within a period */
		if (portfwd_adopt(&h) < 0)
			close(f->listen_fd);
	}
	for (size_t i = 0; i < record->n_relays; i++) {
		Upgrade__Relay *r = record->relays[i];
		struct portfwd_relay_state s = { .fd = { r->client_fd, r->service_fd }, .connecting = r->connecting };
		bool ok = r->n_pipe_fds == 4 && r->n_pending == 2 && r->n_eof == 2 && r->n_shut == 2 &&
			  fd_open(r->client_fd) && fd_open(r->service_fd);
		for (int d = 0; ok && d < 2; d++) {
			s.pipe[d][0] = r->pipe_fds[2 * d];
			s.pipe[d][1] = r->pipe_fds[2 * d + 1];
			s.pending[d] = r->pending[d];
			s.eof[d] = r->eof[d];
			s.shut[d] = r->shut[d];
			ok = fd_open(s.pipe[d][0]) && fd_open(s.pipe[d][1]);
		}
		if (ok && portfwd_relay_adopt(&s) == 0)
			continue;
		/* Cannot carry on: the connection is closed rather than leaked. */
		int all[6] = { r->client_fd, r->service_fd, -1, -1, -1, -1 };
		for (size_t k = 0; k < r->n_pipe_fds && k < 4; k++)
			all[2 + k] = r->pipe_fds[k];
		for (int k = 0; k < 6; k++)
			if (fd_open(all[k]))
				close(all[k]);
	}
	upgrade__handover_state__free_unpacked(record, NULL);
	record = NULL;
	close_leftovers();
}
