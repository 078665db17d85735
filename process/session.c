/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "process/session.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/child.h"
#include "base/errstr.h"
#include "base/log.h"
#include "base/procstat.h"
#include "base/loop.h"
#include "base/users.h"
#include "base/worker.h"
#include "process/cgroup.h"
#include "process/process.h"
#include "process/spawn.h"

/*
 * The shell's side, one line per command:
 *
 *   [__envd_d=$PWD;] { printf '+TAG\n' >&3; __envd_r "$__envd_s" "$__envd_l";
 *   [K='v' ...] . DIR/c 3>&-; } <IN >DIR/o.N 2>DIR/e.N;
 *   __envd_s=$?; [cd -- "$__envd_d";] printf '=%s TAG\n' "$__envd_s" >&3
 *
 * - `+TAG` on fd 3 says the redirections are open (the shell opens a FIFO
 *   only once envd holds its other end: no wait, no lost input);
 * - TAG is the command's own random tag, at the end of both lines: a
 *   line without it (written by the command itself, which runs in the
 *   shell, or by a background job of an earlier one, or a stale one) is
 *   not this command's and is dropped, so it can never end the command or
 *   move onto the next one, and bytes someone left before it on the same
 *   line do not hide it. The tag is in the line the shell reads from
 *   envd's pipe, not in the command's environment or files;
 * - `. DIR/c` reads the command from a file, so an unbalanced quote is
 *   the command's syntax error (status 2), not a hang of the shell;
 * - `3>&-` hides the status pipe from the command and its children;
 * - __envd_r restores $? and $_ of the previous command (the wrapper's
 *   would otherwise show through; $_ is taken at the end of the file);
 * - temporary assignments before `.` give the command its own envs.
 *
 * The trap on SESSION_TRAP_SIG returns from the sourced command: envd
 * sends it to the shell with a signal for the command, so that the rest of
 * the command line does not go on (and a loop of builtins, which has no
 * process to signal, ends).
 */
#define SESSION_TRAP_SIG 40
#define SESSION_PID_BASE 0x40000000u /* above any pid_max (2^22) */
#define SESSION_KEEP_MAX 64          /* output ends held for background jobs */
#define SESSION_BEFORE_MAX 256
#define SESSION_KILL_GRACE_S 2.0
#define SESSION_TAG_LEN 16           /* hex digits: 64 random bits */
#define SESSION_LINE_MAX 32          /* our longest status line, with room */
#define SESSION_RM_DEPTH 8           /* directories below a session's that are removed */

struct session;

struct scmd {
	struct scmd *next;
	struct session *s;
	struct process *p;
	uint32_t pid;
	unsigned long seq;
	char tag[SESSION_TAG_LEN + 1]; /* on the command's status lines */
	char *text;           /* the file the shell sources */
	char *line;           /* the line written to the shell */
	bool stdin_pipe;
	int keep_in;          /* holds the stdin FIFO open until the shell has it */
	int sig;              /* a signal envd delivered to it; 0: none */
	bool started;         /* `s` seen */
	bool track, synced;   /* trackChanges; the change tracker caught up for it */
	uint64_t cpu0_user, cpu0_sys; /* the shell's own and reaped children's CPU at dispatch (us) */
	pid_t before[SESSION_BEFORE_MAX]; /* the shell's group when it began */
	size_t n_before;
};

struct keepfd {
	struct keepfd *next;
	ev_io w;
};

struct session {
	struct session *next;
	char name[SESSION_NAME_MAX + 1];
	struct user u;
	bool set_ids;
	char *home_cwd;
	char **envp;
	char dir[128];
	unsigned long id;
	unsigned long seq;

	pid_t pid;            /* the shell; 0 while none */
	bool spawning;
	int cmd_fd;           /* we write command lines */
	int st_fd;            /* the shell's status pipe */
	ev_io cmd_w, st_w;
	ev_child child_w;
	ev_timer kill_w;      /* a SIGKILL the trap did not end */
	unsigned long long reap_seq;
	bool st_eof, reaped;
	int wstatus;

	char *wbuf;           /* unwritten part of command lines */
	size_t wlen, woff;
	char nonce[40];
	char rbuf[64];        /* status bytes not yet parsed */
	size_t rlen;
	bool ready;           /* the nonce came: lines now reach our code */

	struct scmd *head, *tail; /* head is running once dispatched */
	unsigned queued;
	bool running;
	struct keepfd *keeps;
	unsigned n_keeps;

	bool closing;         /* CloseSession or idle: no new shell */
	/* With cgroups: the shell's own leaf between commands (it moves into
	   each command's leaf while that runs), and the finished command whose
	   end is not complete yet (its changes): the shell stays in its leaf
	   and the next command waits until then. */
	struct pcg_leaf *cg;
	struct process *settle_p;
	bool syncing;         /* waiting for the change tracker (tracker_synced) */
	/* A command from before a live upgrade runs in the shell: its `s` (if
	   not started) and its status come before any of ours. */
	bool ghost, ghost_started;
	int ghost_in;
	int64_t created_ms, used_ms;
	ev_timer idle_w;
};

static struct session *sessions;
static unsigned n_sessions;
static unsigned long next_id;
static uint32_t next_pid = SESSION_PID_BASE;
static char base_dir[96];
double session_idle_s;

static int64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void session_shell_start(struct session *s);
static bool st_read(struct session *s);
static void ghost_in_close(struct session *s);
static void session_dispatch(struct session *s);

/* ---- text ----------------------------------------------------------------- */

bool session_name_ok(const char *name)
{
	size_t n = name ? strlen(name) : 0;

	if (n == 0 || n > SESSION_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char ch = name[i];

		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
		      ch == '.' || ch == '_' || ch == '-'))
			return false;
	}
	return true;
}

size_t session_quote(char *out, size_t cap, const char *s)
{
	size_t o = 0;

#define PUT(ch)                          \
	do {                             \
		if (o + 1 < cap)         \
			out[o] = (ch);   \
		o++;                     \
	} while (0)
	PUT('\'');
	for (; *s; s++) {
		if (*s == '\'') {
			PUT('\'');
			PUT('\\');
			PUT('\'');
			PUT('\'');
		} else {
			PUT(*s);
		}
	}
	PUT('\'');
#undef PUT
	if (cap)
		out[o < cap ? o : cap - 1] = '\0';
	return o;
}

static bool is_shell(const char *cmd)
{
	static const char *const shells[] = { "/bin/bash", "/usr/bin/bash", "bash", "/bin/sh", "sh" };

	for (size_t i = 0; i < sizeof(shells) / sizeof(shells[0]); i++)
		if (cmd && strcmp(cmd, shells[i]) == 0)
			return true;
	return false;
}

char *session_command_text(const Process__ProcessConfig *c)
{
	size_t need = 1, o = 0;
	char *out;

	if (is_shell(c->cmd)) {
		if (c->n_args == 3 && strcmp(c->args[0], "-l") == 0 && strcmp(c->args[1], "-c") == 0)
			return strdup(c->args[2]);
		if (c->n_args == 2 && strcmp(c->args[0], "-c") == 0)
			return strdup(c->args[1]);
	}
	need += session_quote(NULL, 0, c->cmd ? c->cmd : "");
	for (size_t i = 0; i < c->n_args; i++)
		need += 1 + session_quote(NULL, 0, c->args[i]);
	out = malloc(need);
	if (!out)
		return NULL;
	o += session_quote(out, need, c->cmd ? c->cmd : "");
	for (size_t i = 0; i < c->n_args; i++) {
		out[o++] = ' ';
		o += session_quote(out + o, need - o, c->args[i]);
	}
	out[o] = '\0';
	return out;
}

static bool env_key_ok(const char *k)
{
	if (!k || !*k || (*k >= '0' && *k <= '9'))
		return false;
	for (; *k; k++)
		if (!((*k >= 'a' && *k <= 'z') || (*k >= 'A' && *k <= 'Z') || (*k >= '0' && *k <= '9') ||
		      *k == '_'))
			return false;
	return true;
}

