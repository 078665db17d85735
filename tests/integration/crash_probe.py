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
        req = ("POST /process.Process/%s HTTP/1.1\r\nHost: x\r\nContent-Type: application/connect+json\r\n"
               "Connect-Protocol-Version: 1\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
               % (method, len(payload))).encode() + payload
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
                                 headers={"Content-Type": "application/json"})
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


def main():
    cmd = sys.argv[1]
    base = sys.argv[2]
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
