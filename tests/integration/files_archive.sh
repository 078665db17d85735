#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Directory archives over /files: GET ?archive=tar|tgz|zip read back by tar,
# gzip, unzip and Python; POST ?extract= of archives made by those tools,
# trees compared; hostile archives refused with the target untouched.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/lib.sh

PY=/usr/bin/python3
id user >/dev/null 2>&1 || useradd -m -s /bin/bash user >/dev/null 2>&1
envd_start || exit 1
MAIN_URL=$ENVD_URL
MAIN_PID=$ENVD_PID
D=$(mktemp -d /var/tmp/envd-archive.XXXXXX)
MNT=""
MNT_MANY=""
cleanup_archive() {
	[ -n "$MNT" ] && umount "$MNT" 2>/dev/null
	[ -n "$MNT_MANY" ] && umount "$MNT_MANY" 2>/dev/null
	rm -rf "$D"
	_t_cleanup
}
on_exit cleanup_archive
U="$ENVD_URL/files"
enc() { $PY -c 'import sys,urllib.parse;print(urllib.parse.quote(sys.argv[1],safe=""))' "$1"; }
status() { local u=$1; shift; curl -s -o /dev/null -w '%{http_code}' "$@" "$u"; }

# treecmp A B [nomtime]: same names, types, contents, modes, symlink targets
# (and file mtimes to the second unless told not to).
treecmp() {
	$PY - "$@" <<'PY'
import os, stat, sys
a, b = sys.argv[1], sys.argv[2]
mt = len(sys.argv) < 4
def walk(root):
    out = {}
    for dp, dns, fns in os.walk(root):
        for n in dns + fns:
            p = os.path.join(dp, n)
            st = os.lstat(p)
            rel = os.path.relpath(p, root)
            m = stat.S_IMODE(st.st_mode)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("l", os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("d", m)
            elif stat.S_ISREG(st.st_mode):
                out[rel] = ("f", m, open(p, "rb").read(), int(st.st_mtime) if mt else 0)
    return out
A, B = walk(a), walk(b)
bad = [k for k in sorted(set(A) | set(B)) if A.get(k) != B.get(k)]
for k in bad[:5]:
    print("differs:", k, str(A.get(k))[:80], str(B.get(k))[:80], file=sys.stderr)
sys.exit(1 if bad else 0)
PY
}
# snapshot DIR: a listing that changes if anything under DIR does
snapshot() { (cd "$1" && find . -printf '%p %y %m %s %T@ %l\n' | sort | sha256sum); }
leftovers() { ls -a "$(dirname "$1")" | grep -c 'e2b-extract' || true; }

# --- a tree with the awkward cases ---
S=$D/src
mkdir -p "$S/sub/deeper/deepest" "$S/empty" "$S/ro"
printf 'hello\n' >"$S/a.txt"
printf 'x%.0s' $(seq 1 1000) >"$S/sub/thousand.txt"
head -c 300000 /dev/urandom >"$S/sub/big.bin"
head -c 70000 /dev/urandom >"$S/sub/deeper/mid.bin"
: >"$S/empty.txt"
printf '#!/bin/sh\necho hi\n' >"$S/run.sh" && chmod 755 "$S/run.sh"
printf 'secret\n' >"$S/private" && chmod 600 "$S/private"
printf 'space\n' >"$S/with space.txt"
printf 'utf\n' >"$S/héllo-ünïcode.txt"
long=$(printf 'n%.0s' $(seq 1 180))
printf 'long\n' >"$S/sub/deeper/$long.txt"
ln -s ../a.txt "$S/sub/rel-link"
ln -s /nonexistent/target "$S/dangling"
ln -s sub "$S/dirlink"
chmod 555 "$S/ro"
mkfifo "$S/fifo"
touch -d '2020-02-03 04:05:06' "$S/a.txt" "$S/sub/big.bin"
# reference copy without the FIFO, which archives skip
REF=$D/ref
mkdir "$REF" && (cd "$S" && tar cf - --exclude ./fifo .) | (cd "$REF" && tar xpf -)
check "reference tree built" test -f "$REF/sub/big.bin"

# --- GET ?archive= ---
hdrs=$(curl -s -D - -o "$D/t.tar" "$U?path=$(enc "$S")&archive=tar")
expect_match "tar: 200" "HTTP/1.1 200" "$hdrs"
expect_match "tar: content type" "[Cc]ontent-[Tt]ype: application/x-tar" "$hdrs"
expect_match "tar: attachment with DIR's name" 'attachment; filename="src.tar"' "$hdrs"
check "tar: tar -t reads it" tar -tf "$D/t.tar"
mkdir "$D/x1" && tar -xpf "$D/t.tar" -C "$D/x1"
check "tar: extracted by tar equals the tree" treecmp "$REF" "$D/x1"
check "tar: no FIFO in the archive" bash -c "! tar -tf '$D/t.tar' | grep -qx fifo"
check "tar: names are relative" bash -c "! tar -tf '$D/t.tar' | grep -q '^/'"
check "tar: Python tarfile reads it (long name, symlink, owner names)" $PY - "$D/t.tar" "$long" <<'PY'
import sys, tarfile
t = tarfile.open(sys.argv[1])
m = {x.name.rstrip("/"): x for x in t.getmembers()}
assert "sub/deeper/" + sys.argv[2] + ".txt" in m, list(m)[:5]
assert m["sub/rel-link"].issym() and m["sub/rel-link"].linkname == "../a.txt"
assert m["a.txt"].uname == "root" and m["a.txt"].mtime == m["a.txt"].mtime // 1
assert m["run.sh"].mode & 0o777 == 0o755
assert t.extractfile("sub/big.bin").read() == open(sys.argv[1].rsplit("/", 1)[0] + "/src/sub/big.bin", "rb").read()
PY

curl -s -o "$D/t.tgz" "$U?path=$(enc "$S")&archive=tgz"
check "tgz: gzip -t" gzip -t "$D/t.tgz"
mkdir "$D/x2" && tar -xzpf "$D/t.tgz" -C "$D/x2"
check "tgz: extracted by tar equals the tree" treecmp "$REF" "$D/x2"
check "tgz: Python tarfile reads it" $PY -c "import tarfile,sys; assert len(tarfile.open(sys.argv[1], 'r:gz').getnames()) > 10" "$D/t.tgz"

zh=$(curl -s -D - -o "$D/t.zip" "$U?path=$(enc "$S")&archive=zip")
expect_match "zip: attachment" 'filename="src.zip"' "$zh"
check "zip: unzip -t" unzip -tq "$D/t.zip"
check "zip: Python zipfile testzip" $PY -c "import zipfile,sys; z=zipfile.ZipFile(sys.argv[1]); assert z.testzip() is None; assert 'sub/big.bin' in z.namelist()" "$D/t.zip"
mkdir "$D/x3" && (cd "$D/x3" && unzip -q "$D/t.zip")
check "zip: extracted by unzip equals the tree" treecmp "$REF" "$D/x3"

# HTTP/2 (no sendfile: the copying path) gives the same bytes as HTTP/1.1
curl -s --http2-prior-knowledge -o "$D/t2.tar" "$U?path=$(enc "$S")&archive=tar"
mkdir "$D/x4" && tar -xpf "$D/t2.tar" -C "$D/x4"
check "tar over HTTP/2 extracts to the same tree" treecmp "$REF" "$D/x4"

expect_eq "directory without archive= stays 400" "400" "$(status "$U?path=$(enc "$S")")"
expect_eq "unknown format 400" "400" "$(status "$U?path=$(enc "$S")&archive=rar")"
expect_eq "archive of a file 400" "400" "$(status "$U?path=$(enc "$S/a.txt")&archive=tar")"
expect_eq "archive of a missing dir 404" "404" "$(status "$U?path=$(enc "$D/nope")&archive=tar")"

# A file that grows while the archive is read: the header's size wins.
mkdir "$D/grow"
head -c $((8 * 1024 * 1024)) /dev/zero >"$D/grow/g.bin"
(for _ in $(seq 1 200); do head -c 65536 /dev/zero >>"$D/grow/g.bin"; done) &
gpid=$!
curl -s -o "$D/g.tar" "$U?path=$(enc "$D/grow")&archive=tar"
wait $gpid
check "growing file: archive still valid" tar -tf "$D/g.tar"

# Over 8 GiB: a sparse 9 GiB file gets a pax size record (ustar's octal
# field stops at 8 GiB). Only the first headers are read, then the client
# hangs up, which the daemon must take in its stride.
mkdir "$D/huge" && truncate -s 9G "$D/huge/h.bin"
curl -s "$U?path=$(enc "$D/huge")&archive=tar" 2>/dev/null | head -c 4096 >"$D/huge.head"
check "9 GiB file: pax size record" grep -qa "size=9663676416" "$D/huge.head"
curl -s "$U?path=$(enc "$D/huge")&archive=zip" 2>/dev/null | head -c 4096 >"$D/huge.zhead"
check "9 GiB file: zip64 local header" $PY - "$D/huge.zhead" <<'PY'
import struct, sys
b = open(sys.argv[1], "rb").read()
sig, need, _, _, _, _, _, csize, usize, nlen, xlen = struct.unpack("<IHHHHHIIIHH", b[:30])
assert sig == 0x04034B50 and need >= 45 and usize == 0xFFFFFFFF, (hex(sig), need, usize)
x = b[30 + nlen:30 + nlen + xlen]
while x:
    hid, hl = struct.unpack("<HH", x[:4])
    if hid == 1:
        assert struct.unpack("<Q", x[4:12])[0] == 9 << 30
        break
    x = x[4 + hl:]
else:
    raise SystemExit("no zip64 extra field")
PY
rm -rf "$D/huge"

# --- POST ?extract= of archives made by the tools ---
post() { # post URL-args file [curl args]: prints status, body in $D/resp
	local q=$1 f=$2; shift 2
	curl -s -o "$D/resp" -w '%{http_code}' -H 'Content-Type: application/octet-stream' --data-binary "@$f" "$@" "$U?$q"
}
(cd "$REF" && tar cf "$D/up.tar" .)
expect_eq "extract tar 200" "200" "$(post "path=$(enc "$D/e1")&extract=tar" "$D/up.tar")"
check "extract tar: tree equals" treecmp "$REF" "$D/e1"
check "extract tar: JSON lists entries with type and size" $PY -c "
import json,sys; l=json.load(open(sys.argv[1])); d={e['path']:e for e in l}
e=d[sys.argv[2]+'/sub/big.bin']; assert e['type']=='file' and e['size']==300000 and e['name']=='big.bin'
assert d[sys.argv[2]+'/sub/rel-link']['type']=='symlink' and d[sys.argv[2]+'/sub']['type']=='dir'" "$D/resp" "$D/e1"
expect_eq "no temporary directory left" "0" "$(leftovers "$D/e1")"

expect_eq "extract tar over HTTP/2 200" "200" \
	"$(post "path=$(enc "$D/e1h2")&extract=tar" "$D/up.tar" --http2-prior-knowledge)"
check "extract over HTTP/2: tree equals" treecmp "$REF" "$D/e1h2"
# DIR a symbolic link (root's): extracted beside and into its target
mkdir "$D/real-e" && ln -s real-e "$D/link-e" && ln -s "$D/real-new" "$D/link-new"
expect_eq "extract into a link to a directory: 200" "200" "$(post "path=$(enc "$D/link-e")&extract=tar" "$D/up.tar")"
check "... the tree is in the link's target" treecmp "$REF" "$D/real-e"
check "... the link is still a link" test -L "$D/link-e"
expect_eq "extract into a link to nothing yet: 200" "200" "$(post "path=$(enc "$D/link-new")&extract=tar" "$D/up.tar")"
check "... the target is made with the tree" treecmp "$REF" "$D/real-new"
expect_eq "... no temporary directory left" "0" "$(leftovers "$D/real-new")"
(cd "$REF" && tar czf "$D/up.tgz" .)
expect_eq "extract tgz 200" "200" "$(post "path=$(enc "$D/e2")&extract=tgz" "$D/up.tgz")"
check "extract tgz: tree equals" treecmp "$REF" "$D/e2"
gzip -c "$D/up.tar" >"$D/up.tar.gz"
expect_eq "extract tar sent with Content-Encoding: gzip" "200" \
	"$(post "path=$(enc "$D/e3")&extract=tar" "$D/up.tar.gz" -H 'Content-Encoding: gzip')"
check "gzip-encoded tar: tree equals" treecmp "$REF" "$D/e3"

(cd "$REF" && zip -qry "$D/up.zip" .)
expect_eq "extract zip (zip -y) 200" "200" "$(post "path=$(enc "$D/e4")&extract=zip" "$D/up.zip")"
check "extract zip: tree equals (symlinks kept)" treecmp "$REF" "$D/e4" nomtime
$PY - "$REF" "$D/pyz.zip" <<'PY'
import os, stat, sys, zipfile
root, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
    for dp, dns, fns in os.walk(root):
        for n in sorted(dns + fns):
            p = os.path.join(dp, n); rel = os.path.relpath(p, root); st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                zi = zipfile.ZipInfo(rel); zi.create_system = 3
                zi.external_attr = (st.st_mode & 0xFFFF) << 16
                z.writestr(zi, os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                z.write(p, rel)
            else:
                z.write(p, rel)
PY
expect_eq "extract zip made by Python 200" "200" "$(post "path=$(enc "$D/e5")&extract=zip" "$D/pyz.zip")"
check "Python zip: tree equals" treecmp "$REF" "$D/e5" nomtime
$PY -c "
import tarfile,sys
with tarfile.open(sys.argv[2], 'w', format=tarfile.PAX_FORMAT) as t: t.add(sys.argv[1], arcname='.')" "$REF" "$D/py.tar"
expect_eq "extract tar made by Python 200" "200" "$(post "path=$(enc "$D/e6")&extract=tar" "$D/py.tar")"
check "Python tar: tree equals" treecmp "$REF" "$D/e6"

# Our own archive goes back in unchanged.
expect_eq "extract envd's own tgz 200" "200" "$(post "path=$(enc "$D/e7")&extract=tgz" "$D/t.tgz")"
check "round trip: tree equals" treecmp "$REF" "$D/e7"

# As a user: owned by them, setuid dropped.
mkdir -p "$D/suid" && printf 'x' >"$D/suid/s" && chmod 4755 "$D/suid/s" && (cd "$D/suid" && tar cf "$D/suid.tar" s)
chmod 777 "$D"
expect_eq "extract as user 200" "200" "$(post "path=$(enc "$D/e8")&extract=tar&username=user" "$D/suid.tar")"
expect_eq "extract as user: owner" "user" "$(stat -c %U "$D/e8/s")"
expect_eq "extract as user: setuid dropped" "755" "$(stat -c %a "$D/e8/s")"
expect_eq "extract as root keeps setuid" "200" "$(post "path=$(enc "$D/e9")&extract=tar" "$D/suid.tar")"
expect_eq "root: setuid kept" "4755" "$(stat -c %a "$D/e9/s")"

# Merge into an existing directory: other names stay, same names are replaced.
mkdir -p "$D/m/sub" && printf 'keep\n' >"$D/m/keep.txt" && printf 'old\n' >"$D/m/a.txt" && printf 'k2\n' >"$D/m/sub/k2"
expect_eq "merge 200" "200" "$(post "path=$(enc "$D/m")&extract=tar" "$D/up.tar")"
expect_eq "merge: untouched file kept" "keep" "$(cat "$D/m/keep.txt")"
expect_eq "merge: nested untouched file kept" "k2" "$(cat "$D/m/sub/k2")"
expect_eq "merge: same-named file replaced" "hello" "$(cat "$D/m/a.txt")"
check "merge: archive's files present" cmp "$REF/sub/big.bin" "$D/m/sub/big.bin"
expect_eq "merge: no temporary directory left" "0" "$(leftovers "$D/m")"

# Type conflicts refuse the whole archive.
mkdir -p "$D/c/a.txt"
snap=$(snapshot "$D/c")
expect_eq "file over an existing directory: 409" "409" "$(post "path=$(enc "$D/c")&extract=tar" "$D/up.tar")"
expect_eq "conflict: target unchanged" "$snap" "$(snapshot "$D/c")"
expect_eq "conflict: no temporary directory left" "0" "$(leftovers "$D/c")"
expect_eq "extract into a file: 400" "400" "$(post "path=$(enc "$S/a.txt")&extract=tar" "$D/up.tar")"
expect_eq "unknown extract format 400" "400" "$(post "path=$(enc "$D/e10")&extract=rar" "$D/up.tar")"

# --- hostile archives ---
H=$D/hostile
mkdir -p "$H" "$D/outside"
$PY - "$H" <<'PY'
import io, sys, tarfile, zipfile
h = sys.argv[1]
def tar(name, members):
    with tarfile.open(f"{h}/{name}", "w", format=tarfile.PAX_FORMAT) as t:
        for m, data in members:
            t.addfile(m, io.BytesIO(data) if data is not None else None)
def f(name, data=b"pwned\n"):
    i = tarfile.TarInfo(name); i.size = len(data); return (i, data)
def link(name, target, kind=tarfile.SYMTYPE):
    i = tarfile.TarInfo(name); i.type = kind; i.linkname = target; return (i, None)
tar("dotdot.tar", [f("ok.txt"), f("../outside/x")])
tar("dotdot2.tar", [f("ok.txt"), f("a/../../outside/x")])
tar("abs.tar", [f("ok.txt"), f("/etc/e2b-archive-test")])
tar("symroot.tar", [link("s", "/"), f("s/etc/e2b-archive-test")])
tar("symout.tar", [link("s", "../outside"), f("s/x")])
tar("hardshadow.tar", [f("ok.txt"), link("h", "/etc/shadow", tarfile.LNKTYPE)])
tar("hardup.tar", [f("ok.txt"), link("h", "../outside/y", tarfile.LNKTYPE)])
tar("hardmissing.tar", [link("h", "nothere", tarfile.LNKTYPE)])
tar("intodir.tar", [f("esc/x")])
# 100 000 empty entries
with tarfile.open(f"{h}/many.tar", "w") as t:
    for i in range(100000):
        t.addfile(tarfile.TarInfo(f"d{i // 1000}/f{i}"), io.BytesIO(b""))
# zip bomb: 2 GiB of zeros in one deflated member (~9 MB at level 1,
# which makes it in a third of level 6's time)
with zipfile.ZipFile(f"{h}/bomb.zip", "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
    with z.open("zeros", "w", force_zip64=True) as w:
        block = bytes(1 << 20)
        for _ in range(2048):
            w.write(block)
PY
(cd "$REF" && tar cf - .) | head -c 200000 >"$H/truncated.tar"
gzip -c "$D/up.tar" | head -c 100000 >"$H/truncated.tgz"

T=$D/target
mkdir -p "$T" && printf 'before\n' >"$T/existing" && ln -s "$D/outside" "$T/esc"
snapT=$(snapshot "$T")
snapO=$(snapshot "$D/outside")
hostile() { # hostile NAME FORMAT EXPECTED-STATUS MESSAGE-REGEX
	local st
	st=$(post "path=$(enc "$T")&extract=$2" "$H/$1")
	expect_eq "$1: refused with $3" "$3" "$st"
	expect_match "$1: message" "$4" "$(cat "$D/resp")"
	expect_eq "$1: target unchanged" "$snapT" "$(snapshot "$T")"
	expect_eq "$1: nothing written outside" "$snapO" "$(snapshot "$D/outside")"
	expect_eq "$1: no temporary directory left" "0" "$(leftovers "$T")"
}
hostile dotdot.tar tar 400 "\.\./outside/x.*'\.\.' component"
hostile dotdot2.tar tar 400 "a/\.\./\.\./outside/x"
hostile abs.tar tar 400 "/etc/e2b-archive-test.*absolute"
check "absolute entry: /etc untouched" test ! -e /etc/e2b-archive-test
hostile symroot.tar tar 400 "s/etc/e2b-archive-test.*symlink 's'"
hostile symout.tar tar 400 "symlink"
hostile hardshadow.tar tar 400 "/etc/shadow"
hostile hardup.tar tar 400 "outside/y"
hostile hardmissing.tar tar 400 "nothere"
hostile intodir.tar tar 400 "esc.*existing symlink"
hostile truncated.tar tar 400 "invalid tar archive"
hostile truncated.tgz tgz 400 "invalid"
hostile bomb.zip zip 413 "expands beyond"

# Limits are flags: a daemon with a low entry limit refuses 100 000 entries.
envd_start -archive-max-entries 5000 || exit 1
U="$ENVD_URL/files"
hostile many.tar tar 413 "more than 5000 entries"
U="$MAIN_URL/files"
ENVD_URL=$MAIN_URL
ENVD_PORT=${MAIN_URL##*:}
# ... and the default limits take them, in bounded memory.
# Into a tmpfs of its own where mounts are allowed: on an ext4 disk that
# has seen many files come and go (a machine that runs this suite often),
# every new inode costs a scan of the recently deleted ones, and 100 000
# creates took over a minute of system time with envd and GNU tar alike.
# What is tested is envd's limits and memory, not the disk.
MANY=$D/manyfs
mkdir -p "$MANY"
mount -t tmpfs -o size=256m,nr_inodes=200k tmpfs "$MANY" 2>/dev/null && MNT_MANY=$MANY
hwm0=$(awk '/VmHWM/ {print $2}' "/proc/$MAIN_PID/status")
expect_eq "100 000 entries within the default limits: 200" "200" "$(post "path=$(enc "$MANY/many")&extract=tar" "$H/many.tar")"
expect_eq "100 000 entries: all there" "100000" "$(find "$MANY/many" -type f | wc -l)"
hwm1=$(awk '/VmHWM/ {print $2}' "/proc/$MAIN_PID/status")
echo "envd peak RSS: ${hwm0} kB before, ${hwm1} kB after extracting 100 000 entries"
case "$ENVD_BIN" in *asan*) ;; *) check "100 000 entries: peak RSS grew < 64 MiB" test $((hwm1 - hwm0)) -lt 65536 ;; esac

# An upload cut off midway leaves nothing behind.
snapT=$(snapshot "$T")
$PY - "$ENVD_PORT" "$T" "$D/up.tar" <<'PY'
import socket, sys, urllib.parse
port, target, f = int(sys.argv[1]), sys.argv[2], sys.argv[3]
data = open(f, "rb").read()
s = socket.create_connection(("127.0.0.1", port))
q = urllib.parse.urlencode({"path": target, "extract": "tar"})
s.sendall(f"POST /files?{q} HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\nContent-Length: {len(data)}\r\n\r\n".encode())
s.sendall(data[: len(data) // 2])
s.close()
PY
# the daemon must have seen the disconnect: a later request on a new
# connection is served after it
status "$ENVD_URL/health" >/dev/null
expect_eq "interrupted upload: target unchanged" "$snapT" "$(snapshot "$T")"
expect_eq "interrupted upload: no temporary directory" "0" "$(leftovers "$T")"

# Out of space: 507 and the temporary directory removed.
MNT=$D/small
mkdir -p "$MNT"
if mount -t tmpfs -o size=2m tmpfs "$MNT" 2>/dev/null; then
	mkdir -p "$D/z" && head -c $((4 * 1024 * 1024)) /dev/zero >"$D/z/zeros" && (cd "$D/z" && tar czf "$D/zeros.tgz" .)
	expect_eq "ENOSPC: 507" "507" "$(post "path=$(enc "$MNT/t")&extract=tgz" "$D/zeros.tgz")"
	expect_eq "ENOSPC: no temporary directory" "0" "$(ls -a "$MNT" | grep -c e2b-extract || true)"
	check "ENOSPC: target not created" test ! -e "$MNT/t"
	# DIR itself a mount point: the temporary directory goes inside it
	expect_eq "extract into a mount point 200" "200" "$(post "path=$(enc "$MNT")&extract=tar" "$D/up.tar")"
	check "mount point: tree equals" treecmp "$REF" "$MNT"
	expect_eq "mount point: no temporary directory inside" "0" "$(ls -a "$MNT" | grep -c e2b-extract || true)"
	umount "$MNT" && MNT=""
else
	echo "# tmpfs mount not permitted here: ENOSPC case not run"
fi

# Signed URLs: a browser link from downloadUrl fetches the zip.
curl -s -o /dev/null -X POST "$ENVD_URL/init" -H 'Content-Type: application/json' -d '{"accessToken":"tok-arch"}'
sig=$($PY - "$S" <<'PY'
import base64, hashlib, sys
raw = f"{sys.argv[1]}:read::tok-arch"
print("v1_" + base64.b64encode(hashlib.sha256(raw.encode()).digest()).decode().rstrip("="))
PY
)
expect_eq "archive without signature: 401" "401" "$(status "$U?path=$(enc "$S")&archive=zip")"
curl -s -o "$D/signed.zip" "$U?path=$(enc "$S")&archive=zip&signature=$(enc "$sig")"
check "signed archive URL: a valid zip" unzip -tq "$D/signed.zip"
expect_eq "extract without signature: 401" "401" "$(post "path=$(enc "$D/e11")&extract=tar" "$D/up.tar")"

envd_alive "$MAIN_PID" && pass "envd still alive" || fail "envd still alive"
finish
