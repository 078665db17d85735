#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# /files and /files/compose with curl: Range, conditional requests, 406,
# 507 on a small tmpfs, bad multipart, path handling, gzip both ways,
# atomic uploads, failed-upload cleanup, signatures.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/lib.sh

id user >/dev/null 2>&1 || useradd -m -s /bin/bash user >/dev/null 2>&1
envd_start -default-user user || exit 1
D=$(mktemp -d /tmp/envd-files-it.XXXXXX)
MNT=""
cleanup_files() {
	[ -n "$MNT" ] && umount "$MNT" 2>/dev/null
	rm -rf "$D"
	_t_cleanup
}
on_exit cleanup_files
U="$ENVD_URL/files"
enc() { "$PY" -c 'import sys,urllib.parse;print(urllib.parse.quote(sys.argv[1],safe=""))' "$1"; }
# status URL [curl args...]: HTTP status only
status() { local u=$1; shift; curl -s -o /dev/null -w '%{http_code}' "$@" "$u"; }
body() { local u=$1; shift; curl -s "$@" "$u"; }

printf 'hello range world' >"$D/r.txt"

# --- downloads ---
expect_eq "download identity" "hello range world" "$(body "$U?path=$(enc "$D/r.txt")")"
expect_eq "range 206 body" "range" "$(body "$U?path=$(enc "$D/r.txt")" -H 'Range: bytes=6-10')"
h=$(curl -s -D - -o /dev/null -H 'Range: bytes=6-10' "$U?path=$(enc "$D/r.txt")" | tr -d '\r')
expect_match "range Content-Range" "Content-Range: bytes 6-10/17" "$h"
expect_match "range status 206" "^HTTP/1.1 206" "$h"
expect_eq "suffix range" "world" "$(body "$U?path=$(enc "$D/r.txt")" -H 'Range: bytes=-5')"
h=$(curl -s -D - -o "$D/mr.out" -H 'Range: bytes=0-1,6-10' "$U?path=$(enc "$D/r.txt")" | tr -d '\r')
expect_match "multi-range 206 multipart/byteranges" "Content-Type: multipart/byteranges; boundary=" "$h"
b=$(sed -n 's/^Content-Type: multipart\/byteranges; boundary=//p' <<<"$h")
expect_eq "multi-range body" "--$b|Content-Range: bytes 0-1/17|Content-Type: text/plain; charset=utf-8||he|--$b|Content-Range: bytes 6-10/17|Content-Type: text/plain; charset=utf-8||range|--$b--|" \
	"$(tr -d '\r' <"$D/mr.out" | tr '\n' '|')"
expect_eq "overlapping ranges larger than the file -> 200" "200" \
	"$(status "$U?path=$(enc "$D/r.txt")" -H 'Range: bytes=0-15,1-16')"
expect_eq "unsatisfiable range 416" "416" "$(status "$U?path=$(enc "$D/r.txt")" -H 'Range: bytes=100-')"
h=$(curl -s -D - -o /dev/null -H 'Range: bytes=100-' "$U?path=$(enc "$D/r.txt")" | tr -d '\r')
expect_match "416 Content-Range" "Content-Range: bytes \*/17" "$h"
lm=$(curl -s -D - -o /dev/null "$U?path=$(enc "$D/r.txt")" | tr -d '\r' | sed -n 's/^Last-Modified: //p')
expect_eq "If-Modified-Since -> 304" "304" "$(status "$U?path=$(enc "$D/r.txt")" -H "If-Modified-Since: $lm")"
expect_eq "If-Unmodified-Since old -> 412" "412" \
	"$(status "$U?path=$(enc "$D/r.txt")" -H 'If-Unmodified-Since: Sun, 06 Nov 1994 08:49:37 GMT')"
expect_eq "406 identity;q=0" "406" "$(status "$U?path=$(enc "$D/r.txt")" -H 'Accept-Encoding: identity;q=0')"
expect_match "406 message" "no acceptable encoding found, supported: \[gzip\]" \
	"$(body "$U?path=$(enc "$D/r.txt")" -H 'Accept-Encoding: *;q=0')"
expect_eq "406 range with gzip-only" "406" \
	"$(status "$U?path=$(enc "$D/r.txt")" -H 'Accept-Encoding: gzip, identity;q=0' -H 'Range: bytes=0-1')"
