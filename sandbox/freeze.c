/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "sandbox/freeze.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "base/errstr.h"
#include "base/handover.h"
#include "base/log.h"
#include "base/loop.h"
#include "base/worker.h"
#include "process/cgroup.h"
#include "sandbox/workload.h"

/* From linux/fs.h, which clashes with <limits.h> under musl. */
#ifndef FIFREEZE
#define FIFREEZE _IOWR('X', 119, int)
#define FITHAW _IOWR('X', 120, int)
#endif

#define POLL_S 0.002
#define DEFAULT_MAX_CGROUPS 512

static const struct http_hdr no_store = {"Cache-Control", "no-store"};

/* System services a hierarchy freeze leaves running (relative to the root). */
static const char *const allowlist[] = {
	"init.scope",
	"system.slice/systemd-journald.service",
	"system.slice/rpcbind.service",
	"system.slice/rpcbind.socket",
	"system.slice/rpc-statd.service",
	"socats",
};
#define N_ALLOW (sizeof(allowlist) / sizeof(allowlist[0]))

/* Paths below the root, each a malloc'd string. */
struct pathlist {
	char **v;
	size_t n, cap;
};

static bool applied;
static struct freeze_state guest; /* guest-frozen cgroups of this window */
static struct pathlist ours;      /* what our last freeze wrote 1 to */
static ev_timer watchdog;
static bool watchdog_init;

static void pl_add(struct pathlist *l, const char *s)
{
	char *d;

	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		char **v = realloc(l->v, cap * sizeof(*v));

		if (!v)
			return;
		l->v = v;
		l->cap = cap;
	}
	d = strdup(s);
	if (d)
		l->v[l->n++] = d;
}

static void pl_clear(struct pathlist *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	memset(l, 0, sizeof(*l));
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ---- where envd itself lives ---- */

/*
 * envd's own cgroup relative to `root`, "" when envd is not below it.
 * Read from /proc/self/cgroup ("0::/path") and the cgroup2 mount point.
 */
static void self_rel(const char *root, char *out, size_t len)
{
	char line[2 * PATH_MAX], mnt[PATH_MAX] = "", self[PATH_MAX] = "", full[2 * PATH_MAX];
	size_t rl = strlen(root);
	FILE *f;

	out[0] = '\0';
	f = fopen("/proc/self/cgroup", "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, "0::", 3) == 0) {
			snprintf(self, sizeof(self), "%.4000s", line + 3);
			self[strcspn(self, "\n")] = '\0';
		}
	fclose(f);
	f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char mp[PATH_MAX];
		const char *sep = strstr(line, " - cgroup2 ");

		if (!sep || sscanf(line, "%*s %*s %*s %*s %4095s", mp) != 1)
			continue;
		/* The mount that holds `root` (longest prefix wins). */
		if (strncmp(root, mp, strlen(mp)) == 0 && strlen(mp) > strlen(mnt))
			snprintf(mnt, sizeof(mnt), "%s", mp);
	}
	fclose(f);
	if (!mnt[0] || !self[0])
		return;
	snprintf(full, sizeof(full), "%s%s", strcmp(mnt, "/") == 0 ? "" : mnt,
		 strcmp(self, "/") == 0 ? "" : self);
	if (strncmp(full, root, rl) == 0 && full[rl] == '/')
		snprintf(out, len, "%s", full + rl + 1);
}

/* `a` is `b` or one of its ancestors ("x" vs "x/y"). */
static bool is_prefix_dir(const char *a, const char *b)
{
	size_t n = strlen(a);

	return *b && strncmp(a, b, n) == 0 && (b[n] == '\0' || b[n] == '/');
}

static bool is_guest(const char *rel)
{
	for (size_t i = 0; i < guest.n_guest; i++)
		if (strcmp(guest.guest[i], rel) == 0)
			return true;
	return false;
}

/* Children of root/rel, breadth first; fn returns true to descend. */
typedef bool (*walk_fn)(const char *root, const char *rel, void *ud);

