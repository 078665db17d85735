/* SPDX-License-Identifier: Apache-2.0 */
/*
 * log.c - JSON log lines on stdout, only with -verbose.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "base/log.h"

bool log_verbose;
void (*log_sink)(const char *line, size_t len);

static void log_v(const char *level, const char *logger, unsigned long long op_id, const char *fmt, va_list ap)
{
	char msg[2048], ts[64];
	struct timespec now;
	struct tm tm;

	if (!log_verbose && !log_sink)
		return;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	clock_gettime(CLOCK_REALTIME, &now);
	gmtime_r(&now.tv_sec, &tm);
	size_t k = strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(ts + k, sizeof(ts) - k, ".%09ldZ", now.tv_nsec);
	json_t *o = json_pack("{s:s,s:s,s:s,s:s}", "level", level, "timestamp", ts, "logger", logger, "message", msg);
	if (!o)
		return;
	if (op_id)
		json_object_set_new(o, "operation_id", json_integer((json_int_t)op_id));
	char *line = json_dumps(o, JSON_COMPACT);
	if (line) {
		if (log_verbose) {
			fputs(line, stdout);
			fputc('\n', stdout);
			fflush(stdout);
		}
		if (log_sink)
			log_sink(line, strlen(line));
		free(line);
	}
	json_decref(o);
}

void log_msg(const char *level, const char *logger, const char *fmt, ...)
{
	va_list ap;

	if (!log_verbose && !log_sink)
		return;
	va_start(ap, fmt);
	log_v(level, logger, 0, fmt, ap);
	va_end(ap);
}

void log_op(const char *level, const char *logger, unsigned long long op_id, const char *fmt, ...)
{
	va_list ap;

	if (!log_verbose && !log_sink)
		return;
	va_start(ap, fmt);
	log_v(level, logger, op_id, fmt, ap);
	va_end(ap);
}

unsigned long long log_next_op_id(void)
{
	static unsigned long long next;

	return ++next;
}
