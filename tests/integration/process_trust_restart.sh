#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# arm64: skip (under qemu-user envd cannot exec its own aarch64 image for the upgrade: no binfmt handler)
# Idempotency keys and input offsets across a restart of envd
# (docs/protocol.md, "Idempotent Start"): a Start retried 20 times with one
# key, 5 times before and 15 after, spawns once, across a SIGKILL of envd
# under its init (docs/crash.md: the key is in the keep file) and across a
# live upgrade (docs/upgrade.md: the hand-over record); the key of a
# process that had ended before is kept too, another request with a key is
# still already_exists, and input resent from offset 0 after the restart
# reaches the command once.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/lib.sh
T_NAME=process_trust_restart

INIT=${INIT_BIN:-build/init}
W=$(mktemp -d /tmp/envd-trust-restart.XXXXXX)
IPID=""
cleanup_trust() {
	[ -n "$IPID" ] && kill -TERM "$IPID" 2>/dev/null
	[ -n "$IPID" ] && wait "$IPID" 2>/dev/null
	_t_cleanup
	rm -rf "$W"
}
on_exit cleanup_trust
probe() {
	"$PY" tests/integration/process_trust_probe.py "$@" >"$W/out" 2>&1
	cat "$W/out"
	T_PASS=$((T_PASS + $(grep -c '^ok ' "$W/out")))
	T_FAIL=$((T_FAIL + $(grep -c '^FAIL ' "$W/out")))
	grep -q '^Traceback' "$W/out" && fail "the probe ran to its end" "$(tail -3 "$W/out")"
}

# --- a SIGKILL of envd under init ---
if [ -x "$INIT" ]; then
	PORT=$(free_port)
	mkdir -p "$W/crash" "$W/reg"
	"$INIT" --no-mount --grace 10 -- "$ENVD_BIN" -isnotfc -verbose -port "$PORT" $(cgroup_flags) \
		-upload-registry "$W/reg" >"$W/init.log" 2>&1 &
	IPID=$!
	ENVD_LOGS+=("$W/init.log")
	if wait_for 60 curl -s -o /dev/null "http://127.0.0.1:$PORT/health"; then
		pass "envd starts under init"
		probe crash "http://127.0.0.1:$PORT" "$W/crash" "$IPID"
		grep -q 'processes taken back' "$W/init.log" && pass "envd took its processes back" ||
			fail "envd took its processes back" "$(tail -5 "$W/init.log")"
	else
		fail "envd starts under init" "$(cat "$W/init.log")"
	fi
	kill -TERM "$IPID" 2>/dev/null
	wait "$IPID" 2>/dev/null
	IPID=""
else
	fail "build/init exists" "run make"
fi

# --- a live upgrade ---
ENVD_BIN=$(readlink -f "$ENVD_BIN")
mkdir -p "$W/up"
envd_start -upgrade-dir "$W/up" -handover-file "$W/up/handover.pb" -upgrade-preflight-ms 30000 ||
	{ fail "envd starts"; finish; exit 1; }
expect_eq "/init with a token" 204 "$(curl -s -o /dev/null -w '%{http_code}' -X POST -d '{"accessToken":"trust-token"}' "$ENVD_URL/init")"
TRUST_TOKEN=trust-token probe upgrade "$ENVD_URL" "$W/up"
finish
