/* SPDX-License-Identifier: Apache-2.0 */
/*
 * session_handover.h - the shell sessions' part of the live-upgrade record
 * (base/handover.h, docs/upgrade.md, docs/sessions.md): each session's
 * name, user, login environment, private directory, shell pid, counters,
 * and the descriptors that cross the exec (command and status pipes, the
 * running command's input, those held for background jobs).
 *
 * The save keeps those descriptors across the exec. The restore adopts
 * each session (session.h, session_adopt); one that cannot be taken over
 * has its descriptors closed and its shell's process group killed, so
 * nothing of it is left behind. Loop thread only.
 */
#ifndef PROCESS_SESSION_HANDOVER_H
#define PROCESS_SESSION_HANDOVER_H

struct handover;

void session_handover_save(struct handover *h);
void session_handover_restore(struct handover *h);

#endif
