/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control.h - the control endpoints (docs/protocol.md, "Control
 * endpoints"): health, metrics, envs, init, and the orchestrator-only
 * freeze/collapse/upgrade family.
 *
 * Errors: answered on the exchange as HTTP statuses (docs/protocol.md,
 * "Control endpoints").
 */
#ifndef ENVD_CONTROL_H
#define ENVD_CONTROL_H

#include <stdint.h>

#include "http/http.h"

void control_health(struct http_req *r);
void control_metrics(struct http_req *r);
void control_envs(struct http_req *r);
void control_init(struct http_req *r);
void control_freeze(struct http_req *r);
void control_unfreeze(struct http_req *r);
void control_collapse(struct http_req *r);
void control_fsfreeze(struct http_req *r);
void control_fsthaw(struct http_req *r);
void control_upgrade(struct http_req *r);

/* -isnotfc: not in Firecracker (no MMDS). */
extern bool control_not_fc;

/* Take the first CPU sample for cpu_used_pct. */
void control_metrics_init(void);
/* True once an /init succeeded. */
bool control_initialised(void);
/* RFC 3339 (any offset, optional fraction) to ns since the epoch; 0 or -EINVAL. */
int control_parse_rfc3339(const char *s, int64_t *ns);

#endif
