#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A local user of the sandbox against envd's writes (docs/security.md,
# "Uploads and in-place writes"), each attack performed for real by uid
# 65534 (nobody) or by `user`, against uploads made by root or as `user`:
#  - set-ID bits: nobody makes its file in a root directory setuid, root
#    uploads /usr/bin/id over it (atomic): the result is root's but not
#    setuid, and run by nobody it says uid 65534; file capabilities of a
#    target never pass to its replacement;
#  - the temporary's mode: an inotify racer of nobody opens every upload
#    temporary beside a root 0600 file the moment it appears: it gets none;
#  - symbolic links: nobody's link in a world-writable sticky directory
#    (as /tmp) to a root file, a dangling one into a root directory, one
#    to a root directory used as a parent; `user`'s link in its home to a
#    root file; root and `user` upload through them, atomic and in place:
#    403, nothing changes where the link's owner may not write;
#  - the filesystem service: Remove, Move and MakeDir through those
#    links: permission_denied, nothing changes;
#  - archive extraction below or into those links: 403, nothing lands
#    where the link's owner may not write; below a link to the owner's own
#    directory the tree is made as that owner;
#  - directories: a racer of nobody swaps each directory envd creates in
#    nobody's directory for a link to a root file: the root file is never
#    chowned;
#  - hard links: a second name of a root file in the sticky directory
#    (made by nobody where fs.protected_hardlinks is 0, else by root for
#    it: the state is the same): an in-place upload replaces the name and
#    leaves the root file alone.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/lib.sh

if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null || ! id user >/dev/null 2>&1; then
	echo "SKIP: needs root, setpriv and a user called user"
	echo "hostile_write: 0 passed, 0 failed"
	exit 0
fi
NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups --)
USERID=$(id -u user)
AS_USER=(setpriv --reuid="$USERID" --regid="$(id -g user)" --clear-groups --)
ROUNDS=${HOSTILE_WRITE_ROUNDS:-100}
W=$(mktemp -d /tmp/envd-hostile-write.XXXXXX)
RACER=""
cleanup_hw() {
	[ -n "$RACER" ] && kill "$RACER" 2>/dev/null
	rm -rf "$W"
	_t_cleanup
}
on_exit cleanup_hw
chmod 755 "$W"
mkdir -m 755 "$W/pub" "$W/pub2"     # root's, as /srv or /etc
mkdir -m 1777 "$W/tmp"              # as /tmp
mkdir -m 755 "$W/att" "$W/home"     # nobody's own, user's home
chown 65534:65534 "$W/att"
chown user:user "$W/home"
printf 'root secret\n' >"$W/pub/secret"
chmod 600 "$W/pub/secret"

envd_start || exit 1
enc() { "$PY" -c 'import sys,urllib.parse;print(urllib.parse.quote(sys.argv[1],safe=""))' "$1"; }
# up FILE PATH USER [QUERY]: a raw upload; prints the status
up() {
	curl -s -o "$W/resp" -w '%{http_code}' -X POST -H 'Content-Type: application/octet-stream' \
		--data-binary @"$1" "$ENVD_URL/files?path=$(enc "$2")&username=$3${4:+&$4}"
}
owner() { stat -c %U "$1"; }
SECRET_SUM=$(sha256sum <"$W/pub/secret")
secret_intact() {
	[ "$(sha256sum <"$W/pub/secret")" = "$SECRET_SUM" ] && [ "$(stat -c %U:%a "$W/pub/secret")" = root:600 ]
}
printf 'evil\n' >"$W/evil"

# --- set-ID bits of a target its owner chose (the issue's case) ---
expect_eq "nobody's file in a root directory (an upload as nobody)" "200" "$(up "$W/evil" "$W/pub/idtool" nobody)"
check "nobody makes it set-user-ID" "${NOBODY[@]}" chmod 4755 "$W/pub/idtool"
expect_eq "root uploads /usr/bin/id over it" "200" "$(up /usr/bin/id "$W/pub/idtool" root)"
expect_eq "the result is root's, not set-user-ID" "root 755" "$(stat -c '%U %a' "$W/pub/idtool")"
expect_eq "run by nobody, it is nobody" "65534" "$("${NOBODY[@]}" "$W/pub/idtool" -u 2>&1)"
up "$W/evil" "$W/pub/gidtool" nobody >/dev/null
check "nobody makes another one set-group-ID" "${NOBODY[@]}" chmod 2775 "$W/pub/gidtool"
expect_eq "root uploads over it" "200" "$(up /usr/bin/id "$W/pub/gidtool" root)"
expect_eq "... which loses the bit, as chown would take it" "775" "$(stat -c %a "$W/pub/gidtool")"

