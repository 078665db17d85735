#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# WaitFor's two figures (docs/performance.md, "WaitFor"), on an envd of its
# own:
#
#   latency  a WaitFor on a port whose listener comes 2 s later: the time
#            from listen() to the answer, ROUNDS times (the port scanner's
#            pace decides it: 50 ms while the sandbox is active);
#   idle     envd's CPU time (all its threads, from schedstat, in ns) over
#            10 s: alone and idle; with 100 idle waiters (25 on ports that
#            never listen, 25 on a line a sleeping process never prints,
#            25 on its exit, 25 on a path that never appears) while the
#            scanner is at its fast pace, and again once it is back at its
#            idle one; and, for scale, the fast pace alone (a Start's kick,
#            no waiter).
#
#   python3 bench/waitfor.py [ENVD_BIN] [ROUNDS]    (root: envd runs commands as users)
#
# Prints one line per figure and a JSON summary last.
import json
import random
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ENVD = sys.argv[1] if len(sys.argv) > 1 else "build/envd"
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 20
HOT_S = 30  # PORTFWD_HOT_S
WINDOW_S = 10


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def call(base, method, body, timeout=600):
    req = urllib.request.Request(base + "/process.Process/" + method, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")
    except OSError as e:  # envd stopped under a waiter at the end
        return 0, {"error": str(e)}


def cpu_ns(pid):
    t = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            t += int(open("/proc/%d/task/%s/schedstat" % (pid, tid)).read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return t


def window(pid):
    a = cpu_ns(pid)
    time.sleep(WINDOW_S)
    return (cpu_ns(pid) - a) / 1e9


def main():
    port = free_port()
    tmp = tempfile.mkdtemp(prefix="envd-bench-waitfor.")
    # No change journal: on a shared machine it records every other
    # program's writes, which is not what is measured here.
    proc = subprocess.Popen([ENVD, "-isnotfc", "-no-cgroups", "-changes-max-paths", "0", "-port", str(port)],
                            stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    base = "http://127.0.0.1:%d" % port
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(base + "/health", timeout=1)
                break
            except OSError:
                time.sleep(0.05)
        # ---- latency ----
        lat = []
        for _ in range(ROUNDS):
            p = free_port()
            box = {}

            def wait():
                box["r"] = call(base, "WaitFor", {"port": {"port": p}})
                box["t"] = time.monotonic()

            th = threading.Thread(target=wait)
            th.start()
            # 2 s and a random part of a scan period: a wait that always
            # came a whole number of periods after its kick would always
            # land just after a scan.
            time.sleep(2 + random.random() * 0.05)
            s = socket.socket()
            s.bind(("127.0.0.1", p))
            s.listen(1)
            t0 = time.monotonic()
            th.join()
            s.close()
            if box["r"][0] == 200:
                lat.append((box["t"] - t0) * 1000)
        lat.sort()
        p50 = lat[len(lat) // 2] if lat else -1
        p90 = lat[int(len(lat) * 0.9)] if lat else -1
        print("latency: listen to answer, %d rounds: p50 %.1f ms, p90 %.1f ms, max %.1f ms" %
              (len(lat), p50, p90, lat[-1] if lat else -1), flush=True)

        # ---- idle CPU ----
        time.sleep(HOT_S + 1)  # the scanner back at its idle pace
        idle = window(proc.pid)
        print("idle envd, %d s: %.4f CPU-s" % (WINDOW_S, idle), flush=True)
        # The fast pace alone, for scale: a Start kicks the scanner.
        call(base, "Start", {"process": {"cmd": "true"}})
        hot_alone = window(proc.pid)
        print("idle envd, scanner at its fast pace (after a Start), %d s: %.4f CPU-s" % (WINDOW_S, hot_alone),
              flush=True)
        time.sleep(HOT_S + 1)
        # 100 idle waiters.
        sleeper = subprocess.Popen(["curl", "-s", "-N", "-X", "POST", base + "/process.Process/Start",
                                    "-H", "Content-Type: application/connect+json", "--data-binary", "@-"],
                                   stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
        body = json.dumps({"process": {"cmd": "sleep", "args": ["3600"]}, "tag": "bench-sleeper"}).encode()
        sleeper.stdin.write(b"\0" + len(body).to_bytes(4, "big") + body)
        sleeper.stdin.close()
        while call(base, "List", {})[1].get("processes") in (None, []):
            time.sleep(0.05)
        conds = []
        for i in range(25):
            conds.append({"port": {"port": free_port()}})
            conds.append({"output": {"process": {"tag": "bench-sleeper"}, "pattern": "never %d" % i}})
            conds.append({"exit": {"tag": "bench-sleeper"}})
            conds.append({"path": {"path": os.path.join(tmp, "never", str(i))}})
        threads = []
        for c in conds:
            c["timeoutMs"] = 600000
            t = threading.Thread(target=call, args=(base, "WaitFor", c), daemon=True)
            t.start()
            threads.append(t)
        time.sleep(1)
        hot = window(proc.pid)
        print("100 idle waiters, scanner at its fast pace, %d s: %.4f CPU-s" % (WINDOW_S, hot), flush=True)
        time.sleep(HOT_S - WINDOW_S)
        cold = window(proc.pid)
        print("100 idle waiters, scanner back at its idle pace, %d s: %.4f CPU-s" % (WINDOW_S, cold), flush=True)
        print(json.dumps({
            "latency_ms": {"rounds": len(lat), "p50": round(p50, 1), "p90": round(p90, 1),
                           "max": round(lat[-1], 1) if lat else -1},
            "cpu_s_per_10s": {"idle": round(idle, 4), "fast_pace_alone": round(hot_alone, 4),
                              "waiters_fast_pace": round(hot, 4), "waiters_idle_pace": round(cold, 4)},
            "errors": ROUNDS - len(lat),
        }), flush=True)
        sleeper.kill()
    finally:
        proc.terminate()
        proc.wait()
        subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    main()
