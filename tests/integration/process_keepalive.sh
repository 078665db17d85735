#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Keep-alive events on Start/Connect streams: sent after
# Keepalive-Ping-Interval seconds without data, restarted by data, and a
# missing or non-positive interval means the 90 s default.
. "$(dirname "$0")/process_lib.sh"
start_envd

count_ka() { grep -c '"keepalive": {}' <<<"$1"; }

# An idle child that ends when told: once three keep-alives have come, it
# is told. They must not come faster than the interval.
t0=$(date +%s%N)
stream_bg "$TMP/idle.out" Start "{\"process\":{\"cmd\":\"sh\",\"args\":[\"-c\",\"while [ ! -e $TMP/go1 ]; do sleep 0.05; done\"]},\"stdin\":false}" \
	-H 'Keepalive-Ping-Interval: 1'
three() { [ "$(grep -c '"keepalive": {}' "$TMP/idle.out")" -ge 3 ]; }
wait_for 60 three
t1=$(date +%s%N)
touch "$TMP/go1"
wait "$STREAM_JOB"
out=$(cat "$TMP/idle.out")
n=$(count_ka "$out")
check_re "idle at 1 s interval: keep-alives ($n)" '^[3-9]$' "$n"
check_re "keep-alives come between start and end" '^start( keepalive){3,} end eos$' "$(kinds <<<"$out")"
ms=$(((t1 - t0) / 1000000))
# At least: a slow machine only makes them later.
check "three keep-alives take at least ~3 s ($ms ms)" yes "$([ "$ms" -ge 2800 ] && echo yes)"

# Data every 0.2 s for 10 s against a 4 s interval: without the restart two
# keep-alives would come; a 3.8 s stall of the child or of envd would be
# needed to see one (twenty times the gap, a machine far slower than ours).
out=$(stream Start '{"process":{"cmd":"sh","args":["-c","i=0; while [ $i -lt 50 ]; do echo $i; sleep 0.2; i=$((i+1)); done"]},"stdin":false}' \
	-H 'Keepalive-Ping-Interval: 4')
check "data restarts the interval: no keep-alive" "0" "$(count_ka "$out")"

out=$(stream Start '{"process":{"cmd":"sleep","args":["1.5"]},"stdin":false}' -H 'Keepalive-Ping-Interval: 0')
check "interval 0 means the 90 s default" "0" "$(count_ka "$out")"
out=$(stream Start '{"process":{"cmd":"sleep","args":["1.5"]},"stdin":false}' -H 'Keepalive-Ping-Interval: -3')
check "negative interval means the default (no crash)" "0" "$(count_ka "$out")"
check_re "and the stream still ends properly" '"exit status 0"' "$out"

# Connect streams get them too; the child ends once one has come.
stream Start "{\"process\":{\"cmd\":\"sh\",\"args\":[\"-c\",\"while [ ! -e $TMP/go2 ]; do sleep 0.05; done\"]},\"stdin\":false}" >"$TMP/s.out" &
bg=$!
pid=$(pid_in "$TMP/s.out") || exit 1
stream_bg "$TMP/c.out" Connect "{\"process\":{\"pid\":$pid}}" -H 'Keepalive-Ping-Interval: 1'
wait_for 60 has "$TMP/c.out" '"keepalive"'
touch "$TMP/go2"
wait "$STREAM_JOB"
wait $bg
out=$(cat "$TMP/c.out")
n=$(count_ka "$out")
check_re "Connect stream keep-alives ($n)" '^[1-9]$' "$n"
check_re "Connect stream end" '"end": \{"exited": true, "status": "exit status 0"(, "usage": \{[^}]*\})?\}' "$out"
kill -0 "$ENVD_PID" && ok "envd alive" || nok "envd alive"
summary
