#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The change journal in the VM (docs/protocol.md, "Changes"), where envd is
# PID 1's child on an ext4 root with per-command cgroups: which of the
# guest's filesystems are tracked; a command's end event lists what it made
# as "by" it (a one-line touch too); two concurrent commands each list only
# their own tree; a change on a tmpfs; a checkpoint taken before a pause of
# the whole VM (QEMU stop/cont) still answers after it. Waits are for the
# entries themselves (polling Changes), never sleeps.
. "$(dirname "$0")/lib.sh"
R=$VM_RUN_DIR/changes
mkdir -p "$R"
D=/home/user/vmchanges

changes() {
	vm_curl --max-time "$HANG_S" -X POST -H 'Content-Type: application/json' -d "$1" \
		"$VM_URL/filesystem.Filesystem/Changes"
}
token() { changes '{}' | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["next"])'; }
# since TOKEN PREFIX: "TYPE PATH ATTRIBUTION" per change (every page), then "resync=BOOL"
since() {
	"$PY" - "$1" "$2" <<'PY'
import json, os, sys, urllib.request
tok, prefix = sys.argv[1:3]
req = {"since": tok, "path": prefix, "limit": 5000}
h = {"Content-Type": "application/json"}
if os.environ.get("VM_TOKEN"):
    h["X-Access-Token"] = os.environ["VM_TOKEN"]
resync = False
while True:
    r = urllib.request.Request(os.environ["VM_URL"] + "/filesystem.Filesystem/Changes",
                               data=json.dumps(req).encode(), headers=h)
    m = json.load(urllib.request.urlopen(r, timeout=600))
    resync = resync or m.get("resync", False)
    for c in m.get("changes", []):
        print(c.get("type", "").replace("CHANGE_TYPE_", ""), c["path"], c.get("attribution", "-"))
    if not m.get("more"):
        break
    req["since"] = m["next"]
print("resync=%s" % str(resync).lower())
PY
}
shows() { since "$1" "$2" >"$R/last" && grep -qE "$3" "$R/last"; }
# has_line NAME REGEX FILE: a line of FILE matches REGEX
has_line() { if grep -qE "$2" "$3"; then pass "$1"; else fail "$1" "no line /$2/ in: $(tr '\n' ';' <"$3")"; fi; }
# end_changes FILE: the changes of an end event written by vm-exec.py --changes,
# as "PATH ATTRIBUTION" lines
end_changes() {
	"$PY" -c 'import json,sys
for c in json.load(open(sys.argv[1])).get("changes", []):
    print(c["path"], c.get("attribution", "-"))' "$1"
}

vm_exec "rm -rf $D && mkdir -p $D && chown user: $D" >/dev/null

# --- which filesystems are tracked ---
vm_exec 'findmnt -rn -o TARGET,FSTYPE' >"$R/mounts"
r=$(changes '{"path":"/"}')
"$PY" -c 'import json,sys; print("\n".join(json.loads(sys.argv[1]).get("notTracked", [])))' "$r" >"$R/not-tracked"
expect_match "a checkpoint from the journal" '"next":"c1-' "$r"
if grep -qx / "$R/not-tracked"; then fail "the root filesystem is tracked" "$(cat "$R/not-tracked")"; else pass "the root filesystem ($(awk '$1 == "/" {print $2}' "$R/mounts")) is tracked"; fi
echo "# mounts in the guest: $(tr '\n' ' ' <"$R/mounts")"
echo "# not tracked: $(tr '\n' ' ' <"$R/not-tracked")"

# --- one command's changes, attributed to it ---
t0=$(token)
vm_exec -u user --changes "$R/one.json" "cd $D && mkdir -p out/deep && echo hi >out/deep/a.txt && touch x && chmod 600 x" >/dev/null
end_changes "$R/one.json" >"$R/one"
# a.txt is written by the command's own shell (its pid is always known):
# "by". The others are made by mkdir, touch and chmod, children that exit at
# once: "by" when the journal reads their events while they are still
# there, "during" when they were already reaped (docs/protocol.md), which a
# loaded machine makes likelier. Either way listed, never someone else's.
expect_match "the end event lists out/deep/a.txt as made by the command" "^$D/out/deep/a.txt by$" "$(grep "^$D/out/deep/a.txt " "$R/one")"
for p in out out/deep x; do
	expect_match "the end event lists $p (by the command or during it)" "^$D/$p (by|during)$" "$(grep "^$D/$p " "$R/one")"
