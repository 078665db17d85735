/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs_service.c - filesystem.Filesystem handlers (docs/protocol.md,
 * "filesystem.Filesystem").
 *
 * Nothing here makes a syscall on a request's path on the loop: a path on
 * a hung FUSE or NFS mount would stop the daemon. Every call that touches
 * one is a worker job with the path's mount key and the call's deadline
 * (docs/architecture.md, "What the loop may do"); the reply is encoded in
 * the job too. WatchDir streams inotify events; CreateWatcher keeps a
 * bounded event buffer per watcher id.
 */
#include "fs/fs_service.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "changes/changes.h"
#include "fs/edit.h"
#include "fs/entry.h"
#include "base/buf.h"
#include "base/errstr.h"
#include "fs/listdir.h"
#include "base/log.h"
#include "base/loop.h"
#include "base/reqjob.h"
#include "base/users.h"
#include "fs/legacy.h"
#include "fs/tools.h"
#include "base/arena.h"
#include "fs/watch.h"
#include "fs/wpath.h"
#include "http/http.h"
#include "rpc/caller.h"
#include "rpc/rpcerr.h"
#include "rpc/rpcjob.h"
#include "base/worker.h"

#define ERRLEN (2 * PATH_MAX + 256)

/* Watch streams stop queueing events beyond this and report an overflow. */
#define WATCH_STREAM_QUEUE_MAX (1024 * 1024)
/* Buffered events per CreateWatcher watcher before it reports overflow. */
#define WATCHER_EVENTS_MAX 65536
/* How long GetWatcherEvents waits for events the watch's job still holds
 * (at most half the client's deadline). */
#define WATCHER_POLL_WAIT_S 5.0
/* Polled watchers at once (flag -max-watchers, at most WATCHERS_CAP). */
#define WATCHERS_CAP 4096
size_t fs_max_watchers = 256;

/* --- responses: downgraded for the old Python SDK (legacy.h) --- */

static const ProtobufCMessage *legacy_msg(struct rpc_call *call, const ProtobufCMessage *msg,
					  struct arena *a)
{
	if (!legacy_user_agent(rpc_call_header(call, "user-agent")))
		return msg;
	http_req_extra_header(rpc_call_http(call), "X-E2B-Legacy-SDK", "true", true);
	const ProtobufCMessage *v = legacy_view(msg, a);
	return v ? v : msg;
}

static void fs_reply(struct rpc_call *call, const ProtobufCMessage *msg)
{
	struct arena a = { 0 };

	rpc_reply(call, legacy_msg(call, msg, &a));
	arena_free(&a);
}

static int fs_send(struct rpc_call *call, const ProtobufCMessage *msg)
{
	struct arena a = { 0 };
	int rc = rpc_send(call, legacy_msg(call, msg, &a));

	arena_free(&a);
	return rc;
}

static enum rpc_code entry_code(int rc)
{
	return rc == -ENOENT ? RPC_NOT_FOUND : RPC_INTERNAL;
}

/*
 * --- the unary calls, each one worker job ---
 *
 * Every syscall on the request's path (stat, mkdir, rename, the listing,
 * the remove) runs in the job, and so does encoding the reply: a
 * 100 000-entry listing takes a while to pack. The job carries the mount's
 * key and the call's deadline (the client's, else -fs-timeout); when that
 * passes first, the call is answered "deadline_exceeded" while the thread
 * stays stuck in the kernel, and the job is freed whenever it returns: its
 * lifetime is a reqjob (base/reqjob.h) bound to the call (rpc/rpcjob.h).
 */
struct fs_job {
	struct reqjob rj;        /* the call; the job's key, deadline and stall */
	void (*work)(struct fs_job *j); /* sets code/err, or enc for a success */
	uid_t uid;
	gid_t gid;
	uint32_t depth;
	struct rpc_codec codec;
	bool legacy;             /* downgrade the reply (legacy.h) */
	enum rpc_code code;
	struct rpc_encoded enc;
	/* The buffers below are not cleared for a new job (job_alloc): the
	 * strings start empty, the rest is written before it is read. */
	char err[ERRLEN];
	char path[PATH_MAX];
	char path2[PATH_MAX];    /* Move: the destination */
	uint8_t encbuf[1024];    /* a small reply, encoded in place (rpc_encode_buf) */
	/* The EntryInfo of a reply, built in place (fs_entry_info_in): a
	 * worker that allocates contends with the loop for malloc's lock. */
	_Alignas(max_align_t) unsigned char entbuf[1024];
};

/*
 * Jobs are kept for reuse on the loop thread: one is over 8 KiB (two
 * paths), a size musl's allocator hands back to the kernel (madvise) on
 * every free, a syscall per request. A bounded few are kept.
 */
#define JOB_CACHE 128
static struct fs_job *job_cache[JOB_CACHE];
static size_t n_job_cache;

static struct fs_job *job_alloc(void)
{
	struct fs_job *j;

	if (!n_job_cache)
		return calloc(1, sizeof(struct fs_job));
	j = job_cache[--n_job_cache];
	/* Some 9 KiB, mostly buffers: only the fields are cleared. */
	memset(j, 0, offsetof(struct fs_job, err));
	j->err[0] = j->path[0] = j->path2[0] = '\0';
	return j;
}

static void job_release(struct fs_job *j)
{
	if (n_job_cache < JOB_CACHE)
		job_cache[n_job_cache++] = j;
	else
		free(j);
}

/* On the worker: encode a success reply for the job's codec. */
static void job_encode(struct fs_job *j, const ProtobufCMessage *msg)
{
	struct arena a = { 0 };
	const ProtobufCMessage *m = msg;
	int rc;

	if (j->legacy) {
		m = legacy_view(msg, &a);
		if (!m)
			m = msg;
	}
	rc = rpc_encode_buf(&j->codec, m, j->encbuf, sizeof(j->encbuf), &j->enc);
	arena_free(&a);
	if (rc < 0) {
		j->code = RPC_RESOURCE_EXHAUSTED;
		snprintf(j->err, sizeof(j->err), "cannot encode response: %s", go_strerror(-rc));
		return;
	}
	j->code = RPC_OK;
}

