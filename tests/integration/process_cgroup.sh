#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A cgroup per command: placement, SIGKILL and the Start deadline empty the
# whole cgroup (setsid and double-fork escapees included), a background
# server outlives its command's end, the leaf goes once empty, usage in the
# end event, limits refused clearly when they cannot be applied. Runs
# against a private cgroup2 directory; without one only the no-cgroup
# behaviour is checked.
. "$(dirname "$0")/process_lib.sh"
. "$(dirname "$0")/cgroup_lib.sh"

CG=$(cgroup_test_dir proc)
on_exit 'cleanup; cgroup_remove "$CG"'
tag=cg$$
alive() { pgrep -f "^$tag-$1" >/dev/null; }
# gone_within NAME SECONDS, leaves_within N SECONDS: wait for it (SECONDS
# or HANG_S at most, see wait_for).
gone_within() { wait_for "$2" eval "! alive $1"; }
leaves() { ls -d "$CG"/user/cmd-* "$CG"/ptys/cmd-* 2>/dev/null | wc -l; }
leaves_are() { [ "$(leaves)" = "$1" ]; }
leaves_within() { wait_for "$2" leaves_are "$1"; }
# busy loop of about a quarter second of CPU
BUSY='i=0; while [ $i -lt 150000 ]; do i=$((i+1)); done'
field() { grep -o "\"$1\": \"[0-9]*\"" | grep -o '[0-9]*' | head -1; }

if [ -n "$CG" ]; then
	start_envd -cgroup-root "$CG"
	check "workload cgroups created" "yes" "$([ -d "$CG/user" ] && [ -d "$CG/ptys" ] && echo yes)"

	# --- placement ---
	out=$(stream Start '{"process":{"cmd":"cat","args":["/proc/self/cgroup"]},"stdin":false}')
	check_re "pipe command in its own leaf under user/" "0::/.*/user/cmd-[0-9]+-[0-9]+" "$(stdout_of <<<"$out")"
	out=$(stream Start '{"process":{"cmd":"cat","args":["/proc/self/cgroup"]},"pty":{"size":{"cols":80,"rows":24}}}')
	check_re "PTY command in its own leaf under ptys/" "ptys/cmd-[0-9]+-[0-9]+" "$(python3 -c '
