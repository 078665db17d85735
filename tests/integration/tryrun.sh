#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Try runs (docs/try.md) through Connect JSON: `npm init -y && touch a &&
# rm b && chmod +x c` on a layer leaves the real tree untouched, the end
# event and TryDiff list exactly those changes, CommitTry makes the real
# tree what a plain run makes it, DiscardTry leaves it as it was, both are
# idempotent; a change made to the real tree meanwhile makes the commit
# `aborted` with nothing applied; background processes of the try see the
# layer; unified diffs (bounded, binary files named); ENVD_TRY in the envs
# (not exported, colon-separated, relative to the cwd); ENOSPC past
# -try-max-bytes; -try-ttl; the refusals (a missing directory, nested
# ones, /, a session, a FUSE mount, overlays stacked too deep, no mount
# namespace for envd); with a cgroup leaf per command; envd chrooted (the
# command runs in envd's root, not the mount namespace's); a try kept
# across a crash of envd (under build/init) and across a live upgrade.
. "$(dirname "$0")/process_lib.sh"
. "$(dirname "$0")/cgroup_lib.sh"
W=$(mktemp -d /tmp/envd-try-test.XXXXXX)
chmod 755 "$W" # a user's try below it
MNTS=()
CG=$(cgroup_test_dir try)
IPID=
cleanup_try() {
	[ -n "$IPID" ] && kill -TERM "$IPID" 2>/dev/null && wait "$IPID" 2>/dev/null
	for ((i = ${#MNTS[@]} - 1; i >= 0; i--)); do umount -l "${MNTS[$i]}" 2>/dev/null; done
	[ -n "${BINDFS_PID:-}" ] && kill "$BINDFS_PID" 2>/dev/null
	cgroup_remove "$CG"
	rm -rf "$W"
	cleanup
}
on_exit cleanup_try

js() { "$PY" -c 'import json, sys; print(json.dumps(sys.argv[1]))' "$1"; }
# start_json CMD [extra JSON fields]: a Start of `sh -c CMD`
start_json() {
	echo "{\"process\":{\"cmd\":\"/bin/sh\",\"args\":[\"-c\",$(js "$1")]}${2:+,$2}}"
}
# end_field FILE EXPR: EXPR of the end event `e` in a decoded stream
end_field() {
	grep '"end"' "$1" | "$PY" -c 'import sys, json; e = json.loads(sys.stdin.read().split(" ", 1)[1])["event"]["end"]; print(eval(sys.argv[1]))' "$2"
}
# changes_of JSON_DIFF ROOT: "KIND relative-path" lines, sorted
changes_of() {
	"$PY" -c '
import json, sys
d = json.loads(sys.argv[1]); root = sys.argv[2]
for c in sorted(d.get("changes", []), key=lambda c: c["path"]):
    p = c["path"][len(root) + 1:] if c["path"].startswith(root + "/") else c["path"]
    extra = ""
    if c["kind"] == "TRY_CHANGE_KIND_MODE":
        extra = " %o" % c.get("mode", 0)
    if c["kind"] == "TRY_CHANGE_KIND_RENAMED":
        extra = " from " + c["from"][len(root) + 1:]
    print(c["kind"].replace("TRY_CHANGE_KIND_", "").lower(), p + extra)' "$1" "$2"
}
# end_diff FILE: the end event's tryDiff as JSON
end_diff() { grep '"end"' "$1" | "$PY" -c 'import sys, json; print(json.dumps(json.loads(sys.stdin.read().split(" ", 1)[1])["event"]["end"].get("tryDiff", {})))'; }
# diff_of PID [fields]: TryDiff's diff as JSON (empty on an error)
diff_of() {
	unary TryDiff "{\"pid\":$1${2:+,$2}}" | "$PY" -c 'import sys, json; l = sys.stdin.read(); c, b = l.split(" ", 1); print(json.dumps(json.loads(b).get("diff", {})) if c == "200" else "")'
}
# snap DIR: what a tree is (names, kinds, modes, owners, sizes, links, contents)
snap() {
	(cd "$1" && find . -mindepth 1 -printf '%P %y %m %U:%G %s %l\n' | sort &&
		find . -type f -exec md5sum {} + | sort -k2)
}
code_of() { echo "${1%% *}"; }

# qemu-user emulates a clone of shared memory without a new mount
# namespace: envd there refuses a try before anything runs, which is all
# that can be checked (the arm64 VM runs the SDK's try suite on a real kernel).
if envd_under_qemu_user; then
	start_envd
	check_re "under qemu-user a try is refused before anything runs" 'failed_precondition.*mount namespace' \
		"$(stream Start "$(start_json "touch $W/ran" "\"tryRun\":{\"paths\":[\"$W\"]}")")"
	check "nothing ran" "no" "$([ -e "$W/ran" ] && echo yes || echo no)"
	echo "# qemu-user: the rest of this suite needs a real kernel"
	summary
	exit
fi

# --- the case of the brief: npm init -y && touch a && rm b && chmod +x c ---
start_envd
seed() { mkdir -p "$1/proj/lib" && echo bee >"$1/proj/b" && echo sea >"$1/proj/c" && echo keep >"$1/proj/lib/k"; }
seed "$W/real"
seed "$W/plain"
before=$(snap "$W/real")
CMD='npm init -y >/dev/null && touch a && rm b && chmod +x c'
stream Start "{\"process\":{\"cmd\":\"/bin/sh\",\"args\":[\"-c\",$(js "$CMD")],\"cwd\":\"$W/real/proj\"},\"tryRun\":{}}" >"$TMP/t1.txt"
pid1=$(pid_in "$TMP/t1.txt")
check "the try's command succeeds" "0" "$(end_field "$TMP/t1.txt" 'e.get("exitCode", 0)')"
check "the real tree is untouched" "$before" "$(snap "$W/real")"
expected="created a
deleted b
mode c 755
created package.json"
check "the end event lists exactly those changes" "$expected" "$(changes_of "$(end_diff "$TMP/t1.txt")" "$W/real/proj")"
check "state ended, the try's directory" "ended $W/real/proj" \
	"$("$PY" -c 'import json,sys; d=json.loads(sys.argv[1]); print(d["state"], " ".join(d["paths"]))' "$(end_diff "$TMP/t1.txt")")"
check "TryDiff lists the same" "$expected" "$(changes_of "$(diff_of "$pid1")" "$W/real/proj")"
stream Start "{\"process\":{\"cmd\":\"/bin/sh\",\"args\":[\"-c\",$(js "$CMD")],\"cwd\":\"$W/plain/proj\"}}" >"$TMP/p1.txt"
r=$(unary CommitTry "{\"pid\":$pid1}")
check "CommitTry answers 200" 200 "$(code_of "$r")"
check_re "with what it applied, state committed" '"state":"committed".*package.json' "$r"
check "the real tree is now what a plain run makes it" "$(snap "$W/plain")" "$(snap "$W/real")"
check "CommitTry again: the same answer (idempotent)" 200 "$(code_of "$(unary CommitTry "{\"pid\":$pid1}")")"
r=$(unary DiscardTry "{\"pid\":$pid1}")
check_re "DiscardTry of a committed try: failed_precondition" '^400 .*failed_precondition.*committed' "$r"
check_re "TryDiff of a committed try: its state" '"state": "committed"' "$(diff_of "$pid1")"
check_re "a pid without a try: not_found" '^404 .*not_found' "$(unary CommitTry '{"pid":4000000}')"

# --- discard ---
before=$(snap "$W/real")
stream Start "{\"process\":{\"cmd\":\"/bin/sh\",\"args\":[\"-c\",\"rm -rf lib && echo new > n && echo more >> package.json\"],\"cwd\":\"$W/real/proj\"},\"tryRun\":{}}" >"$TMP/t2.txt"
pid2=$(pid_in "$TMP/t2.txt")
check "the second try: its changes" "deleted lib
created n
modified package.json" "$(changes_of "$(diff_of "$pid2")" "$W/real/proj")"
check "DiscardTry answers 200" 200 "$(code_of "$(unary DiscardTry "{\"pid\":$pid2}")")"
check "the real tree is as it was" "$before" "$(snap "$W/real")"
check "DiscardTry again: 200 (idempotent)" 200 "$(code_of "$(unary DiscardTry "{\"pid\":$pid2}")")"
check_re "CommitTry of a discarded try: failed_precondition" '^400 .*failed_precondition.*discarded' \
	"$(unary CommitTry "{\"pid\":$pid2}")"

# --- a conflicting change in the real tree: aborted, nothing applied ---
echo x >"$W/real/proj/x"
echo y >"$W/real/proj/y"
mkdir "$W/real/proj/d" && echo f >"$W/real/proj/d/f"
stream Start "{\"process\":{\"cmd\":\"/bin/sh\",\"args\":[\"-c\",\"echo tx >> x && echo ty >> y && echo new > z\"],\"cwd\":\"$W/real/proj\"},\"tryRun\":{}}" >"$TMP/t3.txt"
pid3=$(pid_in "$TMP/t3.txt")
echo outside >>"$W/real/proj/x"
before=$(snap "$W/real")
r=$(unary CommitTry "{\"pid\":$pid3}")
check_re "a file the try changed was changed outside: aborted, naming it" "^409 .*aborted.*$W/real/proj/x.*changed" "$r"
check "nothing was applied" "$before" "$(snap "$W/real")"
check_re "the try is still there" '"state": "ended"' "$(diff_of "$pid3")"
unary DiscardTry "{\"pid\":$pid3}" >/dev/null
stream Start "{\"process\":{\"cmd\":\"/bin/sh\",\"args\":[\"-c\",\"rm -r d && echo n > n2\"],\"cwd\":\"$W/real/proj\"},\"tryRun\":{}}" >"$TMP/t4.txt"
pid4=$(pid_in "$TMP/t4.txt")
echo g >"$W/real/proj/d/g"
before=$(snap "$W/real")
check_re "a directory the try removed got a file outside: aborted" "^409 .*aborted.*$W/real/proj/d" \
	"$(unary CommitTry "{\"pid\":$pid4}")"
check "nothing was applied" "$before" "$(snap "$W/real")"
unary DiscardTry "{\"pid\":$pid4}" >/dev/null
stream Start "{\"process\":{\"cmd\":\"/bin/sh\",\"args\":[\"-c\",\"echo mine > fresh\"],\"cwd\":\"$W/real/proj\"},\"tryRun\":{}}" >"$TMP/t5.txt"
pid5=$(pid_in "$TMP/t5.txt")
echo theirs >"$W/real/proj/fresh"
check_re "a file the try created was created outside too: aborted" "^409 .*aborted.*fresh.*(created|changed)" \
	"$(unary CommitTry "{\"pid\":$pid5}")"
check "theirs stays" theirs "$(cat "$W/real/proj/fresh")"
unary DiscardTry "{\"pid\":$pid5}" >/dev/null

# --- background processes of the try see the layer ---
G=$W/gate
mkdir -p "$G"
stream Start "{\"process\":{\"cmd\":\"/bin/sh\",\"args\":[\"-c\",\"echo one > made; (until [ -e $G/go ]; do sleep 0.05; done; cat made > bg_saw; echo \$\$ > $G/bgpid; touch bg_done; sleep 1000) >/dev/null 2>&1 &\"],\"cwd\":\"$W/real/proj\"},\"tryRun\":{}}" >"$TMP/t6.txt"
pid6=$(pid_in "$TMP/t6.txt")
check "the command ended, its background job goes on" "0" "$(end_field "$TMP/t6.txt" 'e.get("exitCode", 0)')"
touch "$G/go"
bg_done() { changes_of "$(diff_of "$pid6")" "$W/real/proj" | grep -q 'created bg_done'; }
wait_for 30 bg_done && ok "the background job writes into the layer" || nok "the background job writes into the layer"
check "not into the real tree" "no" "$([ -e "$W/real/proj/bg_saw" ] && echo yes || echo no)"
r=$(diff_of "$pid6" '"unified":true')
check_re "it read what the command wrote there" '"path": "[^"]*/bg_saw".*\+one' "$r"
bg=$(pgrep -f "until \[ -e $G/go" | head -n1)
check "CommitTry of an ended try whose job still runs" 200 "$(code_of "$(unary CommitTry "{\"pid\":$pid6}")")"
check "the background job was killed first" "gone" "$( [ -n "$bg" ] && kill -0 "$bg" 2>/dev/null && echo alive || echo gone)"
check "and what it wrote is applied" "one" "$(cat "$W/real/proj/bg_saw" 2>/dev/null)"

# --- while it runs: the diff, and a commit is refused; unified and binary ---
printf 'one\ntwo\nthree\n' >"$W/real/proj/t.txt"
stream_bg "$TMP/t7.txt" Start "{\"process\":{\"cmd\":\"/bin/sh\",\"args\":[\"-c\",\"printf 'one\\\\n2\\\\nthree\\\\n' > t.txt; printf 'a\\\\0b' > bin; echo ready; read x\"],\"cwd\":\"$W/real/proj\"},\"tryRun\":{}}"
wait_for 60 has "$TMP/t7.txt" ready
pid7=$(pid_in "$TMP/t7.txt")
r=$(diff_of "$pid7" '"unified":true')
check_re "TryDiff while it runs: state running" '"state": "running"' "$r"
check_re "a text file's unified diff" '"unified": "--- a[^"]*/t.txt\\n\+\+\+ b[^"]*/t.txt\\n@@ -1,3 \+1,3 @@\\n one\\n-two\\n\+2\\n three\\n"' "$r"
check_re "a binary file is named so, with no diff" '"path": "[^"]*/bin"[^}]*"binary": true' "$r"
check_re "the unified diff is bounded by maxBytes" '"unifiedTruncated": true' "$(diff_of "$pid7" '"unified":true,"maxBytes":20')"
check_re "limit: one change listed, truncated" '"truncated": true' "$(diff_of "$pid7" '"limit":1')"
check_re "CommitTry while the command runs: failed_precondition" '^400 .*failed_precondition.*still running' \
	"$(unary CommitTry "{\"pid\":$pid7}")"
check "List shows the try's command" 1 "$(unary List '{}' | grep -c "\"pid\":$pid7")"
stream Connect "{\"process\":{\"pid\":$pid7},\"replayFrom\":\"0\"}" >"$TMP/c7.txt" &
cpid=$!
wait_for 60 has "$TMP/c7.txt" ready && ok "Connect with replay to the try's command" || nok "Connect with replay"
check "DiscardTry while it runs: the command is killed, the layer goes" 200 "$(code_of "$(unary DiscardTry "{\"pid\":$pid7}")")"
wait "$cpid"
check_re "its end event says killed, and discarded" 'signal: killed.*"state": "discarded"|"state": "discarded".*signal: killed' "$(grep '"end"' "$TMP/c7.txt")"
check "the real file is as it was" "one two three" "$(tr '\n' ' ' <"$W/real/proj/t.txt" | sed 's/ $//')"

# --- ENVD_TRY in the envs: not exported, colon-separated, relative ---
mkdir -p "$W/real/proj2"
stream Start "{\"process\":{\"cmd\":\"/bin/sh\",\"args\":[\"-c\",\"env | grep -c ENVD_TRY; touch ../proj2/p2 ./p1\"],\"cwd\":\"$W/real/proj\",\"envs\":{\"ENVD_TRY\":\".:../proj2\"}}}" >"$TMP/t8.txt"
pid8=$(pid_in "$TMP/t8.txt")
check "ENVD_TRY is not exported to the command" "0" "$(stdout_of <"$TMP/t8.txt" | head -n1)"
check "both directories are layers" "no no" "$([ -e "$W/real/proj/p1" ] && echo yes || echo no) $([ -e "$W/real/proj2/p2" ] && echo yes || echo no)"
check "the diff covers both" "$W/real/proj $W/real/proj2" \
	"$("$PY" -c 'import json,sys; print(" ".join(json.loads(sys.argv[1])["paths"]))' "$(diff_of "$pid8")")"
check "CommitTry over two directories" 200 "$(code_of "$(unary CommitTry "{\"pid\":$pid8}")")"
check "both applied" "yes yes" "$([ -e "$W/real/proj/p1" ] && echo yes || echo no) $([ -e "$W/real/proj2/p2" ] && echo yes || echo no)"

# --- the owner and mode of what a user's try makes ---
id user >/dev/null 2>&1 || useradd -m -s /bin/bash user >/dev/null 2>&1
mkdir -p "$W/real/ud" && chown user: "$W/real/ud"
stream Start "{\"process\":{\"cmd\":\"/bin/sh\",\"args\":[\"-c\",\"umask 027; echo u > mine && mkdir sub && chmod 700 sub\"],\"cwd\":\"$W/real/ud\"},\"tryRun\":{}}" \
	-H "Authorization: Basic $(printf 'user:' | base64)" >"$TMP/t9.txt"
pid9=$(pid_in "$TMP/t9.txt")
unary CommitTry "{\"pid\":$pid9}" >/dev/null
check "a user's try: owner and mode kept through the commit" "user 640 user 700" \
	"$(stat -c '%U %a' "$W/real/ud/mine" "$W/real/ud/sub" 2>/dev/null | tr '\n' ' ' | sed 's/ $//')"

# --- refusals ---
s() { stream Start "$(start_json true "$1")"; }
check_re "a directory that does not exist: invalid_argument" 'invalid_argument.*does not exist' "$(s "\"tryRun\":{\"paths\":[\"$W/nope\"]}")"
check_re "one directory inside another: invalid_argument" 'invalid_argument.*inside' \
	"$(s "\"tryRun\":{\"paths\":[\"$W/real\",\"$W/real/proj\"]}")"