static void job_fail(struct fs_job *j, enum rpc_code code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void job_fail(struct fs_job *j, enum rpc_code code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(j->err, sizeof(j->err), fmt, ap);
	va_end(ap);
	j->code = code;
}

static void job_work(void *arg)
{
	struct fs_job *j = arg;
	j->work(j);
}

/* A job's deadline passed: answer its call and let go of it; the job
 * itself is freed when its thread returns. */
static void job_expired(struct reqjob *rj)
{
	rpcjob_expire(rj, REQJOB_CONTAINER(rj, struct fs_job, rj)->path);
}

static void job_free(struct reqjob *rj)
{
	struct fs_job *j = REQJOB_CONTAINER(rj, struct fs_job, rj);

	rpc_encoded_free(&j->enc);
	job_release(j);
}

static const struct reqjob_ops job_ops = { .free = job_free, .expired = job_expired };

/* Loop, while the call is there: answer with what the job made. */
static void job_done(void *arg)
{
	struct fs_job *j = arg;
	struct rpc_call *call = rpcjob_take(&j->rj);

	if (j->code != RPC_OK) {
		rpc_fail(call, j->code, "%s", j->err);
		return;
	}
	if (j->legacy && rpc_call_http(call))
		http_req_extra_header(rpc_call_http(call), "X-E2B-Legacy-SDK", "true", true);
	rpc_reply_encoded(call, &j->enc);
}

/*
 * A job for `call` on `req_path` (and `req_path2`, if not NULL), resolved;
 * NULL when the call was answered.
 */
static struct fs_job *job_new(struct rpc_call *call, const char *req_path, const char *req_path2,
			      void (*work)(struct fs_job *))
{
	struct fs_job *j = job_alloc();
	struct user u;

	if (!j) {
		rpc_fail(call, RPC_RESOURCE_EXHAUSTED, "out of memory");
		return NULL;
	}
	if (caller_of(call, req_path, &u, j->path, sizeof(j->path)) < 0 ||
	    (req_path2 && caller_path(call, &u, req_path2, j->path2, sizeof(j->path2)) < 0)) {
		job_release(j);
		return NULL;
	}
	j->uid = u.uid;
	j->gid = u.gid;
	j->work = work;
	return j;
}

/* Queue the job; the call is answered from job_done or job_expired. */
static void job_submit(struct rpc_call *call, struct fs_job *j)
{
	int64_t client_ms = rpc_call_timeout_ms(call);
	int rc;

	reqjob_init(&j->rj, &job_ops);
	j->rj.key = worker_path_key(j->path);
	j->rj.timeout = worker_deadline_s(client_ms);
	j->rj.stall = client_ms <= 0;
	j->legacy = legacy_user_agent(rpc_call_header(call, "user-agent"));
	rpc_call_codec(call, &j->codec);
	rpcjob_attach(&j->rj, call);
	rc = reqjob_run(&j->rj, job_work, job_done, j, 0);
	if (rc < 0) {
		rpc_fail(rpcjob_take(&j->rj), RPC_RESOURCE_EXHAUSTED,
			 "filesystem worker queue is full, retry later: %s: %s", j->path, go_strerror(-rc));
	} else if (client_ms > 0) {
		/* The client's own deadline ends the call in rpc/connect.c first. */
		rpc_call_set_deadline_message(call, WORKER_TIMEOUT_FMT, j->rj.timeout, j->path);
	}
	reqjob_release(&j->rj);
}

/* --- Stat --- */

static void stat_work(struct fs_job *j)
{
	Filesystem__StatResponse resp = FILESYSTEM__STAT_RESPONSE__INIT;
	int rc = fs_entry_info_in(j->path, j->entbuf, sizeof(j->entbuf), &resp.entry, j->err, sizeof(j->err));

	if (rc) {
		j->code = entry_code(rc);
		return;
	}
	job_encode(j, &resp.base);
	fs_entry_free(resp.entry);
}

static void fs_stat(struct rpc_call *call, const ProtobufCMessage *msg)
{
	const Filesystem__StatRequest *req = (const Filesystem__StatRequest *)msg;
	struct fs_job *j = job_new(call, req->path, NULL, stat_work);

	if (j)
		job_submit(call, j);
}

/* --- MakeDir --- */

static void make_dir_work(struct fs_job *j)
{
	Filesystem__MakeDirResponse resp = FILESYSTEM__MAKE_DIR_RESPONSE__INIT;
	struct stat st;
	int rc;

	if (stat(j->path, &st) == 0) {
		if (S_ISDIR(st.st_mode))
			job_fail(j, RPC_ALREADY_EXISTS, "directory already exists: %s", j->path);
		else
			job_fail(j, RPC_INVALID_ARGUMENT, "path already exists but it is not a directory: %s",
				 j->path);
		return;
	}
	if (errno != ENOENT) {
		job_fail(j, RPC_INTERNAL, "error getting file info: stat %s: %s", j->path, go_strerror(errno));
		return;
	}
	if ((rc = fs_ensure_dirs(j->path, j->uid, j->gid, j->err, sizeof(j->err))) < 0) {
		j->code = rc == -EACCES ? RPC_PERMISSION_DENIED : RPC_INTERNAL;
		return;
	}
	rc = fs_entry_info_in(j->path, j->entbuf, sizeof(j->entbuf), &resp.entry, j->err, sizeof(j->err));
	if (rc) {
		j->code = entry_code(rc);
		return;
	}
	job_encode(j, &resp.base);
	fs_entry_free(resp.entry);
}

static void fs_make_dir(struct rpc_call *call, const ProtobufCMessage *msg)
{
	const Filesystem__MakeDirRequest *req = (const Filesystem__MakeDirRequest *)msg;
	struct fs_job *j = job_new(call, req->path, NULL, make_dir_work);

	if (j)
		job_submit(call, j);
}

/* --- Move --- */

static void move_work(struct fs_job *j)
{
	Filesystem__MoveResponse resp = FILESYSTEM__MOVE_RESPONSE__INIT;
	struct wpath_mk mk = { .uid = j->uid, .gid = j->gid };
	char err[ERRLEN];
	const char *src = j->path, *dst = j->path2;
	struct wpath from, to;
	struct fsid_saved sv;
	int rc, e;

	/* Both names are taken in their directories (fs/wpath.h): a link of
	 * another user's on either path limits the rename to that user's
	 * rights (two users' links: refused). */
	wpath_init(&from);
	wpath_init(&to);
	if ((rc = wpath_parent(&to, dst, &mk, err, sizeof(err))) < 0) {
		job_fail(j, rc == -EACCES ? RPC_PERMISSION_DENIED : RPC_INTERNAL, "error ensuring directories: %s", err);
		goto out;
	}
	if ((rc = wpath_parent(&from, src, NULL, err, sizeof(err))) < 0) {
		if (rc == -ENOENT)
			job_fail(j, RPC_NOT_FOUND, "source file not found: rename %s %s: %s", src, dst, go_strerror(ENOENT));
		else
			job_fail(j, rc == -EACCES ? RPC_PERMISSION_DENIED : RPC_INTERNAL, "error renaming: %s", err);
		goto out;
	}
	if (from.as.set && to.as.set && from.as.uid != to.as.uid) {
		job_fail(j, RPC_PERMISSION_DENIED, "error renaming: rename %s %s: %s (links of two users)", src, dst,
			 go_strerror(EACCES));
		goto out;
	}
	rc = wpath_enter(from.as.set ? &from : &to, &sv);
	if (rc == 0)
		rc = renameat(from.dirfd, from.name[0] ? from.name : ".", to.dirfd, to.name[0] ? to.name : ".") < 0 ? -errno : 0;
	wpath_leave(&sv);
	if (rc < 0) {
		e = -rc;
		if (e == ENOENT)
			job_fail(j, RPC_NOT_FOUND, "source file not found: rename %s %s: %s", src, dst, go_strerror(e));
		else
			job_fail(j, e == EACCES ? RPC_PERMISSION_DENIED : RPC_INTERNAL, "error renaming: rename %s %s: %s",
				 src, dst, go_strerror(e));
		goto out;
	}
	rc = fs_entry_info_in(dst, j->entbuf, sizeof(j->entbuf), &resp.entry, j->err, sizeof(j->err));
	if (rc) {
		j->code = entry_code(rc);
		goto out;
	}
	job_encode(j, &resp.base);
	fs_entry_free(resp.entry);
out:
	wpath_close(&from);
	wpath_close(&to);
}

static void fs_move(struct rpc_call *call, const ProtobufCMessage *msg)
{
	const Filesystem__MoveRequest *req = (const Filesystem__MoveRequest *)msg;
	struct fs_job *j = job_new(call, req->source, req->destination, move_work);

	if (j)
		job_submit(call, j);
}

/* --- ListDir and Remove --- */

/*
 * ListDir walks in steps, each a worker job that reads entries until
 * LS_STEP bytes of reply are encoded (fs_walk_next, rpc_list_add). A walk
 * that ends within its first step is answered as one message, as any
 * unary call (its errors with their codes). A longer one, where the
 * protocol allows (Connect unary, uncompressed: rpc_reply_streamable),
 * goes out piece by piece while the walk goes on: the next step is queued
 * as soon as the call's queue is below RPC_SEND_HIGH (else when it drains:
 * the reqjob's writable, run from the call's on_writable by rpcjob), so
 * the steps' lifetime is the reqjob's and the walk, the encoding and the
 * socket overlap, the
 * first byte leaves after one step, and the memory held is a step or two
 * plus the walk's names, whatever the tree's size. The bytes are those of
 * the one message. A failure after the first piece cuts the body (the
 * status is out): the client sees a failed request, never a short list.
 * Other protocols put the length in front, so there the walk runs to its
 * end in one job and the reply goes whole.
 */
#define LS_STEP (128 * 1024)

struct ls_job {
	struct reqjob rj;        /* the call; the steps' key, deadline and stall */
	struct fs_walk *walk;    /* opened by the first step */
	struct rpc_list list;    /* the reply being encoded */
	struct rpc_encoded piece;
	bool whole;              /* one message: the protocol needs its length */
	bool legacy;
	bool streaming;          /* pieces went out */
	bool done;               /* the walk ended, or failed (code) */
	enum rpc_code code;
	uint32_t depth;
	char err[ERRLEN];
	char path[PATH_MAX];
	/* A short listing's reply, copied here on the worker that made it:
	   the step's buffer is then freed by the thread that allocated it,
	   not by the loop, and the reply goes out as a borrowed buffer. */
	uint8_t small[4096];
};

/* Kept for reuse on the loop, as fs_job is (over 8 KiB: musl gives such
   a block back to the kernel on every free). */
#define LS_CACHE 16
static struct ls_job *ls_cache[LS_CACHE];
static size_t n_ls_cache;

static struct ls_job *ls_alloc(void)
{
	struct ls_job *j;

	if (!n_ls_cache)
		return calloc(1, sizeof(struct ls_job));
	j = ls_cache[--n_ls_cache];
	/* The fields; the buffers after them are written before read. */
	memset(j, 0, offsetof(struct ls_job, err));
	j->err[0] = j->path[0] = '\0';
	return j;
}

static void ls_release(struct ls_job *j)
{
	if (n_ls_cache < LS_CACHE)
		ls_cache[n_ls_cache++] = j;
	else
		free(j);
}

/* The last reference went (reqjob): what a step left behind goes too. */
static void ls_free(struct reqjob *rj)
{
	struct ls_job *j = REQJOB_CONTAINER(rj, struct ls_job, rj);

	fs_walk_close(j->walk);
	rpc_list_free(&j->list);
	rpc_encoded_free(&j->piece);
	ls_release(j);
}

static void ls_work(void *arg)
{
	struct ls_job *j = arg;
	Filesystem__EntryInfo *e;
	int rc;

	if (!j->walk) {
		rc = fs_walk_open(j->path, j->depth, &j->walk, j->err, sizeof(j->err));
		if (rc < 0)
			goto failed;
	}
	while ((rc = fs_walk_next(j->walk, &e, j->err, sizeof(j->err))) > 0) {
		const ProtobufCMessage *m = &e->base;
		struct arena a = { 0 };
		int arc;

		if (j->legacy && !(m = legacy_view(m, &a)))
			m = &e->base;
		arc = rpc_list_add(&j->list, m);
		arena_free(&a);
		if (arc < 0) {
			j->code = RPC_RESOURCE_EXHAUSTED;
			snprintf(j->err, sizeof(j->err), "cannot encode response: %s", go_strerror(-arc));
			j->done = true;
			goto out;
		}
		if (!j->whole && rpc_list_pending(&j->list) >= LS_STEP)
			break;
		if (reqjob_gone(&j->rj)) {
			j->done = true; /* nobody to send it to */
			goto out;
		}
	}
	if (rc < 0)
		goto failed;
	j->done = rc == 0;
	if (rpc_list_take(&j->list, j->done, &j->piece) < 0) {
		j->code = RPC_RESOURCE_EXHAUSTED;
		snprintf(j->err, sizeof(j->err), "cannot encode response: %s", go_strerror(ENOMEM));
		j->done = true;
	}
	if (j->done && !j->streaming && !j->piece.gzipped && j->piece.mem &&
	    j->piece.len + RPC_ENC_HDR <= sizeof(j->small)) {
		memcpy(j->small + RPC_ENC_HDR, (uint8_t *)j->piece.mem + RPC_ENC_HDR, j->piece.len);
		free(j->piece.mem);
		j->piece.mem = j->small;
		j->piece.borrowed = true;
	}
	goto out;
failed:
	j->code = rpc_code_from_errno(rc);
	j->done = true;
out:
	/* What the walk allocated goes back on the thread that allocated it. */
	if (j->done) {
		fs_walk_close(j->walk);
		j->walk = NULL;
		rpc_list_free(&j->list);
	}
}

static void ls_done(void *arg);

/* Queue the next step; the call is answered from ls_done or ls_expired. */
static void ls_step(struct ls_job *j)
{
	int rc = reqjob_run(&j->rj, ls_work, ls_done, j, 0);

	if (rc < 0)
		rpc_fail(rpcjob_take(&j->rj), RPC_RESOURCE_EXHAUSTED,
			 "filesystem worker queue is full, retry later: %s: %s", j->path, go_strerror(-rc));
}

/* Loop, while the call is there (the step's reference is held across). */
static void ls_done(void *arg)
{
	struct ls_job *j = arg;
	struct rpc_call *call = rpcjob_call(&j->rj);
	int rc;

	if (j->code != RPC_OK) {
		/* Once pieces went out, rpc_fail cuts the body. */
		rpc_fail(rpcjob_take(&j->rj), j->code, "%s", j->err);
		return;
	}
	if (j->legacy && !j->streaming && rpc_call_http(call))
		http_req_extra_header(rpc_call_http(call), "X-E2B-Legacy-SDK", "true", true);
	if (j->done && !j->streaming) {
		rpc_reply_encoded(rpcjob_take(&j->rj), &j->piece);
		return;
	}
	j->streaming = true;
	rc = rpc_reply_piece(call, &j->piece);
	if (!reqjob_live(&j->rj))
		return; /* the send found the client gone */
	if (rc < 0) {
		rpc_fail(rpcjob_take(&j->rj), RPC_INTERNAL, "cannot send the listing of %s", j->path);
		return;
	}
	if (j->done) {
		rpc_reply_pieces_end(rpcjob_take(&j->rj));
		return;
	}
	if (rpc_call_queued(call) < RPC_SEND_HIGH)
		ls_step(j);
}

/* The call's queue drained: the walk goes on if it was waiting for that. */
static void ls_writable(struct reqjob *rj)
{
	struct ls_job *j = REQJOB_CONTAINER(rj, struct ls_job, rj);

	if (j->streaming && !j->done && !reqjob_busy(rj))
		ls_step(j);
}

static void ls_expired(struct reqjob *rj)
{
	rpcjob_expire(rj, REQJOB_CONTAINER(rj, struct ls_job, rj)->path);
}

static const struct reqjob_ops ls_ops = { .free = ls_free, .expired = ls_expired, .writable = ls_writable };

static void fs_list_dir(struct rpc_call *call, const ProtobufCMessage *msg)
{
	const Filesystem__ListDirRequest *req = (const Filesystem__ListDirRequest *)msg;
	struct ls_job *j = ls_alloc();
	int64_t client_ms = rpc_call_timeout_ms(call);
	struct rpc_codec codec;
	struct user u;

	if (!j) {
		rpc_fail(call, RPC_RESOURCE_EXHAUSTED, "out of memory");
		return;
	}
	if (caller_of(call, req->path, &u, j->path, sizeof(j->path)) < 0) {
		ls_release(j);
		return;
	}
	reqjob_init(&j->rj, &ls_ops);
	j->rj.key = worker_path_key(j->path);
	j->rj.timeout = worker_deadline_s(client_ms);
	j->rj.stall = client_ms <= 0;
	j->depth = req->depth;
	j->legacy = legacy_user_agent(rpc_call_header(call, "user-agent"));
	j->whole = !rpc_reply_streamable(call);
	rpc_call_codec(call, &codec);
	rpc_list_init(&j->list, &codec,
		      protobuf_c_message_descriptor_get_field_by_name(&filesystem__list_dir_response__descriptor,
								      "entries"));
	rpcjob_attach(&j->rj, call);
	if (client_ms > 0)
		rpc_call_set_deadline_message(call, WORKER_TIMEOUT_FMT, j->rj.timeout, j->path);
	ls_step(j);
	reqjob_release(&j->rj);
}

static void remove_work(struct fs_job *j)
{
	Filesystem__RemoveResponse resp = FILESYSTEM__REMOVE_RESPONSE__INIT;
	char err[ERRLEN];
	int rc = fs_remove_all(j->path, err, sizeof(err));

	if (rc) {
		/* EACCES: the kernel refused (past a link of another user's,
		 * fs/wpath.h, the removal has that user's rights). */
		job_fail(j, rc == -EACCES ? RPC_PERMISSION_DENIED : RPC_INTERNAL, "error removing file or directory: %s", err);
		return;
	}
	job_encode(j, &resp.base);
}

static void fs_remove(struct rpc_call *call, const ProtobufCMessage *msg)
{
	const Filesystem__RemoveRequest *req = (const Filesystem__RemoveRequest *)msg;
	struct fs_job *j = job_new(call, req->path, NULL, remove_work);

	if (j)
		job_submit(call, j);
}

/* --- events --- */

/* A heap FilesystemEvent (free with event_free); takes `entry` (the watch
 * stat'ed it, off the loop) whatever happens. */
static Filesystem__FilesystemEvent *event_new(const char *name, Filesystem__EventType type,
					      Filesystem__EntryInfo *entry)
{
	Filesystem__FilesystemEvent *ev = malloc(sizeof(*ev));

	if (!ev) {
		fs_entry_free(entry);
		return NULL;
	}
	filesystem__filesystem_event__init(ev);
	ev->type = type;
	ev->name = strdup(name);
	if (!ev->name) {
		fs_entry_free(entry);
		free(ev);
		return NULL;
	}
	if (entry) {
		ev->optional_entry_case = FILESYSTEM__FILESYSTEM_EVENT__OPTIONAL_ENTRY_ENTRY;
		ev->entry = entry;
	}
	return ev;
}

static void event_free(Filesystem__FilesystemEvent *ev)
{
	if (!ev)
		return;
	/* The entry has its own layout (fs_entry_free); the rest is plain. */
	if (ev->optional_entry_case == FILESYSTEM__FILESYSTEM_EVENT__OPTIONAL_ENTRY_ENTRY) {
		fs_entry_free(ev->entry);
		ev->entry = NULL;
		ev->optional_entry_case = FILESYSTEM__FILESYSTEM_EVENT__OPTIONAL_ENTRY__NOT_SET;
	}
	protobuf_c_message_free_unpacked(&ev->base, NULL);
}

/* --- WatchDir --- */

struct watch_stream {
	struct rpc_call *call;
	struct fs_watch *w;
	ev_timer keepalive;
	bool include_entry;
	bool lost;        /* events dropped for a slow client; owe an overflow */
	struct watch_stream *prev, *next;
};

/* Open WatchDir streams, so an upgrade can end them all. */
static struct watch_stream *streams;

static void stream_free(struct watch_stream *s)
{
	if (s->prev)
		s->prev->next = s->next;
	else if (streams == s)
		streams = s->next;
	if (s->next)
		s->next->prev = s->prev;
	ev_timer_stop(envd_loop, &s->keepalive);
	fs_watch_free(s->w);
	free(s);
}

static void stream_send_event(struct watch_stream *s, Filesystem__FilesystemEvent *ev)
{
	Filesystem__WatchDirResponse resp = FILESYSTEM__WATCH_DIR_RESPONSE__INIT;

	resp.event_case = FILESYSTEM__WATCH_DIR_RESPONSE__EVENT_FILESYSTEM;
	resp.filesystem = ev;
	fs_send(s->call, &resp.base);
	ev_timer_again(envd_loop, &s->keepalive);
}

static void stream_send_overflow(struct watch_stream *s)
{
	Filesystem__FilesystemEvent ev = FILESYSTEM__FILESYSTEM_EVENT__INIT;

	ev.name = ".";
	ev.type = FILESYSTEM__EVENT_TYPE__EVENT_TYPE_OVERFLOW;
	stream_send_event(s, &ev);
	s->lost = false;
}

static void stream_on_event(void *ud, const char *name, const char *path, Filesystem__EventType type,
			    Filesystem__EntryInfo *entry)
{
	struct watch_stream *s = ud;
	Filesystem__FilesystemEvent *ev;

	if (type == FILESYSTEM__EVENT_TYPE__EVENT_TYPE_OVERFLOW)
		s->lost = true;
	/* A client that does not read gets no unbounded queue: drop and tell
	 * it to rescan once it catches up (on_writable). */
	if (s->lost || rpc_call_queued(s->call) > WATCH_STREAM_QUEUE_MAX) {
		fs_entry_free(entry);
		s->lost = true;
		if (rpc_call_queued(s->call) <= WATCH_STREAM_QUEUE_MAX / 2)
			stream_send_overflow(s);
		return;
	}
	ev = event_new(name, type, entry);
	if (!ev) {
		s->lost = true;
		return;
	}
	stream_send_event(s, ev);
	event_free(ev);
}

static void stream_on_writable(struct rpc_call *call)
{
	struct watch_stream *s = rpc_call_ud(call);
	if (s->lost && rpc_call_queued(call) <= WATCH_STREAM_QUEUE_MAX / 2)
		stream_send_overflow(s);
}

static void stream_on_cancel(struct rpc_call *call, enum rpc_code why)
{
	stream_free(rpc_call_ud(call));
}

static void stream_on_keepalive(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct watch_stream *s = t->data;
	Filesystem__WatchDirResponse resp = FILESYSTEM__WATCH_DIR_RESPONSE__INIT;
	Filesystem__WatchDirResponse__KeepAlive ka = FILESYSTEM__WATCH_DIR_RESPONSE__KEEP_ALIVE__INIT;

	resp.event_case = FILESYSTEM__WATCH_DIR_RESPONSE__EVENT_KEEPALIVE;
	resp.keepalive = &ka;
	fs_send(s->call, &resp.base);
	ev_timer_again(loop, t);
}

static const struct rpc_call_hooks stream_hooks = {
	.on_writable = stream_on_writable,
	.on_cancel = stream_on_cancel,
};

/*
 * The check of the root (stat, statfs) and adding the watches (a recursive
 * watch walks the whole tree) run as a worker job with the mount's key and
 * the call's deadline, as the unary calls do; the stream starts, or the
 * watcher is registered, when that is done.
 */
struct watch_job {
	struct reqjob rj;       /* the call until the job is back; key, deadline, stall */
	struct rpc_call *call;  /* ... then taken back, for ready() to answer */
	char path[PATH_MAX];
	bool recursive;
	bool include_entry;
	bool allow_network_mounts;
	struct fs_watch *w;     /* the job's; ready() takes it */
	int rc;
	char err[ERRLEN];
	void (*ready)(struct watch_job *j);
};

static void watch_job_work(void *arg)
{
	struct watch_job *j = arg;

	j->rc = fs_watch_check(j->path, j->allow_network_mounts, j->err, sizeof(j->err));
	if (j->rc)
		return;
	/* Failing to add a watch is internal, whatever the errno. */
	if (fs_watch_prepare(j->path, j->recursive, &j->w, j->err, sizeof(j->err)) < 0)
		j->rc = -EIO;
}

static void watch_job_expired(struct reqjob *rj)
{
	rpcjob_expire(rj, REQJOB_CONTAINER(rj, struct watch_job, rj)->path);
}

/* Also when the call went away: the watches the job added go with it. */
static void watch_job_free(struct reqjob *rj)
{
	struct watch_job *j = REQJOB_CONTAINER(rj, struct watch_job, rj);

	fs_watch_free(j->w);
	free(j);
}

static const struct reqjob_ops watch_job_ops = { .free = watch_job_free, .expired = watch_job_expired };

/* Loop, while the call is there: start the stream or register the watcher. */
static void watch_job_done(void *arg)
{
	struct watch_job *j = arg;

	j->call = rpcjob_take(&j->rj);
	rpc_call_set_deadline_message(j->call, NULL);
	if (j->rc) {
		rpc_fail(j->call, rpc_code_from_errno(j->rc), "%s", j->err);
		return;
	}
	j->ready(j); /* takes j->w */
	j->w = NULL;
}

/* Resolve, validate and queue the watch setup; on failure the call is answered. */
static void watch_submit(struct rpc_call *call, const char *req_path, bool recursive, bool include_entry,
			 bool allow_network_mounts, void (*ready)(struct watch_job *))
{
	struct watch_job *j = calloc(1, sizeof(*j));
	int64_t client_ms;
	struct user u;
	int rc;

	if (!j) {
		rpc_fail(call, RPC_RESOURCE_EXHAUSTED, "out of memory");
		return;
	}
	if (caller_of(call, req_path, &u, j->path, sizeof(j->path)) < 0) {
		free(j);
		return;
	}
	reqjob_init(&j->rj, &watch_job_ops);
	j->recursive = recursive;
	j->include_entry = include_entry;
	j->allow_network_mounts = allow_network_mounts;
	j->ready = ready;
	client_ms = rpc_call_timeout_ms(call);
	j->rj.key = worker_path_key(j->path);
	j->rj.timeout = worker_deadline_s(client_ms);
	j->rj.stall = client_ms <= 0;
	rpcjob_attach(&j->rj, call);
	rc = reqjob_run(&j->rj, watch_job_work, watch_job_done, j, 0);
	if (rc < 0)
		rpc_fail(rpcjob_take(&j->rj), RPC_RESOURCE_EXHAUSTED,
			 "filesystem worker queue is full, retry later: %s: %s", j->path, go_strerror(-rc));
	else if (client_ms > 0)
		rpc_call_set_deadline_message(call, WORKER_TIMEOUT_FMT, j->rj.timeout, j->path);
	reqjob_release(&j->rj);
}

static void watch_stream_ready(struct watch_job *j)
{
	Filesystem__WatchDirResponse resp = FILESYSTEM__WATCH_DIR_RESPONSE__INIT;
	Filesystem__WatchDirResponse__StartEvent start = FILESYSTEM__WATCH_DIR_RESPONSE__START_EVENT__INIT;
	struct watch_stream *s = calloc(1, sizeof(*s));

	if (!s) {
		fs_watch_free(j->w);
		rpc_fail(j->call, RPC_RESOURCE_EXHAUSTED, "out of memory");
		return;
	}
	s->call = j->call;
	s->include_entry = j->include_entry;
	s->w = j->w;
	fs_watch_start(s->w, s->include_entry, stream_on_event, NULL, s);
	ev_init(&s->keepalive, stream_on_keepalive);
	s->keepalive.repeat = (ev_tstamp)rpc_call_keepalive_s(s->call);
	s->keepalive.data = s;
	ev_timer_again(envd_loop, &s->keepalive);
	rpc_call_set_hooks(s->call, &stream_hooks, s);
	s->next = streams;
	if (streams)
		streams->prev = s;
	streams = s;
	resp.event_case = FILESYSTEM__WATCH_DIR_RESPONSE__EVENT_START;
	resp.start = &start;
	fs_send(s->call, &resp.base);
}

static void fs_watch_dir(struct rpc_call *call, const ProtobufCMessage *msg)
{
	const Filesystem__WatchDirRequest *req = (const Filesystem__WatchDirRequest *)msg;

	watch_submit(call, req->path, req->recursive, req->include_entry, req->allow_network_mounts,
		     watch_stream_ready);
}

/* --- CreateWatcher / GetWatcherEvents / RemoveWatcher --- */

struct watcher {
	char id[24];
	struct fs_watch *w;
	bool include_entry;
	bool recursive;
	char *path;              /* kept for the live-upgrade record */
	struct buf events; /* Filesystem__FilesystemEvent *, at most WATCHER_EVENTS_MAX */
	bool overflowed; /* the buffer limit was hit; an overflow event is queued */
	/* A GetWatcherEvents waiting for the watch's job (see there). */
	struct rpc_call *poll;
	ev_timer poll_timer;
};

static struct watcher *watchers[WATCHERS_CAP];

size_t fs_service_watcher_count(void)
{
	size_t n = 0;
	for (size_t i = 0; i < WATCHERS_CAP; i++)
		n += watchers[i] != NULL;
	return n;
}

static Filesystem__FilesystemEvent **watcher_events(const struct watcher *wt)
{
	return (Filesystem__FilesystemEvent **)wt->events.p;
}

static size_t watcher_n(const struct watcher *wt)
{
	return wt->events.len / sizeof(Filesystem__FilesystemEvent *);
}

static void watcher_clear(struct watcher *wt)
{
	for (size_t i = 0; i < watcher_n(wt); i++)
		event_free(watcher_events(wt)[i]);
	buf_free(&wt->events);
}

static bool watcher_push(struct watcher *wt, Filesystem__FilesystemEvent *ev)
{
	return buf_append(&wt->events, &ev, sizeof(ev)) == 0;
}

static void watcher_on_event(void *ud, const char *name, const char *path, Filesystem__EventType type,
			     Filesystem__EntryInfo *entry)
{
	struct watcher *wt = ud;
	Filesystem__FilesystemEvent *ev;

	if (wt->overflowed) {
		fs_entry_free(entry);
		return;
	}
	if (watcher_n(wt) >= WATCHER_EVENTS_MAX - 1)
		type = FILESYSTEM__EVENT_TYPE__EVENT_TYPE_OVERFLOW;
	if (type == FILESYSTEM__EVENT_TYPE__EVENT_TYPE_OVERFLOW) {
		/* Everything after this point is lost until the client drains. */
		name = ".";
		wt->overflowed = true;
		fs_entry_free(entry);
		entry = NULL;
	}
	ev = event_new(name, type, entry);
	if (!ev || !watcher_push(wt, ev)) {
		event_free(ev);
		wt->overflowed = true;
	}
}

/* Answer a GetWatcherEvents with what the buffer holds, and empty it. */
static void watcher_answer(struct watcher *wt, struct rpc_call *call)
{
	Filesystem__GetWatcherEventsResponse resp = FILESYSTEM__GET_WATCHER_EVENTS_RESPONSE__INIT;

	resp.events = watcher_events(wt);
	resp.n_events = watcher_n(wt);
	fs_reply(call, &resp.base);
	watcher_clear(wt);
	wt->overflowed = false;
}

static void watcher_answer_poll(struct watcher *wt)
{
	struct rpc_call *call = wt->poll;

	if (!call)
		return;
	wt->poll = NULL;
	ev_timer_stop(envd_loop, &wt->poll_timer);
	rpc_call_set_hooks(call, NULL, NULL);
	watcher_answer(wt, call);
}

static void watcher_on_idle(void *ud)
{
	watcher_answer_poll(ud);
}

static void watcher_on_poll_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
	watcher_answer_poll(t->data);
}

