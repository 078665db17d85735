/* SPDX-License-Identifier: Apache-2.0 */
/*
 * trykeep.c - a try in the service manager's fd store (trykeep.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "try/trykeep.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/log.h"
#include "base/sdnotify.h"
#include "process/keep.h"

#define REC_MAGIC 0x31595254u /* "TRY1" */
/* Header, then two slots: a record names at most 16 directories. */
#define REC_HDR 4096
#define REC_SLOT (96 * 1024)

struct rec_hdr {
	uint32_t magic;
	uint32_t pid;
	uint64_t seq;      /* slot seq & 1 is the current one */
	uint64_t len[2];
};

struct trykeep {
	int fd;
	uint32_t pid;
	uint64_t seq;
};

static void store_one(uint32_t pid, char role, int fd)
{
	char name[32];
	int rc;

	snprintf(name, sizeof(name), "t%u.%c", pid, role);
	if ((rc = sdnotify_store(name, &fd, 1)) < 0)
		log_warn("try", "try of process %u: cannot store %s: %s", pid, name, strerror(-rc));
}

static void unstore(uint32_t pid)
{
	char name[32];

	for (const char *r = "nlr"; *r; r++) {
		snprintf(name, sizeof(name), "t%u.%c", pid, *r);
		sdnotify_store_remove(name);
	}
}

static int write_rec(struct trykeep *k, const Upgrade__HandoverTry *rec)
{
	size_t len = upgrade__handover_try__get_packed_size(rec);
	uint64_t slot = (k->seq + 1) & 1;
	struct rec_hdr h;
	uint8_t *buf;
	ssize_t w;

	if (len > REC_SLOT)
		return -E2BIG;
	if (!(buf = malloc(len ? len : 1)))
		return -ENOMEM;
	upgrade__handover_try__pack(rec, buf);
	w = pwrite(k->fd, buf, len, (off_t)(REC_HDR + slot * REC_SLOT));
	free(buf);
	if (w != (ssize_t)len)
		return w < 0 ? -errno : -EIO;
	if (pread(k->fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h))
		memset(&h, 0, sizeof(h));
	h.magic = REC_MAGIC;
	h.pid = k->pid;
	h.len[slot] = len;
	/* The slot is whole before the header names it. */
	if (pwrite(k->fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h))
		return -EIO;
	h.seq = ++k->seq;
	return pwrite(k->fd, &h.seq, sizeof(h.seq), offsetof(struct rec_hdr, seq)) == (ssize_t)sizeof(h.seq) ? 0 : -EIO;
}

struct trykeep *trykeep_start(const Upgrade__HandoverTry *rec, int ns_fd, int layer_fd)
{
	static bool said;
	struct trykeep *k;

	if (!keep_enabled)
		return NULL;
	if (!(k = calloc(1, sizeof(*k))))
		goto fail;
	k->pid = rec->pid;
	k->fd = memfd_create("envd-try", MFD_CLOEXEC);
	if (k->fd < 0 || ftruncate(k->fd, REC_HDR + 2 * REC_SLOT) < 0 || write_rec(k, rec) < 0)
		goto fail;
	store_one(k->pid, 'n', ns_fd);
	store_one(k->pid, 'l', layer_fd);
	store_one(k->pid, 'r', k->fd);
	return k;
fail:
	if (!said)
		log_warn("try", "try of process %u is not kept for a restart: %s", rec->pid, strerror(errno));
	said = true;
	if (k && k->fd >= 0)
		close(k->fd);
	free(k);
	return NULL;
}

void trykeep_update(struct trykeep *k, const Upgrade__HandoverTry *rec)
{
	int rc;

	if (k && (rc = write_rec(k, rec)) < 0)
		log_warn("try", "try of process %u: its kept record is not updated: %s", k->pid, strerror(-rc));
}

void trykeep_drop(struct trykeep *k)
{
	if (!k)
		return;
	unstore(k->pid);
	close(k->fd);
	free(k);
}

