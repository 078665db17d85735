#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# arm64: skip (under qemu-user envd cannot exec its own aarch64 image: no binfmt handler)
# A persistent shell session survives a live upgrade (docs/sessions.md):
# its state and background job carry over, a command running in it at the
# upgrade finishes in the shell before the next one, and the session is
# listed and closed as before.
. "$(dirname "$0")/process_lib.sh"
TOK=session-upgrade-token
start_envd -upgrade-dir "$TMP" -handover-file "$TMP/handover.pb" -upgrade-preflight-ms 30000
A=(-H "X-Access-Token: $TOK")
curl -s -o /dev/null -X POST -d "{\"accessToken\":\"$TOK\"}" "http://127.0.0.1:$PORT/init"
field() { "$PY" -c 'import sys, json; d = json.loads(sys.stdin.read()); print(eval(sys.argv[1]))' "$1"; }
json() { curl -s --max-time "$HANG_S" "${A[@]}" -X POST "$(url "$1")" -H 'Content-Type: application/json' -d "$2"; }
run() { stream Start "{\"process\":{\"cmd\":\"/bin/bash\",\"args\":[\"-l\",\"-c\",$1]},\"session\":\"up\"}" "${A[@]}" | stdout_of; }

job=$(run '"cd /tmp; export X=kept; sleep 3600 & echo $!"')
shell=$(run '"echo $$"')
check_re "a session with a background job" '^[0-9]+$' "$job"
# A command that is still running when the upgrade comes.
stream_bg "$TMP/busy.txt" Start '{"process":{"cmd":"/bin/bash","args":["-l","-c","while [ ! -e '"$TMP"'/go ]; do sleep 0.02; done; echo done"]},"session":"up"}' "${A[@]}"
wait_for "$HANG_S" sh -c "grep -q '\"pid\"' '$TMP/busy.txt'"

r=$(curl -s --max-time "$HANG_S" -w '%{http_code}' "${A[@]}" -X POST "http://127.0.0.1:$PORT/upgrade")
check "the upgrade drops the connection" 000 "$r"
wait_for "$HANG_S" sh -c "[ \"\$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$PORT/health)\" = 204 ]"
curl -s -o /dev/null -X POST -d "{\"accessToken\":\"$TOK\"}" "http://127.0.0.1:$PORT/init"
check "envd is the same process" 0 "$(kill -0 "$ENVD_PID" 2>/dev/null; echo $?)"
l=$(json ListSessions '{}')
check "the session is listed with the same shell" "$shell" "$(echo "$l" | field '[s["shellPid"] for s in d.get("sessions", []) if s["name"] == "up"][0]')"

# The next command waits for the one from before the upgrade.
stream_bg "$TMP/after.txt" Start '{"process":{"cmd":"/bin/bash","args":["-l","-c","pwd; echo $X; jobs | wc -l; echo $$"]},"session":"up"}' "${A[@]}"
wait_for "$HANG_S" sh -c "grep -q '\"pid\"' '$TMP/after.txt'"
check "it waits behind the running one" "" "$(stdout_of <"$TMP/after.txt")"
touch "$TMP/go"
wait_for "$HANG_S" sh -c "grep -q '\"end\"' '$TMP/after.txt'"
check "then runs with the state from before (cwd, export, job, shell)" "/tmp
kept
1
$shell" "$(stdout_of <"$TMP/after.txt")"
check "CloseSession after the upgrade" "{}" "$(json CloseSession '{"name":"up"}')"
wait_for "$HANG_S" sh -c "! kill -0 $job 2>/dev/null"
check "ends the background job" 1 "$(kill -0 "$job" 2>/dev/null; echo $?)"
summary
