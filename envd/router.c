/* SPDX-License-Identifier: Apache-2.0 */
/*
 * router.c - the request pipeline (docs/protocol.md, "Request pipeline"): CORS, the access-token gate,
 * Basic-auth validation, then exact-path routing with Go/chi fall-backs.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "base/base64.h"
#include "base/log.h"
#include "sandbox/control.h"
#include "changes/changes.h"
#include "transfer/files_compose.h"
#include "transfer/files_get.h"
#include "transfer/files_post.h"
#include "envd/router.h"
#include "sandbox/upgrade.h"
#include "rpc/rpc.h"
#include "base/state.h"
#include "base/users.h"


int router_basic_user(const char *authz, char *out, size_t outlen)
{
	char dec[1024];
	if (!authz || strncasecmp(authz, "Basic ", 6) != 0)
		return 0;
	const char *b64 = authz + 6;
	size_t n = strlen(b64);
	if (base64_decoded_maxlen(n) >= sizeof(dec))
		return 0;
	ssize_t k = base64_decode_strict(dec, b64, n);
	if (k < 0)
		return 0;
	dec[k] = '\0';
	char *colon = memchr(dec, ':', (size_t)k);
	if (!colon)
		return 0;
	*colon = '\0';
	snprintf(out, outlen, "%s", dec);
	return 1;
}

/*
 * Resolve the Basic-auth user once, for every handler after this one: the
 * request carries it (r->user). An unknown user fails every path; a passwd
 * entry that does not parse is left for the RPC layer to report (it answers
 * internal, as the reference does). Returns 0, or -1 after answering.
 */
static int router_resolve_user(struct http_req *r)
{
	char name[256], msg[320], err[256] = "";
	if (router_basic_user(http_req_header(r, "authorization"), name, sizeof(name)) != 1)
		return 0;
	struct user *u = malloc(sizeof(*u));
	if (!u) {
		rpc_respond_error(r, RPC_RESOURCE_EXHAUSTED, "out of memory");
		return -1;
	}
	int rc = user_lookup(name, u, err, sizeof(err));
	if (rc == 0) {
		r->user = u;
		return 0;
	}
	free(u);
	if (rc == -EINVAL) {
		r->user_error = strdup(err);
		return 0;
	}
	snprintf(msg, sizeof(msg), "invalid username: '%s'", name);
	rpc_respond_error(r, RPC_UNAUTHENTICATED, msg);
	return -1;
}

static const char cors_expose[] =
	"Grpc-Status, Grpc-Message, Grpc-Status-Details-Bin, Location, Cache-Control, X-Content-Type-Options, ETag";

