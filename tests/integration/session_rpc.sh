#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Persistent shell sessions through the additive RPCs with Connect JSON
# (docs/sessions.md): CreateSession, ListSessions, CloseSession, and
# StartRequest.session; the idle timeout flag.
. "$(dirname "$0")/process_lib.sh"
start_envd

field() { "$PY" -c 'import sys, json; d = json.loads(sys.stdin.read().split(" ", 1)[1]); print(eval(sys.argv[1]))' "$1"; }
sessions() { unary ListSessions '{}'; }

r=$(unary CreateSession '{"name":"w","cwd":"/tmp","envs":{"A":"one"}}')
check "CreateSession answers 200" 200 "${r%% *}"
check "with the name and user" "w root" "$(echo "$r" | field 'd["session"]["name"] + " " + d["session"]["user"]')"
check "again: already_exists" 409 "$(unary CreateSession '{"name":"w"}' | cut -d' ' -f1)"
check "a bad name: invalid_argument" 400 "$(unary CreateSession '{"name":"a b"}' | cut -d' ' -f1)"

# The shell comes up on its own; the command waits for it if need be.
stream Start '{"process":{"cmd":"/bin/bash","args":["-l","-c","echo $A; pwd; cd /"]},"session":"w"}' >"$TMP/a.txt"
check "StartRequest.session runs in the session (its cwd and envs)" "one
/tmp" "$(stdout_of <"$TMP/a.txt")"
check "and ends with an end event" "end eos" "$(kinds <"$TMP/a.txt" | tr '\n' ' ' | grep -o 'end eos')"
l=$(sessions)
check "ListSessions: the shell's pid and its current directory" "True /" \
	"$(echo "$l" | field '[str(s.get("shellPid", 0) > 0) + " " + s["cwd"] for s in d["sessions"] if s["name"] == "w"][0]')"

stream Start '{"process":{"cmd":"/bin/true","limits":{"pidsMax":10}},"session":"w"}' >"$TMP/lim.txt"
check_re "limits in a session are refused, not ignored" 'failed_precondition' "$(cat "$TMP/lim.txt")"

# Connect by tag, with replay from offset 0, follows a session command too.
stream Start '{"process":{"cmd":"/bin/bash","args":["-l","-c","echo one; echo two"]},"session":"w","tag":"sess-tag"}' >/dev/null
stream Connect '{"process":{"tag":"sess-tag"},"replayFrom":"0"}' >"$TMP/conn.txt"
check "Connect by tag with replay" "one
two" "$(stdout_of <"$TMP/conn.txt")"
check "and its end event" "end eos" "$(kinds <"$TMP/conn.txt" | tr '\n' ' ' | grep -o 'end eos')"

# The end event's usage: the CPU the command's processes used.
stream Start '{"process":{"cmd":"/bin/bash","args":["-l","-c","head -c 20000000 /dev/urandom | md5sum >/dev/null"]},"session":"w"}' >"$TMP/u.txt"
cpu=$(grep '"end"' "$TMP/u.txt" | "$PY" -c 'import sys, json; l = sys.stdin.read(); u = json.loads(l.split(" ", 1)[1])["event"]["end"].get("usage", {}); print(int(u.get("cpuUserUsec", 0)) + int(u.get("cpuSystemUsec", 0)))')
check_re "usage: the command's CPU time ($cpu us)" '^[1-9][0-9]*$' "$cpu"

