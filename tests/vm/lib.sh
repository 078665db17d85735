#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Helpers for tests/vm/*.sh: checks that run from the host against the VM
# booted by scripts/vm-test.sh (or by hand: make vm-run, then source its
# VM_RUN_DIR/env and set VM_TOKEN).
#
#   . tests/vm/lib.sh
#   vm_exec [-u USER] COMMAND      run in the guest (scripts/vm-exec.py)
#   vm_monitor "HMP command"       QEMU's human monitor, output on stdout
#   vm_curl ARGS...                curl with the access token
#   vm_init [JSON fields]          POST /init as the platform does
#   vm_health                      HTTP status of /health
#   pass / fail / expect_eq / expect_match / check, then finish
#
# Environment (from VM_RUN_DIR/env): VM_URL, VM_TOKEN, VM_RUN_DIR,
# VM_CONSOLE, VM_MONITOR, VM_MMDS_DIR, VM_QEMU_PID, VM_GUEST_IP.
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
. tests/lib.sh
T_NAME=vm-$(basename "${BASH_SOURCE[1]:-$0}" .sh)
: "${VM_URL:?run under scripts/vm-test.sh or with VM_URL set}"
export VM_URL VM_TOKEN="${VM_TOKEN:-}"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

vm_exec() { "$PY" scripts/vm-exec.py "$@"; }
vm_monitor() {
	# HMP echoes the command and a prompt; keep the answer only.
	printf '%s\n' "$1" | socat -t 2 - "UNIX-CONNECT:$VM_MONITOR" 2>/dev/null | tr -d '\r' |
		grep -v -e '^QEMU .* monitor' -e '^(qemu)'
}
vm_curl() { curl -s ${VM_TOKEN:+-H "X-Access-Token: $VM_TOKEN"} "$@"; }
vm_health() { curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$VM_URL/health"; }
# vm_init [extra JSON members]: the orchestrator's /init (token, default
# user, host time); prints the HTTP status.
vm_init() {
	local ts body
	ts=$(date -u +%Y-%m-%dT%H:%M:%S.%NZ)
	body="{\"timestamp\":\"$ts\",\"defaultUser\":\"user\"${VM_TOKEN:+,\"accessToken\":\"$VM_TOKEN\"}${1:+,$1}}"
	vm_curl -o /dev/null -w '%{http_code}' --max-time "$HANG_S" -X POST -H 'Content-Type: application/json' \
		-d "$body" "$VM_URL/init"
}
# wait_health SECONDS: until /health is 204 again (SECONDS or HANG_S at
# most, as wait_for); prints the ms it took.
wait_health() {
	local t0 end secs=${1:-30}
	[ "$secs" -ge "$HANG_S" ] || secs=$HANG_S
	t0=$(date +%s%3N)
	end=$((t0 + secs * 1000))
	while [ "$(date +%s%3N)" -lt "$end" ]; do
		[ "$(vm_health)" = 204 ] && { echo $(($(date +%s%3N) - t0)); return 0; }
		sleep 0.1
	done
	return 1
}

# No envd of our own runs here: the summary has no sanitizer line.
finish() {
	echo "$T_NAME: $T_PASS passed, $T_FAIL failed"
	[ "$T_FAIL" -eq 0 ]
}
