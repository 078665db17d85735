/* SPDX-License-Identifier: Apache-2.0 */
/*
 * keep.c - a process's adoption state outside envd's memory (keep.h): an
 * observer of the process table (struct process_keeper, process.h).
 */
#include "process/keep.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/exitrec.h"
#include "base/log.h"
#include "base/sdnotify.h"
#include "process/endreason.h"
#include "process/process.h"
#include "process/ring.h"

#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424 /* the same on every architecture */
#endif

bool keep_enabled;
/* Taking a process back after a crash: the keep file it is adopted with,
 * which the table's start hook gets instead of a new one. */
static struct keep *adopting;

#define KEEP_MAGIC 0x3150454bu /* "KEP1" */
/* The header's room; the record follows it and the ring follows the
 * record, so a process with little output costs one page. */
#define KEEP_HDR 512

struct keep_ring {
	uint64_t head, n_rec, start;
};

/* The keep file's first page. Written by one envd at a time. */
struct keep_hdr {
	uint32_t magic;
	int32_t pid;
	uint32_t pty;
	uint32_t pad0;
	uint64_t rec_len;          /* the record follows the header */
	uint64_t ring_off, ring_cap;
	/* The ring's state in two slots: a crash while one is written
	 * leaves the other whole (slot seq & 1 is current). */
	uint64_t seq;
	struct keep_ring rs[2];
	uint32_t reaped, exited, finished, stdin_closed;
	int32_t exit_code;
	uint32_t pad1;
	char status[64];
	uint64_t t_start_us;       /* CLOCK_MONOTONIC (machine-wide) at spawn */
	/* exitrec_clock_ns() once the process had its pid: the reaper's
	 * records of that pid from then on are this process's (0: a keep
	 * file of an older envd; t_start_us then stands in). */
	int64_t exits_after_ns;
	/* Added later still: zero in a keep file of an older envd, which
	 * reads as "nothing known" for each. */
	uint64_t in_written;       /* input bytes written to the command */
	int64_t deadline_ms;       /* the deadline it was given */
	uint32_t kill_by, kill_sig; /* the last kill envd sent (endreason.h) */
	uint64_t kill_timeout_ms;
	char kill_session[ENDREASON_SESSION_MAX];
	int32_t termsig;           /* with the exit: the signal it died of */
	uint32_t why_kind;         /* with finished: why it ended */
	int32_t why_sig;
	uint32_t pad2;
	uint64_t why_memory_max, why_memory_peak, why_timeout_ms;
};

_Static_assert(sizeof(struct keep_hdr) <= KEEP_HDR, "the keep header outgrew its room");

struct keep {
	int fd;
	uint8_t *map;
	size_t len;
	pid_t pid;
};

static struct keep_hdr *hdr_of(const struct keep *k)
{
	return (struct keep_hdr *)k->map;
}

static void name_of(char *out, size_t len, pid_t pid, char role)
{
	snprintf(out, len, "p%d.%c", (int)pid, role);
}

static void store_one(pid_t pid, char role, int fd)
{
	char name[32];
	int rc;

	if (fd < 0)
		return;
	name_of(name, sizeof(name), pid, role);
	if ((rc = sdnotify_store(name, &fd, 1)) < 0)
		log_msg("warn", "keep", "process %d: cannot store %s: %s", (int)pid, name, strerror(-rc));
}

static void unstore(pid_t pid, const char *roles)
{
	char name[32];

	for (const char *r = roles; *r; r++) {
		name_of(name, sizeof(name), pid, *r);
		sdnotify_store_remove(name);
	}
}

/* ---- the record: config, tag, cgroup ---- */

static void put_u32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4);
}

static uint32_t get_u32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}

static size_t record_size(const struct process_snapshot *s, size_t *cfg_len)
{
	const char *cg = s->cgroup;

	*cfg_len = s->config ? process__process_config__get_packed_size(s->config) : 0;
	/* config, tag, cgroup; then the idempotency key, its fingerprint and
	 * user (after the fields an older envd reads, which it ignores). */
	return 12 + *cfg_len + (s->tag ? strlen(s->tag) : 0) + (cg ? strlen(cg) : 0) + 12 +
	       (s->idem_key ? strlen(s->idem_key) : 0) + (s->idem_fp ? strlen(s->idem_fp) : 0);
}

