#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A pause with a FUSE mount active: a command streams a file from an sshfs
# mount (served from the host, read with direct_io so every read reaches
# the FUSE daemon, which runs in the workload's cgroup as a user's `sudo
# sshfs` does) while the platform pauses the sandbox: /freeze (legacy, then
# hierarchy), QEMU stop/cont, /unfreeze. Nothing may deadlock: /freeze
# answers within maxWaitMs even when a task cannot be frozen (the reader
# blocked in a FUSE read whose server is stopped: reported as not frozen),
# /health answers throughout, a request on the mount whose daemon is
# frozen ends with its deadline, and the stream goes on after the resume
# with every line once. /fsfreeze freezes the root and names the FUSE mount
# it skips (X-Envd-Fsfreeze-Skipped); /fsthaw answers.
. "$(dirname "$0")/lib.sh"
[ -x /usr/lib/openssh/sftp-server ] || { fail "openssh-sftp-server on the host (scripts/setup.sh)"; finish; exit; }
[ -d "$VM_RUN_DIR/host" ] || { fail "the VM forwards 169.254.169.254:22 to the host (scripts/vm-run.sh)"; finish; exit; }
H=$VM_RUN_DIR/fusepause
MNT=/home/user/pmnt
LINES=40
WAIT_MS=2000
# Hang bounds only: under emulation on a busy host a request can take seconds.
SLACK_MS=${PAUSE_SLACK_MS:-8000}
rm -rf "$H"
mkdir -p "$H/root"
chmod 0777 "$H/root"
for i in $(seq 1 $LINES); do printf 'line %010d\n' "$i"; done >"$H/root/lines.txt"
cat >"$VM_RUN_DIR/host/22" <<EOF
#!/bin/sh
echo \$\$ >>"$H/sftp.pids"
exec /usr/lib/openssh/sftp-server -d "$H/root" 2>>"$H/sftp.log"
EOF
chmod 0755 "$VM_RUN_DIR/host/22"
server() { for p in $(cat "$H/sftp.pids" 2>/dev/null); do kill "-$1" "$p" 2>/dev/null; done; }
SP=
cleanup() {
	vm_curl -o /dev/null --max-time 10 -X POST "$VM_URL/unfreeze"
	vm_curl -o /dev/null --max-time 10 -X POST "$VM_URL/fsthaw"
	vm_monitor cont >/dev/null
	server CONT
	vm_exec "umount -l $MNT" >/dev/null 2>&1
	server TERM
	[ -n "$SP" ] && kill "$SP" 2>/dev/null
	rm -f "$VM_RUN_DIR/host/22"
}
on_exit cleanup
ms() { date +%s%3N; }
# post PATH: POST with a hang bound; prints "STATUS MS BODY".
post() {
	local t0 out
	t0=$(ms)
	out=$(vm_curl -w '\n%{http_code}' --max-time $(((WAIT_MS + SLACK_MS) / 1000 + 1)) -X POST "$VM_URL$1")
	echo "$(tail -n1 <<<"$out") $(($(ms) - t0)) $(head -n -1 <<<"$out" | tr -d '\n')"
}
lines_seen() { grep -c '"line [0-9]*' "$H/stream" 2>/dev/null; }
# wait_lines N SECONDS: until N lines have arrived.
wait_lines() {
	local end=$(($(ms) + $2 * 1000))
	while [ "$(ms)" -lt "$end" ]; do [ "$(lines_seen)" -ge "$1" ] && return 0; sleep 0.1; done
	return 1
}

out=$(vm_exec -u user "mkdir -p $MNT && sudo sshfs -o allow_other,directport=22,direct_io 169.254.169.254: $MNT && echo mounted" 2>&1)
expect_match "sudo sshfs -o allow_other,direct_io as user" 'mounted' "$out"

# One pread per line, one line per 0.2 s: every line is a FUSE read.
"$PY" scripts/vm-exec.py -u user --events -t 300 "python3 -u -c '
import os, time
fd = os.open(\"$MNT/lines.txt\", os.O_RDONLY)
for i in range($LINES):
    print(os.pread(fd, 16, i * 16).decode().strip(), flush=True)
    time.sleep(0.2)
'" >"$H/stream" 2>&1 &
SP=$!
wait_lines 3 120 && pass "a command streams a file from the FUSE mount" || fail "stream started" "$(head -c 300 "$H/stream")"

# ---- legacy freeze (the FUSE daemon is frozen with the reader), VM stop/cont ----
read -r st t body <<<"$(post "/freeze?maxWaitMs=$WAIT_MS")"
echo "# legacy /freeze: $st in $t ms: $body"
expect_eq "legacy /freeze?maxWaitMs=$WAIT_MS answers 200" 200 "$st"
[ "$t" -le $((WAIT_MS + SLACK_MS)) ] && pass "legacy /freeze answered within maxWaitMs ($t ms)" || fail "legacy /freeze within maxWaitMs" "$t ms"
expect_eq "/health while frozen" 204 "$(vm_health)"
vm_monitor stop >/dev/null
expect_match "QEMU paused" paused "$(vm_monitor 'info status')"
vm_monitor cont >/dev/null
expect_eq "/health after QEMU cont" 204 "$(vm_health)"
n0=$(lines_seen)
read -r st t body <<<"$(post /unfreeze)"
expect_eq "/unfreeze answers 204 ($t ms)" 204 "$st"
wait_lines $((n0 + 3)) 120 && pass "the stream continues after /unfreeze ($n0 -> $(lines_seen) lines)" || fail "stream after /unfreeze" "$(lines_seen) lines"

# ---- a reader stuck in a FUSE read: its server stops answering ----
server STOP
pid=$(vm_exec 'pgrep -u user -x python3 | head -n1')
stuck=
for _ in $(seq 1 600); do
	w=$(vm_exec "cat /proc/$pid/wchan 2>/dev/null; echo; cat /proc/$pid/stat 2>/dev/null | cut -d' ' -f3")
	case $w in *request_wait_answer* | *fuse*) stuck=$w; break ;; esac
	sleep 0.2
