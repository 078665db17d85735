#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# arm64: skip (under qemu-user envd cannot exec its own aarch64 image: no binfmt handler)
# Live upgrade (POST /upgrade): a counter printing a numbered line every
# 5 ms, a PTY shell, a polled watcher and a forwarded port survive two
# upgrades (same binary, then one reporting another version) with no
# output gap, while a client hammering /health never sees a refused
# connection. Broken binaries are refused and change nothing. Runs in a
# private network namespace so the forwarded port is on the sandbox
# address without touching the host network.
set -uo pipefail
cd "$(dirname "$0")/../.."

if [ -z "${UPGRADE_IN_NETNS:-}" ]; then
	if ! unshare -n true 2>/dev/null; then
		echo "SKIP: cannot create a network namespace (needs root or user namespaces)"
		echo "upgrade: 0 passed, 0 failed"
		exit 0
	fi
	UPGRADE_IN_NETNS=1 exec unshare -n bash "$0" "$@"
fi

. tests/lib.sh
. tests/integration/cgroup_lib.sh
T_NAME=upgrade
PY=/usr/bin/python3
[ -x $PY ] || PY=python3
probe() { $PY tests/integration/upgrade_probe.py "$@"; }
ENVD_BIN=$(readlink -f "$ENVD_BIN")
SBX=169.254.0.21
ip link set lo up
ip addr add "$SBX/32" dev lo

W=$(mktemp -d /tmp/envd-upgrade.XXXXXX)
PIDS=()
# A private cgroup tree when the machine has one: commands get their own
# leaves, and the freeze state is carried too.
CG=$(cgroup_test_dir upgrade)
CGFLAGS=()
[ -n "$CG" ] && CGFLAGS=(-cgroup-root "$CG")
on_exit 'for p in "${PIDS[@]}"; do kill $p 2>/dev/null; done; _t_cleanup; cgroup_remove "$CG"; rm -rf "$W"'
TOK=upgrade-token
H=(-H "X-Access-Token: $TOK")

# The pre-flight gets more than its 2 s default: a loaded machine (and the
# sanitizer build) must not turn a good binary into a refused one.
envd_start -verbose -upgrade-dir "$W" -handover-file "$W/handover.pb" -sandbox-addr "$SBX" -upgrade-preflight-ms 30000 \
	-upload-registry "$W/reg" "${CGFLAGS[@]}" ||
	{ fail "envd starts"; finish; exit 1; }
U=$ENVD_URL
code() { curl -s -o /dev/null -w '%{http_code}' "$@"; }
rpc() { curl -s --max-time "$HANG_S" "${H[@]}" -H 'Content-Type: application/json' -d "$2" "$U/$1"; }

expect_eq "/upgrade before the first /init is 409" "409 envd not initialized" \
	"$(curl -s -w ' %{http_code}' -X POST "$U/upgrade" | tr -d '\n' | awk '{c=$NF; $NF=""; sub(/ $/,""); print c, $0}')"
expect_eq "/init" 204 "$(code -X POST -d "{\"accessToken\":\"$TOK\",\"envVars\":{\"KEEP\":\"me\"},\"defaultWorkdir\":\"$W\"}" "$U/init")"
expect_eq "/upgrade needs the token" 401 "$(code -X POST "$U/upgrade")"
r=$(curl -s -w ' %{http_code}' "${H[@]}" -X POST -H "X-Envd-Upgrade-Bin: /usr/local/bin/other" "$U/upgrade" | tr -d '\n')
expect_eq "another upgrade target is 400" "unsupported upgrade target 400" "$r"

# --- the workload ---
# A counter, followed by a Start stream that stays open over the upgrade.
# It leaves a child in a session of its own first: killing the adopted
# command after the upgrades must still take that one too (its leaf).
body='{"process":{"cmd":"sh","args":["-c","setsid sleep 3600 </dev/null >/dev/null 2>&1 & echo $! >'"$W"'/escapee.pid; i=0; while :; do i=$((i+1)); echo $i; sleep 0.005; done"]},"tag":"counter"}'
$PY -c '
import sys, struct
b = sys.argv[1].encode(); sys.stdout.buffer.write(b"\0" + struct.pack(">I", len(b)) + b)' "$body" >"$W/start.bin"
curl -s -N --max-time $((12 * HANG_S)) "${H[@]}" -H 'Content-Type: application/connect+json' --data-binary @"$W/start.bin" \
	"$U/process.Process/Start" >"$W/start.out" &