static void record_write(const struct process_snapshot *s, uint8_t *out, size_t cfg_len)
{
	const char *cg = s->cgroup;
	size_t tl = s->tag ? strlen(s->tag) : 0, cl = cg ? strlen(cg) : 0;

	put_u32(out, (uint32_t)cfg_len);
	if (cfg_len)
		process__process_config__pack(s->config, out + 4);
	out += 4 + cfg_len;
	put_u32(out, s->tag ? (uint32_t)tl : UINT32_MAX);
	memcpy(out + 4, s->tag ? s->tag : "", tl);
	out += 4 + tl;
	put_u32(out, cg ? (uint32_t)cl : UINT32_MAX);
	memcpy(out + 4, cg ? cg : "", cl);
	out += 4 + cl;
	tl = s->idem_key ? strlen(s->idem_key) : 0;
	put_u32(out, s->idem_key ? (uint32_t)tl : UINT32_MAX);
	memcpy(out + 4, s->idem_key ? s->idem_key : "", tl);
	out += 4 + tl;
	tl = s->idem_fp ? strlen(s->idem_fp) : 0;
	put_u32(out, s->idem_fp ? (uint32_t)tl : UINT32_MAX);
	memcpy(out + 4, s->idem_fp ? s->idem_fp : "", tl);
	out += 4 + tl;
	put_u32(out, s->idem_uid);
}

struct record {
	Process__ProcessConfig *config;
	char *tag, *cgroup;
	char *key, *fp;
	uint32_t uid;
};

/* A string field: -1 for a bad length, else the bytes consumed. */
static long record_str(const uint8_t *p, size_t left, char **out)
{
	uint32_t l;

	*out = NULL;
	if (left < 4)
		return -1;
	l = get_u32(p);
	if (l == UINT32_MAX)
		return 4;
	if (l > left - 4 || !(*out = strndup((const char *)p + 4, l)))
		return -1;
	return 4 + (long)l;
}

static int record_read(const uint8_t *p, size_t len, struct record *r)
{
	uint32_t cl;
	long n;

	memset(r, 0, sizeof(*r));
	if (len < 4 || (cl = get_u32(p)) > len - 4)
		return -EINVAL;
	if (!(r->config = process__process_config__unpack(NULL, cl, p + 4)))
		return -EINVAL;
	p += 4 + cl;
	len -= 4 + cl;
	if ((n = record_str(p, len, &r->tag)) < 0)
		return -EINVAL;
	p += n;
	len -= (size_t)n;
	if ((n = record_str(p, len, &r->cgroup)) < 0)
		return -EINVAL;
	p += n;
	len -= (size_t)n;
	/* An older envd's record ends here: no key. */
	if (len == 0)
		return 0;
	if ((n = record_str(p, len, &r->key)) < 0)
		return -EINVAL;
	p += n;
	len -= (size_t)n;
	if ((n = record_str(p, len, &r->fp)) < 0)
		return -EINVAL;
	p += n;
	len -= (size_t)n;
	if (len < 4)
		return -EINVAL;
	r->uid = get_u32(p);
	return 0;
}

static void record_free(struct record *r)
{
	if (r->config)
		process__process_config__free_unpacked(r->config, NULL);
	free(r->tag);
	free(r->cgroup);
	free(r->key);
	free(r->fp);
}

/* ---- the running envd's side: the table's keeper hooks ---- */

static void keep_sync(void *h, const struct ring *r)
{
	struct keep *k = h;
	struct keep_hdr *hd = hdr_of(k);
	uint64_t seq = hd->seq;

	hd->rs[(seq + 1) & 1] = (struct keep_ring){ .head = r->head, .n_rec = r->n_rec, .start = r->start };
	__atomic_store_n(&hd->seq, seq + 1, __ATOMIC_RELEASE);
}

static void keep_free(struct keep *k)
{
	munmap(k->map, k->len);
	close(k->fd);
	free(k);
}

