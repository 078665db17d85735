#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Connect client for crash.sh: start commands, follow them across envd's
# restarts, talk to their stdin and terminal, list. Every wait has a
# generous deadline (HANG_S) and ends on the event, never on a sleep.
import base64
import json
import os
import socket
import struct
import sys
import time
import urllib.error
import urllib.request

HANG_S = int(os.environ.get("HANG_S", "300"))
# X-Access-Token for an envd that /init gave one (the VM's).
TOKEN = os.environ.get("CRASH_TOKEN", "")


def frame(obj):
    b = json.dumps(obj).encode()
    return b"\0" + struct.pack(">I", len(b)) + b


class Stream:
    """A server stream over HTTP/1.1; events() yields decoded envelopes
    until the stream ends or breaks (envd killed: then .broken)."""

    def __init__(self, base, method, body, timeout=HANG_S):
        host, port = base.split("//")[1].split(":")
        self.s = socket.create_connection((host, int(port)), timeout=timeout)
        payload = frame(body)
        path = method if "/" in method else "process.Process/" + method
        req = ("POST /%s HTTP/1.1\r\nHost: x\r\nContent-Type: application/connect+json\r\n"
               "Connect-Protocol-Version: 1\r\nContent-Length: %d\r\nConnection: close\r\n%s\r\n"
               % (path, len(payload), "X-Access-Token: %s\r\n" % TOKEN if TOKEN else "")).encode() + payload
        self.s.sendall(req)
        self.raw = b""
        self.head = None
        self.chunked = False
        self.body = b""
        self.broken = False
        self.done = False

    def _fill(self):
        try:
            d = self.s.recv(65536)
        except (socket.timeout, ConnectionError, OSError):
            d = b""
        if not d:
            self.broken = True
            return False
        self.raw += d
        if self.head is None:
            i = self.raw.find(b"\r\n\r\n")
            if i < 0:
                return True
            self.head, self.raw = self.raw[:i], self.raw[i + 4:]
            self.chunked = b"chunked" in self.head.lower()
        if not self.chunked:
            self.body += self.raw
            self.raw = b""
            return True
        while True:
            i = self.raw.find(b"\r\n")
            if i < 0:
                return True
            n = int(self.raw[:i].split(b";")[0], 16)
            if len(self.raw) < i + 2 + n + 2:
                return True
            if n == 0:
                self.raw = b""
                return True
            self.body += self.raw[i + 2:i + 2 + n]
            self.raw = self.raw[i + 4 + n:]

    def events(self):
        while not self.done:
            while len(self.body) >= 5:
                flags = self.body[0]
                n = struct.unpack(">I", self.body[1:5])[0]
                if len(self.body) < 5 + n:
                    break
                msg = json.loads(self.body[5:5 + n] or b"{}")
                self.body = self.body[5 + n:]
                if flags & 2:
                    self.done = True
                    self.end_stream = msg
                    return
                yield msg
            if self.broken or not self._fill():
                if self.broken:
                    self.done = True
                    return

    def close(self):
        try:
            self.s.close()
        except OSError:
            pass


def unary(base, method, body):
    req = urllib.request.Request(base + "/process.Process/" + method, data=json.dumps(body).encode(),
                                 headers=dict({"Content-Type": "application/json"},
                                              **({"X-Access-Token": TOKEN} if TOKEN else {})))
    try:
        with urllib.request.urlopen(req, timeout=HANG_S) as r:
            return 200, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def follow(base, sel, replay_from=0):
    """Connect to a process with replay: (output bytes by offset, end event,
    gaps, how the stream ended)."""
    st = Stream(base, "Connect", {"process": sel, "replayFrom": replay_from})
    out = {}
    gaps = []
    end = None
    err = None
    for ev in st.events():
        e = ev.get("event", {})
        if "data" in e:
            d = e["data"]
            for k in ("stdout", "stderr", "pty"):
                if k in d:
                    out[int(d.get("offset", 0))] = base64.b64decode(d[k])
        elif "gap" in e:
            gaps.append(e["gap"])
        elif "end" in e:
            end = e["end"]
    if not st.broken and getattr(st, "end_stream", {}).get("error"):
        err = st.end_stream["error"]
    st.close()
    return out, end, gaps, err, st.broken


def joined(out):
    """The bytes in offset order, and whether they are contiguous from 0."""
    b = b""
    contiguous = True
    for off in sorted(out):
        if off != len(b):
            contiguous = False
        b += out[off]
    return b, contiguous


