/* SPDX-License-Identifier: Apache-2.0 */
/*
 * session_handover.c - the shell sessions' part of the hand-over record
 * (session_handover.h), on the sessions' snapshot and adopt hooks.
 */
#include "process/session_handover.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/handover.h"
#include "base/log.h"
#include "process/session.h"

#define LOGGER "envd"

static void add_session(void *ud, const struct session_snapshot *s)
{
	struct handover *a = ud;
	Upgrade__HandoverSession *hs = handover_alloc(a, sizeof(*hs));
	char **envp = handover_alloc(a, (s->n_envp + 1) * sizeof(char *));
	int32_t *keeps = handover_alloc(a, (s->n_keep_fds + 1) * sizeof(int32_t));

	if (!hs || !envp || !keeps)
		return;
	upgrade__handover_session__init(hs);
	hs->name = handover_strdup(a, s->name);
	hs->user = handover_strdup(a, s->user);
	hs->uid = (uint32_t)s->uid;
	hs->set_ids = s->set_ids;
	hs->home_cwd = handover_strdup(a, s->home_cwd);
	for (size_t i = 0; i < s->n_envp; i++)
		envp[i] = handover_strdup(a, s->envp[i]);
	hs->envp = envp;
	hs->n_envp = s->n_envp;
	hs->dir = handover_strdup(a, s->dir);
	hs->id = s->id;
	hs->seq = s->seq;
	hs->pid = s->pid;
	hs->cmd_fd = s->cmd_fd;
	hs->status_fd = s->st_fd;
	hs->nonce = handover_strdup(a, s->nonce);
	hs->ready = s->ready;
	hs->created_ms = s->created_ms;
	hs->used_ms = s->used_ms;
	hs->busy = s->busy;
	hs->busy_started = s->busy_started;
	hs->busy_in_fd = s->busy_in_fd;
	for (size_t i = 0; i < s->n_keep_fds; i++) {
		keeps[i] = s->keep_fds[i];
		handover_keep_fd(a, s->keep_fds[i]);
	}
	hs->keep_fds = keeps;
	hs->n_keep_fds = s->n_keep_fds;
	handover_keep_fd(a, s->cmd_fd);
	handover_keep_fd(a, s->st_fd);
	handover_keep_fd(a, s->busy_in_fd);
	HANDOVER_PUSH(a, a->st->sessions, a->st->n_sessions, hs);
}

void session_handover_save(struct handover *h)
{
	session_snapshot_each(add_session, h);
}

void session_handover_restore(struct handover *h)
{
	const Upgrade__HandoverState *st = h->st;
	int rc;

	for (size_t i = 0; i < st->n_sessions; i++) {
		Upgrade__HandoverSession *hs = st->sessions[i];
		struct session_snapshot sn = {
			.name = hs->name, .user = hs->user, .uid = hs->uid, .set_ids = hs->set_ids,
			.home_cwd = hs->home_cwd, .envp = hs->envp, .n_envp = hs->n_envp, .dir = hs->dir,
			.nonce = hs->nonce, .id = hs->id, .seq = hs->seq, .pid = hs->pid,
			.cmd_fd = handover_fd_open(hs->cmd_fd) ? hs->cmd_fd : -1,
			.st_fd = handover_fd_open(hs->status_fd) ? hs->status_fd : -1, .ready = hs->ready,
			.created_ms = hs->created_ms, .used_ms = hs->used_ms, .busy = hs->busy,
			.busy_started = hs->busy_started,
			.busy_in_fd = handover_fd_open(hs->busy_in_fd) ? hs->busy_in_fd : -1,
		};
		int *keeps = calloc(hs->n_keep_fds + 1, sizeof(int));

		for (size_t k = 0; keeps && k < hs->n_keep_fds; k++)
			if (handover_fd_open(hs->keep_fds[k]))
				keeps[sn.n_keep_fds++] = hs->keep_fds[k];
		sn.keep_fds = keeps;
		rc = keeps ? session_adopt(&sn) : -ENOMEM;
		if (rc < 0) {
			/* Not taken over: its descriptors are closed here, and its shell killed. */
			log_error(LOGGER, "upgrade: session %s not taken over: %s", hs->name, strerror(-rc));
			if (sn.cmd_fd >= 0)
				close(sn.cmd_fd);
			if (sn.st_fd >= 0)
				close(sn.st_fd);
			if (sn.busy_in_fd >= 0)
				close(sn.busy_in_fd);
			for (size_t k = 0; k < sn.n_keep_fds; k++)
				close(keeps[k]);
			if (hs->pid > 0)
				kill(-hs->pid, SIGKILL);
		}
		free(keeps);
	}
}
