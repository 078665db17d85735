#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Input back-pressure: more input than envd buffers (4 MiB) reaches a
# process that only starts reading later, intact and without errors:
# StreamInput over HTTP/1.1 chunked and over h2c (the request body is
# paused while the pipe is full), and one large unary SendInput (answered
# once the process has read it all). envd's memory stays bounded.
. "$(dirname "$0")/process_lib.sh"
start_envd

# payload FILE MIB: deterministic pseudo-random bytes.
payload() { head -c $(($2 * 1024 * 1024)) /dev/urandom >"$1"; }
sum_of() { sha256sum "$1" | cut -d' ' -f1; }

# stream_file FILE PID CHUNK_KIB > framed StreamInput body
stream_body() {
	/usr/bin/python3 - "$1" "$2" "$3" <<'PY'
import sys, struct, json, base64
path, pid, chunk = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]) * 1024
out = sys.stdout.buffer
def env(o):
    b = json.dumps(o).encode()
    out.write(b"\0" + struct.pack(">I", len(b)) + b)
env({"start": {"process": {"pid": pid}}})
with open(path, "rb") as f:
    while True:
        d = f.read(chunk)
        if not d:
            break
        env({"data": {"input": {"stdin": base64.b64encode(d).decode()}}})
PY
}

# start_sum NAME: sh -c 'sleep 1; exec sha256sum' with stdin; sets SPID/PID.
start_sum() {
	stream Start '{"process":{"cmd":"sh","args":["-c","sleep 1; exec sha256sum"]},"stdin":true}' >"$TMP/$1.out" &
	SPID=$!
	PID=$(pid_in "$TMP/$1.out") || exit 1
}
# digest of a finished sha256sum stream
digest_of() { stdout_of <"$TMP/$1.out" | cut -d' ' -f1; }

rss0=$(envd_rss_kb)
maxrss=0
watch_rss() { # background sampler of envd's RSS peak
	while kill -0 "$ENVD_PID" 2>/dev/null; do
		r=$(envd_rss_kb)
		[ -n "$r" ] && [ "$r" -gt "$(cat "$TMP/maxrss" 2>/dev/null || echo 0)" ] && echo "$r" >"$TMP/maxrss"
		sleep 0.02
	done
}
echo 0 >"$TMP/maxrss"
watch_rss &
WPID=$!

# --- 6 MiB through StreamInput (24 x 256 KiB) over HTTP/1.1 chunked ---
payload "$TMP/six" 6
start_sum h1
stream_body "$TMP/six" "$PID" 256 >"$TMP/h1.body"
resp=$(curl -s --max-time "$HANG_S" -X POST "$(url StreamInput)" -H 'Content-Type: application/connect+json' \
	-H 'Transfer-Encoding: chunked' --data-binary @"$TMP/h1.body" | decode)
check "StreamInput h1: accepted, no error" "0 {\"inputOffset\": \"$(stat -c %s "$TMP/six")\"}"$'\n2 {}' "$resp"
check "CloseStdin" "200 {}" "$(unary CloseStdin "{\"process\":{\"pid\":$PID}}")"
wait $SPID
check "StreamInput h1: 6 MiB arrive intact" "$(sum_of "$TMP/six")" "$(digest_of h1)"

# --- the same over h2c ---
start_sum h2
stream_body "$TMP/six" "$PID" 256 >"$TMP/h2.body"
resp=$(nghttp -d "$TMP/h2.body" -H ':method: POST' -H 'content-type: application/connect+json' \
	"http://127.0.0.1:$PORT/process.Process/StreamInput" | decode)
check "StreamInput h2c: accepted, no error" "0 {\"inputOffset\": \"$(stat -c %s "$TMP/six")\"}"$'\n2 {}' "$resp"
check "CloseStdin (h2 run)" "200 {}" "$(unary CloseStdin "{\"process\":{\"pid\":$PID}}")"
wait $SPID
check "StreamInput h2c: 6 MiB arrive intact" "$(sum_of "$TMP/six")" "$(digest_of h2)"