static bool walk(const char *root, size_t max, walk_fn fn, void *ud, size_t *visited)
{
	struct pathlist q = { 0 };
	bool truncated = false;

	pl_add(&q, "");
	for (size_t i = 0; i < q.n && !truncated; i++) {
		char dir[PATH_MAX];
		struct dirent *de;
		DIR *d;

		snprintf(dir, sizeof(dir), "%s%s%s", root, q.v[i][0] ? "/" : "", q.v[i]);
		d = opendir(dir);
		if (!d)
			continue;
		while ((de = readdir(d))) {
			char rel[PATH_MAX];

			if (de->d_type != DT_DIR || de->d_name[0] == '.')
				continue;
			if (*visited >= max) {
				truncated = true;
				break;
			}
			(*visited)++;
			snprintf(rel, sizeof(rel), "%s%s%s", q.v[i], q.v[i][0] ? "/" : "", de->d_name);
			if (fn(root, rel, ud))
				pl_add(&q, rel);
		}
		closedir(d);
	}
	pl_clear(&q);
	return truncated;
}

static int read_freeze(const char *root, const char *rel)
{
	char dir[PATH_MAX], buf[16];

	snprintf(dir, sizeof(dir), "%s/%s", root, rel);
	if (pcg_read(dir, "cgroup.freeze", buf, sizeof(buf)) <= 0)
		return -1;
	return buf[0] == '1';
}

static int write_freeze(const char *root, const char *rel, const char *v)
{
	char dir[PATH_MAX];

	snprintf(dir, sizeof(dir), "%s/%s", root, rel);
	return pcg_write(dir, "cgroup.freeze", v);
}

/* 1 frozen, 0 not yet, -1 unobservable (no cgroup.events "frozen"). */
static int is_frozen(const char *root, const char *rel)
{
	char dir[PATH_MAX], buf[256];
	long long v;

	snprintf(dir, sizeof(dir), "%s/%s", root, rel);
	if (pcg_read(dir, "cgroup.events", buf, sizeof(buf)) < 0)
		return -1;
	v = pcg_key(buf, "frozen");
	return v < 0 ? -1 : v == 1;
}

/* ---- freeze ---- */

struct result {
	bool hierarchy, truncated;
	size_t visited, allowlisted, pre_frozen, requested, frozen, not_frozen, failed,
		unobservable;
	double sweep_ms, wait_ms;
};

struct sweep_ctx {
	struct result *res;
	char self[PATH_MAX];
	bool first;          /* first freeze of the window: record guest-frozen */
};

static bool sweep_one(const char *root, const char *rel, void *ud)
{
	struct sweep_ctx *c = ud;
	int fz;

	if (strcmp(rel, "user") == 0 || strcmp(rel, "ptys") == 0)
		return false; /* frozen as in legacy mode */
	for (size_t i = 0; i < N_ALLOW; i++)
		if (strcmp(rel, allowlist[i]) == 0) {
			c->res->allowlisted++;
			return false;
		}
	/* On envd's own chain or above an allowlisted service: look inside. */
	if (is_prefix_dir(rel, c->self))
		return true;
	for (size_t i = 0; i < N_ALLOW; i++)
		if (is_prefix_dir(rel, allowlist[i]))
			return true;
	fz = read_freeze(root, rel);
	if (fz == 1 && (c->first || is_guest(rel))) {
		if (c->first && guest.n_guest < FREEZE_GUEST_MAX)
			snprintf(guest.guest[guest.n_guest++], sizeof(guest.guest[0]), "%s", rel);
		c->res->pre_frozen++;
		return false;
	}
	if (write_freeze(root, rel, "1") < 0) {
		c->res->failed++;
		return false;
	}
	c->res->requested++;
	pl_add(&ours, rel);
	return false;
}

static void watchdog_cb(EV_P_ ev_timer *w, int revents)
{
	log_info("freeze", "no thaw %.0f s after a freeze: thawing the workload", FREEZE_WATCHDOG_S);
	freeze_thaw();
}

static void arm_watchdog(void)
{
	if (!watchdog_init) {
		ev_timer_init(&watchdog, watchdog_cb, FREEZE_WATCHDOG_S, 0.);
		watchdog_init = true;
	}
	ev_timer_stop(envd_loop, &watchdog);
	ev_timer_set(&watchdog, FREEZE_WATCHDOG_S, 0.);
	ev_timer_start(envd_loop, &watchdog);
}

