#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# process.Process over the wire: stream framing (JSON and binary, HTTP/1.1 and
# h2c), errors on streams, StreamInput as a chunked client stream, and the
# unary error codes (docs/protocol.md, "process.Process").
. "$(dirname "$0")/process_lib.sh"
start_envd

# --- Start: start first, data, end, then the end-stream envelope {} ---
out=$(stream Start '{"process":{"cmd":"/bin/sh","args":["-c","echo hi; echo oops >&2; exit 2"]},"stdin":false}')
first=$(head -1 <<<"$out")
check_re "start event first, flag 0" '^0 \{"event": \{"start": \{"pid": [0-9]+\}\}\}$' "$first"
# (usage is our additive field, its numbers vary)
check_re "end event second to last" \
	'^0 \{"event": \{"end": \{"error": "exit status 2", "exitCode": 2, "exited": true, "status": "exit status 2", "usage": \{[^}]*"wallUsec": "[0-9]+"\}\}\}\}$' \
	"$(tail -2 <<<"$out" | head -1)"
check "end-stream envelope {} with flag 2" '2 {}' "$(tail -1 <<<"$out")"
check_re "stdout chunk with offset" '"stdout": "hi\\n"' "$out"
check_re "stderr chunk separate" '"stderr": "oops\\n"' "$out"
check_re "offsets are set" '"offset": "0"' "$out"

hdrs=$(frame '{"process":{"cmd":"/bin/true"}}' | curl -s -D - -o /dev/null -X POST "$(url Start)" \
	-H 'Content-Type: application/connect+json' --data-binary @-)
check_re "stream status 200" '^HTTP/1.1 200' "$hdrs"
check_re "stream content type" '[Cc]ontent-[Tt]ype: application/connect\+json' "$hdrs"

# --- errors on streams: HTTP 200 + end-stream error, no messages ---
out=$(stream Start '{"process":{"cmd":"/bin/true","cwd":"/nonexistent-dir"}}')
check "bad cwd is invalid_argument on the stream" \
	'2 {"error": {"code": "invalid_argument", "message": "cwd '"'"'/nonexistent-dir'"'"' does not exist"}}' "$out"
out=$(stream Start '{"process":{"cmd":"/bin/true","cwd":"/etc/passwd"}}')
check_re "cwd that is a file fails at spawn" \
	'^2 .*invalid_argument.*error starting process .*/bin/true .*chdir /etc/passwd: not a directory' "$out"
out=$(stream Connect '{"process":{"pid":999999}}')
check "connect unknown pid" '2 {"error": {"code": "not_found", "message": "process with pid 999999 not found"}}' "$out"
out=$(stream Connect '{"process":{"tag":"nope"}}')
check "connect unknown tag" '2 {"error": {"code": "not_found", "message": "process with tag nope not found"}}' "$out"
out=$(stream Connect '{"process":{}}')
check_re "connect without selector" 'unimplemented.*invalid input type \*process.ProcessSelector' "$out"

# --- missing command: not an RPC error ---
out=$(stream Start '{"process":{"cmd":"no-such-cmd-xyz"},"stdin":false}')
check_re "missing command: message on stderr" '"stderr": "/bin/sh: 1: exec: no-such-cmd-xyz: not found\\n"' "$out"
check_re "missing command: exit 127" '"exitCode": 127' "$out"

# --- binary protobuf framing ---
"$PY" - "$TMP/start.bin" <<'PY'
import struct, sys
def s(field, b): return bytes([field << 3 | 2, len(b)]) + b
cfg = s(1, b"/bin/echo") + s(2, b"binary")
msg = s(1, cfg) + bytes([4 << 3, 0])  # stdin: false
open(sys.argv[1], "wb").write(b"\0" + struct.pack(">I", len(msg)) + msg)
PY
curl -s -D "$TMP/h" -o "$TMP/resp.bin" -X POST "$(url Start)" -H 'Content-Type: application/connect+proto' \
	--data-binary @"$TMP/start.bin"
flags=$("$PY" - "$TMP/resp.bin" <<'PY'
import struct, sys
d = open(sys.argv[1], "rb").read(); i = 0; out = []
while i + 5 <= len(d):
    f = d[i]; n = struct.unpack(">I", d[i+1:i+5])[0]; p = d[i+5:i+5+n]; i += 5 + n
    out.append(str(f) + (":" + p.decode() if f & 2 else ("/data" if b"binary\n" in p else "")))
print(" ".join(out))
PY
)
check "binary stream: start, data, end, end-stream" "0 0/data 0 2:{}" "$flags"
check_re "binary content type" 'application/connect\+proto' "$(cat "$TMP/h")"

# --- h2c (prior knowledge) ---
frame '{"process":{"cmd":"/bin/echo","args":["over","h2"]},"stdin":false}' >"$TMP/h2req"
h2=$(nghttp -d "$TMP/h2req" -H ':method: POST' -H 'content-type: application/connect+json' \
	"http://127.0.0.1:$PORT/process.Process/Start" 2>&1 | decode)
check_re "h2c Start stream" '"stdout": "over h2\\n"' "$h2"
check "h2c end-stream" "2 {}" "$(tail -1 <<<"$h2")"