static bool cors_method_allowed(const char *m)
{
	static const char *const ok[] = {"HEAD", "GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		if (strcmp(m, ok[i]) == 0)
			return true;
	return false;
}

/* CORS pre-flight (docs/protocol.md, "Request pipeline", step 1): always 204, never reaches auth or routing. */
static void cors_preflight(struct http_req *r, const char *req_method)
{
	struct http_hdr h[5];
	size_t n = 0;
	const char *origin = http_req_header(r, "origin");
	const char *rh = http_req_header(r, "access-control-request-headers");

	h[n++] = (struct http_hdr){"Vary", "Origin, Access-Control-Request-Method, Access-Control-Request-Headers"};
	if (origin && cors_method_allowed(req_method)) {
		h[n++] = (struct http_hdr){"Access-Control-Allow-Origin", "*"};
		h[n++] = (struct http_hdr){"Access-Control-Allow-Methods", req_method};
		if (rh && *rh)
			h[n++] = (struct http_hdr){"Access-Control-Allow-Headers", rh};
		h[n++] = (struct http_hdr){"Access-Control-Max-Age", "7200"};
	}
	http_respond(r, 204, NULL, NULL, 0, h, n);
}

static bool token_excluded(const struct http_req *r)
{
	const char *p = r->path;
	if (r->method == HTTP_M_GET)
		return strcmp(p, "/health") == 0 || strcmp(p, "/files") == 0;
	if (r->method == HTTP_M_POST)
		return strcmp(p, "/files") == 0 || strcmp(p, "/init") == 0;
	return false;
}

struct route {
	const char *path;
	enum http_verb method;
	void (*fn)(struct http_req *r);
};

static const struct route routes[] = {
	{"/health", HTTP_M_GET, control_health},
	{"/metrics", HTTP_M_GET, control_metrics},
	{"/envs", HTTP_M_GET, control_envs},
	{"/init", HTTP_M_POST, control_init},
	{"/freeze", HTTP_M_POST, control_freeze},
	{"/unfreeze", HTTP_M_POST, control_unfreeze},
	{"/collapse", HTTP_M_POST, control_collapse},
	{"/fsfreeze", HTTP_M_POST, control_fsfreeze},
	{"/fsthaw", HTTP_M_POST, control_fsthaw},
	{"/upgrade", HTTP_M_POST, control_upgrade},
	{"/files", HTTP_M_GET, files_get},
	{"/files", HTTP_M_POST, files_post},
	{"/files/compose", HTTP_M_POST, files_compose},
	{"/changes", HTTP_M_GET, changes_http_get},
};

static int64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* One line per RPC and per /files request, when the exchange is over. */
static void log_done(struct http_req *r)
{
	const char *user = r->user ? r->user->name : state_default_user();
	double ms = (double)(now_ns() - r->t_start_ns) / 1e6;

	log_op("info", rpc_path_is_rpc(r->path) ? "rpc" : "files", r->op_id,
	       "%s %s user=%s status=%d%s duration_ms=%.3f", r->method_name, r->path, user,
	       r->resp_started ? r->status : 0, r->aborted ? " (client went away)" : "", ms);
}

void router_dispatch(struct http_req *r)
{
	const char *origin = http_req_header(r, "origin");
	const char *acrm = http_req_header(r, "access-control-request-method");
	bool is_rpc = rpc_path_is_rpc(r->path);

	if (!http_req_done_hook)
		http_req_done_hook = log_done;
	if (is_rpc || strncmp(r->path, "/files", 6) == 0) {
		r->op_id = log_next_op_id();
		r->t_start_ns = now_ns();
	}

	/* 1. CORS */
	if (r->method == HTTP_M_OPTIONS && acrm) {
		cors_preflight(r, acrm);
		return;
	}
	http_req_extra_header(r, "Vary", "Origin", false);
	if (origin && cors_method_allowed(r->method_name)) {
		http_req_extra_header(r, "Access-Control-Allow-Origin", "*", false);
		http_req_extra_header(r, "Access-Control-Expose-Headers", cors_expose, false);
	}

	/* 2. Access-token gate */
	if (state_token_is_set() && !token_excluded(r)) {
		const char *tok = http_req_header(r, "x-access-token");
		if (!tok || !state_token_equals(tok, strlen(tok))) {
			http_respond_json_error(r, 401,
						"unauthorized access, please provide a valid access token or method "
						"signing if supported");
			return;
		}
	}

	/* After a live upgrade only /health and /init are served until an
	 * /init succeeds: the orchestrator re-sends the state first. */
	if (upgrade_gate_closed() && !(r->method == HTTP_M_GET && strcmp(r->path, "/health") == 0) &&
	    !(r->method == HTTP_M_POST && strcmp(r->path, "/init") == 0)) {
		http_respond_json_error(r, 401, "envd not initialized");
		return;
	}

	/* 3. Basic auth: an unknown user named in the header fails every path. */
	if (router_resolve_user(r) < 0)
		return;

	/* 4. Routes */
	if (is_rpc) {
		rpc_dispatch(r);
		return;
	}
	bool path_known = false;
	struct http_hdr allow[4];
	size_t n_allow = 0;
	for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
		if (strcmp(routes[i].path, r->path) != 0)
			continue;
		path_known = true;
		if (routes[i].method == r->method) {
			routes[i].fn(r);
			return;
		}
		if (n_allow < 4)
			allow[n_allow++] = (struct http_hdr){"Allow", routes[i].method == HTTP_M_GET ? "GET" : "POST"};
	}
	if (path_known) {
		http_respond(r, 405, NULL, NULL, 0, allow, n_allow);
		return;
	}
	http_respond_text_error(r, 404, "404 page not found");
}