static void watcher_poll_on_cancel(struct rpc_call *call, enum rpc_code why)
{
	struct watcher *wt = rpc_call_ud(call);

	wt->poll = NULL;
	ev_timer_stop(envd_loop, &wt->poll_timer);
}

static const struct rpc_call_hooks watcher_poll_hooks = { .on_cancel = watcher_poll_on_cancel };

static void watcher_free(struct watcher *wt)
{
	watcher_answer_poll(wt);
	fs_watch_free(wt->w);
	watcher_clear(wt);
	free(wt->path);
	free(wt);
}

static int watcher_new_id(char id[24])
{
	static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
	unsigned char rnd[20];
	size_t got = 0;

	while (got < sizeof(rnd)) {
		ssize_t n = getrandom(rnd + got, sizeof(rnd) - got, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		got += (size_t)n;
	}
	id[0] = 'w';
	for (int i = 0; i < 20; i++)
		id[1 + i] = alphabet[rnd[i] % 36]; /* slight bias is harmless for ids */
	id[21] = '\0';
	return 0;
}

static struct watcher **watcher_find(const char *id)
{
	for (size_t i = 0; i < WATCHERS_CAP; i++)
		if (watchers[i] && strcmp(watchers[i]->id, id) == 0)
			return &watchers[i];
	return NULL;
}

static void watcher_ready(struct watch_job *j)
{
	Filesystem__CreateWatcherResponse resp = FILESYSTEM__CREATE_WATCHER_RESPONSE__INIT;
	struct watcher **slot = NULL, *wt;
	int rc;

	for (size_t i = 0; i < (fs_max_watchers < WATCHERS_CAP ? fs_max_watchers : WATCHERS_CAP) && !slot; i++)
		if (!watchers[i])
			slot = &watchers[i];
	if (!slot) {
		fs_watch_free(j->w);
		rpc_fail(j->call, RPC_RESOURCE_EXHAUSTED, "too many watchers (at most %zu); remove some first",
			 fs_max_watchers);
		return;
	}
	wt = calloc(1, sizeof(*wt));
	if (!wt) {
		fs_watch_free(j->w);
		rpc_fail(j->call, RPC_RESOURCE_EXHAUSTED, "out of memory");
		return;
	}
	wt->include_entry = j->include_entry;
	wt->recursive = j->recursive;
	wt->path = strdup(j->path);
	buf_init(&wt->events, WATCHER_EVENTS_MAX * sizeof(Filesystem__FilesystemEvent *));
	do {
		rc = watcher_new_id(wt->id);
	} while (rc == 0 && watcher_find(wt->id));
	if (rc < 0) {
		fs_watch_free(j->w);
		free(wt->path);
		free(wt);
		rpc_fail(j->call, RPC_INTERNAL, "error creating watcher id: %s", go_strerror(-rc));
		return;
	}
	wt->w = j->w;
	ev_init(&wt->poll_timer, watcher_on_poll_timer);
	wt->poll_timer.data = wt;
	fs_watch_start(wt->w, wt->include_entry, watcher_on_event, watcher_on_idle, wt);
	*slot = wt;
	resp.watcher_id = wt->id;
	fs_reply(j->call, &resp.base);
}

static void fs_create_watcher(struct rpc_call *call, const ProtobufCMessage *msg)
{
	const Filesystem__CreateWatcherRequest *req = (const Filesystem__CreateWatcherRequest *)msg;

	watch_submit(call, req->path, req->recursive, req->include_entry, req->allow_network_mounts, watcher_ready);
}

static void fs_get_watcher_events(struct rpc_call *call, const ProtobufCMessage *msg)
{
	const Filesystem__GetWatcherEventsRequest *req = (const Filesystem__GetWatcherEventsRequest *)msg;
	struct watcher **slot = watcher_find(req->watcher_id);
	struct watcher *wt;

	if (!slot) {
		rpc_fail(call, RPC_NOT_FOUND, "watcher with id %s not found", req->watcher_id);
		return;
	}
	wt = *slot;
	/* Whatever the kernel has queued by now belongs in this answer: a
	 * client polling right after a write must see it. Events that wait
	 * for the watch's job (a new directory, an entry to stat) are waited
	 * for, but only so long: on a hung mount the answer comes with what
	 * is there, and the rest in a later poll. One poll waits at a time. */
	fs_watch_drain(wt->w);
	if (fs_watch_busy(wt->w) && !wt->poll) {
		double wait = WATCHER_POLL_WAIT_S;
		int64_t ms = rpc_call_timeout_ms(call);

		if (ms > 0 && ms / 2000.0 < wait)
			wait = ms / 2000.0;
		wt->poll = call;
		rpc_call_set_hooks(call, &watcher_poll_hooks, wt);
		ev_timer_set(&wt->poll_timer, wait, 0);
		ev_timer_start(envd_loop, &wt->poll_timer);
		return;
	}
	watcher_answer(wt, call);
}

static void fs_remove_watcher(struct rpc_call *call, const ProtobufCMessage *msg)
{
	const Filesystem__RemoveWatcherRequest *req = (const Filesystem__RemoveWatcherRequest *)msg;
	Filesystem__RemoveWatcherResponse resp = FILESYSTEM__REMOVE_WATCHER_RESPONSE__INIT;
	struct watcher **slot = watcher_find(req->watcher_id);

	if (!slot) {
		rpc_fail(call, RPC_NOT_FOUND, "watcher with id %s not found", req->watcher_id);
		return;
	}
	watcher_free(*slot);
	*slot = NULL;
	fs_reply(call, &resp.base);
}

/* --- live upgrade --- */

void fs_end_streams(enum rpc_code code, const char *msg)
{
	while (streams) {
		struct rpc_call *call = streams->call;

		stream_free(streams);
		rpc_call_set_hooks(call, NULL, NULL);
		rpc_fail(call, code, "%s", msg);
	}
}

void fs_watchers_snapshot_each(void (*fn)(void *ud, const struct fs_watcher_snapshot *s), void *ud)
{
	for (size_t i = 0; i < WATCHERS_CAP; i++) {
		struct watcher *wt = watchers[i];
		struct fs_watcher_snapshot s;

		if (!wt || !wt->path)
			continue;
		/* Events the kernel holds now are owed to the client: take them
		 * along; the new inotify instance only sees what comes later. */
		fs_watch_drain(wt->w);
		watcher_answer_poll(wt);
		/* Events a job still holds are lost with this image, and its
		 * table may be changing: the client is told to rescan. */
		if (fs_watch_busy(wt->w))
			watcher_on_event(wt, ".", wt->path, FILESYSTEM__EVENT_TYPE__EVENT_TYPE_OVERFLOW, NULL);
		s.id = wt->id;
		s.path = wt->path;
		s.recursive = wt->recursive;
		s.include_entry = wt->include_entry;
		s.events = (const Filesystem__FilesystemEvent *const *)watcher_events(wt);
		s.n_events = watcher_n(wt);
		s.watch = wt->w;
		s.inotify_fd = -1;
		s.wds = NULL;
		s.rels = NULL;
		s.n_wds = 0;
		fn(ud, &s);
	}
}

static Filesystem__FilesystemEvent *event_copy(const Filesystem__FilesystemEvent *ev)
{
	size_t n = filesystem__filesystem_event__get_packed_size(ev);
	uint8_t *buf = malloc(n ? n : 1);
	Filesystem__FilesystemEvent *out;

	if (!buf)
		return NULL;
	filesystem__filesystem_event__pack(ev, buf);
	out = filesystem__filesystem_event__unpack(NULL, n, buf);
	free(buf);
	/* event_free releases the entry with fs_entry_free: give it that layout. */
	if (out && out->optional_entry_case == FILESYSTEM__FILESYSTEM_EVENT__OPTIONAL_ENTRY_ENTRY && out->entry) {
		Filesystem__EntryInfo *e = fs_entry_dup(out->entry);
		protobuf_c_message_free_unpacked(&out->entry->base, NULL);
		out->entry = e;
		if (!e) {
			out->optional_entry_case = FILESYSTEM__FILESYSTEM_EVENT__OPTIONAL_ENTRY__NOT_SET;
			protobuf_c_message_free_unpacked(&out->base, NULL);
			return NULL;
		}
	}
	return out;
}

int fs_watcher_adopt(const struct fs_watcher_snapshot *s, char *err, size_t errlen)
{
	struct watcher **slot = NULL, *wt;
	int rc;

	if (!s->id || strlen(s->id) >= sizeof(wt->id) || watcher_find(s->id)) {
		snprintf(err, errlen, "bad or duplicate watcher id");
		return -EINVAL;
	}
	for (size_t i = 0; i < WATCHERS_CAP && !slot; i++)
		if (!watchers[i])
			slot = &watchers[i];
	wt = slot ? calloc(1, sizeof(*wt)) : NULL;
	if (!wt) {
		snprintf(err, errlen, "too many watchers");
		return -ENOSPC;
	}
	snprintf(wt->id, sizeof(wt->id), "%s", s->id);
	wt->include_entry = s->include_entry;
	wt->recursive = s->recursive;
	buf_init(&wt->events, WATCHER_EVENTS_MAX * sizeof(Filesystem__FilesystemEvent *));
	wt->path = strdup(s->path ? s->path : "");
	for (size_t i = 0; wt->path && i < s->n_events; i++) {
		Filesystem__FilesystemEvent *ev = event_copy(s->events[i]);

		if (!ev || !watcher_push(wt, ev)) {
			event_free(ev);
			break;
		}
	}
	if (!wt->path)
		rc = -ENOMEM;
	else if (s->inotify_fd >= 0)
		rc = fs_watch_adopt(s->inotify_fd, wt->path, wt->recursive, s->wds, s->rels, s->n_wds, &wt->w);
	else
		rc = fs_watch_prepare(wt->path, wt->recursive, &wt->w, err, errlen);
	if (rc < 0 && s->inotify_fd >= 0)
		snprintf(err, errlen, "adopt inotify instance: %s", strerror(-rc));
	if (rc < 0) {
		watcher_free(wt);
		return rc;
	}
	ev_init(&wt->poll_timer, watcher_on_poll_timer);
	wt->poll_timer.data = wt;
	fs_watch_start(wt->w, wt->include_entry, watcher_on_event, watcher_on_idle, wt);
	*slot = wt;
	return 0;
}

static const struct rpc_method_impl fs_methods[] = {
	{ "Stat", RPC_UNARY, fs_stat },
	{ "MakeDir", RPC_UNARY, fs_make_dir },
	{ "Move", RPC_UNARY, fs_move },
	{ "ListDir", RPC_UNARY, fs_list_dir },
	{ "Remove", RPC_UNARY, fs_remove },
	{ "WatchDir", RPC_SERVER_STREAM, fs_watch_dir },
	{ "CreateWatcher", RPC_UNARY, fs_create_watcher },
	{ "GetWatcherEvents", RPC_UNARY, fs_get_watcher_events },
	{ "RemoveWatcher", RPC_UNARY, fs_remove_watcher },
	{ "Changes", RPC_UNARY, changes_rpc },
	{ "Glob", RPC_UNARY, fs_tools_glob },
	{ "Grep", RPC_SERVER_STREAM, fs_tools_grep },
	{ "ReadLines", RPC_UNARY, fs_tools_read_lines },
	{ "Edit", RPC_UNARY, fs_edit },
};

const struct rpc_service fs_service = {
	.desc = &filesystem__filesystem__descriptor,
	.methods = fs_methods,
	.n_methods = sizeof(fs_methods) / sizeof(fs_methods[0]),
};
