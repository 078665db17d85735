/* SPDX-License-Identifier: Apache-2.0 */
#include "process/budget.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One "BYTES" with an optional k/m suffix; the end of it in *end. */
static int parse_bytes(const char *s, const char **end, uint64_t *out)
{
	uint64_t v = 0;
	const char *p = s;

	if (*p < '0' || *p > '9')
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		v = v * 10 + (uint64_t)(*p - '0');
		if (v > BUDGET_MAX)
			return -E2BIG;
	}
	if (*p == 'k' || *p == 'K') {
		v *= 1024;
		p++;
	} else if (*p == 'm' || *p == 'M') {
		v *= 1024 * 1024;
		p++;
	}
	if (v > BUDGET_MAX)
		return -E2BIG;
	*end = p;
	*out = v;
	return 0;
}

int budget_parse(const char *s, struct budget *b, char *err, size_t errlen)
{
	const char *p = s ? s : "";
	bool seen_head = false, seen_tail = false;

	b->head = b->tail = 0;
	if (!*p) {
		snprintf(err, errlen, "invalid output budget '': expected head:BYTES,tail:BYTES");
		return -EINVAL;
	}
	while (*p) {
		bool head;
		uint64_t v;
		int rc;

		if (strncmp(p, "head:", 5) == 0 && !seen_head) {
			head = seen_head = true;
		} else if (strncmp(p, "tail:", 5) == 0 && !seen_tail) {
			head = false;
			seen_tail = true;
		} else {
			snprintf(err, errlen, "invalid output budget '%s': expected head:BYTES,tail:BYTES", s);
			return -EINVAL;
		}
		rc = parse_bytes(p + 5, &p, &v);
		if (rc < 0) {
			if (rc == -E2BIG)
				snprintf(err, errlen, "invalid output budget '%s': at most %u bytes each", s,
					 BUDGET_MAX);
			else
				snprintf(err, errlen, "invalid output budget '%s': expected head:BYTES,tail:BYTES",
					 s);
			return -EINVAL;
		}
		if (head)
			b->head = (uint32_t)v;
		else
			b->tail = (uint32_t)v;
		if (*p == ',' && p[1])
			p++;
		else if (*p) {
			snprintf(err, errlen, "invalid output budget '%s': expected head:BYTES,tail:BYTES", s);
			return -EINVAL;
		}
	}
	return 0;
}

void budget_begin(struct budget_state *st, const struct budget *b, uint64_t cursor)
{
	memset(st, 0, sizeof(*st));
	if (!b)
		return;
	st->on = true;
	st->phase = BUDGET_HEAD;
	st->head_end = cursor + b->head;
	st->tail = b->tail;
}

void budget_head_stuck(struct budget_state *st, uint64_t cursor)
{
	if (st->on && st->phase == BUDGET_HEAD && cursor < st->head_end)
		st->head_end = cursor;
}

bool budget_holding(const struct budget_state *st, uint64_t cursor)
{
	return st->on && st->phase == BUDGET_HEAD && cursor >= st->head_end;
}

enum budget_step budget_next(struct budget_state *st, uint64_t cursor, uint64_t limit,
			     bool end_ready, uint64_t *upto)
{
	*upto = limit;
	if (!st->on || st->phase == BUDGET_TAIL)
		return BUDGET_PASS;
	if (cursor < st->head_end) {
		if (limit > st->head_end)
			*upto = st->head_end;
		return BUDGET_PASS;
	}
	/* Past the head: hold until the output has ended, then its rest goes
	 * out whole if it fits in the tail, else marker and tail. */
	if (!end_ready)
		return BUDGET_HOLD;
	st->phase = BUDGET_TAIL;
	if (limit <= cursor || limit - cursor <= st->tail)
		return BUDGET_PASS;
	*upto = limit - st->tail;
	return BUDGET_MARK;
}