h=$(curl -s -D - -o /dev/null -H 'Accept-Encoding: gzip, identity;q=0' "$U?path=$(enc "$D/r.txt")" | tr -d '\r')
expect_match "gzip Content-Encoding" "Content-Encoding: gzip" "$h"
expect_match "gzip Vary" "Vary: Accept-Encoding" "$h"
expect_match "text type by extension" "Content-Type: text/plain; charset=utf-8" "$h"
expect_eq "gzip body" "hello range world" "$(body "$U?path=$(enc "$D/r.txt")" -H 'Accept-Encoding: gzip, identity;q=0' --compressed)"
printf 'x' >"$D/my file.txt"
h=$(curl -s -D - -o /dev/null "$U?path=$(enc "$D/my file.txt")" | tr -d '\r')
expect_match "content-disposition quoted" 'Content-Disposition: inline; filename="my file.txt"' "$h"
: >"$D/empty"
h=$(curl -s -D - -o "$D/empty.out" "$U?path=$(enc "$D/empty")" | tr -d '\r')
expect_match "empty file Content-Length 0" "Content-Length: 0" "$h"
check "empty file body" test ! -s "$D/empty.out"
expect_eq "range on an empty file is ignored" "200" "$(status "$U?path=$(enc "$D/empty")" -H 'Range: bytes=0-10')"
expect_eq "missing file 404" "404" "$(status "$U?path=$(enc "$D/nope")")"
expect_match "404 message" "path '$D/nope' does not exist" "$(body "$U?path=$(enc "$D/nope")")"
expect_eq "directory 400" "400" "$(status "$U?path=$(enc "$D")")"
expect_match "directory message" "path '$D' is a directory" "$(body "$U?path=$(enc "$D")")"
expect_eq "archive= of a file 400" "400" "$(status "$U?path=$(enc "$D/r.txt")&archive=tar")"
expect_match "archive= of a file message" "path '$D/r.txt' is not a directory" \
	"$(body "$U?path=$(enc "$D/r.txt")&archive=tar")"
# A path that is there but cannot be opened (a socket: ENXIO) is told
# apart from one that is not there.
/usr/bin/python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$D/sock"
expect_eq "socket 500" "500" "$(status "$U?path=$(enc "$D/sock")")"
expect_match "socket message" "error opening file '$D/sock': open $D/sock: no such device or address" \
	"$(body "$U?path=$(enc "$D/sock")")"
expect_eq "unknown user 401" "401" "$(status "$U?path=$(enc "$D/r.txt")&username=nobody-here")"
expect_match "unknown user message" "error looking up user 'nobody-here': user: unknown user nobody-here" \
	"$(body "$U?path=$(enc "$D/r.txt")&username=nobody-here")"
expect_eq "empty username 401" "401" "$(status "$U?path=$(enc "$D/r.txt")&username=")"
expect_eq "~other 400" "400" "$(status "$U?path=$(enc "~root/x")")"

# --- path handling: .. resolves lexically (relative) or reaches syscalls as-is (absolute) ---
mkdir -p /home/user/it-sub-$$
printf 'inside' >/home/user/it-sub-$$/f.txt
expect_eq "relative .. under home" "inside" "$(body "$U?path=$(enc "it-sub-$$/../it-sub-$$/f.txt")")"
expect_eq "relative escape above home is cleaned to /" "hello range world" \
	"$(body "$U?path=$(enc "../../..$D/r.txt")")"
mkdir -p "$D/sub"
expect_eq "absolute .. reaches the kernel as-is" "hello range world" \
	"$(body "$U?path=$(enc "$D/sub/../r.txt")")"
expect_eq "absolute .. through a missing dir is 404" "404" "$(status "$U?path=$(enc "$D/missing/../r.txt")")"
rm -rf /home/user/it-sub-$$

# --- uploads ---
r=$(curl -s -X POST "$U?path=$(enc "$D/up/raw.bin")" -H 'Content-Type: application/octet-stream' --data-binary 'raw body')
expect_eq "raw upload response" "[{\"name\":\"raw.bin\",\"type\":\"file\",\"path\":\"$D/up/raw.bin\"}]" "$r"
expect_eq "raw upload content" "raw body" "$(cat "$D/up/raw.bin")"
expect_eq "raw upload owner" "user" "$(stat -c %U "$D/up/raw.bin")"
expect_eq "raw upload parent owner" "user" "$(stat -c %U "$D/up")"
expect_eq "raw without path 400" "400" \
	"$(status "$U" -X POST -H 'Content-Type: application/octet-stream' --data-binary x)"
