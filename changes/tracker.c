/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tracker.c - what a tracked command changed (tracker.h): the process
 * table's tracker hooks on top of the source's registry and barriers.
 */
#include "changes/tracker.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "changes/journal.h"
#include "changes/source.h"
#include "process/process.h"

/* An end event carries at most this many changes (then `overflow`). */
#define CMD_CHANGES_MAX 1000

/* ---- conversion to the wire ---- */

static const Filesystem__EventType kind_type[JK_N] = {
	FILESYSTEM__EVENT_TYPE__EVENT_TYPE_CREATE, FILESYSTEM__EVENT_TYPE__EVENT_TYPE_WRITE,
	FILESYSTEM__EVENT_TYPE__EVENT_TYPE_REMOVE, FILESYSTEM__EVENT_TYPE__EVENT_TYPE_RENAME,
	FILESYSTEM__EVENT_TYPE__EVENT_TYPE_CHMOD,
};

/*
 * In a command's end event a change nobody is named for (inotify names no
 * writer) happened "during" the command; in a Changes reply it says
 * nothing.
 */
static const char *attr_name(uint8_t a, bool in_cmd)
{
	switch (a) {
	case JA_BY:
		return "by";
	case JA_GONE:
		return "during";
	case JA_OTHER:
		return "other";
	case JA_ENVD:
		return "envd";
	case JA_UNKNOWN:
		return in_cmd ? "during" : "";
	default:
		return "";
	}
}

/* A command, known to the source by its serial (loop). */
struct cmd {
	struct cmd *next;
	uint32_t serial;
	pid_t pid;
	bool track;
	uint64_t since;
	struct process *p;
	void (*ready)(struct process *p);
	bool waiting;
	bool released_while_waiting;
	/* the end event's changes */
	Process__CommandChanges msg;
	Filesystem__Change *items;
	Filesystem__Change **ptrs;
	Filesystem__EventType *evs;
	Google__Protobuf__Timestamp *ts;
	char *paths;
	char since_tok[JOURNAL_TOKEN_LEN], until_tok[JOURNAL_TOKEN_LEN];
	bool filled;
};
static struct cmd *cmds;

uint32_t tracker_pid(uint32_t serial)
{
	for (struct cmd *c = cmds; c; c = c->next)
		if (c->serial == serial)
			return (uint32_t)__atomic_load_n(&c->pid, __ATOMIC_RELAXED);
	return 0;
}

void tracker_to_wire(const struct journal_change *ch, size_t n, Filesystem__Change *items, Filesystem__Change **ptrs,
		     Filesystem__EventType *evs, Google__Protobuf__Timestamp *ts, bool in_cmd)
{
	static const Filesystem__FileType ft[] = {
		FILESYSTEM__FILE_TYPE__FILE_TYPE_UNSPECIFIED, FILESYSTEM__FILE_TYPE__FILE_TYPE_FILE,
		FILESYSTEM__FILE_TYPE__FILE_TYPE_DIRECTORY, FILESYSTEM__FILE_TYPE__FILE_TYPE_SYMLINK,
		FILESYSTEM__FILE_TYPE__FILE_TYPE_UNSPECIFIED,
	};
	for (size_t i = 0; i < n; i++) {
		const struct journal_entry *e = ch[i].e;
		Filesystem__Change *c = &items[i];

		filesystem__change__init(c);
		google__protobuf__timestamp__init(&ts[i]);
		c->path = (char *)e->path;
		c->type = (Filesystem__ChangeType)ch[i].type;
		c->file_type = ft[e->ftype < 5 ? e->ftype : 0];
		c->size = ch[i].exists ? e->size : -1;
		ts[i].seconds = e->time_ns / 1000000000LL;
		ts[i].nanos = (int32_t)(e->time_ns % 1000000000LL);
		c->time = &ts[i];
		c->events = &evs[i * JK_N];
		for (unsigned k = 0; k < JK_N; k++)
			if (ch[i].kinds & (1u << k))
				c->events[c->n_events++] = kind_type[k];
		c->attribution = (char *)attr_name(e->attr, in_cmd);
		if (e->attr == JA_BY)
			c->pid = tracker_pid(e->cmd);
		ptrs[i] = c;
	}
}

/* ---- process tracker ---- */

static uint32_t next_serial;

static void *trk_begin(struct process *p, pid_t pid, const char *cgroup, bool track, const char *cwd)
{
	struct cmd *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->serial = ++next_serial;
	if (!c->serial)
		c->serial = ++next_serial;
	c->pid = pid;
	c->track = track;
	c->p = p;
	c->since = journal_checkpoint(source_journal());
	source_register(c->serial, pid, cgroup, track ? cwd : NULL);
	c->next = cmds;
	cmds = c;
	return c;
}

