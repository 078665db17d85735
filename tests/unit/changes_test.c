/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The change journal's three parts: the source (changes/source.h) fed by
 * inotify on a directory of the test's own, the tracker (changes/tracker.h)
 * through the process table's hooks, and the questions (changes/changes.h:
 * GET /changes, the Changes RPC) through real HTTP/1.1 exchanges; and the
 * journal's part of the hand-over record. Every wait is for an event (a
 * barrier, a callback), with a hang deadline of minutes.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "handover.pb-c.h"

#include "base/handover.h"
#include "changes/changes.h"
#include "changes/journal.h"
#include "changes/source.h"
#include "changes/tracker.h"
#include "fs/fs_service.h"
#include "process/process.h"
#include "rpc/rpc.h"

#include "httptest.h"

static char root[64];
static const char *roots[2];
static bool started;

static void setup(void)
{
	snprintf(root, sizeof(root), "/tmp/envd-changes-test.XXXXXX");
	cr_assert_not_null(mkdtemp(root));
	roots[0] = root;
	roots[1] = NULL;
}

static void teardown(void)
{
	char cmd[128];

	if (started)
		source_stop();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	if (system(cmd) != 0)
		cr_log_warn("could not remove %s", root);
}

TestSuite(changes, .init = setup, .fini = teardown);

/* The source on inotify alone, watching `watch` (NULL-terminated). */
static void start_source(const char *const *watch)
{
	struct source_config cfg = {
		.max_paths = 1000, .fanotify = false, .inotify = true, .roots = watch,
	};

	cr_assert_eq(source_start(&cfg), 0);
	cr_assert(source_on());
	started = true;
}

static void on_barrier(void *ud, bool caught_up)
{
	*(int *)ud = caught_up ? 1 : 2;
}

static bool int_set(void *ud)
{
	return *(int *)ud != 0;
}

/* Wait until every change made so far is in the journal. */
static void sync_source(void)
{
	int st = 0;

	cr_assert_eq(source_barrier(on_barrier, &st), 0);
	cr_assert(ht_wait(int_set, &st), "no barrier answer");
	cr_assert_eq(st, 1, "the source did not catch up");
}

static const struct journal_entry *entry_of(const char *path)
{
	for (const struct journal_entry *e = source_journal()->head; e; e = e->next)
		if (strcmp(e->path, path) == 0)
			return e;
	return NULL;
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	cr_assert_not_null(f, "%s", path);
	fputs(text, f);
	fclose(f);
}

/* ---- the source ---- */

Test(changes, the_source_records_what_changes_under_its_roots)
{
	char path[128];
	const struct journal_entry *e;

	start_source(roots);
	sync_source();
	snprintf(path, sizeof(path), "%s/a.txt", root);
	write_file(path, "hello");
	sync_source();
	cr_assert_not_null(e = entry_of(path));
	cr_assert(e->exists);
	cr_assert_eq(e->ftype, JF_FILE);
	cr_assert_eq(e->size, 5);
	cr_assert_neq(e->kseq[0], 0, "a create was seen");
	cr_assert_eq(e->attr, JA_UNKNOWN, "inotify names no writer");
	cr_assert_not(e->first_existed);
	cr_assert_eq(unlink(path), 0);
	sync_source();
	cr_assert_not_null(e = entry_of(path));
	cr_assert_not(e->exists);
}

Test(changes, the_roots_are_listed_for_a_prefix_under_or_above_them)
{
	char **nt, **ir, sub[128];
	size_t n_nt, n_ir;

	start_source(roots);
	sync_source();
	source_roots_under("", &nt, &n_nt, &ir, &n_ir);
	cr_assert_eq(n_ir, 1);
	cr_assert_str_eq(ir[0], root);
	/* Without fanotify no mount is tracked by it: the one holding the
	 * root is listed. */
	cr_assert_geq(n_nt, 1);
	for (size_t i = 0; i < n_nt; i++)
		free(nt[i]);
	free(nt);
	free(ir[0]);
	free(ir);
	snprintf(sub, sizeof(sub), "%s/deeper/still", root);
	source_roots_under(sub, &nt, &n_nt, &ir, &n_ir);
	cr_assert_eq(n_ir, 1, "the root holds the prefix");
	for (size_t i = 0; i < n_nt; i++)
		free(nt[i]);
	free(nt);
	free(ir[0]);
	free(ir);
	source_roots_under("/nonexistent-prefix", &nt, &n_nt, &ir, &n_ir);
	cr_assert_eq(n_ir, 0);
	for (size_t i = 0; i < n_nt; i++)
		free(nt[i]);
	free(nt);
	free(ir);
}

