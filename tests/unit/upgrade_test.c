/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The live-upgrade record (sandbox/upgrade.h, base/handover.h): a record
 * written from a small state is taken over by "the next image", a child
 * forked before the state was made (so its tables are empty, as after an
 * exec) that holds the same descriptors by number, as the exec leaves
 * them. It reports what it took over through a pipe.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "handover.pb-c.h"

#include "base/handover.h"
#include "base/loop.h"
#include "base/state.h"
#include "fs/fs_service.h"
#include "http/conn.h"
#include "process/process.h"
#include "process/ring.h"
#include "sandbox/freeze.h"
#include "sandbox/nfs.h"
#include "sandbox/upgrade.h"

extern char **environ;

static char dir[64];

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/envd-upgrade-test.XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(upgrade_record_path, sizeof(upgrade_record_path), "%s/handover.pb", dir);
	upgrade_version = "test-writer";
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		cr_log_warn("could not remove %s", dir);
}

TestSuite(upgrade, .init = setup, .fini = teardown);

/* ---- the next image: a child that waits for the record ---- */

struct next_image {
	pid_t pid;
	int go;     /* write a byte: the record is there */
	int report; /* what the child took over, as text */
};

static void next_image_start(struct next_image *n, void (*take_over)(FILE *out))
{
	int go[2], rep[2];

	cr_assert_eq(pipe2(go, O_CLOEXEC), 0);
	cr_assert_eq(pipe2(rep, O_CLOEXEC), 0);
	n->pid = fork();
	cr_assert_geq(n->pid, 0);
	if (n->pid == 0) {
		char c;
		close(go[1]);
		close(rep[0]);
		if (read(go[0], &c, 1) != 1)
			_exit(2);
		FILE *out = fdopen(rep[1], "w");
		if (!out)
			_exit(3);
		take_over(out);
		fclose(out);
		_exit(0);
	}
	close(go[0]);
	close(rep[1]);
	n->go = go[1];
	n->report = rep[0];
}