static void disarm_watchdog(void)
{
	if (watchdog_init)
		ev_timer_stop(envd_loop, &watchdog);
}

static void do_freeze(struct result *res, size_t max)
{
	const char *root = workload_root();
	struct sweep_ctx c = { .res = res, .first = !applied };
	double t0 = now_ms();

	if (!root)
		return;
	if (c.first) {
		guest.n_guest = 0;
		pl_clear(&ours);
	}
	for (int i = 0; i < 2; i++) {
		const char *rel = i ? "ptys" : "user";

		if (write_freeze(root, rel, "1") < 0) {
			res->failed++;
			continue;
		}
		res->requested++;
		pl_add(&ours, rel);
	}
	if (res->hierarchy) {
		self_rel(root, c.self, sizeof(c.self));
		res->truncated = walk(root, max, sweep_one, &c, &res->visited);
	}
	applied = true;
	arm_watchdog();
	res->sweep_ms = now_ms() - t0;
}

/* Count the confirmed state of what we asked to freeze; true when settled. */
static bool confirm(struct result *res)
{
	const char *root = workload_root();

	res->frozen = res->not_frozen = res->unobservable = 0;
	for (size_t i = 0; root && i < ours.n; i++) {
		int f = is_frozen(root, ours.v[i]);

		if (f == 1)
			res->frozen++;
		else if (f == 0)
			res->not_frozen++;
		else
			res->unobservable++;
	}
	return res->not_frozen == 0;
}

struct fwait {
	struct http_req *r;
	struct result res;
	double t0, deadline;
	ev_timer poll;
};

static void send_result(struct http_req *r, const struct result *res)
{
	char body[768];
	int n = snprintf(body, sizeof(body),
			 "{\"mode\":\"%s\",\"visited\":%zu,\"allowlisted\":%zu,\"truncated\":%s,"
			 "\"preFrozen\":%zu,\"requested\":%zu,\"frozen\":%zu,\"notFrozen\":%zu,"
			 "\"failed\":%zu,\"unobservable\":%zu,\"sweepMs\":%.3f,\"waitMs\":%.3f}\n",
			 res->hierarchy ? "hierarchy" : "legacy", res->visited, res->allowlisted,
			 res->truncated ? "true" : "false", res->pre_frozen, res->requested,
			 res->frozen, res->not_frozen, res->failed, res->unobservable, res->sweep_ms,
			 res->wait_ms);

	http_respond(r, 200, "application/json", body, (size_t)n, &no_store, 1);
}

static void fwait_free(struct fwait *w)
{
	ev_timer_stop(envd_loop, &w->poll);
	free(w);
}

static void fwait_poll(EV_P_ ev_timer *t, int revents)
{
	struct fwait *w = t->data;
	bool done = confirm(&w->res);
	struct http_req *r;

	if (!done && now_ms() < w->deadline)
		return;
	struct result res;

	w->res.wait_ms = now_ms() - w->t0;
	res = w->res;
	r = w->r;
	r->ud = NULL;
	r->on_close = NULL;
	fwait_free(w);
	send_result(r, &res);
}

/* The orchestrator left during the wait: nothing to answer, stop polling. */
static void fwait_close(struct http_req *r, bool completed)
{
	struct fwait *w = r->ud;

	if (w)
		fwait_free(w);
}

