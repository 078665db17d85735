#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# filesystem.Filesystem over Connect JSON with curl: error codes and
# messages, the polling watcher API (CreateWatcher / GetWatcherEvents /
# RemoveWatcher) and a WatchDir stream.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/lib.sh

id user >/dev/null 2>&1 || useradd -m -s /bin/bash user >/dev/null 2>&1
envd_start -default-user user || exit 1
D=$(mktemp -d /tmp/envd-fsrpc.XXXXXX)
on_exit 'rm -rf "$D"; _t_cleanup'
rpc() { curl -s -X POST "$ENVD_URL/filesystem.Filesystem/$1" -H 'Content-Type: application/json' "${@:3}" -d "$2"; }
code() { rpc "$@" | "$PY" -c 'import json,sys; print(json.load(sys.stdin).get("code",""))'; }
field() { "$PY" -c 'import json,sys; d=json.load(sys.stdin); exec("print(" + sys.argv[1] + ")")' "$1"; }

expect_eq "Stat missing -> not_found" not_found "$(code Stat "{\"path\":\"$D/nope\"}")"
expect_eq "Stat message" "file not found: lstat $D/nope: no such file or directory" \
	"$(rpc Stat "{\"path\":\"$D/nope\"}" | field 'd["message"]')"
expect_eq "Stat ~other -> invalid_argument" invalid_argument "$(code Stat '{"path":"~root"}')"
expect_eq "Stat empty path -> home" /home/user "$(rpc Stat '{"path":""}' | field 'd["entry"]["path"]')"
expect_eq "Stat relative -> under home, cleaned" /home/user "$(rpc Stat '{"path":"a/../."}' | field 'd["entry"]["path"]')"
expect_eq "unknown Basic user -> 401" 401 \
	"$(curl -s -o /dev/null -w '%{http_code}' -X POST "$ENVD_URL/filesystem.Filesystem/Stat" -H 'Content-Type: application/json' -H "Authorization: Basic $(printf 'ghost:' | base64)" -d '{"path":"/"}')"
expect_eq "Basic root user home" /root "$(rpc Stat '{"path":"~"}' -H "Authorization: Basic $(printf 'root:' | base64)" | field 'd["entry"]["path"]')"
expect_eq "MakeDir" "$D/a/b" "$(rpc MakeDir "{\"path\":\"$D/a/b\"}" | field 'd["entry"]["path"]')"
expect_eq "MakeDir owner" user "$(stat -c %U "$D/a")"
expect_eq "MakeDir again -> already_exists" already_exists "$(code MakeDir "{\"path\":\"$D/a/b\"}")"
touch "$D/file"
expect_eq "MakeDir on file -> invalid_argument" invalid_argument "$(code MakeDir "{\"path\":\"$D/file\"}")"
expect_eq "MakeDir below a file -> internal" internal "$(code MakeDir "{\"path\":\"$D/file/x\"}")"
expect_eq "Move missing -> not_found" not_found "$(code Move "{\"source\":\"$D/nope\",\"destination\":\"$D/x\"}")"
expect_eq "Move onto non-empty dir -> internal" internal "$(code Move "{\"source\":\"$D/a\",\"destination\":\"/tmp\"}")"
expect_eq "ListDir missing -> not_found" not_found "$(code ListDir "{\"path\":\"$D/nope\"}")"
expect_eq "ListDir file -> invalid_argument" invalid_argument "$(code ListDir "{\"path\":\"$D/file\"}")"
ln -s "$D/loop" "$D/loop"
expect_eq "ListDir loop -> failed_precondition" failed_precondition "$(code ListDir "{\"path\":\"$D/loop\"}")"
mkdir -p "$D/empty"
expect_eq "ListDir empty -> {}" "{}" "$(rpc ListDir "{\"path\":\"$D/empty\"}")"
expect_eq "Remove missing -> {}" "{}" "$(rpc Remove "{\"path\":\"$D/nope\"}")"
expect_eq "WatchDir file -> invalid_argument (unary form of the error)" invalid_argument \
	"$(code CreateWatcher "{\"path\":\"$D/file\"}")"
expect_eq "CreateWatcher missing -> not_found" not_found "$(code CreateWatcher "{\"path\":\"$D/nope\"}")"

