#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests: alone (Firecracker mode writes /run/e2b/.E2B_SANDBOX_ID, which init_mmds.sh checks)
# Metadata route self-heal: user code redirects 169.254.169.254:80 with a
# nat rule; /init's metadata look-up fails once, envd puts a RETURN rule
# for the metadata address first in the nat chains, and the retry
# succeeds. Runs in a private network namespace (its own nat table).
set -uo pipefail
cd "$(dirname "$0")/../.."

if [ -z "${MMDS_ROUTE_IN_NETNS:-}" ]; then
	if ! unshare -n true 2>/dev/null || ! command -v iptables >/dev/null; then
		echo "SKIP: needs a network namespace and iptables"
		echo "mmds_route: 0 passed, 0 failed"
		exit 0
	fi
	MMDS_ROUTE_IN_NETNS=1 exec unshare -n bash "$0" "$@"
fi

. tests/lib.sh
T_NAME=mmds_route
PY=/usr/bin/python3
[ -x $PY ] || PY=python3
MMDS=169.254.169.254
ip link set lo up
ip addr add "$MMDS/32" dev lo
W=$(mktemp -d /tmp/envd-mmds-route.XXXXXX)
sha512() { printf '%s' "$1" | sha512sum | cut -d' ' -f1 | tr -d '\n'; }
sha512 t1 >"$W/hash"
$PY - "$MMDS" "$W/hash" <<'PY' &
import http.server, json, sys
addr, hashfile = sys.argv[1], sys.argv[2]
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_PUT(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"sess")
    def do_GET(self):
        body = json.dumps({"instanceID": "sbx-r", "envID": "tpl-r", "address": "",
                           "accessTokenHash": open(hashfile).read()}).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
http.server.HTTPServer((addr, 80), H).serve_forever()
PY
MMDS_PID=$!
on_exit 'kill $MMDS_PID 2>/dev/null; _t_cleanup; rm -rf "$W"'
wait_for 5 curl -s -o /dev/null -X PUT "http://$MMDS/latest/api/token"

ENVD_PORT=$(free_port)
U="http://127.0.0.1:$ENVD_PORT"
ENVD_LOG=$W/envd.log
ENVD_LOGS+=("$ENVD_LOG")
"$ENVD_BIN" -port "$ENVD_PORT" -no-port-forward -no-cgroups -verbose >"$ENVD_LOG" 2>&1 &
ENVD_PID=$!
ENVD_PIDS+=("$ENVD_PID")
wait_for 10 curl -s -o /dev/null "$U/health"
code() { curl -s -o /dev/null -w '%{http_code}' --max-time "$HANG_S" "$@"; }

expect_eq "first /init sets token t1" 204 "$(code -X POST -d '{"accessToken":"t1"}' "$U/init")"
# User code hijacks the metadata address: to a closed port.
iptables -t nat -A OUTPUT -d "$MMDS" -p tcp --dport 80 -j DNAT --to-destination "$MMDS:9"
check "the redirect breaks the metadata service" test "$(code --max-time 2 -X PUT "http://$MMDS/latest/api/token")" = 000
# Rotating to t2 needs the metadata service (its hash authorises t2).
sha512 t2 >"$W/hash"
expect_eq "/init with a new token succeeds after the self-heal" 204 \
	"$(code -X POST -d '{"accessToken":"t2"}' "$U/init")"
expect_match "RETURN rule first in OUTPUT" "^-A OUTPUT -d $MMDS/32 -p tcp -m tcp --dport 80 -j RETURN" \
	"$(iptables -t nat -S OUTPUT | grep -v '^-P' | head -1)"
expect_match "and in PREROUTING" "RETURN" "$(iptables -t nat -S PREROUTING | grep -v '^-P' | head -1)"
expect_eq "token t2 now gates" 200 "$(code -H 'X-Access-Token: t2' "$U/envs")"
# A second heal does not pile up rules.
iptables -t nat -I OUTPUT 1 -d "$MMDS" -p tcp --dport 80 -j DNAT --to-destination "$MMDS:9"
sha512 t3 >"$W/hash"
expect_eq "again after a new redirect" 204 "$(code -X POST -d '{"accessToken":"t3"}' "$U/init")"
expect_eq "one RETURN rule per chain" 1 "$(iptables -t nat -S OUTPUT | grep -c RETURN)"
check "envd alive" envd_alive
finish
