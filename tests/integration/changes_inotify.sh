#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The change journal's inotify source (docs/protocol.md, "Changes"), forced
# with -changes-source inotify on a machine where fanotify works: create,
# write, delete, rename and chmod of files and directories under the home
# directory and /tmp, a nested directory made and filled at once, a rename
# across directories, a path deleted and made again, a tracked command
# (its changes "during", in its home and in a working directory outside
# the roots), a path outside the roots not reported, a live upgrade (the
# watches are made anew, old checkpoints resync, no descriptor left over),
# a spent watch budget answering resync, and the fallback chosen by itself
# when envd lacks CAP_SYS_ADMIN.
# Waits are for the entries themselves (polling Changes), never sleeps.
. "$(dirname "$0")/process_lib.sh"

HOMED=/root
H1=$(mktemp -d "$HOMED/envd-changes-ino.XXXXXX")
T1=$(mktemp -d /tmp/envd-changes-ino.XXXXXX)
# Outside every inotify root (/root, /home/*, /tmp) wherever the checkout is
# (a clone under /tmp or /root is inside one).
OUT=$(mktemp -d /var/tmp/envd-changes-ino-out.XXXXXX)
W=$(mktemp -d /tmp/envd-changes-ino-w.XXXXXX)
OVER=
on_exit 'cleanup; rm -rf "$H1" "$T1" "$OUT" "$W" ${OVER:+"$OVER"}'

start_envd -changes-max-paths 300000 -changes-source inotify -no-port-forward -no-cgroups -verbose \
	-upgrade-dir "$W/up" -handover-file "$W/handover.pb" -upgrade-preflight-ms 30000
B="http://127.0.0.1:$PORT"
mkdir -p "$W/up"
curl -s -o /dev/null -X POST -d '{}' "$B/init"

. "$(dirname "$0")/changes_lib.sh"
# end_changes PREFIX < DECODED: the end event's changes as lines "ATTRIBUTION
# PATH". inotify names no writer, so other suites' changes in /tmp are
# "during" too and may fill the event (1000 at most): then, as documented,
# the rest is paged through Changes from the event's `since` (under PREFIX;
# a Changes reply leaves inotify's attribution empty: shown as "during").
end_changes() {
	"$PY" -c '
import json, sys, urllib.request
base, prefix = sys.argv[1], sys.argv[2]
ch = None
for line in sys.stdin:
    e = json.loads(line.split(" ", 1)[1]).get("event", {})
    if "end" in e:
        ch = e["end"].get("changes", {})
for c in (ch or {}).get("changes", []):
    print(c.get("attribution", "-"), c["path"])
if ch and ch.get("overflow"):
    req = {"since": ch["since"], "path": prefix, "limit": 5000}
    while True:
        r = urllib.request.Request(base + "/filesystem.Filesystem/Changes", data=json.dumps(req).encode(),
                                   headers={"Content-Type": "application/json"})
        m = json.load(urllib.request.urlopen(r, timeout=120))
        for c in m.get("changes", []):
            print(c.get("attribution") or "during", c["path"])
        if not m.get("more"):
            break
        req["since"] = m["next"]' "$B" "$1"
}

# --- the roots ---
# The watches are set up by the journal's thread after the start (a home
# with many directories takes seconds, more on a loaded machine): changes
# made before a directory is watched are not seen, so wait until both roots
# are watched.
for root in "$HOMED" /tmp; do
	wait_for 600 grep -q "inotify: watching $root " "$TMP/envd.log" || nok "inotify watches $root" "$(tail -n 5 "$TMP/envd.log")"
done
r=$(changes_rpc '{}')
check_re "the reply names the inotify roots" '"inotifyRoots":\[[^]]*"/tmp"' "$r"
check_re "the home directory is one" "\"inotifyRoots\":\\[[^]]*\"$HOMED\"" "$r"
r=$(changes_rpc "{\"path\":\"$T1\"}")
check_re "a path below a root names that root" "\"inotifyRoots\":\\[\"/tmp\"\\]" "$r"
check_re "the log says inotify watches" 'inotify: watching /tmp' "$(cat "$TMP/envd.log")"
grep -o 'inotify: watching [^"]*' "$TMP/envd.log" | sed 's/^/# /'