# polling watcher: events written just before the poll are in its answer
mkdir -p "$D/w"
wid=$(rpc CreateWatcher "{\"path\":\"$D/w\",\"recursive\":true}" | field 'd["watcherId"]')
expect_match "watcher id shape" '^w[a-z0-9]{20}$' "$wid"
expect_eq "no events yet" "{}" "$(rpc GetWatcherEvents "{\"watcherId\":\"$wid\"}")"
mkdir "$D/w/sub"; echo hi >"$D/w/sub/f.txt"
ev=$(rpc GetWatcherEvents "{\"watcherId\":\"$wid\"}" | field '" ".join(e["name"]+":"+e["type"] for e in d["events"])')
expect_match "CREATE sub" "sub:EVENT_TYPE_CREATE" "$ev"
expect_match "event in new subdir" "sub/f.txt:EVENT_TYPE_(CREATE|WRITE)" "$ev"
expect_eq "drained" "{}" "$(rpc GetWatcherEvents "{\"watcherId\":\"$wid\"}")"
w2=$(rpc CreateWatcher "{\"path\":\"$D/w\",\"includeEntry\":true}" | field 'd["watcherId"]')
echo more >>"$D/w/top.txt"
expect_eq "includeEntry path" "$D/w/top.txt" \
	"$(rpc GetWatcherEvents "{\"watcherId\":\"$w2\"}" | field '[e for e in d["events"] if e["type"]=="EVENT_TYPE_WRITE"][0]["entry"]["path"]')"
expect_eq "RemoveWatcher" "{}" "$(rpc RemoveWatcher "{\"watcherId\":\"$wid\"}")"
expect_eq "RemoveWatcher 2" "{}" "$(rpc RemoveWatcher "{\"watcherId\":\"$w2\"}")"
expect_eq "removed id -> not_found" not_found "$(code GetWatcherEvents "{\"watcherId\":\"$wid\"}")"
expect_eq "unknown id message" "watcher with id wnope not found" \
	"$(rpc RemoveWatcher '{"watcherId":"wnope"}' | field 'd["message"]')"

# WatchDir stream over Connect (enveloped JSON); keepalive after 1 s
out="$D/stream.out"
"$PY" - "$D/w" >"$D/req.bin" <<'PY'
import json, struct, sys
b = json.dumps({"path": sys.argv[1]}).encode()
sys.stdout.buffer.write(struct.pack(">BI", 0, len(b)) + b)
PY
curl -s -N -m "$HANG_S" -X POST "$ENVD_URL/filesystem.Filesystem/WatchDir" -H 'Content-Type: application/connect+json' \
	-H 'Keepalive-Ping-Interval: 1' --data-binary @"$D/req.bin" -o "$out" &
