/* SPDX-License-Identifier: Apache-2.0 */
#include "process/waitcond.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

/* An address as numbers, IPv4-mapped IPv6 folded to IPv4. */
static int parse_addr(const char *s, uint8_t *family, uint8_t addr[16])
{
	memset(addr, 0, 16);
	if (inet_pton(AF_INET, s, addr) == 1) {
		*family = AF_INET;
		return 0;
	}
	if (inet_pton(AF_INET6, s, addr) == 1) {
		*family = AF_INET6;
		if (memcmp(addr, v4mapped, 12) == 0) {
			memmove(addr, addr + 12, 4);
			memset(addr + 4, 0, 12);
			*family = AF_INET;
		}
		return 0;
	}
	return -EINVAL;
}

static int bad(char *err, size_t errlen, const char *fmt, const char *what)
{
	snprintf(err, errlen, fmt, what);
	return -EINVAL;
}

int waitcond_parse(const Process__WaitForRequest *rq, struct waitcond *c, char *err, size_t errlen)
{
	memset(c, 0, sizeof(*c));
	c->timeout_ms = rq->timeout_ms;
	switch (rq->condition_case) {
	case PROCESS__WAIT_FOR_REQUEST__CONDITION_PORT: {
		const Process__WaitPort *w = rq->port;

		c->kind = WAITCOND_PORT;
		if (!w || w->port == 0 || w->port > 65535) {
			snprintf(err, errlen, "invalid port %u: 1 to 65535", w ? w->port : 0);
			return -EINVAL;
		}
		c->port = (uint16_t)w->port;
		if (!w->address || !*w->address) {
			c->any_address = true;
			return 0;
		}
		if (parse_addr(w->address, &c->family, c->addr) < 0)
			return bad(err, errlen, "invalid address '%.64s': a numeric IPv4 or IPv6 address",
				   w->address);
		inet_ntop(c->family, c->addr, c->address, sizeof(c->address));
		return 0;
	}
	case PROCESS__WAIT_FOR_REQUEST__CONDITION_HTTP: {
		const Process__WaitHttp *w = rq->http;

		c->kind = WAITCOND_HTTP;
		if (!w || w->port == 0 || w->port > 65535) {
			snprintf(err, errlen, "invalid port %u: 1 to 65535", w ? w->port : 0);
			return -EINVAL;
		}
		c->port = (uint16_t)w->port;
		c->family = AF_INET;
		inet_pton(AF_INET, "127.0.0.1", c->addr);
		snprintf(c->address, sizeof(c->address), "127.0.0.1");
		c->path = w->path && *w->path ? w->path : "/";
		if (c->path[0] != '/')
			return bad(err, errlen, "invalid HTTP path '%.64s': it starts with '/'", c->path);
		if (strlen(c->path) > WAITCOND_HTTP_PATH_MAX)
			return bad(err, errlen, "invalid HTTP path '%.64s...': too long", c->path);
		for (const char *p = c->path; *p; p++)
			if ((unsigned char)*p <= 0x20 || *p == 0x7f)
				return bad(err, errlen, "invalid HTTP path '%.64s': no spaces or control characters",
					   c->path);
		c->status_min = w->status_min;
		c->status_max = w->status_max;
		if (!c->status_min && !c->status_max) {
			c->status_min = 200;
			c->status_max = 399;
		} else if (!c->status_max) {
			c->status_max = c->status_min;
		}
		if (c->status_min < 100 || c->status_max > 599 || c->status_min > c->status_max) {
			snprintf(err, errlen, "invalid status range %u-%u: within 100-599, lowest first",
				 c->status_min, c->status_max);
			return -EINVAL;
		}
		return 0;
	}
	case PROCESS__WAIT_FOR_REQUEST__CONDITION_OUTPUT: {
		const Process__WaitOutput *w = rq->output;

		c->kind = WAITCOND_OUTPUT;
		if (!w || !w->process ||
		    w->process->selector_case == PROCESS__PROCESS_SELECTOR__SELECTOR__NOT_SET) {
			snprintf(err, errlen, "invalid output condition: a process (pid or tag) is needed");
			return -EINVAL;
		}
		c->process = w->process;
		if (!w->pattern || !*w->pattern) {
			snprintf(err, errlen, "invalid output condition: an empty pattern");
			return -EINVAL;
		}
		c->pattern = w->pattern;
		c->ignore_case = w->ignore_case;
		c->fixed = w->fixed;
		if (!w->stream || !*w->stream)
			c->stream = 0;
		else if (strcmp(w->stream, "stdout") == 0)
			c->stream = 1;
		else if (strcmp(w->stream, "stderr") == 0)
			c->stream = 2;
		else
			return bad(err, errlen, "invalid stream '%.32s': \"stdout\", \"stderr\" or \"\"",
				   w->stream);
		return 0;
	}
	case PROCESS__WAIT_FOR_REQUEST__CONDITION_EXIT:
		c->kind = WAITCOND_EXIT;
		if (!rq->exit || rq->exit->selector_case == PROCESS__PROCESS_SELECTOR__SELECTOR__NOT_SET) {
			snprintf(err, errlen, "invalid exit condition: a process (pid or tag) is needed");
			return -EINVAL;
		}
		c->process = rq->exit;
		return 0;
	case PROCESS__WAIT_FOR_REQUEST__CONDITION_PATH:
		c->kind = WAITCOND_PATH;
		if (!rq->path || !rq->path->path || !*rq->path->path) {
			snprintf(err, errlen, "invalid path condition: an empty path");
			return -EINVAL;
		}
		c->fs_path = rq->path->path;
		return 0;
	default:
		snprintf(err, errlen, "invalid wait: one condition (port, http, output, exit or path) is needed");
		return -EINVAL;
	}
}

