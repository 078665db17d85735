#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Connect JSON client for process_trust.sh and process_trust_restart.sh:
# idempotent Start, input offsets, WaitFor, output budgets, why a command
# ended; and the keys and input counts across a crash of envd under init
# and across a live upgrade. Prints "ok - " / "FAIL - " lines. Every wait
# has a hang deadline (HANG_S) and ends on the event it waits for.
#
#   process_trust_probe.py SUITE BASE TMP [INIT_PID]
import base64
import http.client
import http.server
import json
import os
import socket
import struct
import sys
import threading
import time
import urllib.parse

HANG_S = int(os.environ.get("HANG_S", "300"))
TOKEN = os.environ.get("TRUST_TOKEN", "")
RESULTS = [0, 0]


def ok(cond, what, detail=""):
    RESULTS[0 if cond else 1] += 1
    print(("ok   - " if cond else "FAIL - ") + what + ("" if cond or detail == "" else ": " + str(detail)),
          flush=True)
    return cond


def info(msg):
    print("# " + msg, flush=True)


def frame(obj):
    b = json.dumps(obj).encode()
    return b"\0" + struct.pack(">I", len(b)) + b


def conn(base):
    u = urllib.parse.urlparse(base)
    return http.client.HTTPConnection(u.hostname, u.port, timeout=HANG_S)


def hdrs(extra=None, ctype="application/connect+json"):
    h = {"Content-Type": ctype, "Connect-Protocol-Version": "1"}
    if TOKEN:
        h["X-Access-Token"] = TOKEN
    h.update(extra or {})
    return h


class Result:
    """A server stream, read to its end: events in order, data by offset."""

    def __init__(self):
        self.pid = None
        self.events = []
        self.data = {}
        self.kinds = {}
        self.end = None
        self.error = None
        self.withheld = []
        self.gaps = []
        self.broken = False
        self.started = threading.Event()

    def bytes(self):
        return b"".join(self.data[o] for o in sorted(self.data))

    def data_len(self):
        return sum(len(v) for v in self.data.values())


def stream(base, method, body, headers=None, res=None, payload=None):
    """Run a server (or client) stream to its end; returns a Result."""
    res = res or Result()
    c = conn(base)
    try:
        c.request("POST", "/process.Process/" + method, body=payload if payload is not None else frame(body),
                  headers=hdrs(headers))
        r = c.getresponse()
        while True:
            h = r.read(5)
            if len(h) < 5:
                res.broken = True
                break
            n = struct.unpack(">I", h[1:5])[0]
            p = r.read(n)
            msg = json.loads(p or b"{}")
            if h[0] & 2:
                res.error = msg.get("error")
                break
            ev = msg.get("event", msg)
            res.events.append(ev)
            if "start" in ev:
                res.pid = int(ev["start"]["pid"])
                res.started.set()
            elif "data" in ev:
                d = ev["data"]
                for k in ("stdout", "stderr", "pty"):
                    if k in d:
                        res.data[int(d.get("offset", 0))] = base64.b64decode(d[k])
                        res.kinds[int(d.get("offset", 0))] = k
            elif "withheld" in ev:
                res.withheld.append({k: int(v) for k, v in ev["withheld"].items()})
            elif "gap" in ev:
                res.gaps.append(ev["gap"])
            elif "end" in ev:
                res.end = ev["end"]
    except (OSError, http.client.HTTPException):
        res.broken = True
    finally:
        res.started.set()
        c.close()
    return res


def bg_stream(base, method, body, headers=None):
    res = Result()
    t = threading.Thread(target=stream, args=(base, method, body, headers, res), daemon=True)
    t.start()
    res.thread = t
    return res


def unary(base, method, body, headers=None, service="process.Process"):
    c = conn(base)
    try:
        c.request("POST", "/%s/%s" % (service, method), body=json.dumps(body).encode(),
                  headers=hdrs(headers, "application/json"))
        r = c.getresponse()
        raw = r.read()
        try:
            return r.status, json.loads(raw or b"{}")
        except ValueError:
            return r.status, {"raw": raw.decode(errors="replace")}
    except (OSError, http.client.HTTPException) as e:
        return 0, {"error": str(e)}
    finally:
        c.close()


def until(cond, secs=HANG_S):
    end = time.time() + secs
    while time.time() < end:
        if cond():
            return True
        time.sleep(0.02)
    return False


def lines_of(path):
    try:
        with open(path) as f:
            return [l for l in f.read().split("\n") if l]
    except OSError:
        return []


