#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Persistent shell sessions through the additive RPCs with Connect JSON
# (docs/sessions.md): CreateSession, ListSessions, CloseSession, and
# StartRequest.session; the idle timeout flag; then, with a private cgroup2
# directory, a cgroup leaf per session command (usage, limits, the kill,
# trackChanges).
. "$(dirname "$0")/process_lib.sh"
. "$(dirname "$0")/cgroup_lib.sh"
CG=$(cgroup_test_dir sess)
on_exit 'cleanup; cgroup_remove "$CG"'
start_envd -no-cgroups

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
check_re "limits without cgroups: refused as for a plain Start" 'failed_precondition.*without cgroups' "$(cat "$TMP/lim.txt")"

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
start_envd -no-cgroups -session-idle-timeout 1
unary CreateSession '{"name":"idle"}' >/dev/null
stream Start '{"process":{"cmd":"/bin/bash","args":["-l","-c","echo $$"]},"session":"idle"}' >"$TMP/e.txt"
shell=$(stdout_of <"$TMP/e.txt")
wait_for "$HANG_S" sh -c "! kill -0 $shell 2>/dev/null"
check "an idle session's shell ends" 1 "$(kill -0 "$shell" 2>/dev/null; echo $?)"
wait_for "$HANG_S" sh -c "curl -s -X POST '$(url ListSessions)' -H 'Content-Type: application/json' -d '{}' | grep -vq idle"
check "and it leaves the list" 0 "$(sessions | field 'len(d.get("sessions", []))')"
summary || summary_rc=1

# --- with cgroups: each session command in a leaf of its own ---
if [ -z "$CG" ]; then
	echo "no private cgroup2 directory here: the cgroup checks are skipped"
	exit $summary_rc
fi
PASS=0 FAIL=0
start_envd -cgroup-root "$CG" -changes-max-paths 100000
end_of() { grep '"end"' "$1" | "$PY" -c 'import sys, json; e = json.loads(sys.stdin.read().split(" ", 1)[1])["event"]["end"]; print(eval(sys.argv[1]))' "$2"; }
run() { # run FILE TEXT [extra JSON fields]: a command of session "g", to its end
	local body
	body=$("$PY" -c 'import json, sys; print(json.dumps({"process": {"cmd": "/bin/bash", "args": ["-l", "-c", sys.argv[1]]}, "session": "g"})[:-1])' "$2")
	stream Start "$body${3:+, $3}}" >"$1"
}
cg_of() { grep '^0::' "/proc/$1/cgroup" 2>/dev/null | cut -d: -f3; }

run "$TMP/g1.txt" 'echo $$; grep ^0:: /proc/self/cgroup | cut -d: -f3'
shell=$(stdout_of <"$TMP/g1.txt" | sed -n 1p)
leaf1=$(stdout_of <"$TMP/g1.txt" | sed -n 2p)
check_re "a session command runs in a leaf of its own under user/" '/user/cmd-[0-9]+-[0-9]+$' "$leaf1"
run "$TMP/g2.txt" 'grep ^0:: /proc/self/cgroup | cut -d: -f3'
check_re "the next one in another leaf" '/user/cmd-[0-9]+-[0-9]+$' "$(stdout_of <"$TMP/g2.txt")"
check "not the same" "no" "$([ "$(stdout_of <"$TMP/g2.txt")" = "$leaf1" ] && echo yes || echo no)"
shell_home() { c=$(cg_of "$shell"); [[ $c == */user/cmd-* ]] && [ "$c" != "$leaf1" ] && [ "$c" != "$(stdout_of <"$TMP/g2.txt")" ]; }
wait_for "$HANG_S" shell_home && ok "between commands the shell is in a leaf of the session's" ||
	nok "the shell's leaf between commands" "$(cg_of "$shell")"

run "$TMP/gu.txt" 'i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; head -c 20000000 /dev/urandom | md5sum >/dev/null'
check_re "usage: CPU time from the leaf" '^[1-9][0-9]*$' "$(end_of "$TMP/gu.txt" 'int(e.get("usage", {}).get("cpuUserUsec", 0)) + int(e.get("usage", {}).get("cpuSystemUsec", 0))')"

if grep -qw memory "$CG/user/cgroup.controllers" 2>/dev/null && [ -e "$CG/user/memory.peak" ]; then
	run "$TMP/gm.txt" 'head -c 50000000 /dev/zero | awk '"'"'{ s = s $0 } END { print length(s) }'"'"''
	check_re "usage: the memory peak from the leaf" '^[1-9][0-9]{7,}$' "$(end_of "$TMP/gm.txt" 'e.get("usage", {}).get("memoryPeakBytes", 0)')"
	body=$("$PY" -c 'import json; print(json.dumps({"process": {"cmd": "/bin/bash", "args": ["-l", "-c", "head -c 200000000 /dev/zero | awk \"{ s = s \\$0 } END { print length(s) }\""], "limits": {"memoryMaxBytes": "33554432"}}, "session": "g"}))')
	stream Start "$body" >"$TMP/go.txt"
	check "a memory limit: the command is OOM-killed" "True" "$(end_of "$TMP/go.txt" 'e.get("usage", {}).get("oomKilled", False)')"
	run "$TMP/ga.txt" 'echo $$'
	check "and the session lives on (its shell was not the victim)" "$shell" "$(stdout_of <"$TMP/ga.txt")"