check_re "the root directory: invalid_argument" 'invalid_argument.*root directory' "$(s "\"tryRun\":{\"paths\":[\"/\"]}")"
check_re "in a session: invalid_argument" 'invalid_argument.*session' \
	"$(stream Start "{\"process\":{\"cmd\":\"/bin/true\",\"envs\":{\"ENVD_SESSION\":\"s\",\"ENVD_TRY\":\"\"}}}")"
if command -v bindfs >/dev/null && [ -e /dev/fuse ]; then
	mkdir -p "$W/fuse-back" "$W/fuse"
	bindfs -f "$W/fuse-back" "$W/fuse" >/dev/null 2>&1 &
	BINDFS_PID=$!
	MNTS+=("$W/fuse")
	wait_for 60 awk -v d="$W/fuse" '$5 == d { f = 1 } END { exit !f }' /proc/self/mountinfo
	check_re "a FUSE directory: failed_precondition, before anything runs" 'failed_precondition.*FUSE' \
		"$(stream Start "$(start_json "touch $W/ran" "\"tryRun\":{\"paths\":[\"$W/fuse\"]}")")"
	check "nothing ran" "no" "$([ -e "$W/ran" ] && echo yes || echo no)"
else
	nok "a FUSE directory is refused" "bindfs or /dev/fuse missing (scripts/setup.sh)"