void freeze_http(struct http_req *r)
{
	char v[32];
	long long max = 0, wait = 0;
	struct fwait *w;

	w = calloc(1, sizeof(*w));
	if (!w) {
		http_respond_json_error(r, 500, "out of memory");
		return;
	}
	if (http_query_get(r->query, "mode", v, sizeof(v)) > 0 && strcmp(v, "hierarchy") == 0)
		w->res.hierarchy = true;
	if (http_query_get(r->query, "maxCgroups", v, sizeof(v)) > 0)
		max = strtoll(v, NULL, 10);
	if (max <= 0)
		max = DEFAULT_MAX_CGROUPS;
	if (max > FREEZE_MAX_CGROUPS)
		max = FREEZE_MAX_CGROUPS;
	if (http_query_get(r->query, "maxWaitMs", v, sizeof(v)) > 0)
		wait = strtoll(v, NULL, 10);
	do_freeze(&w->res, (size_t)max);
	if (wait <= 0) {
		free(w);
		http_respond(r, 204, NULL, NULL, 0, &no_store, 1);
		return;
	}
	w->r = r;
	w->t0 = now_ms();
	w->deadline = w->t0 + (double)wait;
	if (confirm(&w->res)) {
		struct result res = w->res;

		free(w);
		send_result(r, &res);
		return;
	}
	r->ud = w;
	r->on_close = fwait_close;
	ev_timer_init(&w->poll, fwait_poll, POLL_S, POLL_S);
	w->poll.data = w;
	ev_timer_start(envd_loop, &w->poll);
}

/* ---- thaw ---- */

struct thaw_ctx {
	char self[PATH_MAX];
	int err;
};

static bool thaw_one(const char *root, const char *rel, void *ud)
{
	struct thaw_ctx *c = ud;
	int rc;

	if (is_prefix_dir(rel, c->self))
		return true;
	if (read_freeze(root, rel) == 1 && !is_guest(rel)) {
		rc = write_freeze(root, rel, "0");
		if (rc < 0 && !c->err)
			c->err = rc;
	}
	return true;
}

int freeze_thaw(void)
{
	const char *root = workload_root();
	struct thaw_ctx c = { .err = 0 };
	size_t visited = 0;
	int rc;

	if (!root)
		return 0;
	for (int i = 0; i < 2; i++) {
		rc = write_freeze(root, i ? "ptys" : "user", "0");
		if (rc < 0 && rc != -ENOENT && !c.err)
			c.err = rc;
	}
	if (applied) {
		self_rel(root, c.self, sizeof(c.self));
		walk(root, FREEZE_MAX_CGROUPS, thaw_one, &c, &visited);
		applied = false;
		guest.n_guest = 0;
		pl_clear(&ours);
	}
	disarm_watchdog();
	return c.err;
}

void freeze_http_unfreeze(struct http_req *r)
{
	char msg[256];
	int rc = freeze_thaw();

	if (rc < 0) {
		snprintf(msg, sizeof(msg), "failed to thaw the workload: %s", go_strerror(-rc));
		http_respond_json_error(r, 500, msg);
		return;
	}
	http_respond(r, 204, NULL, NULL, 0, &no_store, 1);
}

/* ---- audit (for /init) ---- */

struct audit_ctx {
	char self[PATH_MAX];
	size_t frozen, escaped;
};

static bool audit_one(const char *root, const char *rel, void *ud)
{
	struct audit_ctx *c = ud;
	char dir[PATH_MAX], buf[256];
	bool workload = true;

	snprintf(dir, sizeof(dir), "%s/%s", root, rel);
	if (pcg_read(dir, "cgroup.events", buf, sizeof(buf)) < 0)
		return false;
	if (pcg_key(buf, "frozen") == 1) {
		c->frozen++;
		return true;
	}
	/* Not frozen: does it hold workload processes that should be? */
	if (is_prefix_dir(rel, c->self))
		workload = false;
	for (size_t i = 0; i < N_ALLOW; i++)
		if (is_prefix_dir(rel, allowlist[i]) || is_prefix_dir(allowlist[i], rel))
			workload = false;
	if (workload && pcg_key(buf, "populated") == 1 && read_freeze(root, rel) != 1) {
		/* Count the innermost such cgroups only, where the processes are. */
		char sub[256];

		if (pcg_read(dir, "cgroup.procs", sub, sizeof(sub)) > 0)
			c->escaped++;
	}
	return true;
}

