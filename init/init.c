/* SPDX-License-Identifier: Apache-2.0 */
/*
 * init.c - a small PID 1 for sandbox images without systemd.
 *
 *   init [--grace SECONDS] [--no-mount] [--hostname NAME] [-- COMMAND [ARG...]]
 *
 * It mounts the API filesystems that are missing (cgroup2 included), sets
 * the hostname, and supervises one command (default /usr/bin/envd): the
 * command is restarted with back-off when it dies, and its children
 * survive that, because orphans are re-parented to init (PID 1, or a child
 * subreaper when init is not PID 1), which reaps every zombie. The command
 * runs with the OOM protection and priority its systemd unit would give. SIGTERM, SIGINT and SIGHUP are
 * forwarded to the command. SIGTERM and SIGPWR shut down in order: TERM to
 * everything, a grace period, KILL, sync, unmount what init mounted. init
 * then exits with the command's status (128+N when a signal killed it) or,
 * as the real PID 1 of a machine, powers off.
 *
 * It keeps the command's file descriptor store, as systemd would: the
 * command gets NOTIFY_SOCKET, may store descriptors with FDSTORE=1 (and
 * drop them with FDSTOREREMOVE=1), and gets them back from fd 3 with
 * LISTEN_FDS / LISTEN_FDNAMES / LISTEN_PID when it is started again. The
 * exit status and usage of an orphan whose pidfd the command stored go
 * into a shared ring (base/exitrec.h) that is part of the store, so that
 * the next envd learns how the commands that ended while it was down
 * ended (docs/crash.md).
 *
 * The sandbox's users are not to be trusted (docs/security.md): the
 * notify socket is a path in a directory only init's user can enter, and
 * init never waits on a descriptor it was sent (what it does not keep is
 * closed by a throw-away child).
 *
 * Everything is driven by one signalfd, one timerfd and the notify
 * socket; fatal exits happen only before the loop starts. Unknown arguments are ignored, because the
 * kernel hands boot parameters it does not know to init.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/random.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/reboot.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/exitrec.h"
#include "base/sdnotify.h"

extern char **environ;

#define DEFAULT_CMD "/usr/bin/envd"
#define DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
/* Restart back-off: 100 ms doubling to 5 s; a run of 10 s resets it, so a
 * crash loop costs little CPU and a one-off crash restarts at once. */
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 5000
#define STABLE_MS 10000
#define MAX_MOUNTS 16
/* Descriptors the store keeps by default: a few per command of envd. */
#define FDSTORE_MAX_DEFAULT 4096
/* Exits the ring remembers. */
#define EXITS_CAP 1024
/* Where the notify socket lives: a directory only init's user can enter. */
#define NOTIFY_DIR "/run/envd-init"
/* Throw-away children closing descriptors at once, and descriptors
 * waiting for one. */
#define CLOSERS_MAX 8
#define CLOSING_MAX (4 * SDNOTIFY_FDS_MAX)

enum state { RUNNING, WAIT_RESTART, STOPPING, KILLING };

static struct {
	enum state state;
	char **cmd;
	pid_t child;          /* the supervised command, 0 when not running */
	int child_status;     /* its last wait status */
	bool child_exited;    /* child_status is valid */
	long long started_ms; /* when the command last started */
	int backoff_ms;
	double grace_s;
	bool pid1;
	int sfd, tfd;
	char *mounted[MAX_MOUNTS];
	int n_mounted;
	/* the file descriptor store */
	int nfd;                     /* notify socket, -1 when the store is off */
	char notify_addr[108];       /* its path, NOTIFY_SOCKET's value */
	struct sdnotify_store store;
	size_t fdstore_max;
	bool said_foreign;
	/* descriptors on their way out (closer_put) */
	pid_t closers[CLOSERS_MAX];
	int closing[CLOSING_MAX];
	size_t n_closing;
	bool said_closing;
	/* exit statuses of the processes the command watches */
	void *exits;
	struct rlimit nofile;        /* the limit we were started with */
} in = {.grace_s = 5.0, .sfd = -1, .tfd = -1, .nfd = -1, .fdstore_max = FDSTORE_MAX_DEFAULT};

static void reap(void);
static void on_notify(void);
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	dprintf(2, "init: %s\n", buf);
}

static long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void timer_arm(long long ms)
{
	struct itimerspec it = {0};
	it.it_value.tv_sec = ms / 1000;
	it.it_value.tv_nsec = (ms % 1000) * 1000000;
	if (ms <= 0)
		it.it_value.tv_nsec = 1; /* 0 would disarm */
	timerfd_settime(in.tfd, 0, &it, NULL);
}

/* ---- mounts ---- */