fi
# overlayfs stacks at most two deep: a try over an overlay of an overlay is refused by the kernel
mkdir -p "$W"/o/{l1,u1,w1,m1,u2,w2,m2}
if mount -t overlay overlay -o "lowerdir=$W/o/l1,upperdir=$W/o/u1,workdir=$W/o/w1" "$W/o/m1" 2>/dev/null; then
	MNTS+=("$W/o/m1")
	mount -t overlay overlay -o "lowerdir=$W/o/m1,upperdir=$W/o/u2,workdir=$W/o/w2" "$W/o/m2" && MNTS+=("$W/o/m2")
	check_re "a directory overlayfs refuses as its lower layer: failed_precondition with the reason" \
		'failed_precondition.*overlayfs refuses.*m2' "$(s "\"tryRun\":{\"paths\":[\"$W/o/m2\"]}")"
else
	nok "an overlay to stack on" "mount -t overlay failed here"
fi
summary_rc=0
summary || summary_rc=1

# --- no mount namespace for envd (CAP_SYS_ADMIN dropped) ---
PASS=0 FAIL=0
ENVD_REAL=$ENVD_BIN
ENVD_BIN=$W/nocap.sh
printf '#!/bin/sh\nexec setpriv --bounding-set -sys_admin --inh-caps -sys_admin -- %s "$@"\n' "$ENVD_REAL" >"$ENVD_BIN"
chmod +x "$ENVD_BIN"
start_envd
check_re "envd without a mount namespace: failed_precondition, before anything runs" \
	'failed_precondition.*mount namespace' "$(stream Start "$(start_json "touch $W/ran2" "\"tryRun\":{\"paths\":[\"$W/real\"]}")")"
