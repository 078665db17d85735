#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# arm64: skip (qemu-user does not emulate fanotify: the journal there is inotify's, which names no writer; the arm64 VM has the kernel's)
# The change journal (docs/protocol.md, "Changes"): Filesystem/Changes and
# GET /changes since a checkpoint (create, write, delete, rename, chmod of
# files and directories, a git clone, a 10 000-file tar, a file rewritten
# 10 000 times, globs, paging), per-command changes in the end event
# (trackChanges; two concurrent commands, a one-line `touch`), overflow
# answering resync, a checkpoint crossing a live upgrade, bad tokens.
# Waits are for the entries themselves (polling Changes), never sleeps.
. "$(dirname "$0")/process_lib.sh"
. "$(dirname "$0")/cgroup_lib.sh"

W=$(mktemp -d /tmp/envd-changes.XXXXXX)
CG=$(cgroup_test_dir changes)
on_exit 'cleanup; cgroup_remove "$CG"; rm -rf "$W"'
CGFLAGS=(-no-cgroups)
[ -n "$CG" ] && CGFLAGS=(-cgroup-root "$CG")
SMALL=${ENVD_TEST_SMALL:-}
# The sanitizer pass runs the volume checks small; the static pass carries the volume.
case ${ENVD_BIN:-} in *asan*) SMALL=1 ;; esac
NTAR=10000
NREWRITE=10000
[ -n "$SMALL" ] && NTAR=2000 && NREWRITE=2000

start_envd -changes-max-paths 300000 -no-port-forward -upgrade-dir "$W/up" -handover-file "$W/handover.pb" \
	-upgrade-preflight-ms 30000 "${CGFLAGS[@]}"
B="http://127.0.0.1:$PORT"
# /init without a token: the upgrade needs an initialised envd, the
# requests below need no token.
H=()
mkdir -p "$W/up"
curl -s -o /dev/null -X POST -d '{}' "$B/init"

. "$(dirname "$0")/changes_lib.sh"

# --- checkpoints ---
r=$(changes_rpc '{}')
check_re "a call without since returns a token" '^200 \{"next":"c1-[0-9a-f]+-[0-9a-f]+-[0-9a-f]+"' "$r"
r=$(curl -s "${H[@]}" "$B/changes")
check_re "GET /changes without since returns a token" '^\{"next":"c1-' "$r"

# --- create, write, chmod, rename, delete of files and directories ---
D=$W/t1
mkdir -p "$D/keep" "$D/olddir"
echo old >"$D/keep/mod"
echo old >"$D/keep/del"
echo old >"$D/keep/perm"
echo x >"$D/olddir/inside"
t=$(token)
echo new >"$D/new"
mkdir "$D/newdir"
echo more >>"$D/keep/mod"
chmod 600 "$D/keep/perm"
rm "$D/keep/del"
mv "$D/olddir" "$D/moveddir"
rmdir "$D/newdir" && mkdir "$D/newdir2"
wait_for 120 shows "$t" "$D" "^CREATED $D/newdir2 " || nok "changes show up" "$(cat "$W/last")"
all_since "$t" "$D" >"$W/t1.out"
check_re "created file" "CREATED $D/new CREATE" "$(cat "$W/t1.out")"
check_re "written file" "MODIFIED $D/keep/mod WRITE" "$(cat "$W/t1.out")"
check_re "chmod" "MODIFIED $D/keep/perm CHMOD" "$(cat "$W/t1.out")"
check_re "deleted file" "DELETED $D/keep/del REMOVE" "$(cat "$W/t1.out")"
check_re "renamed directory: old path deleted" "DELETED $D/olddir [A-Z,]*RENAME" "$(cat "$W/t1.out")"
check_re "renamed directory: new path created" "CREATED $D/moveddir [A-Z,]*RENAME" "$(cat "$W/t1.out")"
check "a directory created and removed again is left out" "0" "$(grep -c " $D/newdir " "$W/t1.out")"
check "nothing from outside the prefix" "0" "$(grep -vc "^[A-Z]* $D\\|^resync" "$W/t1.out")"
check "no resync" "resync=false" "$(tail -1 "$W/t1.out")"
r=$(curl -s "${H[@]}" "$B/changes?since=$t&path=$D/keep")
check_re "GET /changes lists them too (JSON)" "\"path\":\"$D/keep/mod\",\"type\":\"CHANGE_TYPE_MODIFIED\"" "$r"
t2=$(changes_rpc "{\"since\":\"$t\"}" | cut -d' ' -f2- | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["next"])')
check "nothing since the next token" "resync=false" "$(all_since "$t2" "$D")"

