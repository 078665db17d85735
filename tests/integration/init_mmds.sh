#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# /init in Firecracker mode against a stand-in metadata service on
# loopback (-mmds-addr): start-up id poll, token hash authorisation, the
# "reset allowed" marker, and NFS mount failure reporting.
cd "$(dirname "$0")/../.." || exit 1
. tests/lib.sh

MMDS_PORT=$(free_port)
MMDS_STATE=$(mktemp -d)
echo -n "" > "$MMDS_STATE/hash"
"$PY" - "$MMDS_PORT" "$MMDS_STATE" <<'PY' &
import http.server, json, sys, os
port, state = int(sys.argv[1]), sys.argv[2]
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_PUT(self):
        if self.path != "/latest/api/token" or self.headers.get("X-metadata-token-ttl-seconds") != "60":
            self.send_response(400); self.end_headers(); return
        self.send_response(200); self.end_headers(); self.wfile.write(b"sess-token")
    def do_GET(self):
        if self.headers.get("X-metadata-token") != "sess-token":
            self.send_response(401); self.end_headers(); return
        h = open(os.path.join(state, "hash")).read()
        body = json.dumps({"instanceID": "sbx-123", "envID": "tpl-9", "address": "", "accessTokenHash": h}).encode()
        self.send_response(200); self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
PY
MMDS_PID=$!
on_exit 'kill $MMDS_PID 2>/dev/null; rm -rf "$MMDS_STATE"; _t_cleanup'
mmds_up() { [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$MMDS_PORT/")" = 401 ]; }
wait_for 60 mmds_up

# Firecracker mode: no -isnotfc, metadata on loopback.
ENVD_PORT=$(free_port)
ENVD_URL="http://127.0.0.1:$ENVD_PORT"
"$ENVD_BIN" -port "$ENVD_PORT" -mmds-addr "127.0.0.1:$MMDS_PORT" -no-cgroups >/dev/null 2>&1 &
ENVD_PID=$!
ENVD_PIDS+=("$ENVD_PID")
wait_for 60 curl -s -o /dev/null "$ENVD_URL/health"
U=$ENVD_URL
# The start-up poll of the metadata service runs after the listener is up.
polled() { curl -s $U/envs | grep -q E2B_SANDBOX_ID; }
wait_for 60 polled
r=$(curl -s $U/envs)
expect_match "start-up poll stores E2B_SANDBOX_ID" '"E2B_SANDBOX_ID":"sbx-123"' "$r"
expect_match "start-up poll stores E2B_TEMPLATE_ID" '"E2B_TEMPLATE_ID":"tpl-9"' "$r"
expect_match "E2B_SANDBOX is true in Firecracker mode" '"E2B_SANDBOX":"true"' "$r"
expect_eq "/run/e2b/.E2B_SANDBOX_ID written" "sbx-123" "$(cat /run/e2b/.E2B_SANDBOX_ID 2>/dev/null)"

sha512() { printf '%s' "$1" | sha512sum | cut -d' ' -f1 | tr -d '\n'; }

# First-time set-up: no token yet, MMDS has no hash -> allowed.
expect_eq "first /init sets the token" 204 "$(curl -s -o /dev/null -w '%{http_code}' -X POST -d '{"accessToken":"t1"}' $U/init)"
# Rotation: a new token is accepted only when MMDS carries its hash.
r=$(curl -s -w ' %{http_code}' -X POST -d '{"accessToken":"t2"}' $U/init)
expect_eq "new token without MMDS hash is refused" "access token validation failed 401" "$r"
sha512 t2 > "$MMDS_STATE/hash"
expect_eq "new token with matching MMDS hash is accepted" 204 \
	"$(curl -s -o /dev/null -w '%{http_code}' -X POST -d '{"accessToken":"t2"}' $U/init)"
expect_eq "token t2 now gates" 200 "$(curl -s -o /dev/null -w '%{http_code}' -H 'X-Access-Token: t2' $U/envs)"
r=$(curl -s -w ' %{http_code}' -X POST -d '{}' $U/init)
expect_eq "reset without the marker is refused" "access token reset not authorized 401" "$r"
sha512 "" > "$MMDS_STATE/hash"
expect_eq "reset with the empty-hash marker is accepted" 204 \
	"$(curl -s -o /dev/null -w '%{http_code}' -X POST -d '{}' $U/init)"
expect_eq "token cleared: /envs open again" 200 "$(curl -s -o /dev/null -w '%{http_code}' $U/envs)"

# Replay guard: an older timestamp is acknowledged but not applied. Both
# are slightly in the past (less than 5 s), so the clock is not stepped.
# Both stamps come from one reading of the clock, so "older" is older
# whatever the clock does between the two requests (a loaded machine, or a
# step made by the first /init when it arrives late).
T0=$(date +%s)
ts() { date -u -d "@$((T0 - $1))" +%Y-%m-%dT%H:%M:%S.5Z; }
new_ts=$(ts 1) old_ts=$(ts 3)
curl -s -o /dev/null -X POST -d "{\"timestamp\":\"$new_ts\",\"envVars\":{\"A\":\"new\"}}" $U/init
expect_eq "older /init is still 204" 204 \
	"$(curl -s -o /dev/null -w '%{http_code}' -X POST -d "{\"timestamp\":\"$old_ts\",\"envVars\":{\"A\":\"old\"}}" $U/init)"
expect_match "older /init does not override newer data" '"A":"new"' "$(curl -s $U/envs)"

# NFS failure is a 400 with the reference's prefix.
r=$(curl -s -w ' %{http_code}' -X POST -d '{"volumeMounts":[{"nfs_target":"127.0.0.1:/nope","path":"/tmp/envd-nfs-test.$$/x"}]}' $U/init)
expect_match "failed NFS mount is 400" '^failed to setup NFS volumes: .* 400$' "$r"
rm -rf /tmp/envd-nfs-test.$$
check "envd alive" envd_alive
finish