/* ---- files ---------------------------------------------------------------- */

static int base_dir_ready(void)
{
	struct stat st;

	if (base_dir[0])
		return 0;
	if ((mkdir("/run/envd-sessions", 0711) == 0 || errno == EEXIST) &&
	    lstat("/run/envd-sessions", &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid()) {
		snprintf(base_dir, sizeof(base_dir), "/run/envd-sessions");
		return 0;
	}
	/* Without root (no /run): a directory of ours in /tmp, and only ours. */
	snprintf(base_dir, sizeof(base_dir), "/tmp/envd-sessions-%u", (unsigned)geteuid());
	if (mkdir(base_dir, 0711) == 0)
		return 0;
	if (errno == EEXIST) {
		if (lstat(base_dir, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() &&
		    !(st.st_mode & 022))
			return 0;
		errno = EPERM;
	}
	int e = errno;

	base_dir[0] = '\0';
	return -e;
}

/* The session's directory is root's (mode 0710, the user's group: the
   shell may open what is in it but not create, rename or remove names),
   and a directory of an older envd carried over by a live upgrade is the
   user's: either way everything in it is reached without following links
   and checked by descriptor, so a name swapped for a link cannot make envd
   open or chown another file. */
static void own_fd(const struct session *s, int fd, const char *path)
{
	if (geteuid() == 0 && fchown(fd, s->u.uid, s->u.gid) < 0)
		log_info("session", "chown %s: %s", path, go_strerror(errno));
}

static void cmd_path(const struct scmd *c, char kind, char *out, size_t len)
{
	snprintf(out, len, "%s/%c.%lu", c->s->dir, kind, c->seq);
}

/* Remove `name` in dfd and everything below it, never following a link
   (the tree may be a user's); `depth` directories further down at most. */
static void rm_at(int dfd, const char *name, int depth)
{
	int fd;
	DIR *d;
	struct dirent *de;

	if (unlinkat(dfd, name, 0) == 0 || errno != EISDIR)
		return;
	fd = depth > 0 ? openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
	if (fd >= 0 && (d = fdopendir(fd))) {
		while ((de = readdir(d)))
			if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
				rm_at(dirfd(d), de->d_name, depth - 1);
		closedir(d);
	} else if (fd >= 0) {
		close(fd);
	}
	unlinkat(dfd, name, AT_REMOVEDIR);
}

static void rm_tree(const char *dir)
{
	rm_at(AT_FDCWD, dir, SESSION_RM_DEPTH);
}

/* ---- directories left by envd processes that are gone ---------------- */

struct sweep_job {
	size_t n;
	char dirs[][160];
};

static void sweep_work(void *arg)
{
	struct sweep_job *j = arg;

	for (size_t i = 0; i < j->n; i++) {
		rm_tree(j->dirs[i]);
		log_info("session", "removed %s, left by an envd that is gone", j->dirs[i]);
	}
}

static void sweep_done(void *arg)
{
	free(arg);
}

/* Whether envd `pid` may still run: any process with that pid but us (a
   pid reused by another program keeps the leftover until a later start). */
static bool owner_alive(long pid)
{
	if (pid == (long)getpid())
		return true; /* ours: sessions a live upgrade carried */
	if (pid <= 0 || pid > INT32_MAX)
		return false;
	return kill((pid_t)pid, 0) == 0 || errno == EPERM;
}

size_t session_sweep(void)
{
	struct sweep_job *j = NULL;
	size_t cap = 0;
	DIR *d;
	struct dirent *de;

	if (base_dir_ready() < 0 || !(d = opendir(base_dir)))
		return 0;
	while ((de = readdir(d))) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);

		if (de->d_name[0] < '1' || de->d_name[0] > '9' || *end != '.' || owner_alive(pid))
			continue;
		if (!j || j->n == cap) {
			size_t nc = cap ? cap * 2 : 16;
			struct sweep_job *nj = realloc(j, sizeof(*j) + nc * sizeof(j->dirs[0]));

			if (!nj)
				break;
			if (!j)
				nj->n = 0;
			j = nj;
			cap = nc;
		}
		if (snprintf(j->dirs[j->n], sizeof(j->dirs[0]), "%s/%s", base_dir, de->d_name) <
		    (int)sizeof(j->dirs[0]))
			j->n++;
	}
	closedir(d);
	if (!j || !j->n) {
		free(j);
		return 0;
	}
	size_t n = j->n;

	if (worker_run(&(struct worker_req){ .work = sweep_work, .done = sweep_done, .arg = j,
					    .key = worker_path_key(base_dir) }) < 0) {
		free(j);
		return 0;
	}
	return n;
}

/* ---- process group -------------------------------------------------------- */

/* Members of the shell's process group other than the shell, with ppid. */
static size_t group_members(pid_t pgid, pid_t *pids, pid_t *ppids, size_t max)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	size_t n = 0;

	if (!d)
		return 0;
	while ((de = readdir(d)) && n < max) {
		struct procstat st;
		char *rp;
		long pid = strtol(de->d_name, &rp, 10);

		if (*rp || pid <= 0 || pid == pgid || procstat_read((pid_t)pid, &st) < 0 ||
		    st.pgrp != pgid)
			continue;
		pids[n] = (pid_t)pid;
		if (ppids)
			ppids[n] = st.ppid;
		n++;
	}
	closedir(d);
	return n;
}

static bool in_before(const struct scmd *c, pid_t pid)
{
	for (size_t i = 0; i < c->n_before; i++)
		if (c->before[i] == pid)
			return true;
	return false;
}

/* Signal every process in the command's leaf but the shell: exactly what
   the command started, also what left the process group. -1: no leaf (or
   it cannot be read). */
static int signal_leaf(struct scmd *c, int sig)
{
	const struct pcg_leaf *l = c->p ? process_attach_leaf(c->p) : NULL;
	static char buf[65536];
	char *p, *end;
	ssize_t n;
	int hit = 0;

	if (!l)
		return -1;
	n = pcg_read(pcg_leaf_path(l), "cgroup.procs", buf, sizeof(buf));
	if (n < 0)
		return -1;
	for (p = buf; *p; p = end) {
		long pid = strtol(p, &end, 10);

		if (end == p)
			break;
		if (pid > 0 && pid != c->s->pid && kill((pid_t)pid, sig) == 0)
			hit++;
	}
	return hit;
}

/* Signal what the running command started: the members of its leaf, or
   without one the group's members that are not background jobs from
   before it (nor their children). */
static int signal_members(struct scmd *c, int sig)
{
	static pid_t pids[4096], ppids[4096];
	size_t n;
	int hit = signal_leaf(c, sig);

	if (hit >= 0)
		return hit;
	hit = 0;
	n = group_members(c->s->pid, pids, ppids, 4096);

	for (size_t i = 0; i < n; i++) {
		if (in_before(c, pids[i]) || in_before(c, ppids[i]))
			continue;
		if (kill(pids[i], sig) == 0)
			hit++;
	}
	return hit;
}

/*
 * CPU time of the shell itself and of the children it has waited for
 * (/proc/<pid>/stat utime+cutime, stime+cstime), in microseconds: the
 * difference over a command is what the command used (a background job
 * reaped meanwhile counts too). 0 when it cannot be read.
 */
static void shell_cpu(pid_t pid, uint64_t *user, uint64_t *sys)
{
	long hz = sysconf(_SC_CLK_TCK);
	struct procstat st;

	*user = *sys = 0;
	if (hz <= 0 || procstat_read(pid, &st) < 0)
		return;
	*user = (st.utime + (st.cutime > 0 ? (unsigned long long)st.cutime : 0)) * 1000000ull /
		(unsigned long long)hz;
	*sys = (st.stime + (st.cstime > 0 ? (unsigned long long)st.cstime : 0)) * 1000000ull /
	       (unsigned long long)hz;
}