# --- 5 MiB in one unary SendInput (more than the 4 MiB buffer) ---
# Requests are built before the processes start (by tag), so a slow
# machine cannot reorder them.
payload "$TMP/five" 5
unary_json() { # TAG FILE
	/usr/bin/python3 - "$1" "$2" <<'PY'
import sys, json, base64
d = open(sys.argv[2], "rb").read()
print(json.dumps({"process": {"tag": sys.argv[1]}, "input": {"stdin": base64.b64encode(d).decode()}}))
PY
}
unary_json "sum-$$" "$TMP/five" >"$TMP/un.json"
unary_json "exit-$$" "$TMP/five" >"$TMP/ex.json"
stream Start "{\"process\":{\"cmd\":\"sh\",\"args\":[\"-c\",\"sleep 1; exec sha256sum\"]},\"stdin\":true,\"tag\":\"sum-$$\"}" >"$TMP/un.out" &
SPID=$!
PID=$(pid_in "$TMP/un.out") || exit 1
t0=$(date +%s%N)
resp=$(curl -s --max-time "$HANG_S" -X POST "$(url SendInput)" -H 'Content-Type: application/json' \
	--data-binary @"$TMP/un.json" -w ' %{http_code}')
t1=$(date +%s%N)
check "SendInput 5 MiB: 200 once written" "{} 200" "$resp"
check "CloseStdin (unary run)" "200 {}" "$(unary CloseStdin "{\"process\":{\"pid\":$PID}}")"
wait $SPID
check "SendInput: 5 MiB arrive intact" "$(sum_of "$TMP/five")" "$(digest_of un)"
echo "# 5 MiB SendInput answered after $(((t1 - t0) / 1000000)) ms"

# --- a reader that exits: the waiting SendInput gets the broken-pipe error ---
# The child exits once the request is waiting on its full stdin pipe (not
# after a fixed time a slow machine might not have sent the request in).
stream Start "{\"process\":{\"cmd\":\"sh\",\"args\":[\"-c\",\"while [ ! -e $TMP/exit-go ]; do sleep 0.05; done; exit 0\"]},\"stdin\":true,\"tag\":\"exit-$$\"}" >"$TMP/ex.out" &
SPID=$!
PID=$(pid_in "$TMP/ex.out") || exit 1
curl -s --max-time "$HANG_S" -X POST "$(url SendInput)" -H 'Content-Type: application/json' \
	--data-binary @"$TMP/ex.json" -w ' %{http_code}' >"$TMP/ex.resp" &
CPID=$!
stdin_full() { # the child's stdin pipe holds at least 64 KiB
	[ "$("$PY" -c '
import fcntl, os, struct, sys, termios
fd = os.open("/proc/%s/fd/0" % sys.argv[1], os.O_RDONLY | os.O_NONBLOCK)
print(struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0" * 4))[0])' "$PID" 2>/dev/null)" -ge 65536 ] 2>/dev/null
}
wait_for 30 stdin_full
touch "$TMP/exit-go"
wait $CPID
resp=$(cat "$TMP/ex.resp")
check_re "SendInput to a process that exits: broken pipe" '"code":"internal".*broken pipe.* 500$' "$resp"
wait $SPID

kill $WPID 2>/dev/null
wait $WPID 2>/dev/null
peak=$(cat "$TMP/maxrss")
grow=$((peak - rss0))
# 6 MiB streams and a 5 MiB request (held once as JSON, once decoded, plus
# the 4 MiB input bound): anything near the sum of all input is a leak of
# back-pressure. The sanitizer build has its own overheads.
case "$ENVD_BIN" in *asan*) lim=$((160 * 1024)) ;; *) lim=$((40 * 1024)) ;; esac
check_re "envd RSS growth bounded (${grow} KiB, peak ${peak} KiB)" '^ok$' "$([ "$grow" -lt "$lim" ] && echo ok)"
check "envd alive" "204" "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/health")"
summary
