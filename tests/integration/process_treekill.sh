#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Process lifetime: SendSignal reaches the whole group (no descendant
# survives), the additive signals work, Connect-Timeout-Ms kills the tree,
# a grandchild holding the output delays the end by a short grace only, and
# the process outlives its stream.
. "$(dirname "$0")/process_lib.sh"
start_envd

tag=tk$$
survivors() { pgrep -f "^$tag" | wc -l; }
gone_within() { # seconds
	for _ in $(seq $(($1 * 20))); do
		[ "$(survivors)" = 0 ] && return 0
		sleep 0.05
	done
	return 1
}

# --- SIGKILL: leader, children, grandchildren, a subshell's children ---
stream Start "{\"process\":{\"cmd\":\"bash\",\"args\":[\"-c\",\"exec -a $tag-a sleep 300 & (exec -a $tag-b sleep 300 &); bash -c 'exec -a $tag-c sleep 300' & wait\"]},\"stdin\":false}" >"$TMP/k.out" &
bg=$!
pid=$(pid_in "$TMP/k.out") || exit 1
for _ in $(seq 40); do [ "$(survivors)" = 3 ] && break; sleep 0.05; done
check "three descendants running" "3" "$(survivors)"
check "SendSignal SIGKILL" "200 {}" "$(unary SendSignal "{\"process\":{\"pid\":$pid},\"signal\":\"SIGNAL_SIGKILL\"}")"
gone_within 2 && ok "no descendant survives" || nok "no descendant survives" "$(pgrep -af "$tag")"
wait $bg
check_re "end: signal: killed" '"exitCode": -1, "status": "signal: killed"' "$(cat "$TMP/k.out")"
check_re "signalling a finished process" '^(404|500) ' \
	"$(unary SendSignal "{\"process\":{\"pid\":$pid},\"signal\":\"SIGNAL_SIGKILL\"}")"

# --- additive signals: SIGINT to a trap, SIGSTOP/SIGCONT, SIGHUP ---
stream Start '{"process":{"cmd":"bash","args":["-c","trap \"echo got-int; exit 3\" INT; while :; do sleep 0.05; done"]},"stdin":false}' >"$TMP/i.out" &
bg=$!
pid=$(pid_in "$TMP/i.out") || exit 1
sleep 0.3
check "SIGSTOP" "200 {}" "$(unary SendSignal "{\"process\":{\"pid\":$pid},\"signal\":\"SIGNAL_SIGSTOP\"}")"
sleep 0.2
check "stopped" "T" "$(awk '{print $3}' /proc/$pid/stat)"
check "SIGCONT (by number)" "200 {}" "$(unary SendSignal "{\"process\":{\"pid\":$pid},\"signal\":18}")"
sleep 0.2
check_re "running again" '^[RS]$' "$(awk '{print $3}' /proc/$pid/stat)"
check "SIGINT" "200 {}" "$(unary SendSignal "{\"process\":{\"pid\":$pid},\"signal\":\"SIGNAL_SIGINT\"}")"
wait $bg
check_re "trap ran" '"stdout": "got-int\\n"' "$(cat "$TMP/i.out")"
check_re "exit 3" '"exitCode": 3' "$(cat "$TMP/i.out")"

out=$(stream Start '{"process":{"cmd":"sh","args":["-c","kill -HUP $$"]},"stdin":false}')
check_re "Go signal names" '"status": "signal: hangup"' "$out"
out=$(stream Start '{"process":{"cmd":"sh","args":["-c","ulimit -c 0; kill -SEGV $$"]},"stdin":false}')
check_re "segmentation fault" '"status": "signal: segmentation fault"' "$out"

# --- Connect-Timeout-Ms kills the process tree at the deadline ---
t0=$(date +%s%N)
out=$(stream Start "{\"process\":{\"cmd\":\"bash\",\"args\":[\"-c\",\"exec -a $tag-t sleep 300 & wait\"]},\"stdin\":false}" -H 'Connect-Timeout-Ms: 600')
t1=$(date +%s%N)
check_re "deadline ends the stream with deadline_exceeded" '^2 .*"deadline_exceeded"' "$(tail -1 <<<"$out")"
check_re "no end event before the deadline error" '^start eos$' "$(kinds <<<"$out")"
ms=$(((t1 - t0) / 1000000))
check_re "after ~600 ms ($ms)" '^(5[5-9][0-9]|[6-9][0-9][0-9]|1[0-9][0-9][0-9])$' "$ms"
gone_within 2 && ok "timeout killed the tree" || nok "timeout killed the tree" "$(pgrep -af "$tag")"

# --- lifetime independent of the stream ---
MAXTIME=1 stream Start '{"process":{"cmd":"sh","args":["-c","sleep 1.5; echo late"]},"stdin":false}' >"$TMP/d.out"
pid=$(pid_in "$TMP/d.out") || exit 1
check_re "still running after its stream went away" "\"pid\":$pid" "$(unary List '{}')"
out=$(stream Connect "{\"process\":{\"pid\":$pid}}")
check_re "reconnect gets later output and the end" '"stdout": "late\\n".*' "$out"
check_re "reconnect end" '"exit status 0"' "$out"

# --- grandchild keeps stdout open: end after a short grace, listed until EOF ---
t0=$(date +%s%N)
out=$(stream Start "{\"process\":{\"cmd\":\"bash\",\"args\":[\"-c\",\"(exec -a $tag-g sleep 6) & echo leader-done\"]},\"stdin\":false}")
t1=$(date +%s%N)
ms=$(((t1 - t0) / 1000000))
pid=$(grep -o '"pid": [0-9]*' <<<"$out" | grep -o '[0-9]*$')
check_re "end after the grace, not after the grandchild ($ms ms)" '^(1[89][0-9][0-9]|[23][0-9][0-9][0-9])$' "$ms"
check_re "with the leader's output and status" '"stdout": "leader-done\\n".*"exit status 0"' "$(tr '\n' ' ' <<<"$out")"
check_re "listed while the grandchild holds the pipe" "\"pid\":$pid" "$(unary List '{}')"
check "SIGKILL still reaches the group" "200 {}" "$(unary SendSignal "{\"process\":{\"pid\":$pid},\"signal\":\"SIGNAL_SIGKILL\"}")"
gone_within 2 && ok "grandchild killed" || nok "grandchild killed"
sleep 0.2
check "unlisted after EOF" "" "$(unary List '{}' | grep -o "\"pid\":$pid")"
summary
