#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The server spine against real clients: HTTP/1.1 and h2c on one port,
# routing fall-backs, CORS, the token gate, Basic auth, Connect framing,
# /init, /envs, /metrics, and hostile input that must not hurt the daemon.
cd "$(dirname "$0")/../.." || exit 1
. tests/lib.sh

# --- command line (Go flag syntax) ---
expect_eq "-version prints the version" "0.7.0" "$("$ENVD_BIN" -version)"
expect_eq "--version works too" "0.7.0" "$("$ENVD_BIN" --version)"
expect_eq "-version=true works" "0.7.0" "$("$ENVD_BIN" -version=true)"
"$ENVD_BIN" -nosuchflag >/dev/null 2>/tmp/spine-usage.$$
expect_eq "unknown flag exits 2" 2 $?
expect_match "unknown flag prints usage on stderr" 'flag provided but not defined: -nosuchflag.*Usage of envd' "$(tr '\n' ' ' </tmp/spine-usage.$$)"
"$ENVD_BIN" -port notanumber >/dev/null 2>&1
expect_eq "bad int value exits 2" 2 $?
"$ENVD_BIN" -h >/dev/null 2>&1
expect_eq "-h exits 0" 0 $?
rm -f /tmp/spine-usage.$$

envd_start || exit 1
U=$ENVD_URL
"$ENVD_BIN" -isnotfc -port "$ENVD_PORT" >/dev/null 2>/tmp/spine-busy.$$
expect_eq "port in use exits 1" 1 $?
expect_match "port in use says server stopped" '^server stopped: listen tcp .*address already in use' "$(cat /tmp/spine-busy.$$)"
rm -f /tmp/spine-busy.$$

# --- the start-up line: version, address, protocols, cgroups (stderr, always) ---
expect_match "start-up line names version, address and protocols" \
	"^envd 0\.7\.0 listening on \[::\]:$ENVD_PORT .*HTTP/1\.1 and HTTP/2 \(h2c\); Connect, gRPC, gRPC-Web; cgroups off \(-no-cgroups\)$" \
	"$(grep -a ' listening on ' "$ENVD_LOG")"
# Without -cgroup-root envd finds the cgroup2 mount itself: /sys/fs/cgroup
# when it is cgroup2, else the first cgroup2 mount (a hybrid host has it at
# /sys/fs/cgroup/unified). As an unprivileged user it only says where.
cg2=$(stat -f -c %T /sys/fs/cgroup 2>/dev/null)
if [ "$cg2" = cgroup2fs ]; then
	cg2=/sys/fs/cgroup
else
	cg2=$(awk '{ for (i = 1; i <= NF; i++) if ($i == "-") { if ($(i + 1) == "cgroup2") print $5; break } }' /proc/self/mountinfo | head -n 1)
fi
if [ -n "$cg2" ] && id nobody >/dev/null 2>&1; then
	p2=$(free_port)
	setpriv --reuid=nobody --regid=nogroup --clear-groups "$ENVD_BIN" -isnotfc -port "$p2" -no-port-forward \
		-changes-max-paths 0 >/dev/null 2>/tmp/spine-cg.$$ &
	cgpid=$!
	wait_for 600 grep -q ' listening on ' /tmp/spine-cg.$$
	expect_match "without -cgroup-root: the cgroup2 mount is found ($cg2)" \
		"cgroups off: not running as root \(cgroup2 at $cg2\)\$" "$(grep -a ' listening on ' /tmp/spine-cg.$$)"
	kill "$cgpid" 2>/dev/null
	wait "$cgpid" 2>/dev/null
	rm -f /tmp/spine-cg.$$
fi

# --- one port, two protocols ---
expect_eq "HTTP/1.1 /health is 204" 204 "$(curl -s -o /dev/null -w '%{http_code}' $U/health)"
expect_eq "h2c prior knowledge /health is 204" "204 2" \
	"$(curl -s -o /dev/null -w '%{http_code} %{http_version}' --http2-prior-knowledge $U/health)"
expect_eq "h2c upgrade /health is 204 over HTTP/2" "204 2" \
	"$(curl -s -o /dev/null -w '%{http_code} %{http_version}' --http2 $U/health)"
