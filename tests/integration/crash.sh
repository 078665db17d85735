#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Crash-only envd (docs/crash.md): envd under build/init is SIGKILLed at a
# random moment of a mixed load, several rounds; each time its processes
# are listed again, a job's output comes whole across the crash with its
# exit code, a cat takes stdin and a terminal shell answers after it, a
# cut upload leaves the previous content and no temporary file, downloads
# work. CRASH_ROUNDS (default 4) and CRASH_SEED pick the rounds.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/lib.sh
T_NAME=crash

INIT=${INIT_BIN:-build/init}
if [ ! -x "$INIT" ]; then
	fail "build/init exists" "run make"
	finish
	exit 1
fi
W=$(mktemp -d /tmp/envd-crash-test.XXXXXX)
IPID=""
cleanup_crash() {
	[ -n "$IPID" ] && kill -TERM "$IPID" 2>/dev/null
	[ -n "$IPID" ] && wait "$IPID" 2>/dev/null
	rm -rf "$W"
}
on_exit cleanup_crash

PORT=$(free_port)
BASE="http://127.0.0.1:$PORT"
mkdir -p "$W/files" "$W/reg"
"$INIT" --no-mount --grace 10 -- "$ENVD_BIN" -isnotfc -verbose -port "$PORT" $(cgroup_flags) -upload-registry "$W/reg" \
	>"$W/log" 2>&1 &
IPID=$!
ENVD_LOGS+=("$W/log")
if ! wait_for 60 curl -s -o /dev/null "$BASE/health"; then
	fail "envd starts under init" "$(cat "$W/log")"
	finish
	exit 1
fi
pass "envd starts under init"

"$PY" tests/integration/crash_probe.py rounds "$BASE" "$IPID" "${CRASH_ROUNDS:-4}" "$W/files" >"$W/out" 2>&1
rc=$?
cat "$W/out"
T_PASS=$((T_PASS + $(grep -c '^ok ' "$W/out")))
T_FAIL=$((T_FAIL + $(grep -c '^FAIL ' "$W/out")))
[ "$rc" -eq 0 ] || [ "$(grep -c '^FAIL ' "$W/out")" -gt 0 ] || fail "the rounds ran to the end" "$(tail -5 "$W/out")"
grep -q 'processes taken back' "$W/log" && pass "envd logs what it took back" || fail "envd logs what it took back"

# The /init state survives a crash: the token still guards every route,
# env vars and the default workdir are those /init set.
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$BASE/init" -H 'Content-Type: application/json' \
	-d '{"accessToken":"crash-token","envVars":{"CRASH_VAR":"kept"},"defaultWorkdir":"/tmp"}')
expect_eq "/init with a token" 204 "$code"
CH="$BASE/filesystem.Filesystem/Changes"
chg() { curl -s -X POST "$CH" -H 'Content-Type: application/json' -H 'X-Access-Token: crash-token' -d "$1"; }
tok=$(chg '{}' | "$PY" -c 'import json,sys; print(json.load(sys.stdin).get("next",""))')
# envd is init's child that runs $ENVD_BIN (orphans of the rounds may be there too)
envd_of_init() { pgrep -P "$IPID" -f -- "-upload-registry $W/reg" | head -n1; }
victim=$(envd_of_init)
echo "# children of init: $(pgrep -P "$IPID" | tr '\n' ' ')envd $victim"
kill -KILL "$victim"
new_envd() { local p; p=$(envd_of_init); [ -n "$p" ] && [ "$p" != "$victim" ]; }
check "init restarted envd" wait_for 60 new_envd
check "/health answers" wait_for 60 curl -s -o /dev/null "$BASE/health"
L="$BASE/process.Process/List"
expect_eq "after the crash a request without the token is refused" 401 \
	"$(curl -s -o /dev/null -w '%{http_code}' -X POST "$L" -H 'Content-Type: application/json' -d '{}')"
expect_eq "after the crash the token is accepted" 200 \
	"$(curl -s -o /dev/null -w '%{http_code}' -X POST "$L" -H 'Content-Type: application/json' -H 'X-Access-Token: crash-token' -d '{}')"
expect_match "after the crash the env vars of /init are there" '"CRASH_VAR":"kept"' \
	"$(curl -s -H 'X-Access-Token: crash-token' "$BASE/envs")"
if [ -n "$tok" ]; then
	expect_match "the change journal answers resync for a token of the killed envd" '"resync": *true' \
		"$(chg "{\"since\":\"$tok\"}")"
else
	echo "# no change journal here: resync not checked"
fi
grep -q 'the /init state was restored' "$W/log" && pass "envd says it restored the /init state" ||
	fail "envd says it restored the /init state"

[ "$T_FAIL" -gt 0 ] && grep -aE '^(init|envd):|keep|taken back|restored' "$W/log" | tail -n 60

# A clean stop: init TERMs envd and the rest, and exits.
kill -TERM "$IPID"
deadline=$((SECONDS + HANG_S))
while kill -0 "$IPID" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.05; done
if kill -0 "$IPID" 2>/dev/null; then fail "init stops"; else pass "init stops"; fi
wait "$IPID" 2>/dev/null
IPID=""
finish