static void *keep_start(struct process *p, const struct process_snapshot *s)
{
	static bool said;
	size_t cfg_len, rec, ring_off, len;
	struct keep *k = NULL;
	int fd = -1;

	if (adopting) {
		k = adopting; /* its own keep file, ring and all */
		adopting = NULL;
		return k;
	}
	/* One handed over by a live upgrade that ended already: its ring came
	 * in the record and is not kept again. */
	if (!keep_enabled || s->finished)
		return NULL;
	rec = record_size(s, &cfg_len);
	ring_off = (KEEP_HDR + rec + 63) / 64 * 64;
	len = ring_off + s->ring->max;
	if (!(k = calloc(1, sizeof(*k))))
		goto fail;
	fd = memfd_create("envd-process", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, (off_t)len) < 0)
		goto fail;
	k->map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (k->map == MAP_FAILED)
		goto fail;
	k->fd = fd;
	k->len = len;
	k->pid = (pid_t)s->pid;
	struct keep_hdr *h = hdr_of(k);
	h->magic = KEEP_MAGIC;
	h->pid = k->pid;
	h->pty = s->pty;
	h->rec_len = rec;
	h->ring_off = ring_off;
	h->ring_cap = s->ring->max;
	h->t_start_us = s->t_start_us;
	h->exits_after_ns = exitrec_clock_ns();
	h->deadline_ms = s->deadline_ms;
	record_write(s, k->map + KEEP_HDR, cfg_len);
	if (process_ring_lend(p, k->map + ring_off, s->ring->max) < 0) {
		munmap(k->map, len);
		goto fail;
	}
	keep_sync(k, s->ring);
	store_one(k->pid, 'k', fd);
	if (s->pty) {
		store_one(k->pid, 't', s->out_fd);
	} else {
		store_one(k->pid, 'o', s->out_fd);
		store_one(k->pid, 'e', s->err_fd);
		store_one(k->pid, 'i', s->in_fd);
	}
	int pfd = (int)syscall(SYS_pidfd_open, k->pid, 0);
	if (pfd >= 0) {
		store_one(k->pid, 'f', pfd);
		close(pfd);
	}
	return k;
fail:
	if (!said)
		log_msg("warn", "keep", "process %d is not kept for a restart: %s", (int)s->pid, strerror(errno));
	said = true;
	if (fd >= 0)
		close(fd);
	free(k);
	return NULL;
}

static void write_exit(struct keep *k, const struct process_snapshot *s)
{
	struct keep_hdr *h = hdr_of(k);

	h->exit_code = s->exit_code;
	h->exited = s->exited;
	h->termsig = s->termsig;
	snprintf(h->status, sizeof(h->status), "%s", s->status ? s->status : "");
	__atomic_store_n(&h->reaped, 1, __ATOMIC_RELEASE);
}

static void keep_reaped(void *h, const struct process_snapshot *s)
{
	struct keep *k = h;

	write_exit(k, s);
	unstore(k->pid, "f");
}

/* envd closed the process's stdin: the stored copy goes too, or the
 * command would never read EOF. */
static void keep_stdin_closed(void *h)
{
	struct keep *k = h;

	hdr_of(k)->stdin_closed = 1;
	unstore(k->pid, "i");
}

/* Retained: its I/O leaves the store, the keep file (the ring for late
 * Connects) stays. */
static void keep_finalized(void *h, const struct process_snapshot *s)
{
	struct keep *k = h;
	struct keep_hdr *hd = hdr_of(k);

	keep_sync(k, s->ring);
	write_exit(k, s);
	hd->why_kind = (uint32_t)s->why.kind;
	hd->why_sig = s->why.sig;
	hd->why_memory_max = s->why.memory_max;
	hd->why_memory_peak = s->why.memory_peak;
	hd->why_timeout_ms = s->why.timeout_ms;
	hd->finished = 1;
	unstore(k->pid, "oeitf");
}

/* Input a new envd must not write again: what reached the command. */
static void keep_input_written(void *h, uint64_t total)
{
	hdr_of(h)->in_written = total;
}

