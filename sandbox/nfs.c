/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nfs.c - NFS mounts for /init. The commands are the reference's;
 * they run in a worker thread with a 10 s budget for the whole job.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/child.h"
#include "base/errstr.h"
#include "base/handover.h"
#include "sandbox/nfs.h"
#include "base/worker.h"

const char *nfs_mount_bin = "mount";
const char *nfs_umount_bin = "umount";
const char *nfs_findmnt_bin = "findmnt";

#define NFS_BUDGET_S 10
#define NFS_MAX_RECORDS 64

/* path -> lifecycle of what this envd mounted; touched by workers only,
 * and jobs are serialised by /init, so no lock is needed beyond that. */
static struct { char *path, *lifecycle; } mounted[NFS_MAX_RECORDS];
static size_t n_mounted;

struct nfs_job {
	struct nfs_volume *vols;
	size_t n;
	char *lifecycle;
	void (*done)(void *ud, const char *err);
	void *ud;
	char err[1024];
};

static bool recorded(const char *path, const char *lc)
{
	for (size_t i = 0; i < n_mounted; i++)
		if (strcmp(mounted[i].path, path) == 0)
			return strcmp(mounted[i].lifecycle, lc) == 0;
	return false;
}

static void record(const char *path, const char *lc)
{
	for (size_t i = 0; i < n_mounted; i++) {
		if (strcmp(mounted[i].path, path) == 0) {
			free(mounted[i].lifecycle);
			mounted[i].lifecycle = strdup(lc);
			return;
		}
	}
	if (n_mounted < NFS_MAX_RECORDS) {
		mounted[n_mounted].path = strdup(path);
		mounted[n_mounted].lifecycle = strdup(lc);
		n_mounted++;
	}
}

static int mkdir_p(const char *path)
{
	char tmp[4096];
	snprintf(tmp, sizeof(tmp), "%s", path);
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

static void nfs_work(void *arg)
{
	struct nfs_job *j = arg;
	double deadline = child_now() + NFS_BUDGET_S;
	const char *lc = j->lifecycle ? j->lifecycle : "";

	for (size_t i = 0; i < j->n; i++) {
		const char *path = j->vols[i].path, *target = j->vols[i].target;
		char src[1024];
		if (recorded(path, lc))
			continue;
		char *fm[] = {(char *)nfs_findmnt_bin, "--noheadings", "--output", "SOURCE", (char *)path, NULL};
		if (child_run(fm, deadline, src, sizeof(src), 1) == 0 && src[0]) {
			char *um[] = {(char *)nfs_umount_bin, "--force", (char *)path, NULL};
			if (child_run(um, deadline, NULL, 0, 1) != 0) {
				char *ul[] = {(char *)nfs_umount_bin, "--lazy", (char *)path, NULL};
				child_run(ul, deadline, NULL, 0, 1);
			}
		}
		int rc = mkdir_p(path);
		if (rc < 0) {
			snprintf(j->err, sizeof(j->err), "failed to setup NFS volumes: mkdir %s: %s", path,
				 go_strerror(-rc));
			return;
		}
		char *mt[] = {(char *)nfs_mount_bin, "-v", "-t", "nfs", "-o",
			      "fg,hard,sync,rsize=1048576,wsize=1048576,mountproto=tcp,mountport=2049,proto=tcp,"
			      "port=2049,nfsvers=3,noacl,noac,lookupcache=none",
			      (char *)target, (char *)path, NULL};
		rc = child_run(mt, deadline, NULL, 0, 1);
		if (rc != 0) {
			snprintf(j->err, sizeof(j->err), "failed to setup NFS volumes: mount %s on %s: %s", target, path,
				 rc == -ETIMEDOUT ? "timed out" : rc < 0 ? go_strerror(-rc) : "exit status non-zero");
			return;
		}
		record(path, lc);
	}
}

static void nfs_job_free(struct nfs_job *j)
{
	for (size_t i = 0; i < j->n; i++) {
		free(j->vols[i].target);
		free(j->vols[i].path);
	}
	free(j->vols);
	free(j->lifecycle);
	free(j);
}

static void nfs_done(void *arg)
{
	struct nfs_job *j = arg;
	j->done(j->ud, j->err[0] ? j->err : NULL);
	nfs_job_free(j);
}

int nfs_mount_async(const struct nfs_volume *vols, size_t n, const char *lifecycle,
		    void (*done)(void *ud, const char *err), void *ud)
{
	struct nfs_job *j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	j->vols = calloc(n ? n : 1, sizeof(*j->vols));
	j->lifecycle = lifecycle ? strdup(lifecycle) : NULL;
	j->done = done;
	j->ud = ud;
	if (!j->vols) {
		nfs_job_free(j);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		j->vols[i].target = strdup(vols[i].target ? vols[i].target : "");
		j->vols[i].path = strdup(vols[i].path ? vols[i].path : "");
		j->n++;
		if (!j->vols[i].target || !j->vols[i].path) {
			nfs_job_free(j);
			return -ENOMEM;
		}
	}
	/* Under the key of the first mount point's mount, not a CPU slot:
	 * its mkdir can hang on a dead server like any path syscall. */
	int rc = worker_run(&(struct worker_req){ .work = nfs_work, .done = nfs_done, .arg = j,
						  .key = worker_path_key(n ? j->vols[0].path : "/") });
	if (rc < 0)
		nfs_job_free(j);
	return rc;
}

/* ---- live upgrade: the ledger of what is mounted carries over ---- */

static int ledger_add(const char *path, const char *lifecycle)
{
	if (n_mounted >= NFS_MAX_RECORDS)
		return -ENOSPC;
	char *p = strdup(path), *l = strdup(lifecycle ? lifecycle : "");
	if (!p || !l) {
		free(p);
		free(l);
		return -ENOMEM;
	}
	mounted[n_mounted].path = p;
	mounted[n_mounted].lifecycle = l;
	n_mounted++;
	return 0;
}

void nfs_handover_save(struct handover *h)
{
	for (size_t i = 0; i < n_mounted; i++) {
		Upgrade__MountEntry *m = handover_alloc(h, sizeof(*m));
		if (!m)
			break;
		upgrade__mount_entry__init(m);
		m->path = mounted[i].path;
		m->lifecycle_id = mounted[i].lifecycle;
		HANDOVER_PUSH(h, h->st->mounts, h->st->n_mounts, m);
	}
}

void nfs_handover_restore(struct handover *h)
{
	for (size_t i = 0; i < h->st->n_mounts; i++)
		ledger_add(h->st->mounts[i]->path, h->st->mounts[i]->lifecycle_id);
}