def basic(user):
    return {"Authorization": "Basic " + base64.b64encode((user + ":").encode()).decode()}


# ---- idempotent Start ----------------------------------------------------

def idem(base, tmp):
    spawns = os.path.join(tmp, "spawns-header")
    key = "order-%d-%d" % (os.getpid(), int(time.time()))
    body = {"process": {"cmd": "bash", "args": ["-c", "echo $$ >> %s; echo started; sleep 1; echo finished" % spawns]}}
    first = bg_stream(base, "Start", body, {"Idempotency-Key": key})
    # Ten retries at once, while the first one spawns and runs.
    tries = [bg_stream(base, "Start", body, {"Idempotency-Key": key}) for _ in range(10)]
    for t in [first] + tries:
        t.thread.join(HANG_S)
    # Nine more once it has ended (it is retained).
    for _ in range(9):
        tries.append(stream(base, "Start", body, {"Idempotency-Key": key}))
    ok(len(lines_of(spawns)) == 1, "a Start sent 20 times with one key spawns once", lines_of(spawns))
    ok(first.pid and first.end and first.end.get("exitCode", 0) == 0, "the first Start runs the command",
       first.error)
    same = [t.pid == first.pid for t in tries]
    ok(all(same), "every repeat answers with the same pid", [t.pid for t in tries])
    whole = [t.bytes() == b"started\nfinished\n" and min(t.data or [0]) == 0 for t in tries]
    ok(all(whole), "every repeat gets the output from offset 0", [t.bytes() for t in tries if t.bytes() != b"started\nfinished\n"][:3])
    ok(all(t.end is not None and t.error is None for t in tries), "every repeat gets the end event",
       [t.error for t in tries if t.error][:2])

    # The same key for another request.
    other = dict(body, process={"cmd": "bash", "args": ["-c", "echo $$ >> %s; echo other" % spawns]})
    r = stream(base, "Start", other, {"Idempotency-Key": key})
    ok(r.error and r.error.get("code") == "already_exists" and key in r.error.get("message", ""),
       "the same key with another request is already_exists", r.error)
    r = stream(base, "Start", dict(body, process=dict(body["process"], envs={"X": "1"})), {"Idempotency-Key": key})
    ok(r.error and r.error.get("code") == "already_exists", "an extra env var makes it another request", r.error)
    ok(len(lines_of(spawns)) == 1, "neither spawned", lines_of(spawns))

    # The field and the env var are keys too; the env var is not the command's.
    f = os.path.join(tmp, "spawns-field")
    b2 = {"process": {"cmd": "bash", "args": ["-c", "echo $$ >> %s; env | grep -c ^ENVD_ || true" % f]},
          "idempotencyKey": key + "-f"}
    a = stream(base, "Start", b2)
    b = stream(base, "Start", b2)
    ok(a.pid and a.pid == b.pid and len(lines_of(f)) == 1, "a key in the idempotencyKey field", (a.pid, b.pid, lines_of(f)))
    e = os.path.join(tmp, "spawns-env")
    b3 = {"process": {"cmd": "bash", "args": ["-c", "echo $$ >> %s; env | grep -c ^ENVD_ || true" % e],
                      "envs": {"ENVD_IDEMPOTENCY_KEY": key + "-e", "ENVD_OUTPUT_BUDGET": "head:100,tail:100"}}}
    a = stream(base, "Start", b3)
    b = stream(base, "Start", b3)
    ok(a.pid and a.pid == b.pid and len(lines_of(e)) == 1, "a key in ENVD_IDEMPOTENCY_KEY (the SDK's way)",
       (a.pid, b.pid, lines_of(e)))
    ok(a.bytes() == b"0\n", "the command sees neither ENVD_IDEMPOTENCY_KEY nor ENVD_OUTPUT_BUDGET", a.bytes())
    # The same key in the header and the envs: one key.
    a = stream(base, "Start", b3, {"Idempotency-Key": key + "-e"})
    ok(a.pid == b.pid, "header and env var with the same key agree", (a.pid, b.pid, a.error))
    a = stream(base, "Start", b3, {"Idempotency-Key": "another"})
    ok(a.error and a.error.get("code") == "invalid_argument" and "differ" in a.error.get("message", ""),
       "header and env var with different keys: invalid_argument", a.error)
    a = stream(base, "Start", dict(b2, idempotencyKey="two words"))
    ok(a.error and a.error.get("code") == "invalid_argument", "a key with a space: invalid_argument", a.error)

    # A key is scoped to its user.
    k = key + "-user"
    bu = {"process": {"cmd": "bash", "args": ["-c", "id -un"], "cwd": "/tmp"}, "idempotencyKey": k}
    a = stream(base, "Start", bu)
    b = stream(base, "Start", bu, basic("nobody"))
    ok(a.pid and b.pid and a.pid != b.pid and b.bytes() == b"nobody\n",
       "the same key of another user is another process", (a.pid, b.pid, b.bytes(), b.error))

    # List shows each process's key.
    lk = key + "-list"
    long = bg_stream(base, "Start", {"process": {"cmd": "sleep", "args": ["600"]}, "tag": "trust-list",
                                     "idempotencyKey": lk})
    long.started.wait(HANG_S)
    code, lst = unary(base, "List", {})
    mine = [p for p in lst.get("processes", []) if p.get("tag") == "trust-list"]
    ok(code == 200 and mine and mine[0].get("idempotencyKey") == lk, "List shows the key", mine)
    unary(base, "SendSignal", {"process": {"tag": "trust-list"}, "signal": "SIGNAL_SIGKILL"})
    long.thread.join(HANG_S)

    # A repeat that comes while the spawn of a command that cannot start
    # is under way gets the same error.
    bad = {"process": {"cmd": "/bin/true", "cwd": "/does/not/exist"}, "idempotencyKey": key + "-bad"}
    a, b = bg_stream(base, "Start", bad), bg_stream(base, "Start", bad)
    a.thread.join(HANG_S)
    b.thread.join(HANG_S)
    ok(a.error and b.error and a.error == b.error and "does not exist" in a.error.get("message", ""),
       "a Start that fails fails the same for its repeat", (a.error, b.error))