# --- rename across directories; deleted then recreated ---
mkdir -p "$D/a" "$D/b"
echo 1 >"$D/a/f"
echo 1 >"$D/again"
t=$(token)
mv "$D/a/f" "$D/b/f"
rm "$D/again"
echo 2 >"$D/again"
wait_for 120 shows "$t" "$D" "$D/again .*CREATE" || nok "rename and recreate show up" "$(cat "$W/last")"
all_since "$t" "$D" >"$W/t2.out"
check_re "rename across directories: source deleted" "DELETED $D/a/f " "$(cat "$W/t2.out")"
check_re "rename across directories: target created" "CREATED $D/b/f " "$(cat "$W/t2.out")"
check_re "deleted then recreated: modified, both seen" "MODIFIED $D/again CREATE,([A-Z]+,)*REMOVE" "$(cat "$W/t2.out")"

# --- one file rewritten many times is one entry ---
t=$(token)
"$PY" -c '
import sys
for i in range(int(sys.argv[2])):
    with open(sys.argv[1], "w") as f:
        f.write(str(i))' "$D/rewritten" "$NREWRITE"
wait_for 120 shows "$t" "$D" "$D/rewritten" || nok "rewritten file shows up"
check "a file rewritten $NREWRITE times is one entry" "1" "$(count_since "$t" "$D" "$D/rewritten")"

# --- globs ---
mkdir -p "$D/g/node_modules/x" "$D/g/src" "$D/g/.git"
t=$(token)
touch "$D/g/node_modules/x/a.js" "$D/g/src/m.c" "$D/g/src/m.o" "$D/g/.git/HEAD"
wait_for 120 shows "$t" "$D/g" "$D/g/src/m.o" || nok "glob files show up"
r=$(all_since "$t" "$D/g" '{"exclude":["node_modules/**",".git/**"],"include":["*.c","*.o"]}' | grep -v resync | awk '{print $2}' | sort | tr '\n' ' ')
check "include and exclude globs" "$D/g/src/m.c $D/g/src/m.o " "$r"
r=$(curl -s "${H[@]}" "$B/changes?since=$t&path=$D/g&exclude=node_modules/**&exclude=.git/**&exclude=*.o" | grep -o '"path":"[^"]*"' | tr '\n' ' ')
check "GET /changes with repeated exclude" "\"path\":\"$D/g/src/m.c\" " "$r"

# --- tar -x of many files (through envd, tracked) ---
# The archive is written directly (tree/dNN/fNNNNN, one byte each): only
# the extraction is watched, and creating and deleting a source tree of
# its size costs more than the test on a disk that churns many files.
"$PY" -c '
import io, sys, tarfile
out, n = sys.argv[1], int(sys.argv[2])
with tarfile.open(out, "w", format=tarfile.GNU_FORMAT) as t:
    def entry(name, kind, mode, data=b""):
        i = tarfile.TarInfo(name); i.type = kind; i.mode = mode; i.size = len(data); i.mtime = 1700000000
        t.addfile(i, io.BytesIO(data) if data else None)
    entry("tree", tarfile.DIRTYPE, 0o755)
    for d in range(50):
        entry("tree/d%02d" % d, tarfile.DIRTYPE, 0o755)
    for i in range(n):
        entry("tree/d%02d/f%05d" % (i % 50, i), tarfile.REGTYPE, 0o644, b"x")' "$W/tree.tar" "$NTAR"
mkdir -p "$D/untar"
t=$(token)
out=$(stream Start "{\"process\":{\"cmd\":\"tar\",\"args\":[\"-C\",\"$D/untar\",\"-xf\",\"$W/tree.tar\"]},\"stdin\":false,\"trackChanges\":true}")
check_re "tar ends with its changes" '"changes": \{"changes": \[' "$out"
check_re "the end event says it was cut (more than it carries)" '"overflow": true' "$out"
wait_for 120 shows "$t" "$D/untar" "f$(printf %05d $((NTAR - 1)))" || nok "untarred files show up"
check "tar -x of $NTAR files: every file listed once" "$NTAR" "$(count_since "$t" "$D/untar" "^CREATED $D/untar/tree/d[0-9]+/f[0-9]+ ")"
check "and its 51 directories" "51" "$(count_since "$t" "$D/untar" "^CREATED $D/untar/tree(/d[0-9]+)? ")"

# --- git clone of a local repository ---
if command -v git >/dev/null; then
	mkdir -p "$W/repo"
	(cd "$W/repo" && git init -q && for i in 1 2 3 4 5; do echo "$i" >"file$i"; done && mkdir sub &&
		echo s >sub/s && git add -A && git -c user.name=t -c user.email=t@t commit -qm init)
	t=$(token)
	out=$(stream Start "{\"process\":{\"cmd\":\"git\",\"args\":[\"clone\",\"-q\",\"$W/repo\",\"$D/clone\"]},\"stdin\":false,\"trackChanges\":true}")
	check_re "git clone exited 0" '"exitCode"|"exited": true, "status": "exit status 0"' "$out"
	wait_for 120 shows "$t" "$D/clone" "$D/clone/sub/s" || nok "clone shows up"
	all_since "$t" "$D/clone" >"$W/clone.out"
	n=0
	for f in file1 file2 file3 file4 file5 sub/s .git/HEAD .git/config; do
		grep -q "^CREATED $D/clone/$f " "$W/clone.out" && n=$((n + 1))
	done
	check "git clone: work tree and .git files listed" "8" "$n"
	check_re "git clone: its end event lists them" "\"path\": \"$D/clone/sub/s\"" "$out"
