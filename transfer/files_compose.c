/* SPDX-License-Identifier: Apache-2.0 */
/*
 * files_compose.c - POST /files/compose (files_compose.h).
 *
 * Lifetime: the compose is a reqjob (base/reqjob.h) bound to the exchange
 * (http/httpjob.h): the exchange holds a reference until on_close, a job
 * in flight one until its completion.
 */
#include "transfer/files_compose.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/errstr.h"
#include "base/reqjob.h"
#include "base/state.h"
#include "base/users.h"
#include "base/worker.h"
#include "fs/entry.h"
#include "fs/fwrite.h"
#include "fs/wpath.h"
#include "http/httpjob.h"
#include "transfer/files_common.h"
#include "transfer/fsjob.h"

static void random_suffix(char *out, size_t len)
{
	files_random_hex(out, len > 17 ? 16 : len - 1);
}

#define COMPOSE_BODY_MAX (1024 * 1024)

struct compose {
	struct reqjob job;      /* the exchange; the jobs' key (the destination's mount) and deadline */
	struct user u;
	struct buf body;        /* bounded by COMPOSE_BODY_MAX */
	bool too_big;
	char dest[PATH_MAX];
	char **srcs;            /* resolved */
	char **srcs_given;
	size_t n;
	bool checked;           /* the first job (checks) is back */
	_Atomic int at;         /* the source the job is on, -1: the destination */
	/* worker result */
	int status;
	char msg[FILES_MSGLEN];
};

static void compose_free(struct reqjob *j)
{
	struct compose *c = REQJOB_CONTAINER(j, struct compose, job);

	for (size_t i = 0; i < c->n; i++) {
		free(c->srcs[i]);
		free(c->srcs_given[i]);
	}
	free(c->srcs);
	free(c->srcs_given);
	buf_free(&c->body);
	free(c);
}

static struct compose *compose_of(struct http_req *r)
{
	struct reqjob *j = httpjob_of(r);

	return j ? REQJOB_CONTAINER(j, struct compose, job) : NULL;
}

static void compose_on_body(struct http_req *r, const uint8_t *p, size_t n)
{
	struct compose *c = compose_of(r);

	if (!c->too_big && buf_append(&c->body, p, n) < 0)
		c->too_big = true;
}

/* Worker, first job: the sources are files, the destination's directory exists. */
static void compose_check(void *arg)
{
	struct compose *c = arg;
	char err[FILES_MSGLEN - 64], parent[PATH_MAX];
	struct stat st;

	c->status = 200;
	for (size_t i = 0; i < c->n; i++) {
		c->at = (int)i;
		if (stat(c->srcs[i], &st) < 0) {
			c->status = 404;
			snprintf(c->msg, sizeof(c->msg), "source file not found: %s", c->srcs_given[i]);
			return;
		}
		if (!S_ISREG(st.st_mode)) {
			c->status = 400;
			snprintf(c->msg, sizeof(c->msg), "source path is not a regular file: %s", c->srcs_given[i]);
			return;
		}
	}
	c->at = -1;
	fs_path_dir(c->dest, parent, sizeof(parent));
	if (fs_ensure_dirs(parent, c->u.uid, c->u.gid, err, sizeof(err)) < 0) {
		c->status = 500;
		snprintf(c->msg, sizeof(c->msg), "error ensuring directories: %s", err);
	}
}

/* Remove a source by its name in its directory (fs/wpath.h): never as
 * root through a link of another user's. Errors ignored, as the
 * reference does. */
static void compose_unlink_source(const char *src)
{
	char err[PATH_MAX];
	struct fsid_saved sv;
	struct wpath p;

	wpath_init(&p);
	sv.active = false;
	if (wpath_parent(&p, src, NULL, err, sizeof(err)) == 0 && p.name[0] && wpath_enter(&p, &sv) == 0)
		unlinkat(p.dirfd, p.name, 0);
	wpath_leave(&sv);
	wpath_close(&p);
}

/* Worker, second job (no deadline: a large copy takes its time). The
 * temporary and the rename are names in the destination's directory,
 * walked with fs/wpath.h (with the identity that walk leaves). */