/* ---- the shell's cgroup --------------------------------------------------- */

/* Move the shell into leaf l (a write of its pid to cgroup.procs: the
   loop may, docs/architecture.md). 0 or -errno. */
static int shell_move(struct session *s, const struct pcg_leaf *l)
{
	char v[24];
	int n = snprintf(v, sizeof(v), "%d", (int)s->pid);

	if (s->pid <= 0 || !l)
		return 0;
	if (write(pcg_leaf_procs_fd(l), v, (size_t)n) == n)
		return 0;
	int e = errno;

	log_info("session", "session %s: cannot move shell %d into %s: %s", s->name, (int)s->pid,
		 pcg_leaf_path(l), go_strerror(e));
	return -e;
}

/* Back into the session's own leaf (made now when a live upgrade or a
   failed one left it without). */
static void shell_home(struct session *s)
{
	char why[256];

	if (!pcg_active() || s->pid <= 0)
		return;
	if (!s->cg && !(s->cg = pcg_leaf_new(false, why, sizeof(why)))) {
		log_info("session", "session %s: no cgroup for the shell: %s", s->name, why);
		return;
	}
	shell_move(s, s->cg);
}

/* ---- commands ------------------------------------------------------------- */

static void scmd_free(struct scmd *c)
{
	if (c->keep_in >= 0)
		close(c->keep_in);
	free(c->text);
	free(c->line);
	free(c);
}

static void deliver(struct scmd *c)
{
	struct session *s = c->s;

	/* The trap first: it is pending when the processes die, and ends
	   the rest of the command as the shell gets back to it. */
	if (s->pid > 0)
		kill(s->pid, SESSION_TRAP_SIG);
	signal_members(c, c->sig);
	if (c->sig == SIGKILL && !ev_is_active(&s->kill_w)) {
		ev_timer_set(&s->kill_w, SESSION_KILL_GRACE_S, 0.);
		ev_timer_start(envd_loop, &s->kill_w);
	}
}

static void queue_remove(struct session *s, struct scmd *c)
{
	struct scmd **pp;

	for (pp = &s->head; *pp; pp = &(*pp)->next) {
		if (*pp != c)
			continue;
		*pp = c->next;
		if (s->tail == c) {
			s->tail = s->head;
			while (s->tail && s->tail->next)
				s->tail = s->tail->next;
		}
		s->queued--;
		return;
	}
}

static void unlink_fifos(struct scmd *c)
{
	char path[192];

	cmd_path(c, 'o', path, sizeof(path));
	unlink(path);
	cmd_path(c, 'e', path, sizeof(path));
	unlink(path);
	cmd_path(c, 'i', path, sizeof(path));
	unlink(path);
}

/* The command is over with `wstatus`; s->head was c when it ran. */
static void scmd_finish(struct scmd *c, int wstatus)
{
	struct session *s = c->s;
	bool was_running = s->running && s->head == c;

	queue_remove(s, c);
	s->used_ms = wall_ms();
	if (was_running) {
		s->running = false;
		ev_timer_stop(envd_loop, &s->kill_w);
	}
	unlink_fifos(c);
	if (was_running) {
		char path[192];

		/* The command text may carry a secret: gone once it ran. */
		snprintf(path, sizeof(path), "%s/c", s->dir);
		unlink(path);
	}
	if (c->p)
		process_attach_exit(c->p, wstatus);
	scmd_free(c);
}

static int cmd_signal(void *ud, int sig)
{
	struct scmd *c = ud;
	struct session *s = c->s;

	if (!(s->running && s->head == c)) {
		/* Still waiting: it never runs. */
		scmd_finish(c, sig & 0x7f);
		return 0;
	}
	c->sig = sig;
	if (c->started)
		deliver(c);
	return 0;
}

static void keep_cb(EV_P_ ev_io *w, int revents)
{
	struct keepfd *k = w->data;
	char buf[4096];
	ssize_t n = read(w->fd, buf, sizeof(buf));

	(void)revents;
	if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR)))
		return;
	/* EOF: the last background writer is gone. */
	for (struct session *s = sessions; s; s = s->next) {
		for (struct keepfd **pp = &s->keeps; *pp; pp = &(*pp)->next) {
			if (*pp != k)
				continue;
			*pp = k->next;
			s->n_keeps--;
			ev_io_stop(EV_A_ w);
			close(w->fd);
			free(k);
			return;
		}
	}
}

static void keeps_free(struct session *s)
{
	while (s->keeps) {
		struct keepfd *k = s->keeps;

		s->keeps = k->next;
		ev_io_stop(envd_loop, &k->w);
		close(k->w.fd);
		free(k);
	}
	s->n_keeps = 0;
}

/* Background output after its command ended is read and dropped: a job
   whose reader went away would die of SIGPIPE at its next write. */
static void cmd_keep_fd(void *ud, int fd)
{
	struct scmd *c = ud;
	struct session *s = c->s;
	struct keepfd *k = s->n_keeps < SESSION_KEEP_MAX ? calloc(1, sizeof(*k)) : NULL;

	if (!k) {
		close(fd);
		return;
	}
	ev_io_init(&k->w, keep_cb, fd, EV_READ);
	k->w.data = k;
	ev_io_start(envd_loop, &k->w);
	k->next = s->keeps;
	s->keeps = k;
	s->n_keeps++;
}

static const struct process_attach_ops cmd_ops = {
	.signal = cmd_signal,
	.keep_fd = cmd_keep_fd,
};

/* ---- writing command lines ------------------------------------------------ */

static void write_flush(struct session *s)
{
	while (s->woff < s->wlen) {
		ssize_t n = write(s->cmd_fd, s->wbuf + s->woff, s->wlen - s->woff);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			ev_io_start(envd_loop, &s->cmd_w);
			return;
		}
		if (n < 0) {
			/* The shell is gone; its EOF on the status pipe ends things. */
			s->woff = s->wlen;
			break;
		}
		s->woff += (size_t)n;
	}
	ev_io_stop(envd_loop, &s->cmd_w);
	s->woff = s->wlen = 0;
}

static void cmd_w_cb(EV_P_ ev_io *w, int revents)
{
	(void)revents;
	(void)loop;
	write_flush(w->data);
}

static int write_line(struct session *s, const char *line)
{
	size_t n = strlen(line);
	char *b;

	b = realloc(s->wbuf, s->wlen + n);
	if (!b)
		return -ENOMEM;
	s->wbuf = b;
	memcpy(b + s->wlen, line, n);
	s->wlen += n;
	write_flush(s);
	return 0;
}

/* ---- the shell's end ------------------------------------------------------ */

static void session_free(struct session *s)
{
	for (struct session **pp = &sessions; *pp; pp = &(*pp)->next) {
		if (*pp == s) {
			*pp = s->next;
			n_sessions--;
			break;
		}
	}
	keeps_free(s);
	ev_timer_stop(envd_loop, &s->idle_w);
	if (s->settle_p)
		process_attach_settle_cancel(s->settle_p);
	pcg_leaf_release(s->cg);
	rm_tree(s->dir);
	free(s->home_cwd);
	free(s->envp);
	free(s->wbuf);
	free(s);
}

/* The shell is gone (status pipe at EOF and reaped): the running command
   ends with the shell's status; waiting ones get a new shell. */
static void shell_gone(struct session *s)
{
	struct scmd *c = s->running ? s->head : NULL;

	log_info("session", "session %s of %s: shell %d ended (status 0x%x)", s->name, s->u.name,
		 (int)s->pid, s->wstatus);
	/* Background jobs go with their session. */
	if (s->pid > 0)
		kill(-s->pid, SIGKILL);
	ev_io_stop(envd_loop, &s->st_w);
	ev_io_stop(envd_loop, &s->cmd_w);
	ev_timer_stop(envd_loop, &s->kill_w);
	close(s->st_fd);
	close(s->cmd_fd);
	s->st_fd = s->cmd_fd = -1;
	s->pid = 0;
	s->ready = false;
	s->ghost = false;
	ghost_in_close(s);
	s->rlen = 0;
	s->wlen = s->woff = 0;
	if (c) {
		int ws = s->wstatus;

		/* A command we signalled and that the shell died of: report
		   our signal, as for a started command. */
		if (c->sig && !(WIFEXITED(ws) && WEXITSTATUS(ws) == 0))
			ws = c->sig;
		scmd_finish(c, ws);
	}
	while (s->closing && s->head)
		scmd_finish(s->head, SIGKILL);
	if (s->head) {
		session_shell_start(s);
		return;
	}
	session_free(s);
}

