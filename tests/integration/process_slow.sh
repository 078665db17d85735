#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Slow and dead subscribers (docs/protocol.md, "Output, subscribers and the
# end", and the issue's "nothing lost to a slow subscriber"): a stalled
# stream never holds up a fast one or the child, it is ended with an error
# it can see, and envd's memory stays bounded while a child writes a lot to
# a slow reader.
. "$(dirname "$0")/process_lib.sh"
start_envd

# count < stream: "bytes=<stdout bytes> end=<status or -> err=<code or ->"
count() {
	"$PY" -c '
import sys, struct, json, base64
r = sys.stdin.buffer; n = 0; end = "-"; err = "-"
while True:
    h = r.read(5)
    if len(h) < 5: break
    m = json.loads(r.read(struct.unpack(">I", h[1:5])[0]))
    e = m.get("event", {})
    if "data" in e: n += len(base64.b64decode(e["data"].get("stdout", "")))
    if "end" in e: end = e["end"]["status"].replace(" ", "_")
    if "error" in m: err = m["error"]["code"] + ":" + m["error"]["message"].replace(" ", "_")
print("bytes=%d end=%s err=%s" % (n, end, err))'
}
# raw_bg OUT METHOD JSON: raw stream bytes into OUT, in the background; $! is
# the curl itself, so it can be stopped and waited for.
raw_bg() {
	frame "$3" >"$1.req"
	curl -s -N --max-time "$HANG_S" -X POST "$(url "$2")" \
		-H 'Content-Type: application/connect+json' --data-binary @"$1.req" >"$1" &
}
# start_event_in FILE: the stream in FILE has its start event (the subscriber
# is attached and the pid is known).
start_event_in() { grep -aq '"start":{"pid":[0-9]' "$1" 2>/dev/null; }
pid_of() { head -c 200 "$1" | grep -ao '"pid":[0-9]*' | head -1 | grep -o '[0-9]*$'; }
# gated CMD: GATED becomes a shell command line that waits for the file $GO
# before it runs CMD, so a test can set up its readers first, whatever the
# machine's speed.
gate=0
gated() {
	gate=$((gate + 1))
	GO=$TMP/go.$gate
	GATED="while [ ! -e $GO ]; do sleep 0.02; done; $1"
}

# --- a stalled subscriber does not hold up a fast one ---
SZ=20000000
gated "head -c $SZ /dev/zero | tr '\\\\0' x"
raw_bg "$TMP/a.bin" Start "{\"process\":{\"cmd\":\"sh\",\"args\":[\"-c\",\"$GATED\"]},\"stdin\":false}"
bga=$!
wait_for 60 start_event_in "$TMP/a.bin"
pid=$(pid_of "$TMP/a.bin")
check_re "started" '^[0-9]+$' "$pid"
# The slow one: attaches (its start event has arrived), then stops reading
# entirely before the child writes anything.
raw_bg "$TMP/b.bin" Connect "{\"process\":{\"pid\":$pid}}"
bcurl=$!
wait_for 60 start_event_in "$TMP/b.bin" && ok "the second subscriber is attached" ||
	nok "the second subscriber is attached" "$(head -c 200 "$TMP/b.bin")"
kill -STOP "$bcurl"
t0=$(now_ms)
touch "$GO"
wait $bga
t1=$(now_ms)
check "fast subscriber got every byte and the end" "bytes=$SZ end=exit_status_0 err=-" "$(count <"$TMP/a.bin")"
# Held up by the stalled one, it would have waited for the 10 s stall
# timeout (OUTPUT_STALL_S), which ends the stalled stream with "stopped
# reading"; the fast one going ahead ends it with "fell behind" instead.
# That, not the time taken, is what shows it was not held up: a loaded
# machine can take longer than 10 s for the 20 MB.
ms=$((t1 - t0))
kill -CONT "$bcurl"
wait $bcurl
b_res=$(count <"$TMP/b.bin")
check_re "and was not held up until the stall timeout ($ms ms)" '^bytes=[0-9]+ end=- err=resource_exhausted:' \
	"$(grep -v stream_stopped_reading <<<"$b_res")"
check_re "the stalled subscriber was told it fell behind" 'err=resource_exhausted:stream_fell_behind' "$b_res"

