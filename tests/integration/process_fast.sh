#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# No truncated output: 200 fast commands in a row each return their complete
# stdout and stderr, then the end event; plus idle memory with many
# processes listed.
. "$(dirname "$0")/process_lib.sh"
start_envd

# One keep-alive HTTP/1.1 connection for all 200 calls, checked in Python.
res=$("$PY" - "$PORT" <<'PY'
import http.client, json, os, struct, base64, sys
conn = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=int(os.environ.get("HANG_S", "300")))
def start(cmd, args):
    body = json.dumps({"process": {"cmd": cmd, "args": args}, "stdin": False}).encode()
    conn.request("POST", "/process.Process/Start", b"\0" + struct.pack(">I", len(body)) + body,
                 {"Content-Type": "application/connect+json"})
    d = conn.getresponse().read(); i = 0; out = {"stdout": b"", "stderr": b""}; ev = []
    while i < len(d):
        f = d[i]; n = struct.unpack(">I", d[i+1:i+5])[0]; m = json.loads(d[i+5:i+5+n]); i += 5 + n
        if f & 2: ev.append("eos"); continue
        e = m["event"]; k = next(iter(e)); ev.append(k)
        if k == "data":
            for s in ("stdout", "stderr"):
                if s in e["data"]: out[s] += base64.b64decode(e["data"][s])
        if k == "end": end = e["end"]
    return out, ev, end
bad = 0
for i in range(200):
    n = 2000 + i
    out, ev, end = start("sh", ["-c", f"seq 1 {n}; echo err{i} >&2"])
    want = "".join(f"{k}\n" for k in range(1, n + 1)).encode()
    if out["stdout"] != want or out["stderr"] != f"err{i}\n".encode() or ev[0] != "start" \
       or ev[-2:] != ["end", "eos"] or end.get("exitCode", 0) != 0:
        bad += 1
        print("bad run", i, len(out["stdout"]), ev[:3], ev[-2:], end, file=sys.stderr)
print(bad)
PY
)
check "200 sh -c 'seq; echo >&2' runs complete" "0" "$res"

res=$("$PY" - "$PORT" <<'PY'
import http.client, json, os, struct, base64, sys
conn = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=int(os.environ.get("HANG_S", "300")))
bad = 0
for i in range(200):
    body = json.dumps({"process": {"cmd": "printf", "args": ["%s", "x" * (i + 1)]}, "stdin": False}).encode()
    conn.request("POST", "/process.Process/Start", b"\0" + struct.pack(">I", len(body)) + body,
                 {"Content-Type": "application/connect+json"})
    d = conn.getresponse().read(); i2 = 0; got = b""
    while i2 < len(d):
        n = struct.unpack(">I", d[i2+1:i2+5])[0]; m = json.loads(d[i2+5:i2+5+n]); i2 += 5 + n
        e = m.get("event", {})
        if "data" in e: got += base64.b64decode(e["data"].get("stdout", ""))
    if got != b"x" * (i + 1): bad += 1
print(bad)
PY
)
check "200 direct execs of a tiny command, output complete" "0" "$res"

# Finished processes keep their output for replay, within a global budget.
base=$(envd_rss_kb)
pids=$("$PY" - "$PORT" <<'PY'
import http.client, json, os, struct, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=int(os.environ.get("HANG_S", "300")))
body = json.dumps({"process": {"cmd": "head", "args": ["-c", "1000000", "/dev/urandom"]}, "stdin": False}).encode()
pids = []
for i in range(60):
    c.request("POST", "/process.Process/Start", b"\0" + struct.pack(">I", len(body)) + body,
              {"Content-Type": "application/connect+json"})
    d = c.getresponse().read()
    pids.append(json.loads(d[5:5 + struct.unpack(">I", d[1:5])[0]])["event"]["start"]["pid"])
print(pids[0], pids[-1])
PY
)
rss=$(envd_rss_kb)
grow=$(((rss - base) / 1024))
echo "# envd RSS: ${base} KiB before, ${rss} KiB after 60 finished processes with 1 MB of output each"
check "retained output stays within its budget (${grow} MiB)" yes "$([ "$grow" -lt 28 ] && echo yes)"
read -r oldest newest <<<"$pids"
out=$(stream Connect "{\"process\":{\"pid\":$newest},\"replayFrom\":\"0\"}")
check_re "the newest keeps its output" '^start data( data)* end eos$' "$(kinds <<<"$out")"
out=$(stream Connect "{\"process\":{\"pid\":$oldest},\"replayFrom\":\"0\"}")
check "the oldest reports its output as a gap, then its end" "start gap end eos" "$(kinds <<<"$out")"

# Idle memory with 1000 processes listed.
base=$(envd_rss_kb)
"$PY" - "$PORT" <<'PY'
import socket, json, struct, sys
socks = []
body = json.dumps({"process": {"cmd": "sleep", "args": ["3600"]}, "stdin": False, "tag": "idle"}).encode()
req = (b"POST /process.Process/Start HTTP/1.1\r\nHost: x\r\nContent-Type: application/connect+json\r\n"
       b"Connection: close\r\nContent-Length: %d\r\n\r\n" % (len(body) + 5)) + b"\0" + struct.pack(">I", len(body)) + body
for i in range(1000):
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
    s.sendall(req); s.recv(4096); s.close()   # read the start event, then go away
PY
n=$(unary List '{}' | grep -o '"pid"' | wc -l)
check "1000 processes listed" "1000" "$n"
rss=$(envd_rss_kb)
echo "# envd RSS: ${base} KiB idle, ${rss} KiB with 1000 processes listed"
grow=$(((rss - base) / 1024))
check "1000 listed processes cost under 8 MiB of RSS (${grow} MiB)" yes "$([ "$grow" -lt 8 ] && echo yes)"
# End them through envd, by pid (SIGKILL to each process group).
"$PY" - "$PORT" <<'PY'
import http.client, json, os, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=int(os.environ.get("HANG_S", "300")))
def call(m, body):
    c.request("POST", "/process.Process/" + m, json.dumps(body), {"Content-Type": "application/json"})
    return json.loads(c.getresponse().read())
for p in call("List", {}).get("processes", []):
    if p.get("tag") == "idle":
        call("SendSignal", {"process": {"pid": p["pid"]}, "signal": "SIGNAL_SIGKILL"})
PY
none_listed() { [ "$(unary List '{}' | grep -o '"pid"' | wc -l)" = 0 ]; }
wait_for 60 none_listed
check "all of them ended" "0" "$(unary List '{}' | grep -o '"pid"' | wc -l)"
summary
