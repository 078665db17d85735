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

int sdnotify_send(const char *text, const int *fds, size_t n)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	socklen_t salen;
	size_t pl;
	int s, rc = 0;

	if (!path || !*path)
		return -ENOENT;
	if (n > SDNOTIFY_FDS_MAX)
		return -EINVAL;
	pl = strlen(path);
	if ((path[0] != '/' && path[0] != '@') || pl >= sizeof(sa.sun_path))
		return -EINVAL;
	memcpy(sa.sun_path, path, pl);
	if (path[0] == '@')
		sa.sun_path[0] = '\0';
	salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + pl + (path[0] == '/'));

	/* One socket for every message: a process start sends several. */
	static int sock = -1;
	if (sock < 0 && (sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0)
		return -errno;
	s = sock;
	struct iovec iov = { .iov_base = (void *)text, .iov_len = strlen(text) };
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int) * SDNOTIFY_FDS_MAX)];
	} cm;
	struct msghdr mh = { .msg_name = &sa, .msg_namelen = salen, .msg_iov = &iov, .msg_iovlen = 1 };
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
	while (sendmsg(s, &mh, MSG_NOSIGNAL) < 0) {
		if (errno == EINTR)
			continue;
		rc = -errno;
		break;
	}
	return rc;
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
	s->e[s->n] = (struct sdnotify_entry){ .fd = fd, .name = nm, .dev = st.st_dev, .ino = st.st_ino };
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