/* True when path is a mount point, from /proc/self/mountinfo (st_dev
 * comparisons miss bind mounts of the same filesystem). */
static bool is_mountpoint(const char *path)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[4096];
	bool found = false;

	if (!f) {
		/* No /proc yet: fall back to comparing devices with the parent. */
		struct stat a, b;
		char parent[PATH_MAX];
		snprintf(parent, sizeof(parent), "%s/..", path);
		return stat(path, &a) == 0 && stat(parent, &b) == 0 && a.st_dev != b.st_dev;
	}
	while (!found && fgets(line, sizeof(line), f)) {
		/* "id parent maj:min root mountpoint ..." */
		char *p = line;
		for (int i = 0; i < 4 && p; i++) {
			p = strchr(p, ' ');
			if (p)
				p++;
		}
		if (!p)
			continue;
		char *e = strchr(p, ' ');
		if (e)
			*e = '\0';
		found = strcmp(p, path) == 0;
	}
	fclose(f);
	return found;
}

static void mount_if_missing(const char *src, const char *dir, const char *type, unsigned long flags,
			     const char *data, mode_t mode)
{
	if (is_mountpoint(dir))
		return;
	if (mkdir(dir, mode) < 0 && errno != EEXIST) {
		say("mkdir %s: %s", dir, strerror(errno));
		return;
	}
	if (mount(src, dir, type, flags, data) < 0) {
		say("mount %s on %s: %s", type, dir, strerror(errno));
		return;
	}
	if (in.n_mounted < MAX_MOUNTS)
		in.mounted[in.n_mounted++] = strdup(dir);
}

static void ensure_symlink(const char *target, const char *path)
{
	struct stat st;
	if (lstat(path, &st) < 0 && symlink(target, path) < 0 && errno != EEXIST)
		say("symlink %s: %s", path, strerror(errno));
}

/* The unified cgroup hierarchy, as systemd mounts it: envd and the
 * platform put workloads into child cgroups (memory.max, pids.max, freeze)
 * and find none when nothing is mounted. nsdelegate makes a cgroup
 * namespace a delegation boundary and memory_recursiveprot lets
 * memory.min/low protect a whole subtree; kernels before 5.7 (or inside a
 * non-initial cgroup namespace) refuse them, so retry without. */
static void mount_cgroup2(void)
{
	const unsigned long flags = MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RELATIME;
	const char *dir = "/sys/fs/cgroup";

	if (is_mountpoint(dir) || !is_mountpoint("/sys"))
		return;
	if (mount("cgroup2", dir, "cgroup2", flags, "nsdelegate,memory_recursiveprot") < 0 &&
	    mount("cgroup2", dir, "cgroup2", flags, NULL) < 0) {
		say("mount cgroup2 on %s: %s", dir, strerror(errno));
		return;
	}
	if (in.n_mounted < MAX_MOUNTS)
		in.mounted[in.n_mounted++] = strdup(dir);
}