Test(changes, a_registered_working_directory_is_watched_from_its_registration)
{
	char a[96], b[96], path[160];
	const char *only_a[] = { a, NULL };
	char **nt, **ir;
	size_t n_nt, n_ir;

	snprintf(a, sizeof(a), "%s/a", root);
	snprintf(b, sizeof(b), "%s/b", root);
	cr_assert_eq(mkdir(a, 0755), 0);
	cr_assert_eq(mkdir(b, 0755), 0);
	start_source(only_a);
	sync_source();
	source_register(7, 4242, NULL, b);
	/* Made right after the registration: seen whether the watch came
	 * before it (an event) or after (the first listing). */
	snprintf(path, sizeof(path), "%s/made-by-the-command", b);
	write_file(path, "x");
	sync_source();
	cr_assert_not_null(entry_of(path), "a change in the registered cwd");
	source_roots_under(b, &nt, &n_nt, &ir, &n_ir);
	cr_assert_eq(n_ir, 1);
	cr_assert_str_eq(ir[0], b);
	for (size_t i = 0; i < n_nt; i++)
		free(nt[i]);
	free(nt);
	free(ir[0]);
	free(ir);
	source_unregister(7);
}

/* ---- the tracker ---- */

static int ready_calls;
static struct process *ready_p;

static void on_ready(struct process *p)
{
	ready_calls++;
	ready_p = p;
}

static bool ready_seen(void *ud)
{
	return ready_calls > 0;
}

Test(changes, a_tracked_command_gets_its_changes_in_its_end_event)
{
	static char dummy;
	struct process *p = (struct process *)&dummy;
	char path[128];
	void *h;

	start_source(roots);
	tracker_install();
	cr_assert_not_null(process_tracker);
	sync_source();
	h = process_tracker->begin(p, -1, NULL, true, root);
	cr_assert_not_null(h);
	process_tracker->set_pid(h, getpid() + 1);
	snprintf(path, sizeof(path), "%s/out.bin", root);
	write_file(path, "0123456789");
	process_tracker->end(h, p, on_ready);
	cr_assert(ht_wait(ready_seen, NULL), "the end event was never released");
	cr_assert_eq(ready_calls, 1);
	cr_assert_eq(ready_p, p);

	Process__ProcessEvent__EndEvent end = PROCESS__PROCESS_EVENT__END_EVENT__INIT;
	process_tracker->fill(h, &end);
	cr_assert_not_null(end.changes);
	cr_assert(end.changes->since && *end.changes->since);
	cr_assert(end.changes->until && *end.changes->until);
	cr_assert_not(end.changes->resync);
	cr_assert_not(end.changes->overflow);
	bool found = false;
	for (size_t i = 0; i < end.changes->n_changes; i++) {
		Filesystem__Change *c = end.changes->changes[i];
		if (strcmp(c->path, path) != 0)
			continue;
		found = true;
		cr_assert_eq(c->type, FILESYSTEM__CHANGE_TYPE__CHANGE_TYPE_CREATED);
		cr_assert_eq(c->file_type, FILESYSTEM__FILE_TYPE__FILE_TYPE_FILE);
		cr_assert_eq(c->size, 10);
		cr_assert_str_eq(c->attribution, "during", "inotify names no writer: it happened during the command");
	}
	cr_assert(found, "%s is among the %zu changes", path, end.changes->n_changes);
	/* A second end (a retry) does not wait again. */
	process_tracker->end(h, p, on_ready);
	cr_assert_eq(ready_calls, 2);
	process_tracker->release(h);
}

Test(changes, an_untracked_command_ends_at_once_and_carries_no_changes)
{
	static char dummy;
	struct process *p = (struct process *)&dummy;
	void *h;

	start_source(roots);
	tracker_install();
	h = process_tracker->begin(p, 55, NULL, false, root);
	cr_assert_not_null(h);
	process_tracker->end(h, p, on_ready);
	cr_assert_eq(ready_calls, 1, "released at once");
	Process__ProcessEvent__EndEvent end = PROCESS__PROCESS_EVENT__END_EVENT__INIT;
	process_tracker->fill(h, &end);
	cr_assert_null(end.changes);
	process_tracker->release(h);
}

static void on_sync(void *ud)
{
	(*(int *)ud)++;
}

