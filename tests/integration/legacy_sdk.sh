#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Old Python SDK compatibility: filesystem answers to the user agent
# "connect-python" carry X-E2B-Legacy-SDK: true and only the fields that
# SDK knew (EntryInfo: name, type, path; FilesystemEvent: name, type), in
# JSON and in binary protobuf; other clients get everything.
cd "$(dirname "$0")/../.." || exit 1
. tests/lib.sh
W=$(mktemp -d /tmp/envd-legacy.XXXXXX)
on_exit '_t_cleanup; rm -rf "$W" "$W.hdrs"'
echo hello >"$W/f"
envd_start || { fail "envd starts"; finish; exit 1; }
U=$ENVD_URL
fs() { # fs METHOD JSON [curl args]
	local m=$1 j=$2
	shift 2
	curl -s -D "$W.hdrs" -H 'Content-Type: application/json' -d "$j" "$@" "$U/filesystem.Filesystem/$m"
}
r=$(fs Stat "{\"path\":\"$W/f\"}" -A connect-python)
expect_eq "Stat: only name, type, path" "{\"entry\":{\"name\":\"f\",\"type\":\"FILE_TYPE_FILE\",\"path\":\"$W/f\"}}" "$r"
check "Stat: X-E2B-Legacy-SDK: true" grep -qi '^X-E2B-Legacy-SDK: true' "$W.hdrs"
r=$(fs Stat "{\"path\":\"$W/f\"}" -A e2b-python-sdk/1.0)
expect_match "current SDKs get every field" '"size":"6".*"permissions"' "$r"
check "and no legacy header" bash -c "! grep -qi legacy '$W.hdrs'"
r=$(fs ListDir "{\"path\":\"$W\"}" -A connect-python)
expect_eq "ListDir entries downgraded" "{\"entries\":[{\"name\":\"f\",\"type\":\"FILE_TYPE_FILE\",\"path\":\"$W/f\"}]}" "$r"
r=$(fs MakeDir "{\"path\":\"$W/d\"}" -A connect-python)
expect_eq "MakeDir entry downgraded" "{\"entry\":{\"name\":\"d\",\"type\":\"FILE_TYPE_DIRECTORY\",\"path\":\"$W/d\"}}" "$r"
wid=$(fs CreateWatcher "{\"path\":\"$W/d\",\"includeEntry\":true}" -A connect-python | /usr/bin/python3 -c 'import sys,json; print(json.load(sys.stdin)["watcherId"])')
echo x >"$W/d/new"
r=$(fs GetWatcherEvents "{\"watcherId\":\"$wid\"}" -A connect-python)
expect_match "watcher events keep only name and type" '^\{"events":\[\{"name":"new","type":"EVENT_TYPE_CREATE"\}' "$r"
check "no entry in legacy events" bash -c "! grep -q '\"entry\"' <<<'$r'"
# Binary protobuf: field 1 (entry) holds only fields 1-3.
req=$(/usr/bin/python3 -c 'import sys; p=(sys.argv[1]+"/f").encode(); sys.stdout.buffer.write(b"\x0a"+bytes([len(p)])+p)' "$W" | base64 -w0)
fields=$(echo "$req" | base64 -d | curl -s -A connect-python -H 'Content-Type: application/proto' --data-binary @- \
	"$U/filesystem.Filesystem/Stat" | /usr/bin/python3 -c '
import sys
b = sys.stdin.buffer.read()
def fields(b):
    i, out = 0, []
    while i < len(b):
        k = 0; s = 0
        while True:
            c = b[i]; i += 1; k |= (c & 0x7f) << s; s += 7
            if c < 0x80: break
        f, t = k >> 3, k & 7
        if t == 0:
            while b[i] & 0x80: i += 1
            i += 1; out.append((f, None))
        elif t == 2:
            n = 0; s = 0
            while True:
                c = b[i]; i += 1; n |= (c & 0x7f) << s; s += 7
                if c < 0x80: break
            out.append((f, b[i:i+n])); i += n
        else:
            raise SystemExit("wire type %d" % t)
    return out
top = fields(b)
print(sorted(f for f, _ in fields(top[0][1])))')
expect_eq "binary: the entry has fields 1, 2, 3 only" "[1, 2, 3]" "$fields"
check "envd alive" envd_alive
finish