# --- a lone stalled subscriber is dropped; the child goes on ---
gated 'head -c 64000000 /dev/zero; echo done >&2'
raw_bg "$TMP/c.bin" Start "{\"process\":{\"cmd\":\"sh\",\"args\":[\"-c\",\"$GATED\"]},\"stdin\":false}"
ccurl=$!
wait_for 60 start_event_in "$TMP/c.bin"
pid=$(pid_of "$TMP/c.bin")
kill -STOP "$ccurl"
touch "$GO"
# Paced: with its only reader stopped the child cannot get 64 MB out, so it
# is still there however long this takes. Paused shows as its pipe to envd
# staying full (the writer is head, a child of the shell).
pipe_full() {
	local w
	w=$(pgrep -P "$pid" -x head | head -n1)
	[ -n "$w" ] && [ "$("$PY" -c '
import fcntl, os, struct, sys, termios
fd = os.open("/proc/%s/fd/1" % sys.argv[1], os.O_RDONLY | os.O_NONBLOCK)
print(struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0" * 4))[0])' "$w" 2>/dev/null)" -ge 4096 ] 2>/dev/null
}
wait_for 30 pipe_full
check_re "paced while its only reader is behind" "\"pid\":$pid" "$(unary List '{}')"
listed() { unary List '{}' | grep -q "\"pid\":$pid"; }
# The stall timeout (10 s) drops the reader; then the child finishes.
if wait_for 90 eval '! listed'; then finished=yes; else finished=no; fi
check "finished after the stall timeout dropped the reader" "yes" "$finished"
kill -CONT "$ccurl"
wait $ccurl
check_re "the dropped reader saw why" 'err=resource_exhausted:stream_stopped_reading' "$(count <"$TMP/c.bin")"
out=$(stream Connect "{\"process\":{\"pid\":$pid}}")
check_re "the process still ended normally" '"exit status 0"' "$out"

# --- a slow (but reading) lone subscriber gets everything, even after exit ---
res=$(frame '{"process":{"cmd":"head","args":["-c","4000000","/dev/zero"]},"stdin":false}' |
	curl -s -N --limit-rate 2M --max-time "$HANG_S" -X POST "$(url Start)" \
		-H 'Content-Type: application/connect+json' --data-binary @- | count)
check "slow reader of a short-lived child gets all output and the end" \
	"bytes=4000000 end=exit_status_0 err=-" "$res"

# --- attached streams per process are bounded ---
stream Start '{"process":{"cmd":"sleep","args":["3600"]},"stdin":false}' >"$TMP/m.out" &
bgm=$!
mpid=$(pid_in "$TMP/m.out") || exit 1
"$PY" - "$PORT" "$mpid" >"$TMP/many" <<'PY'
import os, socket, json, struct, sys
body = json.dumps({"process": {"pid": int(sys.argv[2])}}).encode()
req = (b"POST /process.Process/Connect HTTP/1.1\r\nHost: x\r\nContent-Type: application/connect+json\r\n"
       b"Content-Length: %d\r\n\r\n" % (len(body) + 5)) + b"\0" + struct.pack(">I", len(body)) + body
socks = []
for i in range(128):
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1]))); s.sendall(req); socks.append(s)
hang = int(os.environ.get("HANG_S", "300"))
for s in socks:
    s.settimeout(hang)
    s.recv(4096)
s = socket.create_connection(("127.0.0.1", int(sys.argv[1]))); s.sendall(req)
# Read until the refusal is in (or the server closes); a deadline only.
s.settimeout(hang)
data = b""
while b"attached streams" not in data:
    try:
        b = s.recv(4096)
    except socket.timeout:
        break
    if not b:
        break
    data += b
body = data.decode("latin1").split("\r\n\r\n", 1)[-1]
print("".join(c if " " <= c <= "~" else "." for c in body))
PY
check_re "stream 129 on one process is refused" 'resource_exhausted.*already has 128 attached streams' "$(cat "$TMP/many")"
unary SendSignal "{\"process\":{\"pid\":$mpid},\"signal\":\"SIGNAL_SIGKILL\"}" >/dev/null
wait $bgm

# --- bounded memory: a child writes 1 GiB to a reader at 8 MB/s ---
base=$(envd_rss_kb)
frame '{"process":{"cmd":"head","args":["-c","1073741824","/dev/zero"]},"stdin":false}' |
	curl -s -N --limit-rate 8M --max-time 4 -X POST "$(url Start)" \
		-H 'Content-Type: application/connect+json' --data-binary @- >/dev/null &
bgd=$!
peak=0
for _ in $(seq 30); do
	sleep 0.1
	r=$(envd_rss_kb)
	[ "$r" -gt "$peak" ] && peak=$r
done
wait $bgd
pid=$(unary List '{}' | grep -o '"pid":[0-9]*' | head -1 | grep -o '[0-9]*$')
[ -n "$pid" ] && unary SendSignal "{\"process\":{\"pid\":$pid},\"signal\":\"SIGNAL_SIGKILL\"}" >/dev/null
grow=$(((peak - base) / 1024))
echo "# envd RSS: idle ${base} KiB, peak ${peak} KiB while streaming 1 GiB to a slow reader"
check "RSS grew by less than 24 MiB (${grow} MiB)" yes "$([ "$grow" -lt 24 ] && echo yes)"
summary