def wait_health(base):
    deadline = time.time() + HANG_S
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(base + "/health", timeout=5) as r:
                if r.status in (200, 204):
                    return True
        except Exception:
            pass
        time.sleep(0.02)
    return False


def start(base, cmd, args, tag=None, stdin=False, pty=None, envs=None):
    body = {"process": {"cmd": cmd, "args": args, "envs": envs or {}}}
    if tag:
        body["tag"] = tag
    if stdin:
        body["stdin"] = True
    if pty:
        body["pty"] = {"size": {"cols": pty[0], "rows": pty[1]}}
    st = Stream(base, "Start", body)
    for ev in st.events():
        e = ev.get("event", {})
        if "start" in e:
            return st, int(e["start"]["pid"])
    raise RuntimeError("no start event: %r" % getattr(st, "end_stream", None))


# ---- the fault rounds ----

RESULTS = [0, 0]


def ok(cond, what, detail=""):
    RESULTS[0 if cond else 1] += 1
    print(("ok   - " if cond else "FAIL - ") + what + ("" if cond or not detail else ": " + str(detail)), flush=True)


def envd_pid(init_pid):
    try:
        kids = open("/proc/%d/task/%d/children" % (init_pid, init_pid)).read().split()
    except OSError:
        return None
    # init's children are envd and the orphans of an envd killed before
    for k in kids:
        try:
            if b"-upload-registry" in open("/proc/%s/cmdline" % k, "rb").read():
                return int(k)
        except OSError:
            pass
    return None


def wait_new_envd(init_pid, old):
    deadline = time.time() + HANG_S
    while time.time() < deadline:
        p = envd_pid(init_pid)
        if p and p != old:
            return p
        time.sleep(0.01)
    return None


def drain_in_thread(st):
    import threading
    def run():
        for _ in st.events():
            pass
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def slow_upload(base, path, data, fast):
    """Send the first `fast` bytes at once, then 4 KiB every 20 ms: the
    upload is in flight when envd dies. Returns the thread."""
    import threading
    import urllib.parse
    host, port = base.split("//")[1].split(":")

    def run():
        try:
            s = socket.create_connection((host, int(port)), timeout=HANG_S)
            s.sendall(("POST /files?path=%s HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
                       "Content-Length: %d\r\nConnection: close\r\n\r\n" % (urllib.parse.quote(path), len(data))).encode())
            s.sendall(data[:fast])
            off = fast
            while off < len(data):
                s.sendall(data[off:off + 4096])
                off += 4096
                time.sleep(0.02)
            s.recv(4096)
        except OSError:
            pass
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def download(base, path):
    import urllib.parse
    with urllib.request.urlopen(base + "/files?path=" + urllib.parse.quote(path), timeout=HANG_S) as r:
        return r.read()


def temp_files(d):
    return [n for n in os.listdir(d) if n.startswith(".envd-upload.")]


def send_input(base, pid, data, pty=False):
    return unary(base, "SendInput", {"process": {"pid": pid},
                                     "input": {("pty" if pty else "stdin"): base64.b64encode(data).decode()}})


