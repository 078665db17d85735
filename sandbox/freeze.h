/* SPDX-License-Identifier: Apache-2.0 */
/*
 * freeze.h - freezing the workload before a VM snapshot, thawing after.
 *
 * /freeze freezes the workload cgroups (legacy mode: `user` and `ptys`;
 * hierarchy mode: also every other cgroup under the root that is not on
 * envd's own ancestor chain or on a short allowlist of system services).
 * Cgroups the guest had frozen itself are recorded before our first freeze
 * and left frozen by the thaw. Thaw happens on /unfreeze, on every
 * authorised /init, and from a watchdog if no thaw follows a freeze within
 * FREEZE_WATCHDOG_S. envd itself is never frozen, so /health, /init and
 * /unfreeze keep working. Everything runs on the loop, which serialises
 * freeze and thaw; only the confirmation wait spans loop iterations.
 *
 * The state (applied or not, the guest-frozen list) is exported through
 * freeze_state_get/_set, and carried across a live upgrade's exec by
 * freeze_handover_save/_restore.
 */
#ifndef SANDBOX_FREEZE_H
#define SANDBOX_FREEZE_H

#include <stdbool.h>
#include <stddef.h>

#include "http/http.h"

#define FREEZE_WATCHDOG_S 600.0
#define FREEZE_MAX_CGROUPS 8192
#define FREEZE_GUEST_MAX 256

void freeze_http(struct http_req *r);   /* POST /freeze */
void freeze_http_unfreeze(struct http_req *r);   /* POST /unfreeze */
void freeze_http_fs(struct http_req *r, bool freeze);   /* POST /fsfreeze, /fsthaw */

/* Thaw the workload (what /unfreeze does). 0 or -errno of the first failure. */
int freeze_thaw(void);

/*
 * For /init: when a freeze of ours is in effect, describe the frozen set
 * as the X-Envd-Freeze-Audit JSON into buf and return true.
 */
bool freeze_audit(char *buf, size_t len);

/* Exportable state. `guest` paths are relative to the cgroup root. */
struct freeze_state {
	bool applied;                 /* a freeze of ours is in effect */
	size_t n_guest;
	char guest[FREEZE_GUEST_MAX][256];
};
void freeze_state_get(struct freeze_state *out);
/* Restore (re-arming the watchdog when applied). */
void freeze_state_set(const struct freeze_state *in);

/*
 * The freeze state in the hand-over record (base/handover.h): whether a
 * freeze of ours is in effect (field 1007) and the guest-frozen cgroups
 * (field 8; the record's schema is 2 when there are any). The save
 * borrows the paths (unchanged until the record is packed); the restore
 * re-arms the watchdog when a freeze was in effect.
 */
struct handover;
void freeze_handover_save(struct handover *h);
void freeze_handover_restore(struct handover *h);

#endif