static void child_cb(EV_P_ ev_child *w, int revents)
{
	struct session *s = w->data;

	(void)revents;
	ev_child_stop(EV_A_ w);
	s->reaped = true;
	s->wstatus = w->rstatus;
	/* What the shell wrote is in the pipe; a process the login files left
	   behind may hold it open, so its EOF is not waited for. */
	if (!s->st_eof) {
		st_read(s);
		ev_io_stop(EV_A_ & s->st_w);
		s->st_eof = true;
	}
	shell_gone(s);
}

static void kill_timer_cb(EV_P_ ev_timer *w, int revents)
{
	struct session *s = w->data;

	(void)revents;
	(void)loop;
	/* The command outlived a kill (its trap was replaced, or it waits
	   in the shell itself): the session ends with it. */
	if (s->pid > 0) {
		log_info("session", "session %s: the command did not end on SIGKILL; ending the shell",
			 s->name);
		kill(-s->pid, SIGKILL);
	}
}

static void tracker_synced(void *ud)
{
	unsigned long id = (unsigned long)(uintptr_t)ud;

	for (struct session *s = sessions; s; s = s->next) {
		if (s->id != id || !s->syncing)
			continue;
		s->syncing = false;
		if (s->head)
			s->head->synced = true;
		session_dispatch(s);
		return;
	}
}

static void cmd_settled(void *ud)
{
	struct session *s = ud;

	s->settle_p = NULL;
	shell_home(s);
	session_dispatch(s);
}

/* The running command (or the ghost) ended with `code`. */
static void on_status(struct session *s, int code)
{
	struct scmd *c = s->running ? s->head : NULL;
	int ws;

	if (s->ghost) {
		/* Whatever it says: the ghost's tag (if any) is not known, and
		   nothing follows it but our own commands, whose lines carry
		   their tags. */
		s->ghost = false;
		ghost_in_close(s);
		shell_home(s);
		session_dispatch(s);
		return;
	}
	if (!c)
		return;
	if (c->p && process_attach_leaf(c->p)) {
		/* The shell stays in the command's leaf until the command's end
		   is complete: the change tracker attributes what the shell wrote
		   by the cgroup it is in when it reads the event. */
		s->settle_p = c->p;
		process_attach_on_settled(c->p, cmd_settled, s);
	}
	ws = (code & 0xff) << 8;
	if (c->sig && code != 0)
		ws = c->sig;
	if (c->p) {
		uint64_t u, sy;

		shell_cpu(s->pid, &u, &sy);
		process_attach_usage(c->p, u > c->cpu0_user ? u - c->cpu0_user : 0,
				     sy > c->cpu0_sys ? sy - c->cpu0_sys : 0);
	}
	scmd_finish(c, ws);
	session_dispatch(s);
}

static void ghost_in_close(struct session *s)
{
	if (s->ghost_in >= 0)
		close(s->ghost_in);
	s->ghost_in = -1;
}

static void on_started(struct session *s)
{
	struct scmd *c = s->running ? s->head : NULL;

	if (s->ghost) {
		s->ghost_started = true;
		ghost_in_close(s);
		return;
	}
	if (!c || c->started)
		return;
	c->started = true;
	/* The shell holds the FIFOs now: their names can go, and the stdin
	   FIFO's EOF is up to the command's own writer. */
	unlink_fifos(c);
	if (c->keep_in >= 0) {
		close(c->keep_in);
		c->keep_in = -1;
	}
	if (c->sig)
		deliver(c);
}

/*
 * One line of the status pipe (without its '\n'). Ours end with the
 * running command's tag, after '+' (the FIFOs are open) or "=CODE " (it
 * ended); what comes before that on the line is not ours (someone else's
 * unfinished line), and a line without the tag is dropped. A ghost's
 * lines are taken as they come: its tag, if it had one, is not known.
 */
static void parse_line(struct session *s, const char *line, size_t l)
{
	struct scmd *c = s->running ? s->head : NULL;
	const char *t, *d;

	if (s->ghost) {
		if (l && *line == '+')
			on_started(s);
		else if (l > 1 && *line == '=')
			on_status(s, atoi(line + 1));
		else if (l && *line >= '0' && *line <= '9')
			on_status(s, atoi(line)); /* an older envd's "CODE" */
		return;
	}
	if (!c || l < SESSION_TAG_LEN + 1 || memcmp(line + l - SESSION_TAG_LEN, c->tag, SESSION_TAG_LEN) != 0)
		return;
	t = line + l - SESSION_TAG_LEN;
	if (t[-1] == '+') {
		on_started(s);
		return;
	}
	if (t[-1] != ' ')
		return;
	for (d = t - 1; d > line && d[-1] >= '0' && d[-1] <= '9'; d--)
		;
	if (d < t - 1 && d > line && d[-1] == '=')
		on_status(s, atoi(d));
}

static void parse_status(struct session *s)
{
	size_t i = 0;

	if (!s->ready) {
		/* Anything the login files printed comes before the nonce. */
		char *hit = memmem(s->rbuf, s->rlen, s->nonce, strlen(s->nonce));

		if (!hit) {
			size_t keep = strlen(s->nonce);

			if (s->rlen > keep) {
				memmove(s->rbuf, s->rbuf + s->rlen - keep, keep);
				s->rlen = keep;
			}
			return;
		}
		i = (size_t)(hit - s->rbuf) + strlen(s->nonce);
		s->ready = true;
		memmove(s->rbuf, s->rbuf + i, s->rlen - i);
		s->rlen -= i;
		i = 0;
		session_dispatch(s);
	}
	while (i < s->rlen) {
		char *line = s->rbuf + i, *nl;

		if (*line == '\n') {
			i++;
			continue;
		}
		/* An older envd's command (a ghost): `s` alone said it started. */
		if (*line == 's' && s->ghost) {
			on_started(s);
			i++;
			continue;
		}
		if (!(nl = memchr(line, '\n', s->rlen - i)))
			break;
		i = (size_t)(nl - s->rbuf) + 1;
		parse_line(s, line, (size_t)(nl - line));
	}
	memmove(s->rbuf, s->rbuf + i, s->rlen - i);
	s->rlen -= i;
}