else
	echo "# no memory controller for the leaves here: the memory peak and limit checks are skipped"
	stream Start '{"process":{"cmd":"/bin/true","limits":{"memoryMaxBytes":"33554432"}},"session":"g"}' >"$TMP/gl.txt"
	check_re "a limit without its controller: failed_precondition, as for a plain Start" 'failed_precondition.*memory' "$(cat "$TMP/gl.txt")"
fi

# SIGKILL reaches what the command started, also what left the process group.
tag=sess$$
stream_bg "$TMP/gk.txt" Start "{\"process\":{\"cmd\":\"/bin/bash\",\"args\":[\"-l\",\"-c\",\"setsid bash -c 'exec -a $tag-s sleep 1000' & echo go; sleep 1000\"]},\"session\":\"g\"}"
wait_for "$HANG_S" sh -c "grep -q stdout '$TMP/gk.txt'"
wait_for "$HANG_S" pgrep -f "^$tag-s" >/dev/null
pid=$(pid_in "$TMP/gk.txt")
check "SendSignal SIGKILL" "200 {}" "$(unary SendSignal "{\"process\":{\"pid\":$pid},\"signal\":\"SIGNAL_SIGKILL\"}")"
wait_for "$HANG_S" sh -c "! pgrep -f '^$tag-s' >/dev/null" && ok "the setsid escapee is killed" || nok "the setsid escapee is killed"
wait_for "$HANG_S" sh -c "grep -q '\"end\"' '$TMP/gk.txt'"
check_re "the command ends killed" 'signal: killed' "$(cat "$TMP/gk.txt")"
run "$TMP/gb.txt" 'echo $$'
check "the shell lives on" "$shell" "$(stdout_of <"$TMP/gb.txt")"

# The shell is workload: frozen with it for a snapshot; new session commands
# are refused meanwhile, as a plain Start is.
check "/freeze" 204 "$(curl -s -o /dev/null -w '%{http_code}' -X POST "http://127.0.0.1:$PORT/freeze")"
shell_frozen() { grep -q '^frozen 1' "$(dirname "$CG")$(cg_of "$shell")/cgroup.events"; }
wait_for "$HANG_S" shell_frozen && ok "the session's shell is frozen with the workload" ||
	nok "the session's shell is frozen" "$(cat "$(dirname "$CG")$(cg_of "$shell")/cgroup.events")"
stream Start '{"process":{"cmd":"/bin/true"},"session":"g"}' >"$TMP/gf.txt"
check_re "a command in the session while frozen: unavailable" '"unavailable".*frozen' "$(cat "$TMP/gf.txt")"
stream Start '{"process":{"cmd":"/bin/true"},"session":"new"}' >"$TMP/gf2.txt"
check_re "a command for a new session while frozen: unavailable" '"unavailable".*frozen' "$(cat "$TMP/gf2.txt")"
check "/unfreeze" 204 "$(curl -s -o /dev/null -w '%{http_code}' -X POST "http://127.0.0.1:$PORT/unfreeze")"
run "$TMP/gc.txt" 'echo $$'
check "the session runs again" "$shell" "$(stdout_of <"$TMP/gc.txt")"

# trackChanges: what the shell itself and its children wrote.
# A list the journal could not keep whole (its source fell behind the
# kernel on a machine busy with other writers: "resync") says so and is not
# the command's; the command runs again until one is kept.
W=$(mktemp -d /tmp/envd-sess-cg.XXXXXX)
tracked_whole() {
	run "$TMP/gt.txt" "echo x > $W/by-shell; touch $W/by-child" '"trackChanges": true'
	! grep -q '"resync": true' "$TMP/gt.txt"
}
wait_for "$HANG_S" tracked_whole || echo "# every run's list was cut by a resync" >&2
check_re "trackChanges: a file the shell wrote is listed" "\"path\": \"$W/by-shell\"" "$(cat "$TMP/gt.txt")"
check_re "and one a child wrote" "\"path\": \"$W/by-child\"" "$(cat "$TMP/gt.txt")"
check_re "attributed to the command" "\"attribution\": \"by\"[^}]*\"path\": \"$W/by-shell\"" "$(cat "$TMP/gt.txt")"
rm -rf "$W"
unary CloseSession '{"name":"g"}' >/dev/null
leaves_gone() { [ -z "$(ls -d "$CG"/user/cmd-* 2>/dev/null)" ]; }
wait_for "$HANG_S" leaves_gone && ok "no leaf is left once the session is closed" || nok "leaves left" "$(ls -d "$CG"/user/cmd-*)"
run "$TMP/gh.txt" 'echo $$'
kill "$ENVD_PID" && wait "$ENVD_PID"
ENVD_PID=
wait_for "$HANG_S" leaves_gone && ok "envd stopped with a session open: no leaf is left" || nok "leaves left at the stop" "$(ls -d "$CG"/user/cmd-*)"
summary && [ $summary_rc -eq 0 ]
