/* SPDX-License-Identifier: Apache-2.0 */
/*
 * waitstatus.h - a child's wait status as Go's os.ProcessState shows it
 * (EndEvent fields; docs/protocol.md, "Go-compatible strings").
 *
 * Errors: none.
 */
#ifndef PROCESS_WAITSTATUS_H
#define PROCESS_WAITSTATUS_H

#include <stdbool.h>
#include <stddef.h>

/* Go's name for signal `sig` ("killed", "hangup", ...), or NULL if none. */
const char *waitstatus_signal_name(int sig);

/*
 * From a waitpid() status: *exit_code (N, or -1 when signalled), *exited,
 * and the status text into buf ("exit status N", "signal: killed",
 * "signal: aborted (core dumped)", "signal: signal 34").
 */
void waitstatus_describe(int wstatus, int *exit_code, bool *exited, char *buf, size_t len);

#endif
