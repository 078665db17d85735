/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sdnotify.c - the file descriptor store of the notify protocol, both
 * ends (sdnotify.h).
 */
#include "base/sdnotify.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424 /* the same on every architecture */
#endif

bool sdnotify_name_valid(const char *name)
{
	size_t n = strlen(name);

	if (n == 0 || n > SDNOTIFY_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (name[i] < 0x20 || name[i] > 0x7e || name[i] == ':')
			return false;
	return true;
}

/* --- the service's side --- */

bool sdnotify_available(void)
{
	const char *e = getenv("NOTIFY_SOCKET");
	return e && *e;
}

/*
 * The sender: one socket connected to the manager's (so that poll tells
 * when the manager's queue has room again), and the messages that found
 * it full, in order. Only envd's loop thread sends.
 */
struct txmsg {
	struct txmsg *next;
	size_t n;
	int *fds;           /* n duplicates, ours; after the text */
	char text[];
};

static struct {
	int sock;
	char addr[sizeof(((struct sockaddr_un *)0)->sun_path) + 1]; /* what sock is connected to */
	struct txmsg *head, *tail;
	size_t queued;
} tx = { .sock = -1 };

void (*sdnotify_on_queued)(int fd);

/* A socket connected to $NOTIFY_SOCKET (again when the variable changed).
 * Returns the socket or a negative errno. */
static int tx_socket(void)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	socklen_t salen;
	size_t pl;
	int s;

	if (!path || !*path)
		return -ENOENT;
	pl = strlen(path);
	if ((path[0] != '/' && path[0] != '@') || pl >= sizeof(sa.sun_path))
		return -EINVAL;
	if (tx.sock >= 0 && strcmp(tx.addr, path) == 0)
		return tx.sock;
	memcpy(sa.sun_path, path, pl);
	if (path[0] == '@')
		sa.sun_path[0] = '\0';
	salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + pl + (path[0] == '/'));
	s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s < 0)
		return -errno;
	if (connect(s, (struct sockaddr *)&sa, salen) < 0) {
		int e = errno;
		close(s);
		return -e;
	}
	if (tx.sock >= 0)
		close(tx.sock);
	tx.sock = s;
	memcpy(tx.addr, path, pl + 1);
	return s;
}

/* One attempt, never blocking. Returns 0 or -errno (-EAGAIN: the
 * manager's queue is full). */
static int tx_once(int s, const char *text, const int *fds, size_t n)
{
	struct iovec iov = { .iov_base = (void *)text, .iov_len = strlen(text) };
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int) * SDNOTIFY_FDS_MAX)];
	} cm;
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (n) {
		memset(&cm, 0, sizeof(cm));
		mh.msg_control = cm.b;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * n);
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * n);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * n);
	}
	while (sendmsg(s, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
		if (errno == EINTR)
			continue;
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	}
	return 0;
}

static void txmsg_free(struct txmsg *m)
{
	for (size_t i = 0; i < m->n; i++)
		close(m->fds[i]);
	free(m);
}

/* Queue a copy of the message (the caller keeps its fds). */
static int tx_queue(int s, const char *text, const int *fds, size_t n)
{
	size_t tl = strlen(text) + 1;
	struct txmsg *m;

	if (tx.queued >= SDNOTIFY_QUEUE_MAX)
		return -ENOBUFS;
	if (!(m = malloc(sizeof(*m) + tl + sizeof(int) + n * sizeof(int))))
		return -ENOMEM;
	m->next = NULL;
	m->n = 0;
	/* the fds after the text, aligned */
	m->fds = (int *)(void *)(m->text + (tl + sizeof(int) - 1) / sizeof(int) * sizeof(int));
	for (size_t i = 0; i < n; i++) {
		int d = fcntl(fds[i], F_DUPFD_CLOEXEC, 0);
		if (d < 0) {
			int e = errno;
			txmsg_free(m);
			return -e;
		}
		m->fds[m->n++] = d;
	}
	memcpy(m->text, text, tl);
	if (tx.tail)
		tx.tail->next = m;
	else
		tx.head = m;
	tx.tail = m;
	if (tx.queued++ == 0 && sdnotify_on_queued)
		sdnotify_on_queued(s);
	return 0;
}

int sdnotify_send(const char *text, const int *fds, size_t n)
{
	int s, rc;

	if (n > SDNOTIFY_FDS_MAX)
		return -EINVAL;
	if ((s = tx_socket()) < 0)
		return s;
	/* Behind queued messages: the manager must see them in order (a
	 * removal after the store it undoes). */
	if (tx.head)
		return tx_queue(s, text, fds, n);
	rc = tx_once(s, text, fds, n);
	return rc == -EAGAIN ? tx_queue(s, text, fds, n) : rc;
}