PIDS+=($!)
CURL_START=$!
# A PTY shell.
pty=$(MAXT=1 $PY - "$U" "$TOK" <<'PY'
import sys
sys.path.insert(0, "tests/integration")
from upgrade_probe import stream
ev = stream(sys.argv[1], "Start", {"process": {"cmd": "/bin/sh", "envs": {"PS1": "$ "}}, "pty": {"size": {"cols": 80, "rows": 24}}, "tag": "shell"}, sys.argv[2], 300,
            lambda ev: len(ev) > 0)
print(ev[0][1]["event"]["start"]["pid"])
PY
)
expect_match "PTY shell started" '^[0-9]+$' "$pty"
check "PTY shell answers before the upgrade" probe pty "$U" "$TOK" "$pty"
# A polled watcher with an event left pending over the upgrade.
mkdir -p "$W/watched"
wid=$(rpc filesystem.Filesystem/CreateWatcher "{\"path\":\"$W/watched\"}" | $PY -c 'import sys,json; print(json.load(sys.stdin)["watcherId"])')
expect_match "watcher created" '^w' "$wid"
echo pending >"$W/watched/before-upgrade"
# A WatchDir stream open over the upgrade.
$PY -c '
import sys, struct
b = sys.argv[1].encode(); sys.stdout.buffer.write(b"\0" + struct.pack(">I", len(b)) + b)' "{\"path\":\"$W/watched\"}" >"$W/watch.bin"
curl -s -N --max-time $((12 * HANG_S)) "${H[@]}" -H 'Content-Type: application/connect+json' --data-binary @"$W/watch.bin" \
	"$U/filesystem.Filesystem/WatchDir" >"$W/watch.out" &
PIDS+=($!)
CURL_WATCH=$!
# A loopback-only service, forwarded to the sandbox address.
FPORT=$(free_port)
$PY tests/integration/upgrade_probe.py echo-server "$FPORT" &
PIDS+=($!)
fwd=""
forwarded() { fwd=$(probe tcp "$SBX" "$FPORT" hello 2>/dev/null); }
wait_for 5 forwarded
expect_eq "port forwarded before the upgrade" "echo:hello" "$fwd"
# A connection through the forward that stays open over both upgrades.
$PY tests/integration/upgrade_probe.py hold "$SBX" "$FPORT" "$W/hold.go" "$W/hold.out" &
PIDS+=($!)
wait_for 30 test -s "$W/hold.out.ready"
sleep 0.3

# --- the hammer ---
$PY tests/integration/upgrade_probe.py hammer "$U" "$W/hammer.out" "$W/hammer.stop" &
HAMMER=$!
PIDS+=($HAMMER)

# wait_init: after an upgrade, /init answers with the hand-over counts.
wait_upgraded() { # wait_upgraded EXPECTED_VERSION
	local hdrs
	healthy() { [ "$(code "$U/health")" = 204 ]; }
	wait_for 10 healthy
	hdrs=$(curl -s -D - -o /dev/null -X POST -d "{\"accessToken\":\"$TOK\"}" "$U/init")
	echo "$hdrs" | tr -d '\r'
}

# A writer creating files in the watched directory through both upgrades:
# the watcher must report every one, including those made during an exec.
$PY -c '
import os, sys, time
d, stop = sys.argv[1], sys.argv[2]
i = 0
while not os.path.exists(stop):
    i += 1
    open(os.path.join(d, "f-%d" % i), "w").close()
    time.sleep(0.001)' "$W/watched" "$W/writer.stop" &
WRITER=$!
PIDS+=($WRITER)

# The counter's setsid child (the later envds of this script start the
# same command and write the file again: read it now).
wait_for 30 test -s "$W/escapee.pid"
esc=$(cat "$W/escapee.pid" 2>/dev/null)

