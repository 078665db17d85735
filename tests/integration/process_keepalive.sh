#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Keep-alive events on Start/Connect streams (§6.10): sent after
# Keepalive-Ping-Interval seconds without data, restarted by data, and a
# missing or non-positive interval means the 90 s default.
. "$(dirname "$0")/process_lib.sh"
start_envd

count_ka() { grep -c '"keepalive": {}' <<<"$1"; }

t0=$(date +%s%N)
out=$(stream Start '{"process":{"cmd":"sleep","args":["3.5"]},"stdin":false}' -H 'Keepalive-Ping-Interval: 1')
t1=$(date +%s%N)
n=$(count_ka "$out")
check_re "idle 3.5 s at 1 s interval: 3 keep-alives" '^3$' "$n"
check "keep-alives come between start and end" "start keepalive keepalive keepalive end eos" \
	"$(kinds <<<"$out")"
ms=$(((t1 - t0) / 1000000))
check_re "end after ~3.5 s ($ms ms)" '^(3[4-9][0-9][0-9]|4[0-9][0-9][0-9])$' "$ms"

out=$(stream Start '{"process":{"cmd":"sh","args":["-c","for i in 1 2 3 4 5 6; do echo $i; sleep 0.5; done"]},"stdin":false}' \
	-H 'Keepalive-Ping-Interval: 1')
check "data restarts the interval: no keep-alive" "0" "$(count_ka "$out")"

out=$(stream Start '{"process":{"cmd":"sleep","args":["1.5"]},"stdin":false}' -H 'Keepalive-Ping-Interval: 0')
check "interval 0 means the 90 s default" "0" "$(count_ka "$out")"
out=$(stream Start '{"process":{"cmd":"sleep","args":["1.5"]},"stdin":false}' -H 'Keepalive-Ping-Interval: -3')
check "negative interval means the default (no crash)" "0" "$(count_ka "$out")"
check_re "and the stream still ends properly" '"exit status 0"' "$out"

# Connect streams get them too.
stream Start '{"process":{"cmd":"sleep","args":["2.5"]},"stdin":false}' >"$TMP/s.out" &
bg=$!
pid=$(pid_in "$TMP/s.out") || exit 1
out=$(stream Connect "{\"process\":{\"pid\":$pid}}" -H 'Keepalive-Ping-Interval: 1')
wait $bg
n=$(count_ka "$out")
check_re "Connect stream keep-alives" '^[12]$' "$n"
check_re "Connect stream end" '"end": \{"exited": true, "status": "exit status 0"(, "usage": \{[^}]*\})?\}' "$out"
kill -0 "$ENVD_PID" && ok "envd alive" || nok "envd alive"
summary