/* Read the status pipe until it is empty; true at EOF. */
static bool st_read(struct session *s)
{
	for (;;) {
		ssize_t n;

		if (s->rlen == sizeof(s->rbuf)) {
			/* A line longer than any of ours: someone else's. Its
			   tail stays, where a line of ours written after it is. */
			memmove(s->rbuf, s->rbuf + s->rlen - SESSION_LINE_MAX, SESSION_LINE_MAX);
			s->rlen = SESSION_LINE_MAX;
		}
		n = read(s->st_fd, s->rbuf + s->rlen, sizeof(s->rbuf) - s->rlen);
		if (n > 0) {
			s->rlen += (size_t)n;
			parse_status(s);
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		return !(n < 0 && errno == EAGAIN);
	}
}

static void st_cb(EV_P_ ev_io *w, int revents)
{
	struct session *s = w->data;

	(void)revents;
	if (!st_read(s))
		return;
	ev_io_stop(EV_A_ w);
	s->st_eof = true;
	if (s->reaped)
		shell_gone(s);
}

/* ---- starting the shell --------------------------------------------------- */

struct shell_job {
	struct session *s;
	struct spawn_req rq;
	char *argv[3];
	int child_fd[3];
	int parent_cmd, parent_st;
	pid_t pid;
	char err[256];
};

static void shell_work(void *arg)
{
	struct shell_job *j = arg;

	j->pid = spawn_start(&j->rq, j->err, sizeof(j->err));
	if (j->pid < 0 && strcmp(j->rq.file, "/bin/bash") == 0 && access("/bin/bash", X_OK) < 0) {
		j->rq.file = "/bin/sh";
		j->argv[0] = "sh";
		j->pid = spawn_start(&j->rq, j->err, sizeof(j->err));
	}
}

static void shell_fail_all(struct session *s, const char *why)
{
	log_info("session", "session %s of %s: cannot start a shell: %s", s->name, s->u.name, why);
	while (s->head)
		scmd_finish(s->head, 127 << 8);
	session_free(s);
}

/* The shell's status pipe, command pipe and exit, watched on the loop
 * (a new shell and one taken over from a live upgrade alike). */
static void session_watch(struct session *s)
{
	ev_io_init(&s->st_w, st_cb, s->st_fd, EV_READ);
	s->st_w.data = s;
	ev_io_start(envd_loop, &s->st_w);
	ev_io_init(&s->cmd_w, cmd_w_cb, s->cmd_fd, EV_WRITE);
	s->cmd_w.data = s;
	ev_child_init(&s->child_w, child_cb, s->pid, 0);
	s->child_w.data = s;
	ev_child_start(envd_loop, &s->child_w);
}

static void shell_done(void *arg)
{
	struct shell_job *j = arg;
	struct session *s = j->s;
	int status;
	char init[512];

	for (int i = 0; i < 3; i++)
		if (j->child_fd[i] >= 0)
			close(j->child_fd[i]);
	s->spawning = false;
	if (j->pid < 0) {
		close(j->parent_cmd);
		close(j->parent_st);
		child_exits_release();
		shell_fail_all(s, j->err);
		free(j);
		return;
	}
	s->pid = j->pid;
	s->cmd_fd = j->parent_cmd;
	s->st_fd = j->parent_st;
	s->st_eof = s->reaped = false;
	session_watch(s);
	if (child_exit_take(s->pid, s->reap_seq, &status)) {
		s->child_w.rpid = s->pid;
		s->child_w.rstatus = status;
		ev_feed_event(envd_loop, &s->child_w, EV_CHILD);
	}
	child_exits_release();
	free(j);
	log_info("session", "session %s of %s: shell %d started", s->name, s->u.name, (int)s->pid);
	if (s->closing) {
		kill(-s->pid, SIGKILL);
		kill(s->pid, SIGKILL);
		return;
	}

	/* fd 3 is the status pipe from now on; the shell's own output goes
	   nowhere. The nonce marks where the login files' output ends.
	   Aliases work as in a terminal's shell (bash expands them only
	   when interactive unless told; sh has no shopt). */
	snprintf(init, sizeof(init),
		 "exec 3>&1 >/dev/null; shopt -s expand_aliases 2>/dev/null; "
		 "__envd_r() { return \"$1\"; }; __envd_s=0 __envd_l=; "
		 "trap 'return 130' %d; printf '\\n%%s\\n' %s >&3\n",
		 SESSION_TRAP_SIG, s->nonce);
	write_line(s, init);
}

static void make_tag(struct scmd *c)
{
	unsigned char r[SESSION_TAG_LEN / 2];

	if (getrandom(r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r)) {
		/* No entropy yet: a guessable tag still binds the line to its
		   command (an old line never matches a new command's seq). */
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		for (size_t i = 0; i < sizeof(r); i++)
			r[i] = (unsigned char)((ts.tv_nsec >> (i % 4 * 8)) ^ (c->seq >> (i % 8 * 8)) ^ (i * 131));
	}
	for (size_t i = 0; i < sizeof(r); i++)
		snprintf(c->tag + 2 * i, 3, "%02x", r[i]);
}

static void make_nonce(struct session *s)
{
	unsigned char r[12];

	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
		memset(r, (int)s->id, sizeof(r));
	strcpy(s->nonce, "envd-");
	for (size_t i = 0; i < sizeof(r); i++)
		snprintf(s->nonce + 5 + 2 * i, 3, "%02x", r[i]);
}

static void session_shell_start(struct session *s)
{
	struct shell_job *j = calloc(1, sizeof(*j));
	int cmdp[2] = { -1, -1 }, stp[2] = { -1, -1 };
	int rc;

	if (!j)
		goto fail;
	j->s = s;
	j->child_fd[0] = j->child_fd[1] = j->child_fd[2] = -1;
	if (s->cg && pcg_parent_frozen(false)) {
		free(j);
		shell_fail_all(s, "the workload is frozen for a snapshot");
		return;
	}
	if (pipe2(cmdp, O_CLOEXEC) < 0 || pipe2(stp, O_CLOEXEC) < 0)
		goto fail;
	j->child_fd[0] = cmdp[0];
	j->child_fd[1] = stp[1];
	j->child_fd[2] = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (j->child_fd[2] < 0)
		goto fail;
	j->parent_cmd = cmdp[1];
	j->parent_st = stp[0];
	fcntl(cmdp[1], F_SETFL, O_NONBLOCK);
	fcntl(stp[0], F_SETFL, O_NONBLOCK);
	make_nonce(s);
	j->argv[0] = "bash";
	j->argv[1] = "-l";
	j->argv[2] = NULL;
	j->rq.file = "/bin/bash";
	j->rq.argv = j->argv;
	j->rq.argc = 2;
	j->rq.envp = s->envp;
	j->rq.cwd = s->home_cwd;
	j->rq.set_ids = s->set_ids;
	j->rq.uid = s->u.uid;
	j->rq.gid = s->u.gid;
	j->rq.groups = s->u.groups;
	j->rq.n_groups = s->u.n_groups;
	j->rq.fd_in = j->child_fd[0];
	j->rq.fd_out = j->child_fd[1];
	j->rq.fd_err = j->child_fd[2];
	j->rq.cgroup_dir_fd = -1;
	if (s->cg) {
		j->rq.join_cgroup = true;
		j->rq.cgroup_procs_fd = pcg_leaf_procs_fd(s->cg);
		j->rq.cgroup_dir_fd = pcg_leaf_dir_fd(s->cg);
	}
	s->spawning = true;
	s->reap_seq = child_exits_hold();
	rc = worker_run(&(struct worker_req){ .work = shell_work, .done = shell_done, .arg = j,
					      .key = worker_path_key(s->home_cwd) | WORKER_KEY_SPAWN });
	if (rc == 0)
		return;
	child_exits_release();
	s->spawning = false;
fail:
	for (int i = 0; i < 2; i++) {
		if (cmdp[i] >= 0)
			close(cmdp[i]);
		if (stp[i] >= 0)
			close(stp[i]);
	}
	if (j && j->child_fd[2] >= 0)
		close(j->child_fd[2]);
	free(j);
	shell_fail_all(s, "out of resources");
}

/* ---- running -------------------------------------------------------------- */

static int write_file(const struct session *s, const char *path, const char *text)
{
	int fd;
	size_t n = strlen(text), o = 0;

	/* A fresh file: never one the user put there under that name. */
	unlink(path);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	own_fd(s, fd, path);
	while (o < n) {
		ssize_t w = write(fd, text + o, n - o);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			int e = errno;

			close(fd);
			return -e;
		}
		o += (size_t)w;
	}
	close(fd);
	return 0;
}

