/* SPDX-License-Identifier: Apache-2.0 */
/*
 * upgrade.h - live upgrade: POST /upgrade replaces the envd image in place
 * (same pid, execve) while the workload keeps running, and the new image
 * takes everything over from a hand-over record (docs/upgrade.md).
 */
#ifndef ENVD_UPGRADE_H
#define ENVD_UPGRADE_H

#include <stdbool.h>
#include <stddef.h>

#include "http/http.h"

/* Directory of the uploaded binary, <dir>/envd.next (flag -upgrade-dir). */
extern char upgrade_dir[256];
/* Where the record is written and read (flag -handover-file). */
extern char upgrade_record_path[256];
/* Seconds the new binary has to answer -version (flag -upgrade-preflight-ms). */
extern double upgrade_preflight_s;
/* The version this image reports (for the record's from_ver). */
extern const char *upgrade_version;

/* The command line to re-execute with (main's argv, kept by reference). */
void upgrade_set_argv(int argc, char **argv);

/* POST /upgrade once /init has succeeded (routing and token are done). */
void upgrade_request(struct http_req *r);

/*
 * The first half of the hand-over, without the exec (POST /upgrade runs it
 * right before execve; tests): every owner saves its part of the state now
 * (base/handover.h), and the record is written to upgrade_record_path
 * (mode 0600, via a temporary file and a rename). The descriptors it names
 * stay inheritable and the change journal's thread stays stopped until
 * upgrade_record_undo. 0, with the record's size in *len; or -errno with a
 * message in err, and everything as it was.
 */
int upgrade_record_write(size_t *len, char *err, size_t errlen);
/* The exec failed: remove the record, make its descriptors close-on-exec
 * again and let the change journal read again. */
void upgrade_record_undo(void);

/*
 * Start-up with -resume-handover: read the record, take over processes,
 * retained exits, watchers, mounts and the /init state. Returns the
 * inherited HTTP listener (>= 0), -1 when the record carries none (then
 * the caller listens as usual), or -errno when there is no usable record.
 */
int upgrade_resume(void);
/* After portfwd_start: take over the inherited forward listeners and
 * relays, then close any inherited descriptor nothing took over. */
void upgrade_resume_forwards(void);

/* Booted from a hand-over and no /init has succeeded since. */
bool upgrade_gate_closed(void);
/* X-Envd-Handover value for /init responses, NULL when not resumed. */
const char *upgrade_handover_header(void);
/* An /init succeeded: open the gate and thaw the workload. */
void upgrade_init_done(void);

/*
 * Crash survival (docs/crash.md): the /init state (token, env vars,
 * default user and workdir) goes to the service manager's fd store after
 * every change, and the next envd restores it from the fds it was handed
 * (names envd.state.*; consumed, set to -1). No-ops without a store.
 */
struct sdnotify_fd;
void upgrade_keep_init_state(void);
void upgrade_restore_init_state(struct sdnotify_fd *fds, size_t n);

#endif
