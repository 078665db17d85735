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

extern bool log_verbose;

/* One JSON line: {"level":..,"timestamp":..,"logger":..,"message":..}. */
void log_msg(const char *level, const char *logger, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#define log_debug(lg, ...) log_msg("debug", lg, __VA_ARGS__)
#define log_info(lg, ...) log_msg("info", lg, __VA_ARGS__)
#define log_warn(lg, ...) log_msg("warn", lg, __VA_ARGS__)
#define log_error(lg, ...) log_msg("error", lg, __VA_ARGS__)

#endif