# ---- input offsets ---------------------------------------------------------

def stdin_offsets(base, tmp):
    cat = bg_stream(base, "Start", {"process": {"cmd": "cat"}, "tag": "trust-cat"})
    cat.started.wait(HANG_S)
    sel = {"pid": cat.pid}

    def send(data, off=None):
        b = {"process": sel, "input": {"stdin": base64.b64encode(data).decode()}}
        if off is not None:
            b["offset"] = off
        return unary(base, "SendInput", b)

    r1 = send(b"hello ", 0)
    r2 = send(b"hello ", 0)
    r3 = send(b"lo world\n", 3)
    ok(r1 == (200, {"inputOffset": "6"}) and r2 == (200, {"inputOffset": "6"}),
       "a SendInput retried at its offset is written once", (r1, r2))
    ok(r3 == (200, {"inputOffset": "12"}), "an overlapping retry writes only what is new", r3)
    code, err = send(b"zz", 100)
    ok(code == 400 and err.get("code") == "out_of_range" and "bytes 12 to 100 are missing" in err.get("message", ""),
       "an offset past the input taken is out_of_range", (code, err))
    # StreamInput: data events with offsets, one retried in the same stream.
    msgs = [{"start": {"process": sel}}]
    for data, off in ((b"abc", 12), (b"abc", 12), (b"bcd", 13), (b"\n", 16)):
        msgs.append({"data": {"input": {"stdin": base64.b64encode(data).decode()}, "offset": off}})
    payload = b"".join(frame(m) for m in msgs)
    c = conn(base)
    c.request("POST", "/process.Process/StreamInput", body=payload, headers=hdrs())
    resp = c.getresponse().read()
    c.close()
    ok(b'"inputOffset":"17"' in resp, "StreamInput answers with the input taken", resp)
    # Without an offset, input is appended as before.
    ok(send(b"tail\n") == (200, {"inputOffset": "22"}), "a SendInput without an offset is counted too")
    unary(base, "CloseStdin", {"process": sel})
    cat.thread.join(HANG_S)
    ok(cat.bytes() == b"hello world\nabcd\ntail\n", "the command read every byte once", cat.bytes())


# ---- WaitFor -------------------------------------------------------------------

def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def waitfor_bg(base, body, headers=None):
    box = {}

    def run():
        box["resp"] = unary(base, "WaitFor", body, headers)
        box["t"] = time.time()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    box["thread"] = t
    return box


def at(base, pid, r, line):
    """The process's output at the answer's lineOffset is that line."""
    c = Result()
    t = threading.Thread(target=stream, args=(base, "Connect", {"process": {"pid": pid}, "replayFrom": 0}, None, c),
                         daemon=True)
    t.start()
    off = int(r.get("lineOffset", 0))
    until(lambda: len(c.bytes()) >= off + len(line), 60)
    return c.bytes()[off:off + len(line)] == line


