/* SPDX-License-Identifier: Apache-2.0 */
#include "ptable.h"

#include <string.h>

void ptable_add(struct ptable *t, struct ptable_entry *e)
{
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
	return find(t, pid, NULL, retained_too);
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