expect_eq "unsupported content type 400" "400" "$(status "$U?path=x" -X POST -H 'Content-Type: text/plain' --data-binary x)"
expect_eq "unsupported content-encoding 400" "400" \
	"$(status "$U?path=$(enc "$D/x")" -X POST -H 'Content-Type: application/octet-stream' -H 'Content-Encoding: br' --data-binary x)"
printf 'gzip upload body' | gzip >"$D/body.gz"
expect_eq "gzip upload 200" "200" \
	"$(status "$U?path=$(enc "$D/up/gz.txt")" -X POST -H 'Content-Type: application/octet-stream' -H 'Content-Encoding: gzip' --data-binary @"$D/body.gz")"
expect_eq "gzip upload content" "gzip upload body" "$(cat "$D/up/gz.txt")"
(printf 'part one,'; printf ' part two' ) | gzip >"$D/m1.gz"; printf ' and three' | gzip >>"$D/m1.gz"
curl -s -o /dev/null -X POST "$U?path=$(enc "$D/up/multi.txt")" -H 'Content-Type: application/octet-stream' \
	-H 'Content-Encoding: gzip' --data-binary @"$D/m1.gz"
expect_eq "multi-member gzip upload" "part one, part two and three" "$(cat "$D/up/multi.txt")"
expect_eq "bad gzip header 400" "400" \
	"$(status "$U?path=$(enc "$D/up/badgz.txt")" -X POST -H 'Content-Type: application/octet-stream' -H 'Content-Encoding: gzip' --data-binary 'not gzip at all')"
check "bad gzip leaves no file" test ! -e "$D/up/badgz.txt"
head -c 100000 /dev/urandom | gzip | head -c 5000 >"$D/trunc.gz"
expect_eq "truncated gzip 500" "500" \
	"$(status "$U?path=$(enc "$D/up/trunc.txt")" -X POST -H 'Content-Type: application/octet-stream' -H 'Content-Encoding: gzip' --data-binary @"$D/trunc.gz")"
check "truncated gzip: new file removed again" test ! -e "$D/up/trunc.txt"
expect_eq "chunked upload" "200" \
	"$(printf 'chunked data' | curl -s -o /dev/null -w '%{http_code}' -X POST -H 'Transfer-Encoding: chunked' -H 'Content-Type: application/octet-stream' --data-binary @- "$U?path=$(enc "$D/up/chunked.txt")")"
expect_eq "chunked content" "chunked data" "$(cat "$D/up/chunked.txt")"

# multipart: filename is the full path, relative names under home, order kept
printf 'AAA' >"$D/a.src"; printf 'BBB' >"$D/b.src"
r=$(curl -s -X POST "$U" -F "file=@$D/a.src;filename=$D/mp/deep/a.txt" -F 'field=ignored' -F "file=@$D/b.src;filename=it-rel-$$/b.txt")
expect_eq "multipart response order" \
	"[{\"name\":\"a.txt\",\"type\":\"file\",\"path\":\"$D/mp/deep/a.txt\"},{\"name\":\"b.txt\",\"type\":\"file\",\"path\":\"/home/user/it-rel-$$/b.txt\"}]" "$r"
expect_eq "multipart file a" "AAA" "$(cat "$D/mp/deep/a.txt")"
expect_eq "multipart file b" "BBB" "$(cat /home/user/it-rel-$$/b.txt)"
rm -rf /home/user/it-rel-$$
r=$(curl -s -X POST "$U?path=$(enc "$D/mp/override.txt")" -F "file=@$D/a.src;filename=ignored.txt")
expect_match "path overrides filename" "\"path\":\"$D/mp/override.txt\"" "$r"
expect_eq "two parts + path -> 400" "400" \
	"$(status "$U?path=$(enc "$D/mp/twice.txt")" -X POST -F "file=@$D/a.src" -F "file=@$D/b.src")"
expect_eq "first part of the pair was written" "AAA" "$(cat "$D/mp/twice.txt")"
expect_eq "multipart without boundary 500" "500" \
	"$(status "$U" -X POST -H 'Content-Type: multipart/form-data' --data-binary 'x')"
expect_eq "multipart/mixed 500" "500" \
	"$(status "$U" -X POST -H 'Content-Type: multipart/mixed; boundary=b' --data-binary 'x')"