static void keep_killed(void *h, const struct process_snapshot *s)
{
	struct keep_hdr *hd = hdr_of(h);

	hd->kill_by = (uint32_t)s->kill.by;
	hd->kill_sig = (uint32_t)s->kill.sig;
	hd->kill_timeout_ms = s->kill.timeout_ms;
	memcpy(hd->kill_session, s->kill.session, sizeof(hd->kill_session));
}

static void keep_drop(void *h)
{
	struct keep *k = h;

	unstore(k->pid, "koeitf");
	keep_free(k);
}

static int keep_exit_status(void *handle, pid_t pid, int pidfd, int *status, struct rusage *ru);

static const struct process_keeper keeper = {
	.start = keep_start,
	.sync = keep_sync,
	.reaped = keep_reaped,
	.stdin_closed = keep_stdin_closed,
	.finalized = keep_finalized,
	.drop = keep_drop,
	.input_written = keep_input_written,
	.killed = keep_killed,
	.exit_status = keep_exit_status,
};

void keep_setup(bool enabled)
{
	keep_enabled = enabled;
	process_keeper = &keeper;
}

/* ---- the next envd's side ---- */

static const uint8_t *exits_map;
static size_t exits_len;

/* struct pidfd_info's first 64 bytes (uapi/linux/pidfd.h, 6.13+; the
 * exit fields from 6.15). */
struct pidfd_info64 {
	uint64_t mask;
	uint64_t cgroupid;
	uint32_t pid, tgid, ppid, ruid, rgid, euid, egid, suid, sgid, fsuid, fsgid;
	int32_t exit_code;
};
#define PIDFD_INFO_EXIT_BIT (1ull << 3)
#define PIDFD_GET_INFO_IOCTL _IOWR(0xFF, 11, struct pidfd_info64)

static int keep_exit_status(void *handle, pid_t pid, int pidfd, int *status, struct rusage *ru)
{
	const struct keep_hdr *h = handle ? hdr_of(handle) : NULL;
	int64_t after = h ? (h->exits_after_ns ? h->exits_after_ns : (int64_t)h->t_start_us * 1000) : 0;
	struct pidfd_info64 info = { .mask = PIDFD_INFO_EXIT_BIT };
	bool known = false;
	struct exitrec r;

	memset(ru, 0, sizeof(*ru));
	/* The kernel's word first: it is about this very process. */
	if (pidfd >= 0 && ioctl(pidfd, PIDFD_GET_INFO_IOCTL, &info) == 0 && (info.mask & PIDFD_INFO_EXIT_BIT)) {
		*status = info.exit_code;
		known = true;
	}
	/* The reaper's record of this process's lifetime (not of an earlier
	 * process with the same pid): its usage, and its status where the
	 * kernel does not keep one. */
	if (exits_map && after > 0 && exitrec_find(exits_map, exits_len, pid, after, &r) == 0 &&
	    (!known || r.status == *status)) {
		*status = r.status;
		ru->ru_utime.tv_sec = (time_t)(r.utime_us / 1000000);
		ru->ru_utime.tv_usec = (suseconds_t)(r.utime_us % 1000000);
		ru->ru_stime.tv_sec = (time_t)(r.stime_us / 1000000);
		ru->ru_stime.tv_usec = (suseconds_t)(r.stime_us % 1000000);
		ru->ru_maxrss = (long)r.maxrss_kb;
		known = true;
	}
	if (known)
		return 0;
	/* Not reaped yet: the reaper has not got to it (our init records
	 * before it reaps). */
	if (pidfd >= 0 && (syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) == 0 || errno == EPERM))
		return -EBUSY;
	return -EAGAIN;
}

/* The fds of one kept process, by role. */
struct kept {
	pid_t pid;
	int fd[6]; /* k o e i t f */
};

static const char ROLES[] = "koeitf";

static int role_index(char c)
{
	const char *r = strchr(ROLES, c);
	return r && c ? (int)(r - ROLES) : -1;
}

static void kept_close(struct kept *kp)
{
	for (int i = 0; i < 6; i++)
		if (kp->fd[i] >= 0)
			close(kp->fd[i]);
}