done
wait_for 120 shows "$t0" "$D" "^CREATED $D/x " || fail "Changes since the checkpoint shows the command's files"
since "$t0" "$D" >"$R/one-since"
has_line "Changes lists the new file as created by the command" "^CREATED $D/out/deep/a.txt by$" "$R/one-since"

# A process that exits at once.
vm_exec -u user --changes "$R/touch.json" "touch $D/quick" >/dev/null
expect_match "touch in a one-line command: listed by it" "^$D/quick by$" "$(end_changes "$R/touch.json" | grep "^$D/quick ")"

# Rename across directories, delete, recreate.
t1=$(token)
vm_exec -u user "cd $D && mkdir -p r1 r2 && echo a >r1/f && mv r1/f r2/g && rm x && echo again >quick2 && rm quick2 && echo back >quick2" >/dev/null
wait_for 120 shows "$t1" "$D" "^CREATED $D/r2/g " || fail "the renamed file shows up"
since "$t1" "$D" >"$R/ren"
has_line "a rename across directories: the new path is created" "^CREATED $D/r2/g " "$R/ren"
expect_eq "a rename across directories: the old path is not listed (made and moved after the checkpoint)" "" "$(grep "^[A-Z]* $D/r1/f " "$R/ren")"
has_line "a deleted file is listed as deleted" "^DELETED $D/x " "$R/ren"
has_line "a deleted-then-recreated path is created (it was not there at the checkpoint)" "^CREATED $D/quick2 " "$R/ren"

# --- two concurrent commands, each lists only its own tree ---
job() { echo "for i in \$(seq 100); do echo \$i >$1/f\$i; done; for i in \$(seq 10); do touch $1/t\$i; done"; }
vm_exec "mkdir -p $D/c1 $D/c2 && chown user: $D/c1 $D/c2" >/dev/null
vm_exec -u user --changes "$R/c1.json" "$(job "$D/c1")" >/dev/null &
j1=$!
vm_exec -u user --changes "$R/c2.json" "$(job "$D/c2")" >/dev/null &
j2=$!
wait $j1 $j2
own1=$(end_changes "$R/c1.json" | grep -c "^$D/c1/.* by$")
own2=$(end_changes "$R/c2.json" | grep -c "^$D/c2/.* by$")
for1=$(end_changes "$R/c1.json" | grep -c "^$D/c2/.* by$")
for2=$(end_changes "$R/c2.json" | grep -c "^$D/c1/.* by$")
expect_eq "concurrent commands: neither lists the other's files as its own" "0 0" "$for1 $for2"
[ "$own1" -ge 55 ] && [ "$own2" -ge 55 ] && pass "concurrent commands: each lists its own files ($own1/110, $own2/110 by the command)" ||
	fail "concurrent commands list their own" "$own1/110 and $own2/110"
echo "# attribution in the VM: $own1/110 and $own2/110 changes listed as by their command"

# --- a tmpfs ---
if awk '$2 == "tmpfs" {print $1}' "$R/mounts" | grep -qx /dev/shm; then
	t2=$(token)
	vm_exec "echo x >/dev/shm/vmchanges-shm" >/dev/null
	wait_for 120 shows "$t2" /dev/shm "^CREATED /dev/shm/vmchanges-shm " &&
		pass "a change on the tmpfs /dev/shm is seen" || fail "a change on /dev/shm is seen" "$(cat "$R/last")"
	vm_exec "rm -f /dev/shm/vmchanges-shm" >/dev/null
fi

# --- a checkpoint across a pause of the whole VM ---
t3=$(token)
vm_monitor stop >/dev/null
expect_match "QEMU reports the VM paused" 'paused' "$(vm_monitor 'info status')"
vm_monitor cont >/dev/null
expect_match "QEMU reports the VM running" 'running' "$(vm_monitor 'info status')"
vm_exec -u user "touch $D/after-pause" >/dev/null
wait_for 120 shows "$t3" "$D" "^CREATED $D/after-pause " || fail "a change after the resume shows up"
since "$t3" "$D" >"$R/pause"
has_line "the checkpoint from before the pause answers with the change made after it, by the command" "^CREATED $D/after-pause by$" "$R/pause"
expect_eq "and needs no resync" "resync=false" "$(tail -n1 "$R/pause")"

vm_exec "rm -rf $D" >/dev/null
finish