static void session_dispatch(struct session *s)
{
	struct scmd *c;
	char path[192];
	static pid_t pids[SESSION_BEFORE_MAX];

	if (!s->head && !s->running && !s->ghost && session_idle_s > 0 && !s->closing) {
		ev_timer_stop(envd_loop, &s->idle_w);
		ev_timer_set(&s->idle_w, session_idle_s, 0.);
		ev_timer_start(envd_loop, &s->idle_w);
	}
	if (!s->ready || s->running || s->ghost || s->settle_p || s->syncing || !s->head || s->pid <= 0)
		return;
	c = s->head;
	/* Before the shell moves into a tracked command's leaf, what it did
	   for earlier commands is attributed (by the cgroup it was in), so
	   that none of it is taken for this command's. */
	if (c->track && !c->synced && c->p && process_attach_leaf(c->p) && process_tracker &&
	    process_tracker->sync) {
		s->syncing = true;
		if (process_tracker->sync(tracker_synced, (void *)(uintptr_t)s->id) == 0)
			return;
		s->syncing = false;
	}
	snprintf(path, sizeof(path), "%s/c", s->dir);
	if (write_file(s, path, c->text) < 0) {
		log_info("session", "session %s: cannot write %s: %s", s->name, path, go_strerror(errno));
		scmd_finish(c, 127 << 8);
		session_dispatch(s);
		return;
	}
	/* What is in the group now are background jobs, not this command. */
	c->n_before = group_members(s->pid, pids, NULL, SESSION_BEFORE_MAX);
	memcpy(c->before, pids, c->n_before * sizeof(pid_t));
	s->running = true;
	shell_cpu(s->pid, &c->cpu0_user, &c->cpu0_sys);
	/* The shell is idle, reading its next line: in the command's leaf
	   from here on, everything it forks for the command is there too. */
	if (c->p && process_attach_leaf(c->p))
		shell_move(s, process_attach_leaf(c->p));
	if (c->p)
		process_attach_running(c->p);
	if (write_line(s, c->line) < 0) {
		s->running = false;
		scmd_finish(c, 127 << 8);
	}
}

static char *build_line(const struct session *s, const struct scmd *c, const struct session_req *r)
{
	char in[192], out[192], err[192];
	size_t need = 512, o = 0;
	char *line;

	for (size_t i = 0; i < r->n_envs; i++)
		need += strlen(r->envs[i].key) + 2 + session_quote(NULL, 0, r->envs[i].value);
	line = malloc(need);
	if (!line)
		return NULL;
	if (c->stdin_pipe)
		cmd_path(c, 'i', in, sizeof(in));
	else
		snprintf(in, sizeof(in), "/dev/null");
	cmd_path(c, 'o', out, sizeof(out));
	cmd_path(c, 'e', err, sizeof(err));
	o += (size_t)snprintf(line + o, need - o, "%s{ printf '+%s\\n' >&3; __envd_r \"$__envd_s\" \"$__envd_l\"; ",
			      r->cwd ? "__envd_d=$PWD; " : "", c->tag);
	for (size_t i = 0; i < r->n_envs; i++) {
		o += (size_t)snprintf(line + o, need - o, "%s=", r->envs[i].key);
		o += session_quote(line + o, need - o, r->envs[i].value);
		line[o++] = ' ';
	}
	snprintf(line + o, need - o,
		 ". %s/c 3>&-; } <%s >%s 2>%s; __envd_s=$?; %sprintf '=%%s %s\\n' \"$__envd_s\" >&3\n",
		 s->dir, in, out, err, r->cwd ? "cd -- \"$__envd_d\" 2>/dev/null; " : "", c->tag);
	return line;
}

static char *build_text(const struct session_req *r)
{
	char *cmd = session_command_text(r->config), *t;
	size_t n, o = 0;
	/* $_ for the next command: after `.` the shell sets it to the file's
	   name, so it is taken inside (not after a here-document that the
	   text may leave open: the trailer would become its body). */
	bool trailer = cmd && !strstr(cmd, "<<");

	if (!cmd)
		return NULL;
	n = strlen(cmd) + (r->cwd ? session_quote(NULL, 0, r->cwd) : 0) + 128;
	t = malloc(n);
	if (t) {
		if (r->cwd) {
			o += (size_t)snprintf(t, n, "cd -- ");
			o += session_quote(t + o, n - o, r->cwd);
			o += (size_t)snprintf(t + o, n - o, " || return\n");
		}
		snprintf(t + o, n - o, "%s\n%s", cmd,
			 trailer ? "\n__envd_s=$? __envd_l=$_; return \"$__envd_s\"\n" : "");
	}
	free(cmd);
	return t;
}

static struct session *session_find(const char *name, uid_t uid)
{
	for (struct session *s = sessions; s; s = s->next)
		if (s->u.uid == uid && !s->closing && strcmp(s->name, name) == 0)
			return s;
	return NULL;
}

/* End the shell and its jobs; commands still waiting end as killed. */
static void session_end(struct session *s)
{
	s->closing = true;
	ev_timer_stop(envd_loop, &s->idle_w);
	/* Their ends say the session was closed, not just "killed". */
	for (struct scmd *c = s->head; c; c = c->next)
		if (c->p)
			process_kill_note(c->p, SIGKILL, ENDREASON_BY_SESSION, s->name);
	for (struct scmd *c = s->head; c;) {
		struct scmd *next = c->next;

		if (!(s->running && s->head == c))
			scmd_finish(c, SIGKILL);
		c = next;
	}
	if (s->pid > 0) {
		kill(-s->pid, SIGKILL);
		kill(s->pid, SIGKILL);
	} else if (!s->spawning) {
		session_free(s);
	}
}

static void idle_cb(EV_P_ ev_timer *w, int revents)
{
	struct session *s = w->data;

	(void)loop;
	(void)revents;
	if (s->head || s->running)
		return;
	log_info("session", "session %s of %s: idle for %g s, closing", s->name, s->u.name,
		 session_idle_s);
	session_end(s);
}

/* A shell born in a frozen leaf would hold the spawning worker until the
   thaw: a new shell waits for it, as a plain Start does (unavailable). */
static bool frozen(char *err, size_t errlen)
{
	if (!pcg_active() || !pcg_parent_frozen(false))
		return false;
	snprintf(err, errlen, "error starting session: the workload is frozen for a snapshot; try "
			      "again once it is thawed");
	return true;
}

static struct session *session_new(const struct session_req *r, char *err, size_t errlen)
{
	struct session *s;
	int rc;