bool freeze_audit(char *buf, size_t len)
{
	const char *root = workload_root();
	struct audit_ctx c = { .frozen = 0 };
	size_t visited = 0, violations = 0;
	bool truncated;

	if (!root || !applied)
		return false;
	self_rel(root, c.self, sizeof(c.self));
	truncated = walk(root, FREEZE_MAX_CGROUPS, audit_one, &c, &visited);
	/* Ours that something else thawed in the meantime. */
	for (size_t i = 0; i < ours.n; i++)
		if (read_freeze(root, ours.v[i]) == 0)
			violations++;
	snprintf(buf, len,
		 "{\"visited\":%zu,\"frozen\":%zu,\"escaped\":%zu,\"violations\":%zu,\"truncated\":%s}",
		 visited, c.frozen, c.escaped, violations, truncated ? "true" : "false");
	return true;
}

/* ---- exportable state ---- */

void freeze_state_get(struct freeze_state *out)
{
	memcpy(out, &guest, sizeof(*out));
	out->applied = applied;
}

void freeze_state_set(const struct freeze_state *in)
{
	memcpy(&guest, in, sizeof(guest));
	if (guest.n_guest > FREEZE_GUEST_MAX)
		guest.n_guest = FREEZE_GUEST_MAX;
	applied = in->applied;
	if (applied)
		arm_watchdog();
	else
		disarm_watchdog();
}

void freeze_handover_save(struct handover *h)
{
	Upgrade__HandoverState *st = h->st;

	st->frozen = applied;
	for (size_t i = 0; i < guest.n_guest && i < FREEZE_GUEST_MAX; i++)
		HANDOVER_PUSH(h, st->guest_frozen_cgroups, st->n_guest_frozen_cgroups, guest.guest[i]);
	if (st->n_guest_frozen_cgroups)
		st->schema = 2;
}

void freeze_handover_restore(struct handover *h)
{
	const Upgrade__HandoverState *st = h->st;
	static struct freeze_state fz;

	memset(&fz, 0, sizeof(fz));
	fz.applied = st->frozen;
	for (size_t i = 0; i < st->n_guest_frozen_cgroups && fz.n_guest < FREEZE_GUEST_MAX; i++)
		snprintf(fz.guest[fz.n_guest++], sizeof(fz.guest[0]), "%s", st->guest_frozen_cgroups[i]);
	if (fz.applied || fz.n_guest)
		freeze_state_set(&fz);
}

/* ---- filesystem freeze: FIFREEZE / FITHAW on "/", one at a time ---- */

/*
 * FUSE and network filesystems are not frozen: FIFREEZE does not reach
 * them, and a call on one whose server is gone never returns. They are
 * found in the mount table (never by a call on their paths, which blocks
 * the same way) and named in the reply's X-Envd-Fsfreeze-Skipped header,
 * "MOUNTPOINT (FSTYPE)" joined by ", " (mount points as the mount table
 * writes them); if "/" itself is one, it is skipped too rather than opened,
 * by freeze and thaw alike.
 */
#define FS_SKIPPED_MAX 1024

struct fsop {
	struct fsop *next;
	struct http_req *r;  /* NULL once the client left */
	bool freeze;
	int err;             /* errno of the failed step, 0 on success */
	bool opened;         /* the failure was the ioctl, not the open */
	char skipped[FS_SKIPPED_MAX];
};

static struct fsop *fs_head, *fs_tail;
static bool fs_busy;
static const char *fs_root = "/";
static const char *fs_mountinfo = "/proc/self/mountinfo";

static void fs_next(void);

static bool fs_unfreezable(const char *type)
{
	static const char *const net[] = {"nfs", "nfs4", "cifs", "smb3", "9p", "ceph", "glusterfs",
					  "afs", "virtiofs", "lustre", "gfs2", "ocfs2"};

	if (strncmp(type, "fuse", 4) == 0)
		return true;
	for (size_t i = 0; i < sizeof(net) / sizeof(net[0]); i++)
		if (strcmp(type, net[i]) == 0)
			return true;
	return false;
}

/* A mount point as a header may carry it: mountinfo already escapes space,
 * tab, newline and backslash (\ooo); other control and non-ASCII bytes
 * become '?'. */
static void fs_header_safe(char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
			*s = '?';
}

