#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The cost of a command's cgroup, measured in the VM (the only place with
# cgroup2 and every controller delegated, as on the platform): Start round
# trips of /bin/true from inside the guest against the image's envd (a
# cgroup per command) and a second envd in the same guest with -no-cgroups,
# side by side, one at a time and 50 at once. Prints one JSON line, as
# scripts/bench.sh records it:
#   {"accel":"tcg","seq":{"n":N,"a":{"p50_ms":..},"b":{..}},"burst":{..},"sdk_burst":{..},"errors":E}
# ("a" = with cgroups, "b" = -no-cgroups). Needs the image (make vm-image)
# and build/bench/guestrtt; the VM is powered off and removed afterwards.
#
#   scripts/vm-bench-rtt.sh [N] [CONCURRENT] [ROUNDS]    default 50 50 5
set -uo pipefail
cd "$(dirname "$0")/.."
N=${1:-50}
C=${2:-50}
R=${3:-5}
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
CLIENT=build/bench/guestrtt
[ -x "$CLIENT" ] || { echo "vm-bench-rtt: $CLIENT is missing (make $CLIENT)" >&2; exit 1; }
run=$PWD/build/vm/runs/rtt-$$
mkdir -p "$run"
port=$((20000 + RANDOM % 12000))
# No log collector: each shipped log line would make QEMU start a socat on
# the host (guestfwd), stalling the guest in proportion to how much the
# image's envd logs, which the -no-cgroups one below (with -isnotfc) does
# not ship: a 50-call burst took 16 s instead of 3.6 s for that alone.
VM_LOG_COLLECTOR=off VM_PORT=$port VM_RUN_DIR=$run VM_PARENT_PID=$$ bash scripts/vm-run.sh >"$run.log" 2>&1 &
rp=$!
stop() {
	kill -TERM "$rp" 2>/dev/null
	wait "$rp" 2>/dev/null
	rm -rf "$run" "$run.log"
}
trap stop EXIT
for _ in $(seq 1 6000); do
	[ -s "$run/env" ] && break
	kill -0 "$rp" 2>/dev/null || break
	sleep 0.05
done
[ -s "$run/env" ] || { echo '{"errors":1,"why":"the VM did not boot"}'; exit 1; }
. "$run/env"
export VM_URL
gexec() { "$PY" scripts/vm-exec.py -t 1800 "$@"; }

# The client, into the guest through envd's own upload.
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: application/octet-stream' \
	--data-binary @"$CLIENT" "$VM_URL/files?path=/tmp/guestrtt&username=root")
[ "$code" = 200 ] || { echo "{\"errors\":1,\"why\":\"upload: HTTP $code\"}"; exit 1; }
# The second envd runs where the first one does (its cgroup, nice,
# oom_score_adj), so the two differ only by -no-cgroups.
gexec 'chmod +x /tmp/guestrtt
main=$(pgrep -o -x envd)
setsid /usr/bin/envd -isnotfc -no-cgroups -no-port-forward -port 49990 </dev/null >/tmp/envd2.log 2>&1 &
p=$!
echo "$p" >"/sys/fs/cgroup$(sed -n "s/^0:://p" /proc/$main/cgroup)/cgroup.procs"
renice -n "$(ps -o ni= -p "$main")" -p "$p" >/dev/null
cat "/proc/$main/oom_score_adj" >"/proc/$p/oom_score_adj"
for _ in $(seq 600); do curl -s -o /dev/null http://127.0.0.1:49990/health && exit 0; sleep 0.1; done
exit 1' >/dev/null || { echo '{"errors":1,"why":"second envd did not start"}'; exit 1; }

seq_json=$(gexec "/tmp/guestrtt seq 49983 49990 $N")
burst_json=$(gexec "/tmp/guestrtt burst 49983 49990 $C $R")
# The same burst as users make it: C concurrent commands.run from the
# official SDK on the host, through the forwarded port, with the SDK's
# default timeouts (bench/sdk.mjs burst), against the image's envd and then
# the -no-cgroups one (reached through a host forward added to QEMU's user
# network now).
sdk_json=null
port2=$((port + 1))
if command -v node >/dev/null && [ -d tests/sdk/node_modules/e2b ] &&
	printf 'hostfwd_add net0 tcp:127.0.0.1:%s-%s:49990\n' "$port2" "$VM_GUEST_IP" |
	socat -t 2 - "UNIX-CONNECT:$VM_MONITOR" >/dev/null 2>&1; then
	sdk_json=$(E2B_DEBUG=true E2B_SANDBOX_URL=$VM_URL BURST_URLS="$VM_URL http://127.0.0.1:$port2" \
		node bench/sdk.mjs burst "$C" 2>/dev/null | tail -n1)
fi
"$PY" - "$VM_ACCEL" "$seq_json" "$burst_json" "$sdk_json" <<'EOF'
import json, sys
accel, s, b, k = sys.argv[1:5]
out = {"accel": accel, "errors": 0}
try:
    sb = list(json.loads(k).values())
    out["sdk_burst"] = {"a": sb[0], "b": sb[1]}
except (ValueError, IndexError, AttributeError):
    out["sdk_burst"] = None
for k, v in (("seq", s), ("burst", b)):
    try:
        out[k] = json.loads(v.strip().splitlines()[-1])
        out["errors"] += out[k]["a"]["errors"] + out[k]["b"]["errors"]
    except (ValueError, IndexError, KeyError):
        out[k] = None
        out["errors"] += 1
print(json.dumps(out))
EOF