/* Take one process back; its fds are consumed (adopted or closed). */
static int adopt_one(struct kept *kp)
{
	int kfd = kp->fd[0];
	struct keep *k = NULL;
	struct keep_hdr *h;
	struct record rec = { 0 };
	struct stat st;
	struct ring rg;
	int rc = -EINVAL;

	if (kfd < 0) {
		rc = -EBADF; /* no keep file: not a process to take back */
		goto out;
	}
	if (fstat(kfd, &st) < 0 || (size_t)st.st_size < KEEP_HDR + RING_MIN_SIZE) {
		rc = -EFBIG;
		goto out;
	}
	if (!(k = calloc(1, sizeof(*k))))
		goto out;
	k->len = (size_t)st.st_size;
	k->map = mmap(NULL, k->len, PROT_READ | PROT_WRITE, MAP_SHARED, kfd, 0);
	if (k->map == MAP_FAILED) {
		rc = -errno;
		k->map = NULL;
		goto out;
	}
	h = hdr_of(k);
	if (h->magic != KEEP_MAGIC || h->pid != kp->pid || h->rec_len > k->len - KEEP_HDR ||
	    h->ring_off < KEEP_HDR + h->rec_len || h->ring_off > k->len || h->ring_cap > k->len - h->ring_off) {
		log_msg("warn", "keep", "process %d: keep file of pid %d, magic %x, record %llu, ring %llu+%llu of %zu",
			(int)kp->pid, (int)h->pid, h->magic, (unsigned long long)h->rec_len,
			(unsigned long long)h->ring_off, (unsigned long long)h->ring_cap, k->len);
		goto out;
	}
	if (record_read(k->map + KEEP_HDR, h->rec_len, &rec) < 0) {
		rc = -EPROTO;
		goto out;
	}
	struct keep_ring rs = h->rs[__atomic_load_n(&h->seq, __ATOMIC_ACQUIRE) & 1];
	size_t kept = ring_restore(&rg, k->map + h->ring_off, h->ring_cap, rs.head, rs.n_rec, rs.start);

	struct process_snapshot s = {
		.pid = (uint32_t)kp->pid,
		.tag = rec.tag,
		.pty = h->pty != 0,
		.config = rec.config,
		.out_fd = h->pty ? kp->fd[4] : kp->fd[1],
		.err_fd = h->pty ? -1 : kp->fd[2],
		.in_fd = h->pty ? kp->fd[4] : (h->stdin_closed ? -1 : kp->fd[3]),
		.not_child = true,
		.pidfd = kp->fd[5],
		.ring = &rg,
		.finished = h->finished != 0,
		.retain_left_ms = (int64_t)(PROCESS_RETAIN_S * 1000),
		.reaped = h->reaped != 0,
		.exit_code = h->exit_code,
		.exited = h->exited != 0,
		.cgroup = rec.cgroup,
		.t_start_us = h->t_start_us,
		.idem_key = rec.key,
		.idem_uid = rec.uid,
		.idem_fp = rec.fp,
		/* What was queued and not written is lost with the old envd
		 * (docs/crash.md): the count resumes at what was written. */
		.in_taken = h->in_written,
		.deadline_ms = h->deadline_ms,
		.termsig = h->termsig,
	};
	s.kill.by = (enum endreason_by)h->kill_by;
	s.kill.sig = (int)h->kill_sig;
	s.kill.timeout_ms = h->kill_timeout_ms;
	memcpy(s.kill.session, h->kill_session, sizeof(s.kill.session));
	s.kill.session[sizeof(s.kill.session) - 1] = '\0';
	s.why.kind = (enum endreason_kind)h->why_kind;
	s.why.sig = h->why_sig;
	s.why.memory_max = h->why_memory_max;
	s.why.memory_peak = h->why_memory_peak;
	s.why.timeout_ms = h->why_timeout_ms;
	if (s.why.kind == ENDREASON_SESSION)
		memcpy(s.why.session, s.kill.session, sizeof(s.why.session));
	char status[sizeof(h->status)];
	memcpy(status, h->status, sizeof(status));
	status[sizeof(status) - 1] = '\0';
	s.status = status;
	if (s.finished) {
		/* Retained: nothing but the ring is needed. */
		s.out_fd = s.err_fd = s.in_fd = s.pidfd = -1;
	}
	/* The table's start hook takes k (keep_start): the ring lives in it. */
	k->fd = kfd;
	k->pid = kp->pid;
	adopting = k;
	rc = process_adopt(&s, &rg);
	if (adopting) {
		adopting = NULL;
		k->fd = -1; /* still kp's, closed below */
	} else {
		kp->fd[0] = -1;
		k = NULL;
	}
	if (rc < 0)
		goto out;
	/* Adopted fds are the process's now; the rest are closed below. */
	for (int i = 1; i < 6; i++)
		if (kp->fd[i] >= 0 && (kp->fd[i] == s.out_fd || kp->fd[i] == s.err_fd || kp->fd[i] == s.in_fd ||
				       (kp->fd[i] == s.pidfd && !s.reaped)))
			kp->fd[i] = -1;
	log_info("keep", "process %d taken back after a restart%s%s: %zu bytes of output kept%s", (int)kp->pid,
		 rec.tag ? " tag=" : "", rec.tag ? rec.tag : "", kept, s.finished ? " (ended)" : "");
	rc = 0;
out:
	if (k) {
		if (k->map)
			munmap(k->map, k->len);
		free(k);
	}
	if (rc < 0)
		log_msg("warn", "keep", "process %d could not be taken back: %s (roles %s%s%s%s%s%s)", (int)kp->pid,
			strerror(-rc), kp->fd[0] >= 0 ? "k" : "", kp->fd[1] >= 0 ? "o" : "", kp->fd[2] >= 0 ? "e" : "",
			kp->fd[3] >= 0 ? "i" : "", kp->fd[4] >= 0 ? "t" : "", kp->fd[5] >= 0 ? "f" : "");
	record_free(&rec);
	kept_close(kp);
	return rc;
}