cp /usr/bin/id "$W/pub/captool"
if setcap cap_setuid+ep "$W/pub/captool" 2>/dev/null && getcap "$W/pub/captool" | grep -q cap_setuid; then
	# Empty: no write of ours that would make the kernel drop them.
	: >"$W/empty"
	expect_eq "root uploads an empty file over a file with capabilities" "200" "$(up "$W/empty" "$W/pub/captool" root)"
	expect_eq "the capabilities stay with the old file" "" "$(getcap "$W/pub/captool")"
else
	echo "# no file capabilities here: that check is not run"
fi

# --- the temporary of an upload over a root 0600 file ---
printf 'top secret %s\n' "$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')" >"$W/topsecret"
cp "$W/topsecret" "$W/pub2/key"
chmod 600 "$W/pub2/key"
"${NOBODY[@]}" "$PY" tests/integration/hostile_write_probe.py temp_reader "$W/pub2" "$W/stop.r" >"$W/racer.out" 2>&1 &
RACER=$!
if wait_for 60 grep -q ready "$W/racer.out"; then
	ok=0
	for _ in $(seq "$ROUNDS"); do
		[ "$(up "$W/topsecret" "$W/pub2/key" root)" = 200 ] && ok=$((ok + 1))
	done
	touch "$W/stop.r"
	wait "$RACER"
	RACER=""
	expect_eq "$ROUNDS uploads over a 0600 file beside a racer" "$ROUNDS" "$ok"
	res=$(tail -n 1 "$W/racer.out")
	echo "# racer: $res"
	expect_eq "the racer opened no temporary" "opened 0 read 0" "$res"
	expect_eq "the file is still root's 0600" "root 600" "$(stat -c '%U %a' "$W/pub2/key")"
else
	fail "the temporary racer starts" "$(cat "$W/racer.out")"
fi

# --- symbolic links of other users ---
"${NOBODY[@]}" ln -s "$W/pub/secret" "$W/tmp/report"
"${NOBODY[@]}" ln -s "$W/pub/made-by-root" "$W/tmp/dangling"
"${NOBODY[@]}" ln -s "$W/pub" "$W/tmp/dir"
"${NOBODY[@]}" ln -s "$W/att" "$W/tmp/att"
"${AS_USER[@]}" ln -s "$W/pub/secret" "$W/home/notes"
for who in root user; do
	for q in "" atomic=false; do
		sfx="(as $who${q:+, $q})"
		expect_eq "through nobody's link to a root file: 403 $sfx" "403" "$(up "$W/evil" "$W/tmp/report" "$who" "$q")"
		expect_eq "through nobody's dangling link into a root directory: 403 $sfx" "403" \
			"$(up "$W/evil" "$W/tmp/dangling" "$who" "$q")"
		expect_eq "through nobody's link as a parent: 403 $sfx" "403" "$(up "$W/evil" "$W/tmp/dir/sub/f" "$who" "$q")"
		expect_eq "through user's link in its home: 403 $sfx" "403" "$(up "$W/evil" "$W/home/notes" "$who" "$q")"
	done
done
check "the root file is untouched and still root's" secret_intact
check "nothing was created in the root directory" test ! -e "$W/pub/made-by-root" -a ! -e "$W/pub/sub"
expect_match "the refusal says why" "permission denied" "$(cat "$W/resp")"
"${NOBODY[@]}" sh -c ": >'$W/att/mine'; ln -s mine '$W/att/link'"
expect_eq "through nobody's link to nobody's own file: written" "200" "$(up "$W/evil" "$W/att/link" root)"
expect_eq "... the file behind it" "evil" "$(cat "$W/att/mine")"

# --- the filesystem service: Remove, Move and MakeDir through the same links ---
# code RPC JSON USER: the Connect code of the call ("" when it succeeded)
code() {
	curl -s -X POST "$ENVD_URL/filesystem.Filesystem/$1" -H 'Content-Type: application/json' \
		-H "Authorization: Basic $(printf '%s:' "$3" | base64)" -d "$2" |
		"$PY" -c 'import json,sys; print(json.load(sys.stdin).get("code",""))'
}
printf 'keep\n' >"$W/pub/keep"
printf 'mine\n' >"$W/att/src"
for who in root user; do
	expect_eq "Remove through nobody's link to a root directory: permission_denied (as $who)" permission_denied \
		"$(code Remove "{\"path\":\"$W/tmp/dir/keep\"}" "$who")"
	expect_eq "Move into a root directory through nobody's link: permission_denied (as $who)" permission_denied \
		"$(code Move "{\"source\":\"$W/att/src\",\"destination\":\"$W/tmp/dir/secret\"}" "$who")"
	expect_eq "MakeDir through nobody's link: permission_denied (as $who)" permission_denied \
		"$(code MakeDir "{\"path\":\"$W/tmp/dir/newdir\"}" "$who")"
