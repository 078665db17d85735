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
none_left() { [ "$(survivors)" = 0 ]; }
gone_within() { wait_for "$1" none_left; } # seconds: a deadline, not a measurement
state_of() { awk '{print $3}' "/proc/$1/stat" 2>/dev/null; }
in_state() { [[ $(state_of "$1") =~ ^$2$ ]]; } # in_state PID REGEX

# --- SIGKILL: leader, children, grandchildren, a subshell's children ---
stream Start "{\"process\":{\"cmd\":\"bash\",\"args\":[\"-c\",\"exec -a $tag-a sleep 300 & (exec -a $tag-b sleep 300 &); bash -c 'exec -a $tag-c sleep 300' & wait\"]},\"stdin\":false}" >"$TMP/k.out" &
bg=$!
pid=$(pid_in "$TMP/k.out") || exit 1
three_up() { [ "$(survivors)" = 3 ]; }
wait_for 60 three_up
check "three descendants running" "3" "$(survivors)"
check "SendSignal SIGKILL" "200 {}" "$(unary SendSignal "{\"process\":{\"pid\":$pid},\"signal\":\"SIGNAL_SIGKILL\"}")"
gone_within 30 && ok "no descendant survives" || nok "no descendant survives" "$(pgrep -af "$tag")"
wait $bg
check_re "end: signal: killed" '"exitCode": -1, .*"status": "signal: killed"' "$(cat "$TMP/k.out")"
check_re "signalling a finished process" '^(404|500) ' \
	"$(unary SendSignal "{\"process\":{\"pid\":$pid},\"signal\":\"SIGNAL_SIGKILL\"}")"

# --- additive signals: SIGINT to a trap, SIGSTOP/SIGCONT, SIGHUP ---
# "ready" says the trap is in place.
stream Start '{"process":{"cmd":"bash","args":["-c","trap \"echo got-int; exit 3\" INT; echo ready; while :; do sleep 0.05; done"]},"stdin":false}' >"$TMP/i.out" &
bg=$!
pid=$(pid_in "$TMP/i.out") || exit 1
wait_for 60 grep -q '"stdout": "ready' "$TMP/i.out"
check "SIGSTOP" "200 {}" "$(unary SendSignal "{\"process\":{\"pid\":$pid},\"signal\":\"SIGNAL_SIGSTOP\"}")"
wait_for 30 in_state "$pid" T
check "stopped" "T" "$(state_of "$pid")"
check "SIGCONT (by number)" "200 {}" "$(unary SendSignal "{\"process\":{\"pid\":$pid},\"signal\":18}")"
wait_for 30 in_state "$pid" '[RS]'
check_re "running again" '^[RS]$' "$(state_of "$pid")"
check "SIGINT" "200 {}" "$(unary SendSignal "{\"process\":{\"pid\":$pid},\"signal\":\"SIGNAL_SIGINT\"}")"
wait $bg
check "trap ran" "$(printf 'ready\ngot-int\n')" "$(stdout_of <"$TMP/i.out")"
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
# Not before the deadline; the upper bound (HANG_S) only catches a hang.
check "after ~600 ms ($ms)" yes "$([ "$ms" -ge 550 ] && [ "$ms" -lt $((HANG_S * 1000)) ] && echo yes)"
gone_within 30 && ok "timeout killed the tree" || nok "timeout killed the tree" "$(pgrep -af "$tag")"

# --- lifetime independent of the stream ---
# The child prints only once the reconnected stream is attached ($TMP/go).
stream_bg "$TMP/d.out" Start "{\"process\":{\"cmd\":\"sh\",\"args\":[\"-c\",\"while [ ! -e $TMP/go ]; do sleep 0.02; done; echo late\"]},\"stdin\":false}"
pid=$(pid_in "$TMP/d.out") || exit 1
kill "$STREAM_PID"
wait "$STREAM_JOB"
check_re "still running after its stream went away" "\"pid\":$pid" "$(unary List '{}')"
stream_bg "$TMP/r.out" Connect "{\"process\":{\"pid\":$pid}}"
pid_in "$TMP/r.out" >/dev/null
touch "$TMP/go"
wait "$STREAM_JOB"
out=$(cat "$TMP/r.out")
check_re "reconnect gets later output and the end" '"stdout": "late\\n".*' "$out"
check_re "reconnect end" '"exit status 0"' "$out"

# --- grandchild keeps stdout open: end after a short grace, listed until EOF ---
t0=$(date +%s%N)
out=$(stream Start "{\"process\":{\"cmd\":\"bash\",\"args\":[\"-c\",\"(exec -a $tag-g sleep 3600) & echo leader-done\"]},\"stdin\":false}")
t1=$(date +%s%N)
ms=$(((t1 - t0) / 1000000))
pid=$(grep -o '"pid": [0-9]*' <<<"$out" | grep -o '[0-9]*$')
# The grace is 2 s (PROCESS_GRACE_S); the grandchild would hold the pipe for
# an hour. HANG_S as the upper bound tells the two apart on any machine.
check "end after the grace, not after the grandchild ($ms ms)" yes \
	"$([ "$ms" -ge 1800 ] && [ "$ms" -lt $((HANG_S * 1000)) ] && echo yes)"
check_re "with the leader's output and status" '"stdout": "leader-done\\n".*"exit status 0"' "$(tr '\n' ' ' <<<"$out")"
check_re "listed while the grandchild holds the pipe" "\"pid\":$pid" "$(unary List '{}')"
check "SIGKILL still reaches the group" "200 {}" "$(unary SendSignal "{\"process\":{\"pid\":$pid},\"signal\":\"SIGNAL_SIGKILL\"}")"
gone_within 30 && ok "grandchild killed" || nok "grandchild killed"
unlisted() { ! unary List '{}' | grep -q "\"pid\":$pid"; }
wait_for 30 unlisted
check "unlisted after EOF" "" "$(unary List '{}' | grep -o "\"pid\":$pid")"
summary