# --- create, write, chmod, rename, delete, in the home directory and in /tmp ---
for D in "$H1" "$T1"; do
	where=$([ "$D" = "$H1" ] && echo home || echo /tmp)
	mkdir -p "$D/keep" "$D/olddir" "$D/perm-dir"
	echo old >"$D/keep/mod"
	echo old >"$D/keep/del"
	echo old >"$D/keep/perm"
	echo x >"$D/olddir/inside"
	mkdir "$D/deldir"
	t=$(token)
	echo new >"$D/new"
	mkdir "$D/newdir"
	echo more >>"$D/keep/mod"
	chmod 600 "$D/keep/perm"
	chmod 700 "$D/perm-dir"
	rm "$D/keep/del"
	rmdir "$D/deldir"
	mv "$D/olddir" "$D/moveddir"
	echo y >"$D/moveddir/later"
	mv "$D/keep/mod" "$D/keep/mod-renamed"
	wait_for 120 shows "$t" "$D" "^CREATED $D/keep/mod-renamed " || nok "$where: changes show up" "$(cat "$W/last")"
	all_since "$t" "$D" >"$W/t1.out"
	o=$(cat "$W/t1.out")
	check_re "$where: created file" "CREATED $D/new CREATE" "$o"
	check_re "$where: created directory" "CREATED $D/newdir CREATE" "$o"
	check_re "$where: written file (then renamed away)" "DELETED $D/keep/mod [A-Z,]*WRITE" "$o"
	check_re "$where: chmod of a file" "MODIFIED $D/keep/perm CHMOD" "$o"
	check_re "$where: chmod of a directory" "MODIFIED $D/perm-dir CHMOD" "$o"
	check_re "$where: deleted file" "DELETED $D/keep/del REMOVE" "$o"
	check_re "$where: deleted directory" "DELETED $D/deldir REMOVE" "$o"
	check_re "$where: renamed directory: old path deleted" "DELETED $D/olddir [A-Z,]*RENAME" "$o"
	check_re "$where: renamed directory: new path created" "CREATED $D/moveddir [A-Z,]*RENAME" "$o"
	check_re "$where: a file made in the renamed directory has its new path" "CREATED $D/moveddir/later " "$o"
	check_re "$where: renamed file: new name" "CREATED $D/keep/mod-renamed CREATE,RENAME " "$o"
	check "$where: nothing from outside the prefix" "0" "$(grep -vc "^[A-Z]* $D\\|^resync" "$W/t1.out")"
	check "$where: no resync" "resync=false" "$(tail -1 "$W/t1.out")"
	check "$where: attribution is empty (inotify names no writer)" "0" "$(grep -v '^resync' "$W/t1.out" | grep -vc ' -$')"

	# a brand-new nested directory, filled at once (before its watch can exist)
	t=$(token)
	mkdir -p "$D/a/b/c" && touch "$D/a/b/c/f"
	wait_for 120 shows "$t" "$D" "^CREATED $D/a/b/c/f " || nok "$where: nested new file shows up" "$(cat "$W/last")"
	o=$(all_since "$t" "$D")
	n=0
	for p in a a/b a/b/c a/b/c/f; do grep -q "^CREATED $D/$p CREATE" <<<"$o" && n=$((n + 1)); done
	check "$where: mkdir -p a/b/c && touch a/b/c/f: all four created" "4" "$n"
	t=$(token)
	echo deep >"$D/a/b/c/g"
	wait_for 120 shows "$t" "$D" "^CREATED $D/a/b/c/g " || nok "$where: the nested directory is watched" "$(cat "$W/last")"
	ok "$where: the new nested directory is watched"

	# rename across directories; deleted then recreated
	mkdir -p "$D/x" "$D/y/z"
	echo 1 >"$D/x/f"
	echo 1 >"$D/again"
	mkdir "$D/againdir"
	t=$(token)
	mv "$D/x/f" "$D/y/z/f"
	mv "$D/x" "$D/y/z/x2"
	rm "$D/again"
	echo 2 >"$D/again"
	rmdir "$D/againdir" && mkdir "$D/againdir"
	touch "$D/y/z/x2/in-moved"
	wait_for 120 shows "$t" "$D" "$D/y/z/x2/in-moved" || nok "$where: rename and recreate show up" "$(cat "$W/last")"
	o=$(all_since "$t" "$D")
	check_re "$where: rename across directories: source deleted" "DELETED $D/x/f [A-Z,]*RENAME" "$o"
	check_re "$where: rename across directories: target created" "CREATED $D/y/z/f [A-Z,]*RENAME" "$o"
	check_re "$where: a directory moved into another: new path" "CREATED $D/y/z/x2 [A-Z,]*RENAME" "$o"
	check_re "$where: and what is made in it afterwards" "CREATED $D/y/z/x2/in-moved " "$o"
	check_re "$where: deleted then recreated file: modified, both seen" "MODIFIED $D/again CREATE,([A-Z]+,)*REMOVE" "$o"
	check_re "$where: deleted then recreated directory" "MODIFIED $D/againdir CREATE,([A-Z]+,)*REMOVE" "$o"