static void mount_api_filesystems(void)
{
	const unsigned long nosuid = MS_NOSUID | MS_NODEV | MS_NOEXEC;
	struct statvfs sv;

	mount_if_missing("proc", "/proc", "proc", nosuid, NULL, 0555);
	mount_if_missing("sysfs", "/sys", "sysfs", nosuid, NULL, 0555);
	mount_if_missing("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, "mode=0755", 0755);
	mount_if_missing("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
			 "newinstance,ptmxmode=0666,mode=0620,gid=5", 0755);
	mount_if_missing("shm", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777", 01777);
	mount_if_missing("tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755", 0755);
	/* A private devpts needs /dev/ptmx to be its ptmx, or openpty() hands
	 * out terminals of another instance. */
	struct stat st;
	if (lstat("/dev/ptmx", &st) == 0 && !S_ISLNK(st.st_mode) && is_mountpoint("/dev/pts") &&
	    access("/dev/pts/ptmx", F_OK) == 0) {
		if (mount("/dev/pts/ptmx", "/dev/ptmx", NULL, MS_BIND, NULL) == 0 &&
		    in.n_mounted < MAX_MOUNTS)
			in.mounted[in.n_mounted++] = strdup("/dev/ptmx");
	}
	ensure_symlink("/proc/self/fd", "/dev/fd");
	ensure_symlink("/proc/self/fd/0", "/dev/stdin");
	ensure_symlink("/proc/self/fd/1", "/dev/stdout");
	ensure_symlink("/proc/self/fd/2", "/dev/stderr");
	/* /tmp stays on the root filesystem when it is writable (it then
	 * survives snapshots and costs no RAM); a read-only root gets a tmpfs. */
	mount_cgroup2();
	if (statvfs("/", &sv) == 0 && (sv.f_flag & ST_RDONLY))
		mount_if_missing("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777", 01777);
	else if (mkdir("/tmp", 01777) == 0)
		chmod("/tmp", 01777);
}

static void unmount_all(void)
{
	for (int i = in.n_mounted - 1; i >= 0; i--) {
		if (umount2(in.mounted[i], MNT_DETACH) < 0)
			say("umount %s: %s", in.mounted[i], strerror(errno));
		free(in.mounted[i]);
	}
	in.n_mounted = 0;
}

static void set_hostname(const char *name)
{
	char buf[HOST_NAME_MAX + 2] = {0};

	if (!name) {
		int fd = open("/etc/hostname", O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return;
		ssize_t k = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (k <= 0)
			return;
		buf[k] = '\0';
		buf[strcspn(buf, " \t\r\n")] = '\0';
		name = buf;
	}
	if (*name && sethostname(name, strlen(name)) < 0)
		say("sethostname %s: %s", name, strerror(errno));
}

/* ---- the file descriptor store ---- */

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010
#endif

/* The ring of orphans' exits (base/exitrec.h), kept in the store. */
static void exits_setup(void)
{
	size_t len = exitrec_size(EXITS_CAP);
	int fd = memfd_create("init-exits", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	void *m;

	if (fd < 0) {
		say("memfd_create: %s; exit statuses of orphans are not kept", strerror(errno));
		return;
	}
	if (ftruncate(fd, (off_t)len) < 0 ||
	    (m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
		say("exit ring: %s; exit statuses of orphans are not kept", strerror(errno));
		close(fd);
		return;
	}
	exitrec_init(m, EXITS_CAP);
	/* Whoever gets the fd may neither resize the file under our mapping
	 * (a SIGBUS in PID 1) nor write to it; older kernels lack the last
	 * seal, which only guards against a confused reader. */
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) < 0)
		say("exit ring seals: %s", strerror(errno));
	(void)fcntl(fd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE);
	(void)fcntl(fd, F_ADD_SEALS, F_SEAL_SEAL);
	if (sdnotify_store_add(&in.store, fd, EXITREC_NAME) < 0) {
		munmap(m, len);
		return;
	}
	in.exits = m;
}

static void record_exit(pid_t pid, int status, const struct rusage *ru)
{
	struct exitrec r = {.pid = pid, .status = status};

	if (!in.exits)
		return;
	r.utime_us = (int64_t)ru->ru_utime.tv_sec * 1000000 + ru->ru_utime.tv_usec;
	r.stime_us = (int64_t)ru->ru_stime.tv_sec * 1000000 + ru->ru_stime.tv_usec;
	r.maxrss_kb = ru->ru_maxrss;
	r.time_ns = exitrec_clock_ns();
	exitrec_put(in.exits, &r);
}

/* ---- closing what we do not keep ---- */

/*
 * Descriptors init does not keep (those of a refused message, or sent
 * without FDSTORE=1) are closed by a throw-away child that shares init's
 * descriptor table (CLONE_FILES), never by init itself: the last close of
 * some files waits on another party (a TCP socket lingering on data its
 * peer never reads, a FUSE file whose daemon never answers FLUSH), and
 * PID 1 must not wait on anyone. Init forgets the numbers the moment it
 * hands them over, so nothing closes them twice. At most CLOSERS_MAX
 * children at once; past that the descriptors wait (CLOSING_MAX of them,
 * beyond which they are left open: only root reaches the socket).
 */
static char closer_stack[16384] __attribute__((aligned(16)));
static int closer_fds[CLOSING_MAX];
static size_t closer_n;

static int closer_main(void *arg)
{
	(void)arg;
	/* A copy of init's memory, init's descriptor table: raw syscalls
	 * only. */
	for (size_t i = 0; i < closer_n; i++)
		syscall(SYS_close, closer_fds[i]);
	syscall(SYS_exit, 0);
	return 0;
}

static void closers_run(void)
{
	while (in.n_closing) {
		size_t slot = CLOSERS_MAX;
		for (size_t i = 0; i < CLOSERS_MAX; i++)
			if (in.closers[i] == 0) {
				slot = i;
				break;
			}
		if (slot == CLOSERS_MAX)
			return; /* one of them ends first (reap) */
		memcpy(closer_fds, in.closing, in.n_closing * sizeof(int));
		closer_n = in.n_closing;
		pid_t pid = clone(closer_main, closer_stack + sizeof(closer_stack), CLONE_FILES | SIGCHLD, NULL);
		if (pid < 0) {
			say("cannot start a child to close %zu descriptors: %s; they stay open for now", in.n_closing,
			    strerror(errno));
			return;
		}
		in.closers[slot] = pid;
		in.n_closing = 0;
	}
}

static void closer_put(int fd)
{
	if (in.n_closing == CLOSING_MAX) {
		if (!in.said_closing)
			say("%d descriptors wait to be closed already; more are left open", CLOSING_MAX);
		in.said_closing = true;
		return;
	}
	in.closing[in.n_closing++] = fd;
}

/* Whether pid was a closer (its slot is free again). */
static bool closer_ended(pid_t pid)
{
	for (size_t i = 0; i < CLOSERS_MAX; i++)
		if (in.closers[i] == pid) {
			in.closers[i] = 0;
			return true;
		}
	return false;
}

/*
 * The directory of the notify socket: NOTIFY_DIR, or a fresh one in /tmp
 * where /run is not ours. It is init's user's alone (0700): nobody else
 * can send to the socket, or even find it. Sockets left there by an init
 * that is gone (nobody bound: connect is refused) are removed.
 */
static int notify_dir(char *out, size_t len)
{
	struct stat st;
	int dfd;

	snprintf(out, len, "%s", NOTIFY_DIR);
	if (mkdir(out, 0700) < 0 && errno != EEXIST)
		goto tmp;
	dfd = open(out, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		goto tmp;
	if (fstat(dfd, &st) < 0 || (st.st_uid != geteuid() && (errno = EPERM)) ||
	    ((st.st_mode & 07777) != 0700 && fchmod(dfd, 0700) < 0)) {
		close(dfd);
		goto tmp;
	}
	DIR *d = fdopendir(dfd);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		struct sockaddr_un sa = {.sun_family = AF_UNIX};
		if (strncmp(e->d_name, "notify.", 7) != 0 ||
		    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s", out, e->d_name) >= (int)sizeof(sa.sun_path))
			continue;
		int s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		if (s >= 0 && connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 && errno == ECONNREFUSED)
			unlinkat(dfd, e->d_name, 0);
		if (s >= 0)
			close(s);
	}
	if (d)
		closedir(d);
	else
		close(dfd);
	return 0;
tmp:
	say("%s: %s; the notify socket goes to /tmp", out, strerror(errno));
	snprintf(out, len, "/tmp/envd-init.XXXXXX");
	return mkdtemp(out) ? 0 : -errno;
}

/* The socket the command's NOTIFY_SOCKET names: a path in a directory
 * only we can enter, credentials on every message. */
static void notify_setup(void)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char dir[64];
	unsigned int r = 0;
	int one = 1, fd = -1;

	sdnotify_store_init(&in.store, in.fdstore_max);
	if (in.fdstore_max == 0)
		return;
	if (notify_dir(dir, sizeof(dir)) < 0)
		goto fail;
	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != sizeof(r))
		r = (unsigned int)now_ms() ^ (unsigned int)getpid() << 16;
	if (snprintf(in.notify_addr, sizeof(in.notify_addr), "%s/notify.%d.%08x", dir, (int)getpid(), r) >=
	    (int)sizeof(sa.sun_path)) {
		errno = ENAMETOOLONG;
		goto fail;
	}
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", in.notify_addr);
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)) < 0 ||
	    bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		goto fail;
	in.nfd = fd;
	exits_setup();
	return;
fail:
	say("notify socket: %s; no file descriptor store", strerror(errno));
	in.notify_addr[0] = '\0';
	if (fd >= 0)
		close(fd);
}