check "nothing ran" "no" "$([ -e "$W/ran2" ] && echo yes || echo no)"
ENVD_BIN=$ENVD_REAL
summary || summary_rc=1

# --- ENOSPC past -try-max-bytes; -try-ttl ---
PASS=0 FAIL=0
start_envd -try-max-bytes 1048576 -try-ttl 2
df0=$(df --output=used / | tail -n1)
stream Start "{\"process\":{\"cmd\":\"/bin/sh\",\"args\":[\"-c\",\"dd if=/dev/zero of=big bs=64k count=64 2>&1; echo done\"],\"cwd\":\"$W/real/proj\"},\"tryRun\":{}}" >"$TMP/t10.txt"
check_re "a write past -try-max-bytes fails with ENOSPC in the try" 'No space left on device' "$(stdout_of <"$TMP/t10.txt")"
check "nothing reached the real directory" "no" "$([ -e "$W/real/proj/big" ] && echo yes || echo no)"
pid10=$(pid_in "$TMP/t10.txt")
check_re "the layer is at its bound" '"layerMaxBytes": "1048576"' "$(diff_of "$pid10")"
expired() { [[ $(diff_of "$pid10") =~ '"state": "discarded"' ]]; }
wait_for 30 expired && ok "-try-ttl: an ended try not committed is discarded" || nok "-try-ttl discards" "$(diff_of "$pid10")"
summary || summary_rc=1

