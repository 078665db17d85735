#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The event loop makes no syscall on a user path (docs/architecture.md,
# "What the loop may do"). envd runs under strace while a mix of requests
# (filesystem RPCs, watchers, recursive watchers with includeEntry seeing
# new nested directories, Start of a command that lives on the mount with
# its cwd there, GET and POST /files) works on a live FUSE mount; every
# syscall of the loop thread (the main thread, tid = pid) that names a path
# or an fd under the mount is a failure, and so is a vfork-style clone by
# the loop thread (it would wait there for the child's chdir and exec). A
# FUSE mount is used because on it nothing is exempt: a hung daemon would
# hold whichever thread made the call.
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
strace -f -y -s 0 -e trace=%file,%desc,%process -p "$ENVD_PID" -o "$T/trace" 2>"$T/strace.err" &
SPID=$!
wait_for 120 has "$T/strace.err" "Process $ENVD_PID attached" || fail "strace attached" "$(cat "$T/strace.err")"

rpc() { curl -s -m 300 -X POST "$ENVD_URL/filesystem.Filesystem/$1" -H 'Content-Type: application/json' -d "$2"; }
envelope() { "$PY" -c 'import json,struct,sys; b=sys.argv[1].encode(); sys.stdout.buffer.write(struct.pack(">BI",0,len(b))+b)' "$1"; }
stream() { # stream SERVICE/METHOD JSON OUT [MS]: a Connect stream, ended by its deadline (2 s)
	envelope "$2" >"$3.req"
	curl -s -N -m 300 -X POST "$ENVD_URL/$1" -H 'Content-Type: application/connect+json' \
		-H "Connect-Timeout-Ms: ${4:-2000}" --data-binary @"$3.req" -o "$3"
}
# poll_until WID REGEX OUT: GetWatcherEvents until the answers so far match
poll_until() {
	local i
	for i in $(seq 1200); do
		rpc GetWatcherEvents "{\"watcherId\":\"$1\"}" >>"$3"
		has "$3" "$2" && return 0
		sleep 0.1
	done
	return 1
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
# The agent file tools: their walk and reads are jobs too.
echo 'needle in the tree' >"$M/tree/a/b/n.txt"
expect_match "Glob" '"name":"n.txt"' "$(rpc Glob "{\"path\":\"$M/tree\",\"pattern\":\"**/*.txt\"}")"
expect_match "ReadLines" 'needle in the tree' "$(rpc ReadLines "{\"path\":\"$M/tree/a/b/n.txt\"}")"
stream filesystem.Filesystem/Grep "{\"path\":\"$M/tree\",\"pattern\":\"needle\"}" "$T/grep.out" 60000
check "Grep" grep -q 'needle in the tree' "$T/grep.out"
expect_match "Edit" '"replacements":1' \
	"$(rpc Edit "{\"path\":\"$M/tree/a/b/n.txt\",\"edits\":[{\"oldText\":\"needle\",\"newText\":\"pin\"}]}")"
check "the edit landed" grep -q 'pin in the tree' "$M/tree/a/b/n.txt"
expect_match "GET /files with If-None-Match" '^304$' \
	"$(curl -s -o /dev/null -w '%{http_code}' -m 300 -H 'If-None-Match: *' "$ENVD_URL/files?path=$M/moved.txt")"
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
mkdir -p "$M/bin"
cp /bin/true "$M/bin/true"
stream process.Process/Start "{\"process\":{\"cmd\":\"$M/bin/true\",\"cwd\":\"$M/made\"}}" \
	"$T/start2.out" 120000
check "Start of a command on the mount, cwd there, exits 0" has "$T/start2.out" '"exit status 0"'
stream process.Process/Start "{\"process\":{\"cmd\":\"$M/bin/nope\",\"cwd\":\"$M/made\"}}" \
	"$T/start3.out" 120000
check "Start of a missing command on the mount: exit 127, not found" has "$T/start3.out" \
	'exit status 127'

# Recursive watchers with includeEntry: new nested directories are added
# and walked, entries stat'ed, by the watch's worker jobs.
mkdir -p "$M/rec/pre"
rid=$(rpc CreateWatcher "{\"path\":\"$M/rec\",\"recursive\":true,\"includeEntry\":true,\"allowNetworkMounts\":true}" |
	"$PY" -c 'import json,sys; print(json.load(sys.stdin).get("watcherId",""))')
expect_match "CreateWatcher recursive, includeEntry" '^w' "$rid"
stream filesystem.Filesystem/WatchDir \
	"{\"path\":\"$M/rec\",\"recursive\":true,\"includeEntry\":true,\"allowNetworkMounts\":true}" \
	"$T/rwatch.out" 300000 &
RW=$!
wait_for 120 has "$T/rwatch.out" '"start"' || fail "recursive WatchDir starts"
mkdir -p "$M/rec/x/y/z"
echo leaf >"$M/rec/x/y/z/leaf.txt"
echo pre >"$M/rec/pre/p.txt"
check "GetWatcherEvents: the nested directories and files, with entries" \
	poll_until "$rid" '"name":"x/y/z/leaf.txt"[^}]*"entry"|"entry"[^}]*"name":"x/y/z/leaf.txt"' "$T/rpoll.out"
check "GetWatcherEvents: the new directory x/y/z" has "$T/rpoll.out" '"x/y/z"'
check "WatchDir recursive: the nested file" wait_for 120 has "$T/rwatch.out" 'x/y/z/leaf.txt'
echo later >"$M/rec/x/y/z/later.txt"
check "GetWatcherEvents: a file in a new directory, seen by its own watch" \
	poll_until "$rid" 'x/y/z/later.txt' "$T/rpoll.out"
check "WatchDir recursive: a file in a new directory, seen by its own watch" \
	wait_for 120 has "$T/rwatch.out" 'x/y/z/later.txt'
check "WatchDir recursive: events carry entries" has "$T/rwatch.out" '"entry"'
check "GetWatcherEvents: the pre-existing subdirectory" has "$T/rpoll.out" 'pre/p.txt'
kill "$RW" 2>/dev/null
wait "$RW" 2>/dev/null
expect_eq "RemoveWatcher (recursive)" '{}' "$(rpc RemoveWatcher "{\"watcherId\":\"$rid\"}")"
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
grep -E "^$ENVD_PID +(clone|clone3|vfork)\(" "$T/trace" | grep -E 'CLONE_VFORK|vfork' >"$T/vfork.txt"
expect_eq "the loop thread made no vfork-style clone (it would wait for the child's exec)" 0 \
	"$(wc -l <"$T/vfork.txt")"
[ -s "$T/vfork.txt" ] && head -n 5 "$T/vfork.txt"
n=$(grep -vE "^$ENVD_PID +" "$T/trace" | grep -cF "$M")
check "the workers did the requests' syscalls on the mount ($n)" test "$n" -gt 0
check "envd alive" envd_alive
finish