cpid=$!
# The watch is in place once the start message is out; the stream is read
# until it has the event and a keepalive, then dropped.
wait_for 60 has "$out" '"start"'
echo x >"$D/w/streamed.txt"
streamed() { grep -aq 'streamed.txt' "$out" && grep -aq '"keepalive"' "$out"; }
wait_for 60 streamed
kill $cpid 2>/dev/null
wait $cpid
msgs=$("$PY" - "$out" <<'PY'
import json, struct, sys
data = open(sys.argv[1], "rb").read()
i, out = 0, []
while i + 5 <= len(data):
    flags, n = struct.unpack(">BI", data[i:i+5]); i += 5
    out.append(json.dumps(json.loads(data[i:i+n]), separators=(",", ":"))); i += n
print("\n".join(out))
PY
)
expect_eq "stream starts with start{}" '{"start":{}}' "$(head -n1 <<<"$msgs")"
expect_match "stream has the CREATE" '"name":"streamed.txt","type":"EVENT_TYPE_CREATE"' "$msgs"
expect_match "stream has a keepalive" '\{"keepalive":\{\}\}' "$msgs"
# A watcher that does not read: envd's queue for it stays bounded, events
# beyond it are dropped and an explicit overflow event tells it to rescan.
mkdir -p "$D/flood"
res=$("$PY" - "$ENVD_PORT" "$D/flood" "$ENVD_PID" <<'PY'
import json, os, socket, struct, sys, time
port, d, pid = int(sys.argv[1]), sys.argv[2], sys.argv[3]
def rss():
    for l in open(f"/proc/{pid}/status"):
        if l.startswith("VmRSS"):
            return int(l.split()[1])
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.connect(("127.0.0.1", port))
body = json.dumps({"path": d}).encode()
env = struct.pack(">BI", 0, len(body)) + body
s.sendall(b"POST /filesystem.Filesystem/WatchDir HTTP/1.1\r\nHost: x\r\n"
          b"Content-Type: application/connect+json\r\nContent-Length: %d\r\n\r\n" % len(env) + env)
# The watch is in place once the start message is out.
hang = int(os.environ.get("HANG_S", "300"))
s.settimeout(hang)
data = b""
while b'"start"' not in data:
    chunk = s.recv(4096)
    if not chunk:
        break
    data += chunk
before = rss()
peak = before
for i in range(40000):
    open(os.path.join(d, "f%05d-%s" % (i, "x" * 200)), "w").close()
    if i % 1000 == 0:
        peak = max(peak, rss())
# Every event is in the kernel's queue now. envd drains an inotify
# descriptor to the end whenever its loop wakes with it readable, so two
# requests answered one after the other mean the watch has taken them all
# (queued for the stream, dropped, or lost to the kernel's own overflow),
# however slowly envd runs (under qemu-user it may lag the writer by
# thousands of events). Reading before that could keep pace with it.
def ping():
    c = socket.create_connection(("127.0.0.1", port), timeout=hang)
    c.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    while c.recv(4096):
        pass
    c.close()
ping()
ping()
# Now read slowly until the overflow event arrives (HANG_S is a deadline),
# sampling envd's memory on the way.
deadline = time.time() + hang
while b"EVENT_TYPE_OVERFLOW" not in data and time.time() < deadline:
    peak = max(peak, rss())
    try:
        chunk = s.recv(1 << 16)
    except socket.timeout:
        break
    if not chunk:
        break
    data += chunk
peak = max(peak, rss())
print(("OVERFLOW" if b"EVENT_TYPE_OVERFLOW" in data else "no-overflow"), peak - before)
PY
)
expect_match "slow watcher gets an overflow event" "^OVERFLOW" "$res"
growth=${res#* }
# The sanitizer build's allocator quarantines freed memory; bound it loosely.
case "${ENVD_BIN:-build/envd}" in *asan*) lim=$((384 * 1024)) ;; *) lim=$((16 * 1024)) ;; esac
check "slow watcher: envd RSS growth ${growth} kB < ${lim} kB" test "${growth:-999999}" -lt "$lim"
expect_eq "other requests still served" "{}" "$(rpc Remove "{\"path\":\"$D/flood\"}")"

# A listing longer than one step (128 KiB of reply) goes out in pieces as
# it is walked: the bytes are still the one message, in every codec and
# transport, and a client that leaves half-way costs nothing.
mkdir -p "$D/big/sub"
"$PY" - "$D/big" <<'PY'
import os, sys
for i in range(6000):
    os.close(os.open(os.path.join(sys.argv[1], "f\"%05d\u00e9" % (5999 - i)), os.O_CREAT | os.O_WRONLY, 0o644))
for i in range(300):
    os.close(os.open(os.path.join(sys.argv[1], "sub", "s%03d" % i), os.O_CREAT | os.O_WRONLY, 0o644))
PY
req="{\"path\":\"$D/big\",\"depth\":2}"
"$PY" -c 'import sys; p=sys.argv[1].encode(); sys.stdout.buffer.write(b"\n"+bytes([len(p)])+p+b"\x10\x02")' "$D/big" >"$D/req.bin"
for t in h1 h2; do
	flag=$([ $t = h2 ] && echo --http2-prior-knowledge || echo --http1.1)
	curl -s $flag -D "$D/hdr.$t" -o "$D/ls.$t.json" -X POST "$ENVD_URL/filesystem.Filesystem/ListDir" \
		-H 'Content-Type: application/json' -d "$req"
	curl -s $flag -o "$D/ls.$t.bin" -X POST "$ENVD_URL/filesystem.Filesystem/ListDir" \
		-H 'Content-Type: application/proto' --data-binary @"$D/req.bin"