# --- StreamInput as a chunked HTTP/1.1 client stream ---
stream Start '{"process":{"cmd":"cat"},"tag":"cat-in"}' >"$TMP/cat.out" &
spid=$!
pid=$(pid_in "$TMP/cat.out") || exit 1
frame "{\"start\":{\"process\":{\"pid\":$pid}}}" \
	'{"data":{"input":{"stdin":"aGVsbG8g"}}}' '{"keepalive":{}}' \
	'{"data":{"input":{"stdin":"d29ybGQK"}}}' >"$TMP/si"
resp=$(curl -s -X POST "$(url StreamInput)" -H 'Content-Type: application/connect+json' \
	-H 'Transfer-Encoding: chunked' --data-binary @"$TMP/si" | decode)
check "StreamInput reply then end-stream (the input taken)" $'0 {"inputOffset": "12"}\n2 {}' "$resp"
# by tag this time, over HTTP/2
frame '{"start":{"process":{"tag":"cat-in"}}}' '{"data":{"input":{"stdin":"aDIK"}}}' >"$TMP/si2"
resp=$(nghttp -d "$TMP/si2" -H ':method: POST' -H 'content-type: application/connect+json' \
	"http://127.0.0.1:$PORT/process.Process/StreamInput" | decode)
check "StreamInput over h2c" $'0 {"inputOffset": "15"}\n2 {}' "$resp"
check "CloseStdin" "200 {}" "$(unary CloseStdin "{\"process\":{\"pid\":$pid}}")"
wait $spid
check "cat got every StreamInput byte" $'hello world\nh2' "$(stdout_of <"$TMP/cat.out")"
check_re "cat ended with 0" '"exited": true, "status": "exit status 0"' "$(cat "$TMP/cat.out")"

frame '{"data":{"input":{"stdin":"eA=="}}}' >"$TMP/si3"
resp=$(curl -s -X POST "$(url StreamInput)" -H 'Content-Type: application/connect+json' \
	--data-binary @"$TMP/si3" | decode)
check_re "StreamInput data before start is failed_precondition" '^2 .*"failed_precondition"' "$resp"

# --- unary errors ---
stream Start '{"process":{"cmd":"sleep","args":["3600"]},"stdin":false}' >"$TMP/sl.out" &
bg1=$!
spid2=$(pid_in "$TMP/sl.out") || exit 1
stream Start '{"process":{"cmd":"sleep","args":["3600"]}}' >"$TMP/sl2.out" &
bg2=$!
spid3=$(pid_in "$TMP/sl2.out") || exit 1
check "CloseStdin of a process that does not read" "200 {}" "$(unary CloseStdin "{\"process\":{\"pid\":$spid3}}")"
check "CloseStdin again (idempotent)" "200 {}" "$(unary CloseStdin "{\"process\":{\"pid\":$spid3}}")"
check "CloseStdin with stdin:false" "200 {}" "$(unary CloseStdin "{\"process\":{\"pid\":$spid2}}")"
check "SendSignal SIGKILL" "200 {}" "$(unary SendSignal "{\"process\":{\"pid\":$spid3},\"signal\":\"SIGNAL_SIGKILL\"}")"
check_re "SendInput with stdin:false" '^500 .*error writing to stdin: stdin not enabled or closed' \
	"$(unary SendInput "{\"process\":{\"pid\":$spid2},\"input\":{\"stdin\":\"eA==\"}}")"
check_re "SendInput pty bytes to a pipe process" '^500 .*tty not assigned to process' \
	"$(unary SendInput "{\"process\":{\"pid\":$spid2},\"input\":{\"pty\":\"eA==\"}}")"
check_re "SendInput without input" '^50[01] .*unimplemented.*invalid input type <nil>' \
	"$(unary SendInput "{\"process\":{\"pid\":$spid2}}")"
check_re "SendInput unknown pid" '^404 .*not_found.*process with pid 999999 not found' \
	"$(unary SendInput '{"process":{"pid":999999},"input":{"stdin":"eA=="}}')"
check_re "Update on a pipe process" '^500 .*error resizing tty: tty not assigned to process' \
	"$(unary Update "{\"process\":{\"pid\":$spid2},\"pty\":{\"size\":{\"cols\":10,\"rows\":10}}}")"
check "Update without pty is a no-op" "200 {}" "$(unary Update "{\"process\":{\"pid\":$spid2}}")"
check_re "SendSignal unspecified" '^50[01] .*unimplemented.*invalid signal: SIGNAL_UNSPECIFIED' \
	"$(unary SendSignal "{\"process\":{\"pid\":$spid2}}")"
check_re "SendSignal by selector-less request" '^50[01] .*unimplemented.*invalid input type \*process.ProcessSelector' \
	"$(unary SendSignal '{"process":{},"signal":"SIGNAL_SIGKILL"}')"
check "SendSignal SIGTERM" "200 {}" "$(unary SendSignal "{\"process\":{\"pid\":$spid2},\"signal\":\"SIGNAL_SIGTERM\"}")"
wait $bg1 $bg2
check_re "SIGKILL end event" '"exitCode": -1, .*"status": "signal: killed"' "$(cat "$TMP/sl2.out")"
check_re "SIGTERM end event" '"exitCode": -1, .*"status": "signal: terminated"' "$(cat "$TMP/sl.out")"

summary