expect_eq "truncated multipart 500" "500" \
	"$(status "$U" -X POST -H 'Content-Type: multipart/form-data; boundary=bb' --data-binary $'--bb\r\nContent-Disposition: form-data; name="file"; filename="'"$D"'/mp/cut.txt"\r\n\r\npartial')"
check "truncated multipart: new file removed" test ! -e "$D/mp/cut.txt"
expect_eq "part without filename 400" "400" \
	"$(status "$U" -X POST -H 'Content-Type: multipart/form-data; boundary=bb' --data-binary $'--bb\r\nContent-Disposition: form-data; name="file"\r\n\r\nx\r\n--bb--\r\n')"
expect_eq "zero file parts -> []" "[]" \
	"$(body "$U" -X POST -H 'Content-Type: multipart/form-data; boundary=bb' --data-binary $'--bb\r\nContent-Disposition: form-data; name="other"\r\n\r\nx\r\n--bb--\r\n')"
expect_eq "upload onto a directory 400" "400" \
	"$(status "$U?path=$(enc "$D/mp")" -X POST -H 'Content-Type: application/octet-stream' --data-binary x)"

# metadata headers
r=$(curl -s -X POST "$U?path=$(enc "$D/meta.txt")" -H 'Content-Type: application/octet-stream' -H 'X-Metadata-Color: blue' -H 'x-metadata-SIZE:  big ' --data-binary m)
expect_match "metadata in response" '"metadata":\{"color":"blue","size":"big"\}|"metadata":\{"size":"big","color":"blue"\}' "$r"
expect_eq "invalid metadata 400" "400" \
	"$(status "$U?path=$(enc "$D/meta2.txt")" -X POST -H 'Content-Type: application/octet-stream' -H "X-Metadata-Big: $(head -c 5000 /dev/zero | tr '\0' a)" --data-binary m)"

# atomic replacement: a new inode appears only when complete
printf 'old' >"$D/atomic.txt"
ino=$(stat -c %i "$D/atomic.txt")
expect_eq "atomic upload 200" "200" \
	"$(status "$U?path=$(enc "$D/atomic.txt")&atomic=true" -X POST -H 'Content-Type: application/octet-stream' --data-binary 'new content')"
expect_eq "atomic content" "new content" "$(cat "$D/atomic.txt")"
check "atomic upload replaced the inode" test "$(stat -c %i "$D/atomic.txt")" != "$ino"
check "atomic upload left no temp files" test -z "$(ls -A "$D" | grep envd-upload)"
ino=$(stat -c %i "$D/atomic.txt")
curl -s -o /dev/null -X POST "$U?path=$(enc "$D/atomic.txt")" -H 'Content-Type: application/octet-stream' --data-binary 'replaced'
check "default upload is atomic (a new inode)" test "$(stat -c %i "$D/atomic.txt")" != "$ino"
ino=$(stat -c %i "$D/atomic.txt")
curl -s -o /dev/null -X POST "$U?path=$(enc "$D/atomic.txt")&atomic=false" -H 'Content-Type: application/octet-stream' --data-binary 'in place'
expect_eq "atomic=false keeps the inode" "$ino" "$(stat -c %i "$D/atomic.txt")"
expect_eq "atomic=false content" "in place" "$(cat "$D/atomic.txt")"

# --- a FIFO must not block the daemon (open would wait for a peer) ---
mkfifo "$D/fifo"
expect_eq "GET fifo answers at once" "200" "$(status "$U?path=$(enc "$D/fifo")" -m "$HANG_S")"
expect_eq "POST to fifo without reader fails at once" "500" \
	"$(status "$U?path=$(enc "$D/fifo")" -m "$HANG_S" -X POST -H 'Content-Type: application/octet-stream' --data-binary x)"
expect_eq "envd responsive after fifo requests" "hello range world" "$(body "$U?path=$(enc "$D/r.txt")" -m "$HANG_S")"