done
expect_match "big ListDir over HTTP/1.1 is chunked (sent as walked)" "[Tt]ransfer-[Ee]ncoding: chunked" "$(cat "$D/hdr.h1")"
res=$("$PY" - "$D" <<'PY'
import json, sys
D = sys.argv[1]
out = []
for t in ("h1", "h2"):
    d = json.load(open("%s/ls.%s.json" % (D, t), encoding="utf-8"))
    names = [e["path"][len(D) + 5:] for e in d["entries"]]
    out.append("%s:%d" % (t, len(names)))
    # byte order within a directory, the subdirectory's children right after it
    top = [n for n in names if not n.startswith("sub/")]
    out.append("sorted" if [n.encode() for n in top] == sorted(n.encode() for n in top) else "unsorted")
    i = names.index("sub")
    out.append("pre-order" if names[i + 1:i + 301] == ["sub/s%03d" % k for k in range(300)] else "not-pre-order")
print(" ".join(out))
PY
)
expect_eq "big ListDir JSON: every entry, byte order, pre-order, on both transports" \
	"h1:6301 sorted pre-order h2:6301 sorted pre-order" "$res"
check "big ListDir JSON: the same bytes on HTTP/1.1 and HTTP/2" cmp -s "$D/ls.h1.json" "$D/ls.h2.json"
check "big ListDir proto: the same bytes on HTTP/1.1 and HTTP/2" cmp -s "$D/ls.h1.bin" "$D/ls.h2.bin"
# gRPC-Web needs the length first: the reply goes whole, and its message is
# the Connect proto body byte for byte.
"$PY" -c 'import sys; m=open(sys.argv[1],"rb").read(); sys.stdout.buffer.write(b"\0"+len(m).to_bytes(4,"big")+m)' \
	"$D/req.bin" >"$D/req.gw"
curl -s -o "$D/ls.gw" -X POST "$ENVD_URL/filesystem.Filesystem/ListDir" -H 'Content-Type: application/grpc-web+proto' \
	--data-binary @"$D/req.gw"
res=$("$PY" - "$D" <<'PY'
import sys
D = sys.argv[1]
g = open(D + "/ls.gw", "rb").read()
n = int.from_bytes(g[1:5], "big")
print("same" if g[0] == 0 and g[5:5 + n] == open(D + "/ls.h1.bin", "rb").read() else "differ")
PY
)
expect_eq "big ListDir gRPC-Web: one message, the same bytes as Connect proto" same "$res"
# A client that reads slowly: the walk waits for the queue to drain
# (on_writable) and the listing still arrives whole.
res=$("$PY" - "${ENVD_URL##*:}" "$req" <<'PY'
import json, socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.connect(("127.0.0.1", int(sys.argv[1])))
b = sys.argv[2].encode()
s.sendall(b"POST /filesystem.Filesystem/ListDir HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
          b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(b), b))
data = b""
t_end = time.time() + 120
while time.time() < t_end:
    chunk = s.recv(8192)
    if not chunk:
        break
    data += chunk
    time.sleep(0.0005)
head, _, body = data.partition(b"\r\n\r\n")
out, i = b"", 0
while True:  # de-chunk
    j = body.index(b"\r\n", i)
    n = int(body[i:j], 16)
    if n == 0:
        break
    out += body[j + 2:j + 2 + n]
    i = j + 4 + n
print(len(json.loads(out)["entries"]))
PY
)
expect_eq "big ListDir to a slow reader: every entry" 6301 "$res"

# A client that takes the first bytes and leaves.
"$PY" - "${ENVD_URL##*:}" "$req" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
b = sys.argv[2].encode()
s.sendall(b"POST /filesystem.Filesystem/ListDir HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
          b"Content-Length: %d\r\n\r\n%s" % (len(b), b))
s.recv(1000)
s.close()
PY
expect_eq "after a client left a big ListDir half-way, ListDir still answers" "{}" \
	"$(rpc ListDir "{\"path\":\"$D/empty\"}")"

envd_alive && pass "envd still alive" || fail "envd still alive"
finish