done

# --- not below a root: not reported ---
t=$(token)
echo out >"$OUT/outside"
touch "$T1/marker"
wait_for 120 shows "$t" "$T1" "$T1/marker" || nok "marker shows up"
check "a path outside the roots is not reported" "resync=false" "$(all_since "$t" "$OUT")"

# --- a tracked command: its changes are "during" ---
out=$(stream Start "{\"process\":{\"cmd\":\"bash\",\"args\":[\"-c\",\"mkdir $H1/cmd && echo a > $H1/cmd/a && touch $T1/cmd-b\"]},\"stdin\":false,\"trackChanges\":true}")
e=$( { end_changes "$H1" <<<"$out"; end_changes "$T1" <<<"$out"; } | sort -u)
check_re "a tracked command: its new directory, during" "during $H1/cmd($|
)" "$e"
check_re "a tracked command: its file in the home, during" "during $H1/cmd/a" "$e"
check_re "a tracked command: its file in /tmp, during" "during $T1/cmd-b" "$e"
check "a tracked command: nothing is 'by' it" "0" "$(grep -c '^by ' <<<"$e")"
# a working directory outside the roots is watched for the command
out=$(stream Start "{\"process\":{\"cmd\":\"bash\",\"args\":[\"-c\",\"touch first; mkdir sub; sleep 1; echo x > sub/second\"],\"cwd\":\"$OUT\"},\"stdin\":false,\"trackChanges\":true}")
e=$(end_changes "$OUT" <<<"$out")
check_re "a cwd outside the roots: a file made at once is listed" "during $OUT/first" "$e"
check_re "a cwd outside the roots: a file made later is listed" "during $OUT/sub/second" "$e"
check "a cwd outside the roots: what was there before is not" "0" "$(grep -c "$OUT/outside" <<<"$e")"
r=$(changes_rpc "{\"path\":\"$OUT\"}")
check_re "the cwd is an inotify root now" "\"inotifyRoots\":\\[\"$OUT\"\\]" "$r"

# --- live upgrade: watches made anew, old checkpoints resync, no descriptor left over ---
# (Under qemu-user envd cannot exec its own aarch64 image: no binfmt handler.)
if envd_under_qemu_user; then
	echo "# live upgrade: not run under qemu-user (envd cannot exec itself there)"
else
	stream_bg "$W/sleeper.out" Start '{"process":{"cmd":"sleep","args":["600"]},"stdin":false}'
	sleeper=$(pid_in "$W/sleeper.out")
	t=$(token)
	n_ino_before=$(ls -l "/proc/$ENVD_PID/fd" 2>/dev/null | grep -c 'inotify')
	n_fd_before=$(ls "/proc/$ENVD_PID/fd" | wc -l)
	r=$(curl -s --max-time 60 -o /dev/null -w '%{http_code}' -X POST "$B/upgrade")
	wait_for 60 curl -sf -o /dev/null "$B/health" || nok "envd answers after the upgrade"
	curl -s -o /dev/null -X POST -d '{}' "$B/init"
	# The new image sets the watches up again (its log follows the old one's).
	wait_for 600 sh -c "[ \$(grep -c 'inotify: watching /tmp ' '$TMP/envd.log') -ge 2 ]" ||
		nok "upgrade: the new image watches /tmp" "$(tail -n 5 "$TMP/envd.log")"
	t_after=$(token)
	echo after >"$T1/after-upgrade"
	wait_for 120 shows "$t_after" "$T1" "$T1/after-upgrade" || nok "upgrade: a change after it shows up" "$(cat "$W/last")"
	ok "upgrade: the new image watches (a change after it is listed)"
	check "upgrade: a checkpoint from before answers resync" "resync=true" "$(all_since "$t" "$T1" | tail -1)"
	check "upgrade: one inotify descriptor before and after" "$n_ino_before 1" \
		"$n_ino_before $(ls -l "/proc/$ENVD_PID/fd" 2>/dev/null | grep -c 'inotify')"
	n_fd_after=$(ls "/proc/$ENVD_PID/fd" | wc -l)
	check_re "upgrade: no descriptors left over ($n_fd_before before, $n_fd_after after)" "^ok$" \
		"$([ "$n_fd_after" -le "$n_fd_before" ] && echo ok || ls -l "/proc/$ENVD_PID/fd")"
	check "upgrade: envd is alive" "alive" "$(kill -0 "$ENVD_PID" 2>/dev/null && echo alive)"
	[ -n "$sleeper" ] && kill "$sleeper" 2>/dev/null