static void compose_work(void *arg)
{
	struct compose *c = arg;
	char tmp[PATH_MAX], name[NAME_MAX + 1], sfx[40], werr[FILES_MSGLEN - 128];
	struct fsid_saved sv;
	struct wpath p;
	int out = -1, rc, e;

	wpath_init(&p);
	sv.active = false;
	random_suffix(sfx, sizeof(sfx));
	if (snprintf(tmp, sizeof(tmp), "%s.e2b-compose.%s.tmp", c->dest, sfx) >= (int)sizeof(tmp)) {
		c->status = 500;
		snprintf(c->msg, sizeof(c->msg), "error creating destination file: %s", go_strerror(ENAMETOOLONG));
		return;
	}
	if ((rc = wpath_parent(&p, c->dest, NULL, werr, sizeof(werr))) < 0 || p.slash || !p.name[0] ||
	    snprintf(name, sizeof(name), "%s.e2b-compose.%s.tmp", p.name, sfx) >= (int)sizeof(name)) {
		c->status = rc == -EACCES ? 403 : 500;
		if (rc < 0)
			snprintf(c->msg, sizeof(c->msg), "error creating destination file: %s", werr);
		else
			snprintf(c->msg, sizeof(c->msg), "error creating destination file: open %s: %s", tmp,
				 go_strerror(p.name[0] && !p.slash ? ENAMETOOLONG : EISDIR));
		wpath_close(&p);
		return;
	}
	if (wpath_enter(&p, &sv) == 0)
		out = openat(p.dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
	e = errno;
	wpath_leave(&sv);
	if (out < 0) {
		c->status = e == ENOSPC ? 507 : e == EACCES ? 403 : 500;
		if (e == ENOSPC)
			snprintf(c->msg, sizeof(c->msg), "not enough disk space available");
		else
			snprintf(c->msg, sizeof(c->msg), "error creating destination file: open %s: %s", tmp, go_strerror(e));
		wpath_close(&p);
		return;
	}
	if (fchown(out, c->u.uid, c->u.gid) < 0) {
		c->status = 500;
		snprintf(c->msg, sizeof(c->msg), "error changing file ownership: chown %s: %s", tmp, go_strerror(errno));
		goto fail;
	}
	for (size_t i = 0; i < c->n; i++) {
		c->at = (int)i;
		int in = open(c->srcs[i], O_RDONLY | O_CLOEXEC);
		if (in < 0) {
			c->status = 500;
			snprintf(c->msg, sizeof(c->msg), "error opening source file %s: open %s: %s", c->srcs_given[i],
				 c->srcs[i], go_strerror(errno));
			goto fail;
		}
		rc = fwrite_copy_fds(in, out);
		close(in);
		if (rc < 0) {
			c->status = rc == -ENOSPC || rc == -EDQUOT ? 507 : 500;
			if (c->status == 507)
				snprintf(c->msg, sizeof(c->msg), "not enough disk space available");
			else
				snprintf(c->msg, sizeof(c->msg), "error composing source %s: %s", c->srcs_given[i],
					 go_strerror(-rc));
			goto fail;
		}
	}
	if (close(out) < 0) {
		out = -1;
		c->status = 500;
		snprintf(c->msg, sizeof(c->msg), "error finalizing compose: close %s: %s", tmp, go_strerror(errno));
		goto fail;
	}
	out = -1;
	rc = wpath_enter(&p, &sv);
	if (rc == 0)
		rc = renameat(p.dirfd, name, p.dirfd, p.name) < 0 ? -errno : 0;
	wpath_leave(&sv);
	if (rc < 0) {
		c->status = 500;
		snprintf(c->msg, sizeof(c->msg), "error finalizing compose: rename %s %s: %s", tmp, c->dest,
			 go_strerror(-rc));
		goto fail;
	}
	for (size_t i = 0; i < c->n; i++)
		if (strcmp(c->srcs[i], c->dest) != 0)
			compose_unlink_source(c->srcs[i]);
	c->status = 200;
	wpath_close(&p);
	return;
fail:
	if (out >= 0)
		close(out);
	if (wpath_enter(&p, &sv) == 0)
		unlinkat(p.dirfd, name, 0);
	wpath_leave(&sv);
	wpath_close(&p);
}

/* The checks outlived their deadline: 504 naming the path they were on. */
static void compose_expired(struct reqjob *j)
{
	struct compose *c = REQJOB_CONTAINER(j, struct compose, job);
	char msg[FILES_MSGLEN];
	int at = c->at;

	fsjob_timeout_msg(msg, sizeof(msg), j->timeout, at >= 0 && (size_t)at < c->n ? c->srcs[at] : c->dest);
	http_respond_json_error(httpjob_req(j), 504, msg); /* may call on_close */
}

static const struct reqjob_ops compose_ops = { .free = compose_free, .expired = compose_expired };

static void compose_done(void *arg);

/* The checks carry the deadline; the copy has none (a large copy takes its time). */
static void compose_submit(struct compose *c, bool check)
{
	char msg[FILES_MSGLEN];

	if (reqjob_run(&c->job, check ? compose_check : compose_work, compose_done, c,
		       check ? 0 : REQJOB_NO_DEADLINE) == 0)
		return;
	fsjob_busy_msg(msg, sizeof(msg), c->dest);
	http_respond_json_error(httpjob_req(&c->job), 503, msg); /* may call on_close */
}

/* Loop, while the exchange is live: the checks or the copy are back. */
static void compose_done(void *arg)
{
	struct compose *c = arg;
	struct http_req *r = httpjob_req(&c->job);
	char base[PATH_MAX];

	if (c->status == 200 && !c->checked) {
		c->checked = true;
		compose_submit(c, false);
		return;
	}
	if (c->status != 200) {
		http_respond_json_error(r, c->status, c->msg);
		return;
	}
	json_t *o = json_object();
	path_base(c->dest, base, sizeof(base));
	json_object_set_new(o, "name", json_string(base));
	json_object_set_new(o, "path", json_string(c->dest));
	json_object_set_new(o, "type", json_string("file"));
	char *s = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (!s) {
		http_respond_json_error(r, 500, "out of memory");
		return;
	}
	size_t l = strlen(s);
	char *body = malloc(l + 2);
	if (body) {
		memcpy(body, s, l);
		body[l] = '\n';
		http_respond(r, 200, "application/json", body, l + 1, NULL, 0);
	} else {
		http_respond_json_error(r, 500, "out of memory");
	}
	free(body);
	free(s);
}

/* The sources, resolved, none the destination. 0, or -1 once answered. */
static int compose_sources(struct compose *c, struct http_req *r, json_t *srcs)
{
	char err[FILES_MSGLEN], rp[PATH_MAX];
	size_t n = json_array_size(srcs);

	c->srcs = calloc(n, sizeof(char *));
	c->srcs_given = calloc(n, sizeof(char *));
	if (!c->srcs || !c->srcs_given) {
		http_respond_json_error(r, 500, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		json_t *s = json_array_get(srcs, i);
		if (!json_is_string(s)) {
			http_respond_json_error(r, 400, "invalid request body: source_paths must be strings");
			return -1;
		}
		const char *given = json_string_value(s);
		if (path_resolve(&c->u, given, state_default_workdir(), rp, sizeof(rp), err, sizeof(err)) < 0) {
			files_respond_fmt(r, 400, "error resolving source path \"%s\": %s", given, err);
			return -1;
		}
		if (strcmp(rp, c->dest) == 0) {
			files_respond_fmt(r, 400, "source path \"%s\" cannot be the same as destination", given);
			return -1;
		}
		c->srcs[i] = strdup(rp);
		c->srcs_given[i] = strdup(given);
		c->n = i + 1;
		if (!c->srcs[i] || !c->srcs_given[i]) {
			http_respond_json_error(r, 500, "out of memory");
			return -1;
		}
	}
	return 0;
}

static void compose_on_body_end(struct http_req *r)
{
	struct compose *c = compose_of(r);
	char err[FILES_MSGLEN];
	json_error_t je;
	json_t *root = NULL, *srcs, *dest, *user;
	const char *uname;

	if (!c || reqjob_busy(&c->job))
		return;
	if (c->too_big) {
		http_respond_json_error(r, 400, "invalid request body: request body too large");
		return;
	}
	root = json_loadb(c->body.p ? (const char *)c->body.p : "", c->body.len, JSON_REJECT_DUPLICATES,
			  &je);
	if (!root || !json_is_object(root)) {
		files_respond_fmt(r, 400, "invalid request body: %s", root ? "expected a JSON object" : je.text);
		goto out;
	}
	srcs = json_object_get(root, "source_paths");
	dest = json_object_get(root, "destination");
	user = json_object_get(root, "username");
	if ((srcs && !json_is_array(srcs) && !json_is_null(srcs)) || (dest && !json_is_string(dest) && !json_is_null(dest)) ||
	    (user && !json_is_string(user) && !json_is_null(user))) {
		http_respond_json_error(r, 400, "invalid request body: wrong field type");
		goto out;
	}
	if (!srcs || !json_is_array(srcs) || json_array_size(srcs) == 0) {
		http_respond_json_error(r, 400, "source_paths must not be empty");
		goto out;
	}
	if (!dest || !json_is_string(dest) || !*json_string_value(dest)) {
		http_respond_json_error(r, 400, "destination is required");
		goto out;
	}
	uname = user && json_is_string(user) ? json_string_value(user) : state_default_user();
	if (files_lookup_user(r, uname, &c->u))
		goto out;
	if (path_resolve(&c->u, json_string_value(dest), state_default_workdir(), c->dest, sizeof(c->dest), err,
			 sizeof(err)) < 0) {
		files_respond_fmt(r, 400, "error resolving destination path: %s", err);
		goto out;
	}
	if (compose_sources(c, r, srcs) < 0)
		goto out;
	/* Every call on the paths runs in worker jobs of the destination's
	 * mount: first the checks, with the deadline, then the copy. */
	c->job.key = worker_path_key(c->dest);
	c->job.timeout = worker_fs_timeout;
	c->at = -1;
	compose_submit(c, true);
out:
	json_decref(root);
}

void files_compose(struct http_req *r)
{
	struct compose *c = calloc(1, sizeof(*c));

	if (!c) {
		http_respond_json_error(r, 500, "out of memory");
		return;
	}
	reqjob_init(&c->job, &compose_ops);
	buf_init(&c->body, COMPOSE_BODY_MAX);
	httpjob_attach(&c->job, r);
	r->on_body = compose_on_body;
	r->on_body_end = compose_on_body_end;
	reqjob_release(&c->job);
}