def waitfor(base, tmp):
    # A port that listens 2 s later.
    port = free_port()
    w = waitfor_bg(base, {"port": {"port": port}})
    time.sleep(2)  # the listener comes later, by design of the check
    early = "resp" in w
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port))
    ls.listen(8)
    t_listen = time.time()
    w["thread"].join(HANG_S)
    code, r = w.get("resp", (0, {}))
    ok(not early and code == 200 and r.get("address") == "127.0.0.1:%d" % port,
       "WaitFor on a port returns once it listens, not before", (early, code, r))
    ok(w.get("t", 0) >= t_listen, "the answer comes after the listen")
    info("port answered %.0f ms after the listen (bench/waitfor.py measures it)" % ((w.get("t", 0) - t_listen) * 1000))
    code, r = unary(base, "WaitFor", {"port": {"port": port, "address": "::1"}, "timeoutMs": 600})
    ok(code == 504 and r.get("code") == "deadline_exceeded" and ("listens on 127.0.0.1:%d only" % port) in r.get("message", ""),
       "a port on another address times out saying where it listens", r)
    code, r = unary(base, "WaitFor", {"port": {"port": port, "address": "127.0.0.1"}})
    ok(code == 200, "a port on its address", r)
    ls.close()

    # HTTP: 503 three times, then 200.
    hits = []

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            hits.append(self.path)
            ready = len([h for h in hits if h == "/health"]) > 3
            self.send_response(200 if ready and self.path == "/health" else (503 if self.path == "/health" else 404))
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *a):
            pass

    hp = free_port()
    w = waitfor_bg(base, {"http": {"port": hp, "path": "/health", "statusMin": 200, "statusMax": 299}})
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", hp), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    w["thread"].join(HANG_S)
    code, r = w.get("resp", (0, {}))
    ok(code == 200 and r.get("httpStatus") == 200 and hits.count("/health") == 4,
       "WaitFor on HTTP waits for the port, then for a status in range", (code, r, hits))
    code, r = unary(base, "WaitFor", {"http": {"port": hp, "path": "/missing"}, "timeoutMs": 1500})
    ok(code == 504 and "answered HTTP 404" in r.get("message", ""), "an HTTP wait that times out says what it got", r)
    srv.shutdown()
    srv.server_close()

    # A line of output: later, already written, by stream, never.
    p = bg_stream(base, "Start", {"process": {"cmd": "bash", "args": ["-c",
                  "echo booting; echo warn >&2; sleep 1; echo 'listening on port 4242'; sleep 600"]},
                  "tag": "trust-log"})
    p.started.wait(HANG_S)
    code, r = unary(base, "WaitFor", {"output": {"process": {"tag": "trust-log"}, "pattern": r"listening on port \d+"}})
    ok(code == 200 and r.get("line") == "listening on port 4242" and at(base, p.pid, r, b"listening on port 4242\n"),
       "WaitFor on a log line (its offset in the output)", r)
    code, r = unary(base, "WaitFor", {"output": {"process": {"pid": p.pid}, "pattern": "BOOTING", "ignoreCase": True}})
    ok(code == 200 and r.get("line") == "booting" and at(base, p.pid, r, b"booting\n"),
       "output written before the wait counts", r)
    code, r = unary(base, "WaitFor", {"output": {"process": {"pid": p.pid}, "pattern": "warn", "stream": "stdout"},
                                      "timeoutMs": 500})
    ok(code == 504 and "last line" in r.get("message", ""), "a line on the other stream does not count", r)
    code, r = unary(base, "WaitFor", {"output": {"process": {"pid": p.pid}, "pattern": "warn", "stream": "stderr"}})
    ok(code == 200 and r.get("line") == "warn", "a line of stderr", r)
    code, r = unary(base, "WaitFor", {"output": {"process": {"pid": p.pid}, "pattern": "(unclosed"}})
    ok(code == 400 and "invalid pattern" in r.get("message", ""), "a bad pattern is invalid_argument", r)
    unary(base, "SendSignal", {"process": {"pid": p.pid}, "signal": "SIGNAL_SIGKILL"})
    p.thread.join(HANG_S)
    q = stream(base, "Start", {"process": {"cmd": "bash", "args": ["-c", "echo nothing here"]}, "tag": "trust-nomatch"})
    code, r = unary(base, "WaitFor", {"output": {"process": {"tag": "trust-nomatch"}, "pattern": "ready"}})
    ok(code == 400 and r.get("code") == "failed_precondition" and "without such a line" in r.get("message", ""),
       "a process that ended without the line: failed_precondition at once", r)

    # Exit.
    e = bg_stream(base, "Start", {"process": {"cmd": "bash", "args": ["-c", "sleep 1; exit 3"]}, "tag": "trust-exit"})
    e.started.wait(HANG_S)
    code, r = unary(base, "WaitFor", {"exit": {"pid": e.pid}})
    ok(code == 200 and r.get("end", {}).get("exitCode") == 3, "WaitFor on a process's exit", r)
    code, r = unary(base, "WaitFor", {"exit": {"pid": e.pid}})
    ok(code == 200 and r.get("end", {}).get("exitCode") == 3, "an exit that happened already", r)
    code, r = unary(base, "WaitFor", {"exit": {"tag": "trust-nobody"}})
    ok(code == 404, "an unknown process is not_found", r)

    # A path two directories below what exists.
    d = os.path.join(tmp, "wait-path")
    target = os.path.join(d, "a", "b", "ready")
    w = waitfor_bg(base, {"path": {"path": target}})
    time.sleep(0.5)  # the file comes later, by design of the check
    os.makedirs(os.path.join(d, "a", "b"))
    time.sleep(0.3)
    early = "resp" in w
    # Taken before the file exists: the answer may come (and its thread
    # note its time) before this thread runs again.
    t_made = time.time()
    open(target, "w").close()
    w["thread"].join(HANG_S)
    code, r = w.get("resp", (0, {}))
    ok(not early and code == 200 and w.get("t", 0) >= t_made, "WaitFor on a path made later, below new directories",
       (early, code, r))

    # Timing out, cleanly, with what it saw last.
    nobody = free_port()
    code, r = unary(base, "WaitFor", {"port": {"port": nobody}, "timeoutMs": 800})
    ok(code == 504 and "last seen: nothing listens on port %d" % nobody in r.get("message", ""),
       "a wait that times out says what it saw last", r)
    code, r = unary(base, "WaitFor", {"port": {"port": nobody}}, {"Connect-Timeout-Ms": "700"})
    ok(code == 504 and "last seen:" in r.get("message", ""), "the client's own deadline gets the same words", r)
    code, r = unary(base, "WaitFor", {"path": {"path": os.path.join(tmp, "never", "there")}, "timeoutMs": 500})
    ok(code == 504 and "does not exist (watching %s)" % tmp in r.get("message", ""), "a path wait that times out", r)
    code, r = unary(base, "WaitFor", {})
    ok(code == 400 and r.get("code") == "invalid_argument", "no condition is invalid_argument", r)
    code, r = unary(base, "WaitFor", {"port": {"port": 70000}})
    ok(code == 400, "a bad port is invalid_argument", r)