/* Let the child go and read its whole report (NUL-terminated, static). */
static const char *next_image_run(struct next_image *n)
{
	static char buf[16384];
	size_t k = 0;
	ssize_t r;
	int status;

	cr_assert_eq(write(n->go, "g", 1), 1);
	close(n->go);
	while (k < sizeof(buf) - 1 && (r = read(n->report, buf + k, sizeof(buf) - 1 - k)) > 0)
		k += (size_t)r;
	buf[k] = '\0';
	close(n->report);
	cr_assert_eq(waitpid(n->pid, &status, 0), n->pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the next image failed (%#x): %s", status, buf);
	return buf;
}

/* The report holds `line` as one of its lines. */
static void expect_line(const char *report, const char *line)
{
	size_t l = strlen(line);

	for (const char *p = report; (p = strstr(p, line)); p++)
		if ((p == report || p[-1] == '\n') && (p[l] == '\n' || p[l] == '\0'))
			return;
	cr_assert_fail("no line \"%s\" in the report:\n%s", line, report);
}

/* ---- the round trip ---- */

static struct {
	pid_t sleeper;
	int out_r, err_r, in_w; /* the live command's pipes (ours) */
	int listener;
	int ino, wd;
} w;

static void print_ring(FILE *out, const char *what, const struct ring *rg)
{
	fprintf(out, "%s.start=%llu\n%s.end=%llu\n", what, (unsigned long long)ring_start(rg), what,
		(unsigned long long)ring_end(rg));
	for (uint64_t off = ring_start(rg); off < ring_end(rg);) {
		enum ring_kind kind;
		const uint8_t *p;
		long n = ring_peek(rg, off, &kind, &p, (size_t)(ring_end(rg) - off));
		if (n <= 0)
			break;
		fprintf(out, "%s.run=%d:%.*s\n", what, (int)kind, (int)n, (const char *)p);
		off += (uint64_t)n;
	}
}

static void print_proc(void *ud, const struct process_snapshot *s)
{
	FILE *out = ud;
	char what[64];

	snprintf(what, sizeof(what), "%s", s->tag ? s->tag : "(none)");
	fprintf(out, "%s.pid=%u\n%s.finished=%d\n%s.exit=%d\n%s.status=%s\n", what, s->pid, what, s->finished,
		what, s->exit_code, what, s->status ? s->status : "");
	fprintf(out, "%s.cmd=%s\n", what, s->config && s->config->cmd ? s->config->cmd : "");
	if (!s->finished)
		fprintf(out, "%s.fds=%d,%d,%d\n%s.stdin=%.*s\n", what, s->out_fd, s->err_fd, s->in_fd, what,
			(int)s->stdin_pending_len, (const char *)s->stdin_pending);
	print_ring(out, what, s->ring);
}

static void take_over(FILE *out)
{
	int lfd = upgrade_resume();
	size_t tlen;
	const char *tok = state_token(&tlen);

	fprintf(out, "listener=%d\n", lfd);
	fprintf(out, "header=%s\n", upgrade_handover_header() ? upgrade_handover_header() : "(none)");
	fprintf(out, "gate_closed=%d\n", upgrade_gate_closed());
	fprintf(out, "record_left=%d\n", access(upgrade_record_path, F_OK) == 0);
	fprintf(out, "token=%.*s\n", tok ? (int)tlen : 0, tok ? tok : "");
	fprintf(out, "user=%s\nworkdir=%s\n", state_default_user(),
		state_default_workdir() ? state_default_workdir() : "(none)");
	for (size_t i = 0; i < envstore_count(); i++) {
		const char *k, *v;
		envstore_entry(i, &k, &v);
		fprintf(out, "env.%s=%s%s\n", k, v, envstore_entry_internal(i) ? " (internal)" : "");
	}
	fprintf(out, "last_init_ns=%lld\n", (long long)state_last_init_ns);
	struct freeze_state fz;
	freeze_state_get(&fz);
	fprintf(out, "frozen=%d\n", fz.applied);
	for (size_t i = 0; i < fz.n_guest; i++)
		fprintf(out, "guest_frozen=%s\n", fz.guest[i]);
	/* The NFS ledger, as the next record would carry it. */
	Upgrade__HandoverState again = UPGRADE__HANDOVER_STATE__INIT;
	struct handover h;
	handover_init(&h, &again);
	nfs_handover_save(&h);
	for (size_t i = 0; i < again.n_mounts; i++)
		fprintf(out, "mount=%s %s\n", again.mounts[i]->path, again.mounts[i]->lifecycle_id);
	handover_free(&h);
	process_snapshot_each(print_proc, out);
	fprintf(out, "watchers=%zu\n", fs_service_watcher_count());
	/* Taken over: close-on-exec again, so later commands do not inherit it. */
	fprintf(out, "out_r.cloexec=%d\n", fcntl(w.out_r, F_GETFD) == FD_CLOEXEC);
	upgrade_resume_forwards();
	fprintf(out, "listener_after=%d\n", fcntl(lfd, F_GETFD) >= 0);
}

/* The state's descriptors, made before the next image is forked. */
static void make_descriptors(void)
{
	int out[2], err[2], in[2];
	posix_spawn_file_actions_t fa;
	char *argv[] = { "sleep", "120", NULL };
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	char watched[128];

	cr_assert_eq(pipe2(out, O_CLOEXEC), 0);
	cr_assert_eq(pipe2(err, O_CLOEXEC), 0);
	cr_assert_eq(pipe2(in, O_CLOEXEC), 0);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, in[0], 0);
	posix_spawn_file_actions_adddup2(&fa, out[1], 1);
	posix_spawn_file_actions_adddup2(&fa, err[1], 2);
	cr_assert_eq(posix_spawnp(&w.sleeper, "sleep", &fa, NULL, argv, environ), 0);
	posix_spawn_file_actions_destroy(&fa);
	close(out[1]);
	close(err[1]);
	close(in[0]);
	w.out_r = out[0];
	w.err_r = err[0];
	w.in_w = in[1];
	/* The command never reads: input sent now stays pending in envd. */
	char fill[4096];
	memset(fill, 'x', sizeof(fill));
	cr_assert_eq(fcntl(w.in_w, F_SETFL, O_NONBLOCK), 0);
	while (write(w.in_w, fill, sizeof(fill)) > 0)
		;
	cr_assert_eq(errno, EAGAIN);

	w.listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(w.listener, 0);
	cr_assert_eq(bind(w.listener, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(listen(w.listener, 8), 0);

	snprintf(watched, sizeof(watched), "%s/watched", dir);
	cr_assert_eq(mkdir(watched, 0755), 0);
	w.ino = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	cr_assert_geq(w.ino, 0);
	w.wd = inotify_add_watch(w.ino, watched, IN_CREATE | IN_DELETE | IN_MODIFY | IN_MOVED_FROM | IN_MOVED_TO);
	cr_assert_geq(w.wd, 0);
}

/* The state of the outgoing image, through the owners' own entry points. */
static void make_state(void)
{
	const char *keys[] = { "A" }, *vals[] = { "1" };
	static char *args[] = { "120" };
	static Process__ProcessConfig cfg_live = PROCESS__PROCESS_CONFIG__INIT;
	static Process__ProcessConfig cfg_done = PROCESS__PROCESS_CONFIG__INIT;
	struct process_snapshot s;
	struct ring rg;

	state_token_set("secret", 6);
	state_set_default_user("alice");
	state_set_default_workdir("/work");
	envstore_replace_user(keys, vals, 1);
	envstore_set_internal("E2B_X", "2");
	state_last_init_ns = 123456789;

	struct freeze_state fz = { .applied = false, .n_guest = 1 };
	snprintf(fz.guest[0], sizeof(fz.guest[0]), "guest/frozen");
	freeze_state_set(&fz);

	/* The NFS ledger, seeded as a previous record would. */
	Upgrade__MountEntry m = UPGRADE__MOUNT_ENTRY__INIT, *mp = &m;
	Upgrade__HandoverState seed = UPGRADE__HANDOVER_STATE__INIT;
	struct handover h;
	m.path = "/mnt/data";
	m.lifecycle_id = "lc-1";
	seed.mounts = &mp;
	seed.n_mounts = 1;
	handover_init(&h, &seed);
	nfs_handover_restore(&h);
	handover_free(&h);

	/* A live command with output already read and input not yet taken. */
	cfg_live.cmd = "sleep";
	cfg_live.args = args;
	cfg_live.n_args = 1;
	memset(&s, 0, sizeof(s));
	s.pid = (uint32_t)w.sleeper;
	s.tag = "live";
	s.config = &cfg_live;
	s.out_fd = w.out_r;
	s.err_fd = w.err_r;
	s.in_fd = w.in_w;
	s.stdin_pending = (const uint8_t *)"typed";
	s.stdin_pending_len = 5;
	ring_init(&rg, process_ring_size);
	cr_assert_eq(ring_append(&rg, RING_STDOUT, "before\n", 7), 0);
	cr_assert_eq(process_adopt(&s, &rg), 0);
	ring_free(&rg);

	/* A finished one, retained, whose oldest output was evicted. */
	cfg_done.cmd = "false";
	memset(&s, 0, sizeof(s));
	s.pid = 4000000;
	s.tag = "done";
	s.config = &cfg_done;
	s.finished = true;
	s.retain_left_ms = 600000;
	s.exit_code = 3;
	s.exited = true;
	s.status = "exit status 3";
	s.out_fd = s.err_fd = s.in_fd = -1;
	ring_init(&rg, process_ring_size);
	rg.start = rg.end = 1000;
	cr_assert_eq(ring_append(&rg, RING_STDOUT, "out\n", 4), 0);
	cr_assert_eq(ring_append(&rg, RING_STDERR, "err\n", 4), 0);
	cr_assert_eq(process_adopt(&s, &rg), 0);
	ring_free(&rg);

	/* A polled watcher with one event not fetched yet. */
	Filesystem__FilesystemEvent ev = FILESYSTEM__FILESYSTEM_EVENT__INIT;
	const Filesystem__FilesystemEvent *evs[] = { &ev };
	char watched[128], err[256];
	const char *rels[] = { "" };
	ev.name = "pending-file";
	ev.type = FILESYSTEM__EVENT_TYPE__EVENT_TYPE_CREATE;
	snprintf(watched, sizeof(watched), "%s/watched", dir);
	struct fs_watcher_snapshot ws = {
		.id = "wtest1", .path = watched, .events = evs, .n_events = 1,
		.inotify_fd = w.ino, .wds = &w.wd, .rels = rels, .n_wds = 1,
	};
	cr_assert_eq(fs_watcher_adopt(&ws, err, sizeof(err)), 0, "%s", err);

	cr_assert_eq(server_listen_fd(w.listener), 0);
}

/* What the written record holds, field by field (docs/upgrade.md). */
static void check_record(void)
{
	int fd = open(upgrade_record_path, O_RDONLY);
	struct stat st;
	uint8_t *buf;

	cr_assert_geq(fd, 0);
	cr_assert_eq(fstat(fd, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0600);
	buf = malloc((size_t)st.st_size + 1);
	cr_assert_eq(read(fd, buf, (size_t)st.st_size), st.st_size);
	close(fd);
	Upgrade__HandoverState *r = upgrade__handover_state__unpack(NULL, (size_t)st.st_size, buf);
	free(buf);
	cr_assert_not_null(r);
	cr_assert_eq(r->schema, 2, "guest-frozen cgroups make it schema 2");
	cr_assert_str_eq(r->from_ver, "test-writer");
	cr_assert(r->arch && *r->arch);
	cr_assert(r->has_access_token);
	cr_assert_eq(r->access_token.len, 6);
	cr_assert(memcmp(r->access_token.data, "secret", 6) == 0);
	cr_assert_str_eq(r->default_user, "alice");
	cr_assert_str_eq(r->default_workdir, "/work");
	cr_assert_eq(r->last_init_ns, 123456789);
	cr_assert_eq(r->n_user_env, 2);
	for (size_t i = 0; i < r->n_user_env; i++)
		cr_assert_eq(r->user_env[i]->internal, strcmp(r->user_env[i]->key, "E2B_X") == 0);
	cr_assert_eq(r->n_guest_frozen_cgroups, 1);
	cr_assert_str_eq(r->guest_frozen_cgroups[0], "guest/frozen");
	cr_assert_not(r->frozen);
	cr_assert_eq(r->n_mounts, 1);
	cr_assert_str_eq(r->mounts[0]->lifecycle_id, "lc-1");
	cr_assert_eq(r->n_listen_fds, 1);
	cr_assert_eq(r->listen_fds[0], w.listener);

	cr_assert_eq(r->n_processes, 1);
	Upgrade__HandoverProc *p = r->processes[0];
	cr_assert_eq(p->pid, (uint32_t)w.sleeper);
	cr_assert_str_eq(p->tag, "live");
	cr_assert(p->has_tag);
	cr_assert_str_eq(p->cg_type, "user");
	cr_assert_str_eq(p->config->cmd, "sleep");
	cr_assert_eq(p->stdout_fd, w.out_r);
	cr_assert_eq(p->stderr_fd, w.err_r);
	cr_assert_eq(p->stdin_fd, w.in_w);
	cr_assert_eq(p->tty_fd, -1);
	cr_assert(p->has_stdout && p->has_stderr && p->has_stdin);
	cr_assert_eq(p->stdin_pending.len, 5);
	cr_assert_not_null(p->output);
	cr_assert_eq(p->output->end, 7);
	cr_assert_eq(p->output->n_runs, 1);

	cr_assert_eq(r->n_terminated, 1);
	Upgrade__HandoverExit *x = r->terminated[0];
	cr_assert_eq(x->pid, 4000000);
	cr_assert_eq(x->end->exit_code, 3);
	cr_assert_str_eq(x->end->error, "exit status 3");
	cr_assert_gt(x->remaining_ms, 0);
	cr_assert_eq(x->output->start, 1000);
	cr_assert_eq(x->output->end, 1008);
	cr_assert_eq(x->output->n_runs, 2, "one run per stream");

	cr_assert_eq(r->n_watchers, 1);
	Upgrade__HandoverWatcher *hw = r->watchers[0];
	cr_assert_str_eq(hw->id, "wtest1");
	cr_assert_eq(hw->inotify_fd, w.ino);
	cr_assert_eq(hw->n_wds, 1);
	cr_assert_eq(hw->wds[0]->wd, w.wd);
	cr_assert_eq(hw->n_pending_events, 1);
	cr_assert_str_eq(hw->pending_events[0]->name, "pending-file");
	cr_assert_null(r->changes, "the journal is off");
	upgrade__handover_state__free_unpacked(r, NULL);
}

static bool cloexec(int fd)
{
	int fl = fcntl(fd, F_GETFD);
	cr_assert_geq(fl, 0, "descriptor %d is open", fd);
	return fl & FD_CLOEXEC;
}

Test(upgrade, a_record_written_from_a_small_state_is_taken_over_by_the_next_image)
{
	struct next_image next;
	size_t len;
	char err[256], line[256];

	make_descriptors();
	next_image_start(&next, take_over);
	make_state();
	cr_assert_eq(upgrade_record_write(&len, err, sizeof(err)), 0, "%s", err);
	cr_assert_gt(len, 0);
	/* Every descriptor the record names crosses the exec. */
	cr_assert_not(cloexec(w.out_r));
	cr_assert_not(cloexec(w.err_r));
	cr_assert_not(cloexec(w.in_w));
	cr_assert_not(cloexec(w.listener));
	cr_assert_not(cloexec(w.ino));
	check_record();

	const char *rep = next_image_run(&next);
	snprintf(line, sizeof(line), "listener=%d", w.listener);
	expect_line(rep, line);
	expect_line(rep, "header={\"failed\":false,\"procs\":1,\"procs_failed\":0,\"retained\":1,"
			 "\"retained_failed\":0,\"watchers\":1,\"watchers_failed\":0,\"forwards\":0}");
	expect_line(rep, "gate_closed=1");
	expect_line(rep, "record_left=0");
	expect_line(rep, "token=secret");
	expect_line(rep, "user=alice");
	expect_line(rep, "workdir=/work");
	expect_line(rep, "env.A=1");
	expect_line(rep, "env.E2B_X=2 (internal)");
	expect_line(rep, "last_init_ns=123456789");
	expect_line(rep, "frozen=0");
	expect_line(rep, "guest_frozen=guest/frozen");
	expect_line(rep, "mount=/mnt/data lc-1");
	snprintf(line, sizeof(line), "live.pid=%d", (int)w.sleeper);
	expect_line(rep, line);
	expect_line(rep, "live.finished=0");
	expect_line(rep, "live.cmd=sleep");
	snprintf(line, sizeof(line), "live.fds=%d,%d,%d", w.out_r, w.err_r, w.in_w);
	expect_line(rep, line);
	expect_line(rep, "live.stdin=typed");
	expect_line(rep, "live.start=0");
	expect_line(rep, "live.end=7");
	expect_line(rep, "live.run=1:before");
	expect_line(rep, "done.pid=4000000");
	expect_line(rep, "done.finished=1");
	expect_line(rep, "done.exit=3");
	expect_line(rep, "done.status=exit status 3");
	expect_line(rep, "done.cmd=false");
	expect_line(rep, "done.start=1000");
	expect_line(rep, "done.end=1008");
	expect_line(rep, "done.run=1:out");
	expect_line(rep, "done.run=2:err");
	expect_line(rep, "watchers=1");
	expect_line(rep, "out_r.cloexec=1");
	expect_line(rep, "listener_after=1");

	/* The exec "failed" here: the outgoing side undoes the record. */
	upgrade_record_undo();
	cr_assert(cloexec(w.out_r));
	cr_assert(cloexec(w.listener));
	cr_assert(cloexec(w.ino));
	kill(w.sleeper, SIGKILL);
	waitpid(w.sleeper, NULL, 0);
}

Test(upgrade, an_exec_that_fails_leaves_everything_as_it_was)
{
	size_t len;
	char err[256];

	make_descriptors();
	cr_assert_eq(server_listen_fd(w.listener), 0);
	cr_assert_eq(upgrade_record_write(&len, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(access(upgrade_record_path, F_OK), 0);
	cr_assert_not(cloexec(w.listener));
	upgrade_record_undo();
	cr_assert_neq(access(upgrade_record_path, F_OK), 0, "the record (it holds the token) is removed");
	cr_assert(cloexec(w.listener));
	kill(w.sleeper, SIGKILL);
	waitpid(w.sleeper, NULL, 0);
}

Test(upgrade, a_record_that_cannot_be_written_is_reported_and_undone)
{
	size_t len;
	char err[256];

	make_descriptors();
	cr_assert_eq(server_listen_fd(w.listener), 0);
	snprintf(upgrade_record_path, sizeof(upgrade_record_path), "%s/no/such/dir/handover.pb", dir);
	cr_assert_lt(upgrade_record_write(&len, err, sizeof(err)), 0);
	cr_assert(strstr(err, "no/such/dir/handover.pb"), "%s", err);
	cr_assert(cloexec(w.listener), "a record not written keeps nothing inheritable");
	kill(w.sleeper, SIGKILL);
	waitpid(w.sleeper, NULL, 0);
}

/* ---- records that cannot be taken over ---- */

static int stray = -1;

static void take_over_refused(FILE *out)
{
	int rc = upgrade_resume();

	fprintf(out, "rc=%d\n", rc);
	fprintf(out, "header=%s\n", upgrade_handover_header() ? upgrade_handover_header() : "(none)");
	fprintf(out, "gate_closed=%d\n", upgrade_gate_closed());
	fprintf(out, "stray_open=%d\n", fcntl(stray, F_GETFD) >= 0);
	fprintf(out, "token_set=%d\n", state_token_is_set());
}

/* An inheritable descriptor, as an exec leaves one nothing may take over. */
static void make_stray(void)
{
	int p[2];

	cr_assert_eq(pipe(p), 0);
	stray = p[0];
}

static void write_record(const Upgrade__HandoverState *st)
{
	size_t n = upgrade__handover_state__get_packed_size(st);
	uint8_t *b = malloc(n + 1);
	FILE *f = fopen(upgrade_record_path, "w");

	cr_assert(b && f);
	upgrade__handover_state__pack(st, b);
	cr_assert_eq(fwrite(b, 1, n, f), n);
	fclose(f);
	free(b);
}

static const char *refused_header =
	"header={\"failed\":true,\"procs\":0,\"procs_failed\":0,\"retained\":0,\"retained_failed\":0,"
	"\"watchers\":0,\"watchers_failed\":0}";

Test(upgrade, without_a_record_the_hand_over_fails_and_inherited_descriptors_close)
{
	struct next_image next;
	char line[64];

	make_stray();
	next_image_start(&next, take_over_refused);
	const char *rep = next_image_run(&next);
	snprintf(line, sizeof(line), "rc=%d", -ENOENT);
	expect_line(rep, line);
	expect_line(rep, refused_header);
	expect_line(rep, "gate_closed=1");
	expect_line(rep, "stray_open=0");
}

Test(upgrade, a_record_of_a_newer_schema_is_refused)
{
	Upgrade__HandoverState st = UPGRADE__HANDOVER_STATE__INIT;
	struct next_image next;
	char line[64];

	st.schema = 3;
	st.has_access_token = true;
	st.access_token.data = (uint8_t *)"t";
	st.access_token.len = 1;
	write_record(&st);
	make_stray();
	next_image_start(&next, take_over_refused);
	const char *rep = next_image_run(&next);
	snprintf(line, sizeof(line), "rc=%d", -EPROTO);
	expect_line(rep, line);
	expect_line(rep, refused_header);
	expect_line(rep, "stray_open=0");
	expect_line(rep, "token_set=0");
	cr_assert_neq(access(upgrade_record_path, F_OK), 0, "the record is deleted once read");
}

Test(upgrade, a_record_of_another_architecture_is_refused)
{
	Upgrade__HandoverState st = UPGRADE__HANDOVER_STATE__INIT;
	struct next_image next;
	char line[64];

	st.schema = 1;
	st.arch = "riscv64";
	write_record(&st);
	next_image_start(&next, take_over_refused);
	const char *rep = next_image_run(&next);
	snprintf(line, sizeof(line), "rc=%d", -EPROTO);
	expect_line(rep, line);
	expect_line(rep, refused_header);
}

Test(upgrade, a_record_that_does_not_parse_is_refused)
{
	struct next_image next;
	char line[64];
	FILE *f = fopen(upgrade_record_path, "w");

	cr_assert_not_null(f);
	fputs("\xff\xff\xff\xff not a record", f);
	fclose(f);
	next_image_start(&next, take_over_refused);
	const char *rep = next_image_run(&next);
	snprintf(line, sizeof(line), "rc=%d", -EPROTO);
	expect_line(rep, line);
	expect_line(rep, refused_header);
}
