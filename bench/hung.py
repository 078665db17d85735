# SPDX-License-Identifier: Apache-2.0
"""Latency with requests hung on a stopped FUSE mount (scripts/bench.sh --only hung).

  hung.py PORT ENVD_PID MOUNT FUSE_PID ELSEWHERE N

Measures /health, Stat elsewhere, a 64 KiB download elsewhere and Start of
/bin/true (N of each, in turn) first with the mount live, then with 40
requests (Stat, ListDir, GET, in turn) hung on it after its daemon was
stopped; SIGCONT ends the hang. Prints one JSON line: p50/p99 in ms of each
probe in both phases, and errors (probes that did not answer well).
"""
import http.client
import json
import os
import signal
import struct
import sys
import threading
import time

port, envd_pid, M, fuse_pid, ELSE, N = (int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4]),
                                         sys.argv[5], int(sys.argv[6]))
HANG = 300
HUNG = 40
errors = 0


def req(method, path, body=None, headers=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=HANG)
    t0 = time.monotonic()
    c.request(method, path, body=body, headers=headers or {})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data, (time.monotonic() - t0) * 1000


def rpc(method, msg, timeout_ms=None):
    h = {"Content-Type": "application/json"}
    if timeout_ms:
        h["Connect-Timeout-Ms"] = str(timeout_ms)
    return req("POST", "/filesystem.Filesystem/" + method, json.dumps(msg), h)


START = json.dumps({"process": {"cmd": "/bin/true"}}).encode()


def probes():
    lat = {"health": [], "stat": [], "download": [], "start": []}
    bad = 0
    for _ in range(N):
        st, _, ms = req("GET", "/health")
        bad += st != 204
        lat["health"].append(ms)
        st, _, ms = rpc("Stat", {"path": ELSE})
        bad += st != 200
        lat["stat"].append(ms)
        st, d, ms = req("GET", "/files?path=%s/blob" % ELSE)
        bad += st != 200 or len(d) != 65536
        lat["download"].append(ms)
        st, d, ms = req("POST", "/process.Process/Start", struct.pack(">BI", 0, len(START)) + START,
                        {"Content-Type": "application/connect+json"})
        bad += st != 200 or b'"end"' not in d
        lat["start"].append(ms)
    return lat, bad


def pct(v, p):
    v = sorted(v)
    return round(v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))], 2)


def summary(lat):
    return {k: {"p50_ms": pct(v, 50), "p99_ms": pct(v, 99)} for k, v in lat.items()}


os.makedirs(ELSE, exist_ok=True)
with open(ELSE + "/blob", "wb") as f:
    f.write(os.urandom(65536))
base, bad = probes()
errors += bad

os.kill(fuse_pid, signal.SIGSTOP)
done = []


def hang_one(i):
    try:
        if i % 3 == 0:
            done.append(rpc("Stat", {"path": "%s/s%d" % (M, i)}, 600000)[0])
        elif i % 3 == 1:
            done.append(rpc("ListDir", {"path": "%s/l%d" % (M, i)}, 600000)[0])
        else:
            done.append(req("GET", "/files?path=%s/f%d" % (M, i))[0])
    except OSError:
        done.append(-1)


ths = [threading.Thread(target=hang_one, args=(i,)) for i in range(HUNG)]
for t in ths:
    t.start()
time.sleep(0.5)  # let them reach the mount; the figures are what follows
hung, bad = probes()
errors += bad
still = HUNG - len(done)  # hung throughout the probes, as meant
os.kill(fuse_pid, signal.SIGCONT)
for t in ths:
    t.join()
print(json.dumps({"hung": HUNG, "hung_throughout": still, "n": N, "baseline": summary(base),
                  "with_hung": summary(hung), "errors": errors + (still != HUNG)}))