int sdnotify_flush(void)
{
	while (tx.head) {
		struct txmsg *m = tx.head;
		int rc = tx.sock >= 0 ? tx_once(tx.sock, m->text, m->fds, m->n) : -ENOTCONN;

		if (rc == -EAGAIN)
			return -EAGAIN;
		/* Sent, or refused for good (the manager is gone): next. */
		tx.head = m->next;
		if (!tx.head)
			tx.tail = NULL;
		tx.queued--;
		txmsg_free(m);
	}
	return 0;
}

size_t sdnotify_queued(void)
{
	return tx.queued;
}

int sdnotify_store(const char *name, const int *fds, size_t n)
{
	char text[64 + SDNOTIFY_NAME_MAX];

	if (!sdnotify_name_valid(name))
		return -EINVAL;
	snprintf(text, sizeof(text), "FDSTORE=1\nFDPOLL=0\nFDNAME=%s\n", name);
	return sdnotify_send(text, fds, n);
}

int sdnotify_store_remove(const char *name)
{
	char text[64 + SDNOTIFY_NAME_MAX];

	if (!sdnotify_name_valid(name))
		return -EINVAL;
	snprintf(text, sizeof(text), "FDSTOREREMOVE=1\nFDNAME=%s\n", name);
	return sdnotify_send(text, NULL, 0);
}

size_t sdnotify_listen_fds(struct sdnotify_fd *out, size_t max)
{
	const char *pid_s = getenv("LISTEN_PID"), *n_s = getenv("LISTEN_FDS");
	const char *names = getenv("LISTEN_FDNAMES");
	char *end;
	long n;
	size_t got = 0;

	if (!pid_s || !n_s)
		goto out;
	if (strtol(pid_s, &end, 10) != (long)getpid() || *end)
		goto out;
	n = strtol(n_s, &end, 10);
	if (*end || n <= 0 || n > 65536)
		goto out;
	for (long i = 0; i < n; i++) {
		int fd = SDNOTIFY_LISTEN_START + (int)i;
		const char *p = names;
		size_t l = 0;

		if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
			continue; /* not open after all */
		/* The i-th ':'-separated name. */
		for (long k = 0; p && k < i; k++) {
			p = strchr(p, ':');
			if (p)
				p++;
		}
		if (p)
			l = strcspn(p, ":");
		if (got == max) {
			close(fd);
			continue;
		}
		out[got].fd = fd;
		if (!p || l == 0 || l > SDNOTIFY_NAME_MAX)
			snprintf(out[got].name, sizeof(out[got].name), "unknown");
		else
			snprintf(out[got].name, sizeof(out[got].name), "%.*s", (int)l, p);
		got++;
	}
out:
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
	return got;
}

/* --- the manager's side --- */

int sdnotify_parse(const char *buf, size_t len, struct sdnotify_msg *m)
{
	memset(m, 0, sizeof(*m));
	snprintf(m->name, sizeof(m->name), "stored");
	for (size_t i = 0; i < len;) {
		const char *line = buf + i;
		const char *nl = memchr(line, '\n', len - i);
		size_t l = nl ? (size_t)(nl - line) : len - i;

		i += l + 1;
#define IS(lit) (l == sizeof(lit) - 1 && memcmp(line, lit, l) == 0)
		if (IS("FDSTORE=1")) {
			m->fdstore = true;
		} else if (IS("FDSTOREREMOVE=1")) {
			m->fdstore_remove = true;
		} else if (IS("FDPOLL=0")) {
			m->fdpoll_off = true;
		} else if (l >= 7 && memcmp(line, "FDNAME=", 7) == 0) {
			if (l - 7 > SDNOTIFY_NAME_MAX)
				return -EINVAL;
			memcpy(m->name, line + 7, l - 7);
			m->name[l - 7] = '\0';
			if (!sdnotify_name_valid(m->name))
				return -EINVAL;
			m->has_name = true;
		}
#undef IS
	}
	return 0;
}

void sdnotify_store_init(struct sdnotify_store *s, size_t max)
{
	memset(s, 0, sizeof(*s));
	s->max = max;
}

void sdnotify_store_free(struct sdnotify_store *s)
{
	for (size_t i = 0; i < s->n; i++) {
		close(s->e[i].fd);
		free(s->e[i].name);
	}
	free(s->e);
	memset(s, 0, sizeof(*s));
}

/* Whether a and b are the same open file description: kcmp where the
 * kernel has it, else never (a duplicate is then kept twice, harmless). */