Test(changes, sync_answers_once_the_journal_caught_up)
{
	int n = 0;

	start_source(roots);
	tracker_install();
	cr_assert_eq(process_tracker->sync(on_sync, &n), 0);
	cr_assert(ht_wait(int_set, &n));
	cr_assert_eq(n, 1);
}

Test(changes, the_wire_form_names_kinds_types_and_writers)
{
	static const uint8_t attrs[] = { JA_BY, JA_GONE, JA_OTHER, JA_ENVD, JA_UNKNOWN };
	static const char *const in_reply[] = { "by", "during", "other", "envd", "" };
	static const char *const in_cmd[] = { "by", "during", "other", "envd", "during" };
	struct journal_entry *es[5];
	struct journal_change ch[5];
	Filesystem__Change items[5], *ptrs[5];
	Filesystem__EventType evs[5 * JK_N];
	Google__Protobuf__Timestamp ts[5];

	for (int i = 0; i < 5; i++) {
		es[i] = calloc(1, sizeof(*es[i]) + 16);
		cr_assert_not_null(es[i]);
		snprintf(es[i]->path, 16, "/p%d", i);
		es[i]->attr = attrs[i];
		es[i]->cmd = 99999; /* no such command */
		es[i]->ftype = i == 1 ? JF_DIR : JF_FILE;
		es[i]->size = 42;
		es[i]->time_ns = 1500000000LL;
		ch[i] = (struct journal_change){ .e = es[i], .type = JT_MODIFIED, .kinds = JK_CREATE | JK_WRITE,
						 .exists = i != 2 };
	}
	for (int pass = 0; pass < 2; pass++) {
		tracker_to_wire(ch, 5, items, ptrs, evs, ts, pass == 1);
		for (int i = 0; i < 5; i++) {
			cr_assert_eq(ptrs[i], &items[i]);
			cr_assert_str_eq(items[i].path, es[i]->path);
			cr_assert_str_eq(items[i].attribution, pass ? in_cmd[i] : in_reply[i]);
			cr_assert_eq(items[i].n_events, 2);
			cr_assert_eq(items[i].events[0], FILESYSTEM__EVENT_TYPE__EVENT_TYPE_CREATE);
			cr_assert_eq(items[i].events[1], FILESYSTEM__EVENT_TYPE__EVENT_TYPE_WRITE);
			cr_assert_eq(items[i].type, FILESYSTEM__CHANGE_TYPE__CHANGE_TYPE_MODIFIED);
			cr_assert_eq(items[i].size, i == 2 ? -1 : 42, "a path gone has no size");
			cr_assert_eq(items[i].time->seconds, 1);
			cr_assert_eq(items[i].time->nanos, 500000000);
			cr_assert_eq(items[i].pid, 0, "a command that is gone has no pid");
		}
		cr_assert_eq(items[1].file_type, FILESYSTEM__FILE_TYPE__FILE_TYPE_DIRECTORY);
	}
	cr_assert_eq(tracker_pid(99999), 0);
	for (int i = 0; i < 5; i++)
		free(es[i]);
}

/* ---- the questions ---- */

static json_t *json_of(const struct ht_resp *r)
{
	json_t *o = json_loads(r->body, 0, NULL);

	cr_assert(json_is_object(o), "not a JSON object: %s", r->body);
	return o;
}

Test(changes, get_changes_with_the_journal_off_is_412)
{
	struct ht_resp r;

	changes_max_paths = 0;
	cr_assert_eq(changes_start(), 0);
	cr_assert_not(source_on());
	r = ht_get(changes_http_get, "/changes");
	cr_assert_eq(r.status, 412);
	cr_assert(strstr(r.body, "the change journal is off"), "%s", r.body);
	ht_free(&r);
}