# --- with a cgroup leaf per command ---
if [ -n "$CG" ]; then
	PASS=0 FAIL=0
	start_envd -cgroup-root "$CG"
	stream Start "{\"process\":{\"cmd\":\"/bin/sh\",\"args\":[\"-c\",\"grep ^0:: /proc/self/cgroup | cut -d: -f3; echo cg > cg\"],\"cwd\":\"$W/real/proj\"},\"tryRun\":{}}" >"$TMP/t11.txt"
	check_re "a try's command runs in its own leaf" '/user/cmd-' "$(stdout_of <"$TMP/t11.txt")"
	pid11=$(pid_in "$TMP/t11.txt")
	check "and on the layer" "created cg" "$(changes_of "$(end_diff "$TMP/t11.txt")" "$W/real/proj")"
	unary DiscardTry "{\"pid\":$pid11}" >/dev/null
	summary || summary_rc=1
else
	echo "# no private cgroup2 directory here: the cgroup check is skipped"
fi

# --- envd chrooted, as in a container started with `unshare --root` ---
# Joining the try's mount namespace puts a process at the namespace's own
# root: the command must still see envd's root (its cwd exists only there).
PASS=0 FAIL=0
C=$W/chroot
CP=/envd-chroot-try/proj
ENVD_REAL=$(realpath "$ENVD_BIN")
BINDS="/usr /etc /dev /proc $(dirname "$ENVD_REAL")"
mkdir -p "$C"/{usr,etc,dev,proc,tmp,run} "$C$(dirname "$ENVD_REAL")" "$C$CP"
for l in bin sbin lib lib32 lib64 libx32; do
	if [ -L "/$l" ]; then
		cp -P "/$l" "$C/$l"
	elif [ -d "/$l" ]; then
		mkdir -p "$C/$l"
		BINDS="$BINDS /$l"
	fi