check "nghttp GET /health" nghttp -v $U/health
h=$(curl -s -D - -o /dev/null $U/health)
expect_match "health has Cache-Control: no-store" 'Cache-Control: no-store' "$h"
expect_match "health has a Date header" 'Date: ' "$h"

# keep-alive: two requests, one connection
out=$(curl -s -v -o /dev/null -o /dev/null $U/health $U/health 2>&1)
expect_match "keep-alive reuses the connection" 'Re-using existing connection' "$out"

# pipelining: three requests in one write, answered in order
resp=$(printf 'GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /nope HTTP/1.1\r\nHost: x\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n' |
	timeout "$HANG_S" "$PY" -c '
import socket,sys
s=socket.create_connection(("127.0.0.1",'$ENVD_PORT'))
s.sendall(sys.stdin.buffer.read())
d=b""
while True:
    b=s.recv(65536)
    if not b: break
    d+=b
import re
print(" ".join(re.findall(r"HTTP/1.1 (\d+)", d.decode())))')
expect_eq "pipelined requests answered in order" "204 404 204" "$resp"

# --- routing fall-backs ---
r=$(curl -s -w ' %{http_code} %{content_type}' $U/nope | tr -d '\n')
expect_eq "unknown path: plain 404" "404 page not found 404 text/plain; charset=utf-8" "$r"
h=$(curl -s -D - -o /dev/null -X POST $U/health)
expect_match "wrong method: 405 with Allow: GET" $'HTTP/1.1 405.*Allow: GET' "$(tr -d '\r' <<<"$h" | tr '\n' ' ')"
expect_eq "HEAD /health is 405" 405 "$(curl -s -o /dev/null -w '%{http_code}' -I $U/health)"
expect_eq "unknown RPC method: 404" 404 \
	"$(curl -s -o /dev/null -w '%{http_code}' -X POST -H 'content-type: application/json' -d '{}' $U/process.Process/Nope)"
h=$(curl -s -D - -o /dev/null $U/process.Process/List)
expect_match "GET on an RPC: 405 Allow: POST" $'405.*Allow: POST' "$(tr -d '\r' <<<"$h" | tr '\n' ' ')"
h=$(curl -s -D - -o /dev/null -X POST -H 'content-type: text/plain' -d x $U/process.Process/List)
expect_match "wrong content type: 415 with Accept-Post" $'415.*Accept-Post: application/grpc' "$(tr -d '\r' <<<"$h" | tr '\n' ' ')"

# --- CORS ---
h=$(curl -s -D - -o /dev/null -X OPTIONS -H 'Origin: http://a' -H 'Access-Control-Request-Method: POST' \
	-H 'Access-Control-Request-Headers: content-type,x-foo' $U/process.Process/List | tr -d '\r')
expect_match "preflight is 204" '^HTTP/1.1 204' "$h"
expect_match "preflight echoes method" 'Access-Control-Allow-Methods: POST' "$h"
expect_match "preflight echoes headers" 'Access-Control-Allow-Headers: content-type,x-foo' "$h"
expect_match "preflight max age" 'Access-Control-Max-Age: 7200' "$h"
h=$(curl -s -D - -o /dev/null -H 'Origin: http://a' $U/health | tr -d '\r')
expect_match "actual request gets Allow-Origin *" 'Access-Control-Allow-Origin: \*' "$h"
expect_match "actual request gets Expose-Headers" 'Access-Control-Expose-Headers: Grpc-Status' "$h"

# --- Connect unary and streaming ---
r=$(curl -s -w ' %{http_code} %{content_type}' -X POST -H 'content-type: application/json' -d '{}' $U/process.Process/List)
expect_match "Connect JSON unary List" '^\{.*\} 200 application/json$' "$r"
r=$(curl -s -w ' %{http_code}' --http2-prior-knowledge -X POST -H 'content-type: application/json' -d '{}' $U/process.Process/List)
expect_match "Connect JSON unary over h2c" '^\{.*\} 200$' "$r"
r=$(curl -s -o /dev/null -w '%{http_code} %{content_type}' -X POST -H 'content-type: application/proto' --data-binary '' $U/process.Process/List)
expect_eq "Connect proto unary with empty body" "200 application/proto" "$r"
r=$(curl -s -w ' %{http_code}' -X POST -H 'content-type: application/json' --data-binary '' $U/process.Process/List)
expect_eq "empty JSON body is invalid_argument" \
	'{"code":"invalid_argument","message":"unmarshal message: zero-length payload is not a valid JSON object"} 400' "$r"
# A NUL inside a proto string would reach the syscall cut at the NUL:
# Remove of "<dir>/keep\0x" must not remove <dir>/keep.
nuldir=$(mktemp -d); : >"$nuldir/keep"
nulreq=$(python3 -c 'import sys; p=sys.argv[1].encode()+b"/keep\0x"; sys.stdout.buffer.write(bytes([0x0a,len(p)])+p)' "$nuldir" | base64 -w0)
r=$(echo "$nulreq" | base64 -d | curl -s -w ' %{http_code}' -X POST -H 'content-type: application/proto' --data-binary @- $U/filesystem.Filesystem/Remove)
expect_eq "a NUL inside a proto string is invalid_argument" \
	'{"code":"invalid_argument","message":"unmarshal message: string field path holds a NUL byte"} 400' "$r"
expect_eq "and nothing was removed" "yes" "$([ -e "$nuldir/keep" ] && echo yes || echo no)"
rm -rf "$nuldir"
r=$(curl -s -w ' %{http_code}' -X POST -H 'content-type: application/json' -d '{"path":' $U/filesystem.Filesystem/Stat)
expect_match "malformed JSON is invalid_argument 400" '"code":"invalid_argument".* 400$' "$r"
r=$(curl -s -w ' %{http_code}' -X POST -H 'content-type: application/json' -H 'Connect-Timeout-Ms: 12345678901' -d '{}' $U/process.Process/List)
expect_match "Connect-Timeout-Ms with 11 digits" 'has >10 digits.* 400$' "$r"
r=$(curl -s -w ' %{http_code}' -X POST -H 'content-type: application/json' -H 'Content-Encoding: br' -d '{}' $U/process.Process/List)
expect_match "unknown compression is unimplemented" 'unknown compression \\"br\\": supported encodings are gzip.* 501$' "$r"
r=$(printf '{"path":"/"}' | gzip | curl -s -w ' %{http_code}' -X POST -H 'content-type: application/json' -H 'Content-Encoding: gzip' --data-binary @- $U/filesystem.Filesystem/Stat --compressed)
expect_match "gzip request body is accepted" '"name":"/".* 200$' "$r"
r=$(printf 'notgzip' | curl -s -w ' %{http_code}' -X POST -H 'content-type: application/json' -H 'Content-Encoding: gzip' --data-binary @- $U/filesystem.Filesystem/Stat)
expect_match "bad gzip body is invalid_argument" 'invalid_argument.* 400$' "$r"

# gRPC-Web over HTTP/1.1: message then a trailer frame (flag 0x80)
printf '\0\0\0\0\0' > /tmp/spine-gw.$$
r=$(curl -s -X POST -H 'content-type: application/grpc-web+proto' --data-binary @/tmp/spine-gw.$$ $U/process.Process/List | od -An -c | tr -s ' \n' ' ')
expect_match "gRPC-Web unary: trailer frame with grpc-status 0" '200 \\0 \\0 \\0 .*g r p c - s t a t u s : 0' "$r"
printf '\0\0\0\0\4\n\2\10\11' > /tmp/spine-gw.$$
r=$(curl -s -D - -o /dev/null -X POST -H 'content-type: application/grpc' --http2-prior-knowledge --data-binary @/tmp/spine-gw.$$ \
	$U/process.Process/SendSignal | tr -d '\r')
expect_match "gRPC over h2c: trailers-only not_found (5)" 'grpc-status: 5' "$r"
rm -f /tmp/spine-gw.$$

# stream error: HTTP 200 and an end-stream envelope
env_stat() { "$PY" -c 'import sys,struct; d=sys.argv[1].encode(); sys.stdout.buffer.write(struct.pack(">BI",0,len(d))+d)' "$1"; }
env_stat '{"path":"/definitely/missing"}' > /tmp/spine-env.$$
r=$(curl -s -X POST -H 'content-type: application/connect+json' --data-binary @/tmp/spine-env.$$ $U/filesystem.Filesystem/WatchDir -w ' %{http_code}' | od -An -c | tr -s ' \n' ' ')
expect_match "stream error: 200 with end-stream flag 002 and not_found" '002.*n o t _ f o u n d.*2 0 0' "$r"
printf '\0\0\0\0\x10{}' > /tmp/spine-env.$$
r=$(curl -s -X POST -H 'content-type: application/connect+json' --data-binary @/tmp/spine-env.$$ $U/filesystem.Filesystem/WatchDir -w ' %{http_code}' | tr -d '\0\002')
expect_match "truncated envelope gives an end-stream error" 'invalid_argument.*200$' "$r"
printf '' > /tmp/spine-env.$$
r=$(curl -s -X POST -H 'content-type: application/connect+json' --data-binary @/tmp/spine-env.$$ $U/filesystem.Filesystem/WatchDir | tr -d '\0\002')
expect_match "zero messages on a server stream" 'unary request has zero messages' "$r"
rm -f /tmp/spine-env.$$

# --- Basic auth ---
r=$(curl -s -w ' %{http_code}' -u 'nosuchuser:' $U/health)
expect_eq "unknown Basic user on /health: 401 Connect JSON" \
	"{\"code\":\"unauthenticated\",\"message\":\"invalid username: 'nosuchuser'\"} 401" "$r"
expect_eq "known Basic user passes" 204 "$(curl -s -o /dev/null -w '%{http_code}' -u 'root:' $U/health)"
expect_eq "malformed Basic header is ignored" 204 "$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Basic !!!' $U/health)"

# --- /init, token gate, envs, metrics ---
h=$(curl -s -D - -o /dev/null -X POST -d '{"accessToken":"tok1","envVars":{"FOO":"bar"},"defaultUser":"root"}' $U/init | tr -d '\r')
expect_match "/init sets token: 204" '^HTTP/1.1 204' "$h"
expect_match "/init has X-Envd-Version" 'X-Envd-Version: 0\.7\.0' "$h"
r=$(curl -s -w ' %{http_code}' $U/envs | tr -d '\n')
expect_eq "token gate: 401 JSON" \
	'{"code":401,"message":"unauthorized access, please provide a valid access token or method signing if supported"} 401' "$r"
r=$(curl -s -H 'X-Access-Token: tok1' $U/envs)
expect_match "/envs with token has FOO and E2B_SANDBOX" '"FOO":"bar"' "$r"
expect_match "/envs has E2B_SANDBOX" '"E2B_SANDBOX":"false"' "$r"
expect_eq "health is open without token" 204 "$(curl -s -o /dev/null -w '%{http_code}' $U/health)"
expect_eq "RPC without token is 401" 401 \
	"$(curl -s -o /dev/null -w '%{http_code}' -X POST -H 'content-type: application/json' -d '{}' $U/process.Process/List)"
r=$(curl -s -w ' %{http_code}' -X POST -d '{"accessToken":"wrong"}' $U/init)
expect_eq "/init with wrong token is 401" "access token validation failed 401" "$r"
r=$(curl -s -w ' %{http_code}' -X POST -d '{}' $U/init)
expect_eq "/init without token cannot reset" "access token reset not authorized 401" "$r"
expect_eq "/init bad JSON is 400" 400 "$(curl -s -o /dev/null -w '%{http_code}' -X POST -d '{"accessToken":5}' $U/init)"
expect_eq "/init escaped token is 400" 400 "$(curl -s -o /dev/null -w '%{http_code}' -X POST -d '{"accessToken":"a\\u0041"}' $U/init)"
# Every route that needs the token refuses without it; excluded ones do not.
for rt in "GET /metrics" "GET /envs" "POST /freeze" "POST /unfreeze" "POST /collapse" "POST /fsfreeze" \
	"POST /fsthaw" "POST /upgrade" "POST /files/compose" "POST /process.Process/List" \
	"POST /process.Process/Start" "POST /filesystem.Filesystem/Stat" "GET /files/" "GET //files" \
	"HEAD /health" "PUT /files" "GET /nope"; do
	set -- $rt
	if [ "$1" = HEAD ]; then
		code=$(curl -s -m "$HANG_S" -o /dev/null -w '%{http_code}' -I $U$2)
	else
		code=$(curl -s -m "$HANG_S" -o /dev/null -w '%{http_code}' -X "$1" -H 'content-type: application/json' $U$2)
	fi
	expect_eq "token required: $rt" 401 "$code"
done
expect_eq "token not required: GET /files (checks signature itself)" 401 \
	"$(curl -s -o /dev/null -w '%{http_code}' "$U/files?path=/etc/hostname")"
r=$(curl -s "$U/files?path=/etc/hostname")
expect_match "GET /files without signature says so" 'missing signature query parameter' "$r"

m=$(curl -s -H 'X-Access-Token: tok1' $U/metrics)
expect_match "/metrics has every key in order" \
	'^\{"ts":[0-9]+,"cpu_count":[0-9]+,"cpu_used_pct":[0-9.]+,"mem_total_mib":[0-9]+,"mem_used_mib":[0-9]+,"mem_total":[0-9]+,"mem_used":[0-9]+,"mem_cache":[0-9]+,"disk_used":[0-9]+,"disk_total":[0-9]+\}$' "$m"
expect_eq "/init with the token is 204" 204 \
	"$(curl -s -o /dev/null -w '%{http_code}' -X POST -d '{"accessToken":"tok1","envVars":{}}' $U/init)"
r=$(curl -s -H 'X-Access-Token: tok1' $U/envs)
expect_eq "envVars {} replaces user vars" '{"E2B_SANDBOX":"false"}' "$r"

# --- hostile input; the daemon keeps serving ---
# raw: send stdin on a new connection, print the first line of the answer.
# Reads until that line is in or the server closes (HANG_S is a deadline).
raw() { timeout "$HANG_S" "$PY" -c '
import socket,sys
s=socket.create_connection(("127.0.0.1",'$ENVD_PORT'))
s.sendall(sys.stdin.buffer.read())
s.settimeout('$HANG_S')
d=b""
try:
    while b"\r\n" not in d:
        b=s.recv(65536)
        if not b: break
        d+=b
except Exception: pass
print(d.split(b"\r\n")[0].decode(errors="replace"))'; }
expect_match "malformed request line: 400" '^HTTP/1.1 400' "$(printf 'GARBAGE\r\n\r\n' | raw)"
expect_match "oversized header: 431" '^HTTP/1.1 431' "$("$PY" -c 'import sys; sys.stdout.write("GET /health HTTP/1.1\r\nX-Big: "+"a"*70000+"\r\n\r\n")' | raw)"
expect_match "broken chunked body: 400" '^HTTP/1.1 400' \
	"$(printf 'POST /process.Process/List HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Access-Token: tok1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n' | raw)"
expect_match "chunked request body works" '^HTTP/1.1 200' \
	"$(printf 'POST /process.Process/List HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Access-Token: tok1\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n1\r\n{\r\n1\r\n}\r\n0\r\n\r\n' | raw)"
expect_match "Expect: 100-continue is honoured" '^HTTP/1.1 100' \
	"$(printf 'POST /process.Process/List HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Access-Token: tok1\r\nContent-Length: 2\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n{}' | raw)"
printf 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x04\x09\x00\x00\x00\x00\x01garbage' | raw >/dev/null
check "h2 garbage frames do not kill envd" envd_alive
expect_match "token error before a broken body still answers" '^HTTP/1.1 401' \
	"$(printf 'POST /process.Process/List HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n' | raw)"
check "h2load 2000 requests over 10 streams" bash -c \
	"h2load -n 2000 -c 2 -m 10 $U/health 2>&1 | grep -q '2000 succeeded'"
expect_eq "still healthy after hostile input" 204 "$(curl -s -o /dev/null -w '%{http_code}' $U/health)"
check "daemon alive at the end" envd_alive
finish
