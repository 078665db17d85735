/* SPDX-License-Identifier: Apache-2.0 */
#include "process/endreason.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

void endreason_decide(const struct endreason_kill *k, int termsig, bool oom_killed,
		      uint64_t memory_max, uint64_t memory_peak, struct endreason *out)
{
	memset(out, 0, sizeof(*out));
	out->sig = termsig;
	if (k && k->by != ENDREASON_BY_NONE && termsig && termsig == k->sig) {
		switch (k->by) {
		case ENDREASON_BY_CLIENT:
			out->kind = ENDREASON_SIGNAL;
			break;
		case ENDREASON_BY_TIMEOUT:
			out->kind = ENDREASON_TIMEOUT;
			out->timeout_ms = k->timeout_ms;
			break;
		case ENDREASON_BY_SESSION:
			out->kind = ENDREASON_SESSION;
			snprintf(out->session, sizeof(out->session), "%s", k->session);
			break;
		default:
			break;
		}
		if (out->kind != ENDREASON_NONE)
			return;
	}
	if (oom_killed) {
		out->kind = ENDREASON_OOM;
		out->memory_max = memory_max;
		out->memory_peak = memory_peak;
	}
}

/* Whole MiB (or KiB below one), rounded down: a peak is never overstated. */
static void size_words(uint64_t b, char *buf, size_t len)
{
	if (b >= 1024ull * 1024 * 1024 && b % (1024ull * 1024 * 1024) == 0)
		snprintf(buf, len, "%llu GiB", (unsigned long long)(b >> 30));
	else if (b >= 1024 * 1024)
		snprintf(buf, len, "%llu MiB", (unsigned long long)(b >> 20));
	else if (b >= 1024)
		snprintf(buf, len, "%llu KiB", (unsigned long long)(b >> 10));
	else
		snprintf(buf, len, "%llu bytes", (unsigned long long)b);
}

static void ms_words(uint64_t ms, char *buf, size_t len)
{
	if (ms && ms % 1000 == 0)
		snprintf(buf, len, "%llu s", (unsigned long long)(ms / 1000));
	else
		snprintf(buf, len, "%llu ms", (unsigned long long)ms);
}

void endreason_describe(const struct endreason *r, const char *status, char *buf, size_t len)
{
	char a[32], b[32], mem[96];

	if (!status)
		status = "";
	switch (r->kind) {
	case ENDREASON_OOM:
		if (r->memory_max) {
			size_words(r->memory_max, a, sizeof(a));
			snprintf(mem, sizeof(mem), "memory.max %s", a);
		} else {
			snprintf(mem, sizeof(mem), "no memory.max of its own");
		}
		if (r->memory_peak) {
			size_words(r->memory_peak, b, sizeof(b));
			snprintf(mem + strlen(mem), sizeof(mem) - strlen(mem), ", peak %s", b);
		}
		if (r->sig == SIGKILL)
			snprintf(buf, len, "out of memory: killed by the kernel OOM killer (%s)", mem);
		else
			snprintf(buf, len, "out of memory: the kernel OOM killer killed a process of the "
					   "command (%s); %s", mem, status);
		return;
	case ENDREASON_TIMEOUT:
		ms_words(r->timeout_ms, a, sizeof(a));
		snprintf(buf, len, "timeout: killed by envd when its deadline of %s passed", a);
		return;
	case ENDREASON_SESSION:
		snprintf(buf, len, "session closed: killed by envd when its session '%s' was closed",
			 r->session);
		return;
	case ENDREASON_SIGNAL:
		snprintf(buf, len, "%s: sent by a client (SendSignal)", status);
		return;
	default:
		if (len)
			buf[0] = '\0';
		return;
	}
}

bool endreason_in_error(const struct endreason *r)
{
	return r->kind == ENDREASON_OOM || r->kind == ENDREASON_TIMEOUT || r->kind == ENDREASON_SESSION;
}