done
echo bee >"$C$CP/b"
ENVD_BIN=$W/chroot.sh
# The binds live in envd's own mount namespace and go with it. The root is
# a mount of its own, as a container's is (a try makes its mounts slaves
# of envd's, which only a mount's root can be told).
cat >"$ENVD_BIN" <<EOF
#!/bin/sh
exec unshare --mount --propagation private -- /bin/sh -ec '
mount --bind "$C" "$C"
for d in $BINDS; do mount --rbind "\$d" "$C\$d"; done
exec chroot "$C" "$ENVD_REAL" "\$@"' sh "\$@"
EOF
chmod +x "$ENVD_BIN"
start_envd
stream Start "{\"process\":{\"cmd\":\"/bin/sh\",\"args\":[\"-c\",\"pwd; echo new > n; rm b; (echo bg > bg_made) &\"],\"cwd\":\"$CP\"},\"tryRun\":{}}" >"$TMP/t14.txt"
check "a chrooted envd's try runs in its cwd, in envd's root" "0 $CP" \
	"$(end_field "$TMP/t14.txt" 'e.get("exitCode", 0)') $(stdout_of <"$TMP/t14.txt" | head -n1)"
pid14=$(pid_in "$TMP/t14.txt")
bg_made() { changes_of "$(diff_of "$pid14")" "$CP" | grep -q 'created bg_made'; }
wait_for 60 bg_made
check "the diff: its changes and its background job's" "deleted b
created bg_made
created n" "$(changes_of "$(diff_of "$pid14")" "$CP")"
check "the real tree (in the chroot) is untouched" "bee no" \
	"$(cat "$C$CP/b") $([ -e "$C$CP/n" ] && echo yes || echo no)"