static bool same_file(int a, int b)
{
#ifdef SYS_kcmp
	pid_t me = getpid();
	return syscall(SYS_kcmp, me, me, 0 /* KCMP_FILE */, a, b) == 0;
#else
	return false;
#endif
}

/* How many pid namespaces below /proc's our own is (0: /proc is ours). */
static int ns_depth(void)
{
	static int depth = -2;
	char buf[4096];

	if (depth == -2) {
		int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
		ssize_t k = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
		const char *p;

		if (fd >= 0)
			close(fd);
		depth = -1;
		if (k > 0) {
			buf[k] = '\0';
			if ((p = strstr(buf, "\nNSpid:"))) {
				int n = 0;
				for (p += 7; *p && *p != '\n'; p++)
					if ((*p >= '0' && *p <= '9') && (p[-1] == ' ' || p[-1] == '\t' || p[-1] == ':'))
						n++;
				depth = n - 1;
			}
		}
	}
	return depth;
}

/*
 * The pid (in our namespace) of the process a pidfd refers to, 0 for any
 * other descriptor or a process already reaped. The kernel tells it in
 * the fd's fdinfo: "NSpid:" lists it in /proc's namespace and each one
 * below, down to the process's own; ours is `ns_depth()` levels down.
 */
static pid_t pidfd_pid(int fd)
{
	char path[64], buf[1024];
	int depth = ns_depth(), f;
	ssize_t k;
	const char *p;

	if (depth < 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	if ((f = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	k = read(f, buf, sizeof(buf) - 1);
	close(f);
	if (k <= 0)
		return 0;
	buf[k] = '\0';
	if (!(p = strstr(buf, "\nNSpid:")))
		return 0;
	p += 7;
	for (int level = 0;; level++) {
		char *end;
		long v;

		while (*p == ' ' || *p == '\t')
			p++;
		v = strtol(p, &end, 10);
		if (end == p)
			return 0;
		if (level == depth)
			return v > 0 ? (pid_t)v : 0;
		p = end;
	}
}

bool sdnotify_store_watches(const struct sdnotify_store *s, pid_t pid)
{
	if (pid <= 0)
		return false;
	for (size_t i = 0; i < s->n; i++) {
		if (s->e[i].pid != pid)
			continue;
		/* Still that process (a zombie counts): a pidfd of an earlier
		 * process with the same number answers ESRCH. */
		if (syscall(SYS_pidfd_send_signal, s->e[i].fd, 0, NULL, 0) == 0 || errno == EPERM)
			return true;
	}
	return false;
}

int sdnotify_store_add(struct sdnotify_store *s, int fd, const char *name)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		memset(&st, 0, sizeof(st));
	for (size_t i = 0; i < s->n; i++) {
		if (s->e[i].dev == st.st_dev && s->e[i].ino == st.st_ino && same_file(fd, s->e[i].fd)) {
			close(fd);
			return 0;
		}
	}
	if (s->n >= s->max) {
		close(fd);
		return -EXFULL;
	}
	if (s->n == s->cap) {
		size_t nc = s->cap ? s->cap * 2 : 16;
		struct sdnotify_entry *ne = realloc(s->e, nc * sizeof(*ne));
		if (!ne) {
			close(fd);
			return -ENOMEM;
		}
		s->e = ne;
		s->cap = nc;
	}
	char *nm = strdup(name);
	if (!nm) {
		close(fd);
		return -ENOMEM;
	}
	s->e[s->n] = (struct sdnotify_entry){ .fd = fd, .name = nm, .dev = st.st_dev, .ino = st.st_ino,
					       .pid = pidfd_pid(fd) };
	s->n++;
	return 0;
}

size_t sdnotify_store_drop(struct sdnotify_store *s, const char *name)
{
	size_t k = 0, dropped = 0;

	for (size_t i = 0; i < s->n; i++) {
		if (strcmp(s->e[i].name, name) == 0) {
			close(s->e[i].fd);
			free(s->e[i].name);
			dropped++;
			continue;
		}
		s->e[k++] = s->e[i];
	}
	s->n = k;
	return dropped;
}

long sdnotify_store_names(const struct sdnotify_store *s, char *out, size_t len)
{
	size_t at = 0;

	if (len == 0)
		return -ENOSPC;
	out[0] = '\0';
	for (size_t i = 0; i < s->n; i++) {
		size_t l = strlen(s->e[i].name);
		if (at + (i ? 1 : 0) + l + 1 > len)
			return -ENOSPC;
		if (i)
			out[at++] = ':';
		memcpy(out + at, s->e[i].name, l);
		at += l;
		out[at] = '\0';
	}
	return (long)at;
}
