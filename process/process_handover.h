/* SPDX-License-Identifier: Apache-2.0 */
/*
 * process_handover.h - the process table's part of the live-upgrade record
 * (base/handover.h, docs/upgrade.md): every running process (pid, tag,
 * config, kill deadline, descriptors, unread stdin, a reaped status, its
 * cgroup leaf) and every finished one still retained (end event, time
 * left), each with its output ring and offsets.
 *
 * The save keeps each process's stdout/stderr/stdin (or PTY master)
 * descriptor across the exec and borrows the table's strings and configs
 * (unchanged until the record is packed). The restore adopts them into the
 * table (process.h, process_adopt): a process whose pid is gone and has no
 * descriptor left, or a retained one whose time is up, is left out;
 * counts go to h->taken (procs, retained). Loop thread only.
 */
#ifndef PROCESS_PROCESS_HANDOVER_H
#define PROCESS_PROCESS_HANDOVER_H

struct handover;

void process_handover_save(struct handover *h);
void process_handover_restore(struct handover *h);

#endif