# ---- output budgets --------------------------------------------------------------

LINE = 11  # '%010d\n'
GEN = "import sys; w = sys.stdout.write; [w('%%010d\\n' %% i) for i in range(%d)]"


def expected(a, b):
    """The generator's output bytes [a, b)."""
    first, last = a // LINE, (b + LINE - 1) // LINE
    s = "".join("%010d\n" % i for i in range(first, last)).encode()
    return s[a - first * LINE:b - first * LINE]


def budget(base, tmp):
    n = 50000000 // LINE
    total = n * LINE
    r = stream(base, "Start", {"process": {"cmd": "/usr/bin/python3", "args": ["-c", GEN % n]}, "tag": "trust-big",
                               "outputBudget": {"headBytes": 4096, "tailBytes": 16384}})
    got = r.data_len()
    ok(r.end is not None and r.end.get("exitCode", 0) == 0 and not r.error, "a 50 MB output runs to its end", r.error)
    ok(got <= 24 * 1024, "the stream carries at most 24 KiB of the 50 MB (%d bytes)" % got, got)
    ok(len(r.withheld) == 1, "one marker", r.withheld)
    m = r.withheld[0] if r.withheld else {}
    ok(m.get("from") == 4096 and m.get("to") == total - 16384 and m.get("bytes") == total - 16384 - 4096,
       "the marker says what was withheld, by offset", m)
    head = b"".join(r.data[o] for o in sorted(r.data) if o < 4096)
    tail = b"".join(r.data[o] for o in sorted(r.data) if o >= 4096)
    ok(head == expected(0, 4096), "the head is the first 4 KiB")
    ok(tail == expected(total - 16384, total), "the tail is the last 16 KiB")
    idx_mark = next((i for i, e in enumerate(r.events) if "withheld" in e), -1)
    idx_tail = next((i for i, e in enumerate(r.events) if "data" in e and int(e["data"]["offset"]) >= 4096), -1)
    ok(0 <= idx_mark < idx_tail, "the marker comes before the tail")
    rf = m.get("readableFrom", 0)
    ok(m.get("from", 0) < rf < m.get("to", 0), "the marker says the ring holds only the newest part (from %d)" % rf, m)
    c = stream(base, "Connect", {"process": {"tag": "trust-big"}, "replayFrom": rf})
    mid = b"".join(c.data[o] for o in sorted(c.data))
    ok(not c.gaps and mid == expected(rf, total), "the withheld middle the ring holds is readable by offset",
       (c.gaps, len(mid)))
    c = stream(base, "Connect", {"process": {"tag": "trust-big"}, "replayFrom": 4096})
    ok(c.gaps and int(c.gaps[0]["from"]) == 4096 and int(c.gaps[0]["to"]) == rf,
       "what the ring dropped is a gap", c.gaps)

    # Smaller than the ring: the whole middle can be read back.
    n2 = 500000 // LINE
    t2 = n2 * LINE
    r = stream(base, "Start", {"process": {"cmd": "/usr/bin/python3", "args": ["-c", GEN % n2]}, "tag": "trust-mid",
                               "outputBudget": {"headBytes": 1000, "tailBytes": 2000}})
    m = r.withheld[0] if r.withheld else {}
    ok(m.get("readableFrom") == 1000 and m.get("to") == t2 - 2000, "all of a middle the ring holds is readable", m)
    c = stream(base, "Connect", {"process": {"tag": "trust-mid"}, "replayFrom": 1000})
    b = c.bytes()
    ok(b[:t2 - 3000] == expected(1000, t2 - 2000), "and reads back whole")
    # A Connect with a budget counts from its replayFrom.
    c = stream(base, "Connect", {"process": {"tag": "trust-mid"}, "replayFrom": 100000,
                                 "outputBudget": {"headBytes": 10, "tailBytes": 11}})
    m = c.withheld[0] if c.withheld else {}
    ok(c.data_len() == 21 and m.get("from") == 100010 and m.get("to") == t2 - 11,
       "a Connect's budget counts from where it starts", (c.data_len(), m))

    # The SDK's way: ENVD_OUTPUT_BUDGET in the envs.
    r = stream(base, "Start", {"process": {"cmd": "/usr/bin/python3", "args": ["-c", GEN % 10000],
                                           "envs": {"ENVD_OUTPUT_BUDGET": "head:110,tail:220"}}})
    ok(r.data_len() == 330 and len(r.withheld) == 1 and r.bytes() == expected(0, 110) + expected(10000 * LINE - 220, 10000 * LINE),
       "ENVD_OUTPUT_BUDGET in the envs", (r.data_len(), r.withheld))
    r = stream(base, "Start", {"process": {"cmd": "true", "envs": {"ENVD_OUTPUT_BUDGET": "head:lots"}}})
    ok(r.error and r.error.get("code") == "invalid_argument" and "invalid output budget" in r.error.get("message", ""),
       "a bad ENVD_OUTPUT_BUDGET is invalid_argument", r.error)
    # Short output: no marker, every byte.
    r = stream(base, "Start", {"process": {"cmd": "echo", "args": ["short"]}, "outputBudget": {"headBytes": 2, "tailBytes": 10}})
    ok(r.bytes() == b"short\n" and not r.withheld, "output within head and tail has no marker", r.events)

    # A terminal: events end on characters, also at the head's end.
    r = stream(base, "Start", {"process": {"cmd": "bash", "args": ["-c", "printf '\\xc3\\xa9%.0s' $(seq 5000)"]},
                               "pty": {"size": {"cols": 80, "rows": 24}},
                               "outputBudget": {"headBytes": 101, "tailBytes": 51}})
    bad = []
    for o in sorted(r.data):
        try:
            r.data[o].decode("utf-8")
        except UnicodeDecodeError:
            bad.append(o)
    ok(r.withheld and not bad and r.data_len() <= 152, "PTY data events keep whole characters within a budget",
       (bad, r.data_len(), r.withheld))


