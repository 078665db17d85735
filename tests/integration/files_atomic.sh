#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Uploads are atomic by default: a cut connection (curl killed) or a
# crash (envd SIGKILLed) mid-upload leaves the target's previous content
# intact and, once the next envd started, no temporary file; a complete
# upload keeps the target's mode and extended attributes and is chowned
# like an in-place write; in place for atomic=false, a hard-linked file,
# a symlink.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/lib.sh

id user >/dev/null 2>&1 || useradd -m -s /bin/bash user >/dev/null 2>&1
D=$(mktemp -d /tmp/envd-atomic-it.XXXXXX)
REG=$(mktemp -d /tmp/envd-atomic-reg.XXXXXX)
CURL_PID=""
cleanup_atomic() {
	[ -n "$CURL_PID" ] && kill "$CURL_PID" 2>/dev/null
	rm -rf "$D" "$REG"
	_t_cleanup
}
on_exit cleanup_atomic
chmod 755 "$D"
enc() { "$PY" -c 'import sys,urllib.parse;print(urllib.parse.quote(sys.argv[1],safe=""))' "$1"; }
temps() { find "$D" -name '.envd-upload.*' | wc -l; }
# until_ok cmd...: poll until the command succeeds (HANG_S bound)
until_ok() {
	local deadline=$((SECONDS + HANG_S))
	while [ "$SECONDS" -lt "$deadline" ]; do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.05
	done
	return 1
}
temp_growing() { [ -n "$(find "$D" -name '.envd-upload.*' -size +1k)" ]; }
no_temps() { [ "$(temps)" -eq 0 ]; }
# The temporaries registered: symlink entries `<pid>.<hex>`, and whole
# records of the slot files `slots.<pid>.<hex>` (docs/crash.md).
reg_count() {
	"$PY" - "$REG" <<'PYEOF'
import os, struct, sys
d, n = sys.argv[1], 0
for name in os.listdir(d):
    p = os.path.join(d, name)
    if name[:1].isdigit() and os.path.islink(p):
        n += 1
    elif name.startswith('slots.') and os.path.isfile(p):
        data = open(p, 'rb').read()
        for off in range(0, len(data), 512):
            rec = data[off:off + 512]
            if len(rec) < 16:
                continue
            magic, ln, want = struct.unpack('=IIQ', rec[:16])
            path = rec[16:16 + ln]
            if magic != 0x31535545 or ln == 0 or len(path) != ln:
                continue
            h = 0xcbf29ce484222325 ^ ln
            for b in path:
                h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
            n += h == want
print(n)
PYEOF
}
registered() { [ "$(reg_count)" -gt 0 ]; }
reg_empty() { [ "$(reg_count)" -eq 0 ]; }

head -c 2700000 /dev/urandom >"$D/big.src"
head -c 1800000 /dev/urandom >"$D/old.bin"
OLD_SUM=$(sha256sum <"$D/old.bin")

envd_start -upload-registry "$REG" || exit 1
U="$ENVD_URL/files"

# slow_upload FILE TARGET: a raw upload at 256 KB/s in the background
slow_upload() {
	curl -s -o /dev/null --limit-rate 256k -X POST -H 'Content-Type: application/octet-stream' \
		--data-binary @"$1" "$U?path=$(enc "$2")" &
	CURL_PID=$!
}

# --- the client goes away mid-upload ---
cp "$D/old.bin" "$D/t1.bin"
slow_upload "$D/big.src" "$D/t1.bin"
check "cut upload: the temporary file grows beside the target" until_ok temp_growing
check "cut upload: it is registered" until_ok registered
kill "$CURL_PID"
wait "$CURL_PID" 2>/dev/null
CURL_PID=""
check "cut upload: the temporary file is removed" until_ok no_temps
expect_eq "cut upload: the previous content is intact" "$OLD_SUM" "$(sha256sum <"$D/t1.bin")"
check "cut upload: the registry entry is gone" until_ok reg_empty

# --- envd is SIGKILLed mid-upload ---
cp "$D/old.bin" "$D/t2.bin"
slow_upload "$D/big.src" "$D/t2.bin"
check "killed envd: the temporary file grows" until_ok temp_growing
in_slot() { compgen -G "$REG/slots.$ENVD_PID.*" >/dev/null && [ "$(reg_count)" -eq 1 ] && ! compgen -G "$REG/[0-9]*" >/dev/null; }
check "killed envd: the temporary is a record of its slot file" in_slot
kill -9 "$ENVD_PID"
wait "$ENVD_PID" 2>/dev/null
wait "$CURL_PID" 2>/dev/null
CURL_PID=""
expect_eq "killed envd: the previous content is intact" "$OLD_SUM" "$(sha256sum <"$D/t2.bin")"
expect_eq "killed envd: its temporary file stays until the next start" "1" "$(temps)"
envd_start -upload-registry "$REG" || exit 1
U="$ENVD_URL/files"
check "next envd removes the temporary file" until_ok no_temps
check "next envd empties the registry" until_ok reg_empty
expect_eq "next envd: the target is still intact" "$OLD_SUM" "$(sha256sum <"$D/t2.bin")"

