/* SPDX-License-Identifier: Apache-2.0 */
/*
 * log.h - JSON-lines logging to stdout (only with -verbose) and start-up
 * errors to stderr.
 *
 * Errors: none; a line that cannot be written is dropped.
 */
#ifndef ENVD_LOG_H
#define ENVD_LOG_H

#include <stdbool.h>
#include <stddef.h>

extern bool log_verbose;
/* Also hand every line (without newline) to this, when set (the log
 * exporter). Called on the logging thread; must not block or log. */
extern void (*log_sink)(const char *line, size_t len);

/* One JSON line: {"level":..,"timestamp":..,"logger":..,"message":..}. */
void log_msg(const char *level, const char *logger, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* The same with an "operation_id" field. */
void log_op(const char *level, const char *logger, unsigned long long op_id, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Next operation id (a process-wide counter from 1). */
unsigned long long log_next_op_id(void);

#define log_debug(lg, ...) log_msg("debug", lg, __VA_ARGS__)
#define log_info(lg, ...) log_msg("info", lg, __VA_ARGS__)
#define log_warn(lg, ...) log_msg("warn", lg, __VA_ARGS__)
#define log_error(lg, ...) log_msg("error", lg, __VA_ARGS__)

#endif
