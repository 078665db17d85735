/* SPDX-License-Identifier: Apache-2.0 */
/*
 * changes.c - the questions asked of the change journal: the Changes RPC
 * and GET /changes (changes.h); the journal's start, stop and hand-over,
 * in the order its parts need.
 */
#include "changes/changes.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/handover.h"
#include "base/log.h"
#include "base/reqjob.h"
#include "base/state.h"
#include "base/users.h"
#include "changes/journal.h"
#include "changes/source.h"
#include "changes/tracker.h"
#include "http/httpjob.h"
#include "proto/pbjson.h"
#include "rpc/caller.h"
#include "rpc/rpcjob.h"

size_t changes_max_paths = 200000;
enum changes_source changes_source = CHANGES_SOURCE_AUTO;
size_t changes_inotify_watches;

/* A reply without a limit stops here (the rest is paged). */
#define CHANGES_PAGE_MAX 10000

/* ---- queries (RPC and HTTP) ---- */

/*
 * One question, waiting for the source to catch up (source_barrier) before
 * it is answered. Its lifetime is a reqjob's: the creator's reference is
 * the barrier's, dropped once the barrier called back; the call or the
 * exchange holds the other until it is answered or goes away.
 */
struct ask {
	struct reqjob job;
	bool has_since;
	bool other_epoch;
	uint64_t base, cursor;
	char prefix[PATH_MAX];
	char **inc, **exc;
	size_t n_inc, n_exc;
	uint32_t limit;
};

static void ask_free(struct ask *a);

static void ask_job_free(struct reqjob *j)
{
	ask_free(REQJOB_CONTAINER(j, struct ask, job));
}

static const struct reqjob_ops ask_ops = { .free = ask_job_free };

/* A new question, holding the creator's reference; NULL without memory. */
static struct ask *ask_new(void)
{
	struct ask *a = calloc(1, sizeof(*a));
	if (a)
		reqjob_init(&a->job, &ask_ops);
	return a;
}

static void ask_free(struct ask *a)
{
	for (size_t i = 0; i < a->n_inc; i++)
		free(a->inc[i]);
	for (size_t i = 0; i < a->n_exc; i++)
		free(a->exc[i]);
	free(a->inc);
	free(a->exc);
	free(a);
}

/* Build the reply; the caller encodes it, then calls reply_free. */
struct reply {
	Filesystem__ChangesResponse resp;
	struct journal_result r;
	Filesystem__Change *items;
	Filesystem__Change **ptrs;
	Filesystem__EventType *evs;
	Google__Protobuf__Timestamp *ts;
	char next[JOURNAL_TOKEN_LEN];
	char **nt, **ir;
};

static void reply_free(struct reply *rp)
{
	journal_result_free(&rp->r);
	free(rp->items);
	free(rp->ptrs);
	free(rp->evs);
	free(rp->ts);
	if (rp->nt)
		for (size_t i = 0; i < rp->resp.n_not_tracked; i++)
			free(rp->nt[i]);
	free(rp->nt);
	if (rp->ir)
		for (size_t i = 0; i < rp->resp.n_inotify_roots; i++)
			free(rp->ir[i]);
	free(rp->ir);
}

static int build_reply(struct ask *a, struct reply *rp)
{
	struct journal_query q;

	memset(rp, 0, sizeof(*rp));
	filesystem__changes_response__init(&rp->resp);
	if (!a->has_since) {
		uint64_t t = journal_checkpoint(source_journal());
		journal_token(source_journal(), t, t, rp->next);
		rp->resp.next = rp->next;
	} else if (a->other_epoch) {
		uint64_t t = journal_checkpoint(source_journal());
		journal_token(source_journal(), t, t, rp->next);
		rp->resp.next = rp->next;
		rp->resp.resync = true;
	} else {
		journal_query_init(&q);
		q.base = a->base;
		q.cursor = a->cursor;
		q.prefix = a->prefix;
		q.include = (const char *const *)a->inc;
		q.n_include = a->n_inc;
		q.exclude = (const char *const *)a->exc;
		q.n_exclude = a->n_exc;
		q.limit = a->limit ? a->limit : CHANGES_PAGE_MAX;
		if (journal_run(source_journal(), &q, &rp->r) < 0)
			return -ENOMEM;
		size_t n = rp->r.n;
		if (n) {
			rp->items = calloc(n, sizeof(*rp->items));
			rp->ptrs = calloc(n, sizeof(*rp->ptrs));
			rp->evs = calloc(n * JK_N, sizeof(*rp->evs));
			rp->ts = calloc(n, sizeof(*rp->ts));
			if (!rp->items || !rp->ptrs || !rp->evs || !rp->ts)
				return -ENOMEM;
			tracker_to_wire(rp->r.changes, n, rp->items, rp->ptrs, rp->evs, rp->ts, false);
		}
		rp->resp.changes = rp->ptrs;
		rp->resp.n_changes = n;
		rp->resp.resync = rp->r.resync;
		rp->resp.more = rp->r.more;
		journal_token(source_journal(), rp->r.next_base, rp->r.next_cursor, rp->next);
		rp->resp.next = rp->next;
	}
	source_roots_under(a->prefix, &rp->nt, &rp->resp.n_not_tracked, &rp->ir, &rp->resp.n_inotify_roots);
	rp->resp.not_tracked = rp->nt;
	rp->resp.inotify_roots = rp->ir;
	return 0;
}

