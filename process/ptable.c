/* SPDX-License-Identifier: Apache-2.0 */
#include "process/ptable.h"

#include <string.h>

static size_t bucket(uint32_t pid)
{
	return (pid * 2654435761u) >> 24 & (PTABLE_PID_BUCKETS - 1);
}

struct ptable_entry *ptable_pid_chain(const struct ptable *t, uint32_t pid)
{
	return t->by_pid[bucket(pid)];
}

void ptable_add(struct ptable *t, struct ptable_entry *e)
{
	struct ptable_entry **b = &t->by_pid[bucket(e->pid)];

	e->pid_prev = NULL;
	e->pid_next = *b;
	if (*b)
		(*b)->pid_prev = e;
	*b = e;
	e->next = NULL;
	e->prev = t->tail;
	if (t->tail)
		t->tail->next = e;
	else
		t->head = e;
	t->tail = e;
	t->n++;
}

void ptable_remove(struct ptable *t, struct ptable_entry *e)
{
	if (e->pid_prev)
		e->pid_prev->pid_next = e->pid_next;
	else
		t->by_pid[bucket(e->pid)] = e->pid_next;
	if (e->pid_next)
		e->pid_next->pid_prev = e->pid_prev;
	e->pid_prev = e->pid_next = NULL;
	if (e->prev)
		e->prev->next = e->next;
	else
		t->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		t->tail = e->prev;
	e->prev = e->next = NULL;
	t->n--;
}

static bool match(const struct ptable_entry *e, uint32_t pid, const char *tag)
{
	if (tag)
		return e->tag && strcmp(e->tag, tag) == 0;
	return e->pid == pid;
}

/*
 * Tags: the oldest listed match, scanning past entries with other tags
 * (the reference stopped at the first one). Pids: the newest listed match,
 * because a reaped leader whose output is still open can see its pid
 * reused by a newer child, which is the one a client means.
 */
static struct ptable_entry *find(const struct ptable *t, uint32_t pid, const char *tag,
				 bool retained_too)
{
	struct ptable_entry *live = NULL, *old = NULL;

	for (struct ptable_entry *e = t->head; e; e = e->next) {
		if (!match(e, pid, tag))
			continue;
		if (e->listed) {
			live = e;
			if (tag)
				break;
		} else if (retained_too && e->retained && !old) {
			old = e;
		}
	}
	return live ? live : old;
}

struct ptable_entry *ptable_find_pid(const struct ptable *t, uint32_t pid, bool retained_too)
{
	/* The bucket is newest first: the first listed match is the newest,
	 * the last retained match the oldest (as find() decides). */
	struct ptable_entry *live = NULL, *old = NULL;

	for (struct ptable_entry *e = t->by_pid[bucket(pid)]; e; e = e->pid_next) {
		if (e->pid != pid)
			continue;
		if (e->listed && !live)
			live = e;
		else if (retained_too && e->retained && !e->listed)
			old = e;
	}
	return live ? live : old;
}

struct ptable_entry *ptable_find_tag(const struct ptable *t, const char *tag, bool retained_too)
{
	return find(t, 0, tag, retained_too);
}

size_t ptable_count_listed(const struct ptable *t)
{
	size_t n = 0;

	for (const struct ptable_entry *e = t->head; e; e = e->next)
		n += e->listed;
	return n;
}