fi

# --- a spent watch budget: a directory that cannot be watched answers resync ---
kill "$ENVD_PID" 2>/dev/null
wait "$ENVD_PID" 2>/dev/null
ENVD_PID=
# (the sanitizer's exit report of the first envd is in this log; summary looks at the second)
summary_first=$(grep -cE 'ERROR: AddressSanitizer|runtime error:|ERROR: LeakSanitizer' "$TMP/envd.log")
# One watch: the first root's own directory, nothing below it.
start_envd -changes-max-paths 300000 -changes-source inotify -changes-inotify-watches 1 -no-port-forward \
	-no-cgroups -verbose
B="http://127.0.0.1:$PORT"
wait_for 600 grep -q "inotify: watching $HOMED " "$TMP/envd.log" || nok "budget 1: inotify watches $HOMED"
r=$(changes_rpc '{}')
check_re "budget 1: the home directory is watched" "\"inotifyRoots\":\\[\"$HOMED\"\\]" "$r"
t=$(token)
OVER=$(mktemp -d "$HOMED/envd-changes-ino-over.XXXXXX")
wait_for 120 resyncs "$t" "$HOMED" || nok "a directory past the budget: resync" "$(all_since "$t" "$HOMED")"
ok "a directory past the budget: an earlier checkpoint answers resync"
check_re "and the log says so" 'inotify: 1 directories watched, no more' "$(cat "$TMP/envd.log")"
t=$(token)
touch "$HOMED/$(basename "$OVER").file"
OVERF="$HOMED/$(basename "$OVER").file"
on_exit 'cleanup; rm -rf "$H1" "$T1" "$OUT" "$W" "$OVER" "$OVERF"'
wait_for 120 shows "$t" "$HOMED" "CREATED $OVERF " || nok "a later checkpoint still answers" "$(cat "$W/last")"
check "a later checkpoint answers without resync" "resync=false" "$(all_since "$t" "$HOMED" | tail -1)"
check "the first envd: no sanitizer report" "0" "$summary_first"

# --- auto, without CAP_SYS_ADMIN: filesystem marks are refused, inotify takes over ---
if command -v setpriv >/dev/null && setpriv --bounding-set=-sys_admin true 2>/dev/null; then
	kill "$ENVD_PID" 2>/dev/null
	wait "$ENVD_PID" 2>/dev/null
	ENVD_PID=
	summary_second=$(grep -cE 'ERROR: AddressSanitizer|runtime error:|ERROR: LeakSanitizer' "$TMP/envd.log")
	check "the second envd: no sanitizer report" "0" "$summary_second"
	ENVD_BIN_REAL=$(cd "$(dirname "$ENVD_BIN")" && pwd)/$(basename "$ENVD_BIN")
	ENVD_BIN="$W/envd-nocap"
	printf '#!/bin/sh\nexec setpriv --bounding-set=-sys_admin --inh-caps=-sys_admin "%s" "$@"\n' "$ENVD_BIN_REAL" >"$ENVD_BIN"
	chmod +x "$ENVD_BIN"
	start_envd -changes-max-paths 300000 -no-port-forward -no-cgroups -verbose
	B="http://127.0.0.1:$PORT"
	# Its watches come up as the first envd's did (seconds for a large home).
	wait_for 600 grep -q "inotify: watching /tmp " "$TMP/envd.log" || nok "auto without CAP_SYS_ADMIN: inotify watches /tmp" "$(tail -n 5 "$TMP/envd.log")"
	r=$(changes_rpc "{\"path\":\"$T1\"}")
	check_re "auto without CAP_SYS_ADMIN: /tmp is an inotify root" '"inotifyRoots":\["/tmp"\]' "$r"
	t=$(token)
	mkdir "$T1/nocap" && echo x >"$T1/nocap/f"
	wait_for 120 shows "$t" "$T1" "^CREATED $T1/nocap/f " || nok "auto without CAP_SYS_ADMIN: changes show up" "$(cat "$W/last")"
	ok "auto without CAP_SYS_ADMIN: changes below a root are seen"
	ENVD_BIN=$ENVD_BIN_REAL
fi
summary
