#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Helpers for upgrade.sh: Connect streams, a /health hammer, a forwarded
# port probe. Every wait has a generous deadline and ends on the event.
import base64
import json
import os
import socket
import struct
import sys
import time
import urllib.request

# How long a wait for an event goes on before it counts as a hang (as in
# tests/common.sh).
HANG_S = int(os.environ.get("HANG_S", "300"))

def frame(obj):
    b = json.dumps(obj).encode()
    return b"\0" + struct.pack(">I", len(b)) + b


def stream(url, method, body, token, seconds, until=None, first_within=None):
    """Server stream for at most `seconds` (or until until(events) is true):
    returns the list of decoded envelopes, an end-stream envelope last.
    With first_within, the `seconds` count from the first bytes received,
    which may take up to first_within: a window over what the stream sends,
    not over how fast a loaded machine gets to send it."""
    host, port = url.split("//")[1].split(":")
    s = socket.create_connection((host, int(port)), timeout=max(seconds, first_within or 0) + 5)
    payload = frame(body)
    req = ("POST /process.Process/%s HTTP/1.1\r\nHost: x\r\nContent-Type: application/connect+json\r\n"
           "Connect-Protocol-Version: 1\r\nX-Access-Token: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
           % (method, token, len(payload))).encode() + payload
    s.sendall(req)
    deadline = time.time() + (first_within if first_within else seconds)
    waiting_first = bool(first_within)
    buf = b""
    head = None
    events = []
    body = b""
    while time.time() < deadline:
        s.settimeout(max(0.05, deadline - time.time()))
        try:
            d = s.recv(65536)
        except socket.timeout:
            break
        if not d:
            break
        if waiting_first:
            waiting_first = False
            deadline = time.time() + seconds
        buf += d
        if head is None:
            i = buf.find(b"\r\n\r\n")
            if i < 0:
                continue
            head, buf = buf[:i], buf[i + 4:]
            chunked = b"chunked" in head.lower()
        # de-chunk what we have
        if chunked:
            while True:
                i = buf.find(b"\r\n")
                if i < 0:
                    break
                n = int(buf[:i].split(b";")[0], 16)
                if len(buf) < i + 2 + n + 2:
                    break
                body += buf[i + 2:i + 2 + n]
                buf = buf[i + 2 + n + 2:]
                if n == 0:
                    break
        else:
            body, buf = body + buf, b""
        while len(body) >= 5:
            n = struct.unpack(">I", body[1:5])[0]
            if len(body) < 5 + n:
                break
            events.append((body[0], json.loads(body[5:5 + n])))
            body = body[5 + n:]
        if events and events[-1][0] & 2:
            break
        if until and until(events):
            break
    s.close()
    return events


def data_of(events, kind="stdout"):
    out = []
    for f, m in events:
        d = m.get("event", {}).get("data")
        if d and kind in d:
            out.append((int(d.get("offset", "0")), base64.b64decode(d[kind])))
    return out


def cmd_counter(url, token, tag):
    """Replay from 0 and check the numbered lines are 1..N, contiguous."""
    ev = stream(url, "Connect", {"process": {"tag": tag}, "replayFrom": "0"}, token, 1.5, first_within=HANG_S)
    chunks = data_of(ev)
    gaps = [m for f, m in ev if "gap" in m.get("event", {})]
    off = 0
    text = b""
    for o, d in chunks:
        if o != off:
            print("offset jump: expected %d got %d" % (off, o))
            return 1
        off += len(d)
        text += d
    lines = text.decode().split("\n")
    if lines and lines[-1] != "":
        lines = lines[:-1]  # a line being written
    else:
        lines = lines[:-1]
    nums = [int(x) for x in lines]
    if gaps or nums != list(range(1, len(nums) + 1)):
        bad = next((i for i, v in enumerate(nums) if v != i + 1), None)
        print("not 1..N: gaps=%s first-bad-index=%s around=%s" % (gaps, bad, nums[max(0, (bad or 0) - 3):(bad or 0) + 3]))
        return 1
    print(len(nums))
    return 0


