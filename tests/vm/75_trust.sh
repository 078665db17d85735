#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Why a command ended, where the memory controller is (docs/protocol.md,
# "Why a command ended"): a command over its 32 MiB memory.max is killed by
# the kernel's OOM killer, and its end event says so, in `error` and in the
# structured `reason` (kind, memory.max, peak, signal); one that envd kills
# at its deadline (through its cgroup) says that instead. The host's
# cgroup v1 gives envd's leaves no memory controller, hence here.
#
#   ENVD_URL=http://<guest>:49983 [ENVD_TOKEN=...] bash tests/vm/75_trust.sh
#
# ENVD_URL / ENVD_TOKEN default to VM_URL / VM_TOKEN of the VM test bed.
set -u
. "$(dirname "$0")/../common.sh" # wait_for, HANG_S
URL=${ENVD_URL:-${VM_URL:-}}
TOKEN=${ENVD_TOKEN:-${VM_TOKEN:-}}
[ -n "$URL" ] || { echo "trust: set ENVD_URL to the VM's envd"; exit 2; }
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
PASS=0
FAIL=0
ok() { PASS=$((PASS + 1)); echo "ok   - $1"; }
nok() { FAIL=$((FAIL + 1)); echo "FAIL - $1${2:+: $2}"; }
check_re() { if [[ $3 =~ $2 ]]; then ok "$1"; else nok "$1" "[$3] !~ /$2/"; fi; }
auth=(${TOKEN:+-H "X-Access-Token: $TOKEN"})

# end_of METHOD JSON [curl args]: the end event of a Start or Connect
# stream, as JSON on one line.
end_of() {
	local m=$1 j=$2
	shift 2
	"$PY" -c '
import sys, struct
b = sys.argv[1].encode()
sys.stdout.buffer.write(b"\0" + struct.pack(">I", len(b)) + b)' "$j" |
		curl -s -N --max-time "$HANG_S" "${auth[@]}" -X POST "$URL/process.Process/$m" \
			-H 'Content-Type: application/connect+json' --data-binary @- "$@" | "$PY" -c '
import sys, struct, json
r = sys.stdin.buffer
while True:
    h = r.read(5)
    if len(h) < 5: break
    m = json.loads(r.read(struct.unpack(">I", h[1:5])[0]) or b"{}")
    e = m.get("event", {}).get("end")
    if e is not None: print(json.dumps(e, sort_keys=True))'
}
# field JSON a.b: one field of it ("" when absent)
field() {
	"$PY" -c 'import sys, json
d = json.loads(sys.argv[1] or "{}")
for k in sys.argv[2].split("."): d = d.get(k, "") if isinstance(d, dict) else ""
print(d)' "$1" "$2"
}
# as_root SCRIPT: a shell command as root in the guest
as_root() {
	end_of Start "$("$PY" -c 'import json,sys; print(json.dumps({"process": {"cmd": "sh", "args": ["-c", sys.argv[1]]}, "stdin": False}))' "$1")" \
		-H "Authorization: Basic $(printf 'root:' | base64)" >/dev/null
}

# Transparent huge pages off meanwhile, as in 70_limits.sh: under emulation
# a fault at the limit went into tens of seconds of compaction first.
THP=/sys/kernel/mm/transparent_hugepage/enabled
as_root "sed -n 's/.*\\[\\(.*\\)\\].*/\\1/p' $THP >/tmp/trust-thp.was; echo never >$THP"

e=$(end_of Start '{"process":{"cmd":"python3","args":["-c","x = bytearray(100 * 1024 * 1024); x[::4096] = b\"x\" * len(x[::4096]); print(\"survived\")"],"limits":{"memoryMaxBytes":"33554432"}},"stdin":false}')
echo "# end: $e"
check_re "over its memory.max: killed" '"status": "signal: killed"' "$e"
check_re "its error says out of memory, with the limit and the peak" \
	'"error": "out of memory: killed by the kernel OOM killer \(memory.max 32 MiB, peak [0-9]+ (MiB|KiB)\)"' "$e"
check_re "reason.kind is KIND_OOM_KILLED" '^KIND_OOM_KILLED$' "$(field "$e" reason.kind)"
check_re "reason.memoryMaxBytes is the limit" '^33554432$' "$(field "$e" reason.memoryMaxBytes)"
peak=$(field "$e" reason.memoryPeakBytes)
check_re "reason.memoryPeakBytes is up to the limit ($peak)" '^ok$' \
	"$([ "${peak:-0}" -gt 1048576 ] && [ "${peak:-0}" -le 33554432 ] && echo ok)"
check_re "reason.signal is SIGKILL" '^9$' "$(field "$e" reason.signal)"
check_re "usage says oomKilled as before" '"oomKilled": true' "$e"

# The deadline instead: envd empties its cgroup first.
end_of Start '{"process":{"cmd":"sleep","args":["600"],"limits":{"memoryMaxBytes":"33554432"}},"stdin":false,"tag":"trust-deadline"}' \
	-H 'Connect-Timeout-Ms: 3000' >/dev/null &
bg=$!
listed() { curl -s --max-time "$HANG_S" "${auth[@]}" -X POST "$URL/process.Process/List" \
	-H 'Content-Type: application/json' -d '{}' | grep -q trust-deadline; }
wait_for 60 listed
e=$(end_of Connect '{"process":{"tag":"trust-deadline"}}')
wait "$bg"
echo "# end: $e"
check_re "a kill at the deadline says so" '^KIND_TIMEOUT 3000$' "$(field "$e" reason.kind) $(field "$e" reason.timeoutMs)"
check_re "in its error too" '"error": "timeout: killed by envd when its deadline of 3 s passed"' "$e"

as_root "[ -s /tmp/trust-thp.was ] && cat /tmp/trust-thp.was >$THP; rm -f /tmp/trust-thp.was"
check_re "envd still healthy" '^204$' "$(curl -s -o /dev/null -w '%{http_code}' --max-time "$HANG_S" "$URL/health")"
echo "trust: $PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