size_t keep_adopt_all(struct sdnotify_fd *fds, size_t n)
{
	size_t adopted = 0, nk = 0, handed = 0;
	struct kept *ks = NULL;

	/* An adopted ring lives in its keep file: the table must hand the
	 * file to the keeper, or it would be unmapped under the ring. */
	process_keeper = &keeper;
	if (n && !(ks = calloc(n, sizeof(*ks))))
		return 0;
	for (size_t i = 0; i < n; i++) {
		char *end, role;
		long pid;

		if (fds[i].fd >= 0 && strcmp(fds[i].name, EXITREC_NAME) == 0) {
			struct stat st;
			if (!exits_map && fstat(fds[i].fd, &st) == 0 && st.st_size > 0) {
				void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fds[i].fd, 0);
				if (m != MAP_FAILED) {
					exits_map = m;
					exits_len = (size_t)st.st_size;
				}
			}
			close(fds[i].fd);
			fds[i].fd = -1;
			continue;
		}
		if (fds[i].fd < 0 || fds[i].name[0] != 'p' || (pid = strtol(fds[i].name + 1, &end, 10)) <= 0 ||
		    *end != '.' || role_index(role = end[1]) < 0 || end[2])
			continue; /* not a process's */
		handed++;
		size_t j;
		for (j = 0; j < nk && ks[j].pid != (pid_t)pid; j++)
			;
		if (j == nk) {
			ks[nk].pid = (pid_t)pid;
			for (int r = 0; r < 6; r++)
				ks[nk].fd[r] = -1;
			nk++;
		}
		int ri = role_index(role);
		if (ks[j].fd[ri] >= 0)
			close(ks[j].fd[ri]);
		ks[j].fd[ri] = fds[i].fd;
		fds[i].fd = -1;
	}
	for (size_t j = 0; j < nk; j++) {
		if (adopt_one(&ks[j]) == 0) {
			adopted++;
		} else {
			/* Not takeable: out of the store, or the next start fails again. */
			unstore(ks[j].pid, ROLES);
		}
	}
	free(ks);
	/* One line on every restart that found something, as the start-up
	 * line: a crash is worth a line without -verbose. */
	if (handed)
		fprintf(stderr, "envd: %zu processes taken back after a restart (%zu descriptors)\n", adopted,
			handed);
	return adopted;
}
