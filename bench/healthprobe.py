# SPDX-License-Identifier: Apache-2.0
"""/health latency while other work runs (scripts/bench.sh, large trees).

  healthprobe.py PORT STOPFILE MAX_SECONDS

Asks GET /health on one keep-alive connection every 5 ms until STOPFILE
exists (or MAX_SECONDS pass, a bound for a run that went wrong), then
prints one JSON line: count, p50/p99/max in ms, errors (answers that were
not 204, or failed).
"""
import http.client
import json
import os
import sys
import time

port, stop, max_s = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
lat, errors = [], 0
conn = None
end = time.monotonic() + max_s
while not os.path.exists(stop) and time.monotonic() < end:
    try:
        if conn is None:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        t0 = time.monotonic()
        conn.request("GET", "/health")
        r = conn.getresponse()
        r.read()
        lat.append((time.monotonic() - t0) * 1000)
        if r.status != 204:
            errors += 1
    except Exception:
        errors += 1
        conn = None
    time.sleep(0.005)
lat.sort()


def pct(p):
    return round(lat[min(len(lat) - 1, int(len(lat) * p))], 3) if lat else None


print(json.dumps({"n": len(lat), "p50_ms": pct(0.50), "p99_ms": pct(0.99),
                  "max_ms": round(lat[-1], 3) if lat else None, "errors": errors}))
