/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sdnotify.h - the file descriptor store of the service manager's notify
 * protocol, both ends (docs/crash.md).
 *
 * A service keeps descriptors across its own death by sending them to its
 * manager: one datagram to the AF_UNIX socket named by $NOTIFY_SOCKET (a
 * leading '@' is the abstract namespace), text lines "FDSTORE=1",
 * "FDNAME=<name>", "FDPOLL=0", "FDSTOREREMOVE=1", the descriptors as
 * SCM_RIGHTS. When the service starts again, the manager passes every
 * stored descriptor from fd 3 on and says so in LISTEN_PID, LISTEN_FDS and
 * LISTEN_FDNAMES ("a:b:c"). systemd speaks it (FileDescriptorStoreMax=);
 * so does our init (init/init.c), which holds the store where there is no
 * systemd.
 *
 * The sender side (envd) and the listen side use plain libc and no event
 * loop (a caller's loop drives the sender's queue through
 * sdnotify_on_queued and sdnotify_flush); the receiver side (message
 * parsing, the store) is what init links.
 * No module of envd is needed: init is built from init/ and this file.
 *
 * Errors: 0 or a negative errno.
 */
#ifndef ENVD_SDNOTIFY_H
#define ENVD_SDNOTIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Longest FDNAME (as systemd). */
#define SDNOTIFY_NAME_MAX 255
/* Most descriptors in one message (the kernel's SCM_MAX_FD). */
#define SDNOTIFY_FDS_MAX 253
/* The first descriptor handed over on start. */
#define SDNOTIFY_LISTEN_START 3

/* A name systemd accepts: 1..255 bytes, printable ASCII, no ':'. */
bool sdnotify_name_valid(const char *name);

/* --- the service's side --- */

/* Messages held while the manager's queue is full (sdnotify_send). */
#define SDNOTIFY_QUEUE_MAX 4096

/*
 * Send `text` with fds (n may be 0) to $NOTIFY_SOCKET, through one socket
 * connected to it and kept for all messages (call from one thread: envd's
 * loop). It never blocks: when the manager's queue is full (a slow or
 * stopped manager; the kernel holds net.unix.max_dgram_qlen datagrams,
 * 10 by default) the message is queued, with duplicates of its fds, behind
 * the ones queued before, and sent in order by sdnotify_flush(). Returns 0
 * (sent or queued), -ENOENT when the variable is unset (no manager:
 * nothing to keep), -EINVAL for a bad address, -ENOBUFS when
 * SDNOTIFY_QUEUE_MAX messages wait already, or -errno of connect or send
 * (-ECONNREFUSED: the manager is gone).
 */
int sdnotify_send(const char *text, const int *fds, size_t n);

/*
 * Called with the socket when the first message had to be queued: the
 * caller's loop watches it for writing and calls sdnotify_flush(). NULL:
 * queued messages wait for the next explicit flush.
 */
extern void (*sdnotify_on_queued)(int fd);

/*
 * Send the queued messages in order until the manager's queue is full
 * again. A message refused for another reason (the manager is gone) is
 * dropped with its fds. Returns 0 once nothing is queued, -EAGAIN while
 * messages remain (wait until the socket is writable).
 */
int sdnotify_flush(void);

/* Messages queued (sent by sdnotify_flush). */
size_t sdnotify_queued(void);

/*
 * Store fds under `name` ("FDSTORE=1", "FDNAME=name", and "FDPOLL=0" so
 * that a pipe or terminal whose writer hangs up is kept with the bytes it
 * still holds). Returns as sdnotify_send(), or -EINVAL for a bad name.
 */
int sdnotify_store(const char *name, const int *fds, size_t n);

/* Drop every stored fd called `name`. Returns as sdnotify_store(). */
int sdnotify_store_remove(const char *name);

/* Whether a manager listens ($NOTIFY_SOCKET is set). */
bool sdnotify_available(void);

struct sdnotify_fd {
	int fd;
	char name[SDNOTIFY_NAME_MAX + 1];
};

/*
 * The descriptors handed over on start: when LISTEN_PID is our pid,
 * LISTEN_FDS of them from fd 3, named by LISTEN_FDNAMES ("unknown" when
 * missing). Each gets FD_CLOEXEC. The three variables are removed from
 * the environment (children never see them). Fills at most `max` entries
 * (the rest are closed) and returns the number filled.
 */
size_t sdnotify_listen_fds(struct sdnotify_fd *out, size_t max);

/* --- the manager's side --- */

struct sdnotify_msg {
	bool fdstore;                     /* FDSTORE=1 */
	bool fdstore_remove;              /* FDSTOREREMOVE=1 */
	bool fdpoll_off;                  /* FDPOLL=0 */
	bool has_name;
	char name[SDNOTIFY_NAME_MAX + 1]; /* FDNAME=, "stored" when absent */
};

/*
 * Parse one message (not NUL-terminated; lines end in '\n'). Unknown
 * lines are ignored, as systemd does. Returns 0, or -EINVAL for an
 * invalid FDNAME (the message is then to be refused whole).
 */
int sdnotify_parse(const char *buf, size_t len, struct sdnotify_msg *m);

struct sdnotify_entry {
	int fd;
	char *name;
	dev_t dev;           /* the file's identity, to find duplicates */
	ino_t ino;
	pid_t pid;           /* a pidfd's process (in our pid namespace), else 0 */
};

struct sdnotify_store {
	struct sdnotify_entry *e;
	size_t n, cap;
	size_t max;          /* most entries kept */
};

/* An empty store of at most `max` entries. */
void sdnotify_store_init(struct sdnotify_store *s, size_t max);
/* Close every fd and free. */
void sdnotify_store_free(struct sdnotify_store *s);

/*
 * Keep fd (ours from now on) under `name`. A second descriptor of the same
 * open file is closed and dropped (returns 0, as systemd). Returns -EXFULL
 * when the store is full and -ENOMEM (the fd is closed either way).
 */
int sdnotify_store_add(struct sdnotify_store *s, int fd, const char *name);

/*
 * Whether the store holds a pidfd of the process `pid` still is (alive or
 * a zombie not yet reaped; not an earlier process of the same number).
 * init records the exits of these processes only (base/exitrec.h): the
 * command says which processes it wants to hear about by storing their
 * pidfds. Needs /proc (a pidfd's process is read from its fdinfo when it
 * is stored); without it, false.
 */
bool sdnotify_store_watches(const struct sdnotify_store *s, pid_t pid);

/* Close and drop every entry called `name`; returns how many. */
size_t sdnotify_store_drop(struct sdnotify_store *s, const char *name);

/*
 * LISTEN_FDNAMES' value for the store: the names joined by ':'. Returns
 * the length, or -ENOSPC when it does not fit `len` (NUL included).
 */
long sdnotify_store_names(const struct sdnotify_store *s, char *out, size_t len);

#endif
