#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The event loop makes no syscall on a user path (docs/architecture.md,
# "What the loop may do"). envd runs under strace while a mix of requests
# (filesystem RPCs, watchers, Start, GET and POST /files) works on a live
# FUSE mount; every syscall of the loop thread (the main
# thread, tid = pid) that names a path or an fd under the mount is a
# failure. A FUSE mount is used because on it nothing is exempt: a hung
# daemon would hold whichever thread made the call.
#
# Known and not yet covered (docs/architecture.md): the handling of watch
# events on the loop, for recursive watches (a new directory is watched
# and walked) and for includeEntry (the entry is stat'ed).
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/lib.sh
. tests/integration/hungfs_lib.sh

command -v strace >/dev/null && command -v bindfs >/dev/null && [ -e /dev/fuse ] || {
	echo "loop_clean: strace, bindfs or /dev/fuse missing (scripts/setup.sh)"
	echo "loop_clean: 0 passed, 1 failed"
	exit 1
}
T=$(mktemp -d /tmp/envd-loopclean.XXXXXX)
M=$T/mnt
SPID=
on_exit '[ -n "$SPID" ] && kill "$SPID" 2>/dev/null; hungfs_cleanup; rm -rf "$T"; _t_cleanup'
hungfs_mount "$M" || exit 1
envd_start || exit 1

# Attach to every thread of envd and follow the ones it starts (workers,
# children); -y names the file behind each fd; -s 0 leaves out the data
# read and written (file names are printed whole all the same).
strace -f -y -s 0 -e trace=%file,%desc -p "$ENVD_PID" -o "$T/trace" 2>"$T/strace.err" &
SPID=$!
wait_for 120 has "$T/strace.err" "Process $ENVD_PID attached" || fail "strace attached" "$(cat "$T/strace.err")"

rpc() { curl -s -m 300 -X POST "$ENVD_URL/filesystem.Filesystem/$1" -H 'Content-Type: application/json' -d "$2"; }
envelope() { "$PY" -c 'import json,struct,sys; b=sys.argv[1].encode(); sys.stdout.buffer.write(struct.pack(">BI",0,len(b))+b)' "$1"; }
stream() { # stream SERVICE/METHOD JSON OUT: a Connect stream, ended by its 2 s deadline
	envelope "$2" >"$T/req.bin"
	curl -s -m 300 -X POST "$ENVD_URL/$1" -H 'Content-Type: application/connect+json' \
		-H 'Connect-Timeout-Ms: 2000' --data-binary @"$T/req.bin" -o "$3"
}

echo hello >"$M/seed.txt"
mkdir -p "$M/tree/a/b"
expect_match "Stat" '"path":"'"$M"'/seed.txt"' "$(rpc Stat "{\"path\":\"$M/seed.txt\"}")"
expect_match "Stat of a missing path" 'not_found' "$(rpc Stat "{\"path\":\"$M/nope\"}")"
expect_match "MakeDir" '"entry"' "$(rpc MakeDir "{\"path\":\"$M/made/deep\"}")"
expect_match "MakeDir again" 'already_exists' "$(rpc MakeDir "{\"path\":\"$M/made/deep\"}")"
expect_match "Move" '"path":"'"$M"'/moved.txt"' \
	"$(rpc Move "{\"source\":\"$M/seed.txt\",\"destination\":\"$M/moved.txt\"}")"
expect_eq "GET /files" hello "$(curl -s -m 300 "$ENVD_URL/files?path=$M/moved.txt")"
echo uploaded >"$T/up.txt"
expect_match "POST /files" 'up.txt' "$(curl -s -m 300 -F file=@"$T/up.txt" "$ENVD_URL/files?path=$M/up.txt")"
check "the upload landed" grep -q uploaded "$M/up.txt"
expect_match "ListDir depth 3" '"name":"b"' "$(rpc ListDir "{\"path\":\"$M/tree\",\"depth\":3}")"
wid=$(rpc CreateWatcher "{\"path\":\"$M/made\",\"allowNetworkMounts\":true}" |
	"$PY" -c 'import json,sys; print(json.load(sys.stdin).get("watcherId",""))')
expect_match "CreateWatcher" '^w' "$wid"
expect_match "CreateWatcher without allowNetworkMounts" 'network filesystem' \
	"$(rpc CreateWatcher "{\"path\":\"$M/made\"}")"
echo x >"$M/made/new.txt"
expect_match "GetWatcherEvents" 'new.txt' "$(rpc GetWatcherEvents "{\"watcherId\":\"$wid\"}")"
expect_eq "RemoveWatcher" '{}' "$(rpc RemoveWatcher "{\"watcherId\":\"$wid\"}")"
stream filesystem.Filesystem/WatchDir "{\"path\":\"$M/made\",\"allowNetworkMounts\":true}" "$T/watch.out"
check "WatchDir starts" has "$T/watch.out" '"start"'
stream process.Process/Start "{\"process\":{\"cmd\":\"/bin/pwd\",\"cwd\":\"$M/made\"}}" "$T/start.out"
check "Start with cwd on the mount runs" has "$T/start.out" '"exitCode"|"exited"'
expect_eq "Remove" '{}' "$(rpc Remove "{\"path\":\"$M/tree\"}")"
check "Remove removed it" test ! -e "$M/tree"

kill "$SPID" 2>/dev/null
wait "$SPID" 2>/dev/null
SPID=
# The loop thread's lines that name the mount; the workers' ones show the
# requests did reach it.
grep -E "^$ENVD_PID +" "$T/trace" | grep -F "$M" >"$T/loop.txt"
expect_eq "the loop thread made no syscall on a path under the mount" 0 "$(wc -l <"$T/loop.txt")"
[ -s "$T/loop.txt" ] && head -n 20 "$T/loop.txt"
n=$(grep -vE "^$ENVD_PID +" "$T/trace" | grep -cF "$M")
check "the workers did the requests' syscalls on the mount ($n)" test "$n" -gt 0
check "envd alive" envd_alive
finish