done
check "the root directory keeps its files" test -f "$W/pub/keep"
check "... its secret too" secret_intact
check "... and gets no new directory" test ! -e "$W/pub/newdir"
expect_eq "Remove through nobody's link to nobody's own directory works" "" \
	"$(code Remove "{\"path\":\"$W/tmp/att/src\"}" root 2>/dev/null)"
check "... the file is gone" test ! -e "$W/att/src"

# --- archive extraction (POST ?extract=) through the same links ---
mkdir -p "$W/tree/sub" && printf 'from the archive\n' >"$W/tree/sub/a.txt"
tar -C "$W/tree" -cf "$W/t.tar" .
# ex DIR USER: extract t.tar into DIR; prints the status
ex() {
	curl -s -o "$W/resp" -w '%{http_code}' -X POST -H 'Content-Type: application/octet-stream' \
		--data-binary @"$W/t.tar" "$ENVD_URL/files?path=$(enc "$1")&extract=tar&username=$2"
}
"${AS_USER[@]}" ln -s "$W/pub" "$W/home/pubdir"
for who in root user; do
	expect_eq "extract below nobody's link to a root directory: 403 (as $who)" "403" "$(ex "$W/tmp/dir/x-$who" "$who")"
	expect_eq "extract into nobody's link to a root directory: 403 (as $who)" "403" "$(ex "$W/tmp/dir" "$who")"
	expect_eq "extract below user's link to a root directory: 403 (as $who)" "403" "$(ex "$W/home/pubdir/y-$who" "$who")"
done
expect_match "the refusal says why" "permission denied" "$(cat "$W/resp")"
check "nothing was extracted into the root directory" test ! -e "$W/pub/x-root" -a ! -e "$W/pub/x-user" \
	-a ! -e "$W/pub/y-root" -a ! -e "$W/pub/y-user" -a ! -e "$W/pub/sub"
check "... and no temporary is left there" sh -c "! ls -a '$W/pub' | grep -q e2b-"
expect_eq "extract below nobody's link to nobody's own directory: 200" "200" "$(ex "$W/tmp/att/z" root)"
expect_eq "... the tree is there, nobody's (made as the link's owner)" "from the archive
65534:65534" "$(cat "$W/att/z/sub/a.txt"; stat -c %u:%g "$W/att/z/sub/a.txt")"
expect_eq "extract into a root directory without links: 200, root's" "200 root" \
	"$(ex "$W/pub/plain" root) $(stat -c %U "$W/pub/plain/sub/a.txt")"
expect_eq "... and as user: user's" "200 user" "$(ex "$W/pub/plain-user" user) $(stat -c %U "$W/pub/plain-user/sub/a.txt")"

# --- directories envd creates, swapped for links as they appear ---
"${NOBODY[@]}" "$PY" tests/integration/hostile_write_probe.py dir_swapper "$W/att" "$W/pub/secret" "$W/stop.d" \
	>"$W/swapper.out" 2>&1 &
RACER=$!
if wait_for 60 grep -q ready "$W/swapper.out"; then
	for i in $(seq "$ROUNDS"); do
		up "$W/evil" "$W/att/d$i/f" user >/dev/null
	done
	touch "$W/stop.d"
	wait "$RACER"
	RACER=""
	echo "# directory racer: $(tail -n 1 "$W/swapper.out")"
	check "$ROUNDS uploads into new directories beside a racer: the root file is never chowned" secret_intact
else
	fail "the directory racer starts" "$(cat "$W/swapper.out")"
fi

# --- a second name of a root file where anyone may make names ---
if [ "$(cat /proc/sys/fs/protected_hardlinks 2>/dev/null)" = 0 ]; then
	"${NOBODY[@]}" ln "$W/pub/secret" "$W/tmp/hard"
else
	echo "# fs.protected_hardlinks is on: root makes the link nobody could make where it is off"
	ln "$W/pub/secret" "$W/tmp/hard"
fi
expect_eq "an in-place upload as user to the hard link" "200" "$(up "$W/evil" "$W/tmp/hard" user atomic=false)"
check "the root file behind it is untouched and still root's" secret_intact
expect_eq "the name now holds the upload, user's" "evil user" "$(cat "$W/tmp/hard") $(owner "$W/tmp/hard")"

# --- and plain writes still work as before ---
expect_eq "a new file in a root directory as user" "200" "$(up "$W/evil" "$W/pub/new/deep/f" user)"
expect_eq "... owned by user, parents too" "user user user" \
	"$(owner "$W/pub/new/deep/f") $(owner "$W/pub/new/deep") $(owner "$W/pub/new")"
finish