# ---- why a command ended --------------------------------------------------------

def reasons(base, tmp):
    t = bg_stream(base, "Start", {"process": {"cmd": "sleep", "args": ["600"]}, "tag": "trust-timeout"},
                  {"Connect-Timeout-Ms": "1500"})
    t.started.wait(HANG_S)
    c = stream(base, "Connect", {"process": {"tag": "trust-timeout"}})
    t.thread.join(HANG_S)
    rs = (c.end or {}).get("reason", {})
    ok(rs.get("kind") == "KIND_TIMEOUT" and rs.get("timeoutMs") == "1500" and rs.get("signal") == 9,
       "a kill at the deadline says so in the end's reason", c.end)
    ok((c.end or {}).get("error") == "timeout: killed by envd when its deadline of 1500 ms passed",
       "and in its error", c.end)
    ok((c.end or {}).get("status") == "signal: killed", "the status stays the wait status", c.end)

    k = bg_stream(base, "Start", {"process": {"cmd": "sleep", "args": ["600"]}})
    k.started.wait(HANG_S)
    unary(base, "SendSignal", {"process": {"pid": k.pid}, "signal": "SIGNAL_SIGTERM"})
    k.thread.join(HANG_S)
    rs = (k.end or {}).get("reason", {})
    ok(rs.get("kind") == "KIND_SIGNAL" and rs.get("signal") == 15 and (k.end or {}).get("error") == "signal: terminated",
       "a client's SendSignal: the reason says so, the error stays the reference's", k.end)

    s = "trust-%d" % os.getpid()
    code, _ = unary(base, "CreateSession", {"name": s})
    ok(code == 200, "a session")
    sc = bg_stream(base, "Start", {"process": {"cmd": "/bin/bash", "args": ["-l", "-c", "echo in; sleep 600"]},
                                   "session": s})
    ok(until(lambda: sc.bytes() == b"in\n"), "its command runs")
    unary(base, "CloseSession", {"name": s})
    sc.thread.join(HANG_S)
    rs = (sc.end or {}).get("reason", {})
    ok(rs.get("kind") == "KIND_SESSION_CLOSED" and rs.get("session") == s and
       (sc.end or {}).get("error", "").startswith("session closed: killed by envd when its session"),
       "a command ended by CloseSession says so", sc.end)

    n = stream(base, "Start", {"process": {"cmd": "bash", "args": ["-c", "exit 2"]}})
    ok(n.end and "reason" not in n.end and n.end.get("error") == "exit status 2", "an ordinary end has no reason", n.end)


