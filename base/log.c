/* SPDX-License-Identifier: Apache-2.0 */
/*
 * log.c - JSON log lines on stdout, only with -verbose.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <jansson.h>

#include "base/log.h"

bool log_verbose;

void log_msg(const char *level, const char *logger, const char *fmt, ...)
{
	char msg[2048], ts[64];
	struct timespec now;
	struct tm tm;
	va_list ap;

	if (!log_verbose)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	clock_gettime(CLOCK_REALTIME, &now);
	gmtime_r(&now.tv_sec, &tm);
	size_t k = strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(ts + k, sizeof(ts) - k, ".%09ldZ", now.tv_nsec);
	json_t *o = json_pack("{s:s,s:s,s:s,s:s}", "level", level, "timestamp", ts, "logger", logger, "message", msg);
	if (!o)
		return;
	char *line = json_dumps(o, JSON_COMPACT);
	if (line) {
		fputs(line, stdout);
		fputc('\n', stdout);
		fflush(stdout);
		free(line);
	}
	json_decref(o);
}
