#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Port forwarding on a real network interface: a server bound to 127.0.0.1
# in the guest is made reachable on the sandbox address by envd, and from
# there through QEMU's forward to the host.
. "$(dirname "$0")/lib.sh"
GPORT=8123
HPORT=$((20000 + RANDOM % 12000)) # below the ephemeral range

vm_exec "mkdir -p /tmp/pf && echo 'hello from the guest' >/tmp/pf/index.txt" >/dev/null
# python3's http.server where the image has python3 (amd64), busybox's
# httpd where it does not (the arm64 image carries no python).
pid=$(vm_exec --background "cd /tmp/pf && if command -v python3 >/dev/null; then exec python3 -m http.server $GPORT --bind 127.0.0.1; else exec busybox httpd -f -p 127.0.0.1:$GPORT -h /tmp/pf; fi")
vm_monitor "hostfwd_add net0 tcp:127.0.0.1:$HPORT-$VM_GUEST_IP:$GPORT" >/dev/null
t0=$(date +%s%3N)
got=
answers() { got=$(curl -s --max-time 10 "http://127.0.0.1:$HPORT/index.txt"); [ "$got" = "hello from the guest" ]; }
wait_for 30 answers
expect_eq "a loopback-only server in the guest answers on the host after $(($(date +%s%3N) - t0)) ms" \
	"hello from the guest" "$got"
listen=$(vm_exec "ss -Hltn 'sport = :$GPORT' | awk '{print \$4}' | sort | tr '\n' ' '")
expect_match "envd listens on the sandbox address for it" "$VM_GUEST_IP:$GPORT" "$listen"
# 8 MiB through the relay and slirp, intact.
vm_exec "head -c 8388608 /dev/urandom >/tmp/pf/big && sha256sum </tmp/pf/big | cut -d' ' -f1" >"$VM_RUN_DIR/pf.sum"
sum=$(curl -s --max-time "$HANG_S" "http://127.0.0.1:$HPORT/big" | sha256sum | cut -d' ' -f1)
expect_eq "8 MiB through the forward arrive intact" "$(cat "$VM_RUN_DIR/pf.sum")" "$sum"
vm_exec "kill $pid" >/dev/null
vm_monitor "hostfwd_remove net0 tcp:127.0.0.1:$HPORT" >/dev/null
fwd_gone() { [ -z "$(vm_exec "ss -Hltn 'sport = :$GPORT'")" ]; }
wait_for 10 fwd_gone
expect_eq "the forward goes away with the server" "" "$(vm_exec "ss -Hltn 'sport = :$GPORT'")"
finish
