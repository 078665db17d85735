#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Load, short form (make soak runs the long one through scripts/soak.sh):
# many concurrent streaming processes and many idle connections at once,
# then a long mixed run of requests; zero errors, bounded RSS, and the same
# number of fds before and after.
#   LOAD_PROCS   concurrent streaming processes   (default 100; soak: 1000)
#   LOAD_IDLE    idle connections held open       (default 1000; soak: 10000)
#   LOAD_SECS    how long the load is held        (default 5; soak: 60)
#   LOAD_REQS    requests in the mixed run        (default 20000; soak: 100000)
#   LOAD_EVERY   seconds between output lines     (default 0.05; soak: 1)
# The streams are CPU-bound work (each shell forks a sleep per line): they
# are waited for until every one has ended, however long a loaded machine
# takes; only HANG_S without a byte on any of them counts as a hang.
# The sanitizer build runs every part with a fifth of the numbers and a
# looser memory bound (its allocator keeps a quarantine).
cd "$(dirname "$0")/../.." || exit 1
. tests/lib.sh
ulimit -n 65536 2>/dev/null || ulimit -n 16384 2>/dev/null
case $ENVD_BIN in
*asan*) d=5 RSS_LIMIT_KB=$((512 * 1024)) ;;
*) d=1 RSS_LIMIT_KB=65536 ;;
esac
PROCS=${LOAD_PROCS:-$((100 / d))}
IDLE=${LOAD_IDLE:-$((1000 / d))}
SECS=${LOAD_SECS:-5}
REQS=${LOAD_REQS:-$((20000 / d))}
EVERY=${LOAD_EVERY:-0.05}

envd_start -max-conns $((IDLE + PROCS + 1000)) || exit 1
fds() { ls /proc/$ENVD_PID/fd | wc -l; }
rss_kb() { awk '/^VmRSS/ {print $2}' /proc/$ENVD_PID/status; }
# The baseline with no client connected: envd_start's health check may still
# be closing on envd's side.
conns() { ss -Htn state established state close-wait "( sport = :$ENVD_PORT )" | wc -l; }
no_conns() { [ "$(conns)" = 0 ]; }
wait_for 30 no_conns
fd0=$(fds)
rss0=$(rss_kb)

out=$("$PY" - "$ENVD_PORT" "$PROCS" "$IDLE" "$SECS" "$ENVD_PID" "$EVERY" <<'PY'
import os, socket, struct, sys, time, json, selectors
port, procs, idle, secs, pid = map(int, sys.argv[1:6])
hang = int(os.environ.get("HANG_S", "300"))
every = float(sys.argv[6])
def rss():
    for l in open(f"/proc/{pid}/status"):
        if l.startswith("VmRSS"): return int(l.split()[1])
# Idle connections: connected, one request answered, then left open.
idles = []
for i in range(idle):
    s = socket.create_connection(("127.0.0.1", port))
    idles.append(s)
for s in idles: s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
bad = 0
for s in idles:
    if not s.recv(4096).startswith(b"HTTP/1.1 204"): bad += 1
# Streaming processes: each prints a line every 50 ms for the duration.
n_lines = max(1, int(secs / every))
body = json.dumps({"process": {"cmd": "sh", "args": ["-c", f"i=0; while [ $i -lt {n_lines} ]; do echo line $i; i=$((i+1)); sleep {every}; done"]}, "stdin": False}).encode()
req = (b"POST /process.Process/Start HTTP/1.1\r\nHost: x\r\nContent-Type: application/connect+json\r\n"
       b"Content-Length: %d\r\n\r\n" % (len(body) + 5)) + b"\0" + struct.pack(">I", len(body)) + body
sel = selectors.DefaultSelector()
streams = {}
for i in range(procs):
    s = socket.create_connection(("127.0.0.1", port)); s.setblocking(False)
    s.sendall(req); streams[s] = b""; sel.register(s, selectors.EVENT_READ)
peak = rss(); done = 0; last_progress = time.time()
while done < procs and time.time() - last_progress < hang:
    for key, _ in sel.select(timeout=1):
        s = key.fileobj
        try: b = s.recv(1 << 16)
        except BlockingIOError: continue
        last_progress = time.time()
        if b: streams[s] += b
        if not b or b.endswith(b"0\r\n\r\n"):
            sel.unregister(s); s.close(); done += 1
    peak = max(peak, rss())
ok = 0
for data in streams.values():
    n = data.count(b'"stdout"')
    if b'"exit status 0"' in data and b"\x02" in data: ok += 1
# Idle connections still work after the load.
for s in idles[:50]:
    s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    if not s.recv(4096).startswith(b"HTTP/1.1 204"): bad += 1
for s in idles: s.close()
print(json.dumps({"ok_streams": ok, "idle_errors": bad, "peak_rss_kb": peak}))
PY
)
echo "load: $out"
ok_streams=$("$PY" -c 'import json,sys; print(json.loads(sys.argv[1])["ok_streams"])' "$out")
idle_err=$("$PY" -c 'import json,sys; print(json.loads(sys.argv[1])["idle_errors"])' "$out")
peak=$("$PY" -c 'import json,sys; print(json.loads(sys.argv[1])["peak_rss_kb"])' "$out")
expect_eq "$PROCS concurrent streams all ended with exit 0" "$PROCS" "$ok_streams"
expect_eq "$IDLE idle connections served, zero errors" 0 "$idle_err"
expect_eq "peak RSS bounded (${peak} kB < $((RSS_LIMIT_KB / 1024)) MiB)" 1 $(( peak < RSS_LIMIT_KB ))

# A long mixed run: health, RPC, h2, errors; fds must come back.
h2load -n "$REQS" -c 10 -m 10 "$ENVD_URL/health" >/tmp/load-h2.$$ 2>&1
printf '{}' >/tmp/load-body.$$
h2load --h1 -n "$((REQS / 2))" -c 10 -H 'content-type: application/json' -d /tmp/load-body.$$ \
	"$ENVD_URL/process.Process/List" >/tmp/load-h1.$$ 2>&1
expect_match "h2load $REQS h2 requests, all succeeded" "$REQS succeeded, 0 failed, 0 errored" "$(cat /tmp/load-h2.$$)"
expect_match "h2load $((REQS / 2)) HTTP/1.1 List RPCs, all succeeded" \
	"$((REQS / 2)) succeeded, 0 failed, 0 errored" "$(cat /tmp/load-h1.$$)"
rm -f /tmp/load-h2.$$ /tmp/load-h1.$$ /tmp/load-body.$$
# envd closes its side of the last connections on its own time.
fds_back() { [ "$(fds)" -le "$fd0" ]; }
wait_for 60 fds_back
fd1=$(fds)
rss1=$(rss_kb)
check "no fd leaked (before $fd0, after $fd1)" test "$fd1" -le "$fd0"
echo "figures: RSS ${rss0} kB idle, ${peak} kB peak under load, ${rss1} kB after; fds $fd0 -> $fd1"
check "daemon alive" envd_alive
finish
