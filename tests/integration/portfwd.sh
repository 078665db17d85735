#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Port forwarding (docs/protocol.md, "Port forwarding"): envd makes loopback-only listeners reachable on
# the sandbox address. Runs in a private network namespace (the sandbox
# address lives on its loopback there), so nothing touches the host network.
set -uo pipefail
cd "$(dirname "$0")/../.."

if [ -z "${PORTFWD_IN_NETNS:-}" ]; then
	if ! unshare -n true 2>/dev/null; then
		echo "SKIP: cannot create a network namespace (needs root or user namespaces)"
		echo "portfwd: 0 passed, 0 failed"
		exit 0
	fi
	# The namespace dies with its last process: nothing to clean up.
	PORTFWD_IN_NETNS=1 exec unshare -n bash "$0" "$@"
fi

. tests/lib.sh
T_NAME=portfwd
SBX=169.254.0.21
probe() { "$PY" tests/integration/portfwd_probe.py "$@"; }

ip link set lo up
ip addr add "$SBX/32" dev lo
ip -6 addr add ::1/128 dev lo 2>/dev/null || true

envd_start -sandbox-addr "$SBX" -verbose || { fail "envd starts"; finish; exit 1; }

out=$(probe latency "$SBX" 4111 10 2>&1)
rc=$?
echo "$out"
[ $rc = 0 ] && pass "new loopback listener reachable on $SBX ($out)" ||
	fail "detection latency" "$out"

out=$(probe reopen "$SBX" 4112 2>&1) && pass "closed port torn down, reopened port forwarded again ($out)" ||
	fail "reopen" "$out"

out=$(probe halfclose "$SBX" 4113 2>&1) && pass "client half-close reaches the service, reply still relayed" ||
	fail "half-close" "$out"

out=$(probe reset "$SBX" 4114 2>&1) && pass "a service reset reaches the client as a reset" ||
	fail "reset" "$out"

out=$(probe v6 "$SBX" 4115 2>&1) && pass "listener on ::1 forwarded ($out)" || fail "::1 listener" "$out"

out=$(probe notfwd "$SBX" 4116 127.0.0.2 2>&1) && pass "listener on 127.0.0.2 not forwarded" ||
	fail "127.0.0.2 not forwarded" "$out"

# A wildcard listener is reachable by itself; envd must not add its own.
# A loopback listener opened with it is a witness: once that one is
# forwarded, envd has scanned since both were there.
"$PY" -c 'import socket,time
s=socket.socket(); s.bind(("0.0.0.0",4117)); s.listen()
w=socket.socket(); w.bind(("127.0.0.1",4122)); w.listen(); time.sleep(3600)' &
wpid=$!
witness_forwarded() { [ "$(ss -Hltn "src $SBX and sport = :4122" | wc -l)" = 1 ]; }
wait_for 60 witness_forwarded
n=$(ss -Hltn 'sport = :4117' | wc -l)
expect_eq "wildcard listener not forwarded (one listener on :4117)" 1 "$n"
kill $wpid 2>/dev/null
wait $wpid 2>/dev/null

n=$(ss -Hltn "src $SBX and sport = :$ENVD_PORT" | wc -l)
expect_eq "envd's own port not forwarded" 0 "$n"

# A real HTTP server, as in the issue.
"$PY" -m http.server 4118 --bind 127.0.0.1 --directory tests/integration >/dev/null 2>&1 &
hpid=$!
code=000
served() { code=$(curl -s -o /dev/null -w '%{http_code}' "http://$SBX:4118/portfwd.sh" 2>/dev/null); [ "$code" = 200 ]; }
wait_for 60 served
expect_eq "python3 -m http.server on 127.0.0.1 answers on $SBX" 200 "$code"
body=$(curl -s "http://$SBX:4118/portfwd.sh" | sha256sum | cut -c1-64)
expect_eq "body relayed intact" "$(sha256sum tests/integration/portfwd.sh | cut -c1-64)" "$body"
kill $hpid 2>/dev/null
wait $hpid 2>/dev/null

fds_before=$(ls /proc/"$ENVD_PID"/fd | wc -l)
out=$(probe many "$SBX" 4119 200 2>&1) && pass "$out" || fail "concurrent relays" "$out"
fds_back() { [ "$(ls /proc/"$ENVD_PID"/fd | wc -l)" -le "$fds_before" ]; }
wait_for 30 fds_back
fds_after=$(ls /proc/"$ENVD_PID"/fd | wc -l)
# the forward for 4119 is gone too once the echo server closed
[ "$fds_after" -le "$fds_before" ] && pass "no descriptors leaked by relays ($fds_before -> $fds_after)" ||
	fail "descriptor leak" "$fds_before -> $fds_after"

# Throughput: relay vs direct, same sink.
"$PY" tests/integration/portfwd_probe.py sink 127.0.0.1 4120 &
spid=$!
direct=$(probe throughput 127.0.0.1 4120 256 2>&1)
relayed=$(probe throughput "$SBX" 4120 256 2>&1)
kill $spid 2>/dev/null
wait $spid 2>/dev/null
echo "throughput MiB/s: direct $direct, relayed $relayed"
if [[ "$direct" =~ ^[0-9]+$ && "$relayed" =~ ^[0-9]+$ ]] && [ "$relayed" -gt 0 ]; then
	pass "256 MiB relayed intact: ${relayed} MiB/s relayed vs ${direct} MiB/s direct"
else
	fail "throughput" "direct [$direct] relayed [$relayed]"
fi

# Idle, the scan slows down to once a second; a process started through
# envd makes it fast again (a server it starts is forwarded at the fast
# pace). Seen in envd's log, where each change of pace is a line.
idle_pace() { grep -q '"port scan every 1000 ms (idle)' "$ENVD_LOG"; }
wait_for $((HANG_S + 60)) idle_pace && pass "no listener change for a while: one scan a second" ||
	fail "idle scan pace" "$(grep -a 'port scan' "$ENVD_LOG" | tail -n 2)"
curl -s --max-time "$HANG_S" -o /dev/null -H 'Content-Type: application/connect+json' \
	--data-binary @<(printf '\0\0\0\0\x24{"process":{"cmd":"true","args":[]}}') \
	"http://127.0.0.1:$ENVD_PORT/process.Process/Start"
active_pace() { grep -q '"port scan every 50 ms (active)' "$ENVD_LOG"; }
wait_for 60 active_pace && pass "a process started: the scan is fast again" ||
	fail "active scan pace" "$(grep -a 'port scan' "$ENVD_LOG" | tail -n 2)"
out=$(probe latency "$SBX" 4123 1 2>&1) && pass "a listener after the idle spell is forwarded ($out)" ||
	fail "forwarded after idle" "$out"

check "envd still alive" envd_alive

# -no-port-forward turns it off.
envd_stop
envd_start -no-port-forward || fail "envd starts with -no-port-forward"
out=$(probe notfwd "$SBX" 4121 127.0.0.1 2>&1) && pass "-no-port-forward: nothing forwarded" ||
	fail "-no-port-forward" "$out"
envd_stop

finish