static void cmd_collect(struct cmd *c, bool caught_up)
{
	struct journal_query q;
	struct journal_result r;
	uint64_t until = journal_checkpoint(source_journal());

	journal_token(source_journal(), c->since, c->since, c->since_tok);
	journal_token(source_journal(), until, until, c->until_tok);
	process__command_changes__init(&c->msg);
	c->msg.since = c->since_tok;
	c->msg.until = c->until_tok;
	c->filled = true;
	journal_query_init(&q);
	q.base = q.cursor = c->since;
	q.by_cmd = c->serial;
	q.with_during = true;
	if (journal_run(source_journal(), &q, &r) < 0) {
		c->msg.overflow = true;
		return;
	}
	c->msg.resync = r.resync || !caught_up;
	c->msg.overflow = c->msg.resync;
	/* "by" first, then "during"; at most CMD_CHANGES_MAX. */
	size_t n = 0, total = 0;
	struct journal_change *sorted = r.n ? calloc(r.n, sizeof(*sorted)) : NULL;
	if (r.n && !sorted) {
		c->msg.overflow = true;
		journal_result_free(&r);
		return;
	}
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < r.n; i++)
			if ((r.changes[i].e->attr == JA_BY) == (pass == 0))
				sorted[total++] = r.changes[i];
	n = total > CMD_CHANGES_MAX ? CMD_CHANGES_MAX : total;
	if (total > n)
		c->msg.overflow = true;
	size_t plen = 0;
	for (size_t i = 0; i < n; i++)
		plen += strlen(sorted[i].e->path) + 1;
	if (n) {
		c->items = calloc(n, sizeof(*c->items));
		c->ptrs = calloc(n, sizeof(*c->ptrs));
		c->evs = calloc(n * JK_N, sizeof(*c->evs));
		c->ts = calloc(n, sizeof(*c->ts));
		c->paths = malloc(plen);
		if (!c->items || !c->ptrs || !c->evs || !c->ts || !c->paths) {
			c->msg.overflow = true;
			n = 0;
		}
	}
	if (n) {
		tracker_to_wire(sorted, n, c->items, c->ptrs, c->evs, c->ts, true);
		/* The journal's strings move on: keep copies. */
		char *o = c->paths;
		for (size_t i = 0; i < n; i++) {
			size_t l = strlen(c->items[i].path) + 1;
			memcpy(o, c->items[i].path, l);
			c->items[i].path = o;
			o += l;
		}
		c->msg.changes = c->ptrs;
		c->msg.n_changes = n;
	}
	free(sorted);
	journal_result_free(&r);
}

static void cmd_barrier_done(void *ud, bool caught_up)
{
	struct cmd *c = ud;

	c->waiting = false;
	if (c->released_while_waiting) {
		free(c);
		return;
	}
	cmd_collect(c, caught_up);
	c->ready(c->p);
}

static void trk_end(void *h, struct process *p, void (*ready)(struct process *p))
{
	struct cmd *c = h;

	if (!c->track || c->filled) {
		ready(p);
		return;
	}
	c->ready = ready;
	c->waiting = true;
	if (source_barrier(cmd_barrier_done, c) < 0) {
		c->waiting = false;
		cmd_collect(c, false);
		ready(p);
	}
}

static void trk_fill(void *h, Process__ProcessEvent__EndEvent *end)
{
	struct cmd *c = h;

	if (c->track && c->filled)
		end->changes = &c->msg;
}

static void trk_release(void *h)
{
	struct cmd *c = h;

	for (struct cmd **pp = &cmds; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	source_unregister(c->serial);
	free(c->items);
	free(c->ptrs);
	free(c->evs);
	free(c->ts);
	free(c->paths);
	if (c->waiting)
		c->released_while_waiting = true;
	else
		free(c);
}

/* The spawn's worker thread, as soon as the child has exec'd: events the
 * command causes from then on are its own (the loop learns the pid later). */
static void trk_set_pid(void *h, pid_t pid)
{
	struct cmd *c = h;

	__atomic_store_n(&c->pid, pid, __ATOMIC_RELAXED);
	source_set_pid(c->serial, pid);
}

struct sync_req {
	void (*done)(void *ud);
	void *ud;
};

static void sync_done(void *ud, bool caught_up)
{
	struct sync_req r = *(struct sync_req *)ud;

	(void)caught_up;
	free(ud);
	r.done(r.ud);
}

static int trk_sync(void (*done)(void *ud), void *ud)
{
	struct sync_req *r = malloc(sizeof(*r));
	int rc;

	if (!r)
		return -ENOMEM;
	r->done = done;
	r->ud = ud;
	rc = source_barrier(sync_done, r);
	if (rc < 0)
		free(r);
	return rc;
}

static const struct process_tracker tracker = {
	.begin = trk_begin, .set_pid = trk_set_pid, .end = trk_end, .fill = trk_fill, .release = trk_release,
	.sync = trk_sync,
};

void tracker_install(void)
{
	process_tracker = &tracker;
}