# A leftover of an envd that still runs is not touched; an entry naming a
# file that is not an upload's is dropped and the file kept.
touch "$D/.envd-upload.r0123456789abcdef" "$D/keep.me"
ln -s "$D/.envd-upload.r0123456789abcdef" "$REG/$ENVD_PID.0123456789abcdef"
true &
DEAD=$!
wait "$DEAD"
ln -s "$D/keep.me" "$REG/$DEAD.0123456789abcdef"
LIVE=$ENVD_PID
envd_start -upload-registry "$REG" || exit 1
U="$ENVD_URL/files"
check "a planted entry of a gone process is dropped" until_ok test ! -L "$REG/$DEAD.0123456789abcdef"
check "... and the file it names kept" test -e "$D/keep.me"
check "a live envd's temporary file is left alone" test -e "$D/.envd-upload.r0123456789abcdef"
check "... and its entry" test -L "$REG/$LIVE.0123456789abcdef"
rm -f "$D/.envd-upload.r0123456789abcdef" "$REG/$LIVE.0123456789abcdef"

# --- a complete upload keeps mode and attributes ---
printf 'old' >"$D/m.txt"
chmod 0640 "$D/m.txt"
setfattr -n user.custom -v kept "$D/m.txt"
ino=$(stat -c %i "$D/m.txt")
expect_eq "replace: 200" "200" "$(curl -s -o /dev/null -w '%{http_code}' -X POST \
	-H 'Content-Type: application/octet-stream' -H 'X-Metadata-Owner: alice' --data-binary 'new' \
	"$U?path=$(enc "$D/m.txt")&username=user")"
expect_eq "replace: content" "new" "$(cat "$D/m.txt")"
check "replace: a new inode (renamed over)" test "$(stat -c %i "$D/m.txt")" != "$ino"
expect_eq "replace: mode kept" "640" "$(stat -c %a "$D/m.txt")"
expect_eq "replace: chowned to the user, as in place" "user:user" "$(stat -c %U:%G "$D/m.txt")"
expect_eq "replace: extended attribute kept" "kept" "$(getfattr --only-values -n user.custom "$D/m.txt" 2>/dev/null)"
expect_eq "replace: metadata set" "alice" "$(getfattr --only-values -n user.e2b.owner "$D/m.txt" 2>/dev/null)"
check "replace: no temporary file" no_temps

# multipart goes the same way
printf 'old' >"$D/mp.txt"
ino=$(stat -c %i "$D/mp.txt")
printf 'multi' >"$D/mp.src"
expect_eq "multipart replace: 200" "200" "$(curl -s -o /dev/null -w '%{http_code}' \
	-F "file=@$D/mp.src;filename=mp.txt" "$U?path=$(enc "$D/mp.txt")")"
expect_eq "multipart replace: content" "multi" "$(cat "$D/mp.txt")"
check "multipart replace: a new inode" test "$(stat -c %i "$D/mp.txt")" != "$ino"

# --- in place where rename cannot stand for the write ---
printf 'old' >"$D/p.txt"
ino=$(stat -c %i "$D/p.txt")
curl -s -o /dev/null -X POST -H 'Content-Type: application/octet-stream' --data-binary 'inplace' \
	"$U?path=$(enc "$D/p.txt")&atomic=false"
expect_eq "atomic=false: content" "inplace" "$(cat "$D/p.txt")"
expect_eq "atomic=false: same inode" "$ino" "$(stat -c %i "$D/p.txt")"

printf 'old' >"$D/h.txt"
ln "$D/h.txt" "$D/h2.txt"
curl -s -o /dev/null -X POST -H 'Content-Type: application/octet-stream' --data-binary 'linked' \
	"$U?path=$(enc "$D/h.txt")"
expect_eq "hard-linked target: written in place (the other name sees it)" "linked" "$(cat "$D/h2.txt")"

printf 'old' >"$D/real.txt"
ln -s real.txt "$D/sym.txt"
curl -s -o /dev/null -X POST -H 'Content-Type: application/octet-stream' --data-binary 'via link' \
	"$U?path=$(enc "$D/sym.txt")"
check "symlink target: still a symlink" test -L "$D/sym.txt"
expect_eq "symlink target: the file behind it written" "via link" "$(cat "$D/real.txt")"

expect_eq "new file: 200" "200" "$(curl -s -o /dev/null -w '%{http_code}' -X POST \
	-H 'Content-Type: application/octet-stream' --data-binary 'fresh' "$U?path=$(enc "$D/sub/new.txt")")"
expect_eq "new file: content" "fresh" "$(cat "$D/sub/new.txt")"
check "no temporary file at the end" no_temps

finish