/* Fill op->skipped from the mount table; true when "/" is among them. */
static bool fs_scan(struct fsop *op)
{
	FILE *f = fopen(fs_mountinfo, "re");
	char line[8192];
	size_t len = 0;
	bool root = false;

	op->skipped[0] = '\0';
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		/* id parent maj:min root MOUNTPOINT options [optional...] - TYPE source super */
		char *save = NULL, *mp = NULL, *type = NULL, *t;
		int field = 0;
		bool dash = false;

		for (t = strtok_r(line, " \n", &save); t; t = strtok_r(NULL, " \n", &save), field++) {
			if (field == 4)
				mp = t;
			else if (dash) {
				type = t;
				break;
			} else if (field > 5 && strcmp(t, "-") == 0)
				dash = true;
		}
		if (!mp || !type || !fs_unfreezable(type))
			continue;
		fs_header_safe(mp);
		if (strcmp(mp, fs_root) == 0)
			root = true;
		int k = snprintf(op->skipped + len, sizeof(op->skipped) - len, "%s%s (%s)", len ? ", " : "", mp, type);
		if (k < 0 || (size_t)k >= sizeof(op->skipped) - len) {
			/* Full: end the list with an ellipsis where it fits. */
			size_t n = len < sizeof(op->skipped) - 5 ? len : sizeof(op->skipped) - 5;
			memcpy(op->skipped + n, ", ...", 6);
			break;
		}
		len += (size_t)k;
	}
	fclose(f);
	return root;
}

static void fs_work(void *arg)
{
	struct fsop *op = arg;

	if (fs_scan(op))
		return;
	int fd = open(fs_root, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		op->err = errno;
		return;
	}
	op->opened = true;
	if (ioctl(fd, op->freeze ? FIFREEZE : FITHAW, 0) < 0) {
		op->err = errno;
		/* Already frozen / not frozen: the state asked for holds. */
		if ((op->freeze && op->err == EBUSY) || (!op->freeze && op->err == EINVAL))
			op->err = 0;
	}
	close(fd);
}

static void fs_answer(struct fsop *op)
{
	struct http_req *r = op->r;
	char msg[256];

	if (!r)
		return;
	op->r = NULL;
	r->ud = NULL;
	r->on_close = NULL;
	if (op->err) {
		snprintf(msg, sizeof(msg), "%s /: %s",
			 !op->opened ? "open" : op->freeze ? "FIFREEZE" : "FITHAW",
			 go_strerror(op->err));
		http_respond_json_error(r, 500, msg);
		return;
	}
	struct http_hdr h[2] = {no_store, {"X-Envd-Fsfreeze-Skipped", op->skipped}};
	http_respond(r, 204, NULL, NULL, 0, h, op->skipped[0] ? 2 : 1);
}

static void fs_done(void *arg)
{
	struct fsop *op = arg;

	fs_answer(op);
	free(op);
	fs_busy = false;
	fs_next();
}

static void fs_next(void)
{
	while (!fs_busy && fs_head) {
		struct fsop *op = fs_head;
		int rc;

		fs_head = op->next;
		if (!fs_head)
			fs_tail = NULL;
		rc = worker_submit(fs_work, fs_done, op);
		if (rc == 0) {
			fs_busy = true;
			return;
		}
		op->err = -rc;
		fs_answer(op);
		free(op);
	}
}

static void fs_close(struct http_req *r, bool completed)
{
	struct fsop *op = r->ud;

	if (!op)
		return;
	op->r = NULL;
	/* A freeze still waiting for its turn is dropped when its client
	 * leaves; a thaw is carried out regardless. A running one finishes. */
	if (!op->freeze)
		return;
	for (struct fsop **pp = &fs_head, *prev = NULL; *pp; prev = *pp, pp = &(*pp)->next) {
		if (*pp != op)
			continue;
		*pp = op->next;
		if (fs_tail == op)
			fs_tail = prev;
		free(op);
		return;
	}
}

void freeze_http_fs(struct http_req *r, bool freeze)
{
	struct fsop *op = calloc(1, sizeof(*op));

	if (!op) {
		http_respond_json_error(r, 500, "out of memory");
		return;
	}
	op->r = r;
	op->freeze = freeze;
	r->ud = op;
	r->on_close = fs_close;
	if (fs_tail)
		fs_tail->next = op;
	else
		fs_head = op;
	fs_tail = op;
	fs_next();
}
