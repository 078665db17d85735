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

#include "handover.pb-c.h"

#include "base/handover.h"
#include "base/log.h"
#include "base/loop.h"
#include "base/sdnotify.h"
#include "base/state.h"
#include "changes/changes.h"
#include "fs/fs_handover.h"
#include "fs/fs_service.h"
#include "http/conn.h"
#include "process/cgroup.h"
#include "process/keep.h"
#include "process/process.h"
#include "process/process_handover.h"
#include "process/session_handover.h"
#include "sandbox/freeze.h"
#include "sandbox/logexport.h"
#include "sandbox/nfs.h"
#include "sandbox/portfwd.h"
#include "sandbox/upgrade.h"
#include "try/tryrun.h"

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

/* ---- the /init state kept for a restart after a crash (docs/crash.md) ---- */

/* Two names used in turn: the new state is stored before the old one is
 * dropped, so a crash in between leaves one whole (the higher generation
 * wins). */
static uint64_t kept_gen;

void upgrade_keep_init_state(void)
{
	Upgrade__HandoverState st = UPGRADE__HANDOVER_STATE__INIT;
	struct handover h;
	char name[32];
	size_t len;
	uint8_t *buf = NULL;
	int fd = -1;

	if (!keep_enabled)
		return;
	handover_init(&h, &st);
	state_handover_save(&h);
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
	handover_free(&h);
}

void upgrade_restore_init_state(struct sdnotify_fd *fds, size_t n)
{
	struct handover h;
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
	handover_init(&h, best);
	state_handover_restore(&h);
	upgrade__handover_state__free_unpacked(best, NULL);
	kept_gen = best_gen;
	/* Stored again under this envd, and the older name dropped. */
	upgrade_keep_init_state();
	fprintf(stderr, "envd: the /init state was restored after a restart\n");
}


/*
 * Pack the whole state; *out is malloc'ed. Each owner saves its own part
 * (base/handover.h); the descriptors they keep are listed in h.
 */
static int build_record(struct handover *h, uint8_t **out, size_t *out_len)
{
	Upgrade__HandoverState *st = h->st;
	int rc = 0;

	st->schema = 1;
	st->from_ver = (char *)upgrade_version;
	st->arch = (char *)RECORD_ARCH;
	process_handover_save(h);
	session_handover_save(h);
	fs_handover_save(h);
	nfs_handover_save(h);
	portfwd_handover_save(h);
	server_handover_save(h);
	state_handover_save(h);
	changes_handover_save(h);
	try_handover_save(h);
	freeze_handover_save(h); /* schema 2 with guest-frozen cgroups */
	/* Leaves of no process (spares, released ones): removed by the next
	 * image, not left behind. */
	pcg_handover_save(h);
	if (h->arena.oom) {
		rc = -ENOMEM;
	} else {
		*out_len = upgrade__handover_state__get_packed_size(st);
		*out = malloc(*out_len ? *out_len : 1);
		if (!*out)
			rc = -ENOMEM;
		else
			upgrade__handover_state__pack(st, *out);
	}
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

/* The record written and not yet replaced by the exec: what to undo. */
static Upgrade__HandoverState out_st;
static struct handover out_h;
static bool out_written;

int upgrade_record_write(size_t *len, char *err, size_t errlen)
{
	uint8_t *rec = NULL;
	int rc;

	if (out_written)
		upgrade_record_undo();
	upgrade__handover_state__init(&out_st);
	handover_init(&out_h, &out_st);
	*len = 0;
	rc = build_record(&out_h, &rec, len);
	if (rc < 0) {
		snprintf(err, errlen, "build hand-over record: %s", strerror(-rc));
		goto restore;
	}
	rc = write_file(upgrade_record_path, rec, *len);
	free(rec);
	if (rc < 0) {
		snprintf(err, errlen, "write %s: %s", upgrade_record_path, strerror(-rc));
		goto restore;
	}
	out_written = true;
	return 0;
restore:
	handover_keep_undo(&out_h);
	handover_free(&out_h);
	changes_handover_cancel();
	return rc;
}

void upgrade_record_undo(void)
{
	if (!out_written)
		return;
	out_written = false;
	unlink(upgrade_record_path);
	handover_keep_undo(&out_h);
	handover_free(&out_h);
	changes_handover_cancel();
}

/* Write the record and execve; returns only on failure (-errno, err set). */
static int hand_over(const char *bin, char *err, size_t errlen)
{
	size_t len;
	int rc;

	rc = upgrade_record_write(&len, err, errlen);
	if (rc < 0)
		return rc;
	char **argv = calloc((size_t)saved_argc + 2, sizeof(char *));
	if (!argv) {
		rc = -ENOMEM;
		snprintf(err, errlen, "exec %s: %s", bin, strerror(ENOMEM));
		goto undo;
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
undo:
	upgrade_record_undo();
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
	    /* A try's commit stops staging (try_quiesce) or finishes
	     * publishing; its diff jobs end by themselves. */
	    (try_jobs_in_flight() && waited < DRAIN_MAX_S) ||
	    (!logexport_idle() && waited < EXPORT_WAIT_S)) {
		ev_timer_set(w, 0.01, 0.);
		ev_timer_start(EV_A_ w);
		return;
	}

	hand_over(u->bin, err, sizeof(err));
	/* Still here: the exec failed and everything is as it was. */
	pcg_quiesce(false);
	try_quiesce(false);
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
	try_quiesce(true);
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
	struct handover h;

	handover_init(&h, record);
	state_handover_restore(&h);
	freeze_handover_restore(&h);
	pcg_handover_restore(&h);
	process_handover_restore(&h);
	session_handover_restore(&h);
	/* After the processes: a running try gets its command back. */
	try_handover_restore(&h);
	fs_handover_restore(&h);
	nfs_handover_restore(&h);
	changes_handover_restore(&h);
	/* A child that ended during the exec is a zombie whose SIGCHLD went
	 * to the old image: have the loop look for it. */
	kill(getpid(), SIGCHLD);

	const struct handover_taken *t = &h.taken;
	snprintf(handover_json, sizeof(handover_json),
		 "{\"failed\":%s,\"procs\":%u,\"procs_failed\":%u,\"retained\":%u,\"retained_failed\":%u,"
		 "\"watchers\":%u,\"watchers_failed\":%u,\"forwards\":%zu}",
		 t->procs_failed || t->retained_failed || t->watchers_failed ? "true" : "false", t->procs,
		 t->procs_failed, t->retained, t->retained_failed, t->watchers, t->watchers_failed,
		 record->n_forwards);
	log_info(LOGGER, "upgrade: took over from %s: %s", record->from_ver ? record->from_ver : "?", handover_json);

	int lfd = server_handover_restore(&h);
	handover_free(&h);
	return lfd;
}

void upgrade_resume_forwards(void)
{
	struct handover h;

	if (!record) {
		if (resumed)
			close_leftovers();
		return;
	}
	handover_init(&h, record);
	portfwd_handover_restore(&h);
	handover_free(&h);
	upgrade__handover_state__free_unpacked(record, NULL);
	record = NULL;
	close_leftovers();
}
