/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mmds.h - Firecracker's metadata service (docs/protocol.md, "POST /init"),
 * fetched without blocking the loop: PUT /latest/api/token, then GET / with
 * that token.
 *
 * Errors: a fetch reports 0 or a negative errno to its callback;
 * mmds_fetch() returns NULL when it cannot start.
 */
#ifndef ENVD_MMDS_H
#define ENVD_MMDS_H

struct mmds_meta {
	char instance_id[256];  /* sandbox id */
	char env_id[256];       /* template id */
	char address[512];      /* log collector URL */
	char token_hash[256];   /* hex SHA-512 of the access token */
};

/* Metadata service address, "host:port" (flag -mmds-addr). */
extern char mmds_addr[64];

/*
 * Start one fetch (10 s budget). cb runs once on the loop with rc 0 and
 * the metadata, or a negative errno and NULL. Returns a handle for
 * mmds_cancel, or NULL when the fetch could not even start (cb not run).
 */
struct mmds_fetch;
struct mmds_fetch *mmds_fetch(void (*cb)(void *ud, int rc, const struct mmds_meta *m), void *ud);
/* Drop a pending fetch; its callback will not run. */
void mmds_cancel(struct mmds_fetch *f);

/*
 * Start-up poller (Firecracker mode): every 50 ms until one fetch works,
 * then store E2B_SANDBOX_ID/E2B_TEMPLATE_ID in the env store and in
 * /run/e2b. With a bound in seconds (0 = none).
 */
void mmds_poll_ids(double bound_s);

#endif