# An upload cut by the upgrade leaves its temporary to the new image, which
# has the same pid: the old image's slot file (docs/crash.md) is the one a
# write made, with a record for a temporary planted as an upload's would be.
expect_eq "an upload before the upgrade" 200 "$(code "${H[@]}" -X POST -H 'Content-Type: application/octet-stream' \
	--data-binary 'x' "$U/files?path=$W/up.txt")"
old_slots=$(cd "$W/reg" 2>/dev/null && ls -d slots.* 2>/dev/null)
expect_match "the old image's slot file is named by its pid" "^slots\.$ENVD_PID\.[0-9a-f]{16}\$" "$old_slots"
: >"$W/.envd-upload.r00000000000000c1"
$PY - "$W/reg/$old_slots" "$W/.envd-upload.r00000000000000c1" <<'PY'
import struct, sys
f, path = sys.argv[1], sys.argv[2].encode()
h = 0xcbf29ce484222325 ^ len(path)
for b in path:
    h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
with open(f, "r+b") as fh:  # the last slot: no upload in flight takes it
    fh.seek(1023 * 512)
    fh.write(struct.pack("=IIQ", 0x31535545, len(path), h) + path + b"\0")
PY

# --- upgrade 1: the same binary ---
n_before=$(probe counter "$U" "$TOK" counter)
t0=$(date +%s%N)
r=$(curl -s --max-time "$HANG_S" -w '%{http_code}' "${H[@]}" -X POST "$U/upgrade")
expect_eq "upgrade with the same binary: the connection drops (no answer)" "000" "$r"
gate=$(curl -s -w ' %{http_code}' "${H[@]}" "$U/envs" | tr -d '\n')
expect_eq "before /init only /health and /init are served" '{"code":401,"message":"envd not initialized"} 401' "$gate"
hdrs=$(wait_upgraded)
expect_match "/init after the upgrade is 204" 'HTTP/1.1 204' "$hdrs"
expect_match "/init reports the hand-over" 'X-Envd-Handover: \{"failed":false,"procs":2,' "$hdrs"
check "envd is the same process" envd_alive
gone_c1() { [ ! -e "$W/.envd-upload.r00000000000000c1" ] && [ ! -e "$W/reg/$old_slots" ]; }
check "the new image swept the old one's temporary and slot file (same pid)" wait_for 30 gone_c1
expect_eq "an upload after the upgrade" 200 "$(code "${H[@]}" -X POST -H 'Content-Type: application/octet-stream' \
	--data-binary 'y' "$U/files?path=$W/up.txt")"
new_slots=$(cd "$W/reg" 2>/dev/null && ls -d slots.* 2>/dev/null)
expect_match "the new image has a slot file of its own, same pid" "^slots\.$ENVD_PID\.[0-9a-f]{16}\$" "$new_slots"
expect_eq "env store survived" '{"E2B_SANDBOX":"false","KEEP":"me"}' "$(curl -s "${H[@]}" "$U/envs")"
expect_eq "old token still gates" 401 "$(code "$U/envs")"
# Both stream clients end once they read the last frame (bounded by their
# --max-time): only then is the whole answer in their files.
wait "$CURL_START" "$CURL_WATCH" 2>/dev/null
start_tail=$(tail -c 300 "$W/start.out" | tr -d '\0')
expect_match "the open Start stream ended with unavailable" '"code":"unavailable","message":"envd is upgrading' "$start_tail"
expect_match "the open WatchDir stream too" '"code":"unavailable","message":"envd is upgrading; watch again' \
	"$(tail -c 300 "$W/watch.out" | tr -d '\0')"