# --- 507 on a small tmpfs ---
MNT="$D/small"
mkdir -p "$MNT"
if mount -t tmpfs -o size=512k,nr_inodes=64 tmpfs "$MNT" 2>/dev/null; then
	head -c 2000000 /dev/urandom >"$D/big.bin"
	expect_eq "ENOSPC -> 507" "507" \
		"$(status "$U?path=$(enc "$MNT/big.bin")" -X POST -H 'Content-Type: application/octet-stream' --data-binary @"$D/big.bin")"
	expect_match "507 message" "not enough disk space available" \
		"$(body "$U?path=$(enc "$MNT/big2.bin")" -X POST -H 'Content-Type: application/octet-stream' --data-binary @"$D/big.bin")"
	check "failed upload removed" test ! -e "$MNT/big.bin"
	expect_eq "tmpfs still usable after failure" "200" \
		"$(status "$U?path=$(enc "$MNT/small.txt")" -X POST -H 'Content-Type: application/octet-stream' --data-binary small)"
	expect_eq "multipart ENOSPC -> 507" "507" \
		"$(status "$U" -X POST -F "file=@$D/big.bin;filename=$MNT/mp.bin")"
	umount "$MNT" && MNT=""
else
	echo "note: cannot mount tmpfs here; the 507 checks did not run"
fi

# --- HTTP/2 (h2c prior knowledge): upload with flow control, download ---
if command -v nghttp >/dev/null; then
	head -c 20000000 /dev/urandom >"$D/h2.src"
	r=$(nghttp -d "$D/h2.src" -H 'content-type: application/octet-stream' "$U?path=$(enc "$D/h2.up")")
	expect_match "h2 upload response" "\"path\":\"$D/h2.up\"" "$r"
	expect_eq "h2 upload content" "$(sha256sum <"$D/h2.src")" "$(sha256sum <"$D/h2.up")"
	expect_eq "h2 download" "$(sha256sum <"$D/h2.src")" "$(nghttp "$U?path=$(enc "$D/h2.up")" | sha256sum)"
	expect_eq "h2 range" "range" "$(nghttp -H 'range: bytes=6-10' "$U?path=$(enc "$D/r.txt")")"
	rm -f "$D/h2.src" "$D/h2.up"
else
	echo "note: nghttp not installed; HTTP/2 checks did not run"
fi

# --- compose ---
printf 'one-' >"$D/c1"; printf 'two-' >"$D/c2"; printf 'three' >"$D/c3"
r=$(curl -s -X POST "$U/compose" -H 'Content-Type: application/json' \
	-d "{\"source_paths\":[\"$D/c1\",\"$D/c2\",\"$D/c3\"],\"destination\":\"$D/composed/out.txt\"}")
expect_eq "compose response" "{\"name\":\"out.txt\",\"path\":\"$D/composed/out.txt\",\"type\":\"file\"}" "$r"
expect_eq "compose content" "one-two-three" "$(cat "$D/composed/out.txt")"
check "compose removed sources" test ! -e "$D/c1" -a ! -e "$D/c3"
expect_eq "compose missing source 404" "404" \
	"$(status "$U/compose" -X POST -d "{\"source_paths\":[\"$D/nope\"],\"destination\":\"$D/o\"}")"
expect_eq "compose empty sources 400" "400" "$(status "$U/compose" -X POST -d '{"source_paths":[],"destination":"x"}')"
expect_eq "compose bad json 400" "400" "$(status "$U/compose" -X POST -d '{')"
expect_eq "compose source==dest 400" "400" \
	"$(status "$U/compose" -X POST -d "{\"source_paths\":[\"$D/r.txt\"],\"destination\":\"$D/r.txt\"}")"

# --- signatures (token set through /init) ---
curl -s -o /dev/null -X POST "$ENVD_URL/init" -H 'Content-Type: application/json' -d '{"accessToken":"tok-123"}'
sig=$("$PY" - "$D/r.txt" <<'PY'
import base64, hashlib, sys
raw = f"{sys.argv[1]}:read::tok-123"
print("v1_" + base64.b64encode(hashlib.sha256(raw.encode()).digest()).decode().rstrip("="))
PY
)
expect_eq "signed download" "hello range world" "$(body "$U?path=$(enc "$D/r.txt")&signature=$(enc "$sig")")"
expect_eq "no signature 401" "401" "$(status "$U?path=$(enc "$D/r.txt")")"
expect_eq "signature for another path 401" "401" "$(status "$U?path=$(enc "$D/r.txt.x")&signature=$(enc "$sig")")"
expect_eq "token header instead" "200" "$(status "$U?path=$(enc "$D/r.txt")" -H 'X-Access-Token: tok-123')"
expect_eq "compose needs the token" "401" "$(status "$U/compose" -X POST -d '{}')"
curl -s -o /dev/null -X POST "$ENVD_URL/init" -H 'X-Access-Token: tok-123' -H 'Content-Type: application/json' -d '{}'

envd_alive && pass "envd still alive" || fail "envd still alive"
finish