static int ask_parse_since(struct ask *a, const char *since, char *err, size_t errlen)
{
	if (!since || !*since)
		return 0;
	a->has_since = true;
	int rc = journal_parse_token(source_journal(), since, &a->base, &a->cursor);
	if (rc < 0) {
		snprintf(err, errlen, "invalid change token '%.64s': not one this envd handed out", since);
		return rc;
	}
	a->other_epoch = rc == 1;
	return 0;
}

static int ask_add(char ***v, size_t *n, const char *s)
{
	char **nv = realloc(*v, (*n + 1) * sizeof(*nv));
	if (!nv)
		return -ENOMEM;
	*v = nv;
	if (!(nv[*n] = strdup(s)))
		return -ENOMEM;
	(*n)++;
	return 0;
}

static int ask_prefix(struct ask *a, const struct user *u, const char *path, char *err, size_t errlen)
{
	if (!path || !*path) {
		a->prefix[0] = '\0';
		return 0;
	}
	return path_resolve(u, path, state_default_workdir(), a->prefix, sizeof(a->prefix), err, errlen) < 0
		       ? -EINVAL
		       : 0;
}

/* RPC */

static void rpc_ask_done(void *ud, bool caught_up)
{
	struct ask *a = ud;
	struct rpc_call *call = rpcjob_take(&a->job);
	struct reply rp;

	if (call) {
		if (build_reply(a, &rp) < 0)
			rpc_fail(call, RPC_RESOURCE_EXHAUSTED, "out of memory listing changes");
		else
			rpc_reply(call, &rp.resp.base);
		reply_free(&rp);
	}
	reqjob_release(&a->job); /* the barrier's */
}

void changes_rpc(struct rpc_call *call, const ProtobufCMessage *msg)
{
	const Filesystem__ChangesRequest *req = (const Filesystem__ChangesRequest *)msg;
	char err[PATH_MAX + 256];
	struct user u;
	struct ask *a;

	if (!source_on()) {
		rpc_fail(call, RPC_FAILED_PRECONDITION, "the change journal is off (-changes-max-paths 0)");
		return;
	}
	if (!(a = ask_new())) {
		rpc_fail(call, RPC_RESOURCE_EXHAUSTED, "out of memory");
		return;
	}
	/* No path: every change (not the default workdir's). */
	if (caller_of(call, req->path && *req->path ? req->path : NULL, &u, a->prefix, sizeof(a->prefix)) < 0) {
		reqjob_release(&a->job);
		return;
	}
	if (ask_parse_since(a, req->since, err, sizeof(err)) < 0) {
		rpc_fail(call, RPC_INVALID_ARGUMENT, "%s", err);
		reqjob_release(&a->job);
		return;
	}
	a->limit = req->limit;
	for (size_t i = 0; i < req->n_include; i++)
		if (ask_add(&a->inc, &a->n_inc, req->include[i]) < 0)
			goto oom;
	for (size_t i = 0; i < req->n_exclude; i++)
		if (ask_add(&a->exc, &a->n_exc, req->exclude[i]) < 0)
			goto oom;
	rpcjob_attach(&a->job, call);
	source_rescan();
	if (source_barrier(rpc_ask_done, a) < 0)
		rpc_ask_done(a, false);
	return;
oom:
	rpc_fail(call, RPC_RESOURCE_EXHAUSTED, "out of memory");
	reqjob_release(&a->job);
}

/* HTTP */

static void http_ask_done(void *ud, bool caught_up)
{
	struct ask *a = ud;
	struct http_req *r = reqjob_live(&a->job) ? httpjob_req(&a->job) : NULL;
	struct reply rp;

	if (r) {
		reqjob_finish(&a->job);
		if (build_reply(a, &rp) < 0) {
			http_respond_json_error(r, 500, "out of memory listing changes");
		} else {
			size_t len;
			char *json = pbjson_encode(&rp.resp.base, &len);
			if (json)
				http_respond(r, 200, "application/json", json, len, NULL, 0);
			else
				http_respond_json_error(r, 500, "out of memory listing changes");
			free(json);
		}
		reply_free(&rp);
	}
	reqjob_release(&a->job); /* the barrier's; the exchange's goes with its on_close */
}