def one_round(base, init_pid, r, d, rnd):
    import hashlib
    import threading
    lines = 600
    # the job: 600 lines, then exit 3; a client attached
    job, job_pid = start(base, "/bin/bash", ["-c", "for i in $(seq 1 %d); do echo line $i; sleep 0.005; done; exit 3" % lines],
                         tag="job%d" % r)
    drain_in_thread(job)
    # cat fed through stdin
    cat, cat_pid = start(base, "/bin/cat", [], tag="cat%d" % r, stdin=True)
    drain_in_thread(cat)
    code, _ = send_input(base, cat_pid, b"before\n")
    ok(code == 200, "round %d: cat takes input before the crash" % r, code)
    # an interactive shell on a terminal
    pty, pty_pid = start(base, "/bin/sh", [], tag="pty%d" % r, pty=(80, 24))
    drain_in_thread(pty)
    send_input(base, pty_pid, b"echo pty-be''fore\n", pty=True)
    # an upload in flight over a file with content
    target = os.path.join(d, "up%d.bin" % r)
    old = os.urandom(1800000)
    with open(target, "wb") as f:
        f.write(old)
    up = slow_upload(base, target, os.urandom(2600000), 1000000 + rnd.randrange(800000))
    # downloads and a watcher
    src = os.path.join(d, "dl.bin")
    stop = threading.Event()

    def downloads():
        while not stop.is_set():
            try:
                download(base, src)
            except Exception:
                time.sleep(0.01)
    threading.Thread(target=downloads, daemon=True).start()
    watch = None
    try:
        watch = Stream(base, "filesystem.Filesystem/WatchDir", {"path": d}).s  # noqa: the stream only has to be open
    except Exception:
        pass

    # SIGKILL at a random moment of the load
    time.sleep(rnd.random() * 0.4)
    victim = envd_pid(init_pid)
    os.kill(victim, 9)
    new = wait_new_envd(init_pid, victim)
    ok(new is not None, "round %d: init restarted envd" % r)
    ok(wait_health(base), "round %d: /health answers after the restart" % r)
    stop.set()

    code, lst = unary(base, "List", {})
    tags = sorted(p.get("tag", "") for p in lst.get("processes", []))
    for t in ("cat%d" % r, "pty%d" % r):
        ok(t in tags, "round %d: %s listed again" % (r, t), tags)
    # the job may have ended meanwhile only if the machine is very slow; it is listed or retained
    out, end, gaps, err, broken = follow(base, {"tag": "job%d" % r})
    b, contiguous = joined(out)
    want = "".join("line %d\n" % i for i in range(1, lines + 1)).encode()
    ok(b == want and contiguous, "round %d: every line of the job across the crash" % r,
       "%d of %d lines, contiguous %s, error %s" % (b.count(b"\n"), lines, contiguous, err))
    ok(not gaps, "round %d: no gap" % r, gaps)
    ok(end is not None and end.get("exitCode") == 3, "round %d: the job's exit code 3 reported" % r, end)

    code, resp = send_input(base, cat_pid, b"after\n")
    ok(code == 200, "round %d: cat takes stdin after the crash" % r, resp)
    code, resp = unary(base, "CloseStdin", {"process": {"pid": cat_pid}})
    ok(code == 200, "round %d: cat's stdin closes" % r, resp)
    out, end, gaps, err, broken = follow(base, {"pid": cat_pid})
    b, contiguous = joined(out)
    ok(b == b"before\nafter\n" and end is not None and end.get("exitCode", 0) == 0,
       "round %d: cat echoed both sides of the crash and ended with 0" % r, (b, end, err))

    code, resp = send_input(base, pty_pid, b"echo pty-af''ter; exit 5\n", pty=True)
    ok(code == 200, "round %d: the terminal takes input after the crash" % r, resp)
    out, end, gaps, err, broken = follow(base, {"pid": pty_pid})
    b, contiguous = joined(out)
    ok(b"pty-before" in b and b"pty-after" in b and end is not None and end.get("exitCode") == 5,
       "round %d: the shell answered on both sides of the crash, exit 5" % r, (b[-120:], end, err))

    up.join(HANG_S)
    with open(target, "rb") as f:
        now = f.read()
    ok(hashlib.sha256(now).digest() == hashlib.sha256(old).digest(),
       "round %d: the cut upload left the previous content whole" % r, "%d bytes" % len(now))
    deadline = time.time() + HANG_S
    while temp_files(d) and time.time() < deadline:
        time.sleep(0.02)
    ok(not temp_files(d), "round %d: no temporary upload file after the restart" % r, temp_files(d))
    with open(src, "rb") as f:
        want_dl = f.read()
    ok(download(base, src) == want_dl, "round %d: downloads work after the restart" % r)
    for st in (job, cat, pty):
        st.close()
    if watch:
        watch.close()


def rounds(base, init_pid, n, d, seed):
    import random
    rnd = random.Random(seed)
    print("# seed %d" % seed, flush=True)
    with open(os.path.join(d, "dl.bin"), "wb") as f:
        f.write(os.urandom(1 << 20))
    for r in range(n):
        one_round(base, init_pid, r, d, rnd)
    print("crash rounds: %d passed, %d failed" % tuple(RESULTS), flush=True)
    return RESULTS[1] == 0


def main():
    cmd = sys.argv[1]
    base = sys.argv[2]
    if cmd == "rounds":
        seed = int(os.environ.get("CRASH_SEED") or time.time())
        sys.exit(0 if rounds(base, int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], seed) else 1)
    if cmd == "list":
        code, r = unary(base, "List", {})
        print(json.dumps(sorted((p.get("tag") or "", p["pid"]) for p in r.get("processes", []))))
    elif cmd == "follow":
        sel = {"tag": sys.argv[3]} if not sys.argv[3].isdigit() else {"pid": int(sys.argv[3])}
        out, end, gaps, err, broken = follow(base, sel)
        b, contiguous = joined(out)
        print(json.dumps({"bytes": len(b), "contiguous": contiguous, "end": end, "gaps": gaps, "error": err,
                          "broken": broken, "text": b.decode(errors="replace")[-200:]}))


if __name__ == "__main__":
    main()