done
[ -n "$stuck" ] && pass "the reader waits in a FUSE read ($(echo $stuck))" || fail "the reader blocks in FUSE" "$w"
# A hierarchy freeze cannot freeze the reader (a FUSE wait is not a point
# where a task can stop); /freeze must report it, not wait for it.
read -r st t body <<<"$(post "/freeze?mode=hierarchy&maxWaitMs=$WAIT_MS")"
echo "# hierarchy /freeze with a task in a FUSE wait: $st in $t ms: $body"
expect_eq "hierarchy /freeze answers 200" 200 "$st"
[ "$t" -le $((WAIT_MS + SLACK_MS)) ] && pass "hierarchy /freeze answered within maxWaitMs ($t ms)" || fail "hierarchy /freeze within maxWaitMs" "$t ms"
nf=$(sed -n 's/.*"notFrozen":\([0-9]*\).*/\1/p' <<<"$body")
[ "${nf:-0}" -ge 1 ] && pass "the cgroup that cannot freeze is reported (notFrozen $nf)" || fail "notFrozen reported" "$body"
expect_eq "/health while frozen" 204 "$(vm_health)"
vm_monitor stop >/dev/null
vm_monitor cont >/dev/null
read -r st t body <<<"$(post /unfreeze)"
expect_eq "/unfreeze answers 204 ($t ms)" 204 "$st"

# envd on the stopped mount: its request ends at its deadline (this needs
# the filesystem workers of issue 20; the old envd blocks its loop here
# until the server answers again).
stat_mnt() {
	local t0 r
	t0=$(ms)
	r=$(vm_curl --max-time $(((WAIT_MS + SLACK_MS) / 1000 + 1)) -H 'Content-Type: application/json' -H 'Connect-Timeout-Ms: 2000' \
		-u user: -d "{\"path\":\"$MNT/$1\"}" "$VM_URL/filesystem.Filesystem/Stat")
	echo "$(($(ms) - t0)) $r"
}
read -r t r <<<"$(stat_mnt fresh)"
hok=$(vm_health)
expect_match "Stat on the stopped mount: deadline_exceeded ($t ms)" '"code":"deadline_exceeded"' "$r"
expect_eq "/health after it" 204 "$hok"
if [ "$hok" = 204 ]; then
	# The FUSE daemon frozen with the workload (legacy freeze): envd's
	# request on the mount still ends, and /unfreeze is served.
	read -r st t body <<<"$(post "/freeze?maxWaitMs=$WAIT_MS")"
	read -r t r <<<"$(stat_mnt fresh2)"
	expect_match "Stat on the mount of a frozen FUSE daemon: deadline_exceeded ($t ms)" '"code":"deadline_exceeded"' "$r"
	expect_eq "/health while frozen" 204 "$(vm_health)"
	read -r st t body <<<"$(post /unfreeze)"
	expect_eq "/unfreeze answers 204 ($t ms)" 204 "$st"
else
	fail "a request on the mount of a frozen FUSE daemon" "skipped: envd did not answer with the mount stopped"
fi
n0=$(lines_seen)
server CONT
wait "$SP"
SP=
expect_eq "every line arrived once, in order" "$(seq -f 'line %010g' 1 $LINES | tr '\n' ' ')" \
	"$(grep -o '"line [0-9]*' "$H/stream" | tr -d '"' | tr '\n' ' ')"
expect_match "the stream ended with exit status 0" '"status": "exit status 0"' "$(grep '"end"' "$H/stream")"

# ---- /fsfreeze and /fsthaw with the FUSE mount there ----
# The root is frozen; the FUSE mount is skipped and named in the reply.
t0=$(ms)
hdr=$(vm_curl -D - -o /dev/null --max-time $(((WAIT_MS + SLACK_MS) / 1000 + 1)) -X POST "$VM_URL/fsfreeze" | tr -d '\r')
t=$(($(ms) - t0))
read -r st2 t2 body2 <<<"$(post /fsthaw)"
echo "# /fsfreeze in $t ms: $(grep -i -e '^HTTP' -e '^x-envd-fsfreeze' <<<"$hdr" | tr '\n' ' ')"
expect_match "/fsfreeze answers 204 with a FUSE mount present ($t ms)" '^HTTP/[0-9.]+ 204' "$(head -n1 <<<"$hdr")"
expect_match "/fsfreeze names the FUSE mount it skipped" "^x-envd-fsfreeze-skipped: .*$MNT \(fuse\.sshfs\)" "$(grep -i '^x-envd-fsfreeze-skipped' <<<"$hdr" | tr 'A-Z' 'a-z')"
[ "${st2:0:1}" = 2 ] && pass "/fsthaw answers ($st2, $t2 ms)" || fail "/fsthaw" "$st2 $body2"
out=$(vm_exec "umount $MNT && echo unmounted" 2>&1)
expect_match "the mount is unmounted" unmounted "$out"
finish