bool waitcond_port_ok(const struct waitcond *c, int family, const uint8_t addr[16], uint16_t port)
{
	static const uint8_t zero[16];
	uint8_t a[16];

	if (port != c->port)
		return false;
	if (c->any_address && c->kind == WAITCOND_PORT)
		return true;
	memcpy(a, addr, 16);
	if (family == AF_INET6 && memcmp(a, v4mapped, 12) == 0) {
		memmove(a, a + 12, 4);
		memset(a + 4, 0, 12);
		family = AF_INET;
	}
	if (family == AF_INET6 && memcmp(a, zero, 16) == 0)
		return true; /* :: takes both families (dual-stack) */
	if (family != c->family)
		return false;
	if (memcmp(a, zero, family == AF_INET ? 4 : 16) == 0)
		return true;
	return memcmp(a, c->addr, family == AF_INET ? 4 : 16) == 0;
}

bool waitcond_status_ok(const struct waitcond *c, unsigned status)
{
	return status >= c->status_min && status <= c->status_max;
}

static const char *sel_words(const Process__ProcessSelector *s, char *buf, size_t len)
{
	if (s && s->selector_case == PROCESS__PROCESS_SELECTOR__SELECTOR_TAG)
		snprintf(buf, len, "process tagged '%.64s'", s->tag);
	else
		snprintf(buf, len, "process %u", s ? s->pid : 0);
	return buf;
}

void waitcond_describe(const struct waitcond *c, char *buf, size_t len)
{
	char s[96];

	switch (c->kind) {
	case WAITCOND_PORT:
		if (c->any_address)
			snprintf(buf, len, "port %u listening on any address", c->port);
		else
			snprintf(buf, len, "port %u listening on %s", c->port, c->address);
		return;
	case WAITCOND_HTTP:
		snprintf(buf, len, "GET http://127.0.0.1:%u%.256s answering %u-%u", c->port, c->path,
			 c->status_min, c->status_max);
		return;
	case WAITCOND_OUTPUT:
		snprintf(buf, len, "a line of %s's %s matching %s'%.128s'%s", sel_words(c->process, s, sizeof(s)),
			 c->stream == 1 ? "stdout" : c->stream == 2 ? "stderr" : "output",
			 c->fixed ? "the string " : "", c->pattern, c->ignore_case ? " (any case)" : "");
		return;
	case WAITCOND_EXIT:
		snprintf(buf, len, "%s to end", sel_words(c->process, s, sizeof(s)));
		return;
	case WAITCOND_PATH:
		snprintf(buf, len, "%.512s to exist", c->fs_path);
		return;
	}
	if (len)
		buf[0] = '\0';
}

/* ---- lines ---- */

static int lines_keep(struct waitcond_lines *l, const uint8_t *p, size_t n)
{
	if (l->len + n > WAITCOND_LINE_MAX) {
		n = WAITCOND_LINE_MAX - l->len;
		l->cut = true;
	}
	if (!n)
		return 0;
	if (l->len + n > l->cap) {
		size_t cap = l->cap ? l->cap : 256;
		char *b;

		while (cap < l->len + n)
			cap *= 2;
		if (cap > WAITCOND_LINE_MAX)
			cap = WAITCOND_LINE_MAX;
		b = realloc(l->buf, cap);
		if (!b)
			return -ENOMEM;
		l->buf = b;
		l->cap = cap;
	}
	memcpy(l->buf + l->len, p, n);
	l->len += n;
	return 0;
}

/* A line without its '\r' (terminals end lines with "\r\n"). */
static bool hand_on(waitcond_line_fn fn, void *ud, const char *s, size_t n, uint64_t off, bool cut)
{
	if (n && s[n - 1] == '\r' && !cut)
		n--;
	return fn(ud, s, n, off, cut);
}

int waitcond_lines_feed(struct waitcond_lines *l, const uint8_t *p, size_t n, uint64_t off,
			waitcond_line_fn fn, void *ud)
{
	size_t i = 0;

	while (i < n) {
		const uint8_t *nl = memchr(p + i, '\n', n - i);
		size_t end = nl ? (size_t)(nl - p) : n;

		if (!nl) {
			/* The line goes on in a later chunk. */
			if (!l->len && !l->cut)
				l->off = off + i;
			return lines_keep(l, p + i, end - i) < 0 ? -ENOMEM : 0;
		}
		if (l->len || l->cut) {
			bool hit;

			if (lines_keep(l, p + i, end - i) < 0)
				return -ENOMEM;
			hit = hand_on(fn, ud, l->buf, l->len, l->off, l->cut);
			l->len = 0;
			l->cut = false;
			if (hit)
				return 1;
		} else if (end - i > WAITCOND_LINE_MAX) {
			if (fn(ud, (const char *)p + i, WAITCOND_LINE_MAX, off + i, true))
				return 1;
		} else if (hand_on(fn, ud, (const char *)p + i, end - i, off + i, false)) {
			return 1;
		}
		i = end + 1;
	}
	return 0;
}

int waitcond_lines_flush(struct waitcond_lines *l, waitcond_line_fn fn, void *ud)
{
	bool hit;

	if (!l->len && !l->cut)
		return 0;
	hit = hand_on(fn, ud, l->buf ? l->buf : "", l->len, l->off, l->cut);
	l->len = 0;
	l->cut = false;
	return hit ? 1 : 0;
}

void waitcond_lines_free(struct waitcond_lines *l)
{
	free(l->buf);
	memset(l, 0, sizeof(*l));
}
