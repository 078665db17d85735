#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Try runs in the VM (docs/try.md), on Debian's kernel (overlayfs loaded
# from the root disk on the first mount), an ext4 root and envd under our
# init as PID 1: the brief's `npm init -y && touch a && rm b && chmod +x
# c` leaves the real tree untouched, the end event and TryDiff list
# exactly those changes, CommitTry makes the tree a plain run's; discard;
# a conflict aborted with nothing applied; a background job of the try
# sees the layer; a SIGKILL of envd keeps the try (the fd store of PID 1).
# The image has no npm: a stand-in writes the package.json it would.
. "$(dirname "$0")/lib.sh"
R=$VM_RUN_DIR/try
mkdir -p "$R"
D=/home/user/vmtry

tryrpc() { # METHOD JSON: "<status> <body>"
	vm_curl --max-time "$HANG_S" -X POST -H 'Content-Type: application/json' -d "$2" -w ' %{http_code}' \
		"$VM_URL/process.Process/$1" | awk '{code=$NF; $NF=""; sub(/ $/,""); print code, $0}'
}
diff_of() { tryrpc TryDiff "{\"pid\":$1}" | cut -d' ' -f2-; }
# changes_of JSON ROOT: "KIND relative-path" per change, by path
changes_of() {
	"$PY" -c '
import json, sys
d = json.loads(sys.argv[1]); d = d.get("diff", d); root = sys.argv[2]
for c in sorted(d.get("changes", []), key=lambda c: c["path"]):
    p = c["path"][len(root) + 1:]
    k = c["kind"].replace("TRY_CHANGE_KIND_", "").lower()
    print(k, p + (" %o" % c.get("mode", 0) if k == "mode" else ""))' "$1" "$2"
}
state_of() { "$PY" -c 'import json,sys; print(json.loads(sys.argv[1]).get("diff", {}).get("state", "-"))' "$1"; }
# snap DIR: the tree in the guest (names, kinds, modes, owners, sizes, contents)
snap() { vm_exec "cd $1 && find . -mindepth 1 -printf '%P %y %m %U:%G %s %l\n' | sort && find . -type f -exec md5sum {} + | sort -k2"; }
NPM_INIT='printf "{\n  \"name\": \"proj\",\n  \"version\": \"1.0.0\"\n}\n" > package.json'

vm_exec "rm -rf $D && mkdir -p $D/real/proj/lib $D/plain/proj/lib && for p in real plain; do
	echo bee > $D/\$p/proj/b; echo sea > $D/\$p/proj/c; echo keep > $D/\$p/proj/lib/k; done && chown -R user: $D" >/dev/null
expect_eq "the kernel has overlayfs (loaded on demand)" 0 "$(vm_exec 'modprobe overlay && grep -qw overlay /proc/filesystems; echo $?' 2>/dev/null | tail -n1)"
before=$(snap $D/real/proj)
CMD="cd $D/real/proj && $NPM_INIT && touch a && rm b && chmod +x c"
vm_exec -u user --try "$D/real/proj" --try-diff "$R/end.json" --pid-file "$R/pid1" "$CMD"
expect_eq "the try's command succeeds" 0 "$?"
pid1=$(cat "$R/pid1")
expect_eq "the real tree is untouched" "$before" "$(snap $D/real/proj)"
want="created a
deleted b
mode c 755
created package.json"
expect_eq "the end event lists exactly those changes" "$want" "$(changes_of "$(cat "$R/end.json")" "$D/real/proj")"
ended() { [ "$(state_of "$(tryrpc TryDiff "{\"pid\":$1}" | cut -d' ' -f2-)")" = ended ]; }
expect_eq "TryDiff lists the same changes" "$want" "$(changes_of "$(diff_of "$pid1")" "$D/real/proj")"
vm_exec -u user "cd $D/plain/proj && $NPM_INIT && touch a && rm b && chmod +x c" >/dev/null
r=$(tryrpc CommitTry "{\"pid\":$pid1}")
expect_eq "CommitTry answers 200" 200 "${r%% *}"
expect_eq "the real tree is now what a plain run makes it" "$(snap $D/plain/proj)" "$(snap $D/real/proj)"

# --- discard ---
before=$(snap $D/real/proj)
pid2=$(vm_exec -u user --background --try "$D/real/proj" "cd $D/real/proj && rm -rf lib && echo n > n")
wait_for 60 ended "$pid2"
expect_eq "DiscardTry answers 200" 200 "$(tryrpc DiscardTry "{\"pid\":$pid2}" | cut -d' ' -f1)"
expect_eq "the real tree is as it was" "$before" "$(snap $D/real/proj)"

# --- a conflict ---
pid3=$(vm_exec -u user --background --try "$D/real/proj" "cd $D/real/proj && echo try >> c && echo z > z")
wait_for 60 ended "$pid3"
vm_exec -u user "echo theirs >> $D/real/proj/c" >/dev/null
before=$(snap $D/real/proj)
r=$(tryrpc CommitTry "{\"pid\":$pid3}")
expect_match "a file changed in the real tree meanwhile: aborted" "^409 .*aborted.*$D/real/proj/c" "$r"
expect_eq "nothing was applied" "$before" "$(snap $D/real/proj)"
tryrpc DiscardTry "{\"pid\":$pid3}" >/dev/null

# --- a background job of the try sees the layer; a SIGKILL of envd keeps the try ---
vm_exec "rm -f /tmp/vmtry-go" >/dev/null
pid4=$(vm_exec -u user --background --try "$D/real/proj" \
	"cd $D/real/proj && echo one > made && (until [ -e /tmp/vmtry-go ]; do sleep 0.1; done; cat made > bg_saw; sleep 600) >/dev/null 2>&1 &")
wait_for 60 ended "$pid4"
vm_exec "touch /tmp/vmtry-go" >/dev/null
bg() { changes_of "$(diff_of "$pid4")" "$D/real/proj" | grep -q 'created bg_saw'; }
wait_for 60 bg && pass "the background job writes into the layer" || fail "the background job writes into the layer"
vm_exec 'kill -9 $(pidof envd)' >/dev/null 2>&1
wait_health 60 >/dev/null && pass "envd is back after SIGKILL" || fail "envd is back after SIGKILL"
expect_match "the try is taken back" 'created bg_saw' "$(changes_of "$(diff_of "$pid4")" "$D/real/proj")"
expect_eq "the real tree did not get it" no "$(vm_exec "[ -e $D/real/proj/bg_saw ] && echo yes || echo no")"
r=$(tryrpc CommitTry "{\"pid\":$pid4}")
expect_eq "CommitTry after the restart (the background job is killed first)" 200 "${r%% *}"
expect_eq "applied" one "$(vm_exec "cat $D/real/proj/bg_saw")"
vm_exec "rm -rf $D /tmp/vmtry-go" >/dev/null
finish
