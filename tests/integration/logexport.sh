#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# arm64: skip (its upgrade section: under qemu-user envd cannot exec its own aarch64 image)
# tests: alone (Firecracker mode writes /run/e2b/.E2B_SANDBOX_ID, which init_mmds.sh checks)
# Log exporter: in Firecracker mode, once the metadata service (a stand-in
# on loopback, -mmds-addr) names a collector `address`, every log line is
# POSTed there as JSON with instanceID and envID. The collector is down at
# first (failures reported once, lines kept), then comes up and receives
# the backlog and new lines; /health stays prompt throughout.
cd "$(dirname "$0")/../.." || exit 1
. tests/lib.sh
PY=/usr/bin/python3
[ -x $PY ] || PY=python3
W=$(mktemp -d /tmp/envd-logexport.XXXXXX)
MMDS_PORT=$(free_port)
COL_PORT=$(free_port)
COL_PID=
$PY - "$MMDS_PORT" "$COL_PORT" <<'PY' &
import http.server, json, sys
port, col = int(sys.argv[1]), sys.argv[2]
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_PUT(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"sess")
    def do_GET(self):
        body = json.dumps({"instanceID": "sbx-log", "envID": "tpl-log",
                           "address": "http://127.0.0.1:%s/logs" % col, "accessTokenHash": ""}).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
PY
MMDS_PID=$!
on_exit 'kill $MMDS_PID $COL_PID 2>/dev/null; _t_cleanup; rm -rf "$W"'
wait_for 5 curl -s -o /dev/null -X PUT "http://127.0.0.1:$MMDS_PORT/latest/api/token"

ENVD_PORT=$(free_port)
ENVD_URL="http://127.0.0.1:$ENVD_PORT"
ENVD_LOG=$W/envd.log
ENVD_LOGS+=("$ENVD_LOG")
"$ENVD_BIN" -port "$ENVD_PORT" -mmds-addr "127.0.0.1:$MMDS_PORT" -no-port-forward -no-cgroups \
	-upgrade-dir "$W" -handover-file "$W/handover.pb" >"$ENVD_LOG" 2>&1 &
ENVD_PID=$!
ENVD_PIDS+=("$ENVD_PID")
outage_t0=$SECONDS
wait_for 10 curl -s -o /dev/null "$ENVD_URL/health"
U=$ENVD_URL

run() { # run MARKER: a process start and end, both logged
	curl -s --max-time "$HANG_S" -o /dev/null -H 'Content-Type: application/connect+json' \
		--data-binary @<($PY -c 'import sys,struct,json
b=json.dumps({"process":{"cmd":"echo","args":[sys.argv[1]]}}).encode()
sys.stdout.buffer.write(b"\0"+struct.pack(">I",len(b))+b)' "$1") "$U/process.Process/Start"
}
# wait_file FILE PATTERN SECONDS: until the stderr report (or the collector
# file) has it; SECONDS or HANG_S at most (see wait_for).
wait_file() { wait_for "$3" grep -q -- "$2" "$1"; }

# Collector down: the lines wait, the failure is reported once.
run marker-while-down
run marker-while-down-2
check "collector down: the failure is reported on stderr" wait_file "$ENVD_LOG" "log exporter: post to 127.0.0.1:$COL_PORT" 20
# Against the same 20 requests to the metadata stand-in just before, so a
# loaded machine slows both sides alike: a loop held up by the exporter
# would take far longer than a Python server answering one at a time.
t0=$(date +%s%N)
for _ in $(seq 20); do curl -s -o /dev/null "http://127.0.0.1:$MMDS_PORT/latest/api/token"; done
ref_ms=$((($(date +%s%N) - t0) / 1000000))
t0=$(date +%s%N)
for _ in $(seq 20); do curl -s -o /dev/null "$U/health"; done
ms=$((($(date +%s%N) - t0) / 1000000))
check "loop not held up while the collector is down (20 /health in ${ms} ms, the stand-in ${ref_ms} ms)" \
	test "$ms" -lt $((3 * ref_ms + 2000))

# Collector up: backlog and new lines arrive.
$PY - "$COL_PORT" "$W/collected" <<'PY' &
import http.server, sys
port, out = int(sys.argv[1]), sys.argv[2]
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(n)
        ok = self.path == "/logs" and self.headers.get("Content-Type") == "application/json"
        with open(out, "ab") as f:
            f.write((body if ok else b"BAD-REQUEST") + b"\n")
        self.send_response(200 if ok else 400); self.send_header("Content-Length", "0"); self.end_headers()
http.server.ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
PY
COL_PID=$!
outage_s=$((SECONDS - outage_t0 + 1))
check "backlog from while the collector was down arrives" wait_file "$W/collected" "marker-while-down-2" 30
check "earlier backlog line too" grep -q "marker-while-down" "$W/collected"
run marker-while-up
check "new lines arrive" wait_file "$W/collected" "marker-while-up" 20
curl -s -o /dev/null "$U/files?path=/nonexistent-file"
check "a /files request line arrives" wait_file "$W/collected" '"logger":"files"' 20

check "lines from before the metadata service answered are sent too" grep -q '"message":"listening on port' "$W/collected"

# An upgrade: its lines reach the collector from both images.
expect_eq "/init" 204 "$(curl -s -o /dev/null -w '%{http_code}' -X POST -d '{}' "$U/init")"
curl -s -o /dev/null --max-time "$HANG_S" -X POST "$U/upgrade"
check "the outgoing image's last lines are delivered before the exec" grep -q 'handing over"' "$W/collected"
check "the new image's hand-over line arrives" wait_file "$W/collected" '"message":"upgrade: took over' 30
check "same process after the upgrade" envd_alive

res=$($PY - "$W/collected" <<'PY'
import json, sys
lines = [l for l in open(sys.argv[1]).read().splitlines() if l]
bad = [l for l in lines if l == "BAD-REQUEST"]
objs = [json.loads(l) for l in lines if l != "BAD-REQUEST"]
ids = all(o.get("instanceID") == "sbx-log" and o.get("envID") == "tpl-log" for o in objs)
fields = all(all(k in o for k in ("level", "timestamp", "logger", "message")) for o in objs)
rpc = [o for o in objs if o["logger"] == "rpc"]
opid = all(isinstance(o.get("operation_id"), int) and "user=root" in o["message"] and "duration_ms=" in o["message"] for o in rpc)
started = any("started: echo marker-while-up" in o["message"] for o in objs)
ended = any(o["logger"] == "process" and "ended" in o["message"] for o in objs)
print(len(bad), ids, fields, len(rpc) > 0 and opid, started, ended)
PY
)
expect_eq "every line: JSON with instanceID/envID; RPC lines with operation id, user, duration; process start and end" \
	"0 True True True True True" "$res"
n=$(grep -c "log exporter:" "$ENVD_LOG")
# Once, and again only once a minute has passed: a loaded machine that
# takes minutes to get here sees one report per minute of the outage.
check "failure reported once for the whole outage (at most once a minute: $n in $outage_s s)" \
	test "$n" -ge 1 -a "$n" -le $((outage_s / 60 + 1))
check "envd alive" envd_alive
finish
