/* SPDX-License-Identifier: Apache-2.0 */
/*
 * logexport.h - every JSON log line, with the sandbox's instanceID and
 * envID added, POSTed to the collector address from the metadata service.
 * Bounded: LOGEXPORT_QUEUE_MAX bytes queued (oldest dropped first), lines
 * over LOGEXPORT_LINE_MAX dropped; failures reported on stderr at most
 * once per LOGEXPORT_REPORT_S. Never blocks the loop.
 */
#ifndef ENVD_LOGEXPORT_H
#define ENVD_LOGEXPORT_H

#include <stdbool.h>
#include <stddef.h>

#define LOGEXPORT_QUEUE_MAX (8u << 20)
#define LOGEXPORT_LINE_MAX (192u * 1024)
#define LOGEXPORT_REPORT_S 60
#define LOGEXPORT_TIMEOUT_S 10.0

/* Queue bound in bytes (tests lower it). */
extern size_t logexport_queue_max;

/*
 * Start exporting to `address` ("http://host[:port][/path]"), or switch
 * to a new address and ids. 0, or -EINVAL for an address it cannot use.
 */
int logexport_configure(const char *address, const char *instance_id, const char *env_id);

/* "http://host[:port][/path]" -> parts; 0 or -EINVAL. */
int logexport_parse_url(const char *url, char *host, size_t hostlen, char *port, size_t portlen, char *path,
			size_t pathlen);

/*
 * Start queueing log lines now (Firecracker mode, at start-up): they are
 * sent once logexport_configure names the collector.
 */
void logexport_hold(void);

/* The metadata service names no collector: stop queueing, drop the queue. */
void logexport_release(void);

/* Nothing waiting to be sent (or exporting never started). */
bool logexport_idle(void);

/* Lines delivered, lines dropped, bytes waiting. */
void logexport_stats(unsigned long long *sent, unsigned long long *dropped, size_t *queued);

#endif
