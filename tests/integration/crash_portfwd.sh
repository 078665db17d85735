#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Port forwards after a crash: a loopback listener forwarded to the
# sandbox address before envd is SIGKILLed is forwarded again by the next
# envd that init starts (connections relayed at the moment of the crash
# break; docs/crash.md).
set -uo pipefail
cd "$(dirname "$0")/../.."

if [ -z "${CRASH_IN_NETNS:-}" ]; then
	if ! unshare -n true 2>/dev/null; then
		echo "SKIP: cannot create a network namespace (needs root or user namespaces)"
		echo "crash_portfwd: 0 passed, 0 failed"
		exit 0
	fi
	CRASH_IN_NETNS=1 exec unshare -n bash "$0" "$@"
fi

. tests/lib.sh
T_NAME=crash_portfwd
INIT=${INIT_BIN:-build/init}
SBX=169.254.0.21
ip link set lo up
ip addr add "$SBX/32" dev lo

W=$(mktemp -d /tmp/envd-crash-pf.XXXXXX)
IPID=""
SPID=""
cleanup_pf() {
	[ -n "$SPID" ] && kill "$SPID" 2>/dev/null
	[ -n "$IPID" ] && kill -TERM "$IPID" 2>/dev/null && wait "$IPID" 2>/dev/null
	rm -rf "$W"
}
on_exit cleanup_pf

echo forwarded >"$W/index.html"
"$PY" -m http.server --bind 127.0.0.1 --directory "$W" 4111 >/dev/null 2>&1 &
SPID=$!
PORT=$(free_port)
"$INIT" --no-mount --grace 10 -- "$ENVD_BIN" -isnotfc -port "$PORT" $(cgroup_flags) -sandbox-addr "$SBX" \
	-upload-registry "$W/reg" >"$W/log" 2>&1 &
IPID=$!
ENVD_LOGS+=("$W/log")
forwarded() { [ "$(curl -s --max-time 5 "http://$SBX:4111/index.html")" = forwarded ]; }
check "envd starts under init" wait_for 60 curl -s -o /dev/null "http://127.0.0.1:$PORT/health"
check "the listener is forwarded to the sandbox address" wait_for 60 forwarded
victim=$(pgrep -P "$IPID" | head -n1)
kill -KILL "$victim"
new_envd() { local p; p=$(pgrep -P "$IPID" | head -n1); [ -n "$p" ] && [ "$p" != "$victim" ]; }
check "init restarted envd" wait_for 60 new_envd
check "the forward is re-established after the crash" wait_for 60 forwarded
kill -TERM "$IPID"
wait "$IPID" 2>/dev/null
IPID=""
finish
