/* SPDX-License-Identifier: Apache-2.0 */
/*
 * keep.h - what the next envd needs to take a process back after a crash,
 * kept outside envd's memory (docs/crash.md).
 *
 * When a service manager keeps a file descriptor store for envd (our
 * init, or systemd with FileDescriptorStoreMax=; base/sdnotify.h), every
 * process gets a keep file: a memfd holding a header (the ring's state,
 * the exit once known, stdin closed), the record the process was started
 * with (config, tag, cgroup) and the output ring's storage itself
 * (ring_use), so output read from the pipe is in memory that outlives
 * envd. The keep file, the output pipes or PTY master, the stdin pipe and
 * a pidfd go to the store as p<pid>.k, .o/.e, .i, .t and .f. A new envd
 * started with them (LISTEN_FDS) takes each process back through
 * process_adopt, as a live upgrade does, and learns how a process it did
 * not start ended from its pidfd and the exit ring of the reaper
 * (base/exitrec.h).
 *
 * keep.c is an observer of the process table (struct process_keeper in
 * process.h): the table tells it what happens to each process and never
 * calls it otherwise. Everything runs on envd_loop. Failures leave the
 * process running unkept (logged once).
 */
#ifndef PROCESS_KEEP_H
#define PROCESS_KEEP_H

#include <stdbool.h>
#include <stddef.h>

/* Most descriptors taken from the store on start. */
#define KEEP_HANDED_MAX 65536

/* Keep processes (a manager keeps our fds and -crash-keep is on). */
extern bool keep_enabled;

/*
 * Install the keeper on the process table (process_keeper) and set
 * keep_enabled: whether new processes get keep files. Call once at start,
 * before any process is started or adopted (a live upgrade's included).
 */
void keep_setup(bool enabled);

/*
 * At start: take back every process a previous envd kept, from the fds
 * the manager handed over (sdnotify_listen_fds). The ones of processes
 * (p<pid>.*) and the reaper's exit ring are consumed (set to -1), others
 * left. Call once, after the cgroups are set up and before the loop runs
 * (it installs the keeper if keep_setup did not). Returns the number of
 * processes adopted.
 */
struct sdnotify_fd;
size_t keep_adopt_all(struct sdnotify_fd *fds, size_t n);

#endif