fi

# --- per command: a one-line touch; two concurrent commands ---
out=$(stream Start "{\"process\":{\"cmd\":\"touch\",\"args\":[\"$D/touched\"]},\"stdin\":false,\"trackChanges\":true}")
check_re "touch in a one-line command: listed by it" "\"attribution\": \"by\", \"events\": \[\"EVENT_TYPE_CREATE\"[^]]*\], \"fileType\": \"FILE_TYPE_FILE\", \"path\": \"$D/touched\"" "$out"
out=$(stream Start "{\"process\":{\"cmd\":\"bash\",\"args\":[\"-c\",\"touch $D/sh-touched\"]},\"stdin\":false,\"trackChanges\":true}")
check_re "touch in bash -c: listed" "\"path\": \"$D/sh-touched\"" "$out"
out=$(stream Start "{\"process\":{\"cmd\":\"true\"},\"stdin\":false}")
check "without trackChanges the end event has no changes" "0" "$(grep -c '"changes"' <<<"$out")"

mkdir -p "$D/c1" "$D/c2"
job() { # job DIR: 200 files written by the shell, 20 by child processes
	echo "for i in \$(seq 200); do echo \$i > $1/f\$i; done; for i in \$(seq 20); do touch $1/t\$i; done; mkdir $1/sub; cp $1/f1 $1/sub/copy"
}
stream Start "{\"process\":{\"cmd\":\"bash\",\"args\":[\"-c\",\"$(job "$D/c1")\"]},\"stdin\":false,\"trackChanges\":true}" >"$W/c1.out" &
j1=$!
stream Start "{\"process\":{\"cmd\":\"bash\",\"args\":[\"-c\",\"$(job "$D/c2")\"]},\"stdin\":false,\"trackChanges\":true}" >"$W/c2.out" &
j2=$!
wait $j1 $j2
rate=$("$PY" - "$W/c1.out" "$W/c2.out" "$D/c1" "$D/c2" <<'PY'
import json, sys
res = []
for out, mine, other in ((sys.argv[1], sys.argv[3], sys.argv[4]), (sys.argv[2], sys.argv[4], sys.argv[3])):
    end = None
    for line in open(out):
        m = json.loads(line.split(" ", 1)[1])
        e = m.get("event", {})
        if "end" in e:
            end = e["end"]
    ch = (end or {}).get("changes", {}).get("changes", [])
    by = [c["path"] for c in ch if c.get("attribution") == "by"]
    foreign = [p for p in by if p.startswith(other + "/") or p == other]
    own = [p for p in by if p.startswith(mine + "/")]
    res.append((len(own), len(foreign)))
# files each job made: 200 + 20 + sub + sub/copy
print("%d %d %d %d" % (res[0][0], res[0][1], res[1][0], res[1][1]))
PY
)
read -r own1 for1 own2 for2 <<<"$rate"
check "concurrent commands: neither lists the other's files as its own" "0 0" "$for1 $for2"
check_re "concurrent commands: the first lists its own (of 222)" "^(2[0-2][0-9]|1[0-9][0-9])$" "$own1"
check_re "concurrent commands: the second lists its own (of 222)" "^(2[0-2][0-9]|1[0-9][0-9])$" "$own2"
echo "# attribution: $own1/222 and $own2/222 changes listed as by their command ($([ -n "$CG" ] && echo cgroups || echo no cgroups))"

# --- envd's own writes ---
t=$(token)
curl -s -o /dev/null "${H[@]}" -X POST "$B/filesystem.Filesystem/MakeDir" -H 'Content-Type: application/json' \
	-d "{\"path\":\"$D/by-envd\"}"
curl -s -o /dev/null "${H[@]}" -F "file=@$W/tree.tar" "$B/files?path=$D/uploaded.tar"
wait_for 120 shows "$t" "$D" "$D/uploaded.tar" || nok "envd's writes show up"
check_re "MakeDir is a change by envd" "CREATED $D/by-envd CREATE[A-Z,]* envd" "$(all_since "$t" "$D")"
check_re "an upload is a change by envd" "CREATED $D/uploaded.tar [A-Z,]* envd" "$(all_since "$t" "$D")"