check "CommitTry in the chroot" 200 "$(code_of "$(unary CommitTry "{\"pid\":$pid14}")")"
check "applied to envd's root" "new bg gone" \
	"$(cat "$C$CP/n" "$C$CP/bg_made" 2>/dev/null | tr '\n' ' ')$([ -e "$C$CP/b" ] && echo there || echo gone)"
ENVD_BIN=$ENVD_REAL
summary || summary_rc=1

# --- a crash of envd (under build/init): the try is taken back ---
PASS=0 FAIL=0
INIT=${INIT_BIN:-$ROOT/build/init}
PORT=$(free_port)
"$INIT" --no-mount --grace 10 -- "$ENVD_BIN" -isnotfc -port "$PORT" $(cgroup_flags) -changes-max-paths 0 \
	-no-port-forward -upload-registry "$W/reg" -upgrade-dir "$W" -handover-file "$W/handover.pb" \
	>"$TMP/envd.log" 2>&1 &
IPID=$!
wait_for 60 curl -s -o /dev/null "http://127.0.0.1:$PORT/health" || nok "envd starts under init" "$(cat "$TMP/envd.log")"
envd_of_init() { pgrep -P "$IPID" -f -- "-upload-registry $W/reg" | head -n1; }
stream Start "{\"process\":{\"cmd\":\"/bin/sh\",\"args\":[\"-c\",\"echo before > kept_a; echo up; read x; echo after > kept_b\"],\"cwd\":\"$W/real/proj\"},\"tryRun\":{}}" >/dev/null &
running() { unary List '{}' | grep -q '"pid"'; }
wait_for 60 running
pidc=$(unary List '{}' | grep -o '"pid":[0-9]*' | head -n1 | cut -d: -f2)
stream Start "{\"process\":{\"cmd\":\"/bin/sh\",\"args\":[\"-c\",\"echo ended > kept_c\"],\"cwd\":\"$W/real/proj2\"},\"tryRun\":{}}" >"$TMP/t12.txt"
pide=$(pid_in "$TMP/t12.txt")
has_kept_a() { changes_of "$(diff_of "$pidc")" "$W/real/proj" | grep -q 'created kept_a'; }
wait_for 60 has_kept_a
old=$(envd_of_init)
kill -KILL "$old"
back() { local n; n=$(envd_of_init); [ -n "$n" ] && [ "$n" != "$old" ] && curl -s -o /dev/null "http://127.0.0.1:$PORT/health"; }
wait_for 60 back && ok "envd restarts after SIGKILL" || nok "envd restarts after SIGKILL"
check_re "the running try is taken back: its diff" 'created kept_a' "$(changes_of "$(diff_of "$pidc")" "$W/real/proj")"
check_re "the ended one too" 'created kept_c' "$(changes_of "$(diff_of "$pide")" "$W/real/proj2")"
check "nothing reached the real directories" "no no" "$([ -e "$W/real/proj/kept_a" ] && echo yes || echo no) $([ -e "$W/real/proj2/kept_c" ] && echo yes || echo no)"
r=$(unary SendInput "{\"process\":{\"pid\":$pidc},\"input\":{\"stdin\":\"$(printf 'go\n' | base64)\"}}")
check "its command takes input after the restart" 200 "$(code_of "$r")"
ended() { [[ $(diff_of "$pidc") =~ '"state": "ended"' ]]; }
wait_for 60 ended && ok "its end is seen after the restart" || nok "its end after the restart" "$(diff_of "$pidc")"
check "CommitTry of the taken-back try" 200 "$(code_of "$(unary CommitTry "{\"pid\":$pidc}")")"
check "applied" "before after" "$(cat "$W/real/proj/kept_a" "$W/real/proj/kept_b" 2>/dev/null | tr '\n' ' ' | sed 's/ $//')"
check "CommitTry of the one that had ended" 200 "$(code_of "$(unary CommitTry "{\"pid\":$pide}")")"
check "applied" "ended" "$(cat "$W/real/proj2/kept_c" 2>/dev/null)"