	if (n_sessions >= SESSION_MAX) {
		snprintf(err, errlen, "error starting process: %u sessions are open already", SESSION_MAX);
		return NULL;
	}
	rc = base_dir_ready();
	s = rc == 0 ? calloc(1, sizeof(*s)) : NULL;
	if (!s) {
		snprintf(err, errlen, "error starting session: %s", go_strerror(rc ? -rc : ENOMEM));
		return NULL;
	}
	snprintf(s->name, sizeof(s->name), "%s", r->name);
	s->u = *r->user;
	s->set_ids = r->set_ids;
	s->id = ++next_id;
	s->st_fd = s->cmd_fd = -1;
	s->ghost_in = -1;
	s->home_cwd = strdup(r->home_cwd);
	snprintf(s->dir, sizeof(s->dir), "%s/%d.%lu", base_dir, (int)getpid(), s->id);
	if (!s->home_cwd || mkdir(s->dir, 0710) < 0) {
		snprintf(err, errlen, "error starting session: %s: %s", s->dir, go_strerror(errno));
		free(s->home_cwd);
		free(s);
		return NULL;
	}
	{
		int dfd = open(s->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

		/* Ours, the user's group may enter (the shell opens the FIFOs
		   and reads the command file) but not change a name. */
		if (dfd >= 0) {
			if (geteuid() == 0 && (fchown(dfd, 0, s->u.gid) < 0 || fchmod(dfd, 0710) < 0))
				log_info("session", "chown %s: %s", s->dir, go_strerror(errno));
			close(dfd);
		}
	}
	if (pcg_active()) {
		char why[256];

		s->cg = pcg_leaf_new(false, why, sizeof(why));
		if (!s->cg) {
			snprintf(err, errlen, "error starting session: cannot create its cgroup: %s", why);
			rm_tree(s->dir);
			free(s->home_cwd);
			free(s);
			return NULL;
		}
	}
	ev_timer_init(&s->kill_w, kill_timer_cb, SESSION_KILL_GRACE_S, 0.);
	s->kill_w.data = s;
	ev_timer_init(&s->idle_w, idle_cb, 1., 0.);
	s->idle_w.data = s;
	s->created_ms = s->used_ms = wall_ms();
	s->next = sessions;
	sessions = s;
	n_sessions++;
	return s;
}

/* The command's FIFOs, opened by us first: the shell's opens then return
   at once. fds = {stdin (read-write) or -1, stdout, stderr}. */
static int open_fifos(struct scmd *c, int fds[3])
{
	static const char kinds[3] = { 'i', 'o', 'e' };
	char path[192];

	fds[0] = fds[1] = fds[2] = -1;
	for (int i = 0; i < 3; i++) {
		if (i == 0 && !c->stdin_pipe)
			continue;
		cmd_path(c, kinds[i], path, sizeof(path));
		struct stat st;

		if (mkfifo(path, 0600) < 0)
			goto fail;
		fds[i] = open(path, (i == 0 ? O_RDWR : O_RDONLY) | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
		if (fds[i] < 0)
			goto fail;
		/* The FIFO mkfifo made: ours, with no other name. A FIFO
		   linked in under the name (a user's, or root's from /run in
		   a directory of the user's) is not read from nor chowned. */
		if (fstat(fds[i], &st) < 0 || !S_ISFIFO(st.st_mode) || st.st_uid != geteuid() ||
		    st.st_nlink != 1) {
			log_msg("warn", "session", "session %s: %s is not the FIFO envd made; command refused",
				c->s->name, path);
			errno = EPERM;
			goto fail;
		}
		own_fd(c->s, fds[i], path);
	}
	if (c->stdin_pipe) {
		c->keep_in = fcntl(fds[0], F_DUPFD_CLOEXEC, 0);
		if (c->keep_in < 0)
			goto fail;
	}
	return 0;
fail:;
	int e = errno;

	for (int i = 0; i < 3; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	unlink_fifos(c);
	return -e;
}

enum rpc_code session_run(const struct session_req *r, struct rpc_call *call, char *err,
			  size_t errlen)
{
	struct session *s;
	struct scmd *c;
	struct process_spec spec = { 0 };
	int fds[3], rc;
	enum rpc_code code;
	bool fresh = false;

	if (!session_name_ok(r->name)) {
		free(r->shell_envp);
		snprintf(err, errlen, "invalid session name '%s': 1 to %d of A-Z a-z 0-9 . _ -",
			 r->name ? r->name : "", SESSION_NAME_MAX);
		return RPC_INVALID_ARGUMENT;
	}
	for (size_t i = 0; i < r->n_envs; i++) {
		if (!env_key_ok(r->envs[i].key)) {
			free(r->shell_envp);
			snprintf(err, errlen, "invalid env name '%s' for a session command",
				 r->envs[i].key);
			return RPC_INVALID_ARGUMENT;
		}
	}
	s = session_find(r->name, r->user->uid);
	if (s && s->queued >= SESSION_QUEUE_MAX) {
		free(r->shell_envp);
		snprintf(err, errlen, "session %s: %d commands are waiting already", r->name,
			 SESSION_QUEUE_MAX);
		return RPC_RESOURCE_EXHAUSTED;
	}
	if (!s && frozen(err, errlen)) {
		free(r->shell_envp);
		return RPC_UNAVAILABLE;
	}
	if (!s) {
		s = session_new(r, err, errlen);
		if (!s) {
			free(r->shell_envp);
			return RPC_RESOURCE_EXHAUSTED;
		}
		s->envp = r->shell_envp;
		fresh = true;
	} else {
		free(r->shell_envp);
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		goto nomem;
	c->s = s;
	c->keep_in = -1;
	c->seq = ++s->seq;
	make_tag(c);
	c->stdin_pipe = r->stdin_pipe;
	c->track = r->track_changes;
	c->text = build_text(r);
	c->line = c->text ? build_line(s, c, r) : NULL;
	if (!c->line)
		goto nomem;
	rc = open_fifos(c, fds);
	if (rc < 0) {
		snprintf(err, errlen, "error starting session command: %s", go_strerror(-rc));
		code = RPC_INTERNAL;
		goto fail;
	}
	c->pid = next_pid++;
	if (next_pid < SESSION_PID_BASE)
		next_pid = SESSION_PID_BASE;
	spec.config = r->config;
	spec.tag = r->tag;
	spec.timeout_ms = r->timeout_ms;
	spec.track_changes = r->track_changes;
	spec.cwd = r->cwd ? r->cwd : s->home_cwd;
	spec.idem_key = r->idem_key;
	spec.idem_uid = r->idem_uid;
	spec.idem_fp = r->idem_fp;
	spec.budget = r->budget;
	code = process_attach(&spec, c->pid, fds, &cmd_ops, c, call, &c->p, err, errlen);
	if (code != RPC_OK) {
		for (int i = 0; i < 3; i++)
			if (fds[i] >= 0)
				close(fds[i]);
		unlink_fifos(c);
		goto fail;
	}
	/* A memory limit OOM-kills the largest process of the leaf, not the
	   whole leaf (memory.oom.group, set for a plain Start): the shell is in
	   it while the command runs, and the session must outlive its command. */
	if (process_attach_leaf(c->p) && r->config->limits && r->config->limits->memory_max_bytes)
		pcg_write(pcg_leaf_path(process_attach_leaf(c->p)), "memory.oom.group", "0");
	if (s->tail)
		s->tail->next = c;
	else
		s->head = c;
	s->tail = c;
	s->queued++;
	s->used_ms = wall_ms();
	ev_timer_stop(envd_loop, &s->idle_w);
	if (fresh)
		session_shell_start(s);
	else
		session_dispatch(s);
	return RPC_OK;

nomem:
	snprintf(err, errlen, "error starting session command: %s", go_strerror(ENOMEM));
	code = RPC_INTERNAL;
fail:
	if (c)
		scmd_free(c);
	if (fresh && !s->head)
		session_free(s);
	return code;
}

/* ---- management ----------------------------------------------------------- */

static void fill_info(const struct session *s, struct session_info *in)
{
	char path[64];
	ssize_t n;

	memset(in, 0, sizeof(*in));
	in->name = s->name;
	in->user = s->u.name;
	in->shell_pid = s->pid;
	in->running_pid = s->running && s->head ? s->head->pid : 0;
	in->queued = s->queued - (in->running_pid ? 1 : 0);
	in->created_ms = s->created_ms;
	in->used_ms = s->used_ms;
	if (s->pid > 0) {
		snprintf(path, sizeof(path), "/proc/%d/cwd", (int)s->pid);
		n = readlink(path, in->cwd, sizeof(in->cwd) - 1);
		in->cwd[n > 0 ? n : 0] = '\0';
	}
	if (!in->cwd[0])
		snprintf(in->cwd, sizeof(in->cwd), "%s", s->home_cwd);
}

enum rpc_code session_create(const struct session_req *r, struct session_info *info, char *err,
			     size_t errlen)
{
	struct session *s;

	if (!session_name_ok(r->name)) {
		free(r->shell_envp);
		snprintf(err, errlen, "invalid session name '%s': 1 to %d of A-Z a-z 0-9 . _ -",
			 r->name ? r->name : "", SESSION_NAME_MAX);
		return RPC_INVALID_ARGUMENT;
	}
	if (session_find(r->name, r->user->uid)) {
		free(r->shell_envp);
		snprintf(err, errlen, "session %s of %s exists already", r->name, r->user->name);
		return RPC_ALREADY_EXISTS;
	}
	if (frozen(err, errlen)) {
		free(r->shell_envp);
		return RPC_UNAVAILABLE;
	}
	s = session_new(r, err, errlen);
	if (!s) {
		free(r->shell_envp);
		return RPC_RESOURCE_EXHAUSTED;
	}
	s->envp = r->shell_envp;
	fill_info(s, info);
	session_shell_start(s);
	return RPC_OK;
}

void session_each(void (*fn)(void *ud, const struct session_info *in), void *ud)
{
	static struct session_info in;

	for (struct session *s = sessions; s; s = s->next) {
		if (s->closing)
			continue;
		fill_info(s, &in);
		fn(ud, &in);
	}
}

size_t session_count(void)
{
	return n_sessions;
}

enum rpc_code session_close(const char *name, uid_t uid, char *err, size_t errlen)
{
	struct session *s = name ? session_find(name, uid) : NULL;

	if (!s || s->closing) {
		snprintf(err, errlen, "session %s not found", name ? name : "");
		return RPC_NOT_FOUND;
	}
	session_end(s);
	return RPC_OK;
}

void session_shutdown(void)
{
	for (struct session *s = sessions; s; s = s->next) {
		/* An idle shell would end at the EOF of its command pipe once
		   envd is gone, leaving its leaf behind: it ends now, so that the
		   leaf is empty and removed with envd's others. A shell running a
		   command is in that command's leaf, which stays with the command
		   as for any process still running when envd stops. */
		if (s->cg && s->pid > 0 && !s->running && !s->ghost && !s->settle_p) {
			struct timespec ms = { 0, 1000000 };

			kill(s->pid, SIGKILL);
			for (int i = 0; i < 1000 && waitpid(s->pid, NULL, WNOHANG) == 0; i++)
				nanosleep(&ms, NULL);
		}
		pcg_leaf_release(s->cg);
		s->cg = NULL;
	}
}

/* ---- live upgrade --------------------------------------------------------- */

void session_snapshot_each(void (*fn)(void *ud, const struct session_snapshot *s), void *ud)
{
	static int keep[SESSION_KEEP_MAX + 2];

	for (struct session *s = sessions; s; s = s->next) {
		struct session_snapshot sn = { 0 };
		struct scmd *c = s->running ? s->head : NULL;
		size_t n = 0, ne = 0;

		if (s->closing || s->pid <= 0)
			continue;
		while (s->envp && s->envp[ne])
			ne++;
		for (struct keepfd *k = s->keeps; k && n < SESSION_KEEP_MAX; k = k->next)
			keep[n++] = k->w.fd;
		sn.busy_in_fd = -1;
		/* The leaves go to the cgroup module's list in the record: the
		   next image removes them once the shell has left them. */
		pcg_leaf_release(s->cg);
		s->cg = NULL;
		if (c && c->p) {
			int fds[3];

			process_attach_leaf_drop(c->p);
			process_attach_fds(c->p, fds);
			if (fds[1] >= 0)
				keep[n++] = fds[1];
			if (fds[2] >= 0)
				keep[n++] = fds[2];
			sn.busy = true;
			sn.busy_started = c->started;
			sn.busy_in_fd = c->started ? -1 : c->keep_in;
		} else if (s->ghost) {
			sn.busy = true;
			sn.busy_started = s->ghost_started;
			sn.busy_in_fd = s->ghost_in;
		}
		sn.name = s->name;
		sn.user = s->u.name;
		sn.uid = s->u.uid;
		sn.set_ids = s->set_ids;
		sn.home_cwd = s->home_cwd;
		sn.envp = s->envp;
		sn.n_envp = ne;
		sn.dir = s->dir;
		sn.nonce = s->nonce;
		sn.id = s->id;
		sn.seq = s->seq;
		sn.pid = s->pid;
		sn.cmd_fd = s->cmd_fd;
		sn.st_fd = s->st_fd;
		sn.ready = s->ready;
		sn.created_ms = s->created_ms;
		sn.used_ms = s->used_ms;
		sn.keep_fds = keep;
		sn.n_keep_fds = n;
		fn(ud, &sn);
	}
}

int session_adopt(const struct session_snapshot *sn)
{
	struct session *s;
	char err[256];
	const char *slash;

	if (!session_name_ok(sn->name) || sn->pid <= 0 || sn->cmd_fd < 0 || sn->st_fd < 0 ||
	    n_sessions >= SESSION_MAX)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	snprintf(s->name, sizeof(s->name), "%s", sn->name);
	if (user_lookup(sn->user, &s->u, err, sizeof(err)) < 0 || s->u.uid != sn->uid) {
		snprintf(s->u.name, sizeof(s->u.name), "%s", sn->user);
		s->u.uid = sn->uid;
	}
	s->set_ids = sn->set_ids;
	s->home_cwd = strdup(sn->home_cwd ? sn->home_cwd : "/");
	s->envp = calloc(sn->n_envp + 1, sizeof(char *));
	{
		/* One block, as procenv_build makes it: the pointers, then the strings. */
		size_t bytes = (sn->n_envp + 1) * sizeof(char *);

		for (size_t i = 0; i < sn->n_envp; i++)
			bytes += strlen(sn->envp[i]) + 1;
		free(s->envp);
		s->envp = malloc(bytes);
		if (s->envp) {
			char *o = (char *)(s->envp + sn->n_envp + 1);

			for (size_t i = 0; i < sn->n_envp; i++) {
				size_t l = strlen(sn->envp[i]) + 1;

				memcpy(o, sn->envp[i], l);
				s->envp[i] = o;
				o += l;
			}
			s->envp[sn->n_envp] = NULL;
		}
	}
	if (!s->home_cwd || !s->envp) {
		free(s->home_cwd);
		free(s->envp);
		free(s);
		return -ENOMEM;
	}
	snprintf(s->dir, sizeof(s->dir), "%s", sn->dir ? sn->dir : "");
	slash = strrchr(s->dir, '/');
	if (!base_dir[0] && slash && slash > s->dir)
		snprintf(base_dir, sizeof(base_dir), "%.*s", (int)(slash - s->dir), s->dir);
	snprintf(s->nonce, sizeof(s->nonce), "%s", sn->nonce ? sn->nonce : "");
	s->id = sn->id;
	if (next_id < sn->id)
		next_id = sn->id;
	s->seq = sn->seq;
	s->pid = sn->pid;
	s->cmd_fd = sn->cmd_fd;
	s->st_fd = sn->st_fd;
	s->ready = sn->ready;
	s->created_ms = sn->created_ms;
	s->used_ms = sn->used_ms;
	s->ghost = sn->busy;
	s->ghost_started = sn->busy_started;
	s->ghost_in = sn->busy_in_fd;
	fcntl(s->cmd_fd, F_SETFD, FD_CLOEXEC);
	fcntl(s->st_fd, F_SETFD, FD_CLOEXEC);
	if (s->ghost_in >= 0)
		fcntl(s->ghost_in, F_SETFD, FD_CLOEXEC);
	ev_timer_init(&s->kill_w, kill_timer_cb, SESSION_KILL_GRACE_S, 0.);
	s->kill_w.data = s;
	ev_timer_init(&s->idle_w, idle_cb, 1., 0.);
	s->idle_w.data = s;
	session_watch(s);
	s->next = sessions;
	sessions = s;
	n_sessions++;
	for (size_t i = 0; i < sn->n_keep_fds; i++) {
		struct keepfd *k = calloc(1, sizeof(*k));

		if (!k) {
			close(sn->keep_fds[i]);
			continue;
		}
		fcntl(sn->keep_fds[i], F_SETFD, FD_CLOEXEC);
		fcntl(sn->keep_fds[i], F_SETFL, O_NONBLOCK);
		ev_io_init(&k->w, keep_cb, sn->keep_fds[i], EV_READ);
		k->w.data = k;
		ev_io_start(envd_loop, &k->w);
		k->next = s->keeps;
		s->keeps = k;
		s->n_keeps++;
	}
	log_info("session", "session %s of %s: shell %d taken over%s", s->name, s->u.name, (int)s->pid,
		 s->ghost ? " (a command still running)" : "");
	session_dispatch(s);
	return 0;
}
