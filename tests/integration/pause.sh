#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A simulated VM pause: envd and its children are stopped (SIGSTOP) in the
# middle of live streams, then continued and re-initialised with /init as
# the orchestrator does after a resume. Streams must resume (output and
# keep-alives go on) and end cleanly; new requests work at once.
. "$(dirname "$0")/process_lib.sh"
start_envd
PAUSE_S=${PAUSE_S:-4}

# A command that prints a line per second for 8 s, streamed with 1 s keep-alives.
MAXTIME=$((12 * HANG_S)) stream Start '{"process":{"cmd":"sh","args":["-c","for i in 1 2 3 4 5 6 7 8; do echo tick $i; sleep 1; done"]},"stdin":false}' \
	-H 'Keepalive-Ping-Interval: 1' >"$TMP/ticks.out" &
s1=$!
# A silent one, so only keep-alives flow on it; it ends when told ($TMP/go).
MAXTIME=$((12 * HANG_S)) stream Start "{\"process\":{\"cmd\":\"sh\",\"args\":[\"-c\",\"while [ ! -e $TMP/go ]; do sleep 0.1; done\"]},\"stdin\":false}" \
	-H 'Keepalive-Ping-Interval: 1' >"$TMP/quiet.out" &
s2=$!
p1=$(pid_in "$TMP/ticks.out") || exit 1
p2=$(pid_in "$TMP/quiet.out") || exit 1
# Pause in the middle of live streams: output and a keep-alive have flowed.
count_ka() { grep -c '"keepalive": {}' "$TMP/quiet.out"; }
live() { has "$TMP/ticks.out" '"tick 2' && [ "$(count_ka)" -ge 1 ]; }
wait_for 60 live

# Freeze everything of the sandbox: envd and both process groups.
kill -STOP "$ENVD_PID" -"$p1" -"$p2" 2>/dev/null
ka0=$(count_ka)
sleep "$PAUSE_S"
kill -CONT -"$p1" -"$p2" "$ENVD_PID" 2>/dev/null
ts=$(date -u +%Y-%m-%dT%H:%M:%S.%NZ)
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 30 -X POST -d "{\"timestamp\":\"$ts\"}" "http://127.0.0.1:$PORT/init")
check "/init right after resume is 204" 204 "$code"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 30 "http://127.0.0.1:$PORT/health")
check "health right after resume" 204 "$code"
out=$(unary List '{}')
check_re "List right after resume" '^200 .*"pid":' "$out"

# Two keep-alives after the pause show the timer runs on; then end it.
resumed() { [ "$(count_ka)" -ge $((ka0 + 2)) ]; }
wait_for 60 resumed
touch "$TMP/go"
wait $s1 $s2
ticks=$(stdout_of <"$TMP/ticks.out" | grep -c '^tick ')
check "every line of the ticking command arrived" 8 "$ticks"
check_re "ticking stream ended with exit 0" '"status": "exit status 0"' "$(cat "$TMP/ticks.out")"
check "ticking stream: start first, end-stream last" "start eos" \
	"$(kinds <"$TMP/ticks.out" | awk '{print $1, $NF}')"
ka=$(count_ka)
check "keep-alives went on after the pause ($ka0 before, $ka in all)" yes "$([ "$ka" -ge $((ka0 + 2)) ] && echo yes)"
check_re "quiet stream ended with exit 0" '"status": "exit status 0"' "$(cat "$TMP/quiet.out")"
kill -0 "$ENVD_PID" && ok "envd alive" || nok "envd alive"
summary