# ---- across a crash and a live upgrade ------------------------------------------

def envd_child(init_pid):
    try:
        kids = open("/proc/%d/task/%d/children" % (init_pid, init_pid)).read().split()
    except OSError:
        return None
    for k in kids:
        try:
            if b"-isnotfc" in open("/proc/%s/cmdline" % k, "rb").read():
                return int(k)
        except OSError:
            pass
    return None


def health(base):
    try:
        c = conn(base)
        c.request("GET", "/health")
        st = c.getresponse().status
        c.close()
        return st == 204
    except (OSError, http.client.HTTPException):
        return False


def restart_check(base, tmp, how, restart):
    """Keys and input offsets across one restart of envd (`restart()`)."""
    spawns = os.path.join(tmp, "spawns-" + how)
    key = "%s-%d-%d" % (how, os.getpid(), int(time.time()))
    body = {"process": {"cmd": "bash", "args": ["-c", "echo $$ >> %s; echo up; while [ ! -e %s/go-%s ]; do sleep 0.05; done; echo down" % (spawns, tmp, how)]},
            "idempotencyKey": key}
    ended_key = key + "-ended"
    ended = {"process": {"cmd": "bash", "args": ["-c", "echo $$ >> %s-ended; echo once" % spawns]},
             "idempotencyKey": ended_key}
    e1 = stream(base, "Start", ended)
    first = bg_stream(base, "Start", body)
    first.started.wait(HANG_S)
    pids = [stream_pid(base, body) for _ in range(5)]
    cat = bg_stream(base, "Start", {"process": {"cmd": "cat"}, "idempotencyKey": key + "-cat"})
    cat.started.wait(HANG_S)
    code, r = unary(base, "SendInput", {"process": {"pid": cat.pid}, "input": {"stdin": base64.b64encode(b"abc").decode()},
                                        "offset": 0})
    ok(code == 200 and r.get("inputOffset") == "3", "input before the %s" % how, r)
    restart()
    ok(until(lambda: health(base)), "envd answers after the %s" % how)
    # The Start whose answer the restart cut short is retried, 14 more times.
    pids += [stream_pid(base, body) for _ in range(14)]
    ok(all(p == first.pid for p in pids) and len(pids) == 19,
       "retries across the %s get the same process" % how, (first.pid, pids))
    open(os.path.join(tmp, "go-" + how), "w").close()
    last = stream(base, "Start", body)
    ok(last.pid == first.pid and last.bytes() == b"up\ndown\n" and last.end is not None,
       "the 20th retry follows it to its end, output from offset 0", (last.pid, last.bytes(), last.error))
    ok(len(lines_of(spawns)) == 1, "a Start retried 20 times across the %s spawns once" % how, lines_of(spawns))
    r = stream(base, "Start", dict(body, process=dict(body["process"], cwd="/")))
    ok(r.error and r.error.get("code") == "already_exists", "another request with the key after the %s" % how, r.error)
    e2 = stream(base, "Start", ended)
    ok(e1.pid and e2.pid == e1.pid and e2.bytes() == b"once\n" and len(lines_of(spawns + "-ended")) == 1,
       "the key of a process that had ended before the %s" % how, (e1.pid, e2.pid, e2.bytes()))
    # Input sent again from offset 0: only what is new reaches cat.
    code, r = unary(base, "SendInput", {"process": {"pid": cat.pid},
                                        "input": {"stdin": base64.b64encode(b"abcdef\n").decode()}, "offset": 0})
    ok(code == 200 and r.get("inputOffset") == "7", "input retried across the %s from offset 0" % how, (code, r))
    unary(base, "CloseStdin", {"process": {"pid": cat.pid}})
    c = stream(base, "Start", {"process": {"cmd": "cat"}, "idempotencyKey": key + "-cat"})
    ok(c.pid == cat.pid and c.bytes() == b"abcdef\n", "and arrives once", (c.pid, c.bytes()))