# --- a live upgrade: the try crosses the exec ---
curl -s -o /dev/null -X POST "http://127.0.0.1:$PORT/init" -H 'Content-Type: application/json' -d '{}'
stream_bg "$TMP/t13.txt" Start "{\"process\":{\"cmd\":\"/bin/sh\",\"args\":[\"-c\",\"echo one > up1; echo up; read x; echo two > up2\"],\"cwd\":\"$W/real/proj\"},\"tryRun\":{}}"
wait_for 60 has "$TMP/t13.txt" '"up'
pidu=$(pid_in "$TMP/t13.txt")
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "http://127.0.0.1:$PORT/upgrade")
upgraded() { curl -s -D - -o /dev/null -X POST "http://127.0.0.1:$PORT/init" -H 'Content-Type: application/json' -d '{}' |
	grep -q 'X-Envd-Handover: {"failed":false'; }
wait_for 60 upgraded && ok "a live upgrade with a try running (POST /upgrade: $code)" || nok "the upgrade" "$(tail -5 "$TMP/envd.log")"
check_re "the try is there after the upgrade" 'created up1' "$(changes_of "$(diff_of "$pidu")" "$W/real/proj")"
unary SendInput "{\"process\":{\"pid\":$pidu},\"input\":{\"stdin\":\"$(printf 'go\n' | base64)\"}}" >/dev/null
endedu() { [[ $(diff_of "$pidu") =~ '"state": "ended"' ]]; }
wait_for 60 endedu && ok "its command ends after the upgrade" || nok "its end after the upgrade" "$(diff_of "$pidu")"
check "CommitTry after the upgrade" 200 "$(code_of "$(unary CommitTry "{\"pid\":$pidu}")")"
check "applied" "one two" "$(cat "$W/real/proj/up1" "$W/real/proj/up2" 2>/dev/null | tr '\n' ' ' | sed 's/ $//')"
kill -TERM "$IPID" 2>/dev/null
wait "$IPID" 2>/dev/null
IPID=
ENVD_PID=
summary || summary_rc=1
exit $summary_rc