# SIGINT and SIGTERM end the command (and the rest of its line), not the session.
for sig in SIGINT SIGTERM; do
	stream_bg "$TMP/$sig.txt" Start '{"process":{"cmd":"/bin/bash","args":["-l","-c","echo go; sleep 3600; echo after"]},"session":"w"}'
	wait_for "$HANG_S" sh -c "grep -q stdout '$TMP/$sig.txt'"
	pid=$(pid_in "$TMP/$sig.txt")
	check "SendSignal $sig to a session command" "200 {}" "$(unary SendSignal "{\"process\":{\"pid\":$pid},\"signal\":\"SIGNAL_$sig\"}")"
	wait_for "$HANG_S" sh -c "grep -q '\"end\"' '$TMP/$sig.txt'"
	check "$sig: the rest of the line does not run" "go" "$(stdout_of <"$TMP/$sig.txt")"
	check_re "$sig: the end event names the signal" '"status": ?"signal: (interrupt|terminated)"' "$(cat "$TMP/$sig.txt")"
done
stream Start '{"process":{"cmd":"/bin/bash","args":["-l","-c","pwd"]},"session":"w"}' >"$TMP/s.txt"
check "the session lives on" "/" "$(stdout_of <"$TMP/s.txt")"

# A running command and its queue in the list, then CloseSession ends all.
stream_bg "$TMP/b.txt" Start '{"process":{"cmd":"/bin/bash","args":["-l","-c","sleep 3600 & echo $!; wait"]},"session":"w"}'
wait_for "$HANG_S" sh -c "grep -q stdout '$TMP/b.txt'"
job=$(stdout_of <"$TMP/b.txt")
stream_bg "$TMP/c.txt" Start '{"process":{"cmd":"/bin/bash","args":["-l","-c","echo never"]},"session":"w"}'
wait_for "$HANG_S" sh -c "grep -q '\"pid\"' '$TMP/c.txt'"
l=$(sessions)
check "the running command's pid and one queued" "True 1" \
	"$(echo "$l" | field '[str(s.get("runningPid", 0) > 0) + " " + str(s.get("queued", 0)) for s in d["sessions"] if s["name"] == "w"][0]')"
check "a background job runs" 0 "$(kill -0 "$job" 2>/dev/null; echo $?)"
check "CloseSession answers 200" 200 "$(unary CloseSession '{"name":"w"}' | cut -d' ' -f1)"
wait_for "$HANG_S" sh -c "! kill -0 $job 2>/dev/null"
check "its background job is killed" 1 "$(kill -0 "$job" 2>/dev/null; echo $?)"
wait_for "$HANG_S" sh -c "grep -q '\"end\"' '$TMP/c.txt'"
check "the queued command ends killed, never run" "" "$(stdout_of <"$TMP/c.txt")"
check_re "as killed" 'signal: killed' "$(cat "$TMP/c.txt")"
check "gone from ListSessions" 0 "$(sessions | field 'len([s for s in d.get("sessions", []) if s["name"] == "w"])')"
check "CloseSession of no such session: not_found" 404 "$(unary CloseSession '{"name":"w"}' | cut -d' ' -f1)"

# The name after a close is a new shell.
stream Start '{"process":{"cmd":"/bin/bash","args":["-l","-c","echo \"[$A]\""]},"session":"w"}' >"$TMP/d.txt"
check "a new shell after the close" "[]" "$(stdout_of <"$TMP/d.txt")"
summary_rc=0
summary || summary_rc=1

# -session-idle-timeout: an idle session goes by itself.
PASS=0 FAIL=0
start_envd -session-idle-timeout 1
unary CreateSession '{"name":"idle"}' >/dev/null
stream Start '{"process":{"cmd":"/bin/bash","args":["-l","-c","echo $$"]},"session":"idle"}' >"$TMP/e.txt"
shell=$(stdout_of <"$TMP/e.txt")
wait_for "$HANG_S" sh -c "! kill -0 $shell 2>/dev/null"
check "an idle session's shell ends" 1 "$(kill -0 "$shell" 2>/dev/null; echo $?)"
wait_for "$HANG_S" sh -c "curl -s -X POST '$(url ListSessions)' -H 'Content-Type: application/json' -d '{}' | grep -vq idle"
check "and it leaves the list" 0 "$(sessions | field 'len(d.get("sessions", []))')"
summary && [ $summary_rc -eq 0 ]