int trykeep_fd(const struct trykeep *k)
{
	return k ? k->fd : -1;
}

/* The current record of fd, unpacked (free with ..._free_unpacked), or NULL. */
static Upgrade__HandoverTry *read_rec(int fd, uint32_t pid, uint64_t *seq)
{
	struct rec_hdr h;
	uint8_t *buf;
	Upgrade__HandoverTry *rec = NULL;
	uint64_t slot;

	if (pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h) || h.magic != REC_MAGIC || h.pid != pid)
		return NULL;
	slot = h.seq & 1;
	if (!h.len[slot] || h.len[slot] > REC_SLOT || !(buf = malloc(h.len[slot])))
		return NULL;
	if (pread(fd, buf, h.len[slot], (off_t)(REC_HDR + slot * REC_SLOT)) == (ssize_t)h.len[slot])
		rec = upgrade__handover_try__unpack(NULL, h.len[slot], buf);
	free(buf);
	*seq = h.seq;
	return rec;
}

struct trykeep *trykeep_resume(uint32_t pid, int fd)
{
	struct trykeep *k;
	Upgrade__HandoverTry *rec;
	uint64_t seq = 0;

	if (fd < 0)
		return NULL;
	fcntl(fd, F_SETFD, FD_CLOEXEC);
	if (!(rec = read_rec(fd, pid, &seq)) || !(k = calloc(1, sizeof(*k)))) {
		if (rec)
			upgrade__handover_try__free_unpacked(rec, NULL);
		close(fd);
		return NULL;
	}
	upgrade__handover_try__free_unpacked(rec, NULL);
	k->fd = fd;
	k->pid = pid;
	k->seq = seq;
	return k;
}

struct kept {
	uint32_t pid;
	int fd[3]; /* n l r */
};

size_t trykeep_take(struct sdnotify_fd *fds, size_t n,
		    void (*fn)(void *ud, const Upgrade__HandoverTry *rec, int ns_fd, int layer_fd, struct trykeep *k),
		    void *ud)
{
	struct kept *ks = n ? calloc(n, sizeof(*ks)) : NULL;
	size_t nk = 0, given = 0;

	if (!ks)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char *end;
		long pid;
		const char *r;
		size_t j;

		if (fds[i].fd < 0 || fds[i].name[0] != 't' || (pid = strtol(fds[i].name + 1, &end, 10)) <= 0 ||
		    *end != '.' || !end[1] || end[2] || !(r = strchr("nlr", end[1])))
			continue;
		for (j = 0; j < nk && ks[j].pid != (uint32_t)pid; j++)
			;
		if (j == nk) {
			ks[nk].pid = (uint32_t)pid;
			ks[nk].fd[0] = ks[nk].fd[1] = ks[nk].fd[2] = -1;
			nk++;
		}
		int role = (int)(r - "nlr");
		if (ks[j].fd[role] >= 0)
			close(ks[j].fd[role]);
		ks[j].fd[role] = fds[i].fd;
		fds[i].fd = -1;
	}
	for (size_t j = 0; j < nk; j++) {
		struct kept *kp = &ks[j];
		Upgrade__HandoverTry *rec = NULL;
		struct trykeep *k = NULL;
		uint64_t seq = 0;

		if (kp->fd[0] >= 0 && kp->fd[1] >= 0 && kp->fd[2] >= 0 && (rec = read_rec(kp->fd[2], kp->pid, &seq)) &&
		    (k = calloc(1, sizeof(*k)))) {
			k->fd = kp->fd[2];
			k->pid = kp->pid;
			k->seq = seq;
			fn(ud, rec, kp->fd[0], kp->fd[1], k);
			given++;
		} else {
			log_warn("try", "the kept try of process %u could not be taken back", kp->pid);
			unstore(kp->pid);
			for (int r = 0; r < 3; r++)
				if (kp->fd[r] >= 0)
					close(kp->fd[r]);
			free(k);
		}
		if (rec)
			upgrade__handover_try__free_unpacked(rec, NULL);
	}
	free(ks);
	return given;
}