/* One message per datagram, from the command only (NotifyAccess=main). */
static void on_notify(void)
{
	for (;;) {
		char buf[4096];
		union {
			struct cmsghdr h;
			char b[CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(sizeof(int) * SDNOTIFY_FDS_MAX)];
		} cm;
		struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf)};
		struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.b, .msg_controllen = sizeof(cm.b)};
		int fds[SDNOTIFY_FDS_MAX];
		size_t nf = 0;
		struct ucred cred = {0};
		bool has_cred = false, ok = true;
		struct sdnotify_msg m;

		ssize_t k = recvmsg(in.nfd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC | MSG_TRUNC);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
			if (c->cmsg_level != SOL_SOCKET)
				continue;
			if (c->cmsg_type == SCM_RIGHTS) {
				size_t more = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
				if (more > SDNOTIFY_FDS_MAX - nf)
					more = SDNOTIFY_FDS_MAX - nf;
				memcpy(fds + nf, CMSG_DATA(c), more * sizeof(int));
				nf += more;
			} else if (c->cmsg_type == SCM_CREDENTIALS && c->cmsg_len >= CMSG_LEN(sizeof(cred))) {
				memcpy(&cred, CMSG_DATA(c), sizeof(cred));
				has_cred = true;
			}
		}
		if (!has_cred || in.child <= 0 || cred.pid != in.child) {
			ok = false;
			if (!in.said_foreign)
				say("ignoring a notify message from pid %d (only %d may send)", (int)cred.pid,
				    (int)in.child);
			in.said_foreign = true;
		} else if ((size_t)k > sizeof(buf) || (mh.msg_flags & MSG_CTRUNC)) {
			ok = false;
			say("ignoring a truncated notify message");
		} else if (sdnotify_parse(buf, (size_t)k, &m) < 0) {
			ok = false;
			say("ignoring a notify message with an invalid FDNAME");
		}
		/* Our own entries are not the command's to drop or replace. */
		bool ours = ok && strcmp(m.name, EXITREC_NAME) == 0;
		if (ok && !ours && m.fdstore_remove && m.has_name)
			sdnotify_store_drop(&in.store, m.name);
		for (size_t i = 0; i < nf; i++) {
			if (!ok || ours || !m.fdstore) {
				closer_put(fds[i]); /* as systemd: fds sent without FDSTORE=1 are closed */
				continue;
			}
			int rc = sdnotify_store_add(&in.store, fds[i], m.name);
			if (rc < 0)
				say("cannot store fd %s: %s", m.name, rc == -EXFULL ? "the store is full" : strerror(-rc));
		}
		closers_run();
	}
}