def stream_pid(base, body):
    """A Start whose client gives up after the start event (its pid)."""
    res = Result()
    c = conn(base)
    try:
        c.request("POST", "/process.Process/Start", body=frame(body), headers=hdrs())
        resp = c.getresponse()
        h = resp.read(5)
        n = struct.unpack(">I", h[1:5])[0]
        msg = json.loads(resp.read(n))
        ev = msg.get("event", {})
        if "start" in ev:
            res.pid = int(ev["start"]["pid"])
    except (OSError, http.client.HTTPException, struct.error, ValueError):
        pass
    finally:
        c.close()
    return res.pid


def crash(base, tmp, init_pid):
    def kill_envd():
        victim = envd_child(init_pid)
        ok(victim is not None, "envd runs under init")
        os.kill(victim, 9)
        ok(until(lambda: envd_child(init_pid) not in (None, victim)), "init starts envd again")

    restart_check(base, tmp, "crash", kill_envd)


def upgrade(base, tmp):
    def do_upgrade():
        c = conn(base)
        try:
            c.request("POST", "/upgrade", body=b"", headers={"X-Access-Token": TOKEN, "Content-Length": "0"})
            c.getresponse().read()
        except (OSError, http.client.HTTPException):
            pass  # the connection closes as the new image takes over
        c.close()
        ok(until(lambda: health(base)), "the new image answers")
        c = conn(base)
        c.request("POST", "/init", body=json.dumps({"accessToken": TOKEN}).encode(),
                  headers={"Content-Type": "application/json", "X-Access-Token": TOKEN})
        st = c.getresponse()
        handover = st.getheader("X-Envd-Handover") or ""
        st.read()
        c.close()
        ok(st.status == 204 and '"failed":false' in handover, "/init after the upgrade", handover)

    restart_check(base, tmp, "upgrade", do_upgrade)


def main():
    suite, base, tmp = sys.argv[1], sys.argv[2], sys.argv[3]
    if suite == "main":
        for part in (idem, stdin_offsets, waitfor, budget, reasons):
            info(part.__name__)
            part(base, tmp)
    elif suite == "crash":
        crash(base, tmp, int(sys.argv[4]))
    elif suite == "upgrade":
        upgrade(base, tmp)
    elif suite == "budget":
        budget(base, tmp)
    sys.exit(0 if RESULTS[1] == 0 else 1)


if __name__ == "__main__":
    main()