import sys, json, base64
for l in sys.stdin:
    e = json.loads(l.split(" ", 1)[1]).get("event", {})
    if "data" in e: sys.stdout.write(e["data"].get("pty", ""))' <<<"$out")"
	out=$(stream Start '{"process":{"cmd":"cat","args":["/proc/self/cgroup"]},"stdin":false,"tag":"_system"}')
	check "a _system command stays in envd's cgroup" "$(grep '^0::' /proc/$ENVD_PID/cgroup)" \
		"$(stdout_of <<<"$out" | grep '^0::')"
	leaves_within 0 5 && ok "leaves of finished commands are removed" || nok "leaves removed" "$(leaves) left"

	# --- SIGKILL empties the cgroup: setsid and double-fork escapees die too ---
	stream Start "{\"process\":{\"cmd\":\"bash\",\"args\":[\"-c\",\"setsid bash -c 'exec -a $tag-s sleep 1000' & (bash -c 'exec -a $tag-d sleep 1000' &) ; exec -a $tag-l sleep 1000\"]},\"stdin\":false}" >"$TMP/k.out" &
	bg=$!
	pid=$(pid_in "$TMP/k.out") || exit 1
	wait_for 5 eval 'alive s && alive d'
	check "setsid and double-forked descendants running" "yes" "$(alive s && alive d && echo yes)"
	check "setsid child left the process group" "yes" \
		"$([ "$(ps -o pgid= -p "$(pgrep -f "^$tag-s")" | tr -d ' ')" != "$pid" ] && echo yes)"
	check "SendSignal SIGKILL" "200 {}" "$(unary SendSignal "{\"process\":{\"pid\":$pid},\"signal\":\"SIGNAL_SIGKILL\"}")"
	gone_within s 5 && ok "setsid escapee killed" || nok "setsid escapee killed" "$(pgrep -af "$tag")"
	gone_within d 5 && ok "double-forked escapee killed" || nok "double-forked escapee killed"
	wait $bg
	check_re "end: signal: killed" '"status": "signal: killed"' "$(cat "$TMP/k.out")"
	leaves_within 0 5 && ok "its leaf is removed" || nok "its leaf is removed" "$(leaves) left"

	# --- the Start deadline does the same ---
	out=$(stream Start "{\"process\":{\"cmd\":\"bash\",\"args\":[\"-c\",\"setsid bash -c 'exec -a $tag-t sleep 1000' & sleep 1000\"]},\"stdin\":false}" -H 'Connect-Timeout-Ms: 800')
	check_re "deadline ends the stream" '^2 .*"deadline_exceeded"' "$(tail -1 <<<"$out")"
	gone_within t 5 && ok "deadline killed the setsid escapee" || nok "deadline killed the setsid escapee"

	# --- other signals still go to the process group only ---
	stream Start "{\"process\":{\"cmd\":\"bash\",\"args\":[\"-c\",\"setsid bash -c 'trap \\\"\\\" TERM; exec -a $tag-g sleep 1000' & sleep 1000\"]},\"stdin\":false}" >"$TMP/g.out" &
	bg=$!
	pid=$(pid_in "$TMP/g.out") || exit 1
	wait_for 5 alive g
	check "SendSignal SIGTERM" "200 {}" "$(unary SendSignal "{\"process\":{\"pid\":$pid},\"signal\":\"SIGNAL_SIGTERM\"}")"
	wait $bg
	check_re "SIGTERM ended the command" '"status": "signal: terminated"' "$(cat "$TMP/g.out")"
	check "SIGTERM did not reach the setsid child" "yes" "$(alive g && echo yes)"
	kill -KILL $(pgrep -f "^$tag-g")

	# --- a background server outlives its command's end ---
	sport=$(free_port)
	out=$(stream Start "{\"process\":{\"cmd\":\"sh\",\"args\":[\"-c\",\"cd /tmp && nohup /usr/bin/python3 -m http.server $sport --bind 127.0.0.1 >/dev/null 2>&1 & echo started\"]},\"stdin\":false}")
	check_re "command ended" '"end": \{"exited": true' "$out"
	up=""
	wait_for 10 curl -s -o /dev/null "http://127.0.0.1:$sport/" && up=yes
	check "background server still serving after the end event" "yes" "$up"
	check "its leaf stays while it runs" "1" "$(leaves)"
	spid=$(cat "$(ls -d "$CG"/user/cmd-* | head -1)/cgroup.procs" | head -1)
	kill "$spid"
	leaves_within 0 10 && ok "leaf removed once the server exits" || nok "leaf removed once the server exits" "$(leaves) left"

	# --- usage in the end event: the whole tree ---
	out=$(stream Start "{\"process\":{\"cmd\":\"sh\",\"args\":[\"-c\",\"($BUSY) & $BUSY; wait\"]},\"stdin\":false}")
	u=$(field cpuUserUsec <<<"$out")
	s=$(field cpuSystemUsec <<<"$out")
	w=$(field wallUsec <<<"$out")
	echo "# usage (cgroup): user ${u:-0} us, system ${s:-0} us, wall ${w:-0} us"
	check_re "CPU usage of the tree reported (${u:-0}+${s:-0} us)" '^ok$' "$([ $((${u:-0} + ${s:-0})) -ge 100000 ] && echo ok)"
	check_re "wall time reported" '^[0-9]+$' "$w"
	check_re "oomKilled absent (false) for a normal exit" '^$' "$(grep -o oomKilled <<<"$out")"

	# --- limits: applied when the controller is there, refused clearly when not ---
	if grep -qw memory "$CG/user/cgroup.subtree_control"; then
		stream Start '{"process":{"cmd":"sleep","args":["1000"],"limits":{"memoryMaxBytes":"33554432"}},"stdin":false}' >"$TMP/m.out" &
		bg=$!
		pid=$(pid_in "$TMP/m.out") || exit 1
		leaf=$(grep '^0::' /proc/$pid/cgroup | cut -d: -f3)
		check "memory.max of its leaf" "33554432" "$(cat "$(dirname "$CG")$leaf/memory.max" 2>/dev/null || \
			cat "$CG/user/$(basename "$leaf")/memory.max")"
		unary SendSignal "{\"process\":{\"pid\":$pid},\"signal\":\"SIGNAL_SIGKILL\"}" >/dev/null
		wait $bg
	else
		out=$(stream Start '{"process":{"cmd":"true","limits":{"memoryMaxBytes":"33554432"}},"stdin":false}')
		check_re "memory limit without the controller: failed_precondition" \
			'"failed_precondition".*memory controller is not available' "$out"
	fi
	if grep -qw pids "$CG/user/cgroup.subtree_control"; then
		out=$(stream Start '{"process":{"cmd":"true","limits":{"pidsMax":10}},"stdin":false}')
		check_re "pids limit applied" '"end"' "$out"
	else
		out=$(stream Start '{"process":{"cmd":"true","limits":{"pidsMax":10}},"stdin":false}')
		check_re "pids limit without the controller: failed_precondition" '"failed_precondition".*pids' "$out"
	fi
	out=$(stream Start '{"process":{"cmd":"true","limits":{"cpuPercent":50}},"stdin":false,"tag":"_system"}')
	check_re "limits on a _system command: failed_precondition" '"failed_precondition".*_system' "$out"
	check "envd alive" "204" "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/health")"
	kill "$ENVD_PID" && wait "$ENVD_PID" 2>/dev/null
	ENVD_PID=
else
	echo "# no private cgroup2 directory here (needs root and a writable cgroup2 mount with cgroup.kill): only the no-cgroup checks run"
fi

# --- without cgroups: as before, with the leader's rusage ---
start_envd -no-cgroups
out=$(stream Start "{\"process\":{\"cmd\":\"sh\",\"args\":[\"-c\",\"$BUSY\"]},\"stdin\":false}")
u=$(field cpuUserUsec <<<"$out")
s=$(field cpuSystemUsec <<<"$out")
echo "# usage (rusage): user ${u:-0} us, system ${s:-0} us"
check_re "without cgroups: the leader's CPU usage (${u:-0}+${s:-0} us)" '^ok$' "$([ $((${u:-0} + ${s:-0})) -ge 50000 ] && echo ok)"
out=$(stream Start '{"process":{"cmd":"true","limits":{"memoryMaxBytes":"33554432"}},"stdin":false}')
check_re "limits without cgroups: failed_precondition" '"failed_precondition".*without cgroups' "$out"
out=$(stream Start '{"process":{"cmd":"cat","args":["/proc/self/cgroup"]},"stdin":false}')
check "without cgroups: the command stays in envd's cgroup" "$(grep '^0::' /proc/$ENVD_PID/cgroup)" \
	"$(stdout_of <<<"$out" | grep '^0::')"
summary