def cmd_pty(url, token, pid):
    """Type a command into the PTY shell and wait for its answer."""
    got = []

    def until(events):
        txt = b"".join(d for _, d in data_of(events, "pty"))
        return b"pty-alive-42" in txt

    import threading
    res = {}

    def reader():
        res["ev"] = stream(url, "Connect", {"process": {"pid": pid}}, token, HANG_S, until)

    t = threading.Thread(target=reader)
    t.start()
    time.sleep(0.3)
    inp = json.dumps({"process": {"pid": pid}, "input": {"pty": base64.b64encode(b"echo pty-alive-$((6*7))\n").decode()}}).encode()
    req = urllib.request.Request(url + "/process.Process/SendInput", data=inp,
                                 headers={"Content-Type": "application/json", "X-Access-Token": token})
    urllib.request.urlopen(req, timeout=HANG_S).read()
    t.join()
    txt = b"".join(d for _, d in data_of(res.get("ev", []), "pty"))
    if b"pty-alive-42" in txt:
        print("ok")
        return 0
    print("no answer: %r" % txt[-200:])
    return 1


def cmd_hammer(url, out, stop):
    """GET /health on a fresh connection, back to back, until `stop` exists.
    Writes: requests ok refused other max_gap_ms."""
    host, port = url.split("//")[1].split(":")
    ok = refused = other = 0
    last_ok = None
    max_gap = 0.0
    gap_at = None
    while not os.path.exists(stop):
        t0 = time.time()
        try:
            s = socket.create_connection((host, int(port)), timeout=HANG_S)
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            r = b""
            while True:
                d = s.recv(4096)
                if not d:
                    break
                r += d
            s.close()
            if r.startswith(b"HTTP/1.1 204"):
                now = time.time()
                if last_ok is not None and now - last_ok > max_gap:
                    max_gap = now - last_ok
                    gap_at = last_ok
                last_ok = now
                ok += 1
            else:
                other += 1
        except ConnectionRefusedError:
            refused += 1
        except OSError:
            other += 1
    with open(out, "w") as f:
        f.write("%d %d %d %.1f\n" % (ok, refused, other, max_gap * 1000))
    return 0


def cmd_tcp(addr, port, msg):
    """Connect to addr:port, send msg, print the reply line."""
    s = socket.create_connection((addr, int(port)), timeout=HANG_S)
    s.sendall(msg.encode() + b"\n")
    r = b""
    while not r.endswith(b"\n"):
        d = s.recv(100)
        if not d:
            break
        r += d
    s.close()
    print(r.decode().strip())
    return 0


def cmd_echo_server(port):
    """Loopback-only service: answers each line with 'echo:<line>' until
    the client closes (one thread per connection)."""
    import threading
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", int(port)))
    srv.listen(16)

    def serve(c):
        buf = b""
        try:
            while True:
                d = c.recv(100)
                if not d:
                    break
                buf += d
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    c.sendall(b"echo:" + line + b"\n")
        finally:
            c.close()

    while True:
        c, _ = srv.accept()
        threading.Thread(target=serve, args=(c,), daemon=True).start()


def cmd_hold(addr, port, go, out):
    """One relayed connection kept open across an upgrade: a line before,
    then (once `go` exists) a line after; writes both answers to `out`."""
    s = socket.create_connection((addr, int(port)), timeout=HANG_S)
    f = s.makefile("rb")
    s.sendall(b"before\n")
    a = f.readline().decode().strip()
    with open(out + ".ready", "w") as w:
        w.write(a)
    while not os.path.exists(go):
        time.sleep(0.02)
    s.sendall(b"after\n")
    b = f.readline().decode().strip()
    s.close()
    with open(out, "w") as w:
        w.write(a + " " + b)
    return 0


if __name__ == "__main__":
    cmd = sys.argv[1]
    args = sys.argv[2:]
    sys.exit({"counter": cmd_counter, "pty": lambda u, t, p: cmd_pty(u, t, int(p)),
              "hammer": cmd_hammer, "tcp": cmd_tcp, "echo-server": cmd_echo_server,
              "hold": cmd_hold}[cmd](*args))