# --- bad tokens ---
for bad in "x" "c1-zz-0-0" "c1-0123456789abcdef-1" "c1-0123456789abcdef-5-1"; do
	r=$(changes_rpc "{\"since\":\"$bad\"}")
	check_re "bad token '$bad': invalid_argument" '^400 \{"code":"invalid_argument","message":"invalid change token' "$r"
done
epoch=$(sed -E 's/^c1-([0-9a-f]+)-.*/\1/' <<<"$t")
r=$(changes_rpc "{\"since\":\"c1-$epoch-ffffffff-ffffffff\"}")
check_re "a token from the future: invalid_argument" '^400 \{"code":"invalid_argument"' "$r"
r=$(changes_rpc '{"since":"c1-0000000000000001-0-0"}')
check_re "a token of another journal: resync" '"resync":true' "$r"
r=$(curl -s -w ' %{http_code}' "${H[@]}" "$B/changes?since=nonsense")
check_re "GET /changes with a bad token: 400" 'invalid change token.* 400$' "$r"

# --- a checkpoint from before a live upgrade answers after it ---
# (a command runs across the upgrade, as in a real sandbox: an upgraded
# envd with nothing to watch but its listener and no port forwarding ends
# its loop at the first /init)
stream_bg "$W/sleeper.out" Start '{"process":{"cmd":"sleep","args":["600"]},"stdin":false}'
sleeper=$(pid_in "$W/sleeper.out")
t=$(token)
echo before >"$D/before-upgrade"
wait_for 120 shows "$t" "$D" "$D/before-upgrade" || nok "before-upgrade file shows up"
r=$(curl -s --max-time 60 -o /dev/null -w '%{http_code}' "${H[@]}" -X POST "$B/upgrade")
wait_for 60 curl -sf -o /dev/null "$B/health" || nok "envd answers after the upgrade"
curl -s -o /dev/null -X POST -d '{}' "$B/init"
echo after >"$D/after-upgrade"
wait_for 120 shows "$t" "$D" "$D/after-upgrade" || nok "after-upgrade file shows up" "$(cat "$W/last")"
all_since "$t" "$D" >"$W/up.out"
check_re "upgrade: the change before it is still listed" "CREATED $D/before-upgrade " "$(cat "$W/up.out")"
check_re "upgrade: and the one after it" "CREATED $D/after-upgrade " "$(cat "$W/up.out")"
check "upgrade: the old checkpoint needs no resync" "resync=false" "$(tail -1 "$W/up.out")"
check_re "upgrade: the record carried the journal" "took over" "$(grep -c 'took over' "$TMP/envd.log") took over"
[ -n "$sleeper" ] && kill "$sleeper" 2>/dev/null

# --- overflow: a small journal forgets, and old checkpoints resync ---
kill "$ENVD_PID" 2>/dev/null
wait "$ENVD_PID" 2>/dev/null
ENVD_PID=
BOUND=20000
[ -n "$SMALL" ] && BOUND=4000
start_envd -changes-max-paths "$BOUND" -no-port-forward "${CGFLAGS[@]}"
B="http://127.0.0.1:$PORT"
curl -s -o /dev/null -X POST -d '{}' "$B/init"
mkdir -p "$D/over"
t=$(token)
"$PY" -c '
import os, sys
for i in range(2 * int(sys.argv[2])):
    open(os.path.join(sys.argv[1], "o%d" % i), "w").close()' "$D/over" "$BOUND"
r=$(changes_rpc "{\"since\":\"$t\",\"path\":\"$D/over\"}")
check_re "past the bound an old checkpoint answers resync" '"resync":true' "$r"
check_re "with no changes listed" '^200 \{"next"' "$r"
# A checkpoint taken now answers without resync as long as the journal has
# forgotten nothing since. It watches the whole filesystem, so other work on
# the machine (another suite extracting 100 000 files) may make it forget
# within seconds, and resync is then the right answer: try again, a few
# times, for a window in which the bound held.
late=
for i in $(seq 20); do
	t_late=$(token)
	touch "$D/over/late$i"
	wait_for 120 shows "$t_late" "$D/over" "$D/over/late$i " || continue
	[ "$(all_since "$t_late" "$D/over" | tail -1)" = "resync=false" ] && { late=$i; break; }
done
check_re "a recent checkpoint still answers, without resync" '^[0-9]+$' "$late"

# --- the journal off ---
kill "$ENVD_PID" 2>/dev/null
wait "$ENVD_PID" 2>/dev/null
ENVD_PID=
start_envd -changes-max-paths 0 -no-port-forward "${CGFLAGS[@]}"
B="http://127.0.0.1:$PORT"
r=$(curl -s --max-time 10 -X POST "$B/filesystem.Filesystem/Changes" -H 'Content-Type: application/json' -d '{}' -w ' %{http_code}')
check_re "journal off: failed_precondition" '"code":"failed_precondition".* 400$' "$r"
summary