static bool env_named(const char *e, const char *name)
{
	size_t l = strlen(name);
	return strncmp(e, name, l) == 0 && e[l] == '=';
}

/* ---- the supervised command ---- */

/* What envd.service gives envd under systemd (OOMScoreAdjust=-1000,
 * Nice=-20, realtime I/O priority 4): without it a big enough workload
 * can make the OOM killer choose envd, and a busy one starves it. envd
 * resets its own children to normal before they exec. Set on the running
 * child from the parent side; failures (no privilege)
 * leave the defaults. */
static void raise_priority(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/oom_score_adj", (int)pid);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		if (write(fd, "-1000", 5) < 0 && errno != EACCES && errno != EPERM)
			say("%s: %s", path, strerror(errno));
		close(fd);
	}
	(void)setpriority(PRIO_PROCESS, (id_t)pid, -20);
	/* IOPRIO_WHO_PROCESS, class RT (1) << IOPRIO_CLASS_SHIFT (13), level 4 */
	(void)syscall(SYS_ioprio_set, 1, (int)pid, (1 << 13) | 4);
}

/* In the child: the stored descriptors from fd 3 on, in store order, then
 * the command. Only async-signal-safe calls (init has one thread, but a
 * fork child should not count on that). */
static void __attribute__((noreturn)) exec_child(size_t n, int *tmp, char **envp, char *listen_pid, size_t lp_len)
{
	sigset_t none;

	/* The command gets default dispositions and an empty mask: init's
	 * blocked set must not leak into envd and from there into user
	 * processes. Its own process group keeps a terminal's ^C from us. */
	for (int sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			signal(sig, SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	setpgid(0, 0);
	/* All above the target range first, then into place: a stored fd
	 * may sit where an earlier one goes. */
	int base = SDNOTIFY_LISTEN_START + (int)n;
	for (size_t i = 0; i < n; i++)
		if ((tmp[i] = fcntl(in.store.e[i].fd, F_DUPFD_CLOEXEC, base)) < 0)
			_exit(126);
	for (size_t i = 0; i < n; i++)
		if (dup2(tmp[i], SDNOTIFY_LISTEN_START + (int)i) < 0)
			_exit(126);
	if (n) {
		/* "LISTEN_PID=" is there already; the pid is known only now. */
		char num[16];
		int k = 0;
		for (unsigned int v = (unsigned int)getpid(); v || !k; v /= 10)
			num[k++] = (char)('0' + v % 10);
		size_t at = strlen(listen_pid);
		while (k && at + 1 < lp_len)
			listen_pid[at++] = num[--k];
		listen_pid[at] = '\0';
	}
	/* init raised its own fd limit to hold the store; the command gets
	 * the one init was started with (descriptors above it stay open). */
	setrlimit(RLIMIT_NOFILE, &in.nofile);
	execve(in.cmd[0], in.cmd, envp);
	dprintf(2, "init: cannot start %s: %s\n", in.cmd[0], strerror(errno));
	_exit(127);
}

static int spawn_cmd(void)
{
	size_t n = in.nfd >= 0 ? in.store.n : 0, ne = 0, k = 0, nl = 32;
	char **envp = NULL, *names = NULL, nfds[32], nsock[128], lpid[32] = "LISTEN_PID=";
	int *tmp = NULL;
	pid_t pid;
	int rc = 0;

	for (char **e = environ; *e; e++)
		ne++;
	for (size_t i = 0; i < n; i++)
		nl += strlen(in.store.e[i].name) + 1;
	envp = calloc(ne + 5, sizeof(*envp));
	names = malloc(nl);
	tmp = calloc(n + 1, sizeof(*tmp));
	if (!envp || !names || !tmp) {
		say("cannot start %s: out of memory", in.cmd[0]);
		rc = -ENOMEM;
		goto out;
	}
	/* A manager above us (init under systemd) is not the command's. */
	for (char **e = environ; *e; e++)
		if (!env_named(*e, "NOTIFY_SOCKET") && !env_named(*e, "LISTEN_PID") && !env_named(*e, "LISTEN_FDS") &&
		    !env_named(*e, "LISTEN_FDNAMES"))
			envp[k++] = *e;
	if (in.nfd >= 0) {
		snprintf(nsock, sizeof(nsock), "NOTIFY_SOCKET=%s", in.notify_addr);
		envp[k++] = nsock;
	}
	if (n) {
		snprintf(names, nl, "LISTEN_FDNAMES=");
		sdnotify_store_names(&in.store, names + 15, nl - 15);
		snprintf(nfds, sizeof(nfds), "LISTEN_FDS=%zu", n);
		envp[k++] = nfds;
		envp[k++] = names;
		envp[k++] = lpid;
	}
	envp[k] = NULL;
	pid = fork();
	if (pid < 0) {
		rc = -errno;
		say("cannot start %s: %s", in.cmd[0], strerror(errno));
		goto out;
	}
	if (pid == 0)
		exec_child(n, tmp, envp, lpid, sizeof(lpid));
	/* Both sides, so that a signal sent to the group right away finds it. */
	setpgid(pid, pid);
	raise_priority(pid);
	in.child = pid;
	in.child_exited = false;
	in.started_ms = now_ms();
	if (n)
		say("started %s with %zu stored descriptors", in.cmd[0], n);
out:
	free(envp);
	free(names);
	free(tmp);
	return rc;
}

static void schedule_restart(void)
{
	long long ran = now_ms() - in.started_ms;
	if (ran >= STABLE_MS)
		in.backoff_ms = 0;
	in.backoff_ms = in.backoff_ms ? in.backoff_ms * 2 : BACKOFF_MIN_MS;
	if (in.backoff_ms > BACKOFF_MAX_MS)
		in.backoff_ms = BACKOFF_MAX_MS;
	in.state = WAIT_RESTART;
	timer_arm(in.backoff_ms);
}

static void start_or_retry(void)
{
	in.state = RUNNING;
	if (spawn_cmd() < 0) {
		in.started_ms = now_ms();
		schedule_restart();
	}
}

/* ---- shutdown ---- */

/* Signal every process init is responsible for: the whole PID namespace
 * as PID 1; otherwise its direct children (orphans come to us as they are
 * re-parented, and the loop signals them on the next pass). */
static int signal_all(int sig)
{
	if (in.pid1)
		return kill(-1, sig) == 0 ? 1 : 0;
	int n = 0;
	DIR *d = opendir("/proc");
	struct dirent *e;
	pid_t me = getpid();
	if (!d) {
		if (in.child > 0 && kill(in.child, sig) == 0)
			n++;
		return n;
	}
	while ((e = readdir(d))) {
		char path[64], buf[512];
		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/stat", atoi(e->d_name));
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		ssize_t k = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (k <= 0)
			continue;
		buf[k] = '\0';
		/* "pid (comm) S ppid ...": comm may contain spaces and ')' */
		char *p = strrchr(buf, ')');
		int ppid;
		char st;
		if (!p || sscanf(p + 1, " %c %d", &st, &ppid) != 2 || ppid != me)
			continue;
		if (kill((pid_t)atoi(e->d_name), sig) == 0)
			n++;
	}
	closedir(d);
	return n;
}

static void begin_shutdown(int why)
{
	if (in.state == STOPPING || in.state == KILLING)
		return;
	say("shutting down (signal %d)", why);
	in.state = STOPPING;
	if (in.child > 0)
		kill(in.child, SIGTERM);
	signal_all(SIGTERM);
	timer_arm((long long)(in.grace_s * 1000));
	reap(); /* with no children at all there will be no SIGCHLD */
}

static int exit_code(void)
{
	if (!in.child_exited)
		return 0;
	if (WIFEXITED(in.child_status))
		return WEXITSTATUS(in.child_status);
	if (WIFSIGNALED(in.child_status))
		return 128 + WTERMSIG(in.child_status);
	return 1;
}

static bool is_initial_pidns(void)
{
	/* The machine's own PID 1: NSpid has one level and PID 2 is kthreadd.
	 * A container's init sees two NSpid levels through the host's /proc,
	 * or a user process as PID 2 through its own. */
	char buf[2048];
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t k = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (k <= 0)
		return false;
	buf[k] = '\0';
	char *p = strstr(buf, "\nNSpid:");
	if (!p)
		return false;
	int levels = 0;
	for (p += 7; *p && *p != '\n';) {
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p >= '0' && *p <= '9')
			levels++;
		while (*p >= '0' && *p <= '9')
			p++;
		if (*p != ' ' && *p != '\t')
			break;
	}
	if (levels != 1)
		return false;
	char comm[32] = {0};
	fd = open("/proc/2/comm", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	k = read(fd, comm, sizeof(comm) - 1);
	close(fd);
	return k > 0 && strncmp(comm, "kthreadd", 8) == 0;
}

static void finish(void)
{
	int code = exit_code();
	/* Ask before unmounting: the answer comes from /proc, which
	 * unmount_all() takes away, and a machine's PID 1 that wrongly
	 * concludes it is a container's exits and panics the kernel
	 * ("Attempted to kill init") instead of powering off. */
	bool machine = in.pid1 && is_initial_pidns();
	if (in.notify_addr[0])
		unlink(in.notify_addr);
	sync();
	unmount_all();
	say("stopped, exit status %d", code);
	if (machine) {
		/* PID 1 of a machine must not exit (the kernel would panic).
		 * A read-only root leaves the disk clean; a busy one is still
		 * consistent after sync. */
		if (mount(NULL, "/", NULL, MS_REMOUNT | MS_RDONLY, NULL) < 0)
			say("remount / read-only: %s", strerror(errno));
		sync();
		reboot(RB_POWER_OFF);
		say("power off: %s", strerror(errno));
	}
	exit(code);
}

/* ---- events ---- */

/* The wait status a reaping wait would give, from a waitid siginfo. */
static int wait_status_of(const siginfo_t *si)
{
	switch (si->si_code) {
	case CLD_EXITED:
		return (si->si_status & 0xff) << 8;
	case CLD_DUMPED:
		return (si->si_status & 0x7f) | 0x80;
	default:
		return si->si_status & 0x7f;
	}
}

static void reap(void)
{
	for (;;) {
		siginfo_t si;
		struct rusage ru;
		int st;

		/* Look before reaping: while the process is a zombie its pid
		 * is not reused and its pidfds still answer, so whether the
		 * command watches it can be told, and the record is in the
		 * ring before anyone can get its number (base/exitrec.h). The
		 * raw call: it fills rusage as wait4 would. */
		memset(&si, 0, sizeof(si));
		if (syscall(SYS_waitid, P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT, &ru) < 0) {
			if (errno == ECHILD && in.state != RUNNING && in.state != WAIT_RESTART)
				finish(); /* everyone is gone: no need to wait out the grace */
			return;
		}
		if (si.si_pid <= 0)
			return; /* none has ended */
		pid_t pid = si.si_pid;
		if (pid == in.child && in.nfd >= 0)
			on_notify(); /* what it sent before it died is still its own */
		if (pid != in.child && sdnotify_store_watches(&in.store, pid))
			record_exit(pid, wait_status_of(&si), &ru);
		if (wait4(pid, &st, 0, NULL) != pid) /* a zombie: at once */
			return;
		if (closer_ended(pid)) {
			closers_run();
			continue;
		}
		if (pid != in.child)
			continue; /* an orphan: a command of an envd that died, or anyone's */
		in.child = 0;
		in.child_status = st;
		in.child_exited = true;
		if (in.state == RUNNING) {
			if (WIFSIGNALED(st))
				say("%s killed by signal %d; restarting", in.cmd[0], WTERMSIG(st));
			else
				say("%s exited with status %d; restarting", in.cmd[0], WEXITSTATUS(st));
			schedule_restart();
		}
	}
}

static void on_timer(void)
{
	uint64_t ticks;
	if (read(in.tfd, &ticks, sizeof(ticks)) < 0)
		return;
	switch (in.state) {
	case WAIT_RESTART:
		start_or_retry();
		break;
	case STOPPING:
		say("grace period over; killing what is left");
		in.state = KILLING;
		if (in.child > 0)
			kill(in.child, SIGKILL);
		signal_all(SIGKILL);
		timer_arm(2000); /* KILL cannot be refused; D-state stragglers get 2 s */
		reap();
		break;
	case KILLING:
		finish();
		break;
	case RUNNING:
		break;
	}
}

static void on_signal(const struct signalfd_siginfo *si)
{
	int sig = (int)si->ssi_signo;

	switch (sig) {
	case SIGCHLD:
		reap();
		break;
	case SIGTERM: /* forwarded to the command by the shutdown itself */
	case SIGPWR:
		begin_shutdown(sig);
		break;
	case SIGINT:
	case SIGHUP:
		if (in.child > 0)
			kill(in.child, sig);
		break;
	default:
		break;
	}
}

static void usage(void)
{
	dprintf(2, "usage: init [--grace SECONDS] [--no-mount] [--hostname NAME] [--fdstore-max N] [-- COMMAND [ARG...]]\n");
}

int main(int argc, char **argv)
{
	static char *default_cmd[] = {DEFAULT_CMD, NULL};
	const char *hostname = NULL;
	bool do_mount = true;
	sigset_t set;

	in.cmd = default_cmd;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--") == 0) {
			if (i + 1 < argc)
				in.cmd = &argv[i + 1];
			break;
		} else if ((strcmp(a, "--grace") == 0 || strcmp(a, "-grace") == 0) && i + 1 < argc) {
			char *end;
			in.grace_s = strtod(argv[++i], &end);
			if (*end || in.grace_s < 0 || in.grace_s > 3600) {
				usage();
				return 2;
			}
		} else if (strcmp(a, "--fdstore-max") == 0 && i + 1 < argc) {
			char *end;
			long v = strtol(argv[++i], &end, 10);
			if (*end || v < 0 || v > 65536) {
				usage();
				return 2;
			}
			in.fdstore_max = (size_t)v;
		} else if (strcmp(a, "--no-mount") == 0 || strcmp(a, "-no-mount") == 0) {
			do_mount = false;
		} else if ((strcmp(a, "--hostname") == 0 || strcmp(a, "-hostname") == 0) && i + 1 < argc) {
			hostname = argv[++i];
		} else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			usage();
			return 0;
		} else {
			say("ignoring argument %s", a);
		}
	}

	/* fds 0-2 must exist, or the first files we open would become them. */
	for (int fd = 0; fd < 3; fd++)
		if (fcntl(fd, F_GETFD) < 0)
			open("/dev/null", O_RDWR);

	in.pid1 = getpid() == 1;
	if (in.pid1) {
		if (do_mount)
			mount_api_filesystems();
		set_hostname(hostname);
	} else {
		/* Not PID 1: adopt orphans ourselves so they are still reaped. */
		if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
			say("cannot become a subreaper: %s", strerror(errno));
		if (hostname)
			set_hostname(hostname);
	}
	if (!getenv("PATH"))
		setenv("PATH", DEFAULT_PATH, 1);

	sigfillset(&set);
	/* Faults must still kill us with a core rather than loop. */
	sigdelset(&set, SIGSEGV);
	sigdelset(&set, SIGBUS);
	sigdelset(&set, SIGILL);
	sigdelset(&set, SIGFPE);
	sigdelset(&set, SIGABRT);
	sigdelset(&set, SIGTRAP);
	sigdelset(&set, SIGSYS);
	if (sigprocmask(SIG_BLOCK, &set, NULL) < 0) {
		say("sigprocmask: %s", strerror(errno));
		return 1;
	}
	in.sfd = signalfd(-1, &set, SFD_CLOEXEC);
	in.tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
	if (in.sfd < 0 || in.tfd < 0) {
		say("signalfd/timerfd: %s", strerror(errno));
		return 1;
	}

	/* The store holds a few descriptors per command: room for it. */
	getrlimit(RLIMIT_NOFILE, &in.nofile);
	struct rlimit more = in.nofile;
	if (more.rlim_cur < more.rlim_max) {
		more.rlim_cur = more.rlim_max;
		setrlimit(RLIMIT_NOFILE, &more);
	}
	notify_setup();

	start_or_retry();
	for (;;) {
		struct pollfd p[3] = {{.fd = in.sfd, .events = POLLIN}, {.fd = in.tfd, .events = POLLIN},
				      {.fd = in.nfd, .events = POLLIN}};
		if (poll(p, 3, -1) < 0) {
			if (errno != EINTR)
				say("poll: %s", strerror(errno));
			continue;
		}
		/* Messages before signals: a command that stores fds and dies
		 * has its messages taken while it still counts as the command. */
		if (p[2].revents & POLLIN)
			on_notify();
		if (p[0].revents & POLLIN) {
			struct signalfd_siginfo si[16];
			ssize_t k = read(in.sfd, si, sizeof(si));
			for (ssize_t j = 0; k > 0 && j < k / (ssize_t)sizeof(si[0]); j++)
				on_signal(&si[j]);
		}
		if (p[1].revents & POLLIN)
			on_timer();
	}
}