Test(changes, get_changes_answers_from_a_checkpoint)
{
	char target[512], path[128];
	struct ht_resp r;
	json_t *o;

	start_source(roots);
	r = ht_get(changes_http_get, "/changes");
	cr_assert_eq(r.status, 200, "%s", r.body);
	o = json_of(&r);
	char next[128];
	snprintf(next, sizeof(next), "%s", json_string_value(json_object_get(o, "next")));
	cr_assert_gt(strlen(next), 0);
	cr_assert_eq(json_array_size(json_object_get(o, "changes")), 0, "no checkpoint: no changes");
	json_decref(o);
	ht_free(&r);

	snprintf(path, sizeof(path), "%s/new.txt", root);
	write_file(path, "abc");
	snprintf(target, sizeof(target), "/changes?since=%s&path=%s", next, root);
	r = ht_get(changes_http_get, target);
	cr_assert_eq(r.status, 200, "%s", r.body);
	o = json_of(&r);
	json_t *changes = json_object_get(o, "changes");
	cr_assert_eq(json_array_size(changes), 1, "%s", r.body);
	json_t *c = json_array_get(changes, 0);
	cr_assert_str_eq(json_string_value(json_object_get(c, "path")), path);
	cr_assert_str_eq(json_string_value(json_object_get(c, "type")), "CHANGE_TYPE_CREATED");
	cr_assert_eq(json_is_true(json_object_get(o, "resync")), false);
	json_t *ir = json_object_get(o, "inotifyRoots");
	cr_assert_eq(json_array_size(ir), 1, "%s", r.body);
	cr_assert_str_eq(json_string_value(json_array_get(ir, 0)), root);
	json_decref(o);
	ht_free(&r);

	/* Outside the prefix: nothing. */
	snprintf(target, sizeof(target), "/changes?since=%s&path=%s/elsewhere", next, root);
	r = ht_get(changes_http_get, target);
	cr_assert_eq(r.status, 200);
	o = json_of(&r);
	cr_assert_eq(json_array_size(json_object_get(o, "changes")), 0, "%s", r.body);
	json_decref(o);
	ht_free(&r);
}

Test(changes, get_changes_pages_with_a_limit)
{
	char target[512], path[128], next[128];
	struct ht_resp r;
	json_t *o;

	start_source(roots);
	r = ht_get(changes_http_get, "/changes");
	o = json_of(&r);
	snprintf(next, sizeof(next), "%s", json_string_value(json_object_get(o, "next")));
	json_decref(o);
	ht_free(&r);
	for (int i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "%s/f%d", root, i);
		write_file(path, "x");
	}
	size_t seen = 0;
	for (int page = 0; page < 4; page++) {
		snprintf(target, sizeof(target), "/changes?since=%s&path=%s&limit=2", next, root);
		r = ht_get(changes_http_get, target);
		cr_assert_eq(r.status, 200, "%s", r.body);
		o = json_of(&r);
		size_t n = json_array_size(json_object_get(o, "changes"));
		cr_assert_leq(n, 2);
		seen += n;
		snprintf(next, sizeof(next), "%s", json_string_value(json_object_get(o, "next")));
		bool more = json_is_true(json_object_get(o, "more"));
		json_decref(o);
		ht_free(&r);
		if (!more)
			break;
	}
	cr_assert_eq(seen, 3);
}

Test(changes, get_changes_refuses_bad_arguments)
{
	struct ht_resp r;

	start_source(roots);
	r = ht_get(changes_http_get, "/changes?since=not-a-token");
	cr_assert_eq(r.status, 400);
	cr_assert(strstr(r.body, "invalid change token 'not-a-token'"), "%s", r.body);
	ht_free(&r);
	r = ht_get(changes_http_get, "/changes?limit=ten");
	cr_assert_eq(r.status, 400);
	cr_assert(strstr(r.body, "invalid limit"), "%s", r.body);
	ht_free(&r);
	r = ht_get(changes_http_get, "/changes?username=no-such-user-here");
	cr_assert_eq(r.status, 401);
	cr_assert(strstr(r.body, "no-such-user-here"), "%s", r.body);
	ht_free(&r);
}

static void rpc_edge(struct http_req *r)
{
	rpc_dispatch(r);
}

Test(changes, the_changes_rpc_answers_and_refuses_like_the_http_form)
{
	struct ht_resp r;
	json_t *o;

	rpc_register(&fs_service);
	r = ht_post(rpc_edge, "/filesystem.Filesystem/Changes", "application/json", "{}");
	cr_assert_eq(r.status, 400, "%s", r.body);
	cr_assert(strstr(r.body, "failed_precondition"), "journal off: %s", r.body);
	ht_free(&r);

	start_source(roots);
	r = ht_post(rpc_edge, "/filesystem.Filesystem/Changes", "application/json", "{}");
	cr_assert_eq(r.status, 200, "%s", r.body);
	o = json_of(&r);
	cr_assert(json_is_string(json_object_get(o, "next")), "%s", r.body);
	json_decref(o);
	ht_free(&r);
	r = ht_post(rpc_edge, "/filesystem.Filesystem/Changes", "application/json", "{\"since\":\"bogus\"}");
	cr_assert_eq(r.status, 400, "%s", r.body);
	cr_assert(strstr(r.body, "invalid_argument"), "%s", r.body);
	cr_assert(strstr(r.body, "invalid change token 'bogus'"), "%s", r.body);
	ht_free(&r);
}