/* Every value of `name` in a query string, decoded. */
static int query_all(const char *query, const char *name, char ***v, size_t *n)
{
	size_t nl = strlen(name);

	for (const char *p = query; p && *p;) {
		const char *amp = strchr(p, '&');
		size_t len = amp ? (size_t)(amp - p) : strlen(p);
		if (len > nl && strncmp(p, name, nl) == 0 && p[nl] == '=') {
			char val[4096];
			if (http_form_decode(p + nl + 1, len - nl - 1, val, sizeof(val)) >= 0 &&
			    ask_add(v, n, val) < 0)
				return -ENOMEM;
		}
		p = amp ? amp + 1 : NULL;
	}
	return 0;
}

void changes_http_get(struct http_req *r)
{
	char since[256], path[PATH_MAX], lim[32], name[256], err[PATH_MAX + 256];
	struct user own, *u = r->user;
	struct ask *a;

	if (!source_on()) {
		http_respond_json_error(r, 412, "the change journal is off (-changes-max-paths 0)");
		return;
	}
	if (!(a = ask_new())) {
		http_respond_json_error(r, 500, "out of memory");
		return;
	}
	if (!u) {
		if (http_query_get(r->query, "username", name, sizeof(name)) <= 0)
			snprintf(name, sizeof(name), "%s", state_default_user());
		if (user_lookup(name, &own, err, sizeof(err)) < 0) {
			char msg[sizeof(err) + 300];
			snprintf(msg, sizeof(msg), "error looking up user '%s': %s", name, err);
			http_respond_json_error(r, 401, msg);
			reqjob_release(&a->job);
			return;
		}
		u = &own;
	}
	if (http_query_get(r->query, "since", since, sizeof(since)) <= 0)
		since[0] = '\0';
	if (http_query_get(r->query, "path", path, sizeof(path)) <= 0)
		path[0] = '\0';
	if (http_query_get(r->query, "limit", lim, sizeof(lim)) > 0) {
		char *end;
		unsigned long v = strtoul(lim, &end, 10);
		if (*end || v > UINT32_MAX) {
			http_respond_json_error(r, 400, "invalid limit");
			reqjob_release(&a->job);
			return;
		}
		a->limit = (uint32_t)v;
	}
	if (ask_prefix(a, u, path, err, sizeof(err)) < 0 || ask_parse_since(a, since, err, sizeof(err)) < 0) {
		http_respond_json_error(r, 400, err);
		reqjob_release(&a->job);
		return;
	}
	if (query_all(r->query, "include", &a->inc, &a->n_inc) < 0 ||
	    query_all(r->query, "exclude", &a->exc, &a->n_exc) < 0) {
		http_respond_json_error(r, 500, "out of memory");
		reqjob_release(&a->job);
		return;
	}
	httpjob_attach(&a->job, r);
	source_rescan();
	if (source_barrier(http_ask_done, a) < 0)
		http_ask_done(a, false);
}

/* ---- start, stop, hand-over ---- */

int changes_start(void)
{
	struct source_config cfg = {
		.max_paths = changes_max_paths,
		.fanotify = changes_source != CHANGES_SOURCE_INOTIFY,
		.inotify = changes_source != CHANGES_SOURCE_FANOTIFY,
		.inotify_watches = changes_inotify_watches,
	};
	int rc;

	if (!changes_max_paths)
		return 0;
	rc = source_start(&cfg);
	if (source_on())
		tracker_install();
	return rc;
}

void changes_stop(void)
{
	source_stop();
}

size_t changes_paths(void)
{
	return source_journal()->n;
}

void changes_handover_save(struct handover *h)
{
	static Upgrade__ChangeJournal cj;

	/* The change journal: its group crosses the exec, so changes made
	 * meanwhile wait in the kernel and old checkpoints still answer. */
	if (source_snapshot(&cj) == 0 && cj.epoch) {
		h->st->changes = &cj;
		handover_keep_fd(h, cj.fanotify_fd);
	}
}

void changes_handover_cancel(void)
{
	source_resume();
}

void changes_handover_restore(struct handover *h)
{
	if (h->st->changes && source_adopt(h->st->changes, changes_max_paths) < 0)
		log_error("envd", "upgrade: the change journal was not taken over");
}