counter_pid=$(rpc process.Process/List '{}' | $PY -c '
import json, sys
print([p["pid"] for p in json.load(sys.stdin)["processes"] if p.get("tag") == "counter"][0])')
cg_before=$(cat "/proc/$counter_pid/cgroup" 2>/dev/null)
if [ -n "$CG" ]; then
	# A freeze in effect when the upgrade begins is carried over: the new
	# image's /init thaws it and reports the audit.
	expect_eq "/freeze before the second upgrade" 204 "$(code "${H[@]}" -X POST "$U/freeze")"
	expect_eq "workload frozen" 1 "$(cat "$CG/user/cgroup.freeze")"
fi

# --- upgrade 2: a binary that reports another version ---
old_ver=$("$ENVD_BIN" -version)
new_ver="${old_ver%?}9"
[ "$new_ver" = "$old_ver" ] && new_ver="${old_ver%?}8"
$PY - "$ENVD_BIN" "$W/new-envd" "$old_ver" "$new_ver" <<'PY'
import sys
src, dst, old, new = sys.argv[1:]
b = open(src, "rb").read()
# Same length, NUL-terminated: every copy of the version string changes.
n = b.count(old.encode() + b"\0")
assert n > 0 and len(old) == len(new)
open(dst, "wb").write(b.replace(old.encode() + b"\0", new.encode() + b"\0"))
PY
chmod 755 "$W/new-envd"
expect_eq "patched copy reports the new version" "$new_ver" "$("$W/new-envd" -version)"
echo more >"$W/watched/between"
r=$(curl -s --max-time "$HANG_S" -w "%{http_code}" "${H[@]}" -X POST -H "Expect:" -H "X-Envd-Upgrade-Bin: $W/envd.next" \
	--data-binary @"$W/new-envd" "$U/upgrade")
expect_eq "upgrade with an uploaded binary: the connection drops" "000" "$r"
hdrs=$(wait_upgraded)
expect_match "/init after the second upgrade reports the new version" "X-Envd-Version: $new_ver" "$hdrs"
expect_match "second hand-over complete" 'X-Envd-Handover: \{"failed":false,"procs":2,.*"watchers":1,"watchers_failed":0' "$hdrs"
if [ -n "$CG" ]; then
	expect_match "the new image knew of the freeze (audit on /init)" 'X-Envd-Freeze-Audit: ' "$hdrs"
	expect_eq "and /init thawed the workload" 0 "$(cat "$CG/user/cgroup.freeze")"
	expect_eq "the counter is still in its own cgroup leaf" "$cg_before" "$(cat "/proc/$counter_pid/cgroup")"
	expect_match "which is a command leaf" 'user/cmd-[0-9]+-[0-9]+$' "$cg_before"
fi
check "uploaded binary is mode 0755" test "$(stat -c %a "$W/envd.next")" = 755
expect_eq "running image is the uploaded one" "$(readlink -f "$W/envd.next")" "$(readlink /proc/$ENVD_PID/exe)"
expect_eq "and its -version is the new one" "$new_ver" "$(/proc/$ENVD_PID/exe -version)"

touch "$W/hammer.stop"
wait $HAMMER
read -r h_ok h_refused h_other h_gap <"$W/hammer.out"
echo "health hammer: $h_ok answered, $h_refused refused, $h_other other errors, longest pause ${h_gap} ms"
expect_eq "no refused connection during two upgrades ($h_ok /health answers, longest pause ${h_gap} ms)" 0 "$h_refused"
expect_eq "no failed /health request" 0 "$h_other"

# --- what carried over ---
sleep 0.2
n_after=$(probe counter "$U" "$TOK" counter)
if [[ "$n_after" =~ ^[0-9]+$ ]] && [[ "$n_before" =~ ^[0-9]+$ ]] && [ "$n_after" -gt "$n_before" ]; then
	pass "counter lines 1..$n_after with no gap or duplicate across both upgrades (were $n_before before)"
else
	fail "counter replay" "before=$n_before after=$n_after"
fi
check "PTY shell still answers" probe pty "$U" "$TOK" "$pty"
touch "$W/writer.stop"
wait $WRITER
ev=$(rpc filesystem.Filesystem/GetWatcherEvents "{\"watcherId\":\"$wid\"}")
res=$($PY -c '
import json, sys
names = {e["name"] for e in json.loads(sys.stdin.read()).get("events", []) if e.get("type") == "EVENT_TYPE_CREATE"}
nums = sorted(int(n[2:]) for n in names if n.startswith("f-"))
missing = sorted(set(range(1, nums[-1] + 1)) - set(nums)) if nums else ["none"]
print(len(nums), "missing:", missing[:10])' <<<"$ev")
expect_match "watcher saw every file created during both upgrades" '^[0-9]+ missing: \[\]$' "$res"
expect_match "watcher returns the event pending before the first upgrade" '"name":"before-upgrade"' "$ev"
expect_match "and the one pending before the second" '"name":"between"' "$ev"
echo after >"$W/watched/after-upgrade"
ev=$(rpc filesystem.Filesystem/GetWatcherEvents "{\"watcherId\":\"$wid\"}")
expect_match "watcher still reports new events" '"name":"after-upgrade"' "$ev"
expect_eq "port still forwarded" "echo:again" "$(probe tcp "$SBX" "$FPORT" again 2>&1)"
touch "$W/hold.go"
wait_for 30 test -s "$W/hold.out"
expect_eq "a relayed connection open during both upgrades still carries data" "echo:before echo:after" \
	"$(cat "$W/hold.out" 2>/dev/null)"
cwd=$($PY - "$U" "$TOK" <<'PY'
import sys, base64
sys.path.insert(0, "tests/integration")
from upgrade_probe import stream, data_of
ev = stream(sys.argv[1], "Start", {"process": {"cmd": "pwd"}}, sys.argv[2], 300)
print(b"".join(d for _, d in data_of(ev)).decode().strip())
PY
)
expect_eq "default workdir survived" "$W" "$cwd"

# --- refused upgrades change nothing ---
listed() { rpc process.Process/List '{}' | grep -o '"pid":[0-9]*' | sort | tr '\n' ' '; }
before=$(listed)
refuse() { # refuse DESC FILE PATTERN
	local r
	r=$(curl -s --max-time "$HANG_S" -w ' %{http_code}' "${H[@]}" -X POST --data-binary @"$2" "$U/upgrade")
	expect_match "$1 is refused with 500" "$3.* 500$" "$r"
	expect_eq "$1: envd serves on" 204 "$(code "$U/health")"
}
cp /bin/false "$W/false"
refuse "/bin/false" "$W/false" "exited with status 1"
head -c 200000 "$ENVD_BIN" >"$W/truncated"
refuse "a truncated binary" "$W/truncated" "new binary"
echo "just some text" >"$W/text"
refuse "a file that is not a program" "$W/text" "cannot run: Exec format error"
$PY - "$ENVD_BIN" "$W/arch" <<'PY'
import sys
b = bytearray(open(sys.argv[1], "rb").read())
b[18] = 0x28 if b[18] != 0x28 else 0x3e  # e_machine: ARM vs x86-64
b[19] = 0
open(sys.argv[2], "wb").write(bytes(b))
PY
refuse "a binary for another architecture" "$W/arch" "cannot run: Exec format error"
r=$(curl -s --max-time "$HANG_S" -w ' %{http_code}' "${H[@]}" -X POST -H 'Transfer-Encoding: chunked' --data-binary @/dev/null "$U/upgrade")
expect_match "an empty chunked body is an (empty) upload and refused" ' 500$' "$r"
expect_eq "every process intact after the refusals" "$before" "$(listed)"
check "counter still gapless" probe counter "$U" "$TOK" counter
check "envd is still the same process" envd_alive

# --- a failure after the pre-flight rolls back completely ---
# The record cannot be written (its directory does not exist): the
# descriptors get close-on-exec back, accepting resumes, nothing is lost.
# The pre-flight runs this envd's own binary (the sanitizer one is slow to
# start on a loaded machine), so it gets the same generous budget as the
# first envd: the failure checked here is the record's, not the clock's.
U1=$U
L1=$ENVD_LOG
envd_start -upgrade-dir "$W" -handover-file "$W/missing-dir/handover.pb" -sandbox-addr "$SBX" -no-port-forward \
	-upgrade-preflight-ms 30000 ||
	fail "second envd starts"
U=$ENVD_URL
curl -s -o /dev/null -X POST -d "{\"accessToken\":\"$TOK\"}" "$U/init"
curl -s -N --max-time $((12 * HANG_S)) "${H[@]}" -H 'Content-Type: application/connect+json' --data-binary @"$W/start.bin" \
	"$U/process.Process/Start" >/dev/null &
PIDS+=($!)
counter_up() { probe counter "$U" "$TOK" counter >/dev/null 2>&1; }
wait_for 5 counter_up
# Descriptors a child would inherit (no O_CLOEXEC, 02000000 octal in fdinfo).
inheritable() {
	for f in /proc/$ENVD_PID/fd/*; do
		fl=$(awk '/^flags/ {print $2}' "/proc/$ENVD_PID/fdinfo/${f##*/}" 2>/dev/null)
		[ -n "$fl" ] && [ $((8#$fl & 8#2000000)) -eq 0 ] && echo "${f##*/}"
	done | sort -n | tr '\n' ' '
}
fds_before=$(inheritable)
r=$(curl -s --max-time "$HANG_S" -w ' %{http_code}' "${H[@]}" -X POST "$U/upgrade" | tr -d '\n')
expect_match "record not writable: 500 naming it" "^write $W/missing-dir/handover.pb: No such file or directory 500$" "$r"
expect_eq "still accepting connections" 204 "$(code "$U/health")"
# The pre-flight's bound itself, on a third envd with a 0.5 s budget and a
# "binary" that never answers (a script that sleeps): refused whatever the
# machine's speed.
U2=$U
P2=$ENVD_PID
envd_start -upgrade-dir "$W" -handover-file "$W/handover3.pb" -sandbox-addr "$SBX" -no-port-forward \
	-upgrade-preflight-ms 500 ||
	fail "third envd starts"
curl -s -o /dev/null -X POST -d "{\"accessToken\":\"$TOK\"}" "$ENVD_URL/init"
printf '#!/bin/sh\nexec sleep 3600\n' >"$W/hangs"
r=$(curl -s --max-time "$HANG_S" -w ' %{http_code}' "${H[@]}" -X POST --data-binary @"$W/hangs" "$ENVD_URL/upgrade" | tr -d '\n')
expect_match "a binary that does not answer -version in time is refused" "did not answer -version within 0.5 s 500$" "$r"
envd_stop "$ENVD_PID"
U=$U2
ENVD_PID=$P2
n1=$(probe counter "$U" "$TOK" counter)
counter_grew() { n2=$(probe counter "$U" "$TOK" counter); [ "$n2" -gt "$n1" ] 2>/dev/null; }
wait_for 5 counter_grew
if [[ "$n1" =~ ^[0-9]+$ ]] && [[ "$n2" =~ ^[0-9]+$ ]] && [ "$n2" -gt "$n1" ]; then
	pass "the process keeps running and its output keeps coming, gapless ($n1 -> $n2 lines)"
else
	fail "process after the roll-back" "$n1 -> $n2"
fi
expect_eq "every descriptor is close-on-exec again (as before the attempt)" "$fds_before" "$(inheritable)"
rpc process.Process/SendSignal '{"process":{"tag":"counter"},"signal":"SIGNAL_SIGKILL"}' >/dev/null
U=$U1

rpc process.Process/SendSignal '{"process":{"tag":"counter"},"signal":"SIGNAL_SIGKILL"}' >/dev/null
rpc process.Process/SendSignal "{\"process\":{\"pid\":$pty},\"signal\":\"SIGNAL_SIGKILL\"}" >/dev/null
if [ -n "$CG" ]; then
	# /proc/PID/cgroup names the leaf from the cgroup2 mount CG is on.
	leaf=${CG%/envd-test-*}${cg_before#0::}
	check "the adopted leaf was there" test -n "$cg_before"
	check "the adopted leaf is emptied and removed once its command is killed" \
		wait_for 30 test ! -d "$leaf"
	escapee_gone() { [ -n "$esc" ] && ! kill -0 "$esc" 2>/dev/null; }
	if wait_for 30 escapee_gone; then
		pass "killing the adopted command took its setsid child too"
	else
		fail "killing the adopted command took its setsid child too" "pid ${esc:-?} alive in $(grep '^0::' "/proc/$esc/cgroup" 2>&1)"
	fi
fi
grep -q 'upgrade: executing' "$L1" && pass "upgrade logged" || fail "upgrade logged"
finish