/* ---- the hand-over ---- */

Test(changes, the_journal_crosses_an_upgrade_and_old_checkpoints_answer_resync_after_inotify)
{
	char path[128], target[512], next[128];
	struct ht_resp r;
	json_t *o;

	start_source(roots);
	r = ht_get(changes_http_get, "/changes");
	o = json_of(&r);
	snprintf(next, sizeof(next), "%s", json_string_value(json_object_get(o, "next")));
	json_decref(o);
	ht_free(&r);
	snprintf(path, sizeof(path), "%s/kept.txt", root);
	write_file(path, "kept");
	sync_source();
	uint64_t epoch = source_journal()->epoch;
	size_t paths = changes_paths();
	cr_assert_geq(paths, 1);

	/* The outgoing image saves its part, packs the record... */
	Upgrade__HandoverState st = UPGRADE__HANDOVER_STATE__INIT;
	struct handover h;
	handover_init(&h, &st);
	changes_handover_save(&h);
	cr_assert_not_null(st.changes);
	cr_assert_eq(st.changes->epoch, epoch);
	cr_assert_eq(st.changes->fanotify_fd, -1, "no fanotify group here");
	cr_assert_eq(h.n_kept, 0, "inotify watches do not cross");
	cr_assert_eq(st.changes->n_entries, paths);
	size_t len = upgrade__handover_state__get_packed_size(&st);
	uint8_t *buf = malloc(len);
	cr_assert_not_null(buf);
	upgrade__handover_state__pack(&st, buf);
	handover_free(&h);
	source_stop();
	started = false;

	/* ...and the next one takes the journal over before it starts. */
	Upgrade__HandoverState *in = upgrade__handover_state__unpack(NULL, len, buf);
	free(buf);
	cr_assert_not_null(in);
	handover_init(&h, in);
	changes_handover_restore(&h);
	handover_free(&h);
	upgrade__handover_state__free_unpacked(in, NULL);
	start_source(roots);
	cr_assert_eq(source_journal()->epoch, epoch, "the same journal");
	cr_assert_geq(changes_paths(), paths);
	const struct journal_entry *e = entry_of(path);
	cr_assert_not_null(e);
	cr_assert(e->exists);
	/* inotify saw nothing during the exec: the old checkpoint says so. */
	snprintf(target, sizeof(target), "/changes?since=%s&path=%s", next, root);
	r = ht_get(changes_http_get, target);
	cr_assert_eq(r.status, 200, "%s", r.body);
	o = json_of(&r);
	cr_assert(json_is_true(json_object_get(o, "resync")), "%s", r.body);
	json_decref(o);
	ht_free(&r);
}

Test(changes, a_journal_exec_that_fails_carries_on)
{
	char path[128];

	start_source(roots);
	sync_source();
	Upgrade__HandoverState st = UPGRADE__HANDOVER_STATE__INIT;
	struct handover h;
	handover_init(&h, &st);
	changes_handover_save(&h);
	handover_free(&h);
	changes_handover_cancel();
	snprintf(path, sizeof(path), "%s/after-cancel", root);
	write_file(path, "x");
	sync_source();
	cr_assert_not_null(entry_of(path), "the thread reads again");
}

Test(changes, a_record_without_a_journal_or_with_the_journal_off_takes_nothing)
{
	Upgrade__ChangeJournal cj = UPGRADE__CHANGE_JOURNAL__INIT;
	Upgrade__HandoverState st = UPGRADE__HANDOVER_STATE__INIT;
	struct handover h;
	int p[2];

	/* -changes-max-paths 0: the inherited group is closed, not leaked. */
	cr_assert_eq(pipe(p), 0);
	cj.epoch = 77;
	cj.fanotify_fd = p[0];
	st.changes = &cj;
	changes_max_paths = 0;
	handover_init(&h, &st);
	changes_handover_restore(&h);
	handover_free(&h);
	cr_assert_lt(fcntl(p[0], F_GETFD), 0, "the descriptor was closed");
	close(p[1]);
	cr_assert_eq(changes_start(), 0);
	cr_assert_not(source_on());
}